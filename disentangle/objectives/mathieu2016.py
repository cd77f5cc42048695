"""Mathieu et al. 2016: a specified (class) code and a variational unspecified code, trained by
reconstruction, swapping within a class and a class-conditional adversary.

Mathieu, Zhao, Sprechmann, Ramesh & LeCun, "Disentangling factors of variation in deep
representations using adversarial training", NeurIPS (NIPS) 2016; reference code
``MichaelMathieu/factors-variation`` (Lua Torch), whose defaults are quoted below.

Codes (:mod:`disentangle.objectives.class_content`): with ``D`` latent dimensions and ``C =
class_dim``, ``model.encode(x) = (μ, log σ²)``; the paper's **specified** code ``s(x)`` is our class
code, the posterior *mean* of the last ``C`` dimensions (deterministic, as in the paper: its
``klweightS`` is 0); the **unspecified** code ``z`` is our content code, the first ``D − C``
dimensions, sampled ``z = μ_z + σ_z ε`` and regularised by a KL to ``N(0, I)``. The decoder is
``p(x | z, s) = model.decode([z, s])``. ``model.encode`` / ``model.representation`` give ``[z, s]``
(posterior means), so :func:`~disentangle.objectives.class_content.class_content_codes` returns the
paper's ``(z, s)`` as ``(content, class)``.

A batch is ``G`` groups of ``N = group_size`` images of one class (group-major). Member ``i``'s
*partner* ``p(i)`` is the next member of its group (cyclically; for ``N = 2`` the other one).
With ``x̂(z, s) = sigmoid(decode([z, s]))`` and ``P`` the number of pixel values of an image
(channels × height × width), every sum a mean over the batch's images::

    recon        = (1/B) Σ_i ℓ(x_i | z_i, s_i)                   (own codes)
    swap_recon   = (1/B) Σ_i ℓ(x_i | z_i, s_p(i))                (specified code of another image of its class)
    kl           = (1/B) Σ_i KL(q(z_i | x_i) ‖ N(0, I))           (unspecified dimensions only)
    adversarial  = (1/B) Σ_i BCE(D(x_i, x̂(z'_i, s_i)), r)       (the generator's loss, target r = real_label)
    loss = recon_weight·recon + swap_weight·swap_recon + kl_weight·kl + adversarial_weight·P·adversarial

``ℓ`` is the reconstruction negative log-likelihood summed over pixels
(:func:`~disentangle.objectives.losses.reconstruction_loss`; ``gaussian``, the squared error, is the
paper's L2). ``z'_i`` is the unspecified code of an image of **another class** of the batch (drawn
uniformly among the batch's images whose class differs from ``x_i``'s; in a multi-process run, among
the whole batch's), so a decoder that ignored ``s`` and read the class from ``z'`` would draw the wrong
class; a row whose class is the batch's only one takes a prior draw ``z' ~ N(0, I)`` instead.
``fake_content: prior`` always uses the prior draw (the reference code's ``samplingweight`` term).

The discriminator ``D(a, b)`` (owned by the objective, optimizer ``"discriminator"``) sees a *pair* of
images and says whether ``b`` is a real image of ``a``'s class (one logit). Real pairs are
``(x_i, x_p(i))``, two images of one class; fake pairs are ``(x_i, x̂(z'_i, s_i))``. Its loss, on
detached fakes, with the one-sided label smoothing of the reference code (real target ``r``, fake 0)::

    discriminator_loss = ½ (1/B) Σ_i [BCE(D(x_i, x_p(i)), r) + BCE(D(x_i, sg x̂(z'_i, s_i)), 0)]

The paper conditions ``D`` on the class identity (the reference code adds a learned embedding of the
class label to its feature maps); here the class is shown by a second image of it, which needs no
class count and works for classes never seen in training. ``D`` is a conv network on the two images
stacked along the channels for 64×64 images (Conv 32-32-64-64, kernel 4, stride 2, LeakyReLU 0.2,
then FC ``discriminator_hidden`` and one logit) and an MLP (two hidden layers of
``discriminator_hidden``, LeakyReLU 0.2) for any other size; no batch normalisation or dropout (the
reference has both), so its output for a row depends on that row alone and draws nothing at random. Its
layers are initialised by ``model.init`` like the model's (the trainer does it after :meth:`setup`).

One step (:meth:`Mathieu2016.train_step`): (1) the model's phase minimises ``loss`` with optimizer
``"model"``; ``D``'s parameters are frozen there, so it moves the encoder and decoder only; (2) ``D``'s
phase minimises ``discriminator_loss`` on the fakes of phase 1, detached, with ``"discriminator"``
(the reference code's order: generator, then discriminator on the generator's samples).

Parameters (config keys; reference-code values are ``factors-variation/train.lua``'s)
-----------------------------------------------------------------------------------
``class_factors``, ``class_dim``, ``group_size``
    The class and the split (:class:`~disentangle.objectives.class_content.ClassContentObjective`);
    ``group_size`` default 2 (the paper's pairs ``x1, x1'`` of one class).
``recon_weight``
    Default 0.5 (the reference code's ``recweight``).
``swap_weight``
    Default 1 (``swap1weight``).
``kl_weight``
    Default 0.15: the reference code's ``klweightZ = 0.1`` times its factor ``6/P`` on the KL, with its
    squared errors averaged over the ``P`` pixel values of images scaled to [−1, 1] (4× the squared
    errors of our [0, 1] images); our reconstruction terms are sums over pixels of [0, 1] images, so
    the same ratio to them is ``0.1 · 6 / 4``. The ratio holds for the KL's mean part; the
    reference's ``KLDCriterion`` reads its log-variance input as log σ (its ``Reparametrize`` as
    log σ²), so its pull on the variances is about 2(σ² + 1) times a true KL's, which this one is.
``adversarial_weight``
    Default 0.0025: the reference code's ``swap2weight`` 0.01 over the same 4, a weight per pixel
    value: it multiplies ``P · adversarial`` so that its ratio to the summed reconstruction terms is
    the reference code's at any image size.
``fake_content``
    ``"other_class"`` (default) or ``"prior"``: where a fake's unspecified code ``z'`` comes from (above).
``real_label``
    The real pairs' target, in (0.5, 1]; default 0.95 (the reference code's ``labelReal``; its fake
    target is 0). The generator's target too, as in the reference code.
``discriminator_hidden``
    Width of ``D``'s fully connected layers; default 256, this library's choice (the reference code's
    ``D`` has one logit after its convolutions, no hidden fully connected layer).
``discriminator_lr``, ``discriminator_betas``
    ``D``'s Adam: default ``null`` (the run's ``train.lr``) and ``[0.5, 0.999]`` (the reference code's
    ``beta1 = 0.5``). The reference code trains ``D`` with SGD at 0.01 and the autoencoder with Adam at
    0.01; here the run's optimizer and learning rate serve both.
``reconstruction``
    ``"gaussian"`` (default: the paper's squared error) or ``"bernoulli"``.

The reference code scales images to [−1, 1] (its squared errors are 4× ours on [0, 1] images, which
``kl_weight`` and ``adversarial_weight`` account for: the reconstruction weights are its values,
the other two keep its ratios to them) and uses a 32×32 network of its own.

Terms: ``loss``, ``recon``, ``swap_recon``, ``kl``, ``adversarial`` (the generator's BCE), and from
``D``'s phase ``discriminator_loss`` and ``discriminator_accuracy`` (the fraction of the ``2B`` pairs
that ``D`` classifies correctly, a logit > 0 meaning "real").
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import torch
import torch.nn.functional as F
from torch import nn

from .._core import checks, distributed
from ..data.classes import ClassBatch
from ..errors import ParameterError
from ..models.vae import reparameterize
from . import OBJECTIVES
from .base import detached, model_then_discriminator
from .class_content import ClassContentObjective
from .discriminator import frozen
from .losses import Reconstruction, check_reconstruction, kl_normal_per_dim, reconstruction_loss

if TYPE_CHECKING:  # the trainer passes it in; objectives only call its methods
    from ..training.precision import Precision

#: where the unspecified code of a fake comes from
FAKE_CONTENTS = ("other_class", "prior")


def group_partners(batch_size: int, group_size: int, device: torch.device | str | None = None) -> torch.Tensor:
    """``(batch_size,)`` int64: for each row of a group-major batch, the row of the next member of its
    group, cyclically (``[1, 0, 3, 2, …]`` for pairs; ``[1, 2, 0, 4, 5, 3, …]`` for groups of 3)."""
    if group_size < 2 or batch_size % group_size:
        raise ValueError(f"{batch_size} rows do not split into groups of {group_size} >= 2.")
    rows = torch.arange(batch_size, device=device)
    member = rows % group_size
    return rows - member + (member + 1) % group_size


def other_class_rows(labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For each of this process's rows, a row of the *whole* batch whose class differs from its own,
    uniform among them: ``(index, has_other)``, indices into the gathered batch
    (:func:`disentangle._core.distributed.gather`, the identity in one process) and whether the row
    has any (where not, its index is meaningless).

    One float32 uniform ``u`` per row of the whole batch is drawn from
    :func:`~disentangle._core.distributed.global_generator` (the trainer's step generator; torch's
    global RNG outside training), whatever the labels, so the draws are those of a single process; a
    row with ``m`` candidates takes the ``⌊u·m⌋``-th (0-based, at most ``m − 1``)."""
    everyone = distributed.gather_detached(labels)
    total = everyone.shape[0]
    mine = everyone[distributed.local_rows(total)]
    u = torch.rand(total, generator=distributed.global_generator(), device=labels.device)
    u = u[distributed.local_rows(total)]
    other = mine[:, None] != everyone[None, :]  # (b, total)
    count = other.sum(1)
    k = torch.minimum((u * count).long(), (count - 1).clamp(min=0))  # the k-th (0-based) other row
    # the k-th True of a row sits where the running count of Trues first exceeds k
    index = (other.long().cumsum(1) <= k[:, None]).sum(1).clamp(max=total - 1)
    return index, count > 0


class PairDiscriminator(nn.Module):
    """``D(a, b)``: one logit, "``b`` is a real image of ``a``'s class", from two image batches of
    shape ``image_shape`` stacked along the channels.

    64×64 images: Conv(2C→32) → Conv(32→32) → Conv(32→64) → Conv(64→64), kernel 4, stride 2,
    padding 1 (64 → 4), LeakyReLU 0.2, then FC ``hidden`` (LeakyReLU 0.2) and one logit. Any other
    size: an MLP on the flattened pair, two hidden layers of ``hidden`` (LeakyReLU 0.2), one logit.
    """

    def __init__(self, image_shape: tuple[int, ...], hidden: int = 256) -> None:
        super().__init__()
        if len(image_shape) != 3:
            raise ValueError(f"PairDiscriminator takes images (C, H, W); got image shape {tuple(image_shape)}.")
        self.image_shape = tuple(int(v) for v in image_shape)
        c, h, w = self.image_shape
        hidden = checks.positive_int("discriminator_hidden", hidden)
        act = lambda: nn.LeakyReLU(0.2)  # noqa: E731
        if (h, w) == (64, 64):
            self.kind = "conv"
            chans = (2 * c, 32, 32, 64, 64)
            layers: list[nn.Module] = []
            for a, b in zip(chans[:-1], chans[1:]):
                layers += [nn.Conv2d(a, b, 4, stride=2, padding=1), act()]
            self.net = nn.Sequential(*layers, nn.Flatten(), nn.Linear(64 * 4 * 4, hidden), act(), nn.Linear(hidden, 1))
        else:
            self.kind = "mlp"
            self.net = nn.Sequential(
                nn.Flatten(), nn.Linear(2 * c * h * w, hidden), act(), nn.Linear(hidden, hidden), act(), nn.Linear(hidden, 1)
            )

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """Logits ``(B,)`` of the pairs ``(a_i, b_i)``."""
        return self.net(torch.cat([a, b], dim=1)).squeeze(1)


def _optional_lr(value) -> float | None:
    return None if value is None else checks.positive("discriminator_lr", value)


@OBJECTIVES.register("mathieu2016")
class Mathieu2016(ClassContentObjective):
    """Mathieu et al. 2016: reconstruction, the class code swapped within a class, and a pair
    discriminator that fakes with another class's content code must fool (module docstring: codes,
    loss, discriminator, parameters, terms)."""

    def __init__(
        self,
        class_factors: list[str | int] | str | int | None = None,
        class_dim: int | None = None,
        group_size: int = 2,
        recon_weight: float = 0.5,
        swap_weight: float = 1.0,
        kl_weight: float = 0.15,
        adversarial_weight: float = 0.0025,
        fake_content: Literal["other_class", "prior"] = "other_class",
        real_label: float = 0.95,
        discriminator_hidden: int = 256,
        discriminator_lr: float | None = None,
        discriminator_betas: tuple[float, float] = (0.5, 0.999),
        reconstruction: Reconstruction = "gaussian",
    ) -> None:
        super().__init__(class_factors=class_factors, class_dim=class_dim, group_size=group_size)
        self.recon_weight = checks.non_negative("recon_weight", recon_weight)
        self.swap_weight = checks.non_negative("swap_weight", swap_weight)
        self.kl_weight = checks.non_negative("kl_weight", kl_weight)
        self.adversarial_weight = checks.non_negative("adversarial_weight", adversarial_weight)
        if self.recon_weight == 0 and self.swap_weight == 0:
            raise ParameterError(
                "recon_weight", "recon_weight and swap_weight are both 0, so nothing trains the decoder to draw "
                "images and the codes learn nothing. Keep at least one positive (the reference code's values "
                "are recon_weight: 0.5, swap_weight: 1)."
            )
        self.fake_content = checks.choice("fake_content", fake_content, FAKE_CONTENTS)
        self.real_label = checks.in_range(
            "real_label", real_label, 0.5, 1.0, low_open=True,
            hint="It is the discriminator's target for real pairs (fakes have 0): 1 is plain BCE, the reference "
            "code's 0.95 smooths it.",
        )
        self.discriminator_hidden = checks.positive_int("discriminator_hidden", discriminator_hidden)
        self.discriminator_lr = _optional_lr(discriminator_lr)
        self.discriminator_betas = checks.adam_betas("discriminator_betas", discriminator_betas)
        self.reconstruction = check_reconstruction(reconstruction)
        self.discriminator: PairDiscriminator | None = None

    # ------------------------------------------------------------------ setup
    def setup(self, *, model, dataset_size: int) -> None:
        super().setup(model=model, dataset_size=dataset_size)
        shape = tuple(int(v) for v in model.image_shape)
        if self.discriminator is None or self.discriminator.image_shape != shape:
            self.discriminator = PairDiscriminator(shape, self.discriminator_hidden)
        self.discriminator.to(next(model.parameters()).device)

    def _require_discriminator(self) -> PairDiscriminator:
        if self.discriminator is None or self.class_dim is None:
            raise RuntimeError("Mathieu2016 needs setup(model=..., dataset_size=...) before use (it builds D there).")
        return self.discriminator

    def extra_optimizers(self, model, make_optimizer) -> dict[str, torch.optim.Optimizer]:
        return {
            "discriminator": make_optimizer(
                self._require_discriminator().parameters(), lr=self.discriminator_lr,
                betas=self.discriminator_betas, weight_decay=0.0,
            )
        }

    # ------------------------------------------------------------------ losses
    def fake_codes(self, z: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The unspecified codes ``z'`` of the fakes, ``(b, D − C)``: another class's ``z`` (with its
        graph) or a prior draw (module docstring). Draws, in this order: the prior noise for every row
        (:func:`~disentangle._core.distributed.normal`), then, for ``other_class``, the choice of rows
        (:func:`other_class_rows`)."""
        prior = distributed.normal(z.shape, dtype=z.dtype, device=z.device)
        if self.fake_content == "prior":
            return prior
        index, has_other = other_class_rows(labels)
        return torch.where(has_other[:, None], distributed.gather(z)[index], prior)

    def model_terms(self, model, batch: ClassBatch) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        """The model phase's terms and the fakes ``x̂(z', s)`` (in [0, 1], with their graph)."""
        disc = self._require_discriminator()
        x = batch.x
        b = x.shape[0]
        mu, logvar = model.encode(x)
        mu, logvar = mu.float(), logvar.float()
        mu_z, s = self.split(mu)
        logvar_z, _ = self.split(logvar)
        z = reparameterize(mu_z, logvar_z)  # the unspecified code, sampled; s is the mean
        partner = group_partners(b, self.group_size, x.device)
        z_fake = self.fake_codes(z, batch.labels)
        codes = torch.cat([torch.cat([z, s], 1), torch.cat([z, s[partner]], 1), torch.cat([z_fake, s], 1)])
        own, swapped, fake_logits = model.decode(codes).split(b)  # one decoder pass for the three
        recon = reconstruction_loss(own, x, self.reconstruction)
        swap = reconstruction_loss(swapped, x, self.reconstruction)
        kl = kl_normal_per_dim(mu_z, logvar_z).sum()
        fake = torch.sigmoid(fake_logits.float())
        with frozen(disc):  # the generator's loss moves the encoder and decoder, never D
            logits = disc(x, fake).float()
        adversarial = F.binary_cross_entropy_with_logits(logits, torch.full_like(logits, self.real_label))
        pixels = x[0].numel()
        loss = (
            self.recon_weight * recon + self.swap_weight * swap + self.kl_weight * kl
            + self.adversarial_weight * pixels * adversarial
        )
        terms = {"loss": loss, "recon": recon, "swap_recon": swap, "kl": kl, "adversarial": adversarial}
        return terms, fake

    def discriminator_terms(self, x: torch.Tensor, fake: torch.Tensor) -> dict[str, torch.Tensor]:
        """``D``'s loss and accuracy on real pairs ``(x_i, x_p(i))`` and fake pairs ``(x_i, fake_i)``;
        ``fake`` is detached here, whatever the caller passes, so this loss never reaches the model."""
        disc = self._require_discriminator()
        fake = fake.detach()
        partner = group_partners(x.shape[0], self.group_size, x.device)
        real_logits = disc(x, x[partner]).float()
        fake_logits = disc(x, fake.to(x.dtype)).float()
        loss = 0.5 * (
            F.binary_cross_entropy_with_logits(real_logits, torch.full_like(real_logits, self.real_label))
            + F.binary_cross_entropy_with_logits(fake_logits, torch.zeros_like(fake_logits))
        )
        accuracy = 0.5 * ((real_logits > 0).float().mean() + (fake_logits <= 0).float().mean())
        return {"discriminator_loss": loss, "discriminator_accuracy": accuracy}

    def forward(self, model, x: ClassBatch, *, step: int) -> dict[str, torch.Tensor]:
        batch = self.check_batch(x, "mathieu2016")
        terms, fake = self.model_terms(model, batch)
        with torch.no_grad():
            d_terms = self.discriminator_terms(batch.x, fake)
        return {**terms, **detached(d_terms)}

    # ------------------------------------------------------------------ training
    def train_step(
        self,
        model,
        x: ClassBatch,
        *,
        step: int,
        optimizers: dict[str, torch.optim.Optimizer],
        precision: Precision,
    ) -> dict[str, torch.Tensor]:
        batch = self.check_batch(x, "mathieu2016")
        return model_then_discriminator(
            precision, optimizers, lambda: self.model_terms(model, batch),
            lambda fake: self.discriminator_terms(batch.x, fake),
        )
