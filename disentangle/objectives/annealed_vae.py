"""AnnealedVAE (Burgess et al. 2017): a KL target ("capacity") raised linearly during training."""
from __future__ import annotations

import torch

from .._core import checks, distributed
from .._core.schedules import Schedule
from . import OBJECTIVES
from .base import Objective
from .losses import Reconstruction, check_reconstruction, kl_normal_per_dim, reconstruction_loss


def capacity_schedule(c_max: float, iteration_threshold: int) -> Schedule:
    """The capacity as a ``train.schedules`` schedule: ``linear`` from 0 to ``c_max`` over
    ``iteration_threshold`` steps (:mod:`disentangle._core.schedules`), the same values to the bit."""
    return Schedule.from_dict(
        "objective.capacity", {"kind": "linear", "start": 0.0, "end": c_max, "steps": iteration_threshold}
    )


def linear_capacity(step: int, c_max: float, iteration_threshold: int) -> float:
    """``C(step) = c_max · min(1, step / iteration_threshold)`` (nats); 0 at step 0."""
    return capacity_schedule(c_max, iteration_threshold).value(max(int(step), 0))


@OBJECTIVES.register("annealed_vae")
class AnnealedVAE(Objective):
    """AnnealedVAE: ``recon + γ · |KL − C(step)|``.

    Burgess et al., "Understanding disentangling in β-VAE", NIPS 2017 workshop (arXiv:1804.03599),
    eq. 8. The capacity ``C`` grows linearly from 0 to ``c_max`` nats over ``iteration_threshold``
    training steps and then stays at ``c_max``. It is a pure function of the ``step`` the trainer
    passes (the number of optimisation steps done), so evaluation passes and resumed runs cannot
    advance it, and it is per step, not per epoch.

    Parameters
    ----------
    c_max:
        Final capacity in nats. Default 25 (Burgess et al.'s dSprites value; Locatello et al.
        sweep 5, 10, 25, 50, 75, 100).
    gamma:
        Weight of ``|KL − C|``. Default 1000 (Burgess et al.; Locatello et al.).
    iteration_threshold:
        Steps over which ``C`` rises to ``c_max``. Default 100000 (Locatello et al.).
    reconstruction:
        ``"bernoulli"`` (default) or ``"gaussian"``.

    Terms: ``loss``, ``recon``, ``kl``, ``kl_per_dim``, ``capacity`` (C at this step),
    ``elbo`` (= −(recon + kl)). There is no β: the KL enters only through ``γ·|KL − C|``.
    """

    def __init__(
        self,
        c_max: float = 25.0,
        gamma: float = 1000.0,
        iteration_threshold: int = 100000,
        reconstruction: Reconstruction = "bernoulli",
    ) -> None:
        super().__init__()
        self.c_max = checks.non_negative("c_max", c_max)
        self.gamma = checks.non_negative("gamma", gamma)
        self.iteration_threshold = checks.positive_int("iteration_threshold", iteration_threshold)
        self.reconstruction = check_reconstruction(reconstruction)

    def capacity(self, step: int) -> float:
        """The KL target C (nats) at training step ``step``."""
        # built from the attributes at each step, so that train.schedules may schedule c_max too
        return capacity_schedule(self.c_max, self.iteration_threshold).value(step)

    def forward(self, model, x: torch.Tensor, *, step: int) -> dict[str, torch.Tensor]:
        out = model(x)
        recon = reconstruction_loss(out.logits, x, self.reconstruction)
        kl_per_dim = kl_normal_per_dim(out.mu, out.logvar)
        kl = kl_per_dim.sum()
        # |KL − C| is not linear in the KL: it is the batch's KL that must meet C, so under torchrun
        # it is the global batch's (the mean of |KL_rank − C| over ranks differs once C is reached)
        global_kl = kl_normal_per_dim(distributed.gather(out.mu), distributed.gather(out.logvar)).sum()
        # a fill on the device (torch.tensor(float, device=...) would copy from the host each step)
        capacity = kl.new_full((), self.capacity(step))
        return {
            "loss": recon + self.gamma * (global_kl - capacity).abs(),
            "recon": recon,
            "kl": kl,
            "kl_per_dim": kl_per_dim,
            "capacity": capacity,
            "elbo": -(recon + kl),
        }
