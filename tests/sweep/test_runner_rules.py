"""The run-one function's rules, by the files it leaves: skip a finished run, leave a failed one
failed (unless retried or failed on its input), re-score only what a trained run lacks keeping
the other scores with their own settings, and the record of a failure. Training and scoring are replaced by stubs, so each rule is checked in
milliseconds on the folder's files alone."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from disentangle.sweep import runner
from disentangle.sweep.files import FAILED_NAME, METRICS_NAME, TRACEBACK_NAME, RunState
from disentangle.sweep.runner import RunTask, record_failure, run_one

FINISHED = {"finished_at": "2026-01-01T00:00:00+0000"}


def _task(run_dir: Path, **fields) -> RunTask:
    fields.setdefault("metrics", ["mig"])
    return RunTask(run_id="abc", run_dir=str(run_dir), config={}, seed=0, **fields)


@pytest.fixture
def trained(monkeypatch):
    """Replaces training and scoring: records the ``missing`` each call was given and writes a
    finished record of the task's metrics."""
    calls: list = []

    def fake(task, run_dir, missing):
        calls.append(missing)
        (run_dir / METRICS_NAME).write_text(json.dumps({"metrics": {m: {m: 0.5} for m in task.metrics}, **FINISHED}))

    monkeypatch.setattr(runner, "_train_and_evaluate", fake)
    return calls


def _fail(run_dir: Path, message: str, bad_input: bool = False) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / FAILED_NAME).write_text(json.dumps({"error": "ValueError", "bad_input": bad_input,
                                                   "last_line": f"ValueError: {message}", "attempts": 1}))
    (run_dir / TRACEBACK_NAME).write_text("Traceback ...\n")


def test_a_finished_run_is_skipped_and_not_trained(tmp_path, trained):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / METRICS_NAME).write_text(json.dumps({"metrics": {"mig": {"mig": 0.1}}, **FINISHED}))
    assert run_one(_task(run_dir)).status == RunState.SKIPPED and trained == []


def test_a_failed_run_stays_failed_unless_retried_and_a_retry_that_succeeds_clears_its_files(tmp_path, trained):
    run_dir = tmp_path / "run"
    _fail(run_dir, "nan")
    outcome = run_one(_task(run_dir))
    assert (outcome.status, outcome.message) == (RunState.FAILED, "(failed before) ValueError: nan") and trained == []
    outcome = run_one(_task(run_dir, retry_failed=True))
    assert outcome.status == RunState.FINISHED and trained == [None]  # trained from the start
    assert not (run_dir / FAILED_NAME).exists() and not (run_dir / TRACEBACK_NAME).exists()


def test_a_trained_run_whose_scoring_failed_stays_failed_unless_retried(tmp_path, trained):
    """Trained and scored with dci, then asked for mig too, whose scoring failed: a plain rerun
    leaves it failed (as ``sweep status`` calls it) instead of scoring mig again; a retry scores
    only mig."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / METRICS_NAME).write_text(json.dumps({"metrics": {"dci": {"dci": 0.3}}, **FINISHED}))
    _fail(run_dir, "singular matrix")
    outcome = run_one(_task(run_dir, metrics=["dci", "mig"]))
    assert (outcome.status, outcome.message) == (RunState.FAILED, "(failed before) ValueError: singular matrix")
    assert trained == []
    assert run_one(_task(run_dir, metrics=["dci", "mig"], retry_failed=True)).status == RunState.FINISHED
    assert trained == [["mig"]] and not (run_dir / FAILED_NAME).exists()


def test_a_run_that_failed_on_its_input_is_tried_again_without_retry(tmp_path, trained):
    run_dir = tmp_path / "run"
    _fail(run_dir, "bad config", bad_input=True)
    assert run_one(_task(run_dir)).status == RunState.FINISHED and trained == [None]
    assert not (run_dir / TRACEBACK_NAME).exists()


def test_a_failure_record_keeps_the_last_line_of_the_message_and_counts_attempts(tmp_path):
    first = record_failure(tmp_path, RuntimeError("while scoring\nthe loss became NaN at step 7"))
    assert first["last_line"] == "RuntimeError: the loss became NaN at step 7" and first["attempts"] == 1
    assert first["message"] == "while scoring\nthe loss became NaN at step 7" and first["bad_input"] is False
    again = record_failure(tmp_path, RuntimeError("boom"))
    assert again["attempts"] == 2 and again["last_line"] == "RuntimeError: boom"
    assert json.loads((tmp_path / FAILED_NAME).read_text()) == again
    assert "RuntimeError: boom" in (tmp_path / TRACEBACK_NAME).read_text()


def test_rescoring_replaces_the_scores_asked_for_and_keeps_the_others_with_their_own_settings(
        tmp_path, monkeypatch, tiny_overrides):
    """A finished run asked for mig under new settings: the new mig score replaces the old, dci (not
    asked again) keeps its score and the settings it was scored with; nothing is trained."""
    from disentangle.config import load_config
    from disentangle.metrics.results import settings_identity

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    config = load_config(None, tiny_overrides(run_dir, **{"train.flush_denormal": "false"})).to_dict()
    old = {"metrics": {"mig": {"mig": 0.1}, "dci": {"disentanglement": 0.3}},
           "seconds": {"mig": 1.0, "dci": 2.0}, "train_seconds": 9.0,
           "metric_settings": {"mig": settings_identity("mig", {"num_train": 200}),
                               "dci": settings_identity("dci", {"num_train": 50})}, **FINISHED}
    (run_dir / METRICS_NAME).write_text(json.dumps(old))
    asked = []

    def fake_evaluate(run_dir, dataset, device, names, seed, settings, threads):
        asked.append(list(names))
        return {"mig": {"mig": 0.7}}, {"mig": 3.0}, 12

    monkeypatch.setattr(runner, "evaluate_run", fake_evaluate)
    monkeypatch.setattr(runner, "metrics_for_data", lambda task, dataset: (list(task.metrics), []))
    task = RunTask(run_id="abc", run_dir=str(run_dir), config=config, seed=0, metrics=["mig"],
                   metric_settings={"mig": {"num_train": 300}})
    assert run_one(task).status == RunState.FINISHED and asked == [["mig"]]
    record = json.loads((run_dir / METRICS_NAME).read_text())
    assert record["metrics"] == {"mig": {"mig": 0.7}, "dci": {"disentanglement": 0.3}}
    assert record["metric_settings"] == {"mig": settings_identity("mig", {"num_train": 300}),
                                         "dci": settings_identity("dci", {"num_train": 50})}
    assert record["seconds"] == {"mig": 3.0, "dci": 2.0} and record["train_seconds"] == 9.0
    assert not (run_dir / "checkpoint.pt").exists()  # not trained
