"""The manifests of pretrained models: which files exist, their hashes, provenance and scores.

The package ships ``disentangle/zoo/manifest.json`` with its weight files in
``disentangle/zoo/weights/``. Users add their own zoo folders through the environment variable
``DISENTANGLE_ZOO_MANIFEST``: one or more manifest paths separated by ``os.pathsep`` (``:`` on
Linux/macOS). Entries of later manifests replace same-named earlier ones (user manifests come after
the shipped one).

A manifest is JSON::

    {"format": 1,
     "models": {
       "beta_tcvae-sprites-beta6-cpu20k-ref-s0": {
         "file": "weights/beta_tcvae-sprites-beta6-cpu20k-ref-s0.safetensors",  # relative to the manifest
         "sha256": "…", "size": 3021234,                 # a download longer than size is stopped
         "urls": ["https://…/beta_tcvae-sprites-beta6-cpu20k-ref-s0.safetensors"],   # may be empty
         "recipe": "…" | null, "model_number": null,
         "config": {…resolved config…},
         "trained_steps": 20000, "wall_time_s": 5400.0, "wall_time_source": "…",
         "machine": {…}, "library_version": "0.1.0", "torch_version": "…", "published": "…",
         "metrics": {"mig": {"discrete_mig": 0.21}, …}, "metrics_seed": 0, "metrics_settings": {}
       }},
     "retired": {                                        # optional
       "beta_tcvae-sprites-beta6-cpu20k-s0": {
         "replaced_by": "beta_tcvae-sprites-beta6-cpu20k-ref-s0", "reason": "…",
         "retired": "2026-11-24", …the model's last record (config, sha256, metrics)…}}}

A *retired* model is one the zoo no longer ships (:func:`retire_entry` moves it there): its name
stays known, its record (config, scores, sha256) stays readable with ``zoo.info`` and trainable
with ``--config zoo:NAME``, and loading it is refused with a message naming its replacement.
"""
from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._core.atomic import atomic_write_bytes
from ..errors import ManifestError

MANIFEST_ENV = "DISENTANGLE_ZOO_MANIFEST"
FORMAT_VERSION = 1
SHIPPED_MANIFEST = Path(__file__).resolve().parent / "manifest.json"
SHIPPED_WEIGHTS = Path(__file__).resolve().parent / "weights"


@dataclass(frozen=True)
class Entry:
    """One pretrained model of a manifest."""

    name: str
    record: dict[str, Any]
    manifest: Path = field(compare=False)

    @property
    def sha256(self) -> str:
        return str(self.record["sha256"]).lower()

    @property
    def size(self) -> int | None:
        size = self.record.get("size")
        return int(size) if size is not None else None

    @property
    def filename(self) -> str:
        return Path(str(self.record.get("file") or f"{self.name}.safetensors")).name

    @property
    def local_path(self) -> Path | None:
        """Where the manifest says the file lies on disk (relative paths: to the manifest), if anywhere."""
        file = self.record.get("file")
        if not file:
            return None
        path = Path(file)
        return path if path.is_absolute() else self.manifest.parent / path

    @property
    def urls(self) -> list[str]:
        return [str(u) for u in self.record.get("urls") or []]


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ManifestError(
            f"The zoo manifest {path} does not exist. Check {MANIFEST_ENV} (it lists manifest files "
            f"separated by '{os.pathsep}'), or create one with python -m disentangle.zoo publish RUN_DIR "
            f"--name NAME --manifest {path}."
        ) from None
    except (OSError, ValueError) as err:
        raise ManifestError(f"The zoo manifest {path} cannot be read as JSON ({err}).") from None
    if not isinstance(data, dict) or not isinstance(data.get("models"), dict):
        raise ManifestError(f"The zoo manifest {path} has no 'models' mapping; it is not a disentangle zoo manifest.")
    version = data.get("format", FORMAT_VERSION)
    if isinstance(version, bool) or not isinstance(version, int):
        raise ManifestError(
            f"The zoo manifest {path} has format {version!r}; it must be a whole number ({FORMAT_VERSION} for this "
            f"library). Write \"format\": {FORMAT_VERSION}, or leave it out."
        )
    if version > FORMAT_VERSION:
        raise ManifestError(
            f"The zoo manifest {path} has format {data.get('format')}, newer than this library reads "
            f"({FORMAT_VERSION}); upgrade disentangle."
        )
    for name, record in data["models"].items():
        digest = record.get("sha256") if isinstance(record, dict) else None
        if not isinstance(digest, str) or len(digest) != 64 or any(c not in "0123456789abcdefABCDEF" for c in digest):
            raise ManifestError(f"The zoo manifest {path}: entry '{name}' has no valid sha256 (64 hex digits).")
        urls = record.get("urls")
        if urls is not None and (not isinstance(urls, list) or not all(isinstance(u, str) for u in urls)):
            raise ManifestError(
                f"The zoo manifest {path}: entry '{name}' has 'urls' {urls!r}; it must be a list of URLs, e.g. "
                f"[\"https://example.org/{name}.safetensors\"], or be left out."
            )
        _check_file(path, name, record)
        size = record.get("size")
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
            raise ManifestError(
                f"The zoo manifest {path}: entry '{name}' has 'size' {size!r}; it must be the weight file's "
                f"size in bytes (a non-negative integer), or be left out."
            )
    _check_retired(path, data)
    return data


def _check_file(path: Path, name: str, record: dict[str, Any]) -> None:
    """Refuse a ``file`` (or, without one, a model name) whose last part names no file: empty, ``.``
    or ``..``. The last part is the name of the cached download (``<cache>/zoo/<it>``) and of the
    mirror's URL; ``..`` would put the download outside the cache."""
    file = record.get("file")
    if file is not None and not isinstance(file, str):
        raise ManifestError(
            f"The zoo manifest {path}: entry '{name}' has 'file' {file!r}, which is not a path. Give the "
            f"weight file's path (relative to the manifest), e.g. \"weights/{name}.safetensors\", or leave "
            f"'file' out for a file that is only downloaded."
        )
    last = (file if file is not None else f"{name}.safetensors").replace("\\", "/").rsplit("/", 1)[-1]
    if last in ("", ".", ".."):
        what = f"'file' {file!r}" if file is not None else f"the name {name!r}"
        raise ManifestError(
            f"The zoo manifest {path}: entry '{name}' has {what}, whose last part ({last!r}) names no file: "
            f"it must end in the weight file's name (e.g. \"weights/{Path(str(name)).name or 'MODEL'}.safetensors\"), "
            f"which is also the name of its download in the cache and on a mirror. Fix the entry."
        )


def _check_retired(path: Path, data: dict[str, Any]) -> None:
    retired = data.get("retired", {})
    if not isinstance(retired, dict):
        raise ManifestError(f"The zoo manifest {path} has a 'retired' that is not a mapping of names to records.")
    for name, record in retired.items():
        if not isinstance(record, dict) or not isinstance(record.get("replaced_by"), str) or not isinstance(record.get("reason"), str):
            raise ManifestError(
                f"The zoo manifest {path}: retired entry '{name}' needs 'replaced_by' (the name of the model that "
                f"replaces it) and 'reason' (why it was retired), both strings. Fix the entry, or move the model "
                f"back to 'models'."
            )
        if name in data["models"]:
            raise ManifestError(
                f"The zoo manifest {path} lists '{name}' both as a model and as retired; keep one of the two."
            )


def manifest_paths() -> list[Path]:
    """The shipped manifest followed by those named in ``$DISENTANGLE_ZOO_MANIFEST``."""
    extra = [Path(p).expanduser() for p in os.environ.get(MANIFEST_ENV, "").split(os.pathsep) if p.strip()]
    return [SHIPPED_MANIFEST, *extra]


def entries() -> dict[str, Entry]:
    """Every pretrained model, by name (later manifests override earlier ones)."""
    found: dict[str, Entry] = {}
    for path in manifest_paths():
        if path == SHIPPED_MANIFEST and not path.exists():
            continue
        for name, record in _read(path)["models"].items():
            found[name] = Entry(name, record, path)
    return found


def retired() -> dict[str, dict[str, Any]]:
    """Every retired model's record, by name (later manifests override earlier ones; a model that a
    later manifest lists under 'models' is not retired)."""
    found: dict[str, dict[str, Any]] = {}
    for path in manifest_paths():
        if path == SHIPPED_MANIFEST and not path.exists():
            continue
        data = _read(path)
        for name in data["models"]:
            found.pop(name, None)
        found.update(data.get("retired", {}))
    return found


def read_manifest(path: str | Path) -> dict[str, Any]:
    """A manifest's content, or an empty one if the file does not exist yet."""
    path = Path(path)
    return _read(path) if path.exists() else {"format": FORMAT_VERSION, "models": {}}


@contextlib.contextmanager
def locked(path: str | Path) -> Iterator[None]:
    """Hold an exclusive lock on the manifest at ``path`` (a ``.lock`` file beside it, ``flock``) so
    that two publishes into one manifest read, check and write it one after the other; where
    ``fcntl`` does not exist (Windows) nothing is locked. Re-entrant within a process is not needed:
    callers take it once, around the read-check-write."""
    path = Path(path)
    try:
        import fcntl
    except ImportError:  # not POSIX
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def write_entry(path: str | Path, name: str, record: dict[str, Any]) -> None:
    """Add or replace ``name`` in the manifest at ``path`` (atomic rewrite, sorted names); a retired
    model of that name is brought back (its retired record is dropped). The caller holds
    :func:`locked` where another process may write the same manifest."""
    path = Path(path)
    data = read_manifest(path)
    data["format"] = FORMAT_VERSION
    data["models"][name] = record
    if name in data.get("retired", {}):
        del data["retired"][name]
    data["models"] = dict(sorted(data["models"].items()))
    atomic_write_bytes(path, (json.dumps(data, indent=1, sort_keys=False) + "\n").encode())


def retire_entry(path: str | Path, name: str, replaced_by: str, reason: str, date: str) -> dict[str, Any]:
    """Move ``name`` from the manifest's ``models`` to its ``retired`` records (atomic rewrite), with
    ``replaced_by`` (a model of the same manifest), ``reason`` and the ``date`` it was retired; the
    record (config, sha256, scores) is kept, its weight file is not touched. Returns the record."""
    path = Path(path)
    data = read_manifest(path)
    if name not in data["models"]:
        raise ManifestError(f"The zoo manifest {path} has no model '{name}' to retire.")
    if replaced_by not in data["models"] or replaced_by == name:
        raise ManifestError(
            f"'{name}' cannot be retired in favour of '{replaced_by}': the replacement must be another "
            f"model of the same manifest ({path}). Publish the replacement first."
        )
    record = {"replaced_by": replaced_by, "reason": reason, "retired": date, **data["models"].pop(name)}
    data.setdefault("retired", {})[name] = record
    data["retired"] = dict(sorted(data["retired"].items()))
    _check_retired(path, data)
    atomic_write_bytes(path, (json.dumps(data, indent=1, sort_keys=False) + "\n").encode())
    return record
