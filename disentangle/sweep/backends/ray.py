"""The Ray backend: one Ray Core task (``ray.remote``, not Tune) per run.

* ``address``: connect to a running cluster (``"auto"``, ``"ray://head:10001"``; ``workers`` is
  then not used: the cluster's resources decide); ``None`` starts a new local Ray instance for the
  sweep (``address="local"``: not the cluster that ``RAY_ADDRESS`` or a ``ray start`` on this machine
  names), with ``workers * threads_per_run`` CPUs if ``workers`` is given, and shuts it down at the
  end; an already initialised Ray (``ray.init`` in your session) is used as is. Over several nodes
  the sweep folder must be on a filesystem every node sees: the runs write there, and the driver
  reads their results there.
* Each task asks for ``threads_per_run`` CPUs (default 1) and ``gpus_per_run`` GPUs, which may be
  fractional: ``0.25`` lets four small VAEs share one GPU (Ray sets ``CUDA_VISIBLE_DEVICES``;
  ``train.device: auto`` then picks it). Without ``gpus_per_run``, a run whose ``train.device`` is
  not ``cpu`` asks for one GPU where the cluster has GPUs, and none elsewhere: Ray hides every GPU
  from a task that asks for none (``CUDA_VISIBLE_DEVICES=""``), so ``auto`` would train on the CPU.
* A task whose worker dies (node lost, out of memory) is retried by Ray up to ``max_retries``
  times; the retry resumes from the run's checkpoint. Failures inside a run (NaN, errors) are
  recorded by the run-one function, not retried.
* Ray reuses its worker processes, so a worker keeps the last dataset it built for the next run.
"""
from __future__ import annotations

import logging

from ...errors import DisentangleError
from ..files import RunState
from ..runner import RunOutcome, RunTask, run_one

logger = logging.getLogger(__name__)


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


def gpus_for(task: RunTask, gpus_per_run: float | None, cluster_gpus: float) -> float:
    """The GPUs a run's task asks for: ``gpus_per_run`` if given; else one where the cluster has
    GPUs and the run may use one (``train.device`` not ``cpu``), none elsewhere (module docstring)."""
    if gpus_per_run is not None:
        return float(gpus_per_run)
    device = str((task.config.get("train") or {}).get("device", "auto"))
    return 1.0 if cluster_gpus > 0 and device != "cpu" else 0.0


def run_ray(tasks: list[RunTask], options, report, folder=None) -> None:
    ray = _ray_module()
    started = False
    if not ray.is_initialized():
        kwargs = {"include_dashboard": False, "logging_level": "warning", "log_to_driver": False}
        if options.address:
            kwargs["address"] = options.address
            if options.workers:  # Ray refuses num_cpus when it connects to a cluster
                logger.warning(f"--workers {options.workers} is not used with --address: the cluster's CPUs "
                               f"and GPUs decide how many runs train at once.")
        else:
            kwargs["address"] = "local"  # a new instance, whatever RAY_ADDRESS or a running `ray start` say
            if options.workers:
                kwargs["num_cpus"] = options.workers * (options.threads_per_run or 1)
        ray.init(**kwargs)
        started = True
    try:
        remote = ray.remote(_ray_run_one)
        cluster_gpus = float(ray.cluster_resources().get("GPU", 0) or 0)
        if options.gpus_per_run is None and cluster_gpus > 0:
            logger.info(f"the cluster has {cluster_gpus:g} GPUs: each run that may use one asks for one "
                        f"(--gpus-per-run 0.25 packs four small runs on a GPU)")

        def submitted(task: RunTask):
            return remote.options(
                num_cpus=options.threads_per_run or 1,
                num_gpus=gpus_for(task, options.gpus_per_run, cluster_gpus),
                max_retries=options.max_retries,
                retry_exceptions=False,
            ).remote(task)

        pending = {submitted(task): task for task in tasks}
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
