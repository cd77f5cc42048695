"""The initialisation A/B: the zoo's CPU recipe with ``model.init: reference`` against the retired
``model.init: pytorch`` models of the same recipe and seeds.

    python benchmarks/init_ab.py ~/init-ab/beta_vae ~/init-ab/beta_tcvae ~/init-ab/annealed_vae \\
        --out benchmarks/RESULTS-init-ab.md

Reads the reference-init runs of the sweep folders given (``configs/sweeps/init_ab/*.yaml``;
finished runs: ``metrics.json``; unfinished: their newest checkpoint, marked partial) and pairs each
with the zoo model of the same objective, strength, seed and step count trained with PyTorch's
initialisation (``NAME-cpu20k-sN``). Those models are retired from the package: list their files in
a manifest of your own (``DISENTANGLE_ZOO_MANIFEST``; the files are in the repository's history,
``git show 02eb638:disentangle/zoo/weights/NAME.safetensors``), or a run has no twin. Per model it
reports:

* MIG and DCI disentanglement (the scores recorded with the run or in the zoo manifest, at the
  metrics' defaults), and MIG at 2,000 / 10,000 / 20,000 steps from the run's log;
* the latent responses of the two positions (:func:`disentangle.visualize.responses.latent_responses`):
  for ``position_x`` and ``position_y``, the |Spearman ρ| between the position and the mean code of
  the latent that moves most with it (1: one monotone latent), and how many latents move with it by
  at least a quarter as much ("spread over");
* for the AnnealedVAE, the KL split into offset, spread and variance
  (:func:`disentangle.metrics.posterior.posterior_kl_split`, 4,096 images).

Then mean ± std (n − 1) per objective and arm. Prints the markdown and writes it to ``--out``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
import yaml

import disentangle
from disentangle.data import build_dataset
from disentangle.metrics.posterior import posterior_kl_split
from disentangle.visualize.responses import latent_responses

STRENGTH_KEYS = {
    "beta_vae": "beta", "beta_tcvae": "beta", "factor_vae": "gamma", "annealed_vae": "c_max",
    "dip_vae_i": "lambda_od", "dip_vae_ii": "lambda_od", "info_vae": "lambda_", "aae": "adversarial_weight",
    "ada_gvae": "beta", "ada_ml_vae": "beta",
}


def _cpu() -> str:
    try:
        model = next(
            line.split(":", 1)[1].strip()
            for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
            if line.startswith("Model name")
        )
    except (StopIteration, OSError):
        model = platform.processor() or "unknown CPU"
    return f"{model}, {torch.get_num_threads()} threads here, torch {torch.__version__} ({torch.backends.cpu.get_cpu_capability()})"


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    if ra.std() == 0 or rb.std() == 0:
        return 0.0
    return float(np.corrcoef(ra, rb)[0, 1])


def position_codes(model, dataset) -> dict[str, tuple[float, int]]:
    """Per position factor: (|Spearman ρ| of the most responsive latent, latents moving ≥ 1/4 as much)."""
    responses = latent_responses(dataset, model, num_per_value=64, seed=0)
    out = {}
    for k, name in enumerate(responses.factor_names):
        if not name.startswith("position"):
            continue
        curves = responses.mean[k]  # (S_k, D)
        ranges = curves.max(0) - curves.min(0)
        top = int(np.argmax(ranges))
        out[name] = (abs(_spearman(responses.factor_values[k], curves[:, top])), int((ranges >= ranges[top] / 4).sum()))
    return out


def kl_split(model, dataset) -> dict[str, float]:
    images = dataset.sample_batch(4096, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        mu, logvar = model.encode(images)
    return posterior_kl_split(mu, logvar)


def _curve(run_dir: Path) -> dict[int, float]:
    curve = {}
    for line in (run_dir / "log.jsonl").read_text().splitlines():
        record = json.loads(line) if line.strip() else {}
        if "metrics" in record and "mig" in record["metrics"]:
            curve[int(record["step"])] = float(record["metrics"]["mig"]["mig"])
    return curve


def reference_runs(folders: list[Path]) -> list[dict]:
    rows = []
    for folder in folders:
        for run_dir in sorted((folder / "runs").glob("*")):
            if not (run_dir / "checkpoint.pt").exists():
                continue
            config = yaml.safe_load((run_dir / "config.yaml").read_text())
            objective = config["objective"]["name"]
            metrics_file = run_dir / "metrics.json"
            scores = json.loads(metrics_file.read_text()) if metrics_file.exists() else None
            scores = scores.get("metrics", scores) if scores else None
            model = disentangle.load(run_dir)
            rows.append({
                "arm": "reference", "objective": objective, "strength": config["objective"][STRENGTH_KEYS[objective]],
                "seed": config["seed"], "steps": model.trained_steps, "finished": scores is not None,
                "mig": scores["mig"]["mig"] if scores else None,
                "dci": scores["dci"]["disentanglement"] if scores and "dci" in scores else None,
                "curve": _curve(run_dir), "model": model,
                "wall_min": _wall_minutes(run_dir),
            })
    return rows


def _wall_minutes(run_dir: Path) -> float | None:
    walls = [json.loads(l).get("wall_time_s") for l in (run_dir / "log.jsonl").read_text().splitlines() if l.strip()]
    walls = [w for w in walls if w is not None]
    return walls[-1] / 60 if walls else None


def _shipped_curves(table: Path | None = None) -> dict[tuple[str, float, int], dict[int, float]]:
    """MIG at 2k / 10k / 20k steps of the shipped (pytorch-init) fp32 runs, from
    ``benchmarks/time_to_disentangle.md`` (their sweep folders are not in the repository). Columns
    are found by their header; a table without an ``init`` column predates ``model.init``, so all
    its runs are PyTorch-init; with one, only its ``pytorch`` rows are read."""
    table = Path(__file__).with_name("time_to_disentangle.md") if table is None else table
    curves: dict[tuple[str, float, int], dict[int, float]] = {}
    column: dict[str, int] = {}
    for line in table.read_text().splitlines() if table.is_file() else []:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == "objective":
            column = {name: k for k, name in enumerate(cells)}
            continue
        if not column or len(cells) != len(column) or not cells[column["seed"]].isdigit():
            continue
        if cells[column["precision"]] != "fp32" or ("init" in column and cells[column["init"]] != "pytorch"):
            continue
        objective, strength = cells[column["objective"]], float(cells[column["strength"]].split()[-1])
        values = {}
        for step in (2000, 10000, 20000):
            try:
                values[step] = float(cells[column[f"MIG@{step // 1000}k"]])
            except (KeyError, ValueError):
                pass
        curves[(objective, strength, int(cells[column["seed"]]))] = values
    return curves


def shipped_twin(row: dict) -> dict | None:
    from disentangle import zoo

    key = STRENGTH_KEYS[row["objective"]]
    strength = row["strength"]
    label = f"{int(strength)}" if float(strength).is_integer() else f"{strength}"
    name = f"{row['objective']}-sprites-{key.rstrip('_')}{label}-cpu20k-s{row['seed']}"  # lambda_ is "lambda" in names
    if name not in zoo.names(pretrained=True):
        return None
    model = disentangle.load(f"zoo:{name}")
    record = zoo.info(name)
    return {
        "arm": "pytorch", "objective": row["objective"], "strength": strength, "seed": row["seed"],
        "steps": model.trained_steps, "finished": True, "mig": record["metrics"]["mig"]["mig"],
        "dci": record["metrics"]["dci"]["disentanglement"],
        "curve": _shipped_curves().get((row["objective"], float(strength), row["seed"]), {}), "model": model, "name": name,
        "wall_min": record.get("wall_time_s", 0) / 60,
    }


def _fmt(value, digits=3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path, help="sweep folders of configs/sweeps/init_ab/*.yaml")
    parser.add_argument("--out", type=Path, default=None, help="write the markdown here too")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    for row in reference_runs(args.folders):
        rows.append(row)
        twin = shipped_twin(row)
        if twin is not None:
            rows.append(twin)
    datasets: dict[str, object] = {}
    lines = [
        "| objective | strength | seed | init | steps | wall time | MIG@2k | MIG@10k | MIG@20k | MIG | DCI | x: ρ, latents | y: ρ, latents |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    splits = []
    for row in rows:
        data_cfg = dict(row["model"].config["data"])
        key = json.dumps(data_cfg, sort_keys=True)
        if key not in datasets:
            datasets[key] = build_dataset(data_cfg)
        dataset = datasets[key]
        pos = position_codes(row["model"], dataset)
        c = row["curve"]
        lines.append(
            f"| {row['objective']} | {row['strength']} | {row['seed']} | {row['arm']} | {row['steps']:,}"
            f"{'' if row['finished'] else ' (partial)'} | {_fmt(row['wall_min'], 0)} min | {_fmt(c.get(2000))} | "
            f"{_fmt(c.get(10000))} | {_fmt(c.get(20000))} | {_fmt(row['mig'])} | {_fmt(row['dci'])} | "
            + " | ".join(f"{pos[f][0]:.2f}, {pos[f][1]}" for f in ("position_x", "position_y")) + " |"
        )
        if row["objective"] == "annealed_vae":
            splits.append((row, kl_split(row["model"], dataset)))
    lines += ["", "| objective | init | seeds | MIG mean ± std | DCI mean ± std |", "|---|---|---:|---|---|"]
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        if row["finished"]:
            groups.setdefault((row["objective"], row["strength"], row["arm"]), []).append(row)
    for (objective, strength, arm), members in sorted(groups.items()):
        migs = [m["mig"] for m in members]
        dcis = [m["dci"] for m in members if m["dci"] is not None]
        sd = lambda v: statistics.stdev(v) if len(v) > 1 else 0.0  # noqa: E731
        lines.append(
            f"| {objective} ({strength}) | {arm} | {len(members)} | {statistics.mean(migs):.3f} ± {sd(migs):.3f} | "
            + (f"{statistics.mean(dcis):.3f} ± {sd(dcis):.3f} |" if dcis else "– |")
        )
    pairs: dict[tuple, list[tuple[float, float]]] = {}
    for row in rows:
        if row["arm"] == "reference" and row["finished"]:
            twin = next((r for r in rows if r["arm"] == "pytorch" and r["objective"] == row["objective"]
                         and r["strength"] == row["strength"] and r["seed"] == row["seed"]), None)
            if twin is not None:
                pairs.setdefault((row["objective"], row["strength"]), []).append((row["mig"] - twin["mig"], row["dci"] - twin["dci"]))
    if pairs:
        lines += ["", "Paired by seed, reference minus pytorch:", "", "| objective | seeds | Δ MIG mean ± std | Δ DCI mean ± std |",
                  "|---|---:|---|---|"]
        for (objective, strength), deltas in sorted(pairs.items()):
            dm, dd = [d[0] for d in deltas], [d[1] for d in deltas]
            sd = lambda v: statistics.stdev(v) if len(v) > 1 else 0.0  # noqa: E731
            lines.append(f"| {objective} ({strength}) | {len(deltas)} | {statistics.mean(dm):+.3f} ± {sd(dm):.3f} | "
                         f"{statistics.mean(dd):+.3f} ± {sd(dd):.3f} |")
    if splits:
        lines += ["", "AnnealedVAE: the KL of the posterior to the prior (nats, 4,096 images) split into the offset",
                  "of the means, their spread across images (the part that can carry information) and the variances.", "",
                  "| c_max | init | seed | steps | offset | spread | variance | total |", "|---:|---|---:|---:|---:|---:|---:|---:|"]
        for row, split in splits:
            lines.append(
                f"| {row['strength']} | {row['arm']} | {row['seed']} | {row['steps']:,} | {split['offset']:.2f} | {split['spread']:.2f} | "
                f"{split['variance']:.2f} | {split['total']:.2f} |"
            )
    lines += ["", "Wall time: the run's logged wall clock, evaluations included; a run paused while benchmarks ran "
              "(the zoo_sprites_ref20k campaign) counts its pauses.", "", f"Measured on: {_cpu()}."]
    text = "\n".join(lines)
    print(text)
    if args.out is not None:
        header = (
            "# The initialisation A/B\n\n`python benchmarks/init_ab.py "
            + " ".join(str(f) for f in args.folders) + f" --out {args.out}`"
            + (" with the retired PyTorch-init models listed in DISENTANGLE_ZOO_MANIFEST"
               if os.environ.get("DISENTANGLE_ZOO_MANIFEST") else "") + "\n\n"
        )
        args.out.write_text(header + text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
