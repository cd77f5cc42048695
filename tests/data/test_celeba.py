"""``data.name: celeba`` on tiny files of the official formats (178×218 JPEGs in a folder and in a
zip, ``list_attr_celeba.txt``, ``list_eval_partition.txt``): labels by value, splits, the crop box by
value, zip = folder, the cache, and one paragraph for each malformed or missing file."""
from __future__ import annotations

import io
import os
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from disentangle.data import SampleDataset, build_dataset
from disentangle.data import celeba as celeba_module
from disentangle.data import image_folder as folder_module
from disentangle.data.celeba import CELEBA_FILES, celeba, download_celeba
from disentangle.errors import CorruptDataFileError, DataPathNotFoundError, ParameterError

LANCZOS = getattr(Image, "Resampling", Image).LANCZOS
ATTRIBUTES = (
    "5_o_Clock_Shadow Arched_Eyebrows Attractive Bags_Under_Eyes Bald Bangs Big_Lips Big_Nose Black_Hair "
    "Blond_Hair Blurry Brown_Hair Bushy_Eyebrows Chubby Double_Chin Eyeglasses Goatee Gray_Hair Heavy_Makeup "
    "High_Cheekbones Male Mouth_Slightly_Open Mustache Narrow_Eyes No_Beard Oval_Face Pale_Skin Pointy_Nose "
    "Receding_Hairline Rosy_Cheeks Sideburns Smiling Straight_Hair Wavy_Hair Wearing_Earrings Wearing_Hat "
    "Wearing_Lipstick Wearing_Necklace Wearing_Necktie Young"
).split()
N = 7
NAMES = [f"{i:06d}.jpg" for i in range(1, N + 1)]
PARTITION = [0, 0, 1, 2, 0, 1, 2]  # train: 1, 2, 5; valid: 3, 6; test: 4, 7
#: each image's attributes: image i (0-based) has attribute j set when bit (i + j) % 3 == 0
VALUES = np.where((np.arange(N)[:, None] + np.arange(40)[None, :]) % 3 == 0, 1, -1)


def face(index: int) -> np.ndarray:
    """A 178×218 picture: dark outside the 140×140 centre box (19, 39)-(159, 179), a bright square
    inside it, and the image's index in the green channel of the box."""
    image = np.full((218, 178, 3), 10, np.uint8)
    image[39:179, 19:159] = (240, 200 - 20 * index, 230)
    return image


def attribute_text(names=NAMES, values=VALUES, count=None) -> str:
    lines = [str(len(names) if count is None else count), " ".join(ATTRIBUTES) + " "]
    for name, row in zip(names, values):
        lines.append(name + " " + " ".join(f"{v:>2}" for v in row))
    return "\n".join(lines) + "\n"


def partition_text(names=NAMES, parts=PARTITION) -> str:
    return "".join(f"{name} {part}\n" for name, part in zip(names, parts))


def write_celeba(root: Path, *, as_zip: bool = False) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    folder = root / "img_align_celeba"
    folder.mkdir(exist_ok=True)
    for i, name in enumerate(NAMES):
        Image.fromarray(face(i)).save(folder / name, quality=100, subsampling=0)
    (root / "list_attr_celeba.txt").write_text(attribute_text())
    (root / "list_eval_partition.txt").write_text(partition_text())
    if as_zip:
        with zipfile.ZipFile(root / "img_align_celeba.zip", "w") as archive:
            for name in NAMES:
                archive.write(folder / name, f"img_align_celeba/{name}")
        for name in NAMES:
            (folder / name).unlink()
        folder.rmdir()
    return root


@pytest.fixture
def celeba_folder(tmp_path):
    return write_celeba(tmp_path / "celeba")


def build(root, tmp_path, **kwargs) -> SampleDataset:
    return celeba(str(root), cache=str(tmp_path / "cache"), **kwargs)


def one_paragraph(err: pytest.ExceptionInfo, *words: str) -> str:
    message = str(err.value)
    assert "\n" not in message, message
    for word in words:
        assert word in message, (word, message)
    return message


# ---------------------------------------------------------------------- labels and splits
def test_labels_are_the_40_attributes_by_value(celeba_folder, tmp_path):
    ds = build(celeba_folder, tmp_path, image_size=16)
    assert isinstance(ds, SampleDataset) and ds.labelled and len(ds) == N
    assert ds.factor_names == tuple(ATTRIBUTES) and ds.factor_sizes == (2,) * 40
    assert ds.files == tuple(NAMES) and ds.image_shape == (3, 16, 16)
    np.testing.assert_array_equal(ds.labels, (VALUES == 1).astype(np.int64))
    np.testing.assert_array_equal(ds.indices_to_factors(np.array([3, 0])), ds.labels[[3, 0]])
    assert ds.labels[0, 0] == 1 and ds.labels[0, 1] == 0 and ds.labels[1, 2] == 1  # 1 -> 1, -1 -> 0


@pytest.mark.parametrize("split, expected", [
    ("train", ["000001.jpg", "000002.jpg", "000005.jpg"]),
    ("valid", ["000003.jpg", "000006.jpg"]),
    ("test", ["000004.jpg", "000007.jpg"]),
    ("all", NAMES),
])
def test_splits_follow_the_partition_file(celeba_folder, tmp_path, split, expected):
    ds = build(celeba_folder, tmp_path, image_size=8, split=split)
    assert list(ds.files) == expected
    rows = [NAMES.index(name) for name in expected]
    np.testing.assert_array_equal(ds.labels, (VALUES[rows] == 1).astype(np.int64))


def test_max_images_takes_the_first_by_name_after_the_split(celeba_folder, tmp_path):
    ds = build(celeba_folder, tmp_path, image_size=8, split="train", max_images=2)
    assert ds.files == ("000001.jpg", "000002.jpg")


# ---------------------------------------------------------------------- the crop
def test_the_crop_box_by_value(celeba_folder, tmp_path):
    # crop 140 at full size: exactly the bright square; one pixel more on each side shows the dark frame
    exact = build(celeba_folder, tmp_path, image_size=140, max_images=2)
    assert exact.image_shape == (3, 140, 140)
    first = exact.images[0].numpy().astype(int)
    assert abs(first[0] - 240).max() <= 3 and abs(first[1] - 200).max() <= 3 and abs(first[2] - 230).max() <= 3
    assert abs(exact.images[1, 1].numpy().astype(int) - 180).max() <= 3
    wider = build(celeba_folder, tmp_path, image_size=142, crop_size=142, max_images=1).images[0].numpy()
    for border in (wider[:, 0, :], wider[:, -1, :], wider[:, :, 0], wider[:, :, -1]):
        assert border.max() <= 25  # the dark frame
    assert wider[:, 1:-1, 1:-1].min() >= 170


@pytest.mark.parametrize("crop_size", [140, 148])
def test_decoded_pixels_equal_pillows_crop_and_resize(celeba_folder, tmp_path, crop_size):
    ds = build(celeba_folder, tmp_path, image_size=64, crop_size=crop_size)
    left, top = (178 - crop_size) // 2, (218 - crop_size) // 2
    assert (left, top) == ((19, 39) if crop_size == 140 else (15, 35))
    for i, name in enumerate(NAMES):
        with Image.open(celeba_folder / "img_align_celeba" / name) as image:
            box = image.convert("RGB").crop((left, top, left + crop_size, top + crop_size))
            expected = np.asarray(box.resize((64, 64), LANCZOS)).transpose(2, 0, 1)
        np.testing.assert_array_equal(ds.images[i].numpy(), expected, err_msg=name)


def test_crop_none_resizes_the_whole_image(celeba_folder, tmp_path):
    ds = build(celeba_folder, tmp_path, image_size=32, crop="none", max_images=1)
    with Image.open(celeba_folder / "img_align_celeba" / NAMES[0]) as image:
        expected = np.asarray(image.convert("RGB").resize((32, 32), LANCZOS)).transpose(2, 0, 1)
    np.testing.assert_array_equal(ds.images[0].numpy(), expected)
    assert ds.images[0, :, 0, 0].max() <= 25  # the dark frame is kept


# ---------------------------------------------------------------------- zip, cache
def test_the_zip_gives_the_arrays_of_the_folder(tmp_path):
    folder = build(write_celeba(tmp_path / "as_folder"), tmp_path, image_size=16, split="valid")
    archive_root = write_celeba(tmp_path / "as_zip", as_zip=True)
    assert not (archive_root / "img_align_celeba").exists()
    zipped = build(archive_root, tmp_path, image_size=16, split="valid")
    assert torch.equal(folder.images, zipped.images) and np.array_equal(folder.labels, zipped.labels)
    assert folder.files == zipped.files


def test_the_decoded_images_are_cached(tmp_path, monkeypatch):
    root = write_celeba(tmp_path / "c", as_zip=True)
    first = build(root, tmp_path, image_size=16)

    def no_decoding(source):
        raise AssertionError("decoded although the cache holds these images")

    monkeypatch.setattr(folder_module, "decode_image", no_decoding)
    again = build(root, tmp_path, image_size=16)
    assert torch.equal(first.images, again.images) and np.array_equal(first.labels, again.labels)
    with pytest.raises(AssertionError, match="decoded although"):
        build(root, tmp_path, image_size=16, crop_size=148)


def test_a_file_rewritten_with_its_size_and_time_kept_is_decoded_again(tmp_path):
    """``cp -p`` or ``rsync -a`` of other pixels of the same size: the status-change time keys the
    cache too, as an image folder's does."""
    root = write_celeba(tmp_path / "c")
    first = build(root, tmp_path, image_size=16)
    target = root / "img_align_celeba" / "000001.jpg"
    stat = target.stat()
    time.sleep(0.01)  # the status-change time moves on
    # a black JPEG padded to the old size (a JPEG reader stops at the end-of-image marker)
    black = io.BytesIO()
    Image.fromarray(np.zeros((218, 178, 3), np.uint8)).save(black, format="JPEG", quality=100)
    assert len(black.getvalue()) <= stat.st_size
    target.write_bytes(black.getvalue().ljust(stat.st_size, b"\0"))
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert (target.stat().st_size, target.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    again = build(root, tmp_path, image_size=16)
    assert again.cache_file != first.cache_file
    assert again.images[0].float().mean() < 5 < first.images[0].float().mean()


def test_through_build_dataset_with_the_official_subfolders(tmp_path, monkeypatch):
    root = write_celeba(tmp_path / "drive", as_zip=True)
    for name, sub in (("img_align_celeba.zip", "Img"), ("list_attr_celeba.txt", "Anno"),
                      ("list_eval_partition.txt", "Eval")):
        (root / sub).mkdir()
        (root / name).rename(root / sub / name)
    monkeypatch.setenv("DISENTANGLE_DATA", str(tmp_path / "cache_root"))
    ds = build_dataset({"name": "celeba", "path": str(root), "split": "test", "image_size": 8})
    assert ds.files == ("000004.jpg", "000007.jpg") and ds.image_shape == (3, 8, 8)
    assert Path(ds.cache_file).parent == tmp_path / "cache_root" / "celeba"


@pytest.mark.parametrize("layout", ["Img/img_align_celeba", "img_align_celeba/img_align_celeba"])
def test_the_images_extracted_where_the_archive_lay_are_found(tmp_path, layout):
    """The Drive folder's Img/ zip extracted in place (and the zip deleted), or an archive extracted
    into a folder of its own name (Kaggle's): the same images as the official layout."""
    reference = build(write_celeba(tmp_path / "official"), tmp_path, image_size=16)
    root = write_celeba(tmp_path / "moved")
    (root / "img_align_celeba").rename(tmp_path / "images")
    (root / layout).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "images").rename(root / layout)
    moved = build(root, tmp_path, image_size=16)
    assert torch.equal(reference.images, moved.images) and moved.files == reference.files


# ---------------------------------------------------------------------- bad files
def _rewrite(root: Path, name: str, text: str) -> None:
    (root / name).write_text(text)


@pytest.mark.parametrize("text, words", [
    (attribute_text().replace("000003.jpg -1", "000003.jpg  0"), ("line 5", "1 or -1")),
    (attribute_text().replace("000003.jpg", "000003.jpg  1"), ("line 5", "40 values")),
    (attribute_text(count="seven"), ("line 1", "number of images")),
    (attribute_text(count=9), ("announces 9 images", "7 rows")),
    (attribute_text(names=[*NAMES[:3], NAMES[2], *NAMES[4:]]), ("line 6 repeats 000003.jpg", "line 5")),
])
def test_a_malformed_attribute_file_names_the_line(celeba_folder, tmp_path, text, words):
    assert text != attribute_text()
    _rewrite(celeba_folder, "list_attr_celeba.txt", text)
    with pytest.raises(CorruptDataFileError) as err:
        build(celeba_folder, tmp_path, image_size=8)
    one_paragraph(err, "list_attr_celeba.txt", *words)
    assert not (tmp_path / "cache").exists()


def test_an_image_without_a_row_and_a_row_without_an_image(celeba_folder, tmp_path):
    Image.fromarray(face(0)).save(celeba_folder / "img_align_celeba" / "000099.jpg")
    with pytest.raises(CorruptDataFileError) as err:
        build(celeba_folder, tmp_path, image_size=8)
    one_paragraph(err, "000099.jpg", "no row in", "list_attr_celeba.txt")
    (celeba_folder / "img_align_celeba" / "000099.jpg").unlink()
    (celeba_folder / "img_align_celeba" / "000005.jpg").unlink()
    with pytest.raises(DataPathNotFoundError) as err:
        build(celeba_folder, tmp_path, image_size=8)
    one_paragraph(err, "000005.jpg (line 7)", "not in", "img_align_celeba")
    build(celeba_folder, tmp_path, image_size=8, split="valid")  # a split without it is fine


@pytest.mark.parametrize("text, words", [
    (partition_text().replace("000002.jpg 0", "000002.jpg 3"), ("line 2", "0 (train), 1 (valid) or 2 (test)")),
    (partition_text() + "000123.jpg 0\n", ("line 8 names 000123.jpg", "no row in")),
    (partition_text(names=NAMES[:-1], parts=PARTITION[:-1]), ("line 9 names 000007.jpg", "not in")),
])
def test_a_malformed_partition_file_names_the_line(celeba_folder, tmp_path, text, words):
    assert text != partition_text()
    _rewrite(celeba_folder, "list_eval_partition.txt", text)
    with pytest.raises(CorruptDataFileError) as err:
        build(celeba_folder, tmp_path, image_size=8, split="train")
    one_paragraph(err, *words)
    build(celeba_folder, tmp_path, image_size=8, split="all")  # split all does not read it


def test_missing_files_are_one_paragraph(tmp_path):
    root = write_celeba(tmp_path / "c")
    with pytest.raises(DataPathNotFoundError) as err:
        build(tmp_path / "nowhere", tmp_path)
    one_paragraph(err, "does not exist", "data.path", "img_align_celeba.zip", "mmlab.ie.cuhk.edu.hk")
    (root / "list_eval_partition.txt").unlink()
    with pytest.raises(DataPathNotFoundError) as err:
        build(root, tmp_path, split="test")
    one_paragraph(err, "list_eval_partition.txt", "split='test'")
    (root / "list_attr_celeba.txt").unlink()
    with pytest.raises(DataPathNotFoundError) as err:
        build(root, tmp_path)
    one_paragraph(err, "no list_attr_celeba.txt", "Anno/")
    for name in NAMES:
        (root / "img_align_celeba" / name).unlink()
    (root / "img_align_celeba").rmdir()
    (root / "list_attr_celeba.txt").write_text(attribute_text())
    with pytest.raises(DataPathNotFoundError) as err:
        build(root, tmp_path)
    one_paragraph(err, "neither img_align_celeba/ nor img_align_celeba.zip")
    (root / "img_align_celeba.zip").write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(CorruptDataFileError) as err:
        build(root, tmp_path)
    one_paragraph(err, "img_align_celeba.zip", "zip archive", "corrupt")
    assert not (tmp_path / "cache").exists()


def test_an_unreadable_image_is_an_error_or_skipped_with_its_labels(celeba_folder, tmp_path):
    (celeba_folder / "img_align_celeba" / "000002.jpg").write_bytes(b"\xff\xd8\xff not a jpeg")
    with pytest.raises(CorruptDataFileError) as err:
        build(celeba_folder, tmp_path, image_size=8)
    one_paragraph(err, "1 of the 7 image files", "000002.jpg", "skip_unreadable")
    ds = build(celeba_folder, tmp_path, image_size=8, skip_unreadable=True)
    assert "000002.jpg" not in ds.files and len(ds) == 6
    np.testing.assert_array_equal(ds.labels, (VALUES[[0, 2, 3, 4, 5, 6]] == 1).astype(np.int64))


@pytest.mark.parametrize("params, words", [
    ({"split": "val"}, ("split is 'val'", "'valid'")),
    ({"crop": "centre"}, ("crop is 'centre'", "'center'", "'none'")),
    ({"crop_size": 200}, ("crop_size must be between 1 and 178", "178×218")),
    ({"image_size": 0}, ("image_size must be an integer >= 1",)),
    ({"max_images": 0}, ("max_images must be an integer >= 1",)),
])
def test_bad_values_are_one_paragraph(tmp_path, params, words):
    with pytest.raises(ParameterError) as err:
        build(tmp_path / "not_there", tmp_path, **params)
    one_paragraph(err, *words)


# ---------------------------------------------------------------------- the download (no internet here)
def test_download_fetches_the_official_files_with_their_checksums(tmp_path, monkeypatch):
    calls = []

    def fake_download(url, dest, checksum=None, **kwargs):
        calls.append((url, Path(dest).name, checksum))
        Path(dest).write_bytes(b"x")
        return Path(dest)

    monkeypatch.setattr(celeba_module, "download_url", fake_download)
    (tmp_path / "list_eval_partition.txt").write_text(partition_text())  # already there: kept
    assert download_celeba(tmp_path, progress=False) == tmp_path
    assert [name for _, name, _ in calls] == ["img_align_celeba.zip", "list_attr_celeba.txt"]
    assert all(url.startswith("https://drive.usercontent.google.com/") and checksum.startswith("md5:")
               for url, _, checksum in calls)
    assert {f.filename for f in CELEBA_FILES} == {"img_align_celeba.zip", "list_attr_celeba.txt",
                                                  "list_eval_partition.txt"}


@pytest.mark.parametrize("given_path", [True, False])
def test_download_true_fetches_into_data_path_or_the_cache(tmp_path, monkeypatch, given_path):
    """``data.download: true`` with ``data.path`` set (configs/celeba.yaml sets one) downloads there;
    without it, into the cache root; files already there are not fetched."""
    fetched = []

    def fake_download_celeba(root, **kwargs):
        fetched.append(Path(root))
        write_celeba(Path(root))
        return Path(root)

    monkeypatch.setattr(celeba_module, "download_celeba", fake_download_celeba)
    monkeypatch.setenv("DISENTANGLE_DATA", str(tmp_path / "cache_root"))
    target = tmp_path / "new" / "celeba" if given_path else tmp_path / "cache_root" / "celeba"
    path = str(target) if given_path else None
    ds = celeba(path, image_size=16, split="valid", download=True, cache=str(tmp_path / "cache"))
    assert fetched == [target] and ds.files == ("000003.jpg", "000006.jpg")
    celeba(path, image_size=16, split="valid", download=True, cache=str(tmp_path / "cache"))
    assert fetched == [target]  # all there: nothing fetched
    # the Drive layout, unpacked in place (Anno/, Eval/, Img/img_align_celeba/): all there too
    drive = tmp_path / "drive"
    write_celeba(drive)
    for name, sub in (("list_attr_celeba.txt", "Anno"), ("list_eval_partition.txt", "Eval"), ("img_align_celeba", "Img")):
        (drive / sub).mkdir()
        (drive / name).rename(drive / sub / name)
    celeba(str(drive), image_size=16, split="valid", download=True, cache=str(tmp_path / "cache"))
    assert fetched == [target]


def test_the_shipped_celeba_config_trains_as_the_guide_runs_it(tmp_path, monkeypatch, one_thread):
    """docs/guides/own-data.md: ``python -m disentangle.train --config configs/celeba.yaml
    data.path=...`` (its official train split: images 1, 2 and 5, with their labels)."""
    from disentangle import load
    from disentangle.train import main

    root = write_celeba(tmp_path / "celeba")
    monkeypatch.setenv("DISENTANGLE_DATA", str(tmp_path / "cache_root"))
    run = tmp_path / "run"
    assert main(["--config", "celeba", f"data.path={root}", "train.steps=2", "train.batch_size=4",
                 "train.device=cpu", "train.progress=false", "train.traversals=false", f"train.out_dir={run}",
                 "--quiet"]) == 0
    model = load(run)
    assert model.config["data"]["split"] == "train" and model.trained_steps == 2
    ds = build_dataset(model.config["data"])
    assert ds.files == ("000001.jpg", "000002.jpg", "000005.jpg") and ds.image_shape == (3, 64, 64)
    assert np.array_equal(ds.labels, (VALUES[[0, 1, 4]] + 1) // 2)
