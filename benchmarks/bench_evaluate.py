"""Wall time of ``python -m disentangle.evaluate`` on a real model: load, build the dataset, score
every metric of the Locatello et al. study and the unsupervised scores, encoding included.

    python benchmarks/bench_evaluate.py zoo:beta_tcvae-sprites-beta6-cpu20k-s0 --threads 2
    python benchmarks/bench_evaluate.py RUN_DIR --batch-sizes 64,1024 --rounds 2

Each round times the whole evaluation once per representation batch size given (alternating, so a
burst of load on a shared machine falls on both), with the code table as ``evaluate`` uses it, and
prints the seconds of each metric, the total and the ratio of the totals, with the CPU. The scores
of the settings are printed too: they must agree (the batch size changes only rounding).
"""
from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import time

import torch

import disentangle
from disentangle.data import build_dataset
from disentangle.metrics import evaluate_metrics
from disentangle.metrics.names import PUBLISHED_METRICS


def _cpu() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        model = next(l.split(":", 1)[1].strip() for l in out.splitlines() if l.startswith("Model name"))
    except (OSError, StopIteration):
        model = platform.processor() or "unknown CPU"
    return f"{model}, torch {torch.__version__} ({torch.backends.cpu.get_cpu_capability()}), {torch.get_num_threads()} threads"


def one_evaluation(source: str, batch_size: int, metrics: list[str]) -> tuple[dict[str, float], dict, float]:
    start = time.perf_counter()
    model = disentangle.load(source)
    dataset = build_dataset(dict(model.config["data"]))
    seconds: dict[str, float] = {}
    settings = {m: {"representation_batch_size": batch_size} for m in metrics}
    scores = evaluate_metrics(
        dataset, model, metrics, seed=0, settings=settings,
        callback=lambda name, _, secs: seconds.__setitem__(name, secs),
    )
    return seconds, scores, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="run folder, checkpoint or zoo:NAME")
    parser.add_argument("--batch-sizes", default="64,1024", help="representation batch sizes to compare")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--metrics", default=",".join(PUBLISHED_METRICS))
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    sizes = [int(s) for s in args.batch_sizes.split(",")]
    metrics = [m for m in args.metrics.split(",") if m]
    totals: dict[int, list[float]] = {b: [] for b in sizes}
    per_metric: dict[int, dict[str, list[float]]] = {b: {m: [] for m in metrics} for b in sizes}
    last_scores = {}
    for r in range(args.rounds):
        for b in sizes:
            seconds, scores, total = one_evaluation(args.source, b, metrics)
            totals[b].append(total)
            for m in metrics:
                per_metric[b][m].append(seconds[m])
            last_scores[b] = scores
            print(f"round {r}, batch {b}: {total:.1f} s", flush=True)
    print(f"\n{args.source}; {_cpu()}; median of {args.rounds} round(s)\n")
    print("| metric | " + " | ".join(f"batch {b} (s)" for b in sizes) + " |")
    print("|---|" + "---:|" * len(sizes))
    for m in metrics:
        print(f"| {m} | " + " | ".join(f"{statistics.median(per_metric[b][m]):.1f}" for b in sizes) + " |")
    print("| **whole evaluation** (load, dataset, all metrics) | "
          + " | ".join(f"**{statistics.median(totals[b]):.1f}**" for b in sizes) + " |")
    if len(sizes) > 1:
        base = statistics.median(totals[sizes[-1]])
        for b in sizes[:-1]:
            print(f"\nbatch {b} / batch {sizes[-1]}: {base / statistics.median(totals[b]):.2f}x faster")
    for b in sizes:
        s = last_scores[b]
        print(f"batch {b}: MIG {s['mig']['mig']:.4f}, DCI {s['dci']['disentanglement']:.4f}, "
              f"BetaVAE {s['beta_vae_score']['eval_accuracy']:.4f}, FactorVAE {s['factor_vae_score']['eval_accuracy']:.4f}"
              if {"mig", "dci", "beta_vae_score", "factor_vae_score"} <= set(s) else f"batch {b}: {s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
