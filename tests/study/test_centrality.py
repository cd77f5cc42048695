"""ModelCentrality (Lin et al. 2020) on planted models: those that share the true factors agree."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from disentangle.errors import InputError
from disentangle.study.centrality import GeneratorDataset, centrality_matrix, model_centrality

#: two orthogonal pixel patterns: the "true factors" of every planted model
PATTERNS = torch.zeros(16, 2)
PATTERNS[:8, 0] = 1.0
PATTERNS[8:, 1] = 1.0


class _Linear(torch.nn.Module):
    """A model whose decoder renders ``mix @ c`` on the two patterns and whose code inverts it."""

    def __init__(self, mix: np.ndarray) -> None:
        super().__init__()
        self.mix = torch.tensor(mix, dtype=torch.float32)
        self.latent_dim = 2
        self.scale = torch.nn.Parameter(torch.ones(()))  # a parameter, for the device

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        return (codes @ self.mix.T @ PATTERNS.T).reshape(-1, 1, 4, 4)

    def representation(self, x, batch_size=None) -> torch.Tensor:
        logits = torch.logit(torch.as_tensor(x).reshape(len(x), 16).clamp(1e-6, 1 - 1e-6))
        return logits @ torch.linalg.pinv(PATTERNS @ self.mix).T


#: 45 degrees: each code mixes both factors equally, the worst case of the FactorVAE score
ROTATION = np.array([[math.cos(math.pi / 4), -math.sin(math.pi / 4)], [math.sin(math.pi / 4), math.cos(math.pi / 4)]])
SETTINGS = {"num_train": 300, "num_eval": 200, "num_variance_estimate": 300, "batch_size": 16}


def test_the_generator_dataset_draws_equiprobable_prior_classes():
    data = GeneratorDataset(_Linear(np.eye(2)), bins=4)
    assert data.factor_sizes == (4, 4)
    # the N(0, 1) quantiles of 1/8, 3/8, 5/8, 7/8
    np.testing.assert_allclose(data.values, [-1.15035, -0.31864, 0.31864, 1.15035], atol=1e-4)
    images = data.sample_observations_from_factors(np.array([[0, 3]]), np.random.default_rng(0))
    expected = torch.sigmoid(torch.tensor([-1.15035] * 8 + [1.15035] * 8)).reshape(1, 1, 4, 4)
    assert torch.allclose(images, expected, atol=1e-4)


def test_models_that_share_the_factors_are_central_and_a_rotated_one_is_not():
    models = [_Linear(np.eye(2)), _Linear(np.array([[0.0, 2.0], [-1.0, 0.0]])), _Linear(ROTATION)]
    matrix = centrality_matrix(models, settings=SETTINGS, progress=False)
    assert np.isnan(np.diag(matrix)).all()
    assert matrix[0, 1] == pytest.approx(1.0) and matrix[1, 0] == pytest.approx(1.0)  # permuted, scaled: perfect
    assert matrix[0, 2] < 0.9 and matrix[2, 0] < 0.9
    centrality = model_centrality(matrix)
    assert centrality[2] < min(centrality[0], centrality[1])
    assert centrality[0] == pytest.approx((matrix[1, 0] + matrix[2, 0]) / 2)


def test_centrality_needs_two_models():
    with pytest.raises(InputError, match="at least 2"):
        model_centrality(np.zeros((1, 1)))
    with pytest.raises(InputError, match="compares models"):
        centrality_matrix([_Linear(np.eye(2))], progress=False)


def test_an_elastic_infogans_category_is_one_factor_of_k_classes_given_one_hot(monkeypatch):
    import numpy as np

    from disentangle.models.vae import VAE
    from disentangle.study.centrality import GeneratorDataset

    gan = VAE.from_backbone("infogan_categorical", image_shape=(1, 16, 16), latent_dim=4, num_categories=3,
                            channels=[8, 8], hidden=16, q_hidden=16, noise_dim=2).eval()
    data = GeneratorDataset(gan, bins=4)
    assert data.factor_sizes == (4, 3) and data.factor_names == ("code_0", "category")
    factors = data.sample_factors(300, np.random.default_rng(0))
    assert set(factors[:, 1]) == {0, 1, 2} and set(factors[:, 0]) == {0, 1, 2, 3}
    seen = []
    monkeypatch.setattr(gan.decoder, "generate", lambda c, noise: (seen.append(c.clone()), torch.zeros(len(c), 1, 16, 16))[1])
    data.sample_observations_from_factors(factors[:5], np.random.default_rng(1))
    codes = seen[0]
    assert torch.allclose(codes[:, 0], torch.as_tensor(data.values[factors[:5, 0]], dtype=torch.float32))
    assert torch.equal(codes[:, 1:], torch.eye(3)[factors[:5, 1]])


def test_a_models_centrality_is_the_mean_of_its_column():
    """S[i, j] scores model j as seen from model i: model j's centrality is the mean of column j,
    the diagonal left out (an asymmetric matrix tells a column mean from a row mean)."""
    nan = math.nan
    matrix = np.array([[nan, 1.0, 0.0], [0.0, nan, 0.0], [0.0, 0.0, nan]])
    np.testing.assert_array_equal(model_centrality(matrix), [0.0, 0.5, 0.0])
