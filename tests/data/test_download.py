"""The download helpers: cache location, atomic verified downloads, clear offline errors, npz
reading without pickle (memory-mapped when uncompressed)."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest

from disentangle.data.download import (
    RemoteFile,
    default_cache_dir,
    download_url,
    fetch,
    load_npz_array,
    verify_checksum,
)
from disentangle.errors import (
    ChecksumMismatchError,
    CorruptDataFileError,
    DataFileNotFoundError,
    OversizeDownloadError,
)


@pytest.fixture
def source(tmp_path):
    src = tmp_path / "src" / "payload.bin"
    src.parent.mkdir()
    src.write_bytes(b"disentangle" * 1000)
    return src


def _md5(path):
    return "md5:" + hashlib.md5(path.read_bytes()).hexdigest()


def test_cache_dir_env(monkeypatch, tmp_path):
    monkeypatch.setenv("DISENTANGLE_DATA", str(tmp_path / "c"))
    assert default_cache_dir() == tmp_path / "c"
    monkeypatch.delenv("DISENTANGLE_DATA")
    assert default_cache_dir().parts[-2:] == (".cache", "disentangle")


def test_fetch_downloads_into_cache_and_verifies(tmp_path, source):
    remote = RemoteFile(url=source.as_uri(), filename="payload.bin", subdir="ds", checksum=_md5(source))
    got = fetch(remote, cache_dir=tmp_path / "cache", progress=False)
    assert got == tmp_path / "cache" / "ds" / "payload.bin"
    assert got.read_bytes() == source.read_bytes()
    assert [p.name for p in got.parent.iterdir()] == ["payload.bin"]  # no temporary left
    source.write_bytes(b"changed")  # a second fetch uses the cached file
    assert fetch(remote, cache_dir=tmp_path / "cache").read_bytes() != b"changed"
    verify_checksum(got, remote.checksum)
    sha = "sha256:" + hashlib.sha256(got.read_bytes()).hexdigest()
    verify_checksum(got, sha)


def test_checksum_mismatch_leaves_nothing(tmp_path, source):
    dest = tmp_path / "out" / "payload.bin"
    with pytest.raises(ChecksumMismatchError, match="expected 0+"):
        download_url(source.as_uri(), dest, "md5:" + "0" * 32, progress=False)
    assert not dest.parent.exists()  # nor the folder it made for the file
    (tmp_path / "kept").mkdir()
    with pytest.raises(ChecksumMismatchError):
        download_url(source.as_uri(), tmp_path / "kept" / "new" / "payload.bin", "md5:" + "0" * 32, progress=False)
    assert list((tmp_path / "kept").iterdir()) == []  # a folder that was there stays
    with pytest.raises(ChecksumMismatchError):
        verify_checksum(source, "sha256:" + "1" * 64)


def test_a_download_past_its_size_is_stopped_and_leaves_nothing(tmp_path, source):
    remote = RemoteFile(url=source.as_uri(), filename="payload.bin", subdir="ds", size=1000)
    with pytest.raises(OversizeDownloadError, match="more than the published size of 1000 bytes"):
        fetch(remote, cache_dir=tmp_path / "cache", progress=False)
    assert not (tmp_path / "cache" / "ds").exists()
    exact = RemoteFile(url=source.as_uri(), filename="payload.bin", subdir="ds", size=source.stat().st_size)
    assert fetch(exact, cache_dir=tmp_path / "cache", progress=False).read_bytes() == source.read_bytes()


def test_offline_error_says_url_path_and_option(tmp_path):
    remote = RemoteFile(url="http://127.0.0.1:9/none/file.npz", filename="file.npz", subdir="ds")
    with pytest.raises(DataFileNotFoundError) as err:
        fetch(remote, cache_dir=tmp_path, progress=False)
    msg = str(err.value)
    assert remote.url in msg and str(tmp_path / "ds" / "file.npz") in msg and "data.path=" in msg
    assert not (tmp_path / "ds" / "file.npz").exists()
    with pytest.raises(DataFileNotFoundError, match="download is disabled"):
        fetch(remote, cache_dir=tmp_path, download=False)
    with pytest.raises(DataFileNotFoundError, match="data.background"):
        fetch(remote, path=tmp_path / "missing.jpg", option="data.background")


def test_load_npz_array_memmap_and_fallback(tmp_path):
    a = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    stored, packed = tmp_path / "s.npz", tmp_path / "c.npz"
    np.savez(stored, images=a, meta=np.array({"x": 1}, dtype=object))
    np.savez_compressed(packed, images=a)
    mm = load_npz_array(stored, "images", mmap=True)
    assert isinstance(mm, np.memmap) and np.array_equal(mm, a)
    assert np.array_equal(load_npz_array(packed, "images", mmap=True), a)
    with pytest.raises(CorruptDataFileError, match="no array 'labels'"):
        load_npz_array(stored, "labels")
    with pytest.raises(CorruptDataFileError):  # pickled arrays are refused, not unpickled
        load_npz_array(stored, "meta")
    packed.write_bytes(packed.read_bytes()[:40])
    with pytest.raises(CorruptDataFileError, match="c.npz"):
        load_npz_array(packed, "images")


def test_a_compressed_archive_damaged_inside_is_one_paragraph(tmp_path):
    """A flipped byte inside a compressed member raised zlib.error, a traceback, not the corrupt-file
    message (the real dSprites file is compressed)."""
    import numpy as np
    import pytest

    from disentangle.data.download import load_npz_array
    from disentangle.errors import CorruptDataFileError

    path = tmp_path / "data.npz"
    sparse = (np.random.default_rng(0).random((64, 64, 64)) < 0.05).astype(np.uint8)  # Huffman-coded, as masks
    np.savez_compressed(path, imgs=sparse)
    data = bytearray(path.read_bytes())
    for i in range(len(data) // 10, len(data) // 10 + 64):  # inside the deflate stream: zlib.error
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptDataFileError, match="could not be read as a .npz archive"):
        load_npz_array(path, "imgs")


def test_a_downloaded_file_gets_the_umask_s_mode_not_owner_only(tmp_path, source):
    """tempfile.mkstemp made every cached file 0600, so a cache shared by a group could not be read."""
    import os

    before = os.umask(0o022)
    try:
        got = download_url(source.as_uri(), tmp_path / "shared" / "payload.bin", _md5(source), progress=False)
    finally:
        os.umask(before)
    assert got.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in got.parent.iterdir()] == ["payload.bin"]
