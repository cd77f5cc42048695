"""Sweep backends: Ray Core tasks on a local Ray instance, Slurm arrays through submitit's local
executor (no cluster here), and the pieces they are made of (chunking, requeue, time limits)."""
from __future__ import annotations

import csv
import json
import os
import signal
import threading
import time

import pytest

from disentangle import ConfigError
from disentangle.sweep import api
from disentangle.sweep.__main__ import main as sweep_cli
from disentangle.sweep.__main__ import parse_minutes
from disentangle.sweep.backends.slurm import DEFAULT_MAX_ARRAY_SIZE, chunks

from .test_sweep import write_sweep_file


def _assert_all_finished(report, out):
    assert report.ok, [(o.status, o.message) for o in report.outcomes]
    with open(out / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["run_id"] for r in rows] == [r.run_id for r in report.plan.runs]
    for row in rows:
        record = json.loads((out / "runs" / row["run_id"] / "metrics.json").read_text())
        assert float(row["mig.mig"]) == record["metrics"]["mig"]["mig"] and record["steps"] == 12


def test_ray_backend_end_to_end_on_a_local_instance(tmp_path):
    pytest.importorskip("ray")
    path = write_sweep_file(tmp_path, seeds=1, metrics=["mig"], metric_settings={"mig": {"num_train": 200}})
    out = tmp_path / "out"
    # a local Ray started (and shut down) by the sweep; 2 CPUs, one per run, fractional GPUs unused
    report = api.run(path, out, backend="ray", workers=2, threads_per_run=1, max_retries=1, log=None)
    assert sorted(o.status for o in report.outcomes) == ["finished", "finished"]
    _assert_all_finished(report, out)


def test_slurm_backend_through_submitit_local_executor(tmp_path):
    pytest.importorskip("submitit")
    path = write_sweep_file(tmp_path, grid={"objective.beta": [1.0, 4.0, 8.0]}, seeds=1, metrics=["mig"],
                       metric_settings={"mig": {"num_train": 200}})
    out = tmp_path / "out"
    # 3 runs, 2 per array task -> 2 tasks; at most 1 task per array -> 2 arrays
    report = api.run(path, out, backend="slurm", cluster="local", runs_per_task=2, max_array_size=1,
                     threads_per_run=1, time_min=10, log=None)
    assert len(report.job_ids) == 2 and len(set(report.job_ids)) == 2
    assert sorted(o.status for o in report.outcomes) == ["finished"] * 3
    _assert_all_finished(report, out)
    assert set(report.job_ids) <= {p.name for p in (out / "slurm").iterdir()}  # submitit's job folders

    again = api.run(path, out, backend="slurm", cluster="local", time_min=10, log=None)  # nothing left: nothing submitted
    assert again.to_run == 0 and again.job_ids == []


@pytest.mark.skipif(not hasattr(signal, "SIGUSR2"), reason="submitit's preemption signal")
def test_a_time_limit_signal_requeues_the_array_task_with_no_step_lost(tmp_path):
    """Slurm signals a task 90 s before its time limit; submitit's handler requeues it and exits. The
    run has no periodic checkpoint before step 100,000, so the requeued task resumes from the step
    the signal found, saved at the end of that step, and not from step 0."""
    pytest.importorskip("submitit")
    path = write_sweep_file(tmp_path, grid={"objective.beta": [4.0]}, seeds=1, metrics=["mig"],
                            metric_settings={"mig": {"num_train": 200}},
                            extra_set={"train.steps": 300, "train.checkpoint_every": 100000, "data.delay": 0.01})
    out = tmp_path / "out"
    reports = []
    sweep = threading.Thread(target=lambda: reports.append(api.run(
        path, out, backend="slurm", cluster="local", threads_per_run=1, time_min=10, log=None)))
    sweep.start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # until the run has trained a few logged steps
        logs = list(out.glob("runs/*/log.jsonl"))
        if logs and logs[0].read_text().count("\n") >= 3:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the run did not start training within 120 s")
    run = logs[0].parent
    before = json.loads(logs[0].read_text().splitlines()[-1])["step"]
    pid = int((run / ".lock").read_text().split("@")[0])
    os.kill(pid, signal.SIGUSR2)  # what Slurm sends (submitit's signal_delay_s before the limit)
    sweep.join(timeout=180)
    assert not sweep.is_alive(), "the requeued task did not finish within 180 s"
    report = reports[0]
    assert [o.status for o in report.outcomes] == ["finished"], [o.message for o in report.outcomes]
    sessions = [json.loads(line)["step"] for line in (run / "execution.jsonl").read_text().splitlines()]
    assert len(sessions) == 2 and before <= sessions[1] < 300, sessions  # resumed where it was signalled
    steps = [json.loads(line)["step"] for line in (run / "log.jsonl").read_text().splitlines()]
    assert steps == sorted(set(steps)) and steps[-1] == 300  # no step trained twice
    assert json.loads((run / "metrics.json").read_text())["steps"] == 300


def test_a_preempted_array_task_is_requeued_with_the_same_runs():
    submitit = pytest.importorskip("submitit")
    from disentangle.sweep.backends.slurm import SweepChunk

    chunk = ["run-a", "run-b"]
    delayed = SweepChunk().checkpoint(chunk)  # what submitit calls on preemption / time limit
    assert isinstance(delayed, submitit.helpers.DelayedSubmission)
    assert isinstance(delayed.function, SweepChunk) and delayed.args == (chunk,)


def test_chunks_stay_below_the_array_size():
    runs = list(range(2503))
    per_task = chunks(runs, 2)
    assert len(per_task) == 1252 and per_task[-1] == [2502] and sum(per_task, []) == runs
    arrays = chunks(per_task, DEFAULT_MAX_ARRAY_SIZE)
    assert [len(a) for a in arrays] == [1000, 252] and DEFAULT_MAX_ARRAY_SIZE < 1001


@pytest.mark.parametrize("text, minutes", [("90", 90), ("12:00:00", 720), ("1-00:00:00", 1440), ("30:30", 31),
                                           ("2:00:01", 121)])
def test_slurm_time_limits(text, minutes):
    assert parse_minutes(text) == minutes


def test_slurm_time_limit_errors():
    with pytest.raises(ConfigError, match="HH:MM:SS"):
        parse_minutes("two hours")


FAKE_SBATCH = """#!/bin/sh
# records the job script it is given and answers as sbatch does
cp "$1" "{folder}/job-$(ls {folder} | wc -l).sh"
echo "Submitted batch job 4242"
"""


def test_slurm_requires_a_time_limit_and_sets_the_requeues(tmp_path, monkeypatch):
    """The job script submitit writes for Slurm (through fake srun/sbatch on PATH): the time limit,
    the partition, the CPUs, the array; and the requeue count in the pickled job."""
    pytest.importorskip("submitit")
    import pickle

    bin_dir, scripts = tmp_path / "bin", tmp_path / "scripts"
    bin_dir.mkdir()
    scripts.mkdir()
    (bin_dir / "sbatch").write_text(FAKE_SBATCH.format(folder=scripts))
    (bin_dir / "srun").write_text("#!/bin/sh\nexit 0\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    path = write_sweep_file(tmp_path, seeds=1, metrics=["mig"], metric_settings={"mig": {"num_train": 200}})
    out = tmp_path / "out"

    with pytest.raises(ConfigError, match="needs a time limit.*--time") as err:
        api.run(path, out, backend="slurm", cluster="slurm", wait=False, log=None)
    assert "\n" not in str(err.value) and not out.exists()
    assert sweep_cli(["run", str(path), "--out", str(out), "--backend", "slurm", "--cluster", "slurm"]) == 2

    report = api.run(path, out, backend="slurm", cluster="slurm", wait=False, time_min=720, max_requeues=7,
                     partition="gpu", threads_per_run=2, log=None)
    assert report.job_ids == ["4242_0", "4242_1"]
    (script,) = scripts.iterdir()
    lines = script.read_text().splitlines()
    for expected in ("#SBATCH --time=720", "#SBATCH --partition=gpu", "#SBATCH --cpus-per-task=2",
                     "#SBATCH --array=0-1%2", "#SBATCH --job-name=disentangle-sweep"):
        assert expected in lines, (expected, lines)
    submitted = sorted((out / "slurm").rglob("*_submitted.pkl"))
    assert len(submitted) == 2
    for pickled in submitted:
        with open(pickled, "rb") as f:
            delayed = pickle.load(f)
        assert delayed._timeout_countdown == 7  # time-limit requeues left (preemptions are not counted)

    from disentangle.sweep.backends import BackendOptions
    from disentangle.sweep.backends.slurm import DEFAULT_MAX_REQUEUES, executor_parameters, make_executor

    options = BackendOptions(time_min=90, cluster="slurm")
    assert executor_parameters(options)["timeout_min"] == 90
    assert make_executor(options, tmp_path / "x")._executor.max_num_timeout == DEFAULT_MAX_REQUEUES == 3
    # a time given as a raw submitit parameter (--slurm time=...) counts too
    assert api.run(path, out, backend="slurm", cluster="slurm", wait=False, slurm_params={"slurm_time": 60},
                   dry_run=True, log=None).dry_run
