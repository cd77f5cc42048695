"""Encode each grid point once: a dataset whose observations are a representation's codes.

The BetaVAE and FactorVAE scores draw millions of observations from a grid of far fewer points
(dSprites has 737,280), and the other metrics draw again from the same grid. When an observation
is a function of its factors alone (the dataset class declares ``deterministic_observations``: no
per-draw nuisance such as colour, noise or background, no hidden factor such as SmallNORB's
instance) and the representation is deterministic (a model's posterior means, not a function
that samples its codes), the code of a grid point never changes, so it can be computed once and
looked up afterwards. :class:`CodeTable` does that lazily, in batches of the points not seen yet;
:func:`disentangle.metrics.evaluate_metrics` decides when to use it (its ``code_table`` argument).

It draws from the generator exactly what the dataset would, so every metric samples the same
points. The scores can differ from uncached ones only through floating-point rounding, where the
representation's output for an image depends on which other images share its batch; a classifier
that stops before converging (the BetaVAE score's lbfgs) can turn that into a small change. The
measured savings and that change are in ``benchmarks/RESULTS-metrics.md``.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ._representation import as_representation_function


def supports_code_table(dataset: Any) -> bool:
    """Whether ``dataset`` can be wrapped: a grid dataset that declares deterministic observations.

    This says nothing of the representation: only wrap it for a deterministic one.
    """
    return (
        bool(getattr(dataset, "deterministic_observations", False))
        and callable(getattr(dataset, "sample_indices_from_factors", None))
        and callable(getattr(dataset, "observe", None))
    )


class CodeTable:
    """The ground-truth interface of ``dataset``, with the codes of ``representation`` as observations.

    Use it with the identity as the representation: ``metric(table, table.identity, seed=...)``.
    Codes are computed on first use, ``batch_size`` grid points per representation call (by
    default 64 on a CPU, 1,024 elsewhere), and kept in a float64 table of ``len(dataset) x d``
    (``737,280 x 10 x 8`` bytes for dSprites with 10 codes). Only for a deterministic
    representation: one code is kept per grid point. ``on_encode(newly_encoded, grid_size)`` is
    called after each batch of grid points is encoded (the evaluate command's progress bar).
    """

    def __init__(
        self,
        dataset: Any,
        representation: Any,
        batch_size: int | None = None,
        on_encode: Callable[[int, int], None] | None = None,
    ):
        if not supports_code_table(dataset):
            raise ValueError(
                f"{type(dataset).__name__} cannot be encoded once per grid point: its observations are "
                "not a function of the factors alone (or it is not a grid dataset). Evaluate it "
                "without a code table."
            )
        self.dataset = dataset
        self.factor_sizes = tuple(dataset.factor_sizes)
        self.factor_names = tuple(getattr(dataset, "factor_names", ()) or ())
        self.code_fn = as_representation_function(representation, batch_size)
        self.on_encode = on_encode
        self._codes: np.ndarray | None = None
        self._known = np.zeros(len(dataset), dtype=bool)
        #: how many grid points were encoded, and how many observations were served
        self.encoded = 0
        self.served = 0

    def __len__(self) -> int:
        return len(self.dataset)

    def sample_factors(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return self.dataset.sample_factors(n, rng)

    def sample_observations_from_factors(self, factors: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        indices = np.asarray(self.dataset.sample_indices_from_factors(factors, rng), dtype=np.int64)
        self._encode(np.unique(indices[~self._known[indices]]))
        self.served += len(indices)
        return self._codes[indices]

    @staticmethod
    def identity(codes: np.ndarray) -> np.ndarray:
        """The representation to use with a code table: its observations already are codes."""
        return codes

    def _encode(self, missing: np.ndarray) -> None:
        step = self.code_fn.batch_size
        for start in range(0, len(missing), step):
            chunk = missing[start : start + step]
            codes = self.code_fn(self.dataset.observe(torch.as_tensor(chunk, device=self.dataset.device), None))
            if self._codes is None:
                self._codes = np.empty((len(self._known), codes.shape[1]), dtype=np.float64)
            self._codes[chunk] = codes
            self._known[chunk] = True
            self.encoded += len(chunk)
            if self.on_encode is not None:
                self.on_encode(len(chunk), len(self._known))
