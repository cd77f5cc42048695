"""What the file-backed datasets share (dSprites, 3D Shapes, Cars3D, MPI3D; SmallNORB in part).

Each is built the same way: locate its file (:func:`~disentangle.data.download.fetch`: ``path``,
else the cache, downloaded there if allowed), read and check it, and keep the images on ``device``
as one uint8 tensor. :class:`FileDataset` does all of that but the reading: a dataset states its
files, its factor names and its :meth:`~FileDataset.read` (the file format, the checks of it, the
factor sizes and values). The helpers below are the checks the readers have in common.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Literal, NamedTuple

import numpy as np
import torch

from .._core import checks
from ..errors import CorruptDataFileError
from .base import IndexedImageDataset, factor_strides
from .download import RemoteFile, fetch, require_path
from .samples import choose_placement


class Grid(NamedTuple):
    """What :meth:`FileDataset.read` gives: the images in row-major order of the factor classes
    (uint8 ``(N, C, H, W)`` in memory), the factor sizes, and the physical values of each class."""

    images: torch.Tensor
    sizes: tuple[int, ...]
    values: Sequence[np.ndarray]


class FileDataset(IndexedImageDataset):
    """A grid dataset whose images are read from downloadable files, stored on ``device`` as uint8.

    Parameters
    ----------
    path:
        The file (or a folder holding it under its official name). ``None``: the cache
        (``$DISENTANGLE_DATA`` or ``~/.cache/disentangle``)/<dataset>/, downloaded if absent.
    cache_dir:
        Overrides the cache folder.
    download:
        Download the file into the cache when it is missing.
    strict:
        Require the official grid; ``False`` accepts any complete grid in the same format.
    device:
        The training device: where the images live and batches are drawn, unless they are streamed.
    placement:
        ``device`` (every image on ``device``), ``stream`` (the images stay in host memory and each
        batch is copied to ``device``: for a grid larger than GPU memory, e.g. MPI3D-real's 12.7 GB)
        or ``auto`` (default: stream when the images take more than a quarter of the free memory of
        ``device``; :func:`~disentangle.data.samples.choose_placement`). The same batches either way.

    A subclass sets :attr:`files`, :attr:`factor_names`, :attr:`what` (and :attr:`scale` if its
    images are not 8-bit) and implements :meth:`read`; one whose file is found another way
    overrides :meth:`locate`, one with more parameters its own ``__init__`` calling :meth:`_load`.
    """

    deterministic_observations = True  # stored images, one per grid point

    #: the downloadable files; :meth:`locate` fetches the first
    files: tuple[RemoteFile, ...] = ()
    #: the factors, in the row-major order of the stored images
    factor_names: tuple[str, ...]
    #: the file in messages ("dSprites file")
    what: str = "dataset file"

    def __init__(
        self,
        path: str | None = None,
        *,
        cache_dir: str | None = None,
        download: bool = True,
        strict: bool = True,
        device: str = "cpu",
        placement: Literal["auto", "device", "stream"] = "auto",
    ) -> None:
        self._load(path, cache_dir=cache_dir, download=download, strict=strict, device=device, placement=placement)

    def _load(self, path, *, cache_dir, download, strict: bool, device, placement: str = "auto", **options) -> None:
        """Locate the file, :meth:`read` it (with ``strict`` and ``options``) and store its images on
        ``device`` or, streamed (``placement``), on the host."""
        placement = checks.choice("placement", placement, ("auto", "device", "stream"))
        source = self.locate(path, cache_dir=cache_dir, download=download)
        images, sizes, values = self.read(source, strict=strict, **options)
        placed, reason = choose_placement(placement, images.numel() * images.element_size(), device)
        stream = placed == "stream"
        super().__init__(
            images if stream else images.to(device), self.factor_names, sizes, scale=self.scale,
            factor_values=values, stream=stream,
        )
        self.placement, self.placement_reason = placed, reason
        self.path = str(source)

    def locate(self, path: str | None, *, cache_dir: str | None, download: bool) -> Path:
        """The file to read: ``path``, else the cache (downloading into it if allowed)."""
        return fetch(self.files[0], path=path, cache_dir=cache_dir, download=download, what=self.what)

    def read(self, source: Path, *, strict: bool) -> Grid:
        """The checked images, factor sizes and values of ``source``; raises
        :class:`~disentangle.data.download.CorruptDataFileError` for a file that is not valid."""
        raise NotImplementedError


def is_row_major_grid(classes: np.ndarray, sizes: Sequence[int]) -> bool:
    """Whether per-image factor classes ``(N, K)`` are the complete grid of ``sizes``, row-major."""
    n = int(np.prod(sizes))
    return classes.shape[0] == n and np.array_equal(classes @ factor_strides(sizes), np.arange(n))


@contextlib.contextmanager
def reading(path, as_what: str | None = None, errors: tuple[type[BaseException], ...] = (OSError,)) -> Iterator[None]:
    """Within the block, ``errors`` raised while ``path`` is read become a
    :class:`~disentangle.data.download.CorruptDataFileError` saying it could not be read (``as_what``:
    "HDF5", "a tar archive") and is probably truncated; the loader's own ``CorruptDataFileError``
    passes unchanged. A ``path`` that does not exist is reported as such before the block runs
    (:func:`~disentangle.data.download.require_path`), never as a corrupt file."""
    require_path(path)
    try:
        yield
    except CorruptDataFileError:
        raise
    except errors as err:
        as_what = f" as {as_what}" if as_what else ""
        raise CorruptDataFileError(
            f"{path} could not be read{as_what} ({type(err).__name__}: {err}); it is probably "
            "truncated or corrupt. Delete it and download it again."
        ) from err
