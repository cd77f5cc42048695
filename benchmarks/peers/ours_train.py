"""Training worker, ours: ``python -m disentangle.train --config sprites/beta_vae`` in-process
(``--config-mode defaults``: the same model and objective, every other key at its default).

The run is the command line's (the shipped config, the procedural sprites rendered per batch below
2,000 steps, the execution choices made for this CPU such as channels-last, logging, checkpoints,
the final evaluation and pictures at their default cadence) with only
``train.steps``, ``train.out_dir`` (a temporary folder), ``train.progress=false``,
``train.lr=1e-4`` and ``objective.beta=4`` set. The only difference from the command line is that
the :class:`~disentangle.training.Trainer` is a subclass whose ``train_step`` records the time at
which each step returns (a public method of the trainer; the clock adds one ``perf_counter`` call
per step). The interval between two such times covers everything the loop does for a step.
"""
from __future__ import annotations

import tempfile

import _common

CONFIG = "sprites/beta_vae"


def main() -> None:
    p = _common.parser(__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--config-mode", choices=("recipe", "defaults"), default="recipe",
                   help="recipe: the shipped sprites/beta_vae (fp32, as written); defaults: the same model and "
                        "objective with every other key at its default (train.precision auto, ...)")
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
            return terms

    with tempfile.TemporaryDirectory(prefix="peers-ours-") as tmp:
        overrides = [
            f"train.steps={args.steps}", f"train.out_dir={tmp}/run", "train.progress=false",
            "train.lr=1e-4", "objective.beta=4",
        ]
        if args.config_mode == "recipe":
            config = load_config(CONFIG, overrides)
        else:  # what a user's config naming only the model, the objective and the batch gets
            config = load_config(None, [
                "data.name=sprites", "model.backbone=conv64", "model.latent_dim=10", "objective.name=beta_vae",
                "objective.reconstruction=bernoulli", "train.batch_size=64", *overrides,
            ])
        trainer = TimedTrainer(config)
        trainer.fit()
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
                 + " ".join(overrides[:1] + overrides[2:]) + f"; precision {config.train.precision}"
                 + (f"; {execution.describe()}" if execution is not None else ""),
    })


if __name__ == "__main__":
    main()
