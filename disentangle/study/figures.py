"""The study's figures, drawn with matplotlib's object-oriented API (no pyplot, no global state).

matplotlib is imported inside each function (it is the optional ``plots`` extra); callers check
:func:`matplotlib_available` first. Every function writes one PNG atomically.
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

    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    return fig


def _save(fig: Any, path: str | Path) -> None:
    buffer = io.BytesIO()
    # "tight" keeps a legend placed below the axes inside the picture
    fig.savefig(buffer, format="png", dpi=DPI, facecolor="white", bbox_inches="tight", pad_inches=0.1)
    atomic_write_bytes(path, buffer.getvalue())


def correlation_figure(matrices: dict[str, Matrix], path: str | Path, *, title: str, several_datasets: bool) -> None:
    """One annotated heatmap of Spearman's ρ per dataset, a shared colorbar in [−1, 1]."""
    names = list(matrices)
    first = matrices[names[0]]
    cell = 0.55
    width = max(3.5, cell * len(first.columns) + 2.6) * len(names) + 1.0
    height = max(2.8, cell * len(first.rows) + 2.4)
    fig = _new_figure(min(width, 30), min(height, 20))
    axes = fig.subplots(1, len(names), squeeze=False)[0]
    image = None
    for ax, name in zip(axes, names):
        m = matrices[name]
        image = ax.imshow(m.values, cmap="RdBu_r", vmin=-1, vmax=1, aspect="equal")
        ax.set_xticks(range(len(m.columns)), [pretty(c) for c in m.columns], rotation=45, ha="right", fontsize=8)
        ax.set_yticks(range(len(m.rows)), [pretty(r) for r in m.rows], fontsize=8)
        for i in range(len(m.rows)):
            for j in range(len(m.columns)):
                v = m.values[i, j]
                text = "–" if math.isnan(v) else f"{v:.2f}"
                ax.text(j, i, text, ha="center", va="center", fontsize=7, color="white" if abs(v) > 0.6 else "black")
        n = m.counts[m.counts > 0]
        runs = f"{n.min()}" if n.size and n.min() == n.max() else (f"{n.min()}–{n.max()}" if n.size else "0")
        ax.set_title(f"{name}\n({runs} runs)" if several_datasets else f"{runs} runs", fontsize=9)
    fig.suptitle(title, fontsize=11)
    fig.colorbar(image, ax=list(axes), shrink=0.8, label="Spearman rank correlation")
    _save(fig, path)


def variance_figure(shares: dict[str, dict[str, VarianceShares]], path: str | Path, *, several_datasets: bool,
                    alpha: float = ALPHA) -> None:
    """Per score, the three shares of the nested ANOVA side by side, each against its chance level.

    Columns: method, strength within method, residual (seed and noise); one row of panels per
    dataset. Each bar is a share (η²) of the score's sum of squares; the black tick on it marks its
    chance level, the share pure noise gives on average (df / (N − 1)). Method and strength bars
    are solid where the share beats chance (F-test, Holm-adjusted p < ``alpha``, printed after the
    share) and pale where it does not; the residual is grey.
    """
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    names = list(shares)
    n_scores = max(len(v) for v in shares.values())
    fig = _new_figure(12.0, (0.34 * n_scores + 1.1) * len(names) + 1.1)
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
                    text += f"  p={_p_text(p)}"
                x = max(width, chance if math.isfinite(chance) else 0.0) + 0.02
                ax.text(x, yi, text, ha="left", va="center", fontsize=7, fontweight="bold" if beats else "normal")
            ax.set_xlim(0, 1.32)
            ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0])
            ax.xaxis.set_major_formatter(_percent())
            ax.tick_params(axis="x", labelsize=8)
            ax.grid(axis="x", alpha=0.25)
            ax.set_title(f"{name}: {label}" if several_datasets else label, fontsize=9)
            if c == 0:
                ax.set_yticks(y, [f"{pretty(score)} (n={s.n_runs})" for score, s in items], fontsize=8)
            else:
                ax.tick_params(axis="y", left=False)
            if r == len(names) - 1:
                ax.set_xlabel("share of the score's sum of squares", fontsize=8)
    handles = [
        Patch(color=SHARE_COLORS[0], label=f"beats chance (F-test, Holm-adjusted p < {alpha:g})"),
        Patch(color=SHARE_COLORS[0], alpha=0.3, label="within chance"),
        Line2D([], [], color="black", lw=1.6, label="chance level: what pure noise gives on average"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=8, frameon=False)
    fig.suptitle("Variance explained by the method, its strength and the seed, against chance", fontsize=11)
    _save(fig, path)


def _p_text(p: float) -> str:
    return "<0.001" if p < 0.001 else (f"{p:.3f}" if p < 0.1 else f"{p:.2f}")


def _percent():
    from matplotlib.ticker import PercentFormatter

    return PercentFormatter(1.0, decimals=0)


def _grid(n: int, max_columns: int = 4) -> tuple[int, int]:
    cols = min(n, max_columns)
    return math.ceil(n / cols), cols


def scores_by_method_figure(
    scores: dict[str, np.ndarray], groups: list[tuple[str, str]], group_of_run: Sequence[tuple[str, str]],
    path: str | Path, *, several_datasets: bool,
) -> None:
    """One panel per score: the distribution over all runs of each method (violin, quartiles, points).

    With several datasets the methods of each dataset stand side by side, one colour per method.
    """
    names = list(scores)
    rows, cols = _grid(len(names))
    fig = _new_figure(min(4.0 * cols, 18), 3.2 * rows + (0.9 if several_datasets else 0.6))
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    group_index = np.array([groups.index(g) for g in group_of_run])
    method_names = list(dict.fromkeys(m for _, m in groups))
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
            ax.set_xticks(centres, datasets, fontsize=8)
        else:
            labels = [pretty_method(m) for _, m in groups]
            tilt = len(groups) > 3
            ax.set_xticks(positions, labels, rotation=30 if tilt else 0, ha="right" if tilt else "center", fontsize=8)
        ax.set_title(pretty(score), fontsize=9)
        ax.tick_params(axis="y", labelsize=8)
        ax.grid(axis="y", alpha=0.3)
    for ax in axes[len(names):]:
        ax.set_visible(False)
    if several_datasets:
        from matplotlib.patches import Patch

        handles = [Patch(color=method_color[m], alpha=0.6, label=pretty_method(m)) for m in method_names]
        fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 8), fontsize=8, frameon=False)
    fig.suptitle("Scores by method (all strengths and seeds; black: median and interquartile range)", fontsize=11)
    _save(fig, path)


def _palette(n: int) -> list[Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    return [cmap(i % 10) for i in range(n)]


def score_vs_strength_figure(
    panels: dict[str, dict[tuple[str, str], list[tuple[Any, str, np.ndarray]]]],
    strength_names: dict[tuple[str, str], str],
    path: str | Path,
) -> None:
    """Rows: scores; columns: methods. Median over seeds against the strength, with the interquartile band and each seed.

    ``panels[score][(dataset, method)]`` is a list of ``(strength value or None, label, values)``
    in strength order; one line per dataset within a method's panel.
    """
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
    fig = _new_figure(min(2.9 * len(methods) + 0.8, 24), min(2.3 * len(scores) + 1.0, 40))
    axes = fig.subplots(len(scores), len(methods), squeeze=False)
    for r, score in enumerate(scores):
        for c, method in enumerate(methods):
            ax = axes[r, c]
            any_line = False
            for d in datasets:
                series = panels[score].get((d, method))
                if not series:
                    continue
                any_line = True
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
                else:
                    ax.set_xticks(x, [lab for _, lab, _ in series], rotation=30, ha="right")
            if not any_line:
                ax.set_visible(False)
                continue
            ax.tick_params(labelsize=7)
            ax.grid(alpha=0.3)
            if r == 0:
                ax.set_title(pretty_method(method), fontsize=9)
            if c == 0 or not axes[r, c - 1].get_visible():
                ax.set_ylabel(pretty(score), fontsize=8)
            if r == len(scores) - 1:
                key = next((strength_names.get((d, method)) for d in datasets if (d, method) in strength_names), "")
                ax.set_xlabel((key or "setting").replace("objective.", ""), fontsize=8)
    if len(datasets) > 1:
        handles, labels = [], []
        for ax in axes.ravel():
            h, lab = ax.get_legend_handles_labels()
            for hh, ll in zip(h, lab):
                if ll not in labels:
                    handles.append(hh)
                    labels.append(ll)
        fig.legend(handles, labels, loc="outside lower center", ncol=min(len(labels), 6), fontsize=8, frameon=False)
    fig.suptitle("Scores against the regularisation strength (median over seeds, interquartile band, dots: seeds)",
                 fontsize=11)
    _save(fig, path)
