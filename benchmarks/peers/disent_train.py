"""Training worker, disent: a ``BetaVae`` framework trained by a Lightning ``Trainer``, as disent's
README example does.

* Data: the exported sprites (uint8 0/1) times 255, as disent's own ``DSpritesData`` stores dSprites,
  as ``(N, 64, 64, 1)`` in an ``ArrayDataset`` wrapped by ``DisentDataset(transform=ToImgTensorF32())``
  (torchvision's ``to_tensor``: float in [0, 1], channels first), read by a shuffling
  ``DataLoader(batch_size=64, num_workers=0)`` (the README's loader; workers would add processes
  beyond the thread budget).
* Model: disent's ``DecoderConv64`` and an encoder written as a ``DisentEncoder`` with the layers of
  disentanglement_lib's conv encoder as ours has them (``_disent_encoder.py``: conv 4x4/2 pad 1 ×2,
  then 2x2/2 ×2, dense 256, one dense layer of 2×10 for means and log-variances, as disent's
  encoders output them). disent's
  own ``EncoderConv64`` uses 4x4 kernels with padding 2 in all four convolutions (a 1,600-wide dense
  input): 530,388 parameters against 309,204, so it is not the same model; its count is reported.
* Objective: ``BetaVae.cfg(beta=4, recon_loss="bce", loss_reduction="mean_sum", optimizer="adam",
  optimizer_kwargs={"lr": 1e-4})``: per-image sums averaged over the batch, the loss of
  disentanglement_lib and ours (disent's default reduction "mean" would need its beta rescaled).
* Trainer, variant ``off``: ``logger=False, enable_checkpointing=False, enable_progress_bar=False,
  enable_model_summary=False``; variant ``defaults``: Lightning's defaults (its logger, a
  ``ModelCheckpoint`` at each epoch end, the progress bar, the model summary), files in a temporary
  folder. Both ``max_steps=steps`` on the CPU.
* Clock: a Lightning ``Callback`` whose ``on_train_batch_end`` records the time.
"""
from __future__ import annotations

import tempfile

import _common
import _disent_setup


def build_framework(z_size: int = 10):
    from _disent_encoder import EncoderConv64Ours
    from disent.frameworks.vae import BetaVae
    from disent.model import AutoEncoder
    from disent.model.ae import DecoderConv64, EncoderConv64

    x_shape = (1, 64, 64)
    encoder = EncoderConv64Ours(x_shape=x_shape, z_size=z_size, z_multiplier=2)
    decoder = DecoderConv64(x_shape=x_shape, z_size=z_size)
    stock_encoder = EncoderConv64(x_shape=x_shape, z_size=z_size, z_multiplier=2)
    framework = BetaVae(
        model=AutoEncoder(encoder=encoder, decoder=decoder),
        cfg=BetaVae.cfg(
            optimizer="adam", optimizer_kwargs={"lr": 1e-4},
            recon_loss="bce", loss_reduction="mean_sum", beta=4.0,
        ),
    )
    params = {
        "encoder": _common.parameter_count(encoder), "decoder": _common.parameter_count(decoder),
        "trained_model": _common.parameter_count(framework),
        "stock_EncoderConv64": _common.parameter_count(stock_encoder),
    }
    return framework, params


def make_loader(images_path: str):
    from disent.dataset import DisentDataset
    from disent.dataset.data import ArrayDataset
    from disent.dataset.transform import ToImgTensorF32
    from torch.utils.data import DataLoader

    images = _common.load_images(images_path)  # uint8 0/1 (N, 64, 64)
    images *= 255  # disent's DSpritesData stores dSprites as 0/255 (its hdf5_mutator)
    dataset = DisentDataset(ArrayDataset(images[..., None]), transform=ToImgTensorF32())
    return DataLoader(dataset, batch_size=64, shuffle=True, num_workers=0)


def trainer_options(variant: str, steps: int, root: str) -> dict:
    options = {"max_steps": steps, "accelerator": "cpu", "devices": 1, "default_root_dir": root}
    if variant == "off":
        options.update(logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    return options


def main() -> None:
    p = _common.parser(__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--images", required=True, help="images.npy exported by the driver")
    p.add_argument("--variant", choices=("off", "defaults"), required=True)
    args = p.parse_args()
    _common.set_threads(args.threads)
    shimmed = _disent_setup.import_torchvision()

    import lightning as L
    import torch

    torch.manual_seed(0)
    clock = _common.StepClock()

    class Clock(L.Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            clock.tick()

    framework, params = build_framework()
    loader = make_loader(args.images)
    with tempfile.TemporaryDirectory(prefix="peers-disent-") as tmp:
        trainer = L.Trainer(callbacks=[Clock()], **trainer_options(args.variant, args.steps, tmp))
        trainer.fit(framework, loader)
        options = trainer_options(args.variant, args.steps, "TMP")
        logger = type(trainer.logger).__name__ if trainer.logger else "none"
        checkpoint = type(trainer.checkpoint_callback).__name__ if trainer.checkpoint_callback else "none"
    _common.write_result(args.result, {
        **clock.result(args.launched),
        "params": params,
        "versions": _common.versions("disent", "torch", "torchvision", "lightning"),
        "torchvision_ops_workaround": shimmed,
        "setup": "L.Trainer(" + ", ".join(f"{k}={v!r}" for k, v in options.items()) + ")"
                 + f" (logger: {logger}, checkpointing: {checkpoint})",
    })


if __name__ == "__main__":
    main()
