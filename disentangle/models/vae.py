"""The VAE model: an encoder/decoder pair from a backbone, with the user-facing API.

* ``model.encode(x) -> (mu, logvar)``: the diagonal Gaussian posterior ``q(z|x)``.
* ``model.decode(z) -> logits``: decoder **logits**; the image mean is ``sigmoid(logits)``
  (``model.decode_mean``), for both Bernoulli and Gaussian reconstruction.
* ``model.representation(x) -> mu``: the posterior means, as used by the metrics; accepts any
  batch size (it is evaluated in chunks, without gradients), numpy arrays and uint8 images.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch
from torch import nn

from .._core import distributed
from .._core.hardware import autocast_enabled
from ..backbones import BACKBONES
from ..backbones.init import DEFAULT_INIT, initialize
from ..errors import InputError


def reparameterize(
    mu: torch.Tensor, logvar: torch.Tensor, generator: torch.Generator | None = None, *, groups: int = 1
) -> torch.Tensor:
    """A sample ``z = μ + σ ε`` with ``ε ~ N(0, I)``, differentiable in μ and log σ².

    ``ε`` comes from ``generator`` when given; otherwise from the trainer's per-step generator
    (:func:`disentangle._core.distributed.normal`: drawn for the global batch, this process's rows kept,
    so a multi-process run gets the single-process noise), or torch's global RNG outside training.
    ``groups``: the rows are that many equal blocks of the batch (2 for the two elements of pairs).
    """
    if generator is not None:
        eps = torch.randn(mu.shape, dtype=mu.dtype, device=mu.device, generator=generator)
    else:
        eps = distributed.normal(mu.shape, groups=groups, dtype=mu.dtype, device=mu.device)
    return mu + torch.exp(0.5 * logvar) * eps


class VAEOutput(NamedTuple):
    """What ``model(x)`` returns: the posterior, one reparameterised sample of it, and the decoder
    logits of that sample."""

    mu: torch.Tensor
    """Posterior means ``(B, latent_dim)``."""
    logvar: torch.Tensor
    """Posterior log-variances ``(B, latent_dim)``."""
    z: torch.Tensor
    """A sample ``mu + exp(logvar / 2) * eps`` ``(B, latent_dim)``."""
    logits: torch.Tensor
    """Decoder logits of ``z``, ``(B, C, H, W)``."""


class VAE(nn.Module):
    """Gaussian-encoder VAE built from a registered backbone."""

    def __init__(self, encoder: nn.Module, decoder: nn.Module, latent_dim: int, image_shape: tuple[int, ...]) -> None:
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.latent_dim = int(latent_dim)
        self.image_shape = tuple(int(v) for v in image_shape)
        #: the run's resolved config (nested dict) when loaded with :func:`disentangle.load`
        self.config: dict[str, Any] | None = None
        #: ``model.init``, the scheme the layers were initialised by (:meth:`from_backbone`); an
        #: objective that re-initialises a network of its own mid-run draws it by the same scheme
        self.init_scheme: str = DEFAULT_INIT

    @classmethod
    def from_backbone(
        cls, backbone: str, *, image_shape: tuple[int, ...], latent_dim: int, init: str = DEFAULT_INIT, **params: Any
    ) -> VAE:
        """A VAE from a registered backbone (``model.backbone``) and its parameters, its layers
        initialised by ``init`` (``model.init``: ``reference``, disentanglement_lib's Glorot-uniform
        weights and zero biases, or ``pytorch``; :mod:`disentangle.backbones.init`)."""
        encoder, decoder = BACKBONES.build(backbone, image_shape=tuple(image_shape), latent_dim=latent_dim, **params)
        model = cls(encoder, decoder, latent_dim, image_shape)
        model.init_scheme = init
        return initialize(model, init)

    @classmethod
    def for_weights(cls, model_section: dict[str, Any], image_shape: tuple[int, ...]) -> VAE:
        """The VAE that a saved config's ``model`` section describes, to load trained weights into:
        its layers are left as constructed (``model.init`` only matters for training)."""
        params = dict(model_section)
        backbone, latent_dim = params.pop("backbone"), params.pop("latent_dim")
        params.pop("init", None)
        return cls.from_backbone(backbone, image_shape=tuple(image_shape), latent_dim=latent_dim, init="pytorch", **params)

    @property
    def num_categories(self) -> int:
        """K: the last K codes are one categorical code (the ``infogan_categorical`` backbone's, for
        Elastic-InfoGAN: ``encode`` gives its probabilities, ``decode`` takes a point of the simplex,
        a one-hot for a category); 0 for every other model."""
        return int(getattr(self.encoder, "num_categories", 0) or 0)

    @property
    def device(self) -> torch.device:
        """The device of the model's parameters."""
        return next(self.parameters()).device

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Posterior mean and log-variance, each ``(B, latent_dim)``, of a float batch
        ``(B, C, H, W)`` in [0, 1] of the model's image shape and of its weights' dtype (float32
        unless the model was converted; any float dtype under ``torch.autocast``, float64 excepted).

        Checked from the shape and dtype alone, so training reads nothing back from the device: a
        batch of another dtype (numpy's float64, which ``torch.from_numpy`` keeps), a channels-last
        batch ``(B, H, W, C)``, a single image or another channel count raises one
        :class:`~disentangle.errors.InputError` paragraph that names what was given, what the model
        takes and the fix (``x.float()``, ``x.permute(0, 3, 1, 2)``, ``x.unsqueeze(0)``).
        """
        self._check_batch(x)
        return self.encoder(x)

    def _weights_dtype(self) -> torch.dtype | None:
        """The dtype of the model's floating-point weights (float32 unless converted); None without any."""
        for parameter in self.parameters():
            if parameter.is_floating_point():
                return parameter.dtype
        return None

    def _dtype_problem(self, x: torch.Tensor, what: str) -> tuple[str, str]:
        """``(sentence, fix)`` where the float tensor ``x`` cannot meet the model's weights: a dtype
        other than theirs, outside ``torch.autocast`` (which casts float32, float16 and bfloat16
        inputs to its own dtype, but never float64); ``("", "")`` where it can."""
        expected = self._weights_dtype()
        if expected is None or x.dtype == expected:
            return "", ""
        if x.dtype != torch.float64 and autocast_enabled(x.device.type):
            return "", ""
        given, wanted = _dtype_name(x.dtype), _dtype_name(expected)
        if x.dtype == torch.float64:
            given += " (numpy's default dtype, which torch.from_numpy keeps)"
        elif x.dtype in (torch.float16, torch.bfloat16):
            given += " outside torch.autocast"
        fix = {torch.float32: ".float()", torch.float64: ".double()", torch.float16: ".half()",
               torch.bfloat16: ".bfloat16()"}.get(expected, f".to(torch.{wanted})")
        return f"The model takes {wanted} {what}, the dtype of its weights; got {given}.", fix

    def _check_batch(self, x: Any) -> None:
        c, h, w = self.image_shape if len(self.image_shape) == 3 else (None, None, None)
        expected = f"(B, {', '.join(str(v) for v in self.image_shape)})"
        if not isinstance(x, torch.Tensor):
            raise InputError(
                f"The model takes a tensor {expected} of images in [0, 1]; got {type(x).__name__}. "
                f"model.representation(x) also takes numpy arrays and uint8 images."
            )
        if x.dtype == torch.uint8:
            raise InputError(
                "The model takes float images in [0, 1]; got uint8 (0-255). Pass x.float() / 255, or use "
                "model.representation(x), which converts uint8 images."
            )
        if not x.is_floating_point():
            raise InputError(
                f"The model takes float images in [0, 1]; got dtype {_dtype_name(x.dtype)}. Pass x.float() "
                f"(divided by the largest possible value if the images are not in [0, 1])."
            )
        sentences: list[str] = []
        lead, shape_fix = "Pass", ""
        shape = tuple(x.shape)
        if shape[1:] != self.image_shape or x.dim() != len(self.image_shape) + 1:
            sentences.append(f"The model takes a batch {expected}; got shape {shape}.")
            if x.dim() == len(self.image_shape) and shape == self.image_shape:
                lead, shape_fix = "For one image, pass", ".unsqueeze(0)"
            elif c is not None and x.dim() == 4 and shape[1:3] == (h, w) and shape[1] != c:
                sentences.append("It looks channels-last (B, H, W, C), the layout of numpy and PIL images; "
                                 "the model takes channels first (B, C, H, W).")
                if shape[3] == c:
                    shape_fix = ".permute(0, 3, 1, 2)"
                else:
                    sentences.append(f"This model was trained on {c}-channel images; the batch has {shape[3]} channels.")
            elif c is not None and x.dim() == 3 and shape == (h, w, c) and c != h:
                sentences.append("It looks like one channels-last image (H, W, C), the layout of numpy and PIL "
                                 "images; the model takes a batch, channels first (B, C, H, W).")
                lead, shape_fix = "For this image, pass", ".permute(2, 0, 1).unsqueeze(0)"
            elif c is not None and x.dim() == 4 and x.shape[1] != c and shape[2:] == (h, w):
                sentences.append(f"This model was trained on {c}-channel images; the batch has {x.shape[1]} channels.")
        self._raise_problems(sentences, x, "x", "images", lead, shape_fix)

    def _raise_problems(self, sentences: list[str], t: torch.Tensor, var: str, what: str, lead: str,
                        shape_fix: str) -> None:
        """Raise one :class:`~disentangle.errors.InputError` of the shape ``sentences`` and the dtype
        problem of ``t`` (:meth:`_dtype_problem`), ending in the combined fix (``x.permute(...).float()``)."""
        dtype_sentence, dtype_fix = self._dtype_problem(t, what)
        if dtype_sentence:
            sentences = [*sentences, dtype_sentence]
        if sentences:
            if shape_fix or dtype_fix:
                sentences.append(f"{lead} {var}{shape_fix}{dtype_fix}.")
            raise InputError(" ".join(sentences))

    def _check_codes(self, z: Any) -> None:
        expected = f"(B, {self.latent_dim})"
        if not isinstance(z, torch.Tensor):
            raise InputError(f"model.decode takes a tensor {expected} of latent codes; got {type(z).__name__}. "
                             f"Pass torch.as_tensor(z, dtype=torch.float32).")
        if not z.is_floating_point():
            raise InputError(f"model.decode takes float latent codes {expected}; got dtype {_dtype_name(z.dtype)}. "
                             f"Pass z.float().")
        sentences: list[str] = []
        lead, shape_fix = "Pass", ""
        if z.dim() != 2 or z.shape[1] != self.latent_dim:
            sentences.append(f"model.decode takes latent codes {expected}; got shape {tuple(z.shape)}.")
            if z.dim() == 1 and z.shape[0] == self.latent_dim:
                lead, shape_fix = "For one code, pass", ".unsqueeze(0)"
            elif z.dim() == 2:
                sentences.append(f"This model has {self.latent_dim} latent dimensions (model.latent_dim).")
        self._raise_problems(sentences, z, "z", "codes", lead, shape_fix)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Decoder logits ``(B, C, H, W)`` of latent codes ``(B, latent_dim)`` of the weights'
        dtype; apply ``sigmoid`` (or :meth:`decode_mean`) for images. Codes of another shape or
        dtype raise one :class:`~disentangle.errors.InputError` paragraph with the fix (checked
        from the shape and dtype alone)."""
        self._check_codes(z)
        return self.decoder(z)

    def decode_mean(self, z: torch.Tensor) -> torch.Tensor:
        """Mean images in [0, 1]."""
        return torch.sigmoid(self.decode(z))

    def forward(self, x: torch.Tensor) -> VAEOutput:
        """Posterior, one sample ``z = μ + σ ε`` and its decoder logits.

        During training ``ε`` comes from the trainer's checkpointed per-step generator, drawn for the
        global batch (:func:`reparameterize`); elsewhere from torch's
        global RNG.
        """
        mu, logvar = self.encode(x)
        z = reparameterize(mu, logvar)
        return VAEOutput(mu, logvar, z, self.decode(z))

    @torch.no_grad()
    def representation(self, x: torch.Tensor | np.ndarray, batch_size: int | None = None) -> torch.Tensor:
        """Posterior means for a batch of observations of any size (chunked, no gradients; by
        default in chunks of 64 on a CPU, where small batches are faster, and 1,024 elsewhere).

        ``x`` may be a float tensor in [0, 1], a uint8 tensor (divided by 255) or a numpy array, a
        batch or one image, channels first or, as numpy and PIL lay images out, last (``(H, W, C)``,
        ``(B, H, W, C)``; a gray image also ``(H, W)``) where the image shape tells them apart; it
        is moved to the model's device. Returns a float tensor on that device.
        """
        x = self._as_image_batch(x)
        device = self.device
        batch_size = batch_size or (64 if device.type == "cpu" else 1024)
        dtype = self._weights_dtype() or torch.float32  # float32 unless the model was converted
        outs = [self.encode(x[i : i + batch_size].to(device, dtype))[0] for i in range(0, len(x), batch_size)]
        return torch.cat(outs) if outs else torch.empty(0, self.latent_dim, device=device)

    @torch.no_grad()
    def reconstruct(self, x: torch.Tensor | np.ndarray) -> torch.Tensor:
        """Mean reconstruction ``sigmoid(decode(mu))`` of a batch; ``x`` as :meth:`representation`
        takes it (a float tensor in [0, 1], a uint8 tensor or a numpy array, channels first or last),
        moved to the model's device."""
        return self.decode_mean(self.encode(self._as_image_batch(x).to(self.device))[0])

    def _as_image_batch(self, x: Any) -> torch.Tensor:
        """``x`` as a float batch ``(B, C, H, W)`` in [0, 1] (:meth:`representation`'s inputs); what
        cannot be told apart is left for :meth:`encode`'s checks to name."""
        x = torch.as_tensor(x)
        if x.dtype == torch.uint8:
            x = x.float() / 255.0
        elif x.is_floating_point() and x.numel() and float(x.max()) > 1.5:
            raise InputError(
                f"The images look like 0-255 values (largest {float(x.max()):g}); the model takes images in "
                f"[0, 1]. Pass x / 255 (uint8 images are converted)."
            )
        if len(self.image_shape) != 3:
            return x.unsqueeze(0) if tuple(x.shape) == self.image_shape else x
        c, h, w = self.image_shape
        shape = tuple(x.shape)
        if c == 1 and shape == (h, w):  # one gray image
            return x[None, None]
        if shape == self.image_shape:  # one image, channels first
            return x.unsqueeze(0)
        if shape == (h, w, c) and c not in (h, w):  # one image, channels last
            return x.permute(2, 0, 1).unsqueeze(0)
        if x.dim() == 4 and shape[1:] == (h, w, c) and c not in (h, w):  # a batch, channels last
            return x.permute(0, 3, 1, 2)
        return x


def _dtype_name(dtype: torch.dtype) -> str:
    """``float64`` for ``torch.float64``: the name a user writes after ``torch.``."""
    return str(dtype).removeprefix("torch.")
