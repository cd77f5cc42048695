"""M2: the semi-supervised VAE with one categorical latent tied to a labelled factor.

Kingma, Rezende, Mohamed & Welling, "Semi-Supervised Learning with Deep Generative Models",
NeurIPS 2014 (the M2 model), with the generalised estimator of Siddharth, Paige, van de Meent et al.,
"Learning Disentangled Representations with Semi-Supervised Deep Generative Models", NeurIPS 2017.

**Model.** One labelled factor (``factor``, e.g. ``shape``) with ``C`` classes is a categorical latent
``y``; the rest of the image is a continuous ``z``: ``p(x | y, z) p(y) p(z)`` with ``p(y)`` uniform and
``p(z) = N(0, I)``. The VAE's decoder takes ``latent_dim`` inputs: the first ``C`` carry ``y`` as a
one-hot code, the other ``D_z = latent_dim − C`` are ``z``, i.e. the decoder reads
``cat([onehot(y), z])``.

**Inference.** The encoder gives ``(μ, log σ²)`` of ``latent_dim`` dimensions. Its last ``D_z``
dimensions are ``q(z | x) = N(μ_z, σ_z²)``; its first ``C`` means ``μ_y`` are the classifier's
features (no prior, no KL; their log-variances are unused). The classifier is a linear head ``W``
owned by the objective, built in :meth:`M2.setup` (so that ``model.init`` initialises it like every
other layer) with ``latent_dim − 1`` outputs, the most classes M2 allows; the class logits are its first
``C`` outputs (the others are unused). It reads the encoder code::

    marginal:    q(y | x)    = softmax(W [μ_y, μ_z] + b)[:C]      (the mean code)
    importance:  q(y | z, x) = softmax(W [μ_y, z] + b)[:C],  z ~ q(z | x)

It has its own optimizer, ``"classifier"`` (the run's optimizer and learning rate), stepped on the
same backward pass as the model. The representation for the metrics stays the encoder mean ``μ``.

**Each step** draws an unlabelled batch ``x`` (``B`` images) and a labelled batch ``(x_l, y)`` of the
same size (:mod:`disentangle.data.labels`; ``y`` is column ``factor`` of the labels) and ``S =
samples`` reparameterised draws ``z_s ~ q(z | x)`` per image. With ``NLL(x | c, z)`` the decoder's
negative log-likelihood (``reconstruction``, summed over pixels), ``KL_z`` the analytic
``KL(q(z | x) ‖ N(0, I))`` summed over the ``D_z`` dimensions and ``H`` the entropy of a categorical:

``estimator: marginal`` (Kingma et al.'s M2 bounds, their eq. 6 and 7, with ``q(z | x)`` for
``q(z | x, y)``)::

    U(x)      = 1/S Σ_s Σ_c q(c | x) NLL(x | c, z_s) + β KL_z(x) + ln C − H(q(· | x))
    L(x_l, y) = 1/S Σ_s NLL(x_l | y, z_s) + ln C + β KL_z(x_l)
    supervised(x_l, y) = − log q(y | x_l)

(``ln C − H(q(y | x)) = KL(q(y | x) ‖ p(y))``: the sum over all ``C`` values of ``y`` is exact.)

``estimator: importance`` (Siddharth et al.'s generalised objective for ``q(y, z | x) = q(z | x)
q(y | z, x)``). Unlabelled: ``y`` enumerated at each sample, ``KL_z`` analytic (exact, as ``z`` does
not depend on ``y`` in ``q``)::

    U(x) = 1/S Σ_s [ Σ_c q(c | z_s, x) NLL(x | c, z_s) + ln C − H(q(· | z_s, x)) ] + β KL_z(x)

Labelled: importance weights ``w_s = q(y | z_s, x_l)``, self-normalised over the ``S`` samples of
each image, ``w̄_s = w_s / Σ_s' w_s'``, and ``q̂(y | x_l) = 1/S Σ_s w_s`` (an estimate of
``q(y | x_l) = E_q(z|x_l) q(y | z, x_l)``)::

    −L(x_l, y) = Σ_s w̄_s [ −NLL(x_l | y, z_s) − ln C + β (log p(z_s) − log q(z_s | x_l)) − log q(y | z_s, x_l) ]
                 + log q̂(y | x_l)
    supervised(x_l, y) = − log q̂(y | x_l)

so that ``−L + α · (−supervised)`` is Siddharth et al.'s ``E_q(z|x)[q(y|z,x)/q(y|x) · log
p(x, y, z) / (q(y|z,x) q(z|x))] + (1 + α) log q(y | x)``. When ``q(y | z, x)`` does not depend on
``z`` the weights are ``1/S`` and ``−L`` is the plain average of the M2 labelled bound over the
samples (with a Monte Carlo KL). With ``S = 1`` the weight is 1 (set ``samples`` above 1 for the
weights to matter).

**Loss** (every term a mean over this process's rows)::

    loss = mean_x U(x) + mean_(x_l, y) L(x_l, y) + α · mean_(x_l, y) supervised(x_l, y)

``α`` weighs the classifier's mean cross-entropy per labelled row against one row of each bound.
Kingma et al. use ``α = 0.1 · N`` with the bound *summed* over the ``N`` training points and the
classification term a *mean* over the labelled ones, i.e. ``α = 0.1`` per row here (their labelled
bound is weighted by the labelled share of the data, here by 1: labelled and unlabelled batches
have the same size). The default, ``α = 1``, weighs the classifier ten times more than that.

Parameters: ``factor`` (a labelled factor's name, or a dataset factor's index; default ``null``: the
first labelled factor with 2 to ``latent_dim − 1`` classes, i.e. ``shape`` on dSprites and sprites;
a name or index that the labels lack is a :class:`~disentangle.ConfigError`), ``alpha`` (default 1), ``beta`` (the weight of ``KL_z``; default 1),
``estimator`` (``marginal``, the default, or ``importance``), ``samples`` (``S``; default 1) and
``reconstruction`` (``bernoulli`` or ``gaussian``). The labelled factor must have at most
``latent_dim − 1`` classes (one latent dimension at least is left for ``z``). The labelled set is the
config's ``data.labels``, as for the S² objectives (:mod:`disentangle.objectives.semi_supervised`).

Terms (means over the batch, in nats; ``recon``, ``kl`` and ``elbo`` of the unlabelled batch):
``loss``; ``recon`` (the ``q(y | ·)``-weighted NLL); ``kl`` (``KL_z + KL(q(y | ·) ‖ p(y))``), with its
parts ``kl_z`` and ``kl_y``; ``elbo`` ``= −(recon + kl)`` (``−U`` at ``β = 1``); ``labelled`` (``L``, as
minimised); ``supervised``; ``classifier_accuracy`` (the arg-max of ``q(y | x_l)``, or of ``q̂``, on the
labelled batch).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal

import torch
import torch.nn.functional as F
from torch import nn

from .._core import checks
from ..data.labels import LabelledSet
from ..errors import ConfigError, ParameterError
from ..models.vae import reparameterize
from . import OBJECTIVES
from .base import Objective, OptimizerFactory
from .losses import Reconstruction, check_reconstruction
from .semi_supervised import SemiSupervised

if TYPE_CHECKING:  # pragma: no cover
    pass

EstimatorName = Literal["marginal", "importance"]
ESTIMATORS: tuple[str, ...] = ("marginal", "importance")


# ---------------------------------------------------------------------------- the pieces, by value
def categorical_entropy(log_probs: torch.Tensor) -> torch.Tensor:
    """``H = −Σ_c p_c log p_c`` over the last dimension of normalised ``log_probs``."""
    return -(log_probs.exp() * log_probs).sum(-1)


def nll_per_image(logits: torch.Tensor, x: torch.Tensor, distribution: str, image_dims: int) -> torch.Tensor:
    """The decoder NLL of :func:`~disentangle.objectives.losses.reconstruction_loss`, summed over the
    last ``image_dims`` dimensions and kept per image; ``x`` broadcasts against ``logits``."""
    logits = logits.float()
    if distribution == "bernoulli":  # BCE with logits: softplus(l) − l·x, broadcasting
        per_pixel = F.softplus(logits) - logits * x
    else:
        per_pixel = (torch.sigmoid(logits) - x).square()
    return per_pixel.sum(tuple(range(-image_dims, 0)))


def gaussian_kl_per_row(mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """``KL(N(μ, σ²) ‖ N(0, I))`` summed over the last dimension."""
    return 0.5 * (mu.square() + logvar.exp() - logvar - 1.0).sum(-1)


def log_prior_over_posterior(z: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """``log N(z; 0, I) − log N(z; μ, σ²)`` summed over the last dimension (a one-sample −KL)."""
    return -0.5 * (z.square() - (z - mu).square() * torch.exp(-logvar) - logvar).sum(-1)


def unlabelled_terms(nll: torch.Tensor, log_q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``y`` part of the unlabelled bound, per image: ``(recon, kl_y)`` with
    ``recon = 1/S Σ_s Σ_c q_sc NLL_sc`` and ``kl_y = ln C − 1/S Σ_s H(q_s)`` (``= KL(q ‖ uniform)``).

    ``nll``: ``(S, B, C)`` ``NLL(x_b | c, z_sb)``; ``log_q``: ``(S, B, C)`` or ``(1, B, C)`` the
    normalised ``log q(c | ·)`` at each sample (one row for all samples when it does not depend on z).
    """
    num_classes = nll.shape[-1]
    recon = (log_q.exp() * nll).sum(-1).mean(0)
    kl_y = math.log(num_classes) - categorical_entropy(log_q).mean(0)
    return recon, kl_y


def importance_labelled_bound(
    log_px: torch.Tensor, log_pz_qz: torch.Tensor, log_qy: torch.Tensor, num_classes: int, beta: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Siddharth et al.'s labelled bound with self-normalised importance weights, per image:
    ``(bound, log q̂(y | x))`` (module docstring).

    ``log_px``: ``(S, B)`` ``log p(x | y, z_s)``; ``log_pz_qz``: ``(S, B)`` ``log p(z_s) − log q(z_s | x)``;
    ``log_qy``: ``(S, B)`` ``log q(y | z_s, x)`` of the true class.
    """
    samples = log_qy.shape[0]
    weights = torch.softmax(log_qy, dim=0)
    log_qy_hat = torch.logsumexp(log_qy, dim=0) - math.log(samples)
    inner = log_px - math.log(num_classes) + beta * log_pz_qz - log_qy
    return (weights * inner).sum(0) + log_qy_hat, log_qy_hat


# ---------------------------------------------------------------------------- the objective
@OBJECTIVES.register("m2")
class M2(SemiSupervised, Objective):
    """M2 (Kingma et al. 2014): a categorical latent for one labelled factor, a classifier
    ``q(y | x)`` and a continuous ``z``; Kingma's marginal bound or Siddharth et al.'s
    importance-weighted estimator (:mod:`disentangle.objectives.m2`).

    Parameters
    ----------
    factor:
        The labelled factor that is ``y``: a name (``data.labels``' factor names) or a dataset factor
        index. Default ``None``: the first labelled factor with 2 to ``latent_dim − 1`` classes
        (``shape`` on dSprites and sprites).
    alpha:
        Weight of the classification term per labelled row (Kingma's ``α = 0.1·N`` is 0.1 here).
        Default 1.
    beta:
        Weight of ``KL(q(z | x) ‖ N(0, I))``. Default 1.
    estimator:
        ``marginal`` (Kingma's M2 bounds, default) or ``importance`` (Siddharth et al.).
    samples:
        Draws of ``z`` per image (the importance samples). Default 1.
    reconstruction:
        ``bernoulli`` (default) or ``gaussian``.

    Terms: ``loss``, ``recon``, ``kl``, ``kl_z``, ``kl_y``, ``elbo``, ``labelled``, ``supervised``,
    ``classifier_accuracy``.
    """

    #: the classifier trains on the same loss as the model, in the same backward pass
    joint_optimizers = ("classifier",)

    def __init__(
        self,
        factor: str | int | None = None,
        alpha: float = 1.0,
        beta: float = 1.0,
        estimator: EstimatorName = "marginal",
        samples: int = 1,
        reconstruction: Reconstruction = "bernoulli",
    ) -> None:
        super().__init__()
        self.factor = _check_factor(factor)
        self.alpha = checks.non_negative("alpha", alpha)
        self.beta = checks.non_negative("beta", beta)
        self.estimator = checks.choice("estimator", estimator, ESTIMATORS)
        self.samples = checks.positive_int("samples", samples)
        self.reconstruction = check_reconstruction(reconstruction)
        self.labelled: LabelledSet | None = None
        # labelled images drawn so far, the position in the repeated training labels: a buffer, as in
        # the S² objectives (checkpointed with the objective, never read back to the host)
        self.register_buffer("labelled_drawn", torch.zeros((), dtype=torch.int64))
        self.latent_dim: int | None = None
        self.classifier: nn.Linear | None = None
        #: set by :meth:`attach_labels`: the labels' column of ``y``, its name and its number of classes
        self.column: int | None = None
        self.factor_name: str | None = None
        self.num_classes: int | None = None

    # ------------------------------------------------------------------ set-up
    def setup(self, *, model, dataset_size: int) -> None:
        Objective.setup(self, model=model, dataset_size=dataset_size)
        self.latent_dim = int(model.latent_dim)
        if self.classifier is None:
            device = next(model.parameters()).device
            self.classifier = nn.Linear(self.latent_dim, max(self.latent_dim - 1, 1), device=device)

    def attach_labels(self, labelled: LabelledSet) -> None:
        """Use ``labelled`` (its training part) from now on; picks the column of ``factor``."""
        if self.latent_dim is None:
            raise RuntimeError("call objective.setup(model=..., dataset_size=...) before attach_labels (the trainer does).")
        column = self._column(labelled)
        classes = int(labelled.label_sizes[column])
        name = labelled.factor_names[column]
        if classes < 2:
            raise ConfigError(
                f"objective 'm2': the labelled factor '{name}' takes {classes} value; y needs 2 or more. "
                f"Choose another objective.factor."
            )
        if classes > self.latent_dim - 1:
            raise ConfigError(
                f"objective 'm2' gives the {classes} classes of factor '{name}' the first {classes} latent "
                f"dimensions (a one-hot y) and needs one more for z, but model.latent_dim is {self.latent_dim}. "
                f"Set model.latent_dim={classes + 1} or more, choose a factor with at most {self.latent_dim - 1} "
                f"classes (objective.factor), or bin it (data.labels.labeller=bin, "
                f"data.labels.num_bins={self.latent_dim - 1})."
            )
        self.labelled = labelled
        self.column, self.factor_name, self.num_classes = column, name, classes

    def _column(self, labelled: LabelledSet) -> int:
        names = list(labelled.factor_names)
        if self.factor is None:
            fitting = [j for j, n in enumerate(labelled.label_sizes) if 2 <= n <= self.latent_dim - 1]
            if not fitting:
                raise ConfigError(
                    f"objective 'm2' needs a labelled factor with 2 to model.latent_dim - 1 = {self.latent_dim - 1} "
                    f"classes for y; the labels have {dict(zip(names, labelled.label_sizes))}. Raise "
                    f"model.latent_dim or bin the labels (data.labels.labeller=bin)."
                )
            return fitting[0]
        if isinstance(self.factor, str):
            if self.factor in names:
                return names.index(self.factor)
            raise ConfigError(
                f"objective.factor is '{self.factor}', but the labels name the factors {', '.join(names)}. "
                f"Set objective.factor to one of them (or to a dataset factor index)."
            )
        if self.factor in labelled.factors:
            return list(labelled.factors).index(self.factor)
        listing = ", ".join(f"{j} ({n})" for j, n in zip(labelled.factors, names))
        raise ConfigError(
            f"objective.factor is {self.factor}, but the labels cover the dataset factors {listing}. "
            f"Set objective.factor to one of these indices or names."
        )

    def extra_optimizers(self, model, make_optimizer: OptimizerFactory) -> dict[str, torch.optim.Optimizer]:
        if self.classifier is None:
            raise RuntimeError("call objective.setup(...) before building the optimizers (the trainer does).")
        return {"classifier": make_optimizer(self.classifier.parameters())}

    def _require_ready(self) -> tuple[int, nn.Linear]:
        self._require_labels()
        assert self.num_classes is not None and self.classifier is not None
        return self.num_classes, self.classifier

    # ------------------------------------------------------------------ the loss
    def class_log_probs(self, mu: torch.Tensor, z: torch.Tensor | None = None) -> torch.Tensor:
        """``log q(y | x)`` from the mean code ``mu`` (``(..., latent_dim)``), or with ``z`` (``(..., D_z)``,
        a draw of ``q(z | x)``) ``log q(y | z, x)`` from ``[μ_y, z]``; ``(..., C)``."""
        num_classes, classifier = self._require_ready()
        features = mu if z is None else torch.cat([mu[..., :num_classes].expand(*z.shape[:-1], -1), z], -1)
        return torch.log_softmax(classifier(features)[..., :num_classes].float(), dim=-1)

    def forward(self, model, x, *, step: int) -> dict[str, torch.Tensor]:
        batch = self._check_batch(x)
        num_classes, _ = self._require_ready()
        samples, ln_c = self.samples, math.log(num_classes)
        xu, xl = batch.x, batch.labelled
        nu, nl = xu.shape[0], xl.shape[0]
        y = batch.labels[:, self.column].long()

        mu, logvar = model.encode(torch.cat([xu, xl]))
        mu, logvar = mu.float(), logvar.float()
        mu_z, logvar_z = mu[:, num_classes:], logvar[:, num_classes:]
        zu = reparameterize(mu_z[:nu].repeat(samples, 1), logvar_z[:nu].repeat(samples, 1), groups=samples)
        zl = reparameterize(mu_z[nu:].repeat(samples, 1), logvar_z[nu:].repeat(samples, 1), groups=samples)
        zu, zl = zu.view(samples, nu, -1), zl.view(samples, nl, -1)
        dz = zu.shape[-1]

        # one decoder pass: every class for each unlabelled draw, the true class for each labelled one
        eye = torch.eye(num_classes, device=mu.device, dtype=mu.dtype)
        inputs_u = torch.cat(
            [eye.expand(samples, nu, num_classes, num_classes), zu.unsqueeze(2).expand(-1, -1, num_classes, -1)], -1
        )
        inputs_l = torch.cat([eye[y].expand(samples, nl, num_classes), zl], -1)
        logits = model.decode(torch.cat([inputs_u.reshape(-1, num_classes + dz), inputs_l.reshape(-1, num_classes + dz)]))
        image_dims = xu.dim() - 1
        split = samples * nu * num_classes
        nll_u = nll_per_image(logits[:split].view(samples, nu, num_classes, *xu.shape[1:]), xu.unsqueeze(1), self.reconstruction, image_dims)
        nll_l = nll_per_image(logits[split:].view(samples, nl, *xl.shape[1:]), xl, self.reconstruction, image_dims)

        kl_z = gaussian_kl_per_row(mu_z, logvar_z)
        kl_zu, kl_zl = kl_z[:nu], kl_z[nu:]
        if self.estimator == "marginal":
            log_q = self.class_log_probs(mu)
            log_qu, log_ql = log_q[:nu].unsqueeze(0), log_q[nu:]
            recon_u, kl_y = unlabelled_terms(nll_u, log_qu)
            log_qy = log_ql.gather(-1, y.unsqueeze(-1)).squeeze(-1)
            labelled = nll_l.mean(0) + ln_c + self.beta * kl_zl
            predicted = log_ql.argmax(-1)
        else:
            log_qu = self.class_log_probs(mu[:nu], zu)  # (S, B, C)
            log_ql = self.class_log_probs(mu[nu:], zl)
            recon_u, kl_y = unlabelled_terms(nll_u, log_qu)
            log_qy_s = log_ql.gather(-1, y.view(1, nl, 1).expand(samples, -1, -1)).squeeze(-1)  # (S, B)
            log_pz_qz = log_prior_over_posterior(zl, mu_z[nu:], logvar_z[nu:])
            bound, log_qy = importance_labelled_bound(-nll_l, log_pz_qz, log_qy_s, num_classes, self.beta)
            labelled = -bound
            predicted = torch.logsumexp(log_ql, dim=0).argmax(-1)

        supervised = -log_qy.mean()
        recon, kl_zm, kl_ym = recon_u.mean(), kl_zu.mean(), kl_y.mean()
        kl = kl_zm + kl_ym
        unlabelled = (recon_u + self.beta * kl_zu + kl_y).mean()
        labelled = labelled.mean()
        return {
            "loss": unlabelled + labelled + self.alpha * supervised,
            "recon": recon,
            "kl": kl,
            "kl_z": kl_zm,
            "kl_y": kl_ym,
            "elbo": -(recon + kl),
            "labelled": labelled,
            "supervised": supervised,
            "classifier_accuracy": (predicted == y).float().mean(),
        }


def _check_factor(factor: str | int | None) -> str | int | None:
    if factor is None:
        return None
    if isinstance(factor, str) and factor:
        return factor
    if isinstance(factor, int) and not isinstance(factor, bool) and factor >= 0:
        return int(factor)
    raise ParameterError(
        "factor", f"factor must be a labelled factor's name (e.g. 'shape') or a dataset factor index (>= 0), got {factor!r}."
    )

