"""What a crashed session logged after its last checkpoint is dropped when the run goes on, in every
logger: on resume (log.jsonl, the csv logger, TensorBoard, where the checkpoint's own step stays),
and on a new run in a folder whose first session crashed before its first checkpoint."""
from __future__ import annotations

import csv
import json

import pytest

from disentangle.config import load_config
from disentangle.training import fit
from disentangle.training.callbacks import Callback

pytestmark = pytest.mark.usefixtures("one_thread")


class Crash(Callback):
    def __init__(self, at: int) -> None:
        self.at = at

    def on_step_end(self, trainer, step, terms) -> None:
        if step == self.at:
            raise RuntimeError("crashed")


def _logged(run) -> tuple[list[int], list[int]]:
    jsonl = [json.loads(line)["step"] for line in (run / "log.jsonl").read_text().splitlines()]
    with (run / "scalars.csv").open(newline="") as f:
        rows = [int(r["step"]) for r in csv.DictReader(f) if r["name"] == "loss"]
    return jsonl, rows


def test_a_resumed_run_logs_each_step_once_in_every_logger(tmp_path, tiny_overrides):
    run = tmp_path / "run"
    overrides = tiny_overrides(run, steps=8, **{"train.callbacks": "[{name: csv}]", "train.tensorboard": "true"})
    pytest.importorskip("tensorboard")
    with pytest.raises(RuntimeError, match="crashed"):
        fit(load_config(None, overrides), callbacks=[Crash(at=7)])  # checkpoint at 4, logged 2, 4, 6
    fit(load_config(None, overrides), resume=True)
    assert _logged(run) == ([2, 4, 6, 8], [2, 4, 6, 8])
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run), size_guidance={"scalars": 0})
    events.Reload()
    assert [e.step for e in events.Scalars("train/loss")] == [2, 4, 6, 8]  # step 4, the checkpoint's, kept


def test_a_new_run_where_the_first_session_crashed_before_its_checkpoint_starts_clean(tmp_path, tiny_overrides):
    run = tmp_path / "run"
    overrides = tiny_overrides(run, steps=6, **{"train.callbacks": "[{name: csv}]"})
    with pytest.raises(RuntimeError, match="crashed"):
        fit(load_config(None, overrides), callbacks=[Crash(at=3)])  # logged step 2, no checkpoint
    assert _logged(run) == ([2], [2])
    fit(load_config(None, overrides))  # no checkpoint: a new run, which may use the folder
    assert _logged(run) == ([2, 4, 6], [2, 4, 6])
