"""Pictures of a run on images without factor labels (an image folder), and which scores
``metrics.png`` draws.

``python -m disentangle.visualize`` of an image-folder run drew four pictures and then failed
(exit 2) on ``latent_responses``, which plots codes against factor labels; its ``metrics.png`` let
the ELBO (hundreds to thousands of nats) squash every other bar, and after ``evaluate``'s default
(every metric, over 200 scores) it was a column thousands of pixels tall."""
from __future__ import annotations

import json
import logging

import pytest

import disentangle
from disentangle.data import build_dataset
from disentangle.visualize import PICTURES, metrics_figure, write_pictures
from disentangle.visualize import plots as plots_module
from disentangle.visualize.__main__ import main

pytest.importorskip("matplotlib")
pytestmark = pytest.mark.usefixtures("one_thread")

#: what evaluate writes for an image-folder run by default (the metrics that need no labels)
IMAGE_FOLDER_SCORES = {
    "elbo": {"reconstruction": 1831.2, "kl": 24.7, "elbo": -1855.9, "mse": 0.031},
    "unsupervised_scores": {"gaussian_total_correlation": 0.42, "gaussian_wasserstein_correlation": 0.05,
                            "gaussian_wasserstein_correlation_norm": 0.02, "mutual_info_score": 0.61},
}


@pytest.fixture(scope="module")
def image_folder_run(tmp_path_factory, train_image_folder_run):
    """A two-step run on a folder of eight random images: an unlabelled sample, no factor grid."""
    return train_image_folder_run(tmp_path_factory.mktemp("image_folder"))[1]


def _bars(fig) -> dict[str, float]:
    """The bars a metrics figure draws: label -> length."""
    ax = fig.axes[0]
    position = {y: t.get_text() for t, y in zip(ax.get_yticklabels(), ax.get_yticks())}
    return {position[p.get_y() + p.get_height() / 2]: p.get_width() for p in ax.patches}


def test_all_leaves_out_the_pictures_that_need_factors_and_says_so(image_folder_run, tmp_path, capsys, monkeypatch):
    figures = {}
    save = plots_module.save_figure

    def keep(fig, path, **kwargs):  # the figures drawn, to read their bars
        figures[path.name] = fig
        return save(fig, path, **kwargs)

    monkeypatch.setattr(plots_module, "save_figure", keep)
    (image_folder_run / "metrics.json").write_text(json.dumps({"metrics": IMAGE_FOLDER_SCORES}))
    out = tmp_path / "pictures"
    try:
        assert main([str(image_folder_run), "--out", str(out), "--frames", "4"]) == 0
    finally:
        (image_folder_run / "metrics.json").unlink()
    err = capsys.readouterr().err
    assert "left out latent_responses.png: it reads factor labels, and image folder" in err and "has none" in err
    assert sorted(p.name for p in out.iterdir()) == sorted(set(PICTURES.values()) - {"latent_responses.png"})
    # metrics.png: the unsupervised scores, not the ELBO's nats that would squash them
    bars = _bars(figures["metrics.png"])
    assert set(bars) == {f"unsupervised_scores: {s}" for s in IMAGE_FOLDER_SCORES["unsupervised_scores"]}
    assert figures["metrics.png"].axes[0].get_xlim()[1] < 2.0


def test_naming_a_picture_that_needs_factors_exits_2_before_any_file(image_folder_run, tmp_path, capsys):
    out = tmp_path / "never"
    assert main([str(image_folder_run), "--out", str(out), "--what", "traversals,latent_responses"]) == 2
    err = capsys.readouterr().err
    error = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(error) == 1 and error[0].startswith("error: latent_responses.png needs labelled images (latent_responses plots")
    assert "Leave 'latent_responses' out of --what" in err and "Traceback" not in err
    assert not out.exists()


def test_write_pictures_refuses_a_named_factor_picture_and_leaves_it_out_of_all(image_folder_run, tmp_path, caplog):
    model = disentangle.load(image_folder_run)
    dataset = build_dataset(model.config["data"])
    with pytest.raises(disentangle.ConfigError, match="latent_responses plots each latent's mean code"):
        write_pictures(model, dataset, tmp_path / "a", ["samples", "latent_responses"])
    assert not (tmp_path / "a").exists()
    with caplog.at_level(logging.INFO, logger="disentangle"):
        written = write_pictures(model, dataset, tmp_path / "b", "all", num_frames=2, metrics=IMAGE_FOLDER_SCORES)
    assert "latent_responses" not in written and "traversals" in written
    assert "left out latent_responses.png" in caplog.text


def test_metrics_figure_leaves_out_the_elbo_unless_it_is_all_there_is():
    bars = _bars(metrics_figure({**IMAGE_FOLDER_SCORES, "mig": {"mig": 0.3}}))
    assert not any(label.startswith("elbo") for label in bars) and bars["mig"] == pytest.approx(0.3)
    only = _bars(metrics_figure({"elbo": IMAGE_FOLDER_SCORES["elbo"]}))
    assert only == pytest.approx({"elbo: reconstruction": 1831.2, "elbo: kl": 24.7, "elbo": -1855.9, "elbo: mse": 0.031})


def test_metrics_figure_of_every_metric_draws_each_metrics_headline_score():
    """evaluate's default scores every metric: hundreds of scores, per factor and per pair; above 40
    bars the figure keeps one per metric (the study's headline score), and says so."""
    many = {
        "mig": {"mig": 0.2, **{f"mig_factor_{k}": 0.1 for k in range(5)}},
        "dci": {"informativeness_train": 0.9, "disentanglement": 0.4, "completeness": 0.5,
                **{f"disentanglement_factor_{k}": 0.3 for k in range(5)}},
        "fairness": {f"fairness:{k}:{j}": 0.05 for k in range(5) for j in range(5)},
        "my_metric": {"first": 0.7, "second": 0.8},  # not in the study's list: its own-named score, else its first
        "elbo": IMAGE_FOLDER_SCORES["elbo"],
    }
    fig = metrics_figure(many)
    assert _bars(fig) == pytest.approx({"mig": 0.2, "dci: disentanglement": 0.4,
                                        "fairness:0:0": 0.05, "my_metric: first": 0.7})
    note = " ".join(fig.get_supxlabel().split())
    assert "headline score (4 of 41 scores drawn)" in note and "the scores of elbo" in note
    few = {"mig": many["mig"], "dci": many["dci"]}  # 14 bars: every score
    assert len(_bars(metrics_figure(few))) == 14
