"""β-TCVAE: loss = recon + α·MI + β·TC + γ·dimKL with the estimators, N from the dataset."""
from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from disentangle.config import load_config
from disentangle.models.vae import VAE
from disentangle.objectives import OBJECTIVES
from disentangle.objectives.beta_tcvae import BetaTCVAE
from disentangle.objectives.estimators import decompose_kl
from disentangle.training.trainer import Trainer

pytestmark = pytest.mark.usefixtures("one_thread")


def _model(latent_dim=4):
    torch.manual_seed(0)
    return VAE.from_backbone("mlp", image_shape=(1, 8, 8), latent_dim=latent_dim, hidden_sizes=[16])


def test_defaults():
    obj = OBJECTIVES.build("beta_tcvae")
    assert (obj.alpha, obj.beta, obj.gamma, obj.estimator) == (1.0, 6.0, 1.0, "mss")


@pytest.mark.parametrize("estimator", ["mss", "mws"])
def test_loss_is_the_weighted_decomposition(estimator):
    model = _model()
    obj = BetaTCVAE(alpha=0.5, beta=3.0, gamma=2.0, estimator=estimator)
    obj.setup(model=model, dataset_size=5000)
    x = (torch.rand(32, 1, 8, 8, generator=torch.Generator().manual_seed(1)) > 0.5).float()
    torch.manual_seed(2)
    terms = obj(model, x, step=0)
    torch.manual_seed(2)
    out = model(x)
    parts = decompose_kl(out.z, out.mu, out.logvar, 5000, estimator)
    recon = F.binary_cross_entropy_with_logits(out.logits, x, reduction="none").flatten(1).sum(1).mean()
    expected = recon + 0.5 * parts["mutual_info"] + 3.0 * parts["total_correlation"] + 2.0 * parts["dimwise_kl"]
    assert torch.allclose(terms["loss"], expected, rtol=1e-6)
    for key in ("mutual_info", "total_correlation", "dimwise_kl"):
        assert torch.allclose(terms[key], parts[key])
    assert torch.allclose(terms["mutual_info"] + terms["total_correlation"] + terms["dimwise_kl"], terms["kl_sampled"], atol=1e-4)


def test_alpha_beta_gamma_one_is_the_vae_with_sampled_kl():
    model = _model()
    obj = BetaTCVAE(alpha=1.0, beta=1.0, gamma=1.0)
    obj.setup(model=model, dataset_size=5000)
    x = (torch.rand(16, 1, 8, 8) > 0.5).float()
    terms = obj(model, x, step=0)
    assert torch.allclose(terms["loss"], terms["recon"] + terms["kl_sampled"], rtol=1e-5)


def test_needs_the_dataset_size():
    model = _model()
    x = torch.rand(8, 1, 8, 8)
    with pytest.raises(RuntimeError, match="dataset size"):
        BetaTCVAE()(model, x, step=0)
    obj = BetaTCVAE()
    obj.setup(model=model, dataset_size=4)  # a batch larger than the dataset: surely a mistake
    with pytest.raises(ValueError, match="dataset_size >= batch_size"):
        obj(model, x, step=0)


def test_validation():
    with pytest.raises(ValueError, match="estimator"):
        BetaTCVAE(estimator="iwae")
    with pytest.raises(ValueError, match="beta"):
        BetaTCVAE(beta=-1.0)


def test_trainer_gives_the_dataset_size_not_the_batch_size(tmp_path, tiny_overrides):
    trainer = Trainer(load_config(None, tiny_overrides(tmp_path / "r", steps=4, **{"objective.name": "beta_tcvae"})))
    trainer.fit()
    assert trainer.objective.dataset_size == len(trainer.dataset) == 24
    assert trainer.config.train.batch_size == 8
    rec = json.loads((tmp_path / "r" / "log.jsonl").read_text().splitlines()[-1])
    assert set(rec) >= {"loss", "recon", "mutual_info", "total_correlation", "dimwise_kl", "kl_sampled", "kl", "kl_per_dim", "elbo"}
    assert abs(rec["mutual_info"] + rec["total_correlation"] + rec["dimwise_kl"] - rec["kl_sampled"]) < 1e-3
