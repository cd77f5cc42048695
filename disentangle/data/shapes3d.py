"""3D Shapes (Burgess & Kim 2018), from the official ``3dshapes.h5``: ``data.name: shapes3d``.

The HDF5 file (https://github.com/deepmind/3d-shapes, served from
``storage.googleapis.com/3d-shapes/3dshapes.h5``) holds ``images`` uint8 ``(480000, 64, 64, 3)``
and ``labels`` float64 ``(480000, 6)``, in row-major order of the six factors (orientation
fastest). It is read once with h5py, in chunks, straight into a uint8 ``(N, 3, 64, 64)`` tensor.

=============  =====  =====================================================
name           size   values (from ``labels``)
=============  =====  =====================================================
floor_hue      10     0.0, 0.1, …, 0.9 (hue)
wall_hue       10     0.0, 0.1, …, 0.9 (hue)
object_hue     10     0.0, 0.1, …, 0.9 (hue)
scale          8      0.75 … 1.25, linearly spaced
shape          4      0 cube, 1 cylinder, 2 sphere, 3 capsule
orientation    15     -30 … 30 degrees, linearly spaced
=============  =====  =====================================================

The classes are derived from the labels (the rank of each value among its column's distinct
values) and the loader checks that the rows form the complete row-major grid. ``strict=False``
accepts a file of the same layout with another grid (the tests write tiny ones).
"""
from __future__ import annotations

import numpy as np

from ..errors import CorruptDataFileError
from . import DATASETS
from .base import to_nchw_uint8
from .download import RemoteFile
from .files import FileDataset, Grid, is_row_major_grid, reading

SHAPES3D_FILE = RemoteFile(
    url="https://storage.googleapis.com/3d-shapes/3dshapes.h5",
    filename="3dshapes.h5",
    subdir="shapes3d",
    checksum="sha256:0a0f6ed98baff276a50f3a081a7434d788da63cb135a98189b2a5b5769be1785",
    size=267_573_662,
    provenance="sha256 from tensorflow_datasets' url_checksums/shapes3d.txt; the md5 "
    "099a2078d58cec4daad0702c55d06868 and the size agree in several other loaders",
)

FACTOR_NAMES = ("floor_hue", "wall_hue", "object_hue", "scale", "shape", "orientation")
FACTOR_SIZES = (10, 10, 10, 8, 4, 15)
SHAPE_NAMES = ("cube", "cylinder", "sphere", "capsule")


def labels_to_classes(labels: np.ndarray, path) -> tuple[np.ndarray, list[np.ndarray]]:
    """Per-column class indices (rank among distinct values) and the distinct values."""
    classes = np.empty(labels.shape, dtype=np.int64)
    values = []
    for k in range(labels.shape[1]):
        uniq, inverse = np.unique(labels[:, k], return_inverse=True)
        classes[:, k] = inverse.reshape(-1)
        values.append(uniq)
    sizes = tuple(len(v) for v in values)
    if not is_row_major_grid(classes, sizes):
        raise CorruptDataFileError(
            f"{path}: the labels do not form the complete row-major grid of sizes {sizes} "
            f"({labels.shape[0]} rows for {int(np.prod(sizes))} grid points); this is not a 3dshapes.h5 file."
        )
    return classes, values


@DATASETS.register("shapes3d")
class Shapes3D(FileDataset):
    """3D Shapes from ``3dshapes.h5``, all 480,000 images on ``device`` as uint8 (5.9 GB).

    ``path``, ``cache_dir``, ``download``, ``strict`` and ``device`` work as for ``dsprites``.
    """

    files = (SHAPES3D_FILE,)
    factor_names = FACTOR_NAMES
    what = "3D Shapes file"

    def read(self, file, *, strict: bool) -> Grid:
        import h5py

        with reading(file, "HDF5", (OSError, KeyError, ValueError)), h5py.File(file, "r") as h5:
            for key in ("images", "labels"):
                if key not in h5:
                    raise CorruptDataFileError(
                        f"{file} has no dataset '{key}' (it has {', '.join(h5.keys()) or 'none'}); "
                        "this is not a 3dshapes.h5 file."
                    )
            images, labels = h5["images"], h5["labels"]
            if images.dtype != np.uint8 or images.ndim != 4 or images.shape[3] != 3:
                raise CorruptDataFileError(
                    f"{file}: 'images' must be uint8 (N, H, W, 3), got {images.dtype} {images.shape}."
                )
            if labels.ndim != 2 or labels.shape != (images.shape[0], 6):
                raise CorruptDataFileError(
                    f"{file}: 'labels' must have shape ({images.shape[0]}, 6), got {labels.shape}."
                )
            classes, values = labels_to_classes(np.asarray(labels[()], dtype=np.float64), file)
            sizes = tuple(len(v) for v in values)
            if strict and (sizes != FACTOR_SIZES or images.shape[1:3] != (64, 64)):
                raise CorruptDataFileError(
                    f"{file}: factor sizes {sizes} and images {images.shape[1:3]}, expected the "
                    f"official {FACTOR_SIZES} and (64, 64); pass strict=False (data.strict: false) "
                    "to use another grid in the same layout."
                )
            return Grid(to_nchw_uint8(images, "NHWC"), sizes, values)
