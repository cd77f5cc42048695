"""Training worker, pythae: a ``BetaVAE`` with custom ``BaseEncoder``/``BaseDecoder`` networks, trained
by ``TrainingPipeline`` (pythae's documented entry, which runs its ``BaseTrainer``).

* Data: the exported sprites (uint8 0/1) as an ``(N, 1, 64, 64)`` numpy array passed to the
  pipeline, which converts it to a float tensor in a ``BaseDataset`` (its ``DataProcessor``) read by
  the trainer's shuffling ``DataLoader`` (``train_dataloader_num_workers=0``, its default).
* Model: ``BetaVAEConfig(input_dim=(1, 64, 64), latent_dim=10, beta=4, reconstruction_loss="bce")``;
  the networks have the layers of our conv64 (disentanglement_lib's: conv 4x4/2 pad 1 ×2, then
  2x2/2 ×2, dense 256, dense mean and log-variance heads; dense 256, dense 1024, four 4x4/2
  transposed convolutions). pythae's "bce" loss is ``F.binary_cross_entropy`` on probabilities, so
  the decoder ends with a sigmoid (no parameters), as pythae's own benchmark networks do.
* Trainer: ``BaseTrainerConfig(per_device_train_batch_size=64, learning_rate=1e-4)`` with its
  default Adam, no checkpoint (``steps_saving=None``), ``output_dir`` a temporary folder, and as many
  epochs as ``steps`` needs. pythae counts epochs, not steps: the clock callback stops the run after
  ``steps`` steps by raising an exception (after the last timed step, so pythae's end-of-training
  model saving, never timed, is skipped).
* Clock: a ``TrainingCallback`` whose ``on_train_step_end`` records the time (called by
  ``BaseTrainer.train_step`` after each optimiser step and ``loss.item()``).
"""
from __future__ import annotations

import math
import tempfile

import _common


class StepsDone(Exception):
    """Raised by the clock after the requested number of steps."""


def build_model(latent_dim: int = 10):
    from pythae.models import BetaVAE, BetaVAEConfig
    from pythae.models.base.base_utils import ModelOutput
    from pythae.models.nn import BaseDecoder, BaseEncoder
    from torch import nn

    class Encoder(BaseEncoder):
        def __init__(self):
            BaseEncoder.__init__(self)
            self.convs = nn.Sequential(
                nn.Conv2d(1, 32, kernel_size=4, stride=2, padding=1), nn.ReLU(inplace=True),
                nn.Conv2d(32, 32, kernel_size=4, stride=2, padding=1), nn.ReLU(inplace=True),
                nn.Conv2d(32, 64, kernel_size=2, stride=2), nn.ReLU(inplace=True),
                nn.Conv2d(64, 64, kernel_size=2, stride=2), nn.ReLU(inplace=True),
                nn.Flatten(),
                nn.Linear(1024, 256), nn.ReLU(inplace=True),
            )
            self.mean = nn.Linear(256, latent_dim)
            self.logvar = nn.Linear(256, latent_dim)

        def forward(self, x):
            h = self.convs(x)
            return ModelOutput(embedding=self.mean(h), log_covariance=self.logvar(h))

    class Decoder(BaseDecoder):
        def __init__(self):
            BaseDecoder.__init__(self)
            self.net = nn.Sequential(
                nn.Linear(latent_dim, 256), nn.ReLU(inplace=True),
                nn.Linear(256, 1024), nn.ReLU(inplace=True),
                nn.Unflatten(1, (64, 4, 4)),
                nn.ConvTranspose2d(64, 64, kernel_size=4, stride=2, padding=1), nn.ReLU(inplace=True),
                nn.ConvTranspose2d(64, 32, kernel_size=4, stride=2, padding=1), nn.ReLU(inplace=True),
                nn.ConvTranspose2d(32, 32, kernel_size=4, stride=2, padding=1), nn.ReLU(inplace=True),
                nn.ConvTranspose2d(32, 1, kernel_size=4, stride=2, padding=1),
                nn.Sigmoid(),
            )

        def forward(self, z):
            return ModelOutput(reconstruction=self.net(z))

    config = BetaVAEConfig(input_dim=(1, 64, 64), latent_dim=latent_dim, beta=4.0, reconstruction_loss="bce")
    encoder, decoder = Encoder(), Decoder()
    model = BetaVAE(model_config=config, encoder=encoder, decoder=decoder)
    params = {"encoder": _common.parameter_count(encoder), "decoder": _common.parameter_count(decoder),
              "trained_model": _common.parameter_count(model)}
    return model, params


def main() -> None:
    p = _common.parser(__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--images", required=True, help="images.npy exported by the driver")
    args = p.parse_args()
    _common.set_threads(args.threads)

    from pythae.pipelines import TrainingPipeline
    from pythae.trainers import BaseTrainerConfig
    from pythae.trainers.training_callbacks import TrainingCallback

    clock = _common.StepClock()

    class Clock(TrainingCallback):
        def on_train_step_end(self, training_config, **kwargs):
            clock.tick()
            if len(clock) >= args.steps:
                raise StepsDone

    images = _common.load_images(args.images)[:, None]  # (N, 1, 64, 64) uint8 0/1
    model, params = build_model()
    with tempfile.TemporaryDirectory(prefix="peers-pythae-") as tmp:
        config = BaseTrainerConfig(
            output_dir=tmp, per_device_train_batch_size=64, learning_rate=1e-4,
            num_epochs=math.ceil(args.steps / math.ceil(len(images) / 64)),
        )
        try:
            TrainingPipeline(model=model, training_config=config)(train_data=images, callbacks=[Clock()])
        except StepsDone:
            pass
    _common.write_result(args.result, {
        **clock.result(args.launched),
        "params": params,
        "versions": _common.versions("pythae", "torch"),
        "setup": f"BaseTrainerConfig(per_device_train_batch_size=64, learning_rate=1e-4, num_epochs={config.num_epochs})",
    })


if __name__ == "__main__":
    main()
