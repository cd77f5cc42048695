"""Config values against their type hints, by the exact value each setting ends up with: what is
converted (and to what), what is refused, and the plain (YAML/JSON) form of a resolved config."""
from __future__ import annotations

import pytest

from disentangle import ConfigError
from disentangle.config import Config, load_config


@pytest.mark.parametrize("override, key", [("train.lr=true", "train.lr"), ("objective.beta=false", "objective.beta"),
                                           ("train.weight_decay=true", "train.weight_decay")])
def test_a_boolean_is_not_a_number(override, key, tiny_dataset_name):
    """YAML reads ``true`` as a boolean, and Python's bool is an int: a float setting must still
    refuse it (``train.lr=true`` would otherwise train at lr 1.0)."""
    with pytest.raises(ConfigError) as err:
        load_config(None, [f"data.name={tiny_dataset_name}", override])
    assert key in str(err.value) and "expected float" in str(err.value)


def test_a_number_is_converted_to_the_float_its_hint_asks(tiny_dataset_name):
    config = load_config(None, [f"data.name={tiny_dataset_name}", "train.lr=1", "objective.beta=3", "train.eps=2e-7"])
    assert (config.train.lr, config.objective.params["beta"], config.train.eps) == (1.0, 3.0, 2e-7)
    assert all(type(v) is float for v in (config.train.lr, config.objective.params["beta"], config.train.eps))


@pytest.mark.parametrize("betas", ["[0.9, 0.99, 0.5]", "[0.9]", "[]"])
def test_a_fixed_length_tuple_takes_exactly_its_length(betas, tiny_dataset_name):
    """train.betas is (β1, β2): three values are not cut to two, one is not padded."""
    with pytest.raises(ConfigError, match="train.betas"):
        load_config(None, [f"data.name={tiny_dataset_name}", f"train.betas={betas}"])
    assert load_config(None, [f"data.name={tiny_dataset_name}", "train.betas=[0.5, 0.9]"]).train.betas == (0.5, 0.9)


def test_the_first_type_of_a_union_that_fits_wins():
    """``embed_sigma: float | str`` (a number, or ``learn``): ``5e-1``, which YAML 1.1 reads as a
    string, is the number 0.5; ``learn`` stays the word."""
    number = load_config(None, ["objective.name=s2_beta_vae", "objective.embed_sigma=5e-1"])
    assert number.objective.params["embed_sigma"] == 0.5 and type(number.objective.params["embed_sigma"]) is float
    word = load_config(None, ["objective.name=s2_beta_vae", "objective.embed_sigma=learn"])
    assert word.objective.params["embed_sigma"] == "learn"


def test_to_dict_is_plain_all_the_way_down(tiny_dataset_name):
    """to_dict gives lists, never tuples, at every depth (train.betas, a list setting of a section,
    a mapping's values): equal to the same config read back from YAML or JSON."""
    import json

    config = Config.from_dict({"data": {"name": tiny_dataset_name, "subgrid": {"a": [0, 1]}},
                               "train": {"betas": [0.5, 0.9], "schedules": {"objective.beta": {
                                   "kind": "linear", "start": 0.0, "end": 4.0, "steps": 10}}}})
    plain = config.to_dict()

    def tuples(value) -> list:
        if isinstance(value, tuple):
            return [value]
        if isinstance(value, list):
            return [t for v in value for t in tuples(v)]
        if isinstance(value, dict):
            return [t for v in value.values() for t in tuples(v)]
        return []

    assert tuples(plain) == []
    assert plain["train"]["betas"] == [0.5, 0.9] and plain == json.loads(json.dumps(plain))
