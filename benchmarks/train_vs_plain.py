# Vendored from the project's shared tools (../shared/tools/train_vs_plain.py) so that the README's
# trainer-vs-plain-loop row can be rerun from a clone: python benchmarks/train_vs_plain.py --rounds 3
"""Side-by-side training throughput: disentangle's Trainer vs a plain PyTorch loop on the same
conv64 β-VAE, batch 64, same data (sprites rendered once into a uint8 tensor). Prints steps/s of
each and the ratio. Usage: python train_vs_plain.py [--steps 200] [--rounds 3] [--threads 2]"""
import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=200)
p.add_argument("--rounds", type=int, default=3)
p.add_argument("--threads", type=int, default=2)
p.add_argument("--compile", action="store_true")
a = p.parse_args()
torch.set_num_threads(a.threads)

def plain(steps):
    from disentangle.backbones import BACKBONES
    enc, dec = BACKBONES.build("conv64", image_shape=(1, 64, 64), latent_dim=10)
    params = list(enc.parameters()) + list(dec.parameters())
    opt = torch.optim.Adam(params, lr=1e-4)
    data = (torch.rand(20000, 1, 64, 64) > 0.9).to(torch.uint8)
    g = torch.Generator().manual_seed(0)
    def step(x):
        mu, logvar = enc(x)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
        logits = dec(z)
        rec = F.binary_cross_entropy_with_logits(logits, x, reduction="sum") / x.shape[0]
        kl = 0.5 * (mu.pow(2) + logvar.exp() - 1 - logvar).sum(1).mean()
        loss = rec + 4 * kl
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss
    fn = torch.compile(step) if a.compile else step
    for _ in range(10):
        fn(data[torch.randint(0, len(data), (64,), generator=g)].float())
    t = time.perf_counter()
    for _ in range(steps):
        fn(data[torch.randint(0, len(data), (64,), generator=g)].float())
    return steps / (time.perf_counter() - t)

def ours(steps):
    d = tempfile.mkdtemp()
    cmd = [sys.executable, "-c", f"import torch; torch.set_num_threads({a.threads}); import runpy, sys; sys.argv=['x','--config','configs/quickstart.yaml','train.steps={steps+20}','train.out_dir={d}/r','train.progress=false','train.traversals=false','train.log_every=20','train.lr=1e-4']; runpy.run_module('disentangle.train', run_name='__main__')"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows = [json.loads(l) for l in open(f"{d}/r/log.jsonl")]
    # steps/s over the last `steps` steps, excluding the first 20 (warm-up)
    from bench_trainer_options import rate_after_first_record  # a sibling script

    rate = rate_after_first_record(rows)
    shutil.rmtree(d)
    return rate

res = {"plain": [], "ours": []}
for r in range(a.rounds):
    res["plain"].append(plain(a.steps))
    res["ours"].append(ours(a.steps))
    print(f"round {r}: plain {res['plain'][-1]:.2f} steps/s, ours {res['ours'][-1]:.2f} steps/s", flush=True)
import statistics as st

mp, mo = st.median(res["plain"]), st.median(res["ours"])
print(f"median: plain {mp:.2f} steps/s ({mp*64:.0f} img/s), ours {mo:.2f} steps/s ({mo*64:.0f} img/s), ours/plain {mo/mp:.2f}")
