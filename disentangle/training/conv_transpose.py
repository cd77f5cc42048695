"""Transposed convolutions whose gradients run on regular-convolution kernels (``train.conv_transpose_via_conv``).

A transposed convolution ``y = conv_transpose2d(x, W)`` is the input-gradient of the convolution
``conv2d(·, W)`` with the same stride, padding, dilation and groups. Its two gradients are therefore
regular convolutions:

* ``dL/dx = conv2d(dL/dy, W)``, a forward convolution;
* ``dL/dW[i, o, p, q] = Σ_{n, u, v} x[n, i, u, v] · dL/dy[n, o, s·u + p − pad, s·v + q − pad]``, the
  weight gradient of ``conv2d(dL/dy, W)`` taken with ``x`` as its output's gradient;
* ``dL/db = Σ_{n, h, w} dL/dy``.

The values are the ones PyTorch's own backward computes (bit for bit on the CPUs measured; they
are tested to agree to float rounding). What changes is the kernel: oneDNN's deconvolution
backward is markedly slower on CPUs than its convolution kernels, most of all in bf16 with
channels-last weights (``benchmarks/RESULTS-train-cpu.md``). The forward pass is PyTorch's
``conv_transpose2d`` unchanged.

:func:`use_convolution_kernels` switches every ``nn.ConvTranspose2d`` of a network to this backward
by changing its class to :class:`ConvTranspose2dViaConv`, a subclass with the same parameters:
state-dict keys, values, ``isinstance`` checks, ``deepcopy`` and checkpoints are unaffected.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


class _ConvTranspose2d(torch.autograd.Function):
    """``conv_transpose2d`` with the backward written as regular convolutions (module docstring)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                stride: tuple[int, int], padding: tuple[int, int], output_padding: tuple[int, int],
                groups: int, dilation: tuple[int, int]) -> torch.Tensor:
        ctx.save_for_backward(x, weight)
        ctx.geometry = (stride, padding, groups, dilation)
        ctx.has_bias = bias is not None
        return F.conv_transpose2d(x, weight, bias, stride, padding, output_padding, groups, dilation)

    @staticmethod
    def backward(ctx: Any, grad_y: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, weight = ctx.saved_tensors
        stride, padding, groups, dilation = ctx.geometry
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            # the output_padding rows lie beyond the last full stride and are dropped by the floor
            grad_x = F.conv2d(grad_y, weight, None, stride, padding, dilation, groups)
        if ctx.needs_input_grad[1]:
            grad_w = torch.ops.aten.convolution_backward(
                x, grad_y, weight, None, stride, padding, dilation, False, (0, 0), groups, (False, True, False),
            )[1]
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_b = grad_y.sum((0, 2, 3))
        return grad_x, grad_w, grad_b, None, None, None, None, None


def conv_transpose2d_via_conv(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None, stride: tuple[int, int] = (1, 1),
    padding: tuple[int, int] = (0, 0), output_padding: tuple[int, int] = (0, 0), groups: int = 1,
    dilation: tuple[int, int] = (1, 1),
) -> torch.Tensor:
    """``F.conv_transpose2d`` (2-D, zero padding, tuple arguments) whose backward runs on
    regular-convolution kernels. Under autocast it computes in the autocast dtype, as PyTorch's
    own transposed convolution does: inputs, weight and bias are cast first, differentiably."""
    device_type = x.device.type
    dtype = _autocast_dtype(device_type)
    if dtype is not None:
        x, weight = x.to(dtype), weight.to(dtype)
        bias = None if bias is None else bias.to(dtype)
        with torch.autocast(device_type, enabled=False):
            return _ConvTranspose2d.apply(x, weight, bias, stride, padding, output_padding, groups, dilation)
    return _ConvTranspose2d.apply(x, weight, bias, stride, padding, output_padding, groups, dilation)


def _autocast_dtype(device_type: str) -> torch.dtype | None:
    """The dtype autocast computes convolutions in on ``device_type``, or None outside autocast."""
    if hasattr(torch, "get_autocast_dtype"):  # torch >= 2.4
        return torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else None
    if device_type == "cpu":
        return torch.get_autocast_cpu_dtype() if torch.is_autocast_cpu_enabled() else None
    return torch.get_autocast_gpu_dtype() if torch.is_autocast_enabled() else None


class ConvTranspose2dViaConv(nn.ConvTranspose2d):
    """An ``nn.ConvTranspose2d`` whose gradients run on regular-convolution kernels
    (:func:`conv_transpose2d_via_conv`); the forward values are the parent's."""

    def forward(self, input: torch.Tensor, output_size: list[int] | None = None) -> torch.Tensor:
        if output_size is not None:  # the parent derives output_padding from it
            return super().forward(input, output_size)
        return conv_transpose2d_via_conv(
            input, self.weight, self.bias, self.stride, self.padding, self.output_padding, self.groups,
            self.dilation,
        )


def _convertible(module: nn.Module) -> bool:
    return type(module) is nn.ConvTranspose2d and module.padding_mode == "zeros"


def use_convolution_kernels(*networks: nn.Module) -> int:
    """Switch every plain ``nn.ConvTranspose2d`` (zero padding) inside ``networks`` to
    :class:`ConvTranspose2dViaConv`, in place; returns how many were switched. Parameters,
    buffers and hooks stay with the module, so optimizers built before keep working."""
    switched = 0
    for network in networks:
        for module in network.modules():
            if _convertible(module):
                module.__class__ = ConvTranspose2dViaConv
                switched += 1
    return switched
