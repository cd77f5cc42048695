"""Is the position encoded in a rotated basis? MIG before and after the best rotation of the plane of
the two latents that carry the position.

    python benchmarks/position_basis.py [NAME|RUN_DIR ...] [--out benchmarks/RESULTS-position-basis.md]

Without names: every pretrained sprites model of the zoo trained with disentanglement_lib's layer
init (``model.init: reference``). A model can encode the x and y positions well and still score a
low MIG on them, if its two position latents are a rotation of (x, y) (e.g. x + y and y − x): MIG
asks for one latent per factor. This measures how much of a model's MIG that costs.

Per model, exactly as MIG samples (:func:`disentangle.metrics.mig`, with the seed the zoo recorded
its scores with, ``metrics_seed``, so the first column is the published MIG; 0 for a run folder
unless ``--seed`` is given): 10,000 factor vectors
drawn uniformly, one observation each, its posterior mean as the code, each code dimension binned
into 20 equal-width bins, plug-in mutual information in nats. The two latents with the largest
``I(z; x) + I(z; y)`` span the position plane; they are standardised (zero mean, unit variance) and
rotated by θ = 0°, 1°, …, 89° (rotations by a quarter turn only permute and flip the axes, which MIG
does not see), and MIG is recomputed on the rotated codes, every other latent unchanged. Reported:
MIG of x and y and the mean over the five factors at θ = 0 (the standardisation alone) and at the θ
that maximises the mean of the two position MIGs.

This is a diagnosis, not a metric: it says how far a model is from an axis-aligned position code,
not how disentangled it is.
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

import disentangle  # noqa: E402
from disentangle import zoo  # noqa: E402
from disentangle.data import build_dataset  # noqa: E402
from disentangle.metrics._information import discrete_entropy, discrete_mutual_info, histogram_discretize  # noqa: E402
from disentangle.metrics._representation import as_representation_function  # noqa: E402
from disentangle.metrics._sampling import sample_codes_and_factors  # noqa: E402
from disentangle.metrics.mig import mig_from_mutual_info  # noqa: E402

NUM_TRAIN = 10_000
NUM_BINS = 20
POSITIONS = ("position_x", "position_y")


def rotate_plane(codes: np.ndarray, a: int, b: int, degrees: float) -> np.ndarray:
    """``codes`` with columns ``a`` and ``b`` standardised and rotated by ``degrees`` (counter-clockwise)."""
    out = codes.copy()
    pair = codes[:, [a, b]]
    pair = (pair - pair.mean(axis=0)) / np.where(pair.std(axis=0) > 0, pair.std(axis=0), 1.0)
    theta = np.deg2rad(degrees)
    c, s = np.cos(theta), np.sin(theta)
    out[:, a] = c * pair[:, 0] - s * pair[:, 1]
    out[:, b] = s * pair[:, 0] + c * pair[:, 1]
    return out


def gaps(codes: np.ndarray, factors: np.ndarray) -> np.ndarray:
    """Per-factor MIG gaps (disentanglement_lib's histogram estimator)."""
    mi = discrete_mutual_info(histogram_discretize(codes, NUM_BINS), factors)
    return mig_from_mutual_info(mi, discrete_entropy(factors))


def position_basis(model, dataset, seed: int = 0, sample: tuple[np.ndarray, np.ndarray] | None = None) -> dict:
    """MIG of the positions before and after the best rotation of the position plane (see the module docstring).

    ``sample``: the ``(codes, factors)`` that MIG's sampling gives for ``seed`` (``NUM_TRAIN``
    points, every factor), when the caller has encoded them already; drawn here otherwise."""
    names = list(dataset.factor_names)
    varying = [k for k, size in enumerate(dataset.factor_sizes) if size > 1]
    if sample is None:
        code_fn = as_representation_function(model)
        sample = sample_codes_and_factors(dataset, code_fn, NUM_TRAIN, np.random.default_rng(seed))
    codes, factors = sample
    factors = factors[:, varying]
    names = [names[k] for k in varying]
    ix, iy = names.index(POSITIONS[0]), names.index(POSITIONS[1])
    mi = discrete_mutual_info(histogram_discretize(codes, NUM_BINS), factors)
    a, b = (int(j) for j in np.argsort(-(mi[:, ix] + mi[:, iy]))[:2])
    published = gaps(codes, factors)
    best = None
    for degrees in range(90):
        g = gaps(rotate_plane(codes, a, b, degrees), factors)
        if degrees == 0:
            standardised = g
        if best is None or (g[ix] + g[iy]) > (best[1][ix] + best[1][iy]):
            best = (degrees, g)
    return {
        "latents": (a, b), "mig": float(np.nanmean(published)), "x": float(published[ix]), "y": float(published[iy]),
        "mig0": float(np.nanmean(standardised)), "x0": float(standardised[ix]), "y0": float(standardised[iy]),
        "theta": best[0], "mig_rot": float(np.nanmean(best[1])), "x_rot": float(best[1][ix]), "y_rot": float(best[1][iy]),
    }


def load_with_dataset(name: str, datasets: dict[str, object]) -> tuple[object, object, int]:
    """A zoo model (by name) or a run folder, its dataset (built once per data config, kept in
    ``datasets``) and the seed its scores were computed with (``metrics_seed``; 0 for a run folder)."""
    is_run = Path(name).is_dir()
    model = disentangle.load(name if is_run else f"zoo:{name}")
    seed = 0 if is_run else int(zoo.info(name).get("metrics_seed") or 0)
    key = repr(sorted(model.config["data"].items()))
    if key not in datasets:
        datasets[key] = build_dataset(model.config["data"])
    return model, datasets[key], seed


def default_names() -> list[str]:
    out = []
    for name in zoo.names(pretrained=True):
        cfg = zoo.info(name)["config"]
        if (cfg.get("data") or {}).get("name") == "sprites" and (cfg.get("model") or {}).get("init") == "reference":
            out.append(name)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="pretrained zoo names or run folders (default: the reference-init sprites models)")
    parser.add_argument("--out", type=Path, default=None, help="write the markdown here too")
    parser.add_argument("--seed", type=int, default=None,
                        help="the metric's seed (default: a zoo model's recorded metrics_seed, 0 for a run folder)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    names = args.names or default_names()
    lines = [
        "| model | MIG | MIG x | MIG y | position latents | best θ | MIG x rotated | MIG y rotated | MIG rotated |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    datasets: dict[str, object] = {}
    for name in names:
        model, dataset, recorded_seed = load_with_dataset(name, datasets)
        seed = args.seed if args.seed is not None else recorded_seed
        r = position_basis(model, dataset, seed=seed)
        lines.append(
            f"| `{name}` | {r['mig']:.3f} | {r['x']:.3f} | {r['y']:.3f} | z{r['latents'][0]}, z{r['latents'][1]} | "
            f"{r['theta']}° | {r['x_rot']:.3f} | {r['y_rot']:.3f} | {r['mig_rot']:.3f} |"
        )
        print(lines[-1], flush=True)
    from time_to_disentangle import cpu_description

    header = [
        "# Is the position encoded in a rotated basis?", "",
        f"`python benchmarks/position_basis.py{' ' + ' '.join(args.names) if args.names else ''}` "
        "(see its docstring for the method). MIG and its x and y parts as MIG samples them (10,000 "
        "points, 20 bins, the seed each model's published scores were computed with); then the same codes with the plane of the two position latents "
        "(standardised) rotated by the angle θ that maximises the x and y parts. Computed on: "
        f"{cpu_description()}, torch {torch.__version__}.", "",
    ]
    text = "\n".join(header + lines) + "\n"
    if args.out is not None:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
