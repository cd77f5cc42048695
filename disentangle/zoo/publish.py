"""Publishing a finished run into a zoo: its weight file and its manifest entry.

:func:`publish` reads the run's newest checkpoint, scores it (the six supervised metrics of
Locatello et al. 2019 and the unsupervised scores, at their defaults, with the run's seed)
unless the run folder's ``metrics.json`` (written by ``python -m disentangle.evaluate`` or a sweep)
already holds them with the same settings (a score recorded with other settings is computed again), writes ``WEIGHTS_DIR/NAME.safetensors`` and adds ``NAME`` to the manifest. Every
check runs before anything is written or computed (the name, the run, where the manifest and the
weight file go, a manifest entry or file with other weights, and whether each metric can run on
the run's data: an image folder has no factors for the supervised metrics); the weight file and
the manifest are each written atomically, and publishing the same run again under the same name
rewrites identical bytes. Each metric computed is added to ``metrics.json`` as soon as it is done:
an interrupted publish (Ctrl-C) keeps the finished ones, and a rerun computes only the rest.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .._core.atomic import atomic_write_bytes
from .._core.hardware import cpu_bf16_flags, cpu_family_model, cpu_name
from ..errors import ConfigError, DisentangleError
from ..metrics.names import PUBLISHED_METRICS
from ..metrics.results import recorded_settings, settings_identity, stale_metrics
from . import manifest as _manifest
from .weights import OBJECTIVE_PREFIX, encode_weights, sha256_bytes

#: the scores a published model records by default: the six metrics of the study + unsupervised
#: (:data:`disentangle.metrics.names.PUBLISHED_METRICS`, whose module imports neither the metrics
#: nor scikit-learn)
DEFAULT_METRICS: tuple[str, ...] = PUBLISHED_METRICS

_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")


def check_name(name: str) -> str:
    """A pretrained name: lower-case letters, digits, ``_``, ``-``, ``.``; it is also the file name."""
    if not isinstance(name, str) or not _NAME.match(name) or name.endswith(".") or len(name) > 120:
        raise ConfigError(
            f"'{name}' cannot be a pretrained model name: use lower-case letters, digits, '_', '-' and "
            f"'.' (at most 120 characters, starting with a letter or digit), e.g. "
            f"beta_vae-sprites-beta4-cpu20k-ref-s0 (recipe name, schedule, seed)."
        )
    return name


def check_shipped_manifest_writable(path: Path) -> None:
    """Refuse to publish into the package's own manifest (``--manifest`` left out) unless it is a
    source checkout's (``pip install -e``) that this process may write: in an installed package
    the model would count as shipped and be lost at the next upgrade, and a read-only
    site-packages fails only after the metrics were computed."""
    installed = any(part in ("site-packages", "dist-packages") for part in path.resolve().parts)
    folder = path.parent
    if installed or not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        why = "is inside the installed package" if installed else "cannot be written by this process"
        raise ConfigError(
            f"Without --manifest, publish writes into the package's own manifest, {path}, which {why}: a model "
            f"published there would count as shipped and be lost at the next upgrade. Give a manifest of your "
            f"own, e.g. --manifest ~/myzoo/manifest.json (created when missing), then export "
            f"DISENTANGLE_ZOO_MANIFEST=~/myzoo/manifest.json to load it."
        )


def check_not_a_recipe(name: str) -> None:
    """Refuse a pretrained name that is a recipe's: a generated recipe (``beta_vae-dsprites-beta4-s0``)
    or a shipped config (``quickstart``). The catalog takes a pretrained model's entry over a recipe
    of the same name, so publishing it would change what ``--config zoo:NAME`` trains."""
    from ..config.sources import shipped_config_names
    from .recipes import parse_generated

    if parse_generated(name) is not None or name in shipped_config_names():
        raise ConfigError(
            f"'{name}' is the name of a zoo recipe; a pretrained model of that name would replace the recipe "
            f"(python -m disentangle.zoo info {name}, --config zoo:{name}). Name the model with its schedule, "
            f"e.g. {name.rsplit('-s', 1)[0] if '-s' in name else name}-cpu20k{'-s' + name.rsplit('-s', 1)[1] if '-s' in name else ''}."
        )


def check_not_a_shipped_model(name: str, manifest_path: Path) -> None:
    """Refuse, for a manifest of the user's, the name of a pretrained model the package ships: a later
    manifest's entry replaces the package's (:mod:`~disentangle.zoo.manifest`), so every
    ``zoo:NAME`` would then load the user's model as if it were the published one."""
    if manifest_path.resolve() == _manifest.SHIPPED_MANIFEST.resolve():
        return
    if name in _manifest.read_manifest(_manifest.SHIPPED_MANIFEST)["models"]:
        raise ConfigError(
            f"'{name}' is a pretrained model the package ships; a model of that name in {manifest_path} would "
            f"replace it wherever that manifest is read (zoo:{name} would load yours as the published one). Name "
            f"yours otherwise, e.g. {name}-mine."
        )


def check_recipe(recipe: str, config: dict[str, Any], run_dir: Path) -> None:
    """Refuse a ``--recipe`` that is no zoo name or shipped config, or whose config trains another kind
    of model than the run (its data, backbone, latent size or objective differ): the record would
    tell users that recipe trained these weights."""
    from ..errors import UnknownNameError
    from . import config_dict

    try:
        recipe_config = config_dict(recipe)
    except UnknownNameError as err:
        raise ConfigError(f"--recipe '{recipe}' is no zoo recipe or shipped config: {err}") from None
    keys = (("data", "name"), ("model", "backbone"), ("model", "latent_dim"), ("objective", "name"))
    differ = []
    for section, key in keys:
        theirs, ours = (recipe_config.get(section) or {}).get(key), (config.get(section) or {}).get(key)
        if theirs is not None and theirs != ours:
            differ.append(f"{section}.{key} {theirs!r} there, {ours!r} in the run")
    if differ:
        raise ConfigError(
            f"--recipe '{recipe}' does not train the model of '{run_dir}': {'; '.join(differ)}. Name the recipe that "
            f"trained it, or leave --recipe out (the record then names none, or the Locatello et al. model number "
            f"its config matches)."
        )


def machine_info() -> dict[str, Any]:
    """The machine publishing the model: OS, architecture, CPU model and its x86 family/model, core
    count, torch's CPU capability and the CPU's native bf16 flags, torch (and the GPU when there is one)."""
    import torch

    info: dict[str, Any] = {
        "system": f"{platform.system()} {platform.release()}",
        "architecture": platform.machine(),
        "cpu": cpu_name(),
        "cpu_family_model": cpu_family_model(),
        "cpu_count": os.cpu_count(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cpu_bf16": cpu_bf16_flags(),
        "torch": torch.__version__,
        "recorded": "at publish time",
    }
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def wall_time_from_log(run_dir: Path) -> tuple[float | None, str]:
    """Training wall time of a run from its ``log.jsonl``: a recorded ``wall_time_s`` /
    ``elapsed_s`` of the last record if the trainer logs one (the time the process was stopped
    left out, which the source names when the record has ``paused_s``), else the sum over logged
    intervals of ``Δstep / steps_per_s`` (exact for a constant rate; the training loop only)."""
    path = run_dir / "log.jsonl"
    if not path.is_file():
        return None, "unknown (no log.jsonl)"
    records = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "step" in record:
            records.append(record)
    for key in ("wall_time_s", "elapsed_s"):
        timed = [r for r in records if isinstance(r.get(key), (int, float))]
        if timed:
            paused = timed[-1].get("paused_s")
            if isinstance(paused, (int, float)) and paused > 0:
                return float(timed[-1][key]), f"log.jsonl {key} ({paused:,.0f} s stopped left out)"
            return float(timed[-1][key]), f"log.jsonl {key}"
    total, previous = 0.0, 0
    for record in records:
        rate = record.get("steps_per_s")
        if isinstance(rate, (int, float)) and rate > 0:
            step = int(record["step"])
            total += max(step - previous, 0) / rate
            previous = step
    if total == 0.0:
        return None, "unknown (log.jsonl has no steps_per_s)"
    return round(total, 1), "estimated from log.jsonl steps_per_s (training loop only)"


def _read_metrics_json(run_dir: Path) -> dict[str, Any]:
    """The run's ``metrics.json`` record; empty if it is absent or older than the newest checkpoint
    (then it scored an earlier state of the run)."""
    from ..training.checkpoint import CHECKPOINT_NAME

    path = run_dir / "metrics.json"
    checkpoint = run_dir / CHECKPOINT_NAME
    if not path.is_file() or (checkpoint.is_file() and path.stat().st_mtime < checkpoint.stat().st_mtime):
        return {}
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or not isinstance(data.get("metrics") or {}, dict):
            raise TypeError
        if data.get("seed") is not None:
            data["seed"] = int(data["seed"])
        return data
    except (ValueError, TypeError):
        raise DisentangleError(
            f"{path} cannot be read (not the JSON that python -m disentangle.evaluate writes); delete "
            f"it to have publish evaluate the run."
        ) from None


def _relative_to(path: Path, folder: Path) -> str:
    try:
        return path.resolve().relative_to(folder.resolve()).as_posix()
    except ValueError:
        return str(path.resolve())


def publish(
    run_dir: str | Path,
    name: str,
    *,
    manifest: str | Path | None = None,
    weights_dir: str | Path | None = None,
    metrics: Iterable[str] | None = None,
    metric_settings: dict[str, dict[str, Any]] | None = None,
    urls: Iterable[str] = (),
    recipe: str | None = None,
    notes: str = "",
    wall_time_s: float | None = None,
    machine: dict[str, Any] | None = None,
    force: bool = False,
    progress: bool = False,
    allow_partial: bool = False,
) -> dict[str, Any]:
    """Publish the run in ``run_dir`` as the pretrained model ``name``; returns its manifest record.

    ``manifest`` defaults to the package's manifest (a source checkout's only:
    :func:`check_shipped_manifest_writable`) and ``weights_dir`` to the ``weights/``
    folder next to the manifest. ``metrics`` (default :data:`DEFAULT_METRICS`) are taken from the
    run's ``metrics.json`` where present there with the settings asked for (the defaults, or
    ``metric_settings``; a score recorded with other settings is computed again), the rest computed with ``metric_settings`` and the
    seed of ``metrics.json`` (else the run's config seed) and added to ``metrics.json``, each as soon
    as it is computed (a ``KeyboardInterrupt`` then says which are recorded and which are left; the
    weight file and the manifest entry are written after the last). An existing entry ``name`` with
    other weights is replaced only with ``force``. A metric that cannot run on the run's data (a
    supervised metric on an image folder), a manifest that is a folder or a weights folder that is a
    file raise :class:`~disentangle.ConfigError` before anything is computed or written, as do a
    ``name`` that is a recipe's (a generated recipe such as ``beta_vae-dsprites-beta4-s0``, or a
    shipped config: the model would replace the recipe under ``--config zoo:NAME``) and a run that
    has not reached its ``train.steps`` (its config would not describe the weights; ``allow_partial``
    publishes it, with ``train.steps`` recorded as the steps it trained).
    """
    import disentangle

    from ..errors import CheckpointError
    from ..metrics import evaluate_metrics, resolve_metric_names
    from .locatello import model_number_for_config
    from .recipes import name_of_model_number

    check_name(name)
    check_not_a_recipe(name)
    urls = list(urls)
    check_urls(urls)
    if wall_time_s is not None:
        import math
        import numbers

        if not isinstance(wall_time_s, numbers.Real) or not math.isfinite(wall_time_s) or wall_time_s < 0:
            raise ConfigError(
                f"--wall-time {wall_time_s} is not a training time: give the seconds the run trained, a finite "
                f"number >= 0 (e.g. --wall-time 5400 for 1.5 hours), or leave it out to read it from the run's log.jsonl."
            )
    run_dir = Path(run_dir)
    if manifest is None:
        check_shipped_manifest_writable(_manifest.SHIPPED_MANIFEST)
    manifest_path = Path(manifest) if manifest is not None else _manifest.SHIPPED_MANIFEST
    check_not_a_shipped_model(name, manifest_path)
    weights_folder = Path(weights_dir) if weights_dir is not None else manifest_path.parent / "weights"
    metric_names = resolve_metric_names(list(metrics) if metrics is not None else list(DEFAULT_METRICS))
    settings = {k: dict(v) for k, v in (metric_settings or {}).items()}
    unused = sorted(set(settings) - set(metric_names))
    if unused:
        raise ConfigError(f"Metric settings given for {', '.join(unused)}, which is not among the metrics to compute ({', '.join(metric_names)}).")
    if not run_dir.is_dir():
        raise ConfigError(f"'{run_dir}' is not a run folder (it does not exist or is a file); pass the train.out_dir of a finished run.")
    check_output_paths(manifest_path, weights_folder,
                       named_as_folder=isinstance(manifest, str) and manifest.endswith(("/", os.sep)))
    existing = _manifest.read_manifest(manifest_path)["models"].get(name)
    try:
        model = disentangle.load(run_dir)
    except CheckpointError as err:
        raise DisentangleError(f"Cannot publish '{run_dir}': {err}") from None
    config = model.config
    from ..objectives import OBJECTIVES

    objective_name = (config.get("objective") or {}).get("name")
    if objective_name not in OBJECTIVES:
        raise ConfigError(
            f"Cannot publish '{run_dir}': its objective '{objective_name}' is not registered in this process (a "
            f"plugin's), so the state its model needs could not be told apart. Import the module that registers it "
            f"(python -m disentangle.zoo publish --import MODULE ..., or import it before calling publish)."
        )
    planned = int((config.get("train") or {}).get("steps") or 0)
    if model.trained_steps < planned:
        if not allow_partial:
            raise ConfigError(
                f"Cannot publish '{run_dir}' as '{name}': it trained {model.trained_steps:,} of its "
                f"{planned:,} steps (train.steps), so its config, which --config zoo:{name} trains, would not "
                f"describe these weights. Finish the run (python -m disentangle.train --resume {run_dir}), or "
                f"pass --allow-partial to publish it as it is, recorded with train.steps {model.trained_steps:,}."
            )
        config = {**config, "train": {**config["train"], "steps": int(model.trained_steps)}}
    given = getattr(model, "data_given", None)
    if given is not None:
        raise ConfigError(
            f"Cannot publish '{run_dir}': it trained on a dataset given to fit ({given['description']}), not on "
            f"its config's data section ({config['data'].get('name')}), so its recipe would not train it and the "
            f"zoo's scores would be computed on other data. Publish runs trained from a config's data."
        )
    from ..objectives.class_content import class_content_settings

    settings = class_content_settings(config, metric_names, settings)  # a class/content model's split
    if recipe is not None:
        check_recipe(recipe, config, run_dir)
    if recipe is None:
        number = model_number_for_config(config)
        recipe = name_of_model_number(number) if number is not None else None

    wall_source = "given"
    if wall_time_s is None:
        wall_time_s, wall_source = wall_time_from_log(run_dir)
    metadata = {
        "name": name,
        "recipe": recipe,
        "config": config,
        "image_shape": list(model.image_shape),
        "library_version": disentangle.__version__,
        "torch_version": __import__("torch").__version__,
        "trained_steps": model.trained_steps,
        "wall_time_s": wall_time_s,
        "wall_time_source": wall_source,
        "machine": machine if machine is not None else machine_info(),
    }
    tensors = dict(model.state_dict())
    tensors.update({OBJECTIVE_PREFIX + k: v for k, v in model.objective_state.items()})
    data = encode_weights(tensors, metadata)
    weight_path = weights_folder / f"{name}.safetensors"
    if weight_path.is_file():
        # safetensors writes its metadata in no fixed order, so equal content can differ in bytes:
        # keep the existing file when it holds the same tensors and metadata (idempotent reruns)
        previous = weight_path.read_bytes()
        if _same_content(previous, data):
            data = previous
    sha256 = sha256_bytes(data)
    _check_not_other_weights(manifest_path, weight_path, name, sha256, force, data)

    record = _read_metrics_json(run_dir)
    seed = record["seed"] if record.get("seed") is not None else int(config.get("seed", 0) or 0)
    # a score recorded with other settings than those asked for is computed again, never reused
    missing = stale_metrics(record, metric_names, settings)
    recorded = dict(record.get("metrics") or {})
    if missing:
        from ..data import build_dataset

        dataset = build_dataset(dict(config["data"]), device="cpu")
        _check_metrics_apply(run_dir, model, dataset, metric_names, missing, settings, defaults=metrics is None)
        computed: dict[str, dict[str, float]] = {}

        def finished(metric: str, scores: dict[str, float]) -> None:
            """Record a metric in ``metrics.json`` as soon as it is computed: Ctrl-C loses only the one running."""
            computed[metric] = recorded[metric] = scores
            metric_settings = {m: recorded_settings(record, m) for m in recorded if m not in computed}
            metric_settings.update({m: settings_identity(m, settings.get(m)) for m in computed})
            _write_metrics_json(run_dir, recorded, seed, metric_settings)

        try:
            _evaluate(evaluate_metrics, dataset, model, missing, seed, settings, progress, finished)
        except KeyboardInterrupt:
            raise KeyboardInterrupt(_interrupted_message(run_dir, missing, computed)) from None
    scores = {m: recorded[m] for m in metric_names}

    with _manifest.locked(manifest_path):
        # checked again under the lock: another publish may have written this name since the check
        # before the metrics (which can take hours)
        _check_not_other_weights(manifest_path, weight_path, name, sha256, force, data)
        atomic_write_bytes(weight_path, data)
        record = {
            "file": _relative_to(weight_path, manifest_path.parent),
            "sha256": sha256,
            "size": len(data),
            "urls": list(urls) or list((existing or {}).get("urls") or []),
            "recipe": recipe,
            "model_number": model_number_for_config(config),
            "config": config,
            "trained_steps": model.trained_steps,
            "wall_time_s": wall_time_s,
            "wall_time_source": wall_source,
            "machine": metadata["machine"],
            "library_version": disentangle.__version__,
            "torch_version": metadata["torch_version"],
            "published": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "metrics": scores,
            "metrics_seed": seed,
            "metrics_settings": settings,
            "notes": notes,
        }
        _manifest.write_entry(manifest_path, name, record)
    return record


def _check_not_other_weights(
    manifest_path: Path, weight_path: Path, name: str, sha256: str, force: bool, data: bytes | None = None,
) -> None:
    """Refuse (unless ``force``) a manifest entry ``name`` or a weight file that holds other weights;
    the same model (``data``'s tensors and config) written on another machine or by another version
    of the library is not other weights: publishing it again records the new provenance."""
    if force or (data is not None and weight_path.is_file()
                 and _same_content(weight_path.read_bytes(), data, provenance=False)):
        return
    existing = _manifest.read_manifest(manifest_path)["models"].get(name)
    if existing is not None and existing.get("sha256") != sha256:
        raise ConfigError(
            f"The manifest {manifest_path} already has a model '{name}' with other weights (sha256 "
            f"{existing.get('sha256')}). Choose another name, or pass --force to replace it."
        )
    if weight_path.is_file() and sha256_bytes(weight_path.read_bytes()) != sha256:
        raise ConfigError(
            f"{weight_path} exists and holds other weights. Choose another name or weights folder, or pass --force to replace it."
        )


def _evaluate(evaluate_metrics, dataset, model, names, seed, settings, progress, finished=None):
    """``evaluate_metrics`` with a tqdm bar over the metrics (on stderr) when ``progress``;
    ``finished(name, scores)`` is called as each metric is computed."""
    import sys

    from tqdm.auto import tqdm

    from ..metrics import METRICS

    with tqdm(total=len(names), desc="metrics", unit="metric", file=sys.stderr, disable=not progress) as bar:
        bar.set_postfix_str(names[0])

        def done(name, scores, seconds):
            if finished is not None:
                finished(name, scores)
            bar.update(1)
            following = names.index(name) + 1
            bar.set_postfix_str(names[following] if following < len(names) else "")

        return evaluate_metrics(dataset, model, names, seed=seed, callback=done,
                                settings={m: v for m, v in settings.items() if METRICS.canonical(m) in names})


def _interrupted_message(run_dir: Path, missing: list[str], computed: dict[str, Any]) -> str:
    """What an interrupted publish kept and what a rerun computes (the weights and the manifest entry
    are written after the last metric, so neither was)."""
    left = [m for m in missing if m not in computed]
    kept = (f"{', '.join(computed)} {'is' if len(computed) == 1 else 'are'} recorded in {run_dir / 'metrics.json'}"
            if computed else "no metric had finished")
    return (f"publish stopped before the weight file and the manifest entry were written: {kept}; left to compute: "
            f"{', '.join(left)}. Run the same command again to compute only {'that one' if len(left) == 1 else 'those'} "
            f"and publish.")


def _check_metrics_apply(
    run_dir: Path, model: Any, dataset: Any, metric_names: list[str], missing: list[str],
    settings: dict[str, dict[str, Any]], *, defaults: bool,
) -> None:
    """Raise :class:`~disentangle.errors.NotAGridError` (one paragraph) when a metric to compute
    cannot run on the run's data (a factor grid or labels it lacks: an image folder), naming those
    metrics and the ``--metrics`` value that can run, before any metric is computed or file written."""
    from ..errors import NotAGridError
    from ..metrics import available_metrics, data_of, metric_applies, metric_spec

    cannot = [m for m in missing if not metric_applies(m, dataset, settings.get(m))]
    if not cannot:
        return
    needs = {
        "grid": "a complete factor grid (they fix factors and draw the others)",
        "labels": "factor labels (they compare codes with the labels)",
    }
    why = "; ".join(
        f"{', '.join(group)} need{'s' if len(group) == 1 else ''} {text}"
        for need, text in needs.items()
        if (group := [m for m in cannot if metric_spec(m).data(settings.get(m) or {}) == need])
    )
    has = "labelled images without a factor grid" if data_of(dataset) == "labels" else "images without factor labels"
    what = getattr(dataset, "name", type(dataset).__name__)
    can = [m for m in metric_names if m not in cannot]
    fitting = list(available_metrics(model, dataset))
    asked = "the default metrics" if defaults else "the metrics asked for"
    if can:
        fix = f"Publish it with {asked} that can run on it: --metrics {','.join(can)}"
    else:
        fix = f"None of {asked} can run on it; publish it with metrics that do: --metrics {','.join(fitting)}"
    raise NotAGridError(
        f"Cannot publish '{run_dir}' with {asked}: {', '.join(cannot)} cannot run on its data ({what}, "
        f"{has}): {why}. {fix} (metrics that apply to this data: {', '.join(fitting) or 'none'}); nothing was "
        f"computed or written."
    )


#: the URL schemes the zoo downloads from (:mod:`disentangle.zoo.fetching`)
URL_SCHEMES = ("https://", "http://", "file://")


def check_urls(urls: Iterable[str]) -> None:
    """Raise :class:`~disentangle.ConfigError` (one paragraph) for a URL the zoo could not download
    from: one that does not start with a scheme of :data:`URL_SCHEMES`, or has nothing after it."""
    for url in urls:
        if not isinstance(url, str) or not url.startswith(URL_SCHEMES) or url.split("://", 1)[1].strip("/") == "":
            raise ConfigError(
                f"--url {url!r} is not a download URL: the zoo fetches weight files from "
                f"{', '.join(s + '...' for s in URL_SCHEMES)} addresses. Give the full address of the "
                f".safetensors file, e.g. --url https://example.org/zoo/NAME.safetensors."
            )


def check_output_paths(manifest: Path, weights_folder: Path, named_as_folder: bool = False) -> None:
    """Raise :class:`~disentangle.ConfigError` (one paragraph) before any work when the manifest is a
    folder (or was written as one, ``named_as_folder``: ``--manifest newzoo/``, which ``Path`` reads
    as a file ``newzoo``), or the weights folder a file, or either lies under a file: where publish
    would write its two files cannot hold them."""
    if manifest.is_dir() or named_as_folder:
        raise ConfigError(
            f"--manifest '{manifest}{'/' if named_as_folder else ''}' is a folder, not a manifest file. Give the path of the manifest (a JSON file, "
            f"created when it does not exist), e.g. --manifest {manifest / 'manifest.json'}; its weight files go to "
            f"a weights/ folder beside it unless --weights-dir says otherwise."
        )
    from .._core.writable import check_writable, file_in_the_way

    blocker = file_in_the_way(manifest.parent)
    if blocker is not None:
        raise ConfigError(
            f"--manifest '{manifest}' cannot be written: '{blocker}' is a file, not a folder. Give a manifest path "
            f"in a folder (created when missing), e.g. --manifest ~/myzoo/manifest.json."
        )
    blocker = file_in_the_way(weights_folder)
    if blocker is not None:
        which = "is a file" if blocker == weights_folder else f"lies under '{blocker}', which is a file"
        raise ConfigError(
            f"The weights folder '{weights_folder}' (--weights-dir; default: weights/ beside the manifest) {which}, "
            f"not a folder. Give a folder for the .safetensors file with --weights-dir (created when missing), or "
            f"move the file out of the way."
        )
    check_writable(manifest.parent, f"--manifest '{manifest}'", "--manifest ~/myzoo/manifest.json")
    check_writable(weights_folder, f"The weights folder '{weights_folder}' (--weights-dir; default: weights/ beside "
                   "the manifest)", "--weights-dir ~/myzoo/weights")


#: metadata of a weight file that says where and when it was written, not what the model is
PROVENANCE_KEYS = ("machine", "library_version", "torch_version", "wall_time_s", "wall_time_source")


def _same_content(a: bytes, b: bytes, provenance: bool = True) -> bool:
    """Whether two zoo weight files hold equal tensors and equal metadata (without ``provenance``,
    :data:`PROVENANCE_KEYS` aside: the same model published again elsewhere or by a later version)."""
    import torch

    from ..errors import WeightsError
    from .weights import decode_weights

    try:
        (ta, ma), (tb, mb) = decode_weights(a), decode_weights(b)
    except WeightsError:
        return False
    if not provenance:
        ma, mb = ({k: v for k, v in m.items() if k not in PROVENANCE_KEYS} for m in (ma, mb))
    return ma == mb and ta.keys() == tb.keys() and all(torch.equal(ta[k], tb[k]) for k in ta)


def _write_metrics_json(
    run_dir: Path, metrics: dict[str, dict[str, float]], seed: int, metric_settings: dict[str, dict[str, Any]]
) -> None:
    path = run_dir / "metrics.json"
    data: dict[str, Any] = {}
    if path.is_file():
        try:
            data = json.loads(path.read_text())
        except ValueError:
            data = {}
    data.update({"run_dir": str(run_dir), "seed": seed, "metrics": metrics, "metric_settings": metric_settings})
    atomic_write_bytes(path, (json.dumps(data, indent=2) + "\n").encode())
