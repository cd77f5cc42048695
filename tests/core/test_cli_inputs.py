"""Inputs that used to pass the command lines' checks and fail late, or be recorded as given: images
of another shape than the model's, impossible publishing metadata, a run folder given as a sweep's."""
from __future__ import annotations

import pytest

from disentangle.config import load_config
from disentangle.training.trainer import fit

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, tiny_overrides):
    run = tmp_path_factory.mktemp("inputs") / "run"
    fit(load_config(None, tiny_overrides(run, steps=2)))
    return run


def _error(capsys) -> str:
    """The one-paragraph error on stderr (after any progress or info lines)."""
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert "Traceback" not in err and len(errors) == 1 and err.endswith(errors[0] + "\n"), err
    return errors[0]


def test_data_overrides_that_resize_the_images_are_refused_before_scoring_or_drawing(tmp_path, capsys,
                                                                                     train_image_folder_run):
    from disentangle.evaluate import main as evaluate
    from disentangle.visualize.__main__ import main as visualize

    _, run = train_image_folder_run(tmp_path, size=16)
    expected = ("takes images of shape (3, 16, 16) (channels, height, width) and this data gives (3, 32, 32): "
                "the data built with --data image_size=32 gives them")
    assert evaluate([str(run), "-m", "unsupervised_scores", "--data", "image_size=32", "--no-progress"]) == 2
    err = _error(capsys)
    assert expected in err and "image_size=16" in err
    assert not (run / "metrics.json").exists()
    assert visualize([str(run), "-w", "samples", "--data", "image_size=32", "-o", str(tmp_path / "pics")]) == 2
    assert expected in _error(capsys)
    assert not (tmp_path / "pics").exists()  # no empty folder left behind


@pytest.mark.parametrize("extra, message", [
    (["--wall-time", "nan"], "--wall-time nan is not a training time"),
    (["--wall-time", "-3"], "--wall-time -3.0 is not a training time"),
    (["--url", "notaurl"], "--url 'notaurl' is not a download URL"),
    (["--url", "https://"], "--url 'https://' is not a download URL"),
])
def test_zoo_publish_refuses_impossible_metadata_before_scoring(run_dir, tmp_path, capsys, extra, message):
    from disentangle.zoo.__main__ import main

    manifest = tmp_path / "zoo" / "manifest.json"
    assert main(["publish", str(run_dir), "--name", "mine-s0", "--manifest", str(manifest), "--metrics", "mig",
                 *extra]) == 2
    assert message in _error(capsys)
    assert not manifest.parent.exists()


def test_a_sweep_is_not_written_into_a_training_runs_folder(run_dir, tmp_path, capsys):
    from disentangle.sweep.__main__ import main

    sweep = tmp_path / "s.yaml"
    sweep.write_text("name: s\nbase: quickstart\nseeds: [0]\nmetrics: []\n")
    before = sorted(p.name for p in run_dir.iterdir())
    assert main(["run", str(sweep), "--out", str(run_dir), "--dry-run"]) == 2
    assert "holds a training run" in _error(capsys)
    assert sorted(p.name for p in run_dir.iterdir()) == before


def test_a_key_written_twice_in_a_config_or_sweep_file_is_refused(tmp_path):
    from disentangle.errors import ConfigError
    from disentangle.sweep.grid import load_sweep

    config = tmp_path / "c.yaml"
    config.write_text("objective:\n  name: beta_vae\n  beta: 4\n  beta: 1\n")
    with pytest.raises(ConfigError, match=r"the key 'beta' is written twice in one mapping \(lines 3 and 4\)"):
        load_config(str(config), [])
    sweep = tmp_path / "s.yaml"
    sweep.write_text("name: s\nbase: quickstart\nseeds: [0]\nseeds: [1]\n")
    with pytest.raises(ConfigError, match=r"'seeds' is written twice"):
        load_sweep(sweep)


def test_option_names_are_given_as_the_command_line_writes_them(tmp_path, capsys):
    from disentangle.study.__main__ import main as study
    from disentangle.sweep.__main__ import main as sweep

    path = tmp_path / "s.yaml"
    path.write_text("name: s\nbase: quickstart\nseeds: [0]\nmetrics: []\n")
    assert sweep(["run", str(path), "--out", str(tmp_path / "o"), "--workers", "0", "--dry-run"]) == 2
    assert "workers (--workers)" in _error(capsys)
    table = tmp_path / "results.csv"
    table.write_text("run_id,objective.name,seed,mig.mig\na,beta_vae,0,0.1\n")
    assert study([str(table), "--out", str(tmp_path / "r"), "--udr-correlation", "lasoo"]) == 2
    assert "udr_correlation (--udr-correlation)" in _error(capsys)
    assert study([str(table), "--out", str(tmp_path / "r"), "--scores", "headlin"]) == 2
    assert "Did you mean 'headline'?" in _error(capsys)
    assert not (tmp_path / "r").exists()


def test_yaml_merge_keys_and_anchors_still_load_and_an_unhashable_key_is_one_paragraph(tmp_path):
    from disentangle.config.sources import load_yaml, read_yaml_config
    from disentangle.errors import ConfigError

    text = ("common: &c {beta: 4, reconstruction: bernoulli}\nmore: &m {beta: 8}\n"
            "objective: {<<: *c, name: beta_vae}\nother: {<<: [*m, *c], name: beta_vae}\n"
            "overridden: {<<: *c, beta: 2}\n")
    import yaml

    loaded = load_yaml(text)
    assert loaded == yaml.safe_load(text)  # merges as PyYAML does
    assert loaded["objective"] == {"beta": 4, "reconstruction": "bernoulli", "name": "beta_vae"}
    assert loaded["overridden"]["beta"] == 2  # a merged key may be overridden
    bad = tmp_path / "bad.yaml"
    bad.write_text("? [a, b]\n: 1\n")
    with pytest.raises(ConfigError, match="found unhashable key"):
        read_yaml_config(bad)


def test_naming_the_default_component_keeps_the_section(tmp_path):
    """``data.name=sprites`` on a config that leaves the name at its default (sprites) changes nothing."""
    config = tmp_path / "c.yaml"
    config.write_text("objective: {beta: 8}\nmodel: {latent_dim: 6}\n")
    loaded = load_config(str(config), ["objective.name=beta_vae", "model.backbone=conv64"])
    assert loaded.objective.params["beta"] == 8.0 and loaded.model.latent_dim == 6


def test_a_dry_run_reads_a_sweep_folder_it_cannot_write(tmp_path, monkeypatch):
    import errno
    import tempfile as tempfile_module

    from disentangle._core import writable
    from disentangle.sweep import api

    path = tmp_path / "s.yaml"
    path.write_text("name: s\nbase: quickstart\nseeds: [0]\nmetrics: []\n")

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(writable.tempfile, "mkstemp", read_only)
    assert tempfile_module.mkstemp is read_only
    report = api.run(path, tmp_path / "sw", dry_run=True, log=None)
    assert report.dry_run and not (tmp_path / "sw").exists()


def test_study_few_labels_on_a_binary_results_table_is_one_paragraph(tmp_path, capsys):
    from disentangle.study.__main__ import main as study

    sweep = tmp_path / "sw"
    (sweep / "runs").mkdir(parents=True)
    (sweep / "results.csv").write_bytes(b"\xff\xfe\x00binary")
    assert study([str(sweep), "--out", str(tmp_path / "r"), "--few-labels", "mig"]) == 2
    assert "is not a text file" in _error(capsys) and not (tmp_path / "r").exists()
