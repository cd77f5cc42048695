"""Validation of a raw config: every section, key and value checked, registry names and
parameters resolved against the registered builders, every problem collected into one paragraph.
"""
from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from .._core import checks
from .._core.choices import (
    INITS,
    LR_SCHEDULES,
    OPTIMIZER_NAMES,
    PRECISION_SETTINGS,
)
from .._core.hardware import auto_precision
from .._core.registry import Registry, did_you_mean
from .._core.schedules import parse_schedules
from .._core.threads import check_threads_setting
from ..errors import ConfigError, UnknownNameError
from .schema import DEVICES, DataConfig, ModelConfig, ObjectiveConfig, TrainConfig
from .values import _check_value, _is_plain, _plain


# ---------------------------------------------------------------------- validation
@dataclass
class Config:
    """A whole run: ``seed`` and the ``data``, ``model``, ``objective`` and ``train`` sections.

    Built from YAML by :func:`load_config` (or :meth:`from_dict`), which checks every key and fills
    in every default; :meth:`to_dict` gives the nested dict back (the layout of the YAML file and
    of a run's ``config.yaml``), :meth:`save` writes it.
    """

    seed: int = 0
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    objective: ObjectiveConfig = field(default_factory=ObjectiveConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    # ------------------------------------------------------------------ conversions
    def to_dict(self) -> dict[str, Any]:
        """Nested plain dict (the YAML layout: registry parameters flattened into their section)."""
        return {
            "seed": self.seed,
            "data": {
                "name": self.data.name, **_plain(self.data.params),
                **({"labels": _plain(self.data.labels)} if self.data.labels is not None else {}),
                **({"subgrid": _plain(self.data.subgrid)} if self.data.subgrid is not None else {}),
            },
            "model": {
                "backbone": self.model.backbone, "latent_dim": self.model.latent_dim, "init": self.model.init,
                **_plain(self.model.params),
            },
            "objective": {"name": self.objective.name, **_plain(self.objective.params)},
            "train": _plain({f.name: getattr(self.train, f.name) for f in dataclasses.fields(self.train)}),
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any], *, resolve: bool = True) -> Config:
        """Validate a nested dict (as read from YAML) into a :class:`Config`.

        With ``resolve`` the registry names and parameters are checked against the registered
        builders and their defaults are filled in.
        """
        return _from_dict(raw, resolve=resolve)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=None)

    def save(self, path: str | Path) -> None:
        """Write the config as YAML to ``path``, atomically (a kill never leaves a torn ``config.yaml``)."""
        from .._core.atomic import atomic_write_text

        atomic_write_text(path, self.to_yaml())


T = TypeVar("T")
_SECTIONS = ("seed", "data", "model", "objective", "train")
#: the keys of the registry sections that are not parameters of the named component
_OWN_KEYS = {"data": ("name", "labels", "subgrid"), "model": ("backbone", "latent_dim", "init"), "objective": ("name",)}


class _Problems:
    """Every problem of one config, collected while it is checked, so that one :class:`ConfigError`
    reports them all (:meth:`raise_all`) instead of the first one only."""

    def __init__(self) -> None:
        self.errors: list[ConfigError] = []

    def add(self, error: ConfigError) -> None:
        """Record ``error``."""
        self.errors.append(error)

    def value(self, check: Callable[..., T], *args: Any, default: Any = None, **kwargs: Any) -> T:
        """``check(*args, **kwargs)``; where it raises a :class:`ConfigError`, the error is recorded
        and ``default`` returned, so that the checks after it still run."""
        try:
            return check(*args, **kwargs)
        except ConfigError as err:
            self.errors.append(err)
            return default

    def raise_all(self) -> None:
        """Raise the one problem as it is, several as one numbered paragraph
        (:meth:`ConfigError.all_of`); nothing if there is none."""
        if self.errors:
            raise ConfigError.all_of(self.errors) from None


#: the largest seed: a run's streams are seeded with ``seed + stream`` (``runtime.stream_seed``), and a
#: torch generator takes seeds below 2**64; NumPy's take any integer >= 0
MAX_SEED = 2**63 - 1


def _check_seed(value: Any) -> int:
    seed = _check_value("seed", value, int)
    if not 0 <= seed <= MAX_SEED:
        raise ConfigError(f"seed must be an integer from 0 to 2**63 - 1, got {seed}. Pick another seed, e.g. seed=0.")
    return seed


def _from_dict(raw: dict[str, Any], *, resolve: bool) -> Config:
    """Check every section of ``raw`` and report every problem at once (:class:`_Problems`)."""
    if not isinstance(raw, dict):
        raise ConfigError(f"A config must be a mapping of sections {_SECTIONS}, got {type(raw).__name__}.")
    problems = _Problems()
    for key in raw:
        if key not in _SECTIONS:
            problems.add(ConfigError(
                f"Unknown config section '{key}'.{did_you_mean(key, _SECTIONS)} Valid sections: {', '.join(_SECTIONS)}."
            ))
    seed = problems.value(_check_seed, raw.get("seed", 0), default=0)
    sections = {name: problems.value(_section, raw, name, default={}) for name in ("data", "model", "objective", "train")}
    config = Config(
        seed=seed, data=_data_config(sections["data"], problems), model=_model_config(sections["model"], problems),
        objective=_objective_config(sections["objective"], problems), train=_train_config(sections["train"], problems),
    )
    if resolve:
        _resolve_registries(config, problems)
    problems.raise_all()
    if resolve and config.train.precision == "auto":  # the saved config and the run id name the precision used
        config.train.precision = auto_precision(config.train.device)
    return config


def _section(raw: dict[str, Any], name: str) -> dict[str, Any]:
    """A copy of the mapping of section ``name`` (``{}`` when absent or empty)."""
    value = raw.get(name) or {}
    if not isinstance(value, dict):
        raise ConfigError(f"Config section '{name}' must be a mapping, got {value!r}.")
    return dict(value)


# A name (data.name, model.backbone, objective.name) that is not a string is recorded and left None:
# its section's parameters are then not resolved, and the config is never returned.
def _data_config(data: dict[str, Any], problems: _Problems) -> DataConfig:
    labels = data.pop("labels", None)
    if labels is not None:
        from ..data.labels import LabelsSpec

        spec = problems.value(LabelsSpec.from_dict, labels, errors=problems.errors)
        labels = spec.to_dict() if spec is not None else None
    subgrid = data.pop("subgrid", None)
    if subgrid is not None:
        from ..data.subgrid import check_subgrid_spec

        subgrid = problems.value(check_subgrid_spec, subgrid)
    name = problems.value(_check_value, "data.name", data.pop("name", DataConfig.name), str)
    return DataConfig(name=name, params=data, labels=labels, subgrid=subgrid)


def _model_config(model: dict[str, Any], problems: _Problems) -> ModelConfig:
    backbone = problems.value(_check_value, "model.backbone", model.pop("backbone", ModelConfig.backbone), str)
    latent_dim = problems.value(
        _check_value, "model.latent_dim", model.pop("latent_dim", ModelConfig.latent_dim), int,
        default=ModelConfig.latent_dim,
    )
    init = problems.value(_check_value, "model.init", model.pop("init", ModelConfig.init), str, default=ModelConfig.init)
    problems.value(checks.choice, "model.init", init, INITS)
    if latent_dim < 1:
        problems.add(ConfigError(f"model.latent_dim must be a positive integer, got {latent_dim}."))
    return ModelConfig(backbone=backbone, latent_dim=latent_dim, init=init, params=model)


def _objective_config(objective: dict[str, Any], problems: _Problems) -> ObjectiveConfig:
    name = problems.value(_check_value, "objective.name", objective.pop("name", ObjectiveConfig.name), str)
    return ObjectiveConfig(name=name, params=objective)


def _train_config(values: dict[str, Any], problems: _Problems | None = None) -> TrainConfig:
    """The ``train`` section as a :class:`TrainConfig`. Every unknown key and bad value goes to
    ``problems`` (a bad value keeps its default so that the other checks still run); without
    ``problems``, they are raised at the end, all in one :class:`ConfigError`."""
    found = problems if problems is not None else _Problems()
    cfg = _train_fields(values, found)
    _check_train_values(cfg, found)
    if problems is None:
        found.raise_all()
    return cfg


def _train_fields(values: dict[str, Any], problems: _Problems) -> TrainConfig:
    """The known keys of ``values`` with the types of :class:`TrainConfig`; the others recorded."""
    hints = typing.get_type_hints(TrainConfig)
    fields = sorted(f.name for f in dataclasses.fields(TrainConfig))
    kwargs = {}
    for key, value in values.items():
        if key not in fields:
            problems.add(ConfigError(
                f"Unknown key 'train.{key}' (given {value!r}).{did_you_mean(key, fields)} "
                f"Valid keys in 'train': {', '.join(fields)}."
            ))
            continue
        missing = object()
        checked = problems.value(_check_value, f"train.{key}", value, hints[key], default=missing)
        if checked is not missing:
            kwargs[key] = checked
    return TrainConfig(**kwargs)


def _check_train_values(cfg: TrainConfig, problems: _Problems) -> None:
    """The ranges, choices and combinations of ``train`` (converted values written back to ``cfg``)."""
    for key in ("steps", "batch_size", "checkpoint_every", "log_every"):
        problems.value(checks.positive_int, f"train.{key}", getattr(cfg, key))
    for key in ("eval_every", "warmup_steps", "image_every"):
        problems.value(checks.integer, f"train.{key}", getattr(cfg, key), minimum=0)
    problems.value(checks.choice, "train.optimizer", cfg.optimizer, OPTIMIZER_NAMES)
    problems.value(checks.choice, "train.lr_schedule", cfg.lr_schedule, LR_SCHEDULES)
    cfg.weight_decay = problems.value(
        checks.in_range, "train.weight_decay", cfg.weight_decay, 0, None, default=cfg.weight_decay
    )
    problems.value(_check_train_logging, cfg)
    cfg.lr = problems.value(
        checks.in_range, "train.lr", cfg.lr, 0, None, low_open=True, hint="A typical value is 1e-4.", default=cfg.lr
    )
    cfg.eps = problems.value(checks.in_range, "train.eps", cfg.eps, 0, None, low_open=True, default=cfg.eps)
    cfg.betas = problems.value(checks.adam_betas, "train.betas", cfg.betas, default=cfg.betas)
    problems.value(checks.choice, "train.precision", cfg.precision, PRECISION_SETTINGS)
    cfg.threads = problems.value(check_threads_setting, "train.threads", cfg.threads, default=cfg.threads)
    problems.value(_check_train_out_dir, cfg)
    problems.value(_check_train_device, cfg)
    problems.value(_check_train_schedules, cfg)


def _check_train_logging(cfg: TrainConfig) -> None:
    """TensorBoard images need TensorBoard, and TensorBoard its package."""
    if cfg.image_every and not cfg.tensorboard:
        raise ConfigError(
            f"train.image_every is {cfg.image_every}, but images are written to TensorBoard only and "
            f"train.tensorboard is false. Set train.tensorboard=true, or train.image_every=0."
        )
    if cfg.tensorboard and not _tensorboard_available():
        raise ConfigError(
            "train.tensorboard is true but the tensorboard package is not installed. Install it with "
            'pip install "disentangle-torch[tensorboard]" (or pip install tensorboard), or set '
            "train.tensorboard=false to log to log.jsonl only."
        )


def _check_train_schedules(cfg: TrainConfig) -> None:
    """The form of ``train.schedules``; a scheduled ``train.lr`` replaces ``train.lr_schedule``."""
    schedules = parse_schedules(cfg.schedules)
    if "train.lr" in schedules and (cfg.lr_schedule != "constant" or cfg.warmup_steps):
        raise ConfigError(
            f"train.schedules schedules train.lr, and train.lr_schedule is '{cfg.lr_schedule}' with "
            f"train.warmup_steps={cfg.warmup_steps}: one schedule of the learning rate at a time. Keep "
            "train.lr_schedule=constant and train.warmup_steps=0 with a scheduled train.lr (a cosine or linear "
            "schedule there does what lr_schedule does)."
        )


def _check_objective_schedules(config: Config, registry: Registry) -> None:
    """A scheduled ``objective.NAME`` must be a numeric parameter of the objective."""
    name = config.objective.name
    if name not in registry:
        return
    parameters = registry.parameters(name)
    for key in config.train.schedules:
        section, _, param = key.partition(".")
        if section != "objective":
            continue
        default = parameters[param].default if param in parameters else None
        if param not in parameters or isinstance(default, bool) or not isinstance(default, (int, float)):
            numeric = [p for p, v in parameters.items() if isinstance(v.default, (int, float)) and not isinstance(v.default, bool)]
            raise ConfigError(
                f"train.schedules has '{key}', which is not a numeric parameter of the objective '{name}'."
                f"{did_you_mean(param, numeric)} Its numeric parameters: {', '.join(numeric) or 'none'}."
            )


def _check_train_out_dir(cfg: TrainConfig) -> None:
    if Path(cfg.out_dir).exists() and not Path(cfg.out_dir).is_dir():
        raise ConfigError(
            f"train.out_dir is '{cfg.out_dir}', which is a file, not a folder. Name a folder for the run "
            f"(train.out_dir=runs/NAME); nothing was written."
        )


def _check_train_device(cfg: TrainConfig) -> None:
    base_device = cfg.device.split(":")[0]
    index = cfg.device.partition(":")[2]
    if base_device not in DEVICES or (":" in cfg.device and (base_device != "cuda" or not index.isdigit())):
        raise ConfigError(
            f"train.device is '{cfg.device}'.{did_you_mean(cfg.device, DEVICES)} "
            f"Valid choices: {', '.join(DEVICES)} (or cuda:N)."
        )


def _tensorboard_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("tensorboard") is not None


def _resolve_registries(config: Config, problems: _Problems) -> None:
    """Check the registry names and parameters of data, model and objective and fill in their
    defaults; every problem goes to ``problems``."""
    from ..backbones import BACKBONES
    from ..data import DATASETS
    from ..objectives import OBJECTIVES

    config.data.params = _resolve_section(
        "data", "name", config.data.name, config.data.params, DATASETS, problems, internal=("device",)
    )
    config.model.params = _resolve_section(
        "model", "backbone", config.model.backbone, config.model.params, BACKBONES, problems,
        internal=("image_shape", "latent_dim"), fixed=("latent_dim",),
    )
    config.objective.params = _resolve_section(
        "objective", "name", config.objective.name, config.objective.params, OBJECTIVES, problems
    )
    problems.value(_check_objective_schedules, config, OBJECTIVES)
    objective = config.objective.name
    if config.data.labels is None and objective in OBJECTIVES and getattr(OBJECTIVES.get(objective), "uses_labels", False):
        from ..data.labels import LabelsSpec

        config.data.labels = LabelsSpec().to_dict()  # written into the resolved config, like every default
    if config.train.eval_metrics:
        from ..metrics import METRICS

        for name in config.train.eval_metrics:
            if name not in METRICS:
                problems.add(ConfigError(
                    f"train.eval_metrics contains unknown metric '{name}'.{did_you_mean(name, METRICS.names())} "
                    f"Valid metrics: {', '.join(METRICS.names())}."
                ))


def _resolve_section(
    section: str, name_key: str, name: str | None, params: dict[str, Any], registry: Registry, problems: _Problems,
    **keys: tuple[str, ...],
) -> dict[str, Any]:
    """The resolved parameters of one registry section, value-checked by the component itself
    (:func:`_validate_values`) when every parameter could be resolved; ``params`` unchanged for a
    name that is not registered (or not a string)."""
    if name is None:
        return params
    try:
        resolved, complete = _resolve_params(section, name_key, name, params, registry, problems, **keys)
    except ConfigError as err:
        problems.add(err)
        return params
    if complete:
        problems.value(_validate_values, section, name, resolved, registry)
    return resolved


def _resolve_params(
    section: str,
    name_key: str,
    name: str,
    params: dict[str, Any],
    registry: Registry,
    problems: _Problems,
    *,
    internal: tuple[str, ...] = (),
    fixed: tuple[str, ...] = (),
) -> tuple[dict[str, Any], bool]:
    """``params`` checked against the builder of ``name`` (its keyword names and type hints), its
    defaults filled in, and whether every parameter could be resolved. An unknown key or a bad
    value goes to ``problems``; an unregistered ``name`` raises."""
    try:
        signature = registry.parameters(name)
    except UnknownNameError as err:
        raise ConfigError(f"{section}.{name_key}: {err}") from None
    target = registry.get(name)
    try:
        hints = typing.get_type_hints(target.__init__ if inspect.isclass(target) else target)
    except Exception:  # unresolvable annotations in user code: skip type checks, keep names
        hints = {}
    accepts_any = any(p.kind is p.VAR_KEYWORD for p in inspect.signature(target).parameters.values())
    allowed = {k: p for k, p in signature.items() if k not in internal}
    valid_keys = [*_OWN_KEYS.get(section, (name_key, *fixed)), *sorted(allowed)]
    resolved: dict[str, Any] = {}
    bad: set[str] = set()
    for key, value in params.items():
        if key in fixed:
            continue
        if key not in allowed and not accepts_any:
            problems.add(ConfigError(
                f"Unknown key '{section}.{key}' (given {value!r}) for {section} {name_key} '{name}'."
                f"{did_you_mean(key, valid_keys)} Valid keys in '{section}' for '{name}': {', '.join(valid_keys)}."
            ))
            continue
        hint = hints.get(key)
        try:
            resolved[key] = _check_value(f"{section}.{key}", value, hint) if hint is not None else value
        except ConfigError as err:
            problems.add(err)
            bad.add(key)
    complete = not bad
    for key, param in allowed.items():
        if key in resolved or key in bad:
            continue
        if param.default is inspect.Parameter.empty:
            problems.add(ConfigError(
                f"Missing required key '{section}.{key}' for {section} {name_key} '{name}'. "
                f"Add it to the '{section}' section of the config or pass {section}.{key}=VALUE."
            ))
            complete = False
        elif _is_plain(param.default):
            resolved[key] = _plain(param.default)
    return resolved, complete


def _validate_values(section: str, name: str, params: dict[str, Any], registry: Registry) -> None:
    """Run the component's own value checks (ranges, choices) on its resolved parameters.

    A registered builder may carry ``validate_params(**params)`` (objectives have one that
    constructs the objective, which is cheap and runs every check of its ``__init__``). A
    :class:`ConfigError` it raises is re-raised with the section prefix (``objective.beta``).
    """
    validate = getattr(registry.get(name), "validate_params", None)
    if validate is None:
        return
    try:
        validate(**params)
    except checks.ParameterError as err:
        message = str(err)
        if message.startswith(err.parameter) and not message.startswith(f"{section}."):
            message = f"{section}.{message}"
        raise ConfigError(f"{message} (in {section} '{name}')") from None
    except ConfigError as err:
        raise ConfigError(f"{section} '{name}': {err}") from None


