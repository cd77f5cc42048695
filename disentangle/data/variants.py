"""Color-, Noisy- and Scream-dSprites (Locatello et al. 2019), on the real file or the renderer.

Each variant wraps a one-channel sprite dataset (the dSprites file, ``dsprites``, or the
procedural renderer, ``sprites``) and turns its binary mask ``m`` into an RGB observation with
per-sample nuisance drawn at sampling time from the batch's ``torch.Generator``. The nuisance is
not a factor: ``factor_names``/``factor_sizes`` are those of the wrapped dataset. All three are
vectorised over the batch (no Python loop over samples) and run on the dataset's device.

=================  ==========================================================================
variant            observation (3 channels, values in [0, 1])
=================  ==========================================================================
Color-dSprites     ``m * c`` with one colour ``c ~ U(0.5, 1)^3`` per image
Noisy-dSprites     ``min(m + u, 1)`` with ``u ~ U(0, 1)`` per pixel and channel: white sprite
                   on uniform noise
Scream-dSprites    a random crop ``p`` of the background image, colour-shifted as
                   ``b = (p + s) / 2`` with ``s ~ U(0, 1)^3`` per image; the sprite pixels are
                   inverted: ``b * (1 - m) + (1 - b) * m``
=================  ==========================================================================

These follow disentanglement_lib's definitions (for a 0/1 mask the blend is exactly its
``background[mask] = 1 - background[mask]``), with two small differences in Scream-dSprites: the
background is the image shrunk to fit 350×274 (aspect kept, as disentanglement_lib does) with
Lanczos after conversion to RGB (the reference's ``thumbnail`` uses PIL's default filter on the
JPEG), and the crop offset is uniform over every position where the crop fits (the reference's
``randint(0, 350 - 64)`` never draws the last one).

Registered: ``color_dsprites``, ``noisy_dsprites``, ``scream_dsprites`` (parameters of
``dsprites``) and ``color_sprites``, ``noisy_sprites``, ``scream_sprites`` (parameters of
``sprites``, offline). The Scream variants take ``background: PATH`` (any image at least 64×64
after the shrink; converted to RGB); without it the official Wikimedia image of The Scream is
downloaded into the cache.
"""
from __future__ import annotations

import inspect
import os
import typing
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from ..errors import CorruptDataFileError
from . import DATASETS
from .base import GridDataset, per_sample
from .download import RemoteFile, fetch, require_path

SCREAM_FILE = RemoteFile(
    url="https://upload.wikimedia.org/wikipedia/commons/f/f4/The_Scream.jpg",
    filename="scream.jpg",
    subdir="scream",
    # No trustworthy published checksum was found for this file, and Wikimedia serves the latest
    # upload under this URL, so the download is accepted unverified; it is validated by decoding
    # it as an image of the required size.
    checksum=None,
    provenance="unverified: no published checksum found; same URL as disentanglement_lib",
)

#: the box the background is shrunk into (width, height), as in disentanglement_lib
BACKGROUND_BOX = (350, 274)


class SpriteVariant(GridDataset):
    """Base of the variants: wraps a one-channel sprite :class:`GridDataset`.

    Subclasses implement :meth:`apply`, mapping a float mask batch ``(n, 1, H, W)`` in [0, 1] to
    RGB observations ``(n, 3, H, W)`` in [0, 1]. Its per-observation draws go through
    :func:`~disentangle.data.base.per_sample` (and the class declares ``shard_rendering = True``),
    so each process of a multi-process run renders only its own rows of a batch.
    """

    deterministic_observations = False  # colour, noise or background drawn per observation
    #: the variants draw through per_sample; a subclass's own apply must declare it again
    shard_rendering = True

    variant = "sprite variant"

    def __init__(self, base: GridDataset) -> None:
        if base.num_channels != 1:
            raise ValueError(
                f"the {self.variant} variant needs a one-channel sprite dataset, got {base.num_channels} channels."
            )
        self.base = base
        if not getattr(base, "shard_rendering", False):  # the base's own draws decide too
            self.shard_rendering = False
        self._init_grid(base.factor_names, base.factor_sizes, base.device)
        self.factor_values = getattr(base, "factor_values", None)
        self.scale = 1.0

    # the grid, its indexing and its size are the wrapped dataset's
    @property
    def image_shape(self) -> tuple[int, int, int]:
        _, h, w = self.base.image_shape
        return 3, h, w

    def __len__(self) -> int:
        return len(self.base)

    def sample_factors(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return self.base.sample_factors(n, rng)

    def factors_to_indices(self, factors: np.ndarray) -> np.ndarray:
        return self.base.factors_to_indices(factors)

    def indices_to_factors(self, indices):
        return self.base.indices_to_factors(indices)

    def index_tensor_to_factors(self, indices: torch.Tensor) -> torch.Tensor:
        return self.base.index_tensor_to_factors(indices)

    def to(self, device: torch.device | str) -> SpriteVariant:
        self.base.to(device)
        super().to(device)
        return self

    def raw(self, indices: torch.Tensor) -> torch.Tensor:
        return self.base.raw(indices)

    def materialize(self) -> None:
        """Materialise the wrapped sprites' grid (the variant's own draws stay per batch)."""
        if hasattr(self.base, "materialize"):
            self.base.materialize()

    def transform(self, batch: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        mask = self.base.transform(batch, generator)
        if mask.dtype == torch.uint8:
            mask = mask.float().mul_(self.base.scale)
        return self.apply(mask, generator)

    def apply(self, mask: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base!r})"


class ColorSprites(SpriteVariant):
    """Color-dSprites: the sprite in one random colour per image, each channel ~ U(0.5, 1)."""

    variant = "Color"
    deterministic_observations = False  # one colour drawn per observation
    shard_rendering = True

    def apply(self, mask: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        color = per_sample(lambda n: torch.rand((n, 3, 1, 1), generator=generator, device=mask.device), mask.shape[0])
        return mask * color.mul_(0.5).add_(0.5)


class NoisySprites(SpriteVariant):
    """Noisy-dSprites: a white sprite over uniform noise in [0, 1] per pixel and channel."""

    variant = "Noisy"
    deterministic_observations = False  # noise drawn per observation
    shard_rendering = True

    def apply(self, mask: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        n, _, h, w = mask.shape
        noise = per_sample(lambda rows: torch.rand((rows, 3, h, w), generator=generator, device=mask.device), n)
        return noise.add_(mask).clamp_(max=1.0)


def load_background(path: str | os.PathLike, min_size: tuple[int, int] = (64, 64)) -> np.ndarray:
    """An image file as uint8 RGB ``(H, W, 3)``, shrunk to fit :data:`BACKGROUND_BOX`."""
    from PIL import Image, UnidentifiedImageError

    path = require_path(
        path, what="background image", option="data.background",
        expected="data.background names an RGB image file (PNG, JPEG, ...); leave it unset to use the "
        "official image of The Scream, downloaded into the cache.",
    )
    try:
        with Image.open(path) as img:
            img = img.convert("RGB")
            img.thumbnail(BACKGROUND_BOX, getattr(Image, "Resampling", Image).LANCZOS)
            array = np.asarray(img, dtype=np.uint8).copy()
    except (UnidentifiedImageError, OSError, ValueError) as err:
        raise CorruptDataFileError(
            f"The background image {path} could not be read ({type(err).__name__}: {err}). "
            "Give data.background an RGB image file (PNG, JPEG, ...); if this file is a download "
            "in the cache, delete it to fetch it again."
        ) from err
    h, w = array.shape[:2]
    if h < min_size[0] or w < min_size[1]:
        raise CorruptDataFileError(
            f"The background image {path} is {w}×{h} after shrinking to fit "
            f"{BACKGROUND_BOX[0]}×{BACKGROUND_BOX[1]}; it must be at least "
            f"{min_size[1]}×{min_size[0]} (use a larger, less elongated image)."
        )
    return array


class ScreamSprites(SpriteVariant):
    """Scream-dSprites: the sprite inverted over a colour-shifted random crop of an image.

    Parameters
    ----------
    base:
        The one-channel sprite dataset.
    background:
        Path of the background image; ``None`` uses the official Wikimedia image of The Scream,
        downloaded into the cache (``cache_dir``, ``download``) when absent.
    """

    variant = "Scream"
    deterministic_observations = False  # crop and colour shift drawn per observation
    shard_rendering = True
    #: gather the crops with numpy on the CPU (faster there); the torch path serves other devices
    numpy_crops_on_cpu = True

    def __init__(
        self,
        base: GridDataset,
        background: str | None = None,
        *,
        cache_dir: str | None = None,
        download: bool = True,
    ) -> None:
        super().__init__(base)
        if background is None:
            background = fetch(
                SCREAM_FILE, cache_dir=cache_dir, download=download,
                option="data.background", what="Scream background image",
            )
        _, h, w = self.image_shape
        array = load_background(background, min_size=(h, w))
        self.background_path = str(background)
        # float (H, W, 3), pre-halved: the crops are gathered from a sliding-window view of it
        self.background = torch.from_numpy(array.astype(np.float32) / 510.0).to(self.device)
        self._bg_h, self._bg_w = array.shape[:2]

    def to(self, device: torch.device | str) -> ScreamSprites:
        super().to(device)
        self.background = self.background.to(self.device)
        return self

    def _crops(self, top: torch.Tensor, left: torch.Tensor, h: int, w: int) -> torch.Tensor:
        """``background[top:top+h, left:left+w]`` for each sample, as ``(n, 3, h, w)``."""
        if self.background.device.type == "cpu" and self.numpy_crops_on_cpu:
            windows = np.lib.stride_tricks.sliding_window_view(self.background.numpy(), (h, w), axis=(0, 1))
            return torch.from_numpy(windows[top.cpu().numpy(), left.cpu().numpy()])
        windows = self.background.unfold(0, h, 1).unfold(1, w, 1)  # (H-h+1, W-w+1, 3, h, w) view
        return windows[top, left]

    def apply(self, mask: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        n, _, h, w = mask.shape
        dev = mask.device
        top = per_sample(lambda rows: torch.randint(0, self._bg_h - h + 1, (rows,), generator=generator, device=dev), n)
        left = per_sample(lambda rows: torch.randint(0, self._bg_w - w + 1, (rows,), generator=generator, device=dev), n)
        shift = per_sample(lambda rows: torch.rand((rows, 3, 1, 1), generator=generator, device=dev), n)
        back = self._crops(top, left, h, w).to(dev).add_(shift.mul_(0.5))  # (patch + shift) / 2
        # b * (1 - m) + (1 - b) * m: the sprite inverts the background
        return torch.lerp(back, 1.0 - back, mask).contiguous()


# ---------------------------------------------------------------------- registry entries
def _dsprites(path, cache_dir, download, strict, device):
    from .dsprites import DSprites

    return DSprites(path, cache_dir=cache_dir, download=download, strict=strict, device=device)


@DATASETS.register("color_dsprites")
def color_dsprites(
    path: str | None = None,
    *,
    cache_dir: str | None = None,
    download: bool = True,
    strict: bool = True,
    device: str = "cpu",
) -> ColorSprites:
    """Color-dSprites on the dSprites file (parameters as ``dsprites``)."""
    return ColorSprites(_dsprites(path, cache_dir, download, strict, device))


@DATASETS.register("noisy_dsprites")
def noisy_dsprites(
    path: str | None = None,
    *,
    cache_dir: str | None = None,
    download: bool = True,
    strict: bool = True,
    device: str = "cpu",
) -> NoisySprites:
    """Noisy-dSprites on the dSprites file (parameters as ``dsprites``)."""
    return NoisySprites(_dsprites(path, cache_dir, download, strict, device))


@DATASETS.register("scream_dsprites")
def scream_dsprites(
    path: str | None = None,
    *,
    background: str | None = None,
    cache_dir: str | None = None,
    download: bool = True,
    strict: bool = True,
    device: str = "cpu",
) -> ScreamSprites:
    """Scream-dSprites on the dSprites file; ``background`` as in :class:`ScreamSprites`."""
    base = _dsprites(path, cache_dir, download, strict, device)
    return ScreamSprites(base, background, cache_dir=cache_dir, download=download)


class _SpritesVariantBuilder:
    """Registry entry ``<variant>_sprites``: builds ``sprites`` and wraps it.

    Its signature is the ``sprites`` builder's plus the variant's own keywords, resolved when
    asked for (so config validation and defaults work whatever the import order).
    """

    def __init__(self, name: str, wrap: Callable[..., SpriteVariant], extra: dict[str, tuple[Any, Any]]):
        self.__name__ = self.__qualname__ = name
        self.__doc__ = f"{wrap.__doc__.splitlines()[0]} Built on the procedural ``sprites`` renderer."
        self._wrap = wrap
        self._extra = extra  # keyword -> (annotation, default)

    def _sprites(self) -> Callable[..., Any]:
        return DATASETS.get("sprites")

    @staticmethod
    def _target_fn(target):
        return target.__init__ if inspect.isclass(target) else target

    @property
    def __signature__(self) -> inspect.Signature:
        base = DATASETS.parameters("sprites")
        params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in base.values()]
        for name, (annotation, default) in self._extra.items():
            if name not in base:
                params.append(
                    inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
                )
        return inspect.Signature(params)

    @property
    def __annotations__(self) -> dict[str, Any]:  # read by typing.get_type_hints
        try:
            hints = dict(typing.get_type_hints(self._target_fn(self._sprites())))
        except Exception:
            hints = {}
        hints.pop("return", None)
        hints.update({k: a for k, (a, _) in self._extra.items()})
        return hints

    def __call__(self, **params: Any) -> SpriteVariant:
        own = {k: params.pop(k) for k in list(params) if k in self._extra and k not in DATASETS.parameters("sprites")}
        base_params = DATASETS.parameters("sprites")
        unknown = sorted(set(params) - set(base_params))
        if unknown:
            raise TypeError(
                f"{self.__name__}: unknown parameter(s) {', '.join(unknown)}; valid: "
                f"{', '.join(sorted({*base_params, *self._extra}))}."
            )
        base = DATASETS.build("sprites", **params)
        return self._wrap(base, **own)


DATASETS.register("color_sprites", _SpritesVariantBuilder("color_sprites", ColorSprites, {}))
DATASETS.register("noisy_sprites", _SpritesVariantBuilder("noisy_sprites", NoisySprites, {}))
DATASETS.register(
    "scream_sprites",
    _SpritesVariantBuilder(
        "scream_sprites",
        ScreamSprites,
        {
            "background": (str | None, None),
            "cache_dir": (str | None, None),
            "download": (bool, True),
        },
    ),
)
