"""Where a config comes from: a YAML file, a shipped config's name, a registered source
(``zoo:NAME``), dotted overrides, and the saved config of an older run brought up to date.
"""
from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from .. import _compat
from .._core.choices import (
    LEGACY_VALUES,
)
from .._core.registry import Registry, did_you_mean
from ..errors import ConfigError
from .schema import ZOO_PREFIX

logger = logging.getLogger(__name__)

# ---------------------------------------------------------------------- shipped configs
#: folders of the shipped configs that are not training configs: the sweep files
_NON_TRAINING_FOLDERS = ("sweeps",)


def configs_root() -> Path:
    """The folder of the shipped configs: ``disentangle/configs`` in an installed wheel, the
    top-level ``configs/`` in a checkout (its single source)."""
    here = Path(__file__).resolve().parents[1]  # the package folder, disentangle/
    for candidate in (here / "configs", here.parent / "configs"):
        if candidate.is_dir():
            return candidate
    raise ConfigError(
        "The shipped configs are missing from this installation (neither disentangle/configs nor a "
        "checkout's configs/ folder exists). Reinstall the package (pip install disentangle-torch)."
    )


@_compat.renamed_keyword("include_studies", "include_sweeps")  # its name in 0.1
def shipped_config_names(include_sweeps: bool = False) -> list[str]:
    """Names of the shipped configs (``quickstart``, ``dsprites/factor_vae``, ...), sorted; the
    sweep files of ``configs/sweeps/`` are listed only with ``include_sweeps``."""
    root = configs_root()
    names = []
    for path in sorted(root.rglob("*.yaml")):
        name = path.relative_to(root).with_suffix("").as_posix()
        if not include_sweeps and name.split("/")[0] in _NON_TRAINING_FOLDERS:
            continue
        names.append(name)
    return names


def shipped_config_path(name: str) -> Path:
    """The file of the shipped config ``name`` (e.g. ``"dsprites/factor_vae"``, ``.yaml`` optional)."""
    clean = name[:-5] if name.endswith(".yaml") else name
    path = configs_root() / f"{clean}.yaml"
    if ".." in Path(clean).parts or not path.is_file():
        options = shipped_config_names()  # the sweep files are not training configs
        raise ConfigError(
            f"'{name}' is neither a config file nor a shipped config name.{did_you_mean(clean, options)} "
            f"Shipped configs: {', '.join(options)}. Pass a path to a YAML file, a shipped name, or "
            f"zoo:NAME for a zoo recipe (python -m disentangle.zoo list)."
        )
    return path


#: config sources named by a prefix, ``PREFIX:NAME``: a function of NAME returning the raw nested
#: config. ``zoo`` (``zoo:beta_tcvae-dsprites-beta6-s0``) is the zoo's recipes
#: (:func:`disentangle.zoo.config_dict`), found by its module's name when first used, as a plugin is:
#: this module knows nothing of the zoo, which sits above it and reads configs.
CONFIG_SOURCES: Registry[dict[str, Any]] = Registry("config source")


def _plugin(target: str) -> Callable[[str], dict[str, Any]]:
    """A config source given as ``"module:function"``, imported when it is first used."""
    module, _, function = target.partition(":")

    def source(name: str) -> dict[str, Any]:
        import importlib

        return getattr(importlib.import_module(module), function)(name)

    source.__qualname__ = source.__name__ = function
    source.__doc__ = f"The config of NAME from ``{target}`` (imported on first use)."
    return source


CONFIG_SOURCES.register(ZOO_PREFIX.rstrip(":"), _plugin("disentangle.zoo:config_dict"))


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key written twice in one mapping (YAML 1.2 forbids it;
    PyYAML keeps the last silently, so ``beta: 4`` then ``beta: 1`` would train β = 1 unnoticed)."""

    def construct_mapping(self, node, deep=False):
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor`: keys merged in may be overridden
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                hash(key)
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark, "found unhashable key", key_node.start_mark
                ) from None
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key '{key}' is written twice in one mapping (lines {seen[key]} and {line}); "
                    f"keep one", key_node.start_mark)
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str) -> Any:
    """The value of a YAML document, as ``yaml.safe_load`` reads it, except that a key written twice
    in one mapping is an error (``yaml.YAMLError``) instead of the last one winning."""
    return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass


def read_yaml_config(path: str | Path, what: str = "Config file") -> dict[str, Any]:
    """The mapping of sections in a YAML config file (an empty file gives ``{}``)."""
    path = Path(path)
    try:
        raw = load_yaml(path.read_text())
    except yaml.YAMLError as err:
        raise ConfigError(f"{what} '{path}' is not valid YAML: {err}") from None
    except UnicodeDecodeError as err:
        from .._core.checks import not_text_message

        raise ConfigError(not_text_message(path, err, f"the {what.lower()} (a YAML file such as configs/quickstart.yaml; "
                                                       "to go on with a run, pass its folder's config.yaml)")) from None
    if raw is None:
        raise ConfigError(
            f"{what} '{path}' is empty. A config names at least what to train, e.g. configs/quickstart.yaml "
            f"(python -m disentangle.train --config quickstart); every key left out takes its default "
            f"(docs/guides/configs.md)."
        )
    if not isinstance(raw, dict):
        raise ConfigError(f"{what} '{path}' must hold a mapping of sections, got {type(raw).__name__}.")
    return raw


def read_config_source(source: str | Path) -> dict[str, Any]:
    """The raw nested dict of a config source: a YAML path, a shipped config name, or
    ``PREFIX:NAME`` for a registered source (:data:`CONFIG_SOURCES`: ``zoo:NAME``)."""
    if isinstance(source, str) and ":" in source:
        prefix, _, name = source.partition(":")
        if prefix in CONFIG_SOURCES:
            return copy.deepcopy(CONFIG_SOURCES.get(prefix)(name))
    path = Path(source)
    if path.is_dir():
        options = sorted(p.name for p in path.glob("*.yaml"))
        listing = f" YAML files in it: {', '.join(options)}." if options else " It holds no YAML file."
        raise ConfigError(f"'{path}' is a folder, not a config file; pass one of its config files.{listing}")
    if not path.is_file():
        if path.suffix in ("", ".yaml") and not path.is_absolute() and not str(source).startswith("."):
            name = path.as_posix()
            # "configs/quickstart.yaml" (the README's command) also works outside a checkout
            name = name[len("configs/"):] if name.startswith("configs/") else name
            path = shipped_config_path(name)
        else:
            hint = ""
            if path.parent.is_dir():
                options = sorted(p.name for p in path.parent.glob("*.yaml"))
                hint = did_you_mean(path.name, options)
                if options:
                    hint += f" YAML files in {path.parent}/: {', '.join(options)}."
            raise ConfigError(f"Config file '{path}' does not exist.{hint}")
    return read_yaml_config(path)


def upgrade_saved_config(raw: dict[str, Any]) -> dict[str, Any]:
    """A saved config dict (a run folder's ``config.yaml``, a checkpoint's config, a zoo manifest's)
    with every key of :data:`LEGACY_VALUES` that it lacks set to the value its run used. A copy;
    the one place where the config of an older run is brought up to date."""
    raw = copy.deepcopy(raw)
    for key, value in LEGACY_VALUES.items():
        section, _, name = key.partition(".")
        node = raw.setdefault(section, {})
        if isinstance(node, dict):
            node.setdefault(name, value)
    return raw



#: sections whose registry name starts the section afresh when an override or a sweep changes it:
#: (section, name key, keys kept). The keys of one component would not apply to another, or would
#: mean something else there: a β-VAE config's ``objective.beta`` must not leak into a FactorVAE.
NAMED_SECTIONS = (("data", "name", ()), ("model", "backbone", ("latent_dim",)), ("objective", "name", ()))


def restart_renamed_sections(raw: dict[str, Any], assignments: Mapping[str, Any],
                             defaults: Mapping[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """In place: each section of :data:`NAMED_SECTIONS` whose name the dotted ``assignments``
    change keeps only its kept keys (the assignments then fill it in). Returns the keys left out,
    ``{section: {key: value}}``, for sections that had any besides their name.

    ``defaults`` (``{section: name}``) is the name a section that does not write one has: naming it
    is then no change. Sweeps pass none (a section without its name restarts, as their run ids
    have always been computed); the command line passes the schema's (:func:`default_names`)."""
    dropped: dict[str, dict[str, Any]] = {}
    for section, name_key, kept in NAMED_SECTIONS:
        dotted = f"{section}.{name_key}"
        if dotted not in assignments:
            continue
        current = raw.get(section) or {}
        written = current.get(name_key, (defaults or {}).get(section)) if isinstance(current, dict) else None
        if isinstance(current, dict) and written == assignments[dotted]:
            continue
        old = current if isinstance(current, dict) else {}
        raw[section] = {k: old[k] for k in kept if k in old}
        left = {k: v for k, v in old.items() if k != name_key and k not in kept and f"{section}.{k}" not in assignments}
        if left:
            dropped[section] = left
    return dropped


def default_names() -> dict[str, str]:
    """The component each named section has when its config does not name one (the schema's defaults)."""
    from .schema import DataConfig, ModelConfig, ObjectiveConfig

    return {"data": DataConfig().name, "model": ModelConfig().backbone, "objective": ObjectiveConfig().name}


def apply_overrides(raw: dict[str, Any], overrides: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """Return a copy of ``raw`` with ``section.key=value`` overrides applied (values parsed as YAML).

    An override that changes a component's name (``objective.name``, ``data.name``,
    ``model.backbone``) starts its section afresh, as a sweep does (:data:`NAMED_SECTIONS`): the
    config's other keys of that section are left out (logged as a warning), and the other overrides
    of the section apply to the new component."""
    raw = copy.deepcopy(raw)
    assignments = {}
    for item in overrides:
        if "=" in item:
            key, _, text = item.partition("=")
            try:
                assignments[key.strip()] = yaml.safe_load(text) if text.strip() else ""
            except yaml.YAMLError:
                assignments[key.strip()] = text
    for section, left in restart_renamed_sections(raw, assignments, default_names()).items():
        name_key = next(n for s, n, _ in NAMED_SECTIONS if s == section)
        logger.warning(
            "%s.%s=%s replaces the config's %s: its keys %s are left out, as they belong to the component "
            "replaced (defaults of the new one apply; give a key again as an override to set it).",
            section, name_key, assignments[f"{section}.{name_key}"], section,
            ", ".join(f"{section}.{k}={v}" for k, v in left.items()),
        )
    for item in overrides:
        if "=" not in item:
            raise ConfigError(
                f"Override '{item}' is not of the form key=value (e.g. train.steps=1000 or data.name=sprites)."
            )
        key, _, text = item.partition("=")
        key = key.strip()
        try:
            value = yaml.safe_load(text) if text.strip() else ""
        except yaml.YAMLError:
            value = text
        parts = key.split(".")
        if not all(parts):
            raise ConfigError(f"Override key '{key}' is malformed; use dotted names such as train.steps.")
        node = raw
        for part in parts[:-1]:
            if part not in node or node[part] is None:
                node[part] = {}
            if not isinstance(node[part], dict):
                raise ConfigError(f"Override '{item}': '{part}' is a value, not a section.")
            node = node[part]
        node[parts[-1]] = value
    return raw


