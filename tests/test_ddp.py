"""Multi-process training (issue 13) on the CPU with 2 gloo processes: the DDP run computes the
single-process losses on the same global batch for every objective, checkpoints move between a
2-process run and a single process both ways, and a NaN on one rank stops both ranks alike.

The two workers are spawned once (``torch.multiprocessing``) and run every job in turn; the
single-process references run in the test process.
"""
from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from disentangle import distributed
from disentangle.config import load_config
from disentangle.data import DATASETS, IndexedImageDataset
from disentangle.objectives import OBJECTIVES
from disentangle.objectives.beta_vae import BetaVAE
from disentangle.trainer import NonFiniteLossError, train

TINY = "_tiny_ddp"  # registered on import, so in the spawned workers too


@DATASETS.register(TINY, overwrite=True)
def tiny_ddp_dataset(size: int = 16, device: str = "cpu") -> IndexedImageDataset:
    """2×3×4 grid of fixed random binary ``size``×``size`` images."""
    g = torch.Generator().manual_seed(123)
    images = (torch.rand(24, 1, size, size, generator=g) > 0.5).to(torch.uint8)
    return IndexedImageDataset(images, ("a", "b", "c"), (2, 3, 4), scale=1.0).to(device)


@OBJECTIVES.register("_nan_on_rank_1", overwrite=True)
class NaNOnRank1(BetaVAE):
    """β-VAE whose loss is NaN on rank 1 only, from step 5 (0-based) on."""

    def forward(self, model, x, *, step):
        terms = super().forward(model, x, step=step)
        if step >= 5 and distributed.shard().rank == 1:
            terms["loss"] = terms["loss"] * float("nan")
        return terms


#: every objective, with settings that keep it tiny
OBJECTIVE_SETTINGS: dict[str, dict[str, object]] = {
    "beta_vae": {"beta": 4.0},
    "annealed_vae": {"iteration_threshold": 10, "gamma": 10.0},
    "beta_tcvae": {},
    "dip_vae_i": {},
    "dip_vae_ii": {},
    "info_vae": {"alpha": 0.5},
    "factor_vae": {"discriminator_hidden": 16, "discriminator_layers": 2, "discriminator_lr": 1e-3},
    "aae": {"encoder": "gaussian", "discriminator_hidden": 16, "discriminator_lr": 1e-3},
    "ada_gvae": {},
    "ada_ml_vae": {},
    "gvae": {},
    "ml_vae": {},
}
STEPS = 20
WEAK = ("ada_gvae", "ada_ml_vae", "gvae", "ml_vae")


def _overrides(out_dir: Path, objective: str, steps: int = STEPS, **extra: object) -> list[str]:
    items = {
        "data.name": TINY,
        "model.backbone": "mlp",
        "model.hidden_sizes": "[32]",
        "model.latent_dim": 4,
        "objective.name": objective,
        **{f"objective.{k}": v for k, v in OBJECTIVE_SETTINGS.get(objective, {}).items()},
        "train.steps": steps,
        "train.batch_size": 8,
        "train.lr": 1e-3,
        "train.log_every": 1,
        "train.checkpoint_every": 100,
        "train.out_dir": str(out_dir),
        "train.progress": "false",
        "train.device": "cpu",
        "train.traversals": "false",
        **extra,
    }
    return [f"{k}={v}" for k, v in items.items()]


def _records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]


def _terms(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in ("steps_per_s", "wall_time_s")} for r in records if "metrics" not in r]


def _assert_close(got: list[dict], expected: list[dict], what: str) -> None:
    assert [r["step"] for r in got] == [r["step"] for r in expected], what
    for a, b in zip(got, expected):
        assert a.keys() == b.keys(), what
        for key in a:
            x, y = (a[key], b[key]) if isinstance(a[key], list) else ([a[key]], [b[key]])
            for u, v in zip(x, y):
                assert math.isclose(u, v, rel_tol=1e-4, abs_tol=1e-6), f"{what} step {a['step']} {key}: {u} vs {v}"


# ---------------------------------------------------------------------------- the workers
def _job_list(root: Path) -> list[tuple[str, list[str], bool]]:
    """(name, overrides, resume) of every job the 2-process workers run, in order."""
    jobs = [(name, _overrides(root / "ddp" / name, name), False) for name in OBJECTIVE_SETTINGS]
    # a 2-process run that stops at step 10 (a single process resumes it)
    jobs.append(("ddp_then_single", _overrides(root / "ddp_then_single", "beta_tcvae", steps=10), False))
    # a single-process checkpoint at step 10, resumed by 2 processes up to 20
    jobs.append(("single_then_ddp", _overrides(root / "single_then_ddp", "factor_vae"), True))
    jobs.append(("nan", _overrides(root / "nan", "_nan_on_rank_1", steps=12, **{"train.log_every": 2, "train.checkpoint_every": 4}), False))
    return jobs


def _worker(rank: int, world: int, port: int, root: str) -> None:
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank)
    )
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        for name, overrides, resume in _job_list(Path(root)):
            try:
                train(load_config(None, overrides), resume=resume)
            except NonFiniteLossError as err:
                (Path(root) / f"{name}_error_rank{rank}.txt").write_text(str(err))
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def ddp_root(tmp_path_factory) -> Path:
    """Runs every job in 2 spawned gloo processes once for the module (after the single-process
    checkpoint that one of them resumes)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("ddp")
    train(load_config(None, _overrides(root / "single_then_ddp", "factor_vae", steps=10)))
    mp.spawn(_worker, args=(2, _free_port(), str(root)), nprocs=2, join=True)
    torch.set_num_threads(threads)
    return root


@pytest.fixture(scope="module")
def single_root(tmp_path_factory) -> Path:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("single")
    for name in OBJECTIVE_SETTINGS:
        train(load_config(None, _overrides(root / name, name)))
    torch.set_num_threads(threads)
    return root


# ---------------------------------------------------------------------------- tests
@pytest.mark.parametrize("name", list(OBJECTIVE_SETTINGS))
def test_two_processes_log_the_single_process_losses(name, ddp_root, single_root):
    got, expected = _terms(_records(ddp_root / "ddp" / name)), _terms(_records(single_root / name))
    assert len(got) == STEPS
    _assert_close(got, expected, name)
    # and the runs are not trivially equal: the loss changes over the steps
    assert len({round(r["loss"], 6) for r in got}) > 1


def test_two_process_checkpoint_resumes_in_one_process(ddp_root, single_root, tmp_path):
    run = ddp_root / "ddp_then_single"
    ckpt = torch.load(run / "checkpoint.pt", weights_only=True)
    assert ckpt["step"] == 10
    assert not any(k.startswith("module.") for k in ckpt["model"])
    torch.set_num_threads(1)
    train(load_config(None, _overrides(run, "beta_tcvae")), resume=True)
    _assert_close(_terms(_records(run)), _terms(_records(single_root / "beta_tcvae")), "ddp -> single")


def test_one_process_checkpoint_resumes_in_two_processes(ddp_root, single_root):
    run = ddp_root / "single_then_ddp"
    _assert_close(_terms(_records(run)), _terms(_records(single_root / "factor_vae")), "single -> ddp")
    assert torch.load(run / "checkpoint.pt", weights_only=True)["step"] == STEPS


def test_nan_on_one_rank_stops_both_with_the_same_message(ddp_root):
    messages = [(ddp_root / f"nan_error_rank{r}.txt").read_text() for r in (0, 1)]
    assert messages[0] == messages[1]
    assert "between steps 4 and 6" in messages[0] and "last good checkpoint (step 4)" in messages[0]
    assert torch.load(ddp_root / "nan" / "checkpoint.pt", weights_only=True)["step"] == 4
    assert [r["step"] for r in _records(ddp_root / "nan")] == [2, 4]


def test_rank_zero_alone_writes_and_the_batch_must_split(ddp_root, tmp_path):
    assert {p.name for p in (ddp_root / "ddp" / "beta_vae").iterdir()} == {"config.yaml", "checkpoint.pt", "log.jsonl"}
    with pytest.raises(Exception, match="multiple of 2"):
        distributed.check_batch_size(7, 2)


# ---------------------------------------------------------------------------- single-process pieces
def test_normal_draws_the_global_noise_whatever_the_world_size():
    """Rows of rank r of W = rows of the single-process draw, also for pairs (groups=2)."""
    g = torch.Generator().manual_seed(0)
    with distributed.random_source(g):
        full = distributed.normal((12, 3), groups=2)
    for world in (2, 3):
        parts = []
        for rank in range(world):
            distributed._STATE.shard = distributed.Shard(rank, world)
            try:
                with distributed.random_source(torch.Generator().manual_seed(0)):
                    parts.append(distributed.normal((12 // world, 3), groups=2))
            finally:
                distributed._STATE.shard = distributed.Shard()
        # a pair batch is [x1 rows; x2 rows]; rank r holds its x1 rows then its x2 rows
        half = 6 // world
        x1 = torch.cat([p[:half] for p in parts])
        x2 = torch.cat([p[half:] for p in parts])
        assert torch.equal(torch.cat([x1, x2]), full), world


@pytest.mark.slow
def test_torchrun_cli_matches_the_single_process_cli(tmp_path):
    """The README's command: torchrun --standalone --nproc_per_node 2 -m disentangle.train."""
    common = [
        "--config", "quickstart", "model.backbone=mlp", "model.hidden_sizes=[32]", "data.image_size=16",
        "train.steps=6", "train.batch_size=8", "train.log_every=2", "train.device=cpu", "train.progress=false",
        "train.traversals=false", "objective.name=beta_tcvae",
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    single = subprocess.run(
        [sys.executable, "-m", "disentangle.train", *common, f"train.out_dir={tmp_path / 'one'}"],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert single.returncode == 0, single.stderr
    multi = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
         "-m", "disentangle.train", *common, f"train.out_dir={tmp_path / 'two'}"],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert multi.returncode == 0, multi.stderr
    _assert_close(_terms(_records(tmp_path / "two")), _terms(_records(tmp_path / "one")), "torchrun")
