"""The campaign's runs the zoo does not hold yet, one sweep file each, in the order the lanes take them.

    python benchmarks/campaign300k/lane_files.py OUT_DIR      # prints "SWEEP_FILE<TAB>SWEEP_NAME" per run

A finished run is published to the zoo and its run folder stays on the machine that trained it; a
session on a new machine has the zoo but not the folder, so the campaign's sweep files would train
the run again from step 0. The lanes (``resume.sh``) therefore run these files instead: for each run
of the three sweeps (``naming.SWEEPS``), in order, that the zoo holds under neither its CPU nor its
GPU name (``naming.zoo_name``), the campaign's sweep file narrowed to that grid entry and seed. Each
file keeps the campaign's sweep name and the run's id (checked here), so its runs go to the same
folder, ``CAMPAIGN/<sweep name>/runs/<id>``, as before.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from naming import SWEEPS, zoo_name  # noqa: E402

from disentangle.sweep.grid import load_sweep, sweep_from_dict  # noqa: E402
from disentangle.zoo.manifest import SHIPPED_MANIFEST, read_manifest  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def published(manifest: Path = SHIPPED_MANIFEST) -> set[str]:
    return set(read_manifest(manifest)["models"])


def lane_files(out: Path, zoo: set[str]) -> list[tuple[Path, str]]:
    """Write a sweep file per run still to train into ``out``; ``[(file, sweep name)]`` in order."""
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("*.yaml"):
        stale.unlink()
    files = []
    for sweep in SWEEPS:
        path = ROOT / "configs" / "sweeps" / f"{sweep}.yaml"
        src = yaml.safe_load(path.read_text())
        ids = {spec.run_id for spec in load_sweep(path).runs}
        for entry in src["grid"]:
            for seed in src["seeds"]:
                narrowed = dict(src, grid=[entry], seeds=[seed])
                (spec,) = sweep_from_dict(narrowed, source=str(path), folder=path.parent).runs
                if spec.run_id not in ids:  # would train another run than the campaign's
                    raise SystemExit(f"{sweep}: {entry} seed {seed} gives run {spec.run_id}, not one of the sweep's")
                names = {zoo_name(spec.config, hardware) for hardware in ("cpu", "gpu")}
                if names & zoo:
                    print(f"# in the zoo: {sweep} {spec.run_id} ({', '.join(sorted(names & zoo))})", file=sys.stderr)
                    continue
                file = out / f"{len(files):02d}-{sweep}-{spec.config['objective']['name']}-s{seed}.yaml"
                file.write_text(yaml.safe_dump(narrowed, sort_keys=False))
                files.append((file, sweep))
    return files


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", type=Path)
    args = p.parse_args()
    for file, sweep in lane_files(args.out, published()):
        print(f"{file}\t{sweep}")


if __name__ == "__main__":
    main()
