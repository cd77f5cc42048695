"""Calling a representation: batched, gradient-free, in eval mode, on the model's device, as float64 ``(n, d)`` codes; the batch size by device."""
from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .._core import checks

#: observations per representation call on an accelerator unless a metric is told otherwise
DEFAULT_REPRESENTATION_BATCH_SIZE = 1024


#: ... and on a CPU, where small batches stay in cache: conv64 encodes 2-3x more images per second
#: in batches of 64 than of 1,024 (benchmarks/RESULTS-metrics.md)
CPU_REPRESENTATION_BATCH_SIZE = 64


def default_representation_batch_size(device: torch.device | str | None) -> int:
    """Observations per representation call when a metric is not told (``representation_batch_size``
    null): :data:`CPU_REPRESENTATION_BATCH_SIZE` on a CPU (or for a plain function), else
    :data:`DEFAULT_REPRESENTATION_BATCH_SIZE`."""
    if device is None or torch.device(device).type == "cpu":
        return CPU_REPRESENTATION_BATCH_SIZE
    return DEFAULT_REPRESENTATION_BATCH_SIZE


def modules_of(representation: Any) -> list[torch.nn.Module]:
    """The :class:`torch.nn.Module` behind a representation: the module itself, the module of a
    bound method (``model.representation``), or the target of a :class:`RepresentationFunction`."""
    if isinstance(representation, RepresentationFunction):
        representation = representation.target
    if isinstance(representation, torch.nn.Module):
        return [representation]
    owner = getattr(representation, "__self__", None)
    return [owner] if isinstance(owner, torch.nn.Module) else []


@contextlib.contextmanager
def eval_mode(representation: Any):
    """Within this context the representation's modules are in eval mode; afterwards every
    submodule has its own previous mode back (a model with mixed modes comes back unchanged).

    A metric reads codes, it does not train: BatchNorm must use (and not update) its running
    statistics and dropout must be off, whatever mode the caller left the model in.
    """
    roots = modules_of(representation)
    saved = [(m, m.training) for root in roots for m in root.modules()]
    for root in roots:
        root.eval()
    try:
        yield
    finally:
        for module, training in saved:
            module.training = training


class RepresentationFunction:
    """Batched, gradient-free calls of a representation, returning float64 ``(n, d)`` arrays.

    ``representation`` is either a model (anything with a ``representation(x)`` method, such as
    a trained VAE, whose posterior means are the codes) or any callable mapping a batch of
    observations to codes ``(n, d)`` as a tensor or array. When the model (or the callable) is a
    :class:`torch.nn.Module`, observations are moved to the device of its first parameter, and
    every call runs in eval mode (see :func:`eval_mode`).
    """

    def __init__(self, representation: Any, batch_size: int | None = None):
        if isinstance(representation, RepresentationFunction):
            representation = representation.target
        self.target = representation
        method = getattr(representation, "representation", None)
        if callable(method):
            self._fn: Callable[[Any], Any] = method
        elif callable(representation):
            self._fn = representation
        else:
            raise TypeError(
                "representation must be a model with a representation(x) method or a callable "
                f"mapping a batch of observations to codes (n, d); got {type(representation).__name__}."
            )
        owners = modules_of(representation)
        module = owners[0] if owners else None
        self.device: torch.device | None = None
        if module is not None:
            first = next(module.parameters(), None)
            if first is None:
                first = next(module.buffers(), None)
            self.device = first.device if first is not None else None
        if batch_size is None:
            batch_size = default_representation_batch_size(self.device)
        self.batch_size = checks.positive_int("representation_batch_size", batch_size)

    def _call(self, observations: Any) -> np.ndarray:
        if self.device is not None:
            if isinstance(observations, np.ndarray):
                observations = torch.as_tensor(observations)
            if isinstance(observations, torch.Tensor) and observations.device != self.device:
                observations = observations.to(self.device)
        with torch.inference_mode(), eval_mode(self.target):
            out = self._fn(observations)
        if isinstance(out, tuple):
            raise TypeError(
                "the representation returned a tuple; it must return one array of codes (n, d). "
                "(A model's encode() returns (mu, logvar): pass the model itself, whose "
                "representation() gives the posterior means.)"
            )
        if isinstance(out, torch.Tensor):
            out = out.detach().to("cpu", torch.float64).numpy()
        out = np.asarray(out, dtype=np.float64)
        return out

    def __call__(self, observations: Any) -> np.ndarray:
        """Codes ``(n, d)`` float64 for a batch of observations, called in chunks."""
        n = len(observations)
        parts = [
            self._call(observations[start : start + self.batch_size])
            for start in range(0, n, self.batch_size)
        ]
        codes = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)
        return check_codes(codes, n)


def check_codes(codes: np.ndarray, n: int | None = None) -> np.ndarray:
    """Validate the codes a representation returned: finite, 2-D, one row per observation."""
    if codes.ndim == 1 and n is not None and codes.shape[0] == n:
        raise ValueError(
            f"the representation returned a 1-D array of shape {codes.shape}; codes must have "
            "shape (n, d) (use codes[:, None] for a one-dimensional code)."
        )
    if codes.ndim != 2:
        raise ValueError(
            f"the representation must return codes of shape (n, d), got shape {codes.shape}."
        )
    if n is not None and codes.shape[0] != n:
        raise ValueError(
            f"the representation returned {codes.shape[0]} rows for {n} observations; it must "
            "return one code per observation."
        )
    if codes.shape[1] < 1:
        raise ValueError("the representation returned codes with zero dimensions.")
    if not np.isfinite(codes).all():
        raise ValueError("the representation returned non-finite values (NaN or inf).")
    return codes


def as_representation_function(representation: Any, batch_size: int | None = None) -> RepresentationFunction:
    """``representation`` (a model, whose posterior means are the codes, or a callable of a batch)
    as a :class:`RepresentationFunction`: float64 ``(n, d)`` codes of any number of observations,
    in batches of ``batch_size`` (default: 64 on a CPU, 1,024 elsewhere), without gradients."""
    if isinstance(representation, RepresentationFunction) and (
        batch_size is None or batch_size == representation.batch_size
    ):
        return representation
    return RepresentationFunction(representation, batch_size)
