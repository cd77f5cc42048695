"""UDR, the Unsupervised Disentanglement Ranking of Duan et al. 2020.

Duan, Matthey, Saraiva, Watters, Burgess, Lerchner & Higgins, "Unsupervised Model Selection for
Variational Disentangled Representation Learning", ICLR 2020. The idea: disentangled
representations of the same data are alike up to a permutation and sign of their latents, while
entangled ones differ from seed to seed. So each model is scored by how similar its representation
is to those of the other seeds of its configuration.

For two models a and b, encode the same N observations, standardise each latent, and form the
similarity matrix R (d_a × d_b) between a's latents (rows) and b's latents (columns):

* ``correlation="lasso"`` (default, UDR_L): R = |W|ᵀ, W the coefficients of a Lasso regression
  (α = 0.1) predicting b's latents from a's;
* ``correlation="spearman"`` (UDR_S): R_ij = |Spearman ρ(z_a,i, z_b,j)|.

A latent is informative when its mean KL to the prior, (1/N) Σ_x KL(q(z_j|x) ‖ N(0, 1)), exceeds
``kl_threshold`` (0.01); only informative latents count. As in disentanglement_lib
(``udr.py``: ``reps * np.greater(kl, 0.01)`` after the ``StandardScaler``), the uninformative
latents are set to zero *before* R is computed, so a collapsed latent that still tracks a factor at
a tiny scale is no input to the Lasso (standardised, it would be a unit-variance copy of that
factor and take coefficient weight from the informative latents); its row and column of R are
then left out as well. With r_i = max_j R_ij and
r_j = max_i R_ij over the informative latents, d_a and d_b their numbers, the paper's pairwise
score (its eq. 3) is::

    UDR_ab = 1 / (d_a + d_b) · [ Σ_i r_i² / Σ_j R_ij  +  Σ_j r_j² / Σ_i R_ij ]

(a latent with Σ = 0 contributes 0; no informative latent at all gives 0). It is 1 when R is a
permutation matrix and falls as a latent's similarity spreads over several latents of the other
model. With the Lasso, identical representations up to permutation, sign and scale score
1 − α = 0.9, not 1: on standardised codes the Lasso shrinks each coefficient by α.
``aggregation="dlib"`` gives disentanglement_lib's variant instead (``udr.py``'s
``relative_strength_disentanglement``)::

    UDR_ab = ½ · [ (1/d_a) Σ_i r_i² / Σ_j R_ij  +  (1/d_b) Σ_j r_j² / Σ_i R_ij ]

the mean of the row terms and the mean of the column terms, averaged. The two agree when
d_a = d_b; **the default (the paper's) differs from disentanglement_lib's whenever the two models
have different numbers of informative latents** (the paper weighs each latent equally, dlib each
model's side equally), so pass ``aggregation="dlib"`` to reproduce disentanglement_lib's numbers.
A model's UDR is the median of its pairwise scores with the other models of its configuration:
UDR_b = median_{a ≠ b} UDR_ab, where for the Lasso the regression goes from a to b as in
disentanglement_lib. With ``aggregation="dlib"``, the Lasso and the default KL threshold the
scores are disentanglement_lib's ``compute_udr_sklearn`` ``model_scores`` on the same codes and
KLs (dlib zeroes at a fixed 0.01 and filters at its ``kl_filter_threshold``; here both use
``kl_threshold``).

Defaults follow disentanglement_lib's ``udr_sklearn`` configuration: 1,000 observations, Lasso,
KL threshold 0.01, the same observations for every model.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._core.checks import choice, positive, positive_int
from ..errors import CheckpointError, InputError

CORRELATIONS = ("lasso", "spearman")
AGGREGATIONS = ("paper", "dlib")


def standardize(codes: np.ndarray) -> np.ndarray:
    """Each column to zero mean and unit variance (``ddof=0``); a constant column becomes zeros."""
    codes = np.asarray(codes, dtype=np.float64)
    centred = codes - codes.mean(axis=0)
    std = codes.std(axis=0)
    return np.divide(centred, std, out=np.zeros_like(centred), where=std > 0)


def gaussian_kl_per_latent(mu: np.ndarray, logvar: np.ndarray) -> np.ndarray:
    """Mean over the sample of KL(N(μ, σ²) ‖ N(0, 1)) per latent: ½ (μ² + σ² − log σ² − 1)."""
    mu = np.asarray(mu, dtype=np.float64)
    logvar = np.asarray(logvar, dtype=np.float64)
    return np.mean(0.5 * (mu**2 + np.exp(logvar) - logvar - 1.0), axis=0)


def similarity_matrix(codes_a: np.ndarray, codes_b: np.ndarray, correlation: str = "lasso", *, alpha: float = 0.1,
                      random_state: int = 0) -> np.ndarray:
    """R (d_a × d_b): |Lasso coefficients| from a's standardised latents to b's, or |Spearman ρ|."""
    correlation = choice("correlation", correlation, CORRELATIONS)
    a, b = standardize(codes_a), standardize(codes_b)
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"codes_a and codes_b must encode the same observations, got {a.shape[0]} and {b.shape[0]} rows.")
    if correlation == "spearman":
        from scipy.stats import rankdata

        ra, rb = standardize(rankdata(a, axis=0)), standardize(rankdata(b, axis=0))
        return np.abs(ra.T @ rb / a.shape[0])
    from sklearn.linear_model import Lasso

    model = Lasso(alpha=alpha, random_state=random_state).fit(a, b)
    coef = np.asarray(model.coef_).reshape(b.shape[1], a.shape[1])
    return np.abs(coef.T)


def _relative_strength(matrix: np.ndarray, axis: int) -> np.ndarray:
    """r² / Σ along ``axis`` for each latent of the other axis (0 where the sum is 0)."""
    top = matrix.max(axis=axis) if matrix.size else np.zeros(matrix.shape[1 - axis])
    total = matrix.sum(axis=axis)
    return np.divide(top**2, total, out=np.zeros_like(total, dtype=np.float64), where=total > 0)


def udr_pair(similarity: np.ndarray, informative_a: np.ndarray | None = None, informative_b: np.ndarray | None = None,
             aggregation: str = "paper") -> float:
    """The pairwise UDR of a similarity matrix R (rows: model a's latents, columns: b's).

    ``informative_*`` are boolean masks of the informative latents (default: all). See the
    module docstring for the formula of each ``aggregation``.
    """
    aggregation = choice("aggregation", aggregation, AGGREGATIONS)
    r = np.abs(np.asarray(similarity, dtype=np.float64))
    if informative_a is not None:
        r = r[np.asarray(informative_a, dtype=bool), :]
    if informative_b is not None:
        r = r[:, np.asarray(informative_b, dtype=bool)]
    d_a, d_b = r.shape
    if d_a == 0 or d_b == 0:
        return 0.0
    rows = _relative_strength(r, axis=1)  # one term per latent of a
    cols = _relative_strength(r, axis=0)  # one term per latent of b
    if aggregation == "paper":
        return float((rows.sum() + cols.sum()) / (d_a + d_b))
    return float((rows.mean() + cols.mean()) / 2.0)


def udr_scores(codes: Sequence[np.ndarray], kl: Sequence[np.ndarray] | None = None, *, correlation: str = "lasso",
               aggregation: str = "paper", kl_threshold: float = 0.01, random_state: int = 0) -> np.ndarray:
    """UDR of each of several models of one configuration, from their codes of the same observations.

    ``codes[m]`` is model m's ``(N, d_m)`` representation of the shared observations, ``kl[m]``
    its mean KL per latent (None: every latent is informative). Each model's codes are
    standardised and its uninformative latents (KL ≤ ``kl_threshold``) set to zero before the
    similarity matrices are computed, as disentanglement_lib does. Returns one score per model,
    the median of its pairwise scores with the others; NaN for a lone model. See the module
    docstring for the formulas and how ``aggregation="paper"`` (default) and ``"dlib"`` differ.
    """
    kl_threshold = positive("kl_threshold", kl_threshold)
    n_models = len(codes)
    masks = [
        np.ones(np.asarray(c).shape[1], dtype=bool) if kl is None else np.asarray(kl[m], dtype=np.float64) > kl_threshold
        for m, c in enumerate(codes)
    ]
    for m, (c, mask) in enumerate(zip(codes, masks)):
        if np.asarray(c).ndim != 2 or np.asarray(c).shape[1] != len(mask):
            raise ValueError(f"model {m}: codes of shape {np.asarray(c).shape} and {len(mask)} KL values; expected (N, d) and d.")
    # standardise, then zero the uninformative latents before any regression (disentanglement_lib's order)
    zeroed = [standardize(c) * mask for c, mask in zip(codes, masks)]
    pairwise = np.full((n_models, n_models), np.nan)
    for a in range(n_models):
        for b in range(n_models):
            if a != b:
                sim = similarity_matrix(zeroed[a], zeroed[b], correlation, random_state=random_state)
                pairwise[a, b] = udr_pair(sim, masks[a], masks[b], aggregation)
    if n_models < 2:
        return np.full(n_models, np.nan)
    return np.array([np.median(np.delete(pairwise[:, b], b)) for b in range(n_models)])


def encode_for_udr(model: Any, observations: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """Codes (``model.representation``) and mean KL per latent (from ``model.encode``, if it has one and a
    posterior: a GAN's codes all count, None)."""
    import torch

    with torch.no_grad():
        codes = model.representation(observations)
        codes_np = codes.detach().cpu().numpy() if hasattr(codes, "detach") else np.asarray(codes)
        from ..metrics import has_a_posterior

        # a GAN's codes are all inputs of its generator, and its Q has a fixed variance: its "KL" would be
        # half the mean square of Q's means, not information; every code counts, as for a model without encode
        if not hasattr(model, "encode") or not has_a_posterior(model):
            return codes_np, None
        x = torch.as_tensor(observations)
        kls = []
        for start in range(0, len(x), 1024):
            batch = x[start:start + 1024]
            batch = batch.float() / 255.0 if batch.dtype == torch.uint8 else batch.float()
            mu, logvar = model.encode(batch.to(model.device))
            kls.append((gaussian_kl_per_latent(mu.cpu().numpy(), logvar.cpu().numpy()), len(batch)))
    weights = np.array([n for _, n in kls], dtype=np.float64)
    return codes_np, np.average(np.stack([k for k, _ in kls]), axis=0, weights=weights)


def udr_from_runs(
    groups: dict[Any, list[tuple[str, str]]],
    *,
    num_points: int = 1000,
    correlation: str = "lasso",
    aggregation: str = "paper",
    kl_threshold: float = 0.01,
    seed: int = 0,
    progress: bool = True,
    load: Callable[[str], Any] | None = None,
) -> dict[str, dict[str, float]]:
    """UDR of trained runs: ``groups`` maps a configuration to its ``[(run_id, run_dir), ...]`` (its seeds).

    Each model is loaded with :func:`disentangle.load`, its dataset built from its config's
    ``data`` section (once per distinct section), ``num_points`` observations drawn with
    ``numpy.random.default_rng(seed)`` (uniform factors on a grid, uniform images on a sample of images,
    labelled or not) (the same for every model of a configuration) and encoded.
    Returns ``{run_id: {"udr": score, "udr_models": models compared}}``.
    """
    num_points = positive_int("num_points", num_points)
    correlation = choice("correlation", correlation, CORRELATIONS)
    aggregation = choice("aggregation", aggregation, AGGREGATIONS)
    if load is None:
        import disentangle

        load = disentangle.load
    from ..data import build_dataset
    from ..metrics._sampling import draw_images

    datasets: dict[str, Any] = {}
    observations: dict[str, Any] = {}
    results: dict[str, dict[str, float]] = {}
    total = sum(len(v) for v in groups.values())
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, desc="UDR: encoding runs", unit="run")
    try:
        for members in groups.values():
            codes, kls = [], []
            for run_id, run_dir in members:
                try:
                    model = load(run_dir)
                except Exception as err:  # noqa: BLE001 - reported with the run's name
                    raise CheckpointError(f"UDR needs the trained model of run '{run_id}', but '{run_dir}' cannot be loaded: {err}") from None
                config = getattr(model, "config", None) or {}
                if "data" not in config:
                    raise InputError(f"The model of run '{run_id}' ('{run_dir}') has no config with a 'data' section, so its dataset is unknown.")
                key = repr(sorted(dict(config["data"]).items()))
                if key not in observations:
                    dataset = datasets.setdefault(key, build_dataset(dict(config["data"])))
                    # a grid: uniform factors and their observations; a sample of images (labelled or
                    # not): uniform indices, so UDR needs no labels
                    observations[key] = next(draw_images(dataset, num_points, np.random.default_rng(seed), num_points))
                c, k = encode_for_udr(model, observations[key])
                codes.append(c)
                kls.append(k)
                if bar is not None:
                    bar.update(1)
            kl = None if any(k is None for k in kls) else kls
            scores = udr_scores(codes, kl, correlation=correlation, aggregation=aggregation, kl_threshold=kl_threshold,
                                random_state=seed)
            for (run_id, _), score in zip(members, scores):
                results[run_id] = {"udr": float(score), "udr_models": float(len(members))}
    finally:
        if bar is not None:
            bar.close()
    return results
