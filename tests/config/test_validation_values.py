"""The values a config validation accepts and refuses, each side of the edge: the seed range, step
counts that may be zero, what a schedule may apply to; every refusal names the key."""
from __future__ import annotations

import pytest

from disentangle import ConfigError
from disentangle.config import load_config


def _load(tiny_dataset_name, *overrides):
    return load_config(None, [f"data.name={tiny_dataset_name}", *overrides])


def test_the_seed_range_includes_both_ends(tiny_dataset_name):
    assert _load(tiny_dataset_name, "seed=0").seed == 0
    assert _load(tiny_dataset_name, f"seed={2**63 - 1}").seed == 2**63 - 1
    with pytest.raises(ConfigError, match=r"seed must be an integer from 0 to 2\*\*63 - 1, got 9223372036854775808"):
        _load(tiny_dataset_name, f"seed={2**63}")


@pytest.mark.parametrize("key", ["warmup_steps", "eval_every", "image_every"])
def test_step_counts_that_may_be_zero_refuse_negatives(key, tiny_dataset_name):
    assert getattr(_load(tiny_dataset_name, f"train.{key}=0").train, key) == 0
    with pytest.raises(ConfigError, match=f"train.{key}"):
        _load(tiny_dataset_name, f"train.{key}=-1")


def test_a_boolean_parameter_of_the_objective_cannot_be_scheduled(tiny_dataset_name):
    """embed_use_order (a bool, which Python counts as an int) is no numeric parameter of s2_beta_vae."""
    schedule = "{objective.embed_use_order: {kind: constant, value: 1}}"
    with pytest.raises(ConfigError) as err:
        _load(tiny_dataset_name, "objective.name=s2_beta_vae", f"train.schedules={schedule}")
    message = str(err.value)
    assert "'objective.embed_use_order', which is not a numeric parameter of the objective 's2_beta_vae'" in message
    numeric = message.split("Its numeric parameters: ")[1].rstrip(".").split(", ")
    assert "embed_use_order" not in numeric and {"beta", "gamma_sup", "schedule_steps"} <= set(numeric)
    ok = _load(tiny_dataset_name, "objective.name=s2_beta_vae", "train.schedules={objective.gamma_sup: {kind: constant, value: 1}}")
    assert "objective.gamma_sup" in ok.train.schedules


def test_a_device_index_must_be_a_number(tiny_dataset_name):
    assert _load(tiny_dataset_name, "train.device=cuda:1", "train.precision=fp32").train.device == "cuda:1"
    for device in ("cuda:x", "cuda:-1", "cpu:0"):
        with pytest.raises(ConfigError, match=f"train.device is '{device}'"):
            _load(tiny_dataset_name, f"train.device={device}", "train.precision=fp32")


def test_labels_given_to_a_semi_supervised_objective_are_kept(tiny_dataset_name):
    """The default labels fill in data.labels only where the config gives none."""
    from disentangle.data.labels import LabelsSpec

    given = _load(tiny_dataset_name, "objective.name=s2_beta_vae", "data.labels={num_labelled: 100, seed: 3}")
    assert given.data.labels == LabelsSpec.from_dict({"num_labelled": 100, "seed": 3}).to_dict()
    assert (given.data.labels["num_labelled"], given.data.labels["seed"]) == (100, 3)
    default = _load(tiny_dataset_name, "objective.name=s2_beta_vae")
    assert default.data.labels == LabelsSpec().to_dict()
    assert _load(tiny_dataset_name).data.labels is None  # beta_vae uses no labels


def test_the_train_keys_after_an_unknown_one_are_still_checked(tiny_dataset_name):
    """An unknown key does not end the check of its section: the bad values written after it are
    reported in the same paragraph."""
    with pytest.raises(ConfigError) as err:
        _load(tiny_dataset_name, "train.stpes=3", "train.lr=-1", "train.batch_size=0")
    message = str(err.value)
    assert "Unknown key 'train.stpes'" in message and "Did you mean 'steps'" in message
    assert "train.lr must be" in message and "train.batch_size must be an integer >= 1" in message
