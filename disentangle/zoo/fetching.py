"""Finding a pretrained file, downloading it verified, and checking files against the manifest.

Where :func:`fetch_entry` looks, in order:

1. the file the manifest names (``file``, relative to the manifest: the shipped
   ``disentangle/zoo/weights/``, or a user's zoo folder), if present and its sha256 matches;
2. the cache, ``$DISENTANGLE_DATA/zoo/FILE`` (default ``~/.cache/disentangle/zoo/FILE``), if its
   sha256 matches;
3. a download: from the mirror ``$DISENTANGLE_ZOO_URL/FILE`` first when that variable is set,
   then from each of the manifest's ``urls`` (``https://``, ``http://`` or ``file://``); streamed
   with a tqdm bar to a temporary file next to the cache path, hashed while streaming, renamed into
   place only if the full sha256 matches (:func:`download_verified`). A source that announces, or
   sends, more bytes than the manifest's ``size`` is cut off at ``size + 1`` bytes and skipped:
   a wrong or hostile server cannot fill the disk.

With ``DISENTANGLE_OFFLINE=1`` step 3 is skipped and the error names the URL, the expected sha256
and the exact path to place the file at. A file whose hash does not match is never loaded: a
corrupt cached copy is replaced by a verified download (or refused offline), a corrupt shipped
file is bypassed for a verified download with a warning (or refused when there is none).
"""
from __future__ import annotations

import os
import urllib.error
import urllib.request
import warnings
from dataclasses import dataclass
from pathlib import Path

from .. import _compat, errors
from ..data.download import default_cache_dir, download_url, file_hash
from ..errors import ChecksumMismatchError, ZooFileError, ZooOversizeDownloadError
from .manifest import Entry

__getattr__ = _compat.module_getattr(__name__)  # OversizeDownloadError: errors.ZooOversizeDownloadError

MIRROR_ENV = "DISENTANGLE_ZOO_URL"
_USER_AGENT = "disentangle-zoo/0.1 (python urllib; pretrained weights download)"
OFFLINE_ENV = "DISENTANGLE_OFFLINE"
_TRUE = ("1", "true", "yes", "on")


def offline() -> bool:
    """Whether ``$DISENTANGLE_OFFLINE`` asks for no downloads."""
    return os.environ.get(OFFLINE_ENV, "").strip().lower() in _TRUE


def cache_file(entry: Entry) -> Path:
    """Where a downloaded file of ``entry`` lives: ``<cache>/zoo/<file name>``."""
    return default_cache_dir() / "zoo" / entry.filename


def sources(entry: Entry) -> list[str]:
    """Download URLs of ``entry``: the mirror (``$DISENTANGLE_ZOO_URL``) first, then the manifest's."""
    urls = []
    mirror = os.environ.get(MIRROR_ENV, "").strip()
    if mirror:
        urls.append(f"{mirror.rstrip('/')}/{entry.filename}")
    urls.extend(u for u in entry.urls if u not in urls)
    return urls


def download_verified(
    url: str, dest: str | os.PathLike, sha256: str, size: int | None = None, *, progress: bool = True,
    timeout: float = 60.0,
) -> Path:
    """Download ``url`` to ``dest`` atomically (:func:`disentangle.data.download.download_url`):
    streamed to a temporary file next to ``dest``, hashed while streaming, renamed to ``dest`` only
    when its sha256 is ``sha256``.

    With ``size`` (bytes), a response whose ``Content-Length`` exceeds it is refused before any byte
    is read, and the stream is cut off as soon as it passes ``size``
    (:class:`ZooOversizeDownloadError`); a shorter file fails the sha256 check
    (:class:`~disentangle.data.download.ChecksumMismatchError`). The temporary file is removed on
    any failure.
    """
    try:
        return download_url(
            url, dest, f"sha256:{sha256.lower()}", max_bytes=size, size_label="manifest's size",
            progress=progress, timeout=timeout, user_agent=_USER_AGENT,
        )
    except errors.OversizeDownloadError as err:
        raise ZooOversizeDownloadError(str(err)) from None


def _matches(path: Path, sha256: str) -> bool:
    return file_hash(path, "sha256") == sha256


def fetch_entry(entry: Entry, *, progress: bool = True) -> Path:
    """The verified local file of ``entry`` (see the module docstring for where it looks)."""
    problems: list[str] = []
    local = entry.local_path
    if local is not None and local.is_file():
        if _matches(local, entry.sha256):
            return local
        problems.append(f"{local} does not have the manifest's sha256 (corrupt or replaced)")
    target = cache_file(entry)
    if target.is_file():
        if _matches(target, entry.sha256):
            if problems:
                warnings.warn(f"{problems[0]}; using the verified copy {target}.", UserWarning, stacklevel=3)
            return target
        problems.append(f"the cached {target} does not have the manifest's sha256")
    urls = sources(entry)
    place = local if (local is not None and not urls) else target
    if offline():
        where = f"from {urls[0]}" if urls else "(the manifest lists no URL; copy it from its publisher)"
        raise ZooFileError(
            f"The pretrained model '{entry.name}' is not available offline ({OFFLINE_ENV} is set)"
            f"{': ' + '; '.join(problems) if problems else ''}. Download {entry.filename} {where}, "
            f"check that its sha256 is {entry.sha256}, and place it at exactly {target}; or unset "
            f"{OFFLINE_ENV} to download it."
        )
    if not urls:
        raise ZooFileError(
            f"The pretrained model '{entry.name}' has no usable file"
            f"{': ' + '; '.join(problems) if problems else f' (expected at {place})'}, and its manifest "
            f"({entry.manifest}) lists no URL to download it from. Place the file with sha256 "
            f"{entry.sha256} at {place}, or set {MIRROR_ENV} to a mirror that serves {entry.filename}."
        )
    try:  # a cache folder that cannot be written is no fault of the sources: say so first
        target.parent.mkdir(parents=True, exist_ok=True)
        writable = os.access(target.parent, os.W_OK)
    except OSError as err:
        writable, why = False, f"{type(err).__name__}: {err}"
    else:
        why = "no write permission"
    if not writable:
        raise ZooFileError(
            f"The pretrained model '{entry.name}' would be downloaded into {target.parent}, which cannot be "
            f"written ({why}). Set DISENTANGLE_DATA to a folder you can write (the zoo's cache is its zoo/), or "
            f"download {entry.filename} from {urls[0]}, check that its sha256 is {entry.sha256}, and place it at "
            f"exactly {target}."
        )
    for url in urls:
        try:
            path = download_verified(url, target, entry.sha256, entry.size, progress=progress)
        except (ChecksumMismatchError, ZooOversizeDownloadError) as err:
            problems.append(str(err))
            continue
        except (urllib.error.URLError, OSError, ValueError) as err:
            problems.append(f"{url}: {type(err).__name__}: {err}")
            continue
        if local is not None and local.is_file():
            warnings.warn(f"{problems[0]}; downloaded a verified copy to {path}.", UserWarning, stacklevel=3)
        return path
    raise ZooFileError(
        f"Could not get a verified copy of the pretrained model '{entry.name}': "
        f"{'; '.join(p.rstrip('.') for p in problems)}. "
        f"Download {entry.filename} by hand from {urls[-1]}, check that its sha256 is {entry.sha256}, "
        f"and place it at exactly {target} (or set {MIRROR_ENV} to a mirror)."
    )


@dataclass(frozen=True)
class Verification:
    """The state of one pretrained model's files."""

    name: str
    status: str  #: "ok", "mismatch", "missing" (can be fetched) or "unavailable" (no copy, no source)
    path: Path | None
    detail: str
    remedy: str = ""  #: what to do about a "mismatch" or an "unavailable" file

    @property
    def ok(self) -> bool:
        """Whether the model can be loaded (now, or after a fetch)."""
        return self.status in ("ok", "missing")


def remedy(entry: Entry) -> str:
    """How to get a good copy of ``entry``'s file back: fetch it (it has a source), reinstall the
    package (a file shipped inside it), or publish it again (a manifest of your own, no URL)."""
    if entry.urls or os.environ.get(MIRROR_ENV):
        return f"delete it and fetch it again: python -m disentangle.zoo fetch {entry.name}"
    from .manifest import SHIPPED_MANIFEST

    if entry.manifest.resolve() == SHIPPED_MANIFEST.resolve():
        return "it is shipped inside the package: reinstall the package (pip install --force-reinstall disentangle-torch)"
    return (
        f"its manifest ({entry.manifest}) gives no URL to fetch it from: publish the model again "
        f"(python -m disentangle.zoo publish RUN_DIR {entry.name} --manifest {entry.manifest})"
    )


def verify_entry(entry: Entry) -> Verification:
    """Hash every local copy of ``entry`` (the manifest's file, the cache); nothing is downloaded.

    ``"ok"`` if a copy matches (the one loading uses; a damaged other copy is named in the detail),
    ``"mismatch"`` if copies are present and none matches, ``"missing"`` if there is no copy but a
    source to fetch it from, ``"unavailable"`` if there is neither; :attr:`Verification.remedy`
    says what to do.
    """
    found: list[tuple[Path, str]] = []
    for path in (entry.local_path, cache_file(entry)):
        if path is not None and path.is_file():
            found.append((path, file_hash(path, "sha256")))
    bad = [(p, h) for p, h in found if h != entry.sha256]
    good = [p for p, h in found if h == entry.sha256]
    if good:  # the copy fetch_entry loads (the manifest's file first, then the cache)
        if bad:
            path, actual = bad[0]
            return Verification(entry.name, "ok", good[0], f"sha256 {entry.sha256}; the damaged copy {path} "
                                f"(sha256 {actual}) is not used: delete it")
        return Verification(entry.name, "ok", good[0], f"sha256 {entry.sha256}")
    if bad:
        path, actual = bad[0]
        fix = (f"delete it and fetch it again: python -m disentangle.zoo fetch {entry.name}"
               if path == cache_file(entry) and (entry.urls or os.environ.get(MIRROR_ENV)) else remedy(entry))
        return Verification(entry.name, "mismatch", path, f"sha256 {actual}, manifest {entry.sha256}", fix)
    if not (entry.urls or os.environ.get(MIRROR_ENV)):
        return Verification(entry.name, "unavailable", None, "no copy on disk and no URL to fetch it from", remedy(entry))
    return Verification(entry.name, "missing", None, f"not downloaded (fetch it: python -m disentangle.zoo fetch {entry.name})")
