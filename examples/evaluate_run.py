"""Evaluate a trained run with every disentanglement metric and print a table.

Notebook-style (``# %%`` cells run in VS Code / Jupytext) or as a script::

    python examples/evaluate_run.py runs/quickstart
    python examples/evaluate_run.py runs/quickstart --quick     # smaller samples, ~10x faster

The same as ``python -m disentangle.evaluate runs/quickstart``, spelled out in the Python API.
"""
# %%
from __future__ import annotations

import argparse
import sys
import time

import disentangle
from disentangle.data import build_dataset
from disentangle.metrics import available_metrics, evaluate_metrics

parser = argparse.ArgumentParser(description="Evaluate a trained run with every metric.")
parser.add_argument("run_dir", nargs="?", default="runs/quickstart")
parser.add_argument("--quick", action="store_true", help="smaller samples and the fast DCI booster")
args = parser.parse_args(sys.argv[1:] if "ipykernel" not in sys.modules else [])

# %% Load the model (eval mode) and build its dataset from the run's own config.
model = disentangle.load(args.run_dir)
dataset = build_dataset(model.config["data"])
print(f"run {args.run_dir}: {model.config['data']['name']}, latent_dim={model.latent_dim}, "
      f"factors {dict(zip(dataset.factor_names, dataset.factor_sizes))}")

# %% Every metric that applies to this model (a model with an encoder gets the ELBO decomposition too).
names = list(available_metrics(model))
settings = {}
if args.quick:  # about 10x faster, for a first look; the defaults are those of Locatello et al.
    settings = {
        "beta_vae_score": {"num_train": 2000, "num_eval": 1000},
        "factor_vae_score": {"num_train": 2000, "num_eval": 1000},
        "dci": {"num_train": 2000, "num_test": 1000, "booster": "hist"},
        "sap_score": {"num_train": 2000, "num_test": 1000},
        "modularity_explicitness": {"num_train": 2000, "num_test": 1000},
        "downstream_task": {"num_train": [10, 100, 1000], "predictors": ["logistic_regression"]},
        "elbo_decomposition": {"num_samples": 2000},
    }


def progress(name: str, scores: dict[str, float], seconds: float) -> None:
    print(f"  {name:<26} {seconds:6.1f} s", flush=True)


start = time.perf_counter()
results = evaluate_metrics(dataset, model, names, seed=0, settings=settings, callback=progress)
print(f"all metrics in {time.perf_counter() - start:.1f} s")

# %% One row per score.
width = max(len(f"{m}.{k}") for m, scores in results.items() for k in scores)
print(f"\n{'score':<{width}}  value")
for metric, scores in results.items():
    for key, value in scores.items():
        print(f"{metric + '.' + key:<{width}}  {value:.4f}")
