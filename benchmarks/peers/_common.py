"""What every worker of ``benchmarks/peers.py`` shares: its arguments, the thread setting, the
per-step clock and the JSON result file.

Workers run in different virtual environments (ours, disent's, pythae's), so this module imports
nothing but the standard library and torch. A worker is started as ``python WORKER.py --result
FILE --launched WALL_TIME ...``; ``WALL_TIME`` is ``time.time()`` taken by the driver just before it
started the process, so the start-up time (launch to the end of the first step) includes the
interpreter and every import.
"""
from __future__ import annotations

import argparse
import importlib.metadata
import json
import resource
import time
from pathlib import Path
from typing import Any


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--result", required=True, help="JSON file the worker writes")
    p.add_argument("--launched", type=float, default=None, help="time.time() when the driver started this process")
    p.add_argument("--threads", type=int, default=2)
    return p


def set_threads(threads: int) -> None:
    """torch's intra-op threads (the driver sets ``OMP_NUM_THREADS`` in the environment, which must
    be there before the process starts)."""
    import torch

    torch.set_num_threads(threads)


def versions(*names: str) -> dict[str, str]:
    """Installed distribution versions (``"-"`` for one that is not installed)."""
    out = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "-"
    return out


def parameter_count(*modules: Any) -> int:
    return sum(p.numel() for m in modules for p in m.parameters())


class StepClock:
    """Timestamps at the end of every training step (``time.perf_counter``), the process's minor
    page faults so far at each (``getrusage``: memory the allocator mapped afresh), and the
    wall-clock time of the first step's end (``time.time``, comparable with the driver's launch
    time)."""

    def __init__(self) -> None:
        self.ends: list[float] = []
        self.faults: list[int] = []
        self.first_end_wall: float | None = None
        self.threads_at_first_step: int | None = None

    def tick(self) -> None:
        self.ends.append(time.perf_counter())
        self.faults.append(minor_faults())
        if self.first_end_wall is None:
            import torch

            self.first_end_wall = time.time()
            self.threads_at_first_step = torch.get_num_threads()

    def __len__(self) -> int:
        return len(self.ends)

    def result(self, launched: float | None) -> dict[str, Any]:
        return {
            "step_ends": self.ends,
            "step_faults": self.faults,
            "torch_threads": self.threads_at_first_step,
            "startup_s": None if launched is None or self.first_end_wall is None else self.first_end_wall - launched,
        }


def minor_faults() -> int:
    """This process's minor page faults so far (memory mapped afresh)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def write_result(path: str | Path, result: dict[str, Any]) -> None:
    Path(path).write_text(json.dumps(result))


def load_images(path: str | Path):
    """The exported training images: uint8 0/1, ``(N, 64, 64)``."""
    import numpy as np

    return np.load(path)
