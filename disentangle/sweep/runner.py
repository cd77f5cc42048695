"""The run-one function every backend calls: lock, skip or resume, train, evaluate, record.

:func:`run_one` is the whole life of one run of a sweep, in its folder ``DIR/runs/<id>``:

1. take the run's lock (:class:`~disentangle.sweep.files.RunLock`); if another process holds it
   (an orphaned worker of a killed sweep, a second sweep over the same folder), report ``busy``
   and leave the run alone;
2. ``metrics.json`` holds every requested metric, each computed with the requested settings: the
   run is finished, skip it (``skipped``); it lacks some, or holds a score computed with other
   settings (:func:`missing_metrics`): evaluate only those, replacing the old scores;
3. ``failed.json`` exists: leave the run failed (``failed`` with the recorded message) unless
   ``retry_failed``; training and scoring are deterministic, so a NaN would come back on a plain
   retry, and so would a metric that failed on a trained run (its other scores are kept). A run
   that failed on its input (:func:`failed_on_input`: a config or data error, such as a metric its
   data cannot give) is tried again on every rerun: the fix is in the sweep file, and unfixed it
   fails again at once;
4. otherwise train: resume from the checkpoint when there is one (the trainer's bit-exact
   resume; in ``resume_precision`` when given: :meth:`~disentangle.training.trainer.Trainer.fit`), else start afresh (dropping a ``log.jsonl`` left by an attempt killed before its first
   checkpoint); then evaluate the metrics and write ``metrics.json`` atomically, last, with the
   settings of every score (``metric_settings``, see :func:`settings_identity`); then rewrite the
   sweep's ``results.csv`` (atomically, under its lock), so a killed sweep leaves the table of
   every run finished so far;
5. any exception (a NaN loss, a missing file, a bug) is written to ``failed.json`` (type, message,
   its last line) and ``traceback.txt``, and returned, never raised: the other runs go on.
   ``KeyboardInterrupt`` / ``SystemExit`` are not caught (the trainer checkpoints on them).

``metrics.json`` records ``metric_settings``: ``{metric: settings}`` for every metric it holds,
every setting the score depends on (:func:`~disentangle.metrics.results.settings_identity`: defaults
filled in, :data:`~disentangle.metrics.results.EXECUTION_SETTINGS` left out; the results table
splits a metric's columns by them, and reads older files the same way).

A worker process builds each dataset once and keeps the last one it built (keyed by the ``data``
section and the device), so consecutive runs on the same data share it.
"""
from __future__ import annotations

import logging
import os
import time
import traceback
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..metrics.results import (  # noqa: F401  (EXECUTION_SETTINGS: kept here)
    EXECUTION_SETTINGS,
    FINISHED_KEY,
    is_finished_record,
    recorded_settings,
    settings_identity,
    stale_metrics,
)
from .files import (
    FAILED_NAME,
    LOCK_NAME,
    METRICS_NAME,
    TRACEBACK_NAME,
    RunLock,
    RunState,
    atomic_write_json,
    read_json,
    write_results,
)
from .grid import _short, import_plugins
from .ids import canonical_json

#: outcome statuses (:class:`~disentangle.sweep.files.RunState`), under their former names
FINISHED, SKIPPED, FAILED, BUSY, CRASHED = (
    RunState.FINISHED, RunState.SKIPPED, RunState.FAILED, RunState.BUSY, RunState.CRASHED
)



logger = logging.getLogger(__name__)

@dataclass
class RunTask:
    """Everything a worker needs to run one run (plain data: it crosses process boundaries)."""

    run_id: str
    run_dir: str
    config: dict[str, Any]
    seed: int
    values: dict[str, Any] = field(default_factory=dict)
    metrics: list[str] = field(default_factory=list)
    #: the sweep file asked for ``all``: the metrics that do not apply to the run's data (a grid's on
    #: unlabelled images) are left out, and metrics.json says so; named ones must apply
    metrics_all: bool = False
    metric_settings: dict[str, dict[str, Any]] = field(default_factory=dict)
    imports: list[str] = field(default_factory=list)
    threads: int | None = None
    retry_failed: bool = False
    resume_precision: str | None = None  #: a partial run's sessions train in it (Trainer.fit's precision)
    lock_wait: float = 10.0
    dlib_model_number: int | None = None
    sweep_dir: str | None = None  #: the sweep folder whose results.csv is rewritten after the run

    def describe(self) -> str:
        items = [f"{k}={_short(v)}" for k, v in self.values.items()]
        return ", ".join([*items, f"seed={self.seed}"])


@dataclass
class RunOutcome:
    """What :func:`run_one` did: ``status`` is finished, skipped (already finished), failed, busy
    (locked by another process) or crashed (the worker died; set by the backends)."""

    run_id: str
    status: RunState
    seconds: float = 0.0
    message: str = ""
    description: str = ""


# ---------------------------------------------------------------------- worker state
_DATASETS: OrderedDict[str, Any] = OrderedDict()
_DATASET_CACHE_SIZE = 1  # a dSprites-sized dataset is ~3 GB: keep only the last one


def configure_worker(threads: int | None, imports: list[str] = ()) -> None:
    """Set torch's thread count and import the sweep file's plugins (idempotent). The count goes to
    ``OMP_NUM_THREADS`` too, which a run's ``train.threads: auto`` follows."""
    if threads:
        import os

        import torch

        os.environ["OMP_NUM_THREADS"] = str(threads)

        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
    if imports:
        import_plugins(list(imports))


def cached_dataset(data: dict[str, Any], device: Any) -> Any:
    """The dataset of a ``data`` section on ``device``, built once per worker and reused."""
    from ..data import build_dataset

    data = {k: v for k, v in data.items() if k != "labels"}  # the labelled subset is not part of the dataset
    key = canonical_json({"data": data, "device": str(device)})
    if key in _DATASETS:
        _DATASETS.move_to_end(key)
        return _DATASETS[key]
    while len(_DATASETS) >= _DATASET_CACHE_SIZE:
        _DATASETS.popitem(last=False)
    dataset = build_dataset(dict(data), device=device)
    _DATASETS[key] = dataset
    return dataset


# ---------------------------------------------------------------------- state of a run folder
def missing_metrics(
    run_dir: Path, metrics: list[str], settings: dict[str, dict[str, Any]] | None = None
) -> list[str] | None:
    """None when the run has no sweep's record of a finished run (no ``metrics.json``, or one that
    ``python -m disentangle.evaluate`` wrote into a run folder part-way through training:
    :func:`~disentangle.metrics.results.is_finished_record`); else the requested metrics it lacks or
    holds with other settings than ``settings`` asks for (a metric absent from ``settings``: its defaults)."""
    record = read_json(run_dir / METRICS_NAME)
    if not is_finished_record(record):
        return None
    left_out = set(record.get(NOT_APPLICABLE) or [])  # 'all' on data they do not apply to
    return stale_metrics(record, [m for m in metrics if m not in left_out], settings)


#: the key of metrics.json that lists the metrics 'all' left out, as not applying to the run's data
NOT_APPLICABLE = "not_applicable"


def metrics_for_data(task: RunTask, dataset: Any) -> tuple[list[str], list[str]]:
    """``(applicable, left_out)`` of the sweep's metrics on the run's dataset, before training: with
    ``all`` the metrics the data cannot give are left out; a metric named explicitly that the data
    cannot give stops the run with the metric's own paragraph (:func:`~disentangle.metrics.check_metric_applies`)
    before hours of training end in a failed evaluation."""
    from ..metrics import check_metric_applies, metric_applies

    if task.metrics_all:
        applicable = [m for m in task.metrics if metric_applies(m, dataset, task.metric_settings.get(m))]
        return applicable, [m for m in task.metrics if m not in applicable]
    for name in task.metrics:
        check_metric_applies(name, dataset, task.metric_settings.get(name))
    return list(task.metrics), []


def run_one(task: RunTask) -> RunOutcome:
    """Run one run of a sweep (see the module docstring); never raises for a failed run."""
    start = time.perf_counter()
    run_dir = Path(task.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = RunLock(run_dir / LOCK_NAME)
    if not lock.acquire(timeout=task.lock_wait):
        holder = (run_dir / LOCK_NAME).read_text().strip() or "another process"
        return RunOutcome(task.run_id, RunState.BUSY, 0.0, f"locked by {holder}", task.describe())
    with lock:
        missing = missing_metrics(run_dir, task.metrics, task.metric_settings)
        if missing == []:
            return RunOutcome(task.run_id, RunState.SKIPPED, 0.0, "", task.describe())
        failed = read_json(run_dir / FAILED_NAME)
        # a trained run whose scoring failed stays failed too (as `sweep status` reports it): the
        # scoring is deterministic, so the same metric would fail again after the same minutes
        if failed is not None:
            if not task.retry_failed and not failed_on_input(failed):
                return RunOutcome(task.run_id, RunState.FAILED, 0.0, f"(failed before) {failed.get('last_line', '')}", task.describe())
        try:
            configure_worker(task.threads, task.imports)
            _train_and_evaluate(task, run_dir, missing)
        except Exception as err:  # recorded, not raised: the other runs go on
            if scheduler_gave_up(err):  # not the run's failure: it stays partial, checkpointed
                raise
            record = record_failure(run_dir, err)
            return RunOutcome(task.run_id, RunState.FAILED, time.perf_counter() - start, record["last_line"], task.describe())
        for name in (FAILED_NAME, TRACEBACK_NAME):  # a retried run that succeeded
            (run_dir / name).unlink(missing_ok=True)
    if task.sweep_dir:
        update_results(task.sweep_dir)
    return RunOutcome(task.run_id, RunState.FINISHED, time.perf_counter() - start, "", task.describe())


def scheduler_gave_up(err: BaseException) -> bool:
    """Whether ``err`` is submitit's refusal to requeue a task again (``UncompletedJobError``: "timed
    out too many times"), raised by its signal handler at the step boundary where the trainer
    hands the signal on, after checkpointing the step. The run did not fail: it stays partial and
    the next ``sweep run`` resumes it; the array task ends there (its other runs are not begun
    with the seconds left before the time limit)."""
    kind = type(err)
    return kind.__name__ == "UncompletedJobError" and kind.__module__.startswith("submitit")


def update_results(sweep_dir: str | Path) -> None:
    """Rewrite the sweep's ``results.csv`` after a finished run; a failure to write it is reported
    as a warning (logging), never raised (the run itself is finished and recorded)."""
    try:
        write_results(sweep_dir)
    except Exception as err:  # a full disk, a read-only folder: the sweep's final write tries again
        logger.warning(f"could not rewrite {Path(sweep_dir) / 'results.csv'} ({type(err).__name__}: {err}); "
                       f"python -m disentangle.sweep results {sweep_dir} writes it.")


def _train_and_evaluate(task: RunTask, run_dir: Path, missing: list[str] | None) -> None:
    import copy

    from ..config import Config
    from ..training.checkpoint import has_checkpoint
    from ..training.runtime import flush_denormals_first
    from ..training.trainer import Trainer, resolve_device

    raw = copy.deepcopy(task.config)
    raw["train"]["out_dir"] = str(run_dir)
    config = Config.from_dict(raw)
    device = resolve_device(config.train.device)
    flush_denormals_first(config)  # before the worker's first multi-threaded work: its threads inherit it
    dataset = cached_dataset(raw["data"], device)
    applicable, left_out = metrics_for_data(task, dataset)
    train_seconds, stop_reason = None, None
    if missing is None:  # not trained to the end yet, or trained but not evaluated
        resume = has_checkpoint(run_dir)
        if not resume:
            (run_dir / "log.jsonl").unlink(missing_ok=True)  # records of an attempt killed before its first checkpoint
        t0 = time.perf_counter()
        result = Trainer(config, dataset=dataset).fit(resume=resume, precision=task.resume_precision if resume else None)
        train_seconds = round(time.perf_counter() - t0, 3)
        stop_reason = result.stop_reason  # a callback ended it early (early stopping): scored where it stopped
    previous = read_json(run_dir / METRICS_NAME) if missing is not None else None
    names = [m for m in (missing if missing is not None else applicable) if m not in left_out]
    scores, seconds, steps = evaluate_run(run_dir, dataset, device, names, config.seed, task.metric_settings, task.threads)
    kept = {m: v for m, v in ((previous or {}).get("metrics") or {}).items() if m not in scores}
    record = {
        "run_id": task.run_id,
        "run_dir": str(run_dir),
        "seed": config.seed,
        "values": task.values,
        "dlib_model_number": task.dlib_model_number,
        "steps": steps,
        "metrics": {**((previous or {}).get("metrics") or {}), **scores},
        "seconds": {**((previous or {}).get("seconds") or {}), **seconds},
        "train_seconds": train_seconds if previous is None else previous.get("train_seconds"),
        "metric_settings": {
            **{m: recorded_settings(previous or {}, m) for m in kept},
            **{m: settings_identity(m, task.metric_settings.get(m)) for m in scores},
        },
        "config": config.to_dict(),
        FINISHED_KEY: time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        **({"stop_reason": stop_reason} if stop_reason else {}),
        **({NOT_APPLICABLE: left_out} if left_out else {}),
    }
    from .. import __version__

    record["library_version"] = __version__
    atomic_write_json(run_dir / METRICS_NAME, record)  # last: its presence means finished


def evaluate_run(
    run_dir: Path,
    dataset: Any,
    device: Any,
    names: list[str],
    seed: int,
    settings: dict[str, dict[str, Any]],
    threads: int | None,
) -> tuple[dict[str, dict[str, float]], dict[str, float], int]:
    """Scores of the trained run on its dataset, as ``python -m disentangle.evaluate`` computes
    them (metric seed = the run's seed); metrics with ``n_jobs`` get the worker's thread count."""
    import inspect

    import disentangle

    model = disentangle.load(run_dir, map_location=device)
    steps = int(getattr(model, "trained_steps", 0))
    if not names:
        return {}, {}, steps
    from ..metrics import METRICS, evaluate_metrics

    merged: dict[str, dict[str, Any]] = {m: dict(s) for m, s in settings.items() if m in names}
    if threads:
        for name in names:
            if "n_jobs" in inspect.signature(METRICS.get(name)).parameters:
                merged.setdefault(name, {}).setdefault("n_jobs", threads)
    seconds: dict[str, float] = {}

    def done(name: str, scores: dict[str, float], secs: float) -> None:
        seconds[name] = round(secs, 3)

    scores = evaluate_metrics(dataset, model, names, seed=seed, callback=done,
                              settings={m: v for m, v in merged.items() if METRICS.canonical(m) in names})
    return scores, seconds, steps


def failed_on_input(record: Any) -> bool:
    """Whether a ``failed.json`` record is of a failure on the run's input (an
    :class:`~disentangle.errors.InputError`: a config or data the run cannot train or be scored on),
    which a sweep tries again on every rerun rather than only with ``retry_failed``."""
    if not isinstance(record, dict):
        return False
    if "bad_input" in record:
        return bool(record["bad_input"])
    from .. import errors

    kind = getattr(errors, str(record.get("error", "")), None)  # a record from before the flag
    return isinstance(kind, type) and issubclass(kind, InputError)


def record_failure(run_dir: Path, err: BaseException) -> dict[str, Any]:
    """Write ``failed.json`` (and ``traceback.txt``) for ``err``; returns the record."""
    text = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    message = str(err).strip()
    last_line = f"{type(err).__name__}: {message.splitlines()[-1] if message else ''}".rstrip(": ")
    (run_dir / TRACEBACK_NAME).write_text(text)
    previous = read_json(run_dir / FAILED_NAME) or {}
    record = {
        "error": type(err).__name__,
        "bad_input": isinstance(err, InputError),
        "message": message,
        "last_line": last_line,
        "traceback_file": TRACEBACK_NAME,
        "pid": os.getpid(),
        "failed_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "attempts": int(previous.get("attempts", 0)) + 1,
    }
    atomic_write_json(run_dir / FAILED_NAME, record)
    return record


def outcome_line(outcome: RunOutcome) -> str:
    """One line for logs: ``finished  1a2b3c4d5e6f7a8b  objective.beta=4, seed=1  (12.3 s)``."""
    extra = f"  ({outcome.seconds:.1f} s)" if outcome.seconds else ""
    message = f"  {outcome.message}" if outcome.message else ""
    return f"{outcome.status:<8}  {outcome.run_id}  {outcome.description}{extra}{message}"
