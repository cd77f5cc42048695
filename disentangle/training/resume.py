"""What may change when a run is resumed: the config of the checkpoint against the config now.

A run resumes from its checkpoint (:mod:`disentangle.training.checkpoint`) only with the config it was
started with, except for the ``train`` keys of :data:`RESUMABLE_KEYS` (how long, how often to log,
evaluate and checkpoint, where and how fast to run). :func:`check_resume_config` names every other
difference in one :class:`~disentangle.ConfigError`.

The precision is part of what a run is (its id counts it), so a config with another
``train.precision`` is refused; a session may still train in another precision when asked for by
name (:func:`session_precision`: ``Trainer.fit(resume=True, precision="fp32")``, ``--precision`` on the
command line), for instance a bf16 run moved to a CPU that only emulates bf16. The run keeps its
config; ``execution.jsonl`` records each session's precision from the step it began.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from .._core.choices import PRECISIONS
from .._core.hardware import auto_precision
from ..config import Config
from ..data import STORAGE_KEYS
from ..errors import ConfigError

#: train keys that may differ between a checkpoint's config and the config used to resume it
RESUMABLE_KEYS = (
    "steps", "checkpoint_every", "log_every", "eval_every", "eval_metrics", "progress", "traversals", "device",
    "out_dir", "compile", "channels_last", "conv_transpose_via_conv", "flush_denormal", "tf32", "cudnn_benchmark",
    "tensorboard", "threads",
    "image_every", "callbacks",
)


#: data keys that may differ too: how and where the images are kept, not which they are
#: (:data:`disentangle.data.STORAGE_KEYS`: rendered once or per batch, held on the device or streamed
#: from the host, the folder of a downloaded file, checked against its checksum, or of a decoded
#: cache, keyed by the files and the settings, and whether a missing file may be fetched). The data
#: keys left out of a sweep's run id (``disentangle.sweep.ids.EXCLUDED_KEYS``) are among them, so a
#: sweep rerun that changes one resumes its runs.
RESUMABLE_DATA_KEYS = STORAGE_KEYS


def config_differences(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """``"section.key: checkpoint A, now B"`` for every difference between a checkpoint's config
    dict and the current one, outside :data:`RESUMABLE_KEYS`; train keys that the checkpoint lacks
    (added after it was written) take their default."""
    defaults = Config().to_dict()["train"]
    diffs = []
    for section in ("seed", "data", "model", "objective", "train"):
        a, b = saved.get(section), current.get(section)
        if section == "train":
            # keys added after the checkpoint was written take their default
            a = {**defaults, **(a or {})}
            a = {k: v for k, v in a.items() if k not in RESUMABLE_KEYS}
            b = {k: v for k, v in (b or {}).items() if k not in RESUMABLE_KEYS}
        elif section == "data" and isinstance(a, dict) and isinstance(b, dict):
            a = {k: v for k, v in a.items() if k not in RESUMABLE_DATA_KEYS}
            b = {k: v for k, v in b.items() if k not in RESUMABLE_DATA_KEYS}
        if a != b:
            if isinstance(a, dict) and isinstance(b, dict):
                for key in sorted(set(a) | set(b)):
                    if a.get(key) != b.get(key):
                        diffs.append(f"{section}.{key}: checkpoint {a.get(key)!r}, now {b.get(key)!r}")
            else:
                diffs.append(f"{section}: checkpoint {a!r}, now {b!r}")
    return diffs


def check_resume_config(saved: dict[str, Any], config: Config, out_dir: str | Path) -> None:
    """Raise :class:`~disentangle.ConfigError` unless the run in ``out_dir``, whose checkpoint holds
    the config dict ``saved``, may be resumed with ``config``: only :data:`RESUMABLE_KEYS` may
    differ, and ``train.steps`` only with a constant learning-rate schedule (the others reach 0 at
    the run's own ``train.steps``)."""
    diffs = config_differences(saved, config.to_dict())
    if diffs:
        raise ConfigError(
            f"Cannot resume '{out_dir}': the config differs from the checkpoint's in "
            f"{'; '.join(diffs)}. Only train.{{{', '.join(RESUMABLE_KEYS)}}} and "
            f"data.{{{', '.join(RESUMABLE_DATA_KEYS)}}} may change on resume; "
            f"resume without --config to use the run's own config.yaml."
        )
    saved_steps = (saved.get("train") or {}).get("steps")
    schedule = config.train.lr_schedule
    if schedule != "constant" and saved_steps is not None and saved_steps != config.train.steps:
        raise ConfigError(
            f"Cannot resume '{out_dir}' with train.steps={config.train.steps}: the run's "
            f"train.lr_schedule={schedule} decays the learning rate to 0 at its train.steps="
            f"{saved_steps}, so a different step count would change the schedule mid-run. Resume with "
            f"train.steps={saved_steps}, or start a new run."
        )


#: Execution.precision_reason of a session in the run's own precision
RUN_PRECISION = "train.precision"


def session_precision(
    requested: str | None, run_precision: str, *, resuming: bool, device_type: str
) -> tuple[str, str]:
    """The precision a training session computes in and why: ``(precision, reason)``.

    ``run_precision`` is the run's ``train.precision``; ``requested`` (``fp32``, ``bf16``, ``fp16`` or
    ``auto``, the device's choice: :func:`~disentangle._core.hardware.auto_precision`), when given,
    replaces it for a resumed session only: a new run trains in its ``train.precision``. The reason
    is :data:`RUN_PRECISION` when the session trains in the run's precision.
    """
    run = auto_precision(device_type) if run_precision == "auto" else run_precision
    if requested is None:
        return run, RUN_PRECISION
    if requested not in (*PRECISIONS, "auto"):
        raise ConfigError(
            f"precision={requested!r} is not a precision. Choose one of {', '.join(PRECISIONS)} or auto "
            f"(the device's choice: bf16 on a CPU where it was measured faster, AMX or AVX512-BF16 on AMD; "
            f"fp32 elsewhere)."
        )
    if not resuming:
        raise ConfigError(
            f"precision={requested!r} continues a resumed run in another precision; a new run trains in "
            f"its train.precision. Set train.precision={requested} instead, or resume a run "
            f"(--resume RUN_DIR --precision {requested})."
        )
    chosen = auto_precision(device_type) if requested == "auto" else requested
    if chosen == run:
        return run, RUN_PRECISION
    return chosen, f"asked for this session; the run's train.precision is {run}"
