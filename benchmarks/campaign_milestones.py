"""Keep a copy of a long campaign's checkpoints at milestone steps, for the scores that are too
costly to compute during training (the FactorVAE score encodes the whole factor grid: about four
minutes on one CPU thread, against seconds for MIG and DCI on 10,000 points; the position code of
``position_basis.py`` takes seconds, but needs the model of that step).

    python benchmarks/campaign_milestones.py SWEEP_DIR [SWEEP_DIR ...] --out MILESTONES_DIR \
        [--multiple-of 10000] [--steps 20000,100000,200000]

Watches ``SWEEP_DIR/runs/*/checkpoint.pt`` of every sweep folder given (polling every ``--every`` seconds) and copies a
checkpoint whose step is a milestone to ``MILESTONES_DIR/<run id>/step_<N>/`` with the run's
``config.yaml``: a run folder of its own, which ``python -m disentangle.evaluate`` and
``benchmarks/position_basis.py`` read as any other. A milestone is a step of ``--steps`` or a
multiple of ``--multiple-of`` (default 10,000, the campaign's ``train.eval_every``, so that every
logged evaluation has its model kept: ``trajectories_300k.py`` scores the position code on each, the
FactorVAE score on those of its table; 0 keeps the ``--steps`` only). A kept checkpoint is a whole
trainer checkpoint (8.3 MB for a β-VAE, about 68 MB for a FactorVAE with its discriminator), so
30 of a run take 0.25–2 GB of the machine's disk; they are not committed. The trainer writes
checkpoints every ``train.checkpoint_every`` steps, so a milestone must be a multiple of it and the
poll must come before the next checkpoint replaces it (``--every`` well under the time between
checkpoints; on a GPU, where that is seconds, the ``keep_checkpoints`` callback keeps them instead).
Copies are atomic and a milestone already kept is not copied again; killing and restarting the
watcher is safe. ``--once`` polls once and exits.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

import torch


def checkpoint_step(path: Path) -> int | None:
    """The step of a trainer checkpoint (None when it cannot be read: being replaced, or absent)."""
    try:
        return int(torch.load(path, map_location="cpu", weights_only=True, mmap=True)["step"])
    except Exception:
        return None


def is_milestone(step: int | None, steps: set[int], multiple_of: int = 0) -> bool:
    """Whether a checkpoint of ``step`` is kept: a step of ``steps``, or a positive multiple of
    ``multiple_of`` (0: none)."""
    if step is None:
        return False
    return step in steps or (multiple_of > 0 and step > 0 and step % multiple_of == 0)


def keep_milestones(sweep_dir: Path, out: Path, steps: set[int], multiple_of: int = 0) -> list[Path]:
    """Copy each run's current checkpoint when its step is a milestone not yet kept
    (:func:`is_milestone`); the copies made."""
    made = []
    for run in sorted((sweep_dir / "runs").glob("*")):
        checkpoint = run / "checkpoint.pt"
        if not checkpoint.is_file():
            continue
        step = checkpoint_step(checkpoint)
        if not is_milestone(step, steps, multiple_of):
            continue
        target = out / run.name / f"step_{step:07d}"
        if (target / "checkpoint.pt").is_file():
            continue
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        shutil.copy2(checkpoint, partial / "checkpoint.pt")
        if checkpoint_step(partial / "checkpoint.pt") != step:  # replaced while copying: try next poll
            shutil.rmtree(partial)
            continue
        shutil.copy2(run / "config.yaml", partial / "config.yaml")
        partial.rename(target)
        made.append(target)
    return made


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sweep_dirs", type=Path, nargs="+", metavar="SWEEP_DIR", help="sweep folders to watch")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--steps", default="20000,100000,200000", help="comma-separated milestone steps")
    p.add_argument("--multiple-of", type=int, default=10_000,
                   help="also keep every step that is a multiple of this (default 10000; 0: only --steps)")
    p.add_argument("--every", type=float, default=20.0, help="seconds between polls")
    p.add_argument("--once", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(1)
    steps = {int(s) for s in args.steps.split(",") if s.strip()}
    while True:
        for sweep_dir in args.sweep_dirs:
            for target in keep_milestones(sweep_dir, args.out, steps, args.multiple_of):
                print(f"kept {target}", flush=True)
        if args.once:
            return
        time.sleep(args.every)


if __name__ == "__main__":
    sys.exit(main())
