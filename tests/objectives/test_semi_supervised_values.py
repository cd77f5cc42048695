"""The S² objectives by value where the weight γ_sup(t) is not γ_sup (the annealed and fine-tune
schedules), the boundary of the latent/label check, and a step of R_s's own learned parameter
(``l2``'s scale) recomputed from its gradient."""
from __future__ import annotations

import pytest
import torch

from disentangle.config import TrainConfig
from disentangle.data.labels import LabelsSpec, make_labelled_set
from disentangle.models.vae import VAE
from disentangle.objectives import OBJECTIVES
from disentangle.objectives.supervised import xent_loss
from disentangle.training.optim import build_optimizers
from disentangle.training.precision import Precision

pytestmark = pytest.mark.usefixtures("one_thread")


def _model(latent_dim: int = 4) -> VAE:
    torch.manual_seed(0)
    return VAE.from_backbone("mlp", image_shape=(1, 16, 16), latent_dim=latent_dim, hidden_sizes=[16])


@pytest.mark.parametrize(
    ("schedule", "step", "gamma"),
    [("anneal", 25, 0.75), ("anneal", 0, 0.0), ("fine_tune", 100, 0.0), ("fine_tune", 101, 3.0)],
)
def test_the_loss_adds_the_scheduled_weight_not_gamma_sup(schedule, step, gamma, tiny_dataset):
    """loss = twin loss + γ_sup(t) · R_s, with γ_sup(t) of the schedule (Locatello et al. 2020, eq. 2
    with disentanglement_lib's annealed / fine-tune weights), here 3 · 25/100 or 0 or 3."""
    model = _model()
    labelled = make_labelled_set(tiny_dataset, LabelsSpec(num_labelled=20))
    s2 = OBJECTIVES.build("s2_beta_vae", gamma_sup=3.0, supervised_schedule=schedule, schedule_steps=100)
    twin = OBJECTIVES.build("beta_vae")
    for obj in (s2, twin):
        obj.setup(model=model, dataset_size=len(tiny_dataset))
    s2.attach_labels(labelled)
    batch = s2.sample_batch(tiny_dataset, 8, torch.Generator().manual_seed(0))
    torch.manual_seed(1)
    terms = s2(model, batch, step=step)
    torch.manual_seed(1)
    twin_loss = twin(model, batch.x, step=step)["loss"]
    with torch.no_grad():
        sup = xent_loss(model.encode(batch.labelled)[0], batch.labels, torch.tensor([2.0, 3.0, 4.0]))
    assert terms["gamma_sup"].item() == pytest.approx(gamma)
    assert terms["loss"].item() == pytest.approx(twin_loss.item() + gamma * sup.item(), rel=1e-5, abs=1e-4)


def test_as_many_latents_as_labelled_factors_is_enough(tiny_dataset):
    """Latent j is tied to labelled factor j: 3 labelled factors need 3 latent dimensions, not 4."""
    labelled = make_labelled_set(tiny_dataset, LabelsSpec(num_labelled=20))
    assert len(labelled.label_sizes) == 3
    obj = OBJECTIVES.build("s2_beta_vae")
    obj.setup(model=_model(latent_dim=3), dataset_size=len(tiny_dataset))
    obj.attach_labels(labelled)  # no error
    assert obj.labelled is labelled


@pytest.mark.parametrize("name", ["s2_beta_vae", "s2_factor_vae"])
def test_a_train_step_moves_the_l2_scale_by_its_own_adam_step(name, tiny_dataset):
    """``l2``'s learned scale s (disentanglement_lib's learn_scale) gets the "supervised" optimizer,
    stepped on the same loss: after one Adam step of lr η from s = 1, s = 1 − η · sign(∂L/∂s), with
    ∂L/∂s = γ · 2 Σ_b Σ_j (s μ_bj − y_bj) μ_bj on the labelled batch's means."""
    model = _model()
    labelled = make_labelled_set(tiny_dataset, LabelsSpec(num_labelled=20))
    small = {"discriminator_hidden": 8, "discriminator_layers": 1} if "factor" in name else {}
    obj = OBJECTIVES.build(name, gamma_sup=2.0, supervised_loss="l2", **small)
    obj.setup(model=model, dataset_size=len(tiny_dataset))
    obj.attach_labels(labelled)
    lr = 0.01
    optimizers = build_optimizers(model, obj, TrainConfig(lr=lr))
    batch = obj.sample_batch(tiny_dataset, 8, torch.Generator().manual_seed(0))
    with torch.no_grad():
        mu = model.encode(batch.labelled)[0][:, :3].double()
        grad = 2.0 * 2 * ((mu - batch.labels.double()) * mu).sum()
    assert obj.regularizer.scale.item() == 1.0 and abs(grad.item()) > 1e-3
    obj.train_step(model, batch, step=0, optimizers=optimizers, precision=Precision("fp32", torch.device("cpu")))
    assert obj.regularizer.scale.item() == pytest.approx(1.0 - lr * torch.sign(grad).item(), abs=1e-5)
