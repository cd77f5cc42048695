"""Peers: our training speed and our metrics against disent and pythae, each installed in its own
virtual environment by this script.

    python benchmarks/peers.py                                  # 3 rounds x 1000 steps, 2 threads, metrics
    python benchmarks/peers.py --steps 60 --rounds 1 --fast-metrics   # a pilot (minutes, not hours)
    python benchmarks/peers.py --skip-metrics --out /tmp/peers.md

Environments
------------
disent (``--disent-version``, default 0.8.0, the newest that installs on Python 3.11) and pythae
(``--pythae-version``, default 0.1.2) are installed into ``--venvs DIR/NAME-VERSION`` (default
``~/.cache/disentangle-peers``): first ``torch==`` the running torch's version (so that pip keeps
the local build instead of fetching another), then the peer with that torch as a constraint.
A marker file records what was asked and what was installed; a venv is reused while they match and
rebuilt otherwise. The disent venv also gets the few dependencies our package needs to load a model
(not numba, which disent would then use) and a ``.pth`` file that makes our checkout importable
there: the metrics worker loads our model and renders our sprites with it. The training images are
exported once from this environment into ``DIR/sprites-N-seed0.npy``.

Part 1: training throughput
---------------------------
The same model everywhere: disentanglement_lib's conv64 β-VAE (10 latents) as ours builds it
(``BACKBONES.build("conv64", ...)``), batch 64, Adam lr 1e-4, β 4, Bernoulli (BCE) reconstruction
loss summed over pixels. The parameter counts are printed and must be equal, or nothing is reported.
Each run is a fresh process (workers in ``benchmarks/peers/``, where their docstrings say exactly
what each library runs):

* ours, three times: ``python -m disentangle.train --config sprites/beta_vae`` (the zoo's recipe,
  which writes ``train.precision: fp32``) and a config naming only the data, model, objective and
  batch with every other key at its default (``train.precision: auto`` and the other start-up
  choices), each a run of its config's own length (20,000 and 300,000 steps) stopped by Ctrl-C
  after the timed steps, so that every start-up choice is that of a real run (the sprites grid
  materialised at start-up); and the defaults again as a run of exactly ``--steps`` steps (which
  renders the sprites per batch). Each logs and checkpoints; only output folder, progress bar, lr
  and β are set. The ratios are ours-defaults (the full-length run) ÷ each row;
* disent: ``BetaVae`` with its ``DecoderConv64`` and an encoder of our layers, on the exported
  images through ``DisentDataset`` and a ``DataLoader``, trained by a Lightning ``Trainer`` with
  (a) logging, checkpointing, progress bar and model summary off and (b) Lightning's defaults;
* pythae: ``BetaVAE`` with ``BaseEncoder``/``BaseDecoder`` networks of our layers, trained on the
  exported images by ``TrainingPipeline`` (its ``BaseTrainer``).

Start-up is the time from just before the process is started to the end of its first training
step (interpreter, imports, data, model). Steady-state steps/s is 1 / the median of the intervals
between consecutive step ends after 20 warm-up steps, from per-step timestamps (ours: the
trainer's ``train_step``; disent: a Lightning callback's ``on_train_batch_end``; pythae: a
``TrainingCallback.on_train_step_end``); the mean rate over the same steps, which includes
periodic work such as logging and checkpoints, is reported too. Every library gets the same
``--threads`` (``torch.set_num_threads`` and ``OMP_NUM_THREADS``). ``--rounds`` rounds alternate
the four runs; the tables give the median over rounds and the ratio ours / peer. Each run's minor
page faults per step are reported too: glibc's malloc can return a step's large buffers to the
system and fault them in again every step, which can cost a large share of a CPU step and depends
on the process's history; ``--malloc-tuned`` adds runs of every library with glibc settings that keep
freed memory (``MALLOC_TUNED_ENV``).

Part 2: metrics on one shipped model
------------------------------------
MIG, DCI, SAP and the FactorVAE score of ``--model`` (default
``zoo:beta_tcvae-sprites-beta6-cpu20k-ref-s0``) computed by disent's ``disent.metrics`` and by ours,
with disent's default settings (or, with ``--fast-metrics``, the "fast" settings disent declares)
read from its code and passed to ours, values and wall time with encoding included, each metric
alone. disent 0.8.0 has no BetaVAE score; ours is reported alone. disent gets our sprites as a
``GroundTruthData`` over the whole grid in memory (rendered, untimed); ours renders per batch and
runs each metric twice: with its code table (each grid point encoded once, as ``evaluate_metrics``
does on this dataset) and encoding every drawn observation, as disent does.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing

PEERS_DIR = Path(__file__).resolve().parent / "peers"
WARMUP_STEPS = 20
MARKER = "disentangle-peer.json"
DEFAULT_MODEL = "zoo:beta_tcvae-sprites-beta6-cpu20k-ref-s0"
# what our package needs in the disent venv to load a model and render sprites (not numba: disent
# would start using it, so the venv would no longer be a plain disent install)
OURS_RUNTIME_DEPS = ("numpy", "scipy", "scikit-learn", "h5py", "pyyaml", "tqdm", "pillow", "safetensors")
# a quick import check of each peer venv, run once after it is built
SMOKE_TESTS = {
    "disent": "import _disent_setup; _disent_setup.import_torchvision(); import disent.frameworks.vae, disent.metrics, lightning",
    "pythae": "import pythae.models, pythae.pipelines, pythae.trainers.training_callbacks",
}
REPORTED_VERSIONS = {"disent": ("disent", "torch", "torchvision", "lightning"), "pythae": ("pythae", "torch")}


class BenchmarkError(Exception):
    """A failure reported to the user in one paragraph (no traceback)."""


# ---------------------------------------------------------------------------------------------
# the peers' virtual environments
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PeerEnv:
    name: str
    version: str
    path: Path

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"


def torch_release() -> str:
    """The running torch's version without its local tag (``2.13.0+cpu`` -> ``2.13.0``)."""
    return torch.__version__.split("+")[0]


def _run_logged(cmd: list[str], log: Path, what: str, env_name: str, version: str, cwd: Path | None = None) -> None:
    with log.open("a") as f:
        f.write(f"\n$ {' '.join(cmd)}\n")
        f.flush()
        rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=cwd).returncode
    if rc != 0:
        lines = [line.strip() for line in log.read_text().splitlines()]
        tail = " | ".join([line for line in lines if line and not line.startswith(("WARNING", "Looking in"))][-3:])
        raise BenchmarkError(
            f"Could not build the {env_name} {version} environment: {what} failed (exit status {rc}). "
            f"Last lines: {tail}. The full log is {log}. Check that PyPI is reachable and that {env_name} "
            f"{version} installs on that Python (--python) with torch {torch_release()} (choose another "
            f"version with --{env_name}-version), or leave that part out with "
            f"--skip-train / --skip-metrics."
        )


def _installed_versions(python: Path, names: tuple[str, ...]) -> dict[str, str]:
    code = (
        "import importlib.metadata as m, json, sys\n"
        "out = {}\n"
        "for n in sys.argv[1:]:\n"
        "    try: out[n] = m.version(n)\n"
        "    except m.PackageNotFoundError: out[n] = '-'\n"
        "print(json.dumps(out))"
    )
    out = subprocess.run([str(python), "-c", code, *names], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def ensure_venv(root: Path, name: str, version: str, python: str) -> PeerEnv:
    """The venv of ``name==version`` under ``root``, built if missing or built for other versions."""
    env = PeerEnv(name, version, root / f"{name}-{version}")
    extras = OURS_RUNTIME_DEPS if name == "disent" else ()
    wanted = {"package": name, "version": version, "torch": torch_release(), "python": python, "extras": list(extras)}
    marker = env.path / MARKER
    if marker.exists() and env.python.exists():
        try:
            if json.loads(marker.read_text()).get("requested") == wanted:
                return env
        except json.JSONDecodeError:
            pass
    print(f"building the {name} {version} environment in {env.path} (once; a few minutes)", flush=True)
    if env.path.exists():
        shutil.rmtree(env.path)
    root.mkdir(parents=True, exist_ok=True)
    log = root / f"{name}-{version}.log"
    log.write_text("")
    _run_logged([python, "-m", "venv", str(env.path)], log, "creating the venv", name, version)
    constraints = env.path / "constraints.txt"
    constraints.write_text(f"torch=={torch_release()}\n")
    pip = [str(env.python), "-m", "pip", "install", "--disable-pip-version-check"]
    _run_logged(pip + [f"torch=={torch_release()}"], log, f"installing torch {torch_release()}", name, version)
    _run_logged(pip + ["-c", str(constraints), f"{name}=={version}", *extras], log, f"installing {name}=={version}",
                name, version)
    _run_logged([str(env.python), "-c", SMOKE_TESTS[name]], log, f"importing {name}", name, version, cwd=PEERS_DIR)
    installed = _installed_versions(env.python, REPORTED_VERSIONS[name])
    marker.write_text(json.dumps({"requested": wanted, "installed": installed}, indent=1))
    return env


def link_checkout(env: PeerEnv) -> None:
    """Make this checkout's ``disentangle`` importable in ``env`` (a ``.pth`` file; no install, so it
    is always the current code)."""
    site = next((env.path / "lib").glob("python*/site-packages"))
    (site / "disentangle-checkout.pth").write_text(f"{ROOT}\n")


def installed(env: PeerEnv) -> dict[str, str]:
    return json.loads((env.path / MARKER).read_text())["installed"]


# ---------------------------------------------------------------------------------------------
# data and workers
# ---------------------------------------------------------------------------------------------
def export_images(root: Path, n: int, seed: int = 0) -> Path:
    """``n`` distinct sprites drawn uniformly from our grid, uint8 0/1 ``(n, 64, 64)``, as ``.npy``."""
    path = root / f"sprites-{n}-seed{seed}.npy"
    if path.exists() and np.load(path, mmap_mode="r").shape == (n, 64, 64):
        return path
    from disentangle.data import build_dataset

    dataset = build_dataset({"name": "sprites"})
    indices = np.random.default_rng(seed).choice(len(dataset), size=n, replace=False)
    images = np.empty((n, 64, 64), dtype=np.uint8)
    for start in range(0, n, 8192):
        chunk = torch.as_tensor(indices[start:start + 8192])
        images[start:start + len(chunk)] = dataset.raw(chunk)[:, 0].numpy()
    root.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial.npy")
    np.save(partial, images)
    partial.replace(path)
    return path


def run_worker(python: Path | str, script: str, args: list[str], threads: int, workdir: Path, label: str,
               env: dict[str, str] | None = None) -> dict:
    """Run ``benchmarks/peers/SCRIPT`` in a fresh process (``env`` added to the environment) and return
    the JSON it writes, with the process's wall and CPU time."""
    result = workdir / f"{label}.json"
    log = workdir / f"{label}.log"
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), **(env or {})}
    cmd = [str(python), str(PEERS_DIR / script), "--result", str(result), "--threads", str(threads), *args]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with log.open("w") as f:
        launched = time.time()
        rc = subprocess.run([*cmd, "--launched", repr(launched)], stdout=f, stderr=subprocess.STDOUT,
                            env=env, cwd=workdir).returncode
        wall = time.time() - launched
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if rc != 0 or not result.exists():
        tail = "\n    ".join(log.read_text().splitlines()[-15:])
        raise BenchmarkError(f"The worker {script} ({label}) failed with exit status {rc}; its log ends:\n    {tail}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {**json.loads(result.read_text()), "process_wall_s": wall, "process_cpu_s": cpu}


def step_rates(step_ends: list[float], warmup: int = WARMUP_STEPS) -> tuple[float, float]:
    """(median, mean) steps/s over the steps after ``warmup``: ``step_ends[i]`` is when step i+1 ended."""
    steady = step_ends[warmup - 1:]
    intervals = np.diff(steady)
    return float(1.0 / statistics.median(intervals)), float(len(intervals) / (steady[-1] - steady[0]))


def faults_per_step(step_faults: list[int], warmup: int = WARMUP_STEPS) -> float:
    """Minor page faults per step after ``warmup`` (``step_faults[i]``: the count when step i+1 ended)."""
    return (step_faults[-1] - step_faults[warmup - 1]) / (len(step_faults) - warmup)


# ---------------------------------------------------------------------------------------------
# part 1: training
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TrainRun:
    label: str
    env: str  # "ours" or a peer's name
    script: str
    extra: tuple[str, ...] = ()


#: glibc malloc settings of ``--malloc-tuned``: blocks up to 32 MiB (the largest threshold glibc
#: accepts) come from the heap, and freed heap memory is kept instead of being returned to the
#: system, so a step's buffers are reused instead of being mapped afresh (page faults) every step
MALLOC_TUNED_ENV = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}
TRAIN_RUNS = (
    TrainRun("ours, recipe sprites/beta_vae (fp32)", "ours", "ours_train.py", ("--config-mode", "recipe")),
    TrainRun("ours, defaults", "ours", "ours_train.py", ("--config-mode", "defaults")),
    TrainRun("ours, defaults, a run of the timed steps only", "ours", "ours_train.py",
             ("--config-mode", "defaults", "--length", "steps")),
    TrainRun("disent, logging/checkpoints off", "disent", "disent_train.py", ("--variant", "off")),
    TrainRun("disent, Lightning defaults", "disent", "disent_train.py", ("--variant", "defaults")),
    TrainRun("pythae", "pythae", "pythae_train.py"),
)


def check_parameter_counts(results: dict[str, dict]) -> dict[str, dict]:
    """The encoder/decoder parameter counts of every run; raises unless they are all equal."""
    counts = {label: r["params"] for label, r in results.items()}
    differ = len({(c["encoder"], c["decoder"]) for c in counts.values()}) != 1
    # where a worker also counted the whole model it trains, that must be the two networks alone
    differ |= any(c.get("trained_model", c["encoder"] + c["decoder"]) != c["encoder"] + c["decoder"]
                  for c in counts.values())
    for label, c in counts.items():
        print(f"parameters, {label}: encoder {c['encoder']:,}, decoder {c['decoder']:,}, "
              f"total {c['encoder'] + c['decoder']:,}", flush=True)
    if differ:
        raise BenchmarkError(
            "The libraries' models differ in parameter counts, so their speeds are not comparable and nothing is "
            f"reported: {json.dumps(counts)}."
        )
    return counts


def malloc_modes(args) -> dict[str, dict[str, str]]:
    """The allocator settings to run every library with: ``{label suffix: environment}``."""
    return {"": {}, **({", malloc tuned": MALLOC_TUNED_ENV} if args.malloc_tuned else {})}


def train_benchmark(args, envs: dict[str, PeerEnv], images: Path, workdir: Path) -> dict:
    pythons = {"ours": sys.executable, **{name: env.python for name, env in envs.items()}}
    modes = malloc_modes(args)
    runs: dict[str, list[dict]] = {run.label + suffix: [] for suffix in modes for run in TRAIN_RUNS}
    counts = None
    for r in range(args.rounds):
        for suffix, malloc_env in modes.items():
            for run in TRAIN_RUNS:
                label = run.label + suffix
                extra = ["--steps", str(args.steps), *run.extra]
                if run.env != "ours":
                    extra += ["--images", str(images)]
                result = run_worker(pythons[run.env], run.script, extra, args.threads, workdir,
                                    f"train-{r}-{re.sub('[^a-z0-9]+', '-', label.lower())}", malloc_env)
                result["median_rate"], result["mean_rate"] = step_rates(result["step_ends"])
                result["faults_per_step"] = faults_per_step(result["step_faults"])
                runs[label].append(result)
                print(f"round {r + 1}/{args.rounds}, {label}: {result['median_rate']:.2f} steps/s (median), "
                      f"{result['mean_rate']:.2f} (mean), start-up {result['startup_s']:.1f} s, "
                      f"{result['faults_per_step']:.0f} page faults/step, {result['torch_threads']} torch "
                      f"thread(s), CPU {cores_used(result):.2f} cores", flush=True)
        if counts is None:
            counts = check_parameter_counts({run.label: runs[run.label][0] for run in TRAIN_RUNS})
    return {"runs": runs, "params": counts, "malloc_suffixes": list(modes)}


def cores_used(result: dict) -> float:
    """CPU time of the whole worker process over its wall time: how many cores it kept busy."""
    return result["process_cpu_s"] / result["process_wall_s"]


def train_table(train: dict) -> list[str]:
    runs = train["runs"]

    def median(label: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[label])

    lines = [
        "| library | steps/s (median step) | steps/s (mean) | start-up (s) | page faults / step "
        "| per round: steps/s; start-up s | steps/s, ours ÷ peer (>1: ours faster) "
        "| start-up, ours ÷ peer (<1: ours faster) |",
        "|---|---:|---:|---:|---:|---|---:|---:|",
    ]
    for suffix in train["malloc_suffixes"]:
        ours = "ours, defaults" + suffix  # compared within the same allocator settings
        for run in TRAIN_RUNS:
            label = run.label + suffix
            rs = runs[label]
            per_round = (" / ".join(f"{r['median_rate']:.2f}" for r in rs) + "; "
                         + " / ".join(f"{r['startup_s']:.1f}" for r in rs))
            lines.append(
                f"| {label} | {median(label, 'median_rate'):.2f} | {median(label, 'mean_rate'):.2f} "
                f"| {median(label, 'startup_s'):.1f} | {median(label, 'faults_per_step'):,.0f} | {per_round} "
                f"| {median(ours, 'median_rate') / median(label, 'median_rate'):.2f}× "
                f"| {median(ours, 'startup_s') / median(label, 'startup_s'):.2f}× |"
            )
    return lines


def train_notes(train: dict) -> list[str]:
    notes = [
        "* Same objective everywhere: BCE summed over pixels plus 4 × KL, averaged over the batch (disent: "
        "`loss_reduction=\"mean_sum\"`, `recon_loss=\"bce\"` on logits; pythae: `reconstruction_loss=\"bce\"`, "
        "BCE on sigmoid outputs). Adam lr 1e-4 with torch's defaults otherwise.",
        "* Data loading: ours draws indices on the training device and gathers the images from the sprites "
        "grid, materialised at start-up (a full-length run) or rendered for each batch (a run of the timed "
        "steps only, below 2,000 steps); disent and pythae read the exported images through a per-item "
        "`DataLoader` (0 workers).",
        "* Stopping: our full-length runs are stopped by a Ctrl-C raised after the last timed step (the "
        "trainer checkpoints that step, untimed); pythae counts epochs and is stopped after the last timed "
        "step by the clock callback; disent runs `max_steps` steps.",
        "* Page faults / step: the worker's minor page faults per steady-state step, i.e. memory mapped afresh. "
        "glibc's malloc hands large freed blocks back to the system and maps them again, so a step's buffers "
        "can fault in every step; how often depends on the process's allocation history, and the same "
        "computation can run at different speeds in different processes. Rows marked \"malloc tuned\" "
        f"(`--malloc-tuned`) set {', '.join(f'{k}={v}' for k, v in MALLOC_TUNED_ENV.items())} for every "
        "library, so that freed memory is kept and reused.",
    ]
    if any(r.get("torchvision_ops_workaround") for rs in train["runs"].values() for r in rs):
        notes.append(
            "* torchvision from PyPI is a CUDA build whose C++ operators do not load with the CPU torch; the "
            "disent workers define the two operator schemas its import needs (`benchmarks/peers/_disent_setup.py`)."
        )
    return notes


def params_table(counts: dict[str, dict]) -> list[str]:
    lines = ["| library | encoder | decoder | total |", "|---|---:|---:|---:|"]
    for label, c in counts.items():
        lines.append(f"| {label} | {c['encoder']:,} | {c['decoder']:,} | {c['encoder'] + c['decoder']:,} |")
    stock = next((c["stock_EncoderConv64"] for c in counts.values() if "stock_EncoderConv64" in c), None)
    if stock is not None:
        lines += ["", f"disent's own `EncoderConv64` (4x4 kernels, padding 2 in all four convolutions, dense "
                      f"input 1,600) has {stock:,} parameters: not the same model, so disent runs an encoder "
                      "with our layers (`benchmarks/peers/_disent_encoder.py`)."]
    return lines


# ---------------------------------------------------------------------------------------------
# part 2: metrics
# ---------------------------------------------------------------------------------------------
#: (row, our metric, our score, disent metric, disent score)
METRIC_ROWS = (
    ("MIG", "mig", "mig", "mig", "mig.discrete_score"),
    ("DCI disentanglement", "dci", "disentanglement", "dci", "dci.disentanglement"),
    ("DCI completeness", "dci", "completeness", "dci", "dci.completeness"),
    ("DCI informativeness (test accuracy)", "dci", "informativeness_test", "dci", "dci.informativeness_test"),
    ("SAP", "sap_score", "sap", "sap", "sap.score"),
    ("FactorVAE score (eval accuracy)", "factor_vae_score", "eval_accuracy", "factor_vae", "factor_vae.eval_accuracy"),
    ("BetaVAE score (eval accuracy)", "beta_vae_score", "eval_accuracy", None, None),
)
#: our metric -> disent's
TIMED_METRICS = {"mig": "mig", "dci": "dci", "sap_score": "sap", "factor_vae_score": "factor_vae", "beta_vae_score": None}
#: the BetaVAE score has no disent counterpart; with --fast-metrics it is cut like disent's FactorVAE
BETA_VAE_FAST = {"num_train": 700, "num_eval": 350}


def matched_settings(disent: dict[str, dict], threads: int, fast: bool, selected: tuple[str, ...] = tuple(TIMED_METRICS)) -> dict[str, dict]:
    """Our metrics' settings (those ``selected``) from the ones disent used (``disent[name]["settings"]``)."""
    s = {name: r["settings"] for name, r in disent.items()}
    if "dci" in s and s["dci"]["boost_mode"] != "sklearn":
        raise BenchmarkError(f"disent's DCI used boost_mode={s['dci']['boost_mode']!r}; ours matches only 'sklearn'.")
    builders = {
        "mig": lambda: {"num_train": s["mig"]["num_train"], "num_bins": s["mig"]["num_bins"],
                "representation_batch_size": s["mig"]["batch_size"]},
        # booster "exact" (our default) grows the trees of sklearn's GradientBoostingClassifier() defaults
        "dci": lambda: {"num_train": s["dci"]["num_train"], "num_test": s["dci"]["num_test"], "booster": "exact",
                "representation_batch_size": s["dci"]["batch_size"], "n_jobs": threads},
        "sap_score": lambda: {"num_train": s["sap"]["num_train"], "num_test": s["sap"]["num_test"],
                      "continuous_factors": s["sap"]["continuous_factors"],
                      "representation_batch_size": s["sap"]["batch_size"], "n_jobs": threads},
        "factor_vae_score": lambda: {
            "batch_size": s["factor_vae"]["batch_size"], "num_train": s["factor_vae"]["num_train"],
            "num_eval": s["factor_vae"]["num_eval"], "num_variance_estimate": s["factor_vae"]["num_variance_estimate"],
            "prune_threshold": s["factor_vae"]["prune_threshold"],
            "representation_batch_size": s["factor_vae"]["variance_batch_size"],
        },
        "beta_vae_score": lambda: dict(BETA_VAE_FAST) if fast else {},
    }
    return {ours: build() for ours, build in builders.items()
            if ours in selected and (TIMED_METRICS[ours] is None or TIMED_METRICS[ours] in s)}


def metrics_benchmark(args, disent_env: PeerEnv, workdir: Path) -> dict:
    """Both workers once per allocator setting: ``{label suffix: {"ours": ..., "disent": ...}}``."""
    link_checkout(disent_env)
    runs = {}
    for suffix, malloc_env in malloc_modes(args).items():
        print(f"metrics{suffix}: disent (renders the whole sprites grid first)", flush=True)
        selected = tuple(args.metrics.split(","))
        only = ",".join(TIMED_METRICS[m] for m in selected if TIMED_METRICS[m] is not None)
        extra = ["--model", args.model, "--only", only] + (["--fast"] if args.fast_metrics else [])
        disent = run_worker(disent_env.python, "disent_metrics.py", extra, args.threads, workdir,
                            f"metrics-disent{len(runs)}", malloc_env)
        settings = matched_settings(disent["metrics"], args.threads, args.fast_metrics, selected)
        print(f"metrics{suffix}: ours", flush=True)
        extra = ["--model", args.model, "--settings", json.dumps(settings)]
        ours = run_worker(sys.executable, "ours_metrics.py", extra, args.threads, workdir,
                          f"metrics-ours{len(runs)}", malloc_env)
        runs[suffix] = {"ours": ours, "disent": disent}
    return runs


def scores_table(run: dict) -> list[str]:
    ours, disent = run["ours"]["metrics"], run["disent"]["metrics"]
    lines = ["| score | ours, defaults | ours, code table | ours, every observation | disent |", "|---|---:|---:|---:|---:|"]
    for row, our_metric, our_key, their_metric, their_key in METRIC_ROWS:
        if our_metric not in ours:
            continue
        theirs = f"{disent[their_metric]['scores'][their_key]:.4f}" if their_metric else "n/a"
        mine = [f"{ours[our_metric][mode]['scores'][our_key]:.4f}" for mode in ("defaults", "table", "plain")]
        lines.append(f"| {row} | {' | '.join(mine)} | {theirs} |")
    return lines


def times_table(run: dict) -> list[str]:
    ours, disent = run["ours"]["metrics"], run["disent"]["metrics"]
    lines = [
        "| metric | ours, defaults (s) | ours, code table (s) | ours, every observation (s) | disent (s) "
        "| **disent ÷ ours, defaults** | disent ÷ ours, code table | disent ÷ ours, every observation "
        "| page faults (thousands): ours defaults / table / every / disent |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for our_metric, their_metric in TIMED_METRICS.items():
        if our_metric not in ours:
            continue
        runs = [ours[our_metric][mode] for mode in ("defaults", "table", "plain")]
        seconds = " | ".join(f"{r['seconds']:.1f}" for r in runs)
        faults = " / ".join(f"{r['faults'] / 1e3:,.0f}" for r in runs)
        if their_metric is None:
            lines.append(f"| {our_metric} | {seconds} | n/a | | | | {faults} / - |")
            continue
        theirs = disent[their_metric]
        ratios = " | ".join(f"{theirs['seconds'] / r['seconds']:.2f}×" for r in runs)
        lines.append(f"| {our_metric} | {seconds} | {theirs['seconds']:.1f} | {ratios} | {faults} / {theirs['faults'] / 1e3:,.0f} |")
    return lines


def settings_list(run: dict) -> list[str]:
    ours, disent = run["ours"]["metrics"], run["disent"]["metrics"]
    lines = []
    for our_metric, their_metric in TIMED_METRICS.items():
        if our_metric not in ours:
            continue
        text = f"* {our_metric}: ours `{_settings_text(ours[our_metric]['settings'])}`"
        if their_metric is not None:
            text += f"; disent `{their_metric}`: `{_settings_text(disent[their_metric]['settings'])}`"
        lines.append(text)
    return lines


def _settings_text(settings: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in settings.items()) or "defaults"


# ---------------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------------
def header(args, envs: dict[str, PeerEnv], load: tuple[float, float]) -> list[str]:
    import disentangle
    from disentangle.zoo.publish import cpu_name

    versions = [f"disentangle {disentangle.__version__}"]
    for env in envs.values():
        v = installed(env)
        versions.append(", ".join(f"{k} {v[k]}" for k in REPORTED_VERSIONS[env.name] if k != "torch"))
    return [
        "# disentangle against disent and pythae",
        "",
        f"`{shlex.join(['python', 'benchmarks/peers.py', *sys.argv[1:]])}`",
        "",
        f"* CPU: {cpu_name()}, torch capability {torch.backends.cpu.get_cpu_capability()}, "
        f"{args.threads} thread(s) for every library",
        f"* torch {torch.__version__} in every environment; " + "; ".join(versions),
        f"* {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; 1-minute load average "
        f"{load[0]:.2f} at the start, {load[1]:.2f} at the end (more than 0 means other work shared the CPU)",
        "",
    ]


def markdown(args, envs, train: dict | None, metrics: dict | None, load) -> str:
    lines = header(args, envs, load)
    if train is not None:
        lines += ["## Model", "", *params_table(train["params"]), ""]
        lines += [
            f"## Training: {args.steps} steps, batch 64, median of {args.rounds} alternating round(s)", "",
            f"Steps/s after {WARMUP_STEPS} warm-up steps: 1 / the median step interval, and the mean rate over "
            f"the same steps (periodic logging and checkpoints included). Start-up: process start to the end "
            f"of the first step. Peers train on {args.images:,} exported sprites; ours on its procedural sprites.", "",
            *train_table(train), "",
        ]
        lines += ["What each run is (the workers' docstrings in `benchmarks/peers/` say more):", ""]
        for run in TRAIN_RUNS:
            lines.append(f"* {run.label}: `{train['runs'][run.label][0]['setup']}`")
        lines += ["", *train_notes(train), ""]
    if metrics is not None:
        default = metrics[""]
        grid = default["disent"]["grid_render_s"]
        lines += [
            f"## Metrics: `{args.model}`" + (" (disent's fast settings)" if args.fast_metrics else ""), "",
            "Each metric alone, wall time with encoding, model loading excluded, the metric's settings "
            "(points drawn, bins, classifiers) matched to disent's. disent reads the whole grid "
            f"from memory (rendered in {grid:.0f} s, not timed) and encodes in its own batch sizes; ours renders "
            "per batch, three ways: **defaults**, `evaluate_metrics` as a user calls it (our encoding batch, 64 "
            "on a CPU, and a code table only where draws repeat grid points: the BetaVAE and FactorVAE scores); "
            "and, in disent's batch sizes (`representation_batch_size`), encoding each grid point at most once "
            "(**code table**) or every drawn observation as disent does (**every observation**).", "",
            *scores_table(default), "",
            *times_table(default), "",
        ]
        if ", malloc tuned" in metrics:
            lines += ["With glibc malloc keeping freed memory (`--malloc-tuned`):", "",
                      *times_table(metrics[", malloc tuned"]), ""]
        lines += [
            "Page faults: memory mapped afresh while the metric ran. In one process, a metric that runs after "
            "others can fault far more than alone (the allocator's state depends on what ran before), which "
            "slows it; `--malloc-tuned` shows the times without that effect.", "",
            "Settings (disent's, read from its code; ours matched to them):", "",
            *settings_list(default), "",
            "Values differ between libraries by sampling: disent draws from numpy's global generator (seeded 0), "
            "ours from its own seeded streams. The modes of ours draw the same training points; with a "
            "`representation_batch_size` other than 64 a mode that encodes every observation draws other test "
            "points (our dataset draws from the generator once per encoded chunk), so DCI informativeness and SAP "
            "may differ between the modes within sampling noise. disent 0.8.0 has no BetaVAE score.", "",
        ]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--images", type=int, default=50_000, help="sprites exported for the peers' training")
    p.add_argument("--skip-metrics", action="store_true")
    p.add_argument("--skip-train", action="store_true")
    p.add_argument("--fast-metrics", action="store_true", help="disent's fast metric settings (a pilot)")
    p.add_argument("--metrics", default=",".join(TIMED_METRICS),
                   help=f"comma-separated metrics to time (ours' names): {', '.join(TIMED_METRICS)}")
    p.add_argument("--malloc-tuned", action="store_true",
                   help="also train every library with glibc malloc keeping freed memory (MALLOC_TUNED_ENV)")
    p.add_argument("--model", default=DEFAULT_MODEL)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "RESULTS-peers.md")
    p.add_argument("--venvs", type=Path, default=Path("~/.cache/disentangle-peers").expanduser())
    p.add_argument("--disent-version", default="0.8.0")
    p.add_argument("--pythae-version", default="0.1.2")
    p.add_argument("--python", default=sys.executable, help="interpreter the peer venvs are made from")
    args = p.parse_args(argv)
    if args.steps <= WARMUP_STEPS + 1:
        p.error(f"--steps must be more than {WARMUP_STEPS + 1} (the first {WARMUP_STEPS} are warm-up)")
    if args.rounds < 1 or args.threads < 1:
        p.error("--rounds and --threads must be at least 1")
    if args.images < 64:
        p.error("--images must be at least one batch (64)")
    unknown = sorted(set(args.metrics.split(",")) - set(TIMED_METRICS))
    if unknown:
        p.error(f"--metrics: unknown {', '.join(unknown)}; choose from {', '.join(TIMED_METRICS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    load_start = os.getloadavg()[0]
    try:
        envs = {}
        if not args.skip_train:
            envs["disent"] = ensure_venv(args.venvs, "disent", args.disent_version, args.python)
            envs["pythae"] = ensure_venv(args.venvs, "pythae", args.pythae_version, args.python)
        elif not args.skip_metrics:
            envs["disent"] = ensure_venv(args.venvs, "disent", args.disent_version, args.python)
        train = metrics = None
        with tempfile.TemporaryDirectory(prefix="peers-") as tmp:
            workdir = Path(tmp)
            if not args.skip_train:
                images = export_images(args.venvs, args.images)
                train = train_benchmark(args, envs, images, workdir)
            if not args.skip_metrics:
                metrics = metrics_benchmark(args, envs["disent"], workdir)
    except BenchmarkError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    text = markdown(args, envs, train, metrics, (load_start, os.getloadavg()[0]))
    print("\n" + text)
    args.out.write_text(text + "\n")
    print(f"\nwritten to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
