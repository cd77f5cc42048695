"""Where a VAE's KL goes: the posterior's KL to the prior split into what carries information
about the image and what does not.

For ``q(z|x) = N(μ(x), diag σ²(x))`` and the prior ``N(0, I)``, averaged over the images ``x``,

    E_x KL(q(z|x) ‖ p(z)) = ½ Σ_j [ (E_x μ_j)²  +  Var_x μ_j  +  E_x(σ_j² − log σ_j² − 1) ]
                          =        offset       +   spread   +      variance

* **offset**: the part spent on moving every posterior by the same amount (a constant shift of the
  means carries nothing about ``x``);
* **spread**: the part spent on means that differ between images, the only one that can carry
  information about ``x`` (it bounds nothing on its own, but is 0 for an encoder that ignores
  ``x``);
* **variance**: the part spent on posterior variances other than 1.

The AnnealedVAE (Burgess et al. 2018) collapses when its capacity target ``C`` is met by offsets
and variances alone, with no spread (:mod:`disentangle.backbones.init` says how the layers'
initialisation decides it). Variances are population variances (over the images given).
"""
from __future__ import annotations

import torch


@torch.no_grad()
def posterior_kl_split(mu: torch.Tensor, logvar: torch.Tensor) -> dict[str, float]:
    """``{"offset", "spread", "variance", "total"}`` in nats, summed over the latent dimensions and
    averaged over the rows of ``mu`` and ``logvar`` (``(N, d)`` each); ``total`` is the mean KL and
    equals the sum of the three parts (see the module docstring)."""
    mu, logvar = mu.double(), logvar.double()
    offset = 0.5 * mu.mean(0).square().sum()
    spread = 0.5 * mu.var(0, unbiased=False).sum()
    variance = 0.5 * (logvar.exp() - logvar - 1).mean(0).sum()
    total = 0.5 * (mu.square() + logvar.exp() - logvar - 1).sum(1).mean()
    return {"offset": float(offset), "spread": float(spread), "variance": float(variance), "total": float(total)}
