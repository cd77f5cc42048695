"""The study's figures stay readable at the documentation's column width: drawn from synthetic inputs
with many panels (8 methods, 6 scores, 3 datasets), each is at most ``MAX_WIDTH_IN`` wide, no text
is set below 8 pt, and every panel with data is drawn."""
from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from matplotlib.legend import Legend  # noqa: E402
from matplotlib.text import Text  # noqa: E402
from PIL import Image  # noqa: E402

from disentangle.study import figures as F  # noqa: E402
from disentangle.study.statistics import Matrix, VarianceShares  # noqa: E402

DATASETS = ["dsprites", "shapes3d", "cars3d"]
METHODS = list(F.METHOD_PRETTY)  # 8
SCORES = ["beta_vae_score.eval_accuracy", "factor_vae_score.eval_accuracy", "mig.mig", "dci.disentanglement",
          "dci.informativeness_test", "unsupervised_scores.gaussian_wasserstein_correlation_norm"]  # 6, the longest names
STRENGTHS = [1.0, 4.0, 16.0]
SEEDS = 2
MIN_PT = 8.0
PAD_IN = 0.1  # figures._save's pad_inches, on each side


def _saved(fig, tmp_path, name: str) -> Image.Image:
    """Save as the public functions do (this draws the tick labels), and read the PNG back."""
    F._save(fig, tmp_path / name)
    with Image.open(tmp_path / name) as im:
        im.load()
        return im


def _check_readable(fig, image: Image.Image) -> None:
    width_px, height_px = image.size
    assert width_px <= math.ceil((F.MAX_WIDTH_IN + 2 * PAD_IN) * F.DPI), f"{width_px / F.DPI:.2f} in wide"
    assert height_px > 0
    texts = [t for t in fig.findobj(Text)
             if t.get_text().strip() and t.get_visible() and (t.axes is None or t.axes.get_visible())]
    assert texts
    small = sorted({(t.get_fontsize(), t.get_text()) for t in texts if t.get_fontsize() < MIN_PT})
    assert not small, f"text below {MIN_PT} pt: {small[:5]}"


def _drawn(fig) -> list:
    return [ax for ax in fig.axes if ax.get_visible() and ax.has_data()]


def _matrix(rows: list[str], columns: list[str], rng) -> Matrix:
    values = rng.uniform(-1, 1, (len(rows), len(columns)))
    values[0, -1] = np.nan
    return Matrix(rows, columns, values, np.full(values.shape, 24))


def test_wrap_fills_rows_of_at_most_k():
    assert F._wrap(1, 3) == (1, 1)
    assert F._wrap(8, 3) == (3, 3)
    assert F._wrap(9, 3) == (3, 3)
    assert F._wrap(3, 2) == (2, 2)
    assert F._wrap(14, 2) == (7, 2)


@pytest.mark.parametrize("n_scores, datasets", [(6, DATASETS), (9, DATASETS[:1]), (3, DATASETS)])
def test_correlation_figure(tmp_path, n_scores, datasets):
    rng = np.random.default_rng(0)
    names = (SCORES + ["modularity_explicitness.modularity", "sap_score.sap", "dci.completeness"])[:n_scores]
    matrices = {d: _matrix(names, names, rng) for d in datasets}
    fig = F._draw_correlation(matrices, title="Rank correlation between the supervised scores",
                              several_datasets=len(datasets) > 1)
    _check_readable(fig, _saved(fig, tmp_path, "c.png"))
    heatmaps = [ax for ax in _drawn(fig) if ax.images]
    assert len(heatmaps) == len(datasets)
    assert {ax.get_subplotspec().colspan.start for ax in heatmaps} <= {0, 1}  # at most two to a row
    assert "–" in {t.get_text() for t in heatmaps[0].texts}  # the NaN cell
    F.correlation_figure(matrices, tmp_path / "public.png", title="t", several_datasets=len(datasets) > 1)
    assert (tmp_path / "public.png").stat().st_size > 0


def _shares(rng) -> VarianceShares:
    method, strength = rng.uniform(0, 0.6), rng.uniform(0, 0.3)
    return VarianceShares(method=method, strength=strength, residual=1 - method - strength, n_runs=48, n_methods=8,
                          n_settings=24, df_method=7, df_strength=16, df_residual=24, chance_method=7 / 47,
                          chance_strength=16 / 47, chance_residual=24 / 47, p_method=1e-4, p_strength=0.3,
                          p_method_adjusted=rng.choice([1e-4, 0.02, 0.5]), p_strength_adjusted=0.6)


@pytest.mark.parametrize("datasets", [DATASETS, DATASETS[:1]])
def test_variance_figure(tmp_path, datasets):
    rng = np.random.default_rng(1)
    shares = {d: {s: _shares(rng) for s in SCORES} for d in datasets}
    fig = F._draw_variance(shares, several_datasets=len(datasets) > 1)
    _check_readable(fig, _saved(fig, tmp_path, "v.png"))
    panels = _drawn(fig)
    assert len(panels) == 3 * len(datasets)
    for ax in panels:
        assert len(ax.patches) == len(SCORES)  # one bar per score
        assert len(ax.lines) == len(SCORES)  # one chance tick per score
    ticks = sorted(zip(panels[0].get_yticks(), (t.get_text() for t in panels[0].get_yticklabels())), reverse=True)
    assert [label for _, label in ticks] == [f"{F.pretty(s)} (n=48)" for s in SCORES]  # top to bottom
    assert any("chance level" in t.get_text() for t in fig.legends[0].get_texts())


def _runs(datasets: list[str], rng) -> tuple[dict[str, np.ndarray], list[tuple[str, str]], list[tuple[str, str]]]:
    groups = [(d, m) for d in datasets for m in METHODS]
    group_of_run = [g for g in groups for _ in range(len(STRENGTHS) * SEEDS)]
    scores = {s: rng.uniform(0, 1, len(group_of_run)) for s in SCORES}
    return scores, groups, group_of_run


@pytest.mark.parametrize("datasets", [DATASETS, DATASETS[:1]])
def test_scores_by_method_figure(tmp_path, datasets):
    rng = np.random.default_rng(2)
    scores, groups, group_of_run = _runs(datasets, rng)
    fig = F._draw_scores_by_method(scores, groups, group_of_run, several_datasets=len(datasets) > 1)
    _check_readable(fig, _saved(fig, tmp_path, "s.png"))
    panels = _drawn(fig)
    assert len(panels) == len(SCORES)
    assert {ax.get_subplotspec().colspan.start for ax in panels} == {0, 1}  # two to a row
    assert [ax.get_title() for ax in panels] == [F.pretty(s) for s in SCORES]
    if len(datasets) > 1:
        assert [t.get_text() for t in fig.legends[0].get_texts()] == [F.pretty_method(m) for m in METHODS]


@pytest.mark.parametrize("datasets", [DATASETS, DATASETS[:1]])
def test_score_vs_strength_figure(tmp_path, datasets):
    rng = np.random.default_rng(3)
    panels = {
        score: {(d, m): [(v, f"objective.x={v:g}", rng.uniform(0, 1, SEEDS)) for v in STRENGTHS]
                for d in datasets for m in METHODS}
        for score in SCORES
    }
    for d in datasets:  # one panel without data: hidden, not drawn empty
        del panels[SCORES[-1]][(d, METHODS[-1])]
    strength_names = {(d, m): "objective.beta" for d in datasets for m in METHODS}
    fig = F._draw_score_vs_strength(panels, strength_names)
    _check_readable(fig, _saved(fig, tmp_path, "t.png"))
    drawn = _drawn(fig)
    assert len(drawn) == len(SCORES) * len(METHODS) - 1
    for ax in drawn:
        assert len(ax.lines) == len(datasets)  # one median line per dataset
    # at most METHODS_PER_ROW panels to a row, the score named on every row and each panel's method in its title
    assert {ax.get_subplotspec().colspan.start for ax in drawn} == set(range(F.METHODS_PER_ROW))
    rows = [ax for ax in drawn if ax.get_subplotspec().colspan.start == 0]
    assert len(rows) == len(SCORES) * math.ceil(len(METHODS) / F.METHODS_PER_ROW)
    per_score = math.ceil(len(METHODS) / F.METHODS_PER_ROW)
    assert [ax.get_ylabel() for ax in rows] == [F.pretty(s) for s in SCORES for _ in range(per_score)]
    assert {ax.get_title() for ax in drawn} == {F.pretty_method(m) for m in METHODS}
    assert {ax.get_xlabel() for ax in drawn} == {"beta"}
    if len(datasets) > 1:
        (legend,) = fig.findobj(Legend)  # in a band of its own, under the title
        assert [t.get_text() for t in legend.get_texts()] == datasets
