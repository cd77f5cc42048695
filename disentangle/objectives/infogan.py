"""InfoGAN (Chen et al. 2016) and InfoGAN-CR (Lin et al. 2020) as objectives of the trainer.

The model is the ``infogan`` backbone (:mod:`disentangle.backbones.infogan`): the VAE's encoder is
the discriminator D with the InfoGAN head Q on its trunk, its decoder the generator G, so the
representation is Q's mean on real images (``model.encode``) and every metric, ``disentangle.load``
and the traversals (``model.decode(c) = G(c, noise = 0)``) work unchanged.

The trainer's ``"model"`` optimizer trains G alone (:meth:`InfoGAN.model_parameters`; ``train.lr``,
``train.betas``: the recipe sets 1e-3 and [0.5, 0.999]); D and Q train with ``"discriminator"``
and InfoGAN-CR's H with ``"contrastive"`` (:meth:`InfoGAN.extra_optimizers`).

Codes ``c ~ U(−1, 1)^K`` (K = ``model.latent_dim``) and noise ``z ~ U(−1, 1)^N``
(N = ``model.noise_dim``), as in the reference's dSprites setting. Every draw comes from the
trainer's step generator (:func:`disentangle._core.distributed.global_generator`), drawn for the
global batch with this process's rows kept, so a resumed or multi-process run draws what the
single uninterrupted run draws.

Reference: Lin, Thekumparampil, Fanti & Oh, "InfoGAN-CR and ModelCentrality: Self-supervised Model
Training and Selection for Disentangling GANs", ICML 2020, and their code ``fjxmlzn/InfoGAN-CR``
(``InfoGAN-CR_dSprites/gan/infogan_cr.py``, ``latent.py``, ``config.py``).
"""
from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from .._core import checks, distributed
from .._core.choices import DEFAULT_INIT
from .._core.gaussian import LOG_2PI
from ..backbones.infogan import ContrastiveDiscriminator, InfoGANDiscriminator, InfoGANGenerator
from ..backbones.init import redraw
from ..errors import ConfigError
from . import OBJECTIVES
from .base import Objective, detached, minimize_terms
from .discriminator import frozen

if TYPE_CHECKING:  # the trainer passes it in; objectives only call its methods
    from ..training.precision import Precision

#: the codes' and the noise's prior U(LOW, HIGH) (the reference's dSprites latents)
LOW, HIGH = -1.0, 1.0


# ---------------------------------------------------------------------------- draws
def _uniform(rows: int, cols: int, device: torch.device | str | None, low: float = LOW, high: float = HIGH) -> torch.Tensor:
    """``U(low, high)`` draws ``(rows, cols)`` for this process's rows of a global batch, from the
    step generator (the values of the single-process draw of the whole batch)."""
    info = distributed.rank_info()
    u = torch.rand((info.world_size, rows, cols), generator=distributed.global_generator(), device=device)
    return low + (high - low) * u[info.rank]


def _randint(high: int, rows: int, device: torch.device | str | None) -> torch.Tensor:
    """Uniform integers in ``[0, high)`` for this process's rows of a global batch."""
    info = distributed.rank_info()
    return torch.randint(high, (info.world_size, rows), generator=distributed.global_generator(), device=device)[info.rank]


def sample_codes(rows: int, num_codes: int, noise_dim: int, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """The codes ``c ~ U(−1, 1)^K`` and noise ``z ~ U(−1, 1)^N`` of ``rows`` generated images."""
    return _uniform(rows, num_codes, device), _uniform(rows, noise_dim, device)


class PairCodes(NamedTuple):
    """The inputs of InfoGAN-CR's pairs: ``G(first, noise)`` and ``G(second, noise)``."""

    first: torch.Tensor
    """Codes of the first images ``(B, K)``."""
    second: torch.Tensor
    """Codes of the second images ``(B, K)``: equal to ``first`` in code ``labels``, at least
    ``gap`` apart from it in every other code."""
    noise: torch.Tensor
    """The noise ``(B, N)``, shared by both images of a pair."""
    labels: torch.Tensor
    """The shared code of each pair ``(B,)`` (int64): H's target."""


def sample_pairs(rows: int, num_codes: int, noise_dim: int, gap: float = 0.0, device=None) -> PairCodes:
    """The reference's ``JointLatent.sample_cr`` with ``alpha_same = 0`` and ``alpha_different = gap``.

    For each pair, a code ``k ~ U{0..K−1}`` (the label); code k is drawn once from U(−1, 1) and
    shared; every other code is drawn for each image from U(−1 + gap/2, 1 − gap/2) and the two
    values are pushed ``gap/2`` apart each (the larger up), so they differ by at least ``gap`` (with
    ``gap = 0``, two independent U(−1, 1) draws); the noise is drawn once and shared by both images.
    """
    labels = _randint(num_codes, rows, device)
    u0 = _uniform(rows, num_codes, device, 0.0, 1.0)
    u1 = _uniform(rows, num_codes, device, 0.0, 1.0)
    noise = _uniform(rows, noise_dim, device)
    shared = LOW + (HIGH - LOW) * u0
    a = (LOW + gap / 2) + (HIGH - LOW - gap) * u0
    b = (LOW + gap / 2) + (HIGH - LOW - gap) * u1
    sign = (a > b).to(a.dtype) * 2.0 - 1.0
    a, b = a + sign * (gap / 2), b - sign * (gap / 2)
    same = labels.unsqueeze(1) == torch.arange(num_codes, device=labels.device)
    return PairCodes(torch.where(same, shared, a), torch.where(same, shared, b), noise, labels)


# ---------------------------------------------------------------------------- losses and schedules
def gaussian_nll(codes: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """InfoGAN's Q loss: ``−log N(c; μ, σ²)`` summed over the codes, mean over the batch (nats);
    ``K · ½ log 2π`` for a perfect ``μ = c`` with σ = 1. ``H(c) −`` it is the variational lower bound
    on ``I(c; G(z, c))``."""
    mu, logvar = mu.float(), logvar.float()
    per_code = 0.5 * (LOG_2PI + logvar + (codes.float() - mu).square() * torch.exp(-logvar))
    return per_code.sum(1).mean()


def stepped(step: int, start: float, change: float, every: int, times: int) -> float:
    """``start + change · min(times, ⌊step / every⌋)``: a value changed by ``change`` at steps
    ``every, 2·every, …``, ``times`` times (the reference's ``cr_coe`` and ``gap`` counters)."""
    return start + change * min(times, step // every)


def changes_at(step: int, every: int, times: int) -> bool:
    """Whether :func:`stepped` changes (in the reference: re-initialises H) at the start of ``step``."""
    return step > 0 and step % every == 0 and step // every <= times


@contextlib.contextmanager
def _training(module: nn.Module, mode: bool) -> Iterator[nn.Module]:
    """Within the block ``module`` is in training mode ``mode``; its own mode is restored after."""
    previous = module.training
    module.train(mode)
    try:
        yield module
    finally:
        module.train(previous)


def _bce(logits: torch.Tensor, target: float) -> torch.Tensor:
    return F.binary_cross_entropy_with_logits(logits, torch.full_like(logits, target))


# ---------------------------------------------------------------------------- InfoGAN
@OBJECTIVES.register("infogan")
class InfoGAN(Objective):
    """InfoGAN: a GAN whose generator ``G(z, c)`` maximises a variational lower bound on
    ``I(c; G(z, c))`` through the head Q on the discriminator's trunk.

    Chen, Duan, Houthooft, Schulman, Sutskever & Abbeel, "InfoGAN: Interpretable Representation
    Learning by Information Maximizing Generative Adversarial Nets", NeurIPS 2016; trained as Lin et
    al.'s InfoGAN-CR code does with α = 0 (its dSprites hyperparameters). Needs
    ``model.backbone: infogan``.

    One step, on a batch x of real images and codes c, noise z drawn once for the whole step:

    1. **D + Q** (optimizer ``"discriminator"``): ``d_loss + λ · q_loss`` with
       ``d_loss = −E log D(x) − E log(1 − D(G(z, c)))`` (binary cross-entropy on logits) and
       ``q_loss = −E log Q(c | G(z, c))`` (:func:`gaussian_nll`, Q Gaussian with fixed σ);
       G's images are made without a graph.
    2. **G**, ``generator_steps`` times (2, as the reference) (optimizer ``"model"``):
       ``loss = −E log D(G(z, c)) + λ · q_loss`` (the non-saturating loss), D and Q frozen and in
       eval mode (their spectral norms do no power iteration).

    Parameters
    ----------
    info_weight:
        λ, the Q loss's weight in both phases (the reference's ``info_coe_de`` and
        ``info_coe_infod``). Default 0.05.
    discriminator_lr, discriminator_betas:
        Adam for D and Q. Defaults 2e-3 (the reference's ``infod_lr``) and [0.5, 0.999].
    generator_steps:
        G's updates per step. Default 2.

    Terms: ``loss`` (G's, last G update), ``g_loss`` (its adversarial part), ``g_info_loss`` (its Q
    loss), and from the D phase ``discriminator_loss``, ``d_loss``, ``q_loss``, ``mi_lower_bound``
    (``H(c) − q_loss = K ln 2 − q_loss``, nats), ``q_mse_per_code`` (Q's squared error per code),
    ``d_real`` and ``d_fake`` (mean D probabilities) and ``d_real_accuracy``, ``d_fake_accuracy``.
    """

    #: whether the objective trains InfoGAN-CR's contrastive discriminator H
    contrastive_regulariser = False
    #: whether the objective trains a categorical code (``model.backbone: infogan_categorical``; Elastic-InfoGAN)
    categorical_code = False

    def __init__(
        self,
        info_weight: float = 0.05,
        discriminator_lr: float = 2e-3,
        discriminator_betas: tuple[float, float] = (0.5, 0.999),
        generator_steps: int = 2,
    ) -> None:
        super().__init__()
        self.info_weight = checks.non_negative("info_weight", info_weight)
        self.discriminator_lr = checks.positive("discriminator_lr", discriminator_lr)
        self.discriminator_betas = checks.adam_betas("discriminator_betas", discriminator_betas)
        self.generator_steps = checks.positive_int("generator_steps", generator_steps)
        self.init_scheme = DEFAULT_INIT

    # ------------------------------------------------------------------ setup
    @staticmethod
    def networks(model) -> tuple[InfoGANDiscriminator, InfoGANGenerator]:
        """D (with Q) and G of an ``infogan`` model; :class:`ConfigError` for any other backbone."""
        disc, gen = getattr(model, "encoder", None), getattr(model, "decoder", None)
        if not isinstance(disc, InfoGANDiscriminator) or not isinstance(gen, InfoGANGenerator):
            raise ConfigError(
                f"The InfoGAN objectives train a generator and a discriminator: they need model.backbone=infogan "
                f"(the model has encoder {type(disc).__name__} and decoder {type(gen).__name__})."
            )
        return disc, gen

    def setup(self, *, model, dataset_size: int) -> None:
        super().setup(model=model, dataset_size=dataset_size)
        disc, _ = self.networks(model)
        categories = getattr(disc, "num_categories", 0)
        if categories and not self.categorical_code:
            name = getattr(self, "registry_name", type(self).__name__)
            raise ConfigError(
                f"The model has a categorical code of {categories} categories (model.backbone=infogan_categorical), "
                f"but objective '{name}' trains continuous codes only: a categorical code is trained by "
                f"objective.name=elastic_infogan. Use model.backbone=infogan, or train elastic_infogan."
            )
        self.init_scheme = getattr(model, "init_scheme", DEFAULT_INIT)
        if distributed.is_distributed():
            # G's batch norm normalises by the statistics of this process's rows: a multi-process
            # run would not train the single-process objective (the library's rule), so refuse
            raise ConfigError(
                f"objective '{getattr(self, 'registry_name', type(self).__name__)}' trains in one process only: "
                f"its generator's batch norm normalises each process's rows by their own statistics, so "
                f"{distributed.rank_info().world_size} processes would not train the objective of one. Run "
                f"it with python -m disentangle.train (not torchrun), or sweep several runs side by side."
            )

    def model_parameters(self, model) -> Iterable[nn.Parameter]:
        """G's parameters: the trainer's ``"model"`` optimizer is the generator's."""
        return self.networks(model)[1].parameters()

    def extra_optimizers(self, model, make_optimizer) -> dict[str, torch.optim.Optimizer]:
        """``"discriminator"``: D's trunk and head and Q's head, with their own Adam settings."""
        disc, _ = self.networks(model)
        return {
            "discriminator": make_optimizer(
                disc.parameters(), lr=self.discriminator_lr, betas=self.discriminator_betas, weight_decay=0.0
            )
        }

    # ------------------------------------------------------------------ terms
    def discriminator_terms(
        self, disc: InfoGANDiscriminator, gen: InfoGANGenerator, x: torch.Tensor, codes: torch.Tensor, noise: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        """D's and Q's losses on real ``x`` and ``G(z, c)`` (made without a graph), one trunk pass."""
        with torch.no_grad():
            fake = torch.sigmoid(gen.generate(codes, noise)).to(x.dtype)
        logits, q_mu, q_logvar = disc.discriminate(torch.cat([x, fake]))
        logits = logits.float()
        b = x.shape[0]
        real_logits, fake_logits = logits[:b], logits[b:]
        d_loss = _bce(real_logits, 1.0) + _bce(fake_logits, 0.0)
        q_loss = gaussian_nll(codes, q_mu[b:], q_logvar[b:])
        return {
            "discriminator_loss": d_loss + self.info_weight * q_loss,
            "d_loss": d_loss,
            "q_loss": q_loss,
            "mi_lower_bound": codes.shape[1] * math.log(HIGH - LOW) - q_loss,
            "q_mse_per_code": (q_mu[b:].float() - codes).square().mean(0),
            "d_real": torch.sigmoid(real_logits).mean(),
            "d_fake": torch.sigmoid(fake_logits).mean(),
            "d_real_accuracy": (real_logits > 0).float().mean(),
            "d_fake_accuracy": (fake_logits < 0).float().mean(),
        }

    def generator_terms(
        self, disc: InfoGANDiscriminator, gen: InfoGANGenerator, codes: torch.Tensor, noise: torch.Tensor,
        pairs: PairCodes | None = None, alpha: float = 0.0,
    ) -> dict[str, torch.Tensor]:
        """G's loss: ``−log D(G(z, c)) + λ · q_loss`` (+ ``α · cr_loss`` for InfoGAN-CR), with D,
        Q (and H) frozen and in eval mode."""
        fake = torch.sigmoid(gen.generate(codes, noise))
        with frozen(disc), _training(disc, False):
            logits, q_mu, q_logvar = disc.discriminate(fake)
        g_loss = _bce(logits.float(), 1.0)
        info = gaussian_nll(codes, q_mu, q_logvar)
        loss = g_loss + self.info_weight * info
        if pairs is not None and alpha > 0:
            loss = loss + alpha * self.contrastive_terms(gen, pairs, with_graph=True)["cr_loss"]
        return {"loss": loss, "g_loss": g_loss, "g_info_loss": info}

    def contrastive_terms(self, gen, pairs: PairCodes, *, with_graph: bool) -> dict[str, torch.Tensor]:
        raise NotImplementedError  # InfoGAN-CR's

    # ------------------------------------------------------------------ a step
    def draw(self, rows: int, gen: InfoGANGenerator, device, step: int) -> tuple[torch.Tensor, torch.Tensor, PairCodes | None]:
        """The step's codes and noise (and InfoGAN-CR's pairs), in this order, from the step generator."""
        codes, noise = sample_codes(rows, gen.latent_dim, gen.noise_dim, device)
        return codes, noise, None

    def forward(self, model, x: torch.Tensor, *, step: int) -> dict[str, torch.Tensor]:
        """Every term on one batch without any update (G's ``loss`` with its graph)."""
        disc, gen = self.networks(model)
        codes, noise, pairs = self.draw(x.shape[0], gen, x.device, step)
        with torch.no_grad():
            terms = self.discriminator_terms(disc, gen, x, codes, noise)
            if pairs is not None:
                terms.update(self.contrastive_terms(gen, pairs, with_graph=False))
        return {**terms, **self.generator_terms(disc, gen, codes, noise, pairs, self.alpha(step))}

    def alpha(self, step: int) -> float:
        """The contrastive weight α at ``step`` (0 for InfoGAN)."""
        return 0.0

    def before_step(self, step: int, optimizers: dict[str, torch.optim.Optimizer]) -> None:
        """Work at the start of a step, before any draw (InfoGAN-CR re-initialises H)."""

    def contrastive_step(self, gen, pairs, step, optimizers, precision) -> dict[str, torch.Tensor]:
        """InfoGAN-CR's H update (nothing for InfoGAN)."""
        return {}

    def train_step(
        self,
        model,
        x: torch.Tensor,
        *,
        step: int,
        optimizers: dict[str, torch.optim.Optimizer],
        precision: Precision,
    ) -> dict[str, torch.Tensor]:
        """The reference's iteration: (H,) D + Q, then G ``generator_steps`` times, all on the same
        codes, noise and pairs. Under fp16 the loss scale is updated between G's updates (a
        GradScaler steps an optimizer once per update)."""
        disc, gen = self.networks(model)
        self.before_step(step, optimizers)
        codes, noise, pairs = self.draw(x.shape[0], gen, x.device, step)
        alpha = self.alpha(step)
        terms = self.contrastive_step(gen, pairs, step, optimizers, precision)
        terms.update(self.discriminator_then_generator(
            precision, optimizers, lambda: self.discriminator_terms(disc, gen, x, codes, noise),
            lambda: self.generator_terms(disc, gen, codes, noise, pairs, alpha),
        ))
        return terms

    def discriminator_then_generator(
        self,
        precision: Precision,
        optimizers: dict[str, torch.optim.Optimizer],
        discriminator_phase: Callable[[], dict[str, torch.Tensor]],
        generator_phase: Callable[[], dict[str, torch.Tensor]],
    ) -> dict[str, torch.Tensor]:
        """One GAN iteration on one draw: ``discriminator_phase()``'s ``discriminator_loss`` minimised
        with ``optimizers["discriminator"]`` (D and Q), then ``generator_phase()``'s ``loss`` with
        ``optimizers["model"]``, ``generator_steps`` times (the loss scale updated between G's updates
        under fp16: a GradScaler steps an optimizer once per update). Returns D's terms and G's last
        terms, detached."""
        terms = detached(minimize_terms(precision, optimizers["discriminator"], discriminator_phase, "discriminator_loss"))
        for i in range(self.generator_steps):
            if i:
                precision.update()
            g_terms = minimize_terms(precision, optimizers["model"], generator_phase)
        return {**terms, **detached(g_terms)}


# ---------------------------------------------------------------------------- InfoGAN-CR
@OBJECTIVES.register("infogan_cr")
class InfoGANCR(InfoGAN):
    """InfoGAN-CR: InfoGAN plus a contrastive regulariser, a discriminator H that tells which code
    a pair of generated images shares, which G helps (``+ α · cr_loss`` in G's loss).

    Lin, Thekumparampil, Fanti & Oh, ICML 2020 (Algorithm 1; their dSprites code and
    ``config.py``). Needs ``model.backbone: infogan``; H has D's trunk on the pair concatenated on
    channels and K logits (:class:`~disentangle.backbones.infogan.ContrastiveDiscriminator`).

    Pairs (:func:`sample_pairs`): a code k per pair, shared by both images, the noise shared too,
    every other code drawn for each image (at least the gap apart). One step, in the reference's
    order, on the same codes, noise and pairs:

    1. **H** (optimizer ``"contrastive"``): ``cr_loss``, the cross-entropy of H's K logits of
       ``(G(c₁, z), G(c₂, z))`` (made without a graph) against k. While α = 0, G makes these images
       in eval mode (its batch norm's running statistics), as the reference does.
    2. **D + Q** and 3. **G** ×2 as :class:`InfoGAN`, G's loss with ``+ α · cr_loss`` (H frozen and
       in eval mode) once α > 0.

    **Schedules** (pure functions of the step): ``α(step) = cr_weight_start + cr_weight_increase ·
    min(cr_weight_increases, ⌊step / cr_weight_every⌋)`` and ``gap(step) = max(0, gap_start −
    gap_decrease · min(gap_decreases, ⌊step / gap_every⌋))``. At the start of each step where either
    changes (step > 0, a multiple of its ``every``, at most ``…increases``/``…decreases`` of them),
    H is **re-initialised**: its layers drawn afresh by ``model.init``'s scheme from the trainer's
    step generator (so a resumed run redraws the very weights) and its optimizer's state (Adam's
    moments and step count) cleared. Reference dSprites values: α = 0 until step 288,000, then 2
    (``cr_coe_increase`` 2.0 in ``config.py``; its ``__main__`` has 1.0), gap 0 throughout; of
    28 epochs of 11,520 steps (322,560 steps).

    Parameters (besides :class:`InfoGAN`'s)
    ---------------------------------------
    cr_weight_start, cr_weight_increase, cr_weight_every, cr_weight_increases:
        α's schedule; defaults 0, 2, 288000, 1 (the reference's ``cr_coe_*``).
    gap_start, gap_decrease, gap_every, gap_decreases:
        the contrastive gap's schedule (the least difference of the codes a pair does not share, in
        [0, 2]); defaults 0, 0, 1, 0 (the reference's ``gap_*``: no gap).
    contrastive_lr, contrastive_betas:
        Adam for H. Defaults 2e-3 (``crd_lr``) and [0.5, 0.999].

    Terms: :class:`InfoGAN`'s, ``cr_loss`` and ``cr_accuracy`` (H's, before its update), ``alpha``
    and ``gap``.
    """

    contrastive_regulariser = True

    def __init__(
        self,
        info_weight: float = 0.05,
        discriminator_lr: float = 2e-3,
        discriminator_betas: tuple[float, float] = (0.5, 0.999),
        generator_steps: int = 2,
        cr_weight_start: float = 0.0,
        cr_weight_increase: float = 2.0,
        cr_weight_every: int = 288_000,
        cr_weight_increases: int = 1,
        gap_start: float = 0.0,
        gap_decrease: float = 0.0,
        gap_every: int = 1,
        gap_decreases: int = 0,
        contrastive_lr: float = 2e-3,
        contrastive_betas: tuple[float, float] = (0.5, 0.999),
    ) -> None:
        super().__init__(info_weight, discriminator_lr, discriminator_betas, generator_steps)
        self.cr_weight_start = checks.non_negative("cr_weight_start", cr_weight_start)
        self.cr_weight_increase = checks.finite("cr_weight_increase", cr_weight_increase)
        self.cr_weight_every = checks.positive_int("cr_weight_every", cr_weight_every)
        self.cr_weight_increases = checks.integer("cr_weight_increases", cr_weight_increases, minimum=0)
        if self.cr_weight_start + self.cr_weight_increase * self.cr_weight_increases < 0:
            raise checks.ParameterError(
                "cr_weight_increase",
                f"cr_weight_increase {cr_weight_increase} × {cr_weight_increases} takes α below 0 from "
                f"cr_weight_start {cr_weight_start}; α is a weight (>= 0).",
            )
        self.gap_start = checks.in_range("gap_start", gap_start, 0.0, HIGH - LOW, hint="(the codes are in [-1, 1])")
        self.gap_decrease = checks.non_negative("gap_decrease", gap_decrease)
        self.gap_every = checks.positive_int("gap_every", gap_every)
        self.gap_decreases = checks.integer("gap_decreases", gap_decreases, minimum=0)
        self.contrastive_lr = checks.positive("contrastive_lr", contrastive_lr)
        self.contrastive_betas = checks.adam_betas("contrastive_betas", contrastive_betas)
        self.contrastive: ContrastiveDiscriminator | None = None

    # ------------------------------------------------------------------ schedules
    def alpha(self, step: int) -> float:
        """α at ``step``: ``cr_weight_start + cr_weight_increase · min(cr_weight_increases, ⌊step / cr_weight_every⌋)``."""
        return stepped(step, self.cr_weight_start, self.cr_weight_increase, self.cr_weight_every, self.cr_weight_increases)

    def gap(self, step: int) -> float:
        """The contrastive gap at ``step``: ``max(0, gap_start − gap_decrease · min(gap_decreases, ⌊step / gap_every⌋))``."""
        return max(0.0, stepped(step, self.gap_start, -self.gap_decrease, self.gap_every, self.gap_decreases))

    def resets_contrastive(self, step: int) -> bool:
        """Whether H is re-initialised at the start of ``step`` (where α's or the gap's schedule
        changes, as the reference)."""
        return changes_at(step, self.cr_weight_every, self.cr_weight_increases) or changes_at(
            step, self.gap_every, self.gap_decreases
        )

    # ------------------------------------------------------------------ setup
    def setup(self, *, model, dataset_size: int) -> None:
        super().setup(model=model, dataset_size=dataset_size)
        disc, _ = self.networks(model)
        h = self.contrastive
        if h is None or h.num_codes != disc.latent_dim:
            self.contrastive = ContrastiveDiscriminator.like(disc)
        self.contrastive.to(next(model.parameters()).device)

    def _require_contrastive(self) -> ContrastiveDiscriminator:
        if self.contrastive is None:
            raise RuntimeError("InfoGANCR needs setup(model=..., dataset_size=...) before use (it builds H there).")
        return self.contrastive

    def extra_optimizers(self, model, make_optimizer) -> dict[str, torch.optim.Optimizer]:
        """D + Q's ``"discriminator"`` and H's ``"contrastive"``."""
        return {
            **super().extra_optimizers(model, make_optimizer),
            "contrastive": make_optimizer(
                self._require_contrastive().parameters(), lr=self.contrastive_lr, betas=self.contrastive_betas,
                weight_decay=0.0,
            ),
        }

    def reset_contrastive(self, optimizer: torch.optim.Optimizer | None = None) -> None:
        """Re-initialise H: its layers drawn afresh by the model's ``model.init`` scheme from the
        step generator (torch's global RNG outside a trainer's step), its spectral norms brought to
        the new weights, and ``optimizer``'s state of H's parameters cleared."""
        h = self._require_contrastive()
        redraw(h, self.init_scheme, distributed.global_generator())
        if optimizer is not None:
            for p in h.parameters():
                optimizer.state.pop(p, None)

    # ------------------------------------------------------------------ terms
    def draw(self, rows: int, gen: InfoGANGenerator, device, step: int) -> tuple[torch.Tensor, torch.Tensor, PairCodes]:
        codes, noise, _ = super().draw(rows, gen, device, step)
        return codes, noise, sample_pairs(rows, gen.latent_dim, gen.noise_dim, self.gap(step), device)

    def contrastive_terms(self, gen: InfoGANGenerator, pairs: PairCodes, *, with_graph: bool) -> dict[str, torch.Tensor]:
        """H's cross-entropy and accuracy on the pairs ``(G(c₁, z), G(c₂, z))``, the two halves
        generated separately (each with its own batch statistics, as the reference). Without a
        graph into G (H's phase): G in eval mode while α = 0 is left to the caller. With a graph
        (G's phase): H frozen and in eval mode."""
        h = self._require_contrastive()
        with contextlib.ExitStack() as stack:
            if not with_graph:
                stack.enter_context(torch.no_grad())
            first = torch.sigmoid(gen.generate(pairs.first, pairs.noise))
            second = torch.sigmoid(gen.generate(pairs.second, pairs.noise))
        pair = torch.cat([first, second], dim=1)
        if with_graph:
            with frozen(h), _training(h, False):
                logits = h(pair).float()
        else:
            logits = h(pair).float()
        return {
            "cr_loss": F.cross_entropy(logits, pairs.labels),
            "cr_accuracy": (logits.argmax(1) == pairs.labels).float().mean(),
        }

    # ------------------------------------------------------------------ a step
    def before_step(self, step: int, optimizers: dict[str, torch.optim.Optimizer]) -> None:
        if self.resets_contrastive(step):
            self.reset_contrastive(optimizers.get("contrastive"))

    def contrastive_step(self, gen, pairs, step, optimizers, precision) -> dict[str, torch.Tensor]:
        """H's update; G makes the pairs in training mode once α > 0, in eval mode before (the
        reference's ``train_with_crd``)."""
        alpha = self.alpha(step)
        with _training(gen, gen.training and alpha > 0):
            terms = minimize_terms(
                precision, optimizers["contrastive"], lambda: self.contrastive_terms(gen, pairs, with_graph=False), "cr_loss"
            )
        ref = terms["cr_loss"]
        return {**detached(terms), "alpha": ref.new_full((), alpha), "gap": ref.new_full((), self.gap(step))}

    def forward(self, model, x: torch.Tensor, *, step: int) -> dict[str, torch.Tensor]:
        terms = super().forward(model, x, step=step)
        ref = terms["loss"]
        return {**terms, "alpha": ref.new_full((), self.alpha(step)).detach(), "gap": ref.new_full((), self.gap(step)).detach()}
