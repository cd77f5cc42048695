"""Callbacks: your code at the trainer's events, and the loop's own loggers written as callbacks.

A callback is an object with any of these methods (subclass :class:`Callback`, whose methods do
nothing, and override the ones you need). The trainer calls them on the main process of a run, in
the order the callbacks are listed, after the built-in ones:

=======================================  ================================================================
``check_config(config)``                 before anything is created (no run folder yet): raise a
                                         :class:`~disentangle.ConfigError` to refuse the run's config
``on_fit_start(trainer)``                the run folder is open, the model built (and restored on resume)
``on_step_end(trainer, step, terms)``    after every optimisation step; ``terms`` are the objective's
                                         tensors on the device (reading one as a number waits for the
                                         device: do it every N steps, not every step, on a GPU)
``on_log(trainer, step, scalars)``       every ``train.log_every`` steps and at a session's last (a
                                         stop included): the logged
                                         numbers (the terms, ``steps_per_s``, ``wall_time_s``, and
                                         ``paused_s`` once the process has been stopped)
``on_evaluate(trainer, step, scores)``   after a metric evaluation (``train.eval_metrics`` every
                                         ``train.eval_every`` steps): ``{metric: {score: value}}``
``on_checkpoint(trainer, step, path)``   after a checkpoint is written
``on_fit_end(trainer, result)``          when the run ends (done, stopped by a callback, or by Ctrl-C or
                                         SIGTERM once checkpointed): the
                                         :class:`~disentangle.training.TrainResult`
``on_exception(trainer, error)``         when the run ends by an exception instead (a callback's, a
                                         non-finite loss, a second Ctrl-C), before it propagates; what
                                         it raises is logged, the run's own error is raised
=======================================  ================================================================

``trainer`` gives the run: ``trainer.step``, ``trainer.model``, ``trainer.objective``,
``trainer.dataset``, ``trainer.config``, ``trainer.out_dir``, ``trainer.optimizers``. A callback
stops the run with ``trainer.request_stop(reason)``: the step in progress completes, a checkpoint
is written, ``on_fit_end`` runs and :func:`~disentangle.training.fit` returns with
``result.stop_reason`` set; ``--resume`` (or ``fit(..., resume=True)``) continues it like a run
stopped by Ctrl-C. Work that is not training (an evaluation of your own, pictures) goes inside
``with trainer.outside_the_loop():`` so it does not count against ``steps_per_s``.

A callback whose state matters on resume (early stopping's best value and patience) returns it from
``state_dict()`` and takes it back in ``load_state_dict(state)``: the trainer keeps it in the
checkpoint, keyed by the callback's class name (and its rank among callbacks of that class).

From YAML, ``train.callbacks`` lists registered callbacks with their parameters::

    train:
      callbacks:
        - {name: csv}
        - {name: early_stopping, monitor: loss, patience: 5}
        - {name: wandb, project: my-project, mode: offline}

and from Python ``fit(config, callbacks=[MyCallback()])`` adds objects of your own. Register a
class of your own with ``@CALLBACKS.register("name")`` to name it in YAML.

``log.jsonl`` (:class:`JsonlLogger`) and the progress bar (:class:`ProgressBar`, ``train.progress``)
are built in; :class:`TensorBoardLogger` is added by ``train.tensorboard``. Every logger writes the
same scalars at the same steps.
"""
from __future__ import annotations

import csv
import io
import json
import logging
import math
import numbers
import os
import secrets
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._core.atomic import atomic_write
from .._core.registry import Registry, did_you_mean
from ..errors import ConfigError, InputError

if TYPE_CHECKING:
    from .trainer import Trainer, TrainResult

CALLBACKS: Registry = Registry("callback")
"""The callback registry: ``train.callbacks`` names to callback classes; their keyword parameters are
the other keys of each entry."""

HOOKS: tuple[str, ...] = ("on_fit_start", "on_step_end", "on_log", "on_evaluate", "on_checkpoint", "on_fit_end",
                         "on_exception")
"""The events a callback may handle, in the order they first occur."""

#: the ``stop_reason`` of a run stopped by Ctrl-C or a termination signal (its checkpoint written)
INTERRUPTED_REASON = "interrupted (Ctrl-C or a termination signal)"
#: under torchrun: a scheduler's deferred signal whose handler returned, on this rank or another
SIGNAL_ON_ANY_RANK = "stopped by a signal on this or another process"
#: under torchrun, on rank 0 (where the callbacks run): a signal another rank received
SIGNAL_ON_OTHER_RANK = "stopped by a signal on another process"
#: the stop reasons of a run stopped by a signal rather than by a callback (MLflow: KILLED)
SIGNAL_STOPS: tuple[str, ...] = (INTERRUPTED_REASON, SIGNAL_ON_ANY_RANK, SIGNAL_ON_OTHER_RANK)


class Callback:
    """Base class of callbacks: every hook does nothing (see the module docstring for when each runs)."""

    def check_config(self, config: Any) -> None:
        """Before anything is created: raise :class:`~disentangle.ConfigError` if this callback cannot
        work with the run's :class:`~disentangle.Config` (the trainer calls it on every process)."""

    def on_fit_start(self, trainer: Trainer) -> None:
        """The run starts (or resumes): the run folder is open and the model built."""

    def on_step_end(self, trainer: Trainer, step: int, terms: Mapping[str, Any]) -> None:
        """After optimisation step ``step`` (1-based: the number of steps done), with its terms (tensors)."""

    def on_log(self, trainer: Trainer, step: int, scalars: Mapping[str, Any]) -> None:
        """At a log step: the logged values (floats, and lists for per-latent terms such as ``kl_per_dim``)."""

    def on_evaluate(self, trainer: Trainer, step: int, scores: Mapping[str, Mapping[str, float]]) -> None:
        """After a metric evaluation: ``{metric: {score: value}}``."""

    def on_checkpoint(self, trainer: Trainer, step: int, path: Path) -> None:
        """After the checkpoint at ``path`` is written."""

    def on_fit_end(self, trainer: Trainer, result: TrainResult) -> None:
        """When the run ends: finished, or stopped by a callback (``result.stop_reason``)."""

    def on_exception(self, trainer: Trainer, error: BaseException) -> None:
        """When the run ends by an exception instead (a callback's, a non-finite loss, a second
        Ctrl-C, an out-of-memory error), before it propagates: flush or mark your run failed here.
        The last checkpoint stays; ``on_fit_end`` is not called. What this hook raises is logged,
        and the run's own error is the one raised."""

    def state_dict(self) -> dict[str, Any]:
        """What this callback needs to continue exactly on resume (plain values); ``{}``: nothing."""
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Take back what :meth:`state_dict` returned."""


def build_callbacks(entries: Sequence[Mapping[str, Any]]) -> list[Callback]:
    """Callbacks from ``train.callbacks`` entries (``{"name": ..., **parameters}``); every problem
    (an unknown name, with a did-you-mean; an unknown or missing parameter) in one
    :class:`~disentangle.ConfigError`, before anything is built."""
    problems = []
    for i, entry in enumerate(entries):
        where = f"train.callbacks[{i}]"
        if not isinstance(entry, Mapping) or "name" not in entry:
            problems.append(f"{where} is {entry!r}; each entry is a mapping with a 'name' (one of "
                            f"{', '.join(CALLBACKS.names())}) and the callback's parameters."
                            + _missing_space_hint(entry))
            continue
        name = entry["name"]
        if name not in CALLBACKS:
            problems.append(f"{where}: unknown callback '{name}'.{did_you_mean(str(name), CALLBACKS.names())} "
                            f"Valid callbacks: {', '.join(CALLBACKS.names())}.")
            continue
        parameters = CALLBACKS.parameters(name)
        given = {k for k in entry if k != "name"}
        for key in sorted(given - set(parameters)):
            problems.append(f"{where}: the callback '{name}' has no parameter '{key}'."
                            f"{did_you_mean(key, list(parameters))} Its parameters: {', '.join(parameters) or 'none'}.")
        for key, p in parameters.items():
            if p.default is p.empty and key not in given:
                problems.append(f"{where}: the callback '{name}' needs the parameter '{key}'.")
    if problems:
        raise ConfigError(problems[0] if len(problems) == 1 else
                          "train.callbacks has problems: " + " ".join(f"({i}) {p}" for i, p in enumerate(problems, 1)))
    return [CALLBACKS.build(entry["name"], **_coerced(entry["name"], {k: v for k, v in entry.items() if k != "name"}))
            for entry in entries]


def _missing_space_hint(entry: Any) -> str:
    """A hint for ``{name:csv}``, which YAML reads as the key ``'name:csv'`` (a flow mapping needs a
    space after each colon); empty for anything else."""
    if not isinstance(entry, Mapping):
        return ""
    glued = [str(key) for key, value in entry.items() if value is None and ":" in str(key)]
    if not glued:
        return ""
    spaced = ", ".join(": ".join(part.strip() for part in key.split(":", 1)) for key in glued)
    return f" YAML needs a space after each colon: write {{{spaced}}}, not {{{', '.join(glued)}}}."


def _coerced(name: str, params: dict[str, Any]) -> dict[str, Any]:
    """Numbers written as YAML strings (``1.0e9``, which YAML 1.1 reads as text) as the numbers their
    parameter's annotation names."""
    import typing

    try:
        hints = typing.get_type_hints(CALLBACKS.get(name).__init__)
    except Exception:  # an annotation that cannot be resolved: the values as given
        return params
    out = dict(params)
    for key, value in params.items():
        hint = hints.get(key)
        if isinstance(value, str) and hint in (float, int):
            try:
                out[key] = hint(float(value)) if hint is int and float(value).is_integer() else hint(value)
            except ValueError:
                pass  # the callback's own check names the bad value
    return out


def state_keys(callbacks: Sequence[Any]) -> list[str]:
    """The key of each callback's state in a checkpoint: its class name, with ``#k`` for the k-th
    (k >= 1) callback of the same class."""
    seen: dict[str, int] = {}
    keys = []
    for callback in callbacks:
        name = type(callback).__qualname__
        keys.append(name if name not in seen else f"{name}#{seen[name]}")
        seen[name] = seen.get(name, 0) + 1
    return keys


def flat_scores(scores: Mapping[str, Mapping[str, Any]], prefix: str = "metrics") -> dict[str, float]:
    """``{metric: {score: value}}`` as ``{"metrics/<metric>/<score>": value}`` (the scalar values)."""
    return {f"{prefix}/{metric}/{name}": float(value) for metric, values in scores.items()
            for name, value in values.items() if _is_number(value)}


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(float(value))


#: what a log record adds to the objective's terms and the scheduled settings (JsonlLogger)
SPEED_TERMS = ("steps_per_s", "wall_time_s", "paused_s")


def logged_names(record: Mapping[str, Any]) -> set[str]:
    """The names :func:`scalar_items` gives a record's values (one-number tensors and numbers as
    themselves, a per-latent vector ``kl_per_dim`` as ``kl_per_dim/z<j>``), finite or not."""
    names = set()
    for key, value in record.items():
        if hasattr(value, "numel"):  # a tensor of the step's terms: its shape, not its values (no device read)
            if value.numel() == 1:
                names.add(key)
            elif value.dim() == 1:
                names.update(f"{key}/z{j}" for j in range(value.numel()))
        elif isinstance(value, (list, tuple)):
            names.update(f"{key}/z{j}" for j in range(len(value)))
        elif isinstance(value, numbers.Real) and not isinstance(value, bool):
            names.add(key)
    return names


def scalar_items(scalars: Mapping[str, Any]) -> dict[str, float]:
    """The finite numbers of a log record, a per-latent list ``kl_per_dim`` as ``kl_per_dim/z<j>``."""
    out = {}
    for key, value in scalars.items():
        if _is_number(value):
            out[key] = float(value)
        elif isinstance(value, (list, tuple)):
            out.update({f"{key}/z{j}": float(v) for j, v in enumerate(value) if _is_number(v)})
    return out


# ---------------------------------------------------------------------------- built in
class JsonlLogger(Callback):
    """``log.jsonl`` in the run folder: one JSON object per log step (``{"step", terms...,
    "steps_per_s", "wall_time_s"}``, with ``"paused_s"`` once the run's process has been stopped:
    the seconds it spent stopped, which ``wall_time_s`` leaves out) and one per evaluation
    (``{"step", "metrics": scores}``). Records past the step a session starts from are dropped: on
    resume those a crashed session wrote after the checkpoint, on a new run in a folder without a
    checkpoint those of a session that crashed before its first one. Always installed."""

    def on_fit_start(self, trainer: Trainer) -> None:
        self.path = trainer.out_dir / "log.jsonl"
        truncate_jsonl(self.path, trainer.step)

    def on_log(self, trainer: Trainer, step: int, scalars: Mapping[str, Any]) -> None:
        self._write({"step": step, **scalars})

    def on_evaluate(self, trainer: Trainer, step: int, scores: Mapping[str, Mapping[str, float]]) -> None:
        self._write({"step": step, "metrics": scores})

    def _write(self, record: Mapping[str, Any]) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")


def truncate_jsonl(path: Path, step: int) -> None:
    """Drop the records of ``path`` past ``step`` (written after the checkpoint by a run that then
    crashed) and a torn last line."""
    if not path.exists():
        return
    kept = []
    for line in path.read_text().splitlines():
        try:
            if json.loads(line).get("step", 0) <= step:
                kept.append(line)
        except json.JSONDecodeError:  # a torn last line from a crash
            continue
    text = "".join(line + "\n" for line in kept)  # atomically: a kill now must not empty the log
    atomic_write(path, lambda f: f.write(text.encode("utf-8")))


class ProgressBar(Callback):
    """The tqdm progress bar (``train.progress``) with the last logged terms."""

    def on_fit_start(self, trainer: Trainer) -> None:
        from tqdm.auto import tqdm

        cfg = trainer.config.train
        self.bar = tqdm(total=cfg.steps, initial=trainer.step, dynamic_ncols=True, desc="train")

    def on_step_end(self, trainer: Trainer, step: int, terms: Mapping[str, Any]) -> None:
        self.bar.update(1)

    def on_log(self, trainer: Trainer, step: int, scalars: Mapping[str, Any]) -> None:
        self.bar.set_postfix({k: f"{v:.4g}" for k, v in scalars.items()
                              if isinstance(v, float) and k not in ("wall_time_s", "paused_s")}, refresh=False)

    def on_fit_end(self, trainer: Trainer, result: TrainResult) -> None:
        self.close()

    def close(self) -> None:
        if getattr(self, "bar", None) is not None:
            self.bar.close()
            self.bar = None


class TensorBoardLogger(Callback):
    """A TensorBoard event file in the run folder (``train.tensorboard``): every logged term
    (``train/<term>``), every metric score (``metrics/<metric>/<score>``) and, every
    ``train.image_every`` steps, reconstructions and a traversal grid (:meth:`log_images`; by
    :class:`disentangle.visualize.TensorBoardLogger`)."""

    def __init__(self) -> None:
        self.writer: Any = None

    def on_fit_start(self, trainer: Trainer) -> None:
        from ..visualize import TensorBoardLogger as Writer

        # events a crashed session wrote after the step this one starts from are hidden (the
        # checkpoint's own step was logged before the checkpoint was written: it stays)
        self.writer = Writer(trainer.out_dir, purge_step=trainer.step + 1)

    def log_images(self, trainer: Trainer) -> None:
        """Reconstructions and a traversal grid of the same images at every picture step."""
        self.writer.log_images(trainer.step, trainer.model, trainer.dataset, trainer.picture_generator())

    def on_log(self, trainer: Trainer, step: int, scalars: Mapping[str, Any]) -> None:
        self.writer.log_terms(step, scalars)

    def on_evaluate(self, trainer: Trainer, step: int, scores: Mapping[str, Mapping[str, float]]) -> None:
        self.writer.log_metrics(step, scores)

    def on_fit_end(self, trainer: Trainer, result: TrainResult) -> None:
        self.close()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


# ---------------------------------------------------------------------------- registered
@CALLBACKS.register("csv")
class CsvLogger(Callback):
    """``scalars.csv`` in the run folder (or ``filename``), one row per value: ``step,name,value``
    (the long, "tidy" layout: new names, such as metric scores, need no new column;
    ``pandas.read_csv(...).pivot(index="step", columns="name", values="value")`` gives the wide
    table). Names are those of :func:`scalar_items` (``kl_per_dim/z3``) and :func:`flat_scores`
    (``metrics/mig/mig``). Rows past the step a session starts from are dropped (a crashed
    session's, as in ``log.jsonl``)."""

    def __init__(self, filename: str = "scalars.csv") -> None:
        self.filename = str(filename)

    def on_fit_start(self, trainer: Trainer) -> None:
        self.path = trainer.out_dir / self.filename
        kept: list[list[str]] = []
        if self.path.exists():
            with self.path.open(newline="") as f:
                rows = [row for row in csv.reader(f)]
            kept = [r for r in rows[1:] if len(r) == 3 and r[0].isdigit() and int(r[0]) <= trainer.step]
        buffer = io.StringIO(newline="")
        csv.writer(buffer).writerows([["step", "name", "value"], *kept])
        text = buffer.getvalue()  # atomically: a kill now must not empty the file
        atomic_write(self.path, lambda f: f.write(text.encode("utf-8")))

    def _write(self, step: int, values: Mapping[str, float]) -> None:
        with self.path.open("a", newline="") as f:
            csv.writer(f).writerows([step, name, repr(value)] for name, value in values.items())

    def on_log(self, trainer: Trainer, step: int, scalars: Mapping[str, Any]) -> None:
        self._write(step, scalar_items(scalars))

    def on_evaluate(self, trainer: Trainer, step: int, scores: Mapping[str, Mapping[str, float]]) -> None:
        self._write(step, flat_scores(scores))


@CALLBACKS.register("early_stopping")
class EarlyStopping(Callback):
    """Stop the run when ``monitor`` has not improved for ``patience`` checks.

    ``monitor``: a logged term (``loss``, ``recon``; checked at every log step) or a metric score as
    ``metrics/<metric>/<score>`` (``metrics/mig/mig``; checked at every evaluation). ``mode``:
    ``min`` (default) or ``max``; an improvement is a change beyond ``min_delta`` in that direction.
    After ``patience`` checks without one the run stops (checkpointed; resumable). The best value and
    the count are kept in the checkpoint, so a resumed run goes on counting.

    A metric score is checked before anything is created (:meth:`check_config`): the metric must be
    in ``train.eval_metrics``, named as its scores are recorded (``sap_score``, not its alias
    ``sap``), with ``train.eval_every`` > 0; otherwise no check would ever come and the run would
    train to its last step.
    """

    def __init__(self, monitor: str = "loss", patience: int = 10, mode: str = "min", min_delta: float = 0.0) -> None:
        if mode not in ("min", "max"):
            raise ConfigError(f"early_stopping: mode is {mode!r}; choose 'min' or 'max'.")
        if not isinstance(patience, int) or patience < 1:
            raise ConfigError(f"early_stopping: patience is {patience!r}; give a whole number of checks >= 1.")
        if not isinstance(min_delta, numbers.Real) or min_delta < 0:
            raise ConfigError(f"early_stopping: min_delta is {min_delta!r}; give a number >= 0.")
        self.monitor, self.patience, self.mode, self.min_delta = str(monitor), patience, mode, float(min_delta)
        self.best: float | None = None
        self.bad_checks = 0
        self._term_checked = False  # a logged term: named at the session's first step (on_step_end)

    def check_config(self, config: Any) -> None:
        """Refuse a monitored metric score that this run never records (see the class docstring)."""
        if self.monitor.startswith("metrics/"):
            check_monitored_metric(self.monitor, config.train)

    def on_step_end(self, trainer: Trainer, step: int, terms: Mapping[str, Any]) -> None:
        """At a session's first step: a logged term that the objective does not return is named now,
        not at the first log step (metric scores are checked before the run, by :meth:`check_config`)."""
        if self._term_checked or self.monitor.startswith("metrics/"):
            return
        self._term_checked = True
        from .._core import distributed

        if distributed.is_distributed():  # raised here on rank 0 alone, the others would wait at a collective:
            return                        # under torchrun the first log step names it, on every rank at once
        logged = {*logged_names(terms), *getattr(trainer, "scheduled", {}), *SPEED_TERMS}
        if self.monitor not in logged:
            self._refuse(logged)

    def on_log(self, trainer: Trainer, step: int, scalars: Mapping[str, Any]) -> None:
        if self.monitor.startswith("metrics/"):
            return
        from .cadence import Cadence

        # a session stopped between log steps logs its last step too; that record is not a check, so
        # that a resumed run stops where an uninterrupted one does
        if "log" in Cadence.from_config(trainer.config.train).due(step):
            self._check(trainer, step, scalar_items(scalars), logged_names(scalars))

    def on_evaluate(self, trainer: Trainer, step: int, scores: Mapping[str, Mapping[str, float]]) -> None:
        if self.monitor.startswith("metrics/"):
            names = {f"metrics/{metric}/{name}" for metric, values in scores.items() for name in values}
            self._check(trainer, step, flat_scores(scores), names)

    def _refuse(self, logged: set[str]) -> None:
        raise InputError(
            f"early_stopping monitors '{self.monitor}', which this run does not log; it logs "
            f"{', '.join(sorted(logged)) or 'nothing at this event'}. Name one of those (metric scores as "
            "metrics/<metric>/<score>, with that metric in train.eval_metrics)."
        )

    def _check(self, trainer: Trainer, step: int, values: Mapping[str, float], names: set[str]) -> None:
        """``values``: the finite numbers of the record; ``names``: every name it has. A monitored value
        that is NaN or infinite at a check (a metric score of 0/0) is a check without improvement."""
        if self.monitor not in names:
            self._refuse(names)
        value = values.get(self.monitor)
        if value is None:
            logging.getLogger(__name__).warning(
                "early_stopping: %s is not a finite number at step %s; counted as a check without improvement.",
                self.monitor, f"{step:,}")
            better = False
        else:
            better = self.best is None or (
                value < self.best - self.min_delta if self.mode == "min" else value > self.best + self.min_delta)
        if better:
            self.best, self.bad_checks = value, 0
            return
        self.bad_checks += 1
        if self.bad_checks >= self.patience:
            best = f"improved on {self.best:.6g}" if self.best is not None else "been a finite number"
            trainer.request_stop(
                f"early stopping: {self.monitor} has not {best} for {self.bad_checks} checks "
                f"(patience {self.patience}, mode {self.mode}) at step {step:,}"
            )

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, "bad_checks": self.bad_checks, "monitor": self.monitor, "mode": self.mode}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """The best value and the count of a run resumed; not those of another quantity (a resume that
        changed ``monitor`` or ``mode``, or reordered the callbacks): then counting starts again."""
        saved = (state.get("monitor", self.monitor), state.get("mode", self.mode))
        if saved != (self.monitor, self.mode):
            logging.getLogger(__name__).warning(
                f"early_stopping monitors {self.monitor} ({self.mode}) in this session and {saved[0]} ({saved[1]}) in "
                f"the checkpoint's state; its best value and patience count start again."
            )
            return
        self.best, self.bad_checks = state.get("best"), int(state.get("bad_checks", 0))


def check_monitored_metric(monitor: str, train: Any) -> None:
    """Raise a :class:`~disentangle.ConfigError` unless ``monitor``, a metric score
    ``metrics/<metric>/<score>``, is recorded by a run with the ``train`` section ``train``: the metric
    named by its name (scores are recorded under it, never under an alias), in ``train.eval_metrics``,
    evaluated every ``train.eval_every`` > 0 steps. The score itself is known only once the metric has
    run (early stopping names the logged ones at the first evaluation)."""
    from ..metrics import METRICS, resolve_metric_names

    parts = monitor.split("/", 2)
    if len(parts) < 3 or not parts[1] or not parts[2]:
        raise ConfigError(
            f"early_stopping monitors '{monitor}', which is not a metric score: a score is monitored as "
            "metrics/<metric>/<score>, e.g. metrics/mig/mig with mig in train.eval_metrics. Write it in that form, "
            "or monitor a logged term such as loss."
        )
    metric, score = parts[1], parts[2]
    try:
        evaluated = resolve_metric_names(train.eval_metrics) if train.eval_metrics else []
    except ConfigError:  # an unknown name: the config's own check reports it
        evaluated = [m for m in train.eval_metrics if m in METRICS]
    listed = f"[{', '.join(train.eval_metrics)}]" if train.eval_metrics else "[]"
    if metric not in METRICS:
        known = [*evaluated, *METRICS.names()]
        raise ConfigError(
            f"early_stopping monitors '{monitor}', but '{metric}' is not a metric.{did_you_mean(metric, known)} "
            f"train.eval_metrics is {listed}; monitor one of its metrics as metrics/<metric>/<score> "
            f"(valid metrics: {', '.join(METRICS.names())})."
        )
    name = METRICS.canonical(metric)
    reasons, fixes = [], []
    if name != metric:
        reasons.append(f"scores are recorded under the metric's name, '{name}' ('{metric}' is its alias)")
        fixes.append(f"monitor metrics/{name}/{score}")
    if name not in evaluated:
        reasons.append(f"{name} is not in train.eval_metrics {listed}" if train.eval_metrics else "train.eval_metrics is empty")
        fixes.append(f"set train.eval_metrics=[{', '.join([*evaluated, name])}]")
    if not train.eval_every:
        reasons.append("train.eval_every is 0 (no evaluation during training)")
        fixes.append("set train.eval_every=N (an evaluation every N steps and at the last)")
    if reasons:
        raise ConfigError(
            f"early_stopping monitors '{monitor}', which this run does not log: {'; '.join(reasons)}. Early "
            f"stopping could never stop the run on it. To stop on {name}, "
            f"{' and '.join(fixes)}; or monitor a logged term such as loss."
        )
    _warn_if_not_a_headline_score(monitor, name, score, train.eval_every)


def _warn_if_not_a_headline_score(monitor: str, metric: str, score: str, eval_every: int) -> None:
    """Warn before training when ``score`` is not one of ``metric``'s headline scores
    (:data:`disentangle.metrics.names.HEADLINE_SCORES`): a metric's other scores (per factor, per
    code) depend on the data, so a misspelt one is found only at the first evaluation; the warning
    says so then rather than ``eval_every`` steps later."""
    from ..metrics.names import HEADLINE_SCORES

    headline = HEADLINE_SCORES.get(metric)
    if not headline or score in headline:
        return
    logging.getLogger(__name__).warning(
        f"early_stopping monitors '{monitor}': '{score}' is not one of {metric}'s headline scores "
        f"({', '.join(headline)}).{did_you_mean(score, list(headline))} If it is another score {metric} logs (one "
        f"per factor or per code), nothing is wrong; if not, the run stops with the list of logged scores at its "
        f"first evaluation, at step {eval_every:,}. To stop on the headline score, monitor "
        f"metrics/{metric}/{headline[0]}."
    )


@CALLBACKS.register("keep_checkpoints")
class KeepCheckpoints(Callback):
    """Keep a copy of the checkpoint written at chosen steps, for scores or pictures of the model
    part-way through training (the trainer keeps only its two newest checkpoints).

    ``steps``: the steps to keep (e.g. ``[20000, 100000, 200000]``), or ``every``: every multiple of
    it; each must be a multiple of ``train.checkpoint_every`` or the run's last step, since only
    those steps have a checkpoint (checked before the run folder is created). A kept step is a run folder of its
    own, ``<run folder>/<folder>/step_<NNNNNNN>/`` with ``checkpoint.pt`` and ``config.yaml``, which
    ``disentangle.load``, ``python -m disentangle.evaluate`` and ``visualize`` read as any run. Copies
    are atomic (``checkpoint.pt`` last), and a step already kept is not copied again, so a resumed
    run keeps the same files.
    """

    def __init__(self, steps: Sequence[int] = (), every: int = 0, folder: str = "kept") -> None:
        steps = [steps] if isinstance(steps, int) else list(steps)
        if not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in steps):
            raise ConfigError(f"keep_checkpoints: steps is {steps!r}; give a list of step numbers >= 1.")
        if not isinstance(every, int) or isinstance(every, bool) or every < 0:
            raise ConfigError(f"keep_checkpoints: every is {every!r}; give a number of steps >= 1 (or 0: none).")
        if bool(steps) == bool(every):
            raise ConfigError("keep_checkpoints: give either steps (a list of steps to keep) or every "
                              "(keep every multiple of it), not both and not neither.")
        if not str(folder) or Path(str(folder)).is_absolute() or ".." in Path(str(folder)).parts:
            raise ConfigError(f"keep_checkpoints: folder is {folder!r}; give a folder name inside the run folder.")
        self.steps, self.every, self.folder = sorted(set(steps)), every, str(folder)

    def wanted(self, step: int) -> bool:
        """Whether the checkpoint of ``step`` is one to keep."""
        return step in self.steps if self.steps else step % self.every == 0

    def check_config(self, config: Any) -> None:
        train = config.train
        unreachable = [s for s in (self.steps or [self.every])
                       if s != train.steps and s % train.checkpoint_every != 0 and s <= train.steps]
        if unreachable:
            raise ConfigError(
                f"keep_checkpoints: step{'s' if len(unreachable) > 1 else ''} {', '.join(f'{s:,}' for s in unreachable)} "
                f"of this run {'have' if len(unreachable) > 1 else 'has'} no checkpoint: train.checkpoint_every is "
                f"{train.checkpoint_every:,}, so checkpoints are written at its multiples and at the last step "
                f"({train.steps:,}). Keep multiples of {train.checkpoint_every:,}, or set train.checkpoint_every to "
                "a divisor of every step you keep."
            )

    def step_folder(self, trainer: Trainer, step: int) -> Path:
        """Where the checkpoint of ``step`` is kept."""
        return trainer.out_dir / self.folder / f"step_{step:07d}"

    def on_checkpoint(self, trainer: Trainer, step: int, path: Path) -> None:
        if not self.wanted(step):
            return
        target = self.step_folder(trainer, step)
        if (target / "checkpoint.pt").is_file():
            return
        for name, source in (("config.yaml", trainer.out_dir / "config.yaml"), ("checkpoint.pt", Path(path))):
            if source.is_file():
                with source.open("rb") as src:
                    atomic_write(target / name, lambda f, src=src: shutil.copyfileobj(src, f, 1 << 20))


def _require(module: str, extra: str, callback: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise InputError(
            f"the callback '{callback}' needs the {module} package, which cannot be imported here ({err}). "
            f'Install it with  pip install "disentangle-torch[{extra}]"  (or pip install {module}), or leave '
            f"'{callback}' out of train.callbacks."
        ) from None


@CALLBACKS.register("wandb")
class WandbLogger(Callback):
    """Weights & Biases (the ``wandb`` extra): every logged scalar and metric score, at its step, to a
    W&B run whose config is the run's resolved config. ``mode``: ``online``, ``offline`` (default:
    files under the run folder's ``wandb/``, synced later with ``wandb sync``) or ``disabled``. The
    W&B run id is kept in the checkpoint, so a resumed run continues the same W&B run online; W&B
    cannot resume an offline run, so each offline session is a folder of its own under ``wandb/``
    with that id, and ``wandb sync`` of a later one replaces the history of an earlier one (sync the
    sessions in order, or use ``mode: online`` for runs that will be resumed). A run ended by an
    exception is finished with exit code 1 (failed)."""

    def __init__(self, project: str = "disentangle", mode: str = "offline", entity: str | None = None,
                 name: str | None = None, tags: list[str] | None = None) -> None:
        self.project, self.mode, self.entity, self.name = project, mode, entity, name
        self.tags = list(tags or [])
        self.run_id: str | None = None
        self.run: Any = None
        _require("wandb", "wandb", "wandb")

    def on_fit_start(self, trainer: Trainer) -> None:
        wandb = _require("wandb", "wandb", "wandb")
        self.run_id = self.run_id or secrets.token_hex(4)  # W&B ids: lowercase letters and digits
        self.run = wandb.init(
            project=self.project, entity=self.entity, name=self.name or trainer.out_dir.name, tags=self.tags,
            mode=self.mode, dir=str(trainer.out_dir), id=self.run_id, resume="allow",
            config=trainer.config.to_dict(),
        )

    def on_log(self, trainer: Trainer, step: int, scalars: Mapping[str, Any]) -> None:
        self.run.log({f"train/{k}": v for k, v in scalar_items(scalars).items()}, step=step)

    def on_evaluate(self, trainer: Trainer, step: int, scores: Mapping[str, Mapping[str, float]]) -> None:
        self.run.log(flat_scores(scores), step=step)

    def on_fit_end(self, trainer: Trainer, result: TrainResult) -> None:
        if self.run is not None:
            self.run.finish()
            self.run = None

    def close(self) -> None:
        """The run ended by an exception (``on_fit_end`` finishes it otherwise): W&B marks it failed."""
        if self.run is not None:
            self.run.finish(exit_code=1)
            self.run = None

    def state_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.run_id = state.get("run_id")


@CALLBACKS.register("mlflow")
class MlflowLogger(Callback):
    """MLflow (the ``mlflow`` extra): the resolved config as parameters, every logged scalar and
    metric score at its step. ``tracking_uri``: default ``file:`` + the run folder's ``mlruns/`` (a
    local file store; ``mlflow ui --backend-store-uri RUN/mlruns``), or any other store's or server's
    URI (``sqlite:///mlflow.db``, ``http://host:5000``). MLflow 3 keeps its file store in maintenance
    mode and refuses it unless ``MLFLOW_ALLOW_FILE_STORE`` is true: for the default store that
    variable is set to true in this process unless you set it. The MLflow run id is kept in the
    checkpoint, so a resumed run continues the same MLflow run; MLflow cannot delete points, so a
    resumed session does not log again a value at a step the MLflow run already holds (one that a
    crashed session logged after its checkpoint: on a CPU the same value, as resume is bit-exact)."""

    def __init__(self, experiment: str = "disentangle", tracking_uri: str | None = None,
                 run_name: str | None = None) -> None:
        self.experiment, self.tracking_uri, self.run_name = experiment, tracking_uri, run_name
        self.run_id: str | None = None
        self.client: Any = None
        self._held: dict[str, set[int]] | None = None  # resumed: the steps each key already has
        _require("mlflow", "mlflow", "mlflow")

    def on_fit_start(self, trainer: Trainer) -> None:
        mlflow = _require("mlflow", "mlflow", "mlflow")
        uri = self.tracking_uri
        if uri is None:
            uri = (trainer.out_dir / "mlruns").resolve().as_uri()
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self.client = mlflow.tracking.MlflowClient(tracking_uri=uri)
        self._held = {} if self.run_id is not None else None
        if self.run_id is not None:  # resumed: the run ended FAILED or KILLED last session, and trains again
            self.client.update_run(self.run_id, status="RUNNING")
        else:
            found = self.client.get_experiment_by_name(self.experiment)
            experiment_id = found.experiment_id if found else self.client.create_experiment(self.experiment)
            run = self.client.create_run(experiment_id, run_name=self.run_name or trainer.out_dir.name)
            self.run_id = run.info.run_id
            params = _flat_params(trainer.config.to_dict())
            for key, value in params.items():
                self.client.log_param(self.run_id, key, value)

    def _log(self, step: int, values: Mapping[str, float]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(_mlflow_key(k), v, now, step) for k, v in values.items()
                   if step not in self._steps_held(_mlflow_key(k))]
        if metrics:
            self.client.log_batch(self.run_id, metrics=metrics)

    def _steps_held(self, key: str) -> set[int]:
        """The steps at which the MLflow run already has ``key``: none for a new run; read once per
        key in a resumed session."""
        if self._held is None:
            return set()
        if key not in self._held:
            self._held[key] = {m.step for m in self.client.get_metric_history(self.run_id, key)}
        return self._held[key]

    def on_log(self, trainer: Trainer, step: int, scalars: Mapping[str, Any]) -> None:
        self._log(step, {f"train/{k}": v for k, v in scalar_items(scalars).items()})

    def on_evaluate(self, trainer: Trainer, step: int, scores: Mapping[str, Mapping[str, float]]) -> None:
        self._log(step, flat_scores(scores))

    def on_fit_end(self, trainer: Trainer, result: TrainResult) -> None:
        if self.client is not None and self.run_id is not None:
            # a callback's stop (early stopping) is a finished run; Ctrl-C or a signal is not
            status = "KILLED" if result.stop_reason in SIGNAL_STOPS else "FINISHED"
            self.client.set_terminated(self.run_id, status)
            self.client = None  # ended: close() has nothing left to do

    def close(self) -> None:
        """The run ended by an exception: the MLflow run is marked FAILED, not left RUNNING."""
        if self.client is not None and self.run_id is not None:
            self.client.set_terminated(self.run_id, "FAILED")
            self.client = None

    def state_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.run_id = state.get("run_id")


#: our callbacks that hold a writer open: the trainer closes them when a run ends by an exception
CLOSED_ON_EXIT: tuple[type, ...] = (ProgressBar, TensorBoardLogger, WandbLogger, MlflowLogger)


def _mlflow_key(key: str) -> str:
    """MLflow keys allow letters, digits, ``_ - . / :`` and spaces."""
    return "".join(c if c.isalnum() or c in "_-./: " else "_" for c in key)


def _flat_params(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flat_params(value, name + "."))
        else:
            out[name] = str(value)[:500]
    return out
