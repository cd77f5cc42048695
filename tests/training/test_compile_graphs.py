"""``train.compile`` compiles the encoder, the decoder and the objective's networks
(:func:`disentangle.training.runtime.compile_networks`). A graph break splits a compiled network in
two with eager code between, and under ``reduce-overhead`` into two CUDA graphs: the speed a GPU run
compiles for is lost silently. Each network of these recipes must trace as one graph, with the
inputs the training step gives it."""
from __future__ import annotations

import pytest
import torch

from disentangle.config import load_config
from disentangle.training.runtime import resolve_device
from disentangle.training.trainer import Trainer

pytestmark = pytest.mark.usefixtures("one_thread")

#: one recipe per kind of network the objectives add (discriminators, a classifier, a contrastive
#: head, a semi-supervised regulariser) beside the plain VAE and a pair objective
RECIPES = ["sprites/beta_vae", "sprites/factor_vae", "sprites/m2", "sprites/infogan_cr", "sprites/s2_beta_tcvae",
           "weak/ada_gvae_sprites"]


def _networks_and_inputs(name: str, tmp_path):
    config = load_config(name, [f"train.out_dir={tmp_path / 'run'}", "train.progress=false", "train.traversals=false",
                                "data.materialize=false", "train.batch_size=8"])
    trainer = Trainer(config)
    trainer.device = resolve_device("cpu")
    trainer._build()
    networks = {"encoder": trainer.model.encoder, "decoder": trainer.model.decoder,
                **{f"objective.{k}": m for k, m in trainer.objective.named_children()}}
    inputs: dict[str, tuple] = {}

    def keep(key):
        def hook(module, args):
            inputs.setdefault(key, tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in args))
        return hook

    handles = [m.register_forward_pre_hook(keep(k)) for k, m in networks.items()]
    try:
        trainer.train_step()
    finally:
        for h in handles:
            h.remove()
    return networks, inputs


@pytest.mark.parametrize("name", RECIPES)
def test_every_compiled_network_of_a_recipe_traces_as_one_graph(name, tmp_path):
    networks, inputs = _networks_and_inputs(name, tmp_path)
    assert {"encoder", "decoder"} <= set(inputs)
    breaks = {}
    for key, network in networks.items():
        if key not in inputs:  # a network this step does not call
            continue
        torch._dynamo.reset()
        explained = torch._dynamo.explain(network)(*inputs[key])
        if explained.graph_break_count:
            breaks[key] = [r.reason for r in explained.break_reasons]
    assert not breaks, breaks
