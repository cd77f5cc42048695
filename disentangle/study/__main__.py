"""Command line: ``python -m disentangle.study INPUT --out REPORT_DIR``.

INPUT is a sweep folder (``python -m disentangle.sweep run ... --out DIR``), its ``results.csv``,
or a disentanglement_lib aggregated results JSON (``dlib_aggregate_results``). Writes the figures,
their CSVs, ``summary.csv`` and ``report.md`` into REPORT_DIR. Errors are one paragraph on stderr
(exit status 2), reported before REPORT_DIR is created.
"""
from __future__ import annotations

import argparse
import sys

from .._core.cli import REPORTED, report


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m disentangle.study",
        description="The analyses of Locatello et al. 2019 (metric agreement, variance explained by method, strength "
                    "and seed, unsupervised vs supervised scores, UDR) over a sweep's results, as a report folder.",
    )
    p.add_argument("input", help="sweep folder, its results.csv, or a disentanglement_lib aggregated results JSON")
    p.add_argument("--out", "-o", required=True, help="report folder to write (created; files in it are replaced)")
    p.add_argument("--scores", default="headline",
                   help="'headline' (default: the Locatello et al. scores), 'all', or comma-separated <metric>.<score> columns")
    p.add_argument("--method-column", default="objective.name", help="column naming the method (default: objective.name)")
    p.add_argument("--seed-column", default="seed", help="column holding the seed (default: seed)")
    p.add_argument("--dataset-column", default="data.name", help="column naming the dataset (default: data.name)")
    p.add_argument("--udr", action="store_true",
                   help="compute UDR (Duan et al. 2020) from the sweep's run folders and analyse it as a score")
    p.add_argument("--udr-points", type=int, default=1000, help="observations encoded per model for UDR (default 1000)")
    p.add_argument("--udr-correlation", default="lasso", help="UDR similarity: lasso (default) or spearman")
    p.add_argument("--udr-aggregation", default="paper", help="UDR pairwise formula: paper (default) or dlib")
    p.add_argument("--postprocess", default="mean_representation",
                   help="disentanglement_lib input: the representation whose scores are read "
                        "(mean_representation, default, or sampled_representation)")
    p.add_argument("--few-labels", default=None, metavar="METRIC",
                   help="also U/S model selection (Locatello et al. 2020): pick the best run by METRIC (mig or dci) "
                        "computed on the few labelled validation images of data.labels only, and report how often "
                        "that is the run the full-label score picks (few_labels.csv, few_labels.md)")
    p.add_argument("--few-labels-num", type=int, default=1000,
                   help="labelled validation images for runs whose config has no data.labels (default 1000; the paper uses 100 and 1000)")
    p.add_argument("--few-labels-subset", type=int, default=None,
                   help="U/S selection: compare the picks over random subsets of this many runs (default: all runs once)")
    p.add_argument("--no-figures", action="store_true", help="write only the CSVs and report.md")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from .analysis import analyze

    scores = args.scores if args.scores in ("headline", "all") else [s.strip() for s in args.scores.split(",") if s.strip()]
    try:
        result = analyze(
            args.input,
            args.out,
            scores=scores,
            method_column=args.method_column,
            seed_column=args.seed_column,
            dataset_column=args.dataset_column,
            udr=args.udr,
            udr_points=args.udr_points,
            udr_correlation=args.udr_correlation,
            udr_aggregation=args.udr_aggregation,
            postprocess=args.postprocess,
            figures=not args.no_figures,
            progress=not args.no_progress,
        )
    except (*REPORTED, KeyboardInterrupt) as err:
        return report(err, interrupted="interrupted: the files written so far are complete; rerun to write them all.")
    if args.few_labels:
        from .few_labels import select_with_few_labels, write_selection

        try:
            selection = select_with_few_labels(
                args.input, metric=args.few_labels, labels={"num_labelled": args.few_labels_num},
                subset_size=args.few_labels_subset, progress=not args.no_progress,
            )
            write_selection(selection, args.out)
        except (*REPORTED, KeyboardInterrupt) as err:
            return report(err, interrupted="interrupted: rerun to write the U/S selection.")
        print(selection.summary())
    for name in result.skipped:
        print(f"skipped {name}: {result.skipped[name]}", file=sys.stderr)
    print(f"wrote {len(result.files)} files to {args.out}; read {result.files['report.md']}")
    return 0


if __name__ == "__main__":
    from disentangle._core.cli import run_main

    run_main(main)
