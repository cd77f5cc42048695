"""Reading disentanglement_lib's aggregated results JSON into a study table.

``dlib_aggregate_results`` (``disentanglement_lib.utils.aggregate_results``) globs every
``output/<model>/metrics/<mean|sampled>/<metric>/results/aggregate/evaluation.json``, puts each
file's namespaced dict in one row of a pandas ``DataFrame`` (plus a ``path`` column) and writes it
with ``DataFrame.to_json`` (default ``orient="columns"``: ``{column: {row_index: value}}``). One
row is one (model, postprocessing, metric) evaluation; config values are the gin strings of the
operative config (``"'beta_vae'"``, ``"4.0"``, ``"@mig"``).

We group the rows into one row per model and map the columns:

=====================================================  ======================================
disentanglement_lib                                    disentangle
=====================================================  ======================================
``train_config.model.name``                            ``objective.name`` (``beta_tc_vae`` ->
                                                       ``beta_tcvae``, others unchanged)
``train_config.vae.beta``                              ``objective.beta``
``train_config.beta_tc_vae.beta``                      ``objective.beta``
``train_config.annealed_vae.c_max`` / ``.gamma`` /     ``objective.c_max`` / ``objective.gamma``
``.iteration_threshold``                               / ``objective.iteration_threshold``
``train_config.factor_vae.gamma``                      ``objective.gamma``
``train_config.dip_vae.lambda_od``                     ``objective.lambda_od``
``train_config.dip_vae.lambda_d_factor``               ``objective.lambda_d_factor``
``train_config.model.random_seed``                     ``seed``
``train_config.model.model_num``                       ``dlib_model_number`` (a label of the
                                                       model, like the seed, never a setting)
``train_config.dataset.name``                          ``data.name`` (``dsprites_full`` ->
                                                       ``dsprites``, others unchanged)
other ``train_config.*`` keys                          kept under their own name, except
                                                       the bookkeeping keys below
``train_results.uuid`` (else the model folder of       ``run_id``
``path``)
``evaluation_results.<key>`` of the metric named by    ``<metric>.<score>``, table below
``evaluation_config.evaluation.evaluation_fn``
=====================================================  ======================================

=========================  ==========================  ==================================================
``evaluation_fn``          ``<metric>``                ``<key>`` -> ``<score>``
=========================  ==========================  ==================================================
``@beta_vae_sklearn``      ``beta_vae_score``          ``train_accuracy``, ``eval_accuracy`` unchanged
``@factor_vae_score``      ``factor_vae_score``        ``train_accuracy``, ``eval_accuracy``, ``num_active_dims``
``@mig``                   ``mig``                     ``discrete_mig`` -> ``mig``
``@modularity_explicitness`` ``modularity_explicitness`` ``modularity_score`` -> ``modularity``,
                                                       ``explicitness_score_{train,test}`` -> ``explicitness_{train,test}``
``@dci``                   ``dci``                     unchanged
``@sap_score``             ``sap_score``               ``SAP_score`` -> ``sap``
``@unsupervised_metrics``  ``unsupervised_scores``     unchanged
``@downstream_task``       ``downstream_task``         ``<n>:<stat>`` -> ``<p>_<n>:<stat>``, ``p`` = ``lr``
                                                       (``@logistic_regression_cv``) or ``gbt``
                                                       (``@gradient_boosting_classifier``)
other ``@name``            ``name``                    unchanged
=========================  ==========================  ==================================================

``elapsed_time`` and ``uuid`` results and non-numeric values are dropped. Only the evaluations of
one postprocessing (``postprocess_config.postprocess.postprocess_fn``, default
``@mean_representation``, the representation Locatello et al. score) are read.

Per-model bookkeeping never becomes part of a method's setting (which would make every model its
own setting and leave no seeds to compare): ``dlib_reproduce`` binds ``model.model_num = N`` for
every model, read as ``dlib_model_number``; other ``train_config`` keys named ``random_seed``,
``model_num``, ``uuid`` or ``elapsed_time`` are dropped; ``train_results.*`` (losses, ``uuid``,
``elapsed_time``), ``postprocess_config.*`` / ``evaluation_config.*`` (their ``random_seed``,
``name``) and ``postprocess_results.*`` are never read as config.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ..errors import ConfigError, InputError
from ..metrics.results import FINISHED_STATUS, FIXED_COLUMNS, META_COLUMNS, score_column
from .columns import StudyTable, is_bookkeeping, to_float

MODEL_NAMES = {"beta_tc_vae": "beta_tcvae"}
DATASET_NAMES = {"dsprites_full": "dsprites"}
TRAIN_KEYS = {
    "train_config.model.name": "objective.name",
    "train_config.vae.beta": "objective.beta",
    "train_config.beta_tc_vae.beta": "objective.beta",
    "train_config.annealed_vae.c_max": "objective.c_max",
    "train_config.annealed_vae.gamma": "objective.gamma",
    "train_config.annealed_vae.iteration_threshold": "objective.iteration_threshold",
    "train_config.factor_vae.gamma": "objective.gamma",
    "train_config.dip_vae.lambda_od": "objective.lambda_od",
    "train_config.dip_vae.lambda_d_factor": "objective.lambda_d_factor",
    "train_config.model.random_seed": "seed",
    "train_config.model.model_num": "dlib_model_number",
    "train_config.dataset.name": "data.name",
}
METRIC_NAMES = {
    "beta_vae_sklearn": "beta_vae_score",
    "factor_vae_score": "factor_vae_score",
    "mig": "mig",
    "modularity_explicitness": "modularity_explicitness",
    "dci": "dci",
    "sap_score": "sap_score",
    "unsupervised_metrics": "unsupervised_scores",
    "downstream_task": "downstream_task",
}
SCORE_NAMES = {
    ("mig", "discrete_mig"): "mig",
    ("modularity_explicitness", "modularity_score"): "modularity",
    ("modularity_explicitness", "explicitness_score_train"): "explicitness_train",
    ("modularity_explicitness", "explicitness_score_test"): "explicitness_test",
    ("sap_score", "SAP_score"): "sap",
}
PREDICTORS = {"logistic_regression_cv": "lr", "gradient_boosting_classifier": "gbt"}
POSTPROCESS_KEY = "postprocess_config.postprocess.postprocess_fn"
METRIC_KEY = "evaluation_config.evaluation.evaluation_fn"
PREDICTOR_KEY = "evaluation_config.predictor.predictor_fn"
DROPPED_RESULTS = ("elapsed_time", "uuid")
#: labels of a model (one value per model), kept as columns but never settings
LABELS = META_COLUMNS


def gin_value(value: Any) -> Any:
    """A gin operative-config value as written by disentanglement_lib: quotes and ``@``/``()`` removed."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    if text.startswith("@"):
        text = text[1:]
        if text.endswith("()"):
            text = text[:-2]
    return text


def _rows_of(data: Any, path: Path) -> list[dict[str, Any]]:
    """The rows of a pandas ``to_json`` output in orient columns (default), index or records."""
    if isinstance(data, list) and all(isinstance(r, dict) for r in data):
        return data
    if isinstance(data, dict) and data and all(isinstance(v, dict) for v in data.values()):
        keys = list(data)
        if any("." in k for k in keys):  # orient="columns": {column: {row: value}}
            index: list[str] = []
            for column in data.values():
                index.extend(k for k in column if k not in index)
            return [{c: data[c].get(i) for c in keys} for i in index]
        return list(data.values())  # orient="index": {row: {column: value}}
    raise InputError(
        f"'{path}' is not a disentanglement_lib aggregated results file: expected the JSON that "
        f"dlib_aggregate_results writes (pandas DataFrame.to_json, {{column: {{row: value}}}}) with columns "
        f"such as 'train_config.model.name' and 'evaluation_results.discrete_mig'."
    )


def _model_key(row: dict[str, Any]) -> str | None:
    uuid = row.get("train_results.uuid")
    if uuid:
        return str(uuid)
    path = row.get("path")
    if path:
        text = str(path)
        return text.split("/metrics/")[0] if "/metrics/" in text else text
    return None


def _score_names(row: dict[str, Any]) -> dict[str, float]:
    metric_fn = str(gin_value(row.get(METRIC_KEY) or "unknown_metric"))
    metric = METRIC_NAMES.get(metric_fn, metric_fn)
    predictor = PREDICTORS.get(str(gin_value(row.get(PREDICTOR_KEY) or "")), None)
    out: dict[str, float] = {}
    for column, value in row.items():
        if not column.startswith("evaluation_results.") or value is None:
            continue
        key = column[len("evaluation_results."):]
        number = to_float(value)
        if key in DROPPED_RESULTS or math.isnan(number):
            continue
        name = SCORE_NAMES.get((metric, key), key)
        if metric == "downstream_task":
            size, colon, stat = key.partition(":")
            if colon:
                name = f"{predictor or str(gin_value(row.get(PREDICTOR_KEY) or 'predictor'))}_{size}:{stat}"
        out[score_column(metric, name)] = number
    return out


def read_dlib_json(path: str | Path, *, postprocess: str = "mean_representation") -> StudyTable:
    """Read ``dlib_aggregate_results``' JSON into one row per model (mapping: module docstring).

    ``postprocess`` selects the rows of one postprocessing (``"mean_representation"`` or
    ``"sampled_representation"``); files without that column keep every row. A model evaluated
    twice with the same metric keeps its last evaluation (with a note).
    """
    path = Path(path)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except json.JSONDecodeError as err:
        raise InputError(f"'{path}' is not valid JSON ({err}); expected dlib_aggregate_results' output.") from None
    except UnicodeDecodeError as err:
        from .._core.checks import not_text_message

        raise InputError(not_text_message(path, err, "disentanglement_lib results (dlib_aggregate_results' JSON)")) from None
    rows = _rows_of(data, path)
    if not rows or not any(any(str(k).startswith("train_config.") for k in r) for r in rows):
        raise InputError(
            f"'{path}' holds no disentanglement_lib results: no row has 'train_config.*' columns (expected "
            f"the output of dlib_aggregate_results, with columns such as 'train_config.model.name', "
            f"'train_config.model.random_seed' and 'evaluation_results.discrete_mig')."
        )
    notes: list[str] = []
    postprocessings = {gin_value(r.get(POSTPROCESS_KEY)) for r in rows} - {None}
    if postprocessings:
        if postprocess not in postprocessings:
            raise ConfigError(
                f"'{path}' has no evaluations of the '{postprocess}' postprocessing; it has "
                f"{', '.join(sorted(map(str, postprocessings)))}. Pass one of them as postprocess=."
            )
        before = len(rows)
        rows = [r for r in rows if gin_value(r.get(POSTPROCESS_KEY)) == postprocess]
        if len(rows) < before:
            notes.append(f"{before - len(rows)} evaluation(s) of other postprocessings than '{postprocess}' were left out.")

    models: dict[str, dict[str, Any]] = {}
    seen: set[tuple[str, str]] = set()
    duplicates = 0
    unnamed = 0
    for row in rows:
        key = _model_key(row)
        if key is None:
            unnamed += 1
            continue
        model = models.setdefault(key, {"run_id": key, "status": FINISHED_STATUS})
        for column, value in row.items():
            if not column.startswith("train_config.") or value is None:
                continue
            name = TRAIN_KEYS.get(column, column)
            if name == column and is_bookkeeping(column):
                continue
            text = gin_value(value)
            if name == "objective.name":
                text = MODEL_NAMES.get(str(text), text)
            elif name == "data.name":
                text = DATASET_NAMES.get(str(text), text)
            model[name] = None if text is None else str(text)
        metric = str(gin_value(row.get(METRIC_KEY) or ""))
        if (key, metric) in seen:
            duplicates += 1
        seen.add((key, metric))
        model.update(_score_names(row))
    if unnamed:
        notes.append(f"{unnamed} row(s) without 'train_results.uuid' or 'path' could not be assigned to a model and were left out.")
    if duplicates:
        notes.append(f"{duplicates} repeated evaluation(s) of the same model and metric: the last one was kept.")

    all_columns = {c for m in models.values() for c in m}
    config_columns = sorted(c for c in all_columns if c not in LABELS and not _is_score(c))
    # keep only config keys that vary (as results.csv does), plus the method and the dataset
    varying = [
        c for c in config_columns
        if c in ("objective.name", "data.name") or len({m.get(c) for m in models.values()}) > 1
    ]
    score_columns = sorted(c for c in all_columns if _is_score(c))
    labels = [c for c in LABELS if c in all_columns or c in FIXED_COLUMNS]
    columns = [*labels, *varying, *score_columns]
    table_rows = [{c: m.get(c, math.nan if c in score_columns else None) for c in columns} for m in models.values()]
    notes.insert(0, f"Read {len(rows)} evaluation(s) of {len(models)} model(s) from the disentanglement_lib aggregated results '{path}'.")
    return StudyTable(columns, table_rows, source=str(path), notes=notes)


def _is_score(column: str) -> bool:
    return not column.startswith(("train_config.", "objective.", "data.")) and "." in column
