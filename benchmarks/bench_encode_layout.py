"""Encoding speed of a conv64 model in PyTorch's layout and in channels-last (``evaluate
--channels-last``, ``evaluate_metrics(channels_last=...)``), alternating, in one process.

    python benchmarks/bench_encode_layout.py --threads 2 --rounds 5 --images 8192 --batch 1024

Prints the CPU, each round's images/s and the median ratio channels-last ÷ contiguous. The model is
the zoo's conv64 architecture at its reference init (the speed does not depend on the weights).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from disentangle.models.vae import VAE  # noqa: E402
from disentangle.training.bench import cpu_capabilities  # noqa: E402


def images_per_s(model: torch.nn.Module, images: torch.Tensor, batch: int, channels_last: bool) -> float:
    start = time.perf_counter()
    with torch.inference_mode():
        for i in range(0, len(images), batch):
            x = images[i:i + batch]
            if channels_last:
                x = x.contiguous(memory_format=torch.channels_last)
            model.encode(x)
    return len(images) / (time.perf_counter() - start)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--images", type=int, default=8192)
    p.add_argument("--batch", type=int, default=1024)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    caps = cpu_capabilities()
    print(f"CPU: {caps['cpu_model']}; torch {torch.__version__}, capability {caps['torch_cpu_capability']}, "
          f"bf16 flags: {caps['bf16_flags']}; {args.threads} thread(s)")
    torch.manual_seed(0)
    plain = VAE.from_backbone("conv64", image_shape=(1, 64, 64), latent_dim=10, init="reference").eval()
    last = VAE.from_backbone("conv64", image_shape=(1, 64, 64), latent_dim=10, init="reference").eval()
    last.load_state_dict(plain.state_dict())
    last = last.to(memory_format=torch.channels_last)
    images = torch.rand(args.images, 1, 64, 64)
    images_per_s(plain, images[:args.batch], args.batch, False)  # warm-up of both
    images_per_s(last, images[:args.batch], args.batch, True)
    ratios = []
    for r in range(args.rounds):
        a = images_per_s(plain, images, args.batch, False)
        b = images_per_s(last, images, args.batch, True)
        ratios.append(b / a)
        print(f"round {r + 1}/{args.rounds}: contiguous {a:,.0f} img/s, channels-last {b:,.0f} img/s ({b / a:.2f}x)")
    print(f"median channels-last / contiguous: {statistics.median(ratios):.2f}x")


if __name__ == "__main__":
    main()
