"""The fp32 islands under autocast (the Gaussian heads, the estimators) check autocast in their
forward: that check must trace under ``torch.compile`` and must not fail on devices autocast does not know."""
from __future__ import annotations

import pytest
import torch


@pytest.mark.parametrize("autocast", [False, True])
def test_the_fp32_heads_and_estimators_trace_as_one_graph(autocast):
    """The Gaussian head and the estimators check autocast in their forward; ``torch.compile`` must
    trace that without a graph break (``torch.amp.is_autocast_available`` broke the compiled encoder in
    two on torch 2.11, 2026-11-27), and keep them in float32 under bf16 autocast."""
    from disentangle._core.hardware import autocast_enabled
    from disentangle.backbones._heads import GaussianHead
    from disentangle.objectives.estimators import gaussian_log_density

    head = GaussianHead(16, 4)

    def step(h):
        mean, logvar = head(h)
        return mean, gaussian_log_density(mean.detach(), mean, logvar)

    torch._dynamo.reset()
    compiled = torch.compile(step, backend="eager", fullgraph=True)  # fullgraph: a break raises
    h = torch.randn(8, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        mean, density = compiled(h)
        assert autocast_enabled("cpu") is autocast
    assert mean.dtype == density.dtype == torch.float32
    expected = step(h)
    assert torch.allclose(mean, expected[0]) and torch.allclose(density, expected[1])
    assert autocast_enabled("meta") is False  # autocast does not know it: no error
