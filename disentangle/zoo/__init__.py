"""The model zoo: every recipe by name, and pretrained weights loaded in one line.

>>> import disentangle.zoo as zoo
>>> zoo.names()[:2]                                         # doctest: +SKIP
>>> cfg = zoo.config("beta_tcvae-dsprites-beta6-s0")        # a validated Config
>>> model = zoo.load("beta_tcvae-sprites-beta6-cpu20k-ref-s0")  # doctest: +SKIP (pretrained, eval mode)

Names (see :mod:`disentangle.zoo.recipes`): shipped configs (``quickstart``,
``dsprites/factor_vae``), generated recipes ``METHOD-DATASET-PARAMVALUE-sSEED`` (the Locatello
et al. 2019 grid with disentanglement_lib's model numbers, InfoVAE and AAE, the weakly-supervised
grid of Locatello et al. 2020), and pretrained models listed in the manifests
(:mod:`disentangle.zoo.manifest`). Weight files are safetensors with their provenance
(:mod:`disentangle.zoo.weights`), checked against the manifest's full sha256 before use and
downloaded into the cache when not shipped (:mod:`disentangle.zoo.fetching`).

Environment variables:

* ``DISENTANGLE_DATA``: the cache folder (default ``~/.cache/disentangle``; files go to ``zoo/``).
* ``DISENTANGLE_ZOO_URL``: a mirror's base URL, tried first (``$DISENTANGLE_ZOO_URL/FILE``).
* ``DISENTANGLE_OFFLINE=1``: never download; a missing file is an error naming the URL, the
  sha256 and the exact path to place the file at.
* ``DISENTANGLE_ZOO_MANIFEST``: extra manifest files (``os.pathsep``-separated), e.g. a folder
  you published into with ``python -m disentangle.zoo publish RUN --name N --manifest M``.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch

from .._core.devices import check_device
from .._core.registry import did_you_mean
from ..errors import (
    ConfigError,
    HashMismatchError,
    ManifestError,
    RetiredModelError,
    UnknownNameError,
    WeightsError,
    ZooFileError,
)
from . import catalog, locatello, recipes
from .fetching import MIRROR_ENV, OFFLINE_ENV, Verification, fetch_entry, verify_entry
from .manifest import MANIFEST_ENV, Entry
from .publish import DEFAULT_METRICS, publish
from .weights import build_model, read_verified

__all__ = [
    "DEFAULT_METRICS",
    "HashMismatchError",
    "MANIFEST_ENV",
    "MIRROR_ENV",
    "ManifestError",
    "OFFLINE_ENV",
    "RetiredModelError",
    "WeightsError",
    "ZooFileError",
    "config",
    "catalog",
    "config_dict",
    "entry",
    "fetch",
    "info",
    "load",
    "locatello",
    "names",
    "publish",
    "verify",
]


def names(pretrained: bool = False, filter: str | None = None) -> list[str]:
    """Every recipe name (generated recipes once, with ``-s0``; any ``-sN`` is valid), shipped
    configs first; with ``pretrained`` only the models that have weights; ``filter`` a shell-style
    wildcard (``names(pretrained=True, filter="beta_tcvae-*")``)."""
    return catalog.list_names(filter, pretrained=pretrained)


def entry(name: str) -> catalog.ZooEntry:
    """The catalog entry of a zoo name (kind, config source, typed pretrained record or None)."""
    found = catalog.lookup(name)
    if found is None:
        if not isinstance(name, str):
            raise UnknownNameError(f"A zoo name is a string such as 'beta_tcvae-dsprites-beta6-s0', got {name!r}.")
        raise UnknownNameError(recipes.describe_unknown(name, names()))
    return found


def config_dict(name: str) -> dict[str, Any]:
    """The raw nested config (YAML layout, before overrides) of a zoo name.

    A pretrained model gives the resolved config it was trained with (``train.out_dir`` set to
    ``runs/NAME``); a shipped config its file's content; a generated recipe its config.
    """
    return entry(name).config_dict()


def config(name: str, overrides: list[str] | tuple[str, ...] = ()):
    """The validated :class:`~disentangle.config.Config` of a zoo name (with dotted overrides)."""
    from ..config import Config, apply_overrides

    return Config.from_dict(apply_overrides(config_dict(name), overrides))


def info(name: str) -> dict[str, Any]:
    """What the zoo knows about ``name``.

    Always ``name``, ``kind`` (``"pretrained"``, ``"shipped"``, ``"locatello2019"``, ``"extra"``,
    ``"weak2020"``, ``"few_labels2020"``, ``"retired"``), ``pretrained``, ``config`` (raw nested
    dict) and ``model_number`` (disentanglement_lib's, or None). A retired model adds its last
    manifest record (``replaced_by``, ``reason``, ``retired``, ``sha256``, ``metrics``, …).
    Pretrained models add their manifest record: ``sha256``, ``size``, ``file``, ``urls``,
    ``recipe``, ``trained_steps``, ``wall_time_s``, ``machine``,
    ``library_version``, ``metrics`` (``{metric: {score: value}}``), ``metrics_seed``, …, and
    ``manifest`` (the manifest file) and ``cache_path`` (where a download goes).
    """
    found = entry(name)
    raw = found.config_dict()
    if found.pretrained is not None:
        from .fetching import cache_file

        record = found.pretrained.entry
        out = {"name": name, "kind": "pretrained", "pretrained": True, **copy.deepcopy(record.record)}
        out["config"] = raw
        out["manifest"] = str(record.manifest)
        out["local_path"] = str(record.local_path) if record.local_path is not None else None
        out["cache_path"] = str(cache_file(record))
        out.setdefault("model_number", locatello.model_number_for_config(record.record["config"]))
        return out
    if found.kind == "retired":
        record = copy.deepcopy(catalog.retired()[name])
        return {**record, "name": name, "kind": "retired", "pretrained": False, "config": raw,
                "model_number": record.get("model_number")}
    if found.kind != "shipped":
        number = recipes.model_number_of(name)
    else:
        try:  # a shipped config may be one of the study's models (configs/datasets/dsprites: #100)
            number = locatello.model_number_for_config(raw)
        except ConfigError:
            number = None
    return {"name": name, "kind": found.kind, "pretrained": False, "config": raw, "model_number": number}


def _retired_message(name: str, record: dict[str, Any]) -> str:
    """Why the retired model ``name`` cannot be loaded, what replaces it, and how to get it back."""
    new = record["replaced_by"]

    def mig(model: dict[str, Any] | None) -> str:
        value = catalog.recorded_mig(model)
        return f"MIG {value:.3f}" if value is not None else "MIG not recorded"

    replacement = catalog.replacement_record(name)
    new_score = mig(replacement) if replacement is not None else "not found"
    return (
        f"The pretrained model '{name}' was retired from the zoo on {record.get('retired', '?')}: "
        f"{record['reason'].rstrip('.')}. Its replacement is '{new}' ({new_score}, against {mig(record)}): "
        f"zoo.load('{new}'). The retired model's config and scores stay readable with "
        f"zoo.info('{name}') (python -m disentangle.zoo info {name}); to have the model itself, retrain it "
        f"with python -m disentangle.train --config zoo:{name}, or list a copy of its file (sha256 "
        f"{record.get('sha256', '?')}) in a manifest of your own (${MANIFEST_ENV})."
    )


def _pretrained_entry(name: str) -> Entry:
    found = catalog.lookup(name)
    if found is not None and found.kind == "retired":
        raise RetiredModelError(_retired_message(name, catalog.retired()[name]))
    if found is None or found.pretrained is None:
        trained = names(pretrained=True)
        if found is not None:  # a recipe: its method's pretrained models, and how to train it
            method = str(name).split("-", 1)[0]
            same = [t for t in trained if t.split("-", 1)[0] == method]
            kin = (f" Pretrained models of {method}: {', '.join(same)}." if same
                   else f" No pretrained model is of {method}.")
            raise UnknownNameError(
                f"'{name}' is a recipe without pretrained weights.{kin} Train it with python -m disentangle.train "
                f"--config zoo:{name}, or list every pretrained model with python -m disentangle.zoo list --pretrained."
            )
        raise UnknownNameError(
            f"'{name}' is not a zoo name.{did_you_mean(str(name), trained)} Pretrained models: "
            f"{', '.join(trained) if trained else '(none in the manifests)'}. Train a recipe with "
            f"python -m disentangle.train --config zoo:NAME, or list the pretrained models with "
            f"python -m disentangle.zoo list --pretrained."
        )
    return found.pretrained.entry


def fetch(name: str, *, progress: bool = True) -> Path:
    """The verified local weight file of a pretrained model (downloaded into the cache if needed)."""
    return fetch_entry(_pretrained_entry(name), progress=progress)


def load(name: str, map_location: str | torch.device = "cpu"):
    """A pretrained model, in eval mode: a :class:`~disentangle.models.vae.VAE` with ``config`` (the
    resolved training config), ``trained_steps`` and ``zoo_metadata`` (the file's provenance). A
    ``map_location`` that is not a device of this machine (``"cuda"`` without CUDA, ``"gpu"``) is a
    :class:`~disentangle.ConfigError` naming the devices there are, before anything is downloaded
    (:func:`disentangle._core.devices.check_device`)."""
    map_location = check_device(map_location, "map_location")
    entry = _pretrained_entry(name)
    path = fetch_entry(entry)
    tensors, metadata = read_verified(path, entry.sha256)
    model = build_model(tensors, metadata, map_location=map_location)
    model.zoo_name = name
    return model


def verify(name: str | None = None) -> list[Verification]:
    """Hash the local copies of one pretrained model (or of all, for None) against the manifest."""
    if name is not None:
        return [verify_entry(_pretrained_entry(name))]
    return [verify_entry(e.pretrained.entry) for e in catalog.catalog().values() if e.pretrained is not None]
