"""Elastic-InfoGAN (``objective.name: elastic_infogan``): InfoGAN with a categorical code whose
prior is learned, and a contrastive loss that makes Q's view of an image invariant to
identity-preserving augmentations.

Ojha, Singh, Hsieh & Lee, "Elastic-InfoGAN: Unsupervised Disentangled Representation Learning in
Class-Imbalanced Data", NeurIPS 2020; reference code ``utkarshojha/elastic-infogan``
(``infoGAN.py``, ``nt_xent.py``, ``dataloader.py``, ``run.sh``).

Needs ``model.backbone: infogan_categorical`` with ``model.num_categories: K`` (equal to this
objective's ``num_categories``; :mod:`disentangle.backbones.infogan`): the ``D = model.latent_dim``
codes are ``C = D − K`` continuous codes ``c ~ U(−1, 1)^C`` (InfoGAN's, as
:mod:`disentangle.objectives.infogan`; ``C = 0`` is allowed) followed by one categorical code of K
categories, given to G as a relaxed one-hot vector ``y``. Noise ``z ~ U(−1, 1)^N`` as InfoGAN.

**The learned prior.** ``prior_logits`` ``ℓ`` (K), the objective's parameter, define the prior
``π = softmax(ℓ)`` of the category (uniform at the start: ``ℓ = 0``, as the reference's equal
probabilities). Each generated image's categorical code is a Gumbel-softmax sample (Jang et al.
2017; Maddison et al. 2017), soft (not straight-through) as in the reference::

    y = softmax((log π + g) / τ),     g_k = −log(−log u_k),  u_k ~ U(0, 1)

so ``argmax y = argmax(log π + g)`` is exactly a draw of ``Cat(π)`` (the Gumbel-max trick) and ``y``
is differentiable in ``ℓ``: the prior is trained by G's loss through ``G(c, y, z)`` (with G, by the
``"model"`` optimizer, as the reference trains it with G).

**Q's losses.** On generated images Q predicts the continuous codes (Gaussian, fixed σ, InfoGAN's
``q_loss`` :func:`~disentangle.objectives.infogan.gaussian_nll`) and the category (K logits, the
last K outputs of Q's head)::

    category_loss = −E log softmax(Q_cat(G(c, y, z)))_{argmax y}

(cross-entropy against the sampled category, the reference's ``info_loss``).

**The contrastive loss** (the reference's NT-Xent, SimCLR's normalised temperature-scaled
cross-entropy, Chen et al. 2020). On a batch of B **real** images ``x`` and their augmentations
``x'`` (the reference applies it to real images and Augmentor's transforms of them), with
``f = Q's hidden features / ‖·‖`` (L2-normalised; Q's hidden layer, after its activation, as the
reference's 128-d ``Q.fc`` output) of the 2B images ``a_1..a_2B = f(x_1..x_B), f(x'_1..x'_B)``
and ``s_ij = a_i·a_j / τ_c``::

    contrastive_loss = (1 / 2B) Σ_i −log [ exp(s_{i,p(i)}) / Σ_{j≠i} exp(s_ij) ],  p(i) = i ± B

Q's features are computed on the trunk's features of ``x`` and ``x'`` **detached**: the
contrastive loss trains Q's head, not D's trunk (in the reference the front end is stepped by D's
loss only). Unlike the reference, Q's code loss and the category loss on fakes do reach D's trunk
(the InfoGAN-CR convention, where D and Q share one optimizer and one loss).

**Augmentations** (:func:`augment`): a random affine map of each image, rotation by
``U(−augment_rotation, augment_rotation)`` degrees, zoom by ``U(1 − augment_zoom, 1 + augment_zoom)``
and a shift of ``U(−augment_translation, augment_translation)`` of the image side in each direction,
bilinear, zeros outside (the reference's rotation ±20° and zoom 0.9–1.1; its small elastic
distortion is not used). On dSprites-like sprites, whose category is the shape, these change the
orientation, scale and position factors and keep the shape (a rotated, scaled, moved heart is a
heart), so they are identity-preserving for the shape; the recipes add a small shift.

One step, codes, noise, Gumbel noise and augmentation draws drawn once (in this order, from the
step generator):

1. **D + Q** (optimizer ``"discriminator"``)::

       discriminator_loss = d_loss + λ · q_loss + λ_cat · category_loss + λ_nt · contrastive_loss

   with ``d_loss = −E log D(x) − E log(1 − D(G(c, y, z)))``; G's images and ``y`` made without a
   graph, so this phase moves neither G nor the prior.
2. **G and the prior**, ``generator_steps`` times (optimizer ``"model"``: G's parameters and
   ``prior_logits``)::

       loss = −E log D(G(c, y, z)) + λ · q_loss + λ_cat · category_loss

   with D and Q frozen and in eval mode, ``y`` recomputed from ``ℓ`` (same Gumbel noise) with its
   graph.

Parameters (besides :class:`~disentangle.objectives.infogan.InfoGAN`'s ``info_weight`` λ 0.05,
``discriminator_lr`` 2e-3, ``discriminator_betas`` [0.5, 0.999] and ``generator_steps`` 2, whose
defaults are Lin et al.'s dSprites InfoGAN's, the networks'; the Elastic-InfoGAN reference on MNIST
has Adam 2e-4 for both and one G update per step)
---------------------------------------------------------------------------------------------
num_categories:
    K. Default 10 (the reference's MNIST digits); must equal ``model.num_categories``.
gumbel_temperature:
    τ of the Gumbel-softmax. Default 0.1 (the reference's ``approx_latent``).
category_weight:
    λ_cat. Default 1 (the reference's ``info_loss`` weight).
contrastive_weight:
    λ_nt. Default 10 (the reference's ``klwt``).
contrastive_temperature:
    τ_c of the NT-Xent. Default 1 (the reference's ``run.sh``, ``--mytemp 1``; ``main.py``'s default is 0.5).
augment_rotation, augment_zoom, augment_translation:
    The augmentations' ranges: degrees, relative zoom, fraction of the image side. Defaults 20, 0.1
    (the reference's Augmentor pipeline) and 0 (the reference does not shift; the recipes use 0.05).

Terms: ``loss`` (G's, last update), ``g_loss``, ``g_info_loss`` (G's ``q_loss``),
``g_category_loss``, ``prior`` (``π``, a vector), ``prior_entropy`` (nats), and from the D + Q phase
``discriminator_loss``, ``d_loss``, ``q_loss``, ``category_loss``, ``category_accuracy`` (Q's
argmax against the sampled category on generated images), ``contrastive_loss``,
``mi_lower_bound`` (``C ln 2 − q_loss + H(π) − category_loss``, nats), ``q_mse_per_code`` (when
C > 0), ``d_real``, ``d_fake``, ``d_real_accuracy``, ``d_fake_accuracy``.

**The representation.** ``model.encode(x)`` is ``[Q's means of the C continuous codes, Q's
probabilities of the K categories]`` (the backbone applies the softmax to the categorical logits;
:mod:`disentangle.backbones.infogan`), so every metric sees both; :func:`category_of` gives the
predicted category of images. ``model.decode(c)`` takes a one-hot (or any point of the simplex) in
the last K codes. Single process only (as InfoGAN: G's batch norm; the NT-Xent is a quantity of
the whole batch).
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from .._core import checks
from ..errors import ConfigError
from . import OBJECTIVES
from .discriminator import frozen
from .infogan import HIGH, LOW, InfoGAN, _bce, _training, _uniform, gaussian_nll, sample_codes

if TYPE_CHECKING:  # the trainer passes it in; objectives only call its methods
    from ..backbones.infogan import InfoGANDiscriminator, InfoGANGenerator
    from ..training.precision import Precision

__all__ = [
    "ElasticDraw", "ElasticInfoGAN", "affine", "augment", "category_of", "gumbel_noise", "gumbel_softmax", "nt_xent",
]

#: keeps ``log`` finite at ``u = 0`` and ``u → 1`` (the reference's ``eps``)
_EPS = 1e-20


def _weight(name: str, value) -> float:
    """A loss weight: a finite number >= 0."""
    return checks.non_negative(name, checks.finite(name, value))


def _positive(name: str, value) -> float:
    """A temperature: a finite number > 0."""
    return checks.positive(name, checks.finite(name, value))


# ---------------------------------------------------------------------------- draws and the relaxation
class ElasticDraw(NamedTuple):
    """The step's draws besides the continuous codes and the noise."""

    gumbel: torch.Tensor
    """Gumbel(0, 1) noise ``(B, K)`` of the categorical codes."""
    augment: torch.Tensor
    """U(0, 1) draws ``(B, 4)`` of the augmentations (rotation, zoom, shift x, shift y)."""


def gumbel_noise(rows: int, num_categories: int, device=None) -> torch.Tensor:
    """``g = −log(−log u)``, ``u ~ U(0, 1)`` ``(rows, K)``, from the step generator (this process's
    rows of the global batch)."""
    u = _uniform(rows, num_categories, device, 0.0, 1.0)
    return -torch.log(-torch.log(u + _EPS) + _EPS)


def gumbel_softmax(logits: torch.Tensor, gumbel: torch.Tensor, temperature: float) -> torch.Tensor:
    """``softmax((log softmax(logits) + gumbel) / temperature)`` ``(B, K)`` for prior logits ``(K,)``
    and Gumbel noise ``(B, K)``, in float32; its argmax is a draw of ``Cat(softmax(logits))``."""
    log_prior = F.log_softmax(logits.float(), dim=0)
    return torch.softmax((log_prior + gumbel.float()) / temperature, dim=1)


def nt_xent(a: torch.Tensor, b: torch.Tensor, temperature: float) -> torch.Tensor:
    """SimCLR's NT-Xent of features ``a`` ``(B, F)`` and their positives ``b`` ``(B, F)`` (row i of
    each a pair): the mean over the 2B rows of ``−log exp(s_ip) / Σ_{j≠i} exp(s_ij)`` with
    ``s = cosine similarity / temperature`` (module docstring). In float32."""
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(
            f"nt_xent takes two (B, F) batches of the same shape; got {tuple(a.shape)} and {tuple(b.shape)}."
        )
    n = a.shape[0]
    reps = F.normalize(torch.cat([a, b]).float(), dim=1)
    sim = reps @ reps.T / temperature
    eye = torch.eye(2 * n, dtype=torch.bool, device=sim.device)
    sim = sim.masked_fill(eye, float("-inf"))
    targets = torch.cat([torch.arange(n, 2 * n, device=sim.device), torch.arange(0, n, device=sim.device)])
    return F.cross_entropy(sim, targets)


# ---------------------------------------------------------------------------- augmentations
def affine(x: torch.Tensor, angle: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """Images ``x`` ``(B, C, H, W)`` mapped by a rotation of ``angle`` radians, a zoom of ``scale``
    (``(B,)`` each) and a shift ``(B, 2)`` of ``(Δx, Δy)`` in normalised coordinates (the image spans
    [−1, 1], so a pixel of a W-wide image is 2/W): output pixel p samples the input, bilinearly, at
    ``R(angle) p / scale + shift`` (zeros outside)."""
    cos, sin = torch.cos(angle) / scale, torch.sin(angle) / scale
    theta = torch.stack(
        [torch.stack([cos, -sin, shift[:, 0]], dim=1), torch.stack([sin, cos, shift[:, 1]], dim=1)], dim=1
    )
    x32 = x.float()
    grid = F.affine_grid(theta.float(), list(x32.shape), align_corners=False)
    return F.grid_sample(x32, grid, mode="bilinear", padding_mode="zeros", align_corners=False).to(x.dtype)


def augment(x: torch.Tensor, u: torch.Tensor, rotation: float, zoom: float, translation: float) -> torch.Tensor:
    """:func:`affine` of each image with ``u`` ``(B, 4)`` in [0, 1) mapped to a rotation in
    ``±rotation`` degrees, a zoom in ``1 ± zoom`` and a shift in ``±translation`` of the image side
    in each direction (uniform when ``u`` is)."""
    s = 2.0 * u.float() - 1.0
    angle = s[:, 0] * (rotation * math.pi / 180.0)
    scale = 1.0 + s[:, 1] * zoom
    shift = s[:, 2:4] * (2.0 * translation)
    return affine(x, angle, scale, shift)


@torch.no_grad()
def category_of(model, x) -> torch.Tensor:
    """The category ``(n,)`` (int64) Q predicts for images ``x`` (any number; float, uint8 or numpy,
    as :meth:`~disentangle.models.vae.VAE.representation`) by an Elastic-InfoGAN model: the argmax of
    the last ``model.num_categories`` columns of the representation."""
    k = int(getattr(model.encoder, "num_categories", 0))
    if k < 2:
        raise ValueError(
            "category_of needs a model with a categorical code (model.backbone=infogan_categorical, elastic_infogan)."
        )
    return model.representation(x)[:, -k:].argmax(1)


# ---------------------------------------------------------------------------- the objective
@OBJECTIVES.register("elastic_infogan")
class ElasticInfoGAN(InfoGAN):
    """Elastic-InfoGAN: InfoGAN with a categorical code of learned prior (Gumbel-softmax) and a
    contrastive (NT-Xent) loss on Q's features of real images and their augmentations (module
    docstring for the losses, the step, the parameters and the representation)."""

    categorical_code = True

    def __init__(
        self,
        info_weight: float = 0.05,
        discriminator_lr: float = 2e-3,
        discriminator_betas: tuple[float, float] = (0.5, 0.999),
        generator_steps: int = 2,
        num_categories: int = 10,
        gumbel_temperature: float = 0.1,
        category_weight: float = 1.0,
        contrastive_weight: float = 10.0,
        contrastive_temperature: float = 1.0,
        augment_rotation: float = 20.0,
        augment_zoom: float = 0.1,
        augment_translation: float = 0.0,
    ) -> None:
        super().__init__(info_weight, discriminator_lr, discriminator_betas, generator_steps)
        self.num_categories = checks.positive_int("num_categories", num_categories, minimum=2)
        self.gumbel_temperature = _positive("gumbel_temperature", gumbel_temperature)
        self.category_weight = _weight("category_weight", category_weight)
        self.contrastive_weight = _weight("contrastive_weight", contrastive_weight)
        self.contrastive_temperature = _positive("contrastive_temperature", contrastive_temperature)
        self.augment_rotation = checks.in_range(
            "augment_rotation", augment_rotation, 0.0, 180.0, hint="(degrees either way; 20 is the reference's)"
        )
        self.augment_zoom = checks.in_range(
            "augment_zoom", augment_zoom, 0.0, 1.0, high_open=True,
            hint="(the zoom is drawn in 1 ± augment_zoom; 0.1 is the reference's)"
        )
        self.augment_translation = checks.in_range(
            "augment_translation", augment_translation, 0.0, 0.5,
            hint="(a fraction of the image side either way; a few pixels, e.g. 0.05, keep a sprite in the frame)",
        )
        #: ℓ, the prior's logits: π = softmax(ℓ), uniform at the start
        self.prior_logits = nn.Parameter(torch.zeros(self.num_categories))

    # ------------------------------------------------------------------ setup
    def setup(self, *, model, dataset_size: int) -> None:
        super().setup(model=model, dataset_size=dataset_size)
        disc, _ = self.networks(model)
        if disc.num_categories != self.num_categories:
            have = (
                f"model.num_categories is {disc.num_categories}" if disc.num_categories
                else "the model has no categorical code (model.backbone=infogan)"
            )
            raise ConfigError(
                f"objective.num_categories is {self.num_categories} but {have}: the model's last "
                f"model.num_categories codes are the categorical code this objective trains, so the two must be "
                f"equal. Use model.backbone=infogan_categorical with model.num_categories={self.num_categories} "
                f"(model.latent_dim counts the continuous codes and the categories together)."
            )
        self.to(next(model.parameters()).device)

    def model_parameters(self, model) -> Iterable[nn.Parameter]:
        """G's parameters and the prior's logits: the trainer's ``"model"`` optimizer (the reference
        trains the prior with G)."""
        return [*self.networks(model)[1].parameters(), self.prior_logits]

    def prior(self) -> torch.Tensor:
        """``π = softmax(ℓ)`` ``(K,)``, the learned prior of the categories."""
        return torch.softmax(self.prior_logits.float(), dim=0)

    # ------------------------------------------------------------------ draws
    def draw(
        self, rows: int, gen: InfoGANGenerator, device, step: int
    ) -> tuple[torch.Tensor, torch.Tensor, ElasticDraw]:
        """The continuous codes ``(B, C)``, the noise and the Gumbel noise and augmentation draws, in
        this order, from the step generator."""
        codes, noise = sample_codes(rows, gen.latent_dim - self.num_categories, gen.noise_dim, device)
        gumbel = gumbel_noise(rows, self.num_categories, device)
        return codes, noise, ElasticDraw(gumbel, _uniform(rows, 4, device, 0.0, 1.0))

    def categorical(self, gumbel: torch.Tensor) -> torch.Tensor:
        """The relaxed one-hot codes ``y`` ``(B, K)`` of Gumbel noise ``gumbel``, differentiable in ℓ."""
        return gumbel_softmax(self.prior_logits, gumbel, self.gumbel_temperature)

    def augment(self, x: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """The augmentations of real images ``x`` (:func:`augment` with the objective's ranges)."""
        return augment(x, u, self.augment_rotation, self.augment_zoom, self.augment_translation)

    # ------------------------------------------------------------------ terms
    def _q_losses(
        self, disc: InfoGANDiscriminator, q_out: torch.Tensor, codes: torch.Tensor, category: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Q's Gaussian loss of the continuous codes, its cross-entropy of the sampled categories
        (``argmax y``) and those categories, from Q's raw outputs on generated images."""
        q_out = q_out.float()
        c = codes.shape[1]
        logvar = q_out.new_full((q_out.shape[0], c), 2.0 * math.log(disc.q_std))
        labels = category.detach().argmax(1)
        return gaussian_nll(codes, q_out[:, :c], logvar), F.cross_entropy(q_out[:, c:], labels), labels

    def discriminator_terms(
        self, disc: InfoGANDiscriminator, gen: InfoGANGenerator, x: torch.Tensor, codes: torch.Tensor,
        noise: torch.Tensor, draw: ElasticDraw,
    ) -> dict[str, torch.Tensor]:
        """D's and Q's losses: D on real ``x`` and ``G(c, y, z)``, Q on ``G(c, y, z)`` (G's images
        and ``y`` without a graph) and the contrastive loss on ``x`` and its augmentations (the
        trunk's features detached), one trunk pass for the three batches."""
        b = x.shape[0]
        with torch.no_grad():
            category = self.categorical(draw.gumbel)
            fake = torch.sigmoid(gen.generate(torch.cat([codes, category], dim=1), noise)).to(x.dtype)
            augmented = self.augment(x, draw.augment).to(x.dtype)
        h = disc.features(torch.cat([x, fake, augmented]))
        real_h, fake_h, aug_h = h[:b], h[b : 2 * b], h[2 * b :]
        logits, q_features, q_out = disc.heads(torch.cat([real_h, fake_h, real_h.detach(), aug_h.detach()]))
        logits = logits.float()
        real_logits, fake_logits = logits[:b], logits[b : 2 * b]
        d_loss = _bce(real_logits, 1.0) + _bce(fake_logits, 0.0)
        q_fake = q_out[b : 2 * b].float()
        q_loss, category_loss, labels = self._q_losses(disc, q_fake, codes, category)
        contrastive = nt_xent(q_features[2 * b : 3 * b], q_features[3 * b :], self.contrastive_temperature)
        prior = self.prior().detach()
        entropy = -(prior * torch.log(prior.clamp_min(1e-30))).sum()
        c = codes.shape[1]
        terms = {
            "discriminator_loss": d_loss + self.info_weight * q_loss + self.category_weight * category_loss
            + self.contrastive_weight * contrastive,
            "d_loss": d_loss,
            "q_loss": q_loss,
            "category_loss": category_loss,
            "category_accuracy": (q_fake[:, c:].argmax(1) == labels).float().mean(),
            "contrastive_loss": contrastive,
            "mi_lower_bound": c * math.log(HIGH - LOW) - q_loss + entropy - category_loss,
            "d_real": torch.sigmoid(real_logits).mean(),
            "d_fake": torch.sigmoid(fake_logits).mean(),
            "d_real_accuracy": (real_logits > 0).float().mean(),
            "d_fake_accuracy": (fake_logits < 0).float().mean(),
        }
        if c:
            terms["q_mse_per_code"] = (q_fake[:, :c] - codes).square().mean(0)
        return terms

    def generator_terms(
        self, disc: InfoGANDiscriminator, gen: InfoGANGenerator, codes: torch.Tensor, noise: torch.Tensor,
        draw: ElasticDraw,
    ) -> dict[str, torch.Tensor]:
        """G's (and the prior's) loss ``−log D(G(c, y, z)) + λ · q_loss + λ_cat · category_loss``,
        ``y`` with its graph to ℓ, D and Q frozen and in eval mode."""
        category = self.categorical(draw.gumbel)
        fake = torch.sigmoid(gen.generate(torch.cat([codes, category], dim=1), noise))
        with frozen(disc), _training(disc, False):
            logits, _, q_out = disc.heads(disc.features(fake))
        g_loss = _bce(logits.float(), 1.0)
        info, category_loss, _ = self._q_losses(disc, q_out, codes, category)
        prior = self.prior().detach()
        return {
            "loss": g_loss + self.info_weight * info + self.category_weight * category_loss,
            "g_loss": g_loss,
            "g_info_loss": info,
            "g_category_loss": category_loss,
            "prior": prior,
            "prior_entropy": -(prior * torch.log(prior.clamp_min(1e-30))).sum(),
        }

    # ------------------------------------------------------------------ a step
    def forward(self, model, x: torch.Tensor, *, step: int) -> dict[str, torch.Tensor]:
        """Every term on one batch without any update (G's ``loss`` with its graph)."""
        disc, gen = self.networks(model)
        codes, noise, draw = self.draw(x.shape[0], gen, x.device, step)
        with torch.no_grad():
            terms = self.discriminator_terms(disc, gen, x, codes, noise, draw)
        return {**terms, **self.generator_terms(disc, gen, codes, noise, draw)}

    def train_step(
        self,
        model,
        x: torch.Tensor,
        *,
        step: int,
        optimizers: dict[str, torch.optim.Optimizer],
        precision: Precision,
    ) -> dict[str, torch.Tensor]:
        """D + Q, then G and the prior ``generator_steps`` times, on the same draws (the loss scale
        updated between G's updates under fp16, as :class:`InfoGAN`)."""
        disc, gen = self.networks(model)
        codes, noise, draw = self.draw(x.shape[0], gen, x.device, step)
        return self.discriminator_then_generator(
            precision, optimizers, lambda: self.discriminator_terms(disc, gen, x, codes, noise, draw),
            lambda: self.generator_terms(disc, gen, codes, noise, draw),
        )
