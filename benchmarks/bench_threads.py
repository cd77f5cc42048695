"""Threads and OpenMP's wait policy on a quiet CPU and on one shared with another CPU-bound job.

    python benchmarks/bench_threads.py                      # quiet and with 1 competitor, 2 rounds
    python benchmarks/bench_threads.py --competitors 0 --rounds 1 --steps 150

For each condition (no other job, or ``--competitors`` processes that spin on the CPU as another
user's job would) and each choice of torch threads (1, or every CPU) and OpenMP wait policy
(``active``: libgomp's default, threads spin while they wait for work; ``passive``: they sleep), it
measures

* the quickstart's training rate, as a user starts it (``python -m disentangle.train --config
  configs/quickstart.yaml``, cut to ``--steps`` steps): the median of ``log.jsonl``'s
  ``steps_per_s`` after the first 50 steps;
* the rate at which ``evaluate`` encodes the factor grid: a zoo model's posterior means of sprites
  images, batches of 256, in images per second.

Every measurement is a fresh process (the wait policy is read when OpenMP starts), the choices
alternate within a round, and the median over rounds is printed. Run it on an otherwise idle
machine: the point is to control the contention.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ZOO_MODEL = "beta_tcvae-sprites-beta6-cpu20k-ref-s0"
SPIN = "while True: pass"


def _env(threads: int | None, policy: str | None) -> dict[str, str]:
    """The environment of one choice; None leaves the setting to the library (its defaults)."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")}
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    if policy is not None:
        env["OMP_WAIT_POLICY"] = policy.upper()
    return {**env, "PYTHONPATH": str(ROOT)}


def train_rate(threads: int | None, policy: str | None, steps: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "disentangle.train", "--config", str(ROOT / "configs/quickstart.yaml"),
             f"train.steps={steps}", "train.log_every=25", "train.progress=false", "train.traversals=false",
             "train.checkpoint_every=1000000", f"train.out_dir={tmp}/run"],
            env=_env(threads, policy), check=True, capture_output=True, cwd=tmp,
        )
        records = [json.loads(line) for line in (Path(tmp) / "run/log.jsonl").read_text().splitlines()]
    rates = [r["steps_per_s"] for r in records if "steps_per_s" in r and r["step"] > 50]
    return statistics.median(rates)


def encode_rate(threads: int | None, policy: str | None, images: int) -> float:
    out = subprocess.run(
        [sys.executable, __file__, "--encode-child", str(images)], env=_env(threads, policy), check=True,
        capture_output=True, text=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def _encode_child(images: int) -> None:
    import torch

    import disentangle
    from disentangle.data import build_dataset

    model = disentangle.load(f"zoo:{ZOO_MODEL}")
    dataset = build_dataset(dict(model.config["data"]))
    generator = torch.Generator().manual_seed(0)
    batches = [dataset.sample_batch(256, generator) for _ in range(max(1, images // 256))]
    with torch.inference_mode():
        model.representation(batches[0])  # warm-up
        start = time.perf_counter()
        for x in batches:
            model.representation(x)
        seconds = time.perf_counter() - start
    print(len(batches) * 256 / seconds)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--steps", type=int, default=200, help="training steps of each quickstart run")
    p.add_argument("--images", type=int, default=6144, help="images encoded by each encoding run")
    p.add_argument("--competitors", default="0,1", help="comma-separated numbers of competing processes")
    p.add_argument("--encode-child", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.encode_child is not None:
        _encode_child(args.encode_child)
        return
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    # (threads, wait policy); (None, None): nothing set, the library's defaults as a user gets them
    choices = [(None, None), (1, "active"), (1, "passive"), (cpus, "active"), (cpus, "passive")]
    import torch

    print(f"CPU: {torch.backends.cpu.get_cpu_capability()}, {cpus} CPUs usable; torch {torch.__version__}; "
          f"{args.rounds} rounds, {args.steps} steps, {args.images} images")
    results: dict[tuple[int, int | None, str | None], tuple[list[float], list[float]]] = {}
    for competitors in [int(c) for c in args.competitors.split(",")]:
        spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(competitors)]
        try:
            for _ in range(args.rounds):
                for threads, policy in choices:
                    train = train_rate(threads, policy, args.steps)
                    encode = encode_rate(threads, policy, args.images)
                    runs = results.setdefault((competitors, threads, policy), ([], []))
                    runs[0].append(train)
                    runs[1].append(encode)
                    print(f"  competitors {competitors}, threads {threads or 'default'}, {policy or 'default'}: "
                          f"{train:.2f} steps/s, "
                          f"{encode:.0f} img/s", flush=True)
        finally:
            for s in spinners:
                s.kill()
    print("\n| other CPU-bound jobs | threads | wait policy | quickstart steps/s | encoding img/s |")
    print("|---:|---:|---|---:|---:|")
    for (competitors, threads, policy), (train, encode) in results.items():
        print(f"| {competitors} | {threads or 'default'} | {policy or 'default'} | {statistics.median(train):.2f} | "
              f"{statistics.median(encode):.0f} |")


if __name__ == "__main__":
    main()
