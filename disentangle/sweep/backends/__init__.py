"""Sweep backends: the engines that run the run-one function over the runs of a sweep.

Every backend is a function ``backend(tasks, options, report)`` registered in :data:`BACKENDS`;
it runs :func:`disentangle.sweep.runner.run_one` on every task (on a local process pool, Ray
Core tasks or Slurm job arrays through submitit) and calls ``report(outcome)`` as each run ends.
The engines schedule; the sweep only decides what to run, so skipping and resuming behave the
same everywhere.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..._core.registry import Registry

BACKENDS: Registry = Registry("sweep backend")


@dataclass
class BackendOptions:
    """Options of the backends; ``None`` means "not given" (the backend's default)."""

    workers: int | None = None  #: local: pool processes (default 1)
    threads_per_run: int | None = None  #: torch threads per run (default: cores / workers)
    max_retries: int = 2  #: local: pool restarts after a worker died; ray: task retries on worker death
    address: str | None = None  #: ray: cluster address ("auto", "ray://host:10001"); None starts a local one
    gpus_per_run: float | None = None  #: ray: GPUs per run, fractional allowed (0.25: four runs per GPU)
    partition: str | None = None  #: slurm: partition
    time_min: int | None = None  #: slurm: time limit of an array task, minutes (required: see the slurm backend)
    max_requeues: int | None = None  #: slurm: requeues of an array task that reached its time limit (default 3)
    gpus_per_task: int | None = None  #: slurm: GPUs of each array task
    runs_per_task: int | None = None  #: slurm: runs done one after another by each array task (default 1)
    max_array_size: int | None = None  #: slurm: jobs per submitted array (default 1000, below Slurm's MaxArraySize)
    array_parallelism: int | None = None  #: slurm: array tasks of each array running at once (default: submitit's, 256)
    cluster: str | None = None  #: slurm: submitit cluster: slurm (default), local or debug (tests)
    wait: bool = True  #: slurm: wait for the jobs (False: submit and return)
    slurm_params: dict[str, Any] = field(default_factory=dict)  #: extra submitit slurm_* parameters

    #: the options each backend reads (others given for it are reported as errors)
    BY_BACKEND = {
        "local": ("workers", "threads_per_run", "max_retries"),
        "ray": ("threads_per_run", "max_retries", "address", "gpus_per_run", "workers"),
        "slurm": (
            "threads_per_run", "partition", "time_min", "max_requeues", "gpus_per_task", "runs_per_task",
            "max_array_size", "array_parallelism", "cluster", "wait", "slurm_params",
        ),
    }


Report = Callable[[Any], None]


def _register() -> None:
    from . import local, ray, slurm

    BACKENDS.register("local", local.run_local)
    BACKENDS.register("ray", ray.run_ray)
    BACKENDS.register("slurm", slurm.run_slurm)


_register()
