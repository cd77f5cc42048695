"""Metrics worker, disent: ``disent.metrics`` on our shipped model, timed with its encoding.

* Ground truth: our sprites as a disent ``GroundTruthData``: an ``ArrayGroundTruthData`` (factor
  names and sizes from our dataset) over the whole grid, rendered by our code in this process
  (737,280 images, 2.8 GiB, times 255 as disent stores dSprites) and wrapped by
  ``DisentDataset(transform=ToImgTensorF32())``. disent draws observations one index at a time, so
  it is given them in memory, as its own dSprites loader does; the rendering is not timed.
* Representation: our model's posterior means, ``model.representation(x)`` (the function our
  metrics call), on the CPU with the same threads. Our package is importable here from the
  checkout (the driver puts a ``.pth`` file into this environment), not installed with its
  dependencies.
* Settings: each metric's own defaults (``inspect.signature``), or with ``--fast`` the "fast"
  settings disent declares for it (``make_metric(..., fast_kwargs=...)``); they are reported so
  that the driver runs ours with the same. disent draws from numpy's global generator, seeded 0
  before each metric.
"""
from __future__ import annotations

import inspect
import time

import _common
import _disent_setup

METRICS = ("mig", "dci", "sap", "factor_vae")


def metric_settings(metric, fast: bool) -> dict:
    """The keyword arguments a plain call uses (its defaults), with disent's fast settings on top."""
    skip = {"dataset", "representation_function", "show_progress"}
    params = inspect.signature(metric.unwrap).parameters
    settings = {k: p.default for k, p in params.items() if k not in skip and p.default is not inspect.Parameter.empty}
    if fast:
        settings.update(metric.compute_fast.keywords)
    return settings


def hidden_settings() -> dict:
    """Settings fixed inside disent's code rather than taken as arguments."""
    from disent.metrics import _factor_vae

    return {
        # disent/metrics/_mig.py, _compute_mig: utils.histogram_discretize(mus_train, num_bins=20)
        "mig": {"num_bins": 20},
        # disent/metrics/_factor_vae.py: _prune_dims(variances, threshold=0.0) and the batch of
        # _compute_variances (eval_batch_size=64)
        "factor_vae": {
            "prune_threshold": inspect.signature(_factor_vae._prune_dims).parameters["threshold"].default,
            "variance_batch_size": inspect.signature(_factor_vae._compute_variances).parameters["eval_batch_size"].default,
        },
    }


def ground_truth_dataset(model):
    """Our sprites grid as a ``DisentDataset`` over an ``ArrayGroundTruthData``."""
    from disent.dataset import DisentDataset
    from disent.dataset.data import ArrayGroundTruthData
    from disent.dataset.transform import ToImgTensorF32

    from disentangle.data import build_dataset

    ours = build_dataset({**dict(model.config["data"]), "materialize": True})
    grid = ours.images.numpy()  # (N, 1, 64, 64) uint8 0/1, shares memory with the tensor
    grid *= 255  # as disent stores dSprites
    data = ArrayGroundTruthData(
        grid.reshape(len(grid), 64, 64, 1), factor_names=ours.factor_names, factor_sizes=ours.factor_sizes,
        array_chn_is_last=True,
    )
    return DisentDataset(data, transform=ToImgTensorF32())


def main() -> None:
    p = _common.parser(__doc__.splitlines()[0])
    p.add_argument("--model", required=True)
    p.add_argument("--fast", action="store_true", help="disent's fast settings (a pilot)")
    p.add_argument("--only", default=",".join(METRICS), help=f"comma-separated subset of {', '.join(METRICS)}")
    args = p.parse_args()
    _common.set_threads(args.threads)
    shimmed = _disent_setup.import_torchvision()

    import disent.metrics
    import numpy as np
    import torch

    import disentangle

    model = disentangle.load(args.model)
    start = time.perf_counter()
    dataset = ground_truth_dataset(model)
    grid_s = time.perf_counter() - start

    def representation(x):
        return model.representation(x)

    hidden = hidden_settings()
    results = {}
    for name in [m for m in METRICS if m in args.only.split(",")]:
        metric = getattr(disent.metrics, f"metric_{name}")
        settings = metric_settings(metric, args.fast)
        np.random.seed(0)
        torch.manual_seed(0)
        faults = _common.minor_faults()
        start = time.perf_counter()
        scores = metric(dataset, representation, **settings)
        seconds = time.perf_counter() - start
        results[name] = {"scores": {k: float(v) for k, v in scores.items()}, "seconds": seconds,
                         "faults": _common.minor_faults() - faults, "settings": {**settings, **hidden.get(name, {})}}
        print(f"disent {name}: {seconds:.1f} s {results[name]['scores']}", flush=True)
    _common.write_result(args.result, {
        "metrics": results,
        "grid_render_s": grid_s,
        "versions": _common.versions("disent", "torch", "torchvision"),
        "torchvision_ops_workaround": shimmed,
    })


if __name__ == "__main__":
    main()
