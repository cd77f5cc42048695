"""Weakly-supervised VAEs trained on pairs of observations (Locatello et al. 2020).

Locatello, Poole, Rätsch, Schölkopf, Bachem & Tschannen, "Weakly-Supervised Disentanglement
Without Compromises", ICML 2020; the reference implementation is disentanglement_lib's
``methods/weak/weak_vae.py``. Each training example is a pair ``(x1, x2)`` whose factors agree
except for a few resampled ones (:mod:`disentangle.data.pairs` says exactly what is drawn). Both
images are encoded, and for every latent dimension ``i`` the pair's divergence is

    δ_i = KL(q(z_i | x1) ‖ q(z_i | x2))                               (pair_kl)

Dimensions judged *shared* get one posterior for both elements, the aggregate of the two
(``aggregate_pair``); the others keep their own. The loss is the β-VAE objective of both elements
with these posteriors, averaged over the pair::

    loss = ½ Σ_{j=1,2} [ recon(x_j | z_j) + β · KL(q̃(z | x_j) ‖ N(0, I)) ],   z_j ~ q̃(z | x_j)

==============  ==========================================  ==================================
objective       which dimensions are shared                 aggregate of a shared dimension
==============  ==========================================  ==================================
``ada_gvae``    adaptive: ``δ_i < (max δ + min δ) / 2``     average of means and of variances
``ada_ml_vae``  adaptive                                    product of the two Gaussians
``gvae``        all but dimension ``changed`` (the label)   average (Hosoya 2019)
``ml_vae``      all but dimension ``changed``               product (Bouchacourt et al. 2018)
==============  ==========================================  ==================================

The label variants tie latent dimension ``j`` to factor ``j`` (disentanglement_lib's
``aggregate_labels``), so they need ``latent_dim`` ≥ the number of factors. The metrics are
computed on the single-image representation, as for every other objective.

Parameters of every pair objective (its config keys): ``beta``, the KL weight (default 1;
Locatello et al. 2020 sweep 1, 2, 4, 6, 8, 16); ``k``, the factors resampled per pair, an integer
or ``"random"`` (drawn from 1..K−1 per pair; either way half of the pairs resample a single factor,
as disentanglement_lib's ``simple_dynamics``, see :mod:`disentangle.data.pairs`; default
``"random"`` for the adaptive objectives, 1 for the label ones, whose label names only one of the
resampled factors); ``reconstruction``, ``"bernoulli"`` (default) or ``"gaussian"``. The ML-VAE
objectives also take ``aggregation``: ``"product"`` (default), the normalised product of the two
Gaussians (Bouchacourt et al.), ``σ² = σ1²σ2²/(σ1² + σ2²)``, ``μ = (μ1/σ1² + μ2/σ2²)σ²``, or
``"disentanglement_lib"``, the reference's ``MLVae``: the same mean with twice that variance (so that
two identical posteriors aggregate to themselves), to reproduce the published study's code.

Terms: ``loss``, ``recon``, ``kl``, ``kl_per_dim`` (of the aggregated posteriors, averaged over the
2B images), ``elbo`` (= −(recon + kl)), ``shared_dims`` (mean number of aggregated dimensions per
pair), ``pair_kl_per_dim`` (the mean δ_i of the pairs, before aggregation).
"""
from __future__ import annotations

from typing import Literal

import torch

from .._core import checks
from ..data.pairs import PairBatch, PairK, check_k, sample_pairs
from ..errors import ConfigError
from ..models.vae import reparameterize
from . import OBJECTIVES
from .base import Objective
from .estimators import adaptive_shared_mask, aggregate_pair, pair_kl
from .losses import Reconstruction, beta_vae_terms, check_reconstruction

#: the ML-VAE aggregate: the paper's normalised product, or disentanglement_lib's (twice its variance)
MLVAEAggregation = Literal["product", "disentanglement_lib"]
ML_VAE_AGGREGATIONS = ("product", "disentanglement_lib")


class PairVAE(Objective):
    """The β-VAE objective on pairs with shared dimensions aggregated (base of the four objectives).

    Subclasses set :attr:`aggregation` (an ``aggregate_pair`` kind) and :attr:`adaptive` (the
    adaptive threshold, or else the label ``changed``).
    """

    aggregation = "gvae"
    adaptive = True

    def __init__(self, beta: float, k: PairK, reconstruction: Reconstruction) -> None:
        super().__init__()
        self.beta = checks.non_negative("beta", beta)
        self.k = check_k(k)
        self.reconstruction = check_reconstruction(reconstruction)
        self.latent_dim: int | None = None

    def setup(self, *, model, dataset_size: int) -> None:
        super().setup(model=model, dataset_size=dataset_size)
        self.latent_dim = int(model.latent_dim)

    def check_dataset(self, dataset) -> None:
        """Raise :class:`~disentangle.ConfigError` if pairs of ``dataset`` cannot be used: ``k``
        larger than the number of factors, or (label variants) fewer latent dimensions than factors."""
        num_factors = len(dataset.factor_sizes)
        check_k(self.k, num_factors)
        if not self.adaptive and self.latent_dim is not None and self.latent_dim < num_factors:
            name = getattr(self, "registry_name", type(self).__name__)
            raise ConfigError(
                f"objective '{name}' ties latent dimension j to factor j (the label names "
                f"the changed factor), so it needs model.latent_dim >= the number of factors; the "
                f"dataset has {num_factors} factors {tuple(dataset.factor_names)} but model.latent_dim "
                f"is {self.latent_dim}. Set model.latent_dim={num_factors} or more, or use the adaptive "
                f"variant 'ada_{name}', which needs no label."
            )

    def sample_batch(self, dataset, batch_size: int, generator: torch.Generator) -> PairBatch:
        """``batch_size`` pairs (:func:`~disentangle.data.pairs.sample_pairs` with this ``k``)."""
        self.check_dataset(dataset)
        return sample_pairs(dataset, batch_size, generator, self.k)

    def shared_mask(self, delta: torch.Tensor, changed: torch.Tensor) -> torch.Tensor:
        """``(B, D)`` bool: the dimensions whose posteriors are aggregated.

        The label variants need every ``changed`` index below ``D``; :meth:`check_dataset` makes
        sure of it before training (``D`` ≥ the number of factors), so the step reads no label back
        to the host to check it.
        """
        if self.adaptive:
            return adaptive_shared_mask(delta)
        mask = torch.ones_like(delta, dtype=torch.bool)
        return mask.scatter(1, changed[:, None].to(delta.device), False)

    def forward(self, model, x: PairBatch, *, step: int) -> dict[str, torch.Tensor]:
        if not isinstance(x, PairBatch):
            raise TypeError(
                f"{type(self).__name__} trains on pairs: pass the PairBatch of its sample_batch(dataset, "
                f"batch_size, generator), not {type(x).__name__} (the trainer does this)."
            )
        batch = x.x1.shape[0]
        images = torch.cat([x.x1, x.x2])
        mu, logvar = model.encode(images)  # one encoder pass for both elements
        mu1, mu2, logvar1, logvar2 = mu[:batch], mu[batch:], logvar[:batch], logvar[batch:]
        with torch.no_grad():  # the mask is a discrete choice: no gradient flows through δ
            delta = pair_kl(mu1, logvar1, mu2, logvar2)
            mask = self.shared_mask(delta, x.changed)
        agg_mu, agg_logvar = aggregate_pair(mu1, logvar1, mu2, logvar2, self.aggregation)
        new_mu = torch.cat([torch.where(mask, agg_mu, mu1), torch.where(mask, agg_mu, mu2)])
        new_logvar = torch.cat([torch.where(mask, agg_logvar, logvar1), torch.where(mask, agg_logvar, logvar2)])
        z = reparameterize(new_mu, new_logvar, groups=2)  # rows: the x1 block, then the x2 block
        logits = model.decode(z)
        # both are means over the 2B images, i.e. the average over the pair of each element's mean
        return {
            **beta_vae_terms(logits, images, new_mu, new_logvar, self.beta, self.reconstruction),
            "shared_dims": mask.sum(1).float().mean(),
            "pair_kl_per_dim": delta.mean(0),
        }



@OBJECTIVES.register("ada_gvae")
class AdaGVAE(PairVAE):
    """Ada-GVAE: adaptive estimate of the shared dimensions, averaged posteriors.

    Locatello et al. 2020, §4 with the group-VAE aggregate of Hosoya 2019: a shared dimension gets
    ``μ = (μ1 + μ2)/2``, ``σ² = (σ1² + σ2²)/2`` for both elements; the shared dimensions of a pair
    are those with ``δ_i < τ = (max_i δ_i + min_i δ_i)/2``. disentanglement_lib:
    ``group_vae_argmax``.

    Parameters and terms: those of every pair objective, in :mod:`disentangle.objectives.weak`.
    """

    aggregation = "gvae"
    adaptive = True

    def __init__(self, beta: float = 1.0, k: PairK = "random", reconstruction: Reconstruction = "bernoulli") -> None:
        super().__init__(beta, k, reconstruction)


@OBJECTIVES.register("gvae")
class GVAE(PairVAE):
    """GVAE with the label: every dimension but the changed factor's is averaged.

    Hosoya 2019, group-based VAE, in the label form of Locatello et al. 2020 (disentanglement_lib's
    ``group_vae_labels``): latent dimension ``j`` stands for factor ``j``; for a pair whose label is
    ``changed = j``, dimension ``j`` keeps each element's posterior and all others are averaged.
    Needs ``latent_dim`` ≥ the number of factors. With ``k > 1`` the label names only one of the
    resampled factors (as in the reference), so ``k = 1`` is the default.

    Parameters and terms: those of every pair objective, in :mod:`disentangle.objectives.weak`.
    """

    aggregation = "gvae"
    adaptive = False

    def __init__(self, beta: float = 1.0, k: PairK = 1, reconstruction: Reconstruction = "bernoulli") -> None:
        super().__init__(beta, k, reconstruction)



class _MLVAEMixin:
    def _init_aggregation(self, aggregation: str) -> None:
        self.ml_vae_aggregation = checks.choice("aggregation", aggregation, ML_VAE_AGGREGATIONS)
        self.aggregation = "ml_vae" if aggregation == "product" else "ml_vae_dlib"


@OBJECTIVES.register("ada_ml_vae")
class AdaMLVAE(_MLVAEMixin, PairVAE):
    """Ada-ML-VAE: adaptive estimate of the shared dimensions, product of the posteriors.

    Locatello et al. 2020, §4 with the ML-VAE aggregate of Bouchacourt et al. 2018 (multi-level
    VAE: the evidence of a group is accumulated by multiplying its posteriors). disentanglement_lib:
    ``mlvae_argmax``.

    Parameters and terms: see the module docstring .
    """

    adaptive = True

    def __init__(
        self,
        beta: float = 1.0,
        k: PairK = "random",
        aggregation: MLVAEAggregation = "product",
        reconstruction: Reconstruction = "bernoulli",
    ) -> None:
        super().__init__(beta, k, reconstruction)
        self._init_aggregation(aggregation)


@OBJECTIVES.register("ml_vae")
class MLVAE(_MLVAEMixin, PairVAE):
    """ML-VAE with the label: every dimension but the changed factor's gets the product.

    Bouchacourt et al. 2018 in the label form of Locatello et al. 2020 (disentanglement_lib's
    ``mlvae_labels``): latent dimension ``j`` stands for factor ``j``; see :class:`GVAE`.
    Needs ``latent_dim`` ≥ the number of factors.

    Parameters and terms: see the module docstring .
    """

    adaptive = False

    def __init__(
        self,
        beta: float = 1.0,
        k: PairK = 1,
        aggregation: MLVAEAggregation = "product",
        reconstruction: Reconstruction = "bernoulli",
    ) -> None:
        super().__init__(beta, k, reconstruction)
        self._init_aggregation(aggregation)
