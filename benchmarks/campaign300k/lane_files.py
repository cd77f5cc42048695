"""The campaign's runs the zoo does not hold yet, one sweep file each, in the order the lanes take them.

    python benchmarks/campaign300k/lane_files.py OUT_DIR      # prints "SWEEP_FILE<TAB>SWEEP_NAME" per run
    python benchmarks/campaign300k/lane_files.py OUT_DIR --runs "dip_vae_ii:0 info_vae:0" --precisions fp32
    python benchmarks/campaign300k/lane_files.py OUT_DIR --precisions fp32 --continue-in fp32 --campaign DIR

A finished run is published to the zoo and its run folder stays on the machine that trained it; a
session on a new machine has the zoo but not the folder, so the campaign's sweep files would train
the run again from step 0. The lanes (``resume.sh``) therefore run these files instead: for each run
of the three sweeps (``naming.SWEEPS``), in order, that the zoo holds under neither its CPU nor its
GPU name (``naming.zoo_name``), the campaign's sweep file narrowed to that grid entry and seed. Each
file keeps the campaign's sweep name and the run's id (checked here), so its runs go to the same
folder, ``CAMPAIGN/<sweep name>/runs/<id>``, as before.

``--precisions`` keeps the runs trained at those precisions only. ``resume.sh`` passes ``fp32`` on a
CPU without native bf16 (no AVX512-BF16 or AMX): bf16 autocast is emulated there, and a campaign
step measured 7x slower in bf16 than in fp32 on such a CPU (an AVX2 AMD EPYC, 2026-11-28), so the
bf16 runs wait for a machine that computes bf16 natively while the fp32 ones go on. ``--runs`` keeps
the named runs only (``OBJECTIVE:SEED[,SEED...]``, space-separated, as ``gpu.sh``'s
``CAMPAIGN_RUNS``), in the campaign's order. Of two runs with one zoo name (FactorVAE in bf16 and
its fp32 twin, ``zoo_sprites_ref300k_factor_fp32.yaml``) only one is kept: the one with a checkpoint
(a twin without one is left out even where the begun one waits for another machine), else the first
the machine may train, in the campaign's order. ``--campaign DIR`` puts each sweep's partial runs
(a checkpoint in ``DIR/<sweep>/runs/<id>/``) before its other runs, so a session resumes what an
earlier one began before it starts new runs; the sweeps keep their order.

``--continue-in PRECISION`` (with ``--campaign``) keeps the partial runs that ``--precisions`` would
leave for later too, to be continued in PRECISION: their line gets it as a third field, which
``resume.sh`` passes to the sweep as ``--resume-precision`` (each such run keeps its config and id;
its ``execution.jsonl`` records the sessions in the other precision, and ``publish.py`` names them in
the model's notes). A bf16 run 85% trained need not wait for a bf16 machine; a run not begun still does.

``--twins-in PRECISION`` (with ``--campaign``) continues in PRECISION a partial run whose twin trains
in it: ``resume.sh`` passes ``bf16`` on a CPU with native bf16, so an fp32 FactorVAE twin begun on an
AVX2 machine goes on in bf16 there (the precision of the campaign's FactorVAE runs, where its
A/B held, and the faster one on such a CPU) instead of in fp32; the run keeps its config, id and zoo name, and the notes name
both precisions' steps as for ``--continue-in``.

``--twins-last`` puts the twins trained in fp32 for want of native bf16 (the fp32 FactorVAE runs,
begun or not) after every other run: ``resume.sh`` passes it on a CPU without native bf16. There
an fp32 FactorVAE step runs at 2–4 steps/s on one thread, against 16–20 in bf16 on a CPU with native
bf16 (five to eight times faster), while the other fp32 runs (DIP-VAE, InfoVAE, Ada, AnnealedVAE)
train in fp32 everywhere, about twice as fast on the AVX512 CPUs as on the AVX2 ones as far as
measured: a thread of an AVX2 session moves the campaign furthest on them. The twins still come, once the rest is trained.
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


def parse_runs(text: str) -> dict[str, set[int]]:
    """``"dip_vae_ii:0 ada_gvae:1,2"`` -> ``{"dip_vae_ii": {0}, "ada_gvae": {1, 2}}``."""
    runs: dict[str, set[int]] = {}
    for item in text.split():
        objective, _, seeds = item.partition(":")
        try:
            parsed = {int(seed) for seed in seeds.split(",")}
        except ValueError:
            parsed = set()
        if not objective or not parsed:
            raise ValueError(f"--runs: '{item}' is not OBJECTIVE:SEED[,SEED...] (e.g. 'dip_vae_ii:0 ada_gvae:1,2')")
        runs.setdefault(objective, set()).update(parsed)
    return runs


def lane_files(
    out: Path, zoo: set[str], *, precisions: set[str] | None = None, runs: dict[str, set[int]] | None = None,
    campaign: Path | None = None, continue_in: str | None = None, twins_in: str | None = None,
    twins_last: bool = False,
) -> list[tuple[Path, str, str | None]]:
    """Write a sweep file per run still to train into ``out``; ``[(file, sweep name)]`` in order.
    ``precisions`` and ``runs`` (:func:`parse_runs`), where given, keep only the runs they name.
    With ``campaign`` (the folder of the sweep folders), a sweep's partial runs (a checkpoint in
    ``campaign/<sweep>/runs/<id>/``) come before its others: a session finishes what an earlier one
    began before it starts more. ``continue_in``: a partial run at a precision outside ``precisions``
    is kept, to be continued in ``continue_in`` (the third item of its entry; None for the others).
    ``twins_in``: a partial run whose twin (one zoo name, another sweep) trains in ``twins_in`` is
    continued in ``twins_in`` (a begun fp32 FactorVAE twin on a machine with native bf16).
    ``twins_last``: the fp32 runs with a bf16 twin come after all others (a CPU without native bf16)."""
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("*.yaml"):
        stale.unlink()
    # (deferred, sweep, not partial, order, sweep, config, name, precision to continue in, zoo name)
    planned: list[tuple[bool, int, bool, int, str, dict, str, str | None, str]] = []
    begun = set()  # the zoo names of the runs with a checkpoint here, whatever their precision
    trained_in: dict[str, set[str]] = {}  # zoo name -> the precisions of its runs (two for twins)
    for sweep in SWEEPS:
        for spec in load_sweep(ROOT / "configs" / "sweeps" / f"{sweep}.yaml").runs:
            trained_in.setdefault(zoo_name(spec.config, "cpu"), set()).add(spec.config["train"]["precision"])
            if campaign is not None and (campaign / sweep / "runs" / spec.run_id / "checkpoint.pt").is_file():
                begun.add(zoo_name(spec.config, "cpu"))
    for sweep_index, sweep in enumerate(SWEEPS):
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
                objective, precision = spec.config["objective"]["name"], spec.config["train"]["precision"]
                if runs is not None and seed not in runs.get(objective, ()):
                    continue
                partial = campaign is not None and (campaign / sweep / "runs" / spec.run_id / "checkpoint.pt").is_file()
                if not partial and zoo_name(spec.config, "cpu") in begun:
                    print(f"# twin begun: {sweep} {spec.run_id} ({objective} s{seed}, {precision}) is left out, "
                          f"its twin of the same zoo name has a checkpoint", file=sys.stderr)
                    continue
                resume_in = None
                if precisions is not None and precision not in precisions:
                    if not (partial and continue_in):
                        print(f"# left for later: {sweep} {spec.run_id} ({objective} s{seed}, {precision}: this "
                              f"machine trains {', '.join(sorted(precisions))} only)", file=sys.stderr)
                        continue
                    resume_in = continue_in
                    print(f"# continued in {continue_in}: {sweep} {spec.run_id} ({objective} s{seed}, partial, "
                          f"{precision})", file=sys.stderr)
                elif (partial and twins_in and precision != twins_in
                      and twins_in in trained_in[zoo_name(spec.config, "cpu")]):
                    resume_in = twins_in
                    print(f"# continued in {twins_in} as its twin trains: {sweep} {spec.run_id} ({objective} "
                          f"s{seed}, partial, {precision})", file=sys.stderr)
                deferred = (twins_last and precision == "fp32" and resume_in is None
                            and "bf16" in trained_in[zoo_name(spec.config, "cpu")])
                planned.append((deferred, sweep_index, not partial, len(planned), sweep, narrowed,
                                f"{objective}-s{seed}", resume_in, zoo_name(spec.config, "cpu")))
    # twins (the same model in another precision, one zoo name: zoo_sprites_ref300k_factor_fp32.yaml):
    # one of them only, the one begun, else the first in the campaign's order
    chosen: dict[str, tuple] = {}
    for item in sorted(planned, key=lambda p: (p[2], p[1], p[3])):
        if item[-1] in chosen:
            print(f"# twin left out: {item[4]} {item[6]} (the model {item[-1]} is trained as "
                  f"{chosen[item[-1]][4]} {chosen[item[-1]][6]})", file=sys.stderr)
            continue
        chosen[item[-1]] = item
    planned = [item for item in planned if chosen[item[-1]] is item]
    files = []
    for item in planned:
        if item[0]:
            print(f"# after the rest: {item[4]} {item[6]} (an fp32 twin: its bf16 twin trains five to eight "
                  f"times faster on a CPU with native bf16)", file=sys.stderr)
    for *_, sweep, narrowed, name, resume_in, _ in sorted(planned, key=lambda p: p[:4]):
        file = out / f"{len(files):02d}-{sweep}-{name}.yaml"
        file.write_text(yaml.safe_dump(narrowed, sort_keys=False))
        files.append((file, sweep, resume_in))
    return files


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out", type=Path)
    p.add_argument("--precisions", default=None,
                   help="comma-separated precisions to keep (e.g. fp32); default: every run")
    p.add_argument("--runs", default=None, help="the runs to keep, 'OBJECTIVE:SEED[,SEED...] ...'; default: every run")
    p.add_argument("--campaign", type=Path, default=None,
                   help="the campaign folder: each sweep's partial runs there come first")
    p.add_argument("--continue-in", default=None, choices=("fp32", "bf16"),
                   help="keep the partial runs --precisions leaves out, continued in this precision")
    p.add_argument("--twins-in", default=None, choices=("fp32", "bf16"),
                   help="continue a partial run in this precision where its twin trains in it")
    p.add_argument("--twins-last", action="store_true",
                   help="the fp32 runs with a bf16 twin after all the others (a CPU without native bf16)")
    args = p.parse_args()
    precisions = None if args.precisions is None else {x.strip() for x in args.precisions.split(",") if x.strip()}
    try:
        runs = None if args.runs is None else parse_runs(args.runs)
    except ValueError as error:
        p.error(str(error))  # exit 2
    if (args.continue_in or args.twins_in) and args.campaign is None:
        p.error("--continue-in and --twins-in need --campaign DIR (where the partial runs are)")
    for file, sweep, resume_in in lane_files(args.out, published(), precisions=precisions, runs=runs,
                                             campaign=args.campaign, continue_in=args.continue_in,
                                             twins_in=args.twins_in, twins_last=args.twins_last):
        print(f"{file}\t{sweep}" + (f"\t{resume_in}" if resume_in else ""))


if __name__ == "__main__":
    main()
