"""Stable run ids: a hash of the fully resolved config, minus the keys that do not change a result.

``run_id(config) = sha256("disentangle-run-v1\\n" + canonical_json(identity(config)))[:16]``
(hexadecimal), where ``identity`` drops :data:`EXCLUDED_KEYS` and ``canonical_json`` is
``json.dumps(..., sort_keys=True, separators=(",", ":"))`` of the resolved config
(:meth:`disentangle.config.Config.to_dict`: every default filled in, tuples as lists, numbers typed
by the config schema, so ``beta: 4`` and ``beta: 4.0`` give the same id). The id is the same in
every process, Python version and machine: no ``hash()``, no dict-order dependence.

Excluded (they change where, how fast or how visibly a run trains, not the model it defines):
``train.device`` (the same run on another device keeps its id), ``train.compile``, ``train.channels_last``,
``train.conv_transpose_via_conv``, ``train.flush_denormal``, ``train.tf32`` and ``train.cudnn_benchmark`` (execution strategies, like
the device), ``train.out_dir`` (the
sweep puts the run in ``DIR/runs/<id>``), ``train.progress``, ``train.log_every``,
``train.threads`` (how many CPU threads compute the steps),
``train.checkpoint_every`` (the trainer's resume is bit-exact whatever the checkpoint interval),
``train.eval_every`` and ``train.eval_metrics`` (evaluation during training restores every RNG
state), ``train.traversals``, ``train.tensorboard``, ``train.image_every`` and ``train.callbacks``
(pictures, logs and your own code: a callback that stops a run early, such as early stopping, ends
the same run sooner; the sweep scores it at the step it stopped, and its ``metrics.json`` records
``steps`` and ``stop_reason``),
``data.download`` (whether a missing file may be fetched), ``data.cache_dir`` (which folder the
downloaded dataset file is kept in: the same file, verified against the same checksum, wherever it
lies), ``data.cache`` (which folder an image folder's or CelebA's decoded images are cached in: the
cache is keyed by the files and the settings, so it holds the same images wherever it lies) and
``data.placement`` (the images held on the training device or streamed from the host: the
same batches either way). The excluded ``train`` keys are exactly the trainer's resumable keys (``RESUMABLE_KEYS``) but
``steps``, so a rerun that changes one of them resumes the same run folder.

A key is dropped only where the section has it: datasets without the key (the procedural
``sprites`` has no ``download`` or ``cache_dir``) hash exactly as before it was excluded, so adding a
key to :data:`EXCLUDED_KEYS` changes no id of a run that does not set it.

A key added to the config later, at the value that reproduces the runs from before it existed
(:data:`disentangle._core.choices.LEGACY_VALUES`: ``model.init: pytorch``), is dropped too, so those runs
keep their ids; any other value of it (``model.init: reference``, the default) counts.

``train.schedules`` (added later) is dropped when empty (:data:`DROPPED_AT_DEFAULT`): a run without
schedules keeps the id it had before the key existed; a schedule counts.

``data.materialize`` (render the dataset's grid once or per batch: the same images) is hashed as
``false`` whatever its value (:data:`NORMALISED_KEYS`), the value every id hashed before ``auto``
became its default.

Everything else counts, including ``train.precision`` and ``data.path`` (which file is read: a
user's own copy may differ from the published one). A new config key added by
a later version of the library, or a changed default, changes the ids of the runs it affects: the
old run folders stay intact (each holds its own ``config.yaml``), but a rerun would train them anew.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from .._core.choices import LEGACY_VALUES

#: dotted config keys left out of the run id (see the module docstring for why)
EXCLUDED_KEYS: tuple[str, ...] = (
    "train.device",
    "train.compile",
    "train.channels_last",
    "train.conv_transpose_via_conv",
    "train.flush_denormal",
    "train.tf32",
    "train.cudnn_benchmark",
    "train.threads",
    "train.tensorboard",
    "train.image_every",
    "train.out_dir",
    "train.progress",
    "train.log_every",
    "train.checkpoint_every",
    "train.eval_every",
    "train.eval_metrics",
    "train.traversals",
    "train.callbacks",
    "data.download",
    "data.cache_dir",
    "data.cache",
    "data.placement",
)

#: keys added to the config later whose default changes nothing (no schedule): left out of the id at
#: that default, so every run from before the key keeps its id, and counted at any other value
DROPPED_AT_DEFAULT: dict[str, Any] = {"train.schedules": {}}

#: execution strategies that are dataset parameters, hashed at the one value every run id has
#: always hashed whatever the run chose (a materialised grid holds the same images as one
#: rendered per batch; ``auto`` became the default after ids were pinned)
NORMALISED_KEYS: dict[str, Any] = {"data.materialize": False}

ID_SCHEME = "disentangle-run-v1"
ID_LENGTH = 16


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: one text per value, in every process."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def identity(config: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a resolved nested config that defines the result: ``config`` minus
    :data:`EXCLUDED_KEYS`, with :data:`NORMALISED_KEYS` at their one hashed value."""
    out = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in config.items()}  # sections copied, not shared
    for key in EXCLUDED_KEYS:
        section, _, name = key.partition(".")
        if isinstance(out.get(section), dict):
            out[section].pop(name, None)
    for key, value in NORMALISED_KEYS.items():
        section, _, name = key.partition(".")
        if isinstance(out.get(section), dict) and name in out[section]:
            out[section][name] = value
    for key, value in {**LEGACY_VALUES, **DROPPED_AT_DEFAULT}.items():  # a later key at the value of runs before it
        section, _, name = key.partition(".")
        if isinstance(out.get(section), dict) and name in out[section] and out[section][name] == value:
            out[section].pop(name)
    return out


def run_id(config: Any) -> str:
    """The stable id of a run: 16 hex digits of the sha256 of its identity (module docstring).

    ``config`` is a :class:`~disentangle.config.Config` or its resolved nested dict.
    """
    raw = config.to_dict() if hasattr(config, "to_dict") else config
    text = ID_SCHEME + "\n" + canonical_json(identity(raw))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:ID_LENGTH]
