"""Every command line that takes a model accepts the four ways to name one: a run folder, a
checkpoint file, ``zoo:NAME`` and a zoo weight file (the path ``zoo fetch`` prints); and what was
scored (file and step) is recorded and printed, a fallback to ``checkpoint.prev.pt`` included."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import disentangle
from disentangle.config import load_config
from disentangle.evaluate import default_output, main
from disentangle.loading import is_weights_file, is_zoo_name
from disentangle.training.trainer import fit

ROOT = Path(__file__).resolve().parents[2]
ZOO_NAME = "beta_tcvae-sprites-beta6-cpu20k-ref-s0"
CHEAP_MIG = ["--metrics", "mig", "--set", "mig.num_train=200", "--no-code-table", "--no-progress"]


def _cli(module: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def sprites_run(tmp_path_factory):
    """A 4-step run on the sprites (a dataset a subprocess can build) with a small MLP."""
    run = tmp_path_factory.mktemp("sources") / "run"
    fit(load_config(None, [
        "data.name=sprites", "model.backbone=mlp", "model.hidden_sizes=[32]", "model.latent_dim=4",
        "train.steps=4", "train.batch_size=8", "train.checkpoint_every=2", "train.log_every=2",
        "train.progress=false", "train.traversals=false", "train.precision=fp32", f"train.out_dir={run}",
    ]))
    return run


@pytest.fixture(scope="module")
def fetched_file(tmp_path_factory):
    """The path ``python -m disentangle.zoo fetch NAME`` prints (a shipped file: no download)."""
    proc = _cli("disentangle.zoo", "fetch", ZOO_NAME, cwd=tmp_path_factory.mktemp("fetch"))
    assert proc.returncode == 0, proc.stderr
    path = Path(proc.stdout.strip().splitlines()[-1])
    assert path.is_file()
    return path


def test_source_kinds_are_recognised(sprites_run, fetched_file):
    assert is_zoo_name(f"zoo:{ZOO_NAME}") and is_zoo_name(Path(f"zoo:{ZOO_NAME}"))
    assert not is_zoo_name(str(sprites_run))
    assert is_weights_file(fetched_file)
    assert not is_weights_file(sprites_run / "checkpoint.pt") and not is_weights_file(sprites_run)


@pytest.mark.parametrize("kind", ["run folder", "checkpoint file", "zoo name", "path spelling zoo:NAME", "weights file"])
def test_load_takes_every_kind_of_source(kind, sprites_run, fetched_file):
    source = {
        "run folder": sprites_run, "checkpoint file": sprites_run / "checkpoint.pt", "zoo name": f"zoo:{ZOO_NAME}",
        "path spelling zoo:NAME": Path(f"zoo:{ZOO_NAME}"), "weights file": fetched_file,
    }[kind]
    model = disentangle.load(source)
    expected_steps = 4 if "run" in kind or "checkpoint" in kind else 20_000
    assert model.trained_steps == expected_steps
    if kind in ("zoo name", "path spelling zoo:NAME"):
        assert model.source == f"zoo:{ZOO_NAME}"
    elif kind == "weights file":
        assert model.source == str(fetched_file) and model.zoo_name == ZOO_NAME
    else:
        assert model.source == str(sprites_run / "checkpoint.pt")


@pytest.mark.parametrize("kind", ["run folder", "checkpoint file", "zoo name", "weights file"])
def test_evaluate_cli_scores_every_kind_of_source(kind, sprites_run, fetched_file, tmp_path):
    source = {"run folder": str(sprites_run), "checkpoint file": str(sprites_run / "checkpoint.pt"),
              "zoo name": f"zoo:{ZOO_NAME}", "weights file": str(fetched_file)}[kind]
    output = tmp_path / "scores.json"
    proc = _cli("disentangle.evaluate", source, *CHEAP_MIG, "--output", str(output), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    record = json.loads(output.read_text())
    assert 0.0 <= record["metrics"]["mig"]["mig"] <= 1.0
    step = 4 if kind in ("run folder", "checkpoint file") else 20_000
    assert record["step"] == step
    assert f"at step {step:,}" in proc.stdout
    expected = {"zoo name": f"zoo:{ZOO_NAME}", "weights file": str(fetched_file)}.get(
        kind, str(sprites_run / "checkpoint.pt"))
    assert record["checkpoint"] == expected


def test_evaluate_writes_a_zoo_models_scores_in_the_current_folder(tmp_path):
    proc = _cli("disentangle.evaluate", f"zoo:{ZOO_NAME}", *CHEAP_MIG, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / f"{ZOO_NAME}.metrics.json").is_file()
    assert default_output(f"zoo:{ZOO_NAME}") == Path(f"{ZOO_NAME}.metrics.json")


@pytest.mark.parametrize("kind", ["run folder", "checkpoint file", "zoo name", "weights file"])
def test_visualize_cli_takes_every_kind_of_source(kind, sprites_run, fetched_file, tmp_path):
    source = {"run folder": str(sprites_run), "checkpoint file": str(sprites_run / "checkpoint.pt"),
              "zoo name": f"zoo:{ZOO_NAME}", "weights file": str(fetched_file)}[kind]
    out = tmp_path / "pictures"
    proc = _cli("disentangle.visualize", source, "--what", "kl_per_dim", "--out", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (out / "kl_per_dim.png").is_file()


def test_visualize_writes_a_weight_files_pictures_here_not_in_the_cache(fetched_file, tmp_path):
    proc = _cli("disentangle.visualize", str(fetched_file), "--what", "kl_per_dim", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / f"{fetched_file.stem}_pictures" / "kl_per_dim.png").is_file()


def test_a_fallback_to_the_previous_checkpoint_is_recorded_and_printed(sprites_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(sprites_run, run)
    (run / "checkpoint.pt").write_bytes(b"truncated")
    previous_step = int(disentangle.load(run / "checkpoint.prev.pt").trained_steps)
    assert previous_step < 4
    with pytest.warns(UserWarning, match="the model loaded is the one of that step"):
        rc = main([str(run), *CHEAP_MIG])
    assert rc == 0
    record = json.loads((run / "metrics.json").read_text())
    assert record["checkpoint"] == str(run / "checkpoint.prev.pt")
    assert record["step"] == previous_step
    assert f"checkpoint.prev.pt at step {previous_step}" in capsys.readouterr().out


def test_scores_of_another_step_are_not_merged_into_a_record(sprites_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(sprites_run, run)
    assert main([str(run), *CHEAP_MIG]) == 0
    first = json.loads((run / "metrics.json").read_text())
    (run / "checkpoint.pt").write_bytes(b"truncated")  # the newest is lost: the run falls back a step
    with pytest.warns(UserWarning):
        rc = main([str(run), *CHEAP_MIG])
    assert rc == 2
    assert "at step 4" in capsys.readouterr().err
    assert json.loads((run / "metrics.json").read_text()) == first  # untouched


def test_a_changed_weight_file_loaded_by_path_does_not_claim_the_zoo_name(fetched_file, tmp_path, caplog):
    """Its metadata still names the published model; its bytes are not that model's (one weight byte
    flipped): it loads as the file it is, with a warning, without the zoo name."""
    import logging
    import struct

    data = bytearray(fetched_file.read_bytes())
    (header,) = struct.unpack("<Q", bytes(data[:8]))
    data[8 + header + (len(data) - 8 - header) // 2] ^= 0x01
    changed = tmp_path / "changed.safetensors"
    changed.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="disentangle.loading"):
        model = disentangle.load(changed)
    assert getattr(model, "zoo_name", None) is None and model.trained_steps == 20_000
    assert f"names itself the zoo model {ZOO_NAME}, but its bytes are not that model's" in caplog.text
    assert getattr(disentangle.load(fetched_file), "zoo_name", None) == ZOO_NAME
