"""Atomic, rotated checkpoints and RNG state capture, loadable with ``torch.load(weights_only=True)``.

A checkpoint holds only tensors, numbers, strings and containers of them:
``{"format", "step", "wall_time_s", "paused_s", "config", "image_shape", "model", "objective", "optimizers",
"schedulers", "precision", "rng"}``.

A run folder keeps two: ``checkpoint.pt`` (the newest) and ``checkpoint.prev.pt`` (the one before).
:func:`save_rotating` writes the new file completely (fsynced) before it moves the old newest
aside, so at every instant at least one complete checkpoint is on disk; :func:`load_latest` falls
back to the previous one, with a warning, when the newest is missing or unreadable (a truncated
file, a disk error), and raises :class:`CheckpointError` naming every file it tried when none is
readable. A process killed between the two renames leaves the new file under its temporary name
(``.checkpoint.pt.<pid>.next``, complete): :func:`load_latest` takes it first, as the newest, and
:func:`settle_checkpoints` (the trainer's first act on a resume) finishes that rotation, or moves an
unreadable newest file aside (``checkpoint.unreadable.pt``) so that the next rotation cannot put it
over the only good one.
"""
from __future__ import annotations

import hashlib
import logging
import os
import random
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .._core.atomic import atomic_write, fsync_dir
from .._core.devices import check_device
from ..errors import CheckpointError, CheckpointNotFoundError, InputError

logger = logging.getLogger(__name__)

CHECKPOINT_NAME = "checkpoint.pt"
"""The newest checkpoint of a run folder."""
PREVIOUS_CHECKPOINT_NAME = "checkpoint.prev.pt"
"""The checkpoint before it, kept when a new one is written (resume falls back to it)."""
UNREADABLE_CHECKPOINT_NAME = "checkpoint.unreadable.pt"
"""Where a resume moves a newest checkpoint it could not read (kept for inspection, never loaded)."""
FORMAT_VERSION = 1
"""The version of the checkpoint dict's layout."""


def upgrade_checkpoint(ckpt: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint dict of any earlier layout brought to the current one, in place and returned:
    the one place where what older checkpoints lack is given the value their run used.

    * the config: keys added since (:func:`disentangle.config.upgrade_saved_config`, e.g.
      ``model.init: pytorch``);
    * ``schedulers``: none (checkpoints from before learning-rate schedules trained at a constant lr);
    * ``precision``: no GradScaler state; ``wall_time_s``: 0; ``paused_s`` (seconds stopped, left out
      of ``wall_time_s`` since 2026-11-27): 0;
    * ``rng.generators``: the trainer's named generators it holds; one it lacks (``noise``, before the
      per-step generator) starts a fresh stream (:meth:`~disentangle.training.trainer.Trainer._restore`).
    """
    from ..config import upgrade_saved_config

    ckpt["config"] = upgrade_saved_config(ckpt["config"])
    ckpt.setdefault("schedulers", {})
    ckpt.setdefault("precision", {})
    ckpt.setdefault("wall_time_s", 0.0)
    ckpt.setdefault("paused_s", 0.0)
    ckpt["rng"] = {"generators": {}, **ckpt["rng"]}
    return ckpt


DIGEST_KEY = "sha256"
"""The checkpoint entry holding :func:`content_digest` of everything else in it."""


def content_digest(obj: Any) -> str:
    """sha256 of a checkpoint's content: every tensor's dtype, shape and bytes and every other
    value's ``repr``, walked in sorted key order (so it does not depend on how ``torch.save``
    lays the file out). Written into the checkpoint by :func:`atomic_save` and checked by
    :func:`load_checkpoint`: a flipped byte in a weight is found, not resumed from."""
    h = hashlib.sha256()

    def walk(value: Any) -> None:
        if isinstance(value, torch.Tensor):
            t = value.detach().cpu().contiguous().reshape(-1)
            h.update(f"T{t.dtype}{tuple(value.shape)}".encode())
            h.update(t.view(torch.uint8).numpy().tobytes())
        elif isinstance(value, dict):
            h.update(b"{")
            for key in sorted(value, key=repr):
                h.update(repr(key).encode())
                walk(value[key])
            h.update(b"}")
        elif isinstance(value, (list, tuple)):
            h.update(b"[" if isinstance(value, list) else b"(")
            for item in value:
                walk(item)
            h.update(b"]")
        else:
            h.update(f"{type(value).__name__}:{value!r};".encode())

    walk({k: v for k, v in obj.items() if k != DIGEST_KEY} if isinstance(obj, dict) else obj)
    return h.hexdigest()


def atomic_save(obj: Any, path: str | Path) -> None:
    """``torch.save`` to a temporary file in the same folder, fsync, then rename over ``path``.

    A crash at any point leaves either the old file or the new one, never a torn file. A dict is
    saved with its :func:`content_digest` under :data:`DIGEST_KEY`, in the same file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda f: torch.save(_with_digest(obj), f))


def _with_digest(obj: Any) -> Any:
    return {**obj, DIGEST_KEY: content_digest(obj)} if isinstance(obj, dict) else obj


def save_rotating(obj: Any, path: str | Path) -> None:
    """Write ``obj`` to ``path`` keeping the file it replaces as ``checkpoint.prev.pt``.

    Order: the new file is written and fsynced under a temporary name; then the current ``path``
    becomes the previous checkpoint; then the new file takes ``path``. A crash between the two
    renames leaves only the previous checkpoint, which :func:`load_latest` then uses.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    previous = path.with_name(PREVIOUS_CHECKPOINT_NAME)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.next")
    atomic_write(tmp, lambda f: torch.save(_with_digest(obj), f))  # complete and fsynced before anything moves
    try:
        if path.exists():
            os.replace(path, previous)
        os.replace(tmp, path)
    except BaseException:
        if tmp.exists():
            tmp.unlink()
        raise
    fsync_dir(path.parent)


def has_checkpoint(run_dir: str | Path) -> bool:
    """Whether ``run_dir`` holds a checkpoint (newest, previous, or one whose rotation a kill
    interrupted), readable or not."""
    run_dir = Path(run_dir)
    return ((run_dir / CHECKPOINT_NAME).exists() or (run_dir / PREVIOUS_CHECKPOINT_NAME).exists()
            or bool(interrupted_rotations(run_dir)))


def interrupted_rotations(run_dir: str | Path) -> list[Path]:
    """The complete new checkpoints that :func:`save_rotating` wrote but a kill kept from their
    place (``.checkpoint.pt.<pid>.next``), newest first."""
    dated = []
    for path in Path(run_dir).glob(f".{CHECKPOINT_NAME}.*.next"):
        try:
            dated.append((path.stat().st_mtime_ns, path))
        except FileNotFoundError:  # a live run just moved it into place
            continue
    return [path for _, path in sorted(dated, reverse=True)]


def settle_checkpoints(run_dir: str | Path, loaded: str | Path) -> None:
    """Put a run folder's checkpoint files in order after a resume read ``loaded``:

    * ``loaded`` is an interrupted rotation's new file: the rotation is finished (the newest file, if
      any, becomes the previous one, and ``loaded`` the newest);
    * ``loaded`` is the previous checkpoint because the newest could not be read: the newest is
      moved to :data:`UNREADABLE_CHECKPOINT_NAME`, so that the next checkpoint keeps the previous one
      instead of putting the unreadable file in its place;
    * other interrupted rotations' files are deleted (older, or unreadable)."""
    try:
        _settle(Path(run_dir), Path(loaded))
    except OSError as err:  # tidying only: the run goes on, and its next checkpoint rotates as usual
        logger.warning("Could not put the checkpoint files of %s in order (%s: %s).", run_dir, type(err).__name__, err)


def _settle(run_dir: Path, loaded: Path) -> None:
    newest, previous = run_dir / CHECKPOINT_NAME, run_dir / PREVIOUS_CHECKPOINT_NAME
    if loaded.name.endswith(".next"):
        if newest.exists():
            os.replace(newest, previous)
        os.replace(loaded, newest)
        logger.warning("Finished the checkpoint rotation that a stop interrupted: %s is the newest checkpoint "
                       "again.", newest)
    elif loaded.name == PREVIOUS_CHECKPOINT_NAME and newest.exists():
        os.replace(newest, run_dir / UNREADABLE_CHECKPOINT_NAME)
        logger.warning("Moved the unreadable newest checkpoint to %s (kept for inspection), so that the next "
                       "checkpoint keeps %s.", run_dir / UNREADABLE_CHECKPOINT_NAME, previous)
    for leftover in interrupted_rotations(run_dir):
        leftover.unlink(missing_ok=True)
    fsync_dir(run_dir)


def capture_rng_state(generators: dict[str, torch.Generator]) -> dict[str, Any]:
    """States of Python's, NumPy's and torch's global RNGs and of the named torch generators."""
    py = random.getstate()
    np_state = np.random.get_state()
    state: dict[str, Any] = {
        "python": [py[0], list(py[1]), py[2]],
        "numpy": [np_state[0], np_state[1].tolist(), int(np_state[2]), int(np_state[3]), float(np_state[4])],
        "torch": torch.get_rng_state(),
        "generators": {name: g.get_state() for name, g in generators.items()},
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict[str, Any], generators: dict[str, torch.Generator]) -> None:
    """Restore what :func:`capture_rng_state` captured: Python's, NumPy's and torch's RNGs and
    the given named generators."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    for name, g in generators.items():
        g.set_state(state["generators"][name])


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Read one checkpoint file written by the trainer (safely: ``weights_only=True``).

    Raises :class:`CheckpointNotFoundError` when it does not exist and :class:`CheckpointError`
    when it cannot be read (truncated, corrupt, or not a disentangle checkpoint).
    """
    check_map_location(map_location)
    path = Path(path)
    if not path.is_file():
        raise CheckpointNotFoundError(f"No checkpoint file at '{path}'.")
    if path.suffix in TEXT_SUFFIXES and _is_text(path):  # a run's other files; a text checkpoint.pt is corrupt data
        raise InputError(
            f"'{path}' is a text file, not a checkpoint (a run's config.yaml or log.jsonl?). Pass the run folder, "
            f"'{path.parent}', whose checkpoint.pt is read, or the checkpoint.pt itself."
        )
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # truncated or foreign file
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CheckpointError(
            f"Checkpoint '{path}' cannot be read ({type(err).__name__}: {reason}); the file is "
            f"truncated or corrupt."
        ) from None
    if not isinstance(ckpt, dict) or "model" not in ckpt or "config" not in ckpt:
        raise CheckpointError(f"'{path}' is not a disentangle checkpoint (it has no 'model' and 'config' entries).")
    digest = ckpt.pop(DIGEST_KEY, None)  # checkpoints written before digests have none
    if digest is not None and digest != content_digest(ckpt):
        raise CheckpointError(
            f"Checkpoint '{path}' is corrupt: its content does not match the sha256 digest written with "
            f"it (a changed byte on disk or in transit)."
        )
    return ckpt


#: the suffixes of a run folder's text files, given by mistake where a checkpoint goes
TEXT_SUFFIXES = (".yaml", ".yml", ".json", ".jsonl", ".csv", ".txt", ".md", ".log")


def _is_text(path: Path) -> bool:
    """Whether ``path`` starts as text (UTF-8, no NUL byte): a config or a log given for a checkpoint,
    which is a zip archive (a truncated one still starts with its binary header)."""
    try:
        with open(path, "rb") as f:
            head = f.read(512)
    except OSError:
        return False
    if not head or b"\0" in head:
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as err:  # a multi-byte character cut at the end of the 512 bytes is text
        return err.start >= len(head) - 3
    return True


def check_map_location(map_location: Any) -> None:
    """Raise :class:`~disentangle.ConfigError` before any file is read when ``map_location`` is not
    a device of this machine (``"gpu"``, or ``"cuda"`` without CUDA): reading a good checkpoint onto
    it would fail, and the failure must not read as a corrupt file."""
    if callable(map_location) or isinstance(map_location, dict) or map_location is None:
        return  # torch.load's other forms
    check_device(map_location, name="map_location")


def _step_of(path: Path, map_location: Any) -> int | None:
    try:
        return int(load_checkpoint(path, map_location=map_location)["step"])
    except CheckpointError:
        return None


def _newer_interrupted_rotation(run_dir: Path, map_location: Any) -> tuple[dict[str, Any], Path] | None:
    """The newest readable interrupted rotation's checkpoint and file, when it is past the step of
    every other checkpoint of the folder (a leftover from an older session is not)."""
    others: list[int | None] | None = None  # the other checkpoints' steps, read once and only if needed
    for path in interrupted_rotations(run_dir):
        try:
            ckpt = load_checkpoint(path, map_location=map_location)
        except CheckpointError:  # torn or moved away meanwhile: no news
            continue
        if others is None:
            others = [_step_of(run_dir / name, map_location) for name in (CHECKPOINT_NAME, PREVIOUS_CHECKPOINT_NAME)
                      if (run_dir / name).exists()]
        if all(step is None or int(ckpt["step"]) > step for step in others):
            return ckpt, path
    return None


def load_latest(
    run_dir: str | Path,
    map_location: str | torch.device = "cpu",
    *,
    fallback_consequence: str = "the steps after it will be trained again",
) -> tuple[dict[str, Any], Path]:
    """The newest readable checkpoint of a run folder and the file it came from.

    Tries an interrupted rotation's new file (:func:`interrupted_rotations`; only one past the steps of
    the others: a leftover of an older session is not), ``checkpoint.pt``, then ``checkpoint.prev.pt``;
    using the previous one emits a
    ``UserWarning`` that says why, which step it holds and ``fallback_consequence`` (what that
    means for the caller: a resumed run trains those steps again, a loaded model is older). When neither is readable,
    raises :class:`CheckpointError` (or :class:`CheckpointNotFoundError` when neither exists) with
    one paragraph naming each file and its problem.
    """
    check_map_location(map_location)
    run_dir = Path(run_dir)
    problems: list[str] = []
    candidates = [run_dir / CHECKPOINT_NAME, run_dir / PREVIOUS_CHECKPOINT_NAME]
    newest = _newer_interrupted_rotation(run_dir, map_location)
    if newest is not None:
        return newest
    for path in candidates:
        try:
            ckpt = load_checkpoint(path, map_location=map_location)
        except CheckpointError as err:
            problems.append(str(err))
            continue
        if path.name == PREVIOUS_CHECKPOINT_NAME:
            warnings.warn(
                f"{problems[0]} Falling back to the previous checkpoint '{path}' (step {int(ckpt['step'])}); "
                f"{fallback_consequence}.",
                UserWarning,
                stacklevel=2,
            )
        return ckpt, path
    if not any(p.exists() for p in candidates):
        raise CheckpointNotFoundError(
            f"No checkpoint in '{run_dir}' (neither {CHECKPOINT_NAME} nor {PREVIOUS_CHECKPOINT_NAME} exists). "
            f"Is it a run folder (train.out_dir)? A run writes its first checkpoint after "
            f"train.checkpoint_every steps."
        )
    raise CheckpointError(
        f"No readable checkpoint in '{run_dir}': {' '.join(problems)} Nothing can be resumed or loaded "
        f"from this folder; start the run again in a new folder (train.out_dir=PATH)."
    )
