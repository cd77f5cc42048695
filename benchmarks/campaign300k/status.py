"""Where the 300,000-step campaign stands: every run of its sweeps, in the order the lanes take them.

    python benchmarks/campaign300k/status.py [CAMPAIGN_DIR]      # default ~/campaign300k

Per run: its sweep, objective and seed, its state as ``python -m disentangle.sweep status`` judges
it (finished, running: a lane holds its lock, partial, not started; ``published`` where the zoo holds
the run, under its CPU or GPU name, whether or not its folder is on this machine), the last logged step, a
training rate and the hours of training left at that rate. The rate is, by what is known: the
median ``steps_per_s`` of the run's last :data:`RECENT` log records; else (a run not started) the
median of the campaign's runs of the same objective and precision; else the mean rate of the
zoo's 20,000-step reference-init model of that objective (its steps over its published wall time,
whatever its precision and machine: a rough guide, marked ``zoo``). Then the thread-hours left.
Reads the run folders only, so it is safe beside the lanes. On a CPU without native bf16 it says which
bf16 runs wait for a machine with it (``resume.sh`` leaves them out there).

    python benchmarks/campaign300k/status.py [CAMPAIGN_DIR] --sessions

adds, for every run folder on this machine, how it was trained: its spans of steps on one kind of
machine in one precision (consecutive sessions of the same CPU and precision make one span; the CPU
as ``execution.jsonl`` names it, its x86 family/model where recorded, else torch's CPU capability),
each span's hours of training (``wall_time_s`` of ``log.jsonl``, pauses left out) and its rate.
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from naming import SWEEPS, zoo_name  # noqa: E402

from disentangle import zoo  # noqa: E402
from disentangle._core.hardware import cpu_capability, native_cpu_bf16  # noqa: E402
from disentangle.errors import ConfigError  # noqa: E402
from disentangle.sweep import api  # noqa: E402
from disentangle.sweep.grid import load_sweep  # noqa: E402
from disentangle.zoo.manifest import SHIPPED_MANIFEST, read_manifest  # noqa: E402

#: log records whose steps_per_s make a run's rate
RECENT = 20


def progress(run_dir: Path) -> tuple[int, float | None]:
    """The last logged step of a run folder and its recent training rate (steps/s), or ``(0, None)``."""
    log = run_dir / "log.jsonl"
    if not log.is_file():
        return 0, None
    records = []
    for line in log.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:  # a line being written
            continue
        if isinstance(record.get("steps_per_s"), (int, float)):
            records.append(record)
    if not records:
        return 0, None
    return int(records[-1]["step"]), statistics.median(r["steps_per_s"] for r in records[-RECENT:])


def session_precision(run_dir: Path, precision: str) -> str:
    """``precision`` (the run's train.precision), or ``bf16>fp32`` where its latest session trained in
    another one (``sweep run --resume-precision``, recorded in ``execution.jsonl``)."""
    try:
        last = (run_dir / "execution.jsonl").read_text().splitlines()[-1]
        now = json.loads(last).get("precision", precision)
    except (OSError, IndexError, ValueError):
        return precision
    return precision if now == precision else f"{precision}>{now}"


def _records(path: Path) -> list[dict]:
    """The complete JSON lines of a file being appended to (a line being written is left out)."""
    out = []
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("step"), int):
            out.append(record)
    return out


def _machine(record: dict) -> str:
    """The CPU (or GPU) of an ``execution.jsonl`` record: its name with the x86 family/model where the
    trainer recorded it (since 2026-11-29), else the device and torch's CPU capability."""
    if record.get("cpu"):
        return str(record["cpu"])
    if record.get("device", "cpu") != "cpu":
        return str(record.get("device"))
    return f"CPU {record.get('cpu_capability', '?')}"


def spans(run_dir: Path) -> list[dict]:
    """How a run folder was trained: ``{"start", "end", "precision", "machine", "hours", "rate"}`` per
    span of steps that one kind of machine trained in one precision, in order. A session starts at
    the step of its ``execution.jsonl`` record and ends where the next one starts (the last at the
    last logged step); consecutive sessions of the same machine and precision merge. Hours are the
    difference of ``log.jsonl``'s ``wall_time_s`` (the trainer's clock, pauses left out) at the span's
    ends, each read off the last record at or before that step (records every ``log_every`` steps)."""
    sessions = _records(run_dir / "execution.jsonl")
    log = [r for r in _records(run_dir / "log.jsonl") if isinstance(r.get("wall_time_s"), (int, float))]
    if not sessions or not log:
        return []
    last_step = log[-1]["step"]

    def wall(step: int) -> float:
        before = [r["wall_time_s"] for r in log if r["step"] <= step]
        return float(before[-1]) if before else 0.0

    out: list[dict] = []
    for i, record in enumerate(sessions):
        start = record["step"]
        end = sessions[i + 1]["step"] if i + 1 < len(sessions) else last_step
        if end <= start:
            continue
        kind = (record.get("precision", "?"), _machine(record))
        if out and (out[-1]["precision"], out[-1]["machine"]) == kind and out[-1]["end"] == start:
            out[-1]["end"] = end
        else:
            out.append({"start": start, "end": end, "precision": kind[0], "machine": kind[1]})
    for span in out:
        seconds = wall(span["end"]) - wall(span["start"])
        span["hours"] = seconds / 3600
        span["rate"] = (span["end"] - span["start"]) / seconds if seconds > 0 else None
    return out


def run_state(state: str, config: dict, published: set[str]) -> str:
    """``published`` where the zoo holds the run under its CPU or GPU name, whether its folder is
    here (finished, or even partial: a twin published from elsewhere) or not; else the sweep's state."""
    return "published" if {zoo_name(config, hw) for hw in ("cpu", "gpu")} & published else state


def rows(campaign: Path) -> list[dict]:
    out = []
    published = set(read_manifest(SHIPPED_MANIFEST)["models"])
    for sweep in SWEEPS:
        folder = campaign / sweep
        try:
            states = {r.run_id: str(r.state) for r in api.status(folder).runs}
        except ConfigError:  # a sweep the lanes have not reached: no plan, no runs
            states = {}
        for run in load_sweep(sweep).runs:
            config = run.config
            step, rate = progress(folder / "runs" / run.run_id)
            state = run_state(states.get(run.run_id, "not started"), config, published)
            if state == "published":
                step, rate = int(config["train"]["steps"]), None
            out.append({"sweep": sweep, "run_id": run.run_id, "zoo": zoo_name(config, "cpu"),
                        "objective": config["objective"]["name"],
                        "seed": config["seed"],
                        "precision": session_precision(folder / "runs" / run.run_id, config["train"]["precision"]),
                        "steps": int(config["train"]["steps"]), "state": state,
                        "step": step, "rate": rate, "source": "log" if rate else ""})
    return out


def total_hours(table: list[dict]) -> float:
    """The thread-hours left over the runs with a rate; twins (one model in two precisions, one zoo
    name: zoo_sprites_ref300k_factor_fp32.yaml) count once, the nearer of the two."""
    least: dict[str, float] = {}
    for row in table:
        left = hours_left(row)
        if left is not None:
            key = row.get("zoo") or row["run_id"]
            least[key] = min(left, least.get(key, left))
    return sum(least.values())


def zoo_rates() -> dict[str, float]:
    """Steps/s of the zoo's 20,000-step reference-init sprites models, by objective (mean over seeds)."""
    by_objective: dict[str, list[float]] = {}
    for name in zoo.names(pretrained=True):
        if "-sprites-" not in name or "-cpu20k-ref-" not in name:
            continue
        info = zoo.info(name)
        wall = info.get("wall_time_s")
        if wall:
            by_objective.setdefault(info["config"]["objective"]["name"], []).append(info["trained_steps"] / wall)
    return {objective: statistics.mean(values) for objective, values in by_objective.items()}


def fill_rates(table: list[dict]) -> None:
    """Give each unfinished run without a rate of its own the best guess of the module docstring."""
    seen: dict[tuple[str, str], list[float]] = {}
    for row in table:
        if row["rate"] and row["state"] not in ("finished", "published"):
            seen.setdefault((row["objective"], row["precision"]), []).append(row["rate"])
    guesses = None
    for row in table:
        if row["rate"] or row["state"] in ("finished", "published"):
            continue
        kind = (row["objective"], row["precision"])
        if kind in seen:
            row["rate"], row["source"] = statistics.median(seen[kind]), "campaign"
            continue
        guesses = zoo_rates() if guesses is None else guesses
        if row["objective"] in guesses:
            row["rate"], row["source"] = guesses[row["objective"]], "zoo"


def hours_left(row: dict) -> float | None:
    if row["state"] in ("finished", "published"):
        return 0.0
    return None if not row["rate"] else (row["steps"] - row["step"]) / row["rate"] / 3600


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    show_spans = "--sessions" in args
    args = [a for a in args if a != "--sessions"]
    campaign = Path(args[0]).expanduser() if args else Path.home() / "campaign300k"
    table = rows(campaign)
    fill_rates(table)
    print(f"{'sweep':30} {'run':16} {'objective':12} {'seed':>4} {'precision':9} {'state':11} {'step':>8} "
          f"{'steps/s':>12} {'h left':>6}")
    unknown, total = [], 0.0
    total = total_hours(table)
    for row in table:
        left = hours_left(row)
        if left is None:
            unknown.append(f"{row['objective']} s{row['seed']}")
        rate = f"{row['rate']:.1f} {row['source']}" if row["rate"] and row["state"] not in ("finished", "published") else "-"
        print(f"{row['sweep']:30} {row['run_id']:16} {row['objective']:12} {row['seed']:>4} {row['precision']:9} "
              f"{row['state']:11} {row['step']:>8,} {rate:>12} {'-' if left is None else f'{left:.1f}':>6}")
    counts: dict[str, int] = {}
    for row in table:
        counts[row["state"]] = counts.get(row["state"], 0) + 1
    print(", ".join(f"{n} {s}" for s, n in counts.items()) + f"; about {total:.0f} thread-hours left"
          + (f", plus {len(unknown)} runs with no rate to go by ({', '.join(unknown)})" if unknown else "")
          + " (twins of one zoo name counted once)")
    waiting = [f"{r['objective']} s{r['seed']}" for r in table
               if r["precision"] == "bf16" and r["state"] not in ("finished", "published")]
    if waiting and not native_cpu_bf16():
        print(f"This CPU has no native bf16 ({cpu_capability()}): its lanes train the fp32 runs only, and "
              f"{len(waiting)} bf16 runs wait for a machine with it ({', '.join(waiting)}), or train here "
              f"as their fp32 twins where they have one (zoo_sprites_ref300k_factor_fp32).")
    if show_spans:
        print_spans(campaign, table)
    return 0


def print_spans(campaign: Path, table: list[dict]) -> None:
    """Each run folder's spans (:func:`spans`), and the training hours of the published runs whose
    folders are elsewhere (their zoo record's wall time and the CPU it was published on)."""
    print("\nhow each run was trained (steps, precision, machine, hours of training, steps/s):")
    models = read_manifest(SHIPPED_MANIFEST)["models"]
    for row in table:
        run_dir = campaign / row["sweep"] / "runs" / row["run_id"]
        found = spans(run_dir)
        name = f"{row['objective']} s{row['seed']} ({row['sweep']} {row['run_id']})"
        if found:
            total = sum(s["hours"] for s in found)
            print(f"{name}: {found[-1]['end']:,} steps, {total:.2f} h")
            for s in found:
                rate = f"{s['rate']:.1f}" if s["rate"] else "-"
                print(f"    {s['start']:>7,}-{s['end']:>7,}  {s['precision']:5} {s['machine']:36} "
                      f"{s['hours']:6.2f} h {rate:>6} steps/s")
        elif row["state"] == "published":
            record = next((models[n] for n in (row["zoo"], row["zoo"].replace("-cpu300k-", "-gpu300k-"))
                           if n in models), {})
            machine = record.get("machine", {})
            hours = (record.get("wall_time_s") or 0) / 3600
            print(f"{name}: published, {record.get('trained_steps', 0):,} steps, {hours:.2f} h; published on "
                  f"{machine.get('cpu', '?')} ({machine.get('cpu_capability', '?')}); its folder is on the "
                  f"machine that trained it")


if __name__ == "__main__":
    sys.exit(main())
