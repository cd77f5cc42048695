"""What is cheap to adopt for CPU training: Adam's implementations, channels-last, torch.compile, bf16.

    python benchmarks/bench_train_cpu.py                       # 1 and 2 threads, 3 rounds, 60 steps
    python benchmarks/bench_train_cpu.py --threads 1 --modes adam-default,adam-fused

Trains the conv64 β-VAE of the quickstart (batch 64, Adam lr 1e-4, Bernoulli loss, β 4) on a
pre-rendered uint8 pool with a plain loop, the same step the trainer runs, in each mode:

* ``adam-default``: ``torch.optim.Adam`` as constructed with no implementation flag (on CPU tensors
  torch picks the single-tensor for-loop);
* ``adam-foreach``: ``foreach=True`` (one multi-tensor kernel per update stage);
* ``adam-fused``: ``fused=True`` (one fused kernel per parameter group; CPU support since torch 2.4);
* ``channels-last``: the model in ``torch.channels_last`` (inputs converted per batch), default Adam;
* ``compile``: the loss and backward step under ``torch.compile`` (default mode), default Adam;
* ``bf16``: ``torch.autocast("cpu", torch.bfloat16)`` around the forward pass (fast only on CPUs
  with AVX512-BF16 or AMX; the script prints the flags).

Modes run in alternating rounds in one process and the median steps/s of each is printed with its
ratio to ``adam-default``: ratios from one run, since the machine's speed drifts between runs.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from disentangle.backbones import BACKBONES  # noqa: E402

MODES = ("adam-default", "adam-foreach", "adam-fused", "channels-last", "compile", "bf16")


def make_step(mode: str):
    torch.manual_seed(0)
    enc, dec = BACKBONES.build("conv64", image_shape=(1, 64, 64), latent_dim=10)
    if mode == "channels-last":
        enc, dec = enc.to(memory_format=torch.channels_last), dec.to(memory_format=torch.channels_last)
    params = list(enc.parameters()) + list(dec.parameters())
    flags = {"adam-foreach": {"foreach": True}, "adam-fused": {"fused": True}}.get(mode, {})
    opt = torch.optim.Adam(params, lr=1e-4, **flags)
    autocast = mode == "bf16"

    def loss_of(x: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            mu, logvar = enc(x)
            z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
            logits = dec(z)
        logits, mu, logvar = logits.float(), mu.float(), logvar.float()
        rec = F.binary_cross_entropy_with_logits(logits, x, reduction="sum") / x.shape[0]
        kl = 0.5 * (mu.pow(2) + logvar.exp() - 1 - logvar).sum(1).mean()
        return rec + 4.0 * kl

    def step(x: torch.Tensor) -> None:
        loss = loss_of(x)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    if mode == "compile":
        step = torch.compile(step)
    return step


def rate(step, pool: torch.Tensor, steps: int, generator: torch.Generator, channels_last: bool) -> float:
    def batch() -> torch.Tensor:
        x = pool[torch.randint(0, len(pool), (64,), generator=generator)].float()
        return x.contiguous(memory_format=torch.channels_last) if channels_last else x

    for _ in range(5):
        step(batch())
    start = time.perf_counter()
    for _ in range(steps):
        step(batch())
    return steps / (time.perf_counter() - start)


def cpu_flags() -> str:
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")).split()
    except (OSError, StopIteration):
        return "flags unknown"
    native = [f for f in ("avx512_bf16", "amx_bf16") if f in flags]
    return "native bf16: " + (", ".join(native) if native else "none")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", default="1,2", help="comma-separated torch thread counts")
    parser.add_argument("--modes", default=",".join(MODES))
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    unknown = sorted(set(modes) - set(MODES))
    if unknown:
        print(f"unknown modes {unknown}; choose from {', '.join(MODES)}", file=sys.stderr)
        return 2
    print(f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}, {cpu_flags()}")
    pool = (torch.rand(20000, 1, 64, 64, generator=torch.Generator().manual_seed(0)) > 0.9).to(torch.uint8)
    for threads in [int(t) for t in args.threads.split(",")]:
        torch.set_num_threads(threads)
        steps = {m: make_step(m) for m in modes}
        rates: dict[str, list[float]] = {m: [] for m in modes}
        for _ in range(args.rounds):
            for m in modes:
                rates[m].append(rate(steps[m], pool, args.steps, torch.Generator().manual_seed(1), m == "channels-last"))
        base = statistics.median(rates[modes[0]])
        print(f"\n{threads} thread(s), batch 64, {args.steps} steps x {args.rounds} rounds (median steps/s, ratio to {modes[0]})")
        for m in modes:
            med = statistics.median(rates[m])
            print(f"  {m:<14} {med:7.2f}   {med / base:5.2f}x   rounds: {', '.join(f'{r:.2f}' for r in rates[m])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
