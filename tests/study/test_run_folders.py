"""A sweep folder read by the study without its results.csv: only the sweep's records of finished
runs count (one written before ``finished_at`` existed included), never scores that
``python -m disentangle.evaluate`` wrote into a run still training."""
from __future__ import annotations

import json

import pytest
import yaml

from disentangle.errors import InputError
from disentangle.metrics.results import is_finished_record
from disentangle.study import read_table


def _run(folder, run_id: str, beta: float, record: dict) -> None:
    run = folder / "runs" / run_id
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump({"seed": 0, "objective": {"name": "beta_vae", "beta": beta},
                                                     "data": {"name": "sprites"},
                                                     "train": {"out_dir": str(run)}}))
    (run / "metrics.json").write_text(json.dumps(record))


def test_only_the_sweep_s_records_of_finished_runs_are_read(tmp_path):
    scores = {"mig": {"mig": 0.25}}
    _run(tmp_path, "a", 1.0, {"run_id": "a", "metrics": scores, "finished_at": "2026-12-07T06:00:00+0000"})
    _run(tmp_path, "b", 2.0, {"run_id": "b", "metrics": {"mig": {"mig": 0.5}}, "train_seconds": 12.0})  # before 0.3
    _run(tmp_path, "c", 3.0, {"run_dir": "c", "checkpoint": "c/checkpoint.pt", "step": 4, "metrics": scores})
    table = read_table(tmp_path)
    assert [row["run_id"] for row in table.rows] == ["a", "b"]
    assert [row["mig.mig"] for row in table.rows] == [0.25, 0.5]


def test_a_folder_of_runs_evaluate_scored_part_way_has_no_finished_run(tmp_path):
    _run(tmp_path, "c", 3.0, {"step": 4, "metrics": {"mig": {"mig": 0.1}}})
    with pytest.raises(InputError, match="none of its 1 run folder"):
        read_table(tmp_path)


@pytest.mark.parametrize("record, finished", [
    ({"metrics": {}, "finished_at": "2026-12-07T06:00:00+0000"}, True),
    ({"metrics": {}, "run_id": "a", "train_seconds": 1.0}, True),  # the sweep's record before finished_at
    ({"metrics": {}, "run_id": "a"}, False),
    ({"metrics": {}, "step": 4, "checkpoint": "x"}, False),  # evaluate's
    ({"metrics": {}, "run_dir": "x", "seed": 0, "metric_settings": {}}, False),  # zoo publish's
    ({"finished_at": "x"}, False),
    (None, False),
])
def test_what_a_finished_record_is(record, finished):
    assert is_finished_record(record) is finished


def test_the_settings_are_the_grid_s_not_where_each_run_was_written(tmp_path):
    """train.out_dir differs from run to run: as a setting it made every run a cell of its own."""
    for i, beta in enumerate([1.0, 1.0, 4.0]):
        _run(tmp_path, f"r{i}", beta, {"run_id": f"r{i}", "values": {"objective.beta": beta},
                                       "metrics": {"mig": {"mig": 0.1 * i}}, "finished_at": "x"})
    table = read_table(tmp_path)
    assert "train.out_dir" not in table.columns and "objective.beta" in table.columns
    (tmp_path / "runs" / "r2" / "metrics.json").write_text('{"metrics": {"mig"')  # torn: not finished, no traceback
    assert [row["run_id"] for row in read_table(tmp_path).rows] == ["r0", "r1"]
