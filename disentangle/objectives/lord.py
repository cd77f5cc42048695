"""LORD (Gabbay & Hoshen 2020): latent optimisation of a code per image and a code per class, then
encoders amortising them.

Gabbay & Hoshen, "Demystifying Inter-Class Disentanglement", ICLR 2020 (LORD: Latent Optimization
for Representation Disentanglement); reference code ``avivga/lord-pytorch`` (and the paper's Keras
code ``avivga/lord``), whose choices are quoted below.

Codes (:mod:`disentangle.objectives.class_content`): with ``D`` latent dimensions and ``C =
class_dim``, LORD's **content code** ``c_i`` (one per image) is our content code, the first ``D − C``
dimensions, and its **class embedding** ``e_y`` (one per class) is our class code, the last ``C``.
The generator is the model's decoder, ``G(c, e) = model.decode([c, e])``. One run trains two stages,
switched at step ``stage1_steps`` (0-based: steps ``0 .. stage1_steps − 1`` are stage 1):

**Stage 1, latent optimisation.** The objective owns two tables, trained by their own optimizer
(``"latent"``) together with the decoder (``"model"``; the encoder is not used):

* ``content_codes``, ``(N, D − C)``: one row per training image, indexed by the batch's
  ``ClassBatch.indices`` (the grid index on a factor grid: a grid point, whatever per-image nuisance a
  dataset renders; the index in the sample on a labelled sample); built in :meth:`LORD.setup`;
* ``class_codes``, ``(M, C)``: one row per class, indexed by ``ClassBatch.labels``; built in
  :meth:`LORD.check_dataset`, once the number of classes ``M`` is known (the trainer calls it after
  ``setup`` and before building the optimizers).

Both are initialised uniform in ``[−0.05, 0.05]`` (the reference code's embedding initialisation).
With ``ε_i ~ N(0, I)`` drawn by :func:`disentangle._core.distributed.normal` (the trainer's step
generator), ``ℓ`` the reconstruction loss summed over an image's ``P`` pixel values (channels ×
height × width) and ``B`` the batch's images::

    recon           = (1/B) Σ_i ℓ(x_i | G(c_i + σ ε_i, e_{y_i}))
    content_penalty = (1/B) Σ_i ‖c_i‖²                                 (the noiseless code)
    loss            = recon + P · λ · content_penalty

The paper's loss is ``Σ_i ℓ(G(c_i + n_i, e_{y_i}), x_i) + λ ‖c_i‖²`` with ``ℓ`` a perceptual
distance averaged over pixels and features (``lord-pytorch``: an L1 pixel term plus L1 terms of
VGG-16 features, all means); our ``recon`` is a sum over pixels, as for every objective here, so the
penalty is multiplied through by ``P`` to keep ``λ`` the paper's. The noise of scale ``σ`` and the
penalty make the content code a bottleneck that the class, already given by ``e_y``, need not pass.

**Stage 2, amortisation.** The encoder learns to give the stage-1 codes, and the decoder keeps
reconstructing from the encoder's codes (the paper's second stage trains the encoders and fine-tunes
the generator). With ``μ_i = [μ_i^c, μ_i^y]`` the posterior means of ``model.encode(x_i)`` (content,
class) and ``sg`` a stop-gradient (the tables are fixed in stage 2)::

    content_regression = (1/(B (D − C))) Σ_i ‖μ_i^c − sg c_i‖²         mean squared error
    class_regression   = (1/(B C)) Σ_i ‖μ_i^y − sg e_{y_i}‖²
    recon              = (1/B) Σ_i ℓ(x_i | G(μ_i^c, μ_i^y))
    loss               = recon + P · w · (content_regression + class_regression)

(the reference code: ``recon + 10 · MSE(content) + 10 · MSE(class)``, its ``recon`` a mean; the same
factor ``P`` again). The decoder sees the posterior means, without noise, as LORD's deterministic
encoders give; the encoder's log-variance is not trained. After training ``model.encode`` /
``model.representation`` give ``[content, class]`` like every class/content objective's, and
:func:`~disentangle.objectives.class_content.class_content_codes` splits them.

Reconstruction. The paper's ``ℓ`` is a perceptual loss on ImageNet-trained VGG-16 features, which
cannot be downloaded here: by default ``ℓ`` is a pixel loss (``reconstruction``). ``perceptual``
names an importable callable ``"module:function"`` mapping images ``(B, C, H, W)`` in [0, 1] to a
feature tensor or a list of them (e.g. a frozen VGG-16 returning the outputs of layers 2, 7, 12, 21
and 30, the reference's); then ``ℓ`` is the reference code's distance multiplied by ``P``::

    ℓ(x | logits) = P · ( mean|x̂ − x| + Σ_l mean|φ_l(x̂) − φ_l(x)| ),   x̂ = sigmoid(logits)

(means over an image's values) and ``reconstruction`` is not used. The callable's parameters are not
trained (freeze them); subclasses may override :meth:`LORD.reconstruction_term` instead.

One step (:meth:`LORD.train_step`): in stage 1, one backward pass of ``loss`` and a step of
``"model"`` (the decoder; the encoder has no gradient) and of ``"latent"`` (both tables); in stage 2, a
step of ``"model"`` (encoder and decoder) alone, the tables unchanged. The stage depends on the step
alone, and the tables are the objective's parameters (in its ``state_dict``, their optimizer state in
the checkpoint), so resuming is exact on either side of the switch.

Differences from the paper: the generator is the model's decoder fed ``[c, e]`` (the paper's feeds
``e`` through AdaIN layers); one encoder gives both codes (the paper has two); the reference code's
cosine learning-rate decay is ``train.lr_schedule: cosine``, not set by the recipes; the model's
optimizer is the run's (the reference: Adam 3e-4 for the generator, betas 0.5, 0.999; 1e-4 in stage 2).

Parameters (config keys)
------------------------
``class_factors``, ``class_dim``, ``group_size``
    The class and the split (:class:`~disentangle.objectives.class_content.ClassContentObjective`);
    ``group_size`` default 2 (LORD needs no groups; the batches are drawn as groups of one class like
    the family's).
``stage1_steps``
    Steps of latent optimisation before amortisation; default 10,000 (half of the sprites recipe's
    20,000 steps; the recipes set half of ``train.steps``). The paper trains each stage to convergence
    (reference code: 200 epochs each).
``noise_std``
    ``σ``, the content noise's standard deviation; default 1 (the paper's, both reference codes'
    ``content_std``).
``content_decay``
    ``λ``, the content penalty's weight per pixel value; default 0.001 (the paper's, the Keras code's
    ``content_decay``; ``lord-pytorch`` uses 1e-4).
``regression_weight``
    ``w``, the stage-2 regression weight per pixel value; default 10 (``lord-pytorch``; the Keras code
    weights its mean squared errors 1e4).
``latent_lr``
    The tables' learning rate; default 3e-3 (the reference codes: 10× the generator's 3e-4).
``latent_betas``
    The tables' Adam betas; default ``null``: the run's ``train.betas`` (the reference codes: 0.5, 0.999
    for every network).
``reconstruction``
    ``"bernoulli"`` (default) or ``"gaussian"`` (the squared error): the pixel loss ``ℓ`` standing in
    for the paper's perceptual loss.
``perceptual``
    ``null`` (default) or ``"module:function"``, a feature network for the reference's perceptual
    distance (above).

Terms: ``loss``, ``recon``, ``stage`` (1 or 2), and in stage 1 ``content_penalty``, in stage 2
``content_regression`` and ``class_regression``.
"""
from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from .._core import checks, distributed
from ..data.classes import ClassBatch
from ..errors import ParameterError
from . import OBJECTIVES
from .base import detached, minimize_terms
from .class_content import ClassContentObjective
from .losses import Reconstruction, check_reconstruction, reconstruction_loss

if TYPE_CHECKING:  # the trainer passes it in; objectives only call its methods
    from ..training.precision import Precision

__all__ = ["LORD", "perceptual_distance", "resolve_perceptual"]

#: the tables' initialisation, uniform in [−INIT_RANGE, INIT_RANGE] (the reference code's)
INIT_RANGE = 0.05


def resolve_perceptual(spec: str | None) -> Callable[[torch.Tensor], Any] | None:
    """The callable that ``perceptual: "module:function"`` names (``None`` for ``None``); a
    :class:`~disentangle.errors.ParameterError` if it cannot be imported or is not callable."""
    if spec is None:
        return None
    how = (
        "perceptual names a feature network as 'module:function' (an importable module and a callable in "
        "it that maps images (B, C, H, W) in [0, 1] to a feature tensor or a list of them, e.g. "
        "'mypackage.features:vgg16_features'), or is null for the pixel reconstruction."
    )
    if not isinstance(spec, str) or spec.count(":") != 1 or not all(spec.split(":")):
        raise ParameterError("perceptual", f"{how} Got {spec!r}.")
    module_name, attribute = spec.split(":")
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as err:
        raise ParameterError(
            "perceptual", f"{how} Got {spec!r}, and module {module_name!r} cannot be imported ({err}). Check "
            "the name, and that the module is on the Python path of the run."
        ) from None
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise ParameterError("perceptual", f"{how} Got {spec!r}, and {module_name!r} has no {attribute!r}.")
        target = getattr(target, part)
    if not callable(target):
        raise ParameterError("perceptual", f"{how} Got {spec!r}, which is a {type(target).__name__}, not callable.")
    return target


def _feature_list(features: Any) -> list[torch.Tensor]:
    if isinstance(features, torch.Tensor):
        return [features]
    if isinstance(features, Sequence) and features and all(isinstance(f, torch.Tensor) for f in features):
        return list(features)
    raise TypeError(
        f"the perceptual network must return a tensor or a list of tensors (batch first); it returned "
        f"{type(features).__name__}."
    )


def perceptual_distance(
    logits: torch.Tensor, x: torch.Tensor, features: Callable[[torch.Tensor], Any]
) -> torch.Tensor:
    """``P · mean_i (mean|x̂_i − x_i| + Σ_l mean|φ_l(x̂_i) − φ_l(x_i)|)`` with ``x̂ = sigmoid(logits)``,
    ``φ = features`` and ``P`` the values of one image: the reference code's perceptual distance (its
    means over an image's values and features) multiplied by ``P``, a mean over the batch."""
    if logits.shape != x.shape:
        raise ValueError(f"decoder output {tuple(logits.shape)} does not match input {tuple(x.shape)}.")
    x_hat = torch.sigmoid(logits.float())
    per_image = (x_hat - x).abs().flatten(1).mean(1)
    with torch.no_grad():
        target = _feature_list(features(x))
    for got, want in zip(_feature_list(features(x_hat)), target, strict=True):
        per_image = per_image + (got.float() - want.float()).abs().flatten(1).mean(1)
    return x[0].numel() * per_image.mean()


@OBJECTIVES.register("lord")
class LORD(ClassContentObjective):
    """LORD (Gabbay & Hoshen 2020): stage 1 optimises a content code per image and a class embedding
    per class with the decoder; stage 2 trains the encoder to give them (module docstring: codes,
    losses, parameters, terms)."""

    content_codes: nn.Parameter | None
    class_codes: nn.Parameter | None

    def __init__(
        self,
        class_factors: list[str | int] | str | int | None = None,
        class_dim: int | None = None,
        group_size: int = 2,
        stage1_steps: int = 10_000,
        noise_std: float = 1.0,
        content_decay: float = 1e-3,
        regression_weight: float = 10.0,
        latent_lr: float = 3e-3,
        latent_betas: tuple[float, float] | None = None,
        reconstruction: Reconstruction = "bernoulli",
        perceptual: str | None = None,
    ) -> None:
        super().__init__(class_factors=class_factors, class_dim=class_dim, group_size=group_size)
        self.stage1_steps = checks.integer("stage1_steps", stage1_steps, minimum=1)
        self.noise_std = checks.non_negative("noise_std", noise_std)
        self.content_decay = checks.non_negative("content_decay", content_decay)
        self.regression_weight = checks.non_negative("regression_weight", regression_weight)
        self.latent_lr = checks.positive("latent_lr", latent_lr)
        self.latent_betas = None if latent_betas is None else checks.adam_betas("latent_betas", latent_betas)
        self.reconstruction = check_reconstruction(reconstruction)
        self.perceptual = perceptual
        # not a submodule even if it is an nn.Module: neither saved, initialised nor trained with the objective
        object.__setattr__(self, "_features", resolve_perceptual(perceptual))
        self.register_parameter("content_codes", None)
        self.register_parameter("class_codes", None)

    # ------------------------------------------------------------------ setup
    @staticmethod
    def _table(rows: int, columns: int, device: torch.device) -> nn.Parameter:
        """A table initialised uniform in ``[−INIT_RANGE, INIT_RANGE]`` (drawn from torch's RNG, seeded
        by the trainer before the model is built, like every initialisation)."""
        return nn.Parameter(torch.empty(rows, columns, device=device).uniform_(-INIT_RANGE, INIT_RANGE))

    def setup(self, *, model, dataset_size: int) -> None:
        super().setup(model=model, dataset_size=dataset_size)
        device = next(model.parameters()).device
        shape = (self.dataset_size, self.latent_dim - self.class_dim)
        if self.content_codes is None or tuple(self.content_codes.shape) != shape:
            self.content_codes = self._table(*shape, device)
        else:
            self.content_codes.data = self.content_codes.data.to(device)
        if self.class_codes is not None and self.class_codes.shape[1] != self.class_dim:
            self.class_codes = None  # rebuilt by check_dataset for the new split

    def check_dataset(self, dataset) -> None:
        """Resolve the classes (:meth:`ClassContentObjective.check_dataset`) and build the class table,
        ``(num_classes, class_dim)``, keeping one of that shape (e.g. restored from a checkpoint)."""
        super().check_dataset(dataset)
        if self.content_codes is None or self.class_dim is None:
            raise RuntimeError("LORD.check_dataset needs setup(model=..., dataset_size=...) first (the trainer calls it before).")
        shape = (self.num_classes, self.class_dim)
        if self.class_codes is None or tuple(self.class_codes.shape) != shape:
            self.class_codes = self._table(*shape, self.content_codes.device)

    def _tables(self) -> tuple[nn.Parameter, nn.Parameter]:
        if self.content_codes is None or self.class_codes is None:
            raise RuntimeError(
                "LORD keeps a code per image and per class: call setup(model=..., dataset_size=...) and then "
                "check_dataset(dataset) before training (the trainer does)."
            )
        return self.content_codes, self.class_codes

    def extra_optimizers(self, model, make_optimizer) -> dict[str, torch.optim.Optimizer]:
        return {
            "latent": make_optimizer(
                list(self._tables()), lr=self.latent_lr, betas=self.latent_betas, weight_decay=0.0
            )
        }

    def stage(self, step: int) -> int:
        """1 (latent optimisation) for ``step < stage1_steps``, else 2 (amortisation)."""
        return 1 if step < self.stage1_steps else 2

    def check_steps(self, steps: int) -> None:
        """Warn when a run of ``steps`` steps (``train.steps``) ends in stage 1: the encoders, which
        ``model.encode`` and every metric use, are trained in stage 2 only. Not an error: a run may
        be resumed with more steps (``--resume train.steps=...``)."""
        if steps <= self.stage1_steps:
            logging.getLogger(__name__).warning(
                "LORD trains its encoders in its second stage, from step objective.stage1_steps = %s on, and "
                "train.steps is %s: this run ends in the first stage, with encoders as initialised, so "
                "model.encode, the metrics and the pictures would read untrained codes. Lower "
                "objective.stage1_steps (the recipes use half of train.steps) or raise train.steps, or "
                "resume with more steps before evaluating.", f"{self.stage1_steps:,}", f"{steps:,}")

    # ------------------------------------------------------------------ losses
    def reconstruction_term(self, logits: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """``recon``: the pixel loss of ``reconstruction``, or the perceptual distance when ``perceptual``
        is set (:func:`perceptual_distance`); a sum over an image's values, a mean over the batch."""
        if self._features is not None:
            return perceptual_distance(logits, x, self._features)
        return reconstruction_loss(logits, x, self.reconstruction)

    def latent_terms(self, model, batch: ClassBatch) -> dict[str, torch.Tensor]:
        """Stage 1's terms: the decoder on the tables' codes of the batch (content with noise)."""
        content_table, class_table = self._tables()
        x = batch.x
        content = content_table[batch.indices]
        code = content
        if self.noise_std > 0:
            code = content + self.noise_std * distributed.normal(content.shape, dtype=content.dtype, device=content.device)
        logits = model.decode(torch.cat([code, class_table[batch.labels]], 1))
        recon = self.reconstruction_term(logits, x)
        penalty = content.float().square().sum(1).mean()
        loss = recon + x[0].numel() * self.content_decay * penalty
        return {"loss": loss, "recon": recon, "content_penalty": penalty, "stage": loss.new_full((), 1.0)}

    def amortized_terms(self, model, batch: ClassBatch) -> dict[str, torch.Tensor]:
        """Stage 2's terms: the encoder's means regressed onto the (fixed) tables, and decoded."""
        content_table, class_table = self._tables()
        x = batch.x
        mu, _ = model.encode(x)
        content, cls = self.split(mu.float())
        content_regression = (content - content_table[batch.indices].detach()).square().mean()
        class_regression = (cls - class_table[batch.labels].detach()).square().mean()
        logits = model.decode(mu)
        recon = self.reconstruction_term(logits, x)
        loss = recon + x[0].numel() * self.regression_weight * (content_regression + class_regression)
        return {
            "loss": loss, "recon": recon, "content_regression": content_regression,
            "class_regression": class_regression, "stage": loss.new_full((), 2.0),
        }

    def forward(self, model, x: ClassBatch, *, step: int) -> dict[str, torch.Tensor]:
        batch = self.check_batch(x, "lord")
        return self.latent_terms(model, batch) if self.stage(step) == 1 else self.amortized_terms(model, batch)

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
        batch = self.check_batch(x, "lord")
        latent = optimizers["latent"]
        latent.zero_grad(set_to_none=True)
        if self.stage(step) == 1:
            # one backward: the decoder's gradients for "model", the tables' for "latent"
            terms = minimize_terms(precision, optimizers["model"], lambda: self.latent_terms(model, batch))
            precision.step(latent)
        else:
            terms = minimize_terms(precision, optimizers["model"], lambda: self.amortized_terms(model, batch))
        return detached(terms)
