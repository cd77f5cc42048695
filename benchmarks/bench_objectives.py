"""Training steps per second of every registered objective (conv64, batch 64, synthetic 64×64 data).

    python benchmarks/bench_objectives.py                       # all objectives, CPU, fp32
    python benchmarks/bench_objectives.py --repeats 5 --objectives factor_vae beta_tcvae
    python benchmarks/bench_objectives.py --threads 1           # on a busy machine: less contention
    python benchmarks/bench_objectives.py --device cuda --precision bf16

Each objective runs its own ``train_step`` (all of its optimizers, e.g. FactorVAE's discriminator
update and AAE's three phases) on the Locatello et al. conv64 backbone with ``latent_dim`` 10 and
its default parameters; the data are a fixed pool of random binary 64×64 images drawn by index, so
the numbers measure the objective and the network, not a data pipeline. The batch of each step is
the objective's own ``sample_batch`` (pair objectives draw pairs of images sharing factors, so
their step encodes and decodes 2 × batch images).
"""
from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from disentangle.config import TrainConfig
from disentangle.data import IndexedImageDataset
from disentangle.models.vae import VAE
from disentangle.objectives import OBJECTIVES
from disentangle.training.optim import build_optimizers
from disentangle.training.precision import Precision

DATASET_SIZE = 737_280  # dSprites' N, for β-TCVAE's estimators


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _synthetic_pool(n: int, device: torch.device) -> torch.Tensor:
    """``n`` binary 64×64 images: a random axis-aligned rectangle each (dSprites-like sparsity)."""
    g = torch.Generator().manual_seed(0)
    corners = torch.randint(0, 48, (n, 2), generator=g)
    sizes = torch.randint(6, 16, (n, 2), generator=g)
    ys, xs = torch.arange(64).view(1, 64, 1), torch.arange(64).view(1, 1, 64)
    y0, x0 = corners[:, 0].view(n, 1, 1), corners[:, 1].view(n, 1, 1)
    h, w = sizes[:, 0].view(n, 1, 1), sizes[:, 1].view(n, 1, 1)
    img = (ys >= y0) & (ys < y0 + h) & (xs >= x0) & (xs < x0 + w)
    return img.unsqueeze(1).to(torch.uint8).to(device)


def pool_dataset(pool: torch.Tensor) -> IndexedImageDataset:
    """The pool as a ground-truth dataset (a 16 × 16 × 16 grid of its first 4096 images), so that
    pair objectives can draw pairs from it."""
    n = 4096
    if len(pool) < n:
        raise ValueError(f"the pool needs {n} images, got {len(pool)}")
    return IndexedImageDataset(pool[:n], ("a", "b", "c"), (16, 16, 16), scale=1.0)


def make_stepper(name: str, pool: torch.Tensor, *, batch_size: int, precision: str, device: torch.device):
    """A function ``run(n)`` doing ``n`` training steps of objective ``name`` (fresh model, default params)."""
    torch.manual_seed(0)
    model = VAE.from_backbone("conv64", image_shape=(1, 64, 64), latent_dim=10).to(device)
    objective = OBJECTIVES.build(name).to(device)
    objective.setup(model=model, dataset_size=DATASET_SIZE)
    optimizers = build_optimizers(model, objective, TrainConfig(lr=1e-4), device)
    prec = Precision(precision, device)
    dataset = pool_dataset(pool)
    g = torch.Generator(device=device).manual_seed(1)
    counter = [0]

    def run(n: int) -> None:
        for _ in range(n):
            batch = objective.sample_batch(dataset, batch_size, g)
            objective.train_step(model, batch, step=counter[0], optimizers=optimizers, precision=prec)
            prec.update()
            counter[0] += 1
        _sync(device)

    return run


def bench(names, pool, *, steps: int, warmup: int, repeats: int, batch_size: int, precision: str, device: torch.device):
    """Median steps/s per objective over ``repeats`` timed blocks of ``steps`` steps.

    The blocks are interleaved across objectives (round robin), so a burst of load on a shared
    machine spreads over all of them instead of hitting one.
    """
    runners = {n: make_stepper(n, pool, batch_size=batch_size, precision=precision, device=device) for n in names}
    for run in runners.values():
        run(warmup)
    rates: dict[str, list[float]] = {n: [] for n in names}
    for _ in range(repeats):
        for name, run in runners.items():
            start = time.perf_counter()
            run(steps)
            rates[name].append(steps / (time.perf_counter() - start))
    return {n: statistics.median(r) for n, r in rates.items()}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--objectives", nargs="*", default=None, help="registry names (default: all)")
    p.add_argument("--steps", type=int, default=10, help="timed steps per block")
    p.add_argument("--repeats", type=int, default=3, help="timed blocks per objective (the median is printed)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--device", default="cpu")
    p.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "fp16"))
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (default: torch's)")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    names = args.objectives or list(OBJECTIVES.names())
    pool = _synthetic_pool(4096, device)
    print(
        f"# conv64, latent_dim 10, batch {args.batch_size}, {args.precision}, device {device} "
        f"({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads), torch {torch.__version__}, "
        f"median of {args.repeats} x {args.steps} timed steps after {args.warmup} warm-up"
    )
    rates = bench(names, pool, steps=args.steps, warmup=args.warmup, repeats=args.repeats,
                  batch_size=args.batch_size, precision=args.precision, device=device)
    print(f"{'objective':<14} {'steps/s':>8} {'ms/step':>8}")
    for name, rate in rates.items():
        print(f"{name:<14} {rate:>8.2f} {1000.0 / rate:>8.1f}")


if __name__ == "__main__":
    main()
