"""The supervised regularisers R_s and the schedules of γ_sup of the semi-supervised VAEs.

Locatello et al., "Disentangling Factors of Variation Using Few Labels", ICLR 2020, §3; the
reference is disentanglement_lib's ``methods/semi_supervised/semi_supervised_vae.py``. Each
regulariser compares the encoder means ``μ(x)`` of a labelled batch (``B`` images) with their
labels ``y`` (``B × L`` class numbers, ``n_j`` the number of values of labelled factor ``j``); the
first ``L`` latent dimensions stand for the ``L`` labelled factors. With the reference's sums and
means:

=========  =========================================================================================
``xent``   ``Σ_b Σ_{j<L} BCE(logit = μ_bj, target = y_bj / n_j)``: a sigmoid cross-entropy, summed
           over the batch and the factors (at μ = 0 it is ``B · L · ln 2``)
``l2``     ``Σ_b Σ_{j<L} (s · μ_bj − y_bj)²``, ``s`` a learned scalar (initially 1): the reference's
           ``2 · tf.nn.l2_loss`` with ``learn_scale=True``
``cov``    ``Σ_{i≠j} C_ij²`` with ``C = mean_b[(μ_b − μ̄)(y_b − ȳ)ᵀ]`` the ``D × L`` cross-covariance of
           *all* ``D`` latent means with the labels, its diagonal ``C_jj`` (``j < min(D, L)``) left
           out: every latent should covary with its own factor only
``embed``  ``Σ_{j<L} mean_b CE(softmax_v(−((μ_bj − e_jv) · σ)²), y_bj)``: each value ``v`` of factor
           ``j`` has a learned 1-D embedding ``e_jv`` (Glorot-uniform, as TF's default), or with
           ``use_order`` ``e_jv = a_j · v + c_j`` (a learned slope and offset: the order of the values
           is kept); ``σ`` a fixed temperature or, with ``embed_sigma: learn``, a learned ``σ_j``
           per factor (Glorot-uniform for a scalar, ``U(−√3, √3)``, as the reference's
           ``tf.get_variable("sigma", [1])`` in each factor's scope; its sign does not matter)
=========  =========================================================================================

Schedules of the weight (``t`` the number of steps done, ``T`` ``schedule_steps``, the reference's
``annealer.iteration_threshold``): ``fixed`` γ; ``anneal`` ``min(γ, γ · t / T)``; ``fine_tune``
``γ · min(1, max(0, t − T))``, i.e. 0 up to step ``T`` and γ after it.

In a multi-process run each process holds ``B / W`` labelled rows: the sums over the batch are
taken as ``W ×`` the process's sum (so the averaged gradient is that of the whole batch's sum), the
means as the process's mean, and ``cov`` is computed on the gathered batch.
"""
from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from .._core import checks, distributed
from ..errors import ConfigError

SupervisedLossName = Literal["xent", "l2", "cov", "embed"]
SUPERVISED_LOSSES: tuple[str, ...] = ("xent", "l2", "cov", "embed")
ScheduleName = Literal["fixed", "anneal", "fine_tune"]
SCHEDULES: tuple[str, ...] = ("fixed", "anneal", "fine_tune")


def supervised_weight(gamma: float, step: int, schedule: str, schedule_steps: int) -> float:
    """γ_sup at step ``step`` (steps done so far) under ``schedule`` (see the module docstring)."""
    if schedule == "fixed":
        return float(gamma)
    if schedule == "anneal":
        return min(float(gamma), float(gamma) * step / schedule_steps)
    if schedule == "fine_tune":
        return float(gamma) * min(1.0, max(0.0, float(step - schedule_steps)))
    raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}.")


def _world() -> int:
    return distributed.rank_info().world_size if distributed.is_distributed() else 1


def xent_loss(mu: torch.Tensor, labels: torch.Tensor, label_sizes: torch.Tensor) -> torch.Tensor:
    """``Σ_b Σ_j BCE(μ_bj, y_bj / n_j)`` over the first ``L`` latents (``label_sizes``: ``(L,)``)."""
    num = labels.shape[1]
    targets = labels / label_sizes
    per_entry = F.binary_cross_entropy_with_logits(mu[:, :num].float(), targets.float(), reduction="none")
    return per_entry.sum() * _world()


def l2_loss(mu: torch.Tensor, labels: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``Σ_b Σ_j (s · μ_bj − y_bj)²`` over the first ``L`` latents."""
    num = labels.shape[1]
    return ((mu[:, :num].float() * scale - labels.float()) ** 2).sum() * _world()


def cross_covariance(mu: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """``C = mean_b[(μ_b − μ̄)(y_b − ȳ)ᵀ]``, ``(D, L)``, on the batch given."""
    mu_c = mu.float() - mu.float().mean(0)
    y_c = labels.float() - labels.float().mean(0)
    return mu_c.T @ y_c / mu.shape[0]


def cov_loss(mu: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """``Σ_{i≠j} C_ij²`` of :func:`cross_covariance` over the whole (gathered) batch."""
    cov = cross_covariance(distributed.gather(mu), distributed.gather(labels))
    return (zero_diagonal(cov) ** 2).sum()


def zero_diagonal(matrix: torch.Tensor) -> torch.Tensor:
    """``matrix`` (any shape ``(D, L)``) with entries ``(j, j)``, ``j < min(D, L)``, set to 0."""
    keep = torch.ones_like(matrix)
    n = min(matrix.shape)
    idx = torch.arange(n, device=matrix.device)
    keep[idx, idx] = 0
    return matrix * keep


def embed_logits(mu_j: torch.Tensor, embedding: torch.Tensor, sigma: torch.Tensor | float) -> torch.Tensor:
    """``−((μ_bj − e_jv) · σ)²``, ``(B, n_j)``: the logits of the values of one factor."""
    return -(((mu_j.float()[:, None] - embedding[None, :]) * sigma) ** 2)


class SupervisedRegularizer(nn.Module):
    """R_s with its learned parameters (``l2``'s scale, ``embed``'s embeddings and temperature).

    Built for known label sizes (:meth:`build`, called when the labelled set is attached, before
    the optimizers), so that its parameters are saved with the objective and trained with the
    run's optimizer.
    """

    def __init__(self, kind: str, embed_sigma: float | str = 1.0, embed_use_order: bool = False) -> None:
        super().__init__()
        self.kind = checks.choice("supervised_loss", kind, SUPERVISED_LOSSES)
        if isinstance(embed_sigma, str):
            if embed_sigma != "learn":
                raise ConfigError(f"embed_sigma must be a positive number or 'learn', got {embed_sigma!r}.")
            self.embed_sigma: float | str = "learn"
        else:
            self.embed_sigma = checks.positive("embed_sigma", embed_sigma)
        self.embed_use_order = checks.boolean("embed_use_order", embed_use_order)
        self.register_buffer("label_sizes", torch.zeros(0), persistent=False)
        self.sizes: tuple[int, ...] = ()
        self.built = False

    def build(self, label_sizes: tuple[int, ...]) -> None:
        """Create the parameters for labels with ``label_sizes`` values (once)."""
        if self.built:
            return
        self.sizes = tuple(int(s) for s in label_sizes)
        self.label_sizes = torch.tensor([float(s) for s in label_sizes], device=self.label_sizes.device)
        if self.kind == "l2":
            self.scale = nn.Parameter(torch.ones((), device=self.label_sizes.device))
        elif self.kind == "embed":
            device = self.label_sizes.device
            if self.embed_use_order:
                # TF's default (Glorot-uniform) for a scalar: fan_in = fan_out = 1, bound sqrt(3)
                bound = math.sqrt(3.0)
                self.slopes = nn.Parameter(torch.empty(len(label_sizes), device=device).uniform_(-bound, bound))
                self.offsets = nn.Parameter(torch.empty(len(label_sizes), device=device).uniform_(-bound, bound))
            else:
                # TF's Glorot-uniform for a vector of n: fan_in = fan_out = n, bound sqrt(6 / 2n)
                self.embeddings = nn.ParameterList(
                    nn.Parameter(torch.empty(int(n), device=device).uniform_(-math.sqrt(3.0 / n), math.sqrt(3.0 / n)))
                    for n in label_sizes
                )
            if self.embed_sigma == "learn":  # one per factor, as the reference's variable scopes give
                bound = math.sqrt(3.0)
                self.sigmas = nn.Parameter(torch.empty(len(label_sizes), device=device).uniform_(-bound, bound))
        self.built = True

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):  # type: ignore[no-untyped-def]
        # before 2026-12-07 a learned temperature was one scalar ``sigma`` shared by all factors
        old = state_dict.get(prefix + "sigma")
        if old is not None and prefix + "sigmas" not in state_dict and self.built and self.embed_sigma == "learn":
            state_dict[prefix + "sigmas"] = state_dict.pop(prefix + "sigma").reshape(()).expand(len(self.sizes)).clone()
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def embedding(self, j: int) -> torch.Tensor:
        """The embeddings ``e_jv`` of the values of labelled factor ``j``."""
        if self.embed_use_order:
            values = torch.arange(self.sizes[j], device=self.slopes.device, dtype=torch.float32)
            return values * self.slopes[j] + self.offsets[j]
        return self.embeddings[j]

    def forward(self, mu: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if not self.built:
            raise RuntimeError("SupervisedRegularizer.build(label_sizes) must be called before it is used.")
        if self.kind == "xent":
            return xent_loss(mu, labels, self.label_sizes)
        if self.kind == "l2":
            return l2_loss(mu, labels, self.scale)
        if self.kind == "cov":
            return cov_loss(mu, labels)
        total = mu.new_zeros((), dtype=torch.float32)
        for j in range(labels.shape[1]):
            sigma = self.sigmas[j] if self.embed_sigma == "learn" else float(self.embed_sigma)
            logits = embed_logits(mu[:, j], self.embedding(j), sigma)
            total = total + F.cross_entropy(logits, labels[:, j].long())
        return total
