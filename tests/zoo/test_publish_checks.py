"""``python -m disentangle.zoo publish``: what it checks before any work (metrics the run's data
cannot give, where its files go) and what an interrupted publish keeps."""
from __future__ import annotations

import json
import shutil

import pytest

import disentangle.metrics
from disentangle.config import load_config
from disentangle.training.trainer import fit
from disentangle.zoo.__main__ import main as zoo_main

pytestmark = pytest.mark.usefixtures("one_thread")

#: small settings of the metrics the tests publish with (the tiny grid has 24 images)
FAST = ["--set", "mig.num_train=200", "--set", "sap_score.num_train=200", "--set", "sap_score.num_test=100",
        "--set", "unsupervised_scores.num_train=200"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, tiny_overrides):
    """A finished run on the tiny grid (4 steps), never written to by the tests: copy it first."""
    run = tmp_path_factory.mktemp("publish") / "run"
    fit(load_config(None, tiny_overrides(run, steps=4)))
    return run


@pytest.fixture
def spy(monkeypatch):
    """The metric lists ``evaluate_metrics`` is called with (it still computes them)."""
    real, calls = disentangle.metrics.evaluate_metrics, []

    def spying(dataset, representation, names, **kwargs):
        calls.append(list(names))
        return real(dataset, representation, names, **kwargs)

    monkeypatch.setattr(disentangle.metrics, "evaluate_metrics", spying)
    return calls


def test_an_image_folder_run_names_the_default_metrics_it_cannot_give_and_the_metrics_value_that_can(
    tmp_path, capsys, spy, train_image_folder_run
):
    """The default metrics on a run without factor labels: one paragraph naming the six that cannot
    run and ``--metrics unsupervised_scores``, exit 2, nothing computed or written; that value publishes."""
    _, run = train_image_folder_run(tmp_path)
    manifest = tmp_path / "zoo" / "manifest.json"
    capsys.readouterr()
    assert zoo_main(["publish", str(run), "--name", "images-s0", "--manifest", str(manifest), "--no-progress"]) == 2
    err = capsys.readouterr().err.splitlines()[-1]  # after the dataset's "Loaded ... from the cache" line
    assert err.startswith(f"error: Cannot publish '{run}' with the default metrics: beta_vae_score, factor_vae_score, "
                          "mig, modularity_explicitness, dci, sap_score cannot run on its data")
    assert "images without factor labels" in err
    assert "Publish it with the default metrics that can run on it: --metrics unsupervised_scores" in err
    assert spy == [] and not manifest.parent.exists() and not (run / "metrics.json").exists()
    # named explicitly, none of them can: the metrics that apply to the data
    assert zoo_main(["publish", str(run), "--name", "images-s0", "--manifest", str(manifest), "--metrics", "mig"]) == 2
    err = capsys.readouterr().err
    assert "with the metrics asked for: mig cannot run" in err and "--metrics elbo,unsupervised_scores" in err
    assert zoo_main(["publish", str(run), "--name", "images-s0", "--manifest", str(manifest), "--no-progress",
                     "--metrics", "unsupervised_scores", "--set", "unsupervised_scores.num_train=200"]) == 0
    assert list(json.loads(manifest.read_text())["models"]["images-s0"]["metrics"]) == ["unsupervised_scores"]


def test_ctrl_c_keeps_the_finished_metrics_and_a_rerun_computes_only_the_rest(tmp_path, tiny_run, monkeypatch, capsys):
    """Each metric is written to metrics.json as it finishes; Ctrl-C says which are left (exit 130,
    no weight file, no manifest entry); the same command again computes only those and publishes."""
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    manifest = tmp_path / "zoo" / "manifest.json"
    argv = ["publish", str(run), "--name", "tiny-s0", "--manifest", str(manifest), "--no-progress",
            "--metrics", "mig,sap_score,unsupervised_scores", *FAST]
    real, calls = disentangle.metrics.evaluate_metrics, []

    def ctrl_c_after_the_first(dataset, representation, names, *, callback, **kwargs):
        def then_ctrl_c(name, scores, seconds):
            callback(name, scores, seconds)
            raise KeyboardInterrupt

        return real(dataset, representation, names, callback=then_ctrl_c, **kwargs)

    monkeypatch.setattr(disentangle.metrics, "evaluate_metrics", ctrl_c_after_the_first)
    assert zoo_main(argv) == 130
    err = capsys.readouterr().err
    assert f"interrupted: publish stopped before the weight file and the manifest entry were written: mig is recorded " \
           f"in {run / 'metrics.json'}; left to compute: sap_score, unsupervised_scores. Run the same command again" in err
    assert "Traceback" not in err and not manifest.parent.exists()
    kept = json.loads((run / "metrics.json").read_text())
    assert list(kept["metrics"]) == ["mig"] and kept["metric_settings"]["mig"]["num_train"] == 200

    def spying(dataset, representation, names, **kwargs):
        calls.append(list(names))
        return real(dataset, representation, names, **kwargs)

    monkeypatch.setattr(disentangle.metrics, "evaluate_metrics", spying)
    assert zoo_main(argv) == 0, capsys.readouterr().err
    assert calls == [["sap_score", "unsupervised_scores"]]
    record = json.loads(manifest.read_text())["models"]["tiny-s0"]
    assert record["metrics"]["mig"] == kept["metrics"]["mig"] and set(record["metrics"]) == {
        "mig", "sap_score", "unsupervised_scores"}


@pytest.mark.parametrize("where, fragment", [
    ("manifest folder", "is a folder, not a manifest file"),
    ("manifest written as a folder", "newzoo/' is a folder, not a manifest file"),  # not a file named newzoo
    ("manifest under a file", "cannot be written: '{file}' is a file, not a folder"),
    ("weights file", "The weights folder '{file}' (--weights-dir; default: weights/ beside the manifest) is a file"),
    ("weights under a file", "lies under '{file}', which is a file"),
])
def test_where_publish_writes_is_checked_before_any_work(where, fragment, tmp_path, tiny_run, capsys, spy):
    """--manifest FOLDER (read as bad JSON, exit 3) and --weights-dir FILE (a FileExistsError traceback
    after the metrics were computed): one paragraph, exit 2, before any metric or file."""
    file = tmp_path / "a_file"
    file.write_text("not a folder")
    options = {
        "manifest folder": ["--manifest", str(tmp_path)],
        "manifest written as a folder": ["--manifest", f"{tmp_path / 'newzoo'}/"],
        "manifest under a file": ["--manifest", str(file / "manifest.json")],
        "weights file": ["--manifest", str(tmp_path / "zoo" / "manifest.json"), "--weights-dir", str(file)],
        "weights under a file": ["--manifest", str(tmp_path / "zoo" / "manifest.json"), "--weights-dir", str(file / "w")],
    }[where]
    assert zoo_main(["publish", str(tiny_run), "--name", "tiny-s0", "--metrics", "mig", *options, *FAST[:2]]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and fragment.format(file=file) in err
    assert spy == [] and not (tiny_run / "metrics.json").exists() and not (tmp_path / "zoo").exists()
    assert not (tmp_path / "newzoo").exists()


@pytest.mark.parametrize("name, fragment", [
    ("beta_vae-dsprites-beta4-s0", "e.g. beta_vae-dsprites-beta4-cpu20k-s0"),  # a generated recipe
    ("quickstart", "e.g. quickstart-cpu20k"),  # a shipped config
])
def test_a_recipe_s_name_is_refused_before_any_work(name, fragment, tmp_path, tiny_run, capsys, spy):
    """The catalog takes a pretrained entry over a recipe of the same name: publishing one would change
    what --config zoo:NAME trains."""
    manifest = tmp_path / "zoo" / "manifest.json"
    assert zoo_main(["publish", str(tiny_run), "--name", name, "--metrics", "mig", "--manifest", str(manifest),
                     *FAST[:2]]) == 2
    err = capsys.readouterr().err
    assert f"'{name}' is the name of a zoo recipe; a pretrained model of that name would replace the recipe" in err
    assert fragment in err and spy == [] and not manifest.parent.exists()


def test_an_unfinished_run_is_refused_unless_allowed_and_then_recorded_as_trained(tmp_path, tiny_overrides, capsys):
    from disentangle.training import Callback

    class StopAt4(Callback):
        def on_step_end(self, trainer, step, terms) -> None:
            if step == 4:
                trainer.request_stop("stopped at 4")

    partial = tmp_path / "partial"
    fit(load_config(None, tiny_overrides(partial, steps=8)), callbacks=[StopAt4()])  # 4 of its 8 steps
    manifest = tmp_path / "zoo" / "manifest.json"
    argv = ["publish", str(partial), "--name", "tiny-s0", "--metrics", "mig", "--manifest", str(manifest), *FAST[:2]]
    assert zoo_main(argv) == 2
    err = capsys.readouterr().err
    assert "it trained 4 of its 8 steps (train.steps)" in err and "--allow-partial" in err
    assert not manifest.parent.exists()
    assert zoo_main([*argv, "--allow-partial"]) == 0, capsys.readouterr().err
    record = json.loads(manifest.read_text())["models"]["tiny-s0"]
    assert record["config"]["train"]["steps"] == 4


def test_a_run_of_an_objective_not_registered_here_is_refused_and_loads_with_a_warning(
        tmp_path, tiny_run, capsys, caplog):
    """A plugin's objective not imported: publish cannot tell the state its model needs (a codebook),
    so it refuses; load warns that such state is left out (encode and decode still work)."""
    import logging

    import torch

    import disentangle
    from disentangle.training.checkpoint import DIGEST_KEY, atomic_save

    run = tmp_path / "plugin_run"
    shutil.copytree(tiny_run, run)
    for name in ("checkpoint.pt", "checkpoint.prev.pt"):
        if (run / name).exists():
            saved = torch.load(run / name, weights_only=True)
            saved.pop(DIGEST_KEY, None)
            saved["config"]["objective"]["name"] = "_a_plugin_objective"
            saved["objective"] = {"codebook": torch.zeros(2, 3)}
            atomic_save(saved, run / name)
    manifest = tmp_path / "zoo" / "manifest.json"
    assert zoo_main(["publish", str(run), "--name", "plugin-s0", "--metrics", "mig", "--manifest", str(manifest),
                     *FAST[:2]]) == 2
    err = capsys.readouterr().err
    assert "its objective '_a_plugin_objective' is not registered in this process" in err and "--import" in err
    assert not manifest.parent.exists()
    caplog.set_level(logging.WARNING, logger="disentangle")
    model = disentangle.load(run)
    assert model.trained_steps == 4
    assert any("the run's objective '_a_plugin_objective' is not registered in this process" in r.getMessage()
               for r in caplog.records)


def test_a_name_taken_while_the_metrics_ran_is_checked_again_before_writing(tmp_path, tiny_run, monkeypatch):
    """Two publishes of different runs under one name: the check before the metrics passes for both;
    the one that writes second finds the other's entry under the manifest's lock and refuses."""
    from disentangle.errors import ConfigError
    from disentangle.zoo import manifest as manifest_module
    from disentangle.zoo.publish import publish

    manifest = tmp_path / "zoo" / "manifest.json"
    real = disentangle.metrics.evaluate_metrics

    def meanwhile_another_publish(dataset, representation, names, **kwargs):
        manifest_module.write_entry(manifest, "tiny-s0", {"file": "weights/tiny-s0.safetensors", "sha256": "0" * 64,
                                                          "size": 1, "config": {}, "metrics": {}})
        return real(dataset, representation, names, **kwargs)

    monkeypatch.setattr(disentangle.metrics, "evaluate_metrics", meanwhile_another_publish)
    with pytest.raises(ConfigError, match="already has a model 'tiny-s0' with other weights"):
        publish(tiny_run_copy := shutil.copytree(tiny_run, tmp_path / "run"), "tiny-s0", manifest=manifest,
                metrics=["mig"], metric_settings={"mig": {"num_train": 200}})
    assert json.loads(manifest.read_text())["models"]["tiny-s0"]["sha256"] == "0" * 64  # the other's, kept
    assert not (manifest.parent / "weights" / "tiny-s0.safetensors").exists() and tiny_run_copy.exists()
    assert (manifest.parent / "manifest.json.lock").exists()


def test_the_same_model_published_again_elsewhere_is_not_other_weights(tmp_path, tiny_run):
    """Republishing a run on another machine (or with another library version) changes only the
    file's provenance: it was refused as 'other weights'; it now records the new provenance."""
    from disentangle.zoo.publish import publish

    manifest = tmp_path / "zoo" / "manifest.json"
    run = shutil.copytree(tiny_run, tmp_path / "run")
    first = publish(run, "tiny-s0", manifest=manifest, metrics=["mig"], metric_settings={"mig": {"num_train": 200}},
                    machine={"cpu": "machine A"})
    again = publish(run, "tiny-s0", manifest=manifest, metrics=["mig"], metric_settings={"mig": {"num_train": 200}},
                    machine={"cpu": "machine B"})
    assert first["sha256"] != again["sha256"]
    assert json.loads(manifest.read_text())["models"]["tiny-s0"]["machine"] == {"cpu": "machine B"}


def test_without_manifest_an_installed_package_s_manifest_is_refused_before_any_work(
        tmp_path, tiny_run, monkeypatch, capsys, spy):
    """Publishing into site-packages made a user's model count as shipped, lost at the next upgrade."""
    from disentangle.zoo import manifest as manifest_module

    installed = tmp_path / "lib" / "python3.11" / "site-packages" / "disentangle" / "zoo" / "manifest.json"
    installed.parent.mkdir(parents=True)
    installed.write_text('{"format": 1, "models": {}}')
    monkeypatch.setattr(manifest_module, "SHIPPED_MANIFEST", installed)
    assert zoo_main(["publish", str(tiny_run), "--name", "tiny-s0", "--metrics", "mig", *FAST[:2]]) == 2
    err = capsys.readouterr().err
    assert "which is inside the installed package" in err and "--manifest ~/myzoo/manifest.json" in err
    assert spy == [] and json.loads(installed.read_text())["models"] == {}


@pytest.mark.parametrize("recipe, fragment", [
    ("no/such/recipe", "--recipe 'no/such/recipe' is no zoo recipe or shipped config"),
    ("sprites/beta_vae", "--recipe 'sprites/beta_vae' does not train the model of"),
])
def test_a_recipe_that_did_not_train_the_run_is_refused_before_any_work(recipe, fragment, tmp_path, tiny_run,
                                                                         capsys, spy):
    """The record would tell users that recipe trained these weights (a tiny MLP on the test grid)."""
    manifest = tmp_path / "zoo" / "manifest.json"
    assert zoo_main(["publish", str(tiny_run), "--name", "tiny-s0", "--recipe", recipe, "--metrics", "mig",
                     "--manifest", str(manifest), *FAST[:2]]) == 2
    err = capsys.readouterr().err
    assert fragment in err and spy == [] and not manifest.exists()
    if "does not train" in err:
        assert "data.name 'sprites' there, '_tiny" in err and "model.backbone 'conv64' there, 'mlp' in the run" in err


def test_a_shipped_models_name_is_refused_for_a_manifest_of_ones_own(tmp_path, tiny_run, capsys, spy):
    """A later manifest's entry replaces the package's: zoo:NAME would load the user's model as the
    published one."""
    manifest = tmp_path / "zoo" / "manifest.json"
    name = "beta_tcvae-sprites-beta6-cpu20k-ref-s0"
    assert zoo_main(["publish", str(tiny_run), "--name", name, "--metrics", "mig", "--manifest", str(manifest),
                     *FAST[:2]]) == 2
    err = capsys.readouterr().err
    assert f"'{name}' is a pretrained model the package ships" in err and f"e.g. {name}-mine" in err
    assert spy == [] and not manifest.parent.exists()


def test_every_published_models_recipe_trains_its_kind_of_model(tmp_path):
    """What publish now checks of --recipe holds for every shipped model's recorded recipe."""
    from disentangle.zoo import manifest
    from disentangle.zoo.publish import check_recipe

    models = manifest.read_manifest(manifest.SHIPPED_MANIFEST)["models"]
    checked = 0
    for name, record in models.items():
        if record.get("recipe"):
            check_recipe(record["recipe"], record["config"], tmp_path / name)
            checked += 1
    assert checked >= 35
