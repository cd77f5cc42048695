"""dSprites (Matthey et al. 2017), loaded from the official ``.npz`` file: ``data.name: dsprites``.

The file ``dsprites_ndarray_co1sh3sc6or40x32y32_64x64.npz`` (https://github.com/deepmind/dsprites-dataset)
holds 737,280 binary 64×64 images of one white sprite on black, in row-major order of the factor
classes (position y fastest). Only two arrays are read, both without pickle
(``np.load(..., allow_pickle=False)``): ``imgs`` (uint8 0/1) and ``latents_classes`` (int64), plus
``latents_values`` for the physical value of each class. The pickled ``metadata`` is never
touched.

Factors (the constant ``color`` column of the file is dropped):

=============  =====  ===============================================
name           size   values
=============  =====  ===============================================
shape          3      square, ellipse, heart (file values 1, 2, 3)
scale          6      0.5 … 1.0, linearly spaced
orientation    40     0 … 2π radians, linearly spaced (both ends, so
                      the first and last class look alike for the
                      square and the ellipse)
position_x     32     0 … 1, linearly spaced
position_y     32     0 … 1, linearly spaced
=============  =====  ===============================================

Grid inference and ``strict``: the factor sizes are read from ``latents_classes`` (max + 1 per
column) and the loader checks that the file really is the full row-major grid of those sizes.
With ``strict=True`` (the default) the sizes must also equal the official ``(3, 6, 40, 32, 32)``;
``strict=False`` accepts any complete grid of the same format, e.g. a subsampled dSprites-format
file, or the tiny files the tests write (the full file is 3 GB decompressed).
"""
from __future__ import annotations

import numpy as np

from ..errors import CorruptDataFileError
from . import DATASETS
from .base import to_nchw_uint8
from .download import RemoteFile, load_npz_array
from .files import FileDataset, Grid, is_row_major_grid

DSPRITES_FILE = RemoteFile(
    url="https://github.com/deepmind/dsprites-dataset/raw/master/dsprites_ndarray_co1sh3sc6or40x32y32_64x64.npz",
    filename="dsprites_ndarray_co1sh3sc6or40x32y32_64x64.npz",
    subdir="dsprites",
    # The MD5 used by several independent loaders (e.g. torchvision-style dSprites classes,
    # latte, DisCo); DeepMind publishes no checksum itself.
    checksum="md5:7da33b31b13a06f4b04a70402ce90c2e",
    provenance="md5 agreed on by several independent open-source loaders; not published by DeepMind",
)

FACTOR_NAMES = ("shape", "scale", "orientation", "position_x", "position_y")
FACTOR_SIZES = (3, 6, 40, 32, 32)
SHAPE_NAMES = ("square", "ellipse", "heart")


def _check_grid(classes: np.ndarray, path) -> tuple[int, ...]:
    """Factor sizes of a complete row-major grid given per-image class indices, or raise."""
    if classes.size == 0 or (classes < 0).any():
        raise CorruptDataFileError(f"{path}: latents_classes is empty or has negative classes.")
    sizes = tuple(int(s) for s in classes.max(axis=0) + 1)
    if not is_row_major_grid(classes, sizes):
        raise CorruptDataFileError(
            f"{path}: the images are not the complete row-major grid of factor sizes {sizes} "
            f"({classes.shape[0]} rows for {int(np.prod(sizes))} grid points); the file is not in dSprites order."
        )
    return sizes


@DATASETS.register("dsprites")
class DSprites(FileDataset):
    """dSprites from its official ``.npz`` file, all images on ``device`` as uint8 (2.8 GiB).

    Parameters
    ----------
    path:
        The ``.npz`` file (or a folder holding it). ``None``: the cache
        (``$DISENTANGLE_DATA`` or ``~/.cache/disentangle``)/dsprites/, downloaded if absent.
    cache_dir:
        Overrides the cache folder.
    download:
        Download the file into the cache when it is missing.
    strict:
        Require the official factor sizes ``(3, 6, 40, 32, 32)``; ``False`` accepts any complete
        grid in the dSprites format (see the module docstring).
    device:
        Where the images live and batches are drawn.
    """

    files = (DSPRITES_FILE,)
    factor_names = FACTOR_NAMES
    what = "dSprites file"
    scale = 1.0  # 0/1 masks

    def read(self, file, *, strict: bool) -> Grid:
        classes = load_npz_array(file, "latents_classes")  # small: checked before the 3 GB of images
        if classes.ndim != 2 or classes.shape[1] != 6 or not np.issubdtype(classes.dtype, np.integer):
            raise CorruptDataFileError(
                f"{file}: latents_classes must be an integer array of shape (N, 6), got "
                f"{classes.dtype} {classes.shape}; this is not a dSprites file."
            )
        imgs = load_npz_array(file, "imgs")
        if imgs.dtype != np.uint8 or imgs.ndim != 3:
            raise CorruptDataFileError(
                f"{file}: imgs must be uint8 of shape (N, H, W), got {imgs.dtype} {imgs.shape}; "
                "this is not a dSprites file."
            )
        if imgs.shape[0] != classes.shape[0]:
            raise CorruptDataFileError(
                f"{file}: {imgs.shape[0]} images but {classes.shape[0]} rows of latents_classes."
            )
        if (classes[:, 0] != classes[0, 0]).any():
            raise CorruptDataFileError(f"{file}: the color column of latents_classes is not constant.")
        classes = classes[:, 1:].astype(np.int64)
        sizes = _check_grid(classes, file)
        if strict and sizes != FACTOR_SIZES:
            raise CorruptDataFileError(
                f"{file}: factor sizes {sizes}, expected the official {FACTOR_SIZES} of dSprites; "
                "pass strict=False (data.strict: false) to use a dSprites-format file of another grid."
            )
        if strict and imgs.shape[1:] != (64, 64):
            raise CorruptDataFileError(f"{file}: images are {imgs.shape[1:]}, expected (64, 64).")
        if int(imgs.max(initial=0)) > 1:
            raise CorruptDataFileError(f"{file}: imgs must hold 0/1 values, found values up to {imgs.max()}.")
        values = self._factor_values(file, classes, sizes)
        return Grid(to_nchw_uint8(imgs, "NHW"), sizes, values)

    @staticmethod
    def _factor_values(file, classes: np.ndarray, sizes: tuple[int, ...]) -> list[np.ndarray]:
        try:
            latents = load_npz_array(file, "latents_values")
        except CorruptDataFileError:
            latents = None
        if latents is None or latents.shape != (classes.shape[0], 6):
            return [np.arange(s, dtype=np.float64) for s in sizes]
        values = []
        for k, size in enumerate(sizes):
            v = np.zeros(size, dtype=np.float64)
            v[classes[:, k]] = latents[:, k + 1]
            values.append(v)
        return values
