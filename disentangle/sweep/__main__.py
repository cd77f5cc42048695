"""Command line: ``python -m disentangle.sweep run|status|results``.

    python -m disentangle.sweep run SWEEP_FILE --out DIR [--workers N] [--threads-per-run T]
        [--backend local|ray|slurm] [--dry-run] [--retry-failed] [--resume-precision P] [ray/slurm options]
        (slurm needs --time, the time limit of an array task; --max-requeues N, default 3)
    python -m disentangle.sweep status DIR
    python -m disentangle.sweep results DIR [--output FILE]

``SWEEP_FILE`` is a sweep YAML file or the name of a shipped one (``mini``,
``locatello2019/dsprites``: ``configs/sweeps/``). Problems with the sweep file (any run's config,
an unknown key or name) are reported in one paragraph on stderr with exit status 2 before anything
is created. ``run`` exits with 0 when every run of the sweep is finished, 1 otherwise (failed runs
are listed by ``status``).
"""
from __future__ import annotations

import argparse
import sys
import warnings

from .._core.cli import REPORTED, add_logging_options, setup_logging
from .._core.cli import report as report_error
from ..errors import EXIT_OK, EXIT_RUN_FAILED, ConfigError
from .backends.slurm import parse_minutes  # noqa: F401  (--time; importable from here as before)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m disentangle.sweep",
        description="Grids of training runs on a laptop, a Ray cluster or Slurm; safe to kill and rerun.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run every run of a sweep file that is not finished")
    r.add_argument("sweep_file", help="sweep YAML file, or a shipped sweep name (mini, locatello2019/dsprites, ...)")
    r.add_argument("--out", "-o", required=True, help="sweep folder (runs go to OUT/runs/<id>)")
    r.add_argument("--backend", "-b", default="local", help="local (default) | ray | slurm")
    r.add_argument("--workers", "-w", type=int, default=None, help="local: worker processes (default 1)")
    r.add_argument("--threads-per-run", "-t", type=int, default=None,
                   help="torch threads (CPUs) per run (local default: cores / workers; ray, slurm: 1)")
    r.add_argument("--dry-run", action="store_true", help="print the plan (counts and run ids); create nothing")
    r.add_argument("--retry-failed", action="store_true", help="train failed runs again (default: leave them failed)")
    r.add_argument("--resume-precision", default=None, choices=("fp32", "bf16", "fp16", "auto"),
                   help="partial runs continue in this precision instead of their train.precision (each keeps its "
                        "config and id; execution.jsonl records the change), e.g. fp32 for bf16 runs on a CPU "
                        "that emulates bf16; new runs train in their own")
    r.add_argument("--max-retries", type=int, default=2,
                   help="local: pool restarts after a worker died; ray: retries of a task whose worker died (default 2)")
    g = r.add_argument_group("ray")
    g.add_argument("--address", default=None, help="Ray cluster address (auto, ray://HEAD:10001); default: start a local Ray")
    g.add_argument("--gpus-per-run", type=float, default=None, help="GPUs per run, fractional allowed (0.25)")
    s = r.add_argument_group("slurm")
    s.add_argument("--partition", default=None, help="Slurm partition")
    s.add_argument("--time", default=None,
                   help="time limit per array task, required: minutes, HH:MM:SS or D-HH:MM:SS (e.g. 12:00:00)")
    s.add_argument("--max-requeues", type=int, default=None,
                   help="requeues of an array task that reached its time limit; it resumes from checkpoints (default 3)")
    s.add_argument("--gpus-per-task", type=int, default=None, help="GPUs per array task")
    s.add_argument("--runs-per-task", type=int, default=None, help="runs done one after another per array task (default 1)")
    s.add_argument("--max-array-size", type=int, default=None, help="array tasks per submitted array (default 1000)")
    s.add_argument("--array-parallelism", type=int, default=None, help="array tasks of each submitted array running at once (submitit's "
                   "default 256; a sweep larger than --max-array-size is submitted as several arrays)")
    s.add_argument("--cluster", default=None, help="submitit cluster: slurm (default when sbatch exists), local, debug")
    s.add_argument("--no-wait", action="store_true", help="submit and return; see status/results later")
    s.add_argument("--slurm", dest="slurm_params", action="append", default=[], metavar="KEY=VALUE",
                   help="another submitit Slurm parameter, e.g. --slurm account=lab --slurm qos=low (repeatable)")

    st = sub.add_parser("status", help="counts of finished / running / partial / not started / failed runs")
    st.add_argument("out", help="sweep folder")
    rs = sub.add_parser("results", help="write the results table (DIR/results.csv)")
    rs.add_argument("out", help="sweep folder")
    rs.add_argument("--output", default=None, help="CSV file to write (default DIR/results.csv)")
    add_logging_options(p)
    return p


def _slurm_params(items: list[str]) -> dict:
    import yaml

    params = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--slurm expects KEY=VALUE (e.g. account=lab), got '{item}'.")
        key = key.strip()
        key = key if key.startswith("slurm_") else f"slurm_{key}"
        # a time stays text: YAML reads 12:00:00 as the base-60 number 43200
        params[key] = value.strip() if key == "slurm_time" else yaml.safe_load(value)
    return params


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    setup_logging(args)
    from . import api

    try:
        if args.command == "status":
            print(api.status(args.out).summary())
            return 0
        if args.command == "results":
            table = api.results(args.out, args.output)
            print(f"wrote {table.path} ({len(table.rows)} finished runs, {len(table.columns)} columns)")
            for note in table.notes:
                print(f"note: {note}", file=sys.stderr)
            return 0
        options = {
            "workers": args.workers, "threads_per_run": args.threads_per_run, "max_retries": args.max_retries,
            "address": args.address, "gpus_per_run": args.gpus_per_run, "partition": args.partition,
            "time_min": parse_minutes(args.time) if args.time else None, "max_requeues": args.max_requeues,
            "gpus_per_task": args.gpus_per_task,
            "runs_per_task": args.runs_per_task, "max_array_size": args.max_array_size,
            "array_parallelism": args.array_parallelism, "cluster": args.cluster, "wait": not args.no_wait,
            "slurm_params": _slurm_params(args.slurm_params),
        }
        with warnings.catch_warnings():  # the package's deprecations (configs/studies/NAME) reach the user
            warnings.filterwarnings("default", category=DeprecationWarning, module=r"disentangle\.")
            outcome = api.run(args.sweep_file, args.out, backend=args.backend, dry_run=args.dry_run,
                              retry_failed=args.retry_failed, resume_precision=args.resume_precision,
                             option_names=("--workers ", "--threads-per-run "), **options)
    except (*REPORTED, KeyboardInterrupt) as err:
        return report_error(
            err, interrupted="interrupted: finished runs are kept and partial ones resume from their checkpoints on the next run."
        )
    if outcome.dry_run or not options["wait"]:
        return EXIT_OK
    return EXIT_OK if outcome.ok else EXIT_RUN_FAILED


if __name__ == "__main__":
    from .._core.cli import run_main

    run_main(main)
