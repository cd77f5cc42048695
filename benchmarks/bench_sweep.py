"""Wall time of a sweep of short runs: one after another through the train CLI vs the sweep's
local backend.

    python benchmarks/bench_sweep.py                                 # 6 runs x 300 steps
    python benchmarks/bench_sweep.py --runs 4 --steps 150            # smaller
    python benchmarks/bench_sweep.py --workers 2 --threads-per-run 1 --backbone conv64

(a) every run of the sweep file, one after another, each as its own ``python -m disentangle.train
--config RUN.yaml`` (torch's default threads: all cores), as a shell loop would; (b) the same runs
(the same resolved configs) with ``python -m disentangle.sweep run SWEEP_FILE --workers W
--threads-per-run T``. Both include process start-up; no metrics are computed (the train CLI
computes none). Prints both wall times and the ratio (a) / (b).
"""
from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing


def sweep_dict(runs: int, steps: int, backbone: str) -> dict:
    betas = [1.0, 2.0, 4.0, 6.0, 8.0, 16.0, 32.0, 64.0]
    if runs > 2 * len(betas):
        raise SystemExit(f"--runs must be at most {2 * len(betas)}")
    seeds = 2 if runs % 2 == 0 else 1
    model = {"model.backbone": backbone}
    if backbone == "mlp":
        model["model.hidden_sizes"] = [256, 256]
    return {
        "name": "bench",
        "base": "quickstart",
        "set": {
            **model,
            "train.steps": steps,
            "train.checkpoint_every": max(1, steps // 2),
            "train.log_every": max(1, steps // 10),
            "train.progress": False,
            "train.traversals": False,
            "train.device": "cpu",
        },
        "grid": {"objective.beta": betas[: runs // seeds]},
        "seeds": seeds,
        "metrics": [],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=6)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--backbone", default="mlp", help="mlp (256-256, default) or conv64")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--threads-per-run", type=int, default=1)
    args = p.parse_args()

    from disentangle.sweep import load_sweep

    with tempfile.TemporaryDirectory(prefix="bench_sweep_") as tmp:
        tmp = Path(tmp)
        sweep_file = tmp / "sweep.yaml"
        sweep_file.write_text(yaml.safe_dump(sweep_dict(args.runs, args.steps, args.backbone), sort_keys=False))
        plan = load_sweep(sweep_file)
        env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}

        start = time.perf_counter()
        for spec in plan.runs:
            config = dict(spec.config)
            config["train"] = {**config["train"], "out_dir": str(tmp / "serial" / spec.run_id)}
            path = tmp / f"{spec.run_id}.yaml"
            path.write_text(yaml.safe_dump(config, sort_keys=False))
            subprocess.run([sys.executable, "-m", "disentangle.train", "--config", str(path)], check=True,
                           env=env, cwd=ROOT, stdout=subprocess.DEVNULL)
        serial = time.perf_counter() - start

        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "disentangle.sweep", "run", str(sweep_file), "--out", str(tmp / "sweep"),
             "--workers", str(args.workers), "--threads-per-run", str(args.threads_per_run)],
            check=True, env=env, cwd=ROOT, stderr=subprocess.DEVNULL,
        )
        swept = time.perf_counter() - start

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"{len(plan.runs)} runs x {args.steps} steps ({args.backbone}, batch 64, sprites), {cores} cores, "
          f"{platform.processor() or platform.machine()}, load average {os.getloadavg()[0]:.1f} at the end")
    print(f"(a) one after another, python -m disentangle.train:      {serial:8.1f} s")
    print(f"(b) sweep, local backend, {args.workers} workers x {args.threads_per_run} thread(s):  {swept:8.1f} s")
    print(f"ratio (a) / (b): {serial / swept:.2f}x")


if __name__ == "__main__":
    main()
