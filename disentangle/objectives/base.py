"""The objective interface: what the trainer asks of every training objective.

An :class:`Objective` is an ``nn.Module`` so that any networks it owns (the FactorVAE
discriminator, the AAE critic) are saved and restored with its ``state_dict``. The trainer:

1. builds it from the config (``OBJECTIVES.build(name, **params)``),
2. calls :meth:`Objective.setup` once with the dataset size N and the model,
3. builds the model's optimizer itself (``"model"``: ``train.optimizer``, ``train.lr``, …, on the
   parameters :meth:`Objective.model_parameters` names: all of the model's by default, the
   generator's for the GANs) and asks :meth:`Objective.extra_optimizers` for the objective's own
   ones (discriminators, the AAE's generator step), giving it the run's optimizer factory,
4. once per step, draws the batch with :meth:`Objective.sample_batch` (a batch of images by
   default; pair objectives draw pairs) and calls :meth:`Objective.train_step` with it, logging the
   returned terms.

Single-loss objectives only implement :meth:`Objective.forward`. Objectives with their own
networks override :meth:`extra_optimizers` and :meth:`train_step` (see FactorVAE), writing the step
as phases of :func:`minimize_terms` (terms under autocast, one of them minimised with one
optimizer) and returning the terms :func:`detached`.

Multi-process runs (:mod:`disentangle._core.distributed`): ``train_step`` receives this process's rows
of the global batch. Every term must be a mean over these rows or a quantity of the whole batch
computed on tensors gathered with :func:`disentangle._core.distributed.gather`, and random draws go
through :func:`~disentangle.models.vae.reparameterize`,
:func:`disentangle._core.distributed.normal` or :func:`disentangle._core.distributed.global_generator`; then
the run trains the single-process objective. Step optimizers through ``precision.minimize`` or
``precision.step`` (never ``optimizer.step()`` directly): that is where gradients are averaged
over processes.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

import torch
from torch import nn

if TYPE_CHECKING:  # pragma: no cover
    from ..models.vae import VAE
    from ..training.precision import Precision


#: ``make_optimizer(params, *, lr=None, betas=None, eps=None, weight_decay=None) -> Optimizer``
OptimizerFactory = Callable[..., torch.optim.Optimizer]

Terms = dict[str, torch.Tensor]
_Out = TypeVar("_Out")


def minimize_terms(
    precision: Precision,
    optimizer: torch.optim.Optimizer,
    compute: Callable[[], _Out],
    loss: str | Callable[[_Out], torch.Tensor] = "loss",
) -> _Out:
    """One phase of a training step: ``compute()`` under ``precision.autocast()``, then
    ``precision.minimize`` of its term ``loss`` (a key of the terms ``compute`` returns, or a
    function of whatever it returns, evaluated outside autocast) with ``optimizer``. Returns what
    ``compute`` returned, graph and all. Every ``train_step`` here is one or more such phases."""
    with precision.autocast():
        out = compute()
    precision.minimize(out[loss] if isinstance(loss, str) else loss(out), optimizer)
    return out


def model_then_discriminator(
    precision: Precision,
    optimizers: dict[str, torch.optim.Optimizer],
    model_phase: Callable[[], tuple[Terms, torch.Tensor]],
    discriminator_phase: Callable[[torch.Tensor], Terms],
) -> Terms:
    """The two phases of an adversarial step whose discriminator judges something the model made:
    ``model_phase()`` returns ``(terms, made)`` and its ``terms["loss"]`` is minimised with
    ``optimizers["model"]``; then ``discriminator_phase(made.detach())`` returns terms whose
    ``"discriminator_loss"`` is minimised with ``optimizers["discriminator"]``. The detach keeps the
    discriminator's loss from reaching the model. Returns every term, detached."""
    terms, made = minimize_terms(precision, optimizers["model"], model_phase, lambda out: out[0]["loss"])
    made = made.detach()
    d_terms = minimize_terms(
        precision, optimizers["discriminator"], lambda: discriminator_phase(made), "discriminator_loss"
    )
    return detached({**terms, **d_terms})


def detached(terms: Terms) -> Terms:
    """``terms`` with every tensor detached (what a step returns for logging)."""
    return {k: v.detach() for k, v in terms.items()}


class Objective(nn.Module):
    """Base class of training objectives.

    Subclasses implement ``forward(model, x, *, step) -> dict[str, Tensor]`` returning named terms,
    one of which is ``"loss"`` (the scalar minimised w.r.t. the model's parameters). Every other
    term is logged: scalars as numbers, vectors (e.g. ``kl_per_dim``) as lists.
    """

    #: set by :meth:`setup`; the number of distinct training points (737,280 for dSprites)
    dataset_size: int | None = None
    #: names of this objective's state tensors (entries of its ``state_dict()``) that a trained
    #: model is used with, not only trained with (QLAE's ``codebook``): ``disentangle.load`` sets
    #: them on the model as ``model.objective_state`` and ``zoo publish`` stores them with the
    #: weights (:func:`published_objective_state`). Discriminators and the like stay out.
    published_state: tuple[str, ...] = ()

    @classmethod
    def validate_params(cls, **params) -> None:
        """Run every value check of the objective on config parameters (called while a config is
        validated, before anything is created): constructing an objective is cheap, and its
        ``__init__`` checks each parameter and raises ``ConfigError``. Networks are built later, in
        :meth:`setup`."""
        cls(**params)

    def setup(self, *, model: VAE, dataset_size: int) -> None:
        """Called once before training, with the true dataset size (never the batch size)."""
        if dataset_size < 1:
            raise ValueError(f"dataset_size must be positive, got {dataset_size}.")
        self.dataset_size = int(dataset_size)

    def forward(self, model: VAE, x: torch.Tensor, *, step: int) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def published_tensors(self) -> dict[str, torch.Tensor]:
        """The :attr:`published_state` entries of this objective's ``state_dict()``, detached."""
        state = self.state_dict()
        return {key: state[key].detach() for key in self.published_state if key in state}

    def sample_batch(self, dataset, batch_size: int, generator: torch.Generator):
        """The training batch of one step, passed as ``x`` to :meth:`train_step`.

        A uniform batch of ``batch_size`` images by default. Objectives that train on other
        structures (pairs of observations sharing factors) override it; everything random must come
        from ``generator`` (the run's checkpointed data generator) so that resume stays bit-exact.
        """
        return dataset.sample_batch(batch_size, generator)

    def model_parameters(self, model: VAE) -> Iterable[nn.Parameter]:
        """The parameters the trainer's ``"model"`` optimizer trains: all of the model's by default.

        An objective that trains parts of the model with optimizers of its own (InfoGAN: the
        "model" optimizer is the generator's, D and Q have ``"discriminator"`` from
        :meth:`extra_optimizers`) names the rest here.
        """
        return model.parameters()

    def extra_optimizers(self, model: VAE, make_optimizer: OptimizerFactory) -> dict[str, torch.optim.Optimizer]:
        """The objective's own optimizers by name (none by default); the trainer owns ``"model"``.

        ``make_optimizer(params, lr=None, betas=None, eps=None, weight_decay=None)`` builds the
        run's optimizer (``train.optimizer``, Adam by default, fused on CUDA) with the ``train``
        values for whatever is not given. The learning-rate schedule applies to every optimizer.
        """
        return {}

    def train_step(
        self,
        model: VAE,
        x: torch.Tensor,
        *,
        step: int,
        optimizers: dict[str, torch.optim.Optimizer],
        precision: Precision,
    ) -> dict[str, torch.Tensor]:
        """One optimisation step; returns the (detached or not) terms to log."""
        return minimize_terms(precision, optimizers["model"], lambda: self(model, x, step=step))
