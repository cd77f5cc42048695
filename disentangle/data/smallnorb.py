"""SmallNORB (LeCun et al. 2004) as in Locatello et al. 2019: ``data.name: smallnorb``.

Source: https://cs.nyu.edu/~ylclab/data/norb-v1.0-small/, six files (``-dat``, ``-cat``, ``-info``
for the training and the testing half, gzipped). Both halves are used together: 48,600 stereo
pairs of 96×96 grey images, of which the first camera's image is kept and resized to 64×64
(Lanczos) once at load time. The resized images are stored as uint8, so Lanczos' overshoot at
sharp edges is clipped to [0, 255]; disentanglement_lib resizes a 32-bit integer image and divides
by 255 without clipping, so its pixels can leave [0, 1] slightly (by up to about 0.1 on noise, far
less on these smooth renderings).

The files are in NORB's "binary matrix" format, read here with numpy (no pickle). The layout, as
documented on the dataset page and read by disentanglement_lib: a little-endian int32 magic number
giving the element type (``0x1E3D4C55`` uint8, ``0x1E3D4C54`` int32, ``0x1E3D4C56`` int16,
``0x1E3D4C51`` float32, ``0x1E3D4C53`` float64), an int32 number of dimensions ``ndim``, then
``max(ndim, 3)`` int32 sizes (the unused ones are 1), then the data in C order. ``-dat`` is uint8
``(24300, 2, 96, 96)``, ``-cat`` int32 ``(24300,)`` (the category), ``-info`` int32
``(24300, 4)``: instance, elevation (0–8), azimuth (0, 2, …, 34) and lighting (0–5).

The images are put in the row-major order of the full grid (category, instance, elevation,
azimuth, lighting) = 5×10×9×18×6, whatever their order in the files. As in Locatello et al. the
**instance is not a factor**: the factors are

=============  =====  =====================================================
name           size   values
=============  =====  =====================================================
category       5      animal, human, airplane, truck, car
elevation      9      30, 35, …, 70 degrees
azimuth        18     0, 20, …, 340 degrees (file values 0, 2, …, 34)
lighting       6      0 … 5 (lighting condition)
=============  =====  =====================================================

and the instance (10 per category) is drawn uniformly whenever an observation is drawn for given
factors. ``len()`` is the number of stored images (48,600), ``sample_batch`` draws uniformly over
them (the same distribution), and grid indices (``raw``, ``observe``, ``indices_to_factors``)
index the stored images; :meth:`SmallNORB.factors_to_indices` needs the instances too.

Uncertain format details: the header layout and magic numbers above are as documented and as
disentanglement_lib reads them, but this loader was only run on small files written to that
specification, not on the real files.
"""
from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path

import numpy as np
import torch

from ..errors import CorruptDataFileError, DataPathNotFoundError
from . import DATASETS
from .base import (
    GridDataset,
    check_factors,
    factor_strides,
    gather_rows,
    to_nchw_uint8,
    torch_generator_from_numpy,
)
from .custom import resize_images
from .download import RemoteFile, fetch, require_path
from .files import reading

_BASE_URL = "https://cs.nyu.edu/~ylclab/data/norb-v1.0-small/"
_CHUNKS = ("5x46789x9x18x6x2x96x96-training", "5x01235x9x18x6x2x96x96-testing")
# sha256 of the gzipped files, from tensorflow_datasets' url_checksums/smallnorb.txt
_SHA256 = {
    "5x46789x9x18x6x2x96x96-training-dat": "5ffd6272a07d32695ee1082a26a41a93a37aab8c28da047f8c34ed348d214873",
    "5x46789x9x18x6x2x96x96-training-cat": "2784e542c1922060691090952b6cd6278879a216c90f81476f0f00256d42cdaa",
    "5x46789x9x18x6x2x96x96-training-info": "de7eb932ebe7a4ee16217fead60660d0eb3d23632c2f4d1c51f88c501c17bf32",
    "5x01235x9x18x6x2x96x96-testing-dat": "cf7104eed3e51174d2f65b66d1e5878b9da233b886f161b0d88f4510ba2c7474",
    "5x01235x9x18x6x2x96x96-testing-cat": "ecaf6d5bb8c3bc5eab9cf0258f6d2198dd474e016e374836fc097f2e5ff509ff",
    "5x01235x9x18x6x2x96x96-testing-info": "16adf314226327ee006d1a44db8cfef52773c06c829951d5653a9f6f310248a2",
}
SMALLNORB_FILES = {
    (chunk, part): RemoteFile(
        url=f"{_BASE_URL}smallnorb-{chunk}-{part}.mat.gz",
        filename=f"smallnorb-{chunk}-{part}.mat.gz",
        subdir="smallnorb",
        checksum="sha256:" + _SHA256[f"{chunk}-{part}"],
        provenance="sha256 from tensorflow_datasets' url_checksums/smallnorb.txt",
    )
    for chunk in _CHUNKS
    for part in ("dat", "cat", "info")
}

FACTOR_NAMES = ("category", "elevation", "azimuth", "lighting")
FACTOR_SIZES = (5, 9, 18, 6)
N_INSTANCES = 10
CATEGORY_NAMES = ("animal", "human", "airplane", "truck", "car")

_MAGIC = {
    0x1E3D4C55: np.uint8,
    0x1E3D4C54: np.int32,
    0x1E3D4C56: np.int16,
    0x1E3D4C51: np.float32,
    0x1E3D4C53: np.float64,
}


def read_binary_matrix(path: str | os.PathLike) -> np.ndarray:
    """Read a NORB binary-matrix file (optionally gzipped; see the module docstring)."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with reading(path, errors=(OSError, EOFError, zlib.error)), opener(path, "rb") as f:
        data = f.read()
    if len(data) < 20:
        raise CorruptDataFileError(f"{path} is too short ({len(data)} bytes) to be a NORB binary matrix.")
    magic, ndim = (int(v) for v in np.frombuffer(data, "<i4", 2))
    if magic not in _MAGIC:
        raise CorruptDataFileError(
            f"{path}: magic number {magic:#x} is not one of NORB's binary-matrix types "
            f"({', '.join(f'{m:#x}' for m in _MAGIC)}); this is not a SmallNORB file."
        )
    if not 0 < ndim <= 8:
        raise CorruptDataFileError(f"{path}: implausible number of dimensions {ndim} in the header.")
    stored = max(ndim, 3)
    dims = tuple(int(d) for d in np.frombuffer(data, "<i4", stored, 8)[:ndim])
    offset = 8 + 4 * stored
    dtype = np.dtype(_MAGIC[magic]).newbyteorder("<")
    expected = int(np.prod(dims)) * dtype.itemsize
    if len(data) - offset != expected:
        raise CorruptDataFileError(
            f"{path}: the header announces {dims} of {dtype.name} ({expected} bytes) but "
            f"{len(data) - offset} bytes follow; the file is truncated or corrupt."
        )
    return np.frombuffer(data, dtype, offset=offset).reshape(dims).astype(dtype.newbyteorder("="), copy=False)


#: what ``data.path`` of smallnorb names, and where to get it
_EXPECTED = (
    "data.path for smallnorb must be a folder holding the six SmallNORB files "
    "(smallnorb-<chunk>-dat/cat/info.mat.gz, or gunzipped .mat). Get them from "
    f"{_BASE_URL}, or leave data.path unset to use the cache, which downloads them automatically."
)


def _locate(chunk: str, part: str, path, cache_dir, download) -> Path:
    remote = SMALLNORB_FILES[(chunk, part)]
    if path is not None:
        folder = require_path(path, what="SmallNORB folder", option="data.path", expected=_EXPECTED, kind="folder")
        for name in (remote.filename, remote.filename[: -len(".gz")]):
            if (folder / name).is_file():
                return folder / name
        raise DataPathNotFoundError(
            f"The SmallNORB folder given by data.path, {folder}, has no {remote.filename} (or its gunzipped "
            f"{remote.filename[:-3]}). Get it from {remote.url}."
        )
    return fetch(remote, cache_dir=cache_dir, download=download, what="SmallNORB file")


@DATASETS.register("smallnorb")
class SmallNORB(GridDataset):
    """SmallNORB, 4 factors (instance hidden), 48,600 images of 1×64×64 uint8 on ``device``.

    Parameters
    ----------
    path:
        A folder holding the six files (``.mat.gz`` or gunzipped ``.mat``); ``None``: the cache,
        downloading what is missing.
    cache_dir, download, device:
        As for ``dsprites``.
    strict:
        Require the official grid (5 categories × 10 instances × 9 × 18 × 6); ``False`` accepts
        any complete grid in the same format (the tests write tiny ones).
    """

    deterministic_observations = False  # the hidden instance is drawn per observation

    scale = 1.0 / 255.0

    def __init__(
        self,
        path: str | None = None,
        *,
        cache_dir: str | None = None,
        download: bool = True,
        strict: bool = True,
        device: str = "cpu",
    ) -> None:
        images, features = [], []
        for chunk in _CHUNKS:
            dat = read_binary_matrix(_locate(chunk, "dat", path, cache_dir, download))
            cat = read_binary_matrix(_locate(chunk, "cat", path, cache_dir, download))
            info = read_binary_matrix(_locate(chunk, "info", path, cache_dir, download))
            if dat.ndim != 4 or dat.shape[1] != 2 or dat.dtype != np.uint8:
                raise CorruptDataFileError(
                    f"SmallNORB {chunk}-dat must be uint8 (N, 2, H, W), got {dat.dtype} {dat.shape}."
                )
            if cat.shape != (dat.shape[0],) or info.shape != (dat.shape[0], 4):
                raise CorruptDataFileError(
                    f"SmallNORB {chunk}: cat {cat.shape} / info {info.shape} do not match "
                    f"{dat.shape[0]} images (expected ({dat.shape[0]},) and ({dat.shape[0]}, 4))."
                )
            images.append(dat[:, 0])
            features.append(np.column_stack([cat, info]).astype(np.int64))
        feats = np.concatenate(features)
        if (feats[:, 3] % 2).any():
            raise CorruptDataFileError("SmallNORB info: azimuth values must be even (0, 2, ..., 34).")
        feats[:, 3] //= 2
        if (feats < 0).any():
            raise CorruptDataFileError("SmallNORB cat/info hold negative values.")
        full_sizes = tuple(int(s) for s in feats.max(axis=0) + 1)
        n = int(np.prod(full_sizes))
        index = feats @ factor_strides(full_sizes)
        if feats.shape[0] != n or np.bincount(index, minlength=n).max() != 1:
            raise CorruptDataFileError(
                f"SmallNORB: the {feats.shape[0]} images do not cover the grid (category, instance, "
                f"elevation, azimuth, lighting) of sizes {full_sizes} exactly once."
            )
        official = (FACTOR_SIZES[0], N_INSTANCES, *FACTOR_SIZES[1:])
        if strict and full_sizes != official:
            raise CorruptDataFileError(
                f"SmallNORB: grid sizes {full_sizes}, expected the official {official}; pass "
                "strict=False (data.strict: false) for another grid in the same format."
            )
        stacked = np.concatenate(images)
        order = np.argsort(index, kind="stable")
        stacked = resize_images(stacked[order], 64)
        self.images = to_nchw_uint8(stacked, "NHW").to(device)
        self._full_sizes = full_sizes
        self._full_strides = factor_strides(full_sizes)
        self._init_grid(FACTOR_NAMES, (full_sizes[0], *full_sizes[2:]), device)
        self.factor_values = [
            np.arange(full_sizes[0]),
            30.0 + 5.0 * np.arange(full_sizes[2]),
            20.0 * np.arange(full_sizes[3]),
            np.arange(full_sizes[4]),
        ]
        self.n_instances = full_sizes[1]
        self.path = str(path) if path is not None else None

    # ------------------------------------------------------------------ storage
    @property
    def image_shape(self) -> tuple[int, int, int]:
        c, h, w = self.images.shape[1:]
        return int(c), int(h), int(w)

    def __len__(self) -> int:
        return int(self.images.shape[0])

    def to(self, device: torch.device | str) -> SmallNORB:
        super().to(device)
        self.images = self.images.to(self.device)
        return self

    def raw(self, indices: torch.Tensor) -> torch.Tensor:
        """Stored images by index into all 48,600 images (category, instance, ... row-major)."""
        return gather_rows(self.images, indices)

    # ------------------------------------------------------------------ factors <-> images
    def _full_factors(self, indices: np.ndarray) -> np.ndarray:
        return (indices[:, None] // self._full_strides) % np.asarray(self._full_sizes, dtype=np.int64)

    def indices_to_factors(self, indices) -> np.ndarray:
        idx = np.asarray(indices.cpu() if isinstance(indices, torch.Tensor) else indices, np.int64)
        return np.delete(self._full_factors(idx), 1, axis=1)

    def index_tensor_to_factors(self, indices: torch.Tensor) -> torch.Tensor:
        strides = torch.as_tensor(self._full_strides, device=indices.device)
        sizes = torch.as_tensor(self._full_sizes, device=indices.device)
        full = torch.div(indices[:, None], strides, rounding_mode="floor") % sizes
        return full[:, [0, 2, 3, 4]]

    def instances_of(self, indices) -> np.ndarray:
        """The hidden instance of stored images."""
        idx = np.asarray(indices.cpu() if isinstance(indices, torch.Tensor) else indices, np.int64)
        return self._full_factors(idx)[:, 1]

    def factors_to_indices(self, factors: np.ndarray, instances: np.ndarray | None = None) -> np.ndarray:
        """Image indices for factor classes ``(n, 4)`` and the hidden ``instances`` ``(n,)``."""
        if instances is None:
            raise ValueError(
                "SmallNORB images depend on the hidden instance too: pass instances= (n values in "
                f"[0, {self.n_instances - 1}]) or use sample_observations_from_factors, which draws them."
            )
        factors = check_factors(factors, self.factor_sizes)
        instances = np.broadcast_to(np.asarray(instances, dtype=np.int64), (factors.shape[0],))
        if ((instances < 0) | (instances >= self.n_instances)).any():
            raise ValueError(f"instances must lie in [0, {self.n_instances - 1}].")
        full = np.column_stack([factors[:, 0], instances, factors[:, 1:]])
        return full @ self._full_strides

    def sample_observations_from_factors(self, factors: np.ndarray, rng: np.random.Generator) -> torch.Tensor:
        factors = check_factors(factors, self.factor_sizes)
        instances = rng.integers(0, self.n_instances, size=factors.shape[0])
        idx = torch.as_tensor(self.factors_to_indices(factors, instances), device=self.device)
        return self.observe(idx, torch_generator_from_numpy(rng, self.device))
