"""The Ray backend: one Ray Core task (``ray.remote``, not Tune) per run.

* ``address``: connect to a running cluster (``"auto"``, ``"ray://head:10001"``); ``None`` starts
  a local Ray instance for the sweep (and shuts it down at the end); an already initialised Ray
  (``ray.init`` in your session) is used as is.
* Each task asks for ``threads_per_run`` CPUs (default 1) and ``gpus_per_run`` GPUs, which may be
  fractional: ``0.25`` lets four small VAEs share one GPU (Ray sets ``CUDA_VISIBLE_DEVICES``;
  ``train.device: auto`` then picks it).
* A task whose worker dies (node lost, out of memory) is retried by Ray up to ``max_retries``
  times; the retry resumes from the run's checkpoint. Failures inside a run (NaN, errors) are
  recorded by the run-one function, not retried.
* Ray reuses its worker processes, so a worker keeps the last dataset it built for the next run.
"""
from __future__ import annotations

from ...errors import DisentangleError
from ..files import RunState
from ..runner import RunOutcome, RunTask, run_one


def _ray_module():
    try:
        import ray
    except ImportError:
        raise DisentangleError(
            "The ray backend needs Ray, which is not installed. Install it with "
            "pip install 'disentangle-torch[ray]' (or pip install 'ray>=2.9'), or use --backend local."
        ) from None
    return ray


def check_available() -> None:
    _ray_module()


def _ray_run_one(task: RunTask) -> RunOutcome:
    return run_one(task)


def run_ray(tasks: list[RunTask], options, report, folder=None) -> None:
    ray = _ray_module()
    started = False
    if not ray.is_initialized():
        kwargs = {"include_dashboard": False, "logging_level": "warning", "log_to_driver": False}
        if options.address:
            kwargs["address"] = options.address
        elif options.workers:
            kwargs["num_cpus"] = options.workers * (options.threads_per_run or 1)
        ray.init(**kwargs)
        started = True
    try:
        remote = ray.remote(_ray_run_one).options(
            num_cpus=options.threads_per_run or 1,
            num_gpus=options.gpus_per_run or 0,
            max_retries=options.max_retries,
            retry_exceptions=False,
        )
        pending = {remote.remote(task): task for task in tasks}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            task = pending.pop(ready[0])
            try:
                outcome = ray.get(ready[0])
            except ray.exceptions.RayError as err:
                line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
                outcome = RunOutcome(task.run_id, RunState.CRASHED, 0.0, f"{type(err).__name__}: {line}", task.describe())
            report(outcome)
    finally:
        if started:
            ray.shutdown()
