"""``python -m disentangle.visualize`` and the folder writers behind it, on a tiny trained run."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from PIL import Image

import disentangle
from disentangle.config import load_config
from disentangle.data import build_dataset
from disentangle.training.trainer import fit
from disentangle.visualize import (
    PICTURES,
    kl_per_dim,
    sample_images,
    traversal_grid,
    write_pictures,
    write_training_pictures,
)
from disentangle.visualize.__main__ import main

from .test_helpers import BlockFactors, BlockVAE

pytest.importorskip("matplotlib")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, tiny_overrides):
    run = tmp_path_factory.mktemp("vis") / "run"
    fit(load_config(None, tiny_overrides(run, steps=4)))
    return run


def test_cli_writes_every_picture_from_the_same_functions(run_dir, tmp_path, capsys):
    (run_dir / "metrics.json").write_text(json.dumps({"metrics": {"mig": {"mig": 0.2}}}))
    out = tmp_path / "pictures"
    try:
        assert main([str(run_dir), "--out", str(out), "--frames", "6", "--images", "2"]) == 0
    finally:
        (run_dir / "metrics.json").unlink()
    assert sorted(p.name for p in out.iterdir()) == sorted(PICTURES.values())
    assert capsys.readouterr().out.count("wrote ") == len(PICTURES)

    model = disentangle.load(run_dir)
    dataset = build_dataset(model.config["data"])
    x = sample_images(dataset, 256, seed=0)
    expected = traversal_grid(model, x[:2], kl_per_dim(model, x))
    with Image.open(out / "traversals.png") as png:
        np.testing.assert_array_equal(np.asarray(png.convert("RGB")), expected)
    with Image.open(out / "traversals.gif") as gif:
        assert gif.n_frames == 6
    for name in ("latent_responses.png", "kl_per_dim.png", "metrics.png"):
        with Image.open(out / name) as im:
            assert im.format == "PNG" and min(im.size) > 100


def test_all_leaves_out_metrics_without_scores_and_rerun_rewrites(run_dir, tmp_path):
    out = tmp_path / "p"
    argv = [str(run_dir), "--out", str(out), "--what", "all", "--frames", "4"]
    assert main(argv) == 0
    names = {p.name for p in out.iterdir()}
    assert names == set(PICTURES.values()) - {"metrics.png"}
    before = (out / "reconstructions.png").read_bytes()
    assert main([*argv[:3], "--what", "reconstructions"]) == 0  # idempotent: the same file, no leftovers
    assert {p.name for p in out.iterdir()} == names
    assert (out / "reconstructions.png").read_bytes() == before


@pytest.mark.parametrize(
    "argv_tail, message",
    [
        (["--what", "gf"], "Did you mean 'gif'?"),
        (["--what", "metrics"], "metrics.json"),
        (["--frames", "1"], "--frames"),
        (["--limit", "0"], "--limit"),
        (["--seed", "-1"], "--seed"),
        (["--data", "sise=16"], "Unknown key 'data.sise' (given 16) for data name '_tiny_test'. Did you mean 'size'?"),
    ],
)
def test_bad_options_exit_2_before_writing(run_dir, tmp_path, capsys, argv_tail, message):
    out = tmp_path / "never"
    assert main([str(run_dir), "--out", str(out), *argv_tail]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err
    assert not out.exists()


def test_bad_folder_exits_2_with_one_paragraph(tmp_path, capsys):
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "disentangle.visualize", str(tmp_path / "missing"), "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: No model to show at") and proc.stderr.count("\n") == 1
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main([str(empty), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: No model to show at") and "checkpoint.pt" in err and "Traceback" not in err
    assert not out.exists()


def test_write_pictures_checks_everything_before_making_the_folder(tmp_path):
    model, data = BlockVAE([0.0, 0.0, 0.0]), BlockFactors()
    with pytest.raises(disentangle.ConfigError, match="metrics.png needs scores"):
        write_pictures(model, data, tmp_path / "a", ["metrics"])
    with pytest.raises(disentangle.ConfigError, match="num_frames"):
        write_pictures(model, data, tmp_path / "a", ["gif"], num_frames=0)
    assert not (tmp_path / "a").exists()


def test_training_pictures_leave_rng_and_mode_alone(tmp_path):
    model, data = BlockVAE([0.0, -1.0, -2.0]), BlockFactors()
    model.train()
    torch.manual_seed(5)
    state = torch.get_rng_state()
    written = write_training_pictures(model, data, tmp_path / "run", seed=3)
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["reconstructions.png", "traversals.png"]
    assert torch.equal(torch.get_rng_state(), state) and model.training
    again = write_pictures(model, data, tmp_path / "cli", ["traversals", "reconstructions"], seed=3)
    for name, path in written.items():
        assert path.read_bytes() == again[name].read_bytes()


def test_zoo_source_uses_the_published_scores(run_dir, tmp_path, monkeypatch):
    # no pretrained weights exist yet: stand in for the zoo's load and manifest record
    from disentangle import zoo

    trained = disentangle.load(run_dir)
    monkeypatch.setattr(disentangle, "load", lambda source, map_location="cpu": trained if source == "zoo:demo" else None)
    monkeypatch.setattr(zoo, "info", lambda name: {"metrics": {"mig": {"mig": 0.4}}} if name == "demo" else {})
    monkeypatch.chdir(tmp_path)
    assert main(["zoo:demo", "--what", "metrics,samples"]) == 0
    assert sorted(p.name for p in (tmp_path / "demo_pictures").iterdir()) == ["metrics.png", "samples.png"]


def test_zoo_name_without_scores_and_explicit_metrics_exits_2(tmp_path, monkeypatch, capsys):
    from disentangle import zoo

    monkeypatch.setattr(zoo, "info", lambda name: {"metrics": None})
    assert main(["zoo:demo", "--what", "metrics", "--out", str(tmp_path / "o")]) == 2
    assert "metrics.png needs scores" in capsys.readouterr().err and not (tmp_path / "o").exists()


def test_data_overrides_change_the_images_the_pictures_are_drawn_from(run_dir, tmp_path, capsys):
    """``--data KEY=VALUE`` builds the run's dataset with the change (here: another image size,
    which the tiny MLP cannot encode, so the command fails naming the shapes before it draws; the same size works)."""
    assert main([str(run_dir), "--out", str(tmp_path / "same"), "--what", "reconstructions", "--data", "size=16"]) == 0
    assert (tmp_path / "same" / "reconstructions.png").exists()
    assert main([str(run_dir), "--out", str(tmp_path / "other"), "--what", "reconstructions", "--data", "size=8"]) == 2
    err = capsys.readouterr().err
    assert "takes images of shape (1, 16, 16) (channels, height, width) and this data gives (1, 8, 8): the data " \
           "built with --data size=8 gives them" in err and not (tmp_path / "other").exists()


def test_metrics_that_is_a_folder_exits_2_before_loading(run_dir, tmp_path, capsys):
    """``--metrics RUN_DIR`` (a folder where the metrics file is expected) is one paragraph naming the
    file to give, not advice to rewrite a file, and nothing is loaded or written."""
    out = tmp_path / "never"
    (run_dir / "metrics.json").write_text(json.dumps({"metrics": {"mig": {"mig": 0.2}}}))
    try:
        assert main([str(run_dir), "--out", str(out), "--metrics", str(run_dir)]) == 2
    finally:
        (run_dir / "metrics.json").unlink()
    err = capsys.readouterr().err
    assert err.startswith(f"error: --metrics '{run_dir}' is a folder, and --metrics takes a file") and err.count("\n") == 1
    assert f"--metrics {run_dir / 'metrics.json'}" in err and "Rewrite" not in err and "Traceback" not in err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main([str(run_dir), "--out", str(out), "--metrics", str(empty)]) == 2
    assert "That folder holds none: compute the scores with  python -m disentangle.evaluate" in capsys.readouterr().err
    assert not out.exists()


def test_the_command_line_draws_with_the_run_s_seed_and_the_model_s_own_range(tmp_path, tiny_overrides, monkeypatch):
    """visualize RUN drew with seed 0 and ±2 whatever the run: a seed-7 run's traversals.png, written
    by the trainer with seed 7, was replaced by other images, and InfoGAN's ±1 codes were swept to ±2."""
    import disentangle.visualize.pictures as pictures_module

    run = tmp_path / "run"
    fit(load_config(None, tiny_overrides(run, steps=4, seed=7)))
    seen = {}

    def spy(model, dataset, out, names, **kwargs):
        seen.update(kwargs)
        return {}

    monkeypatch.setattr(pictures_module, "write_pictures", spy)
    assert main([str(run), "--what", "traversals", "--out", str(tmp_path / "pics")]) == 0
    assert seen["seed"] == 7 and seen["limit"] is None  # None: write_pictures takes the model's code range
    assert main([str(run), "--what", "traversals", "--out", str(tmp_path / "pics"), "--seed", "2", "--limit", "3"]) == 0
    assert (seen["seed"], seen["limit"]) == (2, 3.0)


def test_scores_of_another_step_are_not_drawn_as_the_model_s(run_dir, tmp_path, capsys):
    """metrics.png read the run folder's metrics.json whatever checkpoint was loaded (checkpoint.prev.pt,
    or a run trained on after it was scored)."""
    run = tmp_path / "run"
    import shutil

    shutil.copytree(run_dir, run)
    (run / "metrics.json").write_text(json.dumps({"step": 2, "seed": 0, "metrics": {"mig": {"mig": 0.3}}}))
    assert main([str(run), "--what", "metrics", "--out", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert "the scores for metrics.png are of the model at step 2, and the model loaded from" in err
    assert "is at step 4" in err and not (tmp_path / "a").exists()
    assert main([str(run), "--out", str(tmp_path / "b"), "--frames", "2"]) == 0
    assert "note: metrics.png skipped: the scores for metrics.png are of the model at step 2" in capsys.readouterr().err
    assert not (tmp_path / "b" / "metrics.png").exists() and (tmp_path / "b" / "traversals.png").exists()


def test_a_zoo_weight_file_finds_the_scores_evaluate_wrote_for_it(tmp_path, monkeypatch, tiny_overrides, capsys):
    from disentangle import zoo
    from disentangle.evaluate import main as evaluate

    run = tmp_path / "run"
    fit(load_config(None, tiny_overrides(run, steps=4)))
    record = zoo.publish(run, "tiny-weights-s0", manifest=tmp_path / "zoo" / "manifest.json", metrics=["mig"])
    weights = tmp_path / "zoo" / record["file"]
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "pictures"
    assert main([str(weights), "--out", str(out), "--what", "metrics"]) == 2  # not evaluated yet
    assert "metrics.png needs scores" in capsys.readouterr().err
    assert evaluate([str(weights), "--metrics", "mig"]) == 0  # into ./tiny-weights-s0.metrics.json
    assert (tmp_path / "tiny-weights-s0.metrics.json").is_file()
    assert main([str(weights), "--out", str(out), "--what", "metrics"]) == 0
    assert (out / "metrics.png").is_file()
    # a scores file of this name for other weights (another model published under the same name)
    record = json.loads((tmp_path / "tiny-weights-s0.metrics.json").read_text())
    (tmp_path / "tiny-weights-s0.metrics.json").write_text(json.dumps({**record, "model_sha256": "0" * 64}))
    capsys.readouterr()
    assert main([str(weights), "--out", str(tmp_path / "other"), "--what", "metrics"]) == 2
    assert "of another model than the one loaded" in capsys.readouterr().err


def test_a_generators_animation_shows_every_code_whatever_its_encoders_kl(monkeypatch):
    """InfoGAN's generator is given every code: its encoder's (Q's) "KL" says how sure the recovery is,
    and a seed whose Q is unsure of one code must not drop that code's panel from traversals.gif."""
    import disentangle.visualize.traversals as traversals

    model = BlockVAE([0.0, 0.0, 0.0])
    from .test_helpers import BLOCK

    x = torch.full((1, 1, BLOCK, 3 * BLOCK), 0.5)
    shown = {}
    real = traversals.latent_traversals
    monkeypatch.setattr(traversals, "latent_traversals",
                        lambda m, image, panels, values: shown.setdefault("panels", list(panels)) and real(m, image, panels, values))
    kl = [0.5, 0.01, 0.2]
    traversals.traversal_animation(model, x, kl, num_frames=4)
    assert shown.pop("panels") == [0, 2]  # a VAE: the latents it uses
    model.decoder = torch.nn.Module()
    model.decoder.code_prior = "uniform"
    traversals.traversal_animation(model, x, kl, num_frames=4)
    assert shown.pop("panels") == [0, 2, 1]  # a generator: every code, by KL
