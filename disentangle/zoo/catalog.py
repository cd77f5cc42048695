"""The zoo's one table: every name, what kind it is, where its config comes from and its weights.

:func:`catalog` builds ``{name: ZooEntry}`` once, from the three sources of names (shipped
configs, the generated recipes with seed 0, and the pretrained models of the manifests), and
keeps it until a manifest changes (its path list, size or modification time). Generated recipes
with another seed (``-s7``) are valid names too: :func:`lookup` parses them on demand rather than
listing 50 copies of the grid. Pretrained entries carry a typed :class:`Pretrained` record.

The pattern is timm's model registry: one table built once (``_model_entrypoints``), typed
pretrained entries (``PretrainedCfg``), listing with wildcards (``list_models("beta_*",
pretrained=True)``) — here :func:`disentangle.zoo.names`.
"""
from __future__ import annotations

import copy
import fnmatch
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import ConfigError
from . import manifest, recipes

Kind = Literal["pretrained", "shipped", "locatello2019", "extra", "weak2020", "few_labels2020", "retired"]


@dataclass(frozen=True)
class Pretrained:
    """A pretrained model's manifest record, typed (the manifest's JSON fields, see
    :mod:`disentangle.zoo.manifest`)."""

    name: str
    sha256: str
    size: int | None
    file: str | None
    urls: tuple[str, ...]
    recipe: str | None
    model_number: int | None
    trained_steps: int | None
    wall_time_s: float | None
    metrics: Mapping[str, Mapping[str, float]]
    metrics_seed: int | None
    metrics_settings: Mapping[str, Mapping[str, Any]]
    machine: Mapping[str, Any]
    library_version: str | None
    torch_version: str | None
    published: str | None
    notes: str
    config: Mapping[str, Any]
    entry: manifest.Entry = field(repr=False, compare=False)  #: the manifest entry (file location, record)

    @classmethod
    def from_entry(cls, entry: manifest.Entry) -> Pretrained:
        r = entry.record
        steps = r.get("trained_steps")
        wall = r.get("wall_time_s")
        return cls(
            name=entry.name,
            sha256=entry.sha256,
            size=entry.size,
            file=r.get("file"),
            urls=tuple(entry.urls),
            recipe=r.get("recipe"),
            model_number=r.get("model_number"),
            trained_steps=int(steps) if steps is not None else None,
            wall_time_s=float(wall) if wall is not None else None,
            metrics=r.get("metrics") or {},
            metrics_seed=r.get("metrics_seed"),
            metrics_settings=r.get("metrics_settings") or {},
            machine=r.get("machine") or {},
            library_version=r.get("library_version"),
            torch_version=r.get("torch_version"),
            published=r.get("published"),
            notes=str(r.get("notes") or ""),
            config=r.get("config") or {},
            entry=entry,
        )

    @property
    def dataset(self) -> str | None:
        return (self.config.get("data") or {}).get("name")

    @property
    def objective(self) -> str | None:
        return (self.config.get("objective") or {}).get("name")


@dataclass(frozen=True)
class ZooEntry:
    """One zoo name: its kind, where its config comes from (``source``: a shipped YAML file, the
    generated family, or the manifest), and its weights when pretrained."""

    name: str
    kind: Kind
    source: str
    pretrained: Pretrained | None = None
    _config: Callable[[], dict[str, Any]] = field(default=dict, repr=False, compare=False)

    def config_dict(self) -> dict[str, Any]:
        """The raw nested config (YAML layout, before overrides): a fresh copy on every call."""
        return copy.deepcopy(self._config())


def _pretrained_entry(entry: manifest.Entry) -> ZooEntry:
    record = Pretrained.from_entry(entry)

    def config() -> dict[str, Any]:
        raw = copy.deepcopy(dict(record.config))
        raw.setdefault("train", {})["out_dir"] = f"runs/{record.name}"
        return raw

    return ZooEntry(record.name, "pretrained", str(entry.manifest), record, config)


def _retired_entry(name: str, record: Mapping[str, Any]) -> ZooEntry:
    """A retired model: its config (to retrain it) without weights; ``source`` names its replacement."""

    def config() -> dict[str, Any]:
        raw = copy.deepcopy(dict(record.get("config") or {}))
        raw.setdefault("train", {})["out_dir"] = f"runs/{name}"
        return raw

    return ZooEntry(name, "retired", f"retired (replaced by {record['replaced_by']})", None, config)


def _generated_entry(name: str) -> ZooEntry | None:
    parsed = recipes.parse_generated(name)
    if parsed is None:
        return None
    family, objective, dataset, strength, seed = parsed
    return ZooEntry(name, family.key, f"generated ({family.description})",  # type: ignore[arg-type]
                    None, lambda: recipes.generated_config(objective, dataset, strength, seed))


def _shipped_entry(name: str) -> ZooEntry:
    return ZooEntry(name, "shipped", f"configs/{name}.yaml", None, lambda: recipes.shipped_config(name))


def _manifest_key() -> tuple:
    """What the table depends on that can change while a program runs: the manifests."""
    key = [os.environ.get(manifest.MANIFEST_ENV, "")]
    for path in manifest.manifest_paths():
        try:
            stat = path.stat()
            key.append((str(path), stat.st_size, stat.st_mtime_ns))
        except OSError:
            key.append((str(path), None, None))
    return tuple(key)


_TABLE: tuple[tuple, dict[str, ZooEntry]] | None = None


def catalog() -> dict[str, ZooEntry]:
    """``{name: ZooEntry}``: shipped configs, generated recipes (seed 0) and pretrained models, in
    that order (a pretrained model replaces a same-named recipe). Built once per manifest state."""
    global _TABLE
    key = _manifest_key()
    if _TABLE is None or _TABLE[0] != key:
        table: dict[str, ZooEntry] = {}
        for name in recipes.shipped_names():
            table[name] = _shipped_entry(name)
        for name in recipes.generated_names(0):
            table[name] = _generated_entry(name)  # type: ignore[assignment]
        for name, entry in manifest.entries().items():
            table[name] = _pretrained_entry(entry)
        _TABLE = (key, table)
    return _TABLE[1]


def lookup(name: str) -> ZooEntry | None:
    """The entry of ``name``, generated recipes of any seed and retired models included (a retired
    model is no listed name, but its name keeps its config); None if it is no zoo name."""
    if not isinstance(name, str):
        return None
    entry = catalog().get(name)
    if entry is not None:
        return entry
    record = retired().get(name)
    return _retired_entry(name, record) if record is not None else _generated_entry(name)


_RETIRED: tuple[tuple, dict[str, dict[str, Any]]] | None = None


def retired() -> dict[str, dict[str, Any]]:
    """``{name: record}`` of the retired models of the manifests (:func:`manifest.retired`), kept
    until a manifest changes."""
    global _RETIRED
    key = _manifest_key()
    if _RETIRED is None or _RETIRED[0] != key:
        _RETIRED = (key, manifest.retired())
    return _RETIRED[1]


def recorded_mig(record: Mapping[str, Any] | None) -> float | None:
    """The MIG a manifest record holds (``metrics.mig.mig``), or None."""
    value = (((record or {}).get("metrics") or {}).get("mig") or {}).get("mig")
    return float(value) if isinstance(value, (int, float)) else None


def replacement_record(name: str) -> dict[str, Any] | None:
    """The manifest record of the model that replaces the retired model ``name`` (None if that is
    not a pretrained model of the manifests)."""
    new = lookup(retired()[name]["replaced_by"])
    return dict(new.pretrained.entry.record) if new is not None and new.pretrained is not None else None


def list_names(pattern: str | None = None, *, pretrained: bool = False) -> list[str]:
    """Names in the table order (pretrained models sorted), filtered by a shell-style wildcard
    ``pattern`` (``"beta_tcvae-*"``, ``"*-sprites-*"``); only those with weights if ``pretrained``."""
    table = catalog()
    if pretrained:
        names = sorted(n for n, e in table.items() if e.pretrained is not None)
    else:
        names = [n for n, e in table.items() if e.pretrained is None]
        names += sorted(n for n, e in table.items() if e.pretrained is not None and n not in names)
    if pattern is not None:
        if not isinstance(pattern, str):
            raise ConfigError(f"A name filter is a shell-style pattern such as 'beta_tcvae-*', got {pattern!r}.")
        names = [n for n in names if fnmatch.fnmatchcase(n, pattern)]
    return names


def clear() -> None:
    """Forget the table (it is rebuilt on next use): for code that changes the shipped configs."""
    global _TABLE, _RETIRED
    _TABLE = None
    _RETIRED = None


__all__ = [
    "Kind", "Pretrained", "ZooEntry", "catalog", "clear", "list_names", "lookup", "recorded_mig",
    "replacement_record", "retired",
]
