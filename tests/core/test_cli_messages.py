"""Messages a new user meets on bad input: each says what is wrong and what to do instead."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from disentangle.config import load_config
from disentangle.errors import ConfigError
from disentangle.training.trainer import fit

pytestmark = pytest.mark.usefixtures("one_thread")


def test_a_folder_given_as_the_config_is_named_as_a_folder(tmp_path):
    (tmp_path / "a.yaml").write_text("seed: 0\n")
    with pytest.raises(ConfigError, match="is a folder, not a config file.*a.yaml"):
        load_config(tmp_path)


def test_an_unknown_config_name_offers_training_configs_only():
    with pytest.raises(ConfigError) as info:
        load_config("sprites/beta_vea")
    assert "sprites/beta_vae" in str(info.value) and "sweeps/" not in str(info.value) and "studies/" not in str(info.value)


def test_an_empty_config_file_is_refused_not_trained_with_every_default(tmp_path):
    (tmp_path / "empty.yaml").write_text("\n# nothing\n")
    with pytest.raises(ConfigError, match="is empty"):
        load_config(tmp_path / "empty.yaml")


def test_an_output_folder_that_is_a_file_is_refused_before_anything_is_written(tmp_path):
    (tmp_path / "taken").write_text("x")
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        load_config("quickstart", [f"train.out_dir={tmp_path / 'taken'}"])


def test_zoo_info_takes_the_zoo_prefix_like_the_other_commands(capsys):
    from disentangle.zoo.__main__ import main

    assert main(["info", "zoo:beta_vae-sprites-beta4-cpu20k-ref-s0"]) == 0
    assert "name: beta_vae-sprites-beta4-cpu20k-ref-s0" in capsys.readouterr().out


def test_the_checkpoint_fallback_is_one_warning_line(tmp_path):
    run = tmp_path / "run"
    fit(load_config(None, [
        "data.name=sprites", "model.backbone=mlp", "model.hidden_sizes=[16]", "model.latent_dim=2",
        "train.steps=4", "train.batch_size=8", "train.checkpoint_every=2", "train.progress=false",
        "train.traversals=false", f"train.out_dir={run}",
    ]))
    (run / "checkpoint.pt").write_bytes(b"torn")
    shutil.rmtree(tmp_path / "unused", ignore_errors=True)
    proc = subprocess.run(
        [sys.executable, "-m", "disentangle.evaluate", str(run), "-m", "mig", "--set", "mig.num_train=100",
         "--no-progress", "--output", str(tmp_path / "m.json")],
        capture_output=True, text=True, env={**os.environ, "DISENTANGLE_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    lines = [l for l in proc.stderr.splitlines() if "Falling back" in l]
    assert len(lines) == 1 and lines[0].startswith("warning: ") and "UserWarning" not in proc.stderr, proc.stderr


# ---------------------------------------------------------------------- the Python API's inputs
@pytest.fixture(scope="module")
def model():
    from disentangle.models import VAE

    return VAE.from_backbone("conv64", image_shape=(1, 64, 64), latent_dim=4).eval()


def test_a_batch_of_another_channel_count_is_named(model):
    import torch

    from disentangle.errors import InputError

    with pytest.raises(InputError, match=r"trained on 1-channel images; the batch has 3 channels"):
        model.encode(torch.rand(2, 3, 64, 64))
    with pytest.raises(InputError, match=r"For one image, pass x.unsqueeze\(0\)"):
        model.encode(torch.rand(1, 64, 64))


def test_uint8_and_0_255_images_are_refused_or_converted_with_a_message(model):
    import torch

    from disentangle.errors import InputError

    images = (torch.rand(4, 1, 64, 64) > 0.5).to(torch.uint8) * 255
    with pytest.raises(InputError, match="got uint8"):
        model.encode(images)
    assert torch.allclose(model.representation(images), model.encode(images.float() / 255)[0])  # converted
    with pytest.raises(InputError, match="look like 0-255 values"):
        model.representation(images.float())


def test_zoo_list_ranks_the_pretrained_models_by_mig_within_dataset_and_supervision(capsys):
    from disentangle.zoo.__main__ import main

    assert main(["list", "--pretrained"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at, group_at, steps_at = (lines[0].index(c) for c in ("MIG", "dataset", "steps"))  # a fixed-width table
    groups: dict[str, list[float]] = {}
    for line in lines[2:]:
        if "-sprites-" in line:
            groups.setdefault(" ".join(line[group_at:steps_at].split()), []).append(float(line[at:].split()[0]))
    assert len(groups["sprites none"]) >= 2
    for migs in groups.values():
        assert migs == sorted(migs, reverse=True)


def test_visualize_all_says_that_it_skipped_the_scores_plot(tmp_path):
    pytest.importorskip("matplotlib")
    run = tmp_path / "run"
    fit(load_config(None, [
        "data.name=sprites", "model.backbone=mlp", "model.hidden_sizes=[16]", "model.latent_dim=2",
        "train.steps=2", "train.batch_size=8", "train.progress=false", "train.traversals=false", f"train.out_dir={run}",
    ]))
    proc = subprocess.run(
        [sys.executable, "-m", "disentangle.visualize", str(run), "--what", "all", "--out", str(tmp_path / "pics"),
         "--frames", "2", "--limit", "1"],
        capture_output=True, text=True, env={**os.environ, "DISENTANGLE_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "metrics.png skipped" in proc.stderr and "disentangle.evaluate" in proc.stderr
