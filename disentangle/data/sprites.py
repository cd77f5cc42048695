"""Procedural dSprites: a vectorised torch renderer of the dSprites grid (``data.name: sprites``).

:class:`ProceduralSprites` has the factors of dSprites (Matthey et al. 2017), without its
constant ``color`` factor, and renders every image on the fly on the dataset's device, so it
needs no file and no download:

=============  =====  ========================================================================
name           size   values (``factor_values``)
=============  =====  ========================================================================
shape          3      square, ellipse, heart (values 1, 2, 3, as in the dSprites file)
scale          6      ``np.linspace(0.5, 1, 6)``
orientation    40     ``np.linspace(0, 2π, 40)`` radians (both ends, so classes 0 and 39 give
                      the same image, as in the real data)
position_x     32     ``np.linspace(0, 1, 32)``
position_y     32     ``np.linspace(0, 1, 32)``
=============  =====  ========================================================================

Grid index ``i`` has the classes ``(i // strides) % sizes`` (row-major, position y fastest), the
order of the dSprites file. Images are ``uint8`` 0/1 masks of shape ``(1, S, S)`` (``S = 64`` by
default), so :attr:`~ProceduralSprites.scale` is 1.

Rendering conventions (lengths are fractions of the image side ``S``; 64-pixel values in brackets)
---------------------------------------------------------------------------------------------------
* Pixel ``(row r, column c)`` is the unit square ``[c, c+1) × [r, r+1)`` and is on iff its
  *centre* ``(c + 0.5, r + 0.5)`` lies inside the shape (point sampling, no anti-aliasing), which
  is what the binary dSprites images look like.
* The sprite centre is ``(0.25 + 0.5·x, 0.25 + 0.5·y)``: ``position_x`` moves it right from
  column 16.0 to 48.0, ``position_y`` moves it *down* (rows grow) from 16.0 to 48.0
  (32/31 px per class).
* Sizes at scale 1, all multiplied by ``scale``: square side 0.3 [19.2]; ellipse semi-axes
  0.19945 × 0.11275 [12.765 × 7.216], long axis horizontal at orientation 0; heart: the classic
  curve ``x = 16 sin³t, y = 13 cos t − 5 cos 2t − 2 cos 3t − cos 4t`` stretched to a
  0.29984 × 0.29927 [19.19 × 19.153] box, upright (point down) at orientation 0, the box centre
  0.0038 [0.244] below the rotation centre (towards the point).
* ``orientation`` θ rotates the sprite about its centre, counter-clockwise *as seen on screen*
  (rows down) for growing θ: the heart's point goes from the bottom (θ = 0) to the right
  (θ ≈ π/2, class 10), the top (class 20) and the left (class 29).

How the conventions were fixed
------------------------------
The shape outlines, sizes, position mapping, pixel-centre rule and rotation sense were fitted to
real dSprites frames (``python examples/compare_sprites_reference.py`` measures the match; the
numbers are in ``benchmarks/RESULTS-metrics.md``). The frames cannot tell which way a sweep runs,
so one assumption is made: each sweep starts at class 0, as the scale sweeps visibly do. It fixes
two signs: ``position_y`` grows downwards and the rotation is counter-clockwise on screen. Should
the real file have them the other way, its images correspond to ours with position_y class
``k ↔ 31 - k`` and/or orientation ``k ↔ 39 - k``; shapes, sizes and position range are the same
either way.

Only a window around each sprite is evaluated, which gives the same images as testing every
pixel. ``materialize=True`` renders the whole grid once (737,280 images, 2.8 GiB of uint8) and
then indexes it, the fast path on a GPU with memory to spare.

Determinism: the same factor classes give the same image bit for bit, whatever the batch they
are rendered in (no randomness; the class tables are computed in float64 and rounded to float32
once, and every pixel is decided by the same float32 arithmetic). The ops are separate
elementwise IEEE float32 operations, so other devices should agree too, but only same-device
equality is tested.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from . import DATASETS
from .base import GridDataset

FACTOR_NAMES = ("shape", "scale", "orientation", "position_x", "position_y")
FACTOR_SIZES = (3, 6, 40, 32, 32)
SHAPE_NAMES = ("square", "ellipse", "heart")
SQUARE, ELLIPSE, HEART = 0, 1, 2

#: physical value of each class, per factor (shape values 1, 2, 3 as in the dSprites file)
FACTOR_VALUES: tuple[np.ndarray, ...] = (
    np.array([1.0, 2.0, 3.0]),
    np.linspace(0.5, 1.0, 6),
    np.linspace(0.0, 2.0 * math.pi, 40),
    np.linspace(0.0, 1.0, 32),
    np.linspace(0.0, 1.0, 32),
)


@dataclass(frozen=True)
class SpriteGeometry:
    """The renderer's constants, as fractions of the image side (values at scale 1).

    The defaults were fitted to the real dSprites frames (see the module docstring); other values
    are only meant for matching experiments.
    """

    #: sprite centre = position_min + position_span * position, for x and y alike
    position_min: float = 0.25
    position_span: float = 0.5
    #: half the side of the square
    square_half_side: float = 0.15
    #: ellipse semi-axes along the sprite's own x (horizontal at orientation 0) and y
    ellipse_semi_axes: tuple[float, float] = (12.765 / 64, 7.216 / 64)
    #: width and height of the heart's bounding box
    heart_size: tuple[float, float] = (19.19 / 64, 19.153 / 64)
    #: how far the heart's box centre lies below (towards the point of) the rotation centre
    heart_offset: float = 0.244 / 64


DEFAULT_GEOMETRY = SpriteGeometry()

# Work per chunk: about 2**20 float32 values per temporary (4 MiB), small enough to stay in cache.
_CHUNK_PIXELS = 1 << 20


# ---------------------------------------------------------------------------------------------
# the heart outline as a scanline table
# ---------------------------------------------------------------------------------------------
_HEART_ROWS = (1 << 16) + 1


def _heart_scanlines(rows: int = _HEART_ROWS) -> np.ndarray:
    """Inner and outer ``|x|`` of the unit heart on ``rows`` evenly spaced lines ``y ∈ [-0.5, 0.5]``.

    The heart is the classic curve ``x = 16 sin³t``, ``y = -(13 cos t - 5 cos 2t - 2 cos 3t - cos 4t)``
    (``y`` grows downwards, so the point is at the bottom), scaled into the box
    ``[-0.5, 0.5]²``. It is mirror-symmetric, and on its right half ``t ∈ [0, π]`` the height is
    monotone on each side of the top of the lobe ``t*``: decreasing from the notch (``t = 0``) to
    the lobe top, increasing from there to the point (``t = π``). So each horizontal line meets
    the right half in at most two points: a point ``(x, y)`` is inside iff
    ``inner(y) <= |x| <= outer(y)``, with ``inner = 0`` below the notch. Returns ``(2, rows)``
    float64 ``[inner, outer]``. Lines are looked up by nearest row: with 65,537 rows that moves
    the outline by at most 1/131,072 of the sprite height (1e-4 pixel at 64×64).
    """
    t = np.linspace(0.0, math.pi, 1 << 20)
    x = 16.0 * np.sin(t) ** 3
    y = -(13.0 * np.cos(t) - 5.0 * np.cos(2 * t) - 2.0 * np.cos(3 * t) - np.cos(4 * t))
    top = int(np.argmin(y))
    y_min, y_max = float(y[top]), float(y.max())
    xn = x / 32.0  # x spans [-16, 16]
    yn = (y - 0.5 * (y_min + y_max)) / (y_max - y_min)
    lines = np.linspace(-0.5, 0.5, rows)
    # the outer side: from the lobe top to the point, yn increasing
    outer = np.interp(lines, yn[top:], xn[top:])
    # the inner side: from the notch up to the lobe top, yn decreasing (reverse for np.interp)
    inner_y, inner_x = yn[: top + 1][::-1], xn[: top + 1][::-1]
    inner = np.where(lines <= inner_y[-1], np.interp(lines, inner_y, inner_x), 0.0)
    return np.stack([inner, outer])


_HEART_TABLE = _heart_scanlines()


# ---------------------------------------------------------------------------------------------
# per-device constant tables
# ---------------------------------------------------------------------------------------------
def _cos_sin(angle: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """float64 cos and sin, with round-off near the axes (sin 2π ≈ -2e-16) made exact zeros, so
    that orientation classes 0 and 39 give the same image."""
    angle = angle.double()
    cos, sin = torch.cos(angle), torch.sin(angle)
    zero = torch.zeros((), dtype=torch.float64, device=angle.device)
    return torch.where(cos.abs() < 1e-12, zero, cos), torch.where(sin.abs() < 1e-12, zero, sin)


class _Tables:
    """float32 lookup tables of one device, computed in float64 and rounded once."""

    def __init__(self, device: torch.device) -> None:
        f32 = {"dtype": torch.float32, "device": device}
        self.scale = torch.as_tensor(FACTOR_VALUES[1], **f32)
        # computed on the CPU, like render_sprites_from_values on CPU inputs, then moved
        cos, sin = _cos_sin(torch.as_tensor(FACTOR_VALUES[2]))
        self.cos, self.sin = cos.to(**f32), sin.to(**f32)
        self.position = FACTOR_VALUES[3]  # float64 numpy; centres depend on the geometry
        self.heart_inner = torch.as_tensor(_HEART_TABLE[0], **f32)
        self.heart_outer = torch.as_tensor(_HEART_TABLE[1], **f32)
        self._centres: dict[SpriteGeometry, torch.Tensor] = {}
        self._grids: dict[int, torch.Tensor] = {}
        self._device = device

    def centres(self, geometry: SpriteGeometry) -> torch.Tensor:
        if geometry not in self._centres:
            c = geometry.position_min + geometry.position_span * self.position
            self._centres[geometry] = torch.as_tensor(c, dtype=torch.float32, device=self._device)
        return self._centres[geometry]

    def grid(self, image_size: int) -> torch.Tensor:
        """Pixel centres ``(c + 0.5) / S`` as float32 fractions of the image side."""
        if image_size not in self._grids:
            c = (np.arange(image_size, dtype=np.float64) + 0.5) / image_size
            self._grids[image_size] = torch.as_tensor(c, dtype=torch.float32, device=self._device)
        return self._grids[image_size]


_TABLES: dict[torch.device, _Tables] = {}


def _tables(device: torch.device) -> _Tables:
    device = torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    if device not in _TABLES:
        _TABLES[device] = _Tables(device)
    return _TABLES[device]


def _max_radius(geometry: SpriteGeometry) -> float:
    """An upper bound on how far any shape at scale 1 reaches from its centre (image fractions)."""
    g = geometry
    square = g.square_half_side * math.sqrt(2.0)
    ellipse = max(g.ellipse_semi_axes)
    w, h = g.heart_size
    heart = math.hypot(0.5 * w, 0.5 * h + abs(g.heart_offset))  # corner of its (offset) box
    return max(square, ellipse, heart)


# ---------------------------------------------------------------------------------------------
# the renderer
# ---------------------------------------------------------------------------------------------
def _render_params(
    shape: torch.Tensor,
    scale: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    cx: torch.Tensor,
    cy: torch.Tensor,
    image_size: int,
    geometry: SpriteGeometry,
    max_scale: float,
) -> torch.Tensor:
    """Render from per-sample float32 parameters (all ``(n,)`` on one device) into ``(n, 1, S, S)`` uint8.

    Only a ``W × W`` window around each sprite is evaluated, ``W`` covering the largest shape at
    ``max_scale`` (an upper bound on ``|scale|``), about 22% of the pixels at scale 1 and 64×64.
    Every pixel is still decided from the same float32 pixel centre and parameters, so the window
    changes the speed, not the image.
    """
    n = shape.shape[0]
    device = shape.device
    size = image_size
    out = torch.zeros((n, 1, size, size), dtype=torch.uint8, device=device)
    if n == 0:
        return out
    reach = _max_radius(geometry) * max_scale * size  # in pixels
    window = min(size, math.ceil(2.0 * reach) + 2)
    tables = _tables(device)
    grid = tables.grid(size)
    offsets = torch.arange(window, device=device)
    chunk = max(1, _CHUNK_PIXELS // (window * window))
    flat = out.view(n, size * size)
    for start in range(0, n, chunk):
        sl = slice(start, min(start + chunk, n))
        _render_chunk(
            flat[sl], shape[sl], scale[sl], cos[sl], sin[sl], cx[sl], cy[sl],
            size, window, offsets, grid, tables, geometry,
        )
    return out


def _window_start(centre: torch.Tensor, size: int, window: int) -> torch.Tensor:
    """First pixel of each sprite's window, kept inside the image (it still covers the sprite's
    part inside the image, as the window is wider than the sprite)."""
    start = torch.floor(centre * size - 0.5 * window).long()
    return start.clamp_(0, size - window)


def _render_chunk(
    flat: torch.Tensor,
    shape: torch.Tensor,
    scale: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    cx: torch.Tensor,
    cy: torch.Tensor,
    size: int,
    window: int,
    offsets: torch.Tensor,
    grid: torch.Tensor,
    tables: _Tables,
    geometry: SpriteGeometry,
) -> None:
    """Render one chunk into ``flat`` (its rows of the ``(n, S*S)`` output view), in place.

    Every sprite's window is tested against all three shapes and each keeps its own shape's mask
    (``torch.where``): a selection by shape (``nonzero``) would wait for the device once per shape
    and batch, a host sync in every training step that draws from the renderer on a GPU. Each
    pixel's arithmetic is the same as for one shape alone, so the images are too.
    """
    k = shape.shape[0]
    cols = _window_start(cx, size, window).unsqueeze(1) + offsets  # (k, W) pixel columns
    rows = _window_start(cy, size, window).unsqueeze(1) + offsets  # (k, W) pixel rows
    s = scale.view(k, 1, 1)
    c = cos.view(k, 1, 1)
    si = sin.view(k, 1, 1)
    dx = (grid[cols] - cx.unsqueeze(1)).view(k, 1, window)  # columns, growing rightwards
    dy = (grid[rows] - cy.unsqueeze(1)).view(k, window, 1)  # rows, growing downwards
    # Sprite-frame coordinates: the inverse of a counter-clockwise-on-screen rotation by θ
    # (with rows growing downwards, a sprite point (u, v) is drawn at
    # (u cos θ + v sin θ, -u sin θ + v cos θ) from the centre).
    u = dx * c - dy * si
    v = dx * si + dy * c
    square = torch.maximum(u.abs(), v.abs()) <= s * geometry.square_half_side
    a, b = geometry.ellipse_semi_axes
    eu = u / (s * a)
    ev = v / (s * b)
    ellipse = eu * eu + ev * ev <= 1.0
    width, height = geometry.heart_size
    hx = (u / (s * width)).abs()
    hy = (v - s * geometry.heart_offset) / (s * height)
    heart = _inside_heart(hx, hy, tables)
    kind = shape.view(k, 1, 1)
    mask = torch.where(kind == SQUARE, square, torch.where(kind == ELLIPSE, ellipse, heart))
    index = (rows.view(k, window, 1) * size + cols.view(k, 1, window)).view(k, -1)
    flat.scatter_(1, index, mask.view(k, -1).to(torch.uint8))


def _inside_heart(hx: torch.Tensor, hy: torch.Tensor, tables: _Tables) -> torch.Tensor:
    """Whether ``(±hx, hy)`` (``hx >= 0``) lies in the unit heart (box ``[-0.5, 0.5]²``)."""
    rows = tables.heart_outer.shape[0]
    pos = hy.add(0.5).mul_(rows - 1)
    in_box = (pos >= 0) & (pos <= rows - 1)
    line = pos.round_().clamp_(0, rows - 1).long()
    return in_box & (hx <= tables.heart_outer[line]) & (hx >= tables.heart_inner[line])


def _check_image_size(image_size: int) -> int:
    from .._core.checks import positive_int

    return positive_int("image_size", image_size)


def render_sprites(
    factor_classes: torch.Tensor,
    image_size: int = 64,
    *,
    geometry: SpriteGeometry = DEFAULT_GEOMETRY,
) -> torch.Tensor:
    """Render sprites from factor classes: ``(n, 5)`` integer tensor -> ``(n, 1, S, S)`` uint8 0/1.

    The columns are the class indices of ``FACTOR_NAMES`` (shape, scale, orientation,
    position_x, position_y), each within ``FACTOR_SIZES``. The images are made on the input's
    device, without a Python loop over samples (big inputs are processed in chunks of about
    2**20 window pixels to bound the memory and stay in cache), and are bit-for-bit
    reproducible. See the module docstring for the conventions.
    """
    if not isinstance(factor_classes, torch.Tensor):
        raise TypeError(f"factor_classes must be a torch tensor, got {type(factor_classes).__name__}.")
    if factor_classes.ndim != 2 or factor_classes.shape[1] != len(FACTOR_SIZES):
        raise ValueError(
            f"factor_classes must have shape (n, {len(FACTOR_SIZES)}) "
            f"({', '.join(FACTOR_NAMES)}), got {tuple(factor_classes.shape)}."
        )
    if factor_classes.dtype.is_floating_point or factor_classes.dtype == torch.bool:
        raise ValueError(f"factor_classes must hold integer class indices, got {factor_classes.dtype}.")
    classes = factor_classes.long()
    if classes.numel():
        sizes = torch.as_tensor(FACTOR_SIZES, device=classes.device)
        bad = (classes < 0) | (classes >= sizes)
        if bool(bad.any()):
            row, col = (int(i) for i in bad.nonzero()[0])
            raise ValueError(
                f"factor {FACTOR_NAMES[col]} has class {int(classes[row, col])} at row {row}, "
                f"outside [0, {FACTOR_SIZES[col] - 1}]."
            )
    return _render_classes(classes, _check_image_size(image_size), geometry)


def _render_classes(classes: torch.Tensor, image_size: int, geometry: SpriteGeometry) -> torch.Tensor:
    """:func:`render_sprites` without input checks (``classes`` is a valid int64 ``(n, 5)``)."""
    t = _tables(classes.device)
    centres = t.centres(geometry)
    return _render_params(
        classes[:, 0],
        t.scale[classes[:, 1]],
        t.cos[classes[:, 2]],
        t.sin[classes[:, 2]],
        centres[classes[:, 3]],
        centres[classes[:, 4]],
        image_size,
        geometry,
        max_scale=float(FACTOR_VALUES[1].max()),
    )


def render_sprites_from_values(
    shape: torch.Tensor | Sequence[int],
    scale: torch.Tensor | Sequence[float],
    orientation: torch.Tensor | Sequence[float],
    x: torch.Tensor | Sequence[float],
    y: torch.Tensor | Sequence[float],
    image_size: int = 64,
    *,
    geometry: SpriteGeometry = DEFAULT_GEOMETRY,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Render sprites from continuous factor values (any scale, angle and position, not only the grid).

    ``shape`` holds class indices (0 square, 1 ellipse, 2 heart); ``scale`` is the size factor
    (dSprites uses 0.5 … 1), ``orientation`` the angle in radians (counter-clockwise on screen),
    ``x`` and ``y`` the positions in [0, 1] (``y`` grows downwards; values outside [0, 1] move the
    sprite further, possibly out of the image). All are broadcast to one length ``n``; the result is
    ``(n, 1, S, S)`` uint8 0/1 on ``device`` (default: the device of ``shape`` if it is a tensor,
    else the CPU). On the CPU, the values of :data:`FACTOR_VALUES` give exactly the images of
    :func:`render_sprites` (the arithmetic is shared: float64, rounded to float32 once).
    """
    if device is None:
        device = shape.device if isinstance(shape, torch.Tensor) else torch.device("cpu")
    device = torch.device(device)
    shape_t = torch.as_tensor(shape, device=device).long().reshape(-1)
    f64 = [torch.as_tensor(v, dtype=torch.float64, device=device).reshape(-1) for v in (scale, orientation, x, y)]
    shape_t, scale_t, angle, x_t, y_t = torch.broadcast_tensors(shape_t, *f64)
    if shape_t.numel() and bool(((shape_t < 0) | (shape_t > 2)).any()):
        raise ValueError("shape must hold class indices 0 (square), 1 (ellipse) or 2 (heart).")
    cos, sin = _cos_sin(angle)  # as for the class tables
    cx = geometry.position_min + geometry.position_span * x_t
    cy = geometry.position_min + geometry.position_span * y_t
    f32 = [t.float().contiguous() for t in (scale_t, cos, sin, cx, cy)]
    # the window must hold the largest sprite of the batch (one host sync, only on this path)
    max_scale = float(f32[0].abs().max()) if f32[0].numel() else 1.0
    return _render_params(
        shape_t.contiguous(), *f32, _check_image_size(image_size), geometry, max_scale=max_scale
    )


# ---------------------------------------------------------------------------------------------
# the dataset
# ---------------------------------------------------------------------------------------------
@DATASETS.register("sprites")
class ProceduralSprites(GridDataset):
    """dSprites rendered on the fly: the 3×6×40×32×32 grid of binary ``(1, S, S)`` images.

    Factors ``("shape", "scale", "orientation", "position_x", "position_y")`` with sizes
    ``(3, 6, 40, 32, 32)`` (737,280 grid points, position y fastest, as the dSprites file);
    ``factor_values`` are shape 1, 2, 3 (square, ellipse, heart), scale ``linspace(0.5, 1, 6)``,
    orientation ``linspace(0, 2π, 40)`` radians, positions ``linspace(0, 1, 32)``. Raw images are
    uint8 0/1, so ``scale = 1.0``. The rendering conventions, fitted to real dSprites frames, are
    in the module docstring.

    Parameters
    ----------
    image_size:
        Side ``S`` of the square images; 64 is dSprites. Other sizes render the same geometry at
        another resolution.
    materialize:
        ``True``: render the whole grid once (in chunks) into a uint8 tensor on ``device`` and index
        it afterwards: ``737,280 · S²`` bytes (2.8 GiB at 64×64), paid once, faster per batch.
        ``False``: render each batch from its factor classes. ``"auto"`` (the default): render per
        batch here; the trainer materialises (:meth:`materialize`) for a long enough run when the
        grid fits in memory (:func:`disentangle.training.runtime.choose_materialize`). The images are
        the same bit for bit either way.
    device:
        Where images are rendered (or stored) and batches are drawn.
    """

    deterministic_observations = True  # rendered from the factor classes alone, bit for bit

    def __init__(
        self, *, image_size: int = 64, materialize: bool | Literal["auto"] = "auto", device: str = "cpu"
    ) -> None:
        self._init_grid(FACTOR_NAMES, FACTOR_SIZES, device)
        self.image_size = _check_image_size(image_size)
        self.scale = 1.0
        self.factor_values = [v.copy() for v in FACTOR_VALUES]
        self.images: torch.Tensor | None = None
        if materialize not in (True, False, "auto"):
            raise ValueError(f"materialize must be true, false or 'auto', got {materialize!r}.")
        if materialize is True:
            self.materialize()

    def materialize(self) -> None:
        """Render the whole grid once into :attr:`images` (idempotent); batches are indexed from it."""
        if self.images is None:
            self.images = self.render_grid()

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return 1, self.image_size, self.image_size

    @property
    def materialized(self) -> bool:
        return self.images is not None

    def render_grid(self, chunk: int = 16384) -> torch.Tensor:
        """All ``len(self)`` images in grid order as one uint8 ``(N, 1, S, S)`` tensor on :attr:`device`."""
        n = len(self)
        out = torch.empty((n, *self.image_shape), dtype=torch.uint8, device=self.device)
        for start in range(0, n, chunk):
            idx = torch.arange(start, min(start + chunk, n), device=self.device)
            out[start : start + idx.numel()] = self.render(idx)
        return out

    def render(self, indices: torch.Tensor) -> torch.Tensor:
        """Render grid indices (never reads the materialised images)."""
        factors = self.index_tensor_to_factors(indices.to(self.device).long().reshape(-1))
        return _render_classes(factors, self.image_size, DEFAULT_GEOMETRY)

    def raw(self, indices: torch.Tensor) -> torch.Tensor:
        """uint8 0/1 images ``(n, 1, S, S)`` of grid indices, on :attr:`device`."""
        if self.images is not None:
            return self.images[indices.to(self.device)]
        return self.render(indices)

    def to(self, device: torch.device | str) -> ProceduralSprites:
        super().to(device)
        if self.images is not None:
            self.images = self.images.to(self.device)
        return self

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(image_size={self.image_size}, materialize={self.materialized}, "
            f"device='{self.device}')"
        )
