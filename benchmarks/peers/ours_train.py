"""Training worker, ours: ``python -m disentangle.train --config sprites/beta_vae`` in-process
(``--config-mode defaults``: the same model and objective, every other key at its default).

The run is the command line's (the shipped config, the execution choices made for this CPU such as
channels-last, the procedural sprites materialised or rendered per batch, logging and checkpoints
at their default cadence) with only ``train.out_dir`` (a temporary folder),
``train.progress=false``, ``train.lr=1e-4`` and ``objective.beta=4`` set, and its length:

* ``--length full`` (default): the config's own ``train.steps`` (the recipe's 20,000 steps or the
  default 300,000), stopped after ``--steps`` steps by a Ctrl-C (SIGINT, raised in the process),
  which the trainer honours at the end of the step by checkpointing it, as for a user. Every
  start-up choice is the one a real run of that length makes (a grid materialised at start-up).
  (pythae, too, is stopped after the timed steps, inside its first epoch; disent runs
  ``max_steps=--steps``.)
* ``--length steps``: ``train.steps=--steps``, a run that short (its start-up choices follow: below
  2,000 steps the sprites are rendered per batch), ending with its final pictures.

The only difference from the command line is that the :class:`~disentangle.training.Trainer` is a
subclass whose ``train_step`` records the time at which each step returns (a public method of the
trainer; the clock adds one ``perf_counter`` call per step). The interval between two such times
covers everything the loop does for a step.
"""
from __future__ import annotations

import signal
import tempfile

import _common

CONFIG = "sprites/beta_vae"


def main() -> None:
    p = _common.parser(__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--config-mode", choices=("recipe", "defaults"), default="recipe",
                   help="recipe: the shipped sprites/beta_vae (fp32, as written); defaults: the same model and "
                        "objective with every other key at its default (train.precision auto, ...)")
    p.add_argument("--length", choices=("full", "steps"), default="full",
                   help="full: a run of the config's own length, stopped by Ctrl-C after --steps steps; "
                        "steps: a run of exactly --steps steps")
    args = p.parse_args()
    _common.set_threads(args.threads)

    from disentangle.backbones import BACKBONES
    from disentangle.config import load_config
    from disentangle.training import Trainer

    clock = _common.StepClock()

    class TimedTrainer(Trainer):
        def train_step(self):
            terms = super().train_step()
            clock.tick()
            if args.length == "full" and len(clock) == args.steps:
                signal.raise_signal(signal.SIGINT)  # the trainer stops after this step, as on Ctrl-C
            return terms

    with tempfile.TemporaryDirectory(prefix="peers-ours-") as tmp:
        overrides = [
            *([f"train.steps={args.steps}"] if args.length == "steps" else []),
            f"train.out_dir={tmp}/run", "train.progress=false", "train.lr=1e-4", "objective.beta=4",
        ]
        if args.config_mode == "recipe":
            config = load_config(CONFIG, overrides)
        else:  # what a user's config naming only the model, the objective and the batch gets
            config = load_config(None, [
                "data.name=sprites", "model.backbone=conv64", "model.latent_dim=10", "objective.name=beta_vae",
                "objective.reconstruction=bernoulli", "train.batch_size=64", *overrides,
            ])
        trainer = TimedTrainer(config)
        try:
            trainer.fit()
        except KeyboardInterrupt:
            if args.length != "full" or len(clock) != args.steps:
                raise
        model_params = _common.parameter_count(trainer.model)
        execution = getattr(trainer, "execution", None)  # the auto choices (channels-last, ...), where recorded
    encoder, decoder = BACKBONES.build("conv64", image_shape=(1, 64, 64), latent_dim=10)
    _common.write_result(args.result, {
        **clock.result(args.launched),
        "params": {"encoder": _common.parameter_count(encoder), "decoder": _common.parameter_count(decoder),
                   "trained_model": model_params},
        "versions": _common.versions("disentangle-torch", "torch"),
        "setup": (f"python -m disentangle.train --config {CONFIG} " if args.config_mode == "recipe"
                  else "python -m disentangle.train (defaults: sprites, conv64, beta_vae, batch 64) ")
                 + " ".join(o for o in overrides if not o.startswith("train.out_dir="))
                 + (f"; a run of {config.train.steps:,} steps stopped by Ctrl-C after {args.steps:,}"
                    if args.length == "full" else "")
                 + f"; precision {config.train.precision}"
                 + (f"; {execution.describe()}" if execution is not None else ""),
    })


if __name__ == "__main__":
    main()
