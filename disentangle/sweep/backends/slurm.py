"""The Slurm backend: submitit job arrays, each array task running ``runs_per_task`` runs in turn.

* Runs are grouped by dataset, cut into chunks of ``runs_per_task`` and submitted as job arrays of
  at most ``max_array_size`` tasks (default 1000: Slurm's default ``MaxArraySize`` is 1001, and an
  array index must stay below it), with ``array_parallelism`` tasks at once if given.
* Resources: ``partition``, ``time_min``, ``gpus_per_task`` (``--gpus-per-node``),
  ``threads_per_run`` CPUs per task, and any other ``slurm_*`` parameter of submitit
  (``slurm_params``, e.g. ``{"slurm_account": "lab", "slurm_qos": "low"}``).
* Preemption and time limits: the job callable is a ``submitit.helpers.Checkpointable``; when Slurm
  signals a preemption or the time limit, submitit requeues the task with the same chunk, and the
  run-one function skips its finished runs and resumes the partial one from its checkpoint.
* ``cluster``: ``None`` lets submitit pick Slurm when ``sbatch`` exists; ``"local"`` and ``"debug"``
  are submitit's local executors (used by the tests; ``local`` starts every task at once).
* ``wait`` (default): block until every task ends and report each run; otherwise submit, print the
  job ids and return (``python -m disentangle.sweep status/results DIR`` later).
"""
from __future__ import annotations

import sys
from pathlib import Path

from ...registry import DisentangleError
from ..runner import CRASHED, RunOutcome, RunTask, run_one

DEFAULT_MAX_ARRAY_SIZE = 1000

try:
    from submitit.helpers import Checkpointable as _Checkpointable
except ImportError:  # the backend says how to install submitit when it is used
    _Checkpointable = object  # type: ignore[assignment,misc]


def _submitit():
    try:
        import submitit
    except ImportError:
        raise DisentangleError(
            "The slurm backend needs submitit, which is not installed. Install it with "
            "pip install 'disentangle-torch[slurm]' (or pip install 'submitit>=1.5')."
        ) from None
    return submitit


def check_available() -> None:
    _submitit()


def chunks(tasks: list, size: int) -> list[list]:
    """``tasks`` cut into consecutive lists of at most ``size``."""
    return [tasks[i:i + size] for i in range(0, len(tasks), size)]


class SweepChunk(_Checkpointable):
    """One array task: run its runs one after another; requeued as is on preemption (submitit
    calls ``checkpoint``, which resubmits the same chunk)."""

    def __call__(self, tasks: list[RunTask]) -> list[RunOutcome]:
        return [run_one(task) for task in tasks]


def run_slurm(tasks: list[RunTask], options, report, folder: str | Path) -> list[str]:
    """Submit ``tasks`` as job arrays; report each outcome when ``options.wait``; return the job ids."""
    submitit = _submitit()
    executor = submitit.AutoExecutor(folder=str(Path(folder) / "%j"), cluster=options.cluster)
    params = {
        "name": "disentangle-sweep",
        "cpus_per_task": options.threads_per_run or 1,
        "tasks_per_node": 1,
        "nodes": 1,
    }
    if options.time_min:
        params["timeout_min"] = options.time_min
    if options.gpus_per_task:
        params["gpus_per_node"] = options.gpus_per_task
    if options.partition:
        params["slurm_partition"] = options.partition
    if options.array_parallelism:
        params["slurm_array_parallelism"] = options.array_parallelism
    params.update(options.slurm_params or {})
    executor.update_parameters(**params)

    job_chunks = chunks(tasks, options.runs_per_task or 1)
    jobs, job_tasks = [], {}
    for array in chunks(job_chunks, options.max_array_size or DEFAULT_MAX_ARRAY_SIZE):
        submitted = executor.map_array(SweepChunk(), array)
        for job, chunk in zip(submitted, array):
            jobs.append(job)
            job_tasks[job.job_id] = chunk
    ids = [job.job_id for job in jobs]
    print(f"submitted {len(jobs)} array tasks ({len(tasks)} runs): {', '.join(ids[:5])}{' ...' if len(ids) > 5 else ''}",
          file=sys.stderr)
    if not options.wait:
        return ids
    for job in submitit.helpers.as_completed(jobs):
        chunk = job_tasks[job.job_id]
        try:
            outcomes = job.result()
        except Exception as err:  # the task died (node failure, cancelled, out of memory)
            text = str(err).strip()
            line = text.splitlines()[-1] if text else type(err).__name__
            outcomes = [
                RunOutcome(t.run_id, CRASHED, 0.0, f"job {job.job_id}: {line}", t.describe()) for t in chunk
            ]
        for outcome in outcomes:
            report(outcome)
    return ids


