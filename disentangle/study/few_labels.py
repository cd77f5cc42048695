"""U/S model selection: choose among unsupervised (or semi-supervised) runs with a few labels.

Locatello et al., "Disentangling Factors of Variation Using Few Labels", ICLR 2020, §3 ("U/S"):
models are trained without labels and the best of a sweep is picked by a disentanglement metric
computed on a few labelled *validation* observations only (100 or 1,000 in the paper, with
imperfect labels in their robustness study). The question is how often that pick is the run that
the full-label metric (computed on 10,000 fresh samples with the true factors) would pick.

The labelled validation observations of a run are those of its config's ``data.labels``
(:mod:`disentangle.data.labels`: the draw of ``seed``, the part after the training share); runs
without the key get ``labels`` (by default 1,000 perfect labels, all validating): the
same seed for every run, so all runs are scored on the same images, as in the paper; by default
all of them validate (``train_fraction`` 0: such runs trained on none of them).

Validation metrics, computed on the encoded validation images and their labels (disentanglement_lib's
estimators, on few points):

* ``mig``: the histogram MIG (20 equal-width bins per code dimension) of the codes against the labels;
* ``dci``: the DCI disentanglement of gradient-boosted importances fitted on the first half of the
  validation points (the importances do not use the second half, which only enters the accuracy).

Report (:func:`select_with_few_labels`): per run its validation score and its full score; the
run each score picks; the Spearman rank correlation of the two over the runs; and how often the
validation pick is the full-label pick over ``subsets`` random subsets of ``subset_size`` runs
(all runs when ``subset_size`` is ``None``, then the answer is 0 or 1), with the average regret,
the full score of the best run of the subset minus that of the validation pick.
"""
from __future__ import annotations

import csv
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._core.checks import choice, integer
from ..errors import CheckpointError, InputError

VALIDATION_METRICS: tuple[str, ...] = ("mig", "dci")


def validation_mig(codes: np.ndarray, labels: np.ndarray, num_bins: int = 20) -> float:
    """The histogram MIG of ``codes (n, d)`` against integer ``labels (n, L)``; labels with one
    observed value are not scored (their entropy is 0)."""
    from ..metrics._information import discrete_entropy, discrete_mutual_info, histogram_discretize
    from ..metrics.mig import mig_from_mutual_info

    labels = np.asarray(labels, dtype=np.int64)
    mi = discrete_mutual_info(histogram_discretize(np.asarray(codes, dtype=np.float64), num_bins), labels)
    gaps = mig_from_mutual_info(mi, discrete_entropy(labels))
    valid = ~np.isnan(gaps)
    return float(gaps[valid].mean()) if valid.any() else 0.0


def validation_dci(codes: np.ndarray, labels: np.ndarray, seed: int = 0) -> float:
    """DCI disentanglement with importances fitted on the first half of the points."""
    from ..metrics.dci import dci_from_importance, importance_matrix

    codes = np.asarray(codes, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    half = max(len(codes) // 2, 1)
    importance, _, _ = importance_matrix(codes[:half], labels[:half], codes[half:], labels[half:], random_state=seed, n_jobs=1)
    return float(dci_from_importance(importance)["disentanglement"])


def validation_score(codes: np.ndarray, labels: np.ndarray, metric: str = "mig") -> float:
    """The ``metric`` (:data:`VALIDATION_METRICS`) of codes against labels."""
    metric = choice("metric", metric, VALIDATION_METRICS)
    return validation_mig(codes, labels) if metric == "mig" else validation_dci(codes, labels)


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rank correlation (average ranks for ties); NaN with fewer than 2 points."""
    from scipy.stats import spearmanr

    if len(a) < 2:
        return float("nan")
    return float(spearmanr(a, b).statistic)


@dataclass
class FewLabelSelection:
    """What :func:`select_with_few_labels` found (see the module docstring)."""

    metric: str
    full_column: str
    validation: dict[str, float]  #: run id → validation score
    full: dict[str, float]  #: run id → full-label score
    pick_by_validation: str
    pick_by_full: str
    rank_correlation: float
    agreement: float  #: share of the subsets where both scores pick the same run
    mean_regret: float  #: mean over the subsets of best full score − full score of the validation pick
    subsets: int
    subset_size: int
    num_validation: dict[str, int] = field(default_factory=dict)  #: run id → labelled validation images

    def rows(self) -> list[dict[str, Any]]:
        return [
            {"run_id": r, f"validation_{self.metric}": self.validation[r], self.full_column: self.full[r],
             "num_validation_labels": self.num_validation.get(r, "")}
            for r in sorted(self.validation, key=lambda r: -self.validation[r])
        ]

    def summary(self) -> str:
        return (
            f"U/S model selection with {self.metric} on the few labelled validation images, against "
            f"{self.full_column}: over {len(self.validation)} runs the validation score picks "
            f"{self.pick_by_validation} and the full-label score picks {self.pick_by_full}; Spearman rank "
            f"correlation {self.rank_correlation:.3f}; over {self.subsets} random subsets of {self.subset_size} runs "
            f"the two pick the same run {100 * self.agreement:.1f} % of the time, mean regret "
            f"{self.mean_regret:.4f} ({self.full_column})."
        )


def compare_selections(
    validation: dict[str, float], full: dict[str, float], *, subsets: int = 1000,
    subset_size: int | None = None, seed: int = 0,
) -> tuple[str, str, float, float, float, int, int]:
    """``(pick by validation, pick by full, spearman, agreement, mean regret, subsets, subset size)``
    of two scores of the same runs (higher is better)."""
    runs = sorted(validation)
    if set(runs) != set(full) or not runs:
        raise InputError("compare_selections needs the validation and the full score of the same, non-empty set of runs.")
    v = np.array([validation[r] for r in runs])
    f = np.array([full[r] for r in runs])
    size = len(runs) if subset_size is None else integer("subset_size", subset_size, minimum=1, maximum=len(runs))
    if size == len(runs):
        subsets = 1
    rng = np.random.default_rng(seed)
    agree, regret = 0, 0.0
    for _ in range(subsets):
        idx = np.arange(len(runs)) if size == len(runs) else rng.choice(len(runs), size=size, replace=False)
        pick_v, pick_f = idx[np.argmax(v[idx])], idx[np.argmax(f[idx])]
        agree += int(pick_v == pick_f)
        regret += float(f[pick_f] - f[pick_v])
    return (runs[int(np.argmax(v))], runs[int(np.argmax(f))], spearman(v, f), agree / subsets, regret / subsets,
            subsets, size)


def _read_full_scores(sweep: Path, column: str) -> dict[str, float]:
    path = sweep / "results.csv"
    if not path.is_file():
        raise InputError(f"'{sweep}' has no results.csv: U/S selection needs a finished sweep folder (python -m disentangle.sweep run ... --out DIR).")
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
    except UnicodeDecodeError as err:
        from .._core.checks import not_text_message

        raise InputError(not_text_message(path, err, "a sweep's results table (results.csv)")) from None
    if rows and column not in rows[0]:
        from .columns import is_score_column

        options = [c for c in rows[0] if is_score_column(c)]
        scored = f"Its score columns: {', '.join(options)}" if options else "It holds no scores at all"
        raise InputError(
            f"U/S selection ranks runs by their full-label score '{column}', and results.csv of '{sweep}' has no "
            f"such column: the sweep was not scored with it ({scored}). Add the metric to the sweep file's "
            f"metrics and rerun python -m disentangle.sweep run (finished runs are only scored), or select "
            f"by a metric it has (--few-labels mig needs mig.mig, dci needs dci.disentanglement)."
        )
    return {r["run_id"]: float(r[column]) for r in rows if r.get(column) not in (None, "")}


def check_few_labels_input(sweep: str | Path, metric: str = "mig", full_column: str | None = None) -> dict[str, float]:
    """The full-label scores (``{run id: score}``) that U/S selection over ``sweep`` ranks, after
    checking it can run: the metric is one of :data:`VALIDATION_METRICS`, the sweep's results.csv has
    the score column and at least two finished runs have it. Raises :class:`~disentangle.InputError`
    (one paragraph) otherwise; cheap (reads results.csv only), so a command checks it first."""
    metric = choice("metric", metric, VALIDATION_METRICS)
    full_column = full_column or {"mig": "mig.mig", "dci": "dci.disentanglement"}[metric]
    sweep = Path(sweep)
    if sweep.is_file():  # its results.csv: the sweep folder is the one holding it
        sweep = sweep.parent
    full = _read_full_scores(sweep, full_column)
    if len(full) < 2:
        raise InputError(f"U/S selection compares runs; '{sweep}' has {len(full)} finished run(s) with {full_column}.")
    return full


def validation_scores(
    models: dict[str, Any],
    *,
    metric: str = "mig",
    labels: dict[str, Any] | None = None,
    progress: bool = True,
    what: str = "model",
) -> tuple[dict[str, float], dict[str, int]]:
    """``({name: validation score}, {name: labelled validation images})`` of loaded models.

    ``models`` maps a name to a loaded model (``representation`` and a ``config`` with a ``data``
    section, as :func:`disentangle.load` returns); each is scored on the labelled validation
    images of its config's ``data.labels``, or of ``labels`` (default: 1,000 perfect labels, all
    validating) when it has none. Models on the same data with the same labels share one draw.
    """
    import torch

    from ..data import build_dataset
    from ..data.labels import LabelsSpec, make_labelled_set

    metric = choice("metric", metric, VALIDATION_METRICS)
    # runs trained without labels: every label validates (the paper's U/S setting)
    default_spec = LabelsSpec.from_dict({"train_fraction": 0.0, **(labels or {})}, where="labels")
    cache: dict[str, Any] = {}
    scores, counts = {}, {}
    iterator: Any = sorted(models)
    if progress:
        from tqdm.auto import tqdm

        iterator = tqdm(iterator, desc=f"U/S selection: {metric} on the labelled validation images", unit=what)
    for name in iterator:
        model = models[name]
        config = getattr(model, "config", None) or {}
        data = dict(config.get("data") or {})
        if "name" not in data:
            raise InputError(f"{what} '{name}' has no config with a 'data' section, so its dataset is unknown.")
        spec = LabelsSpec.from_dict(data["labels"]) if data.get("labels") else default_spec
        key = repr((sorted((k, v) for k, v in data.items() if k != "labels"), spec))
        if key not in cache:
            cache[key] = make_labelled_set(build_dataset(data), spec)
        labelled = cache[key]
        if labelled.validation_images.shape[0] < 2:
            raise InputError(
                f"{what} '{name}' has {labelled.validation_images.shape[0]} labelled validation image(s); raise "
                f"num_labelled or lower train_fraction."
            )
        with torch.no_grad():
            codes = model.representation(labelled.validation_images)
        codes = codes.detach().cpu().numpy() if hasattr(codes, "detach") else np.asarray(codes)
        scores[name] = validation_score(codes, labelled.validation_labels.cpu().numpy(), metric)
        counts[name] = int(labelled.validation_images.shape[0])
    return scores, counts


def warn_of_mixed_validation_counts(counts: dict[str, int]) -> None:
    """Warn when the runs were scored on different numbers of labelled validation images (semi-supervised
    runs validate on their own ``data.labels``, unsupervised ones on ``labels``): a metric on few points
    reads differently (the histogram MIG of one code rose from 0.30 on 100 points to 0.55 on 1,000),
    so ranking them together favours the runs with more validation images."""
    sizes = sorted(set(counts.values()))
    if len(sizes) > 1:
        by_size = {n: sum(1 for c in counts.values() if c == n) for n in sizes}
        logging.getLogger(__name__).warning(
            "U/S selection: the runs were scored on different numbers of labelled validation images (%s); a "
            "metric on few points reads differently, so runs scored on fewer are not ranked fairly against the "
            "others. Compare runs of one labelling (num_labelled, train_fraction) at a time, or give every run the "
            "same data.labels.", ", ".join(f"{by_size[n]} run(s) on {n:,}" for n in sizes))


def select_models(
    models: dict[str, Any],
    full: dict[str, float],
    *,
    metric: str = "mig",
    full_column: str = "mig.mig",
    labels: dict[str, Any] | None = None,
    subsets: int = 1000,
    subset_size: int | None = None,
    seed: int = 0,
    progress: bool = True,
) -> FewLabelSelection:
    """U/S model selection among loaded ``models`` whose full-label scores are ``full``
    (see :func:`validation_scores` and :func:`compare_selections`)."""
    validation, counts = validation_scores(models, metric=metric, labels=labels, progress=progress)
    warn_of_mixed_validation_counts(counts)
    pick_v, pick_f, rho, agreement, regret, n_subsets, size = compare_selections(
        validation, full, subsets=subsets, subset_size=subset_size, seed=seed
    )
    return FewLabelSelection(metric, full_column, validation, full, pick_v, pick_f, rho, agreement, regret,
                             n_subsets, size, counts)


def select_with_few_labels(
    sweep: str | Path,
    *,
    metric: str = "mig",
    full_column: str | None = None,
    labels: dict[str, Any] | None = None,
    subsets: int = 1000,
    subset_size: int | None = None,
    seed: int = 0,
    progress: bool = True,
    load: Callable[[str], Any] | None = None,
) -> FewLabelSelection:
    """U/S model selection over the finished runs of a sweep folder (module docstring).

    ``full_column`` is the results.csv column of the full-label score (default ``mig.mig`` for
    ``mig``, ``dci.disentanglement`` for ``dci``); ``labels`` the ``data.labels`` mapping for runs
    whose config has none (default: :class:`~disentangle.data.labels.LabelsSpec`'s defaults with
    ``train_fraction`` 0, i.e. 1,000 validation labels).
    """
    full = check_few_labels_input(sweep, metric, full_column)
    metric = choice("metric", metric, VALIDATION_METRICS)
    full_column = full_column or {"mig": "mig.mig", "dci": "dci.disentanglement"}[metric]
    sweep = Path(sweep)
    if sweep.is_file():
        sweep = sweep.parent
    if load is None:
        import disentangle

        load = disentangle.load
    models = {}
    for run_id in sorted(full):
        run_dir = sweep / "runs" / run_id
        try:
            models[run_id] = load(str(run_dir))
        except Exception as err:  # noqa: BLE001 - reported with the run's name
            raise CheckpointError(f"U/S selection needs the trained model of run '{run_id}', but '{run_dir}' cannot be loaded: {err}") from None
    return select_models(models, full, metric=metric, full_column=full_column, labels=labels, subsets=subsets,
                         subset_size=subset_size, seed=seed, progress=progress)


def write_selection(selection: FewLabelSelection, out: str | Path) -> dict[str, Path]:
    """``few_labels.csv`` (one row per run) and ``few_labels.md`` (the summary) in ``out``."""
    from .._core.atomic import atomic_write_text

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rows = selection.rows()
    lines = [",".join(rows[0])] + [",".join(str(v) for v in row.values()) for row in rows]
    csv_path, md_path = out / "few_labels.csv", out / "few_labels.md"
    atomic_write_text(csv_path, "\n".join(lines) + "\n")
    atomic_write_text(md_path, "# U/S model selection with few labels\n\n" + selection.summary() + "\n")
    return {"few_labels.csv": csv_path, "few_labels.md": md_path}
