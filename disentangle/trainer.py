"""The training loop: config in, run folder out.

Run folder (``train.out_dir``)::

    config.yaml      the resolved config (every default filled in)
    checkpoint.pt    model, objective (its own networks), every optimizer, the fp16 scaler,
                     step and all RNG states; written atomically; torch.load(weights_only=True)
    checkpoint.prev.pt  the checkpoint before it (resume falls back to it if the newest is
                     unreadable)
    log.jsonl        one JSON object per logged step with every term the objective returns
    traversals.png   latent traversals at the end, rows sorted by KL

Design choices:

* Data lives on the training device (uint8, cast per batch); batches are drawn by index from a
  ``torch.Generator`` on that device whose state is checkpointed, so a resumed run on CPU repeats
  the uninterrupted run bit for bit.
* Non-finite losses are detected with an on-device flag that is read only at log and checkpoint
  steps (no per-step host sync); a checkpoint is written only after that check passes, so the last
  checkpoint on disk is always a finite one.
* ``train.steps`` is the *total* step count: ``--resume`` continues from the checkpoint up to it.
* Ctrl-C (SIGINT) never saves half a step: the handler only sets a flag; the step in progress
  (including FactorVAE's discriminator update) completes, its checkpoint is written, and then
  ``KeyboardInterrupt`` is raised. A second Ctrl-C stops at once without saving (the last
  periodic checkpoint stays valid).
"""
from __future__ import annotations

import json
import math
import random
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from .checkpoint import (
    CHECKPOINT_NAME,
    FORMAT_VERSION,
    capture_rng_state,
    has_checkpoint,
    load_latest,
    restore_rng_state,
    save_rotating,
)
from .config import Config
from .data import build_dataset
from .model import VAE
from .objectives import OBJECTIVES
from .objectives.losses import kl_normal_per_dim
from .precision import Precision
from .registry import ConfigError, DisentangleError

#: train keys that may differ between a checkpoint's config and the config used to resume it
RESUMABLE_KEYS = ("steps", "checkpoint_every", "log_every", "eval_every", "eval_metrics", "progress", "traversals", "device", "out_dir")


class RunExistsError(DisentangleError):
    """The output folder already holds a run and ``resume`` was not requested."""


class NonFiniteLossError(DisentangleError):
    """A loss became NaN or infinite; the last good checkpoint is kept."""


def resolve_device(name: str) -> torch.device:
    """``auto`` → cuda if available, else mps, else cpu; an unavailable explicit device is an error."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"train.device is '{name}' but CUDA is not available here. Use train.device=auto or cpu.")
    if name == "mps" and not (getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()):
        raise ConfigError("train.device is 'mps' but MPS is not available here. Use train.device=auto or cpu.")
    return torch.device(name)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _to_loggable(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        value = value.detach().float().cpu()
        return value.item() if value.numel() == 1 else value.tolist()
    return value


@dataclass
class TrainResult:
    out_dir: Path
    step: int
    last_terms: dict[str, Any]


class Trainer:
    """Builds dataset, model, objective and optimizers from a :class:`Config` and trains.

    >>> Trainer(load_config("configs/quickstart.yaml")).fit()          # doctest: +SKIP
    >>> Trainer(load_config("configs/quickstart.yaml")).fit(resume=True)  # doctest: +SKIP
    """

    def __init__(self, config: Config, dataset: Any = None) -> None:
        """``dataset``: an already built dataset for ``config.data`` (e.g. one a sweep worker reuses
        across runs); by default it is built from the config."""
        self.config = config
        self._given_dataset = dataset
        self.out_dir = Path(config.train.out_dir)
        self.checkpoint_path = self.out_dir / CHECKPOINT_NAME
        self.log_path = self.out_dir / "log.jsonl"

    # ------------------------------------------------------------------ setup
    def _build(self) -> None:
        cfg = self.config
        self.device = resolve_device(cfg.train.device)
        if self._given_dataset is not None:
            dataset = self._given_dataset
            if getattr(dataset, "device", self.device) != self.device and hasattr(dataset, "to"):
                dataset = dataset.to(self.device) or dataset
            self.dataset = dataset
        else:
            seed_everything(cfg.seed)
            self.dataset = build_dataset(cfg.data, device=self.device)
        # seeded after the dataset, so a prebuilt dataset gives the same weights and noise
        seed_everything(cfg.seed)
        self.model = VAE.from_backbone(
            cfg.model.backbone, image_shape=self.dataset.image_shape, latent_dim=cfg.model.latent_dim, **cfg.model.params
        ).to(self.device)
        self.objective = OBJECTIVES.build(cfg.objective.name, **cfg.objective.params).to(self.device)
        self.objective.setup(model=self.model, dataset_size=len(self.dataset))
        check_dataset = getattr(self.objective, "check_dataset", None)
        if check_dataset is not None:  # e.g. pair objectives: k vs the number of factors
            check_dataset(self.dataset)
        self.optimizers = self.objective.configure_optimizers(
            self.model, lr=cfg.train.lr, betas=tuple(cfg.train.betas), eps=cfg.train.eps
        )
        self.precision = Precision(cfg.train.precision, self.device)
        self.data_generator = torch.Generator(device=self.device)
        self.data_generator.manual_seed(cfg.seed + 1)  # distinct stream from weight init / noise
        self.step = 0

    def _state(self) -> dict[str, Any]:
        return {
            "format": FORMAT_VERSION,
            "step": self.step,
            "config": self.config.to_dict(),
            "image_shape": list(self.dataset.image_shape),
            "model": self.model.state_dict(),
            "objective": self.objective.state_dict(),
            "optimizers": {name: opt.state_dict() for name, opt in self.optimizers.items()},
            "precision": self.precision.state_dict(),
            "rng": capture_rng_state({"data": self.data_generator}),
        }

    def _restore(self, ckpt: dict[str, Any]) -> None:
        self.model.load_state_dict(ckpt["model"])
        self.objective.load_state_dict(ckpt["objective"])
        missing = set(self.optimizers) ^ set(ckpt["optimizers"])
        if missing:
            raise RuntimeError(f"Checkpoint optimizers {sorted(ckpt['optimizers'])} do not match {sorted(self.optimizers)}.")
        for name, opt in self.optimizers.items():
            opt.load_state_dict(ckpt["optimizers"][name])
        self.precision.load_state_dict(ckpt.get("precision", {}))
        self.step = int(ckpt["step"])
        restore_rng_state(ckpt["rng"], {"data": self.data_generator})

    def save_checkpoint(self) -> None:
        save_rotating(self._state(), self.checkpoint_path)

    def _check_resume_config(self, saved: dict[str, Any]) -> None:
        current = self.config.to_dict()
        diffs = []
        for section in ("seed", "data", "model", "objective", "train"):
            a, b = saved.get(section), current.get(section)
            if section == "train":
                a = {k: v for k, v in (a or {}).items() if k not in RESUMABLE_KEYS}
                b = {k: v for k, v in (b or {}).items() if k not in RESUMABLE_KEYS}
            if a != b:
                if isinstance(a, dict) and isinstance(b, dict):
                    for key in sorted(set(a) | set(b)):
                        if a.get(key) != b.get(key):
                            diffs.append(f"{section}.{key}: checkpoint {a.get(key)!r}, now {b.get(key)!r}")
                else:
                    diffs.append(f"{section}: checkpoint {a!r}, now {b!r}")
        if diffs:
            raise ConfigError(
                f"Cannot resume '{self.out_dir}': the config differs from the checkpoint's in "
                f"{'; '.join(diffs)}. Only train.{{{', '.join(RESUMABLE_KEYS)}}} may change on resume; "
                f"resume without --config to use the run's own config.yaml."
            )

    # ------------------------------------------------------------------ logging
    def _truncate_log(self, step: int) -> None:
        """Drop records past the checkpoint (written after it by a run that then crashed)."""
        if not self.log_path.exists():
            return
        kept = []
        for line in self.log_path.read_text().splitlines():
            try:
                if json.loads(line).get("step", 0) <= step:
                    kept.append(line)
            except json.JSONDecodeError:  # a torn last line from a crash
                continue
        self.log_path.write_text("".join(l + "\n" for l in kept))

    def _log(self, record: dict[str, Any]) -> None:
        with self.log_path.open("a") as f:
            f.write(json.dumps(record) + "\n")

    # ------------------------------------------------------------------ evaluation
    def _evaluate(self) -> dict[str, Any]:
        from .metrics import evaluate_metrics

        rng_state = capture_rng_state({"data": self.data_generator})
        self.model.eval()
        try:
            return evaluate_metrics(self.dataset, self.model, self.config.train.eval_metrics, seed=self.config.seed)
        finally:
            self.model.train()
            restore_rng_state(rng_state, {"data": self.data_generator})

    def _write_traversals(self) -> None:
        from .visualize import save_traversals

        g = torch.Generator(device=self.device)
        g.manual_seed(self.config.seed + 2)
        self.model.eval()
        rng_state = torch.get_rng_state()
        with torch.no_grad():
            x = self.dataset.sample_batch(256, g)
            mu, logvar = self.model.encode(x)
            kl = kl_normal_per_dim(mu, logvar).cpu().numpy()
            save_traversals(self.model, x[:1], kl, self.out_dir / "traversals.png")
        torch.set_rng_state(rng_state)
        self.model.train()

    # ------------------------------------------------------------------ loop
    def fit(self, resume: bool = False) -> TrainResult:
        """Train up to ``train.steps``; with ``resume`` continue from ``out_dir/checkpoint.pt``."""
        cfg = self.config.train
        if has_checkpoint(self.out_dir) and not resume:
            raise RunExistsError(
                f"'{self.out_dir}' already holds a run (checkpoint.pt). Nothing was overwritten. "
                f"Resume it with --resume, or choose another folder with train.out_dir=PATH."
            )
        ckpt = None
        if resume:
            if not has_checkpoint(self.out_dir):
                raise RunExistsError(
                    f"Cannot resume: no checkpoint at '{self.checkpoint_path}'. Start a new run without --resume."
                )
            ckpt, _ = load_latest(self.out_dir)
            self._check_resume_config(ckpt["config"])
        self._build()
        if ckpt is not None:
            self._restore(ckpt)
            self._truncate_log(self.step)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.config.save(self.out_dir / "config.yaml")

        model, objective = self.model, self.objective
        model.train()
        objective.train()
        nonfinite = torch.zeros((), dtype=torch.bool, device=self.device)
        last_good_step = self.step
        last_terms: dict[str, Any] = {}
        start_step, start_time = self.step, time.perf_counter()
        bar = tqdm(total=cfg.steps, initial=self.step, disable=not cfg.progress, dynamic_ncols=True, desc="train")

        def check_finite() -> None:
            nonlocal last_good_step
            if bool(nonfinite):
                kept = f"the last good checkpoint (step {last_good_step})" if self.checkpoint_path.exists() else "no checkpoint"
                raise NonFiniteLossError(
                    f"The loss became NaN or infinite between steps {last_good_step} and {self.step}; "
                    f"training stopped and {kept} is kept in '{self.out_dir}'. Lower train.lr, use "
                    f"train.precision=fp32, or check the objective's parameters."
                )
            last_good_step = self.step

        interrupt = _DeferredInterrupt()
        try:
            interrupt.install()
            while self.step < cfg.steps:
                x = objective.sample_batch(self.dataset, cfg.batch_size, self.data_generator)
                terms = objective.train_step(
                    model, x, step=self.step, optimizers=self.optimizers, precision=self.precision
                )
                self.precision.update()
                nonfinite |= ~torch.isfinite(terms["loss"].detach())
                self.step += 1
                bar.update(1)
                at_end = self.step == cfg.steps
                if self.step % cfg.log_every == 0 or at_end:
                    check_finite()
                    last_terms = {k: _to_loggable(v) for k, v in terms.items()}
                    elapsed = time.perf_counter() - start_time
                    self._log({"step": self.step, **last_terms, "steps_per_s": (self.step - start_step) / max(elapsed, 1e-9)})
                    bar.set_postfix({k: f"{v:.4g}" for k, v in last_terms.items() if isinstance(v, float)}, refresh=False)
                if cfg.eval_every and cfg.eval_metrics and (self.step % cfg.eval_every == 0 or at_end):
                    self._log({"step": self.step, "metrics": self._evaluate()})
                if self.step % cfg.checkpoint_every == 0 or at_end or interrupt.requested:
                    check_finite()
                    self.save_checkpoint()
                if interrupt.requested:
                    raise KeyboardInterrupt
        finally:
            interrupt.uninstall()
            bar.close()
        if cfg.traversals and self.step > 0:
            self._write_traversals()
        return TrainResult(self.out_dir, self.step, last_terms)


class _DeferredInterrupt:
    """SIGINT handler that asks the loop to stop at the next step boundary.

    The first Ctrl-C sets :attr:`requested` (the loop finishes the step, checkpoints it and raises
    ``KeyboardInterrupt``); a second one raises ``KeyboardInterrupt`` at once. Installed only in the
    main thread (Python delivers signals there); elsewhere the default behaviour is unchanged.
    """

    def __init__(self) -> None:
        self.requested = False
        self._previous: Any = None
        self._installed = False

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True
        print(
            "\ninterrupt: finishing the current step and checkpointing it "
            "(press Ctrl-C again to stop at once, keeping the last periodic checkpoint)",
            file=sys.stderr,
        )

    def install(self) -> None:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
            self._installed = True

    def uninstall(self) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
            self._installed = False


def train(config: Config, resume: bool = False, dataset: Any = None) -> TrainResult:
    """Train from a validated config (see :func:`disentangle.config.load_config`).

    ``dataset`` optionally supplies the already built dataset of ``config.data``.
    """
    return Trainer(config, dataset=dataset).fit(resume=resume)
