"""Sampling rate (images/s) of the ground-truth datasets.

A dSprites-sized dataset (737,280 random binary 64×64 images as uint8, 3 GB) and its Color, Noisy
and Scream variants; for each, the rate of ``sample_batch`` (training) at batch 64 and 4096 and of
``sample_factors`` + ``sample_observations_from_factors`` (metrics) at 4096. Run::

    python benchmarks/bench_data.py                  # CPU, full dSprites size
    python benchmarks/bench_data.py --device cuda
    python benchmarks/bench_data.py --images 100000  # a smaller grid, less memory

The Scream variant uses ``--background IMAGE`` or, by default, a synthetic 350×274 image (the
rate does not depend on the picture).
"""
from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from disentangle.data import IndexedImageDataset  # noqa: E402
from disentangle.data.variants import ColorSprites, NoisySprites, ScreamSprites  # noqa: E402

DSPRITES_SIZES = (3, 6, 40, 32, 32)


def _sizes_for(n_images: int) -> tuple[int, ...]:
    if n_images >= int(np.prod(DSPRITES_SIZES)):
        return DSPRITES_SIZES
    x = max(1, int(round((n_images / (3 * 6 * 40)) ** 0.5)))
    return (3, 6, 40, x, x)


def make_base(sizes: tuple[int, ...], device: str) -> IndexedImageDataset:
    n = int(np.prod(sizes))
    images = torch.empty((n, 1, 64, 64), dtype=torch.uint8)
    flat, rng, chunk = images.view(-1).numpy(), np.random.default_rng(0), 1 << 26
    for start in range(0, flat.size, chunk):  # random bytes & 1, in 64 MB pieces
        part = flat[start:start + chunk]
        np.bitwise_and(np.frombuffer(rng.bytes(part.size), dtype=np.uint8), 1, out=part)
    names = ("shape", "scale", "orientation", "position_x", "position_y")
    return IndexedImageDataset(images, names, sizes, scale=1.0).to(device)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def rate(fn, batch: int, device: str, min_time: float) -> float:
    fn()  # warm-up
    _sync(device)
    done, start = 0, time.perf_counter()
    while True:
        fn()
        done += batch
        _sync(device)
        elapsed = time.perf_counter() - start
        if elapsed >= min_time and done >= 3 * batch:
            return done / elapsed


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu")
    p.add_argument("--images", type=int, default=int(np.prod(DSPRITES_SIZES)), help="dataset size")
    p.add_argument("--background", default=None, help="image for the Scream variant")
    p.add_argument("--min-time", type=float, default=1.0, help="seconds per measurement")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    sizes = _sizes_for(args.images)
    t0 = time.perf_counter()
    base = make_base(sizes, args.device)
    build_s = time.perf_counter() - t0
    background = args.background
    if background is None:
        from PIL import Image

        y, x = np.mgrid[0:274, 0:350]
        rgb = np.stack([x % 256, y % 256, (x * y) % 256], -1).astype(np.uint8)
        background = "/tmp/bench_data_background.png"
        Image.fromarray(rgb).save(background)
    datasets = {
        "dsprites (uint8 0/1)": base,
        "color": ColorSprites(base),
        "noisy": NoisySprites(base),
        "scream": ScreamSprites(base, background),
    }
    dev = torch.device(args.device)
    print(f"# {len(base):,} images {sizes}, {base.images.numel() / 2**30:.2f} GiB uint8 on {args.device} "
          f"(built in {build_s:.1f} s); torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{platform.processor() or platform.machine()}")
    header = f"{'dataset':<22}{'batch 64 img/s':>16}{'batch 4096 img/s':>18}{'factors→obs 4096':>18}"
    print(header)
    print("-" * len(header))
    for name, ds in datasets.items():
        g = torch.Generator(device=dev).manual_seed(0)
        rng = np.random.default_rng(0)
        r64 = rate(lambda ds=ds, g=g: ds.sample_batch(64, g), 64, args.device, args.min_time)
        r4k = rate(lambda ds=ds, g=g: ds.sample_batch(4096, g), 4096, args.device, args.min_time)
        rf = rate(lambda ds=ds, rng=rng: ds.sample_observations_from_factors(ds.sample_factors(4096, rng), rng), 4096,
                  args.device, args.min_time)
        print(f"{name:<22}{r64:>16,.0f}{r4k:>18,.0f}{rf:>18,.0f}")


if __name__ == "__main__":
    main()
