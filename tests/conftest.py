"""Shared fixtures: a tiny registered image dataset so trainer tests need no renderer or files.

Tests take what they need as fixtures (never ``from conftest import ...``):

* ``tiny_dataset_name`` -- the registered name of the tiny dataset (``data.name=...``);
* ``tiny_dataset`` -- the tiny dataset itself, built with its defaults;
* ``tiny_overrides`` -- ``(out_dir, steps=12, **extra) -> list[str]``: overrides for a fast run on it, on the
  CPU (or on ``$DISENTANGLE_TEST_DEVICE``: ``cuda`` runs the trainer tests on a GPU, see :data:`TEST_DEVICE`)
  (a small MLP VAE; an objective that trains another kind of model, e.g. ``objective.name=infogan``,
  gets a small model of its kind from :data:`TINY_MODELS` unless ``extra`` names ``model.backbone``; a
  class/content objective gets ``objective.class_factors=[a]`` unless ``extra`` names it);
* ``one_thread`` -- ``torch.set_num_threads(1)`` for the test, restored after; modules that want it for
  every test say ``pytestmark = pytest.mark.usefixtures("one_thread")``;
* ``benchmark_script`` -- ``(name) -> module``: ``benchmarks/<name>.py`` imported from its file (the
  benchmarks are scripts, not a package).
"""
from __future__ import annotations

import os
import sys
from collections.abc import Callable

# first: the package sets OpenMP's passive wait policy only where torch has not started OpenMP yet; a
# suite run beside other jobs (a campaign's lanes) would otherwise spin its waiting threads on a
# busy CPU (a 2-thread test took 626 s beside one busy core, OpenMP's active default)
import disentangle  # noqa: F401

# isort: split
import numpy as np
import pytest
import torch

from disentangle._core.hardware import CPU_BF16_ENV
from disentangle.data import DATASETS, IndexedImageDataset

# train.precision: auto means bf16 on a CPU with native bf16 and fp32 elsewhere; the suite's runs
# (subprocesses included) train in fp32 on every machine, the tests of auto set the variable themselves
os.environ[CPU_BF16_ENV] = "0"

#: the device of the runs tiny_overrides configures: the CPU, unless ``DISENTANGLE_TEST_DEVICE`` names
#: another (``DISENTANGLE_TEST_DEVICE=cuda python -m pytest tests/training`` on a GPU machine). The
#: suite is written for and run by CI on the CPU; on another device a failure is a finding about that
#: device (bit-exactness, host syncs, dtype or device mismatches), not a broken test.
TEST_DEVICE = os.environ.get("DISENTANGLE_TEST_DEVICE", "cpu")

_TINY_NAME = "_tiny_test"


# registered at import, so the dataset exists for every test (by name, in configs)
@DATASETS.register(_TINY_NAME, overwrite=True)
def _build_tiny_dataset(size: int = 16, channels: int = 1, device: str = "cpu") -> IndexedImageDataset:
    """2×3×4 grid of deterministic random binary images (``size``×``size``)."""
    g = torch.Generator().manual_seed(123)
    images = (torch.rand(24, channels, size, size, generator=g) > 0.5).to(torch.uint8)
    return IndexedImageDataset(images, ("a", "b", "c"), (2, 3, 4), scale=1.0).to(device)


_GAN = {
    "model.backbone": "infogan", "model.channels": "[8, 8]", "model.hidden": 16, "model.q_hidden": 16,
    "model.noise_dim": 2, "model.latent_dim": 3,
}
#: the small model of the objectives that do not train a VAE of the mlp backbone (and settings that
#: make their short runs cover what they do: InfoGAN-CR's α switches on at step 4)
TINY_MODELS: dict[str, dict[str, object]] = {
    "infogan": _GAN,
    "infogan_cr": {**_GAN, "objective.cr_weight_every": 4},
    # 2 continuous codes and a categorical code of 2 categories
    "elastic_infogan": {
        **_GAN, "model.backbone": "infogan_categorical", "model.latent_dim": 4, "model.num_categories": 2,
        "objective.num_categories": 2,
    },
}


def _learns_from_classes(name) -> bool:
    """Whether objective ``name`` is a class/content objective (it needs ``objective.class_factors``)."""
    from disentangle.objectives import OBJECTIVES
    from disentangle.objectives.class_content import ClassContentObjective

    return isinstance(name, str) and name in OBJECTIVES and issubclass(OBJECTIVES.get(name), ClassContentObjective)


def _tiny_overrides(out_dir, steps: int = 12, **extra) -> list[str]:
    """Overrides for a fast CPU run on the tiny dataset with a small MLP (or the objective's own
    small model, :data:`TINY_MODELS`)."""
    model: dict[str, object] = {"model.backbone": "mlp", "model.hidden_sizes": "[32]", "model.latent_dim": 4}
    if extra.get("objective.name") in TINY_MODELS and "model.backbone" not in extra:
        model = dict(TINY_MODELS[extra["objective.name"]])
    if "objective.class_factors" not in extra and _learns_from_classes(extra.get("objective.name")):
        extra = {"objective.class_factors": "[a]", **extra}  # the tiny grid's first factor is the class
    items = {
        "data.name": _TINY_NAME,
        **model,
        "train.steps": steps,
        "train.batch_size": 8,
        "train.log_every": 2,
        "train.checkpoint_every": 4,
        "train.out_dir": str(out_dir),
        "train.progress": "false",
        "train.device": TEST_DEVICE,
        "train.traversals": "false",
        **extra,
    }
    return [f"{k}={v}" for k, v in items.items()]


@pytest.fixture(scope="session")
def tiny_dataset_name() -> str:
    """The registered name of the tiny dataset."""
    return _TINY_NAME


@pytest.fixture
def tiny_dataset() -> IndexedImageDataset:
    """A fresh tiny dataset (16×16, one channel, CPU)."""
    return _build_tiny_dataset()


@pytest.fixture(scope="session")
def tiny_overrides() -> Callable[..., list[str]]:
    """The builder ``(out_dir, steps=12, **extra) -> list[str]`` of overrides for a fast CPU run on the
    tiny dataset; session-scoped so module-scoped fixtures can use it too."""
    return _tiny_overrides


def _train_image_folder_run(root, size: int = 16):
    """``(folder, run)``: a two-step run in ``root/run`` on ``root/images``, a folder of 8 random
    unlabelled images (no factors: only the metrics of images alone apply)."""
    from PIL import Image

    from disentangle.config import load_config
    from disentangle.training import fit

    folder = root / "images"
    folder.mkdir()
    generator = np.random.default_rng(0)
    for i in range(8):
        Image.fromarray((generator.random((20, 24, 3)) * 255).astype(np.uint8)).save(folder / f"{i}.png")
    run = root / "run"
    fit(load_config(None, ["data.name=image_folder", f"data.path={folder}", f"data.image_size={size}",
                           f"data.cache={root / 'cache'}", "model.backbone=mlp", "model.hidden_sizes=[32]",
                           "model.latent_dim=4", "train.steps=2", "train.batch_size=4", "train.device=cpu",
                           "train.progress=false", "train.traversals=false", f"train.out_dir={run}"]))
    return folder, run


@pytest.fixture(scope="session")
def train_image_folder_run() -> Callable:
    """The builder ``(root, size=16) -> (folder, run)`` of a two-step run on unlabelled images;
    session-scoped so module-scoped fixtures can use it too."""
    return _train_image_folder_run


@pytest.fixture
def one_thread():
    """Tiny tensors: one thread is faster, and much faster on a busy 2-core machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _benchmark_script(name: str):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    # as when the script runs: its siblings importable (``from s2_vs_twin import ...``), and the module
    # registered before it runs, as an import would (a dataclass in the script looks it up there)
    if str(path.parent) not in sys.path:
        sys.path.append(str(path.parent))
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def benchmark_script() -> Callable:
    """The loader ``(name) -> module`` of ``benchmarks/<name>.py`` (a script put on ``sys.path`` by
    itself where it imports its siblings)."""
    return _benchmark_script


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


#: the most workers ``python -m pytest -n auto`` starts: a worker takes about 1 GB, and beyond a few
#: workers the longest tests (about 30 s each) bound the suite's time, not the count of workers
MAX_AUTO_WORKERS = 8


def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (the README's test command): a worker per CPU this process may use, its affinity
    mask and cgroup CPU quota (as ``train.threads: auto`` counts them), at most :data:`MAX_AUTO_WORKERS`.
    pytest-xdist's own count is psutil's cores of the whole machine, which a container's CPU quota does
    not lower: a 2-CPU container on a 64-core host would start 64 workers. ``PYTEST_XDIST_AUTO_NUM_WORKERS``
    still decides where it is set."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # pytest-xdist's own hook reads it
    from disentangle._core.threads import choose_threads

    return min(choose_threads("auto", environ={}).threads, MAX_AUTO_WORKERS)
