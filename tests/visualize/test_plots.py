"""Plots: the data drawn is the data given; clear errors for bad scores and a missing matplotlib."""
from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from PIL import Image

import disentangle
from disentangle.visualize import (
    check_metrics,
    kl_per_dim_figure,
    latent_responses,
    latent_responses_figure,
    metrics_figure,
    read_metrics,
    require_matplotlib,
    save_figure,
)

from .test_helpers import BlockFactors, BlockVAE

pytest.importorskip("matplotlib")


def test_latent_responses_figure_draws_each_latent_against_each_factor(tmp_path):
    data = BlockFactors()
    found = latent_responses(data, BlockVAE([0.0, 0.0, 0.0]), num_per_value=4)
    kl = [0.5, 2.0, 0.0]
    fig = latent_responses_figure(found, kl)
    axes = np.array(fig.axes).reshape(3, 2)  # rows z1, z0, z2 (by KL); columns a, b
    assert [ax.get_title() for ax in axes[0]] == ["a", "b"]
    assert [axes[r, 0].get_ylabel().split("\n")[0] for r in range(3)] == ["z1", "z0", "z2"]
    for r, j in enumerate([1, 0, 2]):
        for k in range(2):
            line = axes[r, k].lines[0]
            np.testing.assert_array_equal(line.get_xdata(), data.factor_values[k])
            np.testing.assert_allclose(line.get_ydata(), found.mean[k][:, j])
    path = save_figure(fig, tmp_path / "r.png")
    with Image.open(path) as im:
        assert im.format == "PNG" and im.size[0] > 200


def test_kl_per_dim_figure_bars_are_the_kl():
    kl = np.array([0.05, 3.0, 0.7])
    ax = kl_per_dim_figure(kl).axes[0]
    np.testing.assert_allclose([p.get_height() for p in ax.patches], kl)
    assert "2 of 3 active" in ax.get_title()


def test_metrics_figure_has_one_bar_per_score_with_its_value():
    metrics = {"mig": {"mig": 0.25, "mig_shape": 0.1}, "dci": {"disentanglement": 0.6, "completeness": float("nan")}}
    ax = metrics_figure(metrics).axes[0]
    widths = [p.get_width() for p in ax.patches]
    np.testing.assert_allclose(widths, [0.25, 0.1, 0.6, 0.0])  # the NaN score has no bar ...
    position = {t.get_text(): y for t, y in zip(ax.get_yticklabels(), ax.get_yticks())}
    top_to_bottom = sorted(position, key=position.get, reverse=True)
    assert top_to_bottom == ["mig", "mig_shape", "dci: disentanglement", "dci: completeness"]
    assert [p.get_y() + p.get_height() / 2 for p in ax.patches] == [position[n] for n in top_to_bottom]
    assert " n/a" in [t.get_text() for t in ax.texts]  # ... and says so


def test_read_metrics_accepts_the_evaluate_format_and_explains_others(tmp_path):
    good = tmp_path / "metrics.json"
    good.write_text(json.dumps({"run_dir": "x", "metrics": {"mig": {"mig": 0.3}}, "seconds": {}}))
    assert read_metrics(good) == {"mig": {"mig": 0.3}}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"mig": 0.3}))
    with pytest.raises(disentangle.DisentangleError, match="metric: {score: number}"):
        read_metrics(bad)
    with pytest.raises(disentangle.DisentangleError, match="python -m disentangle.evaluate"):
        read_metrics(tmp_path / "missing.json")
    with pytest.raises(disentangle.DisentangleError):
        check_metrics({"mig": {"mig": "high"}})


def test_missing_matplotlib_names_the_plots_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes "import matplotlib" fail
    with pytest.raises(disentangle.DisentangleError, match=r'pip install "disentangle-torch\[plots\]"'):
        require_matplotlib()
    with pytest.raises(disentangle.DisentangleError, match="plots extra"):
        kl_per_dim_figure([1.0])


def test_metrics_figure_leaves_out_counts():
    pytest.importorskip("matplotlib")
    from disentangle.visualize.plots import metrics_figure

    fig = metrics_figure({"factor_vae_score": {"eval_accuracy": 0.5, "num_active_dims": 10.0}, "mig": {"mig": 0.25}})
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels and not any("num_active_dims" in label for label in labels)
    assert [round(p.get_width(), 6) for p in ax.patches] == [0.5, 0.25]
    assert ax.get_xlim()[1] < 2.0  # the axis is scaled to the scores (0.5 here), not to the count (10)


@pytest.mark.parametrize("num_factors", [1, 2, 5])
def test_latent_responses_title_fits_the_figure(num_factors):
    """A single-factor dataset's figure is one narrow column: its title wraps instead of being cut."""
    from disentangle.visualize.responses import LatentResponses

    values = np.arange(4.0)
    codes = np.stack([values, -values, 0 * values], axis=1)
    responses = LatentResponses(tuple(f"f{k}" for k in range(num_factors)), (values,) * num_factors,
                                (codes,) * num_factors, (0.1 + 0 * codes,) * num_factors)
    fig = latent_responses_figure(responses)
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    title = fig._suptitle.get_window_extent(canvas.get_renderer())
    width, height = fig.bbox.width, fig.bbox.height
    assert title.x0 >= 0 and title.x1 <= width and title.y1 <= height, (title, width, height)
