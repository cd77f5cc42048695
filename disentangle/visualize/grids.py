"""Image grids with Pillow and plain torch (no torchvision): tiling, text labels, PNG and GIF files.

Every function here returns or takes ``(H, W, 3)`` uint8 RGB arrays. One-channel images are
repeated into grey RGB, three-channel images keep their colour. Layout constants:

* ``padding`` pixels (2 by default) of ``pad_value`` grey (0.5) around and between tiles;
* a row label column of ``label_width`` pixels (white, 96 by default) left of a grid;
* a panel label strip of :data:`LABEL_HEIGHT` pixels (white) above every labelled panel.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from PIL import Image, ImageDraw, ImageFont

from ._files import atomic_write

#: pixels between and around tiles
PADDING = 2
#: grey level of the padding, in [0, 1]
PAD_VALUE = 0.5
#: width of the row-label column of labelled grids
LABEL_WIDTH = 96
#: height of the label strip above each labelled panel
LABEL_HEIGHT = 14
_WHITE = (255, 255, 255)
_BLACK = (0, 0, 0)


def _font() -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    return ImageFont.load_default()


def as_rgb_images(images: torch.Tensor | np.ndarray) -> torch.Tensor:
    """``(N, C, H, W)`` images in [0, 1] as a float ``(N, 3, H, W)`` CPU tensor, clamped.

    One channel becomes grey RGB; three channels are kept (colour datasets render in colour).
    """
    images = torch.as_tensor(images).detach().float().cpu()
    if images.ndim != 4 or images.shape[1] not in (1, 3):
        raise ValueError(
            f"images must be (N, C, H, W) with C = 1 or 3, got shape {tuple(images.shape)}."
        )
    images = images.clamp(0, 1)
    return images.expand(-1, 3, -1, -1) if images.shape[1] == 1 else images


def to_uint8(array: torch.Tensor | np.ndarray) -> np.ndarray:
    """Floats in [0, 1] to uint8 (round to nearest)."""
    array = np.asarray(array, dtype=np.float32)
    return (np.clip(array, 0, 1) * 255).round().astype(np.uint8)


def image_grid(
    images: torch.Tensor, nrow: int, padding: int = PADDING, pad_value: float = PAD_VALUE
) -> np.ndarray:
    """Tile ``(N, C, H, W)`` images in [0, 1] into an ``(H', W', 3)`` uint8 array, ``nrow`` per row.

    ``H' = rows·(H + padding) + padding`` with ``rows = ceil(N / nrow)``, and
    ``W' = nrow·(W + padding) + padding``; tile ``i`` sits at row ``i // nrow``, column
    ``i % nrow``, its top-left pixel at ``(padding + row·(H + padding), padding + col·(W + padding))``.
    """
    images = as_rgb_images(images)
    n, _, h, w = images.shape
    rows = max(1, -(-n // nrow))
    grid = torch.full((3, rows * (h + padding) + padding, nrow * (w + padding) + padding), float(pad_value))
    for i in range(n):
        r, col = divmod(i, nrow)
        top, left = padding + r * (h + padding), padding + col * (w + padding)
        grid[:, top : top + h, left : left + w] = images[i]
    return to_uint8(grid.permute(1, 2, 0).numpy())


def add_row_labels(
    grid: np.ndarray, labels: Sequence[str], row_height: int, padding: int = PADDING,
    label_width: int = LABEL_WIDTH,
) -> np.ndarray:
    """A white column of ``label_width`` pixels left of ``grid``, label ``i`` centred on tile row ``i``.

    ``row_height`` is the height of one tile (rows are ``row_height + padding`` apart). Text that
    does not fit is cut at the column's edge.
    """
    canvas = Image.new("RGB", (grid.shape[1] + label_width, grid.shape[0]), _WHITE)
    canvas.paste(Image.fromarray(grid), (label_width, 0))
    draw, font = ImageDraw.Draw(canvas), _font()
    for row, text in enumerate(labels):
        top, bottom = draw.textbbox((0, 0), text, font=font)[1::2]
        centre = padding + row * (row_height + padding) + row_height / 2
        draw.text((3, round(centre - (top + bottom) / 2)), text, fill=_BLACK, font=font)
    # the label column is drawn on its own, so text never spills onto the images
    out = np.asarray(canvas).copy()
    out[:, label_width:] = grid
    return out


def labelled_panels(
    images: torch.Tensor, labels: Sequence[str], ncol: int, padding: int = PADDING,
    pad_value: float = PAD_VALUE, title: str | None = None,
) -> np.ndarray:
    """Tile images with a text label above each one (and an optional title strip on top).

    Each cell is a white :data:`LABEL_HEIGHT`-pixel label strip above an ``(H, W)`` image; cells
    are laid out ``ncol`` per row with ``padding`` between them. The result has width
    ``ncol·(W + padding) + padding`` and height
    ``[LABEL_HEIGHT if title] + rows·(LABEL_HEIGHT + H + padding) + padding``.
    """
    images = as_rgb_images(images)
    if len(labels) != len(images):
        raise ValueError(f"got {len(labels)} labels for {len(images)} images.")
    n, _, h, w = images.shape
    rows = max(1, -(-n // ncol))
    top0 = LABEL_HEIGHT if title is not None else 0
    height = top0 + rows * (LABEL_HEIGHT + h + padding) + padding
    width = ncol * (w + padding) + padding
    grey = int(round(pad_value * 255))
    canvas = Image.new("RGB", (width, height), (grey, grey, grey))
    draw, font = ImageDraw.Draw(canvas), _font()
    if title is not None:
        draw.rectangle((0, 0, width - 1, LABEL_HEIGHT - 1), fill=_WHITE)
        draw.text((3, 1), title, fill=_BLACK, font=font)
    tiles = to_uint8(images.permute(0, 2, 3, 1).numpy())
    for i in range(n):
        r, col = divmod(i, ncol)
        left = padding + col * (w + padding)
        top = top0 + padding + r * (LABEL_HEIGHT + h + padding)
        draw.rectangle((left, top, left + w - 1, top + LABEL_HEIGHT - 1), fill=_WHITE)
        draw.text((left + 2, top + 1), labels[i], fill=_BLACK, font=font)
        canvas.paste(Image.fromarray(tiles[i]), (left, top + LABEL_HEIGHT))
    return np.asarray(canvas).copy()


def save_png(array: np.ndarray, path: str | Path) -> Path:
    """Write an ``(H, W, 3)`` uint8 array as a PNG, atomically."""
    image = Image.fromarray(np.asarray(array, dtype=np.uint8))
    return atomic_write(path, lambda f: image.save(f, format="PNG"))


def save_gif(frames: Sequence[np.ndarray], path: str | Path, fps: float = 20.0) -> Path:
    """Write equally sized ``(H, W, 3)`` uint8 frames as a looping animated GIF, atomically.

    Pillow merges a frame identical to the one before it into that frame (adding its duration),
    so a model whose decoder ignores every traversed latent gives fewer, longer frames.
    """
    if not frames:
        raise ValueError("save_gif needs at least one frame.")
    images = [Image.fromarray(np.asarray(f, dtype=np.uint8)) for f in frames]
    duration = max(1, round(1000.0 / fps))

    def write(f) -> None:
        images[0].save(
            f, format="GIF", save_all=True, append_images=images[1:], duration=duration, loop=0, disposal=1
        )

    return atomic_write(path, write)


def save_image_grid(images: torch.Tensor, path: str | Path, nrow: int = 8) -> Path:
    """Tile ``images`` with :func:`image_grid` and write a PNG."""
    return save_png(image_grid(images, nrow), path)
