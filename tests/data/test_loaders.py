"""The file loaders (dSprites, Shapes3D, SmallNORB, Cars3D, MPI3D, npz) on tiny files of each
official format, written by the tests themselves: loading, factor ↔ image mapping, and clear
errors for missing, corrupt and mis-shaped files."""
from __future__ import annotations

import gzip
import io
import tarfile

import h5py
import numpy as np
import pytest
import torch

from disentangle.data import DATASETS, GroundTruthDataset, factor_strides, sample_with_fixed_factor
from disentangle.data.cars3d import Cars3D
from disentangle.data.custom import from_arrays
from disentangle.data.dsprites import DSprites
from disentangle.data.mpi3d import MPI3D
from disentangle.data.shapes3d import Shapes3D
from disentangle.data.smallnorb import SmallNORB, read_binary_matrix
from disentangle.errors import ConfigError, CorruptDataFileError, DataFileNotFoundError

# ---------------------------------------------------------------------- tiny file writers
DSPRITES_TINY = (3, 2, 4, 3, 2)  # shape, scale, orientation, x, y


def grid(sizes):
    """All factor-class rows of a grid, row-major (last fastest)."""
    return np.indices(sizes).reshape(len(sizes), -1).T.astype(np.int64)


def index_bits(n: int, size: int) -> np.ndarray:
    """Binary images (n, size, size) whose first row spells the image index in binary."""
    imgs = np.zeros((n, size, size), dtype=np.uint8)
    bits = (np.arange(n)[:, None] >> np.arange(size)) & 1
    imgs[:, 0, :] = bits
    imgs[:, size // 2 :, size // 2 :] = 1  # a "sprite"
    return imgs


def decode_bits(obs: torch.Tensor) -> np.ndarray:
    row = obs[:, 0, 0, :].round().to(torch.int64).numpy()
    return (row << np.arange(row.shape[1])).sum(axis=1)


def write_dsprites(path, sizes=DSPRITES_TINY, size=16, shuffle=False, compressed=True):
    classes = grid(sizes)
    n = classes.shape[0]
    full = np.column_stack([np.zeros(n, np.int64), classes])
    values = np.column_stack([np.ones(n), classes[:, 0] + 1.0, 0.5 + 0.1 * classes[:, 1],
                              0.25 * classes[:, 2], classes[:, 3] / 10, classes[:, 4] / 10])
    imgs = index_bits(n, size)
    if shuffle:
        perm = np.random.default_rng(0).permutation(n)
        full, imgs = full[perm], imgs[perm]
    meta = np.array({"latents_sizes": np.array([1, *sizes])}, dtype=object)  # pickled, never read
    save = np.savez_compressed if compressed else np.savez
    save(path, imgs=imgs, latents_classes=full, latents_values=values, metadata=meta)
    return path


@pytest.fixture
def dsprites_file(tmp_path):
    return write_dsprites(tmp_path / "dsprites_ndarray_co1sh3sc6or40x32y32_64x64.npz")


# ---------------------------------------------------------------------- dSprites
def test_dsprites_loads_grid_values_and_images(dsprites_file):
    ds = DSprites(str(dsprites_file), strict=False)
    assert isinstance(ds, GroundTruthDataset)
    assert ds.factor_names == ("shape", "scale", "orientation", "position_x", "position_y")
    assert ds.factor_sizes == DSPRITES_TINY and len(ds) == np.prod(DSPRITES_TINY)
    assert ds.image_shape == (1, 16, 16) and ds.images.dtype == torch.uint8 and ds.scale == 1.0
    np.testing.assert_allclose(ds.factor_values[1], [0.5, 0.6])
    np.testing.assert_allclose(ds.factor_values[0], [1, 2, 3])
    rng = np.random.default_rng(0)
    factors = ds.sample_factors(50, rng)
    obs = ds.sample_observations_from_factors(factors, rng)
    assert obs.shape == (50, 1, 16, 16) and obs.dtype == torch.float32
    assert decode_bits(obs).tolist() == (factors @ factor_strides(DSPRITES_TINY)).tolist()
    fixed = sample_with_fixed_factor(ds, 20, 2, rng)
    assert (fixed[:, 2] == fixed[0, 2]).all()
    assert ds.indices_to_factors(ds.factors_to_indices(factors)).tolist() == factors.tolist()


def test_dsprites_registry_and_folder_path(dsprites_file):
    ds = DATASETS.build("dsprites", path=str(dsprites_file.parent), strict=False, device="cpu")
    assert ds.factor_sizes == DSPRITES_TINY


def test_dsprites_strict_rejects_other_grid(dsprites_file):
    with pytest.raises(CorruptDataFileError, match=r"strict=False"):
        DSprites(str(dsprites_file))


def test_dsprites_rejects_unordered_file(tmp_path):
    path = write_dsprites(tmp_path / "d.npz", shuffle=True)
    with pytest.raises(CorruptDataFileError, match="row-major"):
        DSprites(str(path), strict=False)


def test_dsprites_truncated_file_names_the_file(dsprites_file):
    data = dsprites_file.read_bytes()
    dsprites_file.write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptDataFileError, match=str(dsprites_file.name)):
        DSprites(str(dsprites_file), strict=False)


def test_dsprites_wrong_arrays(tmp_path):
    path = tmp_path / "bad.npz"
    np.savez(path, imgs=np.zeros((4, 8, 8), np.float32), latents_classes=np.zeros((4, 6), np.int64))
    with pytest.raises(CorruptDataFileError, match="uint8"):
        DSprites(str(path), strict=False)
    np.savez(path, pictures=np.zeros((4, 8, 8), np.uint8))
    with pytest.raises(CorruptDataFileError, match="no array 'latents_classes'"):
        DSprites(str(path), strict=False)


def test_dsprites_missing_file_messages(tmp_path):
    with pytest.raises(DataFileNotFoundError) as err:
        DSprites(cache_dir=str(tmp_path), download=False)
    msg = str(err.value)
    expected = tmp_path / "dsprites" / "dsprites_ndarray_co1sh3sc6or40x32y32_64x64.npz"
    assert "https://github.com/deepmind/dsprites-dataset" in msg and str(expected) in msg and "data.path" in msg
    with pytest.raises(DataFileNotFoundError, match="data.path"):
        DSprites(str(tmp_path / "nope.npz"))


# ---------------------------------------------------------------------- Shapes3D
SHAPES_TINY = (2, 2, 3, 2, 2, 3)


def write_shapes3d(path, sizes=SHAPES_TINY):
    classes = grid(sizes)
    n = classes.shape[0]
    labels = np.column_stack([classes[:, 0] / 10, classes[:, 1] / 10, classes[:, 2] / 10,
                              0.75 + classes[:, 3] / 14, classes[:, 4], -30 + 30.0 * classes[:, 5]])
    images = np.zeros((n, 64, 64, 3), np.uint8)
    images[:, :, :, 0] = (np.arange(n) % 256)[:, None, None]
    images[:, :, :, 1] = (np.arange(n) // 256)[:, None, None]
    images[:, :, :, 2] = 7
    with h5py.File(path, "w") as f:
        f["images"] = images
        f["labels"] = labels
    return path


def test_shapes3d_tiny_file(tmp_path):
    path = write_shapes3d(tmp_path / "3dshapes.h5")
    ds = DATASETS.build("shapes3d", path=str(path), strict=False)
    assert ds.factor_sizes == SHAPES_TINY and ds.image_shape == (3, 64, 64)
    assert ds.factor_names[0] == "floor_hue" and ds.factor_names[-1] == "orientation"
    np.testing.assert_allclose(ds.factor_values[5], [-30, 0, 30])
    rng = np.random.default_rng(1)
    f = ds.sample_factors(40, rng)
    obs = ds.sample_observations_from_factors(f, rng)
    idx = (obs[:, 0, 5, 5] * 255).round().long() + 256 * (obs[:, 1, 5, 5] * 255).round().long()
    assert idx.tolist() == (f @ factor_strides(SHAPES_TINY)).tolist()
    assert torch.allclose(obs[:, 2], torch.full_like(obs[:, 2], 7 / 255))
    with pytest.raises(CorruptDataFileError, match="strict=False"):
        Shapes3D(str(path))


def test_shapes3d_corrupt_and_wrong_layout(tmp_path):
    bad = tmp_path / "3dshapes.h5"
    bad.write_bytes(b"not an hdf5 file at all" * 10)
    with pytest.raises(CorruptDataFileError, match="3dshapes.h5"):
        Shapes3D(str(bad), strict=False)
    with h5py.File(bad, "w") as f:
        f["images"] = np.zeros((4, 8, 8, 3), np.uint8)
    with pytest.raises(CorruptDataFileError, match="no dataset 'labels'"):
        Shapes3D(str(bad), strict=False)


# ---------------------------------------------------------------------- SmallNORB
NORB_TINY = (2, 2, 2, 3, 2)  # category, instance, elevation, azimuth, lighting
MAGIC = {np.uint8: 0x1E3D4C55, np.int32: 0x1E3D4C54}


def binary_matrix(array: np.ndarray) -> bytes:
    header = [MAGIC[array.dtype.type], array.ndim, *array.shape] + [1] * max(0, 3 - array.ndim)
    return np.asarray(header, "<i4").tobytes() + array.astype(array.dtype.newbyteorder("<")).tobytes()


def norb_intensity(full_index: np.ndarray) -> np.ndarray:
    return (full_index * 5 + 3).astype(np.uint8)


def write_smallnorb(folder, gz=True):
    folder.mkdir(exist_ok=True)
    rows = grid(NORB_TINY)
    full_index = rows @ factor_strides(NORB_TINY)
    rng = np.random.default_rng(0)
    for chunk, inst in (("5x46789x9x18x6x2x96x96-training", 1), ("5x01235x9x18x6x2x96x96-testing", 0)):
        sel = rows[rows[:, 1] == inst]
        perm = rng.permutation(len(sel))  # files are not in grid order
        sel, idx = sel[perm], full_index[rows[:, 1] == inst][perm]
        dat = np.zeros((len(sel), 2, 96, 96), np.uint8)
        dat[:, 0] = norb_intensity(idx)[:, None, None]
        dat[:, 1] = 255  # the second camera must be ignored
        info = np.column_stack([sel[:, 1], sel[:, 2], 2 * sel[:, 3], sel[:, 4]]).astype(np.int32)
        for part, arr in (("dat", dat), ("cat", sel[:, 0].astype(np.int32)), ("info", info)):
            name = folder / f"smallnorb-{chunk}-{part}.mat"
            data = binary_matrix(arr)
            if gz:
                with gzip.open(f"{name}.gz", "wb") as f:
                    f.write(data)
            else:
                name.write_bytes(data)
    return folder


@pytest.mark.parametrize("gz", [True, False])
def test_smallnorb_tiny_files(tmp_path, gz):
    folder = write_smallnorb(tmp_path / "norb", gz=gz)
    ds = DATASETS.build("smallnorb", path=str(folder), strict=False)
    assert ds.factor_names == ("category", "elevation", "azimuth", "lighting")
    assert ds.factor_sizes == (2, 2, 3, 2) and len(ds) == 48 and ds.image_shape == (1, 64, 64)
    np.testing.assert_allclose(ds.factor_values[2], [0, 20, 40])
    # stored images are in grid order, resized, first camera only
    stored = ds.images[:, 0, 32, 32].to(torch.int64)
    assert (stored - torch.as_tensor(norb_intensity(np.arange(48)), dtype=torch.int64)).abs().max() <= 1
    rng = np.random.default_rng(0)
    f = ds.sample_factors(200, rng)
    obs = ds.sample_observations_from_factors(f, rng)
    full_idx = np.round((obs[:, 0, 32, 32].numpy() * 255 - 3) / 5).astype(np.int64)
    full = grid(NORB_TINY)[full_idx]
    assert np.array_equal(np.delete(full, 1, axis=1), f)
    assert set(full[:, 1]) == {0, 1}  # the hidden instance is drawn
    assert np.array_equal(ds.indices_to_factors(full_idx), f)
    assert torch.equal(ds.index_tensor_to_factors(torch.as_tensor(full_idx)), torch.as_tensor(f))
    with pytest.raises(ValueError, match="instance"):
        ds.factors_to_indices(f)
    assert np.array_equal(ds.factors_to_indices(f, full[:, 1]), full_idx)
    batch = ds.sample_batch(16, torch.Generator().manual_seed(0))
    assert batch.shape == (16, 1, 64, 64)


def test_smallnorb_bad_files(tmp_path):
    folder = write_smallnorb(tmp_path / "norb", gz=False)
    with pytest.raises(CorruptDataFileError, match="strict=False"):
        SmallNORB(str(folder))
    dat = folder / "smallnorb-5x46789x9x18x6x2x96x96-training-dat.mat"
    data = dat.read_bytes()
    dat.write_bytes(data[:-100])
    with pytest.raises(CorruptDataFileError, match="truncated"):
        read_binary_matrix(dat)
    dat.write_bytes(b"\x00" * 4 + data[4:])
    with pytest.raises(CorruptDataFileError, match="magic"):
        read_binary_matrix(dat)
    dat.unlink()
    with pytest.raises(DataFileNotFoundError, match="training-dat"):
        SmallNORB(str(folder), strict=False)


# ---------------------------------------------------------------------- Cars3D
def write_cars3d(path, n_objects=2, names=None):
    import scipy.io

    names = names or [f"car_{i:03d}_mesh" for i in range(n_objects)]
    with tarfile.open(path, "w:gz") as tar:
        for obj, name in enumerate(names):
            im = np.zeros((128, 128, 3, 24, 4), np.uint8)
            im[:, :, 0] = (obj * 40 + 10)
            im[:, :, 1] = (np.arange(24) * 10)[:, None]
            im[:, :, 2] = (np.arange(4) * 50)[None, :]
            buf = io.BytesIO()
            scipy.io.savemat(buf, {"im": im, "mask": np.zeros((128, 128, 24, 4), np.uint8)})
            info = tarfile.TarInfo(f"data/cars/{name}.mat")
            info.size = buf.tell()
            buf.seek(0)
            tar.addfile(info, buf)
        listing = ("\n".join(names) + "\n").encode()
        info = tarfile.TarInfo("data/cars/list.txt")
        info.size = len(listing)
        tar.addfile(info, io.BytesIO(listing))
    return path


def test_cars3d_tiny_archive(tmp_path):
    # list.txt order (b before a) decides the object classes, not the file names
    path = write_cars3d(tmp_path / "nips2015-analogy-data.tar.gz", names=["car_b_mesh", "car_a_mesh"])
    ds = DATASETS.build("cars3d", path=str(path), strict=False)
    assert ds.factor_names == ("elevation", "azimuth", "object_type")
    assert ds.factor_sizes == (4, 24, 2) and ds.image_shape == (3, 64, 64)
    rng = np.random.default_rng(0)
    f = ds.sample_factors(64, rng)
    obs = (ds.sample_observations_from_factors(f, rng)[:, :, 32, 32] * 255).round().long()
    assert (obs[:, 0] - (torch.as_tensor(f[:, 2]) * 40 + 10)).abs().max() <= 1
    assert (obs[:, 1] - torch.as_tensor(f[:, 1]) * 10).abs().max() <= 1
    assert (obs[:, 2] - torch.as_tensor(f[:, 0]) * 50).abs().max() <= 1
    with pytest.raises(CorruptDataFileError, match="strict=False"):
        Cars3D(str(path))


def test_cars3d_folder_and_corrupt(tmp_path):
    path = write_cars3d(tmp_path / "a.tar.gz", n_objects=1)
    with tarfile.open(path) as tar:
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        tar.extractall(tmp_path / "x", **safe)
    ds = Cars3D(str(tmp_path / "x"), strict=False)  # finds data/cars/*.mat
    assert ds.factor_sizes == (4, 24, 1)
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(path.read_bytes()[:200])
    with pytest.raises(CorruptDataFileError, match="bad.tar.gz"):
        Cars3D(str(bad), strict=False)
    with pytest.raises(DataFileNotFoundError, match="no .mat"):
        Cars3D(str(tmp_path), strict=False)


# ---------------------------------------------------------------------- MPI3D
MPI_TAIL = (2, 1, 1, 2, 2)


def write_mpi3d(path, n_values, compressed=False):
    sizes = (n_values, n_values, *MPI_TAIL)
    rows = grid(sizes)
    images = np.zeros((rows.shape[0], 64, 64, 3), np.uint8)
    images[..., 0] = rows[:, 0, None, None] * 10
    images[..., 1] = rows[:, 1, None, None] * 10
    images[..., 2] = (rows[:, 2:] @ factor_strides(MPI_TAIL))[:, None, None]
    (np.savez_compressed if compressed else np.savez)(path, images=images)
    return path


def _decode_mpi(obs):
    px = (obs[:, :, 10, 10] * 255).round().long()
    return px[:, 0] // 10, px[:, 1] // 10, px[:, 2]


@pytest.mark.parametrize("compressed", [False, True])
def test_mpi3d_6x6_file_subset_and_full(tmp_path, compressed):
    path = write_mpi3d(tmp_path / "mpi3d_toy.npz", 6, compressed)
    toy = DATASETS.build("mpi3d", variant="toy", path=str(path), strict=False, tail_sizes=list(MPI_TAIL))
    assert toy.factor_sizes == (4, 4, *MPI_TAIL)  # Locatello et al.'s grid for toy
    assert list(toy.factor_values[0]) == ["green", "red", "blue", "brown"]
    assert list(toy.factor_values[1]) == ["cone", "cube", "hexagonal prism", "sphere"]
    rng = np.random.default_rng(0)
    f = toy.sample_factors(100, rng)
    color, shape, rest = _decode_mpi(toy.sample_observations_from_factors(f, rng))
    assert color.tolist() == [(1, 2, 3, 4)[c] for c in f[:, 0]]
    assert shape.tolist() == [(0, 1, 3, 5)[s] for s in f[:, 1]]
    assert rest.tolist() == (f[:, 2:] @ factor_strides(MPI_TAIL)).tolist()
    real = MPI3D("real", str(path), strict=False, tail_sizes=MPI_TAIL)
    assert real.factor_sizes == (6, 6, *MPI_TAIL) and real.factor_values[0][0] == "white"
    full = MPI3D("toy", str(path), full_grid=True, strict=False, tail_sizes=MPI_TAIL)
    assert full.factor_sizes == (6, 6, *MPI_TAIL)
    assert torch.equal(full.images, real.images)


def test_mpi3d_4x4_file_and_errors(tmp_path):
    path = write_mpi3d(tmp_path / "m.npz", 4)
    ds = MPI3D("realistic", str(path), strict=False, tail_sizes=MPI_TAIL)
    assert ds.factor_sizes == (4, 4, *MPI_TAIL)
    with pytest.raises(CorruptDataFileError, match="full_grid"):
        MPI3D("real", str(path), full_grid=True, strict=False, tail_sizes=MPI_TAIL)
    with pytest.raises(CorruptDataFileError, match="460,800 or 1,036,800"):
        MPI3D("toy", str(path))
    np.savez(path, images=np.zeros((5, 64, 64, 3), np.uint8))
    with pytest.raises(CorruptDataFileError, match="truncated or not an MPI3D"):
        MPI3D("toy", str(path), strict=False, tail_sizes=MPI_TAIL)
    with pytest.raises(DataFileNotFoundError, match="huggingface.co/datasets/waleedgondal/mpi3d/resolve/main/mpi3d_real.npz"):
        MPI3D("real", cache_dir=str(tmp_path), download=False)


def test_mpi3d_downloads_from_the_readmes_links_without_a_made_up_digest():
    """rr-learning/disentanglement_dataset's README (commit a7a6729, 2025) links Hugging Face and
    states no checksum: the files are checked by shape and dtype only."""
    from disentangle.data.mpi3d import MPI3D_FILES

    for variant, remote in MPI3D_FILES.items():
        assert remote.url == f"https://huggingface.co/datasets/waleedgondal/mpi3d/resolve/main/mpi3d_{variant}.npz"
        assert remote.filename == f"mpi3d_{variant}.npz" and remote.checksum is None and remote.size is None


# ---------------------------------------------------------------------- your own arrays
def test_from_arrays_sorts_rows_and_validates(tmp_path):
    sizes = (2, 3, 4)
    rows = grid(sizes)
    images = np.zeros((24, 8, 8, 3), np.uint8)
    images[..., 0] = np.arange(24)[:, None, None]
    perm = np.random.default_rng(0).permutation(24)
    ds = from_arrays(images[perm], rows[perm], ("a", "b", "c"))
    assert ds.factor_sizes == sizes and ds.image_shape == (3, 8, 8) and ds.scale == pytest.approx(1 / 255)
    assert ds.images[:, 0, 0, 0].tolist() == list(range(24))
    with pytest.raises(ValueError, match="full grid"):
        from_arrays(images[:-1], rows[:-1], grid=True)
    # by default, labels that miss a combination give a sample of labelled images, not a grid
    sample = from_arrays(images[:-1], rows[:-1])
    assert not sample.is_grid and sample.factor_sizes == sizes and len(sample) == 23
    path = tmp_path / "mine.npz"
    np.savez(path, images=images[perm], factor_classes=rows[perm], factor_names=np.array(["a", "b", "c"]))
    loaded = DATASETS.build("npz", path=str(path))
    assert loaded.factor_names == ("a", "b", "c") and torch.equal(loaded.images, ds.images)
    np.savez(path, pictures=images)
    with pytest.raises(CorruptDataFileError, match="images_key"):
        DATASETS.build("npz", path=str(path))


# ---------------------------------------------------------------------- every registered dataset
@pytest.fixture(scope="module")
def tiny_builds(tmp_path_factory):
    """``{registered name: build parameters}`` for every dataset, on tiny files of each format."""
    from PIL import Image

    root = tmp_path_factory.mktemp("tiny_files")
    dsprites = str(write_dsprites(root / "dsprites.npz"))
    background = root / "background.png"
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (80, 96, 3), dtype=np.uint8)).save(background)
    npz = root / "mine.npz"
    rows = grid((2, 3, 2))
    np.savez(npz, images=index_bits(12, 8) * 255, factor_classes=rows, factor_names=np.array(["a", "b", "c"]))
    offline = {"download": False, "cache_dir": str(root / "no_cache")}
    on_file = {"path": dsprites, "strict": False}
    photos = root / "photos"
    photos.mkdir()
    for i in range(6):
        Image.fromarray(np.random.default_rng(i).integers(0, 256, (16, 20, 3), dtype=np.uint8)).save(photos / f"{i}.png")
    from .test_celeba import write_celeba
    from .test_falcor_isaac import FALCOR_TINY, ISAAC_TINY, write_highres

    return {
        "dsprites": on_file,
        "color_dsprites": on_file,
        "noisy_dsprites": on_file,
        "scream_dsprites": {**on_file, "background": str(background)},
        "sprites": {"image_size": 16},
        "color_sprites": {"image_size": 16},
        "noisy_sprites": {"image_size": 16},
        "scream_sprites": {"image_size": 16, "background": str(background), **offline},
        "shapes3d": {"path": str(write_shapes3d(root / "3dshapes.h5")), "strict": False},
        "smallnorb": {"path": str(write_smallnorb(root / "norb")), "strict": False},
        "cars3d": {"path": str(write_cars3d(root / "cars.tar.gz")), "strict": False},
        "mpi3d": {"path": str(write_mpi3d(root / "mpi3d_toy.npz", 4)), "strict": False,
                  "tail_sizes": list(MPI_TAIL)},
        "npz": {"path": str(npz)},
        "image_folder": {"path": str(photos), "image_size": 16, "cache": str(root / "decoded")},
        "celeba": {"path": str(write_celeba(root / "celeba")), "image_size": 16, "cache": str(root / "decoded")},
        "falcor3d": {"path": str(write_highres(root / "falcor", "falcor3d", FALCOR_TINY, side=16)), "image_size": 8,
                     "strict": False, "cache_dir": str(root / "decoded")},
        "isaac3d": {"path": str(write_highres(root / "isaac", "isaac3d", ISAAC_TINY, side=16, zipped=False)),
                    "image_size": 16, "strict": False, "cache_dir": str(root / "decoded")},
    }


CHEAP_METRICS = {
    "mig": {"num_train": 200},
    "factor_vae_score": {"num_train": 20, "num_eval": 10, "num_variance_estimate": 100, "batch_size": 4},
    "beta_vae_score": {"num_train": 20, "num_eval": 10, "batch_size": 4},
    "unsupervised_scores": {"num_train": 200},
}
DETERMINISTIC = {"dsprites", "sprites", "shapes3d", "cars3d", "mpi3d", "npz", "falcor3d", "isaac3d"}
SAMPLES = {"image_folder", "celeba"}  # SampleDataset: images without a factor grid


@pytest.mark.parametrize("name", sorted(n for n in DATASETS.names() if not n.startswith("_")))
def test_evaluate_metrics_runs_on_every_registered_dataset(name, tiny_builds):
    from disentangle.metrics import evaluate_metrics, supports_code_table
    from disentangle.models.vae import VAE

    assert name in tiny_builds, f"add tiny files for the new dataset '{name}' to the tiny_builds fixture"
    dataset = DATASETS.build(name, **tiny_builds[name])
    torch.manual_seed(0)
    if getattr(dataset, "is_grid", True) is False:  # a sample without a grid: stored images, no code table
        from disentangle.errors import NotAGridError

        assert name in SAMPLES and dataset.deterministic_observations and not supports_code_table(dataset)
        model = VAE.from_backbone("mlp", image_shape=dataset.image_shape, latent_dim=3, hidden_sizes=[8]).eval()
        runnable = ["unsupervised_scores"] + (["mig"] if dataset.labelled else [])
        results = evaluate_metrics(dataset, model, runnable, seed=0, settings=CHEAP_METRICS)
        assert set(results) == set(runnable)
        assert all(np.isfinite(v) for scores in results.values() for v in scores.values())
        for metric in sorted(set(CHEAP_METRICS) - set(runnable)):
            with pytest.raises(NotAGridError):
                evaluate_metrics(dataset, model, [metric], seed=0, settings=CHEAP_METRICS)
        return
    declared = [c for c in type(dataset).__mro__ if "deterministic_observations" in c.__dict__]
    assert declared and declared[0] is not object, "every dataset class declares its capabilities"
    assert dataset.deterministic_observations is (name in DETERMINISTIC)
    assert supports_code_table(dataset) is (name in DETERMINISTIC)

    torch.manual_seed(0)
    model = VAE.from_backbone("mlp", image_shape=dataset.image_shape, latent_dim=3, hidden_sizes=[8]).eval()
    encoded = []
    model.encoder.register_forward_hook(lambda module, inputs, output: encoded.append(len(inputs[0])))
    results = evaluate_metrics(dataset, model, list(CHEAP_METRICS), seed=0, settings=CHEAP_METRICS)
    assert set(results) == set(CHEAP_METRICS)
    for scores in results.values():
        assert all(np.isfinite(v) for v in scores.values())
    assert 0.0 <= results["mig"]["mig"] <= 1.0
    if name in DETERMINISTIC:  # each grid point encoded at most once
        assert sum(encoded) <= len(dataset)
    else:  # every drawn observation encoded (per-draw nuisance or a hidden factor), as without a table
        tabled = sum(encoded)
        encoded.clear()
        assert evaluate_metrics(dataset, model, list(CHEAP_METRICS), settings=CHEAP_METRICS, code_table=False) == results
        assert sum(encoded) == tabled


def test_a_dataset_class_that_adds_nuisance_must_declare_its_observations():
    from disentangle.data import GridDataset

    with pytest.raises(TypeError, match="deterministic_observations"):

        class Jittered(GridDataset):  # noqa: F841 - the class statement itself must fail
            def transform(self, batch, generator):
                return batch

    class Declared(GridDataset):
        deterministic_observations = False

        def transform(self, batch, generator):
            return batch

    assert not Declared.deterministic_observations


# ---------------------------------------------------------------------- data.placement on a grid file
def test_a_streamed_grid_stays_on_the_host_and_trains_bit_exactly_like_one_in_memory(dsprites_file, tmp_path):
    from disentangle.config import load_config
    from disentangle.sweep.ids import run_id
    from disentangle.training.trainer import Trainer

    streamed = DSprites(str(dsprites_file), strict=False, placement="stream", device="cpu")
    held = DSprites(str(dsprites_file), strict=False, placement="device", device="cpu")
    assert (streamed.stream, streamed.placement, streamed.placement_reason) == (True, "stream", "set")
    assert (held.stream, held.placement) == (False, "device")
    assert streamed.to("meta") is streamed and streamed.images.device.type == "cpu"  # never moved
    idx = torch.tensor([0, 5, 17])
    assert torch.equal(streamed.observe(idx, None), held.observe(idx, None))
    auto = DSprites(str(dsprites_file), strict=False, device="cpu")
    assert auto.placement == "device" and auto.placement_reason.startswith("auto:")
    with pytest.raises(ConfigError, match="placement"):
        DSprites(str(dsprites_file), strict=False, placement="disk")

    def run(placement: str):
        out = tmp_path / placement
        overrides = [
            "data.name=dsprites", f"data.path={dsprites_file}", "data.strict=false", f"data.placement={placement}",
            "model.backbone=mlp", "model.hidden_sizes=[16]", "model.latent_dim=3", "train.steps=6",
            "train.batch_size=8", "train.device=cpu", "train.progress=false", "train.traversals=false",
            f"train.out_dir={out}", "train.log_every=2", "train.checkpoint_every=6",
        ]
        config = load_config(None, overrides)
        Trainer(config).fit()
        return config, torch.load(out / "checkpoint.pt", weights_only=True), (out / "execution.jsonl").read_text()

    (c1, a, ex_stream), (c2, b, _) = run("stream"), run("device")
    assert run_id(c1) == run_id(c2)  # the same run: placement is how, not what
    assert "streamed" in ex_stream or '"stream"' in ex_stream
    for key in a["model"]:
        assert torch.equal(a["model"][key], b["model"][key]), key
