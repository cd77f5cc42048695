"""``run``, ``status`` and ``results`` of a sweep folder (the Python API behind the CLI)."""
from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import _compat
from .._core import checks
from .._core.choices import PRECISIONS
from ..errors import ConfigError
from .backends import BACKENDS, BackendOptions
from .files import (
    FAILED_NAME,
    METRICS_NAME,
    PLAN_LOCK_NAME,
    PLAN_NAME,
    RESULTS_NAME,
    RUNS_DIR,
    STATES,
    FolderLock,
    ResultsTable,
    RunState,
    atomic_write_json,
    lock_holder,
    read_json,
    write_results,
)
from .grid import RunSpec, SweepPlan, _short, load_sweep
from .ids import canonical_json
from .runner import RunOutcome, RunTask, failed_on_input, missing_metrics, outcome_line

logger = logging.getLogger(__name__)

@dataclass
class RunStatus:
    """One run of a sweep folder: its id, its :class:`~disentangle.sweep.files.RunState` and what
    it is (grid values and seed)."""

    run_id: str
    state: RunState
    description: str = ""
    message: str = ""  #: the failed run's last error line, the running run's lock holder, a partial run's step


@dataclass
class SweepStatus:
    """The runs of a sweep folder and their states (``python -m disentangle.sweep status DIR``)."""

    out_dir: Path
    runs: list[RunStatus]

    @property
    def counts(self) -> dict[str, int]:
        counts = {s.value: 0 for s in STATES}  # plain str keys: a RunState finds its count
        for run in self.runs:
            counts[run.state] += 1
        return counts

    def summary(self) -> str:
        counts = self.counts
        parts = ", ".join(f"{counts[s]} {s}" for s in STATES)
        lines = [f"{self.out_dir}: {len(self.runs)} runs: {parts}"]
        for state in (RunState.FAILED, RunState.RUNNING, RunState.PARTIAL):
            listed = [r for r in self.runs if r.state == state]
            if listed:
                lines.append(f"{state}:")
                lines += [f"  {r.run_id}  {r.description}  {r.message}".rstrip() for r in listed]
        return "\n".join(lines)


@dataclass
class SweepReport:
    """What :func:`run` did: the plan (the sweep file it ran), the counts before it started, each
    outcome, the results."""

    plan: SweepPlan
    out_dir: Path
    before: dict[str, int]
    to_run: int
    outcomes: list[RunOutcome] = field(default_factory=list)
    results: ResultsTable | None = None
    job_ids: list[str] = field(default_factory=list)
    dry_run: bool = False

    @property
    def unfinished(self) -> list[RunOutcome]:
        return [o for o in self.outcomes if o.status not in (RunState.FINISHED, RunState.SKIPPED)]

    @property
    def ok(self) -> bool:
        """Every run of the sweep is finished now."""
        done = {row["run_id"] for row in self.results.rows} if self.results else set()
        return all(r.run_id in done for r in self.plan.runs)

    study = _compat.renamed_attribute("study", "plan", "SweepReport")  # its name in 0.1


# ---------------------------------------------------------------------- state of a run folder
def run_state(
    run_dir: Path, metrics: list[str] | None = None, settings: dict[str, dict[str, Any]] | None = None
) -> tuple[RunState, str]:
    """``(state, detail)`` of a run folder; ``state`` is one of :data:`STATES`
    (:class:`~disentangle.sweep.files.RunState`).

    finished: ``metrics.json`` exists (and holds every metric in ``metrics``, if given, computed
    with its ``settings``: a metric scored with other settings is still to compute); running:
    another process holds the run's lock; failed: ``failed.json``; partial: a checkpoint, or
    metrics still to compute; else not started.
    """
    from ..training.checkpoint import has_checkpoint

    if not run_dir.is_dir():
        return RunState.NOT_STARTED, ""
    missing = missing_metrics(run_dir, metrics or [], settings)
    if missing == []:
        return RunState.FINISHED, ""
    holder = lock_holder(run_dir)
    if holder:
        return RunState.RUNNING, f"locked by {holder}"
    failed = read_json(run_dir / FAILED_NAME)
    if isinstance(failed, dict):
        return RunState.FAILED, str(failed.get("last_line", ""))
    if missing:
        record = read_json(run_dir / METRICS_NAME) or {}
        have = record.get("metrics") if isinstance(record.get("metrics"), dict) else {}
        names = [f"{m} (scored with other settings)" if m in have else m for m in missing]
        return RunState.PARTIAL, f"trained; metrics to compute: {', '.join(names)}"
    if has_checkpoint(run_dir):
        step = _last_logged_step(run_dir)
        return RunState.PARTIAL, f"last logged step {step}" if step is not None else ""
    return RunState.NOT_STARTED, ""


def _last_logged_step(run_dir: Path) -> int | None:
    import json

    try:
        lines = (run_dir / "log.jsonl").read_text().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            return int(json.loads(line)["step"])
        except (ValueError, KeyError, TypeError):
            continue
    return None


# ---------------------------------------------------------------------- plan
def _plan_entries(plan: SweepPlan) -> list[dict[str, Any]]:
    return [
        {
            "run_id": r.run_id,
            "seed": r.seed,
            "values": r.values,
            "steps": r.config["train"]["steps"],
            "dlib_model_number": r.dlib_model_number,
        }
        for r in plan.runs
    ]


PLAN_FORMAT = 2


def write_plan(plan: SweepPlan, out_dir: Path) -> None:
    """Write (merge into) ``DIR/sweep.json``: the runs of every sweep file run into this folder.

    Each sweep file keeps its own entry (``studies``: source, name, the file's mapping as written
    (``study``), its ``metrics``, ``metric_settings`` and ``run_ids``; a sweep file run again
    replaces its entry and moves last), so ``status`` judges each run by the sweep files that hold
    it. ``metrics`` (top level) is the union, the order of the results' columns. The
    read-modify-write holds the folder's plan lock (``DIR/.plan.lock``): two sweeps starting
    together in one folder both keep their plans.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / PLAN_NAME
    with FolderLock(out_dir / PLAN_LOCK_NAME, PLAN_NAME):
        old = read_json(path) or {}
        entries = _plan_entries(plan)
        ids = {e["run_id"] for e in entries}
        kept = [e for e in old.get("runs", []) if e.get("run_id") not in ids]
        varying = list(plan.varying_keys) + [k for k in old.get("varying_keys", []) if k not in plan.varying_keys]
        metrics = list(plan.metrics) + [m for m in old.get("metrics", []) if m not in plan.metrics]
        # The persisted key names "studies" (the list of sweep files) and "study" (a file's mapping)
        # are those of the releases before the rename to "sweep file": kept, so that old and new
        # versions share a folder. A shipped file's source under its old folder (configs/studies/)
        # is the same file.
        source = _same_source(plan.source)
        files = [s for s in old.get(PLAN_FILES_KEY, []) if _same_source(s.get("source")) != source]
        files.append({
            "source": plan.source, "name": plan.name, PLAN_FILE_KEY: plan.raw, "metrics": list(plan.metrics),
            "metric_settings": plan.metric_settings, "run_ids": [e["run_id"] for e in entries],
        })
        atomic_write_json(path, {
            "format": PLAN_FORMAT,
            PLAN_FILES_KEY: files,
            "varying_keys": varying,
            "metrics": metrics,
            "runs": kept + entries,
        })


#: keys of ``sweep.json``: the list of the sweep files run into the folder, and in each entry the
#: file's mapping as written; named as before the rename (compatibility of persisted data)
PLAN_FILES_KEY = "studies"
PLAN_FILE_KEY = "study"


def _same_source(source: Any) -> Any:
    """``source`` with a shipped sweep file's old folder (``configs/studies/``) spelled as the new."""
    if not isinstance(source, str):
        return source
    if source.startswith("configs/studies/"):
        source = "configs/sweeps/" + source[len("configs/studies/"):]
    return source.replace("/configs/studies/", "/configs/sweeps/")


def plan_requirements(plan: dict[str, Any]) -> dict[str, tuple[list[str], dict[str, dict[str, Any]]]]:
    """``{run_id: (metrics, settings)}``: what finishes each run of a plan, by the sweep files that hold it.

    A run held by several sweep files needs the metrics of all of them; where two ask one metric
    with different settings, the file run last into the folder (last in ``studies``) wins. Plans
    written before per-file entries (no ``run_ids``) judge every run by the top-level ``metrics``
    with the files' ``metric_settings`` as written (the last file's first).
    """
    runs = [e["run_id"] for e in plan.get("runs", []) if isinstance(e, dict) and "run_id" in e]
    files = [s for s in plan.get(PLAN_FILES_KEY, []) if isinstance(s, dict)]
    if files and all(isinstance(s.get("run_ids"), list) for s in files):
        needs: dict[str, tuple[list[str], dict[str, dict[str, Any]]]] = {rid: ([], {}) for rid in runs}
        for entry in files:
            for rid in entry["run_ids"]:
                metrics, settings = needs.setdefault(rid, ([], {}))
                for metric in entry.get("metrics") or []:
                    if metric not in metrics:
                        metrics.append(metric)
                    settings[metric] = dict((entry.get("metric_settings") or {}).get(metric) or {})
        return needs
    settings = {}
    for entry in files:
        raw = (entry.get(PLAN_FILE_KEY) or {}).get("metric_settings") or {}
        if isinstance(raw, dict):
            settings.update({m: dict(v) for m, v in raw.items() if isinstance(v, dict)})
    metrics = list(plan.get("metrics", []))
    return {rid: (metrics, {m: settings[m] for m in metrics if m in settings}) for rid in runs}


# ---------------------------------------------------------------------- options
def _option(name: str) -> str:
    """A backend option as both its callers write it: ``workers (--workers)``."""
    return f"{name} (--{name.replace('_', '-')})"


def _check_options(backend: str, options: BackendOptions) -> None:
    BACKENDS.get(backend)  # an unknown name: UnknownNameError (a ConfigError) with the valid names
    defaults = BackendOptions()
    allowed = BackendOptions.BY_BACKEND[backend]
    for name in BackendOptions.BY_BACKEND["slurm"] + BackendOptions.BY_BACKEND["ray"] + BackendOptions.BY_BACKEND["local"]:
        if name not in allowed and getattr(options, name) != getattr(defaults, name):
            users = [b for b, keys in BackendOptions.BY_BACKEND.items() if name in keys]
            raise ConfigError(
                f"The option {name} (given {getattr(options, name)!r}) applies to the {' and '.join(users)} "
                f"backend{'s' if len(users) > 1 else ''}, not to '{backend}'. Drop it or choose --backend "
                f"{users[0]}."
            )
    for name in ("workers", "threads_per_run", "time_min", "gpus_per_task", "runs_per_task", "max_array_size",
                 "array_parallelism"):
        value = getattr(options, name)
        if value is not None:
            setattr(options, name, checks.positive_int(_option(name), value))
    options.max_retries = checks.integer(_option("max_retries"), options.max_retries, minimum=0)
    if options.max_requeues is not None:
        options.max_requeues = checks.integer(_option("max_requeues"), options.max_requeues, minimum=0)
    if backend == "slurm":
        from .backends.slurm import check_time_limit

        check_time_limit(options)
    if options.gpus_per_run is not None:
        gpus = checks.positive(_option("gpus_per_run"), options.gpus_per_run)
        if gpus > 1 and not float(gpus).is_integer():
            raise ConfigError(
                f"gpus_per_run must be a fraction of one GPU (e.g. 0.25) or a whole number of GPUs, got {gpus}."
            )
    if options.cluster is not None:
        options.cluster = checks.choice("cluster", options.cluster, ("slurm", "local", "debug"))
    if backend in ("ray", "slurm"):
        from .backends import ray, slurm

        (ray if backend == "ray" else slurm).check_available()


def _log_info(line: str) -> None:
    """The sweep's progress lines, through logging (the sweep command line shows them on stderr)."""
    logger.info(line)


# ---------------------------------------------------------------------- run
@_compat.renamed_keyword("study", "sweep_file")  # run(study=...): its name in 0.1
def run(
    sweep_file: str | Path | SweepPlan,
    out: str | Path,
    *,
    backend: str = "local",
    dry_run: bool = False,
    retry_failed: bool = False,
    resume_precision: str | None = None,
    log: Callable[[str], None] | None = _log_info,
    option_names: tuple[str, str] = ("workers=", "threads_per_run="),
    **options: Any,
) -> SweepReport:
    """Run every run of ``sweep_file`` that is not finished into ``out`` (``out/runs/<id>``).

    ``sweep_file`` is a sweep file (a YAML path), a shipped sweep name (``"mini"``,
    ``"locatello2019/dsprites"``) or a :class:`~disentangle.sweep.grid.SweepPlan`. The whole
    grid is validated before anything is created. Finished runs are skipped, partial ones resumed
    from their checkpoints, failed ones left failed unless ``retry_failed``. ``resume_precision``
    (``fp32``, ``bf16``, ``fp16`` or ``auto``) trains the partial runs' sessions in that precision
    instead of their ``train.precision`` (each run keeps its config and id; its ``execution.jsonl``
    records the change: :meth:`~disentangle.training.trainer.Trainer.fit`), e.g. bf16 runs moved to a
    CPU that emulates bf16; new runs train in their own. ``options`` are the
    fields of :class:`~disentangle.sweep.backends.BackendOptions` (``workers``,
    ``threads_per_run``, ``address``, ``gpus_per_run``, ``partition``, ``time_min``, ...).
    ``results.csv`` is rewritten after every finished run and at the end. ``dry_run`` only plans:
    nothing is created. An ``out`` that is a file (or lies under one) is a
    :class:`~disentangle.ConfigError` before the sweep file is read; runs that leave
    ``train.precision`` at ``auto`` get a warning (:func:`warn_auto_precision`): their ids are this
    machine's. With the local backend, a warning says when the runs it will start at once (``workers``,
    or fewer when fewer runs are left) times ``threads_per_run`` ask for more CPU threads than this
    process may use; ``option_names`` are the two options as the caller writes them (the command
    line passes ``("--workers ", "--threads-per-run ")``).
    """
    unknown = set(options) - {f for f in BackendOptions.__dataclass_fields__}
    if unknown:
        names = sorted(BackendOptions.__dataclass_fields__)
        raise ConfigError(f"Unknown sweep option(s) {', '.join(sorted(unknown))}. Valid options: {', '.join(names)}.")
    opts = BackendOptions(**options)
    _check_options(backend, opts)
    if resume_precision is not None and resume_precision not in (*PRECISIONS, "auto"):
        raise ConfigError(f"resume_precision={resume_precision!r} is not a precision. Choose one of "
                          f"{', '.join(PRECISIONS)} or auto (the device's choice), or leave it unset "
                          f"(each run resumes in its train.precision).")
    out_dir = Path(out)
    check_out_dir(out_dir, writes=not dry_run)
    plan = sweep_file if isinstance(sweep_file, SweepPlan) else load_sweep(sweep_file)
    warn_auto_precision(plan)
    states = {
        r.run_id: run_state(out_dir / RUNS_DIR / r.run_id, plan.metrics, plan.metric_settings) for r in plan.runs
    }
    before = {s.value: 0 for s in STATES}
    for state, _ in states.values():
        before[state] += 1
    # a run that failed on its input (a config or data error) is tried again: the fix is in the sweep file
    on_input = {r.run_id for r in plan.runs if states[r.run_id][0] == RunState.FAILED
                and failed_on_input(read_json(out_dir / RUNS_DIR / r.run_id / FAILED_NAME))}
    todo = [
        r for r in plan.runs
        if states[r.run_id][0] != RunState.FINISHED
        and (retry_failed or states[r.run_id][0] != RunState.FAILED or r.run_id in on_input)
    ]
    report = SweepReport(plan, out_dir, before, len(todo), dry_run=dry_run)
    if log:
        counts = ", ".join(f"{n} {s}" for s, n in before.items() if n)
        merged = f" ({plan.merged_duplicates} duplicate grid points merged)" if plan.merged_duplicates else ""
        log(f"sweep {plan.name}: {len(plan.runs)} runs{merged}: {counts}; {len(todo)} to run -> {out_dir}")
        left = before[RunState.FAILED] - len(on_input)
        if on_input and not retry_failed:
            log(f"{len(on_input)} runs that failed on their config or data are tried again")
        if left and not retry_failed:
            log(f"{left} failed runs are left as they are; rerun with --retry-failed to train them again")
    if backend == "local" and todo:  # the runs share this machine's CPUs (without threads_per_run: CPUs / workers)
        from .._core.threads import warn_if_oversubscribed

        workers = opts.workers or 1
        warn_if_oversubscribed(opts.threads_per_run or 1, threads_option=option_names[1],
                               processes=min(workers, len(todo)), processes_option=option_names[0],
                               processes_given=f"{option_names[0]}{workers} with {len(todo)} runs to do"
                               if len(todo) < workers else None)
    if dry_run:
        if log:
            for r in plan.runs:
                state, detail = states[r.run_id]
                log(f"  {r.run_id}  {state:<11}  {r.describe()}" + (f"  [{detail}]" if detail else ""))
        return report

    write_plan(plan, out_dir)
    threads = opts.threads_per_run
    if backend == "local":
        from .backends.local import available_cores

        threads = threads or max(1, available_cores() // min(opts.workers or 1, max(1, len(todo))))
    tasks = [_task(r, out_dir, plan, threads or 1, retry_failed, resume_precision) for r in todo]
    tasks.sort(key=lambda t: canonical_json(t.config["data"]))  # runs on the same data together
    done = 0

    def on_outcome(outcome: RunOutcome) -> None:
        nonlocal done
        done += 1
        report.outcomes.append(outcome)
        if log:
            log(f"[{done}/{len(tasks)}] {outcome_line(outcome)}")

    if tasks:
        ids = BACKENDS.get(backend)(tasks, opts, on_outcome, folder=out_dir / "slurm")
        report.job_ids = list(ids or [])
    report.results = write_results(out_dir)
    if log:
        bad = report.unfinished
        log(f"results: {report.results.path} ({len(report.results.rows)} finished runs)")
        for note in report.results.notes:
            log(f"note: {note}")
        if bad:
            log(f"{len(bad)} runs did not finish; see python -m disentangle.sweep status {out_dir}")
    return report


def check_out_dir(out_dir: Path, writes: bool = True) -> None:
    """Raise :class:`~disentangle.ConfigError` (one paragraph) when ``out_dir`` cannot be a sweep
    folder: it is a file, or lies under one, holds a training run, or (when the sweep ``writes``:
    not a dry run) cannot be written. Checked before the sweep file is read, so nothing is planned,
    trained or written."""
    from .._core.writable import check_writable, file_in_the_way

    blocker = file_in_the_way(out_dir)
    if blocker is not None:
        where = "is a file" if blocker == out_dir else f"lies under '{blocker}', which is a file"
        raise ConfigError(
            f"The sweep folder '{out_dir}' (--out) {where}, not a folder. A sweep folder holds sweep.json, "
            f"results.csv and runs/<id>/: give a folder (created when missing; the folder of an earlier run of "
            f"the sweep continues it), e.g. --out sweeps/NAME."
        )
    if (out_dir / "config.yaml").is_file() and not (out_dir / PLAN_NAME).exists() \
            and any((out_dir / name).exists() for name in ("checkpoint.pt", "log.jsonl")):
        raise ConfigError(
            f"The sweep folder '{out_dir}' (--out) holds a training run (config.yaml, checkpoint or log.jsonl), not "
            f"a sweep: the sweep's sweep.json, results.csv and runs/ would be mixed into it. Give a folder of its "
            f"own, e.g. --out {out_dir.parent / 'sweeps' / 'NAME'}."
        )
    if writes:
        check_writable(out_dir, f"The sweep folder '{out_dir}' (--out)", "--out sweeps/NAME")


def warn_auto_precision(plan: SweepPlan) -> None:
    """Warn (``logging.warning``) when runs of ``plan`` leave ``train.precision`` at ``auto``: the
    precision it resolves to is this machine's (bf16 on a CPU where bf16 was measured faster: AMX, or
    AVX512-BF16 on AMD; fp32 elsewhere) and is
    part of each run's id, so the sweep continued on another machine could train those runs anew."""
    runs = plan.auto_precision_runs
    if not runs:
        return
    here = next(r.config["train"]["precision"] for r in plan.runs if r.run_id == runs[0])
    which = "all its" if len(runs) == len(plan.runs) else f"{len(runs)} of its"
    logger.warning(
        "sweep '%s' leaves train.precision at auto for %s %d runs: auto is %s on this machine and can be another "
        "precision on another (bf16 on a CPU where bf16 was measured faster, AMX or AVX512-BF16 on AMD; fp32 "
        "elsewhere), and the precision is part of each "
        "run id, so this sweep continued on another machine would train those runs anew under other ids. Name "
        "the precision in the sweep file's base config or grid (set: {train.precision: %s}, what auto is here) "
        "to keep the run ids the same on every machine.",
        plan.name, which, len(plan.runs), here, here,
    )


def asks_for_all(metrics: Any) -> bool:
    """Whether a sweep file's ``metrics`` (a list, or a comma-separated string) names ``all``."""
    if isinstance(metrics, str):
        metrics = [m.strip() for m in metrics.split(",")]
    return isinstance(metrics, list) and "all" in metrics


def _task(
    spec: RunSpec, out_dir: Path, plan: SweepPlan, threads: int, retry_failed: bool, resume_precision: str | None = None,
) -> RunTask:
    return RunTask(
        run_id=spec.run_id,
        run_dir=str((out_dir / RUNS_DIR / spec.run_id).resolve()),
        config=spec.config,
        seed=spec.seed,
        values=spec.values,
        metrics=list(plan.metrics),
        metrics_all=asks_for_all(plan.raw.get("metrics")),
        metric_settings=plan.metric_settings,
        imports=list(plan.imports),
        threads=threads,
        retry_failed=retry_failed,
        resume_precision=resume_precision,
        dlib_model_number=spec.dlib_model_number,
        sweep_dir=str(out_dir.resolve()),
    )


# ---------------------------------------------------------------------- status / results
def status(out: str | Path) -> SweepStatus:
    """The state of every run of a sweep folder (the plan's runs and any other run folder).

    Each run is judged by the sweep files that hold it (:func:`plan_requirements`): a run of sweep
    file A is finished when it holds A's metrics with A's settings, whatever another sweep file in
    the folder asks. A run folder outside the plan is finished when it has a ``metrics.json``."""
    out_dir = Path(out)
    if not out_dir.is_dir():
        raise ConfigError(f"'{out}' is not a folder. Pass the --out folder of a sweep.")
    plan = read_json(out_dir / PLAN_NAME) or {}
    needs = plan_requirements(plan)
    entries = {e["run_id"]: e for e in plan.get("runs", [])}
    runs_dir = out_dir / RUNS_DIR
    present = sorted(p.name for p in runs_dir.iterdir() if p.is_dir()) if runs_dir.is_dir() else []
    if not entries and not present:
        raise ConfigError(f"'{out}' holds no sweep (no {PLAN_NAME} and no runs/ folder).")
    runs = []
    for rid in dict.fromkeys([*entries, *present]):
        entry = entries.get(rid, {})
        values = ", ".join([*(f"{k}={_short(v)}" for k, v in (entry.get("values") or {}).items()),
                            *([f"seed={entry['seed']}"] if "seed" in entry else [])])
        metrics, settings = needs.get(rid, ([], {}))
        state, detail = run_state(runs_dir / rid, metrics, settings)
        if state == RunState.PARTIAL and detail.startswith("last logged step") and entry.get("steps"):
            detail += f" of {entry['steps']}"
        runs.append(RunStatus(rid, state, values, detail))
    return SweepStatus(out_dir, runs)


def results(out: str | Path, output: str | Path | None = None) -> ResultsTable:
    """Write the results table of a sweep folder (default ``DIR/results.csv``) and return it."""
    out_dir = Path(out)
    if not (out_dir / PLAN_NAME).exists() and not (out_dir / RUNS_DIR).is_dir():
        raise ConfigError(f"'{out}' holds no sweep (no {PLAN_NAME} and no runs/ folder). Pass the --out folder of a sweep.")
    check_results_output(out_dir, output)
    return write_results(out_dir, output)


def check_results_output(out_dir: Path, output: str | Path | None) -> None:
    """Raise :class:`~disentangle.ConfigError` (one paragraph) when the results table cannot be written
    where it goes: ``output`` a folder (or named as one) or under a file, or its folder (the sweep
    folder by default) not writable."""
    from .._core.writable import check_writable

    if output is None:
        check_writable(out_dir, f"The sweep's results table, {out_dir / RESULTS_NAME} (the default without --output),",
                       "--output results.csv (a file elsewhere)")
        return
    named_as_folder = isinstance(output, str) and output.endswith(("/", os.sep))
    output = Path(output)
    if output.is_dir() or named_as_folder:
        raise ConfigError(
            f"--output '{output}' is a folder; the results table is one CSV file. Name a file, e.g. "
            f"--output {output / RESULTS_NAME}."
        )
    check_writable(output.parent, f"--output '{output}'", "--output results.csv")


__all__ = ["run", "status", "results", "run_state", "SweepReport", "SweepStatus", "RunStatus"]
