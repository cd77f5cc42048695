"""Cars3D (Reed et al. 2015) as in Locatello et al. 2019: ``data.name: cars3d``.

Source: ``nips2015-analogy-data.tar.gz`` from http://www.scottreed.info/ (the data of "Deep Visual
Analogy-Making"). Inside, ``data/cars/`` holds one MATLAB file per car model,
``car_XXX_mesh.mat``, and ``list.txt`` naming them in order. Each ``.mat`` file's ``im`` array is
uint8 ``(128, 128, 3, 24, 4)``: height, width, RGB, 24 azimuths, 4 elevations. The loader reads
the ``.mat`` files straight from the archive (or from a folder of them) with ``scipy.io.loadmat``,
resizes every image to 64×64 (Lanczos) once at load time and stores them in the row-major order
of (elevation, azimuth, object_type), the factor order of disentanglement_lib.

=============  =====  ======================================================
name           size   values
=============  =====  ======================================================
elevation      4      class indices 0–3 (the angles are not given with the data)
azimuth        24     class indices 0–23 (a full turn in 24 steps)
object_type    183    car model, in the order of ``list.txt`` (else sorted file names)
=============  =====  ======================================================

Uncertain format details: the axis order of ``im`` (azimuth on axis 3, elevation on axis 4) is
the one disentanglement_lib and other loaders use; the images were not checked against the real
archive here, only against files written to that layout. MATLAB v7.3 (HDF5) files are not
supported by ``loadmat``; the published files are the older format.
"""
from __future__ import annotations

import io
import tarfile
from pathlib import Path

import numpy as np

from ..errors import CorruptDataFileError, DataPathNotFoundError
from . import DATASETS
from .base import to_nchw_uint8
from .custom import resize_images
from .download import RemoteFile, require_path
from .files import FileDataset, Grid, reading

CARS3D_FILE = RemoteFile(
    url="http://www.scottreed.info/files/nips2015-analogy-data.tar.gz",
    filename="nips2015-analogy-data.tar.gz",
    subdir="cars3d",
    checksum="md5:4e866a7919c1beedf53964e6f7a23686",
    provenance="md5 used by two independent loaders (disent, latte); not published by the authors",
)

#: what ``data.path`` of cars3d names, and where to get it
_EXPECTED = (
    f"data.path for cars3d names the archive {CARS3D_FILE.filename} or a folder of the car .mat files "
    f"(its extracted cars folder). Get the archive from {CARS3D_FILE.url}, or leave data.path unset to "
    "use the cache, which downloads it automatically."
)

FACTOR_NAMES = ("elevation", "azimuth", "object_type")
FACTOR_SIZES = (4, 24, 183)


def _load_mat(data: bytes, name: str) -> np.ndarray:
    import scipy.io

    try:
        im = scipy.io.loadmat(io.BytesIO(data))["im"]
    except KeyError:
        raise CorruptDataFileError(f"Cars3D file {name} has no 'im' array.") from None
    except Exception as err:  # scipy raises several types for bad files
        raise CorruptDataFileError(
            f"Cars3D file {name} could not be read as a MATLAB file ({type(err).__name__}: {err})."
        ) from err
    if im.dtype != np.uint8 or im.ndim != 5 or im.shape[2] != 3:
        raise CorruptDataFileError(
            f"Cars3D file {name}: 'im' must be uint8 (H, W, 3, azimuths, elevations), got {im.dtype} {im.shape}."
        )
    return im


def _order(names: list[str], listing: str | None) -> list[str]:
    """Order of the .mat files: ``list.txt`` if it names them all, else sorted names."""
    by_stem = {Path(n).stem: n for n in names}
    if listing:
        stems = [line.strip() for line in listing.splitlines() if line.strip()]
        if sorted(stems) == sorted(by_stem):
            return [by_stem[s] for s in stems]
    return sorted(names, key=lambda n: Path(n).name)


def _read_sources(source: Path) -> list[tuple[str, bytes]]:
    """``(name, bytes)`` of every car ``.mat`` file in an archive or folder, in object order."""
    if source.is_dir():
        for folder in (source, source / "cars", source / "data" / "cars"):
            mats = sorted(folder.glob("*.mat"))
            if mats:
                listing = (folder / "list.txt").read_text() if (folder / "list.txt").is_file() else None
                order = _order([str(m) for m in mats], listing)
                return [(Path(m).name, Path(m).read_bytes()) for m in order]
        raise DataPathNotFoundError(
            f"The Cars3D folder {source} holds no .mat files (looked in it, cars/ and data/cars/). "
            f"Give data.path the archive {CARS3D_FILE.filename} or its extracted cars folder."
        )
    with reading(source, "a tar archive", (tarfile.TarError, OSError, EOFError)), tarfile.open(source, "r:*") as tar:
        members = {m.name: m for m in tar.getmembers() if m.isfile()}
        mats = [n for n in members if n.endswith(".mat") and Path(n).parent.name == "cars"]
        if not mats:
            raise CorruptDataFileError(
                f"{source} holds no cars/*.mat files; it is not the Cars3D archive {CARS3D_FILE.filename}."
            )
        listing_name = next((n for n in members if n.endswith("cars/list.txt")), None)
        listing = tar.extractfile(members[listing_name]).read().decode() if listing_name else None
        order = _order(mats, listing)
        return [(Path(n).name, tar.extractfile(members[n]).read()) for n in order]


@DATASETS.register("cars3d")
class Cars3D(FileDataset):
    """Cars3D, 17,568 RGB images resized to 64×64, stored on ``device`` as uint8 (216 MB).

    ``path`` is the archive ``nips2015-analogy-data.tar.gz`` or a folder of the car ``.mat`` files
    (the extracted ``cars`` folder, or a folder holding ``cars/`` or ``data/cars/``); ``None``:
    the cache, downloading the archive if absent. ``strict`` requires the official grid
    (4, 24, 183); ``cache_dir``, ``download``, ``device`` work as for ``dsprites``.
    """

    files = (CARS3D_FILE,)
    factor_names = FACTOR_NAMES
    what = "Cars3D archive"

    def locate(self, path: str | None, *, cache_dir: str | None, download: bool) -> Path:
        """A folder of ``.mat`` files as given, else the archive (``path`` or the cache)."""
        if path is None:
            return super().locate(path, cache_dir=cache_dir, download=download)
        given = require_path(path, what=self.what, option="data.path", expected=_EXPECTED, kind="any")
        if given.is_dir() and not (given / CARS3D_FILE.filename).is_file():
            return given
        return super().locate(path, cache_dir=cache_dir, download=download)

    def read(self, source, *, strict: bool) -> Grid:
        objects = []
        shape = None
        for name, data in _read_sources(source):
            im = _load_mat(data, name)
            if shape is None:
                shape = im.shape
            elif im.shape != shape:
                raise CorruptDataFileError(f"Cars3D file {name} has 'im' of shape {im.shape}, others {shape}.")
            # (H, W, 3, azimuth, elevation) -> (elevation, azimuth, H, W, 3), then 64x64
            views = im.transpose(4, 3, 0, 1, 2)
            n_elev, n_azim = views.shape[:2]
            small = resize_images(np.ascontiguousarray(views.reshape(-1, *views.shape[2:])), 64)
            objects.append(small.reshape(n_elev, n_azim, 64, 64, 3))
        sizes = (shape[4], shape[3], len(objects))
        if strict and sizes != FACTOR_SIZES:
            raise CorruptDataFileError(
                f"Cars3D ({source}): grid sizes {sizes}, expected the official {FACTOR_SIZES}; pass "
                "strict=False (data.strict: false) for another grid in the same format."
            )
        # (object, elevation, azimuth, ...) -> (elevation, azimuth, object, ...)
        stacked = np.stack(objects, axis=2).reshape(-1, 64, 64, 3)
        del objects
        return Grid(to_nchw_uint8(stacked, "NHWC"), sizes, [np.arange(s) for s in sizes])
