"""QLAE, the quantized-latent autoencoder (``objective.name: qlae``).

Hsu, Dorrell, Whittington, Wu & Finn, "Disentanglement via Latent Quantization", NeurIPS 2023;
reference code ``kylehkhsu/latent_quantization`` (``disentangle/latents/quantized.py``,
``disentangle/models/quantized_ae.py``, ``disentangle/models/ae.py``,
``configs/model_partial/quantized_ae.yaml``).

The model is a deterministic autoencoder whose ``D``-dimensional code is quantised **per
dimension** to a learned *scalar* codebook: dimension ``j`` has its own ``V`` values
``v_j1, …, v_jV`` (``V = num_values``), the ``(D, V)`` parameter ``codebook`` that this objective
owns. With ``z = μ(x)`` the encoder's posterior means (the log-variances are not used: no sampling,
no KL),

    ẑ_j = v_{j,k_j},   k_j = argmin_k |z_j − v_jk|           (nearest value of dimension j)

The decoder reads ẑ with a straight-through gradient, ``z + sg(ẑ − z)`` (forward ẑ, backward the
identity to the encoder), and the loss of one image is

    L = recon(x | decoder(ẑ)) + P · [ λ_q · (1/D) Σ_j (sg(z_j) − ẑ_j)²       (quantization: moves the codebook)
                                      + λ_c · (1/D) Σ_j (z_j − sg(ẑ_j))² ]    (commitment: moves the encoder)

averaged over the batch, with ``recon`` summed over the image's ``P = C·H·W`` pixels (the
library's convention, :func:`~disentangle.objectives.losses.reconstruction_loss`). The reference
averages its binary cross-entropy over the pixels instead, ``BCE_mean + λ_q·q + λ_c·c``; ``L`` is
exactly ``P`` times that, so ``λ_q`` and ``λ_c`` keep the paper's values (Adam's step does not
depend on the scale of the loss). The codebook's only gradient is the quantization term's (the
reconstruction reaches the encoder through the straight-through estimator, never the values);
the encoder's are the reconstruction's and the commitment term's.

**Weight decay.** The paper's second ingredient is strong weight decay: AdamW with weight decay
0.1 (the reference's ``lambdas.l2``) on the encoder's and decoder's weights, none on their biases
or on the codebook (its ``"unregularized"`` parameter group: plain Adam). Here the recipe sets
``train.optimizer: adamw`` and ``train.weight_decay: 0.1``, which the trainer's ``"model"``
optimizer applies to the parameters :meth:`QLAE.model_parameters` names, the model's weights
(parameters of two or more dimensions); the biases (one dimension) and the codebook train with
``"unregularized"`` (:meth:`QLAE.extra_optimizers`): the run's optimizer at ``train.lr`` with
weight decay 0. Both step once per training step after one backward pass. The recipes keep the
reference's ``train.lr`` 1e-3 (the decay per step is ``lr · weight_decay``). Differences from the
reference: no gradient clipping (it clips the weights' gradients to global norm 1), the library's
``conv64`` networks (the reference uses its own image encoder and a style-modulated decoder) and
batches of 64 (the reference's 128).

Parameters (config keys)
------------------------
num_values:
    ``V``, the values per latent dimension. Default 10 (the reference's ``num_values_per_latent``,
    every dataset).
quantization_weight:
    ``λ_q``. Default 0.01 (the reference's ``lambdas.quantization`` for Shapes3D, MPI3D, Falcor3D
    and Isaac3D; its fixed dSprites parameters have 0.001).
commitment_weight:
    ``λ_c``. Default 0.01 (``lambdas.commitment``; 0.001 for dSprites as above).
codebook_range:
    ``r``: each dimension's values start evenly spaced in ``[−r, r]``
    (``torch.linspace(−r, r, V)``). Default 0.5, the reference code's
    ``jnp.linspace(-0.5, 0.5, n)``.
reconstruction:
    ``"bernoulli"`` (default; the reference's binary cross-entropy) or ``"gaussian"``.

Terms: ``loss`` (``L``), ``recon`` (summed over pixels), ``quantization_loss`` and
``commitment_loss`` (the two squared errors above, means over dimensions and images, unweighted;
equal in value, they differ in where their gradients go) and ``quantization_error`` (the mean
``|z − ẑ|``).

Representation and codes of a trained run
-----------------------------------------
``model.encode(x)`` / ``model.representation(x)`` give the **continuous** pre-quantisation code
``z = μ(x)``, which every metric reads; each quantised value ``ẑ_j`` is a monotone (non-decreasing)
step function of ``z_j`` alone, so ``z`` carries everything ``ẑ`` does, dimension by dimension.
The codebook is part of the objective's state in the run's checkpoint,
``torch.load(run / "checkpoint.pt", weights_only=True)["objective"]["codebook"]`` (``(D, V)``), which
:func:`load_codebook` reads (from a run folder, a checkpoint file or a model loaded with
:func:`disentangle.load`); :func:`quantized_codes` gives the quantised values and indices of images
and :func:`quantize` quantises any codes. The decoder was trained on ``ẑ``:
``model.decode(quantize(z, codebook).values)`` is the model's reconstruction
(``model.reconstruct`` decodes the continuous ``z``).
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import torch
from torch import nn

from .._core import checks
from . import OBJECTIVES
from .base import Objective, detached
from .losses import Reconstruction, check_reconstruction, reconstruction_loss

if TYPE_CHECKING:  # the trainer passes it in; objectives only call its methods
    from ..training.precision import Precision

__all__ = ["QLAE", "Quantized", "initial_codebook", "load_codebook", "quantize", "quantized_codes"]


def _weight(name: str, value) -> float:
    """A loss weight: a finite number >= 0."""
    return checks.non_negative(name, checks.finite(name, value))


class Quantized(NamedTuple):
    """What :func:`quantize` returns for codes ``z`` ``(B, D)``."""

    straight_through: torch.Tensor
    """``z + sg(ẑ − z)``: the values ẑ forward, the identity to ``z`` backward (the decoder's input)."""
    values: torch.Tensor
    """ẑ ``(B, D)``, the nearest codebook value of each dimension (differentiable w.r.t. the codebook)."""
    indices: torch.Tensor
    """``k`` ``(B, D)`` int64: the index in dimension j's values of each ẑ_j."""


def initial_codebook(latent_dim: int, num_values: int, codebook_range: float = 0.5) -> torch.Tensor:
    """``(latent_dim, num_values)``: each row ``linspace(−codebook_range, codebook_range, num_values)``."""
    row = torch.linspace(-codebook_range, codebook_range, num_values)
    return row.unsqueeze(0).repeat(latent_dim, 1)


def quantize(z: torch.Tensor, codebook: torch.Tensor) -> Quantized:
    """Each ``z_j`` of codes ``z`` ``(B, D)`` replaced by the nearest of its dimension's values
    ``codebook[j]`` (``codebook`` ``(D, V)``), ties to the lower index. Computed in float32."""
    if z.ndim != 2 or codebook.ndim != 2 or z.shape[1] != codebook.shape[0]:
        raise ValueError(
            f"quantize takes codes (B, D) and a codebook (D, V) of the same D; got {tuple(z.shape)} and "
            f"{tuple(codebook.shape)}."
        )
    z = z.float()
    book = codebook.float()
    indices = (z.unsqueeze(2) - book.detach().unsqueeze(0)).abs().argmin(2)
    values = torch.gather(book.unsqueeze(0).expand(z.shape[0], -1, -1), 2, indices.unsqueeze(2)).squeeze(2)
    return Quantized(z + (values - z).detach(), values, indices)


def _read_checkpoint(path: Path, map_location) -> dict[str, Any]:
    """A checkpoint file, or a run folder's newest readable one (``checkpoint.pt``, else the rotated
    ``checkpoint.prev.pt``), read pickle-free. (The objectives sit below the trainer's checkpoint module.)"""
    files = [path / "checkpoint.pt", path / "checkpoint.prev.pt"] if path.is_dir() else [path]
    problems = []
    for file in files:
        try:
            return torch.load(file, map_location=map_location, weights_only=True)
        except (OSError, RuntimeError, EOFError) as err:
            problems.append(f"{file}: {err}")
    raise ValueError("no readable checkpoint: " + "; ".join(problems))


def load_codebook(source: Any, map_location: str | torch.device = "cpu") -> torch.Tensor:
    """The ``(D, V)`` codebook of a QLAE run: ``source`` a model loaded with :func:`disentangle.load`
    (from a run folder, a checkpoint or the zoo: its ``model.objective_state["codebook"]``), a run
    folder (its newest readable checkpoint) or a checkpoint file."""
    if isinstance(source, nn.Module):
        state = getattr(source, "objective_state", None) or {}
        if "codebook" in state:
            return state["codebook"].to(map_location)
        config = getattr(source, "config", None)
        name = (config.get("objective") or {}).get("name") if isinstance(config, dict) else None
        raise ValueError(
            f"This model carries no codebook (model.objective_state has none; its config names objective "
            f"{name!r}). Load a QLAE model with disentangle.load (a run folder, checkpoint or zoo:NAME), "
            "or pass the run folder or checkpoint file itself."
        )
    path = Path(source)
    ckpt = _read_checkpoint(path, map_location)
    state = ckpt.get("objective", {})
    if "codebook" not in state:
        name = ckpt.get("config", {}).get("objective", {}).get("name")
        raise ValueError(f"'{path}' holds no codebook: it was trained by objective {name!r}, not qlae.")
    return state["codebook"]


@torch.no_grad()
def quantized_codes(model: Any, x, codebook: torch.Tensor | None = None) -> Quantized:
    """The quantised codes of images ``x`` (any number; float, uint8 or numpy, as
    :meth:`~disentangle.models.vae.VAE.representation`) by a QLAE model: ``values`` ẑ and ``indices``
    ``(n, D)``. ``codebook`` defaults to the model's run's (:func:`load_codebook`)."""
    z = model.representation(x)
    book = load_codebook(model) if codebook is None else codebook
    return quantize(z, book.to(z.device))


@OBJECTIVES.register("qlae")
class QLAE(Objective):
    """QLAE: per-dimension scalar quantisation of the encoder's means, straight-through to the
    encoder, with quantization and commitment losses (module docstring for the loss, the weight
    decay split and how to read the codes of a run)."""

    #: the codebook travels with the model (``model.objective_state``, the zoo's weight file)
    published_state = ("codebook",)

    def __init__(
        self,
        num_values: int = 10,
        quantization_weight: float = 0.01,
        commitment_weight: float = 0.01,
        codebook_range: float = 0.5,
        reconstruction: Reconstruction = "bernoulli",
    ) -> None:
        super().__init__()
        self.num_values = checks.positive_int("num_values", num_values, minimum=2)
        self.quantization_weight = _weight("quantization_weight", quantization_weight)
        self.commitment_weight = _weight("commitment_weight", commitment_weight)
        self.codebook_range = checks.positive("codebook_range", checks.finite("codebook_range", codebook_range))
        self.reconstruction = check_reconstruction(reconstruction)
        self.codebook: nn.Parameter | None
        self.register_parameter("codebook", None)

    # ------------------------------------------------------------------ setup
    def setup(self, *, model, dataset_size: int) -> None:
        """Builds the ``(model.latent_dim, num_values)`` codebook (kept when it has that shape
        already, e.g. restored from a checkpoint) on the model's device."""
        super().setup(model=model, dataset_size=dataset_size)
        device = next(model.parameters()).device
        shape = (int(model.latent_dim), self.num_values)
        if self.codebook is None or tuple(self.codebook.shape) != shape:
            self.codebook = nn.Parameter(initial_codebook(*shape, self.codebook_range).to(device))

    def _require_codebook(self) -> nn.Parameter:
        if self.codebook is None:
            raise RuntimeError(
                "QLAE needs setup(model=..., dataset_size=...) before use (it builds the codebook there)."
            )
        return self.codebook

    def model_parameters(self, model) -> Iterable[nn.Parameter]:
        """The model's weights (parameters of two or more dimensions): the trainer's ``"model"``
        optimizer, where ``train.weight_decay`` applies (the reference's ``"regularized"`` group)."""
        return [p for p in model.parameters() if p.ndim >= 2]

    def extra_optimizers(self, model, make_optimizer) -> dict[str, torch.optim.Optimizer]:
        """``"unregularized"``: the model's biases and the codebook, at ``train.lr`` without weight decay."""
        params = [p for p in model.parameters() if p.ndim < 2] + [self._require_codebook()]
        return {"unregularized": make_optimizer(params, weight_decay=0.0)}

    # ------------------------------------------------------------------ the loss
    def forward(self, model, x: torch.Tensor, *, step: int) -> dict[str, torch.Tensor]:
        mu, _ = model.encode(x)
        q = quantize(mu, self._require_codebook())
        z = mu.float()
        logits = model.decode(q.straight_through.to(mu.dtype))
        recon = reconstruction_loss(logits, x, self.reconstruction)
        quantization = (z.detach() - q.values).square().mean(1).mean()
        commitment = (z - q.values.detach()).square().mean(1).mean()
        pixels = x[0].numel()
        loss = recon + pixels * (self.quantization_weight * quantization + self.commitment_weight * commitment)
        return {
            "loss": loss,
            "recon": recon,
            "quantization_loss": quantization,
            "commitment_loss": commitment,
            "quantization_error": (z - q.values).abs().mean().detach(),
        }

    def train_step(
        self,
        model,
        x: torch.Tensor,
        *,
        step: int,
        optimizers: dict[str, torch.optim.Optimizer],
        precision: Precision,
    ) -> dict[str, torch.Tensor]:
        """One backward pass of ``loss``, then a step of ``"model"`` (weights, with weight decay)
        and of ``"unregularized"`` (biases and codebook)."""
        with precision.autocast():
            terms = self(model, x, step=step)
        steps = (optimizers["model"], optimizers["unregularized"])
        for opt in steps:
            opt.zero_grad(set_to_none=True)
        precision.backward(terms["loss"])
        for opt in steps:
            precision.step(opt)
        return detached(terms)
