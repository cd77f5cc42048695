"""Plots with matplotlib (the ``plots`` extra, imported only when a plot is made).

Figures are :class:`matplotlib.figure.Figure` objects made without ``pyplot``, so no GUI backend
is touched and nothing accumulates in pyplot's figure list; in a notebook, ``display(fig)`` shows
one inline and :func:`save_figure` writes it as a PNG.
"""
from __future__ import annotations

import json
import math
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import CorruptDataFileError, InputError
from ._files import atomic_write
from .latents import ACTIVE_KL, latent_order
from .responses import LatentResponses

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PLOTS_INSTALL = 'pip install "disentangle-torch[plots]"'


def require_matplotlib() -> Any:
    """Import matplotlib, or raise :class:`~disentangle.DisentangleError` saying how to install it."""
    try:
        import matplotlib
        from matplotlib.figure import Figure  # noqa: F401
    except ImportError as err:
        raise InputError(
            f"The plots (latent_responses.png, kl_per_dim.png, metrics.png) need matplotlib, which "
            f"cannot be imported here ({err}). Install the plots extra with  {PLOTS_INSTALL}  "
            f"(or pip install matplotlib), or ask only for the pictures made with Pillow "
            f"(traversals, gif, reconstructions, samples)."
        ) from None
    return matplotlib


def _figure(width: float, height: float) -> Figure:
    require_matplotlib()
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def latent_responses_figure(
    responses: LatentResponses,
    kl: Sequence[float] | np.ndarray | None = None,
    *,
    dims: Sequence[int] | None = None,
) -> Figure:
    """A grid of small plots, one row per latent and one column per factor.

    Panel ``(j, k)`` draws ``E[μ_j | f_k = v]`` against the factor's value ``v`` with a ±1 std band
    (see :mod:`~disentangle.visualize.responses`); all panels share the y axis, so a flat curve
    means the latent does not respond to that factor. Rows are ``dims`` if given, else every latent,
    by decreasing ``kl`` when it is given (row labels then show it).
    """
    num_latents = responses.num_latents
    if dims is not None:
        rows = [int(d) for d in dims]
    else:
        rows = latent_order(kl) if kl is not None else list(range(num_latents))
    num_factors = len(responses.factor_names)
    fig = _figure(1.7 * num_factors + 0.9, 0.95 * len(rows) + 0.9)
    axes = fig.subplots(len(rows), num_factors, sharey=True, sharex="col", squeeze=False)
    for r, j in enumerate(rows):
        for k, name in enumerate(responses.factor_names):
            ax = axes[r, k]
            x = responses.factor_values[k]
            mean, std = responses.mean[k][:, j], responses.std[k][:, j]
            ax.fill_between(x, mean - std, mean + std, color="C0", alpha=0.25, linewidth=0)
            ax.plot(x, mean, color="C0", marker="o" if len(x) <= 10 else None, markersize=3, linewidth=1.2)
            ax.axhline(0.0, color="0.6", linewidth=0.5)
            ax.tick_params(labelsize=6)
            if len(x) <= 8:  # few classes (shape, scale): a tick per class, not in between
                ax.set_xticks(x, [f"{v:g}" for v in x])
            if r == 0:
                ax.set_title(name, fontsize=9)
            if r == len(rows) - 1:
                ax.set_xlabel("value", fontsize=7)
        label = f"z{j}" if kl is None else f"z{j}\nKL {float(np.asarray(kl)[j]):.2f}"
        axes[r, 0].set_ylabel(label, fontsize=8, rotation=0, ha="right", va="center")
    title = "Mean code against each factor's value (band: ±1 std over the other factors)"
    # wrapped to the figure's width: one factor's column is narrower than the title at 9 pt
    fig.suptitle(textwrap.fill(title, width=max(24, int(13 * fig.get_figwidth()))), fontsize=9)
    return fig


def kl_per_dim_figure(kl: Sequence[float] | np.ndarray, active_kl: float = ACTIVE_KL) -> Figure:
    """Bars of the KL (nats) of every latent, with the active-latent threshold as a dashed line."""
    kl = np.asarray(kl, dtype=float)
    fig = _figure(max(4.0, 0.45 * len(kl) + 1.5), 3.0)
    ax = fig.subplots()
    active = kl >= active_kl
    ax.bar(np.arange(len(kl)), kl, color=np.where(active, "C0", "0.7"))
    ax.axhline(active_kl, color="C3", linestyle="--", linewidth=1, label=f"active: KL ≥ {active_kl:g}")
    ax.set_xticks(np.arange(len(kl)), [f"z{j}" for j in range(len(kl))], fontsize=8)
    ax.set_ylabel("KL(q(z_j|x) ‖ N(0, 1)) [nats]", fontsize=8)
    ax.set_title(f"KL per latent: total {kl.sum():.2f} nats, {int(active.sum())} of {len(kl)} active", fontsize=9)
    ax.legend(fontsize=8)
    return fig


def read_metrics(path: str | Path) -> dict[str, dict[str, float]]:
    """The ``{metric: {score: value}}`` of a ``metrics.json`` written by ``disentangle.evaluate``."""
    path = Path(path)
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(
            f"No metrics file at '{path}'. Compute the scores first with  python -m disentangle.evaluate "
            f"RUN_DIR  (it writes RUN_DIR/metrics.json), or leave 'metrics' out of --what."
        ) from None
    except (OSError, json.JSONDecodeError) as err:
        raise CorruptDataFileError(f"Cannot read the metrics file '{path}': {err}. Rewrite it with python -m disentangle.evaluate.") from None
    return check_metrics(record.get("metrics") if isinstance(record, dict) else None, source=str(path))


def check_metrics(metrics: Any, source: str = "metrics") -> dict[str, dict[str, float]]:
    """Validate ``{metric: {score: number}}`` and return it with float values."""
    ok = isinstance(metrics, Mapping) and metrics and all(
        isinstance(scores, Mapping) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in scores.values())
        for scores in metrics.values()
    )
    if not ok:
        raise InputError(
            f"{source} does not hold scores in the form {{\"metrics\": {{metric: {{score: number}}}}}} "
            f"that python -m disentangle.evaluate writes; got {str(metrics)[:200]!r}."
        )
    return {str(m): {str(s): float(v) for s, v in scores.items()} for m, scores in metrics.items()}


def metrics_figure(metrics: Mapping[str, Mapping[str, float]], title: str | None = None) -> Figure:
    """Horizontal bars of every score, grouped and coloured by metric, each bar labelled with its value.

    ``metrics`` is ``{metric: {score: value}}`` (the ``"metrics"`` entry of ``metrics.json``).
    Non-finite scores are listed with the label ``n/a`` and no bar. Counts that metrics report
    alongside their scores (``num_*``, e.g. FactorVAE's ``num_active_dims``) are left out: they are
    not scores, and a count of 10 would squash every bar on a shared axis.
    """
    metrics = check_metrics(metrics)
    labels, values, colours = [], [], []
    for i, (metric, scores) in enumerate(metrics.items()):
        for score, value in scores.items():
            if score.startswith("num_"):
                continue
            labels.append(score if score.startswith(metric) else f"{metric}: {score}")
            values.append(value)
            colours.append(f"C{i % 10}")
    fig = _figure(6.5, 0.24 * len(labels) + 1.0)
    ax = fig.subplots()
    y = np.arange(len(labels))[::-1]
    finite = np.isfinite(values)
    shown = np.where(finite, values, 0.0)
    ax.barh(y, shown, color=colours, height=0.75)
    for yi, value, ok in zip(y, values, finite):
        ax.text(value if ok else 0.0, yi, f" {value:.3f}" if ok else " n/a", va="center", fontsize=7)
    ax.set_yticks(y, labels, fontsize=7)
    lo = min(0.0, float(np.min(shown)))
    hi = max(1.0, float(np.max(shown)))
    ax.set_xlim(lo, hi * 1.12 if math.isfinite(hi) else 1.0)
    ax.axvline(0.0, color="0.3", linewidth=0.8)
    ax.set_xlabel("score", fontsize=8)
    ax.set_title(title or "Disentanglement scores", fontsize=9)
    return fig


def save_figure(fig: Figure, path: str | Path, dpi: int = 120) -> Path:
    """Write a figure as a PNG, atomically."""
    return atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=dpi))
