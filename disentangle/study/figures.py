"""The study's figures, drawn with matplotlib's object-oriented API (no pyplot, no global state).

matplotlib is imported inside each function (it is the optional ``plots`` extra); callers check
:func:`matplotlib_available` first. Every public function writes one PNG atomically; the private
``_draw_*`` function behind it builds and returns the Figure (what the tests read). The figures are
at most :data:`MAX_WIDTH_IN` wide with no text under 8 pt, so that they read on the documentation
site; many panels wrap into more rows instead of widening a figure.
"""
from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ._io import atomic_write_bytes
from .statistics import ALPHA, Matrix, VarianceShares

DPI = 150
MAX_WIDTH_IN = 8.0
"""The widest a figure is drawn, in inches (``MAX_WIDTH_IN * DPI`` = 1,200 px).

The documentation site shows a picture in its content column, about 750 px wide: a figure ``W``
inches wide is scaled by 750 / (``DPI`` · W), so a character of ``s`` points shows about
s · 750 / (72 · W) px high. At 8 inches the smallest text here (8 pt) shows 10.4 px high, the least
that reads comfortably; a wider figure would need larger type. Figures with many panels wrap them
into rows (:func:`_wrap`) and grow taller instead of wider.
"""
# The type sizes, in points: every text of a figure is at least TICK_PT (see MAX_WIDTH_IN).
TICK_PT = 8.0  # tick labels, annotations in the cells and on the bars
LABEL_PT = 8.5  # axis labels, legends
TITLE_PT = 10.0  # panel titles
SUPTITLE_PT = 11.5  # the figure's title
PRETTY = {
    "beta_vae_score.eval_accuracy": "BetaVAE score",
    "factor_vae_score.eval_accuracy": "FactorVAE score",
    "mig.mig": "MIG",
    "modularity_explicitness.modularity": "Modularity",
    "modularity_explicitness.explicitness_test": "Explicitness",
    "dci.disentanglement": "DCI disentanglement",
    "dci.completeness": "DCI completeness",
    "dci.informativeness_test": "DCI informativeness",
    "sap_score.sap": "SAP",
    "unsupervised_scores.gaussian_total_correlation": "Gaussian TC",
    "unsupervised_scores.gaussian_wasserstein_correlation": "Wasserstein corr.",
    "unsupervised_scores.gaussian_wasserstein_correlation_norm": "Wasserstein corr. (norm.)",
    "unsupervised_scores.mutual_info_score": "Mutual info score",
    "udr.udr": "UDR",
}
METHOD_PRETTY = {
    "beta_vae": "β-VAE",
    "annealed_vae": "AnnealedVAE",
    "factor_vae": "FactorVAE",
    "dip_vae_i": "DIP-VAE-I",
    "dip_vae_ii": "DIP-VAE-II",
    "beta_tcvae": "β-TCVAE",
    "info_vae": "InfoVAE",
    "aae": "AAE",
    "ada_gvae": "Ada-GVAE",
    "ada_ml_vae": "Ada-ML-VAE",
    "group_gvae": "GVAE",
    "group_ml_vae": "ML-VAE",
    "infogan": "InfoGAN",
    "infogan_cr": "InfoGAN-CR",
}
SHARE_COLORS = ("#4C72B0", "#DD8452", "#BBBBBB")


def matplotlib_available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def pretty(score: str) -> str:
    return PRETTY.get(score, score)


def pretty_method(method: str) -> str:
    return METHOD_PRETTY.get(method, method)


def _new_figure(width: float, height: float):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(min(width, MAX_WIDTH_IN), height), dpi=DPI, layout="constrained")
    # the gaps between rows of panels in inches: constrained layout's default hspace is a fraction of
    # the figure's height, which would open wider gaps the taller a figure grows
    fig.get_layout_engine().set(h_pad=0.06, hspace=0.0)
    return fig


def _save(fig: Any, path: str | Path) -> None:
    buffer = io.BytesIO()
    # "tight" keeps a legend placed below the axes inside the picture
    fig.savefig(buffer, format="png", dpi=DPI, facecolor="white", bbox_inches="tight", pad_inches=0.1)
    atomic_write_bytes(path, buffer.getvalue())


def _wrap(n: int, max_columns: int) -> tuple[int, int]:
    """Rows and columns of a grid holding ``n`` panels, at most ``max_columns`` to a row.

    The panels fill the rows in reading order; the last row's empty slots are hidden by the caller.
    """
    cols = max(1, min(n, max_columns))
    return math.ceil(n / cols), cols


def _text_width_in(text: str, size: float) -> float:
    """About how wide ``text`` is set at ``size`` points, in inches (DejaVu Sans: ~0.6 em a character)."""
    return 0.6 * size / 72 * max((len(line) for line in text.split("\n")), default=0)


def correlation_figure(matrices: dict[str, Matrix], path: str | Path, *, title: str, several_datasets: bool) -> None:
    """One annotated heatmap of Spearman's ρ per dataset, a shared colorbar in [−1, 1]."""
    _save(_draw_correlation(matrices, title=title, several_datasets=several_datasets), path)


def _draw_correlation(matrices: dict[str, Matrix], *, title: str, several_datasets: bool) -> Any:
    """The heatmaps two to a row where two fit in :data:`MAX_WIDTH_IN`, else one to a row."""
    names = list(matrices)
    n_rows = max(len(m.rows) for m in matrices.values())
    n_cols = max(len(m.columns) for m in matrices.values())
    label_in = max(_text_width_in(pretty(r), TICK_PT) for m in matrices.values() for r in m.rows) + 0.15
    colorbar_in, min_cell, max_cell = 1.0, 0.42, 0.55
    fits_two = 2 * (n_cols * min_cell + label_in) + colorbar_in <= MAX_WIDTH_IN
    rows, cols = _wrap(len(names), 2 if fits_two else 1)
    cell = min(max_cell, (MAX_WIDTH_IN - colorbar_in - cols * label_in) / (cols * n_cols))
    decimals = 2 if cell >= 0.36 else 1  # "−0.23" at 8 pt is ~0.3 in wide
    column_labels_in = 0.72 * max(_text_width_in(pretty(c), TICK_PT) for m in matrices.values() for c in m.columns)
    panel_height = n_rows * cell + column_labels_in + (0.55 if several_datasets else 0.35)
    fig = _new_figure(cols * (n_cols * cell + label_in) + colorbar_in, rows * panel_height + 0.5)
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    image = None
    for ax, name in zip(axes, names):
        m = matrices[name]
        image = ax.imshow(m.values, cmap="RdBu_r", vmin=-1, vmax=1, aspect="equal")
        ax.set_xticks(range(len(m.columns)), [pretty(c) for c in m.columns], rotation=45, ha="right",
                      rotation_mode="anchor", fontsize=TICK_PT)
        ax.set_yticks(range(len(m.rows)), [pretty(r) for r in m.rows], fontsize=TICK_PT)
        for i in range(len(m.rows)):
            for j in range(len(m.columns)):
                v = m.values[i, j]
                text = "–" if math.isnan(v) else f"{v:.{decimals}f}"
                ax.text(j, i, text, ha="center", va="center", fontsize=TICK_PT,
                        color="white" if abs(v) > 0.6 else "black")
        n = m.counts[m.counts > 0]
        runs = f"{n.min()}" if n.size and n.min() == n.max() else (f"{n.min()}–{n.max()}" if n.size else "0")
        ax.set_title(f"{name}\n({runs} runs)" if several_datasets else f"{runs} runs", fontsize=TITLE_PT)
    for ax in axes[len(names):]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=SUPTITLE_PT)
    colorbar = fig.colorbar(image, ax=list(axes[: len(names)]), shrink=0.8 if rows == 1 else 0.5)
    colorbar.set_label("Spearman rank correlation", fontsize=LABEL_PT)
    colorbar.ax.tick_params(labelsize=TICK_PT)
    return fig


def variance_figure(shares: dict[str, dict[str, VarianceShares]], path: str | Path, *, several_datasets: bool,
                    alpha: float = ALPHA) -> None:
    """Per score, the three shares of the nested ANOVA side by side, each against its chance level.

    Columns: method, strength within method, residual (seed and noise); one row of panels per
    dataset. Each bar is a share (η²) of the score's sum of squares; the black tick on it marks its
    chance level, the share pure noise gives on average (df / (N − 1)). Method and strength bars
    are solid where the share beats chance (F-test, Holm-adjusted p < ``alpha``, printed under the
    share) and pale where it does not; the residual is grey.
    """
    _save(_draw_variance(shares, several_datasets=several_datasets, alpha=alpha), path)


def _draw_variance(shares: dict[str, dict[str, VarianceShares]], *, several_datasets: bool,
                   alpha: float = ALPHA) -> Any:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    names = list(shares)
    n_scores = max(len(v) for v in shares.values())
    # a row holds two lines of annotation (the share, its p-value under it)
    fig = _new_figure(MAX_WIDTH_IN, (0.42 * n_scores + 1.2) * len(names) + 1.3)
    axes = fig.subplots(len(names), 3, squeeze=False, sharey="row")
    labels = ("method", "strength within method", "residual (seed and noise)")
    for r, name in enumerate(names):
        items = list(shares[name].items())
        y = np.arange(len(items))[::-1]
        for c, (label, color) in enumerate(zip(labels, SHARE_COLORS)):
            ax = axes[r, c]
            for yi, (_, s) in zip(y, items):
                share = (s.method, s.strength, s.residual)[c]
                chance = (s.chance_method, s.chance_strength, s.chance_residual)[c]
                p = (s.p_method_adjusted, s.p_strength_adjusted, math.nan)[c]
                beats = c < 2 and math.isfinite(p) and p < alpha
                width = 0.0 if math.isnan(share) else share
                ax.barh(yi, width, color=color, alpha=1.0 if beats or c == 2 else 0.3, height=0.7, edgecolor="none")
                if math.isfinite(chance):
                    ax.plot([chance, chance], [yi - 0.45, yi + 0.45], color="black", lw=1.6, solid_capstyle="butt")
                text = "–" if math.isnan(share) else f"{share:.0%}"
                if c < 2 and math.isfinite(p):
                    text += f"\n{_p_text(p)}"
                x = max(width, chance if math.isfinite(chance) else 0.0) + 0.02
                ax.text(x, yi, text, ha="left", va="center", fontsize=TICK_PT, linespacing=1.0,
                        fontweight="bold" if beats else "normal")
            ax.set_xlim(0, 1.5)  # room right of a full bar for its annotation
            ax.set_ylim(-0.6, len(items) - 0.4)
            ax.set_xticks([0, 0.5, 1.0])
            ax.set_xticks([0.25, 0.75], minor=True)  # gridlines without labels: 8-pt labels every 25 % would touch
            ax.xaxis.set_major_formatter(_percent())
            ax.tick_params(axis="x", labelsize=TICK_PT)
            ax.grid(axis="x", which="both", alpha=0.25)
            ax.set_title(f"{name}\n{label}" if several_datasets else label, fontsize=TITLE_PT)
            if c == 0:
                ax.set_yticks(y, [f"{pretty(score)} (n={s.n_runs})" for score, s in items], fontsize=TICK_PT)
            else:
                ax.tick_params(axis="y", left=False)
            if r == len(names) - 1 and c == 1:
                ax.set_xlabel("share of the score's sum of squares", fontsize=LABEL_PT)
    handles = [
        Patch(color=SHARE_COLORS[0], label=f"beats chance (F-test, Holm-adjusted p < {alpha:g})"),
        Patch(color=SHARE_COLORS[0], alpha=0.3, label="within chance"),
        Line2D([], [], color="black", lw=1.6, label="chance level: what pure noise gives on average"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncol=2, fontsize=LABEL_PT, frameon=False)
    fig.suptitle("Variance explained by the method, its strength and the seed, against chance", fontsize=SUPTITLE_PT)
    return fig


def _p_text(p: float) -> str:
    return "p<0.001" if p < 0.001 else (f"p={p:.3f}" if p < 0.1 else f"p={p:.2f}")


def _percent():
    from matplotlib.ticker import PercentFormatter

    return PercentFormatter(1.0, decimals=0)


def scores_by_method_figure(
    scores: dict[str, np.ndarray], groups: list[tuple[str, str]], group_of_run: Sequence[tuple[str, str]],
    path: str | Path, *, several_datasets: bool,
) -> None:
    """One panel per score, two to a row: the distribution over all runs of each method (violin, quartiles, points).

    With several datasets the methods of each dataset stand side by side, one colour per method.
    """
    _save(_draw_scores_by_method(scores, groups, group_of_run, several_datasets=several_datasets), path)


def _draw_scores_by_method(
    scores: dict[str, np.ndarray], groups: list[tuple[str, str]], group_of_run: Sequence[tuple[str, str]], *,
    several_datasets: bool,
) -> Any:
    names = list(scores)
    rows, cols = _wrap(len(names), 2)
    method_names = list(dict.fromkeys(m for _, m in groups))
    labels_in = 0.25 if several_datasets else 0.5 * max(_text_width_in(pretty_method(m), TICK_PT) for m in method_names)
    legend_in = 0.25 * math.ceil(len(method_names) / 4) if several_datasets else 0.0
    fig = _new_figure(MAX_WIDTH_IN, (2.4 + labels_in) * rows + 0.6 + legend_in)
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    group_index = np.array([groups.index(g) for g in group_of_run])
    method_color = dict(zip(method_names, _palette(len(method_names))))
    datasets = list(dict.fromkeys(d for d, _ in groups))
    positions, x = [], 0.0
    for g, (d, _) in enumerate(groups):
        if g and d != groups[g - 1][0]:
            x += 1.0  # a gap between datasets
        positions.append(x)
        x += 1.0
    positions_arr = np.array(positions)
    rng = np.random.default_rng(0)  # jitter only
    for ax, score in zip(axes, names):
        values = scores[score]
        data = [values[(group_index == g) & np.isfinite(values)] for g in range(len(groups))]
        drawable = [g for g, d in enumerate(data) if len(d) >= 2 and np.ptp(d) > 0]
        if drawable:
            parts = ax.violinplot([data[g] for g in drawable], positions=positions_arr[drawable], widths=0.8,
                                  showextrema=False)
            for body, g in zip(parts["bodies"], drawable):
                body.set_facecolor(method_color[groups[g][1]])
                body.set_edgecolor("none")
                body.set_alpha(0.35)
        for g, d in enumerate(data):
            if len(d):
                color = method_color[groups[g][1]]
                ax.scatter(positions[g] + rng.uniform(-0.12, 0.12, len(d)), d, s=7, color=color, alpha=0.8, linewidths=0,
                           zorder=3)
                q25, med, q75 = np.percentile(d, [25, 50, 75])
                ax.plot([positions[g], positions[g]], [q25, q75], color="black", lw=2.0, zorder=4)
                ax.scatter([positions[g]], [med], marker="_", s=180, color="black", zorder=5)
        if several_datasets:
            centres = [np.mean([positions[g] for g, (d, _) in enumerate(groups) if d == ds]) for ds in datasets]
            ax.set_xticks(centres, datasets, fontsize=TICK_PT)
        else:
            labels = [pretty_method(m) for _, m in groups]
            tilt = len(groups) > 3
            ax.set_xticks(positions, labels, rotation=40 if tilt else 0, ha="right" if tilt else "center",
                          rotation_mode="anchor" if tilt else "default", fontsize=TICK_PT)
        ax.set_title(pretty(score), fontsize=TITLE_PT)
        ax.tick_params(axis="y", labelsize=TICK_PT)
        ax.grid(axis="y", alpha=0.3)
    for ax in axes[len(names):]:
        ax.set_visible(False)
    if several_datasets:
        from matplotlib.patches import Patch

        handles = [Patch(color=method_color[m], alpha=0.6, label=pretty_method(m)) for m in method_names]
        fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 4), fontsize=LABEL_PT,
                   frameon=False)
    fig.suptitle("Scores by method (all strengths and seeds)\nblack: median and interquartile range",
                 fontsize=SUPTITLE_PT)
    return fig


def _palette(n: int) -> list[Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    return [cmap(i % 10) for i in range(n)]


def score_vs_strength_figure(
    panels: dict[str, dict[tuple[str, str], list[tuple[Any, str, np.ndarray]]]],
    strength_names: dict[tuple[str, str], str],
    path: str | Path,
) -> None:
    """One block per score, one panel per method in it (three to a row): median over seeds against the
    strength, with the interquartile band and each seed.

    ``panels[score][(dataset, method)]`` is a list of ``(strength value or None, label, values)``
    in strength order; one line per dataset within a method's panel. Each block is headed by its
    score, which also labels the y axis of each of its rows; each panel is titled by its method and
    its x axis by the method's strength. A method keeps its place in every block.
    """
    _save(_draw_score_vs_strength(panels, strength_names), path)


METHODS_PER_ROW = 3
"""Panels to a row in :func:`score_vs_strength_figure` (at :data:`MAX_WIDTH_IN`, ~2.7 in each)."""


def _draw_score_vs_strength(
    panels: dict[str, dict[tuple[str, str], list[tuple[Any, str, np.ndarray]]]],
    strength_names: dict[tuple[str, str], str],
) -> Any:
    scores = list(panels)
    methods: list[str] = []
    datasets: list[str] = []
    for per_score in panels.values():
        for d, m in per_score:
            if m not in methods:
                methods.append(m)
            if d not in datasets:
                datasets.append(d)
    colors = dict(zip(datasets, _palette(len(datasets))))
    rows, cols = _wrap(len(methods), METHODS_PER_ROW)
    block_in = 1.95 * rows + 0.35  # the panels and the score's heading
    legend_in = 0.25 * math.ceil(len(datasets) / 4) + 0.1 if len(datasets) > 1 else 0.0
    fig = _new_figure(MAX_WIDTH_IN, block_in * len(scores) + 0.6 + legend_in)
    # the datasets' legend heads the figure, in a band of its own under the title
    heights = ([legend_in] if legend_in else []) + [block_in] * len(scores)
    blocks = list(fig.subfigures(len(heights), 1, squeeze=False, height_ratios=heights).ravel())
    legend_band = blocks.pop(0) if legend_in else None
    for block, score in zip(blocks, scores):
        axes = block.subplots(rows, cols, squeeze=False).ravel()
        block.suptitle(pretty(score), fontsize=TITLE_PT + 1, fontweight="bold", x=0.01, ha="left")
        for slot, ax in enumerate(axes):
            method = methods[slot] if slot < len(methods) else None
            series_of = {d: panels[score].get((d, method)) for d in datasets} if method else {}
            if not any(series_of.values()):
                ax.set_visible(False)
                continue
            for d, series in series_of.items():
                if not series:
                    continue
                numeric = all(v is not None for v, _, _ in series)
                x = np.array([v if numeric else i for i, (v, _, _) in enumerate(series)], dtype=np.float64)
                med = np.array([np.median(s[np.isfinite(s)]) if np.isfinite(s).any() else np.nan for _, _, s in series])
                lo = np.array([np.percentile(s[np.isfinite(s)], 25) if np.isfinite(s).any() else np.nan for _, _, s in series])
                hi = np.array([np.percentile(s[np.isfinite(s)], 75) if np.isfinite(s).any() else np.nan for _, _, s in series])
                color = colors[d]
                ax.fill_between(x, lo, hi, color=color, alpha=0.2, linewidth=0)
                ax.plot(x, med, "-o", color=color, ms=3.5, lw=1.4, label=d if len(datasets) > 1 else None)
                for xi, (_, _, s) in zip(x, series):
                    s = s[np.isfinite(s)]
                    ax.scatter(np.full(len(s), xi), s, s=6, color=color, alpha=0.5, linewidths=0)
                if numeric and len(x) > 1 and x.min() > 0 and x.max() / x.min() >= 8:
                    ax.set_xscale("log")
                    ax.set_xticks(x, [f"{v:g}" for v in x])
                    ax.minorticks_off()
                elif numeric:
                    ax.set_xticks(x, [f"{v:g}" for v in x])
                elif len(series) > 1:
                    ax.set_xticks(x, [lab for _, lab, _ in series], rotation=20, ha="right")
                else:
                    ax.set_xticks(x, [series[0][1]])
            ax.tick_params(labelsize=TICK_PT)
            ax.grid(alpha=0.3)
            ax.set_title(pretty_method(method), fontsize=TITLE_PT)
            if slot % cols == 0 or not axes[slot - 1].get_visible():
                ax.set_ylabel(pretty(score), fontsize=LABEL_PT)
            key = next((strength_names.get((d, method)) for d in datasets if (d, method) in strength_names), "")
            ax.set_xlabel((key or "setting").replace("objective.", ""), fontsize=LABEL_PT)
    if legend_band is not None:
        handles, labels = [], []
        for ax in fig.axes:
            h, lab = ax.get_legend_handles_labels()
            for hh, ll in zip(h, lab):
                if ll not in labels:
                    handles.append(hh)
                    labels.append(ll)
        legend_band.legend(handles, labels, loc="center", ncol=min(len(labels), 4), fontsize=LABEL_PT, frameon=False)
    fig.suptitle("Scores against the regularisation strength\n(median over seeds, interquartile band, dots: seeds)",
                 fontsize=SUPTITLE_PT)
    return fig
