"""The F-statistic loss (Ridgeway & Mozer 2018) on the class code of a β-VAE.

Ridgeway & Mozer, "Learning Deep Disentangled Embeddings With the F-Statistic Loss", NeurIPS 2018;
reference code ``kridgeway/f-statistic-loss-nips-2018`` (TensorFlow, ``loss/f_statistic_loss.py``
and ``embedding.py``), whose choices are quoted below.

**The loss.** For two classes ``a`` and ``b`` of the batch, with ``n_a`` and ``n_b`` images, and one
embedding dimension ``k`` with values ``z_ik``, the one-way ANOVA of that dimension between the two
classes has::

    m_a = mean of class a's values,  m = (n_a m_a + n_b m_b) / (n_a + n_b)
    SS_between = n_a (m_a − m)² + n_b (m_b − m)² = n_a n_b / (n_a + n_b) · (m_a − m_b)²
    SS_within  = Σ_{i ∈ a} (z_ik − m_a)² + Σ_{i ∈ b} (z_ik − m_b)²
    F_abk      = SS_between / (SS_within / ν),   ν = n_a + n_b − 2

and under equal class means ``F ~ F(1, ν)``, whose CDF is ``P(F(1, ν) ≤ f) = I_x(1/2, ν/2)`` with
``x = f / (f + ν) = SS_between / (SS_between + SS_within)`` (:func:`f_distribution_cdf`). The CDF is
the probability that the two classes' means are farther apart than chance gives; the loss asks it to
be near 1 on the ``d`` dimensions that separate the pair best, and on those only (the other
dimensions are left free for what the pair shares)::

    L_ab    = − Σ_{k ∈ top_d(a, b)} log I_{x_abk}(1/2, ν_ab/2)       top_d: the d largest CDFs of the pair
    f_loss  = (1/|pairs|) Σ_{a < b} L_ab                              every pair of classes in the batch

as the reference code computes it, except that it **sums** over the pairs where ``f_loss`` is their
mean (so that the weight ``λ`` does not scale with the number of classes a batch holds) and that it
centres ``SS_between`` on the unweighted mean ``(m_a + m_b)/2`` (the same for the equal class sizes of
its batches; here classes may have unequal counts, and ``SS_between`` is the ANOVA's). As in the
reference code, ``x`` is clipped to ``[1e-37, 1 − 1e-5]`` (a dimension with ``x > 1 − 1e-5``, i.e.
``F > (1 − 1e-5) ν / 1e-5``, has reached the loss's floor and gets no gradient), and a batch with a
single class has ``f_loss = 0``.

``I_x(1/2, ν/2)`` for integer ``ν`` is the two-sided CDF of Student's ``t`` with ``ν`` degrees of
freedom at ``t = √(ν x / (1 − x))``, a finite sum (:func:`log_f1_cdf`): with ``y = 1 − x``, for even
``ν`` ``√x · Σ_{k<ν/2} c_k y^k`` with ``c_k = (1/2)_k / k!``, and for odd ``ν``
``(2/π) (asin √x + √(x y) Σ_{k<(ν−1)/2} e_k y^k)`` with ``e_k = k! / (3/2)_k``: exact, differentiable
by autograd, no iteration, float32 on the device.

**With a VAE.** The paper's F-statistic embeddings, its disentanglement experiments included (the
``sprites/class`` and ``sprites/factor`` configurations of the reference code: a deterministic
22-dimensional embedding, ``d = 2``), are trained by the F-statistic loss alone; the reference code's
autoencoder mode puts the loss on the first dimensions of an autoencoder's code and a reconstruction
(or a β-VAE ELBO) on the whole code. Here, so that the model is a VAE like every other and its content
code learns what varies within a class, the objective is the β-VAE's on the whole code plus the
F-statistic loss on the **class code**, the posterior means ``μ^y`` of the last ``C = class_dim``
dimensions (deterministic, as the paper's embedding)::

    loss = recon + β · KL + λ · f_loss(μ^y, labels)

with ``recon`` and ``KL`` :func:`~disentangle.objectives.losses.beta_vae_terms` of ``z ~ q(z | x)``
on all ``D`` dimensions. ``model.encode`` gives ``[content, class]`` (the first ``D − C`` dimensions
are the content code: Ridgeway & Mozer's non-identity dimensions, the rest of the code); a class is the
values of ``class_factors`` (the paper's "class-aware oracle"; its "factor-aware oracle" is one class
per factor, not this objective).

The batch is ``G`` groups of ``N = group_size`` images of one class (group-major); two groups of one
class pool into that class, so every class of the batch has at least ``N`` images and every pair at
least ``2N − 2 ≥ 2`` degrees of freedom. In a multi-process run the codes and labels of the whole
batch are gathered (:func:`disentangle._core.distributed.gather`, whose backward sums over the ranks)
and every rank computes the same ``f_loss`` of the whole batch.

Parameters (config keys)
------------------------
``class_factors``, ``class_dim``, ``group_size``
    The class and the split (:class:`~disentangle.objectives.class_content.ClassContentObjective`);
    ``group_size`` default 4 (the reference code draws 5 images per class, ``-epi 5``; 4 divides the
    recipes' batch of 64).
``d``
    The dimensions per pair that the loss separates; default 2 (the paper's sprites configurations,
    ``-f_statistic_d 2``; the reference code's default is 1). At most ``class_dim``.
``f_weight``
    ``λ``; default 1 (the reference code's ``content_loss_weight`` default in its autoencoder mode).
``beta``
    The KL weight ``β``; default 1 (a VAE; the paper trains no VAE with this loss, the reference code's
    ``-beta_vae`` is off by default).
``reconstruction``
    ``"bernoulli"`` (default) or ``"gaussian"``.

Terms: ``loss``, ``recon``, ``kl``, ``kl_per_dim``, ``elbo`` (= −(recon + KL)) and ``f_loss``.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import torch

from .._core import checks, distributed
from ..data.classes import ClassBatch
from ..errors import ConfigError
from ..models.vae import reparameterize
from . import OBJECTIVES
from .class_content import ClassContentObjective
from .losses import Reconstruction, beta_vae_terms, check_reconstruction

__all__ = [
    "FStatistic",
    "PairStatistics",
    "f_distribution_cdf",
    "f_statistic_loss",
    "log_f1_cdf",
    "pair_statistics",
]

#: the clipping of ``x = SS_between / (SS_between + SS_within)`` in the loss (the reference code's)
X_MIN, X_MAX = 1e-37, 1.0 - 1e-5


def log_f1_cdf(x: torch.Tensor, dof: torch.Tensor, max_dof: int | None = None) -> torch.Tensor:
    """``log I_x(1/2, ν/2)``: the log CDF of ``F(1, ν)`` at ``f = ν x / (1 − x)``, for ``x`` in
    ``[0, 1]`` and integer ``ν = dof >= 1`` (broadcast together), differentiable in ``x``.

    The finite sums of the module docstring, over ``k < ⌊ν/2⌋`` terms; ``max_dof`` (a Python integer
    at least every ``ν``; by default read from ``dof``, which reads the device) sets how many terms are
    formed. Computed in ``x``'s dtype (float32 at least).
    """
    dtype = x.dtype if x.dtype == torch.float64 else torch.float32
    x = x.to(dtype)
    x, dof = torch.broadcast_tensors(x, dof.to(x.device))
    if max_dof is None:
        max_dof = int(dof.max()) if dof.numel() else 1
    terms = max(int(max_dof) // 2, 1)
    k = torch.arange(terms, device=x.device, dtype=dtype)
    # c_k = (1/2)_k / k! and e_k = k! / (3/2)_k by their ratios (2k − 1)/(2k) and 2k/(2k + 1)
    ratio_c = torch.where(k > 0, (2 * k - 1) / (2 * k).clamp_min(1), torch.ones_like(k))
    ratio_e = torch.where(k > 0, (2 * k) / (2 * k + 1), torch.ones_like(k))
    c, e = torch.cumprod(ratio_c, 0), torch.cumprod(ratio_e, 0)
    y = (1 - x).clamp_min(0)
    half = torch.div(dof, 2, rounding_mode="floor").to(dtype)  # ⌊ν/2⌋ terms (both parities)
    used = (k < half[..., None]).to(dtype)
    powers = y[..., None] ** k
    odd = torch.remainder(dof, 2) == 1
    s = x.sqrt()
    even_sum = (c * powers * used).sum(-1)
    odd_sum = (e * powers * used).sum(-1)
    # log I = ½ log x + log T: T = Σ c_k y^k (even), (2/π)(asin(√x)/√x + √y Σ e_k y^k) (odd)
    safe_s = torch.where(s > 0, s, torch.ones_like(s))
    asin_ratio = torch.where(s > 0, torch.asin(s.clamp(max=1.0)) / safe_s, torch.ones_like(s))
    odd_t = (2 / math.pi) * (asin_ratio + y.sqrt() * odd_sum)
    t = torch.where(odd, odd_t, even_sum)
    return 0.5 * torch.log(x) + torch.log(t)


def f_distribution_cdf(f: torch.Tensor, dof: torch.Tensor | int) -> torch.Tensor:
    """``P(F(1, ν) <= f)`` for ``f >= 0`` and integer ``ν = dof >= 1`` (tensors broadcast together),
    differentiable in ``f``: ``I_x(1/2, ν/2)`` with ``x = f / (f + ν)`` (:func:`log_f1_cdf`)."""
    dof_t = torch.as_tensor(dof, device=f.device)
    x = f / (f + dof_t.to(f.dtype))
    return log_f1_cdf(x, dof_t).exp()


class PairStatistics(NamedTuple):
    """The one-way ANOVA of every pair of classes of a batch, per code dimension. Rows and columns are
    *slots*: one per group, the classes at the slot of their first group (``S`` = number of groups)."""

    between: torch.Tensor  #: ``(S, S, K)`` SS_between of the pair
    within: torch.Tensor  #: ``(S, S, K)`` SS_within of the pair
    dof: torch.Tensor  #: ``(S, S)`` int64, ``n_a + n_b − 2`` (at least 1 everywhere: meaningless where not ``valid``)
    valid: torch.Tensor  #: ``(S, S)`` bool, true for the pairs ``a < b`` of two classes of the batch
    labels: torch.Tensor  #: ``(S,)`` the class of each slot (meaningful where a class sits)

    @property
    def f(self) -> torch.Tensor:
        """``(S, S, K)`` the F statistics ``SS_between / (SS_within / ν)`` (0 where not ``valid``)."""
        within = torch.where(self.within > 0, self.within, torch.ones_like(self.within))
        f = self.between / (within / self.dof[..., None].to(within.dtype))
        return torch.where(self.valid[..., None], f, torch.zeros_like(f))

    @property
    def x(self) -> torch.Tensor:
        """``(S, S, K)`` ``SS_between / (SS_between + SS_within) = F / (F + ν)``, 0 where undefined."""
        total = self.between + self.within
        return self.between / torch.where(total > 0, total, torch.ones_like(total))


def pair_statistics(z: torch.Tensor, labels: torch.Tensor, group_size: int = 1) -> PairStatistics:
    """The ANOVA sums of squares of every pair of classes in a batch of codes ``z`` ``(B, K)`` with
    classes ``labels`` ``(B,)``.

    ``group_size``: the batch is group-major groups of that many rows of one class (1: any rows);
    the statistics are pooled over every row of a class, whichever groups hold it. Computed without
    reading anything back from the device (fixed shapes: ``B / group_size`` slots).
    """
    if z.ndim != 2 or labels.shape != z.shape[:1]:
        raise ValueError(f"z must be (B, K) and labels (B,); got {tuple(z.shape)} and {tuple(labels.shape)}.")
    b, dims = z.shape
    if group_size < 1 or b % group_size:
        raise ValueError(f"{b} rows do not split into groups of {group_size}.")
    slots = b // group_size
    zg = z.reshape(slots, group_size, dims)
    group_labels = labels.reshape(slots, group_size)[:, 0]
    same = group_labels[:, None] == group_labels[None, :]
    first = same.to(z.dtype).argmax(1)  # the first group of each group's class
    # group g pools into slot first[g] (sums by index_add, in z's dtype whatever autocast is on)
    counts = torch.zeros(slots, dtype=torch.int64, device=z.device).index_add(
        0, first, torch.full((slots,), group_size, dtype=torch.int64, device=z.device)
    )
    n = counts.to(z.dtype)
    means = z.new_zeros(slots, dims).index_add(0, first, zg.sum(1)) / n.clamp_min(1)[:, None]
    within = z.new_zeros(slots, dims).index_add(0, first, (zg - means[first][:, None, :]).square().sum(1))
    present = counts > 0
    upper = torch.ones(slots, slots, dtype=torch.bool, device=z.device).triu(1)
    valid = upper & present[:, None] & present[None, :]
    pair_n = (n[:, None] + n[None, :]).clamp_min(1)
    between = (n[:, None] * n[None, :] / pair_n)[..., None] * (means[:, None, :] - means[None, :, :]).square()
    pair_within = within[:, None, :] + within[None, :, :]
    dof = (counts[:, None] + counts[None, :] - 2).clamp_min(1)
    return PairStatistics(between, pair_within, dof, valid, group_labels)


def f_statistic_loss(z: torch.Tensor, labels: torch.Tensor, d: int, group_size: int = 1) -> torch.Tensor:
    """``f_loss`` of codes ``z`` ``(B, K)`` of classes ``labels`` (module docstring): the mean over the
    pairs of classes of ``−Σ log CDF`` on each pair's ``d`` best-separated dimensions; 0 for a batch of
    one class. ``group_size`` as in :func:`pair_statistics`."""
    if not 1 <= d <= z.shape[1]:
        raise ValueError(f"d must be between 1 and the {z.shape[1]} code dimensions, got {d}.")
    z = z if z.dtype == torch.float64 else z.float()
    stats = pair_statistics(z, labels, group_size)
    x = stats.x.clamp(X_MIN, X_MAX)
    log_cdf = log_f1_cdf(x, stats.dof[..., None], max_dof=max(z.shape[0] - 2, 1))
    best = torch.topk(log_cdf, d, dim=-1).values.sum(-1)  # (S, S)
    valid = stats.valid
    per_pair = torch.where(valid, -best, torch.zeros_like(best))
    return per_pair.sum() / valid.sum().clamp_min(1).to(per_pair.dtype)


@OBJECTIVES.register("f_statistic")
class FStatistic(ClassContentObjective):
    """β-VAE + λ · the F-statistic loss on the class code's posterior means (module docstring: the loss,
    the choices, parameters and terms)."""

    def __init__(
        self,
        class_factors: list[str | int] | str | int | None = None,
        class_dim: int | None = None,
        group_size: int = 4,
        d: int = 2,
        f_weight: float = 1.0,
        beta: float = 1.0,
        reconstruction: Reconstruction = "bernoulli",
    ) -> None:
        super().__init__(class_factors=class_factors, class_dim=class_dim, group_size=group_size)
        self.d = checks.integer("d", d, minimum=1)
        self.f_weight = checks.non_negative("f_weight", f_weight)
        self.beta = checks.non_negative("beta", beta)
        self.reconstruction = check_reconstruction(reconstruction)

    def setup(self, *, model, dataset_size: int) -> None:
        super().setup(model=model, dataset_size=dataset_size)
        if self.d > self.class_dim:
            raise ConfigError(
                f"objective 'f_statistic' separates each pair of classes on the d best of the class code's "
                f"dimensions, and objective.d is {self.d} while the class code has {self.class_dim} (objective."
                f"class_dim). Set objective.d between 1 and {self.class_dim}, or a larger class_dim."
            )

    def f_loss(self, class_codes: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The F-statistic loss of the whole batch (gathered over processes) of class codes ``(b, C)``."""
        return f_statistic_loss(
            distributed.gather(class_codes), distributed.gather_detached(labels), self.d, self.group_size
        )

    def forward(self, model, x: ClassBatch, *, step: int) -> dict[str, torch.Tensor]:
        batch = self.check_batch(x, "f_statistic")
        images = batch.x
        mu, logvar = model.encode(images)
        mu, logvar = mu.float(), logvar.float()
        z = reparameterize(mu, logvar)
        terms = beta_vae_terms(model.decode(z), images, mu, logvar, self.beta, self.reconstruction)
        f_loss = self.f_loss(self.split(mu)[1], batch.labels)
        terms["loss"] = terms["loss"] + self.f_weight * f_loss
        terms["f_loss"] = f_loss
        return terms
