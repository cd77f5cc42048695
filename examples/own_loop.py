"""Your own training loop: the library's objectives in a plain PyTorch loop (docs/guides/own-loop.md).

Runs offline on a CPU (a minute or two)::

    python examples/own_loop.py                                         # the quickstart's β-VAE, 300 steps
    python examples/own_loop.py --config sprites/factor_vae --steps 100   # two optimizers

It uses the library's own pieces without its Trainer: the dataset, the model, the objective
(with its own optimizers, if it has any: FactorVAE's discriminator, the AAE's, InfoGAN's), the
precision object and the two random generators. For the same config, this loop trains on a CPU bit
for bit what ``disentangle.training.fit(config)`` trains (tests/examples/test_own_loop.py checks
it); it writes no run folder, checkpoint or log: that part is yours.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

import torch

from disentangle.backbones.init import initialize
from disentangle.config import Config, load_config
from disentangle.data import build_dataset
from disentangle.data.labels import LabelsSpec, make_labelled_set
from disentangle.models import VAE
from disentangle.objectives import OBJECTIVES, Objective
from disentangle.training import batch_to_device, random_source
from disentangle.training.conv_transpose import use_convolution_kernels
from disentangle.training.optim import build_schedulers, optimizer_factory
from disentangle.training.precision import Precision
from disentangle.training.runtime import (
    Stream,
    choose_execution,
    compile_networks,
    configure_cuda_backends,
    resolve_device,
    seed_everything,
    stream_seed,
    to_channels_last,
)


@dataclass
class Parts:
    """Everything one training step touches."""

    dataset: Any
    model: VAE
    objective: Objective
    optimizers: dict[str, torch.optim.Optimizer]  # "model", plus the objective's own
    schedulers: dict[str, torch.optim.lr_scheduler.LRScheduler]  # train.lr_schedule, one per optimizer
    precision: Precision  # autocast (bf16/fp16) and the fp16 loss scale, shared by every optimizer
    data_generator: torch.Generator  # which images a batch holds
    noise_generator: torch.Generator  # the objectives' draws: reparameterisation noise, prior samples, permutations
    device: torch.device


def build(config: Config, device: str | torch.device | None = None) -> Parts:
    """The dataset, model, objective, optimizers, precision and generators of ``config``, built in
    the trainer's order (so that the same seed gives the same initial weights)."""
    device = resolve_device(config.train.device) if device is None else torch.device(device)
    if getattr(config.train, "schedules", None):
        raise ValueError(
            "this loop does not apply train.schedules; set the setting yourself before each step "
            "(e.g. objective.beta = ...) or train with disentangle.training.fit."
        )

    # 1. The data. Its batches are drawn by index on the training device.
    seed_everything(config.seed)
    dataset = build_dataset(config.data, device=device)

    # 2. The model; the seed is set again so that the weights do not depend on the dataset's draws.
    seed_everything(config.seed)
    model = VAE.from_backbone(
        config.model.backbone, image_shape=dataset.image_shape, latent_dim=config.model.latent_dim,
        init=config.model.init, **config.model.params,
    ).to(device)

    # 3. The objective. setup() gets the dataset size and builds its own networks (discriminators),
    #    which are initialised by the model's scheme.
    objective = OBJECTIVES.build(config.objective.name, **config.objective.params).to(device)
    objective.setup(model=model, dataset_size=len(dataset))
    initialize(objective, config.model.init)
    if hasattr(objective, "check_dataset"):  # pairs, groups and classes: checked against the data (LORD
        objective.check_dataset(dataset)     # builds its per-class codes here, before the optimizers)
    if getattr(objective, "uses_labels", False):  # semi-supervised objectives: the few labels of data.labels
        objective.attach_labels(make_labelled_set(dataset, LabelsSpec.from_dict(config.data.labels)))

    # 4. The optimizers: "model" on the parameters the objective names (all of the VAE's, the
    #    generator's for the GANs), and the objective's own, built by the same factory.
    make_optimizer = optimizer_factory(config.train, device)  # train.optimizer, lr, betas, ...; fused where it can
    optimizers = {"model": make_optimizer(objective.model_parameters(model))}
    optimizers.update(objective.extra_optimizers(model, make_optimizer))
    schedulers = build_schedulers(optimizers, config.train)  # constant by default
    precision = Precision(config.train.precision, device)

    # 5. Two generators, seeded from config.seed, one per random stream.
    # the data's on the dataset's device: the host for a streamed one (data.placement: stream)
    data_generator = torch.Generator(device=getattr(dataset, "device", device))
    data_generator.manual_seed(stream_seed(config.seed, Stream.DATA))
    noise_generator = torch.Generator(device=device)
    noise_generator.manual_seed(stream_seed(config.seed, Stream.NOISE))
    if device.type == "cuda":
        configure_cuda_backends(config.train)  # train.tf32, train.cudnn_benchmark
    return Parts(dataset, model, objective, optimizers, schedulers, precision, data_generator, noise_generator, device)


def speed_up(parts: Parts, config: Config, steps: int) -> None:
    """Optional: the trainer's execution choices for ``config`` (``train.threads``,
    ``channels_last``, ``conv_transpose_via_conv``, ``data.materialize``, ``compile``). They change
    how fast a step runs, not what it computes beyond rounding; the trainer applies them, so a loop
    that is to match ``fit`` bit for bit applies them too."""
    dataset = parts.dataset
    execution = choose_execution(  # also sets torch's CPU threads (train.threads)
        config, parts.device, session_steps=steps, dataset_size=len(dataset),
        image_shape=tuple(dataset.image_shape), materializable=hasattr(dataset, "materialize"),
    )
    if execution.materialize:
        dataset.materialize()  # render the whole grid once instead of every batch
    if execution.channels_last:
        to_channels_last(parts.model, parts.objective)
    if execution.conv_transpose_via_conv:
        use_convolution_kernels(parts.model, parts.objective)
    compile_networks(parts.model, parts.objective, config.train.compile)


def train_step(parts: Parts, step: int, batch_size: int) -> dict[str, torch.Tensor]:
    """One training step: a batch, the objective's update(s), the end of the iteration."""
    with random_source(parts.noise_generator):  # the objective's draws come from the noise generator
        batch = parts.objective.sample_batch(parts.dataset, batch_size, parts.data_generator)
        batch = batch_to_device(batch, parts.device)  # a streamed dataset's batch comes from the host
        # the objective steps its optimizers itself: "model" once (β-VAE), or "model" then
        # "discriminator" (FactorVAE), ... always through precision.minimize / precision.step
        terms = parts.objective.train_step(
            parts.model, batch, step=step, optimizers=parts.optimizers, precision=parts.precision
        )
    parts.precision.update()  # fp16: adjust the loss scale once per iteration (a no-op otherwise)
    for scheduler in parts.schedulers.values():
        scheduler.step()
    return terms


def train(config: Config, steps: int | None = None, *, device: str | torch.device | None = None,
          print_every: int = 0) -> tuple[VAE, list[float]]:
    """Train ``config`` for ``steps`` steps (default ``train.steps``; the lr schedule is laid out
    over ``train.steps``) on ``device`` (default ``train.device``) in a loop of our own; returns the
    model, in eval mode, and every step's loss."""
    steps = config.train.steps if steps is None else steps
    parts = build(config, device)
    speed_up(parts, config, steps)
    parts.model.train()
    parts.objective.train()
    losses = []
    for step in range(steps):
        terms = train_step(parts, step, config.train.batch_size)
        losses.append(float(terms["loss"].detach()))  # a host sync per step: keep the tensor if speed matters
        if print_every and (step + 1) % print_every == 0:
            scalars = {k: float(v.detach()) for k, v in terms.items() if v.dim() == 0}
            print(f"step {step + 1:5d}  " + "  ".join(f"{k} {v:.4g}" for k, v in scalars.items()), flush=True)
    parts.model.eval()
    return parts.model, losses


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="quickstart", help="a config file or a shipped config's name")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("overrides", nargs="*", help="key=value overrides, e.g. objective.beta=8")
    args = parser.parse_args(argv)
    config = load_config(args.config, [f"train.steps={args.steps}", *args.overrides])
    model, losses = train(config, print_every=max(args.steps // 10, 1))
    print(f"loss: {losses[0]:.2f} at step 1, {losses[-1]:.2f} at step {len(losses)}")

    # The model is the library's VAE: every metric takes it (docs/guides/metrics.md).
    from disentangle.metrics import mig

    dataset = build_dataset(config.data)
    print("MIG:", {k: round(v, 3) for k, v in mig(dataset, model, num_train=2_000).items()})


if __name__ == "__main__":
    main()
