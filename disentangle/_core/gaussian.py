"""The diagonal Gaussian's log density and the device of a model: written once, below the objectives,
the metrics and the pictures, which all use them."""
from __future__ import annotations

import math
from typing import Any

import torch

#: ``log 2π``, the constant of a Gaussian's log density
LOG_2PI = math.log(2.0 * math.pi)


def log_normal(z: torch.Tensor, mu: torch.Tensor, logvar: torch.Tensor) -> torch.Tensor:
    """Elementwise ``log N(z; μ, exp(logvar)) = -½ (log 2π + logvar + (z − μ)² · exp(−logvar))`` in
    nats, broadcasting; sum over the last axis for a diagonal Gaussian. Computed in the inputs' dtype."""
    return -0.5 * (LOG_2PI + logvar + (z - mu).square() * torch.exp(-logvar))


def model_device(model: Any) -> torch.device:
    """Where a model computes: its ``device`` attribute where it has one, else the device of its first
    parameter or buffer, else the CPU (a parameter-free model, a plain function)."""
    device = getattr(model, "device", None)
    if isinstance(device, torch.device):
        return device
    if isinstance(model, torch.nn.Module):
        for tensor in (*model.parameters(), *model.buffers()):
            return tensor.device
    elif hasattr(model, "parameters"):
        first = next(iter(model.parameters()), None)
        if first is not None:
            return first.device
    return torch.device("cpu")
