"""Run configuration: YAML → validated dataclasses, dotted ``key=value`` overrides.

A config has five sections::

    seed: 0
    data:      {name: sprites, ...dataset parameters}
    model:     {backbone: conv64, latent_dim: 10, ...backbone parameters}
    objective: {name: beta_vae, ...objective parameters}
    train:     {steps, batch_size, optimizer, lr, betas, eps, weight_decay, lr_schedule,
                warmup_steps, device, precision, compile, channels_last, conv_transpose_via_conv,
                tf32, cudnn_benchmark, out_dir, checkpoint_every, log_every, eval_every,
                eval_metrics, progress, traversals, tensorboard, image_every}

The parameters of the chosen dataset, backbone and objective are the keyword parameters of their
registered builders; they are checked against the builder's signature and type hints, and their
defaults are written into the resolved config. Every problem of the whole config (each unknown
key, each bad value) is collected and all are raised in one :class:`ConfigError` paragraph: for
each, which key, what was given, what is valid, and a did-you-mean.
"""
from __future__ import annotations

import copy
import dataclasses
import inspect
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar, Union

import yaml

from . import _compat
from ._core import checks
from ._core.choices import (
    DEFAULT_INIT,
    INITS,
    LEGACY_VALUES,
    LR_SCHEDULES,
    OPTIMIZER_NAMES,
    PRECISION_SETTINGS,
    InitName,
    LrScheduleName,
    OptimizerName,
    PrecisionSetting,
)
from ._core.hardware import auto_precision
from ._core.registry import Registry, did_you_mean
from ._core.schedules import parse_schedules
from ._core.threads import check_threads_setting
from .errors import ConfigError, UnknownNameError

DEVICES = ("auto", "cpu", "cuda", "mps")
T = TypeVar("T")
ZOO_PREFIX = "zoo:"  #: the prefix of zoo names wherever a config or a model is named (zoo:NAME)


@dataclass
class DataConfig:
    """``data``: which dataset (``name``, a key of ``DATASETS``) and its parameters."""

    name: str = "sprites"
    params: dict[str, Any] = field(default_factory=dict)
    #: ``data.labels``: the few labelled observations (:class:`disentangle.data.labels.LabelsSpec`
    #: as a dict, every key filled in) of semi-supervised objectives and of U/S model selection;
    #: ``None``: no labels (a semi-supervised objective then gets the defaults)
    labels: dict[str, Any] | None = None


@dataclass
class ModelConfig:
    """``model``: the backbone (a key of ``BACKBONES``), the code size and backbone parameters."""

    backbone: str = "conv64"
    latent_dim: int = 10
    #: layer initialisation: ``reference`` (disentanglement_lib's Glorot-uniform weights, zero
    #: biases) or ``pytorch`` (PyTorch's defaults; runs from before this key existed)
    init: InitName = DEFAULT_INIT
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class ObjectiveConfig:
    """``objective``: the objective (a key of ``OBJECTIVES``) and its parameters."""

    name: str = "beta_vae"
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class TrainConfig:
    """``train``: the optimisation loop. Defaults follow Locatello et al. 2019 (Adam, batch 64)."""

    steps: int = 300_000  #: total number of optimisation steps (a resumed run continues up to it)
    batch_size: int = 64  #: the global batch: split over the processes of a torchrun launch
    optimizer: OptimizerName = "adam"  #: the model's optimizer (objectives' own ones too)
    lr: float = 1e-4  #: learning rate of the model
    betas: tuple[float, float] = (0.9, 0.999)  #: Adam betas of the model
    eps: float = 1e-8  #: Adam epsilon of the model
    weight_decay: float = 0.0  #: L2 penalty (adam) or decoupled weight decay (adamw); not on discriminators
    lr_schedule: LrScheduleName = "constant"  #: factor on every optimizer's lr after the warm-up
    warmup_steps: int = 0  #: linear warm-up from lr/warmup_steps to lr over these first steps
    device: str = "auto"  #: auto | cpu | cuda | cuda:N | mps
    #: autocast dtype (GradScaler for fp16); auto: bf16 on a CPU with native bf16 (AVX512-BF16, AMX),
    #: fp32 elsewhere, resolved when the config is loaded (:func:`disentangle._core.hardware.auto_precision`)
    precision: PrecisionSetting = "auto"
    compile: bool | Literal["reduce-overhead"] = False  #: torch.compile the networks (reduce-overhead: CUDA graphs)
    #: the networks' 4-D weights in channels-last memory layout (faster convolutions on CPUs with
    #: oneDNN; values differ from the default layout only by rounding); auto: on for an AVX512/AMX
    #: CPU, off elsewhere (:func:`disentangle._core.hardware.choose_channels_last`)
    channels_last: bool | Literal["auto"] = "auto"
    #: transposed convolutions' gradients computed by regular-convolution kernels (the same values;
    #: faster on CPUs with oneDNN, whose deconvolution backward is slow); auto: on for an AVX512/AMX
    #: CPU, off elsewhere (:func:`disentangle._core.hardware.choose_conv_transpose_via_conv`)
    conv_transpose_via_conv: bool | Literal["auto"] = "auto"
    #: CUDA: TF32 matmuls and convolutions (faster on Ampere+, ~1e-3 relative precision); unset (null):
    #: PyTorch's defaults (TF32 convolutions, full-precision matmuls), true/false: both on/off
    tf32: bool | None = None
    #: CPU threads (torch's intra-op threads); auto: OMP_NUM_THREADS when set, else the CPUs this process may
    #: use (its affinity mask and cgroup CPU quota, :func:`disentangle._core.threads.choose_threads`)
    threads: int | Literal["auto"] = "auto"
    cudnn_benchmark: bool = False  #: CUDA: let cuDNN pick the fastest convolution algorithms (not bit-reproducible)
    out_dir: str = "runs/default"
    checkpoint_every: int = 5000  #: steps between checkpoints (one is always written at the end)
    log_every: int = 100  #: steps between log.jsonl records
    eval_every: int = 0  #: steps between metric evaluations (0: never)
    eval_metrics: list[str] = field(default_factory=list)  #: metric names (see METRICS)
    progress: bool = True  #: show a tqdm progress bar
    traversals: bool = True  #: write traversals.png and reconstructions.png at the end
    tensorboard: bool = False  #: also write a TensorBoard event file (the tensorboard extra)
    image_every: int = 0  #: steps between TensorBoard reconstructions and traversals (0: never)
    #: callbacks by name with their parameters, e.g. [{name: csv}, {name: early_stopping, patience: 5}]
    #: (:mod:`disentangle.training.callbacks`)
    callbacks: list[dict[str, Any]] = field(default_factory=list)
    #: schedules of numeric settings over the steps, e.g. {objective.beta: {kind: linear, start: 0,
    #: end: 4, steps: 10000}} (:mod:`disentangle._core.schedules`; kinds constant, linear, cosine,
    #: step, cyclical); applied before each step and logged
    schedules: dict[str, dict[str, Any]] = field(default_factory=dict)


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
        Path(path).write_text(self.to_yaml())


# ---------------------------------------------------------------------- shipped configs
#: folders of the shipped configs that are not training configs: the sweep files
_NON_TRAINING_FOLDERS = ("sweeps",)


def configs_root() -> Path:
    """The folder of the shipped configs: ``disentangle/configs`` in an installed wheel, the
    top-level ``configs/`` in a checkout (its single source)."""
    here = Path(__file__).resolve().parent
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


def read_yaml_config(path: str | Path, what: str = "Config file") -> dict[str, Any]:
    """The mapping of sections in a YAML config file (an empty file gives ``{}``)."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise ConfigError(f"{what} '{path}' is not valid YAML: {err}") from None
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


# ---------------------------------------------------------------------- loading
def load_config(source: str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()) -> Config:
    """Read a config, apply dotted overrides such as ``train.steps=1000`` and validate it.

    ``source`` is a YAML file, the name of a shipped config (``"quickstart"``,
    ``"dsprites/factor_vae"``; see :func:`shipped_config_names`), ``"zoo:NAME"`` for a zoo recipe,
    or None for the defaults. Every check (keys, types, value ranges, choices, registry names)
    runs here, before anything is created; every problem found is reported in one
    :class:`ConfigError` paragraph.
    """
    raw: dict[str, Any] = {} if source is None else read_config_source(source)
    raw = apply_overrides(raw, overrides)
    return Config.from_dict(raw)


def apply_overrides(raw: dict[str, Any], overrides: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """Return a copy of ``raw`` with ``section.key=value`` overrides applied (values parsed as YAML)."""
    raw = copy.deepcopy(raw)
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


# ---------------------------------------------------------------------- validation
_SECTIONS = ("seed", "data", "model", "objective", "train")
#: the keys of the registry sections that are not parameters of the named component
_OWN_KEYS = {"data": ("name", "labels"), "model": ("backbone", "latent_dim", "init"), "objective": ("name",)}


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
    seed = problems.value(_check_value, "seed", raw.get("seed", 0), int, default=0)
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
        from .data.labels import LabelsSpec

        spec = problems.value(LabelsSpec.from_dict, labels, errors=problems.errors)
        labels = spec.to_dict() if spec is not None else None
    name = problems.value(_check_value, "data.name", data.pop("name", DataConfig.name), str)
    return DataConfig(name=name, params=data, labels=labels)


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
    if base_device not in DEVICES or (":" in cfg.device and base_device != "cuda"):
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
    from .backbones import BACKBONES
    from .data import DATASETS
    from .objectives import OBJECTIVES

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
        from .data.labels import LabelsSpec

        config.data.labels = LabelsSpec().to_dict()  # written into the resolved config, like every default
    if config.train.eval_metrics:
        from .metrics import METRICS

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


# ---------------------------------------------------------------------- type checks
def _type_name(hint: Any) -> str:
    if hint is type(None):
        return "null"
    origin = typing.get_origin(hint)
    if origin is Literal:
        return " | ".join(repr(a) for a in typing.get_args(hint))
    if origin in (Union, types.UnionType):
        return " | ".join(_type_name(a) for a in typing.get_args(hint))
    if origin in (list, tuple, dict):
        args = typing.get_args(hint)
        inner = ", ".join(_type_name(a) for a in args if a is not Ellipsis)
        return f"{origin.__name__}[{inner}]" if inner else origin.__name__
    return getattr(hint, "__name__", str(hint))


class _Mismatch(Exception):
    pass


def _coerce(value: Any, hint: Any) -> Any:
    """Return ``value`` converted to ``hint`` where that is lossless, else raise _Mismatch."""
    if hint is Any or hint is inspect.Parameter.empty:
        return value
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (Union, types.UnionType):
        for arg in args:
            try:
                return _coerce(value, arg)
            except _Mismatch:
                continue
        raise _Mismatch
    if origin is Literal:
        if value in args:
            return value
        raise _Mismatch
    if hint is type(None):
        if value is None:
            return None
        raise _Mismatch
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise _Mismatch
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise _Mismatch
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):  # YAML 1.1 reads "1e-4" as a string
            try:
                return float(value)
            except ValueError:
                raise _Mismatch from None
        raise _Mismatch
    if hint is str:
        if isinstance(value, str):
            return value
        raise _Mismatch
    if origin in (list, tuple) or hint in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise _Mismatch
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(value) != len(args):
                raise _Mismatch
            return tuple(_coerce(v, a) for v, a in zip(value, args))
        inner = args[0] if args else Any
        items = [_coerce(v, inner) for v in value]
        return tuple(items) if (origin is tuple or hint is tuple) else items
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            raise _Mismatch
        return dict(value)
    if isinstance(hint, type):
        if isinstance(value, hint):
            return value
        raise _Mismatch
    return value  # an annotation we do not understand: accept


def _literal_choices(hint: Any) -> tuple[Any, ...] | None:
    """The choices of ``Literal[...]`` (or ``Literal[...] | None``), else None."""
    if typing.get_origin(hint) is Literal:
        return typing.get_args(hint)
    if typing.get_origin(hint) in (Union, types.UnionType):
        choices: list[Any] = []
        for arg in typing.get_args(hint):
            if arg is type(None):
                choices.append(None)
            elif typing.get_origin(arg) is Literal:
                choices.extend(typing.get_args(arg))
            else:
                return None
        return tuple(choices)
    return None


def _check_value(key: str, value: Any, hint: Any) -> Any:
    try:
        return _coerce(value, hint)
    except _Mismatch:
        choices = _literal_choices(hint)
        if choices is not None:
            checks.choice(key, value, choices)
        raise ConfigError(
            f"Config key '{key}' has the wrong type: given {value!r} ({type(value).__name__}), "
            f"expected {_type_name(hint)}."
        ) from None


def _is_plain(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_is_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_plain(v) for k, v in value.items())
    return False


def _plain(value: Any) -> Any:
    """Tuples to lists, recursively, so the config dumps as plain YAML."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value
