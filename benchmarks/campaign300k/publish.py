"""Publish every finished run of the 300,000-step campaign that the zoo does not hold yet.

    python benchmarks/campaign300k/publish.py [CAMPAIGN_DIR] [--dry-run]      # default ~/campaign300k

Per finished run (its folder has ``metrics.json``) of the campaign's sweeps (``naming.SWEEPS``):

1. its zoo name and recipe (``naming.py``);
2. its training wall time: ``log.jsonl``'s last ``wall_time_s``, less any stop the trainer could not
   see. Since 2026-11-27 the trainer leaves a SIGSTOP pause out itself (``paused_s``); a run trained
   partly before that has one log interval far longer than the others for each pause, found here
   as an interval over :data:`PAUSE_GAP_S` seconds, and its excess over the run's median interval is
   taken out (``--wall-time``) and named in the notes;
3. ``python -m disentangle.zoo publish`` with a note that says how it was trained, then
   ``python -m disentangle.zoo verify``;
4. its saved checkpoint (``resume/<sweep>/<run id>/``) is left for ``save.sh`` to delete, where the
   session's diff budget allows (a deleted FactorVAE checkpoint counts about 80 MB).

Then ``docs/hooks/generated.py`` rebuilds the zoo's pages. What to commit is printed at the end.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from naming import SWEEPS, recipe, zoo_name  # noqa: E402
from status import spans as machine_spans  # noqa: E402

#: a log interval longer than this (seconds) is a pause the trainer did not see: a 100-step interval
#: takes seconds, one with an evaluation a minute or two, a resume none (the clock is restored)
PAUSE_GAP_S = 1000.0
PRECISION_NOTES = {
    "bf16": "in bf16 autocast (its A/B against fp32 held: benchmarks/RESULTS-bf16*.md)",
    "fp32": "in fp32, the reference's precision",
}


def wall_time(log_lines: list[str]) -> tuple[float | None, list[float]]:
    """The training wall time of a run's ``log.jsonl`` lines, and the unseen pauses taken out of it."""
    timed = []
    for line in log_lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record.get("wall_time_s"), (int, float)):
            timed.append(record)
    if not timed:
        return None, []
    # the trainer's clock already leaves out the pauses it saw (paused_s): not taken out twice
    intervals = [b["wall_time_s"] - a["wall_time_s"] for a, b in zip(timed, timed[1:])]
    typical = statistics.median(intervals) if intervals else 0.0
    pauses = [gap - typical for gap in intervals if gap > PAUSE_GAP_S]
    return timed[-1]["wall_time_s"] - sum(pauses), pauses


def _session_spans(execution_lines: list[str], steps: int, key: str, valid) -> list[tuple]:
    """``[(value, first step, last step)]`` of ``key`` over a run's ``execution.jsonl`` (one record a
    session, from the step it began, in the order they ran; records whose value fails ``valid`` left
    out), consecutive sessions of one value merged; the last span ends at ``steps``. A session that
    trained no step (the next one began at its step: it died or was stopped at once) is left out,
    as ``status.spans`` does."""
    sessions = []
    for line in execution_lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record.get("step"), int) and valid(record.get(key)):
            sessions.append((record["step"], record[key]))
    spans: list[list] = []
    for i, (step, value) in enumerate(sessions):
        end = sessions[i + 1][0] if i + 1 < len(sessions) else steps
        if end <= step:
            continue
        if spans and spans[-1][0] == value:
            spans[-1][2] = end
        else:
            spans.append([value, step, end])
    return [tuple(span) for span in spans]


def precision_spans(execution_lines: list[str], steps: int) -> list[tuple[str, int, int]]:
    """``[(precision, first step, last step)]`` of a run's sessions (:func:`_session_spans`)."""
    return _session_spans(execution_lines, steps, "precision", bool)


def thread_spans(execution_lines: list[str], steps: int) -> list[tuple[int, int, int]]:
    """``[(threads, first step, last step)]`` of a run's sessions (:func:`_session_spans`)."""
    return _session_spans(execution_lines, steps, "threads", lambda value: isinstance(value, int))


def threads_note(spans: list[tuple[int, int, int]]) -> str:
    """How many threads trained the run: ``on one thread beside another run`` (the campaign's
    lanes), with the steps a run left alone trained on more (``resume.sh``'s ``CAMPAIGN_THREADS``)."""
    more = [(t, a, b) for t, a, b in spans if t > 1]
    text = "on one thread beside another run"
    if more:
        text += (", and on " + ", ".join(f"{t} threads alone for steps {a:,}-{b:,}" for t, a, b in more))
    return text


def _precision_note(precision: str) -> str:
    return PRECISION_NOTES.get(precision, "in " + precision)


def flushed_from(execution_lines: list[str]) -> int | None:
    """The step from which a run's sessions flushed denormal floats to zero (``execution.jsonl``'s
    ``flush_denormal``, recorded since 2026-12-07), or None where none did."""
    for line in execution_lines:
        record = json.loads(line)
        if str(record.get("flush_denormal", "")).startswith("on"):
            return int(record["step"])
    return None


def machines_note(machine_spans: list[dict]) -> str:
    """`` Trained on: steps 0-68,108 on CPU AVX2 (4.52 h, 4.2 steps/s), ...`` from
    ``status.spans`` (the kinds of machine that trained a run, each span's hours and rate); empty
    when none is known."""
    if not machine_spans:
        return ""
    parts = [f"steps {span['start']:,}-{span['end']:,} on {span['machine']} ({span['hours']:.2f} h"
             + (f", {span['rate']:.1f} steps/s)" if span.get("rate") else ")") for span in machine_spans]
    return " Trained on: " + "; ".join(parts) + " (execution.jsonl and log.jsonl's clock)."


def notes(config: dict, sweep: str, logged: float | None, pauses: list[float],
          spans: list[tuple[str, int, int]] | None = None, flushed: int | None = None,
          machine_spans: list[dict] | None = None, threads: list[tuple[int, int, int]] | None = None) -> str:
    """The manifest note of a campaign run; ``spans`` (:func:`precision_spans`) name the steps
    trained in another precision than its ``train.precision`` (``sweep run --resume-precision``);
    ``flushed`` the step from which denormal floats were flushed to zero (:func:`flushed_from`);
    ``machine_spans`` (``status.spans``) the machines that trained it (:func:`machines_note`)."""
    switched = bool(spans and len(spans) > 1)
    if switched:
        # a twin begun in fp32 on an AVX2 CPU may go on in bf16 on a native-bf16 one and back: fp32>bf16>fp32
        trained = (", then ".join(f"{_precision_note(p)}, for steps {a:,}-{b:,}" for p, a, b in spans)
                   + f" (sweep run --resume-precision: each session in the precision its machine computes faster; "
                   f"the run's train.precision is {config['train']['precision']})")
    else:
        trained = _precision_note(config["train"]["precision"])
    resumed = (f"each resume bit-exact, the switch{'es' if len(spans or []) > 2 else ''} of precision making it "
               "another run than an uninterrupted one"
               if switched else "with bit-exact resume")
    steps = int(config["train"]["steps"])
    as_reference = "as disentanglement_lib does"
    if config["objective"]["name"] == "factor_vae":
        # its code gives the global step to both optimizers: 2 a training iteration
        as_reference = (f"as Locatello et al. state (disentanglement_lib's own FactorVAE stopped at "
                        f"{steps // 2:,} updates of each network, its global step advancing twice an iteration)")
    text = (f"The published schedule: the recipe of configs/{recipe(config)}.yaml trained "
            f"{steps:,} steps {as_reference}, "
            f"{trained}, "
            f"model.init {config['model']['init']}, seed {config['seed']}, by the 300k campaign "
            f"(configs/sweeps/{sweep}.yaml) across sessions, {resumed}, {threads_note(threads or [])}.")
    if flushed is not None:
        text += (f" Denormal floats flushed to zero from step {flushed:,} (train.flush_denormal, a CPU's speed: "
                 "the steps differ from a run that keeps them, as a switch of precision would make them).")
    text += machines_note(machine_spans or [])
    if pauses:
        text += (f" Wall time: log.jsonl's {logged + sum(pauses):,.0f} s less "
                 + " and ".join(f"a {p:,.0f} s" for p in pauses) + " SIGSTOP pause(s) the trainer did not yet record.")
    return text


def shipped_names() -> set[str]:
    manifest = ROOT / "disentangle" / "zoo" / "manifest.json"
    return set(json.loads(manifest.read_text())["models"])


def finished_runs(campaign: Path) -> list[tuple[str, Path]]:
    return [(sweep, run.parent) for sweep in SWEEPS
            for run in sorted((campaign / sweep / "runs").glob("*/metrics.json"))]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("campaign", nargs="?", type=Path, default=Path.home() / "campaign300k")
    p.add_argument("--dry-run", action="store_true", help="say what would be published; change nothing")
    args = p.parse_args(argv)
    shipped = shipped_names()
    published = []
    claimed: dict[str, str] = {}  # zoo name -> the run id published (or to be) under it by this call
    for sweep, run in finished_runs(args.campaign):
        config = yaml.safe_load((run / "config.yaml").read_text())
        name = zoo_name(config, "cpu")
        if name in shipped or name in claimed:
            if name in claimed:  # a bf16 run and its fp32 twin both finished: one zoo name, one model
                to_be = "to be " if args.dry_run else ""
                print(f"left out {run.name}: its twin {claimed[name]} is {to_be}published as {name}", flush=True)
            continue
        logged, pauses = wall_time((run / "log.jsonl").read_text().splitlines())
        execution = run / "execution.jsonl"
        sessions = execution.read_text().splitlines() if execution.exists() else []
        spans = precision_spans(sessions, int(config["train"]["steps"]))
        command = [sys.executable, "-m", "disentangle.zoo", "publish", str(run), "--name", name,
                   "--recipe", recipe(config), "--no-progress", "--threads", "1",
                   "--notes", notes(config, sweep, logged, pauses, spans, flushed_from(sessions), machine_spans(run),
                                    thread_spans(sessions, int(config["train"]["steps"])))]
        if pauses:
            command += ["--wall-time", f"{logged:.1f}"]
        print(f"{'would publish' if args.dry_run else 'publishing'} {run.name} as {name}"
              + (f" (wall time {logged:,.0f} s, {len(pauses)} unseen pause(s) taken out)" if pauses else ""), flush=True)
        claimed[name] = run.name
        if args.dry_run:
            continue
        subprocess.run(command, cwd=ROOT, check=True)
        subprocess.run([sys.executable, "-m", "disentangle.zoo", "verify", name], cwd=ROOT, check=True)
        published.append(name)
    if not published:
        print("nothing to publish" if not args.dry_run else "(dry run)")
        return 0
    subprocess.run([sys.executable, "docs/hooks/generated.py"], cwd=ROOT, check=True)
    print("published: " + ", ".join(published) + "\ncommit: disentangle/zoo/manifest.json disentangle/zoo/weights/ "
          "README.md docs/, then rerun "
          "benchmarks/trajectories_300k.py for the trajectories")
    return 0


if __name__ == "__main__":
    sys.exit(main())
