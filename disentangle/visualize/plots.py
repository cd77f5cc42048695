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
#: above this many bars, :func:`metrics_figure` draws each metric's headline score only
MAX_METRIC_BARS = 40
#: metrics whose scores are nats of a whole image (thousands): on the axis they share with the
#: scores in [0, 1] they would squash every other bar, so :func:`metrics_figure` leaves them out
#: unless they are the only scores
ELBO_METRICS: tuple[str, ...] = ("elbo",)


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
    score: str = "KL",
) -> Figure:
    """A grid of small plots, one row per latent and one column per factor.

    Panel ``(j, k)`` draws ``E[μ_j | f_k = v]`` against the factor's value ``v`` with a ±1 std band
    (see :mod:`~disentangle.visualize.responses`); all panels share the y axis, so a flat curve
    means the latent does not respond to that factor. Rows are ``dims`` if given, else every latent,
    by decreasing ``kl`` when it is given (row labels then show it, named ``score``: ``"KL"``, or
    ``"H"`` for a quantised model's code entropy in bits).
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
        label = f"z{j}" if kl is None else f"z{j}\n{score} {float(np.asarray(kl)[j]):.2f}"
        axes[r, 0].set_ylabel(label, fontsize=8, rotation=0, ha="right", va="center")
    title = "Mean code against each factor's value (band: ±1 std over the other factors)"
    # wrapped to the figure's width: one factor's column is narrower than the title at 9 pt
    fig.suptitle(textwrap.fill(title, width=max(24, int(13 * fig.get_figwidth()))), fontsize=9)
    return fig


def kl_per_dim_figure(kl: Sequence[float] | np.ndarray, active_kl: float = ACTIVE_KL, *,
                      entropy: bool = False, kind: str | None = None) -> Figure:
    """Bars of the KL (nats) of every latent, with the active-latent threshold as a dashed line.

    ``kind`` (:func:`~disentangle.visualize.latents.score_kind`) says what the bars are: ``kl``
    (default), ``entropy`` (also ``entropy=True``: a quantised model's code entropy per latent in
    bits, :func:`~disentangle.visualize.latents.code_entropy_per_dim`; QLAE has no posterior
    variance and so no KL; the same threshold in bits) or ``spread`` (a GAN's: the sd of each
    inferred code, :func:`~disentangle.visualize.latents.code_spread_per_dim`; every code is an input
    of its generator, so there is no threshold)."""
    from .latents import SCORE_NAMES

    kind = kind or ("entropy" if entropy else "kl")
    kl = np.asarray(kl, dtype=float)
    fig = _figure(max(4.0, 0.45 * len(kl) + 1.5), 3.0)
    ax = fig.subplots()
    name, axis, unit = SCORE_NAMES[kind]
    if kind == "spread":
        ax.bar(np.arange(len(kl)), kl, color="C0")
        ax.axhline(1 / np.sqrt(3), color="0.5", linestyle=":", linewidth=1, label="sd of U(−1, 1): a code read exactly")
        title = f"Spread of the inferred codes: {len(kl)} codes"
    else:
        active = kl >= active_kl
        ax.bar(np.arange(len(kl)), kl, color=np.where(active, "C0", "0.7"))
        ax.axhline(active_kl, color="C3", linestyle="--", linewidth=1, label=f"active: {name} ≥ {active_kl:g}")
        what = "Code entropy per latent" if kind == "entropy" else "KL per latent"
        title = f"{what}: total {kl.sum():.2f} {unit}, {int(active.sum())} of {len(kl)} active"
    ax.set_xticks(np.arange(len(kl)), [f"z{j}" for j in range(len(kl))], fontsize=8)
    ax.set_ylabel(axis, fontsize=8)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    return fig


def read_metrics(path: str | Path) -> dict[str, dict[str, float]]:
    """The ``{metric: {score: value}}`` of a ``metrics.json`` written by ``disentangle.evaluate``; a
    folder (a run folder given for its ``metrics.json``) is an :class:`~disentangle.errors.InputError`
    naming the file in it to give instead."""
    path = Path(path)
    if path.is_dir():
        inside = path / "metrics.json"
        hint = (f"Give the one in that folder, --metrics {inside}" if inside.is_file() else
                "That folder holds none: compute the scores with  python -m disentangle.evaluate RUN_DIR  (it writes "
                "RUN_DIR/metrics.json) and give that file")
        raise InputError(
            f"--metrics '{path}' is a folder, and --metrics takes a file: the metrics.json that python -m "
            f"disentangle.evaluate writes, whose scores metrics.png draws. {hint}, or leave 'metrics' out of --what."
        )
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(
            f"No metrics file at '{path}'. Compute the scores first with  python -m disentangle.evaluate "
            f"RUN_DIR  (it writes RUN_DIR/metrics.json), or leave 'metrics' out of --what."
        ) from None
    except UnicodeDecodeError as err:
        from .._core.checks import not_text_message

        raise InputError(not_text_message(path, err, "--metrics (the metrics.json that python -m disentangle.evaluate "
                                                      "writes)")) from None
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


def headline_score(metric: str, scores: Sequence[str]) -> str:
    """The one score of ``metric`` that stands for it among ``scores`` (its score names, in order):
    the first of the study's headline scores of the metric
    (:data:`~disentangle.metrics.names.HEADLINE_SCORES`: ``dci`` → ``disentanglement``) that is
    there, else the score named as the metric (``mig`` → ``mig``), else the first score."""
    from ..metrics.names import HEADLINE_SCORES

    for name in HEADLINE_SCORES.get(metric, ()):
        if name in scores:
            return name
    return metric if metric in scores else scores[0]


def shown_scores(metrics: Mapping[str, Mapping[str, float]]) -> tuple[dict[str, dict[str, float]], list[str]]:
    """The scores :func:`metrics_figure` draws, and a note on each rule that left some out.

    Counts that metrics report alongside their scores (``num_*``, e.g. FactorVAE's
    ``num_active_dims``) are never drawn: they are not scores. The scores of :data:`ELBO_METRICS`
    (nats of a whole image, thousands) are left out unless they are the only scores. When more
    than :data:`MAX_METRIC_BARS` scores remain (``python -m disentangle.evaluate``'s default, every
    metric, gives over 200), only each metric's :func:`headline_score` is kept.
    """
    metrics = check_metrics(metrics)
    shown = {m: {s: v for s, v in scores.items() if not s.startswith("num_")} for m, scores in metrics.items()}
    shown = {m: scores for m, scores in shown.items() if scores}
    notes: list[str] = []
    others = {m: scores for m, scores in shown.items() if m not in ELBO_METRICS}
    if others and len(others) < len(shown):
        left_out = [m for m in shown if m not in others]
        notes.append(f"the scores of {', '.join(left_out)} (nats of a whole image, another scale)")
        shown = others
    total = sum(len(scores) for scores in shown.values())
    if total > MAX_METRIC_BARS:
        headlines = {m: headline_score(m, list(scores)) for m, scores in shown.items()}
        shown = {m: {headlines[m]: scores[headlines[m]]} for m, scores in shown.items()}
        notes.append(f"all but each metric's headline score ({len(shown)} of {total} scores drawn)")
    return shown, notes


def metrics_figure(metrics: Mapping[str, Mapping[str, float]], title: str | None = None) -> Figure:
    """Horizontal bars of the scores, grouped and coloured by metric, each bar labelled with its value.

    ``metrics`` is ``{metric: {score: value}}`` (the ``"metrics"`` entry of ``metrics.json``).
    Non-finite scores are listed with the label ``n/a`` and no bar. What is drawn is
    :func:`shown_scores`: no counts (``num_*``); no ELBO scores (thousands of nats would squash
    every other bar) unless they are the only ones; each metric's headline score alone above
    :data:`MAX_METRIC_BARS` bars. A note under the bars says what was left out.
    """
    shown, notes = shown_scores(metrics)
    labels, values, colours = [], [], []
    for i, (metric, scores) in enumerate(shown.items()):
        for score, value in scores.items():
            labels.append(score if score.startswith(metric) else f"{metric}: {score}")
            values.append(value)
            colours.append(f"C{i % 10}")
    fig = _figure(6.5, 0.24 * len(labels) + 1.0 + (0.3 if notes else 0.0))
    ax = fig.subplots()
    y = np.arange(len(labels))[::-1]
    finite = np.isfinite(values)
    shown_values = np.where(finite, values, 0.0)
    ax.barh(y, shown_values, color=colours, height=0.75)
    for yi, value, ok in zip(y, values, finite):
        ax.text(value if ok else 0.0, yi, f" {value:.3f}" if ok else " n/a", va="center", fontsize=7)
    ax.set_yticks(y, labels, fontsize=7)
    lo = min(0.0, float(np.min(shown_values)))
    hi = max(1.0, float(np.max(shown_values)))
    ax.set_xlim(lo, hi * 1.12 if math.isfinite(hi) else 1.0)
    ax.axvline(0.0, color="0.3", linewidth=0.8)
    ax.set_xlabel("score", fontsize=8)
    ax.set_title(title or "Disentanglement scores", fontsize=9)
    if notes:  # under the figure, centred on its width: the bars' axes can be narrow beside long labels
        note = "Not drawn: " + "; ".join(notes) + ". Every score is in the metrics file."
        fig.supxlabel(textwrap.fill(note, width=120), fontsize=7, color="0.3")
    return fig


def save_figure(fig: Figure, path: str | Path, dpi: int = 120) -> Path:
    """Write a figure as a PNG, atomically."""
    return atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=dpi))
