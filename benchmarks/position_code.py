"""How is the position encoded where MIG misses it? Collapse, a split code or a non-linear one.

    python benchmarks/position_code.py [NAME|RUN_DIR ...] [--out benchmarks/RESULTS-position-code.md]

Without names: every pretrained model of the zoo that follows the published schedule (``-cpu300k-``,
``-gpu300k-``). A low MIG on the x and y positions has three usual causes, which this tells apart:

* **collapse**: too few latents in use. *Active latents* are Burda et al. 2016's active units,
  latents whose posterior mean varies over the data: ``Var_x E_q(z|x)[z_j] > 0.01``.
* **a split code**: a position spread over several latents. A latent *carries* a factor when its
  mutual information with it is at least 10% of the factor's entropy (the histogram estimator of
  MIG: 20 equal-width bins); *shared* latents carry both x and y.
* **a non-linear code**: all the position is in the code but not as a linear function of it. R² of
  x and of y regressed on the whole code (10,000 points drawn as MIG draws them, fitted on 8,000,
  scored on the other 2,000): a linear regression, and a 10-nearest-neighbour one, which reads any
  smooth code. A kNN R² near 1 with a low linear R² is a non-linear code (a rotation, which
  ``benchmarks/position_basis.py`` measures, is linear and would leave the linear R² high).

Per model, the codes are posterior means, with the seed each zoo model's scores were computed with
(``metrics_seed``; 0 for a run folder).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing
sys.path.insert(0, str(Path(__file__).resolve().parent))  # time_to_disentangle's cpu_description

from position_basis import load_with_dataset  # noqa: E402

from disentangle import zoo  # noqa: E402
from disentangle.metrics._information import discrete_entropy, discrete_mutual_info, histogram_discretize  # noqa: E402
from disentangle.metrics._representation import as_representation_function  # noqa: E402
from disentangle.metrics._sampling import sample_codes_and_factors  # noqa: E402
from disentangle.metrics.mig import mig_from_mutual_info  # noqa: E402

NUM_POINTS, NUM_FIT = 10_000, 8_000
NUM_BINS = 20
#: a latent carries a factor when I(z; factor) >= CARRIES * H(factor)
CARRIES = 0.1
#: a latent is active when the variance of its posterior mean exceeds this (Burda et al. 2016)
ACTIVE = 0.01
NEIGHBOURS = 10
POSITIONS = ("position_x", "position_y")


def active_latents(codes: np.ndarray) -> int:
    """Burda et al. 2016's active units of ``(n, d)`` posterior means: latents whose variance over the
    data exceeds :data:`ACTIVE`."""
    return int((np.var(codes, axis=0) > ACTIVE).sum())


def r2(predicted: np.ndarray, target: np.ndarray) -> float:
    """Coefficient of determination of ``predicted`` against ``target``."""
    return float(1.0 - np.sum((target - predicted) ** 2) / np.sum((target - target.mean()) ** 2))


def linear_and_knn_r2(codes: np.ndarray, target: np.ndarray) -> tuple[float, float]:
    """Held-out R² of ``target`` from ``codes``: least squares, and the mean of the
    :data:`NEIGHBOURS` nearest fitted points (standardised codes)."""
    from sklearn.neighbors import KNeighborsRegressor

    fit, test = slice(0, NUM_FIT), slice(NUM_FIT, None)
    design = np.column_stack([codes, np.ones(len(codes))])
    weights, *_ = np.linalg.lstsq(design[fit], target[fit], rcond=None)
    linear = r2(design[test] @ weights, target[test])
    scale = codes[fit].std(axis=0)
    scaled = codes / np.where(scale > 0, scale, 1.0)
    knn = KNeighborsRegressor(NEIGHBOURS).fit(scaled[fit], target[fit]).predict(scaled[test])
    return linear, r2(knn, target[test])


def position_code(codes: np.ndarray, factors: np.ndarray, names: list[str]) -> dict:
    """The diagnosis of the module docstring for posterior means ``codes`` of ``factors``."""
    ix, iy = names.index(POSITIONS[0]), names.index(POSITIONS[1])
    mi = discrete_mutual_info(histogram_discretize(codes, NUM_BINS), factors)
    entropy = discrete_entropy(factors)
    gaps = mig_from_mutual_info(mi, entropy)
    carries = mi >= CARRIES * entropy[None, :]
    out = {"mig": float(np.nanmean(gaps)), "mig_x": float(gaps[ix]), "mig_y": float(gaps[iy]),
           "active": active_latents(codes), "latents": codes.shape[1],
           "carry_x": int(carries[:, ix].sum()), "carry_y": int(carries[:, iy].sum()),
           "shared": int((carries[:, ix] & carries[:, iy]).sum())}
    for axis, k in (("x", ix), ("y", iy)):
        out[f"linear_{axis}"], out[f"knn_{axis}"] = linear_and_knn_r2(codes, factors[:, k].astype(np.float64))
    return out


def default_names() -> list[str]:
    return [name for name in zoo.names(pretrained=True) if "300k-" in name]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="pretrained zoo names or run folders (default: the 300k models)")
    parser.add_argument("--out", type=Path, default=None, help="write the markdown here too")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    names = args.names or default_names()
    lines = [
        "| model | MIG | MIG x | MIG y | active latents | latents with x | with y | shared | R² x linear | R² x kNN "
        "| R² y linear | R² y kNN |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    datasets: dict[str, object] = {}
    for name in names:
        model, dataset, seed = load_with_dataset(name, datasets)
        varying = [k for k, size in enumerate(dataset.factor_sizes) if size > 1]
        codes, factors = sample_codes_and_factors(dataset, as_representation_function(model), NUM_POINTS,
                                                  np.random.default_rng(seed))
        r = position_code(codes, factors[:, varying], [list(dataset.factor_names)[k] for k in varying])
        lines.append(
            f"| `{name}` | {r['mig']:.3f} | {r['mig_x']:.3f} | {r['mig_y']:.3f} | {r['active']} of {r['latents']} | "
            f"{r['carry_x']} | {r['carry_y']} | {r['shared']} | {r['linear_x']:.2f} | {r['knn_x']:.2f} | "
            f"{r['linear_y']:.2f} | {r['knn_y']:.2f} |"
        )
        print(lines[-1], flush=True)
    from time_to_disentangle import cpu_description

    header = [
        "# How is the position encoded where MIG misses it?", "",
        f"`python benchmarks/position_code.py{' ' + ' '.join(args.names) if args.names else ''}` (see its "
        "docstring for the method): active latents (collapse), the latents carrying x and y (a split code) and "
        "the held-out R² of x and y from the whole code, linear and 10-nearest-neighbour (a non-linear code). "
        f"Computed on: {cpu_description()}, torch {torch.__version__}.", "",
    ]
    text = "\n".join(header + lines) + "\n"
    if args.out:
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
