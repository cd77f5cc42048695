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

from pathlib import Path
from typing import Any

from .schema import DEVICES, ZOO_PREFIX, DataConfig, ModelConfig, ObjectiveConfig, TrainConfig
from .sources import (
    CONFIG_SOURCES,
    apply_overrides,
    configs_root,
    read_config_source,
    read_yaml_config,
    shipped_config_names,
    shipped_config_path,
    upgrade_saved_config,
)
from .validation import Config
from .values import _check_value  # noqa: F401  (evaluate checks metric settings with it)

__all__ = [
    "CONFIG_SOURCES",
    "DEVICES",
    "ZOO_PREFIX",
    "Config",
    "DataConfig",
    "ModelConfig",
    "ObjectiveConfig",
    "TrainConfig",
    "apply_overrides",
    "configs_root",
    "load_config",
    "read_config_source",
    "read_yaml_config",
    "shipped_config_names",
    "shipped_config_path",
    "upgrade_saved_config",
]


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


