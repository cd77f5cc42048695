"""Classifier fits in parallel: worker counts, one BLAS/OpenMP thread per fit, results independent of ``n_jobs``."""
from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ._settings import check_n_jobs


def resolve_n_jobs(n_jobs: int | None, num_tasks: int) -> int:
    """``None`` means one worker per available core (at most one per task); ``-1`` all cores."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    n_jobs = check_n_jobs(n_jobs)
    if n_jobs is None or n_jobs == -1:
        n_jobs = cores
    return max(1, min(int(n_jobs), num_tasks))


_CONTROLLER: list = []


def _thread_limit():
    """A context limiting BLAS/OpenMP to one thread (the controller is built once per process)."""
    if not _CONTROLLER:
        # load the native libraries of the estimators first, so that the controller sees them
        import sklearn.ensemble
        import sklearn.linear_model
        import sklearn.svm  # noqa: F401
        from threadpoolctl import ThreadpoolController

        _CONTROLLER.append(ThreadpoolController())
    return _CONTROLLER[0].limit(limits=1)


def _run_task(fn: Callable, args: tuple, parent_pid: int) -> Any:
    if os.getpid() != parent_pid:  # a worker process (joblib's loky backend): same limits as here
        from sklearn.exceptions import ConvergenceWarning

        with _thread_limit(), warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return fn(*args)
    return fn(*args)


def parallel_map(
    fn: Callable,
    tasks: Iterable[tuple],
    n_jobs: int | None,
    costs: Sequence[float] | None = None,
    prefer: str = "threads",
) -> list:
    """``[fn(*t) for t in tasks]``, run on ``n_jobs`` joblib workers when there is more than one.

    ``costs`` (optional, one per task) schedules the most expensive tasks first, which balances
    uneven tasks (e.g. one boosted-trees fit per factor with 3 vs 40 classes) across the workers.
    Results are returned in task order and do not depend on ``n_jobs``.

    ``prefer`` is joblib's hint: ``"threads"`` where the fits release the GIL (liblinear's SVMs:
    threads start instantly and copy nothing), ``"processes"`` where they hold it for long
    (lbfgs logistic regression, the Python loops of the boosters); worker processes start once per
    session (a few seconds) and are reused. ``joblib.parallel_config(backend=...)`` overrides it.
    BLAS/OpenMP are limited to one thread per task: the fits are small, oversubscribing the cores
    slows them down severalfold, and a fixed thread count keeps the floating-point results
    identical for any ``n_jobs``. Solver convergence warnings are silenced (the reference
    settings, e.g. 100 lbfgs iterations, are kept on purpose).
    """
    tasks = list(tasks)
    workers = resolve_n_jobs(n_jobs, len(tasks))
    order = list(range(len(tasks)))
    if costs is not None:
        order.sort(key=lambda i: -costs[i])
    from sklearn.exceptions import ConvergenceWarning

    pid = os.getpid()
    with _thread_limit(), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        if workers == 1:
            results = {i: fn(*tasks[i]) for i in order}
        else:
            from joblib import Parallel, delayed

            out = Parallel(n_jobs=workers, batch_size=1, prefer=prefer)(
                delayed(_run_task)(fn, tasks[i], pid) for i in order
            )
            results = dict(zip(order, out))
    return [results[i] for i in range(len(tasks))]
