"""Wall time of each disentanglement metric with its default settings, on a 10-dimensional code.

Run::

    python benchmarks/bench_metrics.py                       # sprites images if registered
    python benchmarks/bench_metrics.py --data factors        # observations = the factor vector
    python benchmarks/bench_metrics.py --metrics mig,dci --n-jobs 1
    python benchmarks/bench_metrics.py --dci-booster sklearn # DCI with scikit-learn's booster
    python benchmarks/bench_metrics.py --dci-booster hist    # the histogram DCI option
    python benchmarks/bench_metrics.py --mi-widths 10,64,256 # pairwise MI of wide codes only

Data and representation (both cheap, so the times are those of the metrics themselves):

* ``--data sprites`` (default when ``sprites`` is registered): procedural dSprites images
  (3 x 6 x 40 x 32 x 32 factors), rendered once into memory (2.8 GB, ~40 s, not timed). The
  representation is a fixed random linear map (seed 0) from seven image statistics (mass,
  centroid x/y, spread x/y, third moments x/y of the row/column sums, standardised) to 10
  dimensions: informative, continuous and entangled.
* ``--data factors``: a stand-in with the same factor grid whose observations are the factors
  scaled to [0, 1]. The representation is a near-perfect 10-dimensional code: the five scaled
  factors plus deterministic pseudo-noise (std 0.05), five pure pseudo-noise dimensions (std 0.5),
  all mixed by a fixed near-identity rotation (angle ~0.1 rad).

Times are wall-clock seconds (on a shared machine they depend on the other load; the load average
is printed). ``data+codes`` is the part spent drawing observations and calling the
representation (large for the BetaVAE/FactorVAE scores on images: 2.9M draws); ``metric`` is the
rest, the number comparable with the reference, whose representation cost nothing. On sprites,
as :func:`disentangle.metrics.evaluate_metrics` does by default, each grid point is encoded at most
once (``CodeTable``: 0.72M of the 2.9M draws); ``--no-code-table`` encodes every draw. The reference column is disentanglement_lib with its defaults, timed on the same kind of 2-core
machine (numbers from issue 2): DCI about 295 s on a 10-dimensional code, the other five metrics
about 1 s each or less (taken as 1 s), about 5 minutes for the six.
"""
from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from disentangle.metrics import LOCATELLO_METRICS, METRICS, CodeTable, supports_code_table
from disentangle.metrics.synthetic import FactorObservationDataset

#: disentanglement_lib, default settings, 10-dimensional code, 2-core machine (issue 2)
REFERENCE_SECONDS = {
    "beta_vae_score": 1.0,
    "factor_vae_score": 1.0,
    "mig": 1.0,
    "modularity_explicitness": 1.0,
    "dci": 295.0,
    "sap_score": 1.0,
    "downstream_task": 25.0,  # logistic regression only
}
DSPRITES_SIZES = (3, 6, 40, 32, 32)
NAMES = ("shape", "scale", "orientation", "position_x", "position_y")


def _pseudo_noise(factors: np.ndarray, salt: int, dims: int) -> np.ndarray:
    """Deterministic standard-normal-ish values per factor vector (a fixed hash, no generator)."""
    from scipy.special import erfinv

    f = factors.astype(np.float64)
    weights = np.arange(1, f.shape[1] + 1) * 12.9898 + salt * 78.233
    base = (f * weights).sum(axis=1, keepdims=True) + np.arange(dims) * 37.719
    u = np.clip(np.abs(np.modf(np.sin(base) * 43758.5453)[0]), 1e-6, 1 - 1e-6)
    return math.sqrt(2.0) * erfinv(2.0 * u - 1.0)


class NearPerfectCode:
    """10-d code of factor observations: factors + small noise, nuisance dims, near-identity rotation.

    Precomputed once for every grid point, so a call is a table look-up (the cost is nil).
    """

    def __init__(self, dataset: FactorObservationDataset) -> None:
        self.sizes = np.asarray(dataset.factor_sizes)
        skew = np.random.default_rng(0).normal(size=(10, 10))
        skew = 0.1 * (skew - skew.T) / math.sqrt(10)
        from scipy.linalg import expm

        rotation = expm(skew)
        grid = np.indices(self.sizes).reshape(len(self.sizes), -1).T
        scaled = grid / (self.sizes - 1)
        informative = scaled + 0.05 * _pseudo_noise(grid, 1, len(self.sizes))
        nuisance = 0.5 * _pseudo_noise(grid, 2, 5)
        self.table = (np.concatenate([informative, nuisance], axis=1) @ rotation.T).astype(np.float32)
        self.strides = np.cumprod(self.sizes[::-1])[::-1][1:].tolist() + [1]

    def __call__(self, x: torch.Tensor) -> np.ndarray:
        factors = np.rint(np.asarray(x) * (self.sizes - 1)).astype(np.int64)
        return self.table[factors @ np.asarray(self.strides)]


class ImageStatistics:
    """Fixed random linear map (seed 0) of seven standardised image statistics to 10 dimensions.

    The statistics come from the row and column sums of the image (two passes over the pixels):
    mass, centroid x/y, spread x/y and third central moment x/y.
    """

    def __init__(self) -> None:
        self.weights = torch.as_tensor(np.random.default_rng(0).normal(size=(7, 10)), dtype=torch.float32)
        self.mean = None
        self.std = None

    def stats(self, x: torch.Tensor) -> torch.Tensor:
        img = x.float()
        img = img[:, 0] if img.shape[1] == 1 else img.sum(dim=1)  # (n, H, W); a view for one channel
        h, w = img.shape[1:]
        cols = img.sum(dim=-2)  # (n, W)
        rows = img.sum(dim=-1)  # (n, H)
        xs = torch.linspace(-1, 1, w)
        ys = torch.linspace(-1, 1, h)
        mass = cols.sum(dim=1).clamp_min(1e-6)  # (n,)
        cx = cols @ xs / mass
        cy = rows @ ys / mass
        dx = xs[None] - cx[:, None]
        dy = ys[None] - cy[:, None]
        vx = (cols * dx**2).sum(dim=1) / mass
        vy = (rows * dy**2).sum(dim=1) / mass
        sx = (cols * dx**3).sum(dim=1) / mass
        sy = (rows * dy**3).sum(dim=1) / mass
        return torch.stack([mass / (h * w), cx, cy, vx, vy, sx, sy], dim=1)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        s = self.stats(x)
        if self.mean is None:  # fixed on the first batch, then frozen
            self.mean, self.std = s.mean(dim=0), s.std(dim=0).clamp_min(1e-6)
        return ((s - self.mean) / self.std) @ self.weights


class Stopwatch:
    """Seconds spent drawing observations and computing codes, through the wrappers below."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def timed(self, fn):
        def call(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start

        return call


class TimedDataset:
    """The dataset, with ``sample_observations_from_factors`` timed by a :class:`Stopwatch`."""

    def __init__(self, dataset, stopwatch: Stopwatch) -> None:
        self._dataset = dataset
        self.sample_observations_from_factors = stopwatch.timed(dataset.sample_observations_from_factors)

    def __getattr__(self, name):
        return getattr(self._dataset, name)

    def __len__(self) -> int:
        return len(self._dataset)


def build(data: str):
    if data == "sprites":
        from disentangle.data import DATASETS

        # all 737,280 images rendered once (2.8 GB), so that drawing observations costs ~nothing
        dataset = DATASETS.build("sprites", materialize=True)
        rep = ImageStatistics()
        rep(dataset.sample_observations_from_factors(dataset.sample_factors(4096, np.random.default_rng(123)), np.random.default_rng(123)))
        return dataset, rep, "sprites images (materialised); code = random linear map of 7 image statistics (10-d)"
    dataset = FactorObservationDataset(DSPRITES_SIZES, NAMES)
    return dataset, NearPerfectCode(dataset), "factor observations (dSprites grid); near-perfect rotated 10-d code"


def bench_mutual_info(widths: list[int], seed: int = 0, n: int = 10_000) -> int:
    """Seconds and traced peak memory of ``discrete_mutual_info(binned, binned)`` per code width."""
    import tracemalloc

    from disentangle.metrics import discrete_mutual_info, histogram_discretize

    print(f"pairwise histogram MI, {n} points, 20 bins; {len(os.sched_getaffinity(0))} cores, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'width':>6}{'seconds':>9}{'peak MiB':>10}")
    rng = np.random.default_rng(seed)
    for width in widths:
        binned = histogram_discretize(rng.normal(size=(n, width)), 20)
        tracemalloc.start()
        start = time.perf_counter()
        discrete_mutual_info(binned, binned)
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(f"{width:>6}{seconds:9.2f}{peak / 2**20:10.1f}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", choices=("auto", "sprites", "factors"), default="auto")
    parser.add_argument("--metrics", default=",".join(LOCATELLO_METRICS),
                        help="comma-separated metric names (default: the six of Locatello et al.)")
    parser.add_argument("--n-jobs", type=int, default=None, help="joblib workers (default: one per core)")
    parser.add_argument("--dci-booster", default="exact", choices=("exact", "sklearn", "hist"),
                        help="DCI tree booster (default: exact, the metric's default)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-code-table", action="store_true",
                        help="encode every drawn image (by default, as evaluate_metrics does, each grid point of "
                             "a dataset with deterministic observations is encoded once)")
    parser.add_argument("--mi-widths", default=None,
                        help="only time the pairwise mutual information of the unsupervised scores for codes of "
                             "these widths (comma-separated), 10,000 points, 20 bins: seconds and peak memory")
    args = parser.parse_args(argv)
    if args.mi_widths:
        return bench_mutual_info([int(w) for w in args.mi_widths.split(",")], seed=args.seed)

    data = args.data
    if data == "auto":
        from disentangle.data import DATASETS

        data = "sprites" if "sprites" in DATASETS else "factors"
    dataset, rep, description = build(data)
    # The reference timings had a representation that cost nothing; here drawing observations
    # (images for sprites) and computing codes is timed separately, to show both.
    stopwatch = Stopwatch()
    if not args.no_code_table and supports_code_table(dataset):
        table = CodeTable(dataset, rep)
        dataset, rep = table, table.identity
        description += "; each grid point encoded once (code table)"
    dataset, rep = TimedDataset(dataset, stopwatch), stopwatch.timed(rep)
    names = [n.strip() for n in args.metrics.split(",") if n.strip()]
    for n in names:
        METRICS.get(n)
    import sklearn

    print(f"data: {description}")
    print(f"python {platform.python_version()}, torch {torch.__version__}, scikit-learn {sklearn.__version__}, "
          f"{len(os.sched_getaffinity(0))} cores, load average {os.getloadavg()[0]:.1f}")
    total = ref_total = six_total = six_own = 0.0
    # Warm up outside the timings: imports, joblib's worker processes, which start once per
    # session (a few seconds) and are reused by every later metric, and the exact booster's
    # compiled kernels (compiled once per install and cached on disk; loaded once per session).
    start = time.perf_counter()
    if "dci" in names and args.dci_booster == "exact":
        METRICS.get("dci")(dataset, rep, seed=args.seed, num_train=200, num_test=100, n_jobs=args.n_jobs)
    METRICS.get("sap_score")(dataset, rep, seed=args.seed, num_train=200, num_test=100, n_jobs=args.n_jobs)
    METRICS.get("modularity_explicitness")(dataset, rep, seed=args.seed, num_train=200, num_test=100, n_jobs=args.n_jobs)
    print(f"(warm-up: imports and worker processes, {time.perf_counter() - start:.1f} s, not counted)")
    print(f"{'metric':<26}{'seconds':>8}{'data+codes':>11}{'metric':>8}{'reference':>11}"
          f"{'speed-up':>10}   scores   (speed-up: reference / metric seconds)")
    for name in names:
        kwargs = {}
        if name in ("dci", "modularity_explicitness", "sap_score", "downstream_task"):
            kwargs["n_jobs"] = args.n_jobs
        if name == "dci":
            kwargs["booster"] = args.dci_booster
        if name == "downstream_task":
            kwargs["predictors"] = ("logistic_regression",)
        stopwatch.seconds = 0.0
        start = time.perf_counter()
        scores = METRICS.get(name)(dataset, rep, seed=args.seed, **kwargs)
        seconds = time.perf_counter() - start
        own = seconds - stopwatch.seconds
        ref = REFERENCE_SECONDS.get(name)
        total += seconds
        if name in LOCATELLO_METRICS:
            ref_total += ref
            six_total += seconds
            six_own += own
        main_scores = ", ".join(f"{k}={v:.3f}" for k, v in list(scores.items())[:4])
        ratio = f"{ref / own:9.1f}x" if ref else f"{'':>10}"
        ref_s = f"{ref:10.0f}s" if ref else f"{'':>11}"
        print(f"{name:<26}{seconds:7.1f}s{stopwatch.seconds:10.1f}s{own:7.1f}s{ref_s}{ratio}   {main_scores}",
              flush=True)
    six = [n for n in names if n in LOCATELLO_METRICS]
    print(f"{'total':<26}{total:7.1f}s")
    if len(six) == len(LOCATELLO_METRICS):
        print(f"six defaults: {six_total:.1f} s in all, {six_own:.1f} s without drawing observations and codes; "
              f"reference {ref_total:.0f} s (nil representation cost): {ref_total / six_own:.1f}x faster "
              f"({ref_total / six_total:.1f}x counting observations and codes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
