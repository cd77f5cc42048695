"""``python -m disentangle.evaluate``: a saved run evaluated on its own dataset, written as JSON."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import disentangle
from disentangle.config import load_config
from disentangle.evaluate import main
from disentangle.metrics import resolve_metric_names
from disentangle.training.trainer import fit

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, tiny_overrides):
    run = tmp_path_factory.mktemp("evaluate") / "run"
    fit(load_config(None, tiny_overrides(run, steps=4)))
    return run


def test_evaluates_a_run_and_writes_json(run_dir, capsys):
    rc = main([str(run_dir), "--metrics", "mig,unsupervised_scores,dci", "--no-progress",
               "--set", "mig.num_train=500", "--set", "unsupervised_scores.num_train=500",
               "--set", "dci.num_train=200", "--set", "dci.num_test=100"])
    assert rc == 0, capsys.readouterr().err
    record = json.loads((run_dir / "metrics.json").read_text())
    assert set(record["metrics"]) == {"mig", "unsupervised_scores", "dci"}
    assert set(record["seconds"]) == set(record["metrics"])
    assert 0.0 <= record["metrics"]["mig"]["mig"] <= 1.0
    assert record["seed"] == 0
    # every score records what it depends on (defaults filled in), so nothing reuses it for other settings
    assert record["metric_settings"]["mig"]["num_train"] == 500
    assert record["metric_settings"]["mig"]["num_bins"] == 20
    assert record["metric_settings"]["dci"]["num_test"] == 100
    out = capsys.readouterr().out
    assert "dci.disentanglement" in out and "metrics.json" in out
    # the same numbers as calling the metric directly on the loaded model and its dataset
    from disentangle.data import build_dataset
    from disentangle.metrics import mig

    model = disentangle.load(run_dir)
    direct = mig(build_dataset(model.config["data"]), model, num_train=500, seed=0)
    assert record["metrics"]["mig"] == pytest.approx(direct, rel=1e-12)


def test_progress_bar_and_output_path(run_dir, tmp_path, capsys):
    out_file = tmp_path / "sub" / "scores.json"
    rc = main([str(run_dir), "-m", "mig", "--set", "mig.num_train=300", "--output", str(out_file), "--seed", "3"])
    assert rc == 0
    assert json.loads(out_file.read_text())["seed"] == 3
    assert "metrics" in capsys.readouterr().err  # tqdm's bar


def test_all_includes_the_encoder_metrics_for_a_model(run_dir):
    from disentangle.metrics import METRICS

    names = resolve_metric_names("all", disentangle.load(run_dir))
    assert "elbo_decomposition" in names and sorted(names) == sorted(METRICS.names())  # each metric once


@pytest.mark.parametrize(
    "args, message",
    [
        (["--metrics", "mig,dcii"], "Did you mean 'dci'"),
        (["--metrics", "mig", "--set", "mig.num_trian=5"], "Did you mean 'num_train'"),
        (["--metrics", "mig", "--set", "dci.num_train=5"], "not among the metrics"),
        (["--metrics", "mig", "--set", "mig"], "METRIC.KEY=VALUE"),
    ],
)
def test_usage_errors_exit_2_before_loading(args, message, tmp_path, capsys):
    rc = main([str(tmp_path / "no_such_run"), *args])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and "Traceback" not in err


def test_missing_run_exits_1(tmp_path, capsys):
    rc = main([str(tmp_path / "no_such_run"), "--metrics", "mig"])
    err = capsys.readouterr().err
    assert rc == 2 and "Cannot load a model" in err and "Traceback" not in err


def test_module_entry_point_reports_unknown_metric_without_traceback(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "disentangle.evaluate", str(tmp_path), "--metrics", "sapp"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "Unknown metric 'sapp'" in proc.stderr
    assert "Did you mean 'sap'" in proc.stderr and "sap_score" in proc.stderr


def test_evaluating_again_merges_into_the_metrics_file_and_keeps_the_rest(run_dir, tmp_path, capsys):
    """A sweep's metrics.json holds seven metrics and its own keys: evaluating one metric again
    (other settings) replaces that metric only; nothing else is lost."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    sweep_record = {
        "run_id": "abc", "values": {"objective.beta": 4.0}, "seed": 0, "run_dir": "/sweep/runs/abc",
        "metrics": {"sap_score": {"sap": 0.25}, "mig": {"mig": 0.5}},
        "metric_settings": {"sap_score": {"num_train": 123}, "mig": {"num_train": 999}},
        "seconds": {"sap_score": 1.0, "mig": 2.0},
    }
    (run / "metrics.json").write_text(json.dumps(sweep_record))
    assert main([str(run), "-m", "mig", "--set", "mig.num_train=300", "--no-progress"]) == 0
    record = json.loads((run / "metrics.json").read_text())
    assert record["run_id"] == "abc" and record["values"] == {"objective.beta": 4.0}
    assert record["run_dir"] == "/sweep/runs/abc"
    assert record["metrics"]["sap_score"] == {"sap": 0.25}
    assert record["metric_settings"]["sap_score"] == {"num_train": 123}
    assert record["metric_settings"]["mig"]["num_train"] == 300
    assert record["metrics"]["mig"]["mig"] != 0.5 and record["seconds"]["sap_score"] == 1.0
    from disentangle.data import build_dataset
    from disentangle.metrics import mig

    model = disentangle.load(run)
    assert record["metrics"]["mig"] == pytest.approx(mig(build_dataset(model.config["data"]), model, num_train=300, seed=0), rel=1e-12)


def test_a_seed_other_than_the_files_is_refused_before_computing(run_dir, tmp_path, capsys):
    out = tmp_path / "m.json"
    out.write_text(json.dumps({"seed": 0, "metrics": {"mig": {"mig": 0.5}}}))
    assert main([str(run_dir), "-m", "mig", "--seed", "3", "--output", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "seed 0" in err and "--seed 0" in err and "--output" in err
    assert json.loads(out.read_text()) == {"seed": 0, "metrics": {"mig": {"mig": 0.5}}}
    out.write_text("[1, 2]")
    assert main([str(run_dir), "-m", "mig", "--output", str(out), "--no-progress"]) == 2
    assert "not a metrics record" in capsys.readouterr().err and out.read_text() == "[1, 2]"


def test_scores_of_another_model_or_of_a_sweep_s_other_step_are_not_merged(run_dir, tmp_path, capsys, tiny_overrides):
    """A record is of one model: another run's scores in the file (same seed, same step), or a
    sweep's record of another step (it calls the step 'steps'), are refused, not merged."""
    out = tmp_path / "m.json"
    assert main([str(run_dir), "-m", "mig", "--set", "mig.num_train=200", "--output", str(out), "--no-progress"]) == 0
    assert len(json.loads(out.read_text())["model_sha256"]) == 64
    other = tmp_path / "other"
    fit(load_config(None, tiny_overrides(other, steps=4, **{"seed": 1})))  # another model, same step
    assert main([str(other), "-m", "mig", "--seed", "0", "--set", "mig.num_train=200", "--output", str(out),
                 "--no-progress"]) == 2
    assert "holds scores of another model" in capsys.readouterr().err
    assert list(json.loads(out.read_text())["metrics"]) == ["mig"]
    sweep_record = tmp_path / "sweep.json"
    sweep_record.write_text(json.dumps({"run_id": "x", "steps": 999, "seed": 0, "metrics": {"dci": {}},
                                        "train_seconds": 1.0, "finished_at": "x"}))
    assert main([str(run_dir), "-m", "mig", "--set", "mig.num_train=200", "--output", str(sweep_record),
                 "--no-progress"]) == 2
    assert "holds scores of the model at step 999" in capsys.readouterr().err


def test_a_record_without_settings_keeps_its_other_metrics_at_their_defaults():
    from disentangle.evaluate import merged_record
    from disentangle.metrics.results import settings_identity

    merged = merged_record({"seed": 0, "metrics": {"sap_score": {"sap": 0.1}}},
                           {"run_dir": "r", "seed": 0, "metrics": {"mig": {"mig": 0.2}},
                            "metric_settings": {"mig": {"num_train": 5}}, "seconds": {"mig": 1.0}})
    assert merged["metric_settings"] == {"sap_score": settings_identity("sap_score", {}), "mig": {"num_train": 5}}
    assert merged["metrics"] == {"sap_score": {"sap": 0.1}, "mig": {"mig": 0.2}} and merged["run_dir"] == "r"


def test_channels_last_changes_the_scores_by_rounding_only(tmp_path, capsys, one_thread):
    """A conv model evaluated with its weights in channels-last layout (``--channels-last true``,
    what ``auto`` picks on an AVX512 CPU) scores as in the default layout, up to rounding."""
    run = tmp_path / "conv"
    fit(load_config(None, [
        "data.name=sprites", "model.backbone=conv64", "model.latent_dim=4", "train.steps=3", "train.batch_size=8",
        f"train.out_dir={run}", "train.progress=false", "train.traversals=false", "train.device=cpu",
    ]))
    scores = {}
    for layout in ("false", "true"):
        out = tmp_path / f"{layout}.json"
        rc = main([str(run), "--metrics", "mig,factor_vae_score", "--no-progress", "--channels-last", layout,
                   "--output", str(out), "--set", "mig.num_train=400", "--set", "factor_vae_score.num_train=100",
                   "--set", "factor_vae_score.num_eval=50", "--set", "factor_vae_score.num_variance_estimate=400"])
        assert rc == 0, capsys.readouterr().err
        scores[layout] = json.loads(out.read_text())["metrics"]
    # codes equal to ~1e-6: a histogram bin or a majority vote may flip at most, nothing more
    assert scores["true"]["mig"]["mig"] == pytest.approx(scores["false"]["mig"]["mig"], abs=0.01)
    assert scores["true"]["factor_vae_score"]["eval_accuracy"] == pytest.approx(
        scores["false"]["factor_vae_score"]["eval_accuracy"], abs=0.05
    )


def test_a_metric_the_data_cannot_give_is_refused_before_the_progress_bar(tmp_path, capsys, one_thread,
                                                                          train_image_folder_run):
    """A run on unlabelled images (an image folder): factor_vae_score needs a factor grid, and the
    command says so in one paragraph before it draws a bar or encodes an image."""
    _, run = train_image_folder_run(tmp_path)
    capsys.readouterr()
    assert main([str(run), "--metrics", "mig,factor_vae_score"]) == 2
    err = capsys.readouterr().err
    assert "'mig' cannot run on" in err and "Metrics that apply to it: elbo, unsupervised_scores" in err
    assert "Evaluate it on labelled images" in err  # mig needs labels, not a grid
    assert "metrics:" not in err and "%|" not in err  # no bar was drawn
    assert not (run / "metrics.json").exists()


def test_data_overrides_score_a_run_whose_images_moved_and_keep_other_data_apart(tmp_path, capsys, one_thread,
                                                                                  train_image_folder_run):
    """``--data path=...`` finds images that moved (the same data: merged into the run's record);
    ``--data`` of what the images are (here ``channels``) is other data: refused for the run's
    record, written with ``--output``; a wrong key is one paragraph with a did-you-mean, exit 2."""
    folder, run = train_image_folder_run(tmp_path)
    elbo = ["--metrics", "elbo", "--set", "elbo.num_samples=16", "--no-progress"]
    assert main([str(run), *elbo]) == 0
    own = json.loads((run / "metrics.json").read_text())["metrics"]["elbo"]
    moved = folder.rename(tmp_path / "moved")
    capsys.readouterr()
    assert main([str(run), *elbo]) == 2  # the run's data.path is gone
    err = capsys.readouterr().err
    assert "does not exist" in err and "if the data are elsewhere now, give their place with --data path=NEW_PLACE" in err
    assert main([str(run), *elbo, "--data", f"path={moved}", "--data", f"cache={tmp_path / 'other_cache'}"]) == 0
    record = json.loads((run / "metrics.json").read_text())
    assert record["metrics"]["elbo"] == own  # the same images, the same scores
    assert record["data_overrides"] == {"path": str(moved), "cache": str(tmp_path / "other_cache")}
    # the run's own value of a key is no change: merged into the run's record
    assert main([str(run), *elbo, "--data", f"path={moved}", "--data", "image_size=16", "--data", "name=image_folder"]) == 0
    assert json.loads((run / "metrics.json").read_text())["data_overrides"] == {"path": str(moved)}
    capsys.readouterr()
    assert main([str(run), *elbo, "--data", f"path={moved}", "--data", "channels=1"]) == 2  # not even scorable
    assert "takes images of shape (3, 16, 16) (channels, height, width) and this data gives (1, 16, 16)" in (
        capsys.readouterr().err)
    assert main([str(run), *elbo, "--data", f"path={moved}", "--data", "skip_unreadable=false"]) == 2
    assert "holds scores on the run's own data, and this evaluation scores its data with skip_unreadable" in (
        capsys.readouterr().err)
    strict = tmp_path / "strict.json"  # other data (a file that cannot be read would stop it), its own file
    assert main([str(run), *elbo, "--data", f"path={moved}", "--data", "skip_unreadable=false",
                 "--output", str(strict)]) == 0
    assert json.loads(strict.read_text())["data_overrides"] == {"path": str(moved), "skip_unreadable": False}
    assert main([str(run), *elbo, "--data", f"pth={moved}"]) == 2
    err = capsys.readouterr().err
    assert "Unknown key 'data.pth'" in err and "Did you mean 'path'?" in err
    assert main([str(run), *elbo, "--data", "path"]) == 2
    assert "--data expects KEY=VALUE" in capsys.readouterr().err


def test_ctrl_c_keeps_the_finished_metrics_and_names_the_rest(run_dir, tmp_path, capsys, monkeypatch):
    """Ctrl-C in the second metric: the first one's scores are on disk (written as it finished),
    and the message names the --metrics still to run; rerunning those completes the file."""
    import shutil

    from disentangle.metrics import METRICS

    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    (run / "metrics.json").unlink(missing_ok=True)
    get = METRICS.get

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(METRICS, "get", lambda name: interrupted if name == "sap_score" else get(name))
    argv = [str(run), "--metrics", "mig,sap_score,dci", "--set", "mig.num_train=300", "--no-progress"]
    assert main(argv) == 130
    err = capsys.readouterr().err
    assert "no metrics were written" not in err
    assert (f"interrupted: the scores of mig are in {run / 'metrics.json'}. Still to run: --metrics sap_score,dci;"
            in err)
    record = json.loads((run / "metrics.json").read_text())
    assert set(record["metrics"]) == set(record["seconds"]) == set(record["metric_settings"]) == {"mig"}
    assert record["metric_settings"]["mig"]["num_train"] == 300 and record["seed"] == 0 and record["step"] == 4
    assert 0.0 <= record["metrics"]["mig"]["mig"] <= 1.0
    assert not [p.name for p in run.iterdir() if p.name.endswith(".tmp")]  # written atomically
    monkeypatch.undo()
    assert main([str(run), "--metrics", "sap_score,dci", "--set", "dci.num_train=200", "--set", "dci.num_test=100",
                 "--no-progress"]) == 0
    assert set(json.loads((run / "metrics.json").read_text())["metrics"]) == {"mig", "sap_score", "dci"}


def test_an_output_that_is_a_folder_exits_2_before_loading(run_dir, tmp_path, capsys, monkeypatch):
    import disentangle.evaluate as evaluate_module

    def never(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(evaluate_module, "_load_run", never)
    folder = tmp_path / "scores"
    folder.mkdir()
    assert main([str(run_dir), "--metrics", "mig", "--output", str(folder), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --output '{folder}' is a folder;") and err.count("\n") == 1
    assert f"--output {folder / 'metrics.json'}" in err and "Move it away" not in err and "Traceback" not in err
    assert list(folder.iterdir()) == []
    a_file = tmp_path / "a.json"
    a_file.write_text("{}")
    assert main([str(run_dir), "--metrics", "mig", "--output", str(a_file / "x.json"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"{a_file} is a file, not a folder" in err and "Traceback" not in err and a_file.read_text() == "{}"
    # a folder still to be made, written with its slash: not a file named like it
    assert main([str(run_dir), "--metrics", "mig", "--output", f"{tmp_path / 'new'}/", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --output '{tmp_path / 'new'}/' names a folder (it ends with '/');")
    assert f"--output {tmp_path / 'new' / 'metrics.json'}" in err and not (tmp_path / "new").exists()


def test_a_merge_keeps_no_timing_or_data_change_of_an_older_evaluation():
    from disentangle.evaluate import merged_record

    previous = {"run_dir": "r", "seed": 0, "metrics": {"mig": {"mig": 0.1}}, "metric_settings": {}, "seconds": {},
                "total_seconds": 99.0, "data_overrides": {"path": "/old"}}
    new = {"run_dir": "r", "seed": 0, "metrics": {"sap_score": {"sap": 0.2}}, "metric_settings": {}, "seconds": {}}
    merged = merged_record(previous, new)
    assert "total_seconds" not in merged and "data_overrides" not in merged
    assert set(merged["metrics"]) == {"mig", "sap_score"}
    assert merged_record(previous, {**new, "total_seconds": 3.0})["total_seconds"] == 3.0


def test_a_data_value_equal_to_a_default_the_saved_section_lacks_is_no_change():
    """A run saved before a data key existed has no value for it: ``--data KEY=DEFAULT`` gives it
    its own data (no change), another value is other data, and a written value wins over a default."""
    from disentangle.evaluate import data_changes

    saved = {"name": "image_folder", "path": "/x", "image_size": 16}  # no skip_unreadable, channels
    assert data_changes(saved, {"skip_unreadable": True, "channels": "auto"}) == {}
    assert data_changes(saved, {"skip_unreadable": False, "channels": 1}) == {"skip_unreadable": False,
                                                                             "channels": 1}
    assert data_changes(saved, {"image_size": 64}) == {"image_size": 64}  # 64 is the default, 16 the run's
    assert data_changes(saved, {"path": "/y"}) == {"path": "/y"}
    assert data_changes({"name": "no_such_dataset"}, {"image_size": 64}) == {"image_size": 64}


def test_another_folder_of_images_is_other_data_not_merged_into_the_runs_record(tmp_path, capsys, one_thread,
                                                                                 train_image_folder_run):
    """``--data path=`` naming a folder with other images (one more here), or the run's folder after
    an image was replaced by one of another size: scores of other data, recorded as such
    (``data_overrides.content``) and refused for the run's own record."""
    from PIL import Image

    folder, run = train_image_folder_run(tmp_path)
    elbo = ["--metrics", "elbo", "--set", "elbo.num_samples=16", "--no-progress"]
    assert main([str(run), *elbo]) == 0
    copy = tmp_path / "copy"
    copy.mkdir()
    for image in folder.iterdir():
        (copy / image.name).write_bytes(image.read_bytes())
    assert main([str(run), *elbo, "--data", f"path={copy}"]) == 0  # a copy (other times): the same data
    assert "content" not in json.loads((run / "metrics.json").read_text())["data_overrides"]
    Image.new("RGB", (20, 24), (255, 0, 0)).save(copy / "8.png")
    capsys.readouterr()
    assert main([str(run), *elbo, "--data", f"path={copy}"]) == 2
    err = capsys.readouterr().err
    assert "the images read now are not those the run trained on (8 images then, 9 now" in err
    assert "holds scores on the run's own data, and this evaluation scores its data with content=" in err
    other = tmp_path / "other.json"
    assert main([str(run), *elbo, "--data", f"path={copy}", "--output", str(other)]) == 0
    content = json.loads(other.read_text())["data_overrides"]["content"]
    assert content["images"] == 9 and len(content["files_sha256"]) == 64
