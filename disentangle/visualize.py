"""Image grids and latent traversals with plain torch + Pillow (no torchvision)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from PIL import Image, ImageDraw


def image_grid(images: torch.Tensor, nrow: int, padding: int = 2, pad_value: float = 0.5) -> np.ndarray:
    """Tile ``(N, C, H, W)`` images in [0, 1] into an ``(H', W', 3)`` uint8 array, ``nrow`` per row."""
    images = images.detach().float().clamp(0, 1).cpu()
    if images.shape[1] == 1:
        images = images.expand(-1, 3, -1, -1)
    n, c, h, w = images.shape
    rows = (n + nrow - 1) // nrow
    grid = torch.full((3, rows * (h + padding) + padding, nrow * (w + padding) + padding), pad_value)
    for i in range(n):
        r, col = divmod(i, nrow)
        top, left = padding + r * (h + padding), padding + col * (w + padding)
        grid[:, top : top + h, left : left + w] = images[i]
    return (grid.permute(1, 2, 0).numpy() * 255).round().astype(np.uint8)


def save_image_grid(images: torch.Tensor, path: str | Path, nrow: int = 8) -> None:
    Image.fromarray(image_grid(images, nrow)).save(path)


@torch.no_grad()
def latent_traversals(
    model, x: torch.Tensor, dims: list[int], values: torch.Tensor
) -> torch.Tensor:
    """Decoded images ``(len(dims) * len(values), C, H, W)``: row ``i`` sets ``z[dims[i]]`` to each
    of ``values`` in turn, starting from the posterior mean of the single image ``x``."""
    mu, _ = model.encode(x[:1].to(model.device))
    z = mu.repeat(len(dims) * len(values), 1)
    for row, d in enumerate(dims):
        z[row * len(values) : (row + 1) * len(values), d] = values.to(z)
    return model.decode_mean(z)


def save_traversals(
    model, x: torch.Tensor, kl_per_dim: list[float] | np.ndarray, path: str | Path,
    num_values: int = 10, limit: float = 2.0,
) -> None:
    """Write a traversal grid, rows sorted by decreasing KL and labelled with each dimension's KL.

    Column 0 is the input image; the other columns set one latent to ``num_values`` points in
    ``[-limit, limit]`` (the prior's ±2σ by default).
    """
    kl = np.asarray(kl_per_dim, dtype=float)
    order = [int(i) for i in np.argsort(-kl)]
    values = torch.linspace(-limit, limit, num_values)
    decoded = latent_traversals(model, x, order, values).cpu()
    c, h, w = decoded.shape[1:]
    inputs = x[:1].float().cpu().expand(len(order), -1, -1, -1)
    rows = torch.cat([inputs.reshape(len(order), 1, c, h, w), decoded.reshape(len(order), num_values, c, h, w)], 1)
    grid = image_grid(rows.reshape(-1, c, h, w), nrow=num_values + 1)
    label_w = 90
    canvas = Image.new("RGB", (grid.shape[1] + label_w, grid.shape[0]), (255, 255, 255))
    canvas.paste(Image.fromarray(grid), (label_w, 0))
    draw = ImageDraw.Draw(canvas)
    for row, d in enumerate(order):
        draw.text((4, 2 + row * (h + 2) + h // 2 - 6), f"z{d} KL={kl[d]:.2f}", fill=(0, 0, 0))
    canvas.save(path)
