"""Trajectories of the 300,000-step campaign (``configs/sweeps/zoo_sprites_ref300k.yaml``, then
``zoo_sprites_ref300k_more.yaml`` and ``zoo_sprites_ref300k_ada_seeds.yaml``): how MIG, DCI, the
FactorVAE score and the position code evolve over the published schedule.

    python benchmarks/trajectories_300k.py ~/campaign300k/zoo_sprites_ref300k* --milestones ~/campaign300k/milestones
    python benchmarks/trajectories_300k.py --from-data            # figure and tables from the committed data only

Reads, per run of each sweep folder given:

* ``log.jsonl``'s evaluations (MIG and DCI every 10,000 steps, logged by the trainer: 10,000 and
  5,000 points, the metrics' defaults, the run's seed);
* the zoo's record of each published model of the campaign (the final row of a run whose folder is
  not here: trained on another machine);
* the checkpoints kept at milestone steps (``benchmarks/campaign_milestones.py``, or the
  ``keep_checkpoints`` callback's ``<run>/milestones/step_N``; the watcher keeps every 10,000th
  step) and the run's final one, on which it computes what the trainer does not log: on the
  checkpoints of the table's steps (``--factor-vae-at all``: on every one) the FactorVAE score (the
  metric's defaults; it encodes the whole grid once, minutes on a CPU thread), and on every one,
  from MIG's 10,000 points (seconds), the position code of ``benchmarks/position_basis.py`` (MIG after the best rotation of the plane of the two
  position latents, and that angle), the number of latents carrying position: latents whose
  mutual information with the x or the y position is at least :data:`CARRIES` of that factor's
  entropy (histogram estimator, 20 bins, as MIG), and the number of active latents, whose posterior
  mean varies over the data (Burda et al. 2016's active units: Var_x E_q(z|x)[z_j] > 0.01, ``position_code.active_latents``),
  which tells a collapsed code (fewer active latents than factors) from a split one.

Writes ``benchmarks/campaign300k/trajectories.csv`` (one row per run and step; the milestone
scores are cached there, so a rerun computes only new milestones), ``benchmarks/trajectories_300k.png``
(MIG and DCI against steps, one panel per objective, seeds as lines, the range of published MIGs
as a band where the README quotes one) and ``benchmarks/trajectories_300k.md`` (mean ± sd over seeds at 20k, 100k, 200k, 300k).
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import sys
import textwrap
from collections.abc import Callable, Collection
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from position_code import active_latents  # noqa: E402

sys.path.insert(0, str(HERE / "campaign300k"))
from publish import precision_spans  # noqa: E402

DATA = HERE / "campaign300k" / "trajectories.csv"
FIGURE = HERE / "trajectories_300k.png"
TABLE = HERE / "trajectories_300k.md"
#: a latent carries a position factor when I(z; factor) >= CARRIES * H(factor)
CARRIES = 0.1
TABLE_STEPS = (20_000, 100_000, 200_000, 300_000)
#: the campaign's evaluation interval (``train.eval_every``)
EVAL_EVERY = 10_000
#: the published dSprites MIG of these recipes that the README compares the zoo with (Locatello et al.
#: 2019, roughly 0.2-0.3): the band drawn on the figure
PUBLISHED_MIG = {"beta_vae": (0.2, 0.3), "beta_tcvae": (0.2, 0.3), "factor_vae": (0.2, 0.3)}
COLUMNS = ["run_id", "objective", "seed", "precision", "step", "mig", "dci_disentanglement", "dci_completeness",
           "dci_informativeness", "factor_vae_score", "mig_rotated", "rotation_degrees", "position_latents",
           "active_latents"]
#: the columns that hold counts: read back as ``int``, so that a rewrite keeps ``76``, not ``76.0``
INTEGER_COLUMNS = ("seed", "step", "rotation_degrees", "position_latents", "active_latents")
#: the columns computed on a kept checkpoint (milestone_scores)
MILESTONE_COLUMNS = ("factor_vae_score", "mig_rotated", "rotation_degrees", "position_latents", "active_latents")
#: the cheap ones (code_scores: seconds), computed on every kept checkpoint
CODE_COLUMNS = MILESTONE_COLUMNS[1:]


def _float(value) -> float | None:
    return None if value in (None, "") or (isinstance(value, float) and math.isnan(value)) else float(value)


def _cell(column: str, value):
    """A CSV cell read back: text for the names, ``int`` for the counts, ``float`` for the scores."""
    if column in ("run_id", "objective", "precision"):
        return value
    number = _float(value)
    return int(number) if number is not None and column in INTEGER_COLUMNS else number


def precision_before(run: Path, precision: str) -> Callable[[int], str]:
    """``step -> the precisions that trained the run up to step``: the run's ``precision``, or e.g.
    ``bf16>fp32`` past the step a session began in fp32 (the sessions of ``execution.jsonl``, as
    ``campaign300k/publish.py``'s :func:`precision_spans` reads them; ``sweep run --resume-precision``)."""
    path = run / "execution.jsonl"
    # the last session open-ended (it may be training now): an end of 0 would drop it as one that
    # trained no step, and the rows past its first step would not say it switched
    spans = precision_spans(path.read_text().splitlines() if path.exists() else [], 2**62)

    def before(step: int) -> str:
        chain = [precision]
        for used, began, _ in spans:
            if began < step and used != chain[-1]:
                chain.append(used)
        return ">".join(chain)

    return before


def logged_rows(run: Path) -> list[dict]:
    """One row per evaluation the trainer logged (MIG, DCI)."""
    import yaml

    config = yaml.safe_load((run / "config.yaml").read_text())
    trained_in = precision_before(run, config["train"]["precision"])
    rows = []
    for line in (run / "log.jsonl").read_text().splitlines():
        record = json.loads(line)
        metrics = record.get("metrics") or {}
        if "mig" not in metrics:
            continue
        dci = metrics.get("dci") or {}
        rows.append({
            "run_id": run.name, "objective": config["objective"]["name"], "seed": config["seed"],
            "precision": trained_in(record["step"]), "step": record["step"],
            "mig": metrics["mig"]["mig"], "dci_disentanglement": dci.get("disentanglement"),
            "dci_completeness": dci.get("completeness"), "dci_informativeness": dci.get("informativeness_test"),
            # logged where the run evaluated it (the campaign's first 10,000 steps did)
            "factor_vae_score": (metrics.get("factor_vae_score") or {}).get("eval_accuracy"),
        })
    return rows


def _sample_codes(model, dataset, seed: int):
    from disentangle.metrics._representation import as_representation_function
    from disentangle.metrics._sampling import sample_codes_and_factors

    return sample_codes_and_factors(dataset, as_representation_function(model), 10_000, np.random.default_rng(seed))


def _load(run_dir: Path | str, device: str):
    import disentangle
    from disentangle.data import build_dataset

    model = disentangle.load(run_dir, map_location=device)
    return model, build_dataset(model.config["data"])


def code_scores(run_dir: Path | str, seed: int, device: str = "cpu") -> dict:
    """The position code and the active latents of the checkpoint in ``run_dir`` (a run or
    milestone folder, or ``"zoo:NAME"``), from MIG's 10,000 points (encoded once; seconds on a
    CPU thread): the columns of :data:`CODE_COLUMNS` and ``step`` (module docstring)."""
    from position_basis import POSITIONS, position_basis

    from disentangle.metrics._information import discrete_entropy, discrete_mutual_info, histogram_discretize

    model, dataset = _load(run_dir, device)
    codes, factors = _sample_codes(model, dataset, seed)
    basis = position_basis(model, dataset, seed=seed, sample=(codes, factors))
    names = list(dataset.factor_names)
    carried = set()
    for name in POSITIONS:
        k = names.index(name)
        mi = discrete_mutual_info(histogram_discretize(codes, 20), factors[:, [k]])[:, 0]
        carried |= set(np.flatnonzero(mi >= CARRIES * discrete_entropy(factors[:, [k]])[0]).tolist())
    return {"step": int(model.trained_steps), "mig_rotated": basis["mig_rot"], "rotation_degrees": basis["theta"],
            "position_latents": len(carried), "active_latents": active_latents(codes)}


def factor_vae_score_of(run_dir: Path | str, seed: int, device: str = "cpu") -> dict:
    """The FactorVAE score (eval accuracy, the metric's defaults: it encodes the whole grid once,
    minutes on a CPU thread) of the checkpoint in ``run_dir``, and its ``step``."""
    from disentangle.metrics import evaluate_metrics

    model, dataset = _load(run_dir, device)
    scores = evaluate_metrics(dataset, model, ["factor_vae_score"], seed=seed)
    return {"step": int(model.trained_steps), "factor_vae_score": scores["factor_vae_score"]["eval_accuracy"]}


def milestone_scores(run_dir: Path | str, seed: int, device: str = "cpu", factor_vae: bool = True) -> dict:
    """What a kept checkpoint adds to its row: :func:`code_scores`, and :func:`factor_vae_score_of`
    when ``factor_vae``."""
    scores = code_scores(run_dir, seed, device)
    if factor_vae:
        scores.update(factor_vae_score_of(run_dir, seed, device))
    return scores


def missing_scores(row: dict, step: int, factor_vae_steps: Collection[int] | None) -> tuple[bool, bool]:
    """``(code, factor_vae)``: whether a row still lacks the :data:`CODE_COLUMNS`, and whether it
    lacks a FactorVAE score that is due at ``step`` (every step when ``factor_vae_steps`` is None)."""
    code = any(row.get(column) is None for column in CODE_COLUMNS)
    due = factor_vae_steps is None or step in factor_vae_steps
    return code, due and row.get("factor_vae_score") is None


def read_data() -> list[dict]:
    if not DATA.exists():
        return []
    with DATA.open() as f:
        return [{k: _cell(k, v) for k, v in row.items()} for row in csv.DictReader(f)]


def write_data(rows: list[dict]) -> None:
    DATA.parent.mkdir(parents=True, exist_ok=True)
    rows = sorted(rows, key=lambda r: (r["objective"], int(r["seed"]), int(r["step"])))
    tmp = DATA.with_suffix(".tmp")
    with tmp.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: row.get(k) for k in COLUMNS})
    tmp.replace(DATA)


#: the zoo names of the campaign's published models carry this
CAMPAIGN_TAG = "-cpu300k-"


def published_rows(records: dict[str, dict]) -> dict[str, dict]:
    """The final row of each of the campaign's published models (zoo name -> row), from its manifest
    record: MIG and DCI are the zoo's evaluation of the final weights, which is the trainer's last
    logged evaluation (same metrics, defaults and seed: ``metrics_seed`` is the run's seed), so a run
    whose folder and log went with the machine that trained it still has its 300,000-step row. The
    run id is the last part of the run's ``train.out_dir``."""
    rows = {}
    for name, record in records.items():
        config = record.get("config") or {}
        metrics = record.get("metrics") or {}
        out_dir = (config.get("train") or {}).get("out_dir")
        if CAMPAIGN_TAG not in name or not out_dir or "mig" not in metrics or not record.get("trained_steps"):
            continue
        dci = metrics.get("dci") or {}
        rows[name] = {"run_id": Path(out_dir).name, "objective": config["objective"]["name"],
                      "seed": int(config["seed"]), "precision": config["train"].get("precision"),
                      "step": int(record["trained_steps"]), "mig": metrics["mig"]["mig"],
                      "dci_disentanglement": dci.get("disentanglement"),
                      "dci_completeness": dci.get("completeness"),
                      "dci_informativeness": dci.get("informativeness_test")}
    return rows


def _zoo_records() -> dict[str, dict]:
    from disentangle.zoo import manifest

    return {name: entry.record for name, entry in manifest.entries().items()}


def collect(sweeps: Path | list[Path], milestones: Path | None, device: str = "cpu",
            zoo: dict[str, dict] | None = None,
            factor_vae_steps: Collection[int] | None = TABLE_STEPS) -> list[dict]:
    """Rows of every run of the sweep folders, with the cached milestone scores and the new ones
    computed, and the final rows of the published models in ``zoo`` (manifest records by name,
    :func:`published_rows`). Every kept checkpoint gets :func:`code_scores`; the FactorVAE score
    (minutes each on a CPU) only at ``factor_vae_steps`` (default the table's steps; ``None``: at
    every kept checkpoint). Rows already in the data whose run is in none of the folders (a run
    trained on another machine, a GPU's) are kept as they are."""
    sweeps = [sweeps] if isinstance(sweeps, Path) else list(sweeps)
    cached = {(r["run_id"], int(r["step"])): r for r in read_data()}
    # every cached row, those of runs here too: a step a local log no longer holds (a folder
    # restored from a save older than the rows, a log cut back on resume) keeps its milestone scores
    rows: dict[tuple[str, int], dict] = dict(cached)
    runs = [run for sweep in sweeps for run in sorted((sweep / "runs").glob("*"))]
    for run in runs:
        if not (run / "log.jsonl").exists():
            continue
        for row in logged_rows(run):
            key = (row["run_id"], int(row["step"]))
            old = cached.get(key, {})
            kept = {k: old.get(k) for k in MILESTONE_COLUMNS}
            rows[key] = {**kept, **{k: v for k, v in row.items() if v is not None}}
        # the watcher's copies (benchmarks/campaign_milestones.py), or the keep_checkpoints callback's
        folders = sorted((milestones / run.name).glob("step_*")) if milestones else []
        folders += sorted((run / "milestones").glob("step_*"))
        if (run / "metrics.json").exists():  # finished: its final checkpoint
            folders.append(run)
        first = next((k for k in rows if k[0] == run.name), None)
        if first is None:  # a run that has logged no evaluation yet
            continue
        seed = int(rows[first]["seed"])
        for folder in folders:
            step = int(torch.load(folder / "checkpoint.pt", map_location="cpu", weights_only=True, mmap=True)["step"])
            row = rows.get((run.name, step))
            if row is None:
                continue
            code, factor_vae = missing_scores(row, step, factor_vae_steps)
            if not (code or factor_vae):
                continue
            print(f"scoring {run.name} at step {step:,}" + (" (with the FactorVAE score)" if factor_vae else ""),
                  flush=True)
            if code:
                row.update(code_scores(folder, seed, device))
            if factor_vae:
                row.update(factor_vae_score_of(folder, seed, device))
            write_data(list(rows.values()))  # each milestone is kept as soon as it is scored
    # published runs whose final step no folder here holds (trained on another machine): the zoo's row
    for name, row in published_rows(zoo or {}).items():
        key = (row["run_id"], row["step"])
        if key in rows and rows[key].get("active_latents") is not None:
            continue  # logged here or cached, and scored
        rows[key] = {**row, **rows.get(key, {})}
        print(f"scoring {row['run_id']} at step {row['step']:,} (zoo:{name})", flush=True)
        rows[key].update(milestone_scores(f"zoo:{name}", row["seed"], device))
        write_data(list(rows.values()))
    return list(rows.values())


LABELS = {"beta_vae": "β-VAE (β = 4)", "beta_tcvae": "β-TCVAE (β = 6)", "factor_vae": "FactorVAE (γ = 30)",
          "ada_gvae": "Ada-GVAE (β = 4)", "ada_ml_vae": "Ada-ML-VAE (β = 4)", "dip_vae_i": "DIP-VAE-I (λ_od = 10)",
          "dip_vae_ii": "DIP-VAE-II (λ_od = 10)", "annealed_vae": "AnnealedVAE (C_max = 25)",
          "info_vae": "InfoVAE (λ = 1000)"}
#: panels per row of the figure
COLUMNS_PER_ROW = 3


def one_run_per_seed(rows: list[dict]) -> list[dict]:
    """The rows of one run per objective and seed: where a bf16 run and its fp32 twin of the same
    seed both have rows (twins: one of them is trained to the end and published), those of the run
    that reached the furthest step (the first in the rows on a tie), so a seed is counted once."""
    furthest: dict[tuple[str, int], tuple[int, str]] = {}
    for row in rows:
        key, reach = (row["objective"], int(row["seed"])), (int(row["step"]), row["run_id"])
        if key not in furthest or reach[0] > furthest[key][0]:
            furthest[key] = reach
    return [r for r in rows if r["run_id"] == furthest[(r["objective"], int(r["seed"]))][1]]


def objectives_of(rows: list[dict]) -> list[str]:
    """The objectives in ``rows``: the campaign's order, then any other by name."""
    present = {r["objective"] for r in rows}
    return [o for o in LABELS if o in present] + sorted(present - set(LABELS))


def _with_gaps_broken(points: list[tuple[int, dict]]) -> tuple[list[float], list[float], list[float]]:
    """Steps (thousands), MIG and DCI of one run's rows, with a NaN point where evaluations are
    missing (more than :data:`EVAL_EVERY` apart: a log lost with a machine) so the line breaks there
    instead of drawing a trend nobody measured."""
    steps, migs, dcis = [], [], []
    for i, (step, row) in enumerate(points):
        if i and step - points[i - 1][0] > EVAL_EVERY:
            steps.append((step + points[i - 1][0]) / 2000)
            migs.append(math.nan)
            dcis.append(math.nan)
        steps.append(step / 1000)
        migs.append(row["mig"])
        dcis.append(row["dci_disentanglement"])
    return steps, migs, dcis


#: the mark of a run's first evaluation after a session in another precision, by that precision
SWITCH_MARKERS = {"fp32": "o", "bf16": "s", "fp16": "D"}


def precision_switches(points: list[tuple[int, dict]]) -> list[tuple[int, dict, str]]:
    """The rows of one run (sorted by step) where its precision chain grows (``bf16`` then
    ``bf16>fp32``: the first evaluation after a session in another precision), with that precision."""
    out = []
    for i, (step, row) in enumerate(points):
        chain, before = row.get("precision") or "", (points[i - 1][1].get("precision") or "") if i else ""
        if i and chain != before and chain.startswith(before + ">"):
            out.append((step, row, chain.rsplit(">", 1)[1]))
    return out


def shared_limits(rows: list[dict]) -> tuple[float, float]:
    """The top of the y axis of every MIG panel and of every DCI panel: one scale across the
    objectives, from 0 to a little above the highest value drawn (the rotated MIGs and the published
    band included), so a near-zero objective reads as near zero and not as a trend magnified."""
    migs = [v for r in rows for v in (r.get("mig"), r.get("mig_rotated")) if v is not None]
    migs += [high for objective, (_, high) in PUBLISHED_MIG.items() if any(r["objective"] == objective for r in rows)]
    dcis = [r["dci_disentanglement"] for r in rows if r.get("dci_disentanglement") is not None]
    return 1.05 * max(migs, default=1.0), 1.05 * max(dcis, default=1.0)


def figure(rows: list[dict]):
    """Draws :data:`FIGURE` and returns the matplotlib ``Figure``."""
    from matplotlib.figure import Figure

    rows = one_run_per_seed(rows)
    objectives = objectives_of(rows)
    ncols = max(1, min(COLUMNS_PER_ROW, len(objectives)))
    pairs = max(1, math.ceil(len(objectives) / ncols))  # a row of MIG panels over a row of DCI panels
    fig = Figure(figsize=(4.2 * ncols, 6.0 * pairs), layout="constrained")
    axes = fig.subplots(2 * pairs, ncols, squeeze=False, sharex=True)
    for i, objective in enumerate(objectives):
        top, bottom = axes[2 * (i // ncols), i % ncols], axes[2 * (i // ncols) + 1, i % ncols]
        mine = [r for r in rows if r["objective"] == objective]
        for seed in sorted({int(r["seed"]) for r in mine}):
            points = sorted((int(r["step"]), r) for r in mine if int(r["seed"]) == seed)
            steps, migs, dcis = _with_gaps_broken(points)
            top.plot(steps, migs, marker=".", label=f"seed {seed}")
            bottom.plot(steps, dcis, marker=".", label=f"seed {seed}")
            rotated = [(s / 1000, r["mig_rotated"]) for s, r in points if r.get("mig_rotated") is not None]
            if rotated:
                top.scatter(*zip(*rotated), marker="x", color=top.lines[-1].get_color(), zorder=3)
            for step, row, now in precision_switches(points):  # e.g. a bf16 run continued in fp32
                label = f"first evaluation after\nthe switch to {now}"
                for ax, value in ((top, row["mig"]), (bottom, row["dci_disentanglement"])):
                    ax.scatter([step / 1000], [value], s=70, marker=SWITCH_MARKERS.get(now, "o"), facecolors="none",
                               edgecolors="black", zorder=4,
                               label=label if label not in ax.get_legend_handles_labels()[1] else None)
        if objective in PUBLISHED_MIG:
            low, high = PUBLISHED_MIG[objective]
            top.axhspan(low, high, color="0.85", zorder=0, label=f"published MIG (≈{low:g}–{high:g})")
        top.set_title(LABELS.get(objective, objective), fontsize=10)
        top.set_xlim(0, 300)
        top.legend(fontsize=7)
        if i % ncols == 0:
            top.set_ylabel("MIG (×: after the best rotation\nof the position plane)")
            bottom.set_ylabel("DCI disentanglement")
    mig_top, dci_top = shared_limits(rows)
    for r in range(pairs):
        for c in range(ncols):
            axes[2 * r, c].set_ylim(0, mig_top)
            axes[2 * r + 1, c].set_ylim(0, dci_top)
    for i in range(len(objectives), pairs * ncols):  # the last row's empty places
        axes[2 * (i // ncols), i % ncols].set_visible(False)
        axes[2 * (i // ncols) + 1, i % ncols].set_visible(False)
    for c in range(ncols):
        axes[-1, c].set_xlabel("steps (thousands)")
        axes[-1, c].xaxis.set_tick_params(labelbottom=True)
    title = "The published schedule: 300,000 steps, batch 64 (procedural sprites, reference init)"
    fig.suptitle(textwrap.fill(title, width=max(30, int(12 * fig.get_figwidth()))), fontsize=10)
    fig.savefig(FIGURE, dpi=110)
    return fig


def _mean_sd(values: list[float], digits: int = 3) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    if len(values) == 1:
        return f"{values[0]:.{digits}f} (n=1)"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f} (n={len(values)})"


def table(rows: list[dict]) -> str:
    from time_to_disentangle import cpu_description

    rows = one_run_per_seed(rows)
    lines = ["# The published schedule: trajectories", "",
             "`python benchmarks/trajectories_300k.py` (see its docstring). Mean ± sample sd over the seeds "
             "that reached the step; MIG and DCI logged during training, the FactorVAE score on the kept "
             "checkpoints. The milestone scores are computed once, on the machine that ran the script when the "
             f"checkpoint was new (AVX512 and AVX2 CPUs over the campaign); this table last written on "
             f"{cpu_description()}.", "",
             "| objective | step | MIG | DCI disentanglement | FactorVAE score | MIG rotated | position latents "
             "| active latents |",
             "|---|---:|---|---|---|---|---|---|"]
    for objective in objectives_of(rows):
        for step in TABLE_STEPS:
            at = [r for r in rows if r["objective"] == objective and int(r["step"]) == step]
            if not at:
                continue
            lines.append(f"| {LABELS.get(objective, objective)} | {step:,} | {_mean_sd([r['mig'] for r in at])} | "
                         f"{_mean_sd([r['dci_disentanglement'] for r in at])} | "
                         f"{_mean_sd([r.get('factor_vae_score') for r in at])} | "
                         f"{_mean_sd([r.get('mig_rotated') for r in at])} | "
                         f"{_mean_sd([r.get('position_latents') for r in at], 1)} | "
                         f"{_mean_sd([r.get('active_latents') for r in at], 1)} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sweeps", nargs="*", type=Path, metavar="SWEEP_DIR", help="the campaign's sweep folders")
    p.add_argument("--milestones", type=Path, default=None, help="the milestone checkpoints' folder")
    p.add_argument("--device", default="cpu", help="where the milestone models encode (cpu, cuda)")
    p.add_argument("--from-data", action="store_true", help="only redraw from benchmarks/campaign300k/trajectories.csv")
    p.add_argument("--factor-vae-at", choices=("table", "all"), default="table",
                   help="the kept checkpoints that get the FactorVAE score (minutes each on a CPU): those of the "
                        "table's steps (20k, 100k, 200k, 300k; default) or all (on a GPU); every kept "
                        "checkpoint gets the position code")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    if args.from_data or not args.sweeps:
        rows = read_data()
    else:
        rows = collect(args.sweeps, args.milestones, args.device, zoo=_zoo_records(),
                       factor_vae_steps=TABLE_STEPS if args.factor_vae_at == "table" else None)
        write_data(rows)
    if not rows:
        print("no data", file=sys.stderr)
        return 1
    figure(rows)
    TABLE.write_text(table(rows))
    print(TABLE.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
