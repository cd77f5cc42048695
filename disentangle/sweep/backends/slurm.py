"""The Slurm backend: submitit job arrays, each array task running ``runs_per_task`` runs in turn.

* Runs are grouped by dataset, cut into chunks of ``runs_per_task`` and submitted as job arrays of
  at most ``max_array_size`` tasks (default 1000: Slurm's default ``MaxArraySize`` is 1001, and an
  array index must stay below it), with ``array_parallelism`` tasks at once if given.
* Resources: ``partition``, ``time_min``, ``gpus_per_task`` (``--gpus-per-node``),
  ``threads_per_run`` CPUs per task, and any other ``slurm_*`` parameter of submitit
  (``slurm_params``, e.g. ``{"slurm_account": "lab", "slurm_qos": "low"}``).
* A time limit is required (``time_min``, ``--time``; or ``slurm_time`` in ``slurm_params``):
  without one submitit asks Slurm for 5 minutes (``#SBATCH --time=5``), far too short for
  training. There is no default because what fits depends on the partition's limit and on how long
  a run takes; choose the partition's limit, or at least a few checkpoint intervals.
* Preemption and time limits: the job callable is a ``submitit.helpers.Checkpointable``; when Slurm
  signals a preemption or the time limit, submitit requeues the task with the same chunk, and the
  run-one function skips its finished runs and resumes the partial one from its checkpoint.
  Preemptions are requeued without limit; a task that reaches its time limit is requeued at most
  ``max_requeues`` times (``--max-requeues``, default :data:`DEFAULT_MAX_REQUEUES`, submitit's),
  so one array task can train for ``(max_requeues + 1) * time_min`` minutes in all. A run still
  unfinished then stays partial (submitit's "timed-out too many times" is not the run's failure:
  :func:`~disentangle.sweep.runner.scheduler_gave_up`), the task's runs not begun are left, and
  the next ``sweep run`` resumes them. No step is lost: submitit's
  signal (``SIGUSR2``, or ``SUBMITIT_PREEMPT_SIGNAL``; Slurm sends it 90 s before the limit) is
  deferred to the end of the step in progress, which is checkpointed before submitit requeues the
  task and exits (:func:`~disentangle.training.interrupt.deferred_to_step_boundary`). A cluster
  that preempts with SIGTERM instead (Slurm without ``PreemptParameters=send_user_signal``; also
  ``scancel`` and a node going down), or a time limit reached without the warning signal, sends
  SIGTERM and, after its grace time (``GraceTime``, ``KillWait``), SIGKILL. submitit ignores SIGTERM
  on purpose (its handler only logs it); the task defers that handler to the step boundary too, so
  the step in progress is checkpointed first and training goes on until the SIGKILL or submitit's
  own signal. A task killed so loses at most the steps trained in the grace time; Slurm requeues it
  (``--requeue``, or the preemption mode ``REQUEUE``) or the next ``sweep run`` resumes it.
* ``time_min`` (``--time``) or ``slurm_time`` (minutes, or a Slurm time such as ``"12:00:00"``)
  become submitit's ``timeout_min``.
* Ctrl-C while waiting stops the waiting, not the jobs (``scancel`` stops them).
* ``cluster``: ``None`` lets submitit pick Slurm when ``sbatch`` exists; ``"local"`` and ``"debug"``
  are submitit's local executors (used by the tests; ``local`` starts every task at once).
* ``wait`` (default): block until every task ends and report each run; otherwise submit, print the
  job ids and return (``python -m disentangle.sweep status/results DIR`` later).
"""
from __future__ import annotations

import logging
import os
import re
import signal
from pathlib import Path

from ...errors import ConfigError, DisentangleError
from ...training.interrupt import deferred_to_step_boundary
from ..files import RunState
from ..runner import RunOutcome, RunTask, run_one

DEFAULT_MAX_ARRAY_SIZE = 1000
#: requeues of an array task that reached its time limit (submitit's ``max_num_timeout`` default)
DEFAULT_MAX_REQUEUES = 3

try:
    from submitit.helpers import Checkpointable as _Checkpointable
except ImportError:  # the backend says how to install submitit when it is used
    _Checkpointable = object  # type: ignore[assignment,misc]



logger = logging.getLogger(__name__)

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


def parse_minutes(text: str, name: str = "--time") -> int:
    """Slurm-style time: ``90`` (minutes), ``HH:MM:SS``, ``MM:SS``, ``D-HH[:MM[:SS]]`` -> minutes."""
    match = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", str(text).strip())
    if not match:
        raise ConfigError(f"{name} '{text}' is not a time: give minutes (90), HH:MM:SS (12:00:00) or "
                          f"D-HH:MM:SS (1-12:00:00).")
    days, a, b, c = match.groups()
    if days is None and b is None:
        minutes = int(a)
    elif days is None and c is None:  # MM:SS
        minutes = int(a) + (1 if int(b) else 0)
    else:
        hours, mins, secs = int(a), int(b or 0), int(c or 0)
        minutes = int(days or 0) * 1440 + hours * 60 + mins + (1 if secs else 0)
    if minutes < 1:
        raise ConfigError(f"{name} '{text}' must be at least one minute.")
    return minutes


def _time_limit_minutes(value: object) -> int:
    """``slurm_time`` of ``slurm_params`` in minutes: a whole number is minutes (submitit's), text a
    Slurm time. submitit computes with the limit in minutes (its time-out check multiplies it), so
    a text limit reaching it would fail the task at the first warning signal."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ConfigError(f"slurm_time must be minutes (720) or a Slurm time ('12:00:00'), got {value!r}.")
    return parse_minutes(str(value), name="slurm_time")


def check_time_limit(options) -> None:
    """Refuse Slurm options without a time limit (module docstring)."""
    if options.time_min is None and "slurm_time" not in (options.slurm_params or {}):
        requeues = DEFAULT_MAX_REQUEUES if options.max_requeues is None else options.max_requeues
        raise ConfigError(
            "The slurm backend needs a time limit per array task: without one submitit asks Slurm for 5 "
            "minutes, and a training run would be stopped and given up after a few requeues. Give --time "
            "(minutes, HH:MM:SS or D-HH:MM:SS, e.g. --time 12:00:00; time_min=720 from Python) within your "
            "partition's limit (sinfo -o '%P %l' lists them). A task that reaches its limit is requeued, at "
            f"most {requeues} times (--max-requeues), and resumes its runs from their checkpoints."
        )


def executor_parameters(options) -> dict:
    """The submitit parameters of the array tasks (``update_parameters``), from the options."""
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
    extra = dict(options.slurm_params or {})
    if "slurm_time" in extra:  # as --time: submitit's timeout_min, which its time-out check reads
        params["timeout_min"] = _time_limit_minutes(extra.pop("slurm_time"))
    params.update(extra)
    return params


def make_executor(options, folder: str | Path):
    """The submitit executor of a sweep: its job files under ``folder/<job id>``, the time-limit
    requeues set to ``max_requeues``, the parameters of :func:`executor_parameters`."""
    submitit = _submitit()
    requeues = DEFAULT_MAX_REQUEUES if options.max_requeues is None else options.max_requeues
    executor = submitit.AutoExecutor(
        folder=str(Path(folder) / "%j"), cluster=options.cluster,
        slurm_max_num_timeout=requeues, local_max_num_timeout=requeues,
    )
    executor.update_parameters(**executor_parameters(options))
    return executor


def chunks(tasks: list, size: int) -> list[list]:
    """``tasks`` cut into consecutive lists of at most ``size``."""
    return [tasks[i:i + size] for i in range(0, len(tasks), size)]


def preemption_signal() -> int:
    """The signal submitit's job handler checkpoints and requeues on: ``SIGUSR2`` unless the
    ``SUBMITIT_PREEMPT_SIGNAL`` environment variable names another."""
    name = os.environ.get("SUBMITIT_PREEMPT_SIGNAL", "USR2")
    return getattr(signal, "SIG" + name.upper().removeprefix("SIG"), signal.SIGUSR2)


class SweepChunk(_Checkpointable):
    """One array task: run its runs one after another; requeued as is on preemption (submitit
    calls ``checkpoint``, which resubmits the same chunk), once the step in training is
    checkpointed; a SIGTERM (preemption without submitit's signal, ``scancel``) checkpoints the
    step in training too, and submitit's handler then lets training go on (module docstring)."""

    def __call__(self, tasks: list[RunTask]) -> list[RunOutcome]:
        with deferred_to_step_boundary(preemption_signal(), signal.SIGTERM):
            return [run_one(task) for task in tasks]


def run_slurm(tasks: list[RunTask], options, report, folder: str | Path) -> list[str]:
    """Submit ``tasks`` as job arrays; report each outcome when ``options.wait``; return the job ids."""
    submitit = _submitit()
    check_time_limit(options)
    executor = make_executor(options, folder)

    job_chunks = chunks(tasks, options.runs_per_task or 1)
    jobs, job_tasks = [], {}
    for array in chunks(job_chunks, options.max_array_size or DEFAULT_MAX_ARRAY_SIZE):
        submitted = executor.map_array(SweepChunk(), array)
        for job, chunk in zip(submitted, array):
            jobs.append(job)
            job_tasks[job.job_id] = chunk
    ids = [job.job_id for job in jobs]
    logger.info(f"submitted {len(jobs)} array tasks ({len(tasks)} runs): {', '.join(ids[:5])}{' ...' if len(ids) > 5 else ''}")
    if not options.wait:
        return ids
    try:
        for job in submitit.helpers.as_completed(jobs):
            _report_job(job, job_tasks[job.job_id], report)
    except KeyboardInterrupt:
        arrays = sorted({job_id.split("_")[0] for job_id in ids})
        logger.warning(f"the array tasks keep running on the cluster: Ctrl-C stops the waiting, not the jobs "
                       f"(scancel {' '.join(arrays)} stops them; until they end, a sweep run finds their runs busy).")
        raise
    return ids


def _report_job(job, chunk: list[RunTask], report) -> None:
    """Report the outcomes of one ended array task (each run ``crashed`` if the task died)."""
    try:
        outcomes = job.result()
    except Exception as err:  # the task died (node failure, cancelled, out of memory, requeues spent)
        text = str(err).strip()
        line = text.splitlines()[-1] if text else type(err).__name__
        outcomes = [
            RunOutcome(t.run_id, RunState.CRASHED, 0.0, f"job {job.job_id}: {line}", t.describe()) for t in chunk
        ]
    for outcome in outcomes:
        report(outcome)


