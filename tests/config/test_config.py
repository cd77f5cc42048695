import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from disentangle import ConfigError
from disentangle.config import Config, apply_overrides, load_config

ROOT = Path(__file__).resolve().parents[2]


def test_defaults_are_resolved_and_round_trip(tiny_dataset_name):
    config = load_config(None, [f"data.name={tiny_dataset_name}", "objective.beta=4", "train.steps=7"])
    assert config.objective.params == {"beta": 4.0, "reconstruction": "bernoulli"}
    assert config.data.params == {"size": 16, "channels": 1}
    assert config.train.steps == 7 and config.train.betas == (0.9, 0.999)
    again = Config.from_dict(yaml.safe_load(config.to_yaml()))
    assert again.to_dict() == config.to_dict()


def test_overrides_parse_yaml_values_and_create_sections():
    raw = apply_overrides({"train": {"steps": 1}}, ["train.steps=5", "train.betas=[0.5, 0.9]", "model.hidden_sizes=[8, 8]", "train.progress=false"])
    assert raw == {"train": {"steps": 5, "betas": [0.5, 0.9], "progress": False}, "model": {"hidden_sizes": [8, 8]}}


def test_yaml_1_1_exponent_strings_are_accepted_as_floats(tiny_dataset_name):
    assert load_config(None, [f"data.name={tiny_dataset_name}", "train.lr=1e-4"]).train.lr == 1e-4


@pytest.mark.parametrize(
    "override, fragments",
    [
        ("train.stpes=3", ["train.stpes", "Did you mean 'steps'", "Valid keys in 'train'"]),
        ("objective.bta=3", ["objective.bta", "Did you mean 'beta'", "beta, reconstruction"]),
        ("objective.name=beta_vea", ["Unknown objective 'beta_vea'", "Did you mean 'beta_vae'"]),
        ("model.backbone=conv46", ["Unknown backbone 'conv46'", "Did you mean 'conv64'"]),
        ("data.name=sprits", ["Unknown dataset 'sprits'"]),
        ("train.lr=fast", ["train.lr", "given 'fast'", "expected float"]),
        ("train.steps=1.5", ["train.steps", "expected int"]),
        ("train.precision=fp8", ["train.precision", "'fp32', 'bf16', 'fp16'"]),
        ("train.device=gpu", ["train.device", "auto, cpu, cuda, mps"]),
        ("train.batch_size=0", ["train.batch_size must be an integer >= 1"]),
        ("model.hidden_sizes=[4]", ["model.hidden_sizes", "for model backbone 'conv64'"]),
        ("traing.steps=3", ["Unknown config section 'traing'", "Did you mean 'train'"]),
        ("train.steps", ["not of the form key=value"]),
        ("seed=-1", ["seed must be an integer from 0 to 2**63 - 1, got -1"]),
        ("train.lr=.inf", ["train.lr must be in (0, inf), got inf"]),
        ("train.weight_decay=.inf", ["train.weight_decay must be in [0, inf), got inf"]),
        (f"seed={2**63}", [f"got {2**63}"]),
        ("seed=1.5", ["seed", "expected int"]),
    ],
)
def test_config_errors_are_one_clear_paragraph(override, fragments, tiny_dataset_name):
    base = [f"data.name={tiny_dataset_name}"] if not override.startswith("data.name") else []
    with pytest.raises(ConfigError) as err:
        load_config(None, base + [override])
    message = str(err.value)
    for fragment in fragments:
        assert fragment in message
    assert "\n" not in message


def test_missing_config_file_suggests_neighbours(tmp_path):
    (tmp_path / "beta_vae.yaml").write_text("seed: 0\n")
    with pytest.raises(ConfigError, match="Did you mean 'beta_vae.yaml'"):
        load_config(tmp_path / "beta_vea.yaml")


def _run_cli(*args, cwd=ROOT):
    return subprocess.run(
        [sys.executable, "-m", "disentangle.train", *args], cwd=cwd, capture_output=True, text=True, timeout=300,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
    )


def test_cli_rejects_bad_config_without_traceback(tmp_path):
    proc = _run_cli("--config", str(ROOT / "configs/quickstart.yaml"), "train.stpes=3", f"train.out_dir={tmp_path / 'x'}")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "Did you mean 'steps'" in proc.stderr
    assert not (tmp_path / "x").exists()


def test_cli_trains_resumes_and_refuses_overwrite(tmp_path):
    # the tiny dataset is registered only inside this pytest process, not in a subprocess: use the
    # real quickstart config on the sprites renderer with an MLP and a handful of steps
    run = tmp_path / "run"
    common = ["model.backbone=mlp", "model.hidden_sizes=[16]", "train.log_every=1", "train.progress=false", "train.traversals=false"]
    first = _run_cli("--config", str(ROOT / "configs/quickstart.yaml"), "train.steps=2", f"train.out_dir={run}", *common)
    assert first.returncode == 0, first.stderr
    again = _run_cli("--config", str(ROOT / "configs/quickstart.yaml"), "train.steps=2", f"train.out_dir={run}", *common)
    assert again.returncode == 2 and "already holds a run" in again.stderr and "Traceback" not in again.stderr
    resumed = _run_cli("--resume", str(run), "train.steps=3")
    assert resumed.returncode == 0, resumed.stderr
    assert yaml.safe_load((run / "config.yaml").read_text())["train"]["steps"] == 3


# ---------------------------------------------------------------------------- train.precision: auto (issue 32)
def test_precision_auto_is_bf16_on_a_cpu_with_native_bf16_and_resolved_when_loaded(monkeypatch):
    from disentangle._core import hardware
    from disentangle._core.hardware import CPU_BF16_ENV, auto_precision
    from disentangle.sweep.ids import run_id
    from disentangle.training.precision import Precision

    monkeypatch.setattr(hardware, "accelerator_available", lambda: False)
    monkeypatch.setenv(CPU_BF16_ENV, "1")
    assert auto_precision("cpu") == auto_precision("auto") == "bf16"
    assert auto_precision("cuda") == auto_precision("mps") == "fp32"  # accelerators: not measured
    auto = load_config(None, ["train.steps=10"])
    assert auto.train.precision == "bf16" and auto.to_dict()["train"]["precision"] == "bf16"
    assert run_id(auto) == run_id(load_config(None, ["train.steps=10", "train.precision=bf16"]))
    assert load_config(None, ["train.steps=10", "train.precision=fp32"]).train.precision == "fp32"  # as written
    assert Precision("auto", torch.device("cpu")).precision == "bf16"
    monkeypatch.setattr(hardware, "accelerator_available", lambda: True)
    assert auto_precision("auto") == "fp32"  # device auto picks the accelerator
    monkeypatch.setenv(CPU_BF16_ENV, "0")  # no native bf16 (or forced off): fp32
    monkeypatch.setattr(hardware, "accelerator_available", lambda: False)
    assert auto_precision("cpu") == "fp32"
    assert load_config(None, ["train.steps=10"]).train.precision == "fp32"
    with pytest.raises(ConfigError, match="train.precision"):
        load_config(None, ["train.precision=bf32"])


def test_native_cpu_bf16_reads_the_cpu_when_not_forced(monkeypatch, tmp_path):
    from disentangle._core import hardware

    monkeypatch.delenv(hardware.CPU_BF16_ENV, raising=False)
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("model name\t: Some CPU\nflags\t\t: fpu sse2 avx512f avx512_bf16\n")
    assert hardware._cpu_flags(str(cpuinfo)) == {"fpu", "sse2", "avx512f", "avx512_bf16"}
    expected = bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()) or bool(
        {"avx512_bf16", "amx_bf16"} & hardware._cpu_flags()
    )
    assert hardware.native_cpu_bf16() is expected
