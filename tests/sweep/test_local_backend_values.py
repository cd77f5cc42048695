"""The local backend's arithmetic and bookkeeping, without spawning a worker: the thread count each
run gets, the environment restored after the workers are spawned, and the columns of results.csv."""
from __future__ import annotations

import json
import os

import pytest

from disentangle.sweep.backends import BackendOptions, local
from disentangle.sweep.files import build_table

VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS")


def test_the_thread_variables_are_set_while_spawning_and_restored_after(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    for name in VARIABLES[1:]:
        monkeypatch.delenv(name, raising=False)
    with local.thread_environment(3):
        assert {name: os.environ.get(name) for name in VARIABLES} == dict.fromkeys(VARIABLES, "3")
    assert os.environ["OMP_NUM_THREADS"] == "7"  # as it was
    assert all(name not in os.environ for name in VARIABLES[1:])  # unset, as they were


@pytest.mark.parametrize("cores, workers, tasks, given, expected",
                         [(8, 2, 5, None, (2, 4)), (8, 3, 5, None, (3, 2)), (2, 4, 5, None, (4, 1)),
                          (8, 4, 2, None, (2, 4)), (8, 2, 5, 3, (2, 3)), (8, None, 5, None, (1, 8))])
def test_each_run_gets_its_share_of_the_cores(monkeypatch, cores, workers, tasks, given, expected):
    """workers = min(workers, runs); threads per run = the given count, else cores // workers (at least 1)."""
    seen = []
    monkeypatch.setattr(local, "available_cores", lambda: cores)
    monkeypatch.setattr(local, "_run_with_retries", lambda options, w, t, pending, report: seen.append((w, t)))
    tasks = [local.RunTask(run_id=f"r{i}", run_dir="unused", config={}, seed=i) for i in range(tasks)]
    local.run_local(tasks, BackendOptions(workers=workers, threads_per_run=given), report=None)
    assert seen == [expected]


def test_results_csv_leaves_out_the_keys_that_do_not_change_a_run(tmp_path):
    """Two finished runs that differ in objective.beta and in train.threads (rerun with another thread
    count, the same run id): beta is a column, threads is not."""
    for i, (beta, threads) in enumerate([(1.0, 1), (4.0, 2)]):
        run = tmp_path / "runs" / f"run{i}"
        run.mkdir(parents=True)
        (run / "metrics.json").write_text(json.dumps({
            "run_id": f"run{i}", "seed": 0, "metrics": {"mig": {"mig": 0.1 * (i + 1)}}, "finished_at": "2026-01-01",
            "config": {"seed": 0, "objective": {"name": "beta_vae", "beta": beta},
                       "train": {"threads": threads, "device": ["cpu", "cuda"][i], "steps": 10}}}))
    table = build_table(tmp_path)
    assert table.columns == ["run_id", "status", "seed", "objective.beta", "mig.mig"]
    assert [(r["run_id"], r["objective.beta"], r["mig.mig"]) for r in table.rows] == [("run0", 1.0, 0.1), ("run1", 4.0, 0.2)]


def _pool_script(monkeypatch, tmp_path, breaks: list[str | None]):
    """Replaces the process pool: its n-th start (while ``breaks`` lasts) dies with a worker (pid 100)
    holding the lock of run ``breaks[n]`` (None: no run had started); a start after that finishes
    every run it is given. Returns the list of the run ids each start was given."""
    from disentangle.sweep.files import LOCK_NAME, RunState
    from disentangle.sweep.runner import RunOutcome

    starts: list[list[str]] = []

    def fake_pool(tasks, workers, threads, pending, report):
        starts.append([t.run_id for t in tasks])
        if len(starts) <= len(breaks):
            for task in tasks:
                (tmp_path / task.run_id / LOCK_NAME).write_text(
                    "100@host\n" if task.run_id == breaks[len(starts) - 1] else "")
            raise local._PoolBroke({100, 101})
        for task in tasks:
            pending.pop(task.run_id)
            report(RunOutcome(task.run_id, RunState.FINISHED))

    monkeypatch.setattr(local, "_run_pool", fake_pool)
    return starts


def _tasks(tmp_path, names):
    for name in names:
        (tmp_path / name).mkdir()
    return {n: local.RunTask(run_id=n, run_dir=str(tmp_path / n), config={}, seed=0) for n in names}


def test_only_the_run_a_dead_worker_was_training_is_charged(monkeypatch, tmp_path):
    starts = _pool_script(monkeypatch, tmp_path, ["a", "a"])
    reported = []
    local._run_with_retries(BackendOptions(max_retries=1), 1, 1, _tasks(tmp_path, ["a", "b", "c"]),
                            lambda o: reported.append((o.run_id, str(o.status))))
    assert starts == [["a", "b", "c"], ["a", "b", "c"], ["b", "c"]]  # a: 2 tries (1 retry), then crashed
    assert reported == [("a", "crashed"), ("b", "finished"), ("c", "finished")]


def test_workers_that_die_before_any_run_starts_charge_every_run(monkeypatch, tmp_path):
    starts = _pool_script(monkeypatch, tmp_path, [None, "b"])
    reported = []
    local._run_with_retries(BackendOptions(max_retries=1), 1, 1, _tasks(tmp_path, ["a", "b", "c"]),
                            lambda o: reported.append((o.run_id, str(o.status))))
    assert starts == [["a", "b", "c"], ["a", "b", "c"], ["a", "c"]]
    assert reported == [("b", "crashed"), ("a", "finished"), ("c", "finished")]
