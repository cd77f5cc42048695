"""Host syncs and eager step rates of every shipped sprites recipe on a real GPU.

    python benchmarks/gpu_host_sync.py [--steps 30] [--loop-steps 400] [--configs sprites/beta_vae ...]

``tests/training/test_host_sync.py`` checks on a CPU that no training step reads the device; what a
CPU cannot show (syncs CUDA makes inside an op, a copy from pageable memory, the optimizer's own
code) shows here. For each shipped config of ``configs/sprites/`` and ``configs/weak/*_sprites``:

1. three warm-up steps (allocator, cuDNN's choices, optimizer state);
2. ``--steps`` calls of ``Trainer.train_step`` (the data draw, forward, backward, every optimizer's
   step, the schedulers) under ``torch.cuda.set_sync_debug_mode("warn")``: every synchronizing CUDA
   call warns, and each warning's source line is counted;
3. the same number of steps timed between two ``torch.cuda.synchronize`` (eager, the config's
   precision), printed as steps/s.

Then ``--loop-steps`` steps of the whole loop (``Trainer.fit``: logging every 100 steps, no
checkpoint, no evaluation) of the first config under the same mode, to count the syncs the loop
itself makes per log step. ``--profile CONFIG`` instead profiles 20 eager steps of one config
(``torch.profiler``): wall time and GPU kernel time per step, kernels per step, and the ops that
take the most host time. Prints tables; nothing is written. Needs CUDA.
"""
from __future__ import annotations

import argparse
import collections
import tempfile
import time
import warnings
from pathlib import Path

import torch

from disentangle.config import load_config
from disentangle.training.runtime import resolve_device
from disentangle.training.trainer import Trainer

ROOT = Path(__file__).resolve().parents[1]


def shipped_sprites_configs() -> list[str]:
    names = [f"sprites/{p.stem}" for p in sorted((ROOT / "configs" / "sprites").glob("*.yaml"))]
    names += [f"weak/{p.stem}" for p in sorted((ROOT / "configs" / "weak").glob("*_sprites.yaml"))]
    return names


def _trainer(name: str, out: Path, overrides: list[str] = ()) -> Trainer:
    config = load_config(
        name, [f"train.out_dir={out}", "train.device=cuda", "train.progress=false", "train.traversals=false",
               "train.compile=false", *overrides])
    return Trainer(config)


def _sources(caught: list[warnings.WarningMessage]) -> collections.Counter:
    return collections.Counter(
        f"{Path(w.filename).name}:{w.lineno}" for w in caught if "synchroniz" in str(w.message))


def step_syncs(name: str, steps: int, out: Path) -> tuple[float, collections.Counter, str]:
    trainer = _trainer(name, out)
    trainer.device = resolve_device(trainer.config.train.device)  # what fit() sets before building
    trainer._build()
    for _ in range(3):
        trainer.train_step()
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            for _ in range(steps):
                trainer.train_step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        trainer.train_step()
    torch.cuda.synchronize()
    rate = steps / (time.perf_counter() - start)
    return rate, _sources(caught), trainer.config.train.precision


def loop_syncs(name: str, steps: int, out: Path) -> tuple[int, collections.Counter, float]:
    trainer = _trainer(name, out, [f"train.steps={steps}", "train.log_every=100",
                                   f"train.checkpoint_every={steps * 10}", "train.eval_every=0"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        start = time.perf_counter()
        try:
            trainer.fit()
        finally:
            torch.cuda.set_sync_debug_mode("default")
        seconds = time.perf_counter() - start
    counts = _sources(caught)
    return sum(counts.values()), counts, steps / seconds


def profile_steps(name: str, out: Path, steps: int = 20) -> None:
    from torch.profiler import ProfilerActivity, profile

    trainer = _trainer(name, out)
    trainer.device = resolve_device(trainer.config.train.device)
    trainer._build()
    for _ in range(5):
        trainer.train_step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        start = time.perf_counter()
        for _ in range(steps):
            trainer.train_step()
        torch.cuda.synchronize()
        wall = (time.perf_counter() - start) / steps
    events = prof.key_averages()
    kernel_us = sum(e.self_device_time_total for e in events) / steps
    kernels = sum(e.count for e in events if e.device_type == torch.autograd.DeviceType.CUDA) / steps
    print(f"\nprofile {name}: {wall * 1e3:.2f} ms a step (profiled), GPU kernels {kernel_us / 1e3:.2f} ms a step, "
          f"{kernels:.0f} kernels a step")
    print(events.table(sort_by="self_cpu_time_total", row_limit=15, max_name_column_width=50))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--loop-steps", type=int, default=400)
    p.add_argument("--configs", nargs="*", default=None)
    p.add_argument("--profile", default=None, metavar="CONFIG", help="profile 20 eager steps of one config instead")
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("gpu_host_sync.py needs CUDA")
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    if args.profile:
        with tempfile.TemporaryDirectory() as tmp:
            profile_steps(args.profile, Path(tmp))
        return
    names = args.configs or shipped_sprites_configs()
    print(f"\n{'config':34s} {'precision':9s} {'steps/s':>8s} {'syncs/step':>10s}  where")
    with tempfile.TemporaryDirectory() as tmp:
        for i, name in enumerate(names):
            try:
                rate, counts, precision = step_syncs(name, args.steps, Path(tmp) / f"s{i}")
            except Exception as e:  # report and go on: one recipe's failure is a finding, not the end
                print(f"{name:34s} failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
                continue
            where = ", ".join(f"{k} x{v}" for k, v in counts.most_common(4))
            print(f"{name:34s} {precision:9s} {rate:8.0f} {sum(counts.values()) / args.steps:10.2f}  {where}")
        if args.loop_steps:
            total, counts, rate = loop_syncs(names[0], args.loop_steps, Path(tmp) / "loop")
            print(f"\nthe loop (Trainer.fit), {names[0]}, {args.loop_steps} steps, log every 100: {total} syncs "
                  f"({total / max(args.loop_steps // 100, 1):.1f} per log step), {rate:.0f} steps/s with the set-up")
            for where, n in counts.most_common(12):
                print(f"  {where} x{n}")


if __name__ == "__main__":
    main()
