"""The sweep files of a GPU session of the 300,000-step campaign (``gpu.sh``): one per run, so that
runs can differ in ``train.compile``, each the campaign's own config for that objective and seed
(``configs/sweeps/zoo_sprites_ref300k.yaml``, ``zoo_sprites_ref300k_more.yaml`` and
``zoo_sprites_ref300k_ada_seeds.yaml``), so that each keeps the campaign's run id.

    python benchmarks/campaign300k/gpu_sweeps.py OUT_DIR "beta_tcvae:1,2 factor_vae:0" \\
        [--compile "false reduce-overhead"] [--set "key=value; key=value"] [--metrics mig,dci]

Every run also keeps the checkpoint of every 10,000th step (each logged evaluation's) in
``RUN/milestones/`` (the ``keep_checkpoints`` callback), as the CPU lanes' watcher does. ``train.compile`` and ``train.callbacks`` do not count in the run
id; ``--set`` may change other keys, and with them the id (a dry run on a CPU with fewer steps).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from naming import SWEEPS  # noqa: E402

#: the campaign's sweep files, in the order its lanes take them (resume.sh)
CAMPAIGN = [Path(__file__).resolve().parents[2] / "configs" / "sweeps" / f"{name}.yaml" for name in SWEEPS]
#: keep the checkpoint of every multiple of this (the campaign's train.eval_every)
MILESTONE_EVERY = 10_000


def sweep_files(out: Path, runs: str, compiles: list[str], extra: str = "", metrics: str = "") -> list[Path]:
    """Write one sweep file per run of ``runs`` ("objective:seed,seed ...") into ``out``; their paths."""
    # (objective, seed) -> the campaign sweep file that trains it and its grid entry
    trained = {}
    for path in CAMPAIGN:
        src = yaml.safe_load(path.read_text())
        for entry in src["grid"]:
            for seed in src["seeds"]:
                trained.setdefault((entry["objective.name"][0], int(seed)), (src, entry))
    extras = {}
    for item in filter(None, (kv.strip() for kv in extra.split(";"))):
        key, value = item.split("=", 1)
        extras[key.strip()] = yaml.safe_load(value)
    paths = []
    for spec in runs.split():
        name, seeds = spec.split(":")
        for seed in (int(s) for s in seeds.split(",")):
            if (name, seed) not in trained:
                choices = ", ".join(f"{o}:{s}" for o, s in sorted(trained))
                raise SystemExit(f"'{name}:{seed}' is not trained by the campaign; it trains {choices}.")
            src, entry = trained[name, seed]
            compile_ = compiles[len(paths) % len(compiles)]
            settings = dict(src["set"], **{
                "train.callbacks": [{"name": "keep_checkpoints", "every": MILESTONE_EVERY, "folder": "milestones"}]},
                **extras, **{"train.compile": False if compile_ == "false" else compile_})
            sweep = dict(src, name=f"zoo_sprites_ref300k_gpu_{name}_s{seed}", grid=[entry], seeds=[seed],
                         set=settings, metrics=metrics.split(",") if metrics else src["metrics"])
            path = out / f"{len(paths):02d}-{name}-s{seed}.yaml"
            path.write_text(yaml.safe_dump(sweep, sort_keys=False))
            print(f"{path}: train.compile={compile_}")
            paths.append(path)
    return paths


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", type=Path)
    p.add_argument("runs", help='"objective:seed,seed objective:seed"')
    p.add_argument("--compile", default="false reduce-overhead", help="train.compile values, one per run in turn")
    p.add_argument("--set", default="", help='extra "set" entries: "key=value; key=value" (values in YAML)')
    p.add_argument("--metrics", default="", help="comma-separated metrics instead of the campaign's")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    sweep_files(args.out, args.runs, args.compile.split(), args.set, args.metrics)


if __name__ == "__main__":
    sys.exit(main())
