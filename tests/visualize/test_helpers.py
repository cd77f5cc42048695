"""A VAE stand-in whose pictures are known in closed form, and a toy ground-truth dataset.

Images are ``(1, H, D·H)``: ``D`` square blocks side by side. The decoder is linear in ``z``: every
pixel of block ``j`` has logit ``z_j``, so ``decode_mean(z)`` is ``sigmoid(z_j)`` on block ``j``.
The encoder inverts it (``μ_j = logit(mean of block j)``) with a fixed log-variance per latent, so
the KL of every latent is known.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

BLOCK = 6


class BlockVAE(nn.Module):
    def __init__(self, logvar: list[float], block: int = BLOCK) -> None:
        super().__init__()
        self.latent_dim = len(logvar)
        self.block = block
        self.image_shape = (1, block, block * self.latent_dim)
        self.register_buffer("logvar", torch.tensor(logvar, dtype=torch.float32))
        # the decoder's only weight: pixel logits = z @ weight, a block indicator matrix
        weight = torch.zeros(self.latent_dim, block * block * self.latent_dim)
        pixels = torch.arange(block * block * self.latent_dim).reshape(block, block * self.latent_dim)
        for j in range(self.latent_dim):
            weight[j, pixels[:, j * block : (j + 1) * block].reshape(-1)] = 1.0
        self.weight = nn.Parameter(weight, requires_grad=False)

    @property
    def device(self) -> torch.device:
        return self.weight.device

    def block_means(self, x: torch.Tensor) -> torch.Tensor:
        blocks = x.reshape(len(x), self.block, self.latent_dim, self.block)
        return blocks.mean(dim=(1, 3))

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mu = torch.logit(self.block_means(x.float()).clamp(1e-4, 1 - 1e-4))
        return mu, self.logvar.expand_as(mu)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        return (z @ self.weight).reshape(len(z), *self.image_shape)

    def decode_mean(self, z: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.decode(z))

    def representation(self, x) -> torch.Tensor:
        return self.encode(torch.as_tensor(x))[0]


def block_image(levels: list[float], block: int = BLOCK) -> torch.Tensor:
    """A ``(1, block, block·len(levels))`` image whose block ``j`` is the constant ``levels[j]``."""
    row = torch.tensor(levels, dtype=torch.float32).repeat_interleave(block)
    return row.expand(block, -1)[None].clone()


class BlockFactors:
    """Two factors (sizes 3 and 4) drawn into blocks 0 and 1 of a three-block image; block 2 is grey.

    Block 0 is ``sigmoid(a_values[a])``, block 1 ``sigmoid(b_values[b])``: a :class:`BlockVAE`
    encodes factor ``a`` exactly in ``z0`` and ``b`` in ``z1``; ``z2`` is 0 everywhere.
    """

    factor_names = ("a", "b")
    factor_sizes = (3, 4)
    factor_values = [np.array([-1.0, 0.0, 1.5]), np.array([0.1, 0.2, 0.3, 0.4])]
    a_values = np.array([-2.0, 0.0, 2.0])
    b_values = np.array([-1.0, -0.5, 0.5, 1.0])
    device = torch.device("cpu")
    image_shape = (1, BLOCK, 3 * BLOCK)

    def sample_factors(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.stack([rng.integers(0, s, n) for s in self.factor_sizes], axis=1)

    def sample_observations_from_factors(self, factors: np.ndarray, rng: np.random.Generator) -> torch.Tensor:
        levels = torch.sigmoid(torch.tensor(
            np.stack([self.a_values[factors[:, 0]], self.b_values[factors[:, 1]], np.zeros(len(factors))], 1),
            dtype=torch.float32,
        ))
        return torch.stack([block_image(row.tolist()) for row in levels])

    def sample_batch(self, batch_size: int, generator: torch.Generator) -> torch.Tensor:
        seed = int(torch.randint(2**31 - 1, (1,), generator=generator))
        rng = np.random.default_rng(seed)
        return self.sample_observations_from_factors(self.sample_factors(batch_size, rng), rng)


# the stand-ins are only as good as these two facts, which the picture tests rely on
def test_block_vae_decodes_block_j_to_sigmoid_of_z_j_and_encodes_back():
    model = BlockVAE([0.0, -1.0, -2.0])
    z = torch.tensor([[-1.0, 0.5, 2.0]])
    image = model.decode_mean(z)[0, 0]
    for j, value in enumerate(z[0]):
        block = image[:, j * BLOCK : (j + 1) * BLOCK]
        assert torch.allclose(block, torch.sigmoid(value).expand_as(block))
    mu, logvar = model.encode(model.decode_mean(z))
    assert torch.allclose(mu, z, atol=1e-5)
    assert torch.equal(logvar[0], torch.tensor([0.0, -1.0, -2.0]))


def test_block_factors_put_factor_a_in_z0_and_b_in_z1():
    data, model = BlockFactors(), BlockVAE([0.0, 0.0, 0.0])
    factors = np.array([[0, 3], [2, 1]])
    mu = model.representation(data.sample_observations_from_factors(factors, np.random.default_rng(0)))
    expected = np.stack([data.a_values[factors[:, 0]], data.b_values[factors[:, 1]], [0.0, 0.0]], 1)
    np.testing.assert_allclose(mu.numpy(), expected, atol=1e-5)
