"""The training loop: config in, run folder out.

Run folder (``train.out_dir``)::

    config.yaml      the resolved config (every default filled in)
    checkpoint.pt    model, objective (its own networks), every optimizer and its lr schedule,
                     the fp16 scaler, step and all RNG states; written atomically;
                     torch.load(weights_only=True)
    checkpoint.prev.pt  the checkpoint before it (resume falls back to it if the newest is
                     unreadable, and moves that one to checkpoint.unreadable.pt)
    log.jsonl        one JSON object per logged step with every term the objective returns
    execution.jsonl  one JSON object per training session: the device, the precision and the
                     execution strategies chosen (channels-last, the transposed convolutions'
                     gradient kernels, a materialised dataset, the allocator) and why
    traversals.png, reconstructions.png   at the end (disentangle.visualize.write_training_pictures)
    events.out.tfevents.*  with train.tensorboard: every logged term, metric scores and, every
                     train.image_every steps, reconstructions and a traversal grid

Design choices:

* Data lives on the training device (uint8, cast per batch); batches are drawn by index from a
  ``torch.Generator`` on that device whose state is checkpointed, so a resumed run on CPU repeats
  the uninterrupted run bit for bit.
* Non-finite losses are detected with an on-device flag that is read only at log and checkpoint
  steps (no per-step host sync); a checkpoint is written only after that check passes, so the last
  checkpoint on disk is always a finite one.
* The trainer owns the model's optimizer (``"model"``: ``train.optimizer``, ``lr``, ``betas``,
  ``eps``, ``weight_decay``; fused on CUDA); objectives add theirs through
  ``Objective.extra_optimizers``. ``train.lr_schedule`` (after ``train.warmup_steps`` of linear
  warm-up) multiplies the learning rate of every optimizer; its state is checkpointed
  (:mod:`disentangle.training.optim`).
* Every random draw of a step's loss (reparameterisation noise, prior samples, permutations) comes
  from a second checkpointed generator, installed with
  :func:`disentangle._core.distributed.random_source`, drawn for the global batch.
* Under ``torchrun`` (:mod:`disentangle._core.distributed`) ``train.batch_size`` is the global batch;
  each rank trains on its shard (drawn for the global batch, rendered for its rows) and the run
  computes the single-process losses; logged values are global-batch values; rank 0 writes the run
  folder and evaluates metrics, and an exception there is raised on every rank at once.
* ``train.steps`` is the *total* step count: ``--resume`` continues from the checkpoint up to it;
  only the keys of :data:`disentangle.training.resume.RESUMABLE_KEYS` may differ from the run's config;
  a resumed session may train in another precision when asked for (``fit(resume=True, precision=...)``,
  ``--precision``), the run keeping its ``train.precision``.
* Ctrl-C (SIGINT) or SIGTERM never saves half a step: the handler only sets a flag; the step in
  progress (including FactorVAE's discriminator update) completes, its checkpoint is written, and
  then ``KeyboardInterrupt`` is raised. A second Ctrl-C stops at once without saving (the last
  periodic checkpoint stays valid); a second SIGTERM changes nothing, and a SIGTERM handler that
  other code installed (submitit's) is left alone (:mod:`disentangle.training.interrupt`).

The device, seeds, CUDA flags, the memory layout, a materialised dataset and ``torch.compile`` are set
up by :mod:`disentangle.training.runtime` (``auto`` choices: :func:`~disentangle.training.runtime.choose_execution`).
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import math
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .._core import distributed
from .._core.hardware import denormals_flushed
from .._core.schedules import Schedule, parse_schedules
from .._core.threads import warn_if_oversubscribed
from .._core.writable import check_writable, file_in_the_way
from ..backbones.init import initialize
from ..config import Config
from ..data import build_dataset, content_identity, data_identity
from ..data.base import BatchShard, sampling_shard
from ..data.labels import LabelsSpec, make_labelled_set
from ..errors import ConfigError, NonFiniteLossError, RunExistsError
from ..models.vae import VAE
from ..objectives import OBJECTIVES
from .cadence import Cadence, idle_settings
from .callbacks import (
    CLOSED_ON_EXIT,
    INTERRUPTED_REASON,
    SIGNAL_ON_ANY_RANK,
    SIGNAL_ON_OTHER_RANK,
    Callback,
    JsonlLogger,
    ProgressBar,
    TensorBoardLogger,
    build_callbacks,
    state_keys,
)
from .checkpoint import (
    CHECKPOINT_NAME,
    FORMAT_VERSION,
    capture_rng_state,
    has_checkpoint,
    load_latest,
    restore_rng_state,
    save_rotating,
    settle_checkpoints,
    upgrade_checkpoint,
)
from .conv_transpose import use_convolution_kernels
from .interrupt import CutShort, DeferredInterrupt, PauseClock
from .optim import build_optimizers, build_schedulers, optimizer_kernels
from .precision import Precision
from .resume import RUN_PRECISION, check_resume_config, session_precision
from .runtime import (
    Execution,
    Stream,
    choose_execution,
    compile_networks,
    configure_cuda_backends,
    match_state_layout,
    resolve_device,
    seed_everything,
    stream_seed,
    to_channels_last,
)

logger = logging.getLogger(__name__)

#: a log interval slower than this fraction of the session's best rate is reported (_Session.stall_message)
STALL_FRACTION = 0.25


@contextlib.contextmanager
def local_sampling() -> Iterator[None]:
    """Within the block, a dataset that can render a shard of a batch alone
    (:attr:`~disentangle.data.base.GridDataset.shard_rendering`) draws the indices and per-sample
    randomness of the whole global batch but renders only this rank's rows
    (:func:`disentangle.data.base.sampling_shard`); pass what the sampler returns through
    :func:`disentangle._core.distributed.local_batch`. Nothing changes in one process."""
    if not distributed.is_distributed():
        yield
        return
    with sampling_shard(BatchShard(distributed.rank_info().rank, distributed.rank_info().world_size)):
        yield


def bind_schedules(config: Config, objective: Any) -> dict[str, Schedule]:
    """``train.schedules`` parsed, each ``objective.NAME`` checked to be a number the objective keeps
    as its attribute ``NAME`` (the one its loss reads at every step)."""
    schedules = parse_schedules(config.train.schedules)
    for key in schedules:
        section, _, name = key.partition(".")
        if section == "objective" and not isinstance(getattr(objective, name, None), (int, float)):
            raise ConfigError(
                f"train.schedules has '{key}', but the objective '{config.objective.name}' keeps no number "
                f"'{name}' that its loss reads at each step, so a schedule could not change it. Schedule one of "
                f"its numeric attributes: {', '.join(sorted(k for k, v in vars(objective).items() if isinstance(v, float) and not k.startswith('_'))) or 'none'}."
            )
    return schedules


def given_data(dataset: Any, data: Any) -> dict[str, Any] | None:
    """None when ``dataset`` is what the config's ``data`` section builds (``build_dataset`` of a section
    with the same :func:`~disentangle.data.data_identity`: a sweep worker's cached dataset); else what
    the checkpoint records of a dataset of the user's (``from_torch``, ``from_arrays``, their own class):
    its description, size, image shape and label names."""
    built_from = getattr(dataset, "built_from", None)
    if built_from is not None and built_from == data_identity(data):
        return None
    names = getattr(dataset, "factor_names", None)
    labelled = getattr(dataset, "labelled", True) and bool(names)
    return {"description": str(getattr(dataset, "name", None) or type(dataset).__name__), "size": len(dataset),
            "image_shape": [int(d) for d in dataset.image_shape], "labels": list(names) if labelled else None}


def check_resume_data(saved: dict[str, Any] | None, now: dict[str, Any] | None, config: Config, out_dir: Any) -> None:
    """Refuse a resume that would switch a run between its config's data and a dataset given to fit."""
    if saved is None and now is not None:
        raise ConfigError(
            f"Cannot resume '{out_dir}' on the dataset given to fit ({now['description']}): the run trained on its "
            f"config's data section ({config.data.name}). Resume it without dataset=, or train the given data in "
            f"a new run folder."
        )
    if saved is not None and now is None:
        raise ConfigError(
            f"Cannot resume '{out_dir}' on its config's data section ({config.data.name}): the run trained on a "
            f"dataset given to fit ({saved['description']}; {saved['size']:,} images of shape "
            f"{tuple(saved['image_shape'])}). Resume it in Python with fit(config, resume=True, dataset=the same data)."
        )


def check_resume_content(saved: dict[str, Any] | None, now: dict[str, Any] | None, config: Config, out_dir: Any) -> None:
    """Refuse a resume on other images than the run trained on (an image folder or CelebA whose files
    were added, removed, renamed or replaced: :func:`~disentangle.data.content_identity`): the
    batches would differ from the uninterrupted run's, and an objective with a code per image (LORD)
    would not fit its table. A checkpoint from before the record, or data not read from files, is
    not checked."""
    if saved is None or now is None or saved == now:
        return
    count = (f"{saved['images']:,} images then, {now['images']:,} now" if saved.get("images") != now.get("images")
             else f"{now['images']:,} images then and now, their names or sizes differ")
    raise ConfigError(
        f"Cannot resume '{out_dir}': the images of data.path ({config.data.params.get('path', config.data.name)}) "
        f"are not those the run trained on ({count}: files added, removed, renamed or replaced). A resumed run "
        f"trains on the images it started with. Put the folder back as it was, or train the images as they are "
        f"now in a new run folder."
    )


def _idle_settings_to_warn(train: Any, ckpt: dict[str, Any] | None) -> list[str]:
    """The warnings of :func:`~disentangle.training.cadence.idle_settings` for this session: all at a
    run's start; on resume only those the run's saved config did not already have (a run resumed
    session after session is warned once, and again when a resume changes a setting)."""
    found = idle_settings(train)
    if ckpt is None or not found:
        return found
    try:
        before = set(idle_settings(Config.from_dict(ckpt["config"]).train))
    except (ConfigError, KeyError, TypeError, ValueError):  # a config this version cannot read: say it all
        return found
    return [message for message in found if message not in before]


def check_training_data(config: Config, objective: Any, dataset: Any) -> None:
    """Before training: a sample of images without a factor grid (:class:`disentangle.data.SampleDataset`)
    cannot feed an objective that draws pairs or groups sharing factors, or few labels from a grid,
    nor a metric of ``train.eval_metrics`` that needs a grid or labels it lacks, when
    ``train.eval_every`` would evaluate it (:func:`check_eval_metrics_apply`): each is one
    paragraph, raised at once."""
    if getattr(dataset, "is_grid", True) is not False:
        return
    from ..errors import NotAGridError

    if getattr(objective, "training_data", None) == "labels":  # groups of one class: a labelled sample will do
        pass  # its check_dataset says what is missing (labels, class_factors)
    elif hasattr(objective, "check_dataset") or getattr(objective, "uses_labels", False):
        name = config.objective.name
        raise NotAGridError(
            f"objective '{name}' draws its training batches from a factor grid (pairs or groups of images that "
            f"share factors, or a few labelled grid points), and {getattr(dataset, 'name', 'this dataset')} is a "
            "sample of images without one. Train it on a grid dataset, or train an unsupervised objective "
            "(beta_vae, beta_tcvae, factor_vae, dip_vae_i, ...) on this data."
        )
    if config.train.eval_metrics and config.train.eval_every:  # with eval_every 0 they never run (a warning says so)
        check_eval_metrics_apply(config.train, dataset)


#: why a metric cannot run on data that offers less than it needs, and what data would do, by its need
#: (:meth:`disentangle.metrics.registration.MetricSpec.data`)
_METRIC_NEEDS: dict[str, tuple[str, str]] = {
    "grid": ("it fixes factors and draws the others, or encodes every point of the factor grid, and needs a "
             "complete grid", "a grid dataset would do (dsprites, shapes3d, ...; an npz dataset whose "
             "factor_classes cover every combination once)"),
    "labels": ("it compares codes with factor labels", "labelled images would do (an npz dataset with "
               "factor_classes beside its images, or disentangle.data.from_arrays(images, labels)), as would a "
               "grid dataset"),
}


def check_posterior_metrics(train: Any, model: Any) -> None:
    """Refuse, before the run folder, a metric of ``train.eval_metrics`` that scores a VAE's posterior
    (``elbo``, ``elbo_decomposition``) when the model is a GAN: the first evaluation would stop the run."""
    if not train.eval_every or not train.eval_metrics:
        return
    from ..metrics import has_a_posterior, refuse_without_a_posterior, resolve_metric_names
    from ..metrics.names import POSTERIOR_METRICS

    if has_a_posterior(model):
        return
    named = [name for name in resolve_metric_names(train.eval_metrics, model) if name in POSTERIOR_METRICS]
    if named:
        kept = [name for name in train.eval_metrics if name not in named]
        refuse_without_a_posterior(named[0], model, (
            f"Leave it out of train.eval_metrics ([{', '.join(train.eval_metrics)}]; the run would evaluate it every "
            f"{train.eval_every:,} steps): train.eval_metrics=[{', '.join(kept)}]."))


def check_eval_metrics_apply(train: Any, dataset: Any) -> None:
    """Raise :class:`~disentangle.errors.NotAGridError` (one paragraph) when a metric of
    ``train.eval_metrics`` cannot run on ``dataset`` (:func:`disentangle.metrics.metric_applies`):
    for each such metric, why and which data would do; that it comes from ``train.eval_metrics``
    (a shipped config or zoo recipe may set it); and the list without it, with the metrics that apply."""
    from ..errors import NotAGridError
    from ..metrics import available_metrics, data_of, metric_applies, metric_spec, resolve_metric_names

    names = resolve_metric_names(train.eval_metrics, dataset=dataset)
    unfit = [name for name in names if not metric_applies(name, dataset)]
    if not unfit:
        return
    what = getattr(dataset, "name", None) or type(dataset).__name__
    has = "labelled images without a factor grid" if data_of(dataset) == "labels" else "images without labels"
    reasons = {name: _METRIC_NEEDS[metric_spec(name).data({})] for name in unfit}
    if len(unfit) == 1:
        (name,) = unfit
        why, would_do = reasons[name]
        problem = f"The metric '{name}' cannot run on {what}: {why}, and this dataset holds {has}; {would_do}."
    else:
        quoted = ", ".join(f"'{n}'" for n in unfit[:-1]) + f" and '{unfit[-1]}'"
        problem = (f"The metrics {quoted} cannot run on {what}, which holds {has}: "
                   + "; ".join(f"'{n}': {why} ({would_do})" for n, (why, would_do) in reasons.items()) + ".")
    kept = [name for name in names if name not in unfit]
    fitting = ", ".join(available_metrics(dataset=dataset)) or "none"
    when = f" every {train.eval_every:,} steps" if train.eval_every else ""
    them = "it" if len(unfit) == 1 else "them"
    raise NotAGridError(
        f"{problem} {'It comes' if len(unfit) == 1 else 'They come'} from train.eval_metrics "
        f"([{', '.join(train.eval_metrics)}]; shipped configs and zoo recipes name metrics there), which the run "
        f"would evaluate{when} on its training data. To train on this data, leave {them} out: "
        f"train.eval_metrics=[{', '.join(kept)}] (metrics that apply to this data: {fitting})."
    )


def _to_loggable(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        value = value.detach().float().cpu()
        return value.item() if value.numel() == 1 else value.tolist()
    return value


def batch_to_device(batch: Any, device: torch.device) -> Any:
    """``batch`` (a tensor, or a tuple or named tuple of them, as ``objective.sample_batch`` returns)
    on the training ``device``; host tensors go through pinned memory to CUDA. A dataset kept on the
    host (``data.placement: stream``, data larger than the device's memory) draws its batches there;
    a loop of your own moves them with this, as the trainer does."""
    if isinstance(batch, torch.Tensor):
        if batch.device == device:
            return batch
        if device.type == "cuda" and batch.device.type == "cpu":
            return batch.pin_memory().to(device, non_blocking=True)
        return batch.to(device)
    if isinstance(batch, tuple):
        parts = [batch_to_device(p, device) for p in batch]
        return type(batch)(*parts) if hasattr(batch, "_fields") else tuple(parts)
    return batch


_to_device = batch_to_device


@dataclass
class TrainResult:
    """What :func:`fit` returns: the run folder, the step reached, the terms logged last and, when a
    callback stopped the run before ``train.steps``, why (``stop_reason``; None otherwise)."""

    out_dir: Path
    step: int
    last_terms: dict[str, Any]
    stop_reason: str | None = None



def check_out_dir(out_dir: Path) -> None:
    """Raise :class:`ConfigError` when ``out_dir`` cannot be a run folder because it, or the nearest
    of its parents that exists, is a file (a typo, or a checkpoint path given as the folder)."""
    blocker = file_in_the_way(out_dir)
    if blocker is not None:
        where = "is a file" if blocker == out_dir else f"is inside '{blocker}', which is a file"
        raise ConfigError(
            f"train.out_dir '{out_dir}' {where}, so it cannot be a run folder. Give a folder, e.g. "
            f"train.out_dir={blocker.parent / 'runs' / 'NAME'}."
        )


def _check_optimizer_state(name: str, optimizer: torch.optim.Optimizer, out_dir: Path) -> None:
    """Raise :class:`ConfigError` when a restored optimizer's per-parameter state (Adam's moments)
    does not have its parameter's shape: the parameter changed shape since the checkpoint (a newer
    version of an objective), and the first step would fail deep inside the optimizer."""
    for group in optimizer.param_groups:
        for param in group["params"]:
            for key, value in optimizer.state.get(param, {}).items():
                if key != "step" and isinstance(value, torch.Tensor) and value.shape != param.shape:
                    raise ConfigError(
                        f"Cannot resume '{out_dir}': the checkpoint's {name} optimizer state '{key}' has shape "
                        f"{tuple(value.shape)}, and its parameter now has shape {tuple(param.shape)} (the objective "
                        "has changed since the run was saved: see the CHANGELOG). The weights still load for "
                        "evaluation (disentangle.load); to train on, start a new run."
                    )

class Trainer:
    """Builds dataset, model, objective and optimizers from a :class:`Config` and trains.

    >>> Trainer(load_config("configs/quickstart.yaml")).fit()          # doctest: +SKIP
    >>> Trainer(load_config("configs/quickstart.yaml")).fit(resume=True)  # doctest: +SKIP

    Under ``torchrun`` every process runs this same code on its shard of the global batch
    (:mod:`disentangle._core.distributed`); rank 0 alone writes the run folder.
    """

    def __init__(self, config: Config, dataset: Any = None, callbacks: Sequence[Any] = ()) -> None:
        """``dataset``: an already built dataset for ``config.data`` (e.g. one a sweep worker reuses
        across runs), or one of the user's, recorded in the checkpoint (:func:`given_data`); by
        default it is built from the config. ``callbacks``: objects with any of the
        hooks of :class:`~disentangle.training.callbacks.Callback`, called after the built-in ones and
        those of ``train.callbacks``."""
        self.config = config
        self._given_dataset = dataset
        self.data_given: dict[str, Any] | None = None  # set by _build: a dataset of the user's, not config.data
        self._user_callbacks = list(callbacks)
        self.callbacks: list[Any] = []
        self.resumed = False
        self.stop_reason: str | None = None
        self._pending_rates: dict[str, float] = {}  # set_learning_rate under torchrun, until the ranks meet
        self._session: _Session | None = None
        self.out_dir = Path(config.train.out_dir)
        self.checkpoint_path = self.out_dir / CHECKPOINT_NAME
        self.log_path = self.out_dir / "log.jsonl"
        self.rank_info = distributed.RankInfo()
        self._checkpoint_step: int | None = None
        self._precision: tuple[str, str] | None = None  # this session's (precision, reason), set by fit

    # ------------------------------------------------------------------ setup
    def _build(self) -> None:
        cfg = self.config
        if self._given_dataset is not None:
            dataset = self._given_dataset
            self.data_given = given_data(dataset, cfg.data)  # before a move, which may make a new object
            if getattr(dataset, "device", self.device) != self.device and hasattr(dataset, "to"):
                dataset = dataset.to(self.device) or dataset
            self.dataset = dataset
        else:
            seed_everything(cfg.seed)
            self.dataset = build_dataset(cfg.data, device=self.device)
            self.data_given = None
        # which images a dataset read from files holds (hashed once: CelebA lists 200,000 files)
        self._data_content = content_identity(self.dataset)
        # seeded after the dataset, so a prebuilt dataset gives the same weights
        seed_everything(cfg.seed)
        # built and drawn on the CPU, then moved: a seed gives the same initial weights on every
        # device (the objective's discriminators, tables and supervision parameters included; a
        # CUDA generator draws other numbers)
        self.model = VAE.from_backbone(
            cfg.model.backbone, image_shape=self.dataset.image_shape, latent_dim=cfg.model.latent_dim,
            init=cfg.model.init, **cfg.model.params,
        )
        self.objective = OBJECTIVES.build(cfg.objective.name, **cfg.objective.params)
        self.objective.setup(model=self.model, dataset_size=len(self.dataset))
        initialize(self.objective, cfg.model.init)  # its discriminators, built by setup
        check_training_data(cfg, self.objective, self.dataset)
        check_posterior_metrics(cfg.train, self.model)
        check_dataset = getattr(self.objective, "check_dataset", None)
        if check_dataset is not None:  # e.g. pair objectives: k vs the number of factors
            check_dataset(self.dataset)
        num_groups = getattr(self.objective, "num_groups", None)
        if num_groups is not None:  # groups of one class or one factor value: whole groups, before the run folder
            num_groups(cfg.train.batch_size)
        check_steps = getattr(self.objective, "check_steps", None)
        if check_steps is not None:  # e.g. LORD: a run that would end before its encoders train
            check_steps(cfg.train.steps)
        if getattr(self.objective, "uses_labels", False):  # semi-supervised: the few labels of data.labels
            spec = LabelsSpec.from_dict(cfg.data.labels)
            self.objective.attach_labels(make_labelled_set(self.dataset, spec))
        self.model.to(self.device)
        self.objective.to(self.device)
        self.schedules = bind_schedules(cfg, self.objective)
        self.scheduled: dict[str, float] = {}
        self.optimizers = build_optimizers(self.model, self.objective, cfg.train, self.device)
        self.schedulers = build_schedulers(self.optimizers, cfg.train)
        sync = distributed.sync_optimizer_gradients if distributed.is_distributed() else None
        precision = self._precision[0] if self._precision is not None else cfg.train.precision
        self.precision = Precision(precision, self.device, sync_gradients=sync)
        distributed.name_parameters({
            **{f"model.{n}": p for n, p in self.model.named_parameters()},
            **{f"objective.{n}": p for n, p in self.objective.named_parameters()},
        })
        # on the dataset's device: a streamed dataset (data.placement: stream) draws on the host
        self.data_generator = torch.Generator(device=getattr(self.dataset, "device", self.device))
        self.data_generator.manual_seed(stream_seed(cfg.seed, Stream.DATA))
        # every per-step draw of the objectives (reparameterisation, prior samples, permutations)
        self.noise_generator = torch.Generator(device=self.device)
        self.noise_generator.manual_seed(stream_seed(cfg.seed, Stream.NOISE))
        if self.device.type == "cuda":
            configure_cuda_backends(cfg.train)
        self.step = 0
        self._wall_time_before = 0.0  # training seconds of earlier sessions of this run (resume)
        self._paused_before = 0.0  # seconds earlier sessions spent stopped (SIGSTOP), left out of the above
        self._session_start = time.perf_counter()
        self._pauses = PauseClock()
        self._interrupt: DeferredInterrupt | None = None  # fit's signal handler, while it runs

    def _generators(self) -> dict[str, torch.Generator]:
        return {"data": self.data_generator, "noise": self.noise_generator}

    @property
    def wall_time_s(self) -> float:
        """Seconds spent training this run so far, over every session (carried by checkpoints); the
        time the process was stopped (SIGSTOP, Ctrl-Z) is left out: it is :attr:`paused_s`."""
        return self._wall_time_before + (time.perf_counter() - self._session_start) - self._pauses.seconds

    @property
    def paused_s(self) -> float:
        """Seconds this run's process spent stopped while training, over every session
        (:class:`~disentangle.training.interrupt.PauseClock`)."""
        return self._paused_before + self._pauses.seconds

    def _state(self) -> dict[str, Any]:
        given = {"data_given": self.data_given} if self.data_given is not None else {}
        content = getattr(self, "_data_content", None)
        if content is not None:  # images read from files: which ones (check_resume_content)
            given["data_content"] = content
        return {**given,
            "format": FORMAT_VERSION,
            "step": self.step,
            "wall_time_s": self.wall_time_s,
            "paused_s": self.paused_s,
            "config": self.config.to_dict(),
            "image_shape": list(self.dataset.image_shape),
            "model": self.model.state_dict(),
            "objective": self.objective.state_dict(),
            "optimizers": {name: opt.state_dict() for name, opt in self.optimizers.items()},
            "schedulers": {name: s.state_dict() for name, s in self.schedulers.items()},
            "precision": self.precision.state_dict(),
            "rng": capture_rng_state(self._generators()),
            "callbacks": self._callback_states(),
        }

    def _callback_states(self) -> dict[str, Any]:
        states = {}
        for key, callback in zip(state_keys(self.callbacks), self.callbacks):
            state = callback.state_dict() if hasattr(callback, "state_dict") else {}
            if state:
                states[key] = state
        return states

    def _restore_callbacks(self, states: dict[str, Any]) -> None:
        for key, callback in zip(state_keys(self.callbacks), self.callbacks):
            if key in states and hasattr(callback, "load_state_dict"):
                callback.load_state_dict(states[key])

    def _restore(self, ckpt: dict[str, Any]) -> None:
        """Load a checkpoint brought to the current layout (:func:`upgrade_checkpoint`)."""
        self.model.load_state_dict(ckpt["model"])
        self.objective.load_state_dict(ckpt["objective"])
        missing = set(self.optimizers) ^ set(ckpt["optimizers"])
        if missing:
            raise RuntimeError(f"Checkpoint optimizers {sorted(ckpt['optimizers'])} do not match {sorted(self.optimizers)}.")
        for name, opt in self.optimizers.items():
            opt.load_state_dict(ckpt["optimizers"][name])
            _check_optimizer_state(name, opt, self.out_dir)
        for name, state in ckpt["schedulers"].items():
            if name in self.schedulers:
                self.schedulers[name].load_state_dict(state)
        self.precision.load_state_dict(ckpt["precision"])
        self.step = int(ckpt["step"])
        self._wall_time_before = float(ckpt["wall_time_s"])
        self._paused_before = float(ckpt["paused_s"])
        rng = dict(ckpt["rng"])
        if "cuda" in rng and (not torch.cuda.is_available() or len(rng["cuda"]) != torch.cuda.device_count()):
            rng.pop("cuda")  # saved on another number of GPUs; training draws from its own generators
        saved = rng["generators"]
        # a generator's state is the device's own (a CPU's Mersenne Twister, CUDA's Philox seed and
        # offset): one saved on another kind of device cannot be set here
        fitting = {k: g for k, g in self._generators().items()
                   if k in saved and saved[k].numel() == g.get_state().numel()}
        restore_rng_state(rng, fitting)
        reseeded = []
        for name, generator in self._generators().items():
            if name not in fitting:  # a stream the checkpoint predates or another device's: a fresh one,
                # moved on by the step
                generator.manual_seed(stream_seed(self.config.seed, Stream[name.upper()]) + self.step)
                if name in saved:
                    reseeded.append(name)
        if reseeded:
            logger.warning(
                "The checkpoint's %s random stream%s were saved on another kind of device than %s: %s "
                "continue%s from fresh seeds (seed + stream + step %d). The run goes on from step %d with "
                "its weights and optimizer state, but its draws differ from a resume on the device it was "
                "saved on, so it is not bit-identical to that run.",
                " and ".join(reseeded), "s" if len(reseeded) > 1 else "", self.device,
                "they" if len(reseeded) > 1 else "it", "" if len(reseeded) > 1 else "s", self.step, self.step)

    def save_checkpoint(self) -> None:
        """Rank 0 writes the checkpoint; its failure is raised on every rank (:meth:`_on_main`)."""
        self._on_main(lambda: save_rotating(self._state(), self.checkpoint_path))
        self._checkpoint_step = self.step

    # ------------------------------------------------------------------ for callbacks
    def request_stop(self, reason: str = "stopped by a callback") -> None:
        """Stop after the step in progress: it completes, a checkpoint is written, the callbacks'
        ``on_fit_end`` runs and :meth:`fit` returns with ``result.stop_reason`` (``--resume``
        continues the run)."""
        if self.stop_reason is None:
            self.stop_reason = str(reason)

    def set_learning_rate(self, lr: float, optimizer: str = "model") -> None:
        """Make ``lr`` the base learning rate of ``optimizer`` (``"model"``, or an objective's own:
        ``"discriminator"``, ...) from the next step on, for a callback (``on_step_end``, ``on_log``,
        ``on_evaluate``): the learning-rate schedule (``train.lr_schedule``, warm-up) goes on
        multiplying it, and the checkpoint keeps it, so a resumed run goes on with it. A
        ``train.schedules`` entry for ``train.lr`` sets the model's rate at every step and so
        overrides this.

        Under torchrun callbacks run on the main process only: the main process's rate reaches every
        process where they next meet, at the end of the next log, evaluation or checkpoint step (at
        once when called from ``on_log``, ``on_evaluate`` or at such a step's ``on_step_end``), so all
        train with one rate from the same step on."""
        if optimizer not in self.optimizers:
            raise ConfigError(
                f"set_learning_rate: no optimizer '{optimizer}'; this run has {', '.join(sorted(self.optimizers))}."
            )
        if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not math.isfinite(lr) or lr < 0:
            raise ConfigError(f"set_learning_rate: lr is {lr!r}; give a finite number >= 0.")
        if distributed.is_distributed():  # applied on every rank by _share_learning_rates
            self._pending_rates[optimizer] = float(lr)
            return
        self._apply_learning_rate(optimizer, float(lr))

    def _apply_learning_rate(self, optimizer: str, lr: float) -> None:
        scheduler = self.schedulers.get(optimizer)
        for i, group in enumerate(self.optimizers[optimizer].param_groups):
            factor = 1.0
            if scheduler is not None:  # the schedule's factor for the next step, as LambdaLR.step() set it
                factor = scheduler.lr_lambdas[i](scheduler.last_epoch)
                scheduler.base_lrs[i] = float(lr)
            group["lr"] = float(lr) * factor

    @contextlib.contextmanager
    def outside_the_loop(self):
        """Time spent inside (an evaluation, pictures) does not count in ``steps_per_s``."""
        if self._session is None:
            yield
            return
        with self._session.outside_the_loop():
            yield

    def _notify(self, hook: str, *args: Any) -> None:
        """Call ``hook`` of every callback that has it, in order (rank 0 only: through :meth:`_on_main`
        or from code that already runs there)."""
        for callback in self.callbacks:
            method = getattr(callback, hook, None)
            if method is not None:
                method(self, *args)

    def _notify_exception(self, error: BaseException) -> None:
        """``on_exception`` of every callback that has it (rank 0, without the collectives of
        :meth:`_on_main`: the other ranks may be gone); what one raises is logged, not raised over
        ``error``."""
        for callback in self.callbacks:
            method = getattr(callback, "on_exception", None)
            if method is None:
                continue
            try:
                method(self, error)
            except BaseException:  # even a SystemExit there: the run's own error is the one raised
                logger.exception("%s.on_exception raised (the run's own error, %s, follows)",
                                 type(callback).__name__, type(error).__name__)

    # ------------------------------------------------------------------ evaluation and pictures
    def _evaluate(self) -> dict[str, Any]:
        from ..metrics import evaluate_metrics

        rng_state = capture_rng_state(self._generators())
        self.model.eval()
        try:
            return evaluate_metrics(
                self.dataset, self.model, self.config.train.eval_metrics, seed=self.config.seed,
                settings=self._metric_settings(),
            )
        finally:
            self.model.train()
            restore_rng_state(rng_state, self._generators())

    def _metric_settings(self) -> dict[str, dict[str, Any]]:
        """A class/content model's class factors and class code for the metrics that read its split
        (the other metrics, and other models, keep the metrics' defaults)."""
        from ..metrics import resolve_metric_names
        from ..metrics.names import CLASS_CONTENT_METRICS
        from ..objectives.class_content import ClassContentObjective

        if not isinstance(self.objective, ClassContentObjective):
            return {}
        names = resolve_metric_names(self.config.train.eval_metrics, self.model, self.dataset)
        split = self.objective.metric_settings()
        return {name: dict(split) for name in CLASS_CONTENT_METRICS if name in names}

    def picture_generator(self) -> torch.Generator:
        """The same images at every TensorBoard image step (never the training streams)."""
        device = getattr(self.dataset, "device", self.device)
        return torch.Generator(device=device).manual_seed(stream_seed(self.config.seed, Stream.PICTURES))

    def _write_pictures(self) -> None:
        from ..objectives.class_content import ClassContentObjective
        from ..visualize import write_training_pictures

        split = self.objective.metric_settings() if isinstance(self.objective, ClassContentObjective) else None
        self.model.objective_state = self.objective.published_tensors()  # as disentangle.load gives it
        write_training_pictures(self.model, self.dataset, self.out_dir, seed=self.config.seed, class_split=split)

    def _on_main(self, fn: Any) -> Any:
        """``fn()`` on rank 0, its result (or its exception) on every rank
        (:func:`disentangle._core.distributed.run_on_main`): every piece of rank 0's own work goes
        through here, so a failure there stops every rank at once."""
        return distributed.run_on_main(fn)

    # ------------------------------------------------------------------ loop
    def train_step(self) -> dict[str, torch.Tensor]:
        """One optimisation step on this process's shard of a freshly drawn global batch; returns
        the objective's (per-rank) terms."""
        cfg = self.config.train
        if self.schedules:
            self._apply_schedules()
        with distributed.random_source(self.noise_generator):
            with local_sampling():  # draws for the global batch, renders this rank's rows
                batch = self.objective.sample_batch(self.dataset, cfg.batch_size, self.data_generator)
            batch = _to_device(distributed.local_batch(batch, cfg.batch_size), self.device)
            terms = self.objective.train_step(
                self.model, batch, step=self.step, optimizers=self.optimizers, precision=self.precision
            )
        self.precision.update()
        for scheduler in self.schedulers.values():
            scheduler.step()
        return terms

    def _apply_schedules(self) -> None:
        """Set every scheduled setting (``train.schedules``) to its value for the step about to be trained."""
        for key, schedule in self.schedules.items():
            value = schedule.value(self.step)
            section, _, name = key.partition(".")
            if section == "objective":
                setattr(self.objective, name, value)
            else:  # train.lr: the model's optimizer (an objective's own networks keep their rates)
                for group in self.optimizers["model"].param_groups:
                    group["lr"] = value
            self.scheduled[key] = value

    def fit(self, resume: bool = False, precision: str | None = None) -> TrainResult:
        """Train up to ``train.steps``; with ``resume`` continue from ``out_dir/checkpoint.pt``.

        ``precision`` (``fp32``, ``bf16``, ``fp16`` or ``auto``; resume only) trains this session in
        another precision than the run's ``train.precision``, which stays the run's (its config and
        id are unchanged; ``execution.jsonl`` records the session's precision and the step it began):
        for a bf16 run moved to a CPU that emulates bf16, ``precision="fp32"`` (or ``auto``).
        The steps from there on are not those of an uninterrupted run in its own precision.
        """
        distributed.check_batch_size(self.config.train.batch_size, max(distributed.launched_world_size(), 1))
        self.device = resolve_device(self.config.train.device)
        # a bad precision is refused before the run folder is touched
        self._precision = session_precision(
            precision, self.config.train.precision, resuming=resume, device_type=self.device.type
        )
        self.rank_info, self.device = distributed.setup(self.device)
        # train.flush_denormal sets the calling thread's mode: give the caller (a notebook, a script
        # training more than one model) its own back. The command-line tools set it before any work,
        # so for them nothing changes; torch's threads started during fit keep the mode they began with.
        flushed_before = denormals_flushed()
        try:
            return self._fit(resume)
        finally:
            torch.set_flush_denormal(flushed_before)
            distributed.teardown()

    def _fit(self, resume: bool) -> TrainResult:
        cfg = self.config.train
        configured = build_callbacks(cfg.callbacks)  # a bad entry is refused before anything is created
        for callback in configured + self._user_callbacks:
            if hasattr(callback, "check_config"):  # a callback of the user's need not subclass Callback
                callback.check_config(self.config)
        check_out_dir(self.out_dir)  # before the data or the model are built
        # rank 0 writes the run folder: its check, raised on every rank (a rank that cannot write there need not)
        self._on_main(lambda: check_writable(self.out_dir, f"train.out_dir '{self.out_dir}'", "train.out_dir=runs/NAME"))
        exists = self._on_main(lambda: has_checkpoint(self.out_dir))
        if exists and not resume:
            raise RunExistsError(
                f"'{self.out_dir}' already holds a run (checkpoint.pt). Nothing was overwritten. "
                f"Resume it with --resume, or choose another folder with train.out_dir=PATH."
            )
        ckpt = None
        if resume:
            if not exists:
                raise RunExistsError(
                    f"Cannot resume: no checkpoint at '{self.checkpoint_path}'. Start a new run without --resume."
                )
            ckpt, loaded = self._on_main(lambda: load_latest(self.out_dir))
            ckpt = upgrade_checkpoint(ckpt)
            check_resume_config(ckpt["config"], self.config, self.out_dir)
            if int(ckpt["step"]) > cfg.steps:
                raise ConfigError(
                    f"Cannot resume '{self.out_dir}' with train.steps={cfg.steps:,}: its checkpoint is at step "
                    f"{int(ckpt['step']):,}, past it, so there is nothing to train and the run's config would "
                    f"say fewer steps than its weights have. Resume with train.steps={int(ckpt['step']):,} or "
                    "more, or load the run as it is (disentangle.load)."
                )
            self._on_main(lambda: settle_checkpoints(self.out_dir, loaded))
        if self.rank_info.is_main:
            for message in _idle_settings_to_warn(cfg, ckpt):
                logger.warning(message)
        self._build()
        self.callbacks = self._builtin_callbacks() + configured + self._user_callbacks
        self.resumed = ckpt is not None
        self.stop_reason = None
        if self.data_given is not None and self.rank_info.is_main:
            logger.info(
                f"training on a dataset given to fit ({self.data_given['description']}), not on the config's data "
                f"section ({self.config.data.name}); the checkpoint records it, and evaluate and visualize will not "
                f"score the run on the config's data"
            )
        if ckpt is not None:
            check_resume_data(ckpt.get("data_given"), self.data_given, self.config, self.out_dir)
            check_resume_content(ckpt.get("data_content"), self._data_content, self.config, self.out_dir)
            self._restore(ckpt)
            self._restore_callbacks(ckpt.get("callbacks", {}))
            self._checkpoint_step = self.step
        distributed.broadcast_module(self.model)
        distributed.broadcast_module(self.objective)
        self.execution = self._choose_execution()
        if self.rank_info.is_main and self.execution.threads_reason == "set":  # train.threads / --threads
            local = os.environ.get("LOCAL_WORLD_SIZE", "").strip()  # torchrun's processes on this machine
            warn_if_oversubscribed(self.execution.threads, threads_option="train.threads=",
                                   processes=int(local) if local.isdigit() and int(local) > 1 else 1,
                                   processes_option="torchrun --nproc_per_node ")
        if self.execution.materialize:
            self.dataset.materialize()
        if self.execution.channels_last:
            to_channels_last(self.model, self.objective)
        match_state_layout(self.optimizers)  # a resume in another layout than the saving session's
        if self.execution.conv_transpose_via_conv:
            use_convolution_kernels(self.model, self.objective)
        compile_networks(self.model, self.objective, cfg.compile)
        pauses = PauseClock()
        session = _Session(self.step, self.device, pauses)
        self._session = session
        self._session_start, self._pauses = session.start_time, pauses
        self.model.train()
        self.objective.train()
        cadence = Cadence.from_config(cfg)
        interrupt = DeferredInterrupt()
        self._interrupt = interrupt
        on_step_end = [c.on_step_end for c in self.callbacks if _overrides(c, "on_step_end")]
        main = self.rank_info.is_main
        fit_ended = False
        try:
            # inside: a user's on_fit_start that raises leaves no writer of ours open
            self._on_main(lambda: self._open_run_folder())
            interrupt.install()
            pauses.install()
            while self.step < cfg.steps:
                terms = self.train_step()
                session.nonfinite |= ~torch.isfinite(terms["loss"].detach())
                self.step += 1
                if main and on_step_end:
                    detached = {k: v.detach() if isinstance(v, torch.Tensor) else v for k, v in terms.items()}
                    for hook in on_step_end:
                        hook(self, self.step, detached)
                due = cadence.due(self.step)
                if "log" in due:
                    self._log_terms(session, terms)
                if "evaluate" in due and "log" not in due:  # no metric is computed on a model that is NaN
                    self._check_finite(session)
                events = [event for event in due if event in self._file_handlers]
                if events:  # rank 0 writes and evaluates; an error there is raised on every rank
                    self._on_main(functools.partial(self._write_events, session, events))
                self._share_learning_rates(due)
                stop = self._stop_requested(interrupt, due)
                if stop and "log" not in due and cadence.log:  # a session's last step is logged, as a run's last is
                    self._log_terms(session, terms)
                    self._on_main(functools.partial(self._write_events, session, ["log"]))
                if "checkpoint" in due or stop:
                    self._check_finite(session)
                    with session.outside_the_loop():
                        self.save_checkpoint()
                        self._on_main(lambda: self._notify("on_checkpoint", self.step, self.checkpoint_path))
                if stop and interrupt.requested:
                    try:
                        interrupt.deliver()  # KeyboardInterrupt on Ctrl-C or SIGTERM; a deferred signal's handler may exit
                    except BaseException:  # the run ends here, checkpointed: its callbacks hear it, as for a stop
                        self.stop_reason = self.stop_reason or INTERRUPTED_REASON
                        ended = TrainResult(self.out_dir, self.step, session.terms, self.stop_reason)
                        fit_ended = True  # its callbacks heard the end: no on_exception after it
                        self._on_main(functools.partial(self._notify, "on_fit_end", ended))
                        raise
                    # the deferred handlers returned: train on, unless other ranks stop with this one
                    if distributed.is_distributed() and self.stop_reason is None:
                        self.stop_reason = SIGNAL_ON_ANY_RANK
                    stop = self.stop_reason is not None
                if stop:
                    logger.info("%s; checkpoint at step %s in '%s' (resume to continue)", self.stop_reason,
                                f"{self.step:,}", self.out_dir)
                    break
                pauses.mark()
            if cfg.traversals and self.step > 0:
                self._on_main(self._write_pictures)
            result = TrainResult(self.out_dir, self.step, session.terms, self.stop_reason)
            fit_ended = True
            self._on_main(lambda: self._notify("on_fit_end", result))
        except BaseException as err:
            if main and not fit_ended:
                self._notify_exception(err)
            raise
        finally:
            interrupt.uninstall()
            pauses.uninstall()
            self._session, self._interrupt = None, None
            for callback in self.callbacks:  # an exception left one of our writers open: close it
                if isinstance(callback, CLOSED_ON_EXIT):
                    callback.close()
        distributed.barrier()  # the run folder is complete when any rank returns
        return result

    def _builtin_callbacks(self) -> list[Any]:
        """The loop's own: ``log.jsonl``, and on the main process the progress bar
        (``train.progress``, unless the package's logger is set to warnings or above: ``--quiet``)
        and TensorBoard (``train.tensorboard``)."""
        cfg = self.config.train
        builtin: list[Any] = [JsonlLogger()]
        quieted = logging.getLogger("disentangle").level > logging.INFO  # NOTSET (0): not asked for quiet
        if cfg.progress and self.rank_info.is_main and not quieted:
            builtin.append(ProgressBar())
        if cfg.tensorboard:
            builtin.append(TensorBoardLogger())
        return builtin

    def _choose_execution(self) -> Execution:
        """The ``auto`` execution strategies of this session (:func:`choose_execution`)."""
        cfg = self.config
        execution = choose_execution(
            cfg, self.device, session_steps=cfg.train.steps - self.step, dataset_size=len(self.dataset),
            image_shape=tuple(self.dataset.image_shape), materializable=hasattr(self.dataset, "materialize"),
        )
        execution = dataclasses.replace(
            execution, optimizer=optimizer_kernels(self.optimizers),
            placement=getattr(self.dataset, "placement", "device"),
            placement_reason=getattr(self.dataset, "placement_reason", "the dataset lives on the training device"),
        )
        if self._precision is not None and self._precision[1] != RUN_PRECISION:
            execution = dataclasses.replace(execution, precision=self._precision[0],
                                            precision_reason=self._precision[1])
        if execution.materialize is False and getattr(self.dataset, "materialized", False):
            # a given dataset (a sweep worker's, reused across runs) that an earlier run materialised
            execution = dataclasses.replace(
                execution, materialize=True, materialize_reason="the given dataset was already materialised"
            )
        return execution

    # ------------------------------------------------------------------ the events of a step
    def _open_run_folder(self) -> None:  # rank 0
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ConfigError(
                f"train.out_dir '{self.out_dir}' cannot be created ({type(err).__name__}: {err.strerror or err}). "
                "Choose a folder you can write to, e.g. train.out_dir=runs/NAME."
            ) from None
        self.config.save(self.out_dir / "config.yaml")
        with (self.out_dir / "execution.jsonl").open("a") as f:
            f.write(json.dumps({"step": self.step, **dataclasses.asdict(self.execution)}) + "\n")
        logger.info(self.execution.describe())
        if self.execution.precision_reason != RUN_PRECISION:
            logger.warning(
                "continuing '%s' from step %d in %s, not in its train.precision %s: the steps from here are "
                "not those an uninterrupted %s run would take (execution.jsonl records each session's precision)",
                self.out_dir, self.step, self.execution.precision, self.config.train.precision,
                self.config.train.precision,
            )
        self._notify("on_fit_start")

    def _log_terms(self, session: _Session, terms: dict[str, Any]) -> None:
        """The step's terms as logged (``session.terms``), after the non-finite check."""
        self._check_finite(session)
        # global-batch values: a rank's term is a mean over its rows or a whole-batch quantity
        tensors = distributed.mean_over_ranks({k: v for k, v in terms.items() if isinstance(v, torch.Tensor)})
        session.terms = {k: _to_loggable(tensors.get(k, v)) for k, v in terms.items()}

    def _check_finite(self, session: _Session) -> None:
        """Raise :class:`NonFiniteLossError` on every rank if any rank saw a non-finite loss since
        the last check (read here, at log and checkpoint steps, never per step)."""
        distributed.check_gradients()  # a gradient missing on some ranks only
        if distributed.any_over_ranks(session.nonfinite):
            kept = (
                f"the last good checkpoint (step {self._checkpoint_step})"
                if self._checkpoint_step is not None else "no checkpoint"
            )
            raise NonFiniteLossError(
                f"The loss became NaN or infinite between steps {session.last_good_step} and {self.step}; "
                f"training stopped and {kept} is kept in '{self.out_dir}'. Lower train.lr, use "
                f"train.precision=fp32, or check the objective's parameters."
            )
        session.last_good_step = self.step

    @property
    def _file_handlers(self) -> dict[str, Any]:
        """The events whose handlers write files (rank 0), by name."""
        return {"log": self._on_log, "evaluate": self._on_evaluate, "pictures": self._on_pictures}

    def _write_events(self, session: _Session, events: list[str]) -> None:  # rank 0
        for event in events:
            if event == "log":
                self._on_log(session)
            elif event == "evaluate" and self._interrupt is not None:
                # not training speed; a stop request ends it, so that the step is checkpointed at once
                try:
                    with session.outside_the_loop(), self._interrupt.cutting_short():
                        self._on_evaluate(session)
                except CutShort as cut:
                    logger.warning("the evaluation due at step %s was cut short (%s) to checkpoint the step at once; "
                                   "its scores are not logged", f"{self.step:,}", cut)
            else:  # evaluations and pictures: not training speed
                with session.outside_the_loop():
                    self._file_handlers[event](session)

    def _on_log(self, session: _Session) -> None:
        speed = {"steps_per_s": session.take_rate(self.step), "wall_time_s": round(self.wall_time_s, 3)}
        if self.paused_s > 0:  # the run was stopped (SIGSTOP, Ctrl-Z): how long, left out of wall_time_s
            speed["paused_s"] = round(self.paused_s, 3)
        stall = session.stall_message(speed["steps_per_s"], self.step, self.execution)
        if stall:
            logger.warning(stall)
        self._notify("on_log", self.step, {**session.terms, **self.scheduled, **speed})

    def _on_evaluate(self, session: _Session) -> None:
        self._notify("on_evaluate", self.step, self._evaluate())

    def _on_pictures(self, session: _Session) -> None:
        for callback in self.callbacks:
            if isinstance(callback, TensorBoardLogger):
                callback.log_images(self)

    def _share_learning_rates(self, due: tuple[str, ...]) -> None:
        """Under torchrun, at a log, evaluation or checkpoint step (where the ranks meet anyway): the rates
        the main process's callbacks set since the last such step (:meth:`set_learning_rate`), on every rank."""
        if not distributed.is_distributed() or not ({"log", "evaluate", "checkpoint"} & set(due)):
            return
        pending = distributed.broadcast_object(self._pending_rates)
        self._pending_rates = {}
        for optimizer, lr in pending.items():
            self._apply_learning_rate(optimizer, lr)

    def _stop_requested(self, interrupt: DeferredInterrupt, due: tuple[str, ...]) -> bool:
        """Whether to stop after this step: Ctrl-C was pressed, or a callback asked
        (:meth:`request_stop`). Under torchrun the ranks agree where they already meet (log and
        checkpoint steps), so a signal or a request seen by one rank stops all."""
        wanted = interrupt.requested or self.stop_reason is not None
        if not distributed.is_distributed():
            return wanted
        stop = ("log" in due or "checkpoint" in due) and distributed.any_over_ranks(
            torch.full((), wanted, dtype=torch.bool, device=self.device)
        )
        if stop and self.stop_reason is None and not interrupt.requested:
            # callbacks run on rank 0: what stops rank 0 from another rank is a signal there
            self.stop_reason = (SIGNAL_ON_OTHER_RANK if self.rank_info.is_main
                                else "stopped by a callback or a signal on another process")
        return stop


class _Session:
    """What one call of :meth:`Trainer.fit` keeps between steps: the training rate, the last logged
    terms and the on-device non-finite flag."""

    def __init__(self, step: int, device: torch.device, pauses: PauseClock | None = None) -> None:
        self.start_step, self.start_time = step, time.perf_counter()
        # the training rate since the last log record, the time spent outside the loop and stopped left out
        self._rate_step, self._rate_time, self._outside_s = step, self.start_time, 0.0
        self.pauses = pauses if pauses is not None else PauseClock()
        self._rate_paused = self.pauses.seconds
        self.last_good_step = step
        self.best_rate: float | None = None  # of this session's log intervals (stall_message)
        self.stalled = False
        self.terms: dict[str, Any] = {}
        self.nonfinite = torch.zeros((), dtype=torch.bool, device=device)

    @contextlib.contextmanager
    def outside_the_loop(self):
        """Time spent here (evaluations, pictures, checkpoints) does not count in ``steps_per_s``.
        A stop of the process in here is left out once, as a pause (:class:`PauseClock`), not also
        as time outside the loop."""
        # a stop in here is measured from here (the clock measures from its last mark), not from the
        # last step boundary: time trained before it is no pause
        self.pauses.mark()
        start, paused = time.perf_counter(), self.pauses.seconds
        try:
            yield
        finally:
            self._outside_s += max(0.0, (time.perf_counter() - start) - (self.pauses.seconds - paused))

    def stall_message(self, rate: float, step: int, execution: Execution) -> str | None:
        """A warning, once per slowdown, when the training rate falls below :data:`STALL_FRACTION` of
        the best rate of this session (a CPU shared with another job, a throttled machine)."""
        if self.best_rate is None or rate > self.best_rate:
            self.best_rate = rate
        if self.best_rate <= 0 or rate >= STALL_FRACTION * self.best_rate:
            if rate >= 0.5 * self.best_rate:
                self.stalled = False  # recovered: a later slowdown is reported again
            return None
        if self.stalled:
            return None
        self.stalled = True
        return (
            f"training slowed to {rate:.3g} steps/s at step {step:,}, from {self.best_rate:.3g} steps/s earlier in "
            f"this session. Another process is probably using these CPUs: this run uses {execution.threads} CPU "
            f"threads ({execution.threads_reason}) with OpenMP wait policy {execution.wait_policy}. On a shared "
            f"machine, fewer threads (train.threads=1 or --threads 1) and OMP_WAIT_POLICY=passive degrade gracefully."
        )

    def take_rate(self, step: int) -> float:
        """Steps per second of the training loop since the previous call (or the session's start),
        the time spent :meth:`outside_the_loop` and stopped (:class:`PauseClock`) left out; starts
        the next interval."""
        now, paused = time.perf_counter(), self.pauses.seconds
        seconds = max(now - self._rate_time - self._outside_s - (paused - self._rate_paused), 1e-9)
        rate = (step - self._rate_step) / seconds
        self._rate_step, self._rate_time, self._outside_s, self._rate_paused = step, now, 0.0, paused
        self.pauses.mark()  # a later stop is no longer than this interval: it began after this moment
        return rate



def _overrides(callback: Any, hook: str) -> bool:
    """Whether ``callback`` has ``hook`` other than :class:`Callback`'s, which does nothing: a method
    of its class, or a function set on the object itself (a callback need not subclass Callback)."""
    method = getattr(callback, hook, None)
    return method is not None and getattr(method, "__func__", method) is not getattr(Callback, hook)


def fit(
    config: Config, resume: bool = False, dataset: Any = None, callbacks: Sequence[Any] = (),
    precision: str | None = None,
) -> TrainResult:
    """Train from a validated config (see :func:`disentangle.config.load_config`) and return the
    run folder and last step; ``resume`` continues the run in ``train.out_dir`` from its checkpoint.
    (``python -m disentangle.train`` is its command line.)

    ``dataset`` optionally supplies the dataset: the already built one of ``config.data`` (as a sweep
    worker passes it), or one of the user's (``from_torch``, ``from_arrays``, their own), which the
    checkpoint then records as ``data_given`` (:func:`given_data`; a resume must be given it again,
    and the evaluate and visualize commands do not score such a run on ``config.data``); ``callbacks`` are
    objects with any of the hooks of :class:`~disentangle.training.callbacks.Callback` (after the
    built-in ones and those of ``train.callbacks``); ``precision`` trains a resumed session in another
    precision than the run's (:meth:`Trainer.fit`).
    """
    return Trainer(config, dataset=dataset, callbacks=callbacks).fit(resume=resume, precision=precision)
