"""Grid expansion by value: the exact runs (their values, seeds and configs) a sweep file expands to,
in order; which keys vary; the seeds accepted; the base found beside the sweep file; and run ids that
count what defines a run and nothing else. Nothing is trained (the quickstart base, validated only)."""
from __future__ import annotations

import json

import pytest
import yaml

from disentangle import ConfigError
from disentangle.config import Config
from disentangle.sweep import run_id, sweep_from_dict
from disentangle.sweep.ids import identity


def plan_of(tmp_path, **fields):
    return sweep_from_dict({"base": "quickstart", **fields}, source="s.yaml", folder=tmp_path)


def test_the_product_follows_the_written_key_order_last_key_fastest(tmp_path):
    plan = plan_of(tmp_path, grid={"train.lr": [1e-3, 1e-2], "objective.beta": [1, 2]}, seeds=[7])
    got = [(r.config["train"]["lr"], r.config["objective"]["beta"]) for r in plan.runs]
    assert got == [(1e-3, 1.0), (1e-3, 2.0), (1e-2, 1.0), (1e-2, 2.0)]
    assert [r.values for r in plan.runs] == [{"train.lr": lr, "objective.beta": b} for lr in (1e-3, 1e-2) for b in (1, 2)]
    assert plan.varying_keys == ["train.lr", "objective.beta"]  # the grid's order, not sorted
    assert [r.index for r in plan.runs] == [0, 1, 2, 3] and {r.seed for r in plan.runs} == {7}


def test_a_grid_value_wins_over_set_for_its_key(tmp_path):
    """``set`` applies to every run, the grid point on top of it: a key in both takes the point's value."""
    plan = plan_of(tmp_path, set={"objective.beta": 8.0, "train.steps": 5}, grid={"objective.beta": [1.0, 2.0]}, seeds=1)
    assert [(r.config["objective"]["beta"], r.config["train"]["steps"]) for r in plan.runs] == [(1.0, 5), (2.0, 5)]


def test_a_grid_key_of_one_value_does_not_vary(tmp_path):
    """A key given one value in the grid is the same in every run: it is no column and no part of a run's
    description; only the keys that take two or more values are."""
    plan = plan_of(tmp_path, grid={"objective.beta": [2.0], "train.lr": [1e-3, 1e-2]}, seeds=1)
    assert plan.varying_keys == ["train.lr"]
    assert [r.values for r in plan.runs] == [{"train.lr": 1e-3}, {"train.lr": 1e-2}]
    assert [r.describe() for r in plan.runs] == ["train.lr=0.001, seed=0", "train.lr=0.01, seed=0"]
    assert all(r.config["objective"]["beta"] == 2.0 for r in plan.runs)


@pytest.mark.parametrize("seeds, expected", [(0, "'seeds' as a count must be a positive integer"),
                                             ([], "'seeds' must be a count n"),
                                             ({"objective.beta": []}, None)])
def test_a_sweep_of_no_runs_is_refused(tmp_path, seeds, expected):
    if expected is None:  # an empty list of grid values
        with pytest.raises(ConfigError, match="'objective.beta' must be a non-empty list of values"):
            plan_of(tmp_path, grid=seeds, seeds=1)
        return
    with pytest.raises(ConfigError, match=expected):
        plan_of(tmp_path, seeds=seeds)


def test_the_largest_seed_is_accepted(tmp_path):
    plan = plan_of(tmp_path, seeds=[0, 2**63 - 1])
    assert [r.seed for r in plan.runs] == [0, 2**63 - 1] and plan.runs[1].config["seed"] == 2**63 - 1


def test_a_base_path_is_read_beside_the_sweep_file_wherever_the_sweep_runs(tmp_path, monkeypatch):
    folder = tmp_path / "sweeps"
    folder.mkdir()
    (folder / "my_base.yaml").write_text(yaml.safe_dump({"objective": {"name": "beta_vae", "beta": 3.0},
                                                         "model": {"latent_dim": 5}}))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    plan = sweep_from_dict({"base": "my_base.yaml", "seeds": 1}, source=str(folder / "s.yaml"), folder=folder)
    (run,) = plan.runs
    assert run.config["objective"]["beta"] == 3.0 and run.config["model"]["latent_dim"] == 5


# ---------------------------------------------------------------------- run ids
def _config(**sections) -> dict:
    raw = {"data": {"name": "sprites"}, "train": {"precision": "fp32"}}
    for section, values in sections.items():
        raw.setdefault(section, {}).update(values)
    return Config.from_dict(raw).to_dict()


def test_a_schedule_counts_in_the_run_id_and_no_schedule_is_hashed_as_before_the_key():
    plain = _config()
    scheduled = _config(train={"schedules": {"objective.beta": {"kind": "linear", "start": 0.0, "end": 4.0, "steps": 10}}})
    other = _config(train={"schedules": {"objective.beta": {"kind": "linear", "start": 0.0, "end": 8.0, "steps": 10}}})
    assert len({run_id(plain), run_id(scheduled), run_id(other)}) == 3
    assert "schedules" not in identity(plain)["train"] and "schedules" in identity(scheduled)["train"]


def test_materialize_is_hashed_as_false_only_where_the_dataset_has_it():
    config = _config(data={"materialize": True})
    assert identity(config)["data"]["materialize"] is False
    assert run_id(config) == run_id(_config(data={"materialize": False}))
    no_key = json.loads(json.dumps(config))
    del no_key["data"]["materialize"]  # a dataset without the parameter: nothing is added to its identity
    assert "materialize" not in identity(no_key)["data"]
    assert run_id(no_key) != run_id(config)


def test_the_legacy_init_is_dropped_at_its_legacy_value_only():
    """model.init: pytorch (the runs from before the key) hashes as a config without the key;
    reference (the default) counts."""
    pytorch, reference = _config(model={"init": "pytorch"}), _config(model={"init": "reference"})
    without = json.loads(json.dumps(pytorch))
    del without["model"]["init"]
    assert run_id(pytorch) == run_id(without) != run_id(reference)
    assert identity(reference)["model"]["init"] == "reference" and "init" not in identity(pytorch)["model"]


def test_run_id_leaves_the_callers_config_as_it_was():
    config = _config()
    before = json.loads(json.dumps(config))
    run_id(config)
    identity(config)
    assert config == before
