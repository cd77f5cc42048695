"""Pillow images in mode ``L`` or ``RGB``, as the library reads the user's images (an image folder,
CelebA, the PIL images of ``from_torch``): one conversion, so each reads a file alike."""
from __future__ import annotations

from typing import Any

import numpy as np


def to_l_or_rgb(image: Any) -> Any:
    """``image`` in mode ``"L"`` or ``"RGB"``: ``1`` to ``L``; 16-bit gray (``I;16``, ``I``) scaled to
    8 bits by ``round(v * 255 / 65535)`` (Pillow's own conversion clips above 255); an alpha channel
    (``RGBA``, ``LA``, a palette with transparency) composited on black, ``round(value * alpha /
    255)``; palette to RGB; any other mode (CMYK) converted to RGB by Pillow."""
    from PIL import Image

    mode = image.mode
    if mode in ("L", "RGB"):
        return image
    if mode == "1":
        return image.convert("L")
    if mode == "I" or mode.startswith("I;16"):
        values = np.asarray(image).astype(np.int64)
        values = np.clip(values, 0, 65535)
        return Image.fromarray(((values * 255 + 32767) // 65535).astype(np.uint8), "L")
    if mode == "P":
        image = image.convert("RGBA" if "transparency" in image.info else "RGB")
        mode = image.mode
        if mode == "RGB":
            return image
    if mode in ("PA", "La", "RGBa"):
        image = image.convert("LA" if mode == "La" else "RGBA")
        mode = image.mode
    if mode in ("LA", "RGBA"):
        array = np.asarray(image).astype(np.uint32)
        colour, alpha = array[..., :-1], array[..., -1:]
        composited = ((colour * alpha + 127) // 255).astype(np.uint8)  # round(c * a / 255)
        return Image.fromarray(composited[..., 0] if mode == "LA" else composited, "L" if mode == "LA" else "RGB")
    return image.convert("RGB")
