"""Training-throughput benchmark: ``python -m disentangle.training.bench [--device auto] [--steps 60]``.

Prints, measured in one run on the current device:

1. the data sampling rate (images/s) of our on-device uint8 index sampler, against a per-item
   ``torch.utils.data.DataLoader`` over the same uint8 images (``__getitem__`` returns one float
   image, default collate; the pattern of most VAE repositories);
2. the training throughput (images/s) of a conv64 β-VAE at batch 64 in fp32 and bf16, fed by our
   sampler, and in fp32 fed by the DataLoader, with the ratio;
3. training steps/s of the step modes (``--modes``): ``eager`` (fp32), ``compiled``
   (``train.compile: true``), ``bf16`` (eager, bf16 autocast), ``compiled-bf16`` and, on CUDA,
   ``tf32`` (eager fp32 with TF32 matmuls/convolutions) and ``graphs`` (``train.compile:
   reduce-overhead``: the compiled networks replayed as CUDA graphs). ``python -m
   disentangle.training.bench --device cuda`` is the GPU measurement; the compiled modes include
   nothing of the compile time (it is
   spent in the warm-up steps).

On a CPU it first prints the CPU model and vendor, ``torch.backends.cpu.get_cpu_capability()``, the
bf16 flags and what ``train.precision: auto`` picks there, because bf16 autocast is faster than fp32
on some CPUs with native bf16 instructions (AMX, and AVX512-BF16 on AMD's), slower on an Intel CPU
with AVX512-BF16 but no AMX, and much slower on those without
(:func:`disentangle._core.hardware.fast_cpu_bf16`).

Both data paths read one pool of rendered sprites (``--pool`` images) so they do the same work.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from .._core.hardware import auto_precision, cpu_vendor
from ..config import TrainConfig
from ..data import DATASETS, IndexedImageDataset
from ..models.vae import VAE
from ..objectives import OBJECTIVES
from .optim import build_optimizers
from .precision import Precision
from .runtime import compile_networks, resolve_device

MODES = ("eager", "compiled", "bf16", "compiled-bf16", "tf32", "graphs")
#: the modes that only mean something on CUDA
CUDA_MODES = ("tf32", "graphs")


def cpu_capabilities(cpuinfo: str = "/proc/cpuinfo") -> dict[str, str]:
    """What decides CPU training speed, bf16 in particular: torch's CPU capability level and the
    CPU's bf16/AMX flags (Linux ``/proc/cpuinfo``). bf16 autocast is emulated and slow where the CPU
    has no native bf16 instructions (``avx512_bf16`` or ``amx_bf16``); with them it is faster than
    fp32 on some CPUs only (:func:`disentangle._core.hardware.fast_cpu_bf16`)."""
    info = {"torch_cpu_capability": str(torch.backends.cpu.get_cpu_capability())}
    model, flags = "unknown", set()
    try:
        for line in open(cpuinfo, encoding="utf-8", errors="replace"):
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "model name" and model == "unknown":
                model = value.strip()
            elif key == "flags" and not flags:
                flags = set(value.split())
    except OSError:
        pass
    info["cpu_model"] = model
    bf16 = sorted(f for f in flags if "bf16" in f or f.startswith("amx"))
    info["bf16_flags"] = " ".join(bf16) if bf16 else "none"
    info["native_bf16"] = "yes" if {"avx512_bf16", "amx_bf16"} & flags else "no"
    return info


class _PerItemImages(Dataset):
    """The common baseline: numpy uint8 images, one float tensor per ``__getitem__``."""

    def __init__(self, images: np.ndarray) -> None:
        self.images = images

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.from_numpy(self.images[i]).float()


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time_batches(next_batch, n: int, device: torch.device) -> float:
    next_batch()
    _sync(device)
    start = time.perf_counter()
    for _ in range(n):
        next_batch()
    _sync(device)
    return time.perf_counter() - start


def _loader_iter(loader: DataLoader, device: torch.device):
    it = iter(loader)

    def next_batch() -> torch.Tensor:
        nonlocal it
        try:
            batch = next(it)
        except StopIteration:
            it = iter(loader)
            batch = next(it)
        return batch.to(device, non_blocking=True)

    return next_batch


def _train_rate(
    next_batch, precision: str, steps: int, batch_size: int, device: torch.device, compile: bool | str = False
) -> float:
    """Images/s of conv64 β-VAE training steps (the trainer's optimizer, fused Adam; PyTorch's
    layout and transposed-convolution backward: ``benchmarks/bench_step_kernels.py`` times the
    trainer's CPU choices)."""
    torch.manual_seed(0)
    model = VAE.from_backbone("conv64", image_shape=(1, 64, 64), latent_dim=10).to(device)
    objective = OBJECTIVES.build("beta_vae", beta=4.0).to(device)
    optimizers = build_optimizers(model, objective, TrainConfig(lr=1e-4), device)
    compile_networks(model, objective, compile)
    prec = Precision(precision, device)

    def step() -> None:
        objective.train_step(model, next_batch(), step=0, optimizers=optimizers, precision=prec)
        prec.update()

    for _ in range(5):  # warm-up (allocator, autotuning, compilation)
        step()
    seconds = _time_batches(step, steps, device)
    return steps * batch_size / seconds


def step_mode_rates(next_batch, modes, steps: int, batch_size: int, device: torch.device) -> dict[str, float]:
    """Steps/s of each mode of :data:`MODES` (those of :data:`CUDA_MODES` only on CUDA)."""
    rates = {}
    for mode in modes:
        if mode in CUDA_MODES and device.type != "cuda":
            continue
        tf32 = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
        if mode == "tf32":
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
        elif device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        try:
            precision = "bf16" if mode.endswith("bf16") else "fp32"
            compile = "reduce-overhead" if mode == "graphs" else mode.startswith("compiled")
            if compile:
                torch._dynamo.reset()
            rates[mode] = _train_rate(next_batch, precision, steps, batch_size, device, compile=compile) / batch_size
        finally:
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32
    return rates


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m disentangle.training.bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="auto")
    p.add_argument("--steps", type=int, default=60, help="timed training steps per setting")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--pool", type=int, default=65536, help="images in the shared pool")
    p.add_argument("--workers", type=int, default=2, help="DataLoader workers for the baseline")
    p.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    p.add_argument(
        "--modes", default="eager,compiled,bf16",
        help=f"comma-separated step modes to time, of {', '.join(MODES)} ('' to skip)",
    )
    return p


def main(argv: list[str] | None = None) -> None:
    p = _parser()
    args = p.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for mode in modes:
        if mode not in MODES:
            p.error(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
    if args.threads:
        # on a small, shared CPU, OpenMP contention can make 2 threads far slower than 1
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    bs = args.batch_size
    print(f"device: {device}  torch {torch.__version__}  threads {torch.get_num_threads()}  batch {bs}")
    if device.type == "cpu":
        caps = cpu_capabilities()
        print(
            f"cpu: {caps['cpu_model']} ({cpu_vendor() or 'vendor unknown'})  torch capability "
            f"{caps['torch_cpu_capability']}  bf16 flags: {caps['bf16_flags']}  (native bf16: {caps['native_bf16']}; "
            f"train.precision: auto picks {auto_precision('cpu')} here)"
        )

    sprites = DATASETS.build("sprites", device=str(device))
    g = torch.Generator(device=device).manual_seed(0)
    pool = torch.cat([sprites.sample_batch(4096, g) for _ in range(max(args.pool // 4096, 1))])
    pool_u8 = pool.round().to(torch.uint8)
    ours = IndexedImageDataset(pool_u8, ("i",), (len(pool_u8),), scale=1.0)
    images_np = pool_u8.cpu().numpy()

    gen = torch.Generator(device=device).manual_seed(1)
    n = 200
    rate_ours = n * bs / _time_batches(lambda: ours.sample_batch(bs, gen), n, device)
    rate_render = n * bs / _time_batches(lambda: sprites.sample_batch(bs, gen), n, device)
    rows = [("on-device uint8 index sampler", rate_ours), ("procedural renderer, per batch", rate_render)]
    for workers in sorted({0, args.workers}):
        loader = DataLoader(_PerItemImages(images_np), batch_size=bs, shuffle=True, num_workers=workers,
                            pin_memory=device.type == "cuda", persistent_workers=workers > 0)
        rows.append((f"per-item DataLoader, {workers} workers", n * bs / _time_batches(_loader_iter(loader, device), n, device)))
    print(f"\ndata sampling (images/s, batch {bs})")
    for name, rate in rows:
        print(f"  {name:<36} {rate:>12,.0f}   ({rate / rows[-1][1]:.1f}x the DataLoader with {args.workers} workers)")

    print(f"\ntraining conv64 beta-VAE (images/s, batch {bs}, {args.steps} timed steps)")
    results = {}
    sampler = lambda: ours.sample_batch(bs, gen)  # noqa: E731
    results["ours fp32"] = _train_rate(sampler, "fp32", args.steps, bs, device)
    results["ours bf16"] = _train_rate(sampler, "bf16", args.steps, bs, device)
    loader = DataLoader(_PerItemImages(images_np), batch_size=bs, shuffle=True, num_workers=args.workers,
                        pin_memory=device.type == "cuda", persistent_workers=args.workers > 0)
    results[f"DataLoader({args.workers} workers) fp32"] = _train_rate(_loader_iter(loader, device), "fp32", args.steps, bs, device)
    base = results[f"DataLoader({args.workers} workers) fp32"]
    for name, rate in results.items():
        print(f"  {name:<36} {rate:>10,.0f}   ({rate / base:.2f}x the DataLoader-fed run)")

    if modes:
        print(f"\ntraining step modes (steps/s, conv64 beta-VAE, batch {bs}, {args.steps} timed steps)")
        rates = step_mode_rates(sampler, modes, args.steps, bs, device)
        for name, rate in rates.items():
            print(f"  {name:<36} {rate:>10,.2f}   ({rate / rates[next(iter(rates))]:.2f}x {next(iter(rates))})")


if __name__ == "__main__":
    from disentangle._core.cli import run_main

    run_main(main)
