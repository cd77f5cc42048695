"""A resumed run may train a session in another precision than its train.precision, asked for by name:
the run keeps its config and id, execution.jsonl records the change, and the steps taken are those of
the other precision's ordinary path from the same checkpoint."""
import json
import logging
import shutil

import pytest
import torch
import yaml

from disentangle._core.hardware import auto_precision
from disentangle.config import load_config
from disentangle.errors import ConfigError
from disentangle.sweep.ids import run_id
from disentangle.train import main as train_main
from disentangle.training.checkpoint import atomic_save, load_checkpoint
from disentangle.training.resume import RUN_PRECISION, session_precision
from disentangle.training.trainer import fit


def _records(run, name):
    return [json.loads(line) for line in (run / name).read_text().splitlines()]


def _losses(run):
    return [{k: v for k, v in r.items() if k not in ("steps_per_s", "wall_time_s", "paused_s")}
            for r in _records(run, "log.jsonl")]


def _weights(run):
    return torch.load(run / "checkpoint.pt", weights_only=True)["model"]


def _as_if_written_in(run, precision):
    """Rewrite a run folder as though its config had always said ``precision`` (the ordinary path)."""
    for name in ("checkpoint.pt", "checkpoint.prev.pt"):
        if (run / name).exists():
            ckpt = load_checkpoint(run / name)
            ckpt["config"]["train"]["precision"] = precision
            atomic_save(ckpt, run / name)  # with its digest again
    config = yaml.safe_load((run / "config.yaml").read_text())
    config["train"]["precision"] = precision
    (run / "config.yaml").write_text(yaml.safe_dump(config))


@pytest.fixture
def bf16_run(tmp_path, tiny_overrides, one_thread):
    """A bf16 run stopped at its step-4 checkpoint, and the overrides that build its config."""
    run = tmp_path / "bf16"

    def overrides(out, steps, **extra):
        return tiny_overrides(out, steps=steps, **{"train.precision": "bf16", **extra})

    fit(load_config(None, overrides(run, 4)))
    return run, overrides


def test_a_bf16_run_continued_in_fp32_takes_the_fp32_steps_and_stays_a_bf16_run(tmp_path, bf16_run, caplog):
    run, overrides = bf16_run
    fp32_path, bf16_path = tmp_path / "fp32_path", tmp_path / "bf16_path"
    shutil.copytree(run, fp32_path)
    shutil.copytree(run, bf16_path)

    with caplog.at_level(logging.WARNING, logger="disentangle.training.trainer"):
        fit(load_config(None, overrides(run, 8)), resume=True, precision="fp32")
    # the independent path: the same checkpoint, resumed by a run whose config says fp32
    _as_if_written_in(fp32_path, "fp32")
    fit(load_config(None, overrides(fp32_path, 8, **{"train.precision": "fp32"})), resume=True)
    fit(load_config(None, overrides(bf16_path, 8)), resume=True)

    assert _losses(run) == _losses(fp32_path)
    continued, fp32, bf16 = _weights(run), _weights(fp32_path), _weights(bf16_path)
    for key in continued:
        assert torch.equal(continued[key], fp32[key]), key
    assert any(not torch.equal(continued[k], bf16[k]) for k in continued)  # the override took effect

    # still a bf16 run: its config, its checkpoint's config and so its sweep id are unchanged
    assert yaml.safe_load((run / "config.yaml").read_text())["train"]["precision"] == "bf16"
    saved = torch.load(run / "checkpoint.pt", weights_only=True)["config"]
    assert saved["train"]["precision"] == "bf16"
    assert run_id(saved) == run_id(load_config(None, overrides(run, 8)))
    first, second = _records(run, "execution.jsonl")
    assert (first["step"], first["precision"], first["precision_reason"]) == (0, "bf16", RUN_PRECISION)
    assert (second["step"], second["precision"]) == (4, "fp32")
    assert "train.precision is bf16" in second["precision_reason"]
    (warning,) = [r for r in caplog.records if "continuing" in r.message]
    assert "from step 4 in fp32, not in its train.precision bf16" in warning.message

    # a plain resume afterwards trains in the run's own precision again
    fit(load_config(None, overrides(run, 10)), resume=True)
    assert _records(run, "execution.jsonl")[-1]["precision"] == "bf16"
    assert _records(run, "execution.jsonl")[-1]["precision_reason"] == RUN_PRECISION


def test_asking_for_the_runs_own_precision_changes_nothing(tmp_path, bf16_run):
    run, overrides = bf16_run
    plain = tmp_path / "plain"
    shutil.copytree(run, plain)
    fit(load_config(None, overrides(run, 6)), resume=True, precision="bf16")
    fit(load_config(None, overrides(plain, 6)), resume=True)
    assert _losses(run) == _losses(plain)
    assert _records(run, "execution.jsonl")[-1]["precision_reason"] == RUN_PRECISION


def test_a_new_run_or_an_unknown_precision_is_refused_before_anything_is_written(tmp_path, tiny_overrides):
    new = tmp_path / "new"
    with pytest.raises(ConfigError, match=r"a new run trains in its train.precision\. Set train.precision=fp32"):
        fit(load_config(None, tiny_overrides(new, steps=4)), precision="fp32")
    assert not new.exists()
    with pytest.raises(ConfigError, match=r"'fp8' is not a precision\. Choose one of fp32, bf16, fp16 or auto"):
        fit(load_config(None, tiny_overrides(new, steps=4)), resume=True, precision="fp8")
    assert not new.exists()


@pytest.mark.parametrize("device_type", ["cpu", "cuda"])
def test_auto_is_the_devices_choice(device_type):
    run = "bf16" if auto_precision(device_type) == "fp32" else "fp32"
    chosen, reason = session_precision("auto", run, resuming=True, device_type=device_type)
    assert chosen == auto_precision(device_type)
    assert reason == f"asked for this session; the run's train.precision is {run}"
    assert session_precision(None, run, resuming=True, device_type=device_type) == (run, RUN_PRECISION)


def test_the_command_line_continues_a_run_in_another_precision(tmp_path, bf16_run, capsys):
    run, _ = bf16_run
    assert train_main(["--resume", str(run), "--precision", "fp32", "train.steps=6"]) == 0
    assert _records(run, "execution.jsonl")[-1]["precision"] == "fp32"
    assert train_main(["--config", str(run / "config.yaml"), "--precision", "fp32",
                       f"train.out_dir={tmp_path / 'other'}"]) == 2
    err = capsys.readouterr().err
    assert "continues a resumed run in another precision" in err and "Traceback" not in err
    assert not (tmp_path / "other").exists()
