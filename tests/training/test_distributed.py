"""Multi-process training (issue 13) on the CPU with 2 gloo processes: the DDP run computes the
single-process losses on the same global batch for every objective (also where each rank renders
only its rows of a sprites variant, issue 22), checkpoints move between a 2-process run and a
single process both ways, and a NaN on one rank, a gradient missing on one rank, and a failed
checkpoint or evaluation on rank 0 stop both ranks alike and at once.

The two workers are spawned once (``torch.multiprocessing``) and run every job in turn; the
single-process references run in the test process.
"""
from __future__ import annotations

import contextlib
import datetime
import faulthandler
import json
import math
import os
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path
from unittest import mock

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from disentangle._core import distributed
from disentangle.config import load_config
from disentangle.data import DATASETS, IndexedImageDataset
from disentangle.objectives import OBJECTIVES
from disentangle.objectives.beta_vae import BetaVAE
from disentangle.training.callbacks import CALLBACKS, Callback
from disentangle.training.trainer import fit

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
        if step >= 5 and distributed.rank_info().rank == 1:
            terms["loss"] = terms["loss"] * float("nan")
        return terms


@OBJECTIVES.register("_gain_on_rank_0_only", overwrite=True)
class GainOnRank0Only(BetaVAE):
    """β-VAE times a learned gain (its own optimizer); from step 3 on, rank 1 leaves the gain out of
    its loss, so the gain has a gradient on rank 0 only."""

    def __init__(self, **params):
        super().__init__(**params)
        self.gain = torch.nn.Parameter(torch.ones(()))

    def extra_optimizers(self, model, make_optimizer):
        return {"gain": make_optimizer([self.gain])}

    def train_step(self, model, x, *, step, optimizers, precision):
        with precision.autocast():
            terms = self(model, x, step=step)
        with_gain = step < 3 or distributed.rank_info().rank == 0
        loss = terms["loss"] * self.gain if with_gain else terms["loss"]
        for opt in optimizers.values():
            opt.zero_grad(set_to_none=True)
        precision.backward(loss)
        for opt in optimizers.values():
            precision.step(opt)
        return {k: v.detach() for k, v in terms.items()}


@CALLBACKS.register("_set_rates_at", overwrite=True)
class SetRatesAt(Callback):
    """Sets the model's and the discriminator's learning rates to ``lr`` in ``on_log`` at ``step``
    (on the main process only, as every callback runs)."""

    def __init__(self, step: int, lr: float) -> None:
        self.at, self.lr = step, lr

    def on_log(self, trainer, step, scalars):
        if step == self.at:
            trainer.set_learning_rate(self.lr)
            trainer.set_learning_rate(self.lr, "discriminator")


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
    # semi-supervised: one regulariser each (cov gathers the batch; l2 and embed have parameters)
    "s2_beta_vae": {"beta": 4.0},
    "s2_factor_vae": {"discriminator_hidden": 16, "discriminator_layers": 2, "discriminator_lr": 1e-3, "supervised_loss": "l2"},
    "s2_dip_vae_i": {"supervised_loss": "cov"},
    "s2_beta_tcvae": {"supervised_loss": "embed"},
    "m2": {"estimator": "importance", "samples": 2},
    # groups of observations: batch 8 = 4 groups of 2, whole groups per rank
    "group_ml_vae": {},
    "group_gvae": {"group_size": 4},
}
STEPS = 20
WEAK = ("ada_gvae", "ada_ml_vae", "gvae", "ml_vae")
#: runs on sprites variants, whose ranks render only their own rows (colour, noise, crops drawn globally)
SPRITE_RUNS: dict[str, dict[str, object]] = {
    "color_sprites_ada_gvae": {"data.name": "color_sprites", "data.image_size": 16, "objective.name": "ada_gvae"},
    "noisy_sprites_beta_vae": {"data.name": "noisy_sprites", "data.image_size": 16, "objective.name": "beta_vae"},
}
SPRITE_STEPS = 6
#: FactorVAE whose callback raises both learning rates tenfold at the log step 4 (log every 2 steps)
RATES_SET = {"train.log_every": 2, "train.callbacks": "[{name: _set_rates_at, step: 4, lr: 0.01}]"}
#: rank 0's own work made to fail (on rank 0 only): (patched target, the exception)
INJECTED = {
    "checkpoint_error": ("disentangle.training.trainer.save_rotating", OSError("injected: the disk is full")),
    "eval_error": ("disentangle.training.trainer.Trainer._evaluate", RuntimeError("injected: a metric failed")),
}
#: jobs that end in an exception on purpose (recorded by the workers)
FAILING = ("nan", "mismatch", *INJECTED)
#: how long a rank waits at a collective in these tests (the trainer's default is an hour)
COLLECTIVE_TIMEOUT = datetime.timedelta(seconds=120)


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
    for name, extra in SPRITE_RUNS.items():
        jobs.append((name, _overrides(root / "ddp" / name, "beta_vae", steps=SPRITE_STEPS, **extra), False))
    jobs.append(("averager_probe", [], False))
    jobs.append(("rates_set", _overrides(root / "ddp" / "rates_set", "factor_vae", steps=8, **RATES_SET), False))
    # gradients averaged by a sum and a division, as on backends without ReduceOp.AVG
    jobs.append(("sum_then_divide", _overrides(root / "sum_then_divide", "factor_vae"), False))
    every = {"train.log_every": 2, "train.checkpoint_every": 4}
    jobs.append(("mismatch", _overrides(root / "mismatch", "_gain_on_rank_0_only", steps=8, **every), False))
    # the failures of rank 0's own work come last: a regression would leave the group unusable
    jobs.append(("checkpoint_error", _overrides(root / "checkpoint_error", "beta_vae", steps=8, **every), False))
    evaluating = {**every, "train.eval_every": 2, "train.eval_metrics": "[mig]"}
    jobs.append(("eval_error", _overrides(root / "eval_error", "beta_vae", steps=8, **evaluating), False))
    return jobs


def _probe_averager(rank: int, root: Path) -> None:
    """GradientAverager on its own: rank-dependent gradients are averaged, its buffers are kept
    from one call to the next, and a gradient missing on rank 1 is named at the check."""
    distributed.setup(torch.device("cpu"))
    try:
        torch.manual_seed(0)
        params = list(torch.nn.Linear(3, 2).parameters())

        def fill(missing_on_rank_1: bool = False) -> None:
            for i, p in enumerate(params):
                p.grad = None if (missing_on_rank_1 and i == 1 and rank == 1) else torch.full_like(p, rank + 1.0)

        fill()
        distributed.average_gradients(params)
        averaged = all(torch.equal(p.grad, torch.full_like(p, 1.5)) for p in params)
        (averager,) = distributed._STATE.averagers.values()
        pointers = [group[1].data_ptr() for group in averager._groups]
        fill()
        distributed.average_gradients(params)
        reused = len(distributed._STATE.averagers) == 1 and pointers == [g[1].data_ptr() for g in averager._groups]
        distributed.check_gradients()  # nothing missing so far
        fill(missing_on_rank_1=True)
        distributed.average_gradients(params)
        try:
            distributed.check_gradients()
            mismatch = ""
        except distributed.GradientMismatchError as err:
            mismatch = str(err)
        record = {"averaged": averaged, "buffers_reused": reused, "mismatch": mismatch,
                  "average_op": str(distributed._STATE.average_op)}
        (root / f"averager_rank{rank}.json").write_text(json.dumps(record))
    finally:
        distributed.teardown()


def _worker(rank: int, world: int, port: int, root: str) -> None:
    # a C++ abort (see ddp_root) then prints every Python thread's stack to stderr: where it happened
    faulthandler.enable(all_threads=True)
    os.environ.update(
        MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank)
    )
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=COLLECTIVE_TIMEOUT)
    try:
        for name, overrides, resume in _job_list(Path(root)):
            if name == "averager_probe":
                _probe_averager(rank, Path(root))
                continue
            target, error = INJECTED.get(name, (None, None))
            inject = mock.patch(target, side_effect=error) if target and rank == 0 else contextlib.nullcontext()
            if name == "sum_then_divide":
                inject = mock.patch("disentangle._core.distributed._average_op", return_value=None)
            start = time.perf_counter()
            try:
                with inject:
                    fit(load_config(None, overrides), resume=resume)
            except Exception as err:
                if name not in FAILING:
                    raise
                (Path(root) / f"{name}_error_rank{rank}.txt").write_text(str(err))
                record = {"type": type(err).__name__, "seconds": time.perf_counter() - start}
                (Path(root) / f"{name}_error_rank{rank}.json").write_text(json.dumps(record))
    finally:
        dist.destroy_process_group()
    # Every result is on disk. Leave without the interpreter's finalisation: there, about once in 7
    # runs of these 28 jobs, a gloo worker aborted after all its work ("terminate called without an
    # active exception", SIGABRT, main thread with no Python frame: a C++ thread still joinable when
    # static objects are destroyed), failing a run that had passed. An error above still propagates.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


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
    for attempt in range(2):
        root = tmp_path_factory.mktemp("ddp")
        fit(load_config(None, _overrides(root / "single_then_ddp", "factor_vae", steps=10)))
        try:
            mp.spawn(_worker, args=(2, _free_port(), str(root)), nprocs=2, join=True)
            break
        except mp.ProcessExitedException as err:
            # A gloo worker aborted in C++ at interpreter exit ("terminate called without an active
            # exception", SIGABRT) in about 1 of 7 runs until the workers left with os._exit (see
            # _worker). Kept for an abort before that point: one retry in a fresh folder; a Python
            # error in a worker (ProcessRaisedException) or a second abort still fails.
            if attempt or err.signal_name != "SIGABRT":
                raise
            warnings.warn(f"ddp fixture: a worker aborted ({err}); retrying once", stacklevel=1)
    torch.set_num_threads(threads)
    return root


@pytest.fixture(scope="module")
def single_root(tmp_path_factory) -> Path:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("single")
    for name in OBJECTIVE_SETTINGS:
        fit(load_config(None, _overrides(root / name, name)))
    for name, extra in SPRITE_RUNS.items():
        fit(load_config(None, _overrides(root / name, "beta_vae", steps=SPRITE_STEPS, **extra)))
    fit(load_config(None, _overrides(root / "rates_set", "factor_vae", steps=8, **RATES_SET)))
    fit(load_config(None, _overrides(root / "rates_kept", "factor_vae", steps=8, **{"train.log_every": 2})))
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


@pytest.mark.parametrize("name", list(SPRITE_RUNS))
def test_ranks_rendering_their_own_rows_log_the_single_process_losses(name, ddp_root, single_root):
    """Each rank renders only its rows of a sprites variant (pairs for ada_gvae), the nuisance drawn
    for the whole batch: the run is the single-process run."""
    got, expected = _terms(_records(ddp_root / "ddp" / name)), _terms(_records(single_root / name))
    assert len(got) == SPRITE_STEPS
    _assert_close(got, expected, name)


def test_a_rate_set_by_a_callback_reaches_every_process_at_the_same_step(ddp_root, single_root):
    """set_learning_rate from rank 0's on_log: both ranks train with the new rates from the next step,
    as the single process does (the run is the single-process run), and the rates did change the run."""
    got, expected = _terms(_records(ddp_root / "ddp" / "rates_set")), _terms(_records(single_root / "rates_set"))
    assert [r["step"] for r in got] == [2, 4, 6, 8]
    _assert_close(got, expected, "rates set by a callback")
    kept = _terms(_records(single_root / "rates_kept"))
    assert [r["loss"] for r in expected[:2]] == [r["loss"] for r in kept[:2]]
    assert all(not math.isclose(a["loss"], b["loss"], rel_tol=1e-4) for a, b in zip(expected[2:], kept[2:]))


def test_averaging_by_sum_and_division_gives_the_same_run(ddp_root, single_root):
    """Where the backend has no ReduceOp.AVG (gloo before torch 2.6) gradients are summed and divided."""
    got, expected = _terms(_records(ddp_root / "sum_then_divide")), _terms(_records(single_root / "factor_vae"))
    _assert_close(got, expected, "sum then divide")


def test_the_gradient_averager_averages_in_persistent_buffers_and_names_a_missing_gradient(ddp_root):
    for rank in (0, 1):
        record = json.loads((ddp_root / f"averager_rank{rank}.json").read_text())
        assert record["averaged"] and record["buffers_reused"], record
        assert "parameter 1 (2,) had a gradient on some processes and none on others" in record["mismatch"], record


def _failure(root: Path, name: str) -> list[tuple[str, dict]]:
    return [
        ((root / f"{name}_error_rank{r}.txt").read_text(), json.loads((root / f"{name}_error_rank{r}.json").read_text()))
        for r in (0, 1)
    ]


def test_a_gradient_missing_on_one_rank_stops_both_with_a_clear_error(ddp_root):
    (message0, record0), (message1, record1) = _failure(ddp_root, "mismatch")
    assert message0 == message1 and record0["type"] == record1["type"] == "GradientMismatchError"
    assert "objective.gain had a gradient on some processes and none on others" in message0
    # found at the first check after step 3: the log step 4, before its checkpoint
    assert [r["step"] for r in _records(ddp_root / "mismatch")] == [2]
    assert not (ddp_root / "mismatch" / "checkpoint.pt").exists()


@pytest.mark.parametrize("name", list(INJECTED))
def test_a_failure_of_rank_zero_stops_every_rank_at_once(name, ddp_root):
    """Rank 0 alone writes checkpoints and evaluates; its exception is raised on rank 1 too, at
    once (not after the collective timeout)."""
    (message0, record0), (message1, record1) = _failure(ddp_root, name)
    injected = INJECTED[name][1]
    assert str(injected) in message0 and str(injected) in message1
    assert record0["type"] == record1["type"] == type(injected).__name__
    assert max(record0["seconds"], record1["seconds"]) < COLLECTIVE_TIMEOUT.total_seconds() / 4, (record0, record1)


def test_two_process_checkpoint_resumes_in_one_process(ddp_root, single_root, tmp_path):
    run = ddp_root / "ddp_then_single"
    ckpt = torch.load(run / "checkpoint.pt", weights_only=True)
    assert ckpt["step"] == 10
    assert not any(k.startswith("module.") for k in ckpt["model"])
    torch.set_num_threads(1)
    fit(load_config(None, _overrides(run, "beta_tcvae")), resume=True)
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
    assert {p.name for p in (ddp_root / "ddp" / "beta_vae").iterdir()} == {
        "config.yaml", "checkpoint.pt", "log.jsonl", "execution.jsonl"
    }
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
            distributed._STATE.rank_info = distributed.RankInfo(rank, world)
            try:
                with distributed.random_source(torch.Generator().manual_seed(0)):
                    parts.append(distributed.normal((12 // world, 3), groups=2))
            finally:
                distributed._STATE.rank_info = distributed.RankInfo()
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
