"""Threads and OpenMP's waiting on a quiet CPU and on one shared with other CPU-bound jobs.

    python benchmarks/bench_threads.py                      # 0, 1 and 2 competitors, 1 round
    python benchmarks/bench_threads.py --competitors 0,1 --rounds 2 --steps 150

For each condition (no other job, or ``--competitors`` processes that spin on the CPU as another
user's job would) and each choice of torch threads and of how GNU OpenMP's idle threads wait
(PyTorch's thread pool on Linux), it measures

* the quickstart's training rate, as a user starts it (``python -m disentangle.train --config
  configs/quickstart.yaml``, cut to ``--steps`` steps): the median of ``log.jsonl``'s
  ``steps_per_s`` after the first 50 steps;
* the rate at which ``evaluate`` encodes the factor grid: a zoo model's posterior means of sprites
  images, batches of 256, in images per second.

The choices (:data:`CHOICES`): the library's defaults (nothing set); every CPU with GNU OpenMP's
own default (a waiting thread spins ``GOMP_SPINCOUNT`` = 300,000 iterations, then sleeps: what
``import torch`` gives), with ``OMP_WAIT_POLICY=passive`` (sleeps at once), with a short spin
(``GOMP_SPINCOUNT=10000``) and with ``OMP_WAIT_POLICY=active`` (spins on); and one thread. Every
measurement is a fresh process (OpenMP reads its settings when it starts), the choices alternate
within a round, and the median over rounds is printed. Run it on an otherwise idle machine: the
point is to control the contention.
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


#: (label, threads or None for every CPU, environment): None values leave a variable unset
CHOICES: list[tuple[str, int | None, dict[str, str]]] = [
    ("library default", None, {}),
    ("OpenMP default (spin 300k)", 0, {"GOMP_SPINCOUNT": "300000"}),
    ("passive", 0, {"OMP_WAIT_POLICY": "PASSIVE"}),
    ("spin 10k", 0, {"GOMP_SPINCOUNT": "10000"}),
    ("active", 0, {"OMP_WAIT_POLICY": "ACTIVE"}),
    ("1 thread", 1, {}),
]
_WAIT_VARIABLES = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")


def _env(threads: int | None, extra: dict[str, str]) -> dict[str, str]:
    """The environment of one choice: ``threads`` 0 means every CPU, None the library's choice."""
    env = {k: v for k, v in os.environ.items() if k not in _WAIT_VARIABLES}
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads or _cpus())
    return {**env, **extra, "PYTHONPATH": str(ROOT)}


def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def train_rate(env: dict[str, str], steps: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "disentangle.train", "--config", str(ROOT / "configs/quickstart.yaml"),
             f"train.steps={steps}", "train.log_every=25", "train.progress=false", "train.traversals=false",
             "train.checkpoint_every=1000000", f"train.out_dir={tmp}/run"],
            env=env, check=True, capture_output=True, cwd=tmp,
        )
        records = [json.loads(line) for line in (Path(tmp) / "run/log.jsonl").read_text().splitlines()]
    rates = [r["steps_per_s"] for r in records if "steps_per_s" in r and r["step"] > 50]
    return statistics.median(rates)


def encode_rate(env: dict[str, str], images: int) -> float:
    out = subprocess.run(
        [sys.executable, __file__, "--encode-child", str(images)], env=env, check=True,
        capture_output=True, text=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def _encode_child(images: int) -> None:
    import torch

    import disentangle  # first: it sets the wait policy before torch starts OpenMP, as a CLI does
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
    p.add_argument("--competitors", default="0,1,2", help="comma-separated numbers of competing processes")
    p.add_argument("--encode-child", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.encode_child is not None:
        _encode_child(args.encode_child)
        return
    import torch

    print(f"CPU: {torch.backends.cpu.get_cpu_capability()}, {_cpus()} CPUs usable; torch {torch.__version__}; "
          f"{args.rounds} rounds, {args.steps} steps, {args.images} images")
    results: dict[tuple[int, str], tuple[list[float], list[float]]] = {}
    for competitors in [int(c) for c in args.competitors.split(",")]:
        spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(competitors)]
        try:
            for _ in range(args.rounds):
                for label, threads, extra in CHOICES:
                    env = _env(threads, extra)
                    train, encode = train_rate(env, args.steps), encode_rate(env, args.images)
                    runs = results.setdefault((competitors, label), ([], []))
                    runs[0].append(train)
                    runs[1].append(encode)
                    print(f"  competitors {competitors}, {label}: {train:.2f} steps/s, {encode:.0f} img/s", flush=True)
        finally:
            for spinner in spinners:
                spinner.kill()
    print("\n| other CPU-bound jobs | choice | quickstart steps/s | encoding img/s |")
    print("|---:|---|---:|---:|")
    for (competitors, label), (train, encode) in results.items():
        print(f"| {competitors} | {label} | {statistics.median(train):.2f} | {statistics.median(encode):.0f} |")


if __name__ == "__main__":
    main()
