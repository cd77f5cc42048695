"""The procedural sprites renderer and dataset (``data.name: sprites``)."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from disentangle.data import DATASETS
from disentangle.data.sprites import (
    FACTOR_NAMES,
    FACTOR_SIZES,
    FACTOR_VALUES,
    ProceduralSprites,
    render_sprites,
    render_sprites_from_values,
)

REFERENCE = Path(__file__).resolve().parents[2] / "examples/reference/dsprites.gif"
SQUARE, ELLIPSE, HEART = 0, 1, 2


def random_classes(n: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(n, 5, generator=g) * torch.tensor(FACTOR_SIZES)).long()


def render_one(shape: int, scale: int, orientation: int, x: int, y: int, **kw) -> np.ndarray:
    return render_sprites(torch.tensor([[shape, scale, orientation, x, y]]), **kw)[0, 0].numpy().astype(bool)


def centroid(img: np.ndarray) -> tuple[float, float]:
    rows, cols = np.nonzero(img)
    return float(cols.mean()), float(rows.mean())


def iou(a: np.ndarray, b: np.ndarray) -> float:
    return float((a & b).sum() / max((a | b).sum(), 1))


# ------------------------------------------------------------------------------------ renderer
def test_render_shape_dtype_and_binary_values():
    classes = random_classes(300)
    images = render_sprites(classes)
    assert images.shape == (300, 1, 64, 64)
    assert images.dtype == torch.uint8 and images.device == classes.device
    assert set(torch.unique(images).tolist()) <= {0, 1}
    assert (images.flatten(1).sum(1) > 0).all(), "every sprite lies inside the image"
    assert render_sprites(classes[:0]).shape == (0, 1, 64, 64)


def test_render_is_deterministic_and_independent_of_the_batch():
    classes = random_classes(500, seed=1)
    first = render_sprites(classes)
    assert torch.equal(first, render_sprites(classes.clone()))
    perm = torch.randperm(500, generator=torch.Generator().manual_seed(2))
    assert torch.equal(render_sprites(classes[perm]), first[perm])  # other batch composition
    singles = torch.cat([render_sprites(classes[i : i + 1]) for i in range(0, 500, 50)])
    assert torch.equal(singles, first[::50])


def test_render_from_values_equals_render_from_classes():
    classes = random_classes(200, seed=3)
    values = [torch.as_tensor(FACTOR_VALUES[k][classes[:, k].numpy()]) for k in range(1, 5)]
    from_values = render_sprites_from_values(classes[:, 0], *values)
    assert torch.equal(from_values, render_sprites(classes))


def test_render_rejects_bad_input():
    with pytest.raises(ValueError, match="shape"):
        render_sprites(torch.zeros(3, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="orientation"):
        render_sprites(torch.tensor([[0, 0, 40, 0, 0]]))
    with pytest.raises(ValueError, match="integer"):
        render_sprites(torch.zeros(2, 5))


# ------------------------------------------------------------------------------------ geometry
def test_square_size_and_place_match_the_real_frames():
    # measured on the real frames: at scale 1 and position (0, 0) the square covers rows and
    # columns 6..25 (20×20 pixels), at scale 0.5 rows and columns 11..20 (10×10)
    big, small = render_one(SQUARE, 5, 0, 0, 0), render_one(SQUARE, 0, 0, 0, 0)
    expected = np.zeros((64, 64), bool)
    expected[6:26, 6:26] = True
    assert np.array_equal(big, expected)
    expected[:] = False
    expected[11:21, 11:21] = True
    assert np.array_equal(small, expected)
    # ... and at position (31, 31) the centre is 32 px further right and down
    assert centroid(render_one(SQUARE, 5, 0, 31, 31)) == (47.5, 47.5)


@pytest.mark.parametrize("shape", [SQUARE, ELLIPSE, HEART])
def test_centroid_moves_right_with_x_and_down_with_y(shape):
    xs = render_sprites(torch.tensor([[shape, 5, 7, k, 12] for k in range(32)]))[:, 0].numpy().astype(bool)
    ys = render_sprites(torch.tensor([[shape, 5, 7, 12, k] for k in range(32)]))[:, 0].numpy().astype(bool)
    cx = np.array([centroid(im)[0] for im in xs])
    cy = np.array([centroid(im)[1] for im in ys])
    assert (np.diff(cx) > 0).all() and (np.diff(cy) > 0).all()  # rows grow downwards
    # 32 px from the first to the last class (the sprite centre goes from 16.0 to 48.0)
    assert abs((cx[-1] - cx[0]) - 32) < 0.5 and abs((cy[-1] - cy[0]) - 32) < 0.5
    # y leaves the column centroid alone and x the row centroid
    assert np.ptp([centroid(im)[1] for im in xs]) < 0.5 and np.ptp([centroid(im)[0] for im in ys]) < 0.5


@pytest.mark.parametrize("shape", [SQUARE, ELLIPSE, HEART])
def test_area_grows_like_scale_squared(shape):
    images = render_sprites(torch.tensor([[shape, s, 3, 16, 16] for s in range(6)]))
    area = images.flatten(1).sum(1).double().numpy()
    scale = FACTOR_VALUES[1]
    assert (np.diff(area) > 0).all()
    np.testing.assert_allclose(area / area[-1], scale**2, rtol=0.1)


def test_orientation_classes_0_and_39_give_the_same_image():
    classes = random_classes(400, seed=4)
    first, last = classes.clone(), classes.clone()
    first[:, 2], last[:, 2] = 0, 39
    assert torch.equal(render_sprites(first), render_sprites(last))


def test_square_rotation():
    upright = render_one(SQUARE, 5, 0, 16, 16)
    # class 10 is 2π·10/39 ≈ 92.3°: nearly the upright square again
    assert iou(upright, render_one(SQUARE, 5, 10, 16, 16)) > 0.8
    # class 5 is ≈ 46°: a diamond, as wide as the diagonal (≈ 27 px) with the same area
    diamond = render_one(SQUARE, 5, 5, 16, 16)
    width = np.ptp(np.nonzero(diamond.any(0))[0]) + 1
    assert 25 <= width <= 28 and abs(int(diamond.sum()) - int(upright.sum())) < 0.1 * upright.sum()


def _tip_side(img: np.ndarray) -> str:
    """Where the heart's point is: the side of its box where the outline is narrowest."""
    rows, cols = np.nonzero(img)
    sides = {
        "bottom": (img[rows.max()].sum(), img[rows.max() - 1].sum()),
        "top": (img[rows.min()].sum(), img[rows.min() + 1].sum()),
        "right": (img[:, cols.max()].sum(), img[:, cols.max() - 1].sum()),
        "left": (img[:, cols.min()].sum(), img[:, cols.min() + 1].sum()),
    }
    return min(sides, key=lambda k: sides[k])


def test_heart_points_down_and_turns_counter_clockwise_on_screen():
    # as in the real frames: upright at orientation 0, point to the right a quarter turn later
    assert _tip_side(render_one(HEART, 5, 0, 16, 16)) == "bottom"
    assert _tip_side(render_one(HEART, 5, 10, 16, 16)) == "right"
    assert _tip_side(render_one(HEART, 5, 20, 16, 16)) == "top"
    assert _tip_side(render_one(HEART, 5, 29, 16, 16)) == "left"
    # upright, it is mirror-symmetric about its centre line: at position 0 that is x = 16.0, the
    # edge between columns 15 and 16, so columns 0..31 read the same backwards
    upright = render_one(HEART, 5, 0, 0, 0)
    assert upright[:, :32].any() and np.array_equal(upright[:, :32], upright[:, 31::-1])


def test_ellipse_is_wide_at_orientation_0():
    img = render_one(ELLIPSE, 5, 0, 0, 0)
    rows, cols = np.nonzero(img)
    assert (cols.min(), cols.max(), rows.min(), rows.max()) == (3, 28, 9, 22)  # as in the real frame


def test_other_image_sizes_scale_the_same_geometry():
    classes = random_classes(50, seed=5)
    small = render_sprites(classes).flatten(1).sum(1).double()
    big = render_sprites(classes, image_size=128)
    assert big.shape == (50, 1, 128, 128)
    np.testing.assert_allclose(big.flatten(1).sum(1).double() / small, 4.0, rtol=0.12)


# ------------------------------------------------------------------------------------ dataset
def test_dataset_grid_and_index_arithmetic():
    ds = ProceduralSprites()
    assert ds.factor_names == FACTOR_NAMES == ("shape", "scale", "orientation", "position_x", "position_y")
    assert ds.factor_sizes == (3, 6, 40, 32, 32) and len(ds) == 737_280
    assert ds.image_shape == (1, 64, 64) and ds.scale == 1.0
    assert [len(v) for v in ds.factor_values] == list(ds.factor_sizes)
    np.testing.assert_allclose(ds.factor_values[2][[0, -1]], [0.0, 2 * math.pi])
    # row-major, position y fastest (the order of the dSprites file)
    unit = np.eye(5, dtype=np.int64)
    assert ds.factors_to_indices(unit).tolist() == [245_760, 40_960, 1024, 32, 1]
    idx = np.random.default_rng(0).integers(0, len(ds), 1000)
    factors = ds.indices_to_factors(idx)
    assert np.array_equal(ds.factors_to_indices(factors), idx)
    assert np.array_equal(ds.index_tensor_to_factors(torch.as_tensor(idx)).numpy(), factors)
    assert np.array_equal(ds.indices_to_factors(np.array([len(ds) - 1]))[0], np.array(FACTOR_SIZES) - 1)


def test_dataset_raw_is_the_render_of_its_factors():
    ds = ProceduralSprites()
    idx = torch.randint(len(ds), (300,), generator=torch.Generator().manual_seed(6))
    raw = ds.raw(idx)
    assert torch.equal(raw, render_sprites(ds.index_tensor_to_factors(idx)))
    assert torch.equal(raw, ds.raw(idx))


class _FirstGridPoints(ProceduralSprites):
    """Materialises only the first grid points: the materialised path on a subset, quickly."""

    def __len__(self) -> int:
        return 5000


def test_materialized_equals_rendered_on_a_subset():
    lazy = ProceduralSprites()
    eager = _FirstGridPoints(materialize=True)
    assert eager.images is not None and eager.images.shape == (5000, 1, 64, 64)
    idx = torch.randint(5000, (400,), generator=torch.Generator().manual_seed(7))
    assert torch.equal(eager.raw(idx), lazy.raw(idx))
    assert torch.equal(eager.images[:5000:97], lazy.raw(torch.arange(0, 5000, 97)))


@pytest.mark.slow
def test_materialized_full_grid_equals_rendered():
    eager = ProceduralSprites(materialize=True)
    lazy = ProceduralSprites()
    idx = torch.randint(len(lazy), (5000,), generator=torch.Generator().manual_seed(8))
    assert torch.equal(eager.raw(idx), lazy.raw(idx))


def test_registry_sampling_and_ground_truth_interface(rng):
    ds = DATASETS.build("sprites")
    assert isinstance(ds, ProceduralSprites)
    assert set(DATASETS.parameters("sprites")) == {"image_size", "materialize", "device"}
    batch = ds.sample_batch(32, torch.Generator().manual_seed(0))
    assert batch.shape == (32, 1, 64, 64) and batch.dtype == torch.float32
    assert set(torch.unique(batch).tolist()) <= {0.0, 1.0}
    factors = ds.sample_factors(16, rng)
    assert factors.shape == (16, 5) and (factors < np.array(FACTOR_SIZES)).all()
    obs = ds.sample_observations_from_factors(factors, rng)
    expected = render_sprites(torch.as_tensor(factors)).float()
    assert torch.equal(obs, expected)
    assert ds.to("cpu") is ds


# ------------------------------------------------------------------------------------ real data
def _reference_frames() -> np.ndarray:
    if not REFERENCE.is_file():
        pytest.skip(f"reference frames not found at {REFERENCE}")
    from PIL import Image, ImageSequence

    with Image.open(REFERENCE) as gif:
        return np.stack([np.asarray(f.convert("L")) > 127 for f in ImageSequence.Iterator(gif)])


def _traversal_labels() -> np.ndarray:
    """The frames' classes, read off the GIF's traversal order (as in the comparison example)."""
    rows = []
    up, down = list(range(6)), list(range(5, -1, -1))
    for shape in (HEART, ELLIPSE, SQUARE):
        rows += [(shape, s, 0, 0, 0) for s in up + down + up]
        rows += [(shape, 5, o, 0, 0) for o in range(40)]
        if shape == HEART:
            rows += [(shape, 5, 39, 0, p) for p in range(32)] + [(shape, 5, 39, p, 31) for p in range(32)]
            rows += [(shape, 5, 39, 31, p) for p in range(31, -1, -1)]
            rows += [(shape, 5, 39, p, 0) for p in range(31, -1, -1)]
        rows += [(shape, s, 39, 0, 0) for s in down]
    return np.asarray(rows, dtype=np.int64)


def _batch_iou(frames: torch.Tensor, rendered: torch.Tensor) -> torch.Tensor:
    f, r = frames.flatten(1).float(), rendered.flatten(1).float()
    inter = f @ r.T
    return inter / (f.sum(1, keepdim=True) + r.sum(1) - inter)


def test_matches_the_real_dsprites_frames():
    frames = _reference_frames()
    assert frames.shape == (320, 64, 64)
    # 1. rendered at the classes of the traversals, all 320 frames (measured: mean 0.9997)
    labels = _traversal_labels()
    rendered = render_sprites(torch.as_tensor(labels))[:, 0].numpy().astype(bool)
    at_labels = np.array([iou(a, b) for a, b in zip(frames, rendered)])
    assert at_labels.mean() >= 0.99 and at_labels.min() >= 0.95

    # 2. best match over the grid for a subset of frames, the grid narrowed to the position
    # classes next to where each candidate shape, scale and orientation would have to sit to
    # put its centroid on the frame's centroid, and to candidates of similar area
    subset = [0, 5, 25, 40, 70, 100, 140, 170, 195, 215, 235, 260, 280, 300]
    sso = torch.cartesian_prod(torch.arange(3), torch.arange(6), torch.arange(40))  # (1440, 3)
    probe = render_sprites(torch.cat([sso, torch.full((len(sso), 2), 15)], 1))[:, 0].float()
    area = probe.sum((1, 2))
    ii = torch.arange(64, dtype=torch.float32)
    offset_x = (probe.sum(1) * ii).sum(1) / area - (16 + 32 * 15 / 31 - 0.5)  # centroid - centre
    offset_y = (probe.sum(2) * ii).sum(1) / area - (16 + 32 * 15 / 31 - 0.5)
    best = []
    for i in subset:
        frame = torch.as_tensor(frames[i])
        a = float(frame.sum())
        fx, fy = centroid(frames[i])
        keep = ((area > 0.8 * a) & (area < a / 0.8)).nonzero().squeeze(1)
        # position class from the centre the centroid implies: centre = 15.5 + 32/31 * class
        kx = ((fx - offset_x[keep]) - 15.5) * 31 / 32
        ky = ((fy - offset_y[keep]) - 15.5) * 31 / 32
        cands = []
        for dx in (0, 1):
            for dy in (0, 1):
                px = (kx.floor() + dx).clamp(0, 31).long()
                py = (ky.floor() + dy).clamp(0, 31).long()
                cands.append(torch.cat([sso[keep], px[:, None], py[:, None]], 1))
        cands = torch.cat(cands)
        best.append(float(_batch_iou(frame[None], render_sprites(cands)[:, 0]).max()))
    best = np.array(best)
    assert best.mean() >= 0.85, best  # measured over the whole grid: 0.9997 on all 320 frames
    assert (best >= at_labels[subset] - 1e-9).all()  # the labelled classes are candidates


class _OpsSeen(TorchDispatchMode):
    """The aten ops run inside the block, and whether any indexed with a boolean mask."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name.startswith("index") and any(
                isinstance(i, torch.Tensor) and i.dtype == torch.bool
                for a in args if isinstance(a, (list, tuple)) for i in a):
            name = "index with a boolean mask"
        self.ops.add(name)
        return func(*args, **(kwargs or {}))


def test_drawing_a_rendered_batch_never_waits_for_the_device():
    """On a GPU, ``nonzero``, a boolean-mask index and ``.item()`` wait for the device: the renderer,
    which draws every batch of a run that does not materialise its images, uses none of them (a
    selection by shape made three such waits a step on an H200, 2026-11-27)."""
    sprites = DATASETS.build("sprites", device="cpu")
    g = torch.Generator().manual_seed(0)
    sprites.sample_batch(8, g)  # one-time tables
    with _OpsSeen() as seen:
        batch = sprites.sample_batch(64, g)
    assert batch.shape == (64, 1, 64, 64) and 0 < float(batch.mean()) < 0.5
    waits = {"nonzero", "_local_scalar_dense", "masked_select", "index with a boolean mask", "unique"}
    assert not seen.ops & waits, sorted(seen.ops & waits)
