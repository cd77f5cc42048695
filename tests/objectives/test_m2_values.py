"""M2 by value where the existing checks are blind: the importance estimator's classifier accuracy
(the arg-max of q̂(y | x_l) = 1/S Σ_s q(y | z_s, x_l), not of one sample's) and the default factor
(the first with 2 to latent_dim − 1 classes: one dimension at least is left for z)."""
from __future__ import annotations

import pytest
import torch

from disentangle.data import IndexedImageDataset
from disentangle.data.labels import LabelsSpec, make_labelled_set
from disentangle.models.vae import VAE
from disentangle.objectives import OBJECTIVES

pytestmark = pytest.mark.usefixtures("one_thread")

LATENT, C = 6, 4


def test_the_importance_accuracy_is_the_arg_max_of_the_averaged_classifier(tiny_dataset):
    """A classifier that reads z strongly (its z-columns scaled up) makes the per-sample arg-max
    disagree with the average's; the accuracy is that of q̂, written out here over S = 5 samples."""
    S, n = 5, 24
    torch.manual_seed(0)
    model = VAE.from_backbone("mlp", image_shape=(1, 16, 16), latent_dim=LATENT, hidden_sizes=[16])
    obj = OBJECTIVES.build("m2", factor="c", estimator="importance", samples=S)
    obj.setup(model=model, dataset_size=len(tiny_dataset))
    obj.attach_labels(make_labelled_set(tiny_dataset, LabelsSpec(num_labelled=40)))
    with torch.no_grad():
        obj.classifier.weight[:, C:] *= 30.0
    seen_disagreement = False
    for seed in range(6):
        batch = obj.sample_batch(tiny_dataset, n, torch.Generator().manual_seed(seed))
        torch.manual_seed(10 + seed)
        terms = obj(model, batch, step=0)
        torch.manual_seed(10 + seed)
        torch.randn(S * n, LATENT - C)  # the unlabelled batch's draws come first
        eps = torch.randn(S * n, LATENT - C).view(S, n, LATENT - C)
        with torch.no_grad():
            mu, logvar = model.encode(batch.labelled)
            y = batch.labels[:, 2].long()
            q = torch.stack([
                torch.softmax(obj.classifier(torch.cat([mu[:, :C], mu[:, C:] + (0.5 * logvar[:, C:]).exp() * eps[s]], 1))[:, :C], 1)
                for s in range(S)
            ])  # (S, n, C): q(y | z_s, x_l)
        expected = (q.mean(0).argmax(1) == y).float().mean()
        first = (q[0].argmax(1) == y).float().mean()
        seen_disagreement |= bool(first != expected)
        assert terms["classifier_accuracy"].item() == pytest.approx(expected.item()), seed
    assert seen_disagreement  # the test tells the average's arg-max from one sample's


def test_the_default_factor_leaves_a_dimension_for_z():
    """Factors of 4, 2 and 3 classes with latent_dim 4: the first (4 classes) would take every
    latent dimension, so the default is the second."""
    g = torch.Generator().manual_seed(0)
    images = (torch.rand(24, 1, 8, 8, generator=g) > 0.5).to(torch.uint8)
    dataset = IndexedImageDataset(images, ("p", "q", "r"), (4, 2, 3), scale=1.0)
    torch.manual_seed(0)
    model = VAE.from_backbone("mlp", image_shape=(1, 8, 8), latent_dim=4, hidden_sizes=[8])
    obj = OBJECTIVES.build("m2")
    obj.setup(model=model, dataset_size=len(dataset))
    obj.attach_labels(make_labelled_set(dataset, LabelsSpec(num_labelled=20)))
    assert (obj.factor_name, obj.num_classes) == ("q", 2)
