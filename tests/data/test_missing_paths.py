"""A dataset path that does not exist is bad input (exit status 2) with a message that names it and
says what belongs there, never a corrupt or truncated file (exit 3); a corrupt file still is one."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from disentangle.data import DATASETS, IndexedImageDataset
from disentangle.data.cars3d import Cars3D
from disentangle.data.download import load_npz_array, npz_keys, require_path
from disentangle.data.dsprites import DSprites
from disentangle.data.files import reading
from disentangle.data.mpi3d import MPI3D
from disentangle.data.shapes3d import Shapes3D
from disentangle.data.smallnorb import SmallNORB, read_binary_matrix
from disentangle.data.variants import ScreamSprites, load_background
from disentangle.errors import (
    EXIT_BAD_DATA,
    EXIT_BAD_INPUT,
    CorruptDataFileError,
    DataFileNotFoundError,
    DataPathNotFoundError,
    InputError,
)

from .test_loaders import write_dsprites

REPO = Path(__file__).resolve().parents[2]
CORRUPT_WORDS = ("corrupt", "truncated", "could not be read", "not a readable")


def _assert_missing(err: pytest.ExceptionInfo, path: Path, *phrases: str) -> None:
    """The error is bad input that names ``path``, says it does not exist, and has ``phrases``."""
    error, message = err.value, str(err.value)
    assert isinstance(error, InputError) and isinstance(error, DataFileNotFoundError)
    assert error.exit_code == EXIT_BAD_INPUT
    assert str(path) in message and "does not exist" in message, message
    assert not any(word in message for word in CORRUPT_WORDS), message
    assert "\n" not in message
    for phrase in phrases:
        assert phrase in message, (phrase, message)


# ---------------------------------------------------------------------- the shared check
def test_require_path_reports_a_missing_path_as_bad_input(tmp_path):
    missing = tmp_path / "nope.npz"
    with pytest.raises(DataPathNotFoundError) as err:
        require_path(missing, what="dSprites file", option="data.path", expected="Get it from X.")
    _assert_missing(err, missing, "dSprites file given by data.path", "Get it from X.")
    assert isinstance(err.value, FileNotFoundError)  # callers that catch FileNotFoundError keep working
    (tmp_path / "file.npz").write_bytes(b"x")
    assert require_path(tmp_path / "file.npz") == tmp_path / "file.npz"
    with pytest.raises(InputError, match="is a folder, not a file"):
        require_path(tmp_path)
    with pytest.raises(InputError, match="is a file, not a folder"):
        require_path(tmp_path / "file.npz", kind="folder")


@pytest.mark.parametrize("read", [
    lambda p: load_npz_array(p, "imgs"),
    lambda p: load_npz_array(p, "images", mmap=True),
    npz_keys,
    read_binary_matrix,
    lambda p: reading(p, "HDF5").__enter__(),
], ids=["load_npz_array", "load_npz_array-mmap", "npz_keys", "read_binary_matrix", "reading"])
def test_readers_report_a_missing_file_before_opening_it(tmp_path, read):
    missing = tmp_path / "gone" / "file.bin"
    with pytest.raises(DataPathNotFoundError) as err:
        read(missing)
    _assert_missing(err, missing)


# ---------------------------------------------------------------------- every loader
def _scream(path: str):
    images = torch.zeros(24, 1, 64, 64, dtype=torch.uint8)
    base = IndexedImageDataset(images, ("a", "b", "c"), (2, 3, 4), scale=1.0)
    return ScreamSprites(base, path)


LOADERS = [
    # (what, build from a path, the missing path's name, phrases of what is expected there)
    ("dsprites", lambda p: DSprites(p), "nope.npz",
     ["dSprites file given by data.path", "dsprites_ndarray_co1sh3sc6or40x32y32_64x64.npz", "github.com/deepmind"]),
    ("dsprites-registry", lambda p: DATASETS.build("dsprites", path=p), "nope.npz", ["data.path", "downloads it"]),
    ("color_dsprites", lambda p: DATASETS.build("color_dsprites", path=p), "nope.npz", ["dSprites file"]),
    ("shapes3d", lambda p: Shapes3D(p), "nope.h5", ["3D Shapes file", "3dshapes.h5", "storage.googleapis.com"]),
    ("mpi3d", lambda p: MPI3D("toy", p), "nope.npz", ["MPI3D-toy file", "mpi3d_toy.npz"]),
    ("cars3d", lambda p: Cars3D(p), "nope.tar.gz", ["Cars3D archive", "nips2015-analogy-data.tar.gz", ".mat"]),
    ("smallnorb", lambda p: SmallNORB(p), "nope", ["SmallNORB folder given by data.path", "six SmallNORB files"]),
    ("npz", lambda p: DATASETS.build("npz", path=p), "nope.npz",
     ["npz dataset file given by data.path", "'images'", "'factor_classes'", "np.savez"]),
    ("scream background", _scream, "nope.png", ["background image given by data.background", "image file"]),
    ("load_background", load_background, "nope.png", ["data.background"]),
]


@pytest.mark.parametrize("what, build, name, phrases", LOADERS, ids=[c[0] for c in LOADERS])
def test_every_loader_reports_a_missing_path_as_bad_input(tmp_path, what, build, name, phrases):
    missing = tmp_path / "absent" / name
    with pytest.raises(DataPathNotFoundError) as err:
        build(str(missing))
    _assert_missing(err, missing, *phrases)


def test_a_folder_without_the_file_is_bad_input(tmp_path):
    with pytest.raises(DataPathNotFoundError) as err:
        DSprites(str(tmp_path))
    _assert_missing(err, tmp_path / "dsprites_ndarray_co1sh3sc6or40x32y32_64x64.npz")
    with pytest.raises(DataPathNotFoundError, match="training-dat") as err:
        SmallNORB(str(tmp_path))
    assert err.value.exit_code == EXIT_BAD_INPUT
    with pytest.raises(DataPathNotFoundError, match="no .mat") as err:
        Cars3D(str(tmp_path))
    assert err.value.exit_code == EXIT_BAD_INPUT


def test_a_file_where_smallnorb_wants_a_folder_is_bad_input(tmp_path):
    file = tmp_path / "norb.mat"
    file.write_bytes(b"x")
    with pytest.raises(InputError, match="is a file, not a folder") as err:
        SmallNORB(str(file))
    assert err.value.exit_code == EXIT_BAD_INPUT


def test_a_corrupt_existing_file_is_still_reported_as_corrupt(tmp_path):
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip archive at all")
    for build in (DSprites, lambda p: DATASETS.build("npz", path=p), lambda p: MPI3D("toy", p)):
        with pytest.raises(CorruptDataFileError, match="corrupt") as err:
            build(str(junk))
        assert err.value.exit_code == EXIT_BAD_DATA and not isinstance(err.value, InputError)
    h5 = tmp_path / "junk.h5"
    h5.write_bytes(b"not hdf5")
    with pytest.raises(CorruptDataFileError, match="could not be read as HDF5"):
        Shapes3D(str(h5))


# ---------------------------------------------------------------------- through the command line
def _train(*overrides: str, out: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "DISENTANGLE_OFFLINE": "1", "PYTHONWARNINGS": "ignore"}
    command = [sys.executable, "-m", "disentangle.train", "--config", str(REPO / "configs/quickstart.yaml"),
               *overrides, "train.steps=5", f"train.out_dir={out}"]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, cwd=REPO)


CLI_CASES = [
    ("dsprites", ["dsprites_ndarray_co1sh3sc6or40x32y32_64x64.npz", "downloads it automatically"]),
    ("npz", ["'images'", "'factor_classes'"]),
]


@pytest.mark.parametrize("name, phrases", CLI_CASES, ids=[c[0] for c in CLI_CASES])
def test_train_cli_missing_data_path_exits_2_with_one_paragraph(tmp_path, name, phrases):
    missing = tmp_path / "does_not_exist.npz"
    proc = _train(f"data.name={name}", f"data.path={missing}", out=tmp_path / "run")
    assert proc.returncode == EXIT_BAD_INPUT, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and proc.stderr.startswith("error: ")
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert str(missing) in proc.stderr and "does not exist" in proc.stderr
    assert not any(word in proc.stderr for word in CORRUPT_WORDS), proc.stderr
    assert all(phrase in proc.stderr for phrase in phrases), proc.stderr
    assert not (tmp_path / "run").exists()


def test_train_cli_corrupt_data_file_still_exits_3(tmp_path):
    bad = tmp_path / "bad.npz"
    write_dsprites(bad)
    data = bad.read_bytes()
    bad.write_bytes(data[: len(data) // 2])
    proc = _train("data.name=dsprites", f"data.path={bad}", "data.strict=false", out=tmp_path / "run")
    assert proc.returncode == EXIT_BAD_DATA, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "corrupt" in proc.stderr and str(bad) in proc.stderr
    assert "does not exist" not in proc.stderr

