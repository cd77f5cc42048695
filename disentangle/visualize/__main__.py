"""Command line: ``python -m disentangle.visualize RUN_DIR|zoo:NAME [--out DIR] [--what NAMES]``.

Loads the model with :func:`disentangle.load`, builds its dataset from the ``data`` section of its
config, and writes the pictures of :mod:`disentangle.visualize.pictures` (by default all of them;
``metrics.png`` only when scores exist: ``--metrics FILE``, a zoo model's published scores, or
where ``python -m disentangle.evaluate`` writes them: ``RUN_DIR/metrics.json``, ``NAME.metrics.json``
in the current folder for a zoo weight file)::

    python -m disentangle.visualize runs/quickstart                        # into runs/quickstart/
    python -m disentangle.visualize runs/quickstart --what gif,latent_responses --out pictures/
    python -m disentangle.visualize runs/quickstart --what gif --limit 3 --frames 60
    python -m disentangle.visualize runs/faces --data path=/scratch/faces  # the run's images moved

On images without factor labels (an image folder), ``all`` leaves out the pictures that read them
(``latent_responses``; a logged note says so). Bad input (an unknown picture name, such a picture
named in ``--what``, a folder without a model, missing scores or matplotlib) is reported as one
paragraph on stderr with exit status 2, before any file is written.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from .._core.checks import positive, positive_int
from .._core.cli import (
    REPORTED,
    add_import_option,
    add_logging_options,
    add_threads_option,
    apply_import_option,
    apply_threads_option,
    report,
    setup_logging,
)
from ..config import ZOO_PREFIX
from ..errors import InputError
from .pictures import PICTURES, PLOTTED, resolve_pictures

METRICS_FILE = "metrics.json"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m disentangle.visualize",
        description="Write a trained model's pictures: traversals (PNG and GIF), reconstructions, prior "
        "samples, latent responses, KL per latent and metric scores.",
    )
    p.add_argument("source", help="run folder, checkpoint file, or zoo:NAME")
    p.add_argument("--out", "-o", default=None,
                   help="folder to write into (default: the run folder; for zoo:NAME, ./NAME_pictures)")
    p.add_argument("--what", "-w", default="all",
                   help=f"comma-separated pictures, or 'all' (default): {', '.join(PICTURES)}")
    p.add_argument("--device", default="cpu", help="device for the model and the dataset (default: cpu)")
    add_threads_option(p)
    p.add_argument("--seed", type=int, default=None,
                   help="seed of the images shown and of the prior samples (default: the run's seed, as the "
                        "trainer drew its pictures; 0 for a model without one)")
    p.add_argument("--metrics", default=None, metavar="FILE",
                   help=f"scores for metrics.png (default: a zoo model's published scores, or where evaluate writes them: "
                        f"RUN_DIR/{METRICS_FILE}, NAME.{METRICS_FILE} here for a zoo weight file)")
    p.add_argument("--limit", type=float, default=None,
                   help="traversal range [-limit, limit] (default: 2, or 1 for InfoGAN's uniform codes)")
    p.add_argument("--frames", type=int, default=40, help="frames of one loop of traversals.gif (default: 40)")
    p.add_argument("--fps", type=float, default=20.0, help="frames per second of traversals.gif (default: 20)")
    p.add_argument("--images", type=int, default=3, help="input images in traversals.png (default: 3)")
    add_import_option(p)
    p.add_argument("--data", dest="data", action="append", default=[], metavar="KEY=VALUE",
                   help="change the run's data section for the pictures, e.g. path=/new/place/of/images "
                        "(repeatable; VALUE parsed as YAML, checked as data.KEY of the config)")
    add_logging_options(p)
    return p


def _check_device(device: str) -> str:
    from .._core.devices import check_device

    check_device(device, name="--device")
    return device


def _default_out(source: str) -> Path:
    from ..loading import is_weights_file

    if source.startswith(ZOO_PREFIX):
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", source[len(ZOO_PREFIX):]) or "zoo"
        return Path(f"{name}_pictures")
    path = Path(source)
    if is_weights_file(path):  # a zoo weight file: not beside it, in the download cache
        return Path(f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', path.stem) or 'model'}_pictures")
    return path if path.is_dir() else path.parent


def _metrics_file(source: str, given: str | None) -> Path | None:
    """The scores file for metrics.png: ``--metrics FILE``, else where ``python -m disentangle.evaluate
    SOURCE`` writes its scores (``RUN_DIR/metrics.json``; ``NAME.metrics.json`` in the current folder for
    a zoo weight file, then a ``metrics.json`` beside that file) when it exists; None for a zoo model
    (its published scores are in the manifest) or when there is none."""
    if given is not None:
        return Path(given)
    if source.startswith(ZOO_PREFIX):
        return None
    from ..evaluate import default_output
    from ..loading import is_weights_file

    path = Path(source)
    candidates = [default_output(source)]
    if is_weights_file(path):
        candidates.append(path.parent / METRICS_FILE)
    return next((candidate for candidate in candidates if candidate.exists()), None)


def _find_metrics(source: str, given: str | None) -> dict[str, dict[str, float]] | None:
    """The scores for metrics.png: those of :func:`_metrics_file`, else a zoo model's published
    scores; None when there are none."""
    from .plots import check_metrics, read_metrics

    if given is None and source.startswith(ZOO_PREFIX):
        from .. import zoo

        name = source[len(ZOO_PREFIX):]
        scores = zoo.info(name).get("metrics")
        return check_metrics(scores, source=f"the zoo's record of {name}") if scores else None
    path = _metrics_file(source, given)
    return read_metrics(path) if path is not None else None


def _recorded_step(record: dict) -> int | None:
    """The training step a scores record (:func:`_record`) holds (``step``, or a sweep's ``steps``);
    None for a zoo model's published scores or a file that records none."""
    step = record.get("step", record.get("steps"))
    return int(step) if isinstance(step, (int, float)) and not isinstance(step, bool) else None


def _record(source: str, given: str | None) -> dict:
    """The scores file of :func:`_metrics_file` as a dict (empty when there is none)."""
    from ..metrics.results import read_json

    path = _metrics_file(source, given)
    record = read_json(path) if path is not None else None
    return record if isinstance(record, dict) else {}


def _load(source: str, device: str, data_overrides: dict | None = None):
    import disentangle

    try:
        model = disentangle.load(source, map_location=device)
    except FileNotFoundError as err:
        raise InputError(f"No model to show at '{source}': {err}") from None
    config = getattr(model, "config", None)
    if not isinstance(config, dict) or "data" not in config:
        raise InputError(
            f"The model loaded from '{source}' has no config with a 'data' section, so its dataset is "
            f"unknown; use the Python API (disentangle.visualize.write_pictures) with your dataset."
        )
    from ..evaluate import build_run_dataset

    return model, build_run_dataset(dict(config["data"]), data_overrides or {}, device, model, "visualize")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    setup_logging(args)
    try:
        apply_import_option(args.imports)  # the user's backbones and datasets
        from .plots import require_matplotlib

        explicit = args.what != "all"
        names = resolve_pictures(args.what)
        device = _check_device(args.device)
        if args.limit is not None:
            positive("--limit", args.limit)
        positive_int("--frames", args.frames, minimum=2)
        positive("--fps", args.fps)
        positive_int("--images", args.images)
        if args.seed is not None:
            positive_int("--seed", args.seed, minimum=0)
        apply_threads_option(args.threads)
        from ..evaluate import parse_data_overrides

        data_overrides = parse_data_overrides(args.data)
        skipped_metrics = False
        metrics = _find_metrics(args.source, args.metrics) if "metrics" in names else None
        if "metrics" in names and metrics is None:
            if explicit:
                raise InputError(
                    f"metrics.png needs scores, and {args.source} has none ({METRICS_FILE} for a run, the "
                    f"manifest's scores for a zoo model); pass --metrics FILE (a metrics.json written by "
                    f"python -m disentangle.evaluate) or leave 'metrics' out of --what."
                )
            names.remove("metrics")  # 'all' writes metrics.png only where scores exist, and says so
            skipped_metrics = True
        if any(n in PLOTTED for n in names):
            require_matplotlib()
        out = Path(args.out) if args.out is not None else _default_out(args.source)
        if out.exists() and not out.is_dir():
            raise InputError(f"--out '{out}' is a file, not a folder; choose a folder to write the pictures into.")
        from .._core.writable import check_writable

        check_writable(out, f"--out '{out}'" if args.out is not None else f"The pictures' folder, {out} (the default "
                       "without --out),", "--out pictures/NAME")
        model, dataset = _load(args.source, device, data_overrides)
        record = _record(args.source, args.metrics) if metrics is not None else {}
        recorded, recorded_model = _recorded_step(record), record.get("model_sha256")
        trained = getattr(model, "trained_steps", None)
        problem = None
        if recorded is not None and trained is not None and recorded != int(trained):
            problem = (f"the scores for metrics.png are of the model at step {recorded:,}, and the model loaded from "
                       f"{args.source} is at step {int(trained):,}")
        elif recorded_model:
            from ..evaluate import model_fingerprint

            if recorded_model != model_fingerprint(model):
                problem = (f"the scores for metrics.png are of another model than the one loaded from {args.source} "
                           "(their record's weights fingerprint, model_sha256, differs)")
        if problem is not None:
            if explicit and "metrics" in names:
                raise InputError(f"{problem}; score this one with python -m disentangle.evaluate {args.source} "
                                 f"--output FILE and pass --metrics FILE, or leave 'metrics' out of --what.")
            names.remove("metrics")
            metrics = None
            print(f"note: metrics.png skipped: {problem}.", file=sys.stderr)
        from .pictures import pictures_for, pictures_for_data

        if not explicit:
            names = pictures_for(model, names)  # swaps.png for a class/content model
        # images without factor labels: 'all' leaves latent_responses out (logged), naming it is refused
        names = pictures_for_data(names, dataset, explicit=explicit, option="--what")
        if skipped_metrics:
            print(
                f"note: metrics.png skipped: {args.source} has no scores ({METRICS_FILE}); compute them with "
                f"python -m disentangle.evaluate, or pass --metrics FILE.", file=sys.stderr,
            )

        from .pictures import write_pictures

        seed = args.seed if args.seed is not None else int((getattr(model, "config", None) or {}).get("seed", 0) or 0)
        written = write_pictures(
            model, dataset, out, names, seed=seed, metrics=metrics, limit=args.limit,
            num_frames=args.frames, fps=args.fps, num_images=args.images,
        )
    except (*REPORTED, KeyboardInterrupt) as err:
        return report(err, interrupted="interrupted: the pictures written so far are complete; rerun to write the rest.")
    for path in written.values():
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    from disentangle._core.cli import run_main

    run_main(main)
