"""Which scores the study takes for supervised ones: only those that read factor labels.

An image-folder sweep has no factor labels, so its metrics are ``elbo`` and ``unsupervised_scores``;
the ELBO's reconstruction ranked against its own KL under "do the supervised metrics agree?" was a
report of nothing (the ELBO reads no labels)."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from disentangle.study import infer_design, read_table
from disentangle.study.__main__ import main as study_main
from disentangle.study.columns import is_unsupervised

ELBO = ["elbo.elbo", "elbo.reconstruction", "elbo.kl", "elbo.mse"]
UNSUPERVISED = ["unsupervised_scores.gaussian_total_correlation", "unsupervised_scores.mutual_info_score"]


def _image_folder_results(path: Path, extra: tuple[str, ...] = ()) -> Path:
    """A results.csv as an image-folder sweep writes it: ELBO and unsupervised scores (and ``extra``)."""
    rng = np.random.default_rng(0)
    columns = ["run_id", "status", "seed", "objective.name", "objective.beta", *ELBO, *UNSUPERVISED, *extra]
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, columns)
        writer.writeheader()
        for beta in (1, 4):
            for seed in range(4):
                values = rng.normal(size=len(columns) - 5)
                writer.writerow({"run_id": f"b{beta}-s{seed}", "status": "finished", "seed": seed,
                                 "objective.name": "beta_vae", "objective.beta": beta,
                                 **dict(zip(columns[5:], values))})
    return path


def test_scores_of_metrics_that_read_no_labels_are_unsupervised():
    for score in (*ELBO, *UNSUPERVISED, "elbo_decomposition.total_correlation", "udr.udr", "unsupervised.mutual_info_score"):
        assert is_unsupervised(score), score
    for score in ("mig.mig", "dci.disentanglement", "irs.irs", "factor_vae_score.eval_accuracy",
                  "some_dlib_metric.score"):  # a metric we do not register is taken as supervised, as before
        assert not is_unsupervised(score), score


def test_an_image_folder_study_ranks_no_elbo_score_as_supervised(tmp_path, capsys):
    results = _image_folder_results(tmp_path / "results.csv")
    design = infer_design(read_table(results))
    assert design.supervised == [] and design.unsupervised == ELBO + UNSUPERVISED

    out = tmp_path / "report"
    assert study_main([str(results), "--out", str(out), "--no-figures", "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "skipped metric_rank_correlation: it needs at least two supervised scores; the table has 0" in err
    text = (out / "report.md").read_text()
    agree = text.split("## Do the supervised metrics agree?")[1].split("##")[0]
    assert "Skipped" in agree and "elbo" not in agree
    assert "- supervised scores: none" in text
    assert not (out / "metric_rank_correlation.csv").exists()


def test_elbo_scores_are_compared_with_the_supervised_ones_not_among_them(tmp_path):
    results = _image_folder_results(tmp_path / "results.csv", extra=("mig.mig", "dci.disentanglement"))
    design = infer_design(read_table(results))
    assert design.supervised == ["mig.mig", "dci.disentanglement"]
    assert set(ELBO) <= set(design.unsupervised)
