"""A sub-grid of a factor grid: fewer values of some factors, still a complete grid (``data.subgrid``).

``data.subgrid`` maps factor names to the classes kept, either a count ``k`` (``k`` classes evenly
spaced over the factor's ``n``, first and last included: ``round(linspace(0, n − 1, k))``) or a list
of class indices; the other factors keep all their classes. The result is again a complete factor
grid, of ``Π_f k_f`` points, so every metric, group sampler and picture works on it unchanged; its
factor classes are renumbered ``0 .. k_f − 1`` (``factor_values`` keeps the physical values of the
classes kept).

Why: methods that learn a code per training image (LORD's latent optimisation) need each image seen
many times, and a grid of 737,280 sprites is seen about once in 20,000 steps of 64; sprites with 10
orientations and 8 × 8 positions (11,520 images) are seen about 110 times. A sub-grid also gives
coarser benchmark grids and held-out factor values.

::

    data:
      name: sprites
      subgrid: {orientation: 10, position_x: 8, position_y: 8}
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from ..errors import ConfigError
from .base import GridDataset, gather_rows

__all__ = ["SubGrid", "check_subgrid_spec", "subgrid_classes"]

#: images rendered at once when a sub-grid is materialised
_CHUNK = 8192
#: attributes a sub-grid reads from its base (where the base has them)
_FROM_BASE = ("name", "image_size", "placement", "placement_reason", "stream")


def check_subgrid_spec(spec: Any) -> dict[str, int | list[int]]:
    """``data.subgrid`` checked for its form (the factor names are checked against the dataset when
    it is built, :func:`subgrid_classes`): a mapping of factor names to a positive count or a
    non-empty list of distinct class indices >= 0. Returns it as plain ints and lists."""
    if not isinstance(spec, Mapping) or not spec:
        raise ConfigError(
            f"data.subgrid must be a mapping of factor names to the classes kept, a count or a list of class "
            f"indices, e.g. {{orientation: 10, position_x: [0, 8, 16, 24]}}; got {spec!r}."
        )
    out: dict[str, int | list[int]] = {}
    for name, keep in spec.items():
        if isinstance(keep, bool) or not isinstance(name, str):
            raise ConfigError(f"data.subgrid: {name!r}: {keep!r} is not a factor name with a count or a list of classes.")
        if isinstance(keep, (int, np.integer)):
            if keep < 1:
                raise ConfigError(f"data.subgrid.{name} must keep at least 1 class, got {keep}.")
            out[name] = int(keep)
            continue
        if not isinstance(keep, Sequence) or isinstance(keep, str) or not keep:
            raise ConfigError(
                f"data.subgrid.{name} must be a count of classes or a non-empty list of class indices, got {keep!r}."
            )
        if any(isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0 for k in keep):
            raise ConfigError(f"data.subgrid.{name} must list class indices (integers >= 0), got {list(keep)!r}.")
        if len(set(int(k) for k in keep)) != len(keep):
            raise ConfigError(f"data.subgrid.{name} lists a class twice: {list(keep)!r}.")
        out[name] = [int(k) for k in keep]
    return out


def subgrid_classes(
    spec: Mapping[str, int | Sequence[int]], factor_names: Sequence[str], factor_sizes: Sequence[int]
) -> list[np.ndarray]:
    """The classes kept of every factor (all of a factor ``spec`` does not name), in increasing order."""
    spec = check_subgrid_spec(spec)
    unknown = sorted(set(spec) - set(factor_names))
    if unknown:
        raise ConfigError(
            f"data.subgrid names {', '.join(map(repr, unknown))}, which the dataset does not have. "
            f"Its factors: {', '.join(f'{n} ({s} classes)' for n, s in zip(factor_names, factor_sizes))}."
        )
    kept = []
    for name, size in zip(factor_names, factor_sizes):
        keep = spec.get(name)
        if keep is None:
            kept.append(np.arange(size))
        elif isinstance(keep, int):
            if keep > size:
                raise ConfigError(f"data.subgrid.{name} keeps {keep} classes but the factor has {size}.")
            kept.append(np.round(np.linspace(0, size - 1, keep)).astype(np.int64))
        else:
            if max(keep) >= size:
                raise ConfigError(
                    f"data.subgrid.{name} lists class {max(keep)}, but the factor's classes are 0 .. {size - 1}."
                )
            kept.append(np.sort(np.asarray(keep, dtype=np.int64)))
    return kept


class SubGrid(GridDataset):
    """The sub-grid of ``base`` that keeps, for each factor ``f``, the classes ``kept[f]`` (module
    docstring). Grid point ``i`` of the sub-grid is the base's point whose factor classes are
    ``kept[f][c_f]`` for the sub-grid's classes ``c_f`` of ``i``; its observation is the base's
    (with the base's per-sample nuisance, if any). ``materialize()`` renders only the sub-grid's
    images, for a base that renders (the sprites family). ``name``, ``image_size`` and the
    placement of a stored base are the base's.
    """

    def __init__(self, base: GridDataset, spec: Mapping[str, int | Sequence[int]]) -> None:
        combinations = int(np.prod(base.factor_sizes))
        if len(base) != combinations:
            from ..errors import ConfigError

            raise ConfigError(
                f"data.subgrid keeps classes of a grid with one image per combination of its factors, and "
                f"{getattr(base, 'name', type(base).__name__)} holds {len(base):,} images for its {combinations:,} "
                f"combinations (a factor it does not show, as SmallNORB's instance, picks among them), so its images "
                f"cannot be addressed by the factors shown. Leave data.subgrid out for this dataset."
            )
        self.base = base
        self.spec = check_subgrid_spec(spec)
        self.kept = subgrid_classes(self.spec, base.factor_names, base.factor_sizes)
        self._init_grid(base.factor_names, [len(k) for k in self.kept], base.device)
        self.scale = base.scale
        base_values = getattr(base, "factor_values", None)
        self.factor_values = None if base_values is None else [np.asarray(v)[k] for v, k in zip(base_values, self.kept)]
        self._kept = [torch.as_tensor(k, device=self.device) for k in self.kept]
        self._base_strides = torch.as_tensor(base._strides_np, device=self.device)
        self._images: torch.Tensor | None = None

    # the base decides both (a class that overrides transform must say: GridDataset.__init_subclass__)
    @property
    def deterministic_observations(self) -> bool:  # type: ignore[override]
        return bool(self.base.deterministic_observations)

    @property
    def shard_rendering(self) -> bool:  # type: ignore[override]
        return bool(self.base.shard_rendering)

    def __getattr__(self, name: str) -> Any:
        # only what describes the base as a whole: its stored images or files are not the sub-grid's
        if name in _FROM_BASE:
            return getattr(self.base, name)
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return self.base.image_shape

    def base_indices(self, indices: torch.Tensor) -> torch.Tensor:
        """The base grid's indices of sub-grid indices (on the same device)."""
        classes = self.index_tensor_to_factors(indices)
        base_classes = torch.stack([k[classes[:, f]] for f, k in enumerate(self._kept)], dim=1)
        return (base_classes * self._base_strides).sum(1)

    def to(self, device: torch.device | str) -> SubGrid:
        self.base = self.base.to(device) or self.base
        super().to(device)
        self._kept = [k.to(self.device) for k in self._kept]
        self._base_strides = self._base_strides.to(self.device)
        if self._images is not None:
            self._images = self._images.to(self.device)
        return self

    def materialize(self) -> None:
        """Store the sub-grid's raw images (rendered or read from the base once, in chunks)."""
        if self._images is None:
            every = torch.arange(len(self), device=self.device)
            self._images = torch.cat([self.base.raw(self.base_indices(c).to(self.base.device)) for c in every.split(_CHUNK)])

    @property
    def materialized(self) -> bool:
        return self._images is not None

    def raw(self, indices: torch.Tensor) -> torch.Tensor:
        if self._images is not None:
            return gather_rows(self._images, indices)
        return self.base.raw(self.base_indices(indices).to(self.base.device))

    def transform(self, batch: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        return self.base.transform(batch, generator)

    def __repr__(self) -> str:
        return f"SubGrid({self.base!r}, {self.spec})"
