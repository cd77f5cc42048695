"""The metrics of the "every metric of disentanglement_lib and the field's newer ones" round on
zoo models: each metric's scores and wall time, encoding included, beside the existing metrics of
the same kind.

    python benchmarks/new_metrics_zoo.py --threads 1 --out benchmarks/RESULTS-metrics-new.md

Each metric runs alone (its own ``evaluate_metrics`` call, so its time includes encoding its draws;
under ``evaluate`` metrics that draw the same points share them), with its defaults and seed 0, on
each model. The CPU, torch's capability and the load average are printed with the tables.
"""
from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import time

import torch

import disentangle
from disentangle._core.atomic import atomic_write_text
from disentangle.data import build_dataset
from disentangle.metrics import evaluate_metrics

MODELS = (
    "beta_vae-sprites-beta4-cpu20k-ref-s0",
    "beta_tcvae-sprites-beta6-cpu20k-ref-s0",
    "ada_gvae-sprites-beta4-cpu20k-ref-s0",
)
NEW = ("irs", "fairness", "reduced_downstream_task", "strong_downstream_task", "unified_scores", "dci_es",
       "infomec", "mig_sup", "dcimig", "jemmig")
#: the existing metric each new one is timed against (the same kind of work)
KIN = {
    "irs": "mig", "fairness": "downstream_task", "reduced_downstream_task": "downstream_task",
    "strong_downstream_task": "downstream_task", "unified_scores": "dci", "dci_es": "dci", "infomec": "mig",
    "mig_sup": "mig", "dcimig": "mig", "jemmig": "mig",
}


def _cpu() -> str:
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = next((l.split(":", 1)[1].strip() for l in out.splitlines() if l.startswith("Model name")), "unknown CPU")
    return f"{model}, torch {torch.__version__} ({torch.backends.cpu.get_cpu_capability()}), {torch.get_num_threads()} thread(s)"


def _headline(scores: dict[str, float]) -> str:
    keys = list(scores)[:4]
    return ", ".join(f"{k} {scores[k]:.3f}" for k in keys) + (", …" if len(scores) > 4 else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--metrics", default=",".join(NEW))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default=None, help="also write the tables to this markdown file")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    models = [m for m in args.models.split(",") if m]
    metrics = [m for m in args.metrics.split(",") if m]
    timed = metrics + sorted({KIN[m] for m in metrics if m in KIN} - set(metrics))
    load_start = os.getloadavg()[0]
    scores: dict[str, dict[str, dict[str, float]]] = {}
    seconds: dict[str, dict[str, float]] = {}
    for name in models:
        model = disentangle.load(f"zoo:{name}")
        dataset = build_dataset(dict(model.config["data"]))
        scores[name], seconds[name] = {}, {}
        for metric in timed:
            start = time.perf_counter()
            scores[name][metric] = evaluate_metrics(dataset, model, [metric], seed=0)[metric]
            seconds[name][metric] = time.perf_counter() - start
            print(f"{name} {metric}: {seconds[name][metric]:.1f} s  {_headline(scores[name][metric])}", flush=True)
    lines = [
        "# The new metrics on zoo models",
        "",
        f"`python benchmarks/new_metrics_zoo.py --threads {args.threads}" + (f" --out {args.out}`" if args.out else "`"),
        "",
        f"* CPU: {_cpu()}",
        f"* {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; 1-minute load average "
        f"{load_start:.2f} at the start, {os.getloadavg()[0]:.2f} at the end",
        "* each metric alone with its defaults and seed 0; wall time includes encoding its draws",
        "",
        "## Scores",
        "",
        "| metric | score | " + " | ".join(models) + " |",
        "|---|---|" + "---:|" * len(models),
    ]
    for metric in metrics:
        for key in scores[models[0]][metric]:
            values = [scores[m][metric].get(key, float("nan")) for m in models]
            lines.append(f"| {metric} | {key} | " + " | ".join(f"{v:.4f}" for v in values) + " |")
    lines += ["", "## Time (s)", "", "| metric | existing metric of its kind | " + " | ".join(models) + " |",
              "|---|---|" + "---:|" * len(models)]
    for metric in timed:
        kin = KIN.get(metric, "")
        cells = [f"{seconds[m][metric]:.1f}" + (f" ({seconds[m][kin]:.1f})" if kin else "") for m in models]
        lines.append(f"| {metric} | {kin} | " + " | ".join(cells) + " |")
    lines += ["", "A cell: the metric's seconds (the existing metric's seconds on the same model)."]
    text = "\n".join(lines) + "\n"
    print("\n" + text)
    if args.out:
        atomic_write_text(args.out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
