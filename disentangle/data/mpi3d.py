"""MPI3D (Gondal et al. 2019): ``data.name: mpi3d`` with ``data.variant: toy | realistic | real``.

Source: https://github.com/rr-learning/disentanglement_dataset. Each variant is one ``.npz`` file
whose ``images`` array is uint8 ``(N, 64, 64, 3)`` in row-major order of the seven factors
(vertical axis fastest), read without pickle. Two grids exist:

* 1,036,800 images, object colour and shape with 6 values each: the files of the official
  README, which this loader downloads;
* 460,800 images, 4 colours × 4 shapes: the earlier ``*_without_heldout_factors.npz`` files that
  disentanglement_lib and Locatello et al. use for toy and realistic.

**Downloads.** The README (read at commit ``a7a6729``, 2025-04-17, "Corrected corrupted
mpi3d_real.npz dataset") links ``https://huggingface.co/datasets/waleedgondal/mpi3d/resolve/main/
mpi3d_{toy,realistic,real}.npz``; ``mpi3d_real.npz`` was replaced there by a corrected file in that
commit. Earlier READMEs linked ``storage.googleapis.com/disentanglement_dataset/Final_Dataset/``
(until 2024-05-08) and then ``storage.googleapis.com/mpi3d_disentanglement_dataset/data/`` (with
the real variant as ``real.npz``). The README states no checksum and no file size, so a download
is not checked against a digest: every file, downloaded or put in place by hand, is checked by
structure only (an ``images`` array, uint8 ``(N, 64, 64, 3)``, N one of the grids above), which a
corrupted file of the right shape passes. The md5s this loader used before came from a
third-party library, not from the authors; whether they fit the files served now is unknown (the
files could not be downloaded where this was written). The README does not say which earlier
copies of ``mpi3d_real.npz`` were corrupted. The README's fourth file, ``mpi3d_real_complex``
(460,800 images of 4 other objects × 4 other colours, on Google Drive), is not a variant here:
given as a file it would be taken for a 4×4 file of the variant named, with the wrong value
names.

The grid is recognised from the number of images. Locatello et al. use 4×4 for ``toy`` and
``realistic`` and 6×6 for ``real``; ``full_grid`` chooses: ``None`` (default) follows them,
``True`` keeps every value the file has, ``False`` always uses the 4×4 grid. Taking the 4×4 grid
from a 6×6 file keeps the colours green, red, blue, brown and the shapes cone, cube, hexagonal
prism, sphere, the values (with those names, in that order) of the 4×4 files; that these are the
very same renders as in the 4×4 files is assumed, not verified. Uncompressed files are
memory-mapped so that only the images kept are read into memory (5.7 GB for 4×4, 12.7 GB for
6×6).

==================  ============  =================================================================
name                size          values
==================  ============  =================================================================
object_color        4 / 6         (white,) green, red, blue, brown, (olive)
object_shape        4 / 6         cone, cube, (cylinder,) hexagonal prism, (pyramid,) sphere
object_size         2             small, large
camera_height       3             top, center, bottom
background_color    3             purple, sea green, salmon
horizontal_axis     40            0 … 39 (first degree of freedom of the robot arm)
vertical_axis       40            0 … 39 (second degree of freedom)
==================  ============  =================================================================
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np

from ..errors import CorruptDataFileError
from . import DATASETS
from .base import factor_strides, to_nchw_uint8
from .download import RemoteFile, fetch, load_npz_array
from .files import FileDataset, Grid

#: the official README's download links (commit a7a6729 of rr-learning/disentanglement_dataset)
_URL = "https://huggingface.co/datasets/waleedgondal/mpi3d/resolve/main/mpi3d_{}.npz"
MPI3D_FILES = {
    variant: RemoteFile(
        url=_URL.format(variant),
        filename=f"mpi3d_{variant}.npz",
        subdir="mpi3d",
        checksum=None,
        provenance="no checksum published in the official README; checked by the loader's shape/dtype checks only",
    )
    for variant in ("toy", "realistic", "real")
}

FACTOR_NAMES = (
    "object_color", "object_shape", "object_size", "camera_height",
    "background_color", "horizontal_axis", "vertical_axis",
)
TAIL_SIZES = (2, 3, 3, 40, 40)
COLORS_6 = ("white", "green", "red", "blue", "brown", "olive")
SHAPES_6 = ("cone", "cube", "cylinder", "hexagonal prism", "pyramid", "sphere")
#: positions in the 6-value lists of the 4 values of the 4×4 files
SUBSET_COLORS = (1, 2, 3, 4)
SUBSET_SHAPES = (0, 1, 3, 5)
LOCATELLO_FULL_GRID = {"toy": False, "realistic": False, "real": True}


def _sizes(n_values: int, tail=TAIL_SIZES) -> tuple[int, ...]:
    return (n_values, n_values, *tail)


@DATASETS.register("mpi3d")
class MPI3D(FileDataset):
    """MPI3D toy / realistic / real from its ``.npz`` file, uint8 on ``device``.

    Parameters
    ----------
    variant:
        ``toy`` (simple renders), ``realistic`` (realistic renders) or ``real`` (camera images).
    path:
        The ``.npz`` file (or a folder holding ``mpi3d_<variant>.npz``); ``None``: the cache,
        downloaded if absent from the README's Hugging Face links (1,036,800-image files, 12.7 GB
        each; no published checksum, so checked by shape and dtype only).
    full_grid:
        ``None``: Locatello et al.'s grid (4×4 colours × shapes for toy/realistic, 6×6 for real);
        ``True``: all values in the file; ``False``: the 4×4 grid.
    strict:
        Require the official layout (4×4 or 6×6 colours × shapes, 64×64 images); ``False``
        accepts any complete grid of the same layout, e.g. the tiny files the tests write.
    tail_sizes:
        With ``strict=False`` only: the sizes of the last five factors (default the official
        ``(2, 3, 3, 40, 40)``); the colour and shape sizes are then the square root of the rest.
    cache_dir, download, device:
        As for ``dsprites``.
    """

    files = tuple(MPI3D_FILES.values())
    factor_names = FACTOR_NAMES

    def __init__(
        self,
        variant: Literal["toy", "realistic", "real"] = "toy",
        path: str | None = None,
        *,
        full_grid: bool | None = None,
        cache_dir: str | None = None,
        download: bool = True,
        strict: bool = True,
        tail_sizes: tuple[int, int, int, int, int] | None = None,
        device: str = "cpu",
        placement: Literal["auto", "device", "stream"] = "auto",
    ) -> None:
        if variant not in MPI3D_FILES:
            raise ValueError(f"MPI3D variant must be one of toy, realistic, real; got {variant!r}.")
        if tail_sizes is not None and strict:
            raise ValueError("tail_sizes is only for files of a non-official grid (strict=False).")
        tail = tuple(int(s) for s in tail_sizes) if tail_sizes is not None else TAIL_SIZES
        self.variant = variant
        self._load(
            path, cache_dir=cache_dir, download=download, strict=strict, device=device, placement=placement,
            full_grid=full_grid, tail=tail,
        )

    def locate(self, path: str | None, *, cache_dir: str | None, download: bool) -> Path:
        """The variant's file: ``path``, else the cache (downloading into it if allowed)."""
        remote = MPI3D_FILES[self.variant]
        return fetch(remote, path=path, cache_dir=cache_dir, download=download, what=f"MPI3D-{self.variant} file")

    def read(self, file, *, strict: bool, full_grid: bool | None, tail: tuple[int, ...]) -> Grid:
        variant = self.variant
        images = load_npz_array(file, "images", mmap=True)
        if images.dtype != np.uint8 or images.ndim != 4 or images.shape[3] != 3:
            raise CorruptDataFileError(
                f"{file}: 'images' must be uint8 (N, 64, 64, 3), got {images.dtype} {images.shape}; "
                "this is not an MPI3D file."
            )
        n = images.shape[0]
        per_pair = int(np.prod(tail))
        n_values = int(round((n / per_pair) ** 0.5)) if n % per_pair == 0 else 0
        if n_values * n_values * per_pair != n or (strict and n_values not in (4, 6)):
            expected = " or ".join(f"{int(np.prod(_sizes(v, tail))):,}" for v in (4, 6))
            raise CorruptDataFileError(
                f"{file}: {n:,} images, expected {expected} (4×4 or 6×6 colours × shapes); the file "
                "is truncated or not an MPI3D file."
            )
        if strict and images.shape[1:3] != (64, 64):
            raise CorruptDataFileError(f"{file}: images are {images.shape[1:3]}, expected (64, 64).")
        want_full = LOCATELLO_FULL_GRID[variant] if full_grid is None else bool(full_grid)
        file_sizes = _sizes(n_values, tail)
        if n_values == 6 and not want_full:
            keep = self._subset_indices(file_sizes)
            sizes = _sizes(4, tail)
            colors = [COLORS_6[i] for i in SUBSET_COLORS]
            shapes = [SHAPES_6[i] for i in SUBSET_SHAPES]
            tensor = to_nchw_uint8(_Taken(images, keep), "NHWC")
        else:
            if n_values == 4 and full_grid:
                raise CorruptDataFileError(
                    f"{file} has the 4×4 grid (460,800 images), so full_grid=True cannot give 6×6; "
                    "use the 1,036,800-image file of the official README for that."
                )
            sizes = file_sizes
            if n_values == 6:
                colors, shapes = list(COLORS_6), list(SHAPES_6)
            elif n_values == 4:
                colors = [COLORS_6[i] for i in SUBSET_COLORS]
                shapes = [SHAPES_6[i] for i in SUBSET_SHAPES]
            else:
                colors = shapes = [str(i) for i in range(n_values)]
            tensor = to_nchw_uint8(images, "NHWC")
        del images
        values = [
            np.array(colors), np.array(shapes), np.array(["small", "large"][: sizes[2]]),
            np.array(["top", "center", "bottom"][: sizes[3]]),
            np.array(["purple", "sea green", "salmon"][: sizes[4]]),
            np.arange(sizes[5]), np.arange(sizes[6]),
        ]
        return Grid(tensor, sizes, values)

    @staticmethod
    def _subset_indices(file_sizes: tuple[int, ...]) -> np.ndarray:
        """Indices into a 6×6 file of the 4×4 grid, in the 4×4 grid's row-major order."""
        sub_sizes = (4, 4, *file_sizes[2:])
        grid = np.indices(sub_sizes).reshape(len(sub_sizes), -1).T
        grid[:, 0] = np.asarray(SUBSET_COLORS)[grid[:, 0]]
        grid[:, 1] = np.asarray(SUBSET_SHAPES)[grid[:, 1]]
        return grid @ factor_strides(file_sizes)


class _Taken:
    """``array[indices]`` sliceable lazily along the first axis (reads only what is sliced)."""

    def __init__(self, array, indices: np.ndarray) -> None:
        self.array, self.indices = array, indices
        self.shape = (len(indices), *array.shape[1:])

    def __getitem__(self, item: slice) -> np.ndarray:
        return np.asarray(self.array[self.indices[item]])
