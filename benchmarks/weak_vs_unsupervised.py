"""Weak supervision vs. none: MIG of a pair objective and of the β-VAE at the same training budget.

    python benchmarks/weak_vs_unsupervised.py                                   # Ada-GVAE vs β-VAE, 3 seeds
    python benchmarks/weak_vs_unsupervised.py --steps 5 --seeds 0 --mig-points 1000   # smoke test
    python benchmarks/weak_vs_unsupervised.py --weak ada_ml_vae --beta 1 --k 1 --device cuda

The demonstration of Locatello et al. 2020 ("Weakly-Supervised Disentanglement Without
Compromises") on the offline procedural sprites (the dSprites grid): for each seed it trains the
weakly-supervised objective on pairs (:mod:`disentangle.data.pairs`) and the unsupervised β-VAE
with the same β, backbone (conv64, 10 latents), learning rate and number of steps, then prints the
MIG (disentanglement_lib's histogram estimator, ``--mig-points`` points) of both. By default the
β-VAE's batch has twice as many images as the number of pairs, so that both see the same number
of images per step (``--unsup-batch`` overrides it). The runs are kept under ``--out``.

Expensive at the default budget (several CPU hours); the numbers belong in the README with the
command and the machine, not in a test.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

import disentangle
from disentangle.config import load_config
from disentangle.data import build_dataset
from disentangle.metrics import mig
from disentangle.training.trainer import fit

WEAK = ("ada_gvae", "ada_ml_vae", "gvae", "ml_vae")


def _overrides(args: argparse.Namespace, objective: list[str], batch_size: int, seed: int, out_dir: Path) -> list[str]:
    return [
        f"seed={seed}",
        "data.name=sprites",
        "model.backbone=conv64",
        "model.latent_dim=10",
        *objective,
        f"objective.beta={args.beta}",
        f"train.steps={args.steps}",
        f"train.batch_size={batch_size}",
        f"train.lr={args.lr}",
        f"train.device={args.device}",
        f"train.out_dir={out_dir}",
        f"train.checkpoint_every={args.steps}",
        f"train.log_every={max(1, args.steps // 20)}",
        "train.progress=false",
        "train.traversals=false",
    ]


def _train_and_score(overrides: list[str], dataset, seed: int, mig_points: int) -> tuple[float, float]:
    cfg = load_config(None, overrides)
    start = time.perf_counter()
    fit(cfg)
    seconds = time.perf_counter() - start
    model = disentangle.load(cfg.train.out_dir)
    score = mig(dataset, model, seed=seed, num_train=mig_points)["mig"]
    return score, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weak", default="ada_gvae", choices=WEAK, help="the pair objective (default ada_gvae)")
    parser.add_argument("--k", default="random", help="factors resampled per pair: an integer or 'random' (default)")
    parser.add_argument("--beta", type=float, default=4.0, help="β of both objectives (default 4, the quickstart's)")
    parser.add_argument("--steps", type=int, default=3000, help="training steps of every run (default 3000)")
    parser.add_argument("--pairs", type=int, default=32, help="pairs per batch of the weak objective (default 32)")
    parser.add_argument("--unsup-batch", type=int, default=None, help="β-VAE batch size (default 2 × --pairs)")
    parser.add_argument("--lr", type=float, default=5e-4, help="Adam learning rate (default 5e-4, as the quickstart)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--mig-points", type=int, default=10_000, help="points of the MIG estimate (default 10,000)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    parser.add_argument("--out", type=Path, default=None, help="folder for the runs (default: a new temporary one)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args(argv)
    k = args.k if args.k == "random" else int(args.k)
    if args.threads:
        torch.set_num_threads(args.threads)
    out = args.out or Path(tempfile.mkdtemp(prefix="weak_vs_unsupervised_"))
    unsup_batch = args.unsup_batch or 2 * args.pairs
    try:
        dataset = build_dataset({"name": "sprites"}, device=args.device)
        print(
            f"# {platform.processor() or platform.machine()}, torch {torch.__version__}, "
            f"{torch.get_num_threads()} threads, device {args.device}; runs in {out}"
        )
        print(
            f"# {args.weak} (k={k}, {args.pairs} pairs/step) vs beta_vae ({unsup_batch} images/step); "
            f"beta {args.beta}, {args.steps} steps, lr {args.lr}, conv64, 10 latents, MIG on {args.mig_points} points"
        )
        print(f"{'seed':>4}  {'MIG ' + args.weak:>16}  {'MIG beta_vae':>12}  {'s weak':>8}  {'s beta_vae':>10}")
        rows = []
        for seed in args.seeds:
            weak = _overrides(args, [f"objective.name={args.weak}", f"objective.k={k}"], args.pairs, seed,
                              out / f"{args.weak}_seed{seed}")
            unsup = _overrides(args, ["objective.name=beta_vae"], unsup_batch, seed, out / f"beta_vae_seed{seed}")
            weak_mig, weak_s = _train_and_score(weak, dataset, seed, args.mig_points)
            unsup_mig, unsup_s = _train_and_score(unsup, dataset, seed, args.mig_points)
            rows.append({"seed": seed, "weak_mig": weak_mig, "beta_vae_mig": unsup_mig,
                         "weak_seconds": weak_s, "beta_vae_seconds": unsup_s})
            print(f"{seed:>4}  {weak_mig:>16.3f}  {unsup_mig:>12.3f}  {weak_s:>8.0f}  {unsup_s:>10.0f}", flush=True)
        if len(rows) > 1:
            for key, label in (("weak_mig", args.weak), ("beta_vae_mig", "beta_vae")):
                values = [r[key] for r in rows]
                print(f"# mean MIG {label}: {statistics.mean(values):.3f} ± {statistics.stdev(values):.3f} (sd over seeds)")
        if args.json:
            args.json.write_text(json.dumps({"args": {k_: str(v) for k_, v in vars(args).items()}, "rows": rows}, indent=2))
    except disentangle.DisentangleError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
