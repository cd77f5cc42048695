"""Class/content models and QLAE against their unsupervised twin on sprites: MIG, DCI, class
leakage and swap accuracy, each model read with the same class (the shape) and split (the last
``class_dim`` dimensions the class code).

    python benchmarks/class_content_vs_twin.py --out benchmarks/RESULTS-class-content.md \\
        zoo:beta_vae-sprites-beta4-cpu20k-ref-s0 zoo:f_statistic-sprites-d2-cpu20k-s0 zoo:qlae-sprites-cpu20k-s0

A class/content model is read under its own run's ``class_factors`` and ``class_dim``
(:func:`disentangle.objectives.class_content.class_content_settings`); any other model under
``--class-factors`` (default ``shape``) and ``--class-dim`` (default 5, half of 10 latents). Scores
use each metric's defaults and seed 0. The CPU and wall times are printed with the table.

Every model is scored on its own run's dataset, or with ``--data-of SOURCE`` all of them on that
model's (a twin trained on the whole sprites grid scored on the sub-grid LORD trains on):

    python benchmarks/class_content_vs_twin.py --data-of zoo:lord-sprites-sub11k-cpu20k-s0 \
        --out benchmarks/RESULTS-class-content-subgrid.md zoo:beta_vae-sprites-beta4-cpu20k-ref-s0 zoo:lord-sprites-sub11k-cpu20k-s0
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
from disentangle.objectives.class_content import class_content_settings

METRICS = ["mig", "dci", "class_leakage", "swap_accuracy"]


def _cpu() -> str:
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = next((l.split(":", 1)[1].strip() for l in out.splitlines() if l.startswith("Model name")), "unknown CPU")
    return f"{model}, torch {torch.__version__} ({torch.backends.cpu.get_cpu_capability()}), {torch.get_num_threads()} thread(s)"


def _data_name(data: dict) -> str:
    sub = data.get("subgrid")
    if not sub:
        return data["name"]
    return f"{data['name']}, subgrid " + ", ".join(f"{k}: {v if isinstance(v, int) else len(v)}" for k, v in sub.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sources", nargs="+", help="zoo:NAME, run folders or checkpoints")
    parser.add_argument("--class-factors", default="shape")
    parser.add_argument("--class-dim", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--data-of", default=None, help="score every model on this model's dataset")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    shared = None
    if args.data_of:
        shared = dict(disentangle.load(args.data_of).config["data"])
    torch.set_num_threads(args.threads)
    split = {"class_factors": args.class_factors.split(","), "class_dim": args.class_dim}
    rows = []
    for source in args.sources:
        model = disentangle.load(source)
        data = shared if shared is not None else dict(model.config["data"])
        dataset = build_dataset(data)
        settings = {m: dict(split) for m in ("class_leakage", "swap_accuracy")}
        own = class_content_settings(model.config, METRICS, {})
        settings.update(own)
        start = time.perf_counter()
        scores = evaluate_metrics(dataset, model, METRICS, seed=0, settings=settings)
        seconds = time.perf_counter() - start
        objective = model.config["objective"]["name"]
        used = settings["class_leakage"]
        rows.append((source, objective, used, scores, seconds, _data_name(data)))
        print(source, f"{seconds:.0f} s", {m: {k: round(v, 3) for k, v in s.items()} for m, s in scores.items()}, flush=True)
    lines = [
        "# Class/content models against their unsupervised twin (sprites)",
        "",
        "`python benchmarks/class_content_vs_twin.py " + (f"--data-of {args.data_of} " if args.data_of else "")
        + " ".join(args.sources) + "`",
        "",
        f"* CPU: {_cpu()}",
        f"* {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; 1-minute load average {os.getloadavg()[0]:.2f}",
        "* class leakage: how well a logistic regression reads the class from the content code (the first "
        "D − C dimensions), 0 at chance; class code accuracy: the same classifier on the class code; "
        "swap accuracy: how often a classifier of the class, trained on images, gives a swap the class of "
        "the image its class code came from",
        "",
        "| model | objective | scored on | class, class_dim | MIG | DCI disentanglement | class leakage | leakage accuracy (chance) | class code accuracy | swap accuracy (chance) | swap keeps the content's class | seconds |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for source, objective, used, s, seconds, data_name in rows:
        leak, swap = s["class_leakage"], s["swap_accuracy"]
        lines.append(
            f"| `{source}` | {objective} | {data_name} | {','.join(map(str, used['class_factors']))}, {used['class_dim']} | "
            f"{s['mig']['mig']:.3f} | {s['dci']['disentanglement']:.3f} | {leak['class_leakage']:.3f} | "
            f"{leak['class_leakage_accuracy']:.3f} ({leak['class_leakage_chance']:.3f}) | {leak['class_code_accuracy']:.3f} | "
            f"{swap['swap_accuracy']:.3f} ({swap['swap_chance']:.3f}) | {swap['swap_content_class']:.3f} | {seconds:.0f} |"
        )
    text = "\n".join(lines) + "\n"
    print("\n" + text)
    if args.out:
        atomic_write_text(args.out, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
