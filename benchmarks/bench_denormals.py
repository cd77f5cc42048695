"""Denormal floats in a trained run, and what flushing them to zero is worth on this CPU.

    python benchmarks/bench_denormals.py RUN_DIR                 # 300 steps each way, 2 rounds, 1 thread
    python benchmarks/bench_denormals.py RUN_DIR --steps 500 --rounds 3 --threads 2

Deep in training, some weights, gradients and Adam moments fall below float32's normal range
(1.2e-38): Adam's second moment is a square, so a gradient of 1e-20 gives one of 1e-40. A CPU
computes with such denormal numbers many times slower, unless it flushes them to zero
(``train.flush_denormal``, on by default for CPU runs). A fresh run has none, so a benchmark from
step 0 shows nothing: this one resumes a copy of a trained run (``RUN_DIR``, left untouched) for
``--steps`` steps with ``train.flush_denormal=false`` and ``=true`` in alternating rounds, each a
fresh ``python -m disentangle.train --resume`` process, and prints the denormal floats of the
checkpoint, each setting's median steps/s (from ``log.jsonl``, the first record left out) and the
ratio. Prints the CPU first.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout without installing

from benchmarks.bench_trainer_options import rate_after_first_record  # noqa: E402

#: the smallest normal float32: smaller non-zero magnitudes are denormal
SMALLEST_NORMAL = torch.finfo(torch.float32).tiny
RUN_FILES = ("checkpoint.pt", "config.yaml", "log.jsonl", "execution.jsonl")


def denormal_counts(checkpoint: dict) -> dict[str, tuple[int, int]]:
    """``{part: (float values, denormal values)}`` of a checkpoint's model, objective and optimizers."""
    def tensors(node):
        if isinstance(node, torch.Tensor):
            if node.is_floating_point():
                yield node
        elif isinstance(node, dict):
            for value in node.values():
                yield from tensors(value)
        elif isinstance(node, (list, tuple)):
            for value in node:
                yield from tensors(value)

    counts = {}
    for part in ("model", "objective", "optimizers"):
        total = denormal = 0
        for t in tensors(checkpoint.get(part, {})):
            t = t.float()
            total += t.numel()
            denormal += int(((t != 0) & (t.abs() < SMALLEST_NORMAL)).sum())
        counts[part] = (total, denormal)
    return counts


def steps_per_s(run_dir: Path, start: int, steps: int, threads: int, flush: bool) -> float:
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "run"
        copy.mkdir()
        for name in RUN_FILES:
            if (run_dir / name).exists():
                shutil.copy2(run_dir / name, copy / name)
        subprocess.run([sys.executable, "-m", "disentangle.train", "--resume", str(copy), "--quiet",
                        f"train.steps={start + steps}", f"train.flush_denormal={str(flush).lower()}",
                        f"train.threads={threads}", "train.progress=false", "train.log_every=50",
                        "train.eval_every=0", "train.eval_metrics=[]", "train.checkpoint_every=1000000"],
                       check=True, cwd=REPO)
        rows = [json.loads(line) for line in (copy / "log.jsonl").read_text().splitlines()]
        return rate_after_first_record([r for r in rows if r.get("step", 0) > start])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path, help="a trained run folder (copied, never changed)")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    from disentangle.training.bench import cpu_capabilities

    print(cpu_capabilities())
    checkpoint = torch.load(args.run_dir / "checkpoint.pt", map_location="cpu", weights_only=True, mmap=True)
    start = int(checkpoint["step"])
    for part, (total, denormal) in denormal_counts(checkpoint).items():
        print(f"step {start:,}: {part}: {denormal:,} denormal of {total:,} float values")
    rates: dict[bool, list[float]] = {False: [], True: []}
    for r in range(args.rounds):
        for flush in (False, True):
            rates[flush].append(steps_per_s(args.run_dir, start, args.steps, args.threads, flush))
        print(f"round {r}: kept {rates[False][-1]:.2f}, flushed {rates[True][-1]:.2f} steps/s", flush=True)
    kept, flushed = statistics.median(rates[False]), statistics.median(rates[True])
    print(f"median over {args.rounds} rounds, {args.steps} steps from step {start:,}, {args.threads} thread(s): "
          f"denormals kept {kept:.2f} steps/s, flushed {flushed:.2f} steps/s: {flushed / kept:.2f}x")


if __name__ == "__main__":
    main()
