"""Sweeps: sweep file parsing and validation, run ids, kill -9 and rerun, failures, results.csv."""
from __future__ import annotations

import csv
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from disentangle import ConfigError
from disentangle.sweep import api, load_sweep, run_id, sweep_from_dict
from disentangle.sweep.__main__ import main as sweep_cli
from disentangle.sweep.ids import EXCLUDED_KEYS, canonical_json, identity

REPO = Path(__file__).resolve().parents[2]

#: a plugin module the sweep files import in every worker: a tiny dataset (2x3x4 grid of random 16x16
#: binary images) whose batches can be slowed down, so a kill can land in the middle of a run
PLUGIN = '''
import os
import signal
import time
import torch
from disentangle.data import DATASETS, IndexedImageDataset


class SlowTiny(IndexedImageDataset):
    delay = 0.0

    def sample_batch(self, batch_size, generator):
        if self.delay:
            time.sleep(self.delay)
        return super().sample_batch(batch_size, generator)


@DATASETS.register("_sweep_tiny", overwrite=True)
def sweep_tiny(size: int = 16, delay: float = 0.0, build_log: str = "", die: bool = False, device: str = "cpu",
               refuse_while: str = ""):
    if die:  # stands for a segfault or an out-of-memory kill of this run's worker
        os.kill(os.getpid(), signal.SIGKILL)
    if refuse_while and os.path.exists(refuse_while):  # a config error found only when the run starts
        from disentangle.errors import ConfigError
        raise ConfigError("this run's data refuses it while " + refuse_while + " exists")
    if build_log:  # one line per build, to count them
        with open(build_log, "a") as f:
            f.write("built\\n")
    g = torch.Generator().manual_seed(123)
    images = (torch.rand(24, 1, size, size, generator=g) > 0.5).to(torch.uint8)
    dataset = SlowTiny(images, ("a", "b", "c"), (2, 3, 4), scale=1.0).to(device)
    dataset.delay = delay
    return dataset
'''

TINY_SET = {
    "data.name": "_sweep_tiny",
    "model.backbone": "mlp",
    "model.hidden_sizes": [32],
    "model.latent_dim": 4,
    "train.steps": 12,
    "train.batch_size": 8,
    "train.log_every": 2,
    "train.checkpoint_every": 4,
    "train.progress": False,
    "train.device": "cpu",
    "train.traversals": False,
}
FAST_METRICS = {"mig": {"num_train": 200}, "unsupervised_scores": {"num_train": 200}}


def write_sweep_file(folder: Path, **fields) -> Path:
    """A tiny sweep file (plus its plugin) in ``folder``; ``fields`` replace or extend the defaults."""
    (folder / "tiny_plugin.py").write_text(PLUGIN)
    plan = {
        "base": "quickstart",
        "imports": ["tiny_plugin.py"],
        "set": dict(TINY_SET),
        "grid": {"objective.beta": [1.0, 4.0]},
        "seeds": 2,
        "metrics": ["mig", "unsupervised_scores"],
        "metric_settings": FAST_METRICS,
    }
    extra_set = fields.pop("extra_set", {})
    plan.update(fields)
    plan["set"] = {**plan["set"], **extra_set}
    path = folder / "sweep.yaml"
    path.write_text(yaml.safe_dump(plan, sort_keys=False))
    return path


def tiny_sweep_dict(tmp_path: Path, **fields) -> dict:
    return yaml.safe_load(write_sweep_file(tmp_path, **fields).read_text())


def files_fingerprint(folder: Path) -> dict[str, tuple[int, str]]:
    return {
        str(p.relative_to(folder)): (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in sorted(folder.rglob("*")) if p.is_file()
    }


# ---------------------------------------------------------------------- expansion
def test_grid_mapping_is_a_product_with_seeds_fastest(tmp_path):
    raw = tiny_sweep_dict(tmp_path, grid={"objective.beta": [1, 2], "train.lr": [1e-3, 1e-2]}, seeds=[3, 5])
    plan = sweep_from_dict(raw, source="s", folder=tmp_path)
    got = [(r.values["objective.beta"], r.values["train.lr"], r.seed) for r in plan.runs]
    assert got == [(b, lr, s) for b in (1, 2) for lr in (1e-3, 1e-2) for s in (3, 5)]
    # the values reach the resolved configs, typed by the config schema
    assert [r.config["objective"]["beta"] for r in plan.runs[::4]] == [1.0, 2.0]
    assert [r.config["seed"] for r in plan.runs[:2]] == [3, 5]
    assert len({r.run_id for r in plan.runs}) == 8
    assert plan.varying_keys == ["objective.beta", "train.lr"]


def test_grid_list_is_a_union_and_a_new_objective_starts_from_its_defaults(tmp_path):
    grid = [
        {"objective.name": ["beta_vae"], "objective.beta": [1, 4]},
        {"objective.name": ["factor_vae"], "objective.gamma": [10, 20]},
        {"objective.name": ["beta_vae"], "objective.beta": [4.0]},  # the same runs as above: merged
    ]
    plan = sweep_from_dict(tiny_sweep_dict(tmp_path, grid=grid, seeds=1), source="s", folder=tmp_path)
    assert [(r.config["objective"]["name"], r.values.get("objective.beta", r.values.get("objective.gamma")))
            for r in plan.runs] == [("beta_vae", 1), ("beta_vae", 4), ("factor_vae", 10), ("factor_vae", 20)]
    assert plan.merged_duplicates == 1
    factor = plan.runs[2].config["objective"]
    assert "beta" not in factor  # quickstart's beta: 4.0 does not leak into FactorVAE
    assert factor["gamma"] == 10.0 and factor["discriminator_layers"] == 6  # its own defaults
    assert plan.varying_keys == ["objective.name", "objective.beta", "objective.gamma"]


def test_seeds_as_a_count(tmp_path):
    plan = sweep_from_dict(tiny_sweep_dict(tmp_path, grid={}, seeds=3), source="s", folder=tmp_path)
    assert [r.seed for r in plan.runs] == [0, 1, 2] and plan.varying_keys == []


@pytest.mark.parametrize(
    "fields, expected",
    [
        ({"gird": {"objective.beta": [1]}}, ["unknown key 'gird'", "Did you mean 'grid'"]),
        ({"grid": {"objective.beta": 4}}, ["'objective.beta' must be a non-empty list", "move a fixed value to 'set'"]),
        ({"grid": {"objective.betta": [1, 2]}}, ["grid point 1 of 2", "objective.betta=1", "objective.betta", "Did you mean 'beta'"]),
        ({"grid": [{"objective.beta": [1]}, {"objective.name": ["factor_vea"]}]},
         ["grid point 2 of 2", "runs 3-4 of 4", "factor_vea", "Did you mean 'factor_vae'"]),
        ({"grid": {"train.lr": [1e-3, 0.0]}}, ["grid point 2 of 2", "(train.lr=0;", "train.lr must be"]),
        ({"grid": {"seed": [1, 2]}}, ["'seeds' key"]),
        ({"grid": {"trian.steps": [1]}}, ["'trian.steps' is not a dotted config key", "Did you mean 'train'"]),
        ({"seeds": -2}, ["'seeds'"]),
        ({"seeds": [0, 0]}, ["lists a seed twice"]),
        ({"metrics": ["mig", "dcii"]}, ["'metrics'", "dcii", "Did you mean 'dci'"]),
        ({"metric_settings": {"mig": {"num_trian": 5}}}, ["no setting 'num_trian'", "Did you mean 'num_train'"]),
        ({"base": "quickstrat"}, ["'base'", "Did you mean 'quickstart'"]),
    ],
)
def test_sweep_file_errors_name_the_run_and_the_key(tmp_path, fields, expected):
    raw = tiny_sweep_dict(tmp_path, **fields)
    if "gird" in fields:
        del raw["grid"]
    with pytest.raises(ConfigError) as info:
        sweep_from_dict(raw, source="sweep.yaml", folder=tmp_path)
    message = str(info.value)
    assert "\n" not in message.strip()
    for part in expected:
        assert part in message, message


def test_errors_before_anything_is_created_and_cli_exit_2(tmp_path, capsys):
    path = write_sweep_file(tmp_path, grid={"objective.beta": [1, 2], "model.latent_dim": [0]})
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match="model.latent_dim"):
        api.run(path, out, log=None)
    assert not out.exists()
    for args, words in ((["--workers", "0"], "workers"), ([], "model.latent_dim"), (["--time", "soon"], "--time")):
        assert sweep_cli(["run", str(path), "--out", str(out), *args]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and words in err and "Traceback" not in err
    assert not out.exists()


def test_backend_options_are_checked(tmp_path):
    path = write_sweep_file(tmp_path)
    with pytest.raises(ConfigError, match="applies to the slurm backend"):
        api.run(path, tmp_path / "out", partition="gpu", log=None)
    with pytest.raises(ConfigError, match="gpus_per_run"):
        api.run(path, tmp_path / "out", backend="ray", gpus_per_run=1.5, log=None)
    with pytest.raises(ConfigError, match="Unknown sweep backend 'rey'.*Did you mean 'ray'"):
        api.run(path, tmp_path / "out", backend="rey", log=None)
    assert not (tmp_path / "out").exists()


def test_dry_run_prints_the_plan_and_creates_nothing(tmp_path):
    path = write_sweep_file(tmp_path)
    lines: list[str] = []
    report = api.run(path, tmp_path / "out", dry_run=True, log=lines.append)
    assert not (tmp_path / "out").exists()
    assert report.to_run == 4 and report.before["not started"] == 4
    assert "4 runs" in lines[0] and "4 to run" in lines[0]
    assert {r.run_id for r in report.plan.runs} == {line.split()[0] for line in lines[1:]}


# ---------------------------------------------------------------------- run ids
def test_run_id_is_a_hash_of_the_canonical_resolved_config(tmp_path):
    from disentangle._core.choices import LEGACY_VALUES
    from disentangle.sweep.ids import DROPPED_AT_DEFAULT

    plan = sweep_from_dict(tiny_sweep_dict(tmp_path), source="s", folder=tmp_path)
    config = plan.runs[0].config
    kept = {s: (dict(v) if isinstance(v, dict) else v) for s, v in config.items()}
    for key in EXCLUDED_KEYS:
        section, name = key.split(".")
        kept[section].pop(name, None)
    for key, value in {**LEGACY_VALUES, **DROPPED_AT_DEFAULT}.items():  # a key added later, at the value of the runs before it
        section, name = key.split(".")
        if kept[section].get(name) == value:
            kept[section].pop(name)
    text = "disentangle-run-v1\n" + json.dumps(kept, sort_keys=True, separators=(",", ":"))
    assert run_id(config) == hashlib.sha256(text.encode()).hexdigest()[:16] == plan.runs[0].run_id

    changed = json.loads(json.dumps(config))
    changed["train"].update(device="cuda", out_dir="elsewhere", progress=True, log_every=7, checkpoint_every=9,
                            eval_every=3, eval_metrics=["mig"], traversals=True)
    assert run_id(changed) == run_id(config)
    for section, key, value in (("objective", "beta", 2.0), ("train", "precision", "bf16"), ("train", "steps", 13)):
        other = json.loads(json.dumps(config))
        other[section][key] = value
        assert run_id(other) != run_id(config)
    assert identity(config)["train"].get("out_dir") is None and "device" in config["train"]


def test_excluded_keys_are_the_resumable_ones_but_steps():
    from disentangle.training.resume import RESUMABLE_KEYS

    excluded = {k.split(".", 1)[1] for k in EXCLUDED_KEYS if k.startswith("train.")}
    assert excluded == set(RESUMABLE_KEYS) - {"steps"}  # a rerun changing one of them resumes the run
    assert [k for k in EXCLUDED_KEYS if not k.startswith("train.")] == ["data.download", "data.cache_dir", "data.cache",
                                                                          "data.placement"]


def test_data_cache_dir_does_not_change_the_run_id():
    from disentangle.config import Config
    from disentangle.sweep import ids

    config = Config.from_dict({"data": {"name": "dsprites"}}).to_dict()
    assert "cache_dir" in config["data"]
    moved = json.loads(json.dumps(config))
    moved["data"]["cache_dir"] = "/somewhere/else"
    assert run_id(moved) == run_id(config)
    assert "data.cache_dir" in (ids.__doc__ or "")
    other = json.loads(json.dumps(config))
    other["data"]["path"] = "/my/own/copy.npz"  # another file may hold other data: it counts
    assert run_id(other) != run_id(config)


def test_the_sweeps_guide_names_every_key_left_out_of_the_run_id():
    text = (Path(__file__).resolve().parents[2] / "docs" / "guides" / "sweeps.md").read_text()
    paragraph = text[text.index("Each run's id is a hash"):].split("\n\n")[0]
    named = {k if k.startswith("data.") else k.split(".", 1)[1] for k in EXCLUDED_KEYS}
    assert {k for k in named if f"`{k}`" not in paragraph} == set()


def test_the_decoded_cache_folder_of_an_image_folder_does_not_change_the_run_id():
    """``data.cache`` says where the decoded images are kept (the cache is keyed by the files and the
    settings): a rerun that moves it to a scratch disk resumes the same runs."""
    from disentangle.config import Config

    for name in ("image_folder", "celeba"):
        config = Config.from_dict({"data": {"name": name, "path": "/my/images"}}).to_dict()
        assert "cache" in config["data"]
        moved = json.loads(json.dumps(config))
        moved["data"]["cache"] = "/scratch/decoded"
        assert run_id(moved) == run_id(config)
        other = json.loads(json.dumps(config))
        other["data"]["path"] = "/my/other/images"
        assert run_id(other) != run_id(config)


#: the ids of the shipped zoo campaign's runs; a training campaign keyed by them is under way, so no
#: change to the id scheme (a newly excluded key included) may move them
ZOO_SPRITES_CPU20K_IDS = {  # fp32 (the first, bf16 attempt had other ids: precision defines a run)
    "beta_tcvae": "fdce34b4af5a7024", "beta_vae": "0ef5b6f23466859b", "factor_vae": "d6a03ead6ae3a98c",
    "ada_ml_vae": "5903025935123be1", "dip_vae_i": "7edfd792fef1f19f", "dip_vae_ii": "25d0359fbab3ba97",
    "annealed_vae": "a11c8f3efd014971", "info_vae": "033e5c49af5f58f8", "aae": "ddfeaa691617f371",
    "ada_gvae": "48cb593e73a41b9f",
}


def test_the_zoo_campaign_run_ids_are_unchanged():
    plan = load_sweep("zoo_sprites_cpu20k")
    got = {r.config["objective"]["name"]: r.run_id for r in plan.runs}
    assert got == ZOO_SPRITES_CPU20K_IDS
    assert all("cache_dir" not in r.config["data"] for r in plan.runs)  # sprites: nothing to drop


def test_run_id_is_the_same_in_another_process(tmp_path):
    config = sweep_from_dict(tiny_sweep_dict(tmp_path), source="s", folder=tmp_path).runs[1].config
    # ids.py needs only the standard library and disentangle/_core/choices.py (which imports nothing):
    # load the two alone, under their package names, so the check is quick
    pkg = REPO / "disentangle"
    code = (
        "import importlib.util, json, sys, types\n"
        "for name in ('disentangle', 'disentangle._core', 'disentangle.sweep'):\n"
        "    sys.modules[name] = types.ModuleType(name); sys.modules[name].__path__ = []\n"
        f"for name, path in (('disentangle._core.choices', {str(pkg / '_core' / 'choices.py')!r}), "
        f"('disentangle.sweep.ids', {str(pkg / 'sweep' / 'ids.py')!r})):\n"
        "    spec = importlib.util.spec_from_file_location(name, path)\n"
        "    sys.modules[name] = module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)\n"
        "print(sys.modules['disentangle.sweep.ids'].run_id(json.loads(sys.stdin.read())))"
    )
    for hash_seed in ("1", "2"):
        # keys shuffled: the id must not depend on dict order or on str hashing
        shuffled = {k: config[k] for k in reversed(list(config))}
        proc = subprocess.run(
            [sys.executable, "-c", code], input=json.dumps(shuffled), capture_output=True, text=True,
            env={**os.environ, "PYTHONHASHSEED": hash_seed}, check=True,
        )
        assert proc.stdout.strip() == run_id(config)
    assert canonical_json({"b": 1, "a": [1.0, None]}) == '{"a":[1.0,null],"b":1}'


# ---------------------------------------------------------------------- kill -9 and rerun
def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; workers die with the parent on Linux")
def test_kill_9_of_the_sweep_then_rerun_only_runs_the_missing_ones(tmp_path):
    # 4 runs of 40 steps, each step slowed to 50 ms: 2 s of training per run on 2 workers
    path = write_sweep_file(tmp_path, extra_set={"data.delay": 0.05, "train.steps": 40})
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "disentangle.sweep", "run", str(path), "--out", str(out), "--workers", "2",
           "--threads-per-run", "1"]
    parent = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    runs = out / "runs"
    deadline = time.monotonic() + 180
    while not list(runs.glob("*/metrics.json")):
        assert parent.poll() is None, parent.stderr.read().decode()
        assert time.monotonic() < deadline, "no run finished in time"
        time.sleep(0.05)
    workers = _children(parent.pid)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    parent.stderr.close()

    deadline = time.monotonic() + 15  # the workers die with the parent (PR_SET_PDEATHSIG)
    while any(_alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in workers), "orphaned workers kept running"

    finished = sorted(p.parent.name for p in runs.glob("*/metrics.json"))
    assert 1 <= len(finished) < 4
    before = {rid: files_fingerprint(runs / rid) for rid in finished}
    status = api.status(out)
    assert status.counts["finished"] == len(finished) and status.counts["running"] == 0
    assert "4 runs" in status.summary()

    report = api.run(path, out, workers=2, threads_per_run=1, log=None)
    assert report.ok
    ran = {o.run_id for o in report.outcomes}
    assert all(o.status == "finished" for o in report.outcomes)
    assert ran == {r.run_id for r in report.plan.runs} - set(finished)  # only the missing ones
    assert {rid: files_fingerprint(runs / rid) for rid in finished} == before  # finished runs untouched
    for rid in ran:  # resumed or started: one log record per logged step, up to the last one
        steps = [json.loads(line)["step"] for line in (runs / rid / "log.jsonl").read_text().splitlines()]
        assert steps == list(range(2, 41, 2))

    with open(out / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
        columns = list(rows[0])
    assert columns[:4] == ["run_id", "status", "seed", "objective.beta"]
    assert "mig.mig" in columns and "unsupervised_scores.gaussian_total_correlation" in columns
    assert all(c.split(".")[0] in ("mig", "unsupervised_scores") for c in columns[4:])
    assert [r["run_id"] for r in rows] == [r.run_id for r in report.plan.runs]  # plan order, one row each
    assert [(float(r["objective.beta"]), int(r["seed"])) for r in rows] == [(1.0, 0), (1.0, 1), (4.0, 0), (4.0, 1)]
    for row in rows:
        assert row["status"] == "finished"
        assert 0.0 <= float(row["mig.mig"]) <= 1.0
        record = json.loads((runs / row["run_id"] / "metrics.json").read_text())
        assert float(row["mig.mig"]) == record["metrics"]["mig"]["mig"] and record["steps"] == 40


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_kill_9_of_a_worker_restarts_the_pool_and_resumes(tmp_path):
    path = write_sweep_file(tmp_path, extra_set={"data.delay": 0.05, "train.steps": 60}, metrics=[], metric_settings={})
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "disentangle.sweep", "run", str(path), "--out", str(out), "--workers", "2",
           "--threads-per-run", "1"]
    parent = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 180
    while not list((out / "runs").glob("*/checkpoint.pt")):
        assert parent.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    workers = [p for p in _children(parent.pid) if b"spawn_main" in Path(f"/proc/{p}/cmdline").read_bytes()]
    os.kill(workers[0], signal.SIGKILL)
    _, err = parent.communicate(timeout=300)
    assert parent.returncode == 0, err
    assert "restarting the pool" in err
    runs = list((out / "runs").iterdir())
    assert len(runs) == 4 and all((r / "metrics.json").exists() for r in runs)
    for run in runs:  # the interrupted runs resumed from their checkpoints: no step twice, none missing
        steps = [json.loads(line)["step"] for line in (run / "log.jsonl").read_text().splitlines()]
        assert steps == list(range(2, 61, 2))


def test_a_run_that_kills_its_worker_is_reported_crashed_and_the_others_finish(tmp_path, caplog):
    """One run whose worker dies every time (a segfault, an out-of-memory kill) is charged the
    attempts and reported crashed; the runs queued after it, never started when the pool broke, are
    not charged and finish."""
    import logging

    grid = [{"data.die": [True]}, {"objective.beta": [1.0, 4.0]}]
    path = write_sweep_file(tmp_path, grid=grid, seeds=1, metrics=[], metric_settings={})
    out = tmp_path / "out"
    caplog.set_level(logging.WARNING, logger="disentangle")
    report = api.run(path, out, workers=1, threads_per_run=1, max_retries=1, log=None)
    statuses = {o.run_id: o.status for o in report.outcomes}
    bad = next(r.run_id for r in report.plan.runs if r.values.get("data.die"))
    assert statuses == {r.run_id: ("crashed" if r.run_id == bad else "finished") for r in report.plan.runs}
    warnings = [r.getMessage() for r in caplog.records if "worker process died" in r.getMessage()]
    assert len(warnings) == 1 and f"died while training {bad}" in warnings[0]  # 2 attempts: one restart


def test_a_failing_run_is_recorded_and_the_others_finish(tmp_path, capsys):
    grid = [{"objective.beta": [1.0, 4.0]}, {"objective.beta": [2.0], "train.lr": [1.0e30]}]  # NaN at once
    builds = tmp_path / "builds.txt"
    path = write_sweep_file(tmp_path, grid=grid, seeds=1, metrics=["mig"], metric_settings={"mig": {"num_train": 200}},
                       extra_set={"data.build_log": str(builds)})
    out = tmp_path / "out"
    report = api.run(path, out, workers=1, threads_per_run=1, log=None)
    assert builds.read_text() == "built\n"  # the worker built the dataset once for its 3 runs and their metrics
    statuses = {o.run_id: o.status for o in report.outcomes}
    bad = report.plan.runs[2].run_id
    assert statuses == {r.run_id: ("failed" if r.run_id == bad else "finished") for r in report.plan.runs}
    failed = json.loads((out / "runs" / bad / "failed.json").read_text())
    assert failed["error"] == "NonFiniteLossError" and failed["last_line"].startswith("NonFiniteLossError: The loss became NaN")
    assert "Traceback" in (out / "runs" / bad / failed["traceback_file"]).read_text()
    assert not (out / "runs" / bad / "metrics.json").exists()
    assert not report.ok
    with open(out / "results.csv", newline="") as f:
        assert [r["run_id"] for r in csv.DictReader(f)] == [r.run_id for r in report.plan.runs[:2]]

    status = api.status(out)
    assert status.counts == {"finished": 2, "running": 0, "partial": 0, "not started": 0, "failed": 1}
    assert f"{bad}  objective.beta=2, train.lr=1e+30, seed=0  NonFiniteLossError" in status.summary()

    again = api.run(path, out, workers=1, log=None)  # failed runs are left alone by default ...
    assert again.to_run == 0 and again.outcomes == []
    retried = api.run(path, out, workers=1, threads_per_run=1, retry_failed=True, log=None)  # ... or retried
    assert [(o.run_id, o.status) for o in retried.outcomes] == [(bad, "failed")]
    assert json.loads((out / "runs" / bad / "failed.json").read_text())["attempts"] == 2

    assert sweep_cli(["status", str(out)]) == 0
    assert "3 runs: 2 finished, 0 running, 0 partial, 0 not started, 1 failed" in capsys.readouterr().out
    assert sweep_cli(["results", str(out), "--output", str(tmp_path / "r.csv")]) == 0
    assert (tmp_path / "r.csv").read_text() == (out / "results.csv").read_text()


def test_a_run_that_failed_on_its_config_is_tried_again_by_a_plain_rerun(tmp_path, capsys):
    """A run failing on its input (a ConfigError when it starts, such as a metric its data cannot give)
    is the sweep file's fault: once fixed, a plain rerun trains it (--retry-failed is for the rest)."""
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    grid = [{"objective.beta": [1.0]}, {"objective.beta": [2.0], "train.lr": [1.0e30]}]  # the second: NaN
    path = write_sweep_file(tmp_path, grid=grid, seeds=1, metrics=[], metric_settings={},
                            extra_set={"data.refuse_while": str(blocker)})
    out = tmp_path / "out"
    first = api.run(path, out, workers=1, threads_per_run=1, log=None)
    assert [o.status for o in first.outcomes] == ["failed", "failed"]
    bad_input, nan = (json.loads((out / "runs" / r.run_id / "failed.json").read_text()) for r in first.plan.runs)
    assert bad_input["error"] == "ConfigError" and bad_input["bad_input"] is True and nan["bad_input"] is True
    blocker.unlink()  # the fix
    lines = []
    again = api.run(path, out, workers=1, threads_per_run=1, log=lines.append)
    assert [(o.run_id, o.status) for o in again.outcomes] == [(first.plan.runs[0].run_id, "finished"),
                                                              (first.plan.runs[1].run_id, "failed")]
    assert "2 runs that failed on their config or data are tried again" in "\n".join(lines)
    assert json.loads((out / "runs" / first.plan.runs[1].run_id / "failed.json").read_text())["bad_input"] is False
    lines.clear()
    third = api.run(path, out, workers=1, threads_per_run=1, log=lines.append)  # a NaN stays failed
    assert third.outcomes == [] and "1 failed runs are left as they are" in "\n".join(lines)
    from disentangle.sweep.runner import failed_on_input

    assert failed_on_input({"error": "NotAGridError"}) and not failed_on_input({"error": "NonFiniteLossError"})


def test_the_run_lock_excludes_a_second_process(tmp_path):
    from disentangle.sweep.files import LOCK_NAME, RunLock, lock_holder

    # another process takes the same kind of lock (flock), then is killed with kill -9
    code = (
        "import fcntl, os, socket, time; "
        f"fd = os.open({str(tmp_path / LOCK_NAME)!r}, os.O_RDWR | os.O_CREAT); fcntl.flock(fd, fcntl.LOCK_EX); "
        "os.write(fd, f'{os.getpid()}@{socket.gethostname()}'.encode()); print('held', flush=True); time.sleep(60)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert lock_holder(tmp_path) == f"{holder.pid}@{socket.gethostname()}"
        assert not RunLock(tmp_path / LOCK_NAME).acquire(timeout=0.3)
    finally:
        holder.kill()  # kill -9: the kernel releases the lock
        holder.wait()
    lock = RunLock(tmp_path / LOCK_NAME)
    assert lock.acquire(timeout=5)
    assert lock_holder(tmp_path) == f"{os.getpid()}@{socket.gethostname()}"
    lock.release()
    assert lock_holder(tmp_path) is None


# ---------------------------------------------------------------------- shipped sweep files
def test_mini_sweep_file_is_shipped_and_valid():
    plan = load_sweep("mini")
    assert len(plan.runs) == 12 and {r.config["data"]["name"] for r in plan.runs} == {"sprites"}
    assert plan.varying_keys[0] == "objective.name" and plan.metrics


def test_locatello_sweep_files_match_the_zoo_grid():
    from disentangle.config import Config
    from disentangle.zoo import locatello

    for d, dataset in enumerate(locatello.DATASETS):
        plan = load_sweep(f"locatello2019/{dataset}")
        assert [r.dlib_model_number for r in plan.runs] == list(range(d * 1800, (d + 1) * 1800))
        assert plan.varying_keys == ["objective.name", "objective.beta", "objective.gamma", "objective.lambda_od",
                                     "objective.c_max"]
        step = 5 if dataset == "dsprites" else 97  # every grid point of one file (10 seeds each), a sample of the others
        for spec in plan.runs[::step]:
            point = locatello.from_model_number(spec.dlib_model_number)
            expected = Config.from_dict(locatello.grid_config(*point)).to_dict()
            assert identity(spec.config) == identity(expected), (dataset, point)


def test_a_shipped_sweep_file_is_found_by_its_name_with_or_without_its_folder():
    from disentangle.sweep.grid import shipped_sweep_names, sweep_path, sweeps_root

    mini = sweep_path("mini")
    assert mini == sweeps_root() / "mini.yaml" and mini.parent.name == "sweeps" and mini.is_file()
    for spelling in ("mini.yaml", "sweeps/mini", "configs/sweeps/mini", "configs/sweeps/mini.yaml"):
        assert sweep_path(spelling).resolve() == mini, spelling  # a relative file when run from a checkout
    assert sweep_path("locatello2019/dsprites") == sweeps_root() / "locatello2019" / "dsprites.yaml"
    assert {"mini", "locatello2019/dsprites", "init_ab/beta_vae"} <= set(shipped_sweep_names())


@pytest.mark.parametrize("spelling", ["studies/mini", "configs/studies/mini", "configs/studies/mini.yaml"])
def test_the_old_folder_of_the_shipped_sweep_files_still_works_with_a_warning(spelling):
    from disentangle.sweep.grid import sweep_path

    with pytest.warns(DeprecationWarning, match="configs/studies/ to configs/sweeps/.*Write 'mini' or 'configs/sweeps/mini"):
        assert sweep_path(spelling) == sweep_path("mini")


def test_an_unknown_sweep_file_names_the_shipped_ones(tmp_path, capsys):
    from disentangle.sweep.grid import shipped_sweep_names

    with pytest.raises(ConfigError) as info:
        load_sweep("mnii")
    message = str(info.value)
    assert message.startswith("Sweep file 'mnii' is neither a file nor a shipped sweep name.") and "\n" not in message
    assert "Did you mean 'mini'" in message and all(name in message for name in shipped_sweep_names())
    assert sweep_cli(["run", "nosuch", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: Sweep file 'nosuch'") and "Shipped sweep files: " in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_the_cli_runs_a_sweep_file_given_by_its_old_path_and_says_so(tmp_path, capsys):
    with pytest.warns(DeprecationWarning, match="Write 'mini'"):
        assert sweep_cli(["run", "studies/mini", "--out", str(tmp_path / "out"), "--dry-run"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("sweep mini: 12 runs") and not (tmp_path / "out").exists()


def test_resume_precision_continues_the_partial_runs_only_and_is_checked_first(tmp_path):
    path = write_sweep_file(tmp_path, seeds=1, metrics=["mig"], metric_settings={"mig": {"num_train": 200}},
                            extra_set={"train.precision": "bf16"})
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match=r"resume_precision='fp8' is not a precision\. Choose one of fp32, bf16"):
        api.run(path, out, resume_precision="fp8", log=None)
    assert not out.exists()
    partial, new = load_sweep(path).runs
    # the first run was interrupted at its step-4 checkpoint, on a machine where bf16 was fast
    from disentangle.config import Config
    from disentangle.training.trainer import fit

    sys.path.insert(0, str(tmp_path))  # the plugin that registers the tiny dataset
    try:
        import tiny_plugin  # noqa: F401
        first = dict(partial.config, train={**partial.config["train"], "steps": 4,
                                            "out_dir": str(out / "runs" / partial.run_id)})
        fit(Config.from_dict(first))
    finally:
        sys.path.remove(str(tmp_path))
    report = api.run(path, out, workers=1, threads_per_run=1, resume_precision="fp32", log=None)
    assert {o.run_id: o.status for o in report.outcomes} == {partial.run_id: "finished", new.run_id: "finished"}

    def sessions(run):
        lines = (out / "runs" / run.run_id / "execution.jsonl").read_text().splitlines()
        return [(r["step"], r["precision"]) for r in map(json.loads, lines)]

    assert sessions(partial) == [(0, "bf16"), (4, "fp32")]  # continued in fp32
    assert sessions(new) == [(0, "bf16")]  # a new run trains in its own precision
    for run in (partial, new):
        saved = yaml.safe_load((out / "runs" / run.run_id / "config.yaml").read_text())
        assert saved["train"]["precision"] == "bf16" and run_id(saved) == run.run_id


def test_the_cli_passes_resume_precision_on(tmp_path, monkeypatch):
    seen = {}

    def fake_run(sweep_file, out, **kwargs):
        seen.update(kwargs)
        raise KeyboardInterrupt  # stop here: only the arguments matter

    monkeypatch.setattr(api, "run", fake_run)
    path = write_sweep_file(tmp_path)
    sweep_cli(["run", str(path), "--out", str(tmp_path / "out"), "--resume-precision", "auto"])
    assert seen["resume_precision"] == "auto"
    with pytest.raises(SystemExit) as exit_:
        sweep_cli(["run", str(path), "--out", str(tmp_path / "out"), "--resume-precision", "fp8"])
    assert exit_.value.code == 2


def _image_folder_sweep(tmp_path: Path, metrics) -> Path:
    import numpy as np
    from PIL import Image

    folder = tmp_path / "images"
    folder.mkdir(exist_ok=True)
    rng = np.random.default_rng(0)
    for i in range(8):
        Image.fromarray(rng.integers(0, 256, (20, 20), dtype=np.uint8)).save(folder / f"{i}.png")
    path = tmp_path / "images.yaml"
    path.write_text(yaml.safe_dump({
        "base": "image_folder",
        "set": {"data.path": str(folder), "data.image_size": 16, "data.cache": str(tmp_path / "cache"),
                "model.backbone": "mlp", "model.hidden_sizes": [16], "model.latent_dim": 2, "train.steps": 2,
                "train.batch_size": 4, "train.device": "cpu", "train.progress": False, "train.traversals": False},
        "grid": {"objective.beta": [1.0]}, "seeds": 1, "metrics": metrics,
        "metric_settings": {m: v for m, v in {"unsupervised_scores": {"num_train": 16}, "elbo": {"num_samples": 16}}.items()
                            if metrics == "all" or m in metrics},
    }))
    return path


def test_all_leaves_out_what_unlabelled_images_cannot_give_and_a_rerun_skips_the_run(tmp_path, one_thread):
    from disentangle.sweep.files import RunState
    from disentangle.sweep.runner import NOT_APPLICABLE

    out = tmp_path / "out"
    report = api.run(str(_image_folder_sweep(tmp_path, "all")), out, workers=1, log=None)
    (run,) = report.plan.runs
    record = json.loads((out / "runs" / run.run_id / "metrics.json").read_text())
    assert set(record["metrics"]) == {"elbo", "unsupervised_scores"}
    assert "mig" in record[NOT_APPLICABLE] and "factor_vae_score" in record[NOT_APPLICABLE]
    again = api.run(str(_image_folder_sweep(tmp_path, "all")), out, workers=1, log=None)
    assert again.outcomes == []  # finished: nothing left to compute, nothing run
    assert api.run_state(out / "runs" / run.run_id, again.plan.metrics, again.plan.metric_settings)[0] == RunState.FINISHED


def test_a_named_metric_the_data_cannot_give_stops_the_run_before_training(tmp_path, one_thread):
    from disentangle.sweep.files import RunState
    out = tmp_path / "out"
    report = api.run(str(_image_folder_sweep(tmp_path, ["mig", "elbo"])), out, workers=1, log=None)
    (outcome,) = report.outcomes
    assert outcome.status == RunState.FAILED and "The metric 'mig' cannot run on image folder" in outcome.message
    run_dir = out / "runs" / outcome.run_id
    assert not (run_dir / "checkpoint.pt").exists()  # refused before a step was trained


def test_an_out_that_is_a_file_is_one_paragraph_before_any_work(tmp_path, capsys):
    """``--out FILE`` ended in a FileExistsError traceback (exit 1) once the plan was read: now one
    paragraph, exit 2, before the sweep file is read; the file is left as it was."""
    path = write_sweep_file(tmp_path)
    file = tmp_path / "results.txt"
    file.write_text("mine")
    for out, where in ((file, "is a file"), (file / "sub", f"lies under '{file}', which is a file")):
        assert sweep_cli(["run", str(path), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: The sweep folder '{out}' (--out) {where}, not a folder.") and err.count("\n") == 1
        assert "--out sweeps/NAME" in err
        with pytest.raises(ConfigError, match="not a folder"):
            api.run(path, out, dry_run=True, log=None)
    assert file.read_text() == "mine" and sorted(p.name for p in tmp_path.iterdir()) == [
        "results.txt", "sweep.yaml", "tiny_plugin.py"]


def test_a_sweep_left_at_precision_auto_warns_that_its_run_ids_are_this_machine_s(tmp_path, caplog, capsys):
    """train.precision: auto resolves per machine (bf16 on a CPU with native bf16, fp32 elsewhere),
    and the precision is part of the run id: sweep run warns and says how to pin it."""
    def warnings_of(**fields) -> list[str]:
        caplog.clear()
        with caplog.at_level("WARNING", logger="disentangle.sweep.api"):
            api.run(write_sweep_file(tmp_path, **fields), tmp_path / "out", dry_run=True, log=None)
        return [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]

    assert warnings_of() == []  # the base names fp32
    (warning,) = warnings_of(extra_set={"train.precision": "auto"})
    assert "leaves train.precision at auto for all its 4 runs: auto is fp32 on this machine" in warning
    assert "Name the precision in the sweep file's base config or grid (set: {train.precision: fp32}" in warning
    (warning,) = warnings_of(grid={"train.precision": ["auto", "bf16"]})
    assert "for 2 of its 4 runs" in warning
    assert warnings_of(grid={"train.precision": ["fp32", "bf16"]}) == []
    assert not (tmp_path / "out").exists()
    assert sweep_cli(["run", str(write_sweep_file(tmp_path, extra_set={"train.precision": "auto"})), "--out",
                      str(tmp_path / "out"), "--dry-run"]) == 0
    assert "warning: sweep 'sweep' leaves train.precision at auto" in capsys.readouterr().err
