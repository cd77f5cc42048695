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
    return 0


if __name__ == "__main__":
    sys.exit(main())
