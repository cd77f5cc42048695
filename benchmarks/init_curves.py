"""Time to disentangle with both layer initialisations: MIG against training steps of the
``model.init: reference`` runs of one or more sweeps, beside the PyTorch-init runs of the same
objective and strength.

    python benchmarks/init_curves.py ~/init-ab/beta_vae ~/init-ab/beta_tcvae ~/init-ab/annealed_vae
    python benchmarks/init_curves.py SWEEP_DIR [SWEEP_DIR ...] --out benchmarks/init_curves

Reads every run folder of the sweeps (``SWEEP_DIR/runs/<id>/``) trained in fp32 with ``model.init:
reference`` (runs without the key, or with ``pytorch``, are left out): the MIG logged during training,
read by ``time_to_disentangle.read_run``. The PyTorch-init runs' folders are gone; what is left of
them is MIG at 2,000 / 10,000 / 20,000 steps in the fp32 rows of ``benchmarks/time_to_disentangle.md``
(read by ``init_ab._shipped_curves``), matched to the reference runs by objective and strength.

Writes ``OUT.png`` (one panel per objective and strength: a thin line per reference-init seed, the
PyTorch-init seeds as markers joined by dashed lines) and ``OUT.md`` (per objective, strength and
init: the seeds and MIG at 2k / 10k / 20k as mean ± sd over the seeds, sd with n − 1), and prints
the table. Nothing is trained here.
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import yaml

if str(Path(__file__).resolve().parent) not in sys.path:  # the sibling scripts, also when a test loads this file
    sys.path.insert(0, str(Path(__file__).resolve().parent))
from init_ab import _shipped_curves  # noqa: E402
from s2_vs_twin import _mean_sd  # noqa: E402  (the 'mean ± sd (n = …)' cells of the other reports)
from time_to_disentangle import _shown, cpu_description, drop_continued, parse_sweep_dirs, read_run  # noqa: E402

STEPS = (2000, 10000, 20000)
"""The steps of the table: those at which ``time_to_disentangle.md`` keeps the PyTorch-init MIG."""
INITS = ("reference", "pytorch")
PAD_IN = 0.1  # disentangle.study.figures._save's pad_inches, on each side of the picture


def _strength_value(label: str) -> float | None:
    """``"beta 4"`` -> 4.0 (the table's and ``read_run``'s ``"key value"`` form); None without one."""
    try:
        return float(label.split()[-1])
    except (IndexError, ValueError):
        return None


def reference_runs(sweep_dirs: list[Path]) -> list[dict]:
    """The fp32 ``model.init: reference`` runs of the sweeps that logged MIG, as ``read_run`` reads them,
    with ``init`` and ``strength_value`` added; a run resumed elsewhere with more steps counts once."""
    runs = []
    for sweep_dir in sweep_dirs:
        for run_dir in sorted((Path(sweep_dir).expanduser() / "runs").iterdir()):
            if not ((run_dir / "config.yaml").is_file() and (run_dir / "log.jsonl").is_file()):
                continue
            config = yaml.safe_load((run_dir / "config.yaml").read_text())
            if (config.get("model") or {}).get("init") != "reference":
                continue
            try:
                run = read_run(run_dir)
            except json.JSONDecodeError:  # a run still training, caught in the middle of writing a line
                print(f"{run_dir}: its log.jsonl ends in a half-written line; left out, run again", file=sys.stderr)
                continue
            if run is not None and run["precision"] == "fp32":
                runs.append({**run, "init": "reference", "strength_value": _strength_value(run["strength"])})
    return drop_continued(runs)


def pytorch_points() -> list[dict]:
    """The PyTorch-init fp32 runs of ``time_to_disentangle.md``: objective, strength value, seed and the
    ``(step, MIG)`` points the table gives (2k / 10k / 20k; a "–" cell gives none)."""
    return [{"init": "pytorch", "objective": objective, "strength_value": strength, "seed": seed,
             "curve": sorted(values.items())}
            for (objective, strength, seed), values in _shipped_curves().items()]


def groups(reference: list[dict], pytorch: list[dict]) -> list[dict]:
    """One group per objective and strength of the reference runs (sorted by both), with its runs of each
    init, seeds in order; PyTorch-init runs of other objectives or strengths are left out."""
    keys = sorted({(r["objective"], r["strength_value"]) for r in reference},
                  key=lambda k: (k[0], k[1] if k[1] is not None else float("-inf")))
    out = []
    for objective, value in keys:
        members = {init: sorted((r for r in runs if r["objective"] == objective and r["strength_value"] == value),
                                key=lambda r: r["seed"])
                   for init, runs in zip(INITS, (reference, pytorch))}
        label = next(r["strength"] for r in members["reference"])
        out.append({"objective": objective, "strength": label, "strength_value": value, "runs": members})
    return out


def summary_rows(reference: list[dict], pytorch: list[dict], steps: tuple[int, ...] = STEPS) -> list[dict]:
    """Per objective, strength and init: the seeds, and at each step the MIG of the seeds that logged it
    (``values``), their mean and their sd (n − 1; None for fewer than two values, the mean None for none)."""
    rows = []
    for group in groups(reference, pytorch):
        for init in INITS:
            runs = group["runs"][init]
            values = {step: [dict(r["curve"])[step] for r in runs if step in dict(r["curve"])] for step in steps}
            rows.append({
                "objective": group["objective"], "strength": group["strength"], "init": init,
                "seeds": [r["seed"] for r in runs], "values": values,
                "mean": {s: statistics.mean(v) if v else None for s, v in values.items()},
                "sd": {s: statistics.stdev(v) if len(v) > 1 else None for s, v in values.items()},
            })
    return rows


def markdown_table(rows: list[dict]) -> str:
    steps = list(rows[0]["values"]) if rows else list(STEPS)
    lines = ["| objective | strength | init | seeds | " + "".join(f"MIG@{s // 1000}k | " for s in steps).rstrip(),
             "|---|---|---|---|" + "---:|" * len(steps)]
    for row in rows:
        seeds = ", ".join(str(s) for s in row["seeds"]) or "none"
        lines.append(f"| {row['objective']} | {row['strength']} | {row['init']} | {seeds} | "
                     + " | ".join(_mean_sd(row["values"][s]) for s in steps) + " |")
    return "\n".join(lines)


def draw_figure(reference: list[dict], pytorch: list[dict], title: str):
    """The small multiples, one panel per objective and strength (at most four to a row), as a Figure."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.lines import Line2D

    from disentangle.study.figures import (
        LABEL_PT,
        MAX_WIDTH_IN,
        SHARE_COLORS,
        SUPTITLE_PT,
        TICK_PT,
        TITLE_PT,
        _new_figure,
        _wrap,
        pretty_method,
    )

    colour = dict(zip(INITS, SHARE_COLORS))  # the study figures' blue and orange
    panels = groups(reference, pytorch)
    n_rows, n_cols = _wrap(len(panels), 4)
    fig = _new_figure(min(MAX_WIDTH_IN - 2 * PAD_IN, 1.0 + 2.4 * n_cols), 2.4 * n_rows + 1.1)
    axes = fig.subplots(n_rows, n_cols, squeeze=False)
    for i, ax in enumerate(axes.flat):
        if i >= len(panels):
            ax.set_visible(False)
            continue
        panel = panels[i]
        for run in panel["runs"]["reference"]:
            steps, values = zip(*run["curve"])
            ax.plot([s / 1000 for s in steps], values, "-", color=colour["reference"], linewidth=1.1, alpha=0.85)
        for run in panel["runs"]["pytorch"]:
            if run["curve"]:
                steps, values = zip(*run["curve"])
                ax.plot([s / 1000 for s in steps], values, "--", color=colour["pytorch"], linewidth=1.0,
                        marker="o", markersize=4)
        shown = [v for init in INITS for r in panel["runs"][init] for _, v in r["curve"]]
        ax.set_ylim(0, max(0.05, 1.1 * max(shown)))  # at least 0.05: noise-level MIG is not blown up
        ax.set_xlim(0, max(s for init in INITS for r in panel["runs"][init] for s, _ in r["curve"]) / 1000 * 1.03)
        missing = "" if panel["runs"]["pytorch"] else "\n(no PyTorch-init run)"
        ax.set_title(f"{pretty_method(panel['objective'])}, {panel['strength']}{missing}", fontsize=TITLE_PT)
        ax.tick_params(labelsize=TICK_PT)
        ax.grid(alpha=0.3)
        if i % n_cols == 0:
            ax.set_ylabel("MIG", fontsize=LABEL_PT)
        if i + n_cols >= len(panels):  # the lowest panel of its column
            ax.set_xlabel("training step (thousands)", fontsize=LABEL_PT)
    handles = [Line2D([], [], color=colour["reference"], linewidth=1.1, label="reference init: one line per seed"),
               Line2D([], [], color=colour["pytorch"], linestyle="--", marker="o", markersize=4,
                      label="PyTorch init: one dashed line per seed")]
    fig.legend(handles=handles, loc="outside lower center", ncol=2, fontsize=LABEL_PT, frameon=False)
    fig.suptitle(title, fontsize=SUPTITLE_PT)
    return fig


def plot(reference: list[dict], pytorch: list[dict], path: Path, title: str) -> None:
    from disentangle.study.figures import _save

    _save(draw_figure(reference, pytorch, title), path)


def main(argv: list[str] | None = None) -> int:
    args = parse_sweep_dirs(argv, __doc__.split("\n\n")[0], Path(__file__).with_name("init_curves"))
    if args is None:
        return 2
    reference = reference_runs(args.sweep_dirs)
    if not reference:
        print("no fp32 run with model.init: reference of these sweeps logged MIG during training.", file=sys.stderr)
        return 2
    pytorch = pytorch_points()
    text = markdown_table(summary_rows(reference, pytorch))
    cpu = cpu_description()
    note = (f"Reference init: the fp32 `model.init: reference` runs of the sweeps, MIG logged every 2,000 steps. "
            f"PyTorch init: the fp32 rows of the same objective and strength in `benchmarks/time_to_disentangle.md` "
            f"(their run folders are gone), MIG at 2k / 10k / 20k. Cells: mean ± sd over the seeds that reached the "
            f"step (sd with n − 1), \"–\" where none did.\n\nCPU: {cpu}.")
    print(text)
    print()
    print(note)
    command = (f"python benchmarks/init_curves.py {' '.join(_shown(d) for d in args.sweep_dirs)}"
               f"{'' if args.out.resolve() == args.default_out.resolve() else f' --out {args.out.as_posix()}'}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".md").write_text(
        f"# Time to disentangle: reference against PyTorch layer initialisation\n\n`{command}`\n\n{text}\n\n{note}\n")
    plot(reference, pytorch, args.out.with_suffix(".png"),
         "MIG during training: reference against PyTorch layer initialisation\n"
         "sprites, conv64, batch 64, Adam 1e-4, fp32")
    return 0


if __name__ == "__main__":
    sys.exit(main())
