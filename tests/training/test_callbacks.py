"""Callbacks: a callback of one's own sees every step and every event; the loggers hold the same
scalars as ``log.jsonl``; a callback stops a run, which is checkpointed and resumes bit-exactly;
``train.callbacks`` is checked before anything is created."""
from __future__ import annotations

import csv
import json
import logging
import os
import signal
from pathlib import Path
from unittest import mock

import pytest
import torch

from disentangle.config import load_config
from disentangle.errors import ConfigError, InputError
from disentangle.training import fit
from disentangle.training.callbacks import CALLBACKS, Callback, EarlyStopping

pytestmark = pytest.mark.usefixtures("one_thread")


def _records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]


def _weights(run: Path) -> dict[str, torch.Tensor]:
    return torch.load(run / "checkpoint.pt", weights_only=True)["model"]


def _same_weights(a: Path, b: Path) -> bool:
    wa, wb = _weights(a), _weights(b)
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


class Recorder(Callback):
    """What a notebook user writes: every call, in order."""

    def __init__(self):
        self.calls = []

    def on_fit_start(self, trainer):
        self.calls.append(("start", trainer.step, trainer.resumed))

    def on_step_end(self, trainer, step, terms):
        assert step == trainer.step and isinstance(terms["loss"], torch.Tensor)
        self.calls.append(("step", step, float(terms["loss"])))

    def on_log(self, trainer, step, scalars):
        self.calls.append(("log", step, dict(scalars)))

    def on_evaluate(self, trainer, step, scores):
        self.calls.append(("evaluate", step, scores))

    def on_checkpoint(self, trainer, step, path):
        assert Path(path).exists()
        self.calls.append(("checkpoint", step, Path(path).name))

    def on_fit_end(self, trainer, result):
        self.calls.append(("end", result.step, result.stop_reason))


def test_a_callback_sees_every_step_and_event(tmp_path, tiny_overrides):
    recorder = Recorder()
    overrides = tiny_overrides(tmp_path / "run", steps=8, **{"train.eval_metrics": "[mig]", "train.eval_every": 4})
    result = fit(load_config(None, overrides), callbacks=[recorder])
    kinds = [c[0] for c in recorder.calls]
    assert kinds[0] == "start" and kinds[-1] == "end" and recorder.calls[-1] == ("end", 8, None)
    assert [c[1] for c in recorder.calls if c[0] == "step"] == list(range(1, 9))
    logged = {r["step"]: {k: v for k, v in r.items() if k != "step"} for r in _records(result.out_dir) if "metrics" not in r}
    seen = {c[1]: c[2] for c in recorder.calls if c[0] == "log"}
    assert seen == logged and sorted(seen) == [2, 4, 6, 8]
    # the logged loss is the loss of that step, as the callback saw it every step
    steps = {c[1]: c[2] for c in recorder.calls if c[0] == "step"}
    assert all(logged[s]["loss"] == pytest.approx(steps[s], rel=1e-6) for s in logged)
    scores = {r["step"]: r["metrics"] for r in _records(result.out_dir) if "metrics" in r}
    assert {c[1]: c[2] for c in recorder.calls if c[0] == "evaluate"} == scores and sorted(scores) == [4, 8]
    assert [c[1] for c in recorder.calls if c[0] == "checkpoint"] == [4, 8]
    # events of a step come in order: the step, its log, its evaluation, its checkpoint
    at8 = [c[0] for c in recorder.calls if c[1] == 8 and c[0] != "end"]
    assert at8 == ["step", "log", "evaluate", "checkpoint"]


class StopAt(Callback):
    def __init__(self, step):
        self.step = step

    def on_step_end(self, trainer, step, terms):
        if step == self.step:
            trainer.request_stop(f"asked at {step}")


def test_a_stop_is_checkpointed_and_resumes_bit_exactly(tmp_path, tiny_overrides):
    whole = fit(load_config(None, tiny_overrides(tmp_path / "whole", steps=12)))
    stopped = fit(load_config(None, tiny_overrides(tmp_path / "parts", steps=12)), callbacks=[StopAt(5)])
    assert stopped.step == 5 and stopped.stop_reason == "asked at 5"
    assert torch.load(stopped.out_dir / "checkpoint.pt", weights_only=True)["step"] == 5
    resumed = fit(load_config(None, tiny_overrides(tmp_path / "parts", steps=12)), resume=True)
    assert resumed.step == 12 and resumed.stop_reason is None
    assert _same_weights(whole.out_dir, resumed.out_dir)
    losses = lambda run: [(r["step"], r["loss"]) for r in _records(run)]  # noqa: E731
    # the stopped session logged its last step, 5, besides the log steps: the rest is the whole run's
    assert [s for s, _ in losses(resumed.out_dir)] == [2, 4, 5, 6, 8, 10, 12]
    assert losses(whole.out_dir) == [(s, v) for s, v in losses(resumed.out_dir) if s != 5]
    assert stopped.last_terms["loss"] == dict(losses(resumed.out_dir))[5]  # the result's terms are the last step's


def test_early_stopping_stops_keeps_its_state_and_resumes(tmp_path, tiny_overrides):
    # an improvement must be larger than any change of the loss: the second check already fails
    entry = "[{name: early_stopping, monitor: loss, patience: 2, min_delta: 1.0e9}]"
    config = load_config(None, tiny_overrides(tmp_path / "run", steps=20, **{"train.callbacks": entry}))
    result = fit(config)
    assert result.step == 6 and "loss has not improved" in result.stop_reason  # checks at 2 (best), 4, 6
    state = torch.load(result.out_dir / "checkpoint.pt", weights_only=True)["callbacks"]
    assert state["EarlyStopping"]["bad_checks"] == 2 and state["EarlyStopping"]["best"] == _records(result.out_dir)[0]["loss"]
    # resumed with more patience, it counts on from the checkpointed state: 2 more checks
    entry = "[{name: early_stopping, monitor: loss, patience: 4, min_delta: 1.0e9}]"
    resumed = fit(load_config(None, tiny_overrides(tmp_path / "run", steps=20, **{"train.callbacks": entry})), resume=True)
    assert resumed.step == 10
    # without it, the run goes to the end and equals one never stopped
    resumed = fit(load_config(None, tiny_overrides(tmp_path / "run", steps=20)), resume=True)
    whole = fit(load_config(None, tiny_overrides(tmp_path / "whole", steps=20)))
    assert resumed.step == 20 and _same_weights(whole.out_dir, resumed.out_dir)


def test_early_stopping_on_a_metric_score(tmp_path, tiny_overrides):
    stopper = EarlyStopping(monitor="metrics/mig/mig", mode="max", patience=1, min_delta=10.0)
    overrides = tiny_overrides(tmp_path / "run", steps=20, **{"train.eval_metrics": "[mig]", "train.eval_every": 4})
    assert fit(load_config(None, overrides), callbacks=[stopper]).step == 8
    with pytest.raises(Exception, match="monitors 'metrics/dci/disentanglement', which this run does not log"):
        fit(load_config(None, tiny_overrides(tmp_path / "other", steps=20, **{
            "train.eval_metrics": "[mig]", "train.eval_every": 4})),
            callbacks=[EarlyStopping(monitor="metrics/dci/disentanglement")])


def test_a_misspelt_logged_term_is_named_at_the_first_step(tmp_path, tiny_overrides):
    """Not at the first log step (here 10): the objective's terms are known after one step."""
    seen = []

    class Steps(Callback):
        def on_step_end(self, trainer, step, terms):
            seen.append(step)

    overrides = tiny_overrides(tmp_path / "run", steps=20, **{"train.log_every": 10})
    with pytest.raises(InputError, match="monitors 'los', which this run does not log; it logs .*kl_per_dim/z0.*loss"):
        fit(load_config(None, overrides), callbacks=[Steps(), EarlyStopping(monitor="los")])
    assert seen == [1]


@pytest.mark.parametrize("monitor", ["loss", "kl_per_dim/z1", "steps_per_s", "wall_time_s"])
def test_every_logged_name_can_be_monitored(tmp_path, tiny_overrides, monitor):
    stopper = EarlyStopping(monitor=monitor, patience=100)
    fit(load_config(None, tiny_overrides(tmp_path / "run", steps=4, **{"train.log_every": 2})), callbacks=[stopper])
    assert stopper.best is not None


def test_a_score_that_is_not_a_number_is_a_check_without_improvement(tmp_path, tiny_overrides, caplog):
    """A metric score of 0/0 (InfoMEC's InfoC with one active code) is NaN at a check: early stopping
    counts it as no improvement (as Keras's comparisons do), it does not call the score unlogged."""
    stopper = EarlyStopping(monitor="metrics/mig/mig", mode="max", patience=2)
    overrides = tiny_overrides(tmp_path / "run", steps=20, **{"train.eval_metrics": "[mig]", "train.eval_every": 4})
    with mock.patch("disentangle.training.trainer.Trainer._evaluate", return_value={"mig": {"mig": float("nan")}}):
        result = fit(load_config(None, overrides), callbacks=[stopper])
    assert result.step == 8 and "has not been a finite number for 2 checks" in result.stop_reason
    assert stopper.best is None and stopper.bad_checks == 2
    assert "metrics/mig/mig is not a finite number at step 4" in caplog.text


@pytest.mark.parametrize("level", [logging.NOTSET, logging.INFO, logging.WARNING])
def test_the_progress_bar_is_left_out_where_the_package_is_quieted(tmp_path, tiny_overrides, capsys, level):
    """``--quiet`` (the "disentangle" logger at WARNING) silences the bar as well as the messages; a
    logger left at NOTSET (a notebook that configured nothing) or INFO keeps it."""
    package = logging.getLogger("disentangle")
    before = package.level
    package.setLevel(level)
    try:
        fit(load_config(None, tiny_overrides(tmp_path / "run", steps=5, **{"train.progress": "true"})))
    finally:
        package.setLevel(before)
    bar = "5/5" in capsys.readouterr().err
    assert bar == (level < logging.WARNING)


def test_the_csv_logger_holds_the_scalars_of_log_jsonl(tmp_path, tiny_overrides):
    overrides = tiny_overrides(tmp_path / "run", steps=8, **{
        "train.callbacks": "[{name: csv}]", "train.eval_metrics": "[mig]", "train.eval_every": 8})
    run = fit(load_config(None, overrides)).out_dir
    with (run / "scalars.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    found = {(int(r["step"]), r["name"]): float(r["value"]) for r in rows}
    expected = {}
    for record in _records(run):
        step = record["step"]
        if "metrics" in record:
            expected.update({(step, f"metrics/mig/{k}"): v for k, v in record["metrics"]["mig"].items()})
            continue
        for key, value in record.items():
            if key == "step":
                continue
            if isinstance(value, list):
                expected.update({(step, f"{key}/z{j}"): v for j, v in enumerate(value)})
            else:
                expected[(step, key)] = value
    assert found == expected


def test_bad_callback_entries_are_refused_before_anything_is_created(tmp_path, tiny_overrides):
    out = tmp_path / "run"
    config = load_config(None, tiny_overrides(out, steps=4, **{
        "train.callbacks": "[{name: early_stoping}, {name: csv, filname: x.csv}, {name: mlflow}, {mode: offline}]"}))
    with pytest.raises(ConfigError) as err:
        fit(config)
    message = str(err.value)
    assert "unknown callback 'early_stoping'. Did you mean 'early_stopping'?" in message
    assert "the callback 'csv' has no parameter 'filname'. Did you mean 'filename'?" in message
    assert "train.callbacks[3] is {'mode': 'offline'}; each entry is a mapping with a 'name'" in message
    assert not out.exists()
    with pytest.raises(ConfigError, match="train.callbacks.*expected list"):
        load_config(None, tiny_overrides(out, steps=4, **{"train.callbacks": "[3]"}))
    assert {"csv", "early_stopping", "wandb", "mlflow"} <= set(CALLBACKS.names())


def test_a_flow_mapping_without_a_space_after_the_colon_is_named():
    """``[{name:csv}]`` on a command line is YAML for the key 'name:csv': the message shows the fix."""
    from disentangle.training.callbacks import build_callbacks

    with pytest.raises(ConfigError) as err:
        build_callbacks([{"name:early_stopping": None, "metric:mig": None}])
    assert ("YAML needs a space after each colon: write {name: early_stopping, metric: mig}, "
            "not {name:early_stopping, metric:mig}.") in str(err.value)
    with pytest.raises(ConfigError) as err:
        build_callbacks([{"mode": "offline"}])
    assert "YAML needs" not in str(err.value)


def test_mlflow_file_store_holds_the_scalars_of_log_jsonl(tmp_path, tiny_overrides):
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    run = fit(load_config(None, tiny_overrides(tmp_path / "run", steps=8, **{
        "train.callbacks": "[{name: mlflow, experiment: tests}]"}))).out_dir
    client = MlflowClient(tracking_uri=(run / "mlruns").resolve().as_uri())  # the default store
    experiment = client.get_experiment_by_name("tests")
    (found,) = client.search_runs([experiment.experiment_id])
    assert found.data.params["objective.name"] == "beta_vae" and found.info.status == "FINISHED"
    history = [(m.step, m.value) for m in client.get_metric_history(found.info.run_id, "train/loss")]
    assert sorted(history) == [(r["step"], pytest.approx(r["loss"])) for r in _records(run)]


def test_mlflow_marks_a_callbacks_stop_finished_a_signal_killed_and_a_resumed_run_running(tmp_path, tiny_overrides):
    """Early stopping (a callback's stop) is a finished run, not a killed one; a run stopped by a
    signal is KILLED; a resumed run is RUNNING again while it trains (it was FAILED or KILLED)."""
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    from disentangle.training.callbacks import Callback

    statuses = []

    class Stop(Callback):
        def on_log(self, trainer, step, scalars):
            if step == 4:
                trainer.request_stop("enough")

    class Watch(Callback):
        def on_log(self, trainer, step, scalars):
            mlflow = next(c for c in trainer.callbacks if type(c).__name__ == "MlflowLogger")
            statuses.append(mlflow.client.get_run(mlflow.run_id).info.status)

    def status(run):
        client = MlflowClient(tracking_uri=(run / "mlruns").resolve().as_uri())
        (found,) = client.search_runs([client.get_experiment_by_name("tests").experiment_id])
        return found.info.status

    callbacks = {"train.callbacks": "[{name: mlflow, experiment: tests}]"}
    run = fit(load_config(None, tiny_overrides(tmp_path / "stopped", steps=8, **callbacks)), callbacks=[Stop()]).out_dir
    assert status(run) == "FINISHED"
    run = tmp_path / "interrupted"

    class Interrupt(Callback):
        def on_log(self, trainer, step, scalars):
            if step == 4:
                os.kill(os.getpid(), signal.SIGINT)  # a first Ctrl-C: the step ends, is checkpointed, then stops

    with pytest.raises(KeyboardInterrupt):
        fit(load_config(None, tiny_overrides(run, steps=8, **callbacks)), callbacks=[Interrupt()])
    assert status(run) == "KILLED"
    fit(load_config(None, tiny_overrides(run, steps=8, **callbacks)), resume=True, callbacks=[Watch()])
    assert statuses and set(statuses) == {"RUNNING"} and status(run) == "FINISHED"


def test_a_run_ended_by_an_exception_calls_on_exception_once_and_raises_its_own_error(tmp_path, tiny_overrides, caplog):
    """on_exception hears the error of a run that ends by one (here a callback's), before it
    propagates, on every callback that has it; one that raises is logged, and the run's own error is
    raised. A run stopped by Ctrl-C hears on_fit_end instead, not both."""
    from disentangle.training.callbacks import Callback

    heard = []

    class Boom(Callback):
        def on_log(self, trainer, step, scalars):
            if step == 4:
                raise RuntimeError("boom at 4")

    class Hears(Callback):
        def on_exception(self, trainer, error):
            heard.append((trainer.step, type(error).__name__, str(error)))

        def on_fit_end(self, trainer, result):
            heard.append(("end", result.stop_reason))

    class Raises(Callback):
        def on_exception(self, trainer, error):
            raise ValueError("cleanup failed")

    with caplog.at_level("ERROR", logger="disentangle"), pytest.raises(RuntimeError, match="boom at 4"):
        fit(load_config(None, tiny_overrides(tmp_path / "boom", steps=8)), callbacks=[Boom(), Raises(), Hears()])
    assert heard == [(4, "RuntimeError", "boom at 4")]
    assert "Raises.on_exception raised (the run's own error, RuntimeError, follows)" in caplog.text

    class Interrupt(Callback):
        def on_log(self, trainer, step, scalars):
            if step == 4:
                os.kill(os.getpid(), signal.SIGINT)

    heard.clear()
    with pytest.raises(KeyboardInterrupt):
        fit(load_config(None, tiny_overrides(tmp_path / "ctrl_c", steps=8)), callbacks=[Interrupt(), Hears()])
    assert heard == [("end", "interrupted (Ctrl-C or a termination signal)")]


def _wandb_history(path: Path) -> list[dict[str, float]]:
    """The history records of an offline W&B run file: the LevelDB log format (32 KiB blocks of
    records with a 7-byte header: CRC, length, type full/first/middle/last) after a 7-byte file
    header, each record a ``wandb_internal_pb2.Record``."""
    import struct

    from wandb.proto import wandb_internal_pb2

    data, pos, block, pending, records = path.read_bytes(), 7, 32768, b"", []
    while pos + 7 <= len(data):
        left = block - pos % block
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7]) if left >= 7 else (0, 0, 0)
        if left < 7 or (length == 0 and kind == 0):
            pos += left
            continue
        chunk, pos = data[pos + 7:pos + 7 + length], pos + 7 + length
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            records.append(pending)
    history = []
    for raw in records:
        record = wandb_internal_pb2.Record()
        record.ParseFromString(raw)
        if record.WhichOneof("record_type") == "history":
            history.append({(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in record.history.item})
    return history


def test_wandb_offline_run_holds_the_scalars_of_log_jsonl(tmp_path, tiny_overrides):
    pytest.importorskip("wandb")
    run = fit(load_config(None, tiny_overrides(tmp_path / "run", steps=4, **{
        "train.callbacks": "[{name: wandb, mode: offline, project: tests}]"}))).out_dir
    import time

    (path,) = run.glob("wandb/offline-run-*/run-*.wandb")
    for _ in range(100):  # W&B's service process may still be writing the file when finish() returns
        history = _wandb_history(path)
        if len(history) >= 2:
            break
        time.sleep(0.1)
    found = {int(h["_step"]): {k[len("train/"):]: v for k, v in h.items() if k.startswith("train/")} for h in history}
    expected = {}
    for record in _records(run):
        values = {}
        for key, value in record.items():
            if isinstance(value, list):
                values.update({f"{key}/z{j}": v for j, v in enumerate(value)})
            elif key != "step":
                values[key] = value
        expected[record["step"]] = values
    assert found.keys() == expected.keys()
    for step, values in expected.items():
        assert found[step] == pytest.approx(values, rel=1e-6)


def test_keep_checkpoints_keeps_the_chosen_steps_as_run_folders_and_survives_a_resume(tmp_path, tiny_overrides):
    import disentangle

    keep = {"train.callbacks": "[{name: keep_checkpoints, steps: [4, 8]}]"}
    run = tmp_path / "run"
    fit(load_config(None, tiny_overrides(run, steps=6, **keep)))  # stopped at 6: step 4 kept, 8 not yet
    kept4 = run / "kept" / "step_0000004"
    assert sorted(p.name for p in (run / "kept").iterdir()) == ["step_0000004"]
    first_copy = (kept4 / "checkpoint.pt").stat().st_mtime_ns
    fit(load_config(None, tiny_overrides(run, steps=12, **keep)), resume=True)
    assert sorted(p.name for p in (run / "kept").iterdir()) == ["step_0000004", "step_0000008"]
    assert (kept4 / "checkpoint.pt").stat().st_mtime_ns == first_copy  # not copied again on resume
    for step in (4, 8):  # each kept step is the model of a run that stopped there
        straight = fit(load_config(None, tiny_overrides(tmp_path / f"to{step}", steps=step))).out_dir
        kept = run / "kept" / f"step_{step:07d}"
        assert _same_weights(straight, kept)
        import yaml  # the run's config when the step was kept (train.steps was 6 then)
        kept_config, run_config = (yaml.safe_load((f / "config.yaml").read_text()) for f in (kept, run))
        kept_config["train"].pop("steps"), run_config["train"].pop("steps")
        assert kept_config == run_config
        model = disentangle.load(kept)
        loaded = dict(model.state_dict())
        assert all(torch.equal(loaded[k], v) for k, v in _weights(straight).items())
    every = fit(load_config(None, tiny_overrides(tmp_path / "every", steps=12, **{
        "train.callbacks": "[{name: keep_checkpoints, every: 8, folder: snapshots}]"}))).out_dir
    assert sorted(p.name for p in (every / "snapshots").iterdir()) == ["step_0000008"]


@pytest.mark.parametrize("entry,message", [
    ("{name: keep_checkpoints, steps: [4, 6]}", r"step 6 of this run has no checkpoint: train.checkpoint_every is 4"),
    ("{name: keep_checkpoints, every: 3}", r"step 3 of this run has no checkpoint"),
    ("{name: keep_checkpoints, steps: [4], every: 4}", "give either steps .* or every"),
    ("{name: keep_checkpoints}", "give either steps .* or every"),
    ("{name: keep_checkpoints, steps: [0]}", "give a list of step numbers >= 1"),
    ("{name: keep_checkpoints, steps: [4], folder: ../out}", "give a folder name inside the run folder"),
])
def test_keep_checkpoints_refuses_steps_without_a_checkpoint_before_anything_is_created(
        tmp_path, tiny_overrides, entry, message):
    out = tmp_path / "run"
    with pytest.raises(ConfigError, match=message):
        fit(load_config(None, tiny_overrides(out, steps=12, **{"train.callbacks": f"[{entry}]"})))
    assert not out.exists()
    # the last step always has a checkpoint
    fit(load_config(None, tiny_overrides(out, steps=6, **{"train.callbacks": "[{name: keep_checkpoints, steps: [6]}]"})))
    assert (out / "kept" / "step_0000006" / "checkpoint.pt").is_file()


def test_under_torchrun_a_misspelt_term_is_left_to_the_first_log_step(tmp_path, tiny_overrides):
    """Raised in on_step_end on rank 0 alone, the other ranks would wait at their next collective: the
    first log step (run on every rank at once) names it there."""
    stopper = EarlyStopping(monitor="los")
    with mock.patch("disentangle._core.distributed.is_distributed", return_value=True):
        stopper.on_step_end(None, 1, {"loss": torch.tensor(1.0)})
    assert stopper._term_checked
    with pytest.raises(InputError, match="monitors 'los'"):
        EarlyStopping(monitor="los").on_step_end(None, 1, {"loss": torch.tensor(1.0)})
