"""The trainer's speed options, through ``python -m disentangle.train`` itself.

    python benchmarks/bench_trainer_options.py                          # plain vs channels_last, 2 threads
    python benchmarks/bench_trainer_options.py --options default,channels_last,compile,bf16 --threads 1
    python benchmarks/bench_trainer_options.py --config sprites/factor_vae --options fp32,bf16-defaults --threads 1

Trains the quickstart's conv64 β-VAE (sprites, batch 64, lr 1e-4; ``--config`` another recipe) for
``--steps`` steps on ``--threads`` threads (``train.threads``: the trainer sets its own count) with each
option set in turn (alternating rounds, each in a fresh process and run folder) and prints the
median steps/s of each over the rounds and its ratio to ``plain`` (the defaults before the
``auto`` execution choices) or, without it, ``default``, or ``fp32``: ratios from one run, since the
machine's speed drifts between runs. The rate is read from ``log.jsonl`` as in
``benchmarks/train_vs_plain.py``: the steps after the first logged record (the warm-up left out).
Prints the CPU first (model, torch capability, bf16 flags).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout without installing

#: option set -> (the overrides it adds to the quickstart, the environment it runs in)
_UNTUNED = {"DISENTANGLE_MALLOC_TUNING": "0"}
OPTIONS = {
    # today's defaults: channels-last and data.materialize at auto (a short run: rendered), glibc tuned
    "default": ([], {}),
    # the defaults of 0.2 and before: PyTorch's layout, rendered batches, glibc's allocator as it comes
    "plain": (["train.channels_last=false", "data.materialize=false"], _UNTUNED),
    "malloc": (["train.channels_last=false", "data.materialize=false"], {}),
    "channels_last": (["train.channels_last=true", "data.materialize=false"], _UNTUNED),
    "materialize": (["train.channels_last=false", "data.materialize=true"], _UNTUNED),
    "channels_last+materialize+malloc": (["train.channels_last=true", "data.materialize=true"], {}),
    "compile": (["train.compile=true"], {}),
    # today's defaults in a named precision (train.precision: auto picks one of them by the CPU)
    "fp32": (["train.precision=fp32"], {}),
    "bf16-defaults": (["train.precision=bf16"], {}),
    "bf16": (["train.precision=bf16", "train.channels_last=false", "data.materialize=false"], _UNTUNED),
    "bf16+channels_last+materialize+malloc": (
        ["train.precision=bf16", "train.channels_last=true", "data.materialize=true"], {}
    ),
    "bf16+channels_last+materialize+malloc+compile": (
        ["train.precision=bf16", "train.channels_last=true", "data.materialize=true", "train.compile=true"], {}
    ),
}


def rate_after_first_record(rows: list[dict]) -> float:
    """Training steps/s after the first ``log.jsonl`` record (the warm-up): each record's
    ``steps_per_s`` is the loop's rate since the record before it, so the interval times add up."""
    timed = [r for r in rows if "steps_per_s" in r]
    seconds = sum((b["step"] - a["step"]) / b["steps_per_s"] for a, b in zip(timed, timed[1:]))
    return (timed[-1]["step"] - timed[0]["step"]) / seconds


def steps_per_s(overrides: list[str], steps: int, threads: int, env: dict[str, str] | None = None,
                config: str = "quickstart") -> float:
    folder = Path(tempfile.mkdtemp())
    try:
        args = ["--config", config, f"train.steps={steps + 20}", f"train.threads={threads}", f"train.out_dir={folder / 'run'}",
                "train.progress=false", "train.traversals=false", "train.log_every=20", "train.lr=1e-4",
                "train.checkpoint_every=100000", *overrides]
        code = (f"import torch, runpy, sys; torch.set_num_threads({threads}); sys.argv = ['train', *{args!r}]; "
                "runpy.run_module('disentangle.train', run_name='__main__')")
        subprocess.run([sys.executable, "-c", code], check=True, stdout=subprocess.DEVNULL, cwd=REPO,
                       env={**os.environ, **(env or {})})
        rows = [json.loads(line) for line in (folder / "run" / "log.jsonl").read_text().splitlines()]
        return rate_after_first_record(rows)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--options", default="plain,channels_last", help=f"comma-separated: {', '.join(OPTIONS)}")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--config", default="quickstart", help="the recipe trained (default: quickstart)")
    args = parser.parse_args()
    names = [n.strip() for n in args.options.split(",") if n.strip()]
    unknown = [n for n in names if n not in OPTIONS]
    if unknown or not {"default", "plain", "fp32"} & set(names):
        parser.error(f"--options must include plain, default or fp32 and name only {', '.join(OPTIONS)}; got {args.options!r}")

    from disentangle.training.bench import cpu_capabilities

    print(cpu_capabilities())
    rates: dict[str, list[float]] = {n: [] for n in names}
    for r in range(args.rounds):
        for name in names:
            overrides, env = OPTIONS[name]
            rates[name].append(steps_per_s(overrides, args.steps, args.threads, env, args.config))
        print(f"round {r}: " + ", ".join(f"{n} {rates[n][-1]:.2f}" for n in names), flush=True)
    base_name = next(n for n in ("plain", "default", "fp32") if n in names)
    base = statistics.median(rates[base_name])
    print(f"{args.config}: median steps/s over {args.rounds} rounds, {args.threads} thread(s), {args.steps} steps:")
    for name in names:
        median = statistics.median(rates[name])
        print(f"  {name:32s} {median:6.2f} steps/s  {median / base:.2f}x {base_name}")


if __name__ == "__main__":
    main()
