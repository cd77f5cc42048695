"""Time to disentangle: MIG against training steps for each objective, from a sweep's logged curves.

    python benchmarks/time_to_disentangle.py ~/zoo-campaign/cpu20k_fp32 ~/zoo-campaign/zoo_sprites_cpu20k ~/zoo-campaign/extended
    python benchmarks/time_to_disentangle.py SWEEP_DIR [SWEEP_DIR ...] --out benchmarks/time_to_disentangle

Reads every run folder of one or more sweeps (``SWEEP_DIR/runs/<id>/``) trained with ``train.eval_every`` and
``mig`` in ``train.eval_metrics``: the MIG logged during training (``{"step": s, "metrics":
{"mig": ...}}`` lines of ``log.jsonl``), the final MIG of ``metrics.json`` when the run is finished,
the training speed (median of the logged ``steps_per_s``, which leaves out the evaluations) and the
cumulative wall time (``wall_time_s``, evaluations included). Writes ``OUT.png`` (one curve per run)
and ``OUT.md`` (the table, with the CPU, its torch capability and the precision of each run), and
prints the table. Nothing is trained here: this reads what the sweep wrote.

The MIG of the curves is the one computed during training (``mig`` at its defaults, seeded by the
run's seed): the final point equals ``metrics.json``'s MIG when both use the same settings.
"""
from __future__ import annotations

import argparse
import functools
import json
import statistics
import sys
from pathlib import Path

import yaml


def read_run(run_dir: Path) -> dict | None:
    """One run's curve and provenance, or None when it logged no MIG."""
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    curve: list[tuple[int, float]] = []
    speeds: list[float] = []
    wall_at: dict[int, float] = {}
    for line in (run_dir / "log.jsonl").read_text().splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        if "metrics" in record and "mig" in record["metrics"]:
            curve.append((int(record["step"]), float(record["metrics"]["mig"]["mig"])))
        if "steps_per_s" in record:
            speeds.append(float(record["steps_per_s"]))
        if "wall_time_s" in record:
            wall_at[int(record["step"])] = float(record["wall_time_s"])
    if not curve:
        return None
    # a resumed run logs the steps after its checkpoint again: keep the last value of each step
    curve = sorted(dict(curve).items())
    final = None
    metrics_file = run_dir / "metrics.json"
    if metrics_file.exists():
        scores = json.loads(metrics_file.read_text())
        scores = scores.get("metrics", scores)
        if "mig" in scores:
            final = float(scores["mig"]["mig"])
    objective = config["objective"]
    strength = _strength(objective)
    return {
        "run": run_dir.name,
        "objective": objective["name"],
        "strength": strength,
        "seed": config.get("seed", 0),
        "precision": config["train"]["precision"],
        "init": (config.get("model") or {}).get("init", "pytorch"),  # runs from before model.init: PyTorch's
        "steps": int(config["train"]["steps"]),
        "curve": curve,
        "final_mig": final,
        "steps_per_s": statistics.median(speeds) if speeds else None,
        "wall_time_s": wall_at[max(wall_at)] if wall_at else None,
        "last_step": max(wall_at) if wall_at else 0,
    }


def _strength_parameter(objective_name: str) -> str | None:
    """The zoo's strength parameter of an objective (``c_max`` for AnnealedVAE, not its ``gamma``)."""
    from disentangle.zoo.recipes import FAMILIES

    for family in FAMILIES:
        if objective_name in family.parameter:
            return family.parameter[objective_name]
    return None


def _strength(objective: dict) -> str:
    key = _strength_parameter(str(objective.get("name")))
    if key is None or objective.get(key) is None:
        return ""
    value = objective[key]
    value = int(value) if isinstance(value, float) and value.is_integer() else value
    return f"{key.rstrip('_')} {value}"  # lambda_ (a Python keyword dodged) reads as lambda


def drop_continued(runs: list[dict]) -> list[dict]:
    """The runs without those continued elsewhere: a run whose curve is the start of a longer run's
    (a copy resumed with more ``train.steps``) is shown once, as the longer run."""
    def continued(short: dict, long: dict) -> bool:
        return (short is not long and len(short["curve"]) < len(long["curve"])
                and long["curve"][: len(short["curve"])] == short["curve"]
                and all(short[k] == long[k] for k in ("objective", "strength", "seed", "precision")))

    return [r for r in runs if not any(continued(r, other) for other in runs)]


def first_step_reaching(curve: list[tuple[int, float]], level: float) -> int | None:
    """The first logged step whose MIG is at least ``level`` (None if never)."""
    return next((step for step, value in curve if value >= level), None)


def cpu_description() -> str:
    """The CPU model, core count, torch's CPU capability and native bf16 flags of this machine (as
    ``zoo publish`` records them)."""
    import os

    import torch

    from disentangle.zoo.publish import cpu_bf16_flags, cpu_name

    bf16 = cpu_bf16_flags()
    return (f"{cpu_name()}, {os.cpu_count()} cores, torch CPU capability {torch.backends.cpu.get_cpu_capability()}, "
            f"{'native bf16: ' + ', '.join(bf16) if bf16 else 'no native bf16'}")


def table(runs: list[dict]) -> str:
    at_steps = [2000, 10000, 20000] + ([40000] if any(40000 in dict(r["curve"]) for r in runs) else [])
    header = ("| objective | strength | seed | precision | init | steps done | steps/s (1 thread) | wall time | "
              + "".join(f"MIG@{s // 1000}k | " for s in at_steps) + "first step with MIG ≥ 0.1 | final MIG |")
    lines = [header, "|---|---|---:|---|---|---:|---:|---:|" + "---:|" * len(at_steps) + "---:|---:|"]
    for r in runs:
        at = dict(r["curve"])

        def cell(step: int, at: dict = at) -> str:
            return f"{at[step]:.3f}" if step in at else "–"

        reach = first_step_reaching(r["curve"], 0.1)
        reach_text = f"{reach:,}" if reach else "not yet"
        final_text = f"{r['final_mig']:.3f}" if r["final_mig"] is not None else "–"
        lines.append(
            f"| {r['objective']} | {r['strength']} | {r['seed']} | {r['precision']} | {r['init']} | {r['last_step']:,} | "
            f"{r['steps_per_s']:.1f} | {r['wall_time_s'] / 60:.0f} min | " + "".join(f"{cell(s)} | " for s in at_steps)
            + f"{reach_text} | {final_text} |"
        )
    return "\n".join(lines)


@functools.cache  # read each recipe once, not once per run and panel
def recipe_strength(objective_name: str) -> str | None:
    """The strength of the shipped sprites recipe of an objective (``configs/sprites/NAME.yaml`` or
    ``configs/weak/NAME_sprites.yaml``), in the table's ``"key value"`` form; None without a recipe."""
    root = Path(__file__).resolve().parents[1] / "configs"
    for path in (root / "sprites" / f"{objective_name}.yaml", root / "weak" / f"{objective_name}_sprites.yaml"):
        if path.is_file():
            return _strength(yaml.safe_load(path.read_text())["objective"])
    return None


def is_recipe_run(run: dict) -> bool:
    """Seed 0, fp32, at the strength of the objective's shipped recipe: the run of a zoo model."""
    return run["seed"] == 0 and run["precision"] == "fp32" and run["strength"] == recipe_strength(run["objective"])


WIDTH_IN = 8.0
"""The figure's width: the documentation shows it in a ~750-px column, where a figure W inches wide
shows an s-point character about s · 750 / (72 · W) px high; at 8 inches the 8.5-pt legend reads at
11 px. The panels stack one under the other rather than widening the figure."""
DPI = 150


def plot(runs: list[dict], path: Path, title: str) -> None:
    """Two panels, one under the other: the recipe run of each objective, and every run of the
    objectives trained more than once (other seeds thinner, other strengths dashed, bf16 dotted).
    Each panel's legend lies under it, clear of the curves."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    objectives = list(dict.fromkeys(r["objective"] for r in runs))
    colours = plt.get_cmap("tab10" if len(objectives) <= 10 else "tab20")
    repeated = {o for o in objectives if sum(r["objective"] == o for r in runs) > 1}
    panels = [("the zoo's recipes (seed 0, fp32)", [r for r in runs if is_recipe_run(r)]),
              ("seeds, strengths and precision", [r for r in runs if r["objective"] in repeated])]
    panels = [(name, chosen) for name, chosen in panels if chosen]
    axes_in, legend_row_in = 3.4, 0.19  # a panel's plot, and each row of its two-column legend
    heights = [axes_in + 0.9 + legend_row_in * -(-len(chosen) // 2) for _, chosen in panels]
    fig = plt.figure(figsize=(WIDTH_IN, sum(heights) + 0.6), layout="constrained")
    blocks = fig.subfigures(len(panels), 1, squeeze=False, height_ratios=heights)[:, 0]
    axes = []
    for block, (name, chosen) in zip(blocks, panels):
        ax = block.subplots()
        if axes:
            ax.sharey(axes[0])
        axes.append(ax)
        for r in chosen:
            steps, values = zip(*r["curve"])
            seed = r.get("seed", 0)
            other_strength = r["strength"] != recipe_strength(r["objective"])
            style = ":" if r["precision"] != "fp32" else "--" if other_strength else "-"
            details = [d for d in (r["strength"], r["precision"], f"seed {seed}" if seed else "") if d]
            label = f"{r['objective']} ({', '.join(details)})"
            ax.plot(steps, values, style, color=colours(objectives.index(r["objective"])), marker="o", markersize=3,
                    linewidth=1.0 if seed else 1.8, alpha=0.75 if seed else 1.0, label=label)
        ax.set_xlabel("training step (batch 64)", fontsize=9)
        ax.set_ylabel("MIG", fontsize=9)
        ax.tick_params(labelsize=8.5)
        ax.grid(alpha=0.3)
        ax.set_title(name, fontsize=10.5)
        block.legend(*ax.get_legend_handles_labels(), loc="outside lower center", ncol=2, fontsize=8.5,
                     frameon=False)
    top = max(value for _, chosen in panels for r in chosen for _, value in r["curve"])
    axes[0].set_ylim(0, top * 1.05)  # shared: set once every panel is drawn
    fig.suptitle(title, fontsize=10)
    fig.savefig(path, dpi=DPI, facecolor="white", bbox_inches="tight", pad_inches=0.1)
    plt.close(fig)


def _shown(path: str | Path) -> str:
    """``path`` as a reader would type it: under the home folder as ``~/...``."""
    path, home = Path(path).expanduser().resolve(), Path.home().resolve()
    return f"~/{path.relative_to(home).as_posix()}" if path.is_relative_to(home) else str(path)


def parse_sweep_dirs(argv: list[str] | None, description: str, default_out: Path) -> argparse.Namespace | None:
    """``SWEEP_DIR ... [--out PREFIX]`` of a script that reads sweeps' run folders; None (after saying
    why on stderr) when a folder has no ``runs/``. ``args.default_out`` is the default prefix."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("sweep_dirs", type=Path, nargs="+", metavar="SWEEP_DIR")
    parser.add_argument("--out", type=Path, default=default_out,
                        help=f"output prefix: OUT.png and OUT.md (default: benchmarks/{default_out.name})")
    args = parser.parse_args(argv)
    args.default_out = default_out
    for sweep_dir in args.sweep_dirs:
        runs_dir = sweep_dir.expanduser() / "runs"
        if not runs_dir.is_dir():
            print(f"{runs_dir} is not a sweep's runs folder: pass the folder given to `sweep run --out`.", file=sys.stderr)
            return None
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_sweep_dirs(argv, __doc__.split("\n\n")[0], Path(__file__).with_name("time_to_disentangle"))
    if args is None:
        return 2
    runs = []
    for sweep_dir in args.sweep_dirs:
        runs_dir = sweep_dir.expanduser() / "runs"
        runs += [r for d in sorted(runs_dir.iterdir()) if (d / "log.jsonl").exists() and (r := read_run(d))]
    if not runs:
        print("no run of these sweeps logged MIG during training (train.eval_metrics: [mig]).", file=sys.stderr)
        return 2
    runs = drop_continued(runs)
    runs.sort(key=lambda r: -(r["curve"][-1][1]))
    cpu = cpu_description()
    text = table(runs)
    note = (f"CPU: {cpu}. One torch thread per run, two runs side by side. steps/s is the median of the "
            f"logged training speed (evaluations left out); the wall time includes the MIG evaluations "
            f"every 2,000 steps.")
    print(text)
    print()
    print(note)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".md").write_text(
        f"# Time to disentangle\n\n`python benchmarks/time_to_disentangle.py {' '.join(_shown(d) for d in args.sweep_dirs)}"
        f"{'' if args.out.resolve() == args.default_out.resolve() else f' --out {args.out.as_posix()}'}`\n\n{text}\n\n{note}\n"
    )
    plot(runs, args.out.with_suffix(".png"), f"MIG during training, sprites, conv64, batch 64, Adam 1e-4\n{cpu}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
