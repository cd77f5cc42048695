"""Sweep files -> the grid of runs: parse, expand the grid, validate every run before anything is created.

A *sweep file* says what to train: a base config, overrides, a grid, seeds and metrics. Parsed,
expanded and validated it is a :class:`SweepPlan`. The shipped sweep files live in
``configs/sweeps/`` (:func:`shipped_sweep_names`). Analysing the results of a sweep is the work of
another package, :mod:`disentangle.study` (Locatello et al.'s analyses).

A sweep file is a YAML mapping::

    name: mini                       # optional; defaults to the file name
    description: ...                 # optional free text
    base: quickstart                 # a config: shipped name, YAML path (relative to this file
                                     # first), or zoo:NAME
    set:                             # dotted overrides applied to every run
      train.steps: 30000
    grid:                            # a mapping: the product of its lists (last key fastest) ...
      objective.beta: [1, 2, 4]
    # ... or a list of mappings: the union of their products, in order
    seeds: 3                         # a count n (seeds 0..n-1) or a list of integers
    metrics: [mig, dci]              # metric names (disentangle.metrics.METRICS) or "all"
    metric_settings: {mig: {num_train: 2000}}   # optional keyword settings per metric
    imports: [my_lab.datasets]       # optional modules (names or .py paths) that register
                                     # datasets/objectives/backbones, imported in every worker

Runs are ordered grid point by grid point, seeds fastest (disentanglement_lib's order when the
grid lists methods and strengths in its order). A grid point or ``set`` that changes a registry
name (``data.name``, ``model.backbone``, ``objective.name``) away from the base's starts that
section afresh from the new component's defaults (``model.latent_dim`` is kept): the base's
``objective.beta`` must not leak into a FactorVAE, say. Points that resolve to the same run (same
id) are run once.
"""
from __future__ import annotations

import copy
import dataclasses
import inspect
import itertools
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .. import _compat
from .._compat import REMOVED_IN
from .._core.registry import did_you_mean
from ..config.sources import load_yaml, restart_renamed_sections
from ..errors import ConfigError
from ..metrics import results as results_table
from .ids import EXCLUDED_KEYS, run_id

SWEEP_KEYS = ("name", "description", "base", "set", "grid", "seeds", "metrics", "metric_settings", "imports")
_CONFIG_SECTIONS = ("seed", "data", "model", "objective", "train")


@dataclass(frozen=True)
class RunSpec:
    """One run of a sweep: its id, seed, grid values (those of the keys that vary across the sweep)
    and resolved config (``train.out_dir`` as in the base)."""

    run_id: str
    index: int
    seed: int
    values: dict[str, Any]
    config: dict[str, Any]
    dlib_model_number: int | None = None

    def describe(self) -> str:
        """``objective.beta=4, seed=1``: the run's grid values, as a human reads them."""
        items = [f"{k}={_short(v)}" for k, v in self.values.items()]
        return ", ".join([*items, f"seed={self.seed}"])


@dataclass
class SweepPlan:
    """A parsed, expanded and validated sweep file (see the module docstring for the file format)."""

    source: str
    name: str
    base: str
    set: dict[str, Any]
    grid: list[dict[str, list[Any]]]
    seeds: list[int]
    metrics: list[str]
    metric_settings: dict[str, dict[str, Any]]
    imports: list[str]
    raw: dict[str, Any]
    runs: list[RunSpec] = field(default_factory=list)
    varying_keys: list[str] = field(default_factory=list)
    merged_duplicates: int = 0
    description: str = ""
    #: the ids of the runs whose ``train.precision`` the sweep file leaves at ``auto`` (given so, or not
    #: given: the default): resolved by the machine that expands the sweep file, so their ids are
    #: that machine's (:func:`disentangle.sweep.api.run` warns)
    auto_precision_runs: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------- locating a sweep file
#: prefixes of a shipped sweep name that are dropped (``sweeps/mini``, ``configs/sweeps/mini``)
_PREFIXES = ("configs/sweeps/", "sweeps/")
#: the folder's name before release 0.2 (``configs/studies/``): still read, with a warning
_OLD_PREFIXES = ("configs/studies/", "studies/")


def sweeps_root() -> Path:
    """The folder of the shipped sweep files (``configs/sweeps/``)."""
    from ..config import configs_root

    return configs_root() / "sweeps"


def shipped_sweep_names() -> list[str]:
    """Names of the shipped sweep files (``mini``, ``locatello2019/dsprites``, ...)."""
    root = sweeps_root()
    if not root.is_dir():
        return []
    return sorted(p.relative_to(root).with_suffix("").as_posix() for p in root.rglob("*.yaml"))


def sweep_path(source: str | Path) -> Path:
    """The file of a sweep: a YAML path, or a shipped sweep name (``mini``, ``locatello2019/dsprites``;
    ``sweeps/mini`` and ``configs/sweeps/mini`` too). The old spellings ``studies/NAME`` and
    ``configs/studies/NAME`` still find ``NAME``, with a :class:`DeprecationWarning`."""
    path = Path(source)
    if path.is_file():
        return path
    name = path.as_posix()
    for prefix in _PREFIXES:
        if name.startswith(prefix):
            name = name[len(prefix):]
            break
    else:
        for prefix in _OLD_PREFIXES:
            if name.startswith(prefix):
                name = name[len(prefix):]
                bare = name[:-5] if name.endswith(".yaml") else name
                warnings.warn(
                    f"The shipped sweep files moved from configs/studies/ to configs/sweeps/ in disentangle "
                    f"0.2; the spelling '{source}' goes away in {REMOVED_IN}. Write '{bare}' or "
                    f"'configs/sweeps/{name}'.",
                    DeprecationWarning,
                    stacklevel=2,
                )
                break
    name = name[:-5] if name.endswith(".yaml") else name
    candidate = sweeps_root() / f"{name}.yaml"
    if ".." not in Path(name).parts and candidate.is_file():
        return candidate
    options = shipped_sweep_names()
    raise ConfigError(
        f"Sweep file '{source}' is neither a file nor a shipped sweep name.{did_you_mean(name, options)} "
        f"Shipped sweep files: {', '.join(options) or '(none)'}. Pass a path to a sweep YAML file or one of "
        f"those names."
    )


# ---------------------------------------------------------------------- parsing
def load_sweep(source: str | Path) -> SweepPlan:
    """Read, expand and validate a sweep file; raises :class:`~disentangle.ConfigError` (one
    paragraph naming the run and the key) for any problem, before anything is created."""
    path = sweep_path(source)
    try:
        raw = load_yaml(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"Sweep file '{path}' is not valid YAML: {err}") from None
    except UnicodeDecodeError as err:
        from .._core.checks import not_text_message

        raise ConfigError(not_text_message(path, err, "the sweep file (a YAML file such as configs/sweeps/NAME.yaml)")) from None
    return sweep_from_dict(raw, source=str(path), folder=path.parent)


def sweep_from_dict(raw: Any, source: str = "<dict>", folder: str | Path | None = None) -> SweepPlan:
    """Parse, expand and validate a sweep given as a dict (the YAML layout of a sweep file)."""
    where = f"Sweep file '{source}'"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} must be a mapping with the keys {', '.join(SWEEP_KEYS)}; got {type(raw).__name__}.")
    for key in raw:
        if key not in SWEEP_KEYS:
            raise ConfigError(
                f"{where} has an unknown key '{key}'.{did_you_mean(str(key), SWEEP_KEYS)} "
                f"Valid keys: {', '.join(SWEEP_KEYS)}."
            )
    folder = Path(folder) if folder is not None else Path.cwd()
    if "base" not in raw or not isinstance(raw["base"], str) or not raw["base"].strip():
        raise ConfigError(
            f"{where}: 'base' must name the config every run starts from: a shipped config name "
            f"(e.g. quickstart, dsprites/beta_vae), a YAML path or zoo:NAME; got {raw.get('base')!r}."
        )
    name = raw.get("name", Path(source).stem)
    if not isinstance(name, str):
        raise ConfigError(f"{where}: 'name' must be a string, got {name!r}.")
    description = raw.get("description", "")
    imports = _parse_imports(raw.get("imports", []), where, folder)
    import_plugins(imports)  # registrations must exist before the configs are validated
    set_values = _parse_overrides(raw.get("set", {}), where, "set")
    grid = _parse_grid(raw.get("grid", {}), where)
    seeds = _parse_seeds(raw.get("seeds", [0]), where)
    metrics, metric_settings = _parse_metrics(raw.get("metrics", []), raw.get("metric_settings", {}), where)
    plan = SweepPlan(
        source=source, name=name, base=raw["base"], set=set_values, grid=grid, seeds=seeds, metrics=metrics,
        metric_settings=metric_settings, imports=imports, raw=copy.deepcopy(raw), description=str(description),
    )
    base_raw = _read_base(raw["base"], where, folder)
    _expand(plan, base_raw)
    return plan


def _parse_imports(value: Any, where: str, folder: Path) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{where}: 'imports' must be a list of module names or .py paths, got {value!r}.")
    out = []
    for item in value:
        if item.endswith(".py"):
            path = Path(item)
            path = path if path.is_absolute() else (folder / path)
            if not path.is_file():
                raise ConfigError(f"{where}: the import '{item}' is not a file (looked for '{path}').")
            out.append(str(path.resolve()))
        else:
            out.append(item)
    return out


def import_plugins(imports: list[str]) -> None:
    """Import a sweep file's ``imports`` (dotted names or ``.py`` paths) once per process, for their
    registrations (:func:`disentangle._core.plugins.import_plugins`)."""
    from .._core.plugins import import_plugins as import_modules

    import_modules(imports, where="The sweep file's import")


def _parse_overrides(value: Any, where: str, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: '{what}' must be a mapping of dotted keys to values (e.g. train.steps: 1000), got {value!r}.")
    flat: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key:
            raise ConfigError(f"{where}: '{what}' has a key {key!r} that is not a dotted config key.")
        if key in _CONFIG_SECTIONS and isinstance(item, dict) and item:
            # a section written as a mapping (train: {steps: 10}): its keys, each with its value as
            # given; a mapping below that is a setting's value (data.subgrid, train.schedules)
            for sub, sub_value in item.items():
                if not isinstance(sub, str) or not sub:
                    raise ConfigError(f"{where}: '{what}' has a key {sub!r} under '{key}' that is not a config key.")
                flat[f"{key}.{sub}"] = sub_value
        else:
            flat[key] = item
    for key in flat:
        _check_dotted_key(key, where, what)
    return flat


def _check_dotted_key(key: str, where: str, what: str) -> None:
    section = key.split(".")[0]
    if section not in _CONFIG_SECTIONS or any(not p for p in key.split(".")):
        raise ConfigError(
            f"{where}: '{what}' key '{key}' is not a dotted config key.{did_you_mean(section, _CONFIG_SECTIONS)} "
            f"Keys start with a config section: {', '.join(_CONFIG_SECTIONS)} (e.g. objective.beta)."
        )
    if key == "seed":
        raise ConfigError(f"{where}: give the seeds with the sweep file's 'seeds' key (a count or a list), not in '{what}'.")


def _parse_grid(value: Any, where: str) -> list[dict[str, list[Any]]]:
    if value is None or value == {} or value == []:
        return [{}]
    blocks = value if isinstance(value, list) else [value]
    out = []
    for i, block in enumerate(blocks):
        label = "'grid'" if not isinstance(value, list) else f"'grid' entry {i + 1}"
        if not isinstance(block, dict):
            raise ConfigError(f"{where}: {label} must be a mapping of dotted keys to lists of values, got {block!r}.")
        parsed: dict[str, list[Any]] = {}
        for key, values in _parse_overrides(block, where, "grid").items():
            if not isinstance(values, list) or not values:
                raise ConfigError(
                    f"{where}: {label} key '{key}' must be a non-empty list of values, got {values!r}. "
                    f"Write [{_short(values)}] for a single value, or move a fixed value to 'set'."
                )
            parsed[key] = values
        out.append(parsed)
    return out


def _parse_seeds(value: Any, where: str) -> list[int]:
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise ConfigError(f"{where}: 'seeds' as a count must be a positive integer (n means 0..n-1), got {value}.")
        return list(range(value))
    if (
        isinstance(value, list) and value
        and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in value)
    ):
        if len(set(value)) != len(value):
            raise ConfigError(f"{where}: 'seeds' lists a seed twice: {value}.")
        from ..config.validation import MAX_SEED

        too_large = [s for s in value if s > MAX_SEED]  # every seed, not only the first run's
        if too_large:
            raise ConfigError(f"{where}: 'seeds' lists {too_large[0]}; a seed is an integer from 0 to 2**63 - 1 "
                              f"(a run's random streams are seeded from it). Pick smaller seeds, e.g. 0..n-1.")
        return list(value)
    raise ConfigError(
        f"{where}: 'seeds' must be a count n (seeds 0..n-1) or a non-empty list of non-negative integers, got {value!r}."
    )


def _parse_metrics(names: Any, settings: Any, where: str) -> tuple[list[str], dict[str, dict[str, Any]]]:
    from ..metrics import METRICS, resolve_metric_names, validate_settings

    if names is None or names == []:
        resolved: list[str] = []
    else:
        if isinstance(names, str):
            names = [n.strip() for n in names.split(",") if n.strip()]
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ConfigError(f"{where}: 'metrics' must be a list of metric names or 'all', got {names!r}.")
        try:
            resolved = resolve_metric_names(names)
        except ConfigError as err:
            raise ConfigError(f"{where}: 'metrics': {err}") from None
    if settings is None:
        settings = {}
    if not isinstance(settings, dict):
        raise ConfigError(f"{where}: 'metric_settings' must map metric names to mappings of settings, got {settings!r}.")
    out: dict[str, dict[str, Any]] = {}
    for metric, options in settings.items():
        if isinstance(metric, str) and metric in METRICS:
            metric = METRICS.canonical(metric)  # an alias (sap) keys its metric's settings (sap_score)
        if metric not in resolved:
            raise ConfigError(
                f"{where}: 'metric_settings' has settings for '{metric}', which is not among the sweep file's "
                f"metrics ({', '.join(resolved) or 'none'}).{did_you_mean(str(metric), resolved)}"
            )
        if not isinstance(options, dict):
            raise ConfigError(f"{where}: 'metric_settings.{metric}' must be a mapping of settings, got {options!r}.")
        params = [
            n for n, p in inspect.signature(METRICS.get(metric)).parameters.items()
            if p.kind == p.KEYWORD_ONLY and n != "seed"
        ]
        for option in options:
            if option not in params:
                raise ConfigError(
                    f"{where}: 'metric_settings.{metric}' has no setting '{option}'.{did_you_mean(str(option), params)} "
                    f"Settings of {metric}: {', '.join(params)}."
                )
        try:  # the metric's own value checks, before any run starts
            out[metric] = validate_settings(metric, options)
        except ConfigError as err:
            raise ConfigError(f"{where}: 'metric_settings.{metric}': {err}") from None
    return resolved, out


def _read_base(base: str, where: str, folder: Path) -> dict[str, Any]:
    from ..config import read_config_source

    local = folder / base
    source: str | Path = local if (not base.startswith("zoo:") and local.is_file()) else base
    try:
        raw = read_config_source(source)
    except ConfigError as err:
        raise ConfigError(f"{where}: 'base': {err}") from None
    return copy.deepcopy(raw)


# ---------------------------------------------------------------------- expansion
def grid_points(grid: list[dict[str, list[Any]]]) -> list[dict[str, Any]]:
    """The union, in order, of the products of each mapping's lists (last key varies fastest)."""
    points = []
    for block in grid:
        keys = list(block)
        for combo in itertools.product(*(block[k] for k in keys)):
            points.append(dict(zip(keys, combo)))
    return points


def apply_assignments(base_raw: dict[str, Any], assignments: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``base_raw`` with dotted ``assignments`` applied; a changed registry name starts
    its section afresh (module docstring)."""
    raw = copy.deepcopy(base_raw)
    restart_renamed_sections(raw, assignments)
    for key, value in assignments.items():
        node = raw
        parts = key.split(".")
        for part in parts[:-1]:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        node[parts[-1]] = copy.deepcopy(value)
    return raw


def _expand(plan: SweepPlan, base_raw: dict[str, Any]) -> None:
    from ..config import Config

    points = grid_points(plan.grid)
    total = len(points) * len(plan.seeds)
    runs: list[RunSpec] = []
    point_configs: list[dict[str, Any]] = []  # one per grid point: the seeds vary nothing else
    seen: set[str] = set()
    for p, point in enumerate(points):
        raw = apply_assignments(base_raw, {**plan.set, **point})
        raw["seed"] = plan.seeds[0]
        label = ", ".join(f"{k}={_short(v)}" for k, v in point.items()) or "the base config"
        try:
            config = Config.from_dict(raw)
        except ConfigError as err:
            raise ConfigError(
                f"Sweep file '{plan.source}', grid point {p + 1} of {len(points)} ({label}; runs "
                f"{p * len(plan.seeds) + 1}-{(p + 1) * len(plan.seeds)} of {total}): {err} "
                f"Fix the sweep file's 'grid', 'set' or its base '{plan.base}'."
            ) from None
        point_configs.append(config.to_dict())
        left_auto = (raw.get("train") or {}).get("precision", "auto") == "auto"  # resolved by this machine
        for seed in plan.seeds:
            seeded = dataclasses.replace(config, seed=seed)
            resolved = seeded.to_dict()
            rid = run_id(resolved)
            if rid in seen:
                plan.merged_duplicates += 1
                continue
            seen.add(rid)
            runs.append(RunSpec(rid, len(runs), seed, dict(point), resolved, _dlib_model_number(seeded)))
            if left_auto:
                plan.auto_precision_runs.append(rid)
    plan.runs = runs
    grid_keys = [k for block in plan.grid for k in block]
    swept = [k for block in plan.grid for k, values in block.items() if len(values) > 1]
    plan.varying_keys = varying_keys(point_configs, first=grid_keys, swept=swept)
    shown = set(plan.varying_keys)  # a run is described by the grid values that vary, not by fixed ones
    plan.runs = [dataclasses.replace(r, values={k: v for k, v in r.values.items() if k in shown}) for r in runs]


def _dlib_model_number(config: Any) -> int | None:
    """disentanglement_lib's model number of a config of Locatello et al.'s grid, else None."""
    try:
        from ..zoo.locatello import model_number_for_config
    except ImportError:  # pragma: no cover - the zoo is part of the package
        return None
    try:
        return model_number_for_config(config)
    except ConfigError:
        return None


def varying_keys(configs: list[dict[str, Any]], first: list[str] = (), swept: list[str] = ()) -> list[str]:
    """Dotted keys that take at least two values among ``configs`` (a key missing from a run, such
    as ``objective.beta`` of a FactorVAE, is not a value), plus the ``swept`` keys (given two or
    more values by the grid); the seed and :data:`~disentangle.sweep.ids.EXCLUDED_KEYS` are left
    out. ``first`` keys lead, in their order; the others follow sorted. The results table's config
    columns (:func:`disentangle.metrics.results.varying_keys`) by the sweep's rule."""
    return results_table.varying_keys(configs, first=first, swept=swept, ignore=EXCLUDED_KEYS)


def _short(value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value)) if abs(value) >= 1 or value == 0 else repr(value)
    return str(value)


__getattr__ = _compat.module_getattr(__name__)  # the names of 0.1: Study, load_study, ... (warn)
