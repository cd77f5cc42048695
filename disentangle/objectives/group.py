"""The group forms of ML-VAE and GVAE: VAEs trained on groups of observations sharing a factor.

* ML-VAE: Bouchacourt, Tomioka & Nowozin, "Multi-Level Variational Autoencoder: Learning
  Disentangled Representations from Grouped Observations", AAAI 2018.
* GVAE: Hosoya, "Group-based Learning of Disentangled Representations with Generalizability for
  Novel Contents", IJCAI 2019.

(The pair-with-label and adaptive forms of Locatello et al. 2020 are ``ml_vae``, ``gvae``,
``ada_ml_vae`` and ``ada_gvae``, in :mod:`disentangle.objectives.weak`.)

Each training example is a group of ``N`` images that share one factor value
(:mod:`disentangle.data.groups` says what is drawn; a batch of ``B = G·N`` images is ``G`` groups,
group-major). The ``D`` latent dimensions split into a *style* part, the first ``D − C``, one per
image, and a *content* part, the last ``C`` (``content_dim``), one per group. With
``q(s_i, c_i | x_i) = N(μ_i, σ_i²)`` the encoder's posterior of member ``i``, the group's content
posterior ``q(c | x_1..x_N) = N(μ_c, σ_c²)`` is, per content dimension,

==================  =========================================================  ======================
objective           content posterior of a group                               N identical members
==================  =========================================================  ======================
``group_ml_vae``    normalised product: ``1/σ_c² = Σ_i 1/σ_i²``,                ``N(μ, σ²/N)``
                    ``μ_c = σ_c² Σ_i μ_i/σ_i²``  (:func:`product_of_gaussians`)
``group_gvae``      average: ``μ_c = (1/N) Σ_i μ_i``,                          ``N(μ, σ²)``
                    ``σ_c² = (1/N) Σ_i σ_i²``  (:func:`average_of_gaussians`)
==================  =========================================================  ======================

Member ``i`` is decoded from its own style sample and the group's content sample,
``s_i ~ N(μ_i^s, σ_i^s²)``, ``c ~ q(c | x_1..x_N)`` (one draw per group, shared by its members). The
objective is the group ELBO (Bouchacourt et al. eq. 4; Hosoya eq. 4), with the content KL counted
**once per group** and the style KL once per image, divided by ``N`` (a mean per image), with the
KL weighted by ``β``::

    loss = (1/B) Σ_images recon(x_i | s_i, c_g(i))
           + β · [ (1/B) Σ_images KL(q(s_i | x_i) ‖ N(0, I))
                   + (1/B) Σ_groups KL(q(c | x_g) ‖ N(0, I)) ]

i.e. ``recon`` (mean over images) ``+ β·(kl_style + kl_content)`` with ``kl_style`` the style KL
averaged over images and ``kl_content`` the content KL averaged over groups and divided by ``N``.
Every term is a mean over this process's images (its whole groups), as multi-process runs require
(:mod:`disentangle.objectives.base`).

Parameters (config keys): ``beta``, the KL weight (default 1); ``group_size``, ``N`` (default 2;
``train.batch_size`` counts images and must be a multiple of it); ``content_dim``, ``C``, the last
``C`` latent dimensions are the content part (default ``null``: half the latent dimensions,
rounded down, i.e. 5 of the usual 10; at least one style dimension is needed, so ``C <
model.latent_dim``); ``shared_factors``, the factors a group may share (a list of factor indices,
default ``null``: all of them, one drawn uniformly per group); ``reconstruction``, ``"bernoulli"``
(default) or ``"gaussian"``.

Terms: ``loss``, ``recon``, ``kl`` (= ``kl_style + kl_content``), ``kl_style``, ``kl_content``,
``kl_per_dim`` (the ``D − C`` style dimensions averaged over images, then the ``C`` content
dimensions averaged over groups and divided by ``N``; it sums to ``kl``), ``elbo`` (= −(recon + kl)).
The metrics are computed on the single-image representation (all ``D`` posterior means), as for
every other objective.
"""
from __future__ import annotations

import math

import torch

from .._core import checks, distributed
from ..data.groups import GroupBatch, check_shared_factors, sample_groups
from ..errors import ConfigError
from ..models.vae import reparameterize
from . import OBJECTIVES
from .base import Objective
from .losses import Reconstruction, check_reconstruction, kl_normal_per_dim, reconstruction_loss

__all__ = ["GroupGVAE", "GroupMLVAE", "GroupVAE", "average_of_gaussians", "product_of_gaussians"]


def _grouped(mu: torch.Tensor, logvar: torch.Tensor, group_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(G, N, C)`` float32 views of group-major ``(G·N, C)`` posteriors."""
    if mu.ndim != 2 or logvar.shape != mu.shape:
        raise ValueError(f"mu and logvar must both have shape (G*N, C); got {tuple(mu.shape)} and {tuple(logvar.shape)}.")
    if group_size < 1 or mu.shape[0] % group_size:
        raise ValueError(f"{mu.shape[0]} rows do not split into groups of {group_size}.")
    shape = (mu.shape[0] // group_size, group_size, mu.shape[1])
    return mu.float().reshape(shape), logvar.float().reshape(shape)


def product_of_gaussians(
    mu: torch.Tensor, logvar: torch.Tensor, group_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The normalised product of each group's Gaussians (ML-VAE's content posterior), ``(G, C)`` each.

    ``mu``, ``logvar``: ``(G·N, C)``, group-major (rows ``[g·N, (g + 1)·N)`` are group ``g``).
    Per dimension ``1/σ_g² = Σ_i 1/σ_i²`` and ``μ_g = σ_g² Σ_i μ_i/σ_i²`` (Bouchacourt et al. 2018,
    §3.2), so ``N`` identical members give ``N(μ, σ²/N)``. Computed in log space in float32:
    ``log σ_g² = −logsumexp_i(−log σ_i²)`` and the mean's weights ``σ_g²/σ_i²`` are a softmax of
    ``−log σ_i²``, so extreme log-variances neither overflow nor divide by zero.
    """
    mu, logvar = _grouped(mu, logvar, group_size)
    group_logvar = -torch.logsumexp(-logvar, dim=1)
    weights = torch.softmax(-logvar, dim=1)
    return (weights * mu).sum(1), group_logvar


def average_of_gaussians(
    mu: torch.Tensor, logvar: torch.Tensor, group_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The average of each group's Gaussians' parameters (GVAE's content posterior), ``(G, C)`` each.

    ``mu``, ``logvar``: ``(G·N, C)``, group-major. Per dimension ``μ_g = (1/N) Σ_i μ_i`` and
    ``σ_g² = (1/N) Σ_i σ_i²`` (Hosoya 2019, §3), so ``N`` identical members give ``N(μ, σ²)``.
    Computed in float32 with ``log σ_g² = logsumexp_i(log σ_i²) − log N``.
    """
    mu, logvar = _grouped(mu, logvar, group_size)
    return mu.mean(1), torch.logsumexp(logvar, dim=1) - math.log(group_size)


class GroupVAE(Objective):
    """The group ELBO with a per-group content posterior (base of ``group_ml_vae`` and ``group_gvae``).

    Subclasses set :attr:`aggregate`, the content posterior of a group from its members'
    (``(mu, logvar, group_size) -> (mu_g, logvar_g)``). Parameters, loss and terms: module docstring.
    """

    @staticmethod
    def aggregate(mu: torch.Tensor, logvar: torch.Tensor, group_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def __init__(
        self,
        beta: float = 1.0,
        group_size: int = 2,
        content_dim: int | None = None,
        shared_factors: list[int] | None = None,
        reconstruction: Reconstruction = "bernoulli",
    ) -> None:
        super().__init__()
        self.beta = checks.non_negative("beta", beta)
        self.group_size = checks.integer("group_size", group_size, minimum=2)
        self.requested_content_dim = None if content_dim is None else checks.integer("content_dim", content_dim, minimum=1)
        self.shared_factors = check_shared_factors(shared_factors)
        self.reconstruction = check_reconstruction(reconstruction)
        #: the number of content dimensions, resolved by :meth:`setup`
        self.content_dim: int | None = self.requested_content_dim
        self.latent_dim: int | None = None

    def _name(self) -> str:
        return getattr(self, "registry_name", type(self).__name__)

    def setup(self, *, model, dataset_size: int) -> None:
        super().setup(model=model, dataset_size=dataset_size)
        latent_dim = int(model.latent_dim)
        content_dim = self.requested_content_dim if self.requested_content_dim is not None else latent_dim // 2
        if not 1 <= content_dim < latent_dim:
            given = (
                f"objective.content_dim is {content_dim}" if self.requested_content_dim is not None
                else f"the default objective.content_dim (half the latent dimensions) is {content_dim}"
            )
            raise ConfigError(
                f"objective '{self._name()}' splits the latent code into style dimensions (one per image) and "
                f"the last content_dim content dimensions (one per group), and needs at least one of each; "
                f"{given} but model.latent_dim is {latent_dim}. Set objective.content_dim between 1 and "
                f"{latent_dim - 1}" + ("." if latent_dim >= 2 else ", which needs model.latent_dim >= 2.")
            )
        self.latent_dim, self.content_dim = latent_dim, content_dim

    def check_dataset(self, dataset) -> None:
        """Raise :class:`~disentangle.ConfigError` if ``shared_factors`` names a factor the dataset lacks."""
        check_shared_factors(self.shared_factors, len(dataset.factor_sizes))

    def num_groups(self, batch_size: int) -> int:
        """The groups of a batch of ``batch_size`` images (``train.batch_size`` counts images); a
        :class:`~disentangle.ConfigError` unless they split into whole groups, and over the processes
        of a multi-process run into whole groups per process."""
        batch_size = checks.integer("batch_size", batch_size, minimum=1)
        world = distributed.rank_info().world_size
        if batch_size % self.group_size or (batch_size // self.group_size) % world:
            per = f" on each of the {world} processes" if world > 1 else ""
            raise ConfigError(
                f"objective '{self._name()}' trains on groups of group_size={self.group_size} images and "
                f"train.batch_size counts images, so it must be a multiple of group_size{per}: "
                f"train.batch_size={batch_size} is not a multiple of {self.group_size * world}. Use e.g. "
                f"train.batch_size={max(1, round(batch_size / (self.group_size * world))) * self.group_size * world}."
            )
        return batch_size // self.group_size

    def sample_batch(self, dataset, batch_size: int, generator: torch.Generator) -> GroupBatch:
        """``batch_size // group_size`` groups of ``group_size`` images, group-major
        (:func:`~disentangle.data.groups.sample_groups`)."""
        self.check_dataset(dataset)
        return sample_groups(dataset, self.num_groups(batch_size), self.group_size, generator, self.shared_factors)

    def forward(self, model, x: GroupBatch, *, step: int) -> dict[str, torch.Tensor]:
        if not isinstance(x, GroupBatch):
            raise TypeError(
                f"{type(self).__name__} trains on groups: pass the GroupBatch of its sample_batch(dataset, "
                f"batch_size, generator), not {type(x).__name__} (the trainer does this)."
            )
        if self.content_dim is None or self.latent_dim is None:
            raise RuntimeError(f"call {type(self).__name__}.setup(model=..., dataset_size=...) first (the trainer does).")
        images, n = x.x, self.group_size
        style_dim = self.latent_dim - self.content_dim
        mu, logvar = model.encode(images)  # one encoder pass for every member of every group
        mu, logvar = mu.float(), logvar.float()
        mu_s, logvar_s = mu[:, :style_dim], logvar[:, :style_dim]
        mu_c, logvar_c = self.aggregate(mu[:, style_dim:], logvar[:, style_dim:], n)  # (G, C)
        z_style = reparameterize(mu_s, logvar_s)  # one draw per image
        z_content = reparameterize(mu_c, logvar_c)  # one draw per group
        groups = z_content.shape[0]
        z_content = z_content[:, None, :].expand(groups, n, self.content_dim).reshape(groups * n, self.content_dim)
        logits = model.decode(torch.cat([z_style, z_content], dim=1))
        recon = reconstruction_loss(logits, images, self.reconstruction)
        kl_style_per_dim = kl_normal_per_dim(mu_s, logvar_s)  # mean over images
        kl_content_per_dim = kl_normal_per_dim(mu_c, logvar_c) / n  # once per group: mean over groups / N
        kl_per_dim = torch.cat([kl_style_per_dim, kl_content_per_dim])
        kl = kl_per_dim.sum()
        return {
            "loss": recon + self.beta * kl,
            "recon": recon,
            "kl": kl,
            "kl_style": kl_style_per_dim.sum(),
            "kl_content": kl_content_per_dim.sum(),
            "kl_per_dim": kl_per_dim,
            "elbo": -(recon + kl),
        }


@OBJECTIVES.register("group_ml_vae")
class GroupMLVAE(GroupVAE):
    """ML-VAE on groups: the content posterior of a group is the normalised product of its members'.

    Bouchacourt, Tomioka & Nowozin, AAAI 2018 (:func:`product_of_gaussians`: ``N`` identical
    members give ``N(μ, σ²/N)``). Parameters, loss and terms: :mod:`disentangle.objectives.group`.
    """

    aggregate = staticmethod(product_of_gaussians)


@OBJECTIVES.register("group_gvae")
class GroupGVAE(GroupVAE):
    """GVAE on groups: the content posterior of a group is the average of its members'.

    Hosoya, IJCAI 2019 (:func:`average_of_gaussians`: mean of the means and of the variances, so
    ``N`` identical members give ``N(μ, σ²)``). Parameters, loss and terms:
    :mod:`disentangle.objectives.group`.
    """

    aggregate = staticmethod(average_of_gaussians)
