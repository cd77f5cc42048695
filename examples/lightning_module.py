"""The library's objectives inside PyTorch Lightning (docs/guides/own-loop.md).

Needs ``pip install lightning``; runs offline on a CPU::

    python examples/lightning_module.py                       # the quickstart's β-VAE, 300 steps
    python examples/lightning_module.py --config sprites/factor_vae --steps 100

Our objectives step their own optimizers inside ``train_step`` (FactorVAE two per step, the AAE
three), so the module uses Lightning's manual optimization. The parts are built by
:func:`own_loop.build` (``examples/own_loop.py``, imported from this folder); with the same config
the losses are those of ``disentangle.training.fit`` to float rounding
(tests/examples/test_own_loop.py checks it).
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import lightning as L
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # own_loop.py, this file's sibling

from own_loop import Parts, build, speed_up  # noqa: E402

from disentangle.config import Config, load_config  # noqa: E402
from disentangle.training import random_source  # noqa: E402


class SampledBatches(torch.utils.data.IterableDataset):
    """An endless stream of the objective's training batches (``objective.sample_batch``: images,
    or pairs for the weakly supervised objectives), drawn from the run's data generator. Iterate it
    in the training process (``num_workers=0``): the batches are drawn on the training device from
    one generator, which worker processes would each copy."""

    def __init__(self, parts: Parts, batch_size: int) -> None:
        self.parts, self.batch_size = parts, batch_size

    def __iter__(self) -> Iterator[Any]:
        while True:
            yield self.parts.objective.sample_batch(self.parts.dataset, self.batch_size, self.parts.data_generator)


class ObjectiveModule(L.LightningModule):
    """A VAE and its objective as a LightningModule, trained with manual optimization."""

    def __init__(self, config: Config, device: str = "cpu") -> None:
        super().__init__()
        self.automatic_optimization = False  # the objective steps its own optimizers
        self.config = config
        self.parts = build(config, device)
        self.model = self.parts.model  # registered as submodules: Lightning moves and saves them
        self.objective = self.parts.objective
        self.step_index = 0  # our training step (Lightning's global_step counts optimizer steps)
        self.losses: list[float] = []

    def configure_optimizers(self) -> tuple[list[torch.optim.Optimizer], list[Any]]:
        return list(self.parts.optimizers.values()), list(self.parts.schedulers.values())

    def train_dataloader(self) -> torch.utils.data.DataLoader:
        return torch.utils.data.DataLoader(SampledBatches(self.parts, self.config.train.batch_size), batch_size=None)

    def training_step(self, batch: Any, batch_idx: int) -> None:
        # Lightning's wrappers of our optimizers, by our names ("model", "discriminator", ...)
        optimizers = dict(zip(self.parts.optimizers, _as_list(self.optimizers())))
        with random_source(self.parts.noise_generator):
            terms = self.objective.train_step(
                self.model, batch, step=self.step_index, optimizers=optimizers, precision=self.parts.precision
            )
        self.parts.precision.update()
        for scheduler in _as_list(self.lr_schedulers()):
            scheduler.step()
        self.step_index += 1
        self.losses.append(float(terms["loss"].detach()))
        self.log_dict({k: v.detach() for k, v in terms.items() if v.dim() == 0}, prog_bar=False)


def _as_list(value: Any) -> list[Any]:
    """Lightning gives one optimizer (or schedule) bare and several as a list."""
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def train(config: Config, steps: int | None = None, **trainer_options: Any) -> tuple[ObjectiveModule, list[float]]:
    """Train ``config`` for ``steps`` training steps (default ``train.steps``) with a
    ``lightning.Trainer`` on the CPU; returns the module and every step's loss."""
    steps = config.train.steps if steps is None else steps
    module = ObjectiveModule(config)
    speed_up(module.parts, config, steps)  # optional: the trainer's execution choices (own_loop.py)
    trainer = L.Trainer(
        # Under manual optimization Lightning counts trainer.global_step (and max_steps) in optimizer
        # steps: FactorVAE takes two per training step, the AAE three. One epoch of `steps` batches
        # is `steps` training steps whatever the objective.
        max_epochs=1, limit_train_batches=steps,
        accelerator="cpu", devices=1, logger=False, enable_checkpointing=False, enable_progress_bar=False,
        enable_model_summary=False, **trainer_options,
    )
    trainer.fit(module)
    module.model.eval()
    return module, module.losses


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="quickstart", help="a config file or a shipped config's name")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("overrides", nargs="*", help="key=value overrides, e.g. objective.beta=8")
    args = parser.parse_args(argv)
    config = load_config(args.config, [f"train.steps={args.steps}", "train.device=cpu", *args.overrides])
    module, losses = train(config)
    every = max(len(losses) // 10, 1)
    for step in range(every, len(losses) + 1, every):
        print(f"step {step:5d}  loss {losses[step - 1]:.4g}")


if __name__ == "__main__":
    main()
