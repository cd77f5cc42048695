"""Falcor3D (Nie et al. 2020), NVIDIA's high-resolution living-room renders: ``data.name: falcor3d``.

Source: https://github.com/NVlabs/High-res-disentanglement-datasets (README and
``dataset_demo.py`` read at commit ``6233714``; CC BY 4.0). 233,280 renders of one living-room
scene at 1024×1024, every combination of seven factors, each "uniformly sampled in the normalized
range of variations [0, 1]":

==================  =====  =========================================================
name                size   values (from the labels file)
==================  =====  =========================================================
lighting_intensity  5      0, 0.25, …, 1
lighting_x_dir      6      0, 0.2, …, 1
lighting_y_dir      6      0, 0.2, …, 1
lighting_z_dir      6      0, 0.2, …, 1
camera_x_pos        6      0, 0.2, …, 1
camera_y_pos        6      0, 0.2, …, 1
camera_z_pos        6      0, 0.2, …, 1
==================  =====  =========================================================

(the README writes the names with hyphens, ``lighting_x-dir``; the values in the table are the
normalised ``k / (size − 1)`` that third-party code reads from the file, not checked on the
real file here). Image ``index.png``, the index zero-padded to six digits, shows
``index = lighting_intensity·46656 + lighting_x·7776 + lighting_y·1296 + lighting_z·216 +
camera_x·36 + camera_y·6 + camera_z`` (README): row-major in the order above, the last fastest.

**Files.** The README links the full 1024×1024 set (98 GB) and "a downsampled version (resolution
128x128)", ``Falcor3D_128x128`` (3.7 GB), both on Google Drive; this loader downloads the 128×128
one. The README does not describe what the archive holds nor publish a checksum or an exact size.
Third-party loaders read it (zip) as a folder ``Falcor3D_down128/`` holding ``images/000000.png``
… and ``train-rec.labels``, a NumPy ``.npy`` array ``(233280, 7)`` of the normalised factor values
(tfds builders and scripts found by code search; a semi-StyleGAN data loader, whose repository
was not identified, reads the same ``train-rec.labels`` beside ``images/`` for its Falcor3D
folders). That layout is what the
loader expects, in the zip (read in place) or extracted; it was checked only on files written to
it, not on the real archive.

**Reading.** The factor classes are the ranks of each labels column's distinct values, and the
loader checks that they form the complete row-major grid (so the order of the factors and of the
images is verified by value, from the publisher's labels, not assumed), and that image ``i`` is
``{i:06d}.png``. Every image is decoded once (Pillow; an alpha channel composited on black as in
:mod:`~disentangle.data.image_folder`), resized to ``image_size`` × ``image_size`` with Lanczos
when it is not that size already (default 128: the 128×128 archive is stored as it is; 64 for
conv64) and written as a uint8 ``.npy`` stack to ``<cache>/falcor3d/`` (atomically, with a
``.json`` index; reused while the archive or folder is unchanged). ``model.backbone: conv128``
takes the default size. In memory: 233,280 × 3 × 128² bytes = 11.5 GB (2.9 GB at 64).

:class:`HighResGridDataset` is the loader shared with ``isaac3d`` (:mod:`disentangle.data.isaac3d`).
"""
from __future__ import annotations

import io
import os
import re
import threading
import zipfile
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from ..errors import CorruptDataFileError, DataFileNotFoundError, DataPathNotFoundError
from . import DATASETS
from .celeba import _drive
from .download import RemoteFile, cache_path, default_cache_dir, fetch, require_path
from .files import FileDataset, Grid, is_row_major_grid, reading
from .image_folder import (
    CacheFiles,
    Decoded,
    _bytes_opener,
    _lanczos,
    _path_opener,
    cache_key,
    cached_decode,
    check_image_size,
    decode_images,
    source_prefix,
)

README = "https://github.com/NVlabs/High-res-disentanglement-datasets"
#: where image ``i`` lives, relative to the dataset folder
IMAGES_FOLDER = "images"
_IMAGE_NAME = re.compile(r"^(\d{6,})\.png$")


class HighResGridDataset(FileDataset):
    """A dataset of NVlabs/High-res-disentanglement-datasets: a folder ``images/`` of
    ``{index:06d}.png`` with a labels file beside it (``.npy``, one row of normalised factor values
    per image), as a zip archive or extracted. Subclasses set the files, names and sizes.

    Parameters
    ----------
    path:
        The zip archive, or a folder holding ``images/`` and the labels file (or holding the
        archive's top folder, or the archive under its cache name). ``None``: the cache
        (``$DISENTANGLE_DATA`` or ``~/.cache/disentangle``)/<dataset>/, the 128×128 archive
        downloaded into it if absent.
    image_size:
        The side of the stored square images (Lanczos from the files' size; default 128).
    cache_dir:
        Overrides the cache folder (download and decoded images).
    download:
        Download the archive into the cache when it is missing.
    strict:
        Require the official grid; ``False`` accepts any complete grid in the same layout (the
        factor sizes are then read from the labels), e.g. the tiny files the tests write.
    device:
        Where the images live and batches are drawn.
    """

    #: the labels file beside ``images/`` (its base name)
    labels_file: str
    #: the archive's top folder (where third-party loaders find ``images/`` and the labels)
    archive_folder: str
    #: the official factor sizes
    official_sizes: tuple[int, ...]
    #: the README's link to the full-resolution set (never downloaded; named in the path messages)
    full_resolution_url: str
    registry_name: str

    def __init__(
        self,
        path: str | None = None,
        *,
        image_size: int = 128,
        cache_dir: str | None = None,
        download: bool = True,
        strict: bool = True,
        device: str = "cpu",
        placement: Literal["auto", "device", "stream"] = "auto",
    ) -> None:
        self.image_size = check_image_size(image_size)
        self._cache_dir = cache_dir
        self._load(path, cache_dir=cache_dir, download=download, strict=strict, device=device, placement=placement)

    @staticmethod
    def validate_params(*, image_size: Any = 128, **_: Any) -> None:
        """The value checks that need no file (config time)."""
        check_image_size(image_size)

    # ------------------------------------------------------------------ locating
    @classmethod
    def _expected(cls) -> str:
        remote = cls.files[0]
        return (
            f"data.path for {cls.registry_name} names the zip archive of the README ({remote.filename} in the cache), "
            f"or a folder holding {IMAGES_FOLDER}/ ({{index:06d}}.png) and {cls.labels_file} (e.g. the extracted "
            f"{cls.archive_folder}/). Get the 128×128 archive from {README} (Google Drive), or leave data.path unset "
            f"to use the cache, which downloads it. The full-resolution set ({cls.full_resolution_url}) loads from a "
            "folder of the same layout (not verified on the real files)."
        )

    def locate(self, path: str | None, *, cache_dir: str | None, download: bool) -> Path:
        """A folder or zip archive as given, else the cache's archive (downloaded if allowed)."""
        remote = self.files[0]
        if path is not None:
            given = require_path(path, what=self.what, option="data.path", expected=self._expected(), kind="any")
            if given.is_dir() and _dataset_folder(given, self.labels_file, self.archive_folder) is None:
                archive = given / remote.filename
                if archive.is_file():
                    return archive
            return given
        target = cache_path(remote, cache_dir)
        downloaded = not target.is_file()
        file = fetch(remote, cache_dir=cache_dir, download=download, what=self.what)
        if downloaded and not zipfile.is_zipfile(file):  # Google Drive's quota or warning page
            size = file.stat().st_size
            file.unlink(missing_ok=True)
            raise DataFileNotFoundError(
                f"The download of the {self.what} from {remote.url} gave {size:,} bytes that are not a zip archive "
                f"(Google Drive sends an HTML page when a file was downloaded too often that day); it was deleted. "
                f"Download the 128×128 archive by hand from {README} and put it at exactly {target}, or point "
                f"data.path to it or to its extracted folder."
            )
        return file

    # ------------------------------------------------------------------ reading
    def read(self, source: Path, *, strict: bool) -> Grid:
        files = _open_source(source, self.labels_file, self.archive_folder, self._expected())
        try:
            labels = files.labels()
            n_factors = len(self.factor_names)
            if labels.ndim != 2 or labels.shape[1] != n_factors or labels.shape[0] == 0:
                raise CorruptDataFileError(
                    f"{files.where(self.labels_file)}: the labels must be an array (images, {n_factors}), got shape "
                    f"{labels.shape}; this is not the {self.registry_name} labels file."
                )
            classes, values = _labels_to_classes(labels)
            sizes = tuple(len(v) for v in values)
            if not is_row_major_grid(classes, sizes):
                raise CorruptDataFileError(
                    f"{files.where(self.labels_file)}: the labels do not form the complete row-major grid of sizes "
                    f"{sizes} ({labels.shape[0]:,} rows for {int(np.prod(sizes)):,} grid points); this is not a "
                    f"{self.registry_name} labels file, or it is incomplete."
                )
            if strict and sizes != self.official_sizes:
                raise CorruptDataFileError(
                    f"{files.where(self.labels_file)}: factor sizes {sizes}, expected the official "
                    f"{self.official_sizes}; pass strict=False (data.strict: false) to use another grid in the same "
                    "layout."
                )
            n = labels.shape[0]
            names = [f"{i:06d}.png" for i in range(n)]
            missing = [name for name in names if name not in files.images]
            if missing or len(files.images) != n:
                extra = sorted(set(files.images) - set(names))
                shown = ", ".join(missing[:5] + extra[:5])
                raise CorruptDataFileError(
                    f"{files.where(IMAGES_FOLDER)} holds {len(files.images):,} images for the {n:,} rows of "
                    f"{self.labels_file}: {len(missing):,} missing and {len(extra):,} unexpected ({shown}). Image i "
                    "must be {i:06d}.png; the archive is incomplete (an interrupted extraction?) or not this dataset."
                )
            images = self._decode(files, names)
        finally:
            files.close()
        return Grid(torch.from_numpy(images), sizes, values)

    def _decode(self, files: _Source, names: list[str]) -> np.ndarray:
        size = self.image_size
        what = f"{self.registry_name} ({files.source})"
        fix = f"Get the archive again from {README}."
        settings = {"dataset": self.registry_name, "image_size": size}
        key = cache_key({**settings, "images": len(names), "source": files.fingerprint()})
        folder = Path(self._cache_dir).expanduser() if self._cache_dir is not None else default_cache_dir()
        store = CacheFiles(folder / self.files[0].subdir, source_prefix(files.source, self.registry_name, settings), key)

        def build(into: Path | None) -> Decoded:
            items = [(name, files.opener(name)) for name in names]
            return decode_images(items, lambda image: _square(image, size), size, 3, what=what,
                                 skip_unreadable=False, fix=fix, into=into)

        decoded = cached_decode(store, size, build, what=what, skip_unreadable=False, fix=fix)
        self.cache_file = str(store.array)
        return np.ascontiguousarray(decoded.images)


def _square(image: Any, size: int) -> Any:
    """``image`` resized to ``size`` × ``size`` with Lanczos (as it is when already that size)."""
    if image.size == (size, size):
        return image
    return image.resize((size, size), _lanczos())


def _labels_to_classes(labels: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """Per-column class indices (the rank among the column's distinct values) and those values."""
    classes = np.empty(labels.shape, dtype=np.int64)
    values = []
    for k in range(labels.shape[1]):
        uniq, inverse = np.unique(labels[:, k], return_inverse=True)
        classes[:, k] = inverse.reshape(-1)
        values.append(uniq)
    return classes, values


# ---------------------------------------------------------------------- the files, zipped or not
def _dataset_folder(root: Path, labels_file: str, archive_folder: str) -> Path | None:
    """The folder holding ``images/`` and the labels file: ``root`` or ``root/<archive_folder>``."""
    for folder in (root, root / archive_folder):
        if (folder / labels_file).is_file() and (folder / IMAGES_FOLDER).is_dir():
            return folder
    return None


class _Source:
    """The labels and the images of a dataset folder or zip archive, by image file name."""

    def __init__(self, source: Path, labels: str, images: dict[str, str], archive: zipfile.ZipFile | None,
                 prefix: str = "") -> None:
        self.source, self._labels, self.images, self.zip, self.prefix = source, labels, images, archive, prefix
        self._lock = threading.Lock()

    def where(self, name: str) -> str:
        return f"{self.source} ({self.prefix}{name})" if self.zip is not None else str(self.source / name)

    def labels(self) -> np.ndarray:
        data = self.zip.read(self._labels) if self.zip is not None else Path(self._labels).read_bytes()
        try:
            array = np.load(io.BytesIO(data), allow_pickle=False)
        except (ValueError, OSError, EOFError) as err:
            raise CorruptDataFileError(
                f"{self.where(Path(self._labels).name)} could not be read as a NumPy .npy array ({type(err).__name__}: "
                f"{err}); it is truncated or not the labels file."
            ) from err
        if not isinstance(array, np.ndarray) or array.dtype.kind not in "fiu":
            raise CorruptDataFileError(
                f"{self.where(Path(self._labels).name)}: the labels must be numbers, got {getattr(array, 'dtype', type(array))}."
            )
        return np.asarray(array, dtype=np.float64)

    def fingerprint(self) -> list[Any]:
        """What keys the decoded cache: the archive's size and time, or the folder's images' count,
        total size and latest time, and the labels file's."""
        if self.zip is not None:
            stat = self.source.stat()
            return [self.source.name, int(stat.st_size), int(stat.st_mtime_ns)]
        total = latest = 0
        for member in self.images.values():
            stat = os.stat(member)
            total, latest = total + int(stat.st_size), max(latest, int(stat.st_mtime_ns))
        labels = os.stat(self._labels)
        return [len(self.images), total, latest, int(labels.st_size), int(labels.st_mtime_ns)]

    def opener(self, name: str):
        if self.zip is None:
            return _path_opener(Path(self.images[name]))
        archive, member = self.zip, self.images[name]
        return _bytes_opener(lambda: archive.read(member), self._lock)

    def close(self) -> None:
        if self.zip is not None:
            self.zip.close()


def _open_source(source: Path, labels_file: str, archive_folder: str, expected: str) -> _Source:
    if source.is_dir():
        folder = _dataset_folder(source, labels_file, archive_folder)
        if folder is None:
            raise DataPathNotFoundError(
                f"The folder given by data.path, {source}, holds neither {IMAGES_FOLDER}/ with {labels_file} nor "
                f"{archive_folder}/ with them. {expected}"
            )
        with os.scandir(folder / IMAGES_FOLDER) as entries:
            images = {e.name: e.path for e in entries if _IMAGE_NAME.match(e.name)}
        return _Source(folder, str(folder / labels_file), images, None)
    with reading(source, "a zip archive", (zipfile.BadZipFile, OSError, EOFError)):
        archive = zipfile.ZipFile(source)
        try:
            names = [info.filename for info in archive.infolist() if not info.is_dir()]
        except BaseException:
            archive.close()
            raise
    candidates = sorted(
        (n for n in names if n.rsplit("/", 1)[-1] == labels_file and not n.startswith("__MACOSX/")),
        key=lambda n: n.count("/"),
    )
    if not candidates:
        archive.close()
        raise CorruptDataFileError(
            f"{source} holds no {labels_file}; it is not the archive of this dataset (or not the 128×128 one). "
            f"{expected}"
        )
    prefix = candidates[0][: -len(labels_file)]
    inside = prefix + IMAGES_FOLDER + "/"
    images = {}
    for n in names:
        if n.startswith(inside):
            base = n[len(inside):]
            if "/" not in base and _IMAGE_NAME.match(base):
                images[base] = n
    return _Source(source, candidates[0], images, archive, prefix)


# ---------------------------------------------------------------------- Falcor3D
FACTOR_NAMES = (
    "lighting_intensity", "lighting_x_dir", "lighting_y_dir", "lighting_z_dir",
    "camera_x_pos", "camera_y_pos", "camera_z_pos",
)
FACTOR_SIZES = (5, 6, 6, 6, 6, 6, 6)
#: Google Drive ids of the README's links
DRIVE_ID_128 = "1XAQfFK1x6cpN1eiovbP0hVfLTm5SsSoJ"
DRIVE_ID_FULL = "15njKf7WsBYoFVoLDGyXe4na3MYnTYXOF"

FALCOR3D_FILE = RemoteFile(
    url=_drive(DRIVE_ID_128),
    filename="Falcor3D_down128.zip",
    subdir="falcor3d",
    checksum=None,
    provenance=(
        "Google Drive id of the README's 'Falcor3D_128x128 (3.7 GB)' link "
        f"(https://drive.google.com/uc?export=download&id={DRIVE_ID_128}); no checksum or exact size published, "
        "checked by structure only (zip, labels grid, image names)"
    ),
)


@DATASETS.register("falcor3d")
class Falcor3D(HighResGridDataset):
    """Falcor3D, 233,280 living-room renders in a 5×6⁶ grid, ``image_size`` × ``image_size`` RGB (default
    128) on ``device`` as uint8 (11.5 GB at 128).

    ``path``, ``image_size``, ``cache_dir``, ``download``, ``strict`` and ``device`` as described
    in :class:`HighResGridDataset`; the module docstring says what the files hold.
    """

    files = (FALCOR3D_FILE,)
    factor_names = FACTOR_NAMES
    official_sizes = FACTOR_SIZES
    labels_file = "train-rec.labels"
    archive_folder = "Falcor3D_down128"
    full_resolution_url = f"https://drive.google.com/uc?export=download&id={DRIVE_ID_FULL}"
    what = "Falcor3D archive"
