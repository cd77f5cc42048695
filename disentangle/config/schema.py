"""The config's sections as dataclasses: what a run's config holds, with every default.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .._core.choices import (
    DEFAULT_INIT,
    InitName,
    LrScheduleName,
    OptimizerName,
    PrecisionSetting,
)

DEVICES = ("auto", "cpu", "cuda", "mps")
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
    #: ``data.subgrid``: the classes kept of some factors, ``{factor: count or [classes]}``
    #: (:mod:`disentangle.data.subgrid`); ``None``: the whole grid
    subgrid: dict[str, Any] | None = None


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
    #: autocast dtype (GradScaler for fp16); auto: bf16 on a CPU where it trains faster than fp32 (AMX,
    #: or AVX512-BF16 on AMD), fp32 elsewhere, resolved when the config is loaded (:func:`disentangle._core.hardware.auto_precision`)
    precision: PrecisionSetting = "auto"
    compile: bool | Literal["reduce-overhead"] = False  #: torch.compile the networks (reduce-overhead: CUDA graphs)
    #: the networks' 4-D weights in channels-last memory layout (faster convolutions on CPUs with
    #: oneDNN; values differ from the default layout only by rounding); auto: on for an AVX512,
    #: AMX or AVX2 CPU, off elsewhere (:func:`disentangle._core.hardware.choose_channels_last`)
    channels_last: bool | Literal["auto"] = "auto"
    #: transposed convolutions' gradients computed by regular-convolution kernels (the same values;
    #: faster on CPUs with oneDNN, whose deconvolution backward is slow); auto: on for an AVX512,
    #: AMX or AVX2 CPU, off elsewhere (:func:`disentangle._core.hardware.choose_conv_transpose_via_conv`)
    conv_transpose_via_conv: bool | Literal["auto"] = "auto"
    #: flush denormal floats (below 1.2e-38) to zero in CPU arithmetic, where they are many times slower
    #: (weights, gradients and Adam moments deep in training); auto: on for a CPU run, off elsewhere
    #: (:func:`disentangle._core.hardware.choose_flush_denormal`)
    flush_denormal: bool | Literal["auto"] = "auto"
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
    progress: bool = True  #: show a tqdm progress bar (not where the "disentangle" logger is at WARNING or above: --quiet)
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
