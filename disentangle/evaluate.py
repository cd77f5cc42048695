"""Command line: ``python -m disentangle.evaluate MODEL [--metrics NAMES|all] [--output FILE]``.

Evaluates a model on its own dataset (the ``data`` section of its config) and writes the scores as
JSON. ``MODEL`` is a run folder, a checkpoint file, ``zoo:NAME`` (a pretrained model) or a zoo
weight file (``.safetensors``, as ``python -m disentangle.zoo fetch`` prints); the scores go to
``RUN_DIR/metrics.json`` for a run folder or checkpoint, and to ``NAME.metrics.json`` in the current
folder for a pretrained model or weight file::

    python -m disentangle.evaluate runs/quickstart                     # every metric
    python -m disentangle.evaluate runs/quickstart --metrics mig,dci
    python -m disentangle.evaluate zoo:beta_tcvae-sprites-beta6-cpu20k-ref-s0 --metrics mig
    python -m disentangle.evaluate runs/x --metrics dci --set dci.booster=sklearn --set dci.num_train=2000

The JSON holds ``{"run_dir", "checkpoint", "step", "seed", "metrics": {metric: {score: value}},
"metric_settings", "seconds": {metric: s}}``: ``checkpoint`` is the file (or ``zoo:NAME``) that was
scored and ``step`` its training step, so a run folder whose newest checkpoint was unreadable (and
fell back to ``checkpoint.prev.pt``, with a warning) says so in its record. Scores of different
steps are never merged into one record: evaluating a file that holds another step's scores is
refused before anything is computed. When the output file already holds scores (a sweep's or an earlier
evaluation's ``metrics.json``), the new scores are merged into it: the metrics computed now replace
their old values and settings, every other metric and key (a sweep's ``run_id``, ``config``, ...) is
kept. Scores of one file share one seed, so a ``--seed`` other than the file's is refused: write it
elsewhere with ``--output``. An unknown metric name or setting, or an ``--output`` that is a folder,
is reported on stderr (with the valid names, or a file to name instead) and exits with status 2
before anything is loaded; such a seed, before anything is computed. Each metric's scores are
written (atomically, merged as above) as soon as it finishes, so Ctrl-C keeps the metrics already
computed and says which ``--metrics`` are still to run.

``--data KEY=VALUE`` changes the run's ``data`` section for the evaluation: ``path=...`` where the
data are now (a run folder copied from another machine, a folder of images moved), ``placement``,
``cache`` and the other keys of how the images are kept, or what the data are (``split=test`` for
CelebA's held-out images). The record keeps them (``data_overrides``); scores on other data than a
file's (a change of anything but where and how the images are kept) are neither merged into it nor
overwrite it: write them elsewhere with ``--output``::

    python -m disentangle.evaluate runs/celeba --metrics elbo --data split=test --output test.json

For a model trained by a class/content objective (``mathieu2016``, ``drnet``, ``lord``,
``f_statistic``), ``class_leakage`` and ``swap_accuracy`` take ``class_factors`` and ``class_dim``
from the run's ``objective`` section unless ``--set`` gives them (:func:`~disentangle.objectives.class_content.class_content_settings`).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from ._core.atomic import atomic_write_text
from ._core.cli import (
    REPORTED,
    add_import_option,
    add_logging_options,
    add_threads_option,
    apply_import_option,
    apply_threads_option,
    report,
    setup_logging,
    show_progress,
)
from .errors import ConfigError, InputError

logger = logging.getLogger(__name__)

def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m disentangle.evaluate",
        description="Compute disentanglement metrics of a trained run on its own dataset.",
    )
    p.add_argument("run_dir", metavar="MODEL",
                   help="run folder (holding checkpoint.pt and config.yaml), checkpoint file, zoo:NAME, or zoo "
                        "weight file (.safetensors)")
    p.add_argument("--metrics", "-m", default="all",
                   help="comma-separated metric names, or 'all' (default); see disentangle.metrics.METRICS")
    p.add_argument("--output", "-o", default=None,
                   help="JSON file to write (default: RUN_DIR/metrics.json; NAME.metrics.json here for zoo:NAME "
                        "or a weight file)")
    p.add_argument("--seed", type=int, default=None, help="metric seed (default: the run's config seed, else 0)")
    p.add_argument("--device", default="cpu", help="device for the model and the dataset (default: cpu)")
    p.add_argument("--data", dest="data", action="append", default=[], metavar="KEY=VALUE",
                   help="change the run's data section for this evaluation, e.g. path=/new/place/of/images "
                        "(the data moved) or split=test (CelebA's held-out images); repeatable, VALUE parsed as "
                        "YAML, checked as data.KEY of the config")
    p.add_argument("--set", dest="settings", action="append", default=[], metavar="METRIC.KEY=VALUE",
                   help="a metric setting, e.g. dci.num_train=2000 or downstream_task.predictors=[logistic_regression]"
                   " (repeatable; VALUE is parsed as YAML)")
    p.add_argument("--channels-last", choices=("auto", "true", "false"), default="auto",
                   help="the model's convolution weights in channels-last layout while encoding: auto (default) "
                        "as train.channels_last (on for an AVX512, AMX or AVX2 CPU; scores change only by rounding)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_threads_option(p)
    add_import_option(p)
    p.add_argument("--no-code-table", action="store_true",
                   help="encode every drawn observation (by default, where the dataset's observations are a "
                        "function of the factors alone, each grid point is encoded once: the model's "
                        "representation, its posterior mean, is deterministic)")
    add_logging_options(p)
    return p


def parse_settings(items: list[str], metric_names: list[str]) -> dict[str, dict[str, Any]]:
    """``["dci.num_train=2000"]`` -> ``{"dci": {"num_train": 2000}}``, checked against the signatures."""
    import inspect

    import yaml

    from ._core.registry import did_you_mean
    from .config import _check_value
    from .errors import ParameterError
    from .metrics import METRICS, validate_settings

    settings: dict[str, dict[str, Any]] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        metric, dot, option = key.strip().partition(".")
        if not sep or not dot or not option:
            raise ConfigError(f"--set expects METRIC.KEY=VALUE (e.g. dci.num_train=2000), got '{item}'.")
        fn = METRICS.get(metric)
        metric = METRICS.canonical(metric)  # an alias (sap) sets its metric's settings (sap_score)
        if metric not in metric_names:
            raise ConfigError(f"--set {key}: metric '{metric}' is not among the metrics being computed.")
        params = [
            name for name, p in inspect.signature(fn).parameters.items()
            if p.kind == p.KEYWORD_ONLY and name != "seed"
        ]
        if option not in params:
            raise ConfigError(
                f"--set {key}: '{metric}' has no setting '{option}'.{did_you_mean(option, params)} "
                f"Its settings: {', '.join(params)}."
            )
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError as err:
            raise ConfigError(f"--set {key}: cannot parse the value '{raw}' ({err}).") from None
        hint = _type_hints(fn).get(option)
        if hint is not None:
            value = _check_value(key, value, hint)  # types and Literal choices, with a did-you-mean
        settings.setdefault(metric, {})[option] = value
    for metric, options in settings.items():  # the metrics' own value checks, before anything is loaded
        try:
            settings[metric] = validate_settings(metric, options)
        except ParameterError as err:
            raise ConfigError(f"--set {metric}.{err.parameter}: {err}") from None
        except ConfigError as err:
            raise ConfigError(f"--set {metric}: {err}") from None
    return settings


def parse_data_overrides(items: list[str]) -> dict[str, Any]:
    """``["path=/x", "split=test"]`` -> ``{"path": "/x", "split": "test"}`` (values parsed as YAML);
    their keys and values are checked with the run's data section (:func:`data_section`)."""
    import yaml

    overrides: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip().removeprefix("data.")
        if not sep or not key or "." in key:
            raise ConfigError(f"--data expects KEY=VALUE, a key of the run's data section (e.g. path=/data/images "
                              f"or split=test), got '{item}'.")
        try:
            overrides[key] = yaml.safe_load(raw)
        except yaml.YAMLError as err:
            raise ConfigError(f"--data {key}: cannot parse the value '{raw}' ({err}).") from None
    return overrides


def data_section(data: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """The run's ``data`` section with ``overrides``, validated as a config's (its dataset's keys,
    types and values; one paragraph naming ``data.KEY`` for a wrong one)."""
    if not overrides:
        return dict(data)
    from .config import Config

    if "name" in overrides and overrides["name"] == data.get("name"):  # the run's own dataset: no change
        overrides = {k: v for k, v in overrides.items() if k != "name"}
    if "name" in overrides:
        raise ConfigError("--data name=...: the run's dataset is what it was trained on; evaluate another "
                          "dataset from Python (disentangle.metrics.evaluate_metrics with your dataset).")
    return Config.from_dict({"data": {**data, **overrides}}).to_dict()["data"]


def build_run_dataset(data: dict[str, Any], overrides: dict[str, Any], device: str, model: Any = None,
                      command: str = "evaluate") -> Any:
    """The dataset of a run's ``data`` section with ``overrides`` (:func:`data_section`); when it
    cannot be built because ``data.path`` is not there, the error says how to point at the data.

    A ``model`` trained on a dataset given to ``fit`` (``model.data_given``: the config's data
    section is not what it learned from) is refused unless ``overrides`` say which data to use."""
    from .data import build_dataset

    given = getattr(model, "data_given", None)
    if given is not None and not overrides:
        labels = f", labels {', '.join(given['labels'])}" if given.get("labels") else ", no labels"
        raise InputError(
            f"This run trained on a dataset given to fit() in Python ({given['description']}; {given['size']:,} "
            f"images of shape {tuple(given['image_shape'])}{labels}), not on its config's data section "
            f"({data.get('name')}), which is what {command} would build. Score it in Python with that dataset "
            f"(disentangle.metrics.evaluate_metrics(dataset, disentangle.load(RUN), ...)), or, when a data "
            f"section of the config gives the same images, name it with --data KEY=VALUE."
        )

    section = data_section(data, overrides)
    try:
        dataset = build_dataset(section, device=device)
    except (ConfigError, InputError, FileNotFoundError) as err:
        path = section.get("path")
        if not isinstance(path, str) or not path or Path(path).expanduser().exists():
            raise
        where = "" if Path(path).expanduser().is_absolute() else f" (read from the current folder, {Path.cwd()})"
        raise (ConfigError if isinstance(err, ConfigError) else InputError)(
            f"{err} The run's data.path is '{path}'{where}: if the data are elsewhere now, give their place "
            f"with --data path=NEW_PLACE."
        ) from None
    check_images_fit(model, dataset, overrides)
    return dataset


def check_images_fit(model: Any, dataset: Any, overrides: dict[str, Any]) -> None:
    """Raise :class:`~disentangle.InputError` (one paragraph) when the images of ``dataset`` are not
    of the shape ``model`` takes: data overrides that resize or recolour them (``--data image_size=``,
    ``channels=``), or a data section that no longer builds what the run trained on."""
    want = getattr(model, "image_shape", None)
    have = getattr(dataset, "image_shape", None)
    if want is None or have is None or tuple(want) == tuple(have):
        return
    if overrides:
        given = " ".join(f"{k}={v}" for k, v in overrides.items())
        cause, fix = (f"the data built with --data {given} gives them", "leave out or change the --data keys that "
                      f"resize or recolour the images (an image folder's image_size={want[-1]} and channels, say)")
    else:
        cause, fix = ("the run's data section builds them so now", "give the data the run trained on, with "
                      "--data KEY=VALUE where its section has changed")
    raise InputError(
        f"The model takes images of shape {tuple(want)} (channels, height, width) and this data gives "
        f"{tuple(have)}: {cause}. A model is scored and drawn on images of its own shape: {fix}."
    )


def data_changes(saved: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """The ``overrides`` that differ from the run's ``saved`` data section, its keys' defaults
    filled in: a value the run already has, written or by default (a section saved before that
    key existed), is no change, so its scores are of the run's own data."""
    from .config import Config

    try:
        full = {**Config.from_dict({"data": saved}).to_dict()["data"], **saved}
    except ConfigError:  # a section this version no longer reads: its written keys only
        full = saved
    return {k: v for k, v in overrides.items() if k not in full or full[k] != v}


def other_images(model: Any, dataset: Any, overrides: dict[str, Any]) -> dict[str, Any]:
    """``overrides`` with ``content`` added when the images read now (an image folder, CelebA) are not
    those the run trained on (:func:`~disentangle.data.content_identity` of the dataset against the
    checkpoint's record): ``--data path=`` naming another folder, or files added or replaced since,
    scores other data, which a run's own record does not take in (:func:`existing_record`)."""
    from .data import content_identity

    trained, now = getattr(model, "data_content", None), content_identity(dataset)
    if trained is None or now is None or trained == now:
        return overrides
    logger.warning(
        "the images read now are not those the run trained on (%s images then, %s now, or other names or "
        "sizes): these scores are of other data, recorded as such (data_overrides.content)",
        f"{trained.get('images', 0):,}", f"{now['images']:,}")
    return {**overrides, "content": now}


def changes_the_data(overrides: dict[str, Any] | None) -> dict[str, Any]:
    """The overrides that change which images are scored: every key but where and how they are
    kept (``path`` and :data:`disentangle.data.STORAGE_KEYS`)."""
    from .data import STORAGE_KEYS

    return {k: v for k, v in (overrides or {}).items() if k != "path" and k not in STORAGE_KEYS}


def model_fingerprint(model: Any) -> str:
    """A sha256 of the model's weights (its ``state_dict``, names and values in order): what a
    scores record is of, wherever the model's files lie (a run folder moved keeps it)."""
    import hashlib

    import torch

    digest = hashlib.sha256()
    for name, tensor in model.state_dict().items():
        digest.update(name.encode())
        if isinstance(tensor, torch.Tensor):
            digest.update(tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def existing_record(output: Path, seed: int, step: int | None = None,
                    data_overrides: dict[str, Any] | None = None, model_sha256: str | None = None,
                    ) -> dict[str, Any] | None:
    """The scores record already in ``output`` (None when there is none), checked to share ``seed``
    and, where both are known, the training ``step`` (a sweep's record calls it ``steps``) and the
    model's weights (``model_sha256``, :func:`model_fingerprint`).

    Raises ``ConfigError`` when the file holds scores computed with another seed, of another step
    or on other data (:func:`changes_the_data` of ``data_overrides`` and of the record's), or is not
    a scores record, before anything is computed: merging would mix seeds, models or data in one
    record, and overwriting would lose the scores already there."""
    from .metrics.results import read_json

    if not output.exists():
        return None
    record = read_json(output)
    if not isinstance(record, dict) or not isinstance(record.get("metrics", {}), dict):
        raise ConfigError(
            f"{output} exists and is not a metrics record (a JSON object with 'metrics'); evaluate would "
            f"overwrite it. Move it away, or write the scores elsewhere with --output FILE."
        )
    recorded = record.get("seed")
    if record.get("metrics") and recorded is not None and int(recorded) != seed:
        raise ConfigError(
            f"{output} holds scores computed with seed {recorded}, and this evaluation uses seed {seed}; one "
            f"file's scores share one seed, so they are neither mixed nor overwritten. Write these scores "
            f"elsewhere with --output FILE, or evaluate with --seed {recorded}."
        )
    recorded_step = record.get("step", record.get("steps"))
    if record.get("metrics") and recorded_step is not None and step is not None and int(recorded_step) != step:
        raise ConfigError(
            f"{output} holds scores of the model at step {recorded_step} ({record.get('checkpoint', 'checkpoint')}), "
            f"and the model loaded now is at step {step}; one file's scores are of one model, so they are "
            f"neither mixed nor overwritten. Write these scores elsewhere with --output FILE, or move {output} away."
        )
    recorded_sha = record.get("model_sha256")
    if record.get("metrics") and recorded_sha and model_sha256 and recorded_sha != model_sha256:
        raise ConfigError(
            f"{output} holds scores of another model ({record.get('checkpoint') or record.get('run_dir') or 'its weights'} "
            f"differ from those loaded now); one file's scores are of one model, so they are neither mixed nor "
            f"overwritten. Write these scores elsewhere with --output FILE, or move {output} away."
        )
    recorded_data = changes_the_data(record.get("data_overrides"))
    if record.get("metrics") and recorded_data != changes_the_data(data_overrides):
        def described(changes: dict[str, Any]) -> str:
            return "the run's own data" if not changes else "its data with " + ", ".join(
                f"{k}={v!r}" for k, v in sorted(changes.items()))

        raise ConfigError(
            f"{output} holds scores on {described(recorded_data)}, and this evaluation scores "
            f"{described(changes_the_data(data_overrides))}; one file's scores are of one dataset, so they are "
            f"neither mixed nor overwritten. Write these scores elsewhere with --output FILE."
        )
    return record


def merged_record(previous: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """``new`` merged into ``previous``: the metrics of ``new`` replace their old scores, settings
    and timings; every other metric and key of ``previous`` is kept (``total_seconds`` is the
    latest evaluation's)."""
    if not previous:
        return new
    merged = {**previous, **{k: v for k, v in new.items() if k not in ("metrics", "metric_settings", "seconds", "run_dir")}}
    merged.setdefault("run_dir", new["run_dir"])
    for key in ("total_seconds", "data_overrides"):  # of the latest evaluation only: not an older one's
        if key not in new:
            merged.pop(key, None)
    for key in ("metrics", "metric_settings", "seconds"):
        old = previous.get(key)
        merged[key] = {**(old if isinstance(old, dict) else {}), **new[key]}
    # a record written before settings were recorded holds its other metrics at their defaults
    if "metric_settings" not in previous:
        from .metrics.results import recorded_settings

        for metric in merged["metrics"]:
            if metric not in new["metrics"]:
                merged["metric_settings"][metric] = recorded_settings(previous, metric)
    return merged


def _type_hints(fn: Any) -> dict[str, Any]:
    import typing

    try:
        return typing.get_type_hints(fn)
    except Exception:  # unresolvable annotations: only the names are checked
        return {}


def default_output(source: str) -> Path:
    """Where the scores of ``source`` go without ``--output``: the run folder's ``metrics.json``
    (a checkpoint file's folder), or ``NAME.metrics.json`` in the current folder for ``zoo:NAME``
    and a zoo weight file (never beside a file in the download cache)."""
    from .loading import is_weights_file, is_zoo_name

    if is_zoo_name(source):
        return Path(f"{_file_safe(source.split(':', 1)[1])}.metrics.json")
    path = Path(source)
    if is_weights_file(path):
        return Path(f"{_file_safe(path.stem)}.metrics.json")
    return (path if path.is_dir() else path.parent) / "metrics.json"


def check_output(output: str | Path, given: bool) -> Path:
    """``output`` checked to be a place a JSON file can be written: not an existing folder nor one
    written as a folder (``results/``, which ``Path`` would read as a file ``results``), and no
    folder above it an existing file. Raises ``ConfigError`` (one paragraph naming the path and a
    file to give instead) before anything is loaded; ``given`` says whether ``--output`` named it."""
    named_as_folder = isinstance(output, str) and output.endswith(("/", os.sep))
    output = Path(output)
    what = f"--output '{output}{'/' if named_as_folder else ''}'" if given else \
        f"The scores' file, {output} (the default without --output),"
    if output.is_dir() or named_as_folder:
        kind = "is a folder" if output.is_dir() else "names a folder (it ends with '/')"
        raise ConfigError(
            f"{what} {kind}; evaluate writes its scores to one JSON file and would not replace a folder. "
            f"Name a file, e.g. --output {output / 'metrics.json'}."
        )
    for parent in output.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ConfigError(
                    f"{what} cannot be written: {parent} is a file, not a folder. Name a file in a folder (an "
                    f"existing one or a new one), e.g. --output {parent.parent / output.name}."
                )
            break
    from ._core.writable import check_writable

    check_writable(output.parent, what, f"--output {Path('scores') / output.name}")
    return output


def _file_safe(name: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name) or "model"


def _load_run(source: str, device: str, data_overrides: dict[str, Any] | None = None):
    import torch

    import disentangle

    from ._core.hardware import keep_freed_memory

    if torch.device(device).type == "cpu":
        keep_freed_memory()  # a metric after another one would otherwise fault its memory in again
    model = disentangle.load(source, map_location=device)
    config = getattr(model, "config", None)
    if not isinstance(config, dict) or "data" not in config:
        raise ConfigError(f"the model loaded from '{source}' has no config with a 'data' section.")
    dataset = build_run_dataset(dict(config["data"]), data_overrides or {}, device, model)
    return model, dataset, config


def _interrupted(names: list[str], finished: dict[str, Any], output: Path | None) -> str:
    """What Ctrl-C leaves: the metrics whose scores are in ``output`` and the ``--metrics`` still to run."""
    if not finished:
        return "interrupted: no metrics were written."
    rest = [n for n in names if n not in finished]
    return (
        f"interrupted: the scores of {', '.join(finished)} are in {output}. Still to run: --metrics {','.join(rest)}; "
        f"rerun with that (and the --set of those metrics only) to add their scores to the file."
    )


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    setup_logging(args)
    names: list[str] = []
    finished: dict[str, dict[str, float]] = {}  # each metric's scores, written as it finishes
    output: Path | None = None
    try:
        apply_import_option(args.imports)  # the user's metrics, backbones, datasets
        from ._core.devices import check_device
        from .metrics import evaluate_metrics, resolve_metric_names
        from .metrics.results import settings_identity

        names = resolve_metric_names(args.metrics)  # fails fast on a typo, before loading anything
        settings = parse_settings(args.settings, names)
        data_overrides = parse_data_overrides(args.data)
        threads = apply_threads_option(args.threads)
        source = args.run_dir  # a str: zoo:NAME is a name, not a path
        # a folder where the file goes is refused before anything is loaded
        output = check_output(args.output if args.output else default_output(source), given=bool(args.output))
        check_device(args.device, name="--device")  # "gpu", or cuda without CUDA: one paragraph, not torch's
        model, dataset, config = _load_run(source, args.device, data_overrides)
        data_overrides = data_changes(dict(config.get("data") or {}), data_overrides)
        data_overrides = other_images(model, dataset, data_overrides)
        # "all" now knows whether there is an encoder, and what the data allows (a grid, labels)
        names = resolve_metric_names(args.metrics, model, dataset)
        from .objectives.class_content import class_content_settings

        settings = class_content_settings(config, names, settings)
        from .metrics import check_metric_applies

        for name in names:  # a metric this data cannot give is refused before any bar or encoding
            check_metric_applies(name, dataset, settings.get(name, {}))
        skipped = [n for n in resolve_metric_names(args.metrics, model) if n not in names]
        if skipped:
            from .metrics import data_of

            what = {"labels": "labelled images without a factor grid", "images": "images without labels"}
            logger.info(f"skipped (they do not apply to {what[data_of(dataset)]}): {', '.join(skipped)}")
        seed = args.seed if args.seed is not None else int(config.get("seed", 0) or 0)
        checkpoint = str(getattr(model, "source", source))
        step = int(getattr(model, "trained_steps", 0))
        fingerprint = model_fingerprint(model)
        previous = existing_record(output, seed, step, data_overrides, fingerprint)
        logger.info(f"scoring {checkpoint} (step {step:,}) with {threads}")

        seconds: dict[str, float] = {}
        bar = grid_bar = None
        if show_progress(args):
            from tqdm.auto import tqdm

            bar = tqdm(total=len(names), desc="metrics", unit="metric", file=sys.stderr, position=0)
            bar.set_postfix_str(names[0])

        def encoded(count: int, grid_size: int) -> None:
            # the code table: the first sampling metric encodes (most of) the factor grid, once
            nonlocal grid_bar
            if bar is None:
                return
            if grid_bar is None:
                from tqdm.auto import tqdm

                grid_bar = tqdm(
                    total=grid_size, desc="encoding the factor grid (once, shared by every metric)", unit="img",
                    unit_scale=True, file=sys.stderr, position=1, leave=False,
                )
            grid_bar.update(count)

        def record_of(results: dict[str, dict[str, float]], **more: Any) -> dict[str, Any]:
            return merged_record(previous, {
                "run_dir": str(Path(source)),
                "checkpoint": checkpoint,
                "step": step,
                "model_sha256": fingerprint,
                "seed": seed,
                "metrics": results,
                # what each score depends on, so a sweep or zoo publish never reuses it for other settings
                "metric_settings": {m: settings_identity(m, settings.get(m)) for m in results},
                "seconds": {m: seconds[m] for m in results},
                **more,
                **({"data_overrides": data_overrides} if data_overrides else {}),
            })

        def done(name: str, scores: dict[str, float], secs: float) -> None:
            seconds[name] = round(secs, 3)
            # each metric's scores are on disk as soon as it finishes: Ctrl-C or a crash keeps them
            finished[name] = scores
            atomic_write_text(output, json.dumps(record_of(finished), indent=2) + "\n")
            if bar is not None:
                bar.update(1)
                nxt = names.index(name) + 1
                bar.set_postfix_str(names[nxt] if nxt < len(names) else "")

        start = time.perf_counter()
        try:
            results = evaluate_metrics(
                dataset, model, names, seed=seed, settings=settings, callback=done,
                code_table=False if args.no_code_table else "auto", on_encode=encoded,
                channels_last={"auto": "auto", "true": True, "false": False}[args.channels_last],
            )
        finally:
            for b in (grid_bar, bar):
                if b is not None:
                    b.close()
        record = record_of(results, total_seconds=round(time.perf_counter() - start, 3))
        atomic_write_text(output, json.dumps(record, indent=2) + "\n")
    except (*REPORTED, ValueError, KeyboardInterrupt) as err:
        return report(err, interrupted=_interrupted(names, finished, output))
    print(_table(results))
    print(f"scored {checkpoint} at step {step:,}; wrote {output}")
    return 0


def _table(results: dict[str, dict[str, float]]) -> str:
    """A plain two-column table of every score."""
    rows = [(f"{metric}.{key}", value) for metric, scores in results.items() for key, value in scores.items()]
    width = max((len(r[0]) for r in rows), default=10)
    return "\n".join(f"{name:<{width}}  {value:.4f}" for name, value in rows)


if __name__ == "__main__":
    from disentangle._core.cli import run_main

    run_main(main)
