"""The user's own data by value: which files an image folder reads and in what order, the exact
8-bit values of 16-bit and RGBA images, grayscale detection, luma before the resize; CelebA's crop
box for an odd crop, the split selection by name, ``max_images`` after the split, the decoded cache
keyed by the crop and by the archive's status-change time; ``from_torch`` / ``from_arrays`` layouts,
masks and label sizes; the Color and Scream variants' colours and background. Each expected value is
computed here, independently of the loader, on tiny files written to ``tmp_path``."""
from __future__ import annotations

import os
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from disentangle.data import IndexedImageDataset, from_arrays, from_torch
from disentangle.data.celeba import celeba
from disentangle.data.image_folder import image_folder
from disentangle.data.variants import ColorSprites, load_background

pytestmark = pytest.mark.usefixtures("one_thread")

LANCZOS = getattr(Image, "Resampling", Image).LANCZOS


def build_folder(root: Path, tmp_path: Path, **kwargs):
    return image_folder(str(root), cache=str(tmp_path / "cache"), **kwargs)


def flat(path: Path, value, size: int = 4, mode: str = "RGB") -> None:
    """A ``size`` × ``size`` PNG filled with ``value`` (a level or an RGB triple)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new(mode, (size, size), value).save(path)


# ---------------------------------------------------------------------- image folder: which files, in which order
def test_files_are_ordered_as_case_sensitive_strings_and_each_row_is_its_file(tmp_path):
    root = tmp_path / "images"
    levels = {"b.png": 40, "B.png": 10, "a.png": 30, "C/x.png": 20, "c.png": 50}
    for name, level in levels.items():
        flat(root / name, level, mode="L")
    ds = build_folder(root, tmp_path, image_size=4)
    expected = ["B.png", "C/x.png", "a.png", "b.png", "c.png"]  # sorted as strings: upper case first
    assert list(ds.files) == expected == sorted(levels)
    assert ds.images[:, 0, 0, 0].tolist() == [levels[name] for name in expected]


def test_hidden_folders_and_files_are_left_out(tmp_path):
    root = tmp_path / "images"
    flat(root / "a.png", 7, mode="L")
    flat(root / ".thumbnails" / "a.png", 200, mode="L")
    flat(root / "sub" / ".b.png", 201, mode="L")
    flat(root / "sub" / "c.png", 9, mode="L")
    ds = build_folder(root, tmp_path, image_size=4)
    assert list(ds.files) == ["a.png", "sub/c.png"]
    assert ds.images[:, 0, 0, 0].tolist() == [7, 9]


# ---------------------------------------------------------------------- image folder: values
def test_an_image_is_gray_only_when_all_three_channels_agree(tmp_path):
    root = tmp_path / "images"
    flat(root / "a_gray.png", 90, mode="L")
    flat(root / "b_red_equals_green.png", (100, 100, 200))  # R = G but not B: colour
    ds = build_folder(root, tmp_path, image_size=4)
    assert ds.image_shape == (3, 4, 4)
    assert ds.images[1, :, 0, 0].tolist() == [100, 100, 200]
    assert ds.images[0, :, 0, 0].tolist() == [90, 90, 90]


def test_sixteen_bit_gray_is_scaled_by_rounding_v_times_255_over_65535(tmp_path):
    root = tmp_path / "images"
    root.mkdir()
    values = np.minimum(np.arange(256, dtype=np.int64) * 257 + 128, 65535)  # around each 8-bit level
    values[1::2] -= 129  # and just below half a level on every other one
    values = np.clip(values, 0, 65535)
    Image.fromarray(values.reshape(16, 16).astype(np.uint16)).save(root / "deep.png")
    assert Image.open(root / "deep.png").mode in ("I;16", "I")
    ds = build_folder(root, tmp_path, image_size=16)
    assert ds.image_shape == (1, 16, 16)
    expected = (2 * values + 257) // 514  # round(v * 255 / 65535) = round(v / 257), no ties for integers
    np.testing.assert_array_equal(ds.images[0, 0].numpy().ravel(), expected)
    assert (expected != values >> 8).any()  # the planted values tell rounding from a byte shift


def test_alpha_is_composited_on_black_rounding_each_value(tmp_path):
    root = tmp_path / "images"
    root.mkdir()
    alpha = np.arange(256, dtype=np.int64)
    colour = np.stack([255 - alpha, alpha, (alpha * 7) % 256], axis=1)
    rgba = np.concatenate([colour, alpha[:, None]], axis=1).reshape(16, 16, 4).astype(np.uint8)
    Image.fromarray(rgba, "RGBA").save(root / "a.png")
    ds = build_folder(root, tmp_path, image_size=16)
    expected = (2 * colour * alpha[:, None] + 255) // 510  # round(c * a / 255), exact in integers
    got = ds.images[0].numpy().reshape(3, 256).T
    np.testing.assert_array_equal(got, expected)
    # from_torch reads a PIL image's alpha the same way
    again = from_torch([Image.fromarray(rgba, "RGBA")]).images[0].numpy().reshape(3, 256).T
    np.testing.assert_array_equal(again, expected)


def test_channels_one_converts_to_luma_before_the_resize(tmp_path):
    root = tmp_path / "images"
    root.mkdir()
    pixels = np.random.default_rng(3).integers(0, 256, (12, 18, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(root / "a.png")
    ds = build_folder(root, tmp_path, image_size=6, channels=1)
    luma = Image.fromarray(pixels).convert("L")  # ITU-R 601-2, then the shorter side to 6 with Lanczos
    resized = luma.resize((9, 6), LANCZOS)  # int(6 * 18 / 12) = 9
    expected = np.asarray(resized)[:, 2:8]  # centre crop: round((9 - 6) / 2) = 2
    np.testing.assert_array_equal(ds.images[0, 0].numpy(), expected)


# ---------------------------------------------------------------------- CelebA
CELEBA_ATTRIBUTES = [f"attr{j}" for j in range(40)]


def write_celeba(root: Path, names, values, parts, pixels, *, order=None, as_zip: bool = False) -> Path:
    """CelebA's files with PNG images (lossless, so pixels compare exactly): ``order`` is the order of
    the rows in both text files (default: as given)."""
    folder = root / "img_align_celeba"
    folder.mkdir(parents=True)
    for name, array in zip(names, pixels):
        Image.fromarray(array).save(folder / name, compress_level=0)
    order = range(len(names)) if order is None else order
    lines = [str(len(names)), " ".join(CELEBA_ATTRIBUTES)]
    lines += [names[i] + " " + " ".join(f"{v:>2}" for v in values[i]) for i in order]
    (root / "list_attr_celeba.txt").write_text("\n".join(lines) + "\n")
    (root / "list_eval_partition.txt").write_text("".join(f"{names[i]} {parts[i]}\n" for i in order))
    if as_zip:
        with zipfile.ZipFile(root / "img_align_celeba.zip", "w", compression=zipfile.ZIP_STORED) as archive:
            for name in names:
                archive.write(folder / name, f"img_align_celeba/{name}")
        for name in names:
            (folder / name).unlink()
        folder.rmdir()
    return root


def coordinates_image(seed: int = 0) -> np.ndarray:
    """A 178×218 RGB image whose pixel (y, x) holds (y, x) in its red and green channels (mod 256)."""
    y, x = np.mgrid[0:218, 0:178]
    blue = np.full_like(y, 50 + seed)
    return np.stack([y % 256, x % 256, blue], axis=-1).astype(np.uint8)


def _values(n: int) -> np.ndarray:
    return np.where((np.arange(n)[:, None] * 3 + np.arange(40)[None, :]) % 4 == 0, 1, -1)


def test_an_odd_crop_takes_the_box_at_floor_of_half_the_margins(tmp_path):
    names = ["000001.png"]
    root = write_celeba(tmp_path / "celeba", names, _values(1), [0], [coordinates_image()])
    ds = celeba(str(root), cache=str(tmp_path / "cache"), image_size=143, crop_size=143)  # no resize
    left, top = (178 - 143) // 2, (218 - 143) // 2
    assert (left, top) == (17, 37)
    got = ds.images[0].numpy()
    np.testing.assert_array_equal(got[0], np.arange(top, top + 143)[:, None].repeat(143, axis=1))  # rows
    np.testing.assert_array_equal(got[1], np.arange(left, left + 143)[None, :].repeat(143, axis=0))  # columns


def test_a_split_is_selected_by_file_name_and_labels_follow_the_names(tmp_path):
    names = [f"{i:06d}.png" for i in range(1, 6)]
    values = _values(5)
    parts = [0, 0, 1, 0, 0]
    pixels = [np.full((218, 178, 3), 10 * (i + 1), np.uint8) for i in range(5)]
    # the text files list the images out of order: 5, 2, 4, 1, 3
    root = write_celeba(tmp_path / "celeba", names, values, parts, pixels, order=[4, 1, 3, 0, 2])
    ds = celeba(str(root), cache=str(tmp_path / "cache"), image_size=8, split="train")
    expected = ["000001.png", "000002.png", "000004.png", "000005.png"]
    assert list(ds.files) == expected
    rows = [names.index(n) for n in expected]
    np.testing.assert_array_equal(ds.labels, (values[rows] == 1).astype(np.int64))
    assert ds.images[:, 0, 4, 4].tolist() == [10 * (r + 1) for r in rows]
    everything = celeba(str(root), cache=str(tmp_path / "cache"), image_size=8, max_images=3)
    assert list(everything.files) == names[:3]
    np.testing.assert_array_equal(everything.labels, (values[:3] == 1).astype(np.int64))


def test_max_images_counts_within_the_split(tmp_path):
    names = [f"{i:06d}.png" for i in range(1, 6)]
    parts = [1, 0, 2, 0, 0]  # the first image by name is not in the train split
    pixels = [np.full((218, 178, 3), 10 * (i + 1), np.uint8) for i in range(5)]
    root = write_celeba(tmp_path / "celeba", names, _values(5), parts, pixels)
    ds = celeba(str(root), cache=str(tmp_path / "cache"), image_size=8, split="train", max_images=2)
    assert list(ds.files) == ["000002.png", "000004.png"]
    assert ds.images[:, 0, 0, 0].tolist() == [20, 40]


def test_crop_none_does_not_reuse_the_centre_crops_cache(tmp_path):
    names = ["000001.png"]
    image = np.full((218, 178, 3), 10, np.uint8)
    image[39:179, 19:159] = 240  # bright inside the 140 box, dark frame outside
    root = write_celeba(tmp_path / "celeba", names, _values(1), [0], [image])
    cache = str(tmp_path / "cache")
    centre = celeba(str(root), cache=cache, image_size=16)
    assert centre.images.min() >= 230
    whole = celeba(str(root), cache=cache, image_size=16, crop="none")
    expected = np.asarray(Image.fromarray(image).resize((16, 16), LANCZOS)).transpose(2, 0, 1)
    np.testing.assert_array_equal(whole.images[0].numpy(), expected)
    assert whole.cache_file != centre.cache_file


def test_a_zip_rewritten_with_its_size_and_time_kept_is_decoded_again(tmp_path):
    names = ["000001.png", "000002.png"]
    pixels = [np.full((218, 178, 3), 60, np.uint8), np.full((218, 178, 3), 70, np.uint8)]
    root = write_celeba(tmp_path / "celeba", names, _values(2), [0, 0], pixels, as_zip=True)
    archive = root / "img_align_celeba.zip"
    first = celeba(str(root), cache=str(tmp_path / "cache"), image_size=8)
    assert first.images[:, 0, 0, 0].tolist() == [60, 70]
    stat = archive.stat()
    time.sleep(0.01)  # the status-change time moves on
    # the same archive with other pixels: PNGs stored uncompressed in a stored zip keep every size
    other = tmp_path / "other"
    other.mkdir()
    for name, level in zip(names, (200, 210)):
        Image.fromarray(np.full((218, 178, 3), level, np.uint8)).save(other / name, compress_level=0)
    rewritten = tmp_path / "rewritten.zip"
    with zipfile.ZipFile(rewritten, "w", compression=zipfile.ZIP_STORED) as out:
        for name in names:
            out.write(other / name, f"img_align_celeba/{name}")
    assert rewritten.stat().st_size == stat.st_size
    archive.write_bytes(rewritten.read_bytes())
    os.utime(archive, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert (archive.stat().st_size, archive.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    again = celeba(str(root), cache=str(tmp_path / "cache"), image_size=8)
    assert again.images[:, 0, 0, 0].tolist() == [200, 210]


# ---------------------------------------------------------------------- from_torch / from_arrays
def test_from_torch_keeps_a_chw_image_whose_width_is_a_channel_count():
    image = torch.arange(3 * 5 * 3, dtype=torch.uint8).reshape(3, 5, 3)  # (C, H, W) with W = 3: first axis says C
    ds = from_torch([image, image + 1])
    assert ds.image_shape == (3, 5, 3)
    assert torch.equal(ds.images[0], image) and torch.equal(ds.images[1], image + 1)


def test_from_torch_bool_masks_are_white_on_black():
    mask = torch.zeros(1, 4, 4, dtype=torch.bool)
    mask[0, 1:3, 1:3] = True
    ds = from_torch([mask])
    assert ds.images[0].tolist() == (mask.to(torch.uint8) * 255).tolist()
    observed = ds.observe(torch.tensor([0]))
    assert observed.max() == 1.0 and observed.min() == 0.0


def test_from_torch_keeps_the_given_label_sizes():
    items = [(torch.zeros(1, 4, 4, dtype=torch.uint8), [i % 2, 1]) for i in range(4)]
    ds = from_torch(items, label_names=("odd", "one"), label_sizes=(3, 5))
    assert ds.factor_sizes == (3, 5) and ds.labels.tolist() == [[0, 1], [1, 1], [0, 1], [1, 1]]


def test_from_arrays_stores_a_sample_of_01_masks_at_full_brightness():
    masks = np.zeros((3, 6, 6), np.uint8)
    masks[:, 2:4, 2:4] = 1
    sample = from_arrays(masks)  # unlabelled: a sample
    observed = sample.observe(torch.arange(3))
    assert observed.max() == 1.0 and sample.scale == 1.0
    labelled = from_arrays(masks, np.array([[0], [0], [1]]))  # duplicated labels: a sample too
    assert labelled.observe(torch.arange(3)).max() == 1.0


def test_an_ambiguous_layout_is_asked_for_not_guessed():
    images = np.zeros((2, 3, 8, 3), np.uint8)  # NCHW with W = 3, or NHWC with H = 3
    with pytest.raises(ValueError, match="cannot tell whether images of shape"):
        from_arrays(images)
    assert from_arrays(images, layout="NCHW").image_shape == (3, 8, 3)


# ---------------------------------------------------------------------- variants
def test_color_sprites_draw_each_channel_of_the_colour_independently():
    images = torch.ones(6, 1, 4, 4, dtype=torch.uint8)
    ds = ColorSprites(IndexedImageDataset(images, ("a",), (6,), scale=1.0))
    x = ds.observe(torch.zeros(400, dtype=torch.int64), torch.Generator().manual_seed(0))
    colours = x[:, :, 0, 0]
    assert ((colours >= 0.5) & (colours <= 1)).all()
    assert (colours[:, 0] != colours[:, 1]).float().mean() > 0.99  # U(0.5, 1)^3: the channels differ
    correlation = np.corrcoef(colours.T.numpy())
    assert np.abs(correlation[np.triu_indices(3, 1)]).max() < 0.2  # and are independent


def test_the_scream_background_is_shrunk_with_lanczos(tmp_path):
    rng = np.random.default_rng(5)
    pixels = rng.integers(0, 256, (300, 420, 3), dtype=np.uint8)
    path = tmp_path / "background.png"
    Image.fromarray(pixels).save(path)
    got = load_background(path)
    expected = Image.fromarray(pixels)
    expected.thumbnail((350, 274), LANCZOS)  # aspect kept: 350 × 250
    assert got.shape == (250, 350, 3)
    np.testing.assert_array_equal(got, np.asarray(expected))


# ---------------------------------------------------------------------- what a checkpoint records of the images
def test_content_identity_is_the_hash_of_the_names_and_byte_sizes(tmp_path):
    import hashlib
    import json

    from disentangle.data.samples import content_identity

    root = tmp_path / "images"
    flat(root / "a.png", 10, mode="L")
    flat(root / "b" / "c.png", 20, size=8, mode="L")
    ds = build_folder(root, tmp_path, image_size=4)
    names = ["a.png", "b/c.png"]
    listing = json.dumps([[n, (root / n).stat().st_size] for n in names], separators=(",", ":"))
    assert content_identity(ds) == {"images": 2, "files_sha256": hashlib.sha256(listing.encode()).hexdigest()}
    # the same name with other bytes of another size is other data
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (4, 4), dtype=np.uint8)).save(root / "a.png")
    assert (root / "a.png").stat().st_size != json.loads(listing)[0][1]
    assert content_identity(build_folder(root, tmp_path, image_size=4)) != content_identity(ds)


# ---------------------------------------------------------------------- torch view, labellers
def test_the_torch_views_of_two_seeds_share_no_item_nuisance():
    """Item ``i`` of the view with seed ``s`` draws from ``(s, i)``: seed 1 is not seed 0 shifted by one item."""
    from disentangle.data.variants import NoisySprites

    noisy = NoisySprites(IndexedImageDataset(torch.zeros(24, 1, 8, 8, dtype=torch.uint8), ("a",), (24,), scale=1.0))
    zero, one = noisy.as_torch_dataset(seed=0), noisy.as_torch_dataset(seed=1)
    for i in range(1, 6):
        assert not torch.equal(zero[i][0], one[i - 1][0])
        assert not torch.equal(zero[i][0], one[i][0])
    assert torch.equal(zero[3][0], noisy.as_torch_dataset(seed=0)[3][0])


def test_the_partial_labeller_labels_distinct_factors():
    from disentangle.data.labels import LabelsSpec, apply_labeller

    sizes = (3, 6, 40, 32, 32)
    classes = np.stack([np.arange(50) % s for s in sizes], axis=1)
    spec = LabelsSpec(labeller="partial", num_observed=3)
    for seed in range(20):
        labels, label_sizes, kept = apply_labeller(classes, sizes, spec, np.random.default_rng(seed))
        assert len(set(kept)) == 3, kept  # drawn without replacement
        np.testing.assert_array_equal(labels, classes[:, list(kept)])
        assert label_sizes == tuple(sizes[j] for j in kept)
