"""Why an AnnealedVAE collapsed: the size of each loss term's gradient on the encoder.

    python benchmarks/annealed_vae_gradients.py RUN_DIR            # a run folder (checkpoint.pt)
    python benchmarks/annealed_vae_gradients.py zoo:annealed_vae-sprites-c_max25-cpu20k-ref-s0

The collapsed model this was written for, ``annealed_vae-sprites-c_max25-cpu20k-s0`` (PyTorch's
layer init), is retired from the zoo; its config stays, so ``python -m disentangle.train --config
zoo:annealed_vae-sprites-c_max25-cpu20k-s0`` retrains it into ``runs/`` for this script.

The AnnealedVAE loss is ``recon + γ·|KL − C|`` (Burgess et al. 2018). For each encoder parameter
this prints the root-mean-square gradient of the reconstruction term and of the capacity term
``γ·|KL − C|`` over a few batches, at the capacity ``C`` of the model's last training step. Adam
divides each parameter's update by the root of its running mean squared gradient (``v``): when the
capacity term's gradient is orders of magnitude larger, the reconstruction's share of every encoder
update is ``rms g_recon / sqrt(v)``, and the encoder can meet the KL target without carrying any
information about the image (constant posterior means, KL spent on offsets and variances). A run
folder's checkpoint also holds Adam's ``v``, which is printed; the zoo's weights do not.

It also prints the spread of the posterior means over the batch (0 on a latent: that latent says
nothing about the image) and the sign of ``KL − C`` on each batch.
"""
from __future__ import annotations

import argparse
import sys

import torch


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a run folder with checkpoint.pt, or zoo:NAME")
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=64)
    args = parser.parse_args(argv)

    import disentangle
    from disentangle.data import build_dataset
    from disentangle.objectives.annealed_vae import linear_capacity
    from disentangle.objectives.losses import kl_normal_per_dim, reconstruction_loss

    model = disentangle.load(args.model)
    objective = model.config["objective"]
    if objective.get("name") != "annealed_vae":
        print(f"{args.model} was trained with {objective.get('name')!r}, not annealed_vae.", file=sys.stderr)
        return 2
    adam_v: dict[str, torch.Tensor] = {}
    step = int(model.config["train"]["steps"])
    if not args.model.startswith("zoo:"):
        from pathlib import Path

        checkpoint = torch.load(Path(args.model) / "checkpoint.pt", map_location="cpu", weights_only=False)
        step = int(checkpoint["step"])
        names = [n for n, _ in model.named_parameters()]
        state = checkpoint["optimizers"]["model"]["state"]
        adam_v = {n: state[i]["exp_avg_sq"] for i, n in enumerate(names) if i in state}
    gamma = float(objective.get("gamma", 1000.0))
    capacity = linear_capacity(step, float(objective.get("c_max", 25.0)), int(objective.get("iteration_threshold", 100000)))
    model.train()
    dataset = build_dataset(model.config["data"])
    encoder = [(n, p) for n, p in model.named_parameters() if n.startswith("encoder")]
    recon_sq = [torch.zeros_like(p) for _, p in encoder]
    capacity_sq = [torch.zeros_like(p) for _, p in encoder]
    generator = torch.Generator().manual_seed(0)
    torch.manual_seed(0)  # the reparameterisation noise of the training-mode forward pass
    signs, mean_spread = [], []
    for _ in range(args.batches):
        x = dataset.sample_batch(args.batch_size, generator)
        x = x.float() / 255 if x.dtype == torch.uint8 else x.float()
        out = model(x)
        recon = reconstruction_loss(out.logits, x, objective.get("reconstruction", "bernoulli"))
        kl = kl_normal_per_dim(out.mu, out.logvar).sum()
        params = [p for _, p in encoder]
        g_recon = torch.autograd.grad(recon, params, retain_graph=True)
        g_capacity = torch.autograd.grad(gamma * (kl - capacity).abs(), params)
        for i in range(len(params)):
            recon_sq[i] += g_recon[i].square() / args.batches
            capacity_sq[i] += g_capacity[i].square() / args.batches
        signs.append("+" if kl.item() > capacity else "-")
        mean_spread.append(out.mu.detach().std(0))
    spread = torch.stack(mean_spread).mean(0)
    print(f"{args.model}: step {step:,}, C = {capacity:.2f} nats, γ = {gamma:g}; sign of KL − C per batch: {' '.join(signs)}")
    print("posterior-mean spread over a batch, per latent:", " ".join(f"{v:.3f}" for v in spread.tolist()))
    header = "| parameter | rms g_recon | rms g_γ·abs(KL−C) | ratio |" + (" sqrt(Adam v) | recon share of an update |" if adam_v else "")
    print(header)
    print("|---|---:|---:|---:|" + ("---:|---:|" if adam_v else ""))
    for i, (name, _) in enumerate(encoder):
        r, c = recon_sq[i].mean().sqrt().item(), capacity_sq[i].mean().sqrt().item()
        line = f"| {name} | {r:.2e} | {c:.2e} | {c / r:.0f}× |"
        if adam_v:
            v = adam_v[name].mean().sqrt().item()
            line += f" {v:.2e} | {r / v:.1e} |"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
