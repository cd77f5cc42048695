"""bf16 autocast against fp32: does a run trained in bf16 disentangle like one trained in fp32?

    python benchmarks/bf16_vs_fp32.py ~/init-ab/beta_tcvae ~/bf16-ab/beta_tcvae \\
        ~/init-ab/beta_vae ~/bf16-ab/beta_vae --out benchmarks/RESULTS-bf16.md

Reads every run of the sweep folders given (``runs/<id>/config.yaml``, ``log.jsonl``, and
``metrics.json`` once finished), groups them by objective and strength, and pairs the runs that
differ only in ``train.precision`` (same seed, init, steps). For each pair it reports the MIG
logged during training (every ``train.eval_every`` steps), the final MIG and DCI disentanglement
(no speed: campaign runs share their machine with other work, so their
wall times compare nothing; ``benchmarks/bench_trainer_options.py`` measures bf16's speed). Then, per objective: the mean ± std over
seeds of each arm, the seed-paired difference bf16 − fp32, and the fp32 arm's own spread over seeds
(the "seed noise" the difference is judged against). With ``--figure`` it draws the MIG curves
(one colour per seed; fp32 solid, bf16 dashed; one panel per objective).

Only runs found on disk are used: a bf16 run without its fp32 twin (or the reverse) is listed but
not paired. ``--zoo NAME ...`` adds zoo models as finished runs, from their manifest records (the
final MIG and DCI, no curve), for twins whose run folders are not on this machine::

    python benchmarks/bf16_vs_fp32.py ~/bf16-ab/factor_vae --zoo factor_vae-sprites-gamma30-cpu20k-ref-s{0,1,2} \
        --out benchmarks/RESULTS-bf16-factor_vae.md
"""
from __future__ import annotations

import argparse
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from s2_vs_twin import _mean_sd  # the same 'mean ± sd (n = …)' cells as the S² report

STRENGTH_KEYS = {"beta_vae": "beta", "beta_tcvae": "beta", "factor_vae": "gamma", "annealed_vae": "c_max",
                 "ada_gvae": "beta", "ada_ml_vae": "beta"}


@dataclass
class Run:
    path: Path
    objective: str
    strength: float | None
    seed: int
    precision: str
    init: str
    steps: int
    mig_curve: dict[int, float] = field(default_factory=dict)
    mig: float | None = None
    dci: float | None = None
    factor_vae: float | None = None  # the FactorVAE score's eval accuracy, where computed
    last_step: int = 0
    steps_per_s: float | None = None

    @property
    def key(self) -> tuple[Any, ...]:
        """What a pair shares: everything but the precision."""
        return (self.objective, self.strength, self.seed, self.init, self.steps)


def read_run(run_dir: Path) -> Run:
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    objective = config["objective"]["name"]
    strength_key = STRENGTH_KEYS.get(objective)
    strength = config["objective"].get(strength_key) if strength_key else None
    run = Run(
        run_dir, objective, strength, int(config["seed"]), config["train"]["precision"],
        config["model"].get("init", "pytorch"), int(config["train"]["steps"]),
    )
    rates = []
    log = run_dir / "log.jsonl"
    for line in log.read_text().splitlines() if log.exists() else []:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        run.last_step = max(run.last_step, int(record.get("step", 0)))
        if "metrics" in record and "mig" in record["metrics"]:
            run.mig_curve[int(record["step"])] = float(record["metrics"]["mig"]["mig"])
        if "steps_per_s" in record:
            rates.append(float(record["steps_per_s"]))
    run.steps_per_s = statistics.median(rates) if rates else None
    metrics_file = run_dir / "metrics.json"
    if metrics_file.exists():
        metrics = json.loads(metrics_file.read_text())["metrics"]
        run.mig = metrics.get("mig", {}).get("mig")
        run.dci = metrics.get("dci", {}).get("disentanglement")
        run.factor_vae = metrics.get("factor_vae_score", {}).get("eval_accuracy")
    return run


def read_zoo_run(name: str) -> Run:
    """A zoo model as a finished run: its config and the final MIG and DCI of its manifest record
    (no MIG curve: the zoo keeps no log)."""
    from disentangle.zoo.manifest import SHIPPED_MANIFEST, read_manifest

    record = read_manifest(SHIPPED_MANIFEST)["models"][name]
    config, metrics = record["config"], record["metrics"]
    objective = config["objective"]["name"]
    strength_key = STRENGTH_KEYS.get(objective)
    return Run(
        Path(f"zoo:{name}"), objective, config["objective"].get(strength_key) if strength_key else None,
        int(config["seed"]), config["train"]["precision"], config["model"].get("init", "pytorch"),
        int(config["train"]["steps"]), mig=metrics["mig"]["mig"], dci=metrics["dci"]["disentanglement"],
        factor_vae=metrics.get("factor_vae_score", {}).get("eval_accuracy"), last_step=int(record["trained_steps"]),
    )


def read_runs(folders: list[Path]) -> list[Run]:
    runs = []
    for folder in folders:
        for run_dir in sorted((folder / "runs").glob("*")):
            if (run_dir / "config.yaml").exists():
                runs.append(read_run(run_dir))
    return runs


def _fmt(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def report(runs: list[Run]) -> str:
    by_key: dict[tuple[Any, ...], dict[str, Run]] = {}
    for run in runs:
        by_key.setdefault(run.key, {})[run.precision] = run
    checkpoints = sorted({s for r in runs for s in r.mig_curve})
    shown = [s for s in checkpoints if s % 4000 == 0 or s == 2000] or checkpoints
    def row(cells: list[str]) -> str:
        return "| " + " | ".join(cells) + " |"

    header = ["objective", "strength", "seed", "precision", "steps", *(f"MIG@{s // 1000}k" for s in shown),
              "MIG", "DCI", "FactorVAE"]
    lines = [row(header), "|" + "|".join(["---", "---:", "---:", "---"] + ["---:"] * (len(header) - 4)) + "|"]
    for key in sorted(by_key, key=lambda k: (k[0], k[1] or 0, k[2])):
        for precision in ("fp32", "bf16", "fp16"):
            run = by_key[key].get(precision)
            if run is None:
                continue
            partial = "" if run.mig is not None else f" (partial, step {run.last_step:,})"
            lines.append(row([
                run.objective, str(run.strength), str(run.seed), f"{precision}{partial}", f"{run.steps:,}",
                *(_fmt(run.mig_curve.get(s)) for s in shown), _fmt(run.mig), _fmt(run.dci), _fmt(run.factor_vae),
            ]))
    lines += ["", "Finished pairs (same objective, strength, seed, init and steps; only the precision differs):", "",
              "| objective | pairs | fp32 MIG | bf16 MIG | bf16 − fp32 MIG (paired) | fp32 DCI | bf16 DCI | "
              "bf16 − fp32 DCI (paired) |",
              "|---|---:|---|---|---|---|---|---|"]
    objectives = sorted({k[:2] for k in by_key}, key=lambda k: (k[0], k[1] or 0))
    for objective, strength in objectives:
        pairs = [
            (arms["fp32"], arms["bf16"]) for k, arms in by_key.items()
            if k[:2] == (objective, strength) and "fp32" in arms and "bf16" in arms
            and arms["fp32"].mig is not None and arms["bf16"].mig is not None
        ]
        if not pairs:
            continue
        lines.append(
            f"| {objective} ({strength}) | {len(pairs)} | {_mean_sd([a.mig for a, _ in pairs])} | "
            f"{_mean_sd([b.mig for _, b in pairs])} | {_mean_sd([b.mig - a.mig for a, b in pairs])} | "
            f"{_mean_sd([a.dci for a, _ in pairs])} | {_mean_sd([b.dci for _, b in pairs])} | "
            f"{_mean_sd([b.dci - a.dci for a, b in pairs])} |"
        )
    scored = [(arms["fp32"], arms["bf16"]) for arms in by_key.values() if "fp32" in arms and "bf16" in arms
              and arms["fp32"].factor_vae is not None and arms["bf16"].factor_vae is not None]
    if scored:
        lines += ["", "FactorVAE score (eval accuracy) of the pairs where both arms have it:", "",
                  "| objective | pairs | fp32 | bf16 | bf16 − fp32 (paired) |", "|---|---:|---|---|---|"]
        for objective, strength in objectives:
            pairs = [(a, b) for a, b in scored if (a.objective, a.strength) == (objective, strength)]
            if pairs:
                lines.append(
                    f"| {objective} ({strength}) | {len(pairs)} | {_mean_sd([a.factor_vae for a, _ in pairs])} | "
                    f"{_mean_sd([b.factor_vae for _, b in pairs])} | "
                    f"{_mean_sd([b.factor_vae - a.factor_vae for a, b in pairs])} |"
                )
    return "\n".join(lines) + "\n"


def figure(runs: list[Run], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    objectives = sorted({(r.objective, r.strength) for r in runs}, key=lambda k: (k[0], k[1] or 0))
    seeds = sorted({r.seed for r in runs})
    colors = dict(zip(seeds, plt.get_cmap("tab10").colors))
    fig, axes = plt.subplots(len(objectives), 1, figsize=(7.5, 4.4 * len(objectives)), squeeze=False)
    for ax, (objective, strength) in zip(axes[:, 0], objectives):
        for run in sorted((r for r in runs if (r.objective, r.strength) == (objective, strength)),
                          key=lambda r: (r.seed, r.precision)):
            if not run.mig_curve or run.precision not in ("fp32", "bf16"):
                continue
            steps = sorted(run.mig_curve)
            ax.plot([s / 1000 for s in steps], [run.mig_curve[s] for s in steps], marker="o", markersize=3,
                    color=colors[run.seed], linestyle="-" if run.precision == "fp32" else "--",
                    label=f"seed {run.seed}, {run.precision}")
        ax.set_title(f"{objective} ({STRENGTH_KEYS.get(objective, 'strength')} = {strength})", fontsize=11)
        ax.set_xlabel("thousand steps", fontsize=10)
        ax.set_ylabel("MIG", fontsize=10)
        ax.tick_params(labelsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8.5, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False)
    fig.suptitle("MIG during training: fp32 (solid) and bf16 autocast (dashed)", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path, help="sweep folders (fp32 and bf16 runs)")
    parser.add_argument("--zoo", nargs="+", default=[], metavar="NAME",
                        help="zoo models taken as finished runs (their manifest's MIG and DCI; no curve)")
    parser.add_argument("--out", type=Path, default=None, help="write the markdown here too")
    parser.add_argument("--figure", type=Path, default=None, help="draw the MIG curves into this PNG")
    args = parser.parse_args(argv)
    runs = read_runs(args.folders) + [read_zoo_run(name) for name in args.zoo]
    text = report(runs)
    print(text)
    if args.out:
        args.out.write_text(text)
    if args.figure:
        figure(runs, args.figure)


if __name__ == "__main__":
    main()
