"""Falcor3D and Isaac3D (NVlabs/High-res-disentanglement-datasets) on tiny files of their layout,
written here: ``images/{i:06d}.png`` and a labels ``.npy`` (``train-rec.labels`` / ``labels.npy``) of
normalised factor values, zipped under ``Falcor3D_down128/`` / ``Isaac3D_down128/`` or extracted.
Decoded pixels against Pillow, the factor order by value, the official grids' numbers, the cache,
and the errors."""
from __future__ import annotations

import zipfile

import numpy as np
import pytest
import torch
from PIL import Image

from disentangle.data import DATASETS, factor_strides
from disentangle.data.download import RemoteFile
from disentangle.data.falcor3d import FALCOR3D_FILE, Falcor3D
from disentangle.data.isaac3d import ISAAC3D_FILE, Isaac3D
from disentangle.errors import CorruptDataFileError, DataFileNotFoundError, DataPathNotFoundError

FALCOR_TINY = (2, 1, 3, 1, 1, 1, 2)  # 12 images
ISAAC_TINY = (2, 1, 1, 1, 1, 1, 3, 1, 2)  # 12 images
LAYOUT = {  # registered name: (labels file, archive folder)
    "falcor3d": ("train-rec.labels", "Falcor3D_down128"),
    "isaac3d": ("labels.npy", "Isaac3D_down128"),
}


def grid(sizes):
    return np.indices(sizes).reshape(len(sizes), -1).T.astype(np.int64)


def tiny_pixels(sizes, side):
    """RGB images (n, side, side, 3): random noise, with the factor classes of image i written
    into its first row (pixel k, channel 0 = 40 · class of factor k, as far as the row reaches) and
    i into pixel (1, 0)."""
    rows = grid(sizes)
    images = np.random.default_rng(7).integers(0, 256, (len(rows), side, side, 3), dtype=np.uint8)
    k = min(len(sizes), side)
    images[:, 0, :k, 0] = rows[:, :k] * 40
    images[:, 1, 0, 0] = np.arange(len(rows))
    return rows, images


def write_highres(root, name, sizes, *, side=32, zipped=True, order=None, drop=None):
    """The files of ``name`` (falcor3d / isaac3d) for a grid of ``sizes``: a zip holding
    ``<archive folder>/images/`` and the labels file, or that folder itself (``zipped=False``).
    ``order`` permutes the label rows (not the images); ``drop`` leaves one image out."""
    labels_file, folder_name = LAYOUT[name]
    rows, images = tiny_pixels(sizes, side)
    spans = np.maximum(np.asarray(sizes) - 1, 1)
    labels = rows / spans  # normalised values k / (size - 1), as the publisher's files hold them
    if order is not None:
        labels = labels[order]
    folder = root / folder_name
    (folder / "images").mkdir(parents=True, exist_ok=True)
    with open(folder / labels_file, "wb") as f:
        np.save(f, labels)
    for i, image in enumerate(images):
        if i != drop:
            Image.fromarray(image).save(folder / "images" / f"{i:06d}.png")
    if not zipped:
        return folder
    archive = root / f"{folder_name}.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for path in sorted(folder.rglob("*")):
            z.write(path, path.relative_to(root).as_posix())
    return archive


CASES = [("falcor3d", Falcor3D, FALCOR_TINY), ("isaac3d", Isaac3D, ISAAC_TINY)]


# ---------------------------------------------------------------------- the official numbers
def test_the_official_grids_are_the_readme_numbers():
    # Falcor3D: 233,280 images; index = li·46656 + lx·7776 + ly·1296 + lz·216 + cx·36 + cy·6 + cz
    assert Falcor3D.official_sizes == (5, 6, 6, 6, 6, 6, 6) and np.prod(Falcor3D.official_sizes) == 233_280
    assert factor_strides(Falcor3D.official_sizes).tolist() == [46656, 7776, 1296, 216, 36, 6, 1]
    assert Falcor3D.factor_names[0] == "lighting_intensity" and Falcor3D.factor_names[-1] == "camera_z_pos"
    # Isaac3D: 737,280 images; the README's strides 245760, 30720, ..., 4, 1 with dataset_demo.py's sizes
    assert Isaac3D.official_sizes == (3, 8, 5, 4, 4, 4, 6, 4, 4) and np.prod(Isaac3D.official_sizes) == 737_280
    assert factor_strides(Isaac3D.official_sizes).tolist() == [245760, 30720, 6144, 1536, 384, 96, 16, 4, 1]
    assert Isaac3D.factor_names[:3] == ("object_shape", "robot_x_move", "robot_y_move")
    assert {r.subdir for r in (FALCOR3D_FILE, ISAAC3D_FILE)} == {"falcor3d", "isaac3d"}
    for remote, drive_id in ((FALCOR3D_FILE, "1XAQfFK1x6cpN1eiovbP0hVfLTm5SsSoJ"),
                             (ISAAC3D_FILE, "1OmQ1G2wnm6eTsSFGTKFZZAh5D3nQTW1B")):
        assert drive_id in remote.url and remote.checksum is None and remote.size is None  # none published


# ---------------------------------------------------------------------- loading
@pytest.mark.parametrize("name, cls, sizes", CASES)
@pytest.mark.parametrize("zipped", [True, False])
def test_the_grid_comes_from_the_labels_and_the_pixels_are_the_files(tmp_path, name, cls, sizes, zipped):
    source = write_highres(tmp_path / "files", name, sizes, side=32, zipped=zipped)
    ds = DATASETS.build(name, path=str(source), image_size=32, strict=False, cache_dir=str(tmp_path / "cache"))
    assert isinstance(ds, cls) and ds.factor_names == cls.factor_names
    assert ds.factor_sizes == sizes and len(ds) == np.prod(sizes) and ds.image_shape == (3, 32, 32)
    assert ds.images.dtype == torch.uint8 and ds.scale == pytest.approx(1 / 255)
    # at the files' own size the stored images are the files' pixels, image i in grid position i
    _, pixels = tiny_pixels(sizes, 32)
    assert torch.equal(ds.images, torch.from_numpy(pixels).permute(0, 3, 1, 2))
    # the factor values are the labels' normalised values, per factor in its own order
    for k, size in enumerate(sizes):
        np.testing.assert_allclose(ds.factor_values[k], np.arange(size) / max(size - 1, 1))
    # factors -> observations by value: image i carries its own factor classes in its first row
    rng = np.random.default_rng(0)
    factors = ds.sample_factors(40, rng)
    obs = (ds.sample_observations_from_factors(factors, rng) * 255).round().long()
    assert obs[:, 0, 0, : len(sizes)].numpy().tolist() == (factors * 40).tolist()
    assert obs[:, 0, 1, 0].numpy().tolist() == (factors @ factor_strides(sizes)).tolist()


@pytest.mark.parametrize("name, cls, sizes", CASES)
def test_resized_images_are_pillows_lanczos(tmp_path, name, cls, sizes):
    folder = write_highres(tmp_path / "files", name, sizes, side=40, zipped=False)
    ds = cls(str(folder), image_size=16, strict=False, cache_dir=str(tmp_path / "cache"))
    assert ds.image_shape == (3, 16, 16)
    lanczos = getattr(Image, "Resampling", Image).LANCZOS
    for i in (0, 5, len(ds) - 1):
        with Image.open(folder / "images" / f"{i:06d}.png") as image:
            expected = np.asarray(image.convert("RGB").resize((16, 16), lanczos))
        assert np.array_equal(ds.images[i].permute(1, 2, 0).numpy(), expected)


def test_the_folder_may_hold_the_archive_folder_or_the_archive(tmp_path):
    folder = write_highres(tmp_path / "a", "falcor3d", FALCOR_TINY, side=8, zipped=False)
    from_parent = Falcor3D(str(folder.parent), image_size=8, strict=False, cache_dir=str(tmp_path / "c"))
    assert from_parent.factor_sizes == FALCOR_TINY
    archive = write_highres(tmp_path / "b", "isaac3d", ISAAC_TINY, side=8)
    (tmp_path / "b" / "Isaac3D_down128" / "labels.npy").unlink()  # only the zip is left complete
    assert archive.name == ISAAC3D_FILE.filename
    in_folder = Isaac3D(str(archive.parent), image_size=8, strict=False, cache_dir=str(tmp_path / "c"))
    assert in_folder.path == str(archive) and in_folder.factor_sizes == ISAAC_TINY


def test_the_decoded_images_are_cached_once_and_reused(tmp_path, monkeypatch):
    import disentangle.data.falcor3d as module

    archive = write_highres(tmp_path / "files", "isaac3d", ISAAC_TINY, side=24)
    first = Isaac3D(str(archive), image_size=12, strict=False, cache_dir=str(tmp_path / "cache"))
    cached = list((tmp_path / "cache" / "isaac3d").glob("*.npy"))
    assert len(cached) == 1 and first.cache_file == str(cached[0])
    assert np.array_equal(np.load(cached[0]), first.images.numpy())
    assert not list((tmp_path / "cache" / "isaac3d").glob(".*"))  # no temporary file left

    def no_decoding(*args, **kwargs):
        raise AssertionError("decoded again")

    monkeypatch.setattr(module, "decode_images", no_decoding)
    again = Isaac3D(str(archive), image_size=12, strict=False, cache_dir=str(tmp_path / "cache"))
    assert torch.equal(again.images, first.images)
    with pytest.raises(AssertionError, match="decoded again"):  # another size is another cache
        Isaac3D(str(archive), image_size=8, strict=False, cache_dir=str(tmp_path / "cache"))


# ---------------------------------------------------------------------- strict and errors
@pytest.mark.parametrize("name, cls, sizes", CASES)
def test_strict_requires_the_official_grid(tmp_path, monkeypatch, name, cls, sizes):
    archive = write_highres(tmp_path, name, sizes, side=8)
    with pytest.raises(CorruptDataFileError, match=r"strict=False"):
        cls(str(archive), image_size=8, cache_dir=str(tmp_path / "cache"))
    monkeypatch.setattr(cls, "official_sizes", sizes)  # a grid the loader takes as official
    assert cls(str(archive), image_size=8, cache_dir=str(tmp_path / "cache")).factor_sizes == sizes


def test_labels_out_of_grid_order_are_refused(tmp_path):
    n = int(np.prod(FALCOR_TINY))
    archive = write_highres(tmp_path, "falcor3d", FALCOR_TINY, side=8, order=np.random.default_rng(1).permutation(n))
    with pytest.raises(CorruptDataFileError, match="row-major"):
        Falcor3D(str(archive), image_size=8, strict=False, cache_dir=str(tmp_path / "cache"))


def test_labels_of_the_wrong_shape_or_kind_are_refused(tmp_path):
    folder = write_highres(tmp_path, "isaac3d", ISAAC_TINY, side=8, zipped=False)
    np.save(folder / "labels.npy", np.zeros((12, 7)))
    with pytest.raises(CorruptDataFileError, match=r"\(images, 9\)"):
        Isaac3D(str(folder), image_size=8, strict=False, cache_dir=str(tmp_path / "cache"))
    (folder / "labels.npy").write_bytes(b"not a numpy file")
    with pytest.raises(CorruptDataFileError, match="labels.npy"):
        Isaac3D(str(folder), image_size=8, strict=False, cache_dir=str(tmp_path / "cache"))


def test_a_missing_image_is_named(tmp_path):
    archive = write_highres(tmp_path, "falcor3d", FALCOR_TINY, side=8, drop=5)
    with pytest.raises(CorruptDataFileError, match="000005.png"):
        Falcor3D(str(archive), image_size=8, strict=False, cache_dir=str(tmp_path / "cache"))


def test_an_unreadable_image_or_archive_is_named(tmp_path):
    folder = write_highres(tmp_path, "falcor3d", FALCOR_TINY, side=8, zipped=False)
    (folder / "images" / "000003.png").write_bytes(b"\x89PNG truncated")
    with pytest.raises(CorruptDataFileError, match="000003.png"):
        Falcor3D(str(folder), image_size=8, strict=False, cache_dir=str(tmp_path / "cache"))
    bad = tmp_path / "Falcor3D_down128.zip"
    bad.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(CorruptDataFileError, match="Falcor3D_down128.zip"):
        Falcor3D(str(bad), strict=False, cache_dir=str(tmp_path / "cache"))
    other = tmp_path / "other.zip"
    with zipfile.ZipFile(other, "w") as z:
        z.writestr("something/else.txt", "x")
    with pytest.raises(CorruptDataFileError, match="holds no train-rec.labels"):
        Falcor3D(str(other), strict=False, cache_dir=str(tmp_path / "cache"))


def test_missing_paths_and_the_offline_cache(tmp_path):
    with pytest.raises(DataPathNotFoundError, match="does not exist"):
        Falcor3D(str(tmp_path / "nowhere"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataPathNotFoundError, match="images/ with train-rec.labels"):
        Falcor3D(str(tmp_path / "empty"))
    with pytest.raises(DataFileNotFoundError) as err:
        Isaac3D(cache_dir=str(tmp_path / "cache"), download=False)
    message = str(err.value)
    assert ISAAC3D_FILE.url in message and str(tmp_path / "cache" / "isaac3d" / "Isaac3D_down128.zip") in message
    assert "data.path" in message


def test_a_download_that_is_not_a_zip_is_deleted(tmp_path, monkeypatch):
    """Google Drive answers a popular file with an HTML page; no checksum is published to catch
    it, so the loader checks that the download is a zip archive."""
    page = tmp_path / "page.html"
    page.write_text("<html>Google Drive - Virus scan warning</html>")
    remote = RemoteFile(url=page.as_uri(), filename=FALCOR3D_FILE.filename, subdir="falcor3d")
    monkeypatch.setattr(Falcor3D, "files", (remote,))
    with pytest.raises(DataFileNotFoundError, match="not a zip archive"):
        Falcor3D(cache_dir=str(tmp_path / "cache"))
    assert not (tmp_path / "cache" / "falcor3d" / FALCOR3D_FILE.filename).exists()
    # a real zip of the layout is downloaded, kept and read
    write_highres(tmp_path / "src", "falcor3d", FALCOR_TINY, side=8)
    remote = RemoteFile(url=(tmp_path / "src" / "Falcor3D_down128.zip").as_uri(), filename=FALCOR3D_FILE.filename,
                        subdir="falcor3d")
    monkeypatch.setattr(Falcor3D, "files", (remote,))
    ds = Falcor3D(image_size=8, strict=False, cache_dir=str(tmp_path / "cache"))
    assert ds.factor_sizes == FALCOR_TINY and ds.path == str(tmp_path / "cache" / "falcor3d" / FALCOR3D_FILE.filename)


def test_image_size_is_checked_when_the_config_is_read():
    from disentangle.config import load_config
    from disentangle.errors import ConfigError

    assert load_config(None, ["data.name=falcor3d"]).data.params["image_size"] == 128
    with pytest.raises(ConfigError, match="data.image_size"):
        load_config(None, ["data.name=isaac3d", "data.image_size=0"])
