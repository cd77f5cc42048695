"""The class/content family by value: the default split of an odd number of latent dimensions (half,
rounded down, as the docstrings say) and DrNet's similarity stop-gradient on groups of more than two,
where the partner map is not its own inverse."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from disentangle.data.classes import ClassBatch
from disentangle.models.vae import VAE
from disentangle.objectives import OBJECTIVES
from disentangle.objectives.class_content import class_content_codes, class_dim_of

pytestmark = pytest.mark.usefixtures("one_thread")


def _model(latent_dim: int, config=None) -> VAE:
    torch.manual_seed(0)
    model = VAE.from_backbone("mlp", image_shape=(1, 8, 8), latent_dim=latent_dim, hidden_sizes=[16])
    model.config = config
    return model


class _Table(nn.Module):
    """``encode`` returns a fixed table of codes (a leaf, so gradients are read on the codes
    themselves); a linear decoder to 1×2×2 images."""

    def __init__(self, mu: torch.Tensor) -> None:
        super().__init__()
        self.latent_dim = mu.shape[1]
        self.mu = nn.Parameter(mu)
        self.weight = nn.Parameter(torch.randn(4, mu.shape[1], generator=torch.Generator().manual_seed(3)))

    def encode(self, x):
        return self.mu, torch.zeros_like(self.mu)

    def decode(self, z):
        return (z @ self.weight.T).view(-1, 1, 2, 2)


@pytest.mark.parametrize("name", ["drnet", "lord", "mathieu2016"])
@pytest.mark.parametrize(("latent_dim", "class_dim"), [(5, 2), (7, 3), (2, 1)])
def test_the_default_class_dim_is_half_the_latents_rounded_down(name, latent_dim, class_dim):
    model = _model(latent_dim)
    obj = OBJECTIVES.build(name, class_factors=["a"])
    obj.setup(model=model, dataset_size=24)
    assert obj.class_dim == class_dim
    _, cls = obj.split(torch.arange(float(latent_dim))[None])
    assert cls.tolist() == [list(range(latent_dim - class_dim, latent_dim))]


@pytest.mark.parametrize(("latent_dim", "class_dim"), [(5, 2), (7, 3)])
def test_class_dim_of_a_model_without_the_key_is_half_its_latents_rounded_down(latent_dim, class_dim):
    model = _model(latent_dim, config={"objective": {"name": "drnet"}})
    assert class_dim_of(model) == class_dim
    codes = class_content_codes(model, torch.rand(3, 1, 8, 8))
    assert codes["class"].shape == (3, class_dim) and codes["content"].shape == (3, latent_dim - class_dim)
    torch.testing.assert_close(codes["class"], codes["both"][:, latent_dim - class_dim :])


def test_drnet_similarity_moves_the_partner_code_toward_the_detached_target_in_groups_of_three():
    """``similarity = (1/(B·C)) Σ_i ‖h_c(x_p(i)) − sg h_c(x_i)‖²``: its gradient on code ``j`` is
    ``2/(B·C) (h_j − h_{p⁻¹(j)})``, the previous member's; for N = 2 (p = p⁻¹) the other side of
    the stop-gradient would give the same, for N = 3 it is ``h_j − h_{p(j)}``."""
    latent, class_dim, n, groups = 5, 2, 3, 2
    b = n * groups
    model = _Table(torch.randn(b, latent, generator=torch.Generator().manual_seed(2)))
    obj = OBJECTIVES.build("drnet", class_factors=["a"], class_dim=class_dim, group_size=n, discriminator_hidden=8)
    obj.setup(model=model, dataset_size=24)
    x = torch.rand(b, 1, 2, 2, generator=torch.Generator().manual_seed(1))
    batch = ClassBatch(x, torch.tensor([0, 0, 0, 1, 1, 1]), torch.arange(b))

    terms, _ = obj.model_terms(model, batch)
    mu = model.mu
    (got,) = torch.autograd.grad(terms["similarity"], [mu])

    with torch.no_grad():
        h = mu[:, latent - class_dim :]
        previous = torch.tensor([2, 0, 1, 5, 3, 4])  # p⁻¹: member k's partner is (k + 1) mod 3
        want = torch.zeros_like(mu)
        want[:, latent - class_dim :] = 2.0 / (b * class_dim) * (h - h[previous])
        following = torch.tensor([1, 2, 0, 4, 5, 3])
        wrong = 2.0 / (b * class_dim) * (h - h[following])
    assert not torch.allclose(want[:, latent - class_dim :], wrong)  # the two sides differ here
    torch.testing.assert_close(got, want)
