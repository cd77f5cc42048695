"""Command line of the model zoo::

    python -m disentangle.zoo list [--pretrained | --retired] [--method M] [--dataset D]
    python -m disentangle.zoo info NAME [--json]
    python -m disentangle.zoo fetch NAME
    python -m disentangle.zoo verify [NAME]            (no NAME: every pretrained model)
    python -m disentangle.zoo publish RUN_DIR --name NAME [--manifest FILE] [--weights-dir DIR]
                                      [--metrics mig,dci] [--set METRIC.KEY=VALUE] [--url URL]
                                      [--recipe NAME] [--notes TEXT] [--wall-time SECONDS] [--force]
                                      [--allow-partial]

For example ``python -m disentangle.zoo info beta_tcvae-sprites-beta6-cpu20k-ref-s0``. Bad input (an
unknown name, method or dataset, a bad option) prints one paragraph on stderr and exits with status
2; a file that cannot be fetched or verified exits with status 3; a closed output pipe (``... |
head``) ends it quietly (:mod:`disentangle._core.cli`).
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .._core.cli import (
    REPORTED,
    add_import_option,
    add_logging_options,
    add_threads_option,
    apply_import_option,
    apply_threads_option,
    report,
    setup_logging,
    show_progress,
)
from .._core.registry import did_you_mean
from ..config import ZOO_PREFIX
from ..errors import EXIT_BAD_DATA, ConfigError

#: (column title, metric, score) of the pretrained table
SCORE_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("BetaVAE", "beta_vae_score", "eval_accuracy"),
    ("FactorVAE", "factor_vae_score", "eval_accuracy"),
    ("MIG", "mig", "mig"),
    ("Modularity", "modularity_explicitness", "modularity"),
    ("DCI-D", "dci", "disentanglement"),
    ("SAP", "sap_score", "sap"),
    ("GaussTC", "unsupervised_scores", "gaussian_total_correlation"),
)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m disentangle.zoo", description="The disentangle model zoo.")
    sub = p.add_subparsers(dest="command", required=True)
    ls = sub.add_parser("list", help="list recipes (or pretrained models with their scores)")
    which = ls.add_mutually_exclusive_group()
    which.add_argument("--pretrained", action="store_true", help="only models with weights, with their recorded scores")
    which.add_argument("--retired", action="store_true",
                       help="the pretrained models no longer shipped, with the models that replace them")
    ls.add_argument("--method", help="only this objective (e.g. beta_tcvae)")
    ls.add_argument("--dataset", help="only this dataset (e.g. dsprites)")
    inf = sub.add_parser("info", help="everything the zoo knows about a name")
    inf.add_argument("name")
    inf.add_argument("--json", action="store_true", help="print the info dict as JSON")
    fe = sub.add_parser("fetch", help="download (if needed) and verify a pretrained file; prints its path")
    fe.add_argument("name")
    ve = sub.add_parser("verify", help="hash local copies of pretrained files against the manifest")
    ve.add_argument("name", nargs="?", help="a pretrained model (default: every pretrained model)")
    ve.add_argument("--all", action="store_true", help="every pretrained model (the default without NAME)")
    pu = sub.add_parser("publish", help="write a finished run's weights and manifest entry")
    pu.add_argument("run_dir")
    pu.add_argument("--name", required=True, help="pretrained name, e.g. beta_tcvae-sprites-beta6-cpu20k-ref-s0")
    pu.add_argument("--manifest", help="manifest file to add the entry to (default: the package's, from a source "
                    "checkout only; give your own, e.g. ~/myzoo/manifest.json)")
    pu.add_argument("--weights-dir", help="folder for the .safetensors file (default: weights/ next to the manifest)")
    pu.add_argument("--metrics", default=None,
                    help="comma-separated metrics to record (default: the six of Locatello et al. + unsupervised_scores)")
    pu.add_argument("--set", dest="settings", action="append", default=[], metavar="METRIC.KEY=VALUE",
                    help="a metric setting (repeatable), as for python -m disentangle.evaluate")
    pu.add_argument("--url", dest="urls", action="append", default=[], help="a download URL of the file (repeatable)")
    pu.add_argument("--recipe", help="the recipe it was trained from (default: inferred for the Locatello grid)")
    pu.add_argument("--notes", default="", help="free text stored in the manifest (e.g. the schedule)")
    pu.add_argument("--wall-time", type=float, default=None, help="training wall time in seconds (default: from log.jsonl)")
    pu.add_argument("--force", action="store_true", help="replace an entry or file with other weights")
    pu.add_argument("--allow-partial", action="store_true",
                    help="publish a run that has not reached its train.steps (recorded with the steps it trained)")
    pu.add_argument("--no-progress", action="store_true", help="no progress bar while the metrics are computed")
    add_threads_option(pu)
    add_import_option(pu)
    add_logging_options(p)
    return p


# ---------------------------------------------------------------------- tables
def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths)), "  ".join("-" * w for w in widths)]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(lines)


def _check_filter(kind: str, value: str | None, choices: list[str]) -> None:
    if value is not None and value not in choices:
        raise ConfigError(
            f"--{kind} '{value}' matches nothing in the zoo.{did_you_mean(value, choices)} "
            f"Valid {kind}s: {', '.join(choices)}."
        )


def _hours(seconds: Any) -> str:
    return f"{seconds / 3600:.1f} h" if isinstance(seconds, (int, float)) else "-"


def cmd_list(args: argparse.Namespace) -> int:
    from .. import zoo
    from ..data import DATASETS
    from ..objectives import OBJECTIVES

    objectives = sorted(set(OBJECTIVES.names()) | {o for f in zoo.recipes.FAMILIES for o in f.objectives})
    datasets = sorted(set(DATASETS.names()) | {d for f in zoo.recipes.FAMILIES for d in f.datasets})
    _check_filter("method", args.method, objectives)
    _check_filter("dataset", args.dataset, datasets)
    if args.retired:
        return _list_retired(args)
    rows = []
    pretrained = set(zoo.names(pretrained=True))
    for name in zoo.names(pretrained=args.pretrained):
        raw = zoo.config_dict(name)
        objective = (raw.get("objective") or {}).get("name", "beta_vae")
        dataset = (raw.get("data") or {}).get("name", "sprites")
        if (args.method and objective != args.method) or (args.dataset and dataset != args.dataset):
            continue
        if args.pretrained:
            record = zoo.info(name)
            scores = record.get("metrics") or {}
            shown = f"{dataset} (sub-grid)" if (raw.get("data") or {}).get("subgrid") else dataset
            rows.append(
                [name, objective, shown, _supervision(objective), _fmt(record.get("trained_steps")),
                 _hours(record.get("wall_time_s"))]
                + [_fmt((scores.get(m) or {}).get(s)) for _, m, s in SCORE_COLUMNS]
            )
        else:
            parsed = zoo.recipes.parse_generated(name)
            source = parsed[0].key if parsed else ("pretrained" if name in pretrained else "shipped")
            number = zoo.recipes.model_number_of(name) if parsed else zoo.info(name)["model_number"]
            steps = (raw.get("train") or {}).get("steps")
            rows.append([name, objective, dataset, _fmt(steps), source, _fmt(number)])
    if args.pretrained:
        header = ["name", "objective", "dataset", "supervision", "steps", "wall"] + [c for c, _, _ in SCORE_COLUMNS]
        mig = header.index("MIG")
        # ranked within a dataset and a kind of supervision: scores of other data, or of models that saw
        # labels, are not comparable with an unsupervised model's
        rows.sort(key=lambda row: (row[2], row[3] != "none", row[3],
                                   -float(row[mig]) if row[mig] not in ("", "-") else float("inf")))
        print(_table(header, rows))
        retired = zoo.catalog.retired()
        print(f"{len(rows)} pretrained models, by dataset and supervision (none: unsupervised; weak: pairs or "
              f"groups sharing factors; labels: a few labels; classes: class/content), best MIG first within each "
              f"(the schedules differ: compare the steps column). steps: optimisation steps trained, wall: "
              f"training time. Scores at their defaults with the recorded seed (python -m disentangle.zoo info NAME "
              f"for every score)."
              + (f" {len(retired)} retired models are not listed (python -m disentangle.zoo list --retired)."
                 if retired else ""))
    else:
        print(_table(["name", "objective", "dataset", "steps", "family", "dislib #"], rows))
        print(f"{len(rows)} recipes and pretrained models. Generated recipes are listed with -s0; any -sN is a valid seed "
              f"(seeds 0-49 of locatello2019 have disentanglement_lib model numbers).")
    return 0


def _supervision(objective: str) -> str:
    """What an objective learns from besides the images: ``none``, ``weak`` (pairs or groups sharing
    factors), ``labels`` (a few labelled points), ``classes`` (a class per image, class/content)."""
    from ..objectives import OBJECTIVES

    if objective not in OBJECTIVES:
        return "?"
    cls = OBJECTIVES.get(objective)
    if getattr(cls, "uses_labels", False):
        return "labels"
    if getattr(cls, "training_data", None) == "labels":
        return "classes"
    if hasattr(cls, "check_dataset"):
        return "weak"
    return "none"


def _list_retired(args: argparse.Namespace) -> int:
    from .. import zoo

    rows = []
    for name, record in sorted(zoo.catalog.retired().items()):
        config = record.get("config") or {}
        objective = (config.get("objective") or {}).get("name", "beta_vae")
        dataset = (config.get("data") or {}).get("name", "sprites")
        if (args.method and objective != args.method) or (args.dataset and dataset != args.dataset):
            continue
        rows.append([name, record.get("retired", "-"), _fmt(zoo.catalog.recorded_mig(record)), record["replaced_by"],
                     _fmt(zoo.catalog.recorded_mig(zoo.catalog.replacement_record(name)))])
    print(_table(["name", "retired", "MIG", "replaced by", "its MIG"], rows))
    print(f"{len(rows)} retired models: no longer shipped, their records kept (python -m disentangle.zoo info NAME "
          f"says why; python -m disentangle.train --config zoo:NAME retrains one).")
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    import yaml

    from .. import zoo

    name = _without_prefix(args.name)  # zoo:NAME, as --config and load write it, or NAME
    record = zoo.info(name)
    if args.json:
        print(json.dumps(record, indent=2, default=str))
        return 0
    skip = {"config", "metrics"}
    for key, value in record.items():
        if key not in skip:
            print(f"{key}: {json.dumps(value) if isinstance(value, (dict, list)) else value}")
    if record.get("metrics"):
        print("metrics:")
        for metric, scores in record["metrics"].items():
            for score, value in scores.items():
                print(f"  {metric}.{score}: {value:.4f}" if isinstance(value, float) else f"  {metric}.{score}: {value}")
    print("config:")
    print("  " + yaml.safe_dump(record["config"], sort_keys=False, default_flow_style=None).replace("\n", "\n  ").rstrip())
    return 0


def cmd_fetch(args: argparse.Namespace) -> int:
    from .. import zoo

    print(zoo.fetch(_without_prefix(args.name)))
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from .. import zoo

    if args.name and args.all:
        raise ConfigError(
            f"verify takes a NAME or --all, not both: python -m disentangle.zoo verify {args.name} checks that "
            f"model, python -m disentangle.zoo verify (or --all) every pretrained model."
        )
    results = zoo.verify(_without_prefix(args.name) if args.name else args.name)
    for r in results:
        print(f"{r.status:<8}  {r.name}  {r.path or ''}  {r.detail}")
    bad = [r for r in results if not r.ok]
    for r in bad:
        what = "does not match the manifest and will not be loaded" if r.status == "mismatch" else "cannot be loaded"
        print(f"error: {r.name} {what}; {r.remedy}.", file=sys.stderr)
    if bad:
        return EXIT_BAD_DATA
    if not results:
        print("no pretrained models in the manifests.")
    return 0


def cmd_publish(args: argparse.Namespace) -> int:
    from .. import zoo
    from ..evaluate import parse_settings
    from ..metrics import resolve_metric_names

    metrics = resolve_metric_names(args.metrics) if args.metrics else list(zoo.DEFAULT_METRICS)
    settings = parse_settings(args.settings, metrics)
    apply_threads_option(args.threads)
    record = zoo.publish(
        args.run_dir, args.name, manifest=args.manifest, weights_dir=args.weights_dir,
        metrics=metrics if args.metrics else None,  # None: the defaults, which its messages say
        metric_settings=settings, urls=args.urls, recipe=args.recipe, notes=args.notes,
        wall_time_s=args.wall_time, force=args.force, progress=show_progress(args), allow_partial=args.allow_partial,
    )
    print(f"published {args.name}: {record['file']} ({record['size']} bytes, sha256 {record['sha256']})")
    for metric, scores in record["metrics"].items():
        print(f"  {metric}: " + ", ".join(f"{k}={v:.4f}" for k, v in scores.items()))
    return 0


COMMANDS = {"list": cmd_list, "info": cmd_info, "fetch": cmd_fetch, "verify": cmd_verify, "publish": cmd_publish}


def _without_prefix(name: str) -> str:
    """``NAME`` from ``zoo:NAME`` (as ``--config`` and ``disentangle.load`` write it), else ``name``."""
    return name[len(ZOO_PREFIX):] if name.startswith(ZOO_PREFIX) else name


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    setup_logging(args)
    try:
        apply_import_option(getattr(args, "imports", []))  # publish: the user's backbone, objective, metrics
        return COMMANDS[args.command](args)
    except (*REPORTED, KeyboardInterrupt) as err:
        # publish's Ctrl-C says which metrics are recorded and which are left
        return report(err, interrupted=f"interrupted: {err}" if isinstance(err, KeyboardInterrupt) and str(err)
                      else "interrupted.")


if __name__ == "__main__":
    from .._core.cli import run_main

    run_main(main)
