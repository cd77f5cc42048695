"""examples/custom_dataset.py runs as its docstring tells a user to run it
(``python examples/custom_dataset.py [--steps 300] [--out runs/custom_example]``), from a folder of
their own, with a few steps: it trains, and run again with more steps it resumes its run from the
checkpoint (the example's second session) instead of starting over or refusing the folder."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "custom_dataset.py"


def _run(folder: Path, steps: int) -> str:
    """The example run in ``folder`` with ``--steps steps`` (and its default ``--out``); its stdout."""
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), "--steps", str(steps), "--out", "runs/custom_example"],
        capture_output=True, text=True, cwd=folder, timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc.stdout


def _steps(path: Path) -> list[int]:
    return [json.loads(line)["step"] for line in path.read_text().splitlines()]


def test_the_custom_dataset_example_trains_then_resumes(tmp_path):
    out = tmp_path / "runs" / "custom_example"
    run = out / "run"

    first = _run(tmp_path, 4)
    assert "192 images (1, 64, 64)" in first and "trained 4 steps" in first
    assert "data.name: my_bars builds the same dataset" in first
    assert (out / "bars.npz").is_file() and (out / "bars.yaml").is_file()
    assert {"checkpoint.pt", "config.yaml", "log.jsonl", "traversals.png"} <= {p.name for p in run.iterdir()}
    assert _steps(run / "log.jsonl") == [4]
    first_record = (run / "log.jsonl").read_text().splitlines()[0]

    second = _run(tmp_path, 8)  # the same folder: the example resumes its run up to the new step count
    assert "trained 8 steps" in second
    assert _steps(run / "log.jsonl") == [4, 8]
    assert (run / "log.jsonl").read_text().splitlines()[0] == first_record  # the first session's record kept
    assert _steps(run / "execution.jsonl") == [0, 4]  # a second session, started from step 4's checkpoint
    assert (run / "checkpoint.prev.pt").is_file()
