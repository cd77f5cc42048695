"""``data.name: image_folder``: the pixels by value against Pillow's own decoding, every image mode,
the decoded cache (reuse, invalidation, interrupted builds), unreadable files, symlink loops, every
bad input as one paragraph before anything is created, and a short training run."""
from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image, ImageOps

from disentangle.data import SampleDataset, build_dataset
from disentangle.data import image_folder as folder_module
from disentangle.data.image_folder import image_folder, list_images
from disentangle.errors import ConfigError, CorruptDataFileError, DataPathNotFoundError, InputError, ParameterError

LANCZOS = getattr(Image, "Resampling", Image).LANCZOS
RNG = np.random.default_rng(0)


def noise(height: int, width: int, channels: int = 3) -> np.ndarray:
    shape = (height, width) if channels == 1 else (height, width, channels)
    return RNG.integers(0, 256, shape, dtype=np.uint8)


def pillow_reference(path: Path, size: int, mode: str = "RGB") -> np.ndarray:
    """What the loader must give, written with Pillow alone: decode, EXIF transpose, convert,
    resize the shorter side to ``size`` (Lanczos), centre crop; as (C, H, W)."""
    with Image.open(path) as image:
        image = ImageOps.exif_transpose(image).convert(mode)
    w, h = image.size
    new = (size, int(size * h / w)) if w <= h else (int(size * w / h), size)
    if new != (w, h):
        image = image.resize(new, LANCZOS)
    left, top = int(round((new[0] - size) / 2.0)), int(round((new[1] - size) / 2.0))
    array = np.asarray(image.crop((left, top, left + size, top + size)))
    return array[None] if array.ndim == 2 else array.transpose(2, 0, 1)


def build(path, tmp_path, **kwargs) -> SampleDataset:
    return image_folder(str(path), cache=str(tmp_path / "cache"), **kwargs)


def one_paragraph(err: pytest.ExceptionInfo, *words: str) -> str:
    message = str(err.value)
    assert "\n" not in message, message
    for word in words:
        assert word in message, (word, message)
    return message


# ---------------------------------------------------------------------- pixels by value
def test_pixels_equal_pillows_decode_resize_and_centre_crop(tmp_path):
    root = tmp_path / "photos"
    (root / "nested" / "deeper").mkdir(parents=True)
    files = {
        "a_wide.png": noise(30, 50), "b_tall.PNG": noise(47, 20), "c_square.bmp": noise(16, 16),
        "nested/d_small.webp": noise(9, 12), "nested/deeper/e.JPG": noise(40, 33), "f.jpeg": noise(21, 64),
    }
    for name, array in files.items():
        options = {"lossless": True} if name.endswith("webp") else {}
        Image.fromarray(array).save(root / name, **options)
    (root / "notes.txt").write_text("not an image")
    (root / ".hidden.png").write_bytes(b"hidden files are left out")
    ds = build(root, tmp_path, image_size=16)
    assert isinstance(ds, SampleDataset) and not ds.labelled and ds.image_shape == (3, 16, 16)
    assert ds.images.dtype == torch.uint8
    assert list(ds.files) == sorted(files)  # relative paths, sorted: deterministic
    for i, name in enumerate(ds.files):
        np.testing.assert_array_equal(ds.images[i].numpy(), pillow_reference(root / name, 16), err_msg=name)
    # the lossless ones also match by value where no resampling happens: c_square is 16x16 already
    np.testing.assert_array_equal(ds.images[ds.files.index("c_square.bmp")].numpy(),
                                  files["c_square.bmp"].transpose(2, 0, 1))


def test_the_crop_is_the_centre_of_the_resized_image(tmp_path):
    stripes = np.zeros((20, 40, 3), np.uint8)  # shorter side 20 = image_size: no resampling at all
    stripes[:, :10] = (255, 0, 0)
    stripes[:, 10:30] = (0, 255, 0)
    stripes[:, 30:] = (0, 0, 255)
    (tmp_path / "p").mkdir()
    Image.fromarray(stripes).save(tmp_path / "p" / "stripes.png")
    ds = build(tmp_path / "p", tmp_path, image_size=20)
    expected = np.broadcast_to(np.array([0, 255, 0], np.uint8)[:, None, None], (3, 20, 20))
    np.testing.assert_array_equal(ds.images[0].numpy(), expected)


def test_modes_are_converted_by_value(tmp_path):
    root = tmp_path / "modes"
    root.mkdir()
    size = 4
    # RGBA: composited on black, round(c * a / 255)
    rgba = np.zeros((size, size, 4), np.uint8)
    rgba[..., :3] = 200
    rgba[0, :, 3], rgba[1, :, 3], rgba[2:, :, 3] = 0, 128, 255
    Image.fromarray(rgba, "RGBA").save(root / "a_rgba.png")
    # a palette image, and one with a transparent entry
    palette = Image.new("P", (size, size))
    palette.putpalette([10, 20, 30, 200, 100, 50] + [0] * 762)
    palette.putdata([0, 1] * 8)
    palette.save(root / "b_palette.png")
    palette.save(root / "c_palette_transparent.png", transparency=1)
    # 16-bit grayscale, scaled by round(v * 255 / 65535) (Pillow's convert would clip at 255)
    sixteen = np.array([[0, 257, 32768, 65535]] * size, np.uint16)
    Image.fromarray(sixteen).save(root / "d_16bit.png")
    assert Image.open(root / "d_16bit.png").mode in ("I;16", "I")
    # CMYK JPEG, converted by Pillow
    Image.new("CMYK", (size, size), (0, 0, 0, 0)).save(root / "e_cmyk.jpg", quality=100)
    # EXIF orientation 6 (rotate 270): a 6x2 image stands up as 2x6
    tall = Image.fromarray(noise(2, 6))
    exif = Image.Exif()
    exif[0x0112] = 6
    tall.save(root / "f_exif.png", exif=exif)

    ds = build(root, tmp_path, image_size=size)
    by_name = {name: ds.images[i].numpy() for i, name in enumerate(ds.files)}
    assert ds.image_shape == (3, size, size)
    a = by_name["a_rgba.png"]
    assert (a[:, 0] == 0).all() and (a[:, 1] == round(200 * 128 / 255)).all() and (a[:, 2:] == 200).all()
    b = by_name["b_palette.png"]
    np.testing.assert_array_equal(b[:, 0, 0], [10, 20, 30])
    np.testing.assert_array_equal(b[:, 0, 1], [200, 100, 50])
    c = by_name["c_palette_transparent.png"]
    np.testing.assert_array_equal(c[:, 0, 0], [10, 20, 30])
    np.testing.assert_array_equal(c[:, 0, 1], [0, 0, 0])  # the transparent entry is black
    d = by_name["d_16bit.png"]
    np.testing.assert_array_equal(d[0, 0], [0, 1, 128, 255])
    assert (d[0] == d[1]).all() and (d[1] == d[2]).all()
    e = by_name["e_cmyk.jpg"]
    np.testing.assert_array_equal(e, pillow_reference(root / "e_cmyk.jpg", size))
    assert (e >= 250).all()  # no ink: white
    f = by_name["f_exif.png"]
    np.testing.assert_array_equal(f, pillow_reference(root / "f_exif.png", size))
    assert not np.array_equal(f, fit_without_exif(root / "f_exif.png", size))


def fit_without_exif(path: Path, size: int) -> np.ndarray:
    with Image.open(path) as image:
        array = np.asarray(ImageOps.fit(image.convert("RGB"), (size, size), LANCZOS))
    return array.transpose(2, 0, 1)


def test_channels_auto_one_and_three(tmp_path):
    gray = tmp_path / "gray"
    gray.mkdir()
    Image.fromarray(noise(12, 10, 1), "L").save(gray / "a.png")
    Image.fromarray(np.repeat(noise(8, 8, 1)[..., None], 3, axis=2), "RGB").save(gray / "b_rgb_but_gray.png")
    auto = build(gray, tmp_path, image_size=8)
    assert auto.image_shape == (1, 8, 8)
    np.testing.assert_array_equal(auto.images[0].numpy(), pillow_reference(gray / "a.png", 8, "L"))
    three = build(gray, tmp_path, image_size=8, channels=3)
    assert three.image_shape == (3, 8, 8)
    assert (three.images[:, 0] == auto.images[:, 0]).all() and (three.images[:, 2] == auto.images[:, 0]).all()

    Image.fromarray(noise(8, 8)).save(gray / "c_colour.png")
    mixed = build(gray, tmp_path, image_size=8)
    assert mixed.image_shape == (3, 8, 8)
    np.testing.assert_array_equal(mixed.images[0, 1].numpy(), auto.images[0, 0].numpy())
    luma = build(gray, tmp_path, image_size=8, channels=1)
    assert luma.image_shape == (1, 8, 8)
    np.testing.assert_array_equal(luma.images[2].numpy(), pillow_reference(gray / "c_colour.png", 8, "L"))


def test_threaded_decoding_gives_the_serial_result(tmp_path, monkeypatch):
    root = tmp_path / "many"
    root.mkdir()
    for i in range(70):
        Image.fromarray(noise(9 + i % 5, 11)).save(root / f"{i:03d}.png")
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    serial = build(root, tmp_path / "serial", image_size=8)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 3)
    threaded = build(root, tmp_path / "threaded", image_size=8)
    assert torch.equal(serial.images, threaded.images) and serial.files == threaded.files


# ---------------------------------------------------------------------- the cache
@pytest.fixture
def small_folder(tmp_path):
    root = tmp_path / "small"
    root.mkdir()
    for i in range(4):
        Image.fromarray(noise(10, 12)).save(root / f"{i}.png")
    return root


def _no_decoding(source):
    raise AssertionError("decoded although the cache holds these images")


def test_a_second_build_reads_the_cache_without_decoding(small_folder, tmp_path, monkeypatch):
    first = build(small_folder, tmp_path, image_size=8)
    assert Path(first.cache_file).is_file() and Path(first.cache_file).parent == tmp_path / "cache"
    monkeypatch.setattr(folder_module, "decode_image", _no_decoding)
    again = build(small_folder, tmp_path, image_size=8)
    assert torch.equal(first.images, again.images) and again.files == first.files
    with pytest.raises(AssertionError, match="decoded although"):  # other settings: another cache
        build(small_folder, tmp_path, image_size=6)


def test_the_default_cache_is_under_the_dataset_cache_root(small_folder, tmp_path, monkeypatch):
    monkeypatch.setenv("DISENTANGLE_DATA", str(tmp_path / "root"))
    ds = image_folder(str(small_folder), image_size=8)
    assert Path(ds.cache_file).parent == tmp_path / "root" / "image_folder"


@pytest.mark.parametrize("change", ["touch", "add", "remove", "rename", "rewritten, times restored"])
def test_any_change_of_a_file_invalidates_the_cache(small_folder, tmp_path, monkeypatch, change):
    target = small_folder / "1.png"
    if change == "rewritten, times restored":  # stored uncompressed: a rewrite keeps the size
        Image.open(target).convert("RGB").save(target, compress_level=0)
    first = build(small_folder, tmp_path, image_size=8)
    if change == "touch":
        stat = target.stat()
        os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    elif change == "rewritten, times restored":  # same size, same modification time (cp -p, rsync -a)
        stat = target.stat()
        time.sleep(0.01)  # the status-change time moves on
        Image.fromarray(255 - np.asarray(Image.open(target))).save(target, compress_level=0)
        os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        assert (target.stat().st_size, target.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    elif change == "add":
        Image.fromarray(noise(10, 12)).save(small_folder / "9.png")
    elif change == "remove":
        target.unlink()
    else:
        target.rename(small_folder / "7.png")
    calls = []
    decode = folder_module.decode_image
    monkeypatch.setattr(folder_module, "decode_image", lambda source: calls.append(source) or decode(source))
    second = build(small_folder, tmp_path, image_size=8)
    assert len(calls) == len(second)  # decoded again
    assert second.cache_file != first.cache_file
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == sorted(
        [Path(second.cache_file).name, Path(second.cache_file).with_suffix(".json").name])  # the stale one is gone


@pytest.mark.parametrize("interruption", [RuntimeError, KeyboardInterrupt])
def test_an_interrupted_build_leaves_nothing_a_later_run_trusts(small_folder, tmp_path, monkeypatch, interruption):
    decode = folder_module.decode_image
    calls = []

    def failing(source):
        calls.append(source)
        if len(calls) == 3:
            raise interruption("stopped mid-way")
        return decode(source)

    monkeypatch.setattr(folder_module, "decode_image", failing)
    with pytest.raises(interruption):
        build(small_folder, tmp_path, image_size=8)
    cache = tmp_path / "cache"
    assert not cache.exists() or not any(cache.iterdir())
    monkeypatch.setattr(folder_module, "decode_image", decode)
    rebuilt = build(small_folder, tmp_path, image_size=8)
    assert len(rebuilt) == 4 and Path(rebuilt.cache_file).is_file()


def test_a_damaged_cache_file_is_decoded_again(small_folder, tmp_path):
    first = build(small_folder, tmp_path, image_size=8)
    Path(first.cache_file).write_bytes(b"not a numpy file")
    again = build(small_folder, tmp_path, image_size=8)
    assert torch.equal(first.images, again.images)


# ---------------------------------------------------------------------- decoding into the cache file
def _mixed_folder(root: Path, *, gray_only: bool = False, broken: bool = True) -> Path:
    root.mkdir()
    for i in range(7):
        pixels = noise(9, 11, 1) if gray_only or i % 3 == 0 else noise(9, 11)
        Image.fromarray(pixels).save(root / f"{i}.png")
    if broken:
        (root / "3.png").write_text("not a PNG")  # a row left out of the file
    return root


@pytest.mark.parametrize("gray_only, broken, channels", [
    (False, False, "auto"), (False, True, "auto"), (True, False, "auto"), (True, True, "auto"),
    (False, True, 1), (True, False, 3),
])
def test_decoding_into_a_file_gives_the_in_memory_stack(tmp_path, monkeypatch, gray_only, broken, channels):
    root = _mixed_folder(tmp_path / "images", gray_only=gray_only, broken=broken)
    monkeypatch.setattr(folder_module, "_CHUNK_BYTES", 2 * 8 * 8)  # the rewrite copies in chunks of two rows
    items = [(f.name, (lambda p=root / f.name: p)) for f in list_images(root)[0]]

    def decode(into):
        return folder_module.decode_images(items, lambda image: folder_module.fit_square(image, 8), 8, channels,
                                           what="test", skip_unreadable=True, into=into)

    in_memory = decode(None)
    on_disk = decode(tmp_path / "stack.partial")
    assert isinstance(on_disk.images, np.memmap) and not isinstance(in_memory.images, np.memmap)
    assert on_disk.images.shape == in_memory.images.shape == (7 - broken, 1 if gray_only and channels != 3 or channels == 1 else 3, 8, 8)
    assert np.array_equal(on_disk.images, in_memory.images) and on_disk.names == in_memory.names
    assert np.array_equal(np.load(tmp_path / "stack.partial"), in_memory.images)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["images", "stack.partial"]  # no rewrite file left


def test_a_first_build_never_holds_the_whole_stack_in_memory(tmp_path, monkeypatch):
    import tracemalloc

    monkeypatch.setattr(folder_module, "_CHUNK_BYTES", 16 * 3 * 48 * 48)  # the rewrite's chunks: 16 rows

    root = tmp_path / "many"
    root.mkdir()
    for i in range(300):
        Image.fromarray(noise(48, 48)).save(root / f"{i:03d}.png")
    (root / "zz.png").write_text("not a PNG")  # forces the rewrite that leaves the row out
    stack_bytes = 300 * 3 * 48 * 48
    build(_mixed_folder(tmp_path / "warm-up"), tmp_path / "warm-up-cache", image_size=48)  # imports Pillow's plugins
    tracemalloc.start()
    try:
        streamed = build(root, tmp_path, image_size=48, placement="stream")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert streamed.stream and len(streamed) == 300
    # numpy's allocations are traced: no (N, C, H, W) array (the rest is the file list's Python objects)
    assert peak < stack_bytes / 3, (peak, stack_bytes)
    held = build(root, tmp_path / "again", image_size=48, placement="device")
    assert torch.equal(streamed.images, held.images)


def test_a_full_disk_while_decoding_falls_back_to_memory(small_folder, tmp_path, monkeypatch, caplog):
    import errno

    expected = build(small_folder, tmp_path / "reference", image_size=8).images
    write = folder_module._FileRows.put

    def full_disk(self, index, chw):
        if index == 2:
            raise folder_module.SpillError("could not write") from OSError(errno.ENOSPC, "No space left on device")
        write(self, index, chw)

    monkeypatch.setattr(folder_module._FileRows, "put", full_disk)
    with caplog.at_level(logging.WARNING, logger="disentangle.data.image_folder"):
        ds = build(small_folder, tmp_path, image_size=8)
    assert torch.equal(ds.images, expected)
    assert "No space left on device" in caplog.text and "decoding into memory" in caplog.text
    cache = tmp_path / "cache"
    assert not cache.exists() or not any(cache.iterdir())  # no partial file, no cache to trust


def test_an_unwritable_cache_folder_decodes_into_memory(small_folder, tmp_path, caplog):
    blocked = tmp_path / "cache"
    blocked.write_text("a file where the cache folder would be")  # mkdir fails as on a read-only disk
    with caplog.at_level(logging.WARNING, logger="disentangle.data.image_folder"):
        ds = build(small_folder, tmp_path, image_size=8)
    assert len(ds) == 4 and "decoding into memory" in caplog.text
    assert torch.equal(ds.images, build(small_folder, tmp_path / "elsewhere", image_size=8).images)
    assert blocked.read_text() == "a file where the cache folder would be"


def test_a_killed_builds_partial_file_is_deleted_by_the_next_build(small_folder, tmp_path):
    import subprocess
    import sys

    first = build(small_folder, tmp_path, image_size=8)
    stem = Path(first.cache_file).stem
    prefix = stem.rsplit("-", 1)[0]
    host = folder_module._host()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)  # a process that has ended
    left = tmp_path / "cache" / f"{prefix}-{'0' * 24}.{host}-{dead_pid}.partial"
    running = tmp_path / "cache" / f"{prefix}-{'1' * 24}.{host}-{os.getpid()}.partial"  # a build still going
    elsewhere = tmp_path / "cache" / f"{prefix}-{'2' * 24}.otherhost-{dead_pid}.partial"  # another machine's
    fresh = tmp_path / "cache" / f"{prefix}-{'3' * 24}.{host}-{dead_pid}.partial"  # written a moment ago
    hour_ago = time.time() - 3600
    for path in (left, running, elsewhere, fresh):
        path.write_bytes(b"half an image stack")
        if path is not fresh:
            os.utime(path, (hour_ago, hour_ago))
    Image.fromarray(noise(10, 12)).save(small_folder / "new.png")  # a new key: decoded again
    build(small_folder, tmp_path, image_size=8)
    # only a dead build's file, idle for a while (a live one in another container of this name writes on)
    assert not left.exists() and running.exists() and elsewhere.exists() and fresh.exists()


def test_a_killed_builds_partial_file_is_deleted_by_a_later_read_of_the_cache(small_folder, tmp_path, monkeypatch):
    """The build after the kill was too soon to delete it (written a moment before): a cache hit
    later deletes it, once idle, without decoding anything."""
    import subprocess
    import sys

    first = build(small_folder, tmp_path, image_size=8)
    prefix = Path(first.cache_file).stem.rsplit("-", 1)[0]
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    left = tmp_path / "cache" / f"{prefix}-{'0' * 24}.{folder_module._host()}-{int(dead.stdout)}.partial"
    left.write_bytes(b"half an image stack")
    monkeypatch.setattr(folder_module, "decode_image", lambda source: pytest.fail("decoded on a cache hit"))
    build(small_folder, tmp_path, image_size=8)
    assert left.exists()  # written a moment ago: maybe a build in another container of this host name
    hour_ago = time.time() - 3600
    os.utime(left, (hour_ago, hour_ago))
    again = build(small_folder, tmp_path, image_size=8)
    assert not left.exists() and torch.equal(again.images, first.images)


def test_a_full_disk_when_the_file_is_flushed_falls_back_to_memory(small_folder, tmp_path, monkeypatch, caplog):
    import errno

    expected = build(small_folder, tmp_path / "reference", image_size=8).images

    def no_space(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(folder_module.os, "fsync", no_space)  # the last rows reach the disk at finish
    with caplog.at_level(logging.WARNING, logger="disentangle.data.image_folder"):
        ds = build(small_folder, tmp_path, image_size=8)
    assert torch.equal(ds.images, expected) and "No space left on device" in caplog.text
    cache = tmp_path / "cache"
    assert not cache.exists() or not any(cache.iterdir())


# ---------------------------------------------------------------------- unreadable files
@pytest.fixture
def folder_with_broken_files(tmp_path):
    root = tmp_path / "broken"
    root.mkdir()
    Image.fromarray(noise(12, 12)).save(root / "good1.png")
    Image.fromarray(noise(12, 12)).save(root / "good2.jpg")
    Image.fromarray(noise(64, 64)).save(root / "truncated.jpg", quality=90)
    data = (root / "truncated.jpg").read_bytes()
    (root / "truncated.jpg").write_bytes(data[: len(data) // 2])
    Image.fromarray(noise(64, 64)).save(root / "truncated.png")
    data = (root / "truncated.png").read_bytes()
    (root / "truncated.png").write_bytes(data[: len(data) // 2])
    (root / "text.png").write_text("this is not a PNG")
    return root


def test_unreadable_files_are_skipped_counted_and_listed(folder_with_broken_files, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="disentangle.data.image_folder"):
        ds = build(folder_with_broken_files, tmp_path, image_size=8)
    assert ds.files == ("good1.png", "good2.jpg") and len(ds) == 2
    assert [name for name, _ in ds.skipped] == ["text.png", "truncated.jpg", "truncated.png"]
    warning = " ".join(r.getMessage() for r in caplog.records)
    assert "Skipped 3 of the 5 image files" in warning
    assert all(name in warning for name in ("text.png", "truncated.jpg", "truncated.png"))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="disentangle.data.image_folder"):
        build(folder_with_broken_files, tmp_path, image_size=8)  # from the cache: warned again
    assert "Skipped 3 of the 5" in caplog.text


@pytest.mark.parametrize("cached_first", [False, True])
def test_unreadable_files_are_an_error_when_not_skipped(folder_with_broken_files, tmp_path, cached_first):
    if cached_first:
        build(folder_with_broken_files, tmp_path, image_size=8)
    with pytest.raises(CorruptDataFileError) as err:
        build(folder_with_broken_files, tmp_path, image_size=8, skip_unreadable=False)
    one_paragraph(err, "3 of the 5 image files", "text.png", "truncated.jpg", "truncated.png", "skip_unreadable")


def test_a_folder_of_only_unreadable_files_is_an_error(tmp_path):
    root = tmp_path / "junk"
    root.mkdir()
    (root / "a.jpg").write_bytes(b"\xff\xd8\xff broken")
    (root / "b.webp").write_text("nope")
    with pytest.raises(CorruptDataFileError) as err:
        build(root, tmp_path, image_size=8)
    one_paragraph(err, "None of the 2 image files", "a.jpg", "b.webp")
    assert not (tmp_path / "cache").exists()


# ---------------------------------------------------------------------- links
def test_a_symlink_loop_terminates_and_each_folder_is_read_once(tmp_path):
    root = tmp_path / "linked"
    (root / "a").mkdir(parents=True)
    Image.fromarray(noise(8, 8)).save(root / "a" / "x.png")
    try:
        os.symlink(root, root / "a" / "loop")  # a/loop -> the folder itself
        os.symlink(root / "a", root / "b")  # a second way into a/
        os.symlink(root / "a" / "x.png", root / "y.png")  # a linked file counts
        os.symlink(root / "missing.png", root / "z.png")  # a broken link is an unreadable file
    except (OSError, NotImplementedError):
        pytest.skip("symbolic links are not available here")
    found, _ = list_images(root)
    names = [f.name for f in found]
    assert names == ["a/x.png", "y.png", "z.png"], names
    ds = build(root, tmp_path, image_size=8)
    assert ds.files == ("a/x.png", "y.png") and [n for n, _ in ds.skipped] == ["z.png"]
    assert torch.equal(ds.images[0], ds.images[1])


# ---------------------------------------------------------------------- bad input
def test_bad_paths_are_one_paragraph_before_anything_is_created(tmp_path):
    cache = tmp_path / "cache"
    missing = tmp_path / "nope"
    with pytest.raises(DataPathNotFoundError) as err:
        build(missing, tmp_path)
    one_paragraph(err, "data.path", str(missing), "does not exist", "folder of images")
    a_file = tmp_path / "photo.png"
    Image.fromarray(noise(8, 8)).save(a_file)
    with pytest.raises(InputError) as err:
        build(a_file, tmp_path)
    one_paragraph(err, "is a file, not a folder", "data.path")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataPathNotFoundError) as err:
        build(empty, tmp_path)
    one_paragraph(err, "is empty", ".png", ".jpg", ".webp")
    others = tmp_path / "others"
    (others / "sub").mkdir(parents=True)
    for name in ("notes.txt", "scan.tiff", "sub/movie.gif"):
        (others / name).write_text("x")
    with pytest.raises(DataPathNotFoundError) as err:
        build(others, tmp_path)
    one_paragraph(err, "holds no images", "notes.txt", "scan.tiff", "sub/movie.gif",
                  ".png, .jpg, .jpeg, .bmp, .webp")
    assert not cache.exists()


@pytest.mark.parametrize("params, words", [
    ({"channels": 2}, ("channels is 2", "Valid choices", "'auto'")),
    ({"channels": "rgb"}, ("channels is 'rgb'", "Valid choices")),
    ({"channels": True}, ("channels is True",)),
    ({"image_size": 0}, ("image_size must be an integer >= 1", "got 0")),
    ({"image_size": 2.5}, ("image_size must be an integer", "2.5")),
    ({"image_size": "64"}, ("image_size must be an integer", "'64'")),
])
def test_bad_values_are_one_paragraph_before_anything_is_read(tmp_path, params, words):
    with pytest.raises(ParameterError) as err:
        build(tmp_path / "not_even_there", tmp_path, **params)  # the value is checked first
    one_paragraph(err, *words)
    assert not (tmp_path / "cache").exists()


def test_bad_values_fail_when_the_config_loads(tmp_path):
    from disentangle.config import load_config

    with pytest.raises(ConfigError, match=r"data\.channels"):
        load_config(None, ["data.name=image_folder", f"data.path={tmp_path}", "data.channels=2"])
    with pytest.raises(ConfigError, match=r"data\.path"):
        load_config(None, ["data.name=image_folder"])


# ---------------------------------------------------------------------- through the library
def test_build_dataset_by_name(small_folder, tmp_path, monkeypatch):
    monkeypatch.setenv("DISENTANGLE_DATA", str(tmp_path / "root"))
    ds = build_dataset({"name": "image_folder", "path": str(small_folder)})
    assert isinstance(ds, SampleDataset) and ds.image_shape == (3, 64, 64) and len(ds) == 4
    batch = ds.sample_batch(5, torch.Generator().manual_seed(0))
    assert batch.shape == (5, 3, 64, 64) and 0.0 <= float(batch.min()) and float(batch.max()) <= 1.0


def test_trains_five_steps_from_a_config(tmp_path):
    from disentangle.config import load_config
    from disentangle.training import fit

    root = tmp_path / "faces"
    root.mkdir()
    for i in range(6):
        Image.fromarray(noise(70, 64 + 4 * i)).save(root / f"{i}.png")
    out = tmp_path / "run"
    overrides = {
        "data.name": "image_folder", "data.path": str(root), "data.cache": str(tmp_path / "cache"),
        "model.backbone": "conv64", "model.latent_dim": 3, "train.steps": 5, "train.batch_size": 4,
        "train.log_every": 5, "train.checkpoint_every": 5, "train.out_dir": str(out), "train.progress": "false",
        "train.device": "cpu", "train.traversals": "false",
    }
    run = fit(load_config(None, [f"{k}={v}" for k, v in overrides.items()]))
    assert (run.out_dir / "checkpoint.pt").is_file()
    state = torch.load(run.out_dir / "checkpoint.pt", weights_only=True)
    assert state["step"] == 5


def test_a_resume_whose_folder_moved_says_the_path_is_part_of_the_run(tmp_path, monkeypatch, capsys):
    """``data.path`` cannot change on resume (it is part of the run): the command says where a relative
    path is read from and how to point the old path at the data."""
    from disentangle.train import main

    rng = np.random.default_rng(0)
    (tmp_path / "imgs").mkdir()
    for i in range(6):
        Image.fromarray(rng.integers(0, 256, (20, 20), dtype=np.uint8)).save(tmp_path / "imgs" / f"{i}.png")
    monkeypatch.chdir(tmp_path)
    args = ["--quiet", "--config", "image_folder", "data.path=imgs", "data.image_size=16", f"data.cache={tmp_path / 'cache'}",
            "model.backbone=mlp", "model.hidden_sizes=[16]", "model.latent_dim=2", "train.batch_size=4",
            "train.device=cpu", "train.progress=false", "train.traversals=false", "train.out_dir=run"]
    assert main([*args, "train.steps=2"]) == 0
    (tmp_path / "imgs").rename(tmp_path / "moved")
    capsys.readouterr()
    assert main(["--quiet", "--resume", "run", "train.steps=4"]) == 2
    err = capsys.readouterr().err
    assert f"The config's data.path is 'imgs' (read from the current folder, {tmp_path})" in err
    assert "cannot change on resume" in err and "ln -s NEW_PLACE imgs" in err
    (tmp_path / "imgs").symlink_to(tmp_path / "moved")
    assert main(["--quiet", "--resume", "run", "train.steps=4"]) == 0  # the old path, linked


def test_images_in_formats_left_out_are_warned_about_by_extension(small_folder, tmp_path, caplog):
    """A TIFF scan or a PGM face set beside the PNGs is not silently lost: the warning counts them by
    extension and names the formats that are read; a README is information only."""
    for i in range(3):
        Image.fromarray(noise(10, 12)).save(small_folder / f"scan{i}.tif")
    Image.fromarray(noise(10, 12, 1)[..., 0]).save(small_folder / "face.pgm")
    (small_folder / "README.txt").write_text("notes")
    caplog.set_level(logging.INFO, logger="disentangle")
    build(small_folder, tmp_path, image_size=8)
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "holds images in formats it does not read (3 .tif, 1 .pgm), left out. Convert them to one of .png" in warning
    assert any("1 other file left out (not images)" in r.getMessage() for r in caplog.records
               if r.levelno == logging.INFO)


def test_a_folder_that_cannot_be_listed_is_named_not_left_out_silently(small_folder, tmp_path, monkeypatch, caplog):
    sub = small_folder / "locked"
    sub.mkdir()
    Image.fromarray(noise(10, 12)).save(sub / "a.png")
    scandir = os.scandir

    def refuse(path="."):
        if Path(path) == sub:
            raise PermissionError(13, "Permission denied", str(sub))
        return scandir(path)

    monkeypatch.setattr(folder_module.os, "scandir", refuse)
    with caplog.at_level(logging.WARNING, logger="disentangle.data.image_folder"):
        images, _ = folder_module.list_images(small_folder)
    assert "locked/a.png" not in [f.name for f in images] and images
    assert "Could not list 1 folder(s) under" in caplog.text and "locked (PermissionError: Permission denied)" in caplog.text


def test_a_resume_on_other_images_is_refused_and_a_touch_is_not_a_change(tmp_path, train_image_folder_run):
    """The checkpoint records which images the run trained on (their names and sizes): a resume after
    an image was added, or renamed, is refused before training; a touched file (new times, same
    bytes) resumes, as does a folder copied elsewhere."""
    from disentangle.config import load_config
    from disentangle.errors import ConfigError
    from disentangle.training import fit

    folder, run = train_image_folder_run(tmp_path)
    overrides = ["data.name=image_folder", f"data.path={folder}", "data.image_size=16",
                 f"data.cache={tmp_path / 'cache'}", "model.backbone=mlp", "model.hidden_sizes=[32]",
                 "model.latent_dim=4", "train.batch_size=4", "train.device=cpu", "train.progress=false",
                 "train.traversals=false", f"train.out_dir={run}"]
    saved = torch.load(run / "checkpoint.pt", weights_only=True)["data_content"]
    assert saved["images"] == 8
    stat = (folder / "3.png").stat()
    os.utime(folder / "3.png", ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert fit(load_config(None, [*overrides, "train.steps=3"]), resume=True).step == 3
    Image.fromarray(noise(10, 12)).save(folder / "8.png")
    with pytest.raises(ConfigError, match=r"are not those the run trained on \(8 images then, 9 now: files added"):
        fit(load_config(None, [*overrides, "train.steps=4"]), resume=True)
    (folder / "8.png").unlink()
    (folder / "3.png").rename(folder / "9.png")
    with pytest.raises(ConfigError, match="8 images then and now, their names or sizes differ"):
        fit(load_config(None, [*overrides, "train.steps=4"]), resume=True)
    (folder / "9.png").rename(folder / "3.png")
    assert fit(load_config(None, [*overrides, "train.steps=4"]), resume=True).step == 4
    assert torch.load(run / "checkpoint.pt", weights_only=True)["step"] == 4
