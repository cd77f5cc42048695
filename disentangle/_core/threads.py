"""How many CPU threads a process uses, and how they wait: the ``train.threads`` / ``--threads``
setting.

Two things decide how fast PyTorch runs on a CPU shared with other work (a workstation where
another job runs, a cluster node shared by several jobs, a container limited by a CPU quota):

* **The number of threads.** PyTorch starts one per CPU of the *machine*; a process restricted by
  an affinity mask (``taskset``, Slurm's ``--cpus-per-task``) or a cgroup CPU quota (Docker's
  ``--cpus``, Kubernetes' limits) may use fewer. ``auto`` (:func:`choose_threads`) takes
  ``OMP_NUM_THREADS`` when the user set it, else the CPUs this process may use:
  ``min(len(os.sched_getaffinity(0)), ceil(cgroup quota))``.
* **How idle threads wait.** GNU OpenMP, PyTorch's thread pool on Linux, lets a thread that waits
  for work *spin* on its core for a while (``OMP_WAIT_POLICY=active`` behaviour, its default). On a
  CPU that another process also uses, the spinning threads take turns with the other process, and
  each parallel region waits for the slowest: the quickstart ran 8-12x slower with one other
  CPU-bound process on 2 cores (``benchmarks/bench_threads.py``). With ``OMP_WAIT_POLICY=passive``
  waiting threads sleep instead and yield the core. OpenMP reads the variable once, when PyTorch
  is imported, so :func:`default_wait_policy` sets it when ``disentangle`` is imported before
  ``torch`` (every command line of the package) and the user has not set it; a user who imports
  ``torch`` first keeps OpenMP's default, and :func:`wait_policy` says which applies.

More threads than CPUs (``--threads 999`` on 2 cores; a sweep's ``--workers`` × ``--threads-per-run``
above the CPUs) take turns on the CPUs and run slower than one thread per CPU would:
:func:`warn_if_oversubscribed` logs a warning naming the CPU count and what to use.
"""
from __future__ import annotations

import logging
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

#: OpenMP's wait policy the package sets when nothing else did (module docstring)
DEFAULT_WAIT_POLICY = "passive"
_WAIT_POLICY_ENV = "OMP_WAIT_POLICY"
#: a user who sets one of these tunes OpenMP's waiting: the package leaves it alone (GOMP_SPINCOUNT is
#: GNU OpenMP's spin length, KMP_BLOCKTIME Intel OpenMP's)
_USER_WAIT_SETTINGS = (_WAIT_POLICY_ENV, "GOMP_SPINCOUNT", "KMP_BLOCKTIME")
#: set by :func:`default_wait_policy` when it chose the policy (so the reason can be reported)
_SET_BY_PACKAGE_ENV = "DISENTANGLE_SET_OMP_WAIT_POLICY"


def default_wait_policy() -> None:
    """Set ``OMP_WAIT_POLICY`` to :data:`DEFAULT_WAIT_POLICY` when ``torch`` is not imported yet and
    the environment does not set it (called first thing by ``import disentangle``)."""
    if any(name in os.environ for name in _USER_WAIT_SETTINGS) or "torch" in sys.modules:
        return
    os.environ[_WAIT_POLICY_ENV] = DEFAULT_WAIT_POLICY.upper()
    os.environ[_SET_BY_PACKAGE_ENV] = "1"  # inherited by subprocesses, which report the same reason


def wait_policy() -> tuple[str, str]:
    """OpenMP's wait policy in this process and why: ``("passive", "set by disentangle ...")``."""
    value = os.environ.get(_WAIT_POLICY_ENV)
    if value is None:
        for name in _USER_WAIT_SETTINGS[1:]:
            if name in os.environ:
                return f"{name}={os.environ[name]}", f"{name} in the environment"
        return "OpenMP's default", "torch was imported before disentangle (set OMP_WAIT_POLICY=passive)"
    if os.environ.get(_SET_BY_PACKAGE_ENV) == "1" and value.lower() == DEFAULT_WAIT_POLICY:
        return DEFAULT_WAIT_POLICY, "disentangle's default: waiting threads yield a CPU shared with other jobs"
    return value.lower(), "OMP_WAIT_POLICY in the environment"


def cgroup_cpu_quota(root: str | Path = "/sys/fs/cgroup", self_cgroup: str | Path = "/proc/self/cgroup") -> float | None:
    """CPUs' worth of time this process's cgroup may use (``quota / period``), the smallest over its
    cgroup and their ancestors; None without a quota (or where it cannot be read).

    cgroup v2: ``cpu.max`` holds ``"QUOTA PERIOD"`` or ``"max PERIOD"``; v1: ``cpu.cfs_quota_us``
    (``-1``: none) and ``cpu.cfs_period_us`` under the ``cpu`` controller's folder."""
    root = Path(root)
    limits: list[float] = []
    for controllers, path in _cgroup_paths(Path(self_cgroup)):
        if controllers == "":  # v2: the unified hierarchy (under unified/ on a hybrid v1/v2 host)
            for base in (root, root / "unified"):
                for folder in _self_and_ancestors(base, path):
                    limit = _read_v2(folder / "cpu.max")
                    if limit is not None:
                        limits.append(limit)
        elif "cpu" in controllers.split(","):
            for base in (root / "cpu", root / "cpu,cpuacct", root / "cpuacct,cpu"):
                for folder in _self_and_ancestors(base, path):
                    limit = _read_v1(folder)
                    if limit is not None:
                        limits.append(limit)
    return min(limits) if limits else None


def _cgroup_paths(self_cgroup: Path) -> list[tuple[str, str]]:
    try:
        lines = self_cgroup.read_text().splitlines()
    except OSError:
        return [("", "/")]
    paths = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3:
            paths.append((parts[1], parts[2]))
    return paths or [("", "/")]


def _self_and_ancestors(base: Path, path: str) -> list[Path]:
    parts = [p for p in path.strip("/").split("/") if p and p != ".."]
    return [base.joinpath(*parts[:i]) for i in range(len(parts), -1, -1)]


def _read_v2(file: Path) -> float | None:
    try:
        quota, period = file.read_text().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    try:
        return int(quota) / int(period)
    except (ValueError, ZeroDivisionError):
        return None


def _read_v1(folder: Path) -> float | None:
    try:
        quota = int((folder / "cpu.cfs_quota_us").read_text())
        period = int((folder / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None


def affinity_cpus() -> int:
    """CPUs in this process's affinity mask (the machine's count where the mask cannot be read)."""
    if hasattr(os, "sched_getaffinity"):
        try:
            return len(os.sched_getaffinity(0))
        except OSError:
            pass
    return os.cpu_count() or 1


@dataclass(frozen=True)
class ThreadChoice:
    """``train.threads`` resolved: the intra-op thread count and why."""

    threads: int
    reason: str


def choose_threads(
    setting: int | str = "auto", *, affinity: int | None = None, quota: float | None | str = "read",
    environ: dict[str, str] | None = None,
) -> ThreadChoice:
    """Resolve a thread setting: a positive int is taken as given; ``"auto"`` is ``OMP_NUM_THREADS``
    when set, else the CPUs this process may use, ``min(affinity, ceil(quota))`` (module docstring),
    shared between the ``LOCAL_WORLD_SIZE`` processes of a ``torchrun`` launch on this machine.

    ``affinity``, ``quota`` and ``environ`` default to this process's (given, they let a test fake
    a machine)."""
    if setting != "auto":
        return ThreadChoice(int(setting), "set")
    environ = os.environ if environ is None else environ
    given = environ.get("OMP_NUM_THREADS", "").strip()
    if given.isdigit() and int(given) > 0:
        return ThreadChoice(int(given), "auto: OMP_NUM_THREADS in the environment")
    usable, where = usable_cpus(affinity=affinity, quota=quota)
    local = environ.get("LOCAL_WORLD_SIZE", "").strip()
    processes = int(local) if local.isdigit() and int(local) > 1 else 1
    if processes > 1:
        return ThreadChoice(max(1, usable // processes), f"auto: {where}, shared by {processes} processes")
    return ThreadChoice(max(1, usable), f"auto: {where}")


def usable_cpus(*, affinity: int | None = None, quota: float | None | str = "read") -> tuple[int, str]:
    """The CPUs this process may use, ``min(affinity, ceil(quota))``, and where the count comes from
    (``"the CPUs of this machine"``, ``"the affinity mask (2 of 8 CPUs)"``, the cgroup's quota).
    ``affinity`` and ``quota`` default to this process's (given, they let a test fake a machine)."""
    cpus = affinity_cpus() if affinity is None else affinity
    limit = cgroup_cpu_quota() if quota == "read" else quota
    if limit is not None and math.ceil(limit) < cpus:
        return max(1, math.ceil(limit)), f"the cgroup's CPU quota ({limit:g} CPUs; {cpus} in the affinity mask)"
    total = os.cpu_count() or cpus
    where = "the CPUs of this machine" if cpus == total else f"the affinity mask ({cpus} of {total} CPUs)"
    return max(1, cpus), where


def warn_if_oversubscribed(
    threads: int, *, threads_option: str, processes: int = 1, processes_option: str = "",
    affinity: int | None = None, quota: float | None | str = "read", processes_given: str | None = None,
) -> str | None:
    """Log a warning, and return it, when ``processes`` processes of ``threads`` CPU threads each ask
    for more threads than the CPUs this process may use (:func:`usable_cpus`); None when they fit.

    ``threads_option`` and ``processes_option`` are the settings as the user writes them, with their
    separator (``"train.threads="``, ``"--threads-per-run "``, ``"--workers "``): the message names
    what was given, the CPU count and where it comes from, and the values to use. The training loop
    (``train.threads`` / ``--threads``) and ``python -m disentangle.sweep run`` (``--workers`` ×
    ``--threads-per-run``) both check here. ``processes_given`` names the processes where the option
    alone would not (``"--workers 8 with 3 runs to do"``)."""
    total = threads * processes
    cpus, where = usable_cpus(affinity=affinity, quota=quota)
    if total <= cpus:
        return None
    if processes > 1:
        named = processes_given or f"{processes_option}{processes}"
        given = f"{named} × {threads_option}{threads} is {total:,} CPU threads"
        workers = min(processes, cpus)
        fix = (f"Keep {processes_option.strip()} × {threads_option.strip().rstrip('=')} at {cpus} or below, e.g. "
               f"{processes_option}{workers} {threads_option}{max(1, cpus // workers)}.")
    else:
        given = f"{threads_option.strip().rstrip('=')} is {threads:,}"
        fix = f"Use {threads_option}{cpus} or fewer, or {threads_option}1 on CPUs shared with other jobs."
    message = (
        f"{given}, but this process may use {cpus} CPU{'s' if cpus > 1 else ''} ({where}): the threads beyond "
        f"{cpus} take turns on the same CPUs and make every step slower, not faster. {fix}"
    )
    logger.warning(message)
    return message


def check_threads_setting(name: str, value: object) -> int | str:
    """``value`` as a thread setting (``"auto"`` or a positive int), else a ``ConfigError`` naming
    ``name`` (a config key or a CLI option)."""
    from ..errors import ConfigError

    if value == "auto":
        return "auto"
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    raise ConfigError(
        f"{name} is {value!r}; expected 'auto' (the CPUs this process may use: its affinity mask and cgroup "
        f"quota, or OMP_NUM_THREADS when set) or a positive number of threads, e.g. {name}=1 on a CPU "
        f"shared with other jobs."
    )


def apply_threads(setting: int | str = "auto") -> ThreadChoice:
    """Resolve ``setting`` (:func:`choose_threads`) and set torch's intra-op threads to it."""
    import torch

    choice = choose_threads(setting)
    if torch.get_num_threads() != choice.threads:
        torch.set_num_threads(choice.threads)
    return choice
