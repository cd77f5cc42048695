"""Locating, downloading and verifying the files of the datasets.

Every loader resolves its file the same way (:func:`fetch`):

1. ``data.path`` given (a file, or a folder holding the file under its official name): use it,
   or fail with a message that names the URL to get it from (a path that does not exist is bad
   input, :func:`require_path`: every reader checks its path with it before opening it).
2. Otherwise look in the cache, ``$DISENTANGLE_DATA`` or ``~/.cache/disentangle``, at
   ``<cache>/<dataset>/<official file name>``.
3. If it is not there and ``download`` is true, download it: streamed to a temporary file in the
   same folder with a tqdm progress bar, hashed while it streams, checked against the published
   checksum, then renamed into place (an interrupted or corrupt download never leaves a file
   under the final name).
4. Offline (or on any download failure) the error says the URL, the exact path where to put the
   file by hand, and the ``data.path`` option.

Checksums are written ``"md5:<hex>"`` or ``"sha256:<hex>"``. They are checked when a file is
downloaded; a file that is already in place (put there by hand or by an earlier download) is only
checked by the loader's own structural validation (shapes, dtypes), because hashing a 12 GB file
on every start would cost more than loading it. Call :func:`verify_checksum` to check one by hand.
"""
from __future__ import annotations

import hashlib
import os
import secrets
import urllib.error
import urllib.request
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from ..errors import (
    ChecksumMismatchError,
    CorruptDataFileError,
    DataFileNotFoundError,
    DataPathNotFoundError,
    InputError,
    OversizeDownloadError,
)

#: environment variable naming the cache folder
CACHE_ENV = "DISENTANGLE_DATA"
_USER_AGENT = "disentangle-data-loader/0.1 (python urllib; research dataset download)"


@dataclass(frozen=True)
class RemoteFile:
    """One downloadable file of a dataset.

    ``checksum`` is ``"md5:<hex>"`` / ``"sha256:<hex>"`` or ``None`` where no trustworthy
    published value is known (then the download is accepted unverified and a note says so).
    ``provenance`` records where the checksum comes from. ``size``: the file's exact size in
    bytes where published; a download that grows past it is stopped.
    """

    url: str
    filename: str
    subdir: str
    checksum: str | None = None
    size: int | None = None
    provenance: str = ""


def default_cache_dir() -> Path:
    """``$DISENTANGLE_DATA`` if set, else ``~/.cache/disentangle``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path("~/.cache/disentangle").expanduser()


def cache_path(remote: RemoteFile, cache_dir: str | os.PathLike | None = None) -> Path:
    """Where ``remote`` lives in the cache: ``<cache>/<subdir>/<filename>``."""
    root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    return root / remote.subdir / remote.filename


# ---------------------------------------------------------------------- paths
def require_path(
    path: str | os.PathLike,
    *,
    what: str = "file",
    option: str | None = None,
    expected: str = "",
    kind: Literal["file", "folder", "any"] = "file",
) -> Path:
    """``path`` (``~`` expanded) once it is known to exist, as a ``kind`` of path.

    Every reader of a dataset file or folder calls this before opening it, so that a path that
    does not exist is reported as such (:class:`~disentangle.errors.DataPathNotFoundError`, bad
    input: exit status 2), never as a corrupt or truncated file. The message names ``what``, the
    config ``option`` that gave the path, and ``expected``: what belongs there and how to get it.
    A folder where a file is expected (or the reverse) is an :class:`~disentangle.errors.InputError`.
    """
    resolved = Path(path).expanduser()
    given = f" given by {option}" if option else ""
    hint = f" {expected}" if expected else ""
    if not resolved.exists():
        raise DataPathNotFoundError(f"The {what}{given} does not exist: {resolved}.{hint}")
    if kind == "file" and resolved.is_dir():
        raise InputError(f"The {what}{given} is a folder, not a file: {resolved}.{hint}")
    if kind == "folder" and not resolved.is_dir():
        raise InputError(f"The {what}{given} is a file, not a folder: {resolved}.{hint}")
    return resolved


# ---------------------------------------------------------------------- checksums
def _split_checksum(checksum: str) -> tuple[str, str]:
    algorithm, sep, digest = checksum.partition(":")
    algorithm = algorithm.lower()
    if not sep or algorithm not in ("md5", "sha256", "sha1") or not digest:
        raise ValueError(f"checksum must look like 'md5:<hex>' or 'sha256:<hex>', got {checksum!r}.")
    return algorithm, digest.lower()


def file_hash(path: str | os.PathLike, algorithm: str = "sha256", chunk_size: int = 1 << 22) -> str:
    """Hex digest of a whole file."""
    h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        while chunk := f.read(chunk_size):
            h.update(chunk)
    return h.hexdigest()


def verify_checksum(path: str | os.PathLike, checksum: str | None) -> None:
    """Raise :class:`ChecksumMismatchError` if ``path`` does not have ``checksum`` (None: no-op)."""
    if checksum is None:
        return
    algorithm, expected = _split_checksum(checksum)
    actual = file_hash(path, algorithm)
    if actual != expected:
        raise ChecksumMismatchError(
            f"{path}: {algorithm} checksum is {actual}, expected {expected}. The file is corrupt, "
            "truncated or a different version; delete it and download it again."
        )


# ---------------------------------------------------------------------- downloading
def download_url(
    url: str,
    dest: str | os.PathLike,
    checksum: str | None = None,
    *,
    max_bytes: int | None = None,
    size_label: str = "expected size",
    progress: bool = True,
    timeout: float = 60.0,
    user_agent: str = _USER_AGENT,
) -> Path:
    """Download ``url`` to ``dest`` atomically, verifying ``checksum`` while streaming.

    The bytes go to a temporary file next to ``dest`` that is renamed to ``dest`` only after the
    checksum matched; on any failure the temporary file is removed and the error re-raised.
    With ``max_bytes``, a response whose ``Content-Length`` exceeds it is refused before any byte
    is read and the stream is cut off as soon as it passes ``max_bytes``
    (:class:`OversizeDownloadError`, whose message calls the limit ``size_label``): a wrong or
    hostile server cannot fill the disk.
    """
    from tqdm.auto import tqdm

    dest = Path(dest)
    made = [p for p in (dest.parent, *dest.parent.parents) if not p.exists()]  # removed again on failure
    dest.parent.mkdir(parents=True, exist_ok=True)
    hasher = None
    if checksum is not None:
        algorithm, expected = _split_checksum(checksum)
        hasher = hashlib.new(algorithm)
    # not tempfile.mkstemp, whose files are owner-only: the usual 0o666 & ~umask, so a cache folder shared
    # by a group (DISENTANGLE_DATA) can be read by all, as disentangle._core.atomic writes its files
    tmp = dest.parent / f".{dest.name}.{secrets.token_hex(8)}.part"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)

    def too_large(what: str) -> OversizeDownloadError:
        return OversizeDownloadError(
            f"The download of {url} {what}, more than the {size_label} of {max_bytes} bytes for "
            f"{dest.name}; it was stopped and discarded. The server sends another file (an error page, "
            f"another version); try another source or fetch the file by hand."
        )

    try:
        request = urllib.request.Request(url, headers={"User-Agent": user_agent})
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(request, timeout=timeout) as response:
            length = response.headers.get("Content-Length")
            announced = int(length) if length and length.strip().isdigit() else None
            if max_bytes is not None and announced is not None and announced > max_bytes:
                raise too_large(f"announces {announced} bytes")
            received = 0
            bar = tqdm(
                total=announced if announced is not None else max_bytes, unit="B", unit_scale=True,
                unit_divisor=1024, desc=f"Downloading {dest.name}", disable=not progress, leave=False,
            )
            with bar:
                while True:
                    want = 1 << 20 if max_bytes is None else min(1 << 20, max_bytes + 1 - received)
                    chunk = response.read(want)
                    if not chunk:
                        break
                    received += len(chunk)
                    if max_bytes is not None and received > max_bytes:
                        raise too_large(f"sent more than {max_bytes} bytes")
                    out.write(chunk)
                    if hasher is not None:
                        hasher.update(chunk)
                    bar.update(len(chunk))
        if hasher is not None and hasher.hexdigest() != expected:
            raise ChecksumMismatchError(
                f"The download of {url} ({received} bytes) has {algorithm} checksum {hasher.hexdigest()}, "
                f"expected {expected}; it was discarded. The server may have sent an error page or a "
                "different version of the file; try again or fetch the file by hand."
            )
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        for folder in made:  # the folders this download made, deepest first, if nothing else went in
            try:
                folder.rmdir()
            except OSError:
                break
        raise
    return dest


def _manual_hint(remote: RemoteFile, target: Path, option: str) -> str:
    return (
        f"Download it by hand from {remote.url} and put it at exactly {target} "
        f"(or set {CACHE_ENV} to choose the cache folder), or point the config option "
        f"{option} to an existing copy ({option}=/path/to/{remote.filename})."
    )


def _expected_at(remote: RemoteFile, target: Path, option: str) -> str:
    """What a path given by ``option`` must hold, and where to get it."""
    return (
        f"{option} names the file {remote.filename} (or a folder holding it). Get it from {remote.url}, "
        f"or leave {option} unset to use the cache ({target}), which downloads it automatically."
    )


def fetch(
    remote: RemoteFile,
    *,
    path: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
    download: bool = True,
    option: str = "data.path",
    what: str = "dataset file",
    progress: bool = True,
) -> Path:
    """Resolve (and if needed download) ``remote``; see the module docstring for the rules."""
    if path is not None:
        expected = _expected_at(remote, cache_path(remote, cache_dir), option)
        given = require_path(path, what=what, option=option, expected=expected, kind="any")
        candidate = given / remote.filename if given.is_dir() else given
        return require_path(candidate, what=what, option=option, expected=expected)
    target = cache_path(remote, cache_dir)
    if target.is_file():
        return target
    if not download:
        raise DataFileNotFoundError(
            f"The {what} {remote.filename} is not in the cache ({target}) and download is "
            f"disabled. {_manual_hint(remote, target, option)}"
        )
    try:
        return download_url(
            remote.url, target, remote.checksum, max_bytes=remote.size, size_label="published size", progress=progress
        )
    except (ChecksumMismatchError, OversizeDownloadError):
        raise
    except (urllib.error.URLError, OSError, ValueError) as err:
        raise DataFileNotFoundError(
            f"The {what} {remote.filename} is not in the cache and could not be downloaded "
            f"({type(err).__name__}: {err}). {_manual_hint(remote, target, option)}"
        ) from err


# ---------------------------------------------------------------------- reading npz members
def load_npz_array(path: str | os.PathLike, key: str, *, mmap: bool = False) -> np.ndarray:
    """One array of an ``.npz`` file, read without pickle.

    With ``mmap=True`` and an uncompressed (``np.savez``) archive the array is memory-mapped
    copy-on-write straight from the archive, so indexing a subset reads only that subset; for a
    compressed archive it falls back to reading the whole member. Any problem with the archive
    raises :class:`CorruptDataFileError` naming the file; a file that does not exist,
    :class:`DataPathNotFoundError` (:func:`require_path`).
    """
    path = require_path(path, what=".npz file")
    try:
        if mmap:
            mapped = _npz_member_memmap(path, key)
            if mapped is not None:
                return mapped
        with np.load(path, allow_pickle=False) as archive:
            if key not in archive.files:
                raise CorruptDataFileError(
                    f"{path} has no array '{key}' (it has {', '.join(archive.files) or 'none'}); "
                    "it is not a file of the expected format."
                )
            return archive[key]
    except CorruptDataFileError:
        raise
    except (zipfile.BadZipFile, EOFError, ValueError, OSError, KeyError, zlib.error) as err:
        raise CorruptDataFileError(
            f"{path} could not be read as a .npz archive ({type(err).__name__}: {err}); the file is "
            "probably truncated or corrupt. Delete it and download it again."
        ) from err


def npz_keys(path: str | os.PathLike) -> list[str]:
    """Names of the arrays in an ``.npz`` archive (without reading them)."""
    path = require_path(path, what=".npz file")
    try:
        with zipfile.ZipFile(path) as zf:
            return [n[:-4] if n.endswith(".npy") else n for n in zf.namelist()]
    except (zipfile.BadZipFile, OSError) as err:
        raise CorruptDataFileError(
            f"{path} is not a readable .npz archive ({type(err).__name__}: {err}); the file is "
            "probably truncated or corrupt. Delete it and download it again."
        ) from err


def _npz_member_memmap(path: Path, key: str) -> np.ndarray | None:
    with zipfile.ZipFile(path) as zf:
        try:
            info = zf.getinfo(f"{key}.npy")
        except KeyError:
            return None
        if info.compress_type != zipfile.ZIP_STORED:
            return None
    with open(path, "rb") as f:
        f.seek(info.header_offset)
        local = f.read(30)
        if local[:4] != b"PK\x03\x04":
            return None
        name_len = int.from_bytes(local[26:28], "little")
        extra_len = int.from_bytes(local[28:30], "little")
        start = info.header_offset + 30 + name_len + extra_len
        f.seek(start)
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
        else:
            return None
        offset = f.tell()
    if dtype.hasobject:
        raise CorruptDataFileError(f"{path}: array '{key}' holds Python objects (needs pickle); refused.")
    needed = int(np.prod(shape)) * dtype.itemsize
    if offset + needed > start + info.file_size or info.file_size > path.stat().st_size:
        raise CorruptDataFileError(f"{path}: array '{key}' is truncated; delete the file and download it again.")
    return np.memmap(path, dtype=dtype, mode="c", offset=offset, shape=tuple(shape),
                     order="F" if fortran else "C")
