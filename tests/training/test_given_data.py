"""``fit(config, dataset=mine)``: a run trained on a dataset of the user's records it, so that nothing
later mistakes the config's data section for what the model learned from (the evaluate and
visualize commands would score it on that section's dataset, a resume would switch to it, the zoo
would publish a recipe that does not train it)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import disentangle
from disentangle.config import load_config
from disentangle.data import build_dataset, data_identity, from_arrays
from disentangle.errors import ConfigError
from disentangle.training import fit

pytestmark = pytest.mark.usefixtures("one_thread")


def _mine() -> object:
    """24 labelled images of the tiny dataset's shape, not the tiny dataset: a sample of the user's."""
    rng = np.random.default_rng(5)
    images = (rng.random((24, 16, 16)) > 0.5).astype(np.uint8)
    return from_arrays(images, rng.integers(0, 3, (30, 2))[:24], factor_names=("p", "q"))


def test_a_run_on_a_given_dataset_records_it_and_resumes_only_on_given_data(tmp_path, tiny_overrides):
    whole = fit(load_config(None, tiny_overrides(tmp_path / "whole", steps=8)), dataset=_mine()).out_dir
    run = tmp_path / "run"
    fit(load_config(None, tiny_overrides(run, steps=4)), dataset=_mine())
    checkpoint = torch.load(run / "checkpoint.pt", weights_only=True)
    assert checkpoint["data_given"] == {"description": "24 images from arrays", "size": 24,
                                        "image_shape": [1, 16, 16], "labels": ["p", "q"]}
    assert disentangle.load(run).data_given == checkpoint["data_given"]
    with pytest.raises(ConfigError, match=r"on its config's data section \(_tiny_test\): the run trained on a "
                                          r"dataset given to fit \(24 images from arrays; 24 images"):
        fit(load_config(None, tiny_overrides(run, steps=8)), resume=True)
    fit(load_config(None, tiny_overrides(run, steps=8)), resume=True, dataset=_mine())
    a = torch.load(whole / "checkpoint.pt", weights_only=True)["model"]
    b = torch.load(run / "checkpoint.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)  # resumed bit-exactly on the same data


def test_a_run_on_its_config_s_data_is_not_resumed_on_another_dataset(tmp_path, tiny_overrides):
    run = tmp_path / "run"
    fit(load_config(None, tiny_overrides(run, steps=4)))
    assert "data_given" not in torch.load(run / "checkpoint.pt", weights_only=True)
    assert disentangle.load(run).data_given is None
    with pytest.raises(ConfigError, match=r"on the dataset given to fit \(24 images from arrays\): the run trained "
                                          r"on its config's data section \(_tiny_test\)"):
        fit(load_config(None, tiny_overrides(run, steps=8)), resume=True, dataset=_mine())


def test_a_dataset_built_from_the_config_s_data_section_is_not_a_given_one(tmp_path, tiny_overrides):
    """A sweep worker hands the trainer the dataset it built from the run's data section: the same
    data, whatever the storage keys, so nothing is recorded and the CLIs score it as usual."""
    config = load_config(None, tiny_overrides(tmp_path / "run", steps=2))
    dataset = build_dataset(config.data)
    assert dataset.built_from == data_identity(config.data) == {"name": "_tiny_test", "size": 16, "channels": 1}
    fit(config, dataset=dataset)
    assert disentangle.load(tmp_path / "run").data_given is None
    other = load_config(None, tiny_overrides(tmp_path / "other", steps=2))
    fit(other, dataset=build_dataset({"name": "_tiny_test", "labels": None}))
    assert disentangle.load(tmp_path / "other").data_given is None  # defaults filled; labels are not the data
    larger = load_config(None, tiny_overrides(tmp_path / "larger", steps=2))
    fit(larger, dataset=build_dataset({"name": "_tiny_test", "channels": 3}))
    assert disentangle.load(tmp_path / "larger").data_given["image_shape"] == [3, 16, 16]  # other images


def test_the_commands_refuse_to_score_a_given_data_run_on_the_config_s_data(tmp_path, tiny_overrides, capsys):
    pytest.importorskip("matplotlib")
    from disentangle.evaluate import main as evaluate
    from disentangle.visualize.__main__ import main as visualize
    from disentangle.zoo import publish

    run = tmp_path / "run"
    fit(load_config(None, tiny_overrides(run, steps=2)), dataset=_mine())
    capsys.readouterr()
    assert evaluate([str(run), "--metrics", "mig", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert ("This run trained on a dataset given to fit() in Python (24 images from arrays; 24 images of shape "
            "(1, 16, 16), labels p, q), not on its config's data section (_tiny_test), which is what evaluate "
            "would build.") in err
    assert not (run / "metrics.json").exists()
    assert visualize([str(run), "--out", str(tmp_path / "pictures")]) == 2
    assert "which is what visualize would build" in capsys.readouterr().err
    assert not (tmp_path / "pictures").exists()
    with pytest.raises(ConfigError, match="it trained on a dataset given to fit"):
        publish(run, "mine-s0", manifest=tmp_path / "manifest.json", weights_dir=tmp_path / "weights")
    assert not (tmp_path / "weights").exists()
