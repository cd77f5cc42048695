"""ModelCentrality: unsupervised model selection by how well the models score on each other's data.

Lin, Thekumparampil, Fanti & Oh, "InfoGAN-CR and ModelCentrality: Self-supervised Model Training
and Selection for Disentangling GANs", ICML 2020, §4. Each trained model ``i`` is a generator of
its own "ground truth": its latent codes are the factors and its decoder (a VAE's decoder, a GAN's
generator) renders them. Every other model ``j`` is scored on that data by a supervised
disentanglement metric of its representation against model ``i``'s codes, ``s_ij`` (the paper uses
the FactorVAE score), and

    centrality(j) = 1/(M − 1) Σ_{i ≠ j} s_ij ,

the model most in agreement with the others being the one picked (a disentangled model should
recover the factors of other disentangled models; entangled ones disagree in different ways).

A model's code is continuous; the metrics need factors with finitely many classes, so code ``k`` is
discretised into ``bins`` equiprobable classes of its prior (:class:`GeneratorDataset`): class
``v`` is the prior's ``(v + ½)/bins`` quantile, ``N(0, 1)`` for a VAE, ``U(−1, 1)`` for a generator
that declares a uniform prior (``decoder.code_prior = "uniform"``, as InfoGAN's); a categorical code
(Elastic-InfoGAN's last K codes, ``model.num_categories``) is one factor of K classes, given one-hot,
as the generator was trained (each slot of the simplex alone is no code it saw). A generator with
noise besides the codes (``decoder.generate(codes, noise)``, ``decoder.noise_dim``) gets fresh
noise, from the same prior, for every observation. Which metric is a choice (``metric``, any
registered metric taking ``(dataset, representation)``; default ``factor_vae_score`` and its
``eval_accuracy``).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from scipy.stats import norm

from .._core.checks import integer
from ..errors import InputError


class GeneratorDataset:
    """A trained model's decoder as a ground-truth dataset: its ``latent_dim`` codes, each cut into
    ``bins`` equiprobable classes of its prior, are the factors (the ground-truth interface of
    :class:`disentangle.data.GroundTruthDataset`)."""

    def __init__(self, model: Any, bins: int = 20, batch_size: int = 256) -> None:
        self.model = model
        self.bins = integer("bins", bins, minimum=2)
        self.batch_size = integer("batch_size", batch_size, minimum=1)
        latent_dim = int(model.latent_dim)
        #: K: a categorical code in the last K slots (Elastic-InfoGAN's) is one factor of K classes, one-hot
        self.num_categories = int(getattr(model, "num_categories", 0) or 0)
        continuous = latent_dim - self.num_categories
        self.factor_sizes = (self.bins,) * continuous + ((self.num_categories,) if self.num_categories else ())
        self.factor_names = tuple(f"code_{k}" for k in range(continuous)) + (
            ("category",) if self.num_categories else ())
        decoder = getattr(model, "decoder", None)
        self.prior = getattr(decoder, "code_prior", "normal")
        quantiles = (np.arange(self.bins) + 0.5) / self.bins
        self.values = (2 * quantiles - 1) if self.prior == "uniform" else norm.ppf(quantiles)
        self.noise_dim = int(getattr(decoder, "noise_dim", 0)) if hasattr(decoder, "generate") else 0

    def sample_factors(self, n: int, rng: np.random.Generator) -> np.ndarray:
        if not self.num_categories:
            return rng.integers(0, self.bins, size=(n, len(self.factor_sizes)), dtype=np.int64)
        return np.stack([rng.integers(0, size, size=n, dtype=np.int64) for size in self.factor_sizes], axis=1)

    def _noise(self, n: int, rng: np.random.Generator) -> np.ndarray:
        if self.prior == "uniform":
            return rng.uniform(-1.0, 1.0, size=(n, self.noise_dim))
        return rng.standard_normal(size=(n, self.noise_dim))

    @torch.no_grad()
    def sample_observations_from_factors(self, factors: np.ndarray, rng: np.random.Generator) -> torch.Tensor:
        factors = np.asarray(factors)
        if self.num_categories:  # the continuous codes' values, then the category one-hot
            continuous = self.values[factors[:, :-1]]
            codes = torch.as_tensor(np.concatenate(
                [continuous, np.eye(self.num_categories)[factors[:, -1]]], axis=1), dtype=torch.float32)
        else:
            codes = torch.as_tensor(self.values[factors], dtype=torch.float32)
        noise = torch.as_tensor(self._noise(len(codes), rng), dtype=torch.float32) if self.noise_dim else None
        device = next(self.model.parameters()).device
        out = []
        for start in range(0, len(codes), self.batch_size):
            c = codes[start:start + self.batch_size].to(device)
            if noise is None:
                logits = self.model.decode(c)
            else:
                logits = self.model.decoder.generate(c, noise[start:start + self.batch_size].to(device))
            out.append(torch.sigmoid(logits).float().cpu())
        return torch.cat(out)


def centrality_matrix(
    models: Sequence[Any],
    *,
    metric: str = "factor_vae_score",
    score: str = "eval_accuracy",
    bins: int = 20,
    seed: int = 0,
    settings: dict[str, Any] | None = None,
    progress: bool = True,
) -> np.ndarray:
    """``S (M, M)``: ``S[i, j]`` the ``metric``'s ``score`` of model ``j``'s representation on the
    data generated by model ``i`` (its codes the factors); the diagonal is NaN."""
    from ..metrics import METRICS

    if len(models) < 2:
        raise InputError(f"ModelCentrality compares models with each other; got {len(models)}.")
    fn = METRICS.get(metric)
    matrix = np.full((len(models), len(models)), np.nan)
    pairs = [(i, j) for i in range(len(models)) for j in range(len(models)) if i != j]
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(pairs), desc=f"ModelCentrality: {metric}", unit="pair")
    try:
        for i in range(len(models)):
            data = GeneratorDataset(models[i], bins=bins)
            for j in range(len(models)):
                if i == j:
                    continue
                result = fn(data, models[j], seed=seed, **(settings or {}))
                matrix[i, j] = float(result[score])
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return matrix


def model_centrality(matrix: np.ndarray) -> np.ndarray:
    """``centrality(j) = mean_{i ≠ j} S[i, j]`` of a :func:`centrality_matrix`."""
    matrix = np.asarray(matrix, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or matrix.shape[0] < 2:
        raise InputError(f"a centrality matrix is square with at least 2 models; got shape {matrix.shape}.")
    off = ~np.eye(matrix.shape[0], dtype=bool)
    return np.array([matrix[:, j][off[:, j]].mean() for j in range(matrix.shape[0])])
