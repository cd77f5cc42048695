"""Metrics worker, ours: each metric on a shipped model, timed with its encoding, in two modes.

The model is ``disentangle.load(MODEL)`` and the dataset the one it was trained on (the procedural
sprites, rendered per batch). Each metric runs alone, three times:

* ``defaults``: ``evaluate_metrics(dataset, model, [name], settings=...)``, the call a user makes,
  with the metric's settings matched to disent's but the encoding left to ours: our default
  ``representation_batch_size`` (64 on a CPU) and ``code_table="auto"`` (a code table only where
  the draws repeat grid points: the BetaVAE and FactorVAE scores here);
* ``table``: as :func:`disentangle.metrics.evaluate_metrics` runs it by default on this dataset: a
  fresh :class:`~disentangle.metrics.CodeTable` (each grid point encoded at most once) and
  ``metric(table, table.identity, seed=0, ...)``; the table encodes in batches of the metric's
  ``representation_batch_size`` (disent's batch size), where ``evaluate_metrics`` would use 64;
* ``plain``: ``metric(dataset, model, seed=0, ...)``: every drawn observation is rendered and
  encoded, as disent does.

Model loading is not timed. Settings come from the driver (``--settings``, JSON: metric name to
keyword arguments), matched to disent's.
"""
from __future__ import annotations

import json
import time

import _common

MODES = ("defaults", "table", "plain")


def run_metric(name: str, settings: dict, dataset, model, mode: str) -> dict:
    from disentangle.metrics import METRICS, CodeTable, evaluate_metrics

    metric = METRICS.get(name)
    faults = _common.minor_faults()
    start = time.perf_counter()
    if mode == "defaults":
        given = {k: v for k, v in settings.items() if k != "representation_batch_size"}
        scores = evaluate_metrics(dataset, model, [name], seed=0, settings={name: given})[name]
    elif mode == "table":
        settings = dict(settings)
        table = CodeTable(dataset, model, batch_size=settings.pop("representation_batch_size", None))
        scores = metric(table, table.identity, seed=0, **settings)
    else:
        scores = metric(dataset, model, seed=0, **settings)
    return {"scores": scores, "seconds": time.perf_counter() - start, "faults": _common.minor_faults() - faults}


def main() -> None:
    p = _common.parser(__doc__.splitlines()[0])
    p.add_argument("--model", required=True)
    p.add_argument("--settings", required=True, help="JSON {metric: {setting: value}}; metrics run in this order")
    args = p.parse_args()
    _common.set_threads(args.threads)

    import disentangle
    from disentangle._core.hardware import keep_freed_memory
    from disentangle.data import build_dataset

    keep_freed_memory()  # what evaluate and evaluate_metrics do first
    # the estimators' modules loaded before the first metric, untimed, as `import disent.metrics` does
    import sklearn.ensemble  # noqa: F401
    import sklearn.linear_model  # noqa: F401
    import sklearn.svm  # noqa: F401

    settings = json.loads(args.settings)
    model = disentangle.load(args.model)
    dataset = build_dataset(dict(model.config["data"]))
    results = {}
    for name, metric_settings in settings.items():
        results[name] = {"settings": metric_settings}
        for mode in MODES:
            results[name][mode] = run_metric(name, metric_settings, dataset, model, mode)
            print(f"ours {name} ({mode}): {results[name][mode]['seconds']:.1f} s {results[name][mode]['scores']}",
                  flush=True)
    _common.write_result(args.result, {"metrics": results, "versions": _common.versions("disentangle-torch", "torch")})


if __name__ == "__main__":
    main()
