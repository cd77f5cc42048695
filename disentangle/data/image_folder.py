"""A folder of your own images (photographs, renders, scans): ``data.name: image_folder``.

Every image under ``data.path`` (searched recursively, symbolic links followed) is decoded once,
brought to ``image_size`` × ``image_size`` and stored as a uint8 stack; the result is an unlabelled
:class:`~disentangle.data.SampleDataset`, which trains like the grids (batches drawn by index on the
device) and runs the unsupervised scores. What happens to each file:

* **which files**: the extensions ``.png``, ``.jpg``, ``.jpeg``, ``.bmp`` and ``.webp`` in any case;
  names starting with a dot (hidden files, macOS ``._name.jpg`` resource forks, ``.git``) are left
  out. The images are ordered by their path relative to ``data.path`` (``/``-separated, sorted as
  strings), so image ``i`` is the same file on every machine. A folder reached twice through
  symbolic links (a link loop, or two links to one folder) is read once.
* **decoding** (Pillow): the EXIF orientation is applied (``ImageOps.exif_transpose``); grayscale
  (``L``, ``1``) stays one channel; 16-bit grayscale (``I;16``, and ``I`` as older Pillow reads
  16-bit PNGs) is scaled to 8 bits by ``round(v * 255 / 65535)`` (Pillow's own conversion would
  clip every value above 255 to white); an alpha channel (``RGBA``, ``LA``, a palette with
  transparency) is **composited on black**: each colour value becomes ``round(value * alpha /
  255)``, so transparent pixels are black; palette images become RGB; CMYK JPEGs (and any other
  mode) are converted to RGB by Pillow.
* **size**: the shorter side is resized to ``image_size`` with **Lanczos** filtering (Pillow's
  ``LANCZOS``, which antialiases when shrinking; the filter the library uses for Cars3D and
  SmallNORB), the longer side to ``int(image_size * long / short)``, and the centre
  ``image_size`` × ``image_size`` square is cropped out (offsets ``round((side - image_size) / 2)``,
  Python's rounding). Images of mixed sizes and aspect ratios are fine.
* **channels**: ``"auto"`` gives 1 channel when every image is grayscale (a gray mode, or RGB
  pixels with R = G = B everywhere), else 3 (grayscale images then repeat their channel); ``1``
  converts colour images to luma (Pillow's ``convert("L")``, ITU-R 601-2); ``3`` gives RGB.
* **unreadable files** (truncated, corrupt, not an image despite the extension, a broken link) are
  skipped and listed in a logged warning with ``skip_unreadable: true`` (the default), or make the
  build fail with a message naming them with ``skip_unreadable: false``.

**The cache.** Decoding a large folder takes minutes, so the decoded stack is written once to
``<cache>/image_folder/`` (the dataset cache root, ``$DISENTANGLE_DATA`` or
``~/.cache/disentangle``; ``data.cache`` names another folder) as an ``.npy`` file, with a ``.json``
beside it naming the files in order and the skipped ones. It is keyed by a hash of the sorted
relative file names, their sizes and modification times, ``image_size`` and ``channels``: touching,
adding, removing or renaming any image makes a new cache (the stale one of the same folder is
deleted), and anything else reuses it without decoding. The images are written to a partial file
in the cache folder as they are decoded (a folder larger than memory never sits in it), which is
renamed into place after the index: a build that is interrupted or fails leaves nothing a later run
would trust, and the partial file of a killed build is deleted by the next build, or read of the
cache, once nothing has written it for ten minutes (a build in another container of this host name
may still be writing). A cache folder that
cannot be written, or a disk that fills up, is a warning: the images are then decoded into memory.
A cache file that does not load is rebuilt. :func:`decode_images` and the decoding helpers here are shared with the ``celeba`` loader.
"""
from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import re
import struct
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Literal

import numpy as np
import torch

from .._core import checks
from .._core.atomic import atomic_write, atomic_write_json, fsync_dir
from ..errors import CorruptDataFileError, DataPathNotFoundError, ParameterError
from . import DATASETS
from .download import default_cache_dir, require_path
from .image_modes import to_l_or_rgb
from .samples import SampleDataset, choose_placement

logger = logging.getLogger(__name__)

#: the file extensions read as images (compared in lower case)
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".webp")
#: the ``channels`` choices
CHANNEL_CHOICES = ("auto", 1, 3)
#: bumped whenever the decoding changes, so that old caches are not reused
CACHE_FORMAT = 1
#: how many unreadable files a message names before "and N more"
_LISTED = 10

#: exceptions that mean "this file is not a readable image" (Pillow raises all of these for
#: truncated or corrupt files); anything else (MemoryError, an interrupt) stops the build
_UNREADABLE: tuple[type[BaseException], ...] = (
    OSError, SyntaxError, ValueError, EOFError, TypeError, IndexError, KeyError, struct.error, zlib.error,
)

_EXPECTED = (
    "data.path for image_folder names a folder of images (.png, .jpg, .jpeg, .bmp, .webp, searched "
    "recursively), e.g. data.path=~/pictures/faces."
)


# ---------------------------------------------------------------------------- decoding one image
def _unreadable_errors() -> tuple[type[BaseException], ...]:
    from PIL import Image

    return (*_UNREADABLE, Image.DecompressionBombError)


def decode_image(source: str | os.PathLike | BinaryIO) -> Any:
    """One image file (a path or a binary file object), fully decoded, its EXIF orientation
    applied, as a Pillow image of mode ``"L"`` or ``"RGB"`` (module docstring: 16-bit scaling,
    alpha composited on black, palette and CMYK to RGB). A file that is not a readable image
    raises Pillow's error (an ``OSError``, ``SyntaxError``, ``ValueError``, ...)."""
    from PIL import Image, ImageOps

    with Image.open(source) as opened:
        opened.load()
        try:
            image = ImageOps.exif_transpose(opened)
        except _UNREADABLE:  # a malformed EXIF block: keep the pixels as stored
            image = opened.copy()
    return to_l_or_rgb(image)


def _lanczos() -> Any:
    from PIL import Image

    return getattr(Image, "Resampling", Image).LANCZOS  # Pillow < 9.1 has no Resampling


def fit_square(image: Any, size: int) -> Any:
    """``image`` with its shorter side resized to ``size`` (Lanczos) and the centre ``size`` ×
    ``size`` square cropped out (module docstring: the exact arithmetic)."""
    width, height = image.size
    if width <= height:
        new_width, new_height = size, int(size * height / width)
    else:
        new_width, new_height = int(size * width / height), size
    if (new_width, new_height) != (width, height):
        image = image.resize((new_width, new_height), _lanczos())
    left = int(round((new_width - size) / 2.0))
    top = int(round((new_height - size) / 2.0))
    if (new_width, new_height) == (size, size):
        return image
    return image.crop((left, top, left + size, top + size))


def crop_and_resize(image: Any, box: tuple[int, int, int, int], size: int) -> Any:
    """The ``box`` (left, upper, right, lower) of ``image``, resized to ``size`` × ``size``
    (Lanczos): a fixed crop, as CelebA loaders take (:mod:`disentangle.data.celeba`)."""
    cropped = image.crop(box)
    if cropped.size == (size, size):
        return cropped
    return cropped.resize((size, size), _lanczos())


def _as_chw(image: Any) -> tuple[np.ndarray, bool]:
    """``(C, H, W)`` uint8 pixels of an ``L`` or ``RGB`` image and whether they are gray."""
    array = np.asarray(image)
    if array.ndim == 2:
        return array[None], True
    gray = bool((array[..., 0] == array[..., 1]).all() and (array[..., 1] == array[..., 2]).all())
    return array.transpose(2, 0, 1), gray


# ---------------------------------------------------------------------------- decoding many
@dataclass
class Decoded:
    """What :func:`decode_images` gives: the images ``(N, C, size, size)`` uint8 of the readable
    files, their names in order, and ``(name, reason)`` of each file that could not be read."""

    images: np.ndarray
    names: list[str]
    skipped: list[tuple[str, str]] = field(default_factory=list)


def describe_files(pairs: Sequence[tuple[str, str]], limit: int = _LISTED) -> str:
    """``"a.jpg (OSError: ...), b.png (...)"`` for the first ``limit``, then ``"and N more"``."""
    shown = ", ".join(f"{name} ({reason})" for name, reason in pairs[:limit])
    return shown + (f", and {len(pairs) - limit} more" if len(pairs) > limit else "")


def decode_images(
    items: Sequence[tuple[str, Callable[[], str | os.PathLike | BinaryIO]]],
    transform: Callable[[Any], Any],
    size: int,
    channels: Literal["auto", 1, 3],
    *,
    what: str,
    skip_unreadable: bool,
    fix: str = "",
    into: Path | None = None,
) -> Decoded:
    """Decode ``items`` (``(name, opener)``: ``opener()`` gives a path or a binary file) with
    :func:`decode_image`, apply ``transform`` (an ``L``/``RGB`` image to one of ``size`` ×
    ``size``) and stack them as ``(N, C, size, size)`` uint8, in the order of ``items``.

    ``into``: a path for an ``.npy`` file that the images are written to as they are decoded, in
    order, so that a set larger than memory never sits in it; the result's ``images`` are then
    that file, memory-mapped (copy-on-write). Leaving out unreadable files or a third channel of
    gray images rewrites the file in chunks. A write that fails raises :class:`SpillError`
    (the caller decodes into memory instead); ``into`` is the caller's to remove then. Without
    ``into`` the stack is built in memory.

    Unreadable files are collected; with ``skip_unreadable`` they are left out and listed in a
    logged warning, otherwise :class:`CorruptDataFileError` names them (``fix``: how to fix it,
    appended to the message). When no file is readable it is always an error. ``what`` names
    the source in messages. The files are decoded by up to ``torch.get_num_threads()`` threads
    (Pillow releases the GIL while decoding and resizing); the result does not depend on it.
    """
    n = len(items)
    errors = _unreadable_errors()
    width = 1 if channels == 1 else 3
    sink: _Rows = _MemoryRows((n, width, size, size)) if into is None else _FileRows(into, (n, width, size, size))
    ok = np.ones(n, dtype=bool)
    gray_everywhere = True
    skipped: list[tuple[str, str]] = []

    def one(index: int) -> tuple[int, np.ndarray | None, bool, str]:
        name, opener = items[index]
        try:
            image = decode_image(opener())
            if channels == 1 and image.mode != "L":
                image = image.convert("L")
            image = transform(image)
        except errors as err:
            return index, None, False, _reason(err)
        chw, gray = _as_chw(image)
        if chw.shape[1:] != (size, size):
            raise AssertionError(f"{name}: the transform gave {chw.shape[1:]}, expected {(size, size)}")
        return index, chw, gray, ""

    workers = max(1, min(int(torch.get_num_threads()), 16, n // 32 or 1))
    progress = _progress(n, what)
    try:
        if workers == 1:
            results = map(one, range(n))
            pool = None
        else:
            pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="decode")
            results = _ordered(pool, one, n, chunk=workers * 8)
        for index, chw, gray, reason in results:
            if chw is None:
                ok[index] = False
                skipped.append((items[index][0], reason))
            else:
                gray_everywhere = gray_everywhere and gray
            sink.put(index, chw)  # a gray image broadcasts to 3 channels; an unreadable one is a row of zeros
            if progress is not None:
                progress.update(1)
    except BaseException:
        sink.close()  # on success, finish() flushes, fsyncs and closes (a full disk is found there)
        raise
    finally:
        if progress is not None:
            progress.close()
        if workers > 1 and pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    if skipped and (len(skipped) == n or not skip_unreadable):
        sink.close()
    if skipped and len(skipped) == n:
        raise CorruptDataFileError(
            f"None of the {n:,} image files of {what} could be read: {describe_files(skipped)}. They are "
            "truncated, corrupt or not images despite their extension; replace them with readable images."
        )
    if skipped and not skip_unreadable:
        raise CorruptDataFileError(
            f"{len(skipped):,} of the {n:,} image files of {what} could not be read: {describe_files(skipped)}. "
            f"They are truncated, corrupt or not images despite their extension. {fix}".rstrip()
        )
    names = [name for (name, _), keep in zip(items, ok) if keep]
    if skipped:
        logger.warning(
            "Skipped %d of the %d image files of %s that could not be read: %s.",
            len(skipped), n, what, describe_files(skipped),
        )
    keep_rows = None if not skipped else ok
    keep_channels = 1 if channels == "auto" and gray_everywhere else width
    return Decoded(sink.finish(keep_rows, keep_channels), names, skipped)


class SpillError(OSError):
    """Writing decoded images to their file failed (a full or read-only disk): ``__cause__`` says why."""


class _Rows:
    """Where :func:`decode_images` puts the decoded images, row by row in order."""

    def put(self, index: int, chw: np.ndarray | None) -> None:
        raise NotImplementedError

    def finish(self, keep_rows: np.ndarray | None, channels: int) -> np.ndarray:
        """The stack with only the rows ``keep_rows`` (all when None) and the first ``channels``."""
        raise NotImplementedError

    def close(self) -> None:
        pass


class _MemoryRows(_Rows):
    def __init__(self, shape: tuple[int, int, int, int]) -> None:
        self.out = np.empty(shape, dtype=np.uint8)

    def put(self, index: int, chw: np.ndarray | None) -> None:
        if chw is not None:
            self.out[index] = chw

    def finish(self, keep_rows: np.ndarray | None, channels: int) -> np.ndarray:
        out = self.out if keep_rows is None else self.out[keep_rows]
        return out if channels == out.shape[1] else np.ascontiguousarray(out[:, :channels])


#: a partial file of a dead build is deleted once it has not been written for this long (seconds)
_IDLE_LEFTOVER_S = 600.0
#: how many bytes of images :class:`_FileRows` copies at once when it rewrites its file
_CHUNK_BYTES = 64 << 20


class _FileRows(_Rows):
    """Rows appended to an ``.npy`` file as they come (they come in order): its header names all
    ``shape[0]`` rows and an unreadable file's row is zeros, so that the common case (every file read,
    the channels kept) needs no second pass; otherwise the kept rows and channels are copied, in
    chunks, into a new file that replaces it."""

    def __init__(self, path: Path, shape: tuple[int, int, int, int]) -> None:
        self.path, self.shape = path, shape
        self.row_bytes = int(np.prod(shape[1:]))
        self.written = 0
        try:
            self.file: BinaryIO | None = open(path, "wb")
            _write_npy_header(self.file, shape)
        except OSError as err:
            self.close()
            raise SpillError(f"could not write {path}: {err}") from err

    def put(self, index: int, chw: np.ndarray | None) -> None:
        assert index == self.written and self.file is not None, "rows come in order"
        row = np.zeros(self.shape[1:], np.uint8) if chw is None else np.broadcast_to(chw, self.shape[1:])
        try:
            self.file.write(memoryview(np.ascontiguousarray(row)).cast("B"))
        except OSError as err:
            raise SpillError(f"could not write {self.path}: {err}") from err
        self.written += 1

    def close(self) -> None:
        if getattr(self, "file", None) is not None:
            try:
                self.file.close()
            except OSError:
                pass
            self.file = None

    def finish(self, keep_rows: np.ndarray | None, channels: int) -> np.ndarray:
        try:
            if self.file is not None:
                self.file.flush()
                os.fsync(self.file.fileno())
                self.close()
            if keep_rows is not None or channels != self.shape[1]:
                self._rewrite(keep_rows, channels)
        except OSError as err:
            raise SpillError(f"could not write {self.path}: {err}") from err
        return np.load(self.path, mmap_mode="c", allow_pickle=False)

    def _rewrite(self, keep_rows: np.ndarray | None, channels: int) -> None:
        full = np.load(self.path, mmap_mode="r", allow_pickle=False)
        rows = np.arange(len(full)) if keep_rows is None else np.flatnonzero(keep_rows)
        shape = (len(rows), channels, *self.shape[2:])
        step = max(1, _CHUNK_BYTES // self.row_bytes)
        partial = self.path.with_name(self.path.name + ".rewrite")
        try:
            with open(partial, "wb") as out:
                _write_npy_header(out, shape)
                for start in range(0, len(rows), step):
                    out.write(memoryview(np.ascontiguousarray(full[rows[start:start + step], :channels])).cast("B"))
                out.flush()
                os.fsync(out.fileno())
            del full
            os.replace(partial, self.path)
        finally:
            if partial.exists():
                partial.unlink()


def _write_npy_header(file: BinaryIO, shape: tuple[int, ...]) -> None:
    """The header of a C-ordered uint8 ``.npy`` array of ``shape`` (its data follow)."""
    from numpy.lib import format as npy

    npy.write_array_header_1_0(file, {"descr": npy.dtype_to_descr(np.dtype(np.uint8)),
                                      "fortran_order": False, "shape": tuple(int(d) for d in shape)})


def _reason(err: BaseException) -> str:
    """Why a file could not be read, in a few words."""
    from PIL import UnidentifiedImageError

    if isinstance(err, UnidentifiedImageError):
        return "not an image format Pillow recognises"
    return f"{type(err).__name__}: {err}"


def _ordered(pool: ThreadPoolExecutor, fn: Callable[[int], Any], n: int, chunk: int):
    """``fn(0), fn(1), ...`` computed by ``pool`` at most ``chunk`` ahead, yielded in order."""
    from collections import deque

    pending: deque = deque()
    for index in range(n):
        pending.append(pool.submit(fn, index))
        if len(pending) >= chunk:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


def _progress(n: int, what: str):
    """A tqdm bar for long decodes (on a terminal only), else None."""
    if n < 2000:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=n, unit="img", desc=f"Decoding {what}", leave=False, disable=None)


# ---------------------------------------------------------------------------- the cache
def cache_folder(cache: str | os.PathLike | None, dataset: str) -> Path:
    """Where the decoded stacks of ``dataset`` go: ``cache`` (as given), else
    ``<cache root>/<dataset>/`` (:func:`disentangle.data.download.default_cache_dir`)."""
    return Path(cache).expanduser() if cache is not None else default_cache_dir() / dataset


def cache_key(description: dict[str, Any]) -> str:
    """A sha256 of ``description`` (JSON with sorted keys): the name of a cache."""
    text = json.dumps({"format": CACHE_FORMAT, **description}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def source_prefix(source: Path, label: str, settings: dict[str, Any]) -> str:
    """The start of the cache names of one source (folder or archive) decoded with ``settings``
    (image size, channels, crop, selection): a readable slug and a hash of the resolved path and
    the settings. A new cache with the same prefix (the files changed) replaces the old one; other
    settings keep their own caches."""
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", source.name).strip("-")[:40] or label
    identity = json.dumps([str(source.resolve()), settings], sort_keys=True)
    digest = hashlib.sha256(identity.encode("utf-8")).hexdigest()[:10]
    return f"{label}-{slug}-{digest}"


@dataclass
class CacheFiles:
    """The two files of one cache: the stack (``.npy``, written last) and its index (``.json``)."""

    folder: Path
    prefix: str
    key: str

    @property
    def stem(self) -> str:
        return f"{self.prefix}-{self.key[:24]}"

    @property
    def array(self) -> Path:
        return self.folder / f"{self.stem}.npy"

    @property
    def index(self) -> Path:
        return self.folder / f"{self.stem}.json"

    def load(self, size: int, mmap: bool = False) -> tuple[np.ndarray, dict[str, Any]] | None:
        """The cached stack (memory-mapped, copy-on-write, with ``mmap``) and index, or None when
        there is none or it does not load (then it is rebuilt)."""
        if not (self.array.is_file() and self.index.is_file()):
            return None
        try:
            index = json.loads(self.index.read_text(encoding="utf-8"))
            images = np.load(self.array, allow_pickle=False, mmap_mode="c" if mmap else None)
            names = index["files"]
            valid = (
                index.get("key") == self.key and images.dtype == np.uint8 and images.ndim == 4
                and images.shape[0] == len(names) and images.shape[1] in (1, 3)
                and images.shape[2:] == (size, size)
            )
        except (OSError, ValueError, KeyError, TypeError, EOFError) as err:
            logger.warning("The cache %s could not be read (%s: %s); decoding again.", self.array, type(err).__name__, err)
            return None
        if not valid:
            logger.warning("The cache %s does not match its index; decoding again.", self.array)
            return None
        return images, index

    def partial(self) -> Path | None:
        """A new file to decode into (:func:`decode_images`'s ``into``), named for this process, in
        the cache folder (so that :meth:`commit` renames it into place); the files a killed build of
        the same source left there are deleted first. None when the folder cannot be written (the
        images are then decoded into memory)."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            self.delete_leftovers()
            path = self.folder / f"{self.stem}.{_host()}-{os.getpid()}.partial"
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666))  # honours the umask
        except OSError as err:
            logger.warning("Could not write the decoded cache in %s (%s: %s); decoding into memory, and the next "
                           "run decodes again.", self.folder, type(err).__name__, err)
            return None
        return path

    def delete_leftovers(self) -> None:
        """Delete the partial files of this source whose build died (a process of this host that is gone)
        and that nothing has written for :data:`_IDLE_LEFTOVER_S` seconds. Called when a build starts,
        when it is committed and when the cache is read, so a killed build's file does not outlive it
        for long (a disk's worth for a large folder)."""
        for leftover in self.folder.glob(f"{self.prefix}-*.partial*"):
            match = re.search(r"\.(.+)-(\d+)\.partial", leftover.name)
            if match is None or match.group(1) != _host() or _alive(int(match.group(2))):
                continue
            try:  # and untouched for a while: a build in another container of this name writes on
                if time.time() - leftover.stat().st_mtime < _IDLE_LEFTOVER_S:
                    continue
            except OSError:
                continue
            try:
                leftover.unlink()
                logger.info("Deleted %s, left by a decode that was stopped.", leftover)
            except OSError:
                pass

    def commit(self, partial: Path, index: dict[str, Any]) -> None:
        """Make the decoded ``partial`` file this cache: the index is written (atomically), then the
        file renamed over the stack, and older caches of the same source deleted."""
        atomic_write_json(self.index, {**index, "key": self.key})
        os.replace(partial, self.array)
        fsync_dir(self.folder)
        self._delete_stale()
        self.delete_leftovers()

    def save(self, images: np.ndarray, index: dict[str, Any]) -> None:
        """Write the index, then the stack (both atomically), and delete older caches of the
        same source. A cache that cannot be written is a warning, not an error: the data are
        decoded and usable."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            atomic_write_json(self.index, {**index, "key": self.key})
            atomic_write(self.array, lambda f: np.save(f, images, allow_pickle=False))
        except OSError as err:
            logger.warning("Could not write the decoded cache %s (%s: %s); the next run decodes again.",
                           self.array, type(err).__name__, err)
            return
        self._delete_stale()

    def _delete_stale(self) -> None:
        for stale in self.folder.glob(f"{self.prefix}-*"):
            if stale.name not in (self.array.name, self.index.name) and stale.suffix in (".npy", ".json"):
                try:
                    stale.unlink()
                    logger.info("Deleted the stale cache %s.", stale)
                except OSError:
                    pass


def _host() -> str:
    """This machine's name as it may appear in a file name."""
    import socket

    return re.sub(r"[^A-Za-z0-9_-]+", "_", socket.gethostname()) or "host"


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` runs on this machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists, owned by another user
        return True
    return True


def memory_mapped(files: CacheFiles, size: int, decoded: Decoded) -> Decoded:
    """``decoded`` with its images memory-mapped from the cache file: a streamed dataset
    (``placement: stream``, chosen by ``auto`` only once the first decode has measured the images)
    keeps them in the file, not in memory."""
    if isinstance(decoded.images, np.memmap):
        return decoded
    reread = files.load(size, mmap=True)
    return decoded if reread is None else Decoded(reread[0], decoded.names, decoded.skipped)


def place_images(images: np.ndarray, stream: bool, device: str | torch.device) -> torch.Tensor:
    """The decoded ``images`` as a tensor: as they are (memory-mapped) when streamed, else on
    ``device`` (a memory-mapped stack is read into memory first, so that "device" placement on the
    CPU holds the images in memory, not in the file's pages)."""
    if stream:
        return torch.from_numpy(images)
    if isinstance(images, np.memmap):
        images = np.array(images)
    return torch.from_numpy(images).to(device)


def cached_decode(
    files: CacheFiles, size: int, build: Callable[[Path | None], Decoded], *, what: str, skip_unreadable: bool,
    fix: str, mmap: bool = False,
) -> Decoded:
    """The decoded images from ``files`` when they hold this key, else ``build(into)`` made the cache.

    ``build(into)`` decodes with :func:`decode_images`'s ``into``: the images go to a partial file of
    the cache as they are decoded, which then becomes the cache (:meth:`CacheFiles.commit`), so that
    a set larger than memory never sits in it. When the cache folder cannot be written, or a write
    fails on the way (a full disk), it is a warning and ``build(None)`` decodes into memory. With
    ``mmap`` the images are the cache file memory-mapped (copy-on-write), else they are read into
    memory. A cache made while skipping unreadable files repeats its warning, and refuses to be used
    with ``skip_unreadable`` false (the same error as a fresh decode)."""
    hit = files.load(size, mmap=mmap)
    if hit is not None:
        files.delete_leftovers()
        images, index = hit
        skipped = [tuple(pair) for pair in index.get("skipped", [])]
        total = len(index["files"]) + len(skipped)
        if skipped and not skip_unreadable:
            raise CorruptDataFileError(
                f"{len(skipped):,} of the {total:,} image files of {what} could not be read: "
                f"{describe_files(skipped)}. They are truncated, corrupt or not images despite their extension. {fix}".rstrip()
            )
        if skipped:
            logger.warning("Skipped %d of the %d image files of %s that could not be read: %s.",
                           len(skipped), total, what, describe_files(skipped))
        logger.info("Loaded %d decoded images of %s from the cache %s.", len(images), what, files.array)
        return Decoded(images, list(index["files"]), skipped)
    made = _missing_folders(files.folder)  # removed again when the build fails
    partial = files.partial()
    if partial is None:
        return build(None)
    committed = False
    try:
        try:
            decoded = build(partial)
        except SpillError as err:
            logger.warning("Could not write the decoded cache %s (%s); decoding into memory, and the next run "
                           "decodes again.", files.array, err.__cause__ or err)
            _unlink(partial)
            return build(None)
        index = {"source": what, "files": decoded.names, "skipped": [list(p) for p in decoded.skipped]}
        try:
            files.commit(partial, index)
        except OSError as err:  # the index or the rename
            logger.warning("Could not write the decoded cache %s (%s: %s); the next run decodes again.",
                           files.array, type(err).__name__, err)
            return Decoded(decoded.images if mmap else np.array(decoded.images), decoded.names, decoded.skipped)
        committed = True
    finally:
        if partial.exists():  # a failed or interrupted build leaves nothing a later run would trust
            _unlink(partial)
        if not committed:
            for folder in made:
                try:
                    folder.rmdir()  # only when empty
                except OSError:
                    pass
    reread = files.load(size, mmap=mmap)
    images = reread[0] if reread is not None else (decoded.images if mmap else np.array(decoded.images))
    return Decoded(images, decoded.names, decoded.skipped)


def _missing_folders(folder: Path) -> list[Path]:
    """``folder`` and its parents that do not exist yet, deepest first."""
    missing = []
    for candidate in (folder, *folder.parents):
        if candidate.exists():
            break
        missing.append(candidate)
    return missing


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


# ---------------------------------------------------------------------------- the folder
def check_image_size(image_size: Any, name: str = "image_size") -> int:
    """``image_size``: an integer >= 1 (one paragraph otherwise)."""
    try:
        return checks.positive_int(name, image_size)
    except ParameterError as err:
        raise ParameterError(name, f"{err} It is the side of the square images the dataset stores (64 for the "
                                   "conv64 backbone).") from None


def check_channels(channels: Any, name: str = "channels") -> Literal["auto", 1, 3]:
    """``channels``: ``"auto"``, 1 or 3."""
    if isinstance(channels, bool) or channels not in CHANNEL_CHOICES:
        raise ParameterError(
            name, f"{name} is {channels!r}, which is not a valid choice. Valid choices: 'auto' (1 channel when "
                  "every image is grayscale, else 3), 1 (grayscale; colour images are converted to luma), "
                  "3 (RGB)."
        )
    return channels


def _check_params(*, image_size: Any = 64, channels: Any = "auto", **_: Any) -> None:
    """The value checks of ``image_folder`` that need no file (config time)."""
    check_image_size(image_size)
    check_channels(channels)


@dataclass(frozen=True)
class ImageFile:
    """One image found in the folder: its ``/``-separated path relative to it, and the size,
    modification time and status-change time (ns) that key the cache (-1 where it cannot be read: a
    broken link). The status-change time moves with any write, even one that restores the
    modification time (``cp -p``, ``rsync -a``), and cannot be set back."""

    name: str
    size: int
    mtime_ns: int
    ctime_ns: int = -1


def list_images(folder: Path) -> tuple[list[ImageFile], list[str]]:
    """The image files under ``folder`` (recursive, links followed, each real folder visited once,
    hidden names left out), sorted by relative path, and the relative paths of the other files."""
    images: list[ImageFile] = []
    others: list[str] = []
    visited: set[str] = set()
    unreadable: list[OSError] = []  # folders os.walk could not list (it would leave them out silently)
    for dirpath, dirnames, filenames in os.walk(folder, onerror=unreadable.append, followlinks=True):
        real = os.path.realpath(dirpath)
        if real in visited:  # a link loop, or a folder reached twice through links
            dirnames[:] = []
            continue
        visited.add(real)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        relative_dir = os.path.relpath(dirpath, folder)
        for filename in filenames:
            if filename.startswith("."):
                continue
            relative = filename if relative_dir == "." else f"{Path(relative_dir).as_posix()}/{filename}"
            if os.path.splitext(filename)[1].lower() not in IMAGE_EXTENSIONS:
                others.append(relative)
                continue
            try:
                stat = os.stat(os.path.join(dirpath, filename))
                images.append(ImageFile(relative, int(stat.st_size), int(stat.st_mtime_ns), int(stat.st_ctime_ns)))
            except OSError:  # a broken link: listed, then reported as unreadable
                images.append(ImageFile(relative, -1, -1, -1))
    if unreadable:
        names = [os.path.relpath(err.filename, folder) if err.filename else str(err) for err in unreadable]
        logger.warning(
            "Could not list %d folder(s) under %s, so their images are left out: %s (%s). Make them readable "
            "(chmod) or move them out of the folder to silence this.", len(names), folder,
            ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else ""),
            f"{type(unreadable[0]).__name__}: {unreadable[0].strerror or unreadable[0]}")
    images.sort(key=lambda f: f.name)
    others.sort()
    return images, others


@DATASETS.register("image_folder")
def image_folder(
    path: str,
    *,
    image_size: int = 64,
    channels: Literal["auto", 1, 3] = "auto",
    cache: str | None = None,
    skip_unreadable: bool = True,
    placement: Literal["auto", "device", "stream"] = "auto",
    device: str = "cpu",
) -> SampleDataset:
    """Every image in a folder (recursive), ``image_size`` × ``image_size``, unlabelled.

    ``path``: the folder (``data.path``). ``image_size``: the side of the stored squares (shorter
    side resized with Lanczos, centre crop). ``channels``: ``"auto"`` (1 when every image is
    grayscale, else 3), 1 or 3. ``cache``: the folder of the decoded cache (default
    ``<cache root>/image_folder``). ``skip_unreadable``: skip and list unreadable files (True) or
    fail naming them (False). ``placement``: ``device`` (every image on ``device``), ``stream`` (the
    images stay in the memory-mapped cache file on the host and each batch is copied to ``device``)
    or ``auto`` (stream when they would take more than a quarter of the device's free memory;
    :func:`~disentangle.data.samples.choose_placement`). ``device``: where the images live. The result is a
    :class:`~disentangle.data.SampleDataset` with ``files`` (the relative path of each image, in
    order), ``skipped`` (``(file, reason)`` pairs), ``path`` and ``cache_file``; the module
    docstring says exactly how files are found, decoded, resized and cached.
    """
    size = check_image_size(image_size)
    channels = check_channels(channels)
    skip_unreadable = checks.boolean("skip_unreadable", skip_unreadable)
    folder = require_path(path, what="image folder", option="data.path", expected=_EXPECTED, kind="folder").absolute()
    found, others = list_images(folder)
    if not found:
        extensions = ", ".join(IMAGE_EXTENSIONS)
        if not others:
            raise DataPathNotFoundError(
                f"The image folder given by data.path, {folder}, is empty (no files in it or its subfolders, "
                f"hidden names aside). Put images in it ({extensions}) or point data.path to the folder that "
                "holds them."
            )
        shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
        raise DataPathNotFoundError(
            f"The image folder given by data.path, {folder}, holds no images: its {len(others):,} "
            f"file{'s' if len(others) > 1 else ''} ({shown}) {'have' if len(others) > 1 else 'has'} none of the accepted extensions {extensions} (any case). Convert them to one of those "
            "formats, or point data.path to the folder of the images."
        )
    _say_what_is_left_out(folder, others)
    what = f"the image folder {folder}"
    fix = "Delete or replace them, or set data.skip_unreadable: true to skip them with a warning."
    settings = {"dataset": "image_folder", "image_size": size, "channels": channels}
    key = cache_key({**settings, "files": [[f.name, f.size, f.mtime_ns, f.ctime_ns] for f in found]})
    files = CacheFiles(cache_folder(cache, "image_folder"), source_prefix(folder, "image_folder", settings), key)

    def build(into: Path | None) -> Decoded:
        items = [(f.name, _path_opener(folder / f.name)) for f in found]
        return decode_images(items, lambda image: fit_square(image, size), size, channels,
                             what=what, skip_unreadable=skip_unreadable, fix=fix, into=into)

    placement = checks.choice("placement", placement, ("auto", "device", "stream"))
    # memory-mapped until the placement is known: a folder larger than memory is never read into it
    decoded = cached_decode(files, size, build, what=what, skip_unreadable=skip_unreadable, fix=fix,
                            mmap=placement != "device")
    placed, reason = choose_placement(placement, decoded.images.nbytes, device)
    stream = placed == "stream"
    if stream:
        decoded = memory_mapped(files, size, decoded)
    dataset = SampleDataset(place_images(decoded.images, stream, device), None, name=f"image folder {folder}",
                            stream=stream)
    dataset.placement_reason = reason
    dataset.files = tuple(decoded.names)
    size_of = {f.name: f.size for f in found}
    dataset.file_sizes = tuple(size_of.get(name, -1) for name in decoded.names)  # content_identity
    dataset.skipped = tuple(decoded.skipped)
    dataset.path = str(folder)
    dataset.cache_file = str(files.array)
    return dataset


image_folder.validate_params = _check_params  # type: ignore[attr-defined]  # config-time value checks


def _say_what_is_left_out(folder: Path, others: list[str]) -> None:
    """Log the files of an image folder that are not read: a warning for images in a format left out
    (a TIFF scan, a PGM face set: Pillow reads them, the folder does not), counted by extension;
    information for the rest (a README, a labels file)."""
    if not others:
        return
    from collections import Counter

    from PIL import Image

    pillow = set(Image.registered_extensions())
    counts = Counter(Path(name).suffix.lower() or "(no extension)" for name in others)
    images = {ext: n for ext, n in counts.items() if ext in pillow}
    rest = sum(n for ext, n in counts.items() if ext not in pillow)
    if images:
        listed = ", ".join(f"{n:,} {ext}" for ext, n in sorted(images.items(), key=lambda item: -item[1]))
        logger.warning(
            "The image folder %s holds images in formats it does not read (%s), left out. Convert them to one of "
            "%s to use them.", folder, listed, ", ".join(IMAGE_EXTENSIONS))
    if rest:
        logger.info("The image folder %s: %d other file%s left out (not images).", folder, rest, "s" if rest > 1 else "")


def _path_opener(path: Path) -> Callable[[], Path]:
    return lambda: path


def _bytes_opener(read: Callable[[], bytes], lock: threading.Lock) -> Callable[[], BinaryIO]:
    """An opener that reads the bytes under ``lock`` (a zip archive shared by decoding threads)."""

    def opener() -> BinaryIO:
        with lock:
            data = read()
        return io.BytesIO(data)

    return opener
