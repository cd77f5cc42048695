"""Training runs on every dataset through its YAML config (configs/datasets/*.yaml), each pointed
at a tiny file of the official format (two optimisation steps on CPU, with a small MLP instead of
the config's conv64 to keep the suite fast)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from disentangle.config import load_config
from disentangle.data import DATASETS
from disentangle.training.trainer import fit

from .test_loaders import MPI_TAIL, write_cars3d, write_dsprites, write_mpi3d, write_shapes3d, write_smallnorb

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "datasets"


def _background(tmp):
    path = tmp / "bg.png"
    y, x = np.mgrid[0:120, 0:160]
    Image.fromarray(np.stack([x, y, x + y], -1).astype(np.uint8)).save(path)
    return path


def _data_overrides(name: str, tmp: Path) -> dict[str, str] | None:
    dsprites = lambda: str(write_dsprites(tmp / "d.npz", size=64))  # noqa: E731
    table = {
        "dsprites": lambda: {"data.path": dsprites(), "data.strict": "false"},
        "color_dsprites": lambda: {"data.path": dsprites(), "data.strict": "false"},
        "noisy_dsprites": lambda: {"data.path": dsprites(), "data.strict": "false"},
        "scream_dsprites": lambda: {"data.path": dsprites(), "data.strict": "false",
                                    "data.background": str(_background(tmp))},
        "color_sprites": lambda: {},
        "noisy_sprites": lambda: {},
        "scream_sprites": lambda: {"data.background": str(_background(tmp))},
        "shapes3d": lambda: {"data.path": str(write_shapes3d(tmp / "s.h5")), "data.strict": "false"},
        "smallnorb": lambda: {"data.path": str(write_smallnorb(tmp / "norb")), "data.strict": "false"},
        "cars3d": lambda: {"data.path": str(write_cars3d(tmp / "c.tar.gz", n_objects=1)), "data.strict": "false"},
    }
    for variant in ("toy", "realistic", "real"):
        table[f"mpi3d_{variant}"] = lambda: {
            "data.path": str(write_mpi3d(tmp / "m.npz", 6)), "data.strict": "false",
            "data.tail_sizes": json.dumps(list(MPI_TAIL)),
        }
    return table[name]() if name in table else None


@pytest.mark.parametrize("config", sorted(p.stem for p in CONFIGS.glob("*.yaml")))
def test_training_runs_from_yaml(config, tmp_path):
    if config.endswith("_sprites") and "sprites" not in DATASETS:
        pytest.skip("the procedural sprites renderer is not there yet")
    data = _data_overrides(config, tmp_path)
    assert data is not None, f"add a tiny file for configs/datasets/{config}.yaml to this test"
    overrides = {
        **data,
        "model.backbone": "mlp", "model.hidden_sizes": "[32]",  # the dataset is under test, keep it fast
        "train.steps": 2, "train.batch_size": 4, "train.log_every": 1, "train.checkpoint_every": 2,
        "train.out_dir": str(tmp_path / "run"), "train.progress": "false", "train.device": "cpu",
        "train.traversals": "false",
    }
    cfg = load_config(CONFIGS / f"{config}.yaml", [f"{k}={v}" for k, v in overrides.items()])
    result = fit(cfg)
    assert result.step == 2
    records = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2] and all(np.isfinite(r["loss"]) for r in records)
