"""TensorBoard logging of a training run (the ``tensorboard`` extra).

:class:`TensorBoardLogger` writes an event file into the run folder with
:class:`torch.utils.tensorboard.SummaryWriter`. Tags:

* ``train/<term>``: every scalar term the objective logs (``loss``, ``recon``, ``kl``, …);
* ``<term>/z<j>``: one scalar per entry of a per-latent term (``kl_per_dim/z<j>``,
  ``q_mse_per_code/z<j>``), each term its own section;
* ``metrics/<metric>/<score>``: every score of a metric evaluation;
* images ``reconstructions`` and ``traversals``: made by
  :func:`~disentangle.visualize.reconstructions.reconstruction_grid` and
  :func:`~disentangle.visualize.traversals.traversal_grid`, the functions behind the PNG files.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from ..errors import InputError
from .latents import latent_scores
from .reconstructions import reconstruction_grid
from .traversals import traversal_grid

TENSORBOARD_INSTALL = 'pip install "disentangle-torch[tensorboard]"'


def _summary_writer_class() -> type:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as err:
        raise InputError(
            f"train.tensorboard needs the tensorboard package, which cannot be imported here ({err}). "
            f"Install it with  {TENSORBOARD_INSTALL}  (or pip install tensorboard), or set "
            f"train.tensorboard=false to keep only log.jsonl."
        ) from None
    return SummaryWriter


def _as_scalar(value: Any) -> float | None:
    if isinstance(value, torch.Tensor):
        return float(value.detach().float().cpu()) if value.numel() == 1 else None
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    return None


class TensorBoardLogger:
    """Scalars, metric scores and pictures of a run, written to a TensorBoard event file in ``run_dir``.

    >>> logger = TensorBoardLogger("runs/x")                      # doctest: +SKIP
    >>> logger.log_terms(100, {"loss": 310.2, "kl_per_dim": [2.1, 0.0]})
    >>> logger.log_images(100, model, dataset, generator)
    >>> logger.close()

    ``tensorboard --logdir runs/x`` shows them. The package is checked when the logger is made,
    before anything is written. On resume from a checkpoint at step ``T``, pass ``purge_step=T + 1``:
    events at steps ``> T`` that a crashed run wrote after that checkpoint are then hidden (step
    ``T`` itself was written before its checkpoint, and is not written again).
    """

    def __init__(
        self, run_dir: str | Path, *, purge_step: int | None = None, num_images: int = 8, kl_images: int = 256,
        flush_secs: int = 30,
    ) -> None:
        writer_class = _summary_writer_class()
        self.run_dir = Path(run_dir)
        self.num_images = int(num_images)
        self.kl_images = max(int(kl_images), self.num_images)
        # purge_step: a resumed run hides the events a crashed run wrote after its checkpoint,
        # as the trainer drops those log.jsonl records
        self.writer = writer_class(log_dir=str(self.run_dir), purge_step=purge_step, flush_secs=flush_secs)

    def log_terms(self, step: int, terms: Mapping[str, Any]) -> None:
        """Every scalar term as ``train/<name>``; a per-latent term (a list, or a tensor of more than
        one value: ``kl_per_dim``) as ``<name>/z<j>``, one per entry.

        Non-finite values are skipped, as the other loggers skip them (TensorBoard cannot draw them).
        """
        for name, value in terms.items():
            if isinstance(value, (list, tuple)) or (isinstance(value, torch.Tensor) and value.numel() > 1):
                entries = value.detach().float().cpu().reshape(-1).tolist() if isinstance(value, torch.Tensor) else value
                for j, entry in enumerate(entries):
                    scalar = _as_scalar(entry)
                    if scalar is not None and math.isfinite(scalar):
                        self.writer.add_scalar(f"{name}/z{j}", scalar, step)
                continue
            scalar = _as_scalar(value)
            if scalar is not None and math.isfinite(scalar):
                self.writer.add_scalar(f"train/{name}", scalar, step)

    def log_metrics(self, step: int, metrics: Mapping[str, Mapping[str, float]]) -> None:
        """Every score of ``{metric: {score: value}}`` as ``metrics/<metric>/<score>``."""
        for metric, scores in metrics.items():
            for score, value in scores.items():
                scalar = _as_scalar(value)
                if scalar is not None and math.isfinite(scalar):
                    self.writer.add_scalar(f"metrics/{metric}/{score}", scalar, step)

    @torch.no_grad()
    def log_images(self, step: int, model: Any, dataset: Any, generator: torch.Generator) -> None:
        """``reconstructions`` and ``traversals`` images of ``num_images`` images drawn with ``generator``.

        The latents are ordered by the KL of a batch of ``kl_images`` images (the first
        ``num_images`` are shown; traversals of the first image). Pass a generator seeded the same
        way at every call to see the same images improve over training; ``generator`` must live on
        the dataset's device and should not be the training batch generator, whose state this
        advances. The model is put in eval mode and its previous mode restored.
        """
        was_training = getattr(model, "training", False)
        model.eval()
        try:
            x = dataset.sample_batch(self.kl_images, generator)
            kl = latent_scores(model, x)  # a GAN's codes by their spread, a quantised model's by entropy
            images = x[: self.num_images]
            self.writer.add_image("reconstructions", reconstruction_grid(model, images), step, dataformats="HWC")
            self.writer.add_image("traversals", traversal_grid(model, images[:1], kl), step, dataformats="HWC")
        finally:
            if was_training:
                model.train()

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> None:
        """Flush and close the event file."""
        self.writer.close()

    def __enter__(self) -> TensorBoardLogger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
