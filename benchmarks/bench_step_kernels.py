"""The conv64 training step's kernels, measured in one process: transposed convolutions' gradients by
PyTorch or by regular-convolution kernels (``train.conv_transpose_via_conv``), and Adam fused or
torch's default (``foreach``), in fp32 and bf16 autocast, channels-last or not.

    python benchmarks/bench_step_kernels.py                       # 8 rounds x 25 steps, 2 threads
    python benchmarks/bench_step_kernels.py --rounds 12 --steps 40 --threads 1

Every variant is a conv64 β-VAE (β 4, batch 64, lr 1e-4, reference init, seed 0) trained by the
objective's own ``train_step`` on the same pool of rendered sprites (drawn by index, as a
materialised grid is), with glibc's allocator keeping freed memory as the trainer's is. All
variants are built first and then timed in turn, ``--steps`` steps each, for ``--rounds`` rounds,
so that every variant sees the same drift of the machine's speed; each round's ratio to the first
variant is taken within that round, and the table gives the medians.
Separate processes vary by about ±10 % on a 2-core VM, which is larger than some of the effects.
Prints the CPU first (model, torch capability, bf16 flags).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout without installing

from disentangle._core.hardware import keep_freed_memory  # noqa: E402
from disentangle.data import build_dataset  # noqa: E402
from disentangle.models.vae import VAE  # noqa: E402
from disentangle.objectives import OBJECTIVES  # noqa: E402
from disentangle.training.bench import cpu_capabilities  # noqa: E402
from disentangle.training.conv_transpose import use_convolution_kernels  # noqa: E402
from disentangle.training.precision import Precision  # noqa: E402

#: name -> (precision, channels-last, transposed-convolution gradients by convolution kernels, fused Adam)
VARIANTS = {
    "bf16 CL · PyTorch backward · foreach Adam": ("bf16", True, False, False),
    "bf16 CL · PyTorch backward · fused Adam": ("bf16", True, False, True),
    "bf16 CL · conv kernels · foreach Adam": ("bf16", True, True, False),
    "bf16 CL · conv kernels · fused Adam (today's default)": ("bf16", True, True, True),
    "bf16 · PyTorch backward · fused Adam": ("bf16", False, False, True),
    "bf16 · conv kernels · fused Adam": ("bf16", False, True, True),
    "fp32 CL · PyTorch backward · fused Adam": ("fp32", True, False, True),
    "fp32 CL · conv kernels · fused Adam": ("fp32", True, True, True),
    "fp32 · PyTorch backward · fused Adam": ("fp32", False, False, True),
    "fp32 · conv kernels · fused Adam": ("fp32", False, True, True),
}


class Variant:
    def __init__(self, precision: str, channels_last: bool, via_conv: bool, fused: bool, pool: torch.Tensor) -> None:
        torch.manual_seed(0)
        self.model = VAE.from_backbone("conv64", image_shape=(1, 64, 64), latent_dim=10, init="reference")
        self.objective = OBJECTIVES.build("beta_vae", beta=4.0)
        if channels_last:
            self.model.to(memory_format=torch.channels_last)
        if via_conv:
            use_convolution_kernels(self.model, self.objective)
        self.optimizers = {"model": torch.optim.Adam(self.model.parameters(), lr=1e-4, fused=fused)}
        self.precision = Precision(precision, torch.device("cpu"))
        self.pool = pool
        self.generator = torch.Generator().manual_seed(0)
        self.model.train()
        self.objective.train()

    def step(self) -> None:
        index = torch.randint(0, len(self.pool), (64,), generator=self.generator)
        x = self.pool[index].float()
        self.objective.train_step(self.model, x, step=0, optimizers=self.optimizers, precision=self.precision)

    def time(self, steps: int) -> float:
        start = time.perf_counter()
        for _ in range(steps):
            self.step()
        return (time.perf_counter() - start) / steps


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--steps", type=int, default=25, help="timed steps per variant and round")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--pool", type=int, default=8192, help="rendered sprites drawn from")
    p.add_argument("--variants", default=",".join(VARIANTS),
                   help="comma-separated names of VARIANTS (their parts are separated by ' · ')")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    allocator = keep_freed_memory()  # as the trainer does on a CPU
    caps = cpu_capabilities()
    print(f"CPU: {caps['cpu_model']}; torch {torch.__version__}, capability {caps['torch_cpu_capability']}, "
          f"bf16 flags: {caps['bf16_flags']}; {args.threads} thread(s); allocator {allocator}", flush=True)
    names = [n.strip() for n in args.variants.split(",") if n.strip()]
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        raise SystemExit(f"error: unknown variant(s) {unknown}; choose from {list(VARIANTS)}")
    dataset = build_dataset({"name": "sprites"})
    pool = (dataset.sample_batch(args.pool, torch.Generator().manual_seed(0)) > 0.5).to(torch.uint8)  # 0/1 pixels
    variants = {name: Variant(*VARIANTS[name], pool=pool) for name in names}
    for v in variants.values():  # warm-up: oneDNN's primitive caches, the allocator
        for _ in range(10):
            v.step()
    seconds: dict[str, list[float]] = {name: [] for name in names}
    for r in range(args.rounds):
        for name, v in variants.items():
            seconds[name].append(v.time(args.steps))
        print(f"round {r + 1}/{args.rounds}: " + ", ".join(f"{s[-1] * 1000:.1f}" for s in seconds.values())
              + " ms/step", flush=True)
    base = seconds[names[0]]
    print(f"\n| variant | ms/step (median) | steps/s | speed ÷ {names[0]} (median of per-round ratios) |")
    print("|---|---:|---:|---:|")
    for name, s in seconds.items():
        ratio = statistics.median(b / x for b, x in zip(base, s))
        print(f"| {name} | {statistics.median(s) * 1000:.2f} | {1 / statistics.median(s):.1f} | {ratio:.3f}× |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
