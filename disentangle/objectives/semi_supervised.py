"""Semi-supervised VAEs (S²VAEs): an unsupervised objective plus a supervised regulariser on a few labels.

Locatello, Tschannen, Bauer, Rätsch, Schölkopf & Bachem, "Disentangling Factors of Variation Using
Few Labels", ICLR 2020, eq. 2; the reference is disentanglement_lib's
``methods/semi_supervised/semi_supervised_vae.py``. Each step draws an unlabelled batch ``x`` (the
unsupervised objective's own batch) and a labelled batch ``(x_l, y)`` of the same size
(:mod:`disentangle.data.labels`), and minimises::

    loss = recon(x) + R_u(x) + γ_sup(t) · R_s(μ(x_l), y)

``recon + R_u`` is exactly the loss of the unsupervised twin (``s2_beta_vae`` ↔ ``beta_vae`` and
so on, with all of its parameters), ``R_s`` one of the regularisers of
:mod:`disentangle.objectives.supervised` (``supervised_loss``: ``xent``, ``l2``, ``cov``,
``embed``) on the encoder means of the labelled images, and ``γ_sup(t)`` its weight under
``supervised_schedule`` (``fixed``, ``anneal``, ``fine_tune``, over ``schedule_steps``). Latent
dimension ``j`` is tied to labelled factor ``j``, so ``model.latent_dim`` must be at least the number
of labelled factors.

==================  ============================  ================================================
objective           unsupervised twin             disentanglement_lib
==================  ============================  ================================================
``s2_beta_vae``     ``beta_vae``                  ``s2_vae``
``s2_factor_vae``   ``factor_vae`` (its D step)   ``s2_factor_vae``
``s2_beta_tcvae``   ``beta_tcvae``                ``s2_beta_tc_vae``
``s2_dip_vae_i``    ``dip_vae_i``                 ``s2_dip_vae`` with ``dip_type = "i"``
``s2_dip_vae_ii``   ``dip_vae_ii``                ``s2_dip_vae`` with ``dip_type = "ii"``
==================  ============================  ================================================

The labelled set is the config's ``data.labels`` (1,000 perfect labels, 90 % for training, seed 0
unless it says otherwise): the trainer draws it and hands it over with :meth:`attach_labels` before
the optimizers are built. Learned parameters of ``R_s`` (``l2``'s scale, ``embed``'s embeddings)
get an optimizer of their own named ``"supervised"``, with the run's optimizer and learning rate,
stepped on the same loss. The reference trains them with the VAE's optimizer, except in
``s2_factor_vae``, whose VAE step minimises over the encoder's and decoder's variables only, so
there ``l2``'s scale stays 1 and ``embed``'s embeddings stay at their initial values: here they
train in every S² objective (a deviation). ``s2_beta_tcvae``'s unsupervised part is this library's
``beta_tcvae`` (its default ``mss`` total-correlation estimator and sampled KL), where the
reference adds ``(β − 1)`` times a minibatch-weighted TC to the analytic KL.

Supervision parameters (config keys of every S² objective): ``gamma_sup`` (default 4; Locatello
et al. 2020 sweep it), ``supervised_loss`` (default ``xent``), ``supervised_schedule`` (default
``fixed``), ``schedule_steps`` (the reference's ``iteration_threshold``; default 10,000),
``embed_sigma`` (``embed``'s temperature, a number or ``learn``; default 1) and ``embed_use_order``
(default false).

Terms: those of the unsupervised twin (``loss`` includes the supervised term), ``supervised`` (R_s,
unweighted) and ``gamma_sup`` (its weight at this step).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from .._core import checks
from .._core.registry import did_you_mean
from ..data.base import current_sampling_shard
from ..data.labels import LabelledBatch, LabelledSet
from ..errors import ConfigError
from . import OBJECTIVES
from .base import OptimizerFactory, detached
from .beta_tcvae import BetaTCVAE
from .beta_vae import BetaVAE
from .dip_vae import DIPVAEI, DIPVAEII
from .factor_vae import FactorVAE
from .losses import Reconstruction
from .supervised import SCHEDULES, ScheduleName, SupervisedLossName, SupervisedRegularizer, supervised_weight

if TYPE_CHECKING:  # pragma: no cover
    from ..training.precision import Precision


class SemiSupervised:
    """Mixin of the S² objectives, placed before the unsupervised twin in the bases."""

    #: the trainer draws ``data.labels`` and calls :meth:`attach_labels` for objectives that set this
    uses_labels = True
    #: the objective's own optimizers stepped on the model's loss, where it has them (R_s's parameters)
    joint_optimizers: tuple[str, ...] = ("supervised",)

    def _init_supervision(
        self,
        gamma_sup: float,
        supervised_loss: str,
        supervised_schedule: str,
        schedule_steps: int,
        embed_sigma: float | str,
        embed_use_order: bool,
    ) -> None:
        self.gamma_sup = checks.non_negative("gamma_sup", gamma_sup)
        self.supervised_schedule = checks.choice("supervised_schedule", supervised_schedule, SCHEDULES)
        self.schedule_steps = checks.positive_int("schedule_steps", schedule_steps)
        self.regularizer = SupervisedRegularizer(supervised_loss, embed_sigma, embed_use_order)
        self.supervised_loss = supervised_loss
        self.labelled: LabelledSet | None = None
        # labelled images drawn so far, the position in the repeated training labels: a buffer, so
        # it is checkpointed with the objective and the batch indices never leave the device
        self.register_buffer("labelled_drawn", torch.zeros((), dtype=torch.int64))

    # ------------------------------------------------------------------ the labels
    def attach_labels(self, labelled: LabelledSet) -> None:
        """Use ``labelled`` (its training part) from now on; builds R_s's parameters."""
        latent_dim = getattr(self, "latent_dim", None)
        num = len(labelled.label_sizes)
        if latent_dim is not None and num > latent_dim:
            name = getattr(self, "registry_name", type(self).__name__)
            raise ConfigError(
                f"objective '{name}' ties latent dimension j to labelled factor j, so it needs "
                f"model.latent_dim >= the number of labelled factors; the labels name {num} factors "
                f"{labelled.factor_names} but model.latent_dim is {latent_dim}. Set model.latent_dim={num} "
                f"or more, or label fewer factors (data.labels.labeller=partial)."
            )
        if labelled.num_train < 1:
            raise ConfigError(
                f"objective '{getattr(self, 'registry_name', type(self).__name__)}' trains on labelled images, "
                f"but data.labels keeps none for training (num_labelled={labelled.spec.num_labelled}, "
                f"train_fraction={labelled.spec.train_fraction}). Raise data.labels.train_fraction (0.9 is the "
                f"paper's) or num_labelled."
            )
        self.labelled = labelled
        self.regularizer.build(labelled.label_sizes)

    def _require_labels(self) -> LabelledSet:
        if self.labelled is None:
            name = getattr(self, "registry_name", type(self).__name__)
            raise RuntimeError(
                f"objective '{name}' trains on a few labels: call objective.attach_labels("
                f"make_labelled_set(dataset, LabelsSpec(...))) first (the trainer does, from data.labels)."
            )
        return self.labelled

    def sample_batch(self, dataset, batch_size: int, generator: torch.Generator) -> LabelledBatch:
        """The twin's unlabelled batch and the next ``batch_size`` training labels (in order,
        wrapping around). In a multi-process run, this process's rows of both."""
        labelled = self._require_labels()
        x = super().sample_batch(dataset, batch_size, generator)
        images, labels = labelled.batch(self.labelled_drawn, batch_size)
        self.labelled_drawn.add_(batch_size)
        shard = current_sampling_shard()
        if shard is not None and x.shape[0] != batch_size:  # the sampler rendered this rank's rows only
            images, labels = shard.rows(images), shard.rows(labels)
        return LabelledBatch(x, images.to(x.device), labels.to(x.device))

    def extra_optimizers(self, model, make_optimizer: OptimizerFactory) -> dict[str, torch.optim.Optimizer]:
        optimizers = super().extra_optimizers(model, make_optimizer)
        params = list(self.regularizer.parameters())
        if params:
            optimizers["supervised"] = make_optimizer(params)
        return optimizers

    # ------------------------------------------------------------------ the loss
    def supervised_terms(self, model, batch: LabelledBatch, step: int) -> dict[str, torch.Tensor]:
        """``supervised`` (R_s on the labelled batch's encoder means) and ``gamma_sup`` (γ_sup(t))."""
        self._require_labels()
        mu, _ = model.encode(batch.labelled)
        value = self.regularizer(mu, batch.labels)
        gamma = supervised_weight(self.gamma_sup, step, self.supervised_schedule, self.schedule_steps)
        return {"supervised": value, "gamma_sup": torch.full((), gamma, device=value.device)}

    @staticmethod
    def _check_batch(x) -> LabelledBatch:
        if not isinstance(x, LabelledBatch):
            raise TypeError(
                f"semi-supervised objectives train on a LabelledBatch (unlabelled images, labelled images, "
                f"labels) from their sample_batch(dataset, batch_size, generator), not {type(x).__name__} "
                f"(the trainer does this)."
            )
        return x

    def forward(self, model, x, *, step: int) -> dict[str, torch.Tensor]:
        batch = self._check_batch(x)
        terms = super().forward(model, batch.x, step=step)
        sup = self.supervised_terms(model, batch, step)
        return self._with_supervision(terms, sup, step)

    def _with_supervision(self, terms: dict, sup: dict, step: int) -> dict[str, torch.Tensor]:
        """The twin's terms with ``γ_sup(t) · R_s`` added to ``loss`` (γ a Python number: no copy)."""
        gamma = supervised_weight(self.gamma_sup, step, self.supervised_schedule, self.schedule_steps)
        return {**terms, **sup, "loss": terms["loss"] + gamma * sup["supervised"]}

    def _minimize(self, precision: Precision, optimizers: dict, loss: torch.Tensor) -> None:
        """Back-propagate ``loss`` once and step the model's optimizer and those of
        :attr:`joint_optimizers` that the objective has on it."""
        chosen = [optimizers["model"]] + [optimizers[name] for name in self.joint_optimizers if name in optimizers]
        for optimizer in chosen:
            optimizer.zero_grad(set_to_none=True)
        precision.backward(loss)
        for optimizer in chosen:
            precision.step(optimizer)

    def train_step(self, model, x, *, step: int, optimizers: dict, precision: Precision) -> dict[str, torch.Tensor]:
        with precision.autocast():
            terms = self(model, x, step=step)
        self._minimize(precision, optimizers, terms["loss"])
        return detached(terms)

    def setup(self, *, model, dataset_size: int) -> None:
        super().setup(model=model, dataset_size=dataset_size)
        self.latent_dim = int(model.latent_dim)


def _supervision_doc(twin: str) -> str:
    return (
        f"the unsupervised ``{twin}`` loss plus ``γ_sup(t) · R_s(μ(x_l), y)`` on a labelled batch; "
        f"parameters: those of ``{twin}`` and the supervision parameters of "
        f":mod:`disentangle.objectives.semi_supervised`."
    )


@OBJECTIVES.register("s2_beta_vae")
class S2BetaVAE(SemiSupervised, BetaVAE):
    """S²β-VAE: ``recon + β · KL + γ_sup(t) · R_s`` (disentanglement_lib's ``s2_vae``).

    Parameters: ``beta`` and ``reconstruction`` of :class:`~disentangle.objectives.beta_vae.BetaVAE`,
    and the supervision parameters of :mod:`disentangle.objectives.semi_supervised`.
    """

    def __init__(
        self,
        beta: float = 1.0,
        reconstruction: Reconstruction = "bernoulli",
        gamma_sup: float = 4.0,
        supervised_loss: SupervisedLossName = "xent",
        supervised_schedule: ScheduleName = "fixed",
        schedule_steps: int = 10_000,
        embed_sigma: float | str = 1.0,
        embed_use_order: bool = False,
    ) -> None:
        BetaVAE.__init__(self, beta=beta, reconstruction=reconstruction)
        self._init_supervision(gamma_sup, supervised_loss, supervised_schedule, schedule_steps, embed_sigma, embed_use_order)


@OBJECTIVES.register("s2_beta_tcvae")
class S2BetaTCVAE(SemiSupervised, BetaTCVAE):
    """S²β-TCVAE: the β-TCVAE loss ``+ γ_sup(t) · R_s`` (disentanglement_lib's ``s2_beta_tc_vae``).

    Parameters: those of :class:`~disentangle.objectives.beta_tcvae.BetaTCVAE` and the supervision
    parameters of :mod:`disentangle.objectives.semi_supervised`.
    """

    def __init__(
        self,
        beta: float = 6.0,
        alpha: float = 1.0,
        gamma: float = 1.0,
        estimator: str = "mss",
        reconstruction: Reconstruction = "bernoulli",
        gamma_sup: float = 4.0,
        supervised_loss: SupervisedLossName = "xent",
        supervised_schedule: ScheduleName = "fixed",
        schedule_steps: int = 10_000,
        embed_sigma: float | str = 1.0,
        embed_use_order: bool = False,
    ) -> None:
        BetaTCVAE.__init__(self, beta=beta, alpha=alpha, gamma=gamma, estimator=estimator, reconstruction=reconstruction)
        self._init_supervision(gamma_sup, supervised_loss, supervised_schedule, schedule_steps, embed_sigma, embed_use_order)


@OBJECTIVES.register("s2_dip_vae_i")
class S2DIPVAEI(SemiSupervised, DIPVAEI):
    """S²DIP-VAE-I: the DIP-VAE-I loss ``+ γ_sup(t) · R_s`` (disentanglement_lib's ``s2_dip_vae``, type i).

    Parameters: those of :class:`~disentangle.objectives.dip_vae.DIPVAEI` and the supervision
    parameters of :mod:`disentangle.objectives.semi_supervised`.
    """

    def __init__(
        self,
        lambda_od: float = 10.0,
        lambda_d: float | None = None,
        reconstruction: Reconstruction = "bernoulli",
        gamma_sup: float = 4.0,
        supervised_loss: SupervisedLossName = "xent",
        supervised_schedule: ScheduleName = "fixed",
        schedule_steps: int = 10_000,
        embed_sigma: float | str = 1.0,
        embed_use_order: bool = False,
    ) -> None:
        DIPVAEI.__init__(self, lambda_od=lambda_od, lambda_d=lambda_d, reconstruction=reconstruction)
        self._init_supervision(gamma_sup, supervised_loss, supervised_schedule, schedule_steps, embed_sigma, embed_use_order)


@OBJECTIVES.register("s2_dip_vae_ii")
class S2DIPVAEII(SemiSupervised, DIPVAEII):
    """S²DIP-VAE-II: the DIP-VAE-II loss ``+ γ_sup(t) · R_s`` (disentanglement_lib's ``s2_dip_vae``, type ii).

    Parameters: those of :class:`~disentangle.objectives.dip_vae.DIPVAEII` and the supervision
    parameters of :mod:`disentangle.objectives.semi_supervised`.
    """

    def __init__(
        self,
        lambda_od: float = 10.0,
        lambda_d: float | None = None,
        reconstruction: Reconstruction = "bernoulli",
        gamma_sup: float = 4.0,
        supervised_loss: SupervisedLossName = "xent",
        supervised_schedule: ScheduleName = "fixed",
        schedule_steps: int = 10_000,
        embed_sigma: float | str = 1.0,
        embed_use_order: bool = False,
    ) -> None:
        DIPVAEII.__init__(self, lambda_od=lambda_od, lambda_d=lambda_d, reconstruction=reconstruction)
        self._init_supervision(gamma_sup, supervised_loss, supervised_schedule, schedule_steps, embed_sigma, embed_use_order)


@OBJECTIVES.register("s2_factor_vae")
class S2FactorVAE(SemiSupervised, FactorVAE):
    """S²FactorVAE: ``recon + KL + γ · TC + γ_sup(t) · R_s`` with FactorVAE's discriminator step
    unchanged (disentanglement_lib's ``s2_factor_vae``).

    One step: the VAE phase minimises the loss above (optimizers ``"model"`` and, for ``l2`` and
    ``embed``, ``"supervised"``), then the discriminator phase of
    :class:`~disentangle.objectives.factor_vae.FactorVAE` on the unlabelled codes. As in
    FactorVAE, the reference passes its global step to both optimizers, so it advances twice per
    iteration: its 300,000 steps were 150,000 updates of each network, and its annealed
    ``supervised_schedule`` (which reads that step) ramps over ``schedule_steps / 2`` iterations;
    here a step is one iteration throughout.

    Parameters: those of :class:`~disentangle.objectives.factor_vae.FactorVAE` and the supervision
    parameters of :mod:`disentangle.objectives.semi_supervised`.
    """

    def __init__(
        self,
        gamma: float = 30.0,
        discriminator_lr: float = 1e-4,
        discriminator_betas: tuple[float, float] = (0.5, 0.9),
        discriminator_hidden: int = 1000,
        discriminator_layers: int = 6,
        reconstruction: Reconstruction = "bernoulli",
        gamma_sup: float = 4.0,
        supervised_loss: SupervisedLossName = "xent",
        supervised_schedule: ScheduleName = "fixed",
        schedule_steps: int = 10_000,
        embed_sigma: float | str = 1.0,
        embed_use_order: bool = False,
    ) -> None:
        FactorVAE.__init__(
            self, gamma=gamma, discriminator_lr=discriminator_lr, discriminator_betas=discriminator_betas,
            discriminator_hidden=discriminator_hidden, discriminator_layers=discriminator_layers,
            reconstruction=reconstruction,
        )
        self._init_supervision(gamma_sup, supervised_loss, supervised_schedule, schedule_steps, embed_sigma, embed_use_order)

    def forward(self, model, x, *, step: int) -> dict[str, torch.Tensor]:
        batch = self._check_batch(x)
        terms, z = self._vae_phase_terms(model, batch, step)
        with torch.no_grad():
            d_terms = self.discriminator_terms(z)
        return {**terms, **detached(d_terms)}

    def _vae_phase_terms(self, model, batch: LabelledBatch, step: int) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        terms, z = self.vae_terms(model, batch.x)
        sup = self.supervised_terms(model, batch, step)
        return self._with_supervision(terms, sup, step), z

    def train_step(self, model, x, *, step: int, optimizers: dict, precision: Precision) -> dict[str, torch.Tensor]:
        batch = self._check_batch(x)
        with precision.autocast():
            terms, z = self._vae_phase_terms(model, batch, step)
        self._minimize(precision, optimizers, terms["loss"])
        terms.update(self.discriminator_step(z.detach(), optimizers["discriminator"], precision))
        return detached(terms)


#: the semi-supervised objectives and their unsupervised twins
S2_TWINS: dict[str, str] = {
    "s2_beta_vae": "beta_vae",
    "s2_factor_vae": "factor_vae",
    "s2_beta_tcvae": "beta_tcvae",
    "s2_dip_vae_i": "dip_vae_i",
    "s2_dip_vae_ii": "dip_vae_ii",
}


def twin_of(name: str) -> str:
    """The unsupervised twin of the S² objective ``name``."""
    if name not in S2_TWINS:
        raise ConfigError(f"'{name}' is not a semi-supervised objective.{did_you_mean(name, list(S2_TWINS))}")
    return S2_TWINS[name]
