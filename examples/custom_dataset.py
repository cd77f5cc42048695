"""Your own ground-truth dataset: wrap arrays of images + factor classes, then train on them.

Runs offline on CPU (a minute or two)::

    python examples/custom_dataset.py [--steps 300] [--out runs/custom_example]

It shows the three ways in:

1. ``from_arrays(images, classes, names)``: an in-memory dataset for metrics and scripts;
2. ``data.name: npz`` + ``data.path``: train from YAML on an ``.npz`` holding ``images`` and
   ``factor_classes`` (and optionally ``factor_names``), no code needed;
3. ``@DATASETS.register("my_bars")``: a named entry with its own parameters, usable as
   ``data.name: my_bars`` in any config.

The toy data here: a bright bar on black, 64×64, with four factors: orientation (2: horizontal,
vertical), thickness (3), position (8) and brightness (4) — 192 images. Any images work the same
way; where every combination of factor classes appears exactly once they form a factor grid (every
metric applies), otherwise a labelled sample (the metrics of (code, label) pairs apply:
docs/guides/own-data.md).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from disentangle.config import load_config  # noqa: E402
from disentangle.data import DATASETS, sample_with_fixed_factor  # noqa: E402
from disentangle.data.custom import from_arrays  # noqa: E402
from disentangle.training.trainer import fit  # noqa: E402

NAMES = ("orientation", "thickness", "position", "brightness")
SIZES = (2, 3, 8, 4)


def make_bars(shuffle: bool = True, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``images`` uint8 (N, 64, 64) and ``classes`` int (N, 4), rows in random order."""
    classes = np.indices(SIZES).reshape(len(SIZES), -1).T
    images = np.zeros((len(classes), 64, 64), dtype=np.uint8)
    for i, (orient, thick, pos, bright) in enumerate(classes):  # building data: a loop is fine
        start = 4 + 7 * pos
        stop = start + 2 + 2 * thick
        value = 100 + 50 * bright
        if orient == 0:
            images[i, start:stop, 8:56] = value
        else:
            images[i, 8:56, start:stop] = value
    if shuffle:  # any row order is accepted; from_arrays sorts into grid order
        perm = np.random.default_rng(seed).permutation(len(classes))
        images, classes = images[perm], classes[perm]
    return images, classes


@DATASETS.register("my_bars", overwrite=True)
def my_bars(shuffle: bool = True, device: str = "cpu"):
    """Way 3: a registered builder; its keyword parameters become ``data.*`` config keys."""
    images, classes = make_bars(shuffle)
    return from_arrays(images, classes, NAMES, device=device)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--out", default="runs/custom_example", help="folder for the .npz, the YAML and the run")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    # 1. In memory -----------------------------------------------------------------------
    images, classes = make_bars()
    ds = from_arrays(images, classes, NAMES)
    print(f"dataset: factors {dict(zip(ds.factor_names, ds.factor_sizes))}, {len(ds)} images "
          f"{ds.image_shape}, uint8 on {ds.device}")
    rng = np.random.default_rng(0)
    factors = ds.sample_factors(8, rng)                        # what metrics call
    x = ds.sample_observations_from_factors(factors, rng)      # float in [0, 1], (8, 1, 64, 64)
    same_pos = sample_with_fixed_factor(ds, 8, NAMES.index("position"), rng)
    print(f"observations {tuple(x.shape)} in [{x.min():.2f}, {x.max():.2f}]; "
          f"fixed-position batch has position {set(same_pos[:, 2].tolist())}")

    # 2. From YAML, via an .npz file -----------------------------------------------------
    npz = out / "bars.npz"
    np.savez(npz, images=images, factor_classes=classes, factor_names=np.array(NAMES))
    config = out / "bars.yaml"
    config.write_text(
        "seed: 0\n"
        f"data:\n  name: npz\n  path: {npz}\n"
        # a small MLP keeps this example fast on CPU; use conv64 for real experiments
        "model:\n  backbone: mlp\n  hidden_sizes: [256, 256]\n  latent_dim: 6\n"
        "objective:\n  name: beta_vae\n  beta: 4.0\n"
        f"train:\n  steps: {args.steps}\n  batch_size: 64\n  lr: 5.0e-4\n  device: auto\n"
        f"  out_dir: {out / 'run'}\n  checkpoint_every: {args.steps}\n  log_every: 50\n"
        "  progress: false\n  traversals: true\n"
    )
    print(f"training from {config} (the same as: python -m disentangle.train --config {config})")
    run = out / "run"
    if (run / "checkpoint.pt").exists():
        result = fit(load_config(config), resume=True)
    else:
        result = fit(load_config(config))
    print(f"trained {result.step} steps; run folder {result.out_dir} (traversals.png inside)")

    # 3. The registered builder works in configs as data.name: my_bars ------------------------
    built = DATASETS.build("my_bars", device="cpu")
    assert torch.equal(built.images, ds.images)
    print("data.name: my_bars builds the same dataset (register it in a module your script imports).")


if __name__ == "__main__":
    main()
