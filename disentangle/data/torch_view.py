"""Our datasets as a ``torch.utils.data.Dataset``: for a user's own ``DataLoader``, training loop or
Lightning ``DataModule``.

``TorchDataset(dataset)[i]`` is ``(image, factors)``: grid point ``i``'s observation, a float tensor
``(C, H, W)`` in [0, 1] on the CPU, and its factor classes, an int64 tensor ``(K,)`` (``i`` in
row-major order of the factor grid, the last factor fastest, as in the dSprites file). The trainer
does not use it: it samples batches by index on the device (:meth:`GridDataset.sample_batch`),
which is many times faster than a per-item loader (see the benchmarks page).

An item is the same whichever batch, order or worker it is fetched in. Where an observation is a
function of its factors alone (``deterministic_observations``: dSprites, the sprites, Shapes3D)
that is the grid's image; where a dataset adds per-draw nuisance (the noisy, colour and scream
variants), item ``i`` draws it from a generator seeded by ``(seed, i)``, so the same ``seed`` gives
the same images everywhere, and another ``seed`` another draw of the nuisance.
"""
from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import torch
from torch.utils.data import Dataset

#: mixes the view's seed with an item's index into the seed of that item's nuisance generator
_SEED_STRIDE = 1_000_003


class TorchDataset(Dataset):
    """A ``torch.utils.data.Dataset`` view of a :class:`~disentangle.data.GridDataset` (module
    docstring): ``len`` is the grid's size and item ``i`` is ``(image, factor classes)``.

    ``DataLoader`` fetches a batch at once through :meth:`__getitems__` (rendered in one call where
    the observations are deterministic), and collates it into ``(B, C, H, W)`` and ``(B, K)``.
    """

    def __init__(self, dataset: Any, *, seed: int = 0) -> None:
        for needed in ("observe", "indices_to_factors", "factor_sizes"):
            if not hasattr(dataset, needed):
                raise TypeError(
                    f"TorchDataset views one of our grid datasets (disentangle.data.build_dataset, a GridDataset); "
                    f"{type(dataset).__name__} has no '{needed}'."
                )
        self.dataset = dataset
        self.seed = int(seed)

    def __len__(self) -> int:
        return len(self.dataset)

    @property
    def factor_names(self) -> tuple[str, ...]:
        return tuple(self.dataset.factor_names)

    def _index(self, index: Any) -> int:
        i = operator.index(index)
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            # a grid maps factors to indices; a sample of images has no grid (no import of either: a loop)
            what = "grid points" if callable(getattr(self.dataset, "factors_to_indices", None)) else "images"
            raise IndexError(f"index {index} is out of range for a dataset of {n:,} {what}.")
        return i

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: Sequence[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        rows = [self._index(i) for i in indices]
        device = self.dataset.device
        idx = torch.as_tensor(rows, dtype=torch.int64, device=device)
        if getattr(self.dataset, "deterministic_observations", False):
            images = self.dataset.observe(idx, None)
        else:  # per-item nuisance from a generator of its own: independent of the batch it is in
            images = torch.cat([self.dataset.observe(idx[k : k + 1], self._generator(row, device))
                                for k, row in enumerate(rows)]) if rows else self.dataset.observe(idx, None)
        images = images.cpu()
        factors = torch.as_tensor(self.dataset.indices_to_factors(idx), dtype=torch.int64)
        return list(zip(images.unbind(0), factors.unbind(0)))

    def _generator(self, row: int, device: torch.device) -> torch.Generator:
        return torch.Generator(device=device).manual_seed(self.seed * _SEED_STRIDE + row)
