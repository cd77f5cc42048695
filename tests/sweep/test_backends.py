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


def _training_run(out):
    """The folder, last logged step and worker pid of the one run a sweep into ``out`` trains, once
    it has logged a few steps."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        logs = list(out.glob("runs/*/log.jsonl"))
        if logs and logs[0].read_text().count("\n") >= 3:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the run did not start training within 120 s")
    run = logs[0].parent
    before = json.loads(logs[0].read_text().splitlines()[-1])["step"]
    return run, before, int((run / ".lock").read_text().split("@")[0])


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
    run, before, pid = _training_run(out)
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


def test_a_sigterm_checkpoints_the_step_and_a_kill_after_it_loses_no_earlier_step(tmp_path):
    """A cluster that preempts with SIGTERM (no submitit signal; also scancel) kills the task after its
    grace time. submitit ignores the SIGTERM; the task checkpoints the step it arrived in and trains
    on, so the run resumes from there after the SIGKILL, not from step 0 (no periodic checkpoint
    before step 100,000)."""
    pytest.importorskip("submitit")
    path = write_sweep_file(tmp_path, grid={"objective.beta": [4.0]}, seeds=1, metrics=["mig"],
                            metric_settings={"mig": {"num_train": 200}},
                            extra_set={"train.steps": 300, "train.checkpoint_every": 100000, "data.delay": 0.01})
    out = tmp_path / "out"
    sweep = threading.Thread(target=lambda: api.run(
        path, out, backend="slurm", cluster="local", threads_per_run=1, time_min=10, log=None))
    sweep.start()
    run, before, pid = _training_run(out)
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 60
    while not (run / "checkpoint.pt").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)  # Slurm's, once the grace time is over
    sweep.join(timeout=120)
    assert not sweep.is_alive()
    from disentangle.training.checkpoint import load_checkpoint

    saved = load_checkpoint(run / "checkpoint.pt")["step"]
    assert before <= saved < 300 and not (run / "metrics.json").exists()
    assert [json.loads(line)["step"] for line in (run / "execution.jsonl").read_text().splitlines()] == [0]
    report = api.run(path, out, backend="slurm", cluster="local", threads_per_run=1, time_min=10, log=None)
    assert [o.status for o in report.outcomes] == ["finished"], [o.message for o in report.outcomes]
    sessions = [json.loads(line)["step"] for line in (run / "execution.jsonl").read_text().splitlines()]
    assert sessions == [0, saved]  # resumed at the step the SIGTERM checkpointed
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


def test_a_time_given_as_a_slurm_parameter_becomes_submitits_minutes(tmp_path):
    """--slurm time=12:00:00 stays text (YAML reads it as 43200, a 30-day limit) and becomes
    timeout_min 720, as --time does: submitit's time-out check multiplies it, so text reaching
    submitit failed the task at the first warning signal."""
    from disentangle.sweep.__main__ import _slurm_params
    from disentangle.sweep.backends import BackendOptions
    from disentangle.sweep.backends.slurm import executor_parameters

    assert _slurm_params(["time=12:00:00", "account=lab"]) == {"slurm_time": "12:00:00", "slurm_account": "lab"}
    for given, minutes in [("12:00:00", 720), ("1-00:00:00", 1440), ("00:30:00", 30), (90, 90), ("90", 90)]:
        params = executor_parameters(BackendOptions(slurm_params={"slurm_time": given, "slurm_qos": "low"}))
        assert params["timeout_min"] == minutes and "slurm_time" not in params and params["slurm_qos"] == "low"
    for wrong in ("soon", 1.5, True, "0"):
        with pytest.raises(ConfigError, match="slurm_time"):
            executor_parameters(BackendOptions(slurm_params={"slurm_time": wrong}))


def test_a_task_whose_time_limit_requeues_are_spent_leaves_its_run_partial_not_failed(tmp_path, monkeypatch):
    """submitit's "timed-out too many times" (UncompletedJobError, raised by its handler at the
    step boundary, after the checkpoint) is not the run's failure: no failed.json, the error goes
    up to end the array task, and the next sweep run resumes the run."""
    pytest.importorskip("submitit")
    from submitit.core.utils import UncompletedJobError

    from disentangle.sweep import runner
    from disentangle.sweep.runner import RunTask, run_one, scheduler_gave_up

    def timed_out(task, run_dir, missing):
        (run_dir / "checkpoint.pt").write_bytes(b"the step reached")
        raise UncompletedJobError("Job not requeued because: timed-out too many times.")

    monkeypatch.setattr(runner, "_train_and_evaluate", timed_out)
    run_dir = tmp_path / "runs" / "abc"
    task = RunTask(run_id="abc", run_dir=str(run_dir), config={}, seed=0)
    with pytest.raises(UncompletedJobError):
        run_one(task)
    assert not (run_dir / runner.FAILED_NAME).exists() and (run_dir / "checkpoint.pt").exists()
    assert runner.RunLock(run_dir / runner.LOCK_NAME).acquire(timeout=0)  # the lock was released
    assert scheduler_gave_up(UncompletedJobError("x")) and not scheduler_gave_up(RuntimeError("x"))

    def broken(task, run_dir, missing):
        raise RuntimeError("a real failure")

    monkeypatch.setattr(runner, "_train_and_evaluate", broken)
    outcome = run_one(RunTask(run_id="def", run_dir=str(tmp_path / "runs" / "def"), config={}, seed=0))
    assert outcome.status == "failed" and (tmp_path / "runs" / "def" / runner.FAILED_NAME).exists()


class _Ref:
    """An object reference of the fake Ray: hashed by identity, as Ray's."""

    def __init__(self, outcome) -> None:
        self.outcome = outcome


class _FakeRay:
    """What the Ray backend calls, recorded: init's arguments and each task's resources."""

    class exceptions:  # noqa: N801 (ray.exceptions)
        class RayError(Exception):
            pass

    def __init__(self, gpus: float) -> None:
        self.gpus, self.inits, self.asked = gpus, [], []

    def is_initialized(self):
        return False

    def init(self, **kwargs):
        self.inits.append(kwargs)

    def cluster_resources(self):
        return {"CPU": 8.0, **({"GPU": self.gpus} if self.gpus else {})}

    def remote(self, fn):
        fake = self

        class Remote:
            def options(self, **resources):
                class Bound:
                    def remote(self, task):
                        fake.asked.append((task.run_id, resources))
                        return _Ref(fn(task))
                return Bound()
        return Remote()

    def wait(self, refs, num_returns=1):
        return refs[:1], refs[1:]

    def get(self, ref):
        return ref.outcome

    def shutdown(self):
        pass


def test_ray_asks_for_a_gpu_per_run_where_the_cluster_has_gpus_and_starts_its_own_instance(monkeypatch, caplog):
    """Without --gpus-per-run a run that may use a GPU asks for one where the cluster has GPUs (Ray
    hides every GPU from a task that asks for none), a train.device: cpu run none; no --address
    starts a new local instance (address "local", not RAY_ADDRESS's cluster); --workers with
    --address is said to be unused, not passed (Ray refuses num_cpus when it connects)."""
    from disentangle.sweep.backends import BackendOptions
    from disentangle.sweep.backends import ray as ray_backend
    from disentangle.sweep.runner import RunOutcome, RunTask

    monkeypatch.setattr(ray_backend, "run_one", lambda task: RunOutcome(task.run_id, "finished", 0.0, "", ""))
    tasks = [RunTask(run_id=name, run_dir=f"/x/{name}", config={"train": {"device": device}}, seed=0)
             for name, device in [("auto", "auto"), ("cuda", "cuda"), ("cpu", "cpu")]]
    for gpus, per_run, expected in [(2.0, None, [1.0, 1.0, 0.0]), (0.0, None, [0.0, 0.0, 0.0]),
                                    (2.0, 0.25, [0.25, 0.25, 0.25])]:
        fake = _FakeRay(gpus)
        monkeypatch.setattr(ray_backend, "_ray_module", lambda fake=fake: fake)
        reported = []
        ray_backend.run_ray(tasks, BackendOptions(workers=2, threads_per_run=2, gpus_per_run=per_run), reported.append)
        assert [resources["num_gpus"] for _, resources in fake.asked] == expected
        assert all(resources["num_cpus"] == 2 for _, resources in fake.asked)
        assert fake.inits[0]["address"] == "local" and fake.inits[0]["num_cpus"] == 4
        assert [o.run_id for o in reported] == ["auto", "cuda", "cpu"]
    fake = _FakeRay(0.0)
    monkeypatch.setattr(ray_backend, "_ray_module", lambda: fake)
    with caplog.at_level("WARNING", logger="disentangle.sweep.backends.ray"):
        ray_backend.run_ray(tasks[:1], BackendOptions(workers=2, address="auto"), lambda outcome: None)
    assert fake.inits[0]["address"] == "auto" and "num_cpus" not in fake.inits[0]
    assert "--workers 2 is not used with --address" in caplog.text
