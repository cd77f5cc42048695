"""How the layers of a model are initialised (``model.init``).

* ``reference`` (the default): disentanglement_lib's initialisation, i.e. TensorFlow 1's defaults for
  ``tf.layers.conv2d``, ``conv2d_transpose`` and ``dense``: Glorot-uniform weights,
  ``W ~ U(−a, a)`` with ``a = √(6 / (fan_in + fan_out))`` (Glorot & Bengio 2010), and **zero**
  biases, on every convolution, transposed convolution and linear layer: encoder, decoder, heads and
  the objectives' discriminators.
* ``pytorch``: PyTorch's own defaults, weights *and biases* from ``U(±1/√fan_in)`` (Kaiming-uniform
  with ``a = √5``). The layers are left as constructed. Runs trained before ``model.init`` existed
  used it, and resume and reproduce with it.

With ``pytorch`` the encoder's posterior means start as a constant offset much larger than their
spread across images (the random biases add up through the layers); with ``reference`` they start
centred. The AnnealedVAE's capacity target is met by that offset alone under ``pytorch``
(``benchmarks/RESULTS-annealed-vae.md``).

For PyTorch's transposed-convolution weight ``(in, out, k, k)`` and TensorFlow's ``(k, k, out, in)``
the Glorot bound is the same, since it depends on ``fan_in + fan_out`` only.

A spectrally normalised layer (``torch.nn.utils.parametrizations.spectral_norm``, the GAN
discriminators of :mod:`disentangle.backbones.infogan`) has its trained weight in
``parametrizations.weight.original`` (``layer.weight`` is computed from it): that is what is drawn,
and the power iteration's vectors are then brought to the new weight (15 iterations, as at the
layer's construction), so the first forward divides by the new weight's spectral norm.

:func:`redraw` draws a scheme's distributions afresh from a given generator, ``pytorch`` included
(an objective re-initialising a network in the middle of a run, reproducibly).
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn.utils import parametrize

from .._core.choices import DEFAULT_INIT, INITS

#: the layer types that carry an initialiser of their own
INITIALISED_LAYERS = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)


@torch.no_grad()
def initialize(module: nn.Module, scheme: str = DEFAULT_INIT, generator: torch.Generator | None = None) -> nn.Module:
    """Initialise every linear and (transposed) convolutional layer of ``module`` in place by
    ``scheme`` (``reference`` or ``pytorch``; see the module docstring) and return ``module``.

    Weights are drawn from ``generator`` when given, else from torch's global RNG, layer by layer in
    the order of ``module.modules()``. ``pytorch`` leaves the module unchanged.
    """
    if scheme not in INITS:
        from ..errors import ConfigError

        raise ConfigError(f"model.init is '{scheme}'. Valid choices: {', '.join(INITS)}.")
    if scheme == "pytorch":
        return module
    for layer in module.modules():
        if isinstance(layer, INITIALISED_LAYERS):
            weight = trained_weight(layer)
            bound = glorot_bound(weight)
            weight.uniform_(-bound, bound, generator=generator)
            if layer.bias is not None:
                layer.bias.zero_()
            refresh_spectral_norm(layer)
    return module


@torch.no_grad()
def redraw(module: nn.Module, scheme: str = DEFAULT_INIT, generator: torch.Generator | None = None) -> nn.Module:
    """Draw every linear and (transposed) convolutional layer of ``module`` afresh from ``generator``
    (else torch's global RNG) by ``scheme``: ``reference`` as :func:`initialize`; ``pytorch``
    PyTorch's default distributions (Kaiming-uniform weights with ``a = √5``, i.e. ``U(±1/√fan_in)``,
    and biases ``U(±1/√fan_in)``), which :func:`initialize` leaves as constructed. Returns ``module``."""
    if scheme != "pytorch":
        return initialize(module, scheme, generator)
    for layer in module.modules():
        if isinstance(layer, INITIALISED_LAYERS):
            weight = trained_weight(layer)
            nn.init.kaiming_uniform_(weight, a=math.sqrt(5), generator=generator)
            if layer.bias is not None:
                fan_in, _ = nn.init._calculate_fan_in_and_fan_out(weight)
                bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
                layer.bias.uniform_(-bound, bound, generator=generator)
            refresh_spectral_norm(layer)
    return module


def trained_weight(layer: nn.Module) -> torch.Tensor:
    """The weight parameter an optimizer trains: ``layer.weight``, or, for a parametrised weight
    (spectral norm), ``layer.parametrizations.weight.original``."""
    if parametrize.is_parametrized(layer, "weight"):
        return layer.parametrizations.weight.original
    return layer.weight


@torch.no_grad()
def refresh_spectral_norm(layer: nn.Module, iterations: int = 15) -> None:
    """Bring the power-iteration vectors of ``layer``'s spectral norm (if any) to its current
    weight, ``iterations`` times (15: what ``spectral_norm`` does at construction)."""
    if not parametrize.is_parametrized(layer, "weight"):
        return
    original = layer.parametrizations.weight.original
    for p in layer.parametrizations.weight:
        if hasattr(p, "_power_method") and hasattr(p, "_u"):
            p._power_method(p._reshape_weight_to_matrix(original), iterations)


def glorot_bound(weight: torch.Tensor) -> float:
    """``√(6 / (fan_in + fan_out))`` of a weight of shape ``(out, in, *kernel)`` (or a transposed
    convolution's ``(in, out, *kernel)``: the sum is the same)."""
    receptive = weight[0, 0].numel() if weight.dim() > 2 else 1
    fan_sum = (weight.shape[0] + weight.shape[1]) * receptive
    return (6.0 / fan_sum) ** 0.5
