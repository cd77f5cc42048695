"""Training speed with the images on the device against streamed from a memory-mapped file on the host
(``data.placement``), and the trainer against a plain loop of one's own (``examples/own_loop.py``).

    python benchmarks/bench_stream.py [--images 8192] [--steps 300] [--rounds 3] [--threads 2]

Writes a folder of random 64×64 RGB PNGs once (under ``--work``), decodes it once into the
image_folder cache, then alternates, ``--rounds`` times, three runs of the conv64 β-VAE (β = 4,
batch 64, fp32) of ``--steps`` steps each: ``image_folder`` with ``placement: device``, the same
with ``placement: stream``, and ``examples/own_loop.py``'s plain loop on the in-memory images.
Prints steps/s of each (the median over rounds; for the trainer the median of its own
``steps_per_s`` records after the first, for the plain loop the steps after the first 50) and the
ratios, with the CPU. Nothing here is a test: the numbers go to the docs' benchmarks page.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]


def write_folder(folder: Path, n: int) -> None:
    from PIL import Image

    if folder.is_dir() and len(list(folder.glob("*.png"))) == n:
        return
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for i in range(n):
        # smooth random blobs, not white noise: PNGs of a realistic size
        small = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
        Image.fromarray(small).resize((64, 64), Image.BILINEAR).save(folder / f"{i:06d}.png")


def overrides(folder: Path, cache: Path, out: Path, placement: str, steps: int, threads: int) -> list[str]:
    return [
        "data.name=image_folder", f"data.path={folder}", f"data.cache={cache}", f"data.placement={placement}",
        "model.backbone=conv64", "objective.name=beta_vae", "objective.beta=4", "train.batch_size=64",
        f"train.steps={steps}", "train.log_every=50", f"train.checkpoint_every={steps}", "train.progress=false",
        "train.traversals=false", "train.precision=fp32", f"train.threads={threads}", f"train.out_dir={out}",
    ]


def trainer_rate(out: Path) -> float:
    """The median of the run's logged training rates after the first interval (warm-up left out)."""
    rates = [json.loads(line)["steps_per_s"] for line in (out / "log.jsonl").read_text().splitlines()]
    return statistics.median(rates[1:] or rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=8192)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--work", default=str(Path.home() / ".cache" / "disentangle-bench-stream"))
    args = parser.parse_args()

    from disentangle.config import load_config
    from disentangle.training import fit

    spec = importlib.util.spec_from_file_location("own_loop", ROOT / "examples" / "own_loop.py")
    own_loop = importlib.util.module_from_spec(spec)
    sys.modules["own_loop"] = own_loop
    spec.loader.exec_module(own_loop)

    work = Path(args.work)
    folder, cache = work / f"images{args.images}", work / "cache"
    write_folder(folder, args.images)
    rates: dict[str, list[float]] = {"device": [], "stream": [], "own loop": []}
    for r in range(args.rounds):
        for placement in ("device", "stream"):
            out = work / f"run-{placement}-{r}-{time.time_ns()}"
            fit(load_config(None, overrides(folder, cache, out, placement, args.steps, args.threads)))
            rates[placement].append(trainer_rate(out))
        config = load_config(None, overrides(folder, cache, work / "unused", "device", args.steps, args.threads))
        torch.set_num_threads(args.threads)
        parts = own_loop.build(config)
        own_loop.speed_up(parts, config, args.steps)
        parts.model.train()
        parts.objective.train()
        warm = 50  # as the trainer's first log interval, left out
        for step in range(args.steps):
            if step == warm:
                start = time.perf_counter()
            own_loop.train_step(parts, step, config.train.batch_size)
        rates["own loop"].append((args.steps - warm) / (time.perf_counter() - start))

    cpu = platform.processor() or platform.machine()
    print(f"CPU: {cpu}, torch {torch.__version__}, capability {torch.backends.cpu.get_cpu_capability()}, "
          f"{args.threads} threads; {args.images} images, {args.steps} steps x {args.rounds} rounds")
    print("| run | steps/s (median) | all rounds |")
    print("| --- | ---: | --- |")
    for name, values in rates.items():
        print(f"| {name} | {statistics.median(values):.1f} | {', '.join(f'{v:.1f}' for v in values)} |")
    device, stream = statistics.median(rates["device"]), statistics.median(rates["stream"])
    print(f"streaming costs {100 * (1 - stream / device):+.1f}% against the images on the device")
    print(f"the trainer runs at {device / statistics.median(rates['own loop']):.2f}x the plain loop")


if __name__ == "__main__":
    main()
