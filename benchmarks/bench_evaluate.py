"""Wall time of ``python -m disentangle.evaluate`` on a real model: load, build the dataset, score
every metric of the Locatello et al. study and the unsupervised scores, encoding included.

    python benchmarks/bench_evaluate.py zoo:beta_tcvae-sprites-beta6-cpu20k-ref-s0 --threads 2
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


def one_evaluation(source: str, batch_size: int, metrics: list[str], channels_last: bool = False):
    """(seconds per metric, scores, total seconds) of one whole evaluation, as ``evaluate`` runs it."""
    start = time.perf_counter()
    model = disentangle.load(source)
    if channels_last:
        model.to(memory_format=torch.channels_last)
    dataset = build_dataset(dict(model.config["data"]))
    seconds: dict[str, float] = {}
    settings = {m: {"representation_batch_size": batch_size} for m in metrics}
    scores = evaluate_metrics(
        dataset, model, metrics, seed=0, settings=settings,
        callback=lambda name, _, secs: seconds.__setitem__(name, secs),
    )
    return seconds, scores, time.perf_counter() - start


def _summary(scores: dict) -> str:
    if {"mig", "dci", "beta_vae_score", "factor_vae_score"} <= set(scores):
        return (f"MIG {scores['mig']['mig']:.4f}, DCI {scores['dci']['disentanglement']:.4f}, "
                f"BetaVAE {scores['beta_vae_score']['eval_accuracy']:.4f}, "
                f"FactorVAE {scores['factor_vae_score']['eval_accuracy']:.4f}")
    return str(scores)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="run folder, checkpoint or zoo:NAME")
    parser.add_argument("--batch-sizes", default="64,1024", help="representation batch sizes to compare")
    parser.add_argument("--channels-last", action="store_true",
                        help="also time each batch size with the model in channels-last layout")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--metrics", default=",".join(PUBLISHED_METRICS))
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    metrics = [m for m in args.metrics.split(",") if m]
    arms = [(f"batch {b}" + (", channels-last" if cl else ""), int(b), cl)
            for b in args.batch_sizes.split(",") for cl in ((False, True) if args.channels_last else (False,))]
    totals: dict[str, list[float]] = {a: [] for a, _, _ in arms}
    per_metric: dict[str, dict[str, list[float]]] = {a: {m: [] for m in metrics} for a, _, _ in arms}
    last_scores = {}
    for r in range(args.rounds):
        for arm, batch, cl in arms:
            seconds, scores, total = one_evaluation(args.source, batch, metrics, cl)
            totals[arm].append(total)
            for m in metrics:
                per_metric[arm][m].append(seconds[m])
            last_scores[arm] = scores
            print(f"round {r}, {arm}: {total:.1f} s", flush=True)
    print(f"\n{args.source}; {_cpu()}; median of {args.rounds} round(s)\n")
    print("| metric | " + " | ".join(f"{a} (s)" for a, _, _ in arms) + " |")
    print("|---|" + "---:|" * len(arms))
    for m in metrics:
        print(f"| {m} | " + " | ".join(f"{statistics.median(per_metric[a][m]):.1f}" for a, _, _ in arms) + " |")
    print("| **whole evaluation** (load, dataset, all metrics) | "
          + " | ".join(f"**{statistics.median(totals[a]):.1f}**" for a, _, _ in arms) + " |")
    base = arms[-1][0] if not args.channels_last else arms[0][0]
    for arm, _, _ in arms:
        if arm != base:
            print(f"\n{arm} / {base}: {statistics.median(totals[base]) / statistics.median(totals[arm]):.2f}x faster")
    for arm, _, _ in arms:
        print(f"{arm}: {_summary(last_scores[arm])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
