"""Regression tests of the hardening issue, items 1-4: value checks before anything is created,
Ctrl-C at a step boundary, rotated checkpoints, and the configs shipped in the wheel."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

import disentangle
from disentangle.config import load_config, shipped_config_names, shipped_config_path
from disentangle.errors import CheckpointError, ConfigError
from disentangle.objectives import Objective
from disentangle.training.checkpoint import load_checkpoint, save_rotating
from disentangle.training.interrupt import deferred_to_step_boundary
from disentangle.training.trainer import Trainer, fit

REPO = Path(__file__).resolve().parents[2]


def _cli(module: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", module, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300
    )


# ---------------------------------------------------------------------- 1. values checked first
BAD_VALUES = [
    ("objective.beta=-1", "objective.beta must be a non-negative number"),
    ("objective.reconstruction=gauss", "Did you mean 'gaussian'"),
    ("train.betas=[0.9,1.5]", "train.betas must be two numbers in [0, 1)"),
    ("train.eps=0", "train.eps must be in (0, inf)"),
    ("train.precision=bf61", "Did you mean 'bf16'"),
    ("objective.name=dip_vae_i objective.lambda_od=1 objective.lambda_d=-2", "objective.lambda_d must be a non-negative"),
    ("objective.name=info_vae objective.kernel=rfb", "Did you mean 'rbf'"),
    ("objective.name=beta_tcvae objective.estimator=msw", "Valid choices: 'mss', 'mws'"),
    ("objective.name=aae objective.encoder=gauss", "Did you mean 'gaussian'"),
    ("objective.name=factor_vae objective.discriminator_betas=[0.5,1.0]", "objective.discriminator_betas must be two numbers"),
    ("objective.name=factor_vae objective.discriminator_layers=0", "objective.discriminator_layers must be an integer >= 1"),
    ("model.backbone=mlp model.hidden_sizes=[8,0]", "model.hidden_sizes must be an integer >= 1"),
    ("model.backbone=mlp model.decoder=locatelo", "Did you mean 'locatello'"),
]


@pytest.mark.parametrize("override,fragment", BAD_VALUES)
def test_bad_values_fail_validation_with_one_paragraph(override, fragment, tmp_path, tiny_overrides):
    overrides = [o for o in tiny_overrides(tmp_path / "run") if not o.startswith(("model.backbone", "model.hidden"))]
    overrides += ["model.backbone=mlp", "model.hidden_sizes=[8]"] + override.split()
    if "objective.name=" not in override:
        overrides.append("objective.name=beta_vae")
    with pytest.raises(ConfigError) as err:
        load_config(None, overrides)
    message = str(err.value)
    assert fragment in message
    assert "\n" not in message
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("override", ["objective.beta=-1", "objective.reconstruction=gauss"])
def test_train_cli_bad_value_exits_2_before_creating_the_run_folder(override, tmp_path):
    run = tmp_path / "run"
    proc = _cli("disentangle.train", "--config", "quickstart", override, f"train.out_dir={run}")
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not run.exists()


@pytest.mark.parametrize(
    "setting,fragment",
    [("dci.booster=exactt", "Did you mean 'exact'"), ("dci.num_train=many", "expected int"), ("mig.num_bins=0", "num_bins")],
)
def test_evaluate_cli_bad_setting_exits_2_before_loading(setting, fragment, tmp_path):
    # the run folder does not even exist: the setting must be rejected first
    metric = setting.split(".")[0]
    proc = _cli("disentangle.evaluate", str(tmp_path / "missing"), "--metrics", metric, "--set", setting)
    assert proc.returncode == 2, proc.stderr
    assert fragment in proc.stderr and "Traceback" not in proc.stderr


# ---------------------------------------------------------------------- 2. Ctrl-C at a step boundary
def _params(model) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.state_dict().items()}


def _log_losses(run: Path) -> list[tuple[int, float]]:
    rows = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    return [(r["step"], r["loss"]) for r in rows if "loss" in r]


def _interrupt_on_call(monkeypatch, owner, name: str, call: int, times: int = 1, signum: int = signal.SIGINT) -> None:
    """Make ``owner.name`` send ``signum`` to this process on its ``call``-th call (``times`` signals)."""
    original = getattr(owner, name)
    count = {"n": 0}

    def wrapper(*args, **kwargs):
        count["n"] += 1
        if count["n"] == call:
            for _ in range(times):
                signal.raise_signal(signum)
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, wrapper)


INTERRUPT_POINTS = [
    ("beta_vae", "sample_batch", 3),  # while the data generator moves
    ("beta_vae", "forward", 5),  # before the model update
    ("factor_vae", "vae_terms", 4),  # FactorVAE: before the VAE update
    ("factor_vae", "discriminator_step", 6),  # FactorVAE: model updated, D not yet
]


@pytest.mark.parametrize("objective,method,call", INTERRUPT_POINTS)
def test_sigint_anywhere_then_resume_is_bit_identical(objective, method, call, tmp_path, monkeypatch, tiny_overrides):
    torch.set_num_threads(1)
    extra = {"objective.name": objective, "train.checkpoint_every": 100}
    if objective == "factor_vae":
        extra.update({"objective.discriminator_hidden": 16, "objective.discriminator_layers": 2})
    straight = Trainer(load_config(None, tiny_overrides(tmp_path / "straight", steps=10, **extra)))
    straight.fit()

    run = tmp_path / "interrupted"
    config = load_config(None, tiny_overrides(run, steps=10, **extra))
    from disentangle.objectives import OBJECTIVES

    cls = OBJECTIVES.get(objective)
    with monkeypatch.context() as patch:
        _interrupt_on_call(patch, cls, method, call)
        trainer = Trainer(config)
        with pytest.raises(KeyboardInterrupt):
            trainer.fit()
    saved = load_checkpoint(run / "checkpoint.pt")
    assert saved["step"] == call  # the interrupted step completed and was saved, nothing more
    resumed = Trainer(load_config(None, tiny_overrides(run, steps=10, **extra)))
    resumed.fit(resume=True)
    a, b = _params(straight.model), _params(resumed.model)
    assert all(torch.equal(a[k], b[k]) for k in a)
    if objective == "factor_vae":
        da, db = straight.objective.state_dict(), resumed.objective.state_dict()
        assert all(torch.equal(da[k], db[k]) for k in da)
    straight_losses, resumed_losses = _log_losses(tmp_path / "straight"), _log_losses(run)
    # the interrupted session logged the step it stopped at, besides the log steps: the rest is the same
    logged = {step for step, _ in straight_losses}
    assert call in {step for step, _ in resumed_losses}
    assert straight_losses == [(step, loss) for step, loss in resumed_losses if step in logged]


def test_second_sigint_stops_at_once_without_saving(tmp_path, monkeypatch, tiny_overrides):
    config = load_config(None, tiny_overrides(tmp_path / "run", steps=10, **{"train.checkpoint_every": 100}))
    before = signal.getsignal(signal.SIGINT)  # SIG_IGN where pytest was started with `&` from a script
    with monkeypatch.context() as patch:
        _interrupt_on_call(patch, Objective, "sample_batch", 4, times=2)
        with pytest.raises(KeyboardInterrupt):
            Trainer(config).fit()
    assert not (tmp_path / "run" / "checkpoint.pt").exists()  # no half step was saved
    assert signal.getsignal(signal.SIGINT) is before  # handler restored


def test_sigterm_checkpoints_the_step_and_a_second_one_changes_nothing(tmp_path, monkeypatch, tiny_overrides):
    """``kill PID`` or Slurm's SIGTERM before a time limit: the step completes and is saved, as on the
    first Ctrl-C; a SIGTERM sent twice (by Slurm and by a sweep passing it on) does not drop it."""
    torch.set_num_threads(1)
    straight = Trainer(load_config(None, tiny_overrides(tmp_path / "straight", steps=10)))
    straight.fit()
    run = tmp_path / "run"
    config = load_config(None, tiny_overrides(run, steps=10, **{"train.checkpoint_every": 100}))
    with monkeypatch.context() as patch:
        _interrupt_on_call(patch, Objective, "sample_batch", 4, times=2, signum=signal.SIGTERM)
        with pytest.raises(KeyboardInterrupt):
            Trainer(config).fit()
    assert load_checkpoint(run / "checkpoint.pt")["step"] == 4
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handler restored
    resumed = Trainer(load_config(None, tiny_overrides(run, steps=10)))
    resumed.fit(resume=True)
    a, b = _params(straight.model), _params(resumed.model)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_sigterm_handler_installed_by_someone_else_is_left_alone(tmp_path, monkeypatch, tiny_overrides):
    """submitit ignores SIGTERM on purpose (it requeues a Slurm job on its own signal): training must
    not take SIGTERM over and end the job as interrupted."""
    seen = []

    def bypass(signum, frame):  # what submitit installs
        seen.append(signum)

    previous = signal.signal(signal.SIGTERM, bypass)
    try:
        config = load_config(None, tiny_overrides(tmp_path / "run", steps=10))
        with monkeypatch.context() as patch:
            _interrupt_on_call(patch, Objective, "sample_batch", 4, signum=signal.SIGTERM)
            result = Trainer(config).fit()
        assert result.step == 10 and seen == [signal.SIGTERM]  # the run went on; the handler saw it
        assert signal.getsignal(signal.SIGTERM) is bypass
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _deferred_usr2(handler):
    """``handler`` installed for SIGUSR2 (as submitit installs its own) and deferred to the step
    boundary while inside; the deferral must give the handler back, and the old one is restored."""
    previous = signal.signal(signal.SIGUSR2, handler)
    try:
        with deferred_to_step_boundary(signal.SIGUSR2):
            yield
        assert signal.getsignal(signal.SIGUSR2) is handler
    finally:
        signal.signal(signal.SIGUSR2, previous)


def test_a_deferred_signal_runs_its_handler_after_the_step_is_checkpointed(tmp_path, monkeypatch, tiny_overrides):
    """submitit's time-limit signal: its handler requeues the job and exits. Deferred to the step
    boundary, it finds the interrupted step saved; the resumed run is bit-identical to a straight one."""
    torch.set_num_threads(1)
    straight = Trainer(load_config(None, tiny_overrides(tmp_path / "straight", steps=10)))
    straight.fit()
    run = tmp_path / "run"
    seen = []

    def requeue_and_exit(signum, frame):  # what submitit's handler does
        seen.append(load_checkpoint(run / "checkpoint.pt")["step"])
        sys.exit(-1)

    before = signal.getsignal(signal.SIGINT)
    with _deferred_usr2(requeue_and_exit):
        config = load_config(None, tiny_overrides(run, steps=10, **{"train.checkpoint_every": 100}))
        with monkeypatch.context() as patch:
            _interrupt_on_call(patch, Objective, "sample_batch", 6, signum=signal.SIGUSR2)
            with pytest.raises(SystemExit):
                Trainer(config).fit()
        assert seen == [6]  # step 6 finished and saved before the handler ran, not after step 0
        assert signal.getsignal(signal.SIGINT) is before  # fit restored the one it found
    resumed = Trainer(load_config(None, tiny_overrides(run, steps=10)))
    resumed.fit(resume=True)
    a, b = _params(straight.model), _params(resumed.model)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert _log_losses(tmp_path / "straight") == _log_losses(run)


def test_a_deferred_handler_that_returns_lets_training_go_on(tmp_path, monkeypatch, tiny_overrides):
    seen = []

    def note(signum, frame):
        seen.append(signum)

    with _deferred_usr2(note):
        os.kill(os.getpid(), signal.SIGUSR2)  # outside training: handled at once
        assert seen == [signal.SIGUSR2]
        config = load_config(None, tiny_overrides(tmp_path / "run", steps=10, **{"train.checkpoint_every": 100}))
        with monkeypatch.context() as patch:
            _interrupt_on_call(patch, Objective, "sample_batch", 3, times=2, signum=signal.SIGUSR2)
            result = Trainer(config).fit()
    assert result.step == 10 and result.stop_reason is None
    assert seen == [signal.SIGUSR2] * 2  # once outside, once for the two sent during step 3


def test_ctrl_c_and_a_deferred_signal_in_one_step_run_the_handler_then_stop(tmp_path, monkeypatch, tiny_overrides):
    seen = []
    run = tmp_path / "run"
    with _deferred_usr2(lambda signum, frame: seen.append(signum)):
        config = load_config(None, tiny_overrides(run, steps=10, **{"train.checkpoint_every": 100}))
        with monkeypatch.context() as patch:
            _interrupt_on_call(patch, Objective, "sample_batch", 4, signum=signal.SIGUSR2)
            _interrupt_on_call(patch, Objective, "sample_batch", 4, signum=signal.SIGINT)
            with pytest.raises(KeyboardInterrupt):
                Trainer(config).fit()
    assert seen == [signal.SIGUSR2] and load_checkpoint(run / "checkpoint.pt")["step"] == 4


def _evaluations(run: Path) -> list[int]:
    return [r["step"] for r in map(json.loads, (run / "log.jsonl").read_text().splitlines()) if "metrics" in r]


def test_a_stop_during_an_evaluation_cuts_it_short_and_checkpoints_the_step_at_once(tmp_path, monkeypatch,
                                                                                    tiny_overrides):
    """SIGTERM (a scheduler's grace period, Kubernetes' 30 s) in the middle of a long evaluation: the
    evaluation ends there and the step is saved at once, not after it; training is unchanged."""
    import time

    torch.set_num_threads(1)
    evaluating = {"n": 0}

    def slow_evaluation(self):  # a FactorVAE score on a big grid: minutes
        evaluating["n"] += 1
        if evaluating["n"] == 2:  # the second takes 10 s, and the signal comes as it starts
            signal.raise_signal(signal.SIGTERM)
            for _ in range(200):
                time.sleep(0.05)
        return {"mig": {"mig": 0.5}}

    monkeypatch.setattr(Trainer, "_evaluate", slow_evaluation)
    extra = {"train.checkpoint_every": 100, "train.eval_every": 3, "train.eval_metrics": "[mig]"}
    straight = Trainer(load_config(None, tiny_overrides(tmp_path / "straight", steps=10)))
    straight.fit()
    run = tmp_path / "run"
    started = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        Trainer(load_config(None, tiny_overrides(run, steps=10, **extra))).fit()
    assert time.perf_counter() - started < 5  # not the 10 s of the evaluation
    assert load_checkpoint(run / "checkpoint.pt")["step"] == 6
    assert _evaluations(run) == [3]  # step 6's scores were not logged
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    monkeypatch.undo()
    resumed = Trainer(load_config(None, tiny_overrides(run, steps=10)))
    resumed.fit(resume=True)
    a, b = _params(straight.model), _params(resumed.model)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_deferred_signal_in_a_step_skips_the_evaluation_due_at_it(tmp_path, monkeypatch, tiny_overrides):
    """Slurm's warning during step 6, whose evaluation is due: the handler finds step 6 saved with no
    evaluation run first (it could outlast the 90 s the job has left)."""
    run = tmp_path / "run"
    seen, evaluated = [], []
    monkeypatch.setattr(Trainer, "_evaluate", lambda self: evaluated.append(self.step) or {"mig": {"mig": 0.5}})

    def requeue_and_exit(signum, frame):
        seen.append(load_checkpoint(run / "checkpoint.pt")["step"])
        sys.exit(-1)

    with _deferred_usr2(requeue_and_exit):
        config = load_config(None, tiny_overrides(run, steps=10, **{"train.checkpoint_every": 100,
                                                                     "train.eval_every": 3, "train.eval_metrics": "[mig]"}))
        with monkeypatch.context() as patch:
            _interrupt_on_call(patch, Objective, "sample_batch", 6, signum=signal.SIGUSR2)
            with pytest.raises(SystemExit):
                Trainer(config).fit()
    assert seen == [6] and evaluated == [3] and _evaluations(run) == [3]


# ---------------------------------------------------------------------- 3. rotated checkpoints
def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])


def test_corrupt_newest_checkpoint_falls_back_to_previous_and_stays_exact(tmp_path, tiny_overrides):
    torch.set_num_threads(1)
    straight = Trainer(load_config(None, tiny_overrides(tmp_path / "straight", steps=12)))
    straight.fit()
    run = tmp_path / "run"
    fit(load_config(None, tiny_overrides(run, steps=8)))  # checkpoints at 4 and 8
    assert load_checkpoint(run / "checkpoint.prev.pt")["step"] == 4
    _truncate(run / "checkpoint.pt")
    with pytest.raises(CheckpointError, match="checkpoint.pt"):
        load_checkpoint(run / "checkpoint.pt")
    resumed = Trainer(load_config(None, tiny_overrides(run, steps=12)))
    with pytest.warns(UserWarning, match=r"previous checkpoint .*step 4"):
        resumed.fit(resume=True)
    a, b = _params(straight.model), _params(resumed.model)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert _log_losses(tmp_path / "straight") == _log_losses(run)


def test_crash_between_renames_leaves_a_usable_previous_checkpoint(tmp_path, tiny_overrides):
    run = tmp_path / "run"
    fit(load_config(None, tiny_overrides(run, steps=8)))
    # the state after os.replace(newest -> previous) and before the new file took its name
    (run / "checkpoint.pt").unlink()
    with pytest.warns(UserWarning, match="Falling back"):
        model = disentangle.load(run)
    assert model.trained_steps == 4


def test_save_rotating_keeps_exactly_two(tmp_path):
    path = tmp_path / "checkpoint.pt"
    for step in range(3):
        save_rotating({"step": step, "model": {}, "config": {}}, path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.prev.pt", "checkpoint.pt"]
    assert torch.load(path, weights_only=True)["step"] == 2
    assert torch.load(tmp_path / "checkpoint.prev.pt", weights_only=True)["step"] == 1


def test_no_readable_checkpoint_is_one_paragraph_everywhere(tmp_path, tiny_overrides):
    run = tmp_path / "run"
    # a registered dataset, so that the CLIs (other processes) can read the run's config
    fit(load_config(None, tiny_overrides(run, steps=8, **{"data.name": "sprites", "model.hidden_sizes": "[8]"})))
    _truncate(run / "checkpoint.pt")
    _truncate(run / "checkpoint.prev.pt")
    with pytest.raises(disentangle.DisentangleError) as err:
        disentangle.load(run)
    assert "checkpoint.pt" in str(err.value) and "checkpoint.prev.pt" in str(err.value)
    with pytest.raises(disentangle.DisentangleError, match="cannot be read"):
        disentangle.load(run / "checkpoint.pt")
    for proc in (
        _cli("disentangle.train", "--resume", str(run)),
        _cli("disentangle.evaluate", str(run), "--metrics", "mig", "--no-progress"),
    ):
        assert proc.returncode != 0
        assert "Traceback" not in proc.stderr
        assert proc.stderr.startswith("error: ") and "No readable checkpoint" in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1


# ---------------------------------------------------------------------- 4. configs in the wheel
def test_every_shipped_config_loads_by_name_from_any_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    names = shipped_config_names()
    assert {"quickstart", "dsprites/factor_vae", "datasets/shapes3d"} <= set(names)
    for name in names:
        config = load_config(name)
        assert config.to_dict() == load_config(shipped_config_path(name)).to_dict()
    # the README's path form also works outside a checkout
    assert load_config("configs/quickstart.yaml").to_dict() == load_config("quickstart").to_dict()
    with pytest.raises(ConfigError, match="Did you mean 'dsprites/factor_vae'"):
        load_config("dsprites/factr_vae")


def test_wheel_ships_the_configs_and_trains_by_name_outside_the_checkout(tmp_path):
    wheels = tmp_path / "wheels"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels)],
        capture_output=True, text=True, timeout=300,
    )
    assert build.returncode == 0, build.stderr
    (wheel,) = wheels.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {f"disentangle/configs/{p.relative_to(REPO / 'configs').as_posix()}" for p in (REPO / "configs").rglob("*.yaml")}
    assert shipped and shipped <= names
    # a plain (non-editable) install into a folder, used from elsewhere
    target = tmp_path / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
        capture_output=True, text=True, timeout=300,
    )
    assert install.returncode == 0, install.stderr
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-c",
         "import disentangle, sys; from disentangle.config import configs_root; "
         "print(disentangle.__file__); print(configs_root()); "
         "from disentangle.train import main; sys.exit(main(['--config', 'quickstart', 'model.backbone=mlp', "
         "'model.hidden_sizes=[16]', 'train.steps=2', 'train.progress=false', 'train.traversals=false', "
         "'train.out_dir=run']))"],
        capture_output=True, text=True, cwd=work, env=env, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    module_file, root = proc.stdout.splitlines()[:2]
    assert module_file.startswith(str(target)) and root.startswith(str(target))
    assert (work / "run" / "checkpoint.pt").exists()
