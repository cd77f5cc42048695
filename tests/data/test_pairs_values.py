"""Pair sampling by value: every drawn quantity replayed from the generator in the order the module
docstring of disentangle.data.pairs documents, with plain torch, so that the label is *the last*
factor chosen (the reference's ``simple_dynamics``) and not merely some resampled factor."""
from __future__ import annotations

import pytest
import torch

from disentangle.data.pairs import sample_pair_factors

SIZES = (3, 4, 5, 2, 6)
K = len(SIZES)
B = 256


@pytest.mark.parametrize("k", [2, 4, "random"])
def test_the_draws_replay_in_the_documented_order(k):
    got = sample_pair_factors(SIZES, B, torch.Generator().manual_seed(11), k=k)

    g = torch.Generator().manual_seed(11)
    sizes = torch.tensor(SIZES)
    c1 = (torch.rand(B, K, generator=g, dtype=torch.float64) * sizes).floor().long()  # 1. B×K float64
    if k == "random":  # 2. k_observed uniform over 1..K−1
        k_observed = torch.randint(1, K, (B,), generator=g)
    else:
        k_observed = torch.full((B,), k)
    coin = torch.randint(0, 2, (B,), generator=g)  # 3. the coin: m = 1 or k_observed
    order = torch.rand(B, K, generator=g).argsort(1)  # 4. B×K float32 uniforms, per-row argsort
    new = (torch.rand(B, K, generator=g, dtype=torch.float64) * sizes).floor().long()  # 5. new classes

    assert torch.equal(got.factors1, c1)
    # which side of the coin means "one factor" is not documented: either, consistently
    m = got.num_resampled
    assert torch.equal(m, torch.where(coin == 0, 1, k_observed)) or torch.equal(m, torch.where(coin == 1, 1, k_observed))
    assert (m > 1).any() and (m == 1).any()
    # the first m factors of the order are resampled, and the label is the m-th (the last chosen)
    resampled = torch.zeros(B, K, dtype=torch.bool)
    for b in range(B):
        resampled[b, order[b, : m[b]]] = True
    assert torch.equal(got.resampled, resampled)
    assert torch.equal(got.changed, order[torch.arange(B), m - 1])
    assert torch.equal(got.factors2, torch.where(resampled, new, c1))


def test_k_may_be_every_factor():
    """k = K resamples all K factors in the half of the pairs that do not resample a single one."""
    from disentangle.data.pairs import check_k

    assert check_k(K, K) == K
    got = sample_pair_factors(SIZES, B, torch.Generator().manual_seed(3), k=K)
    assert set(got.num_resampled.unique().tolist()) == {1, K}
    assert got.resampled[got.num_resampled == K].all()


def test_random_k_with_two_factors_resamples_one():
    """k = random draws k_observed from 1..K − 1 = {1} with two factors: every pair resamples one."""
    from disentangle.data.pairs import check_k

    assert check_k("random", 2) == "random"
    got = sample_pair_factors((3, 4), 64, torch.Generator().manual_seed(4), k="random")
    assert (got.num_resampled == 1).all() and torch.equal(got.resampled.sum(1), torch.ones(64, dtype=torch.long))
