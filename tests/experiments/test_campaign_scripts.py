"""The 300k campaign's scripts on fake run folders: ``benchmarks/campaign_milestones.py`` keeps a
checkpoint at a milestone step once, ``benchmarks/trajectories_300k.py`` reads the logged
evaluations and tabulates mean ± sd over seeds (nothing is trained)."""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import pytest
import torch
import yaml


def _fake_run(runs: Path, name: str, objective: str, seed: int, step: int, evals: dict[int, tuple[float, float]]) -> Path:
    run = runs / name
    run.mkdir(parents=True)
    config = {"seed": seed, "objective": {"name": objective}, "train": {"precision": "bf16"}}
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    torch.save({"step": step, "model": {}}, run / "checkpoint.pt")
    lines = [json.dumps({"step": s, "loss": 1.0, "steps_per_s": 10.0}) for s in evals]
    lines += [json.dumps({"step": s, "metrics": {"mig": {"mig": m}, "dci": {"disentanglement": d}}})
              for s, (m, d) in evals.items()]
    (run / "log.jsonl").write_text("\n".join(lines) + "\n")
    return run


def test_a_milestone_checkpoint_is_kept_once_and_others_are_not(tmp_path, benchmark_script):
    script = benchmark_script("campaign_milestones")
    runs = tmp_path / "sweep" / "runs"
    at = _fake_run(runs, "a", "beta_vae", 0, 20_000, {})
    _fake_run(runs, "b", "beta_vae", 1, 22_000, {})
    out = tmp_path / "milestones"
    made = script.keep_milestones(tmp_path / "sweep", out, {20_000, 100_000})
    assert made == [out / "a" / "step_0020000"]
    assert script.checkpoint_step(made[0] / "checkpoint.pt") == 20_000
    assert (made[0] / "config.yaml").read_text() == (at / "config.yaml").read_text()
    assert script.keep_milestones(tmp_path / "sweep", out, {20_000}) == []  # already kept
    assert not list(out.glob("*/*.partial"))


def test_the_watcher_keeps_milestones_of_every_sweep_folder_it_is_given(tmp_path, benchmark_script, monkeypatch):
    script = benchmark_script("campaign_milestones")
    _fake_run(tmp_path / "first" / "runs", "a", "beta_vae", 0, 100_000, {})
    _fake_run(tmp_path / "second" / "runs", "b", "dip_vae_i", 0, 20_000, {})
    _fake_run(tmp_path / "second" / "runs", "c", "info_vae", 0, 30_000, {})
    out = tmp_path / "milestones"
    monkeypatch.setattr(sys, "argv", ["campaign_milestones.py", str(tmp_path / "first"), str(tmp_path / "second"),
                                      "--out", str(out), "--once"])
    script.main()
    assert sorted(p.relative_to(out).as_posix() for p in out.glob("*/step_*")) == [
        "a/step_0100000", "b/step_0020000"]


def test_trajectories_table_is_the_mean_and_sd_over_seeds(tmp_path, benchmark_script, monkeypatch):
    script = benchmark_script("trajectories_300k")
    monkeypatch.setattr(script, "DATA", tmp_path / "trajectories.csv")
    runs = tmp_path / "sweep" / "runs"
    _fake_run(runs, "s0", "beta_vae", 0, 20_000, {10_000: (0.1, 0.2), 20_000: (0.2, 0.3)})
    _fake_run(runs, "s1", "beta_vae", 1, 20_000, {10_000: (0.3, 0.1), 20_000: (0.4, 0.5)})
    rows = script.collect(tmp_path / "sweep", None)
    assert sorted((r["run_id"], r["step"], r["mig"]) for r in rows) == [
        ("s0", 10_000, 0.1), ("s0", 20_000, 0.2), ("s1", 10_000, 0.3), ("s1", 20_000, 0.4)]
    script.write_data(rows)
    again = script.read_data()  # the committed data round-trips
    assert sorted((r["run_id"], int(r["step"]), r["dci_disentanglement"]) for r in again) == [
        ("s0", 10_000, 0.2), ("s0", 20_000, 0.3), ("s1", 10_000, 0.1), ("s1", 20_000, 0.5)]
    table = script.table(again)
    row = next(line for line in table.splitlines() if "| 20,000 |" in line)
    assert f"{statistics.mean([0.2, 0.4]):.3f} ± {statistics.stdev([0.2, 0.4]):.3f} (n=2)" in row
    assert f"{statistics.mean([0.3, 0.5]):.3f} ± {statistics.stdev([0.3, 0.5]):.3f} (n=2)" in row
    assert "| 10,000 |" not in table  # only the steps of the table


def test_trajectories_read_several_sweeps_and_keep_rows_of_runs_trained_elsewhere(tmp_path, benchmark_script,
                                                                                  monkeypatch):
    """A row of a run in none of the folders (a GPU's, merged by gpu_results.sh) stays in the data."""
    script = benchmark_script("trajectories_300k")
    monkeypatch.setattr(script, "DATA", tmp_path / "trajectories.csv")
    monkeypatch.setattr(script, "FIGURE", tmp_path / "trajectories.png")
    script.write_data([{"run_id": "gpu", "objective": "beta_vae", "seed": 2, "precision": "bf16", "step": 20_000,
                        "mig": 0.5, "dci_disentanglement": 0.6}])
    _fake_run(tmp_path / "first" / "runs", "s0", "beta_vae", 0, 20_000, {20_000: (0.1, 0.2)})
    _fake_run(tmp_path / "second" / "runs", "d0", "dip_vae_i", 0, 20_000, {20_000: (0.3, 0.4)})
    rows = script.collect([tmp_path / "first", tmp_path / "second"], None)
    assert sorted((r["run_id"], r["objective"], r["mig"]) for r in rows) == [
        ("d0", "dip_vae_i", 0.3), ("gpu", "beta_vae", 0.5), ("s0", "beta_vae", 0.1)]
    table = script.table(rows)
    assert f"| β-VAE (β = 4) | 20,000 | {statistics.mean([0.1, 0.5]):.3f} ± {statistics.stdev([0.1, 0.5]):.3f} (n=2)" in table
    assert "| DIP-VAE-I (λ_od = 10) | 20,000 | 0.300 (n=1) | 0.400 (n=1) |" in table
    assert table.index("β-VAE") < table.index("DIP-VAE-I")  # the campaign's order
    pytest.importorskip("matplotlib")
    script.figure(rows)
    assert script.FIGURE.stat().st_size > 0


@pytest.mark.usefixtures("one_thread")
def test_trajectories_figure_is_drawn(tmp_path, benchmark_script, monkeypatch):
    pytest.importorskip("matplotlib")
    script = benchmark_script("trajectories_300k")
    monkeypatch.setattr(script, "FIGURE", tmp_path / "t.png")
    rows = [{"run_id": "a", "objective": "beta_tcvae", "seed": 0, "step": s, "mig": 0.1, "dci_disentanglement": 0.2,
             "mig_rotated": 0.2 if s == 20_000 else None} for s in (10_000, 20_000)]
    script.figure(rows)
    assert (tmp_path / "t.png").stat().st_size > 1000


def test_the_gpu_sessions_sweep_files_keep_the_campaigns_run_ids(tmp_path):
    """gpu.sh trains each run as a sweep of its own (to vary train.compile) with the keep_checkpoints
    callback: the runs must be the campaign's, with its ids, or a GPU and a CPU would train the same
    model under two names."""
    import importlib.util

    from disentangle.sweep.grid import load_sweep

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "campaign300k" / "gpu_sweeps.py"
    spec = importlib.util.spec_from_file_location("gpu_sweeps", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    files = module.sweep_files(tmp_path, "beta_tcvae:1,2 factor_vae:0 ada_gvae:0,2 dip_vae_i:0",
                               ["false", "reduce-overhead"])
    campaign = {(r.config["objective"]["name"], r.seed): r.run_id
                for name in ("zoo_sprites_ref300k", "zoo_sprites_ref300k_more", "zoo_sprites_ref300k_ada_seeds")
                for r in load_sweep(name).runs}
    assert len(campaign) == 9 + 6 + 4  # no objective and seed is trained by two of the sweeps
    planned = {}
    for file in files:
        (run,) = load_sweep(str(file)).runs
        config = run.config
        planned[(config["objective"]["name"], run.seed)] = (run.run_id, config["train"]["compile"], config["train"]["callbacks"])
    assert {k: v[0] for k, v in planned.items()} == {k: campaign[k] for k in planned}
    assert [v[1] for v in planned.values()] == [False, "reduce-overhead"] * 3
    assert planned[("dip_vae_i", 0)][0] != planned[("ada_gvae", 0)][0]
    with pytest.raises(SystemExit, match="dip_vae_i:1"):  # the campaign trains DIP-VAE-I with seed 0 only
        module.sweep_files(tmp_path / "bad", "dip_vae_i:1", ["false"])
    assert all(v[2][0]["name"] == "keep_checkpoints" for v in planned.values())


def _naming():
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "campaign300k" / "naming.py"
    spec = importlib.util.spec_from_file_location("campaign_naming", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_campaign_names_the_zoo_s_reference_init_models_as_they_were_named_by_hand():
    """Every shipped ``-cpuNk-ref-`` model (20k, 40k and 300k, named one by one when published) gets
    its own name back from its config."""
    from disentangle.zoo import manifest as zoo_manifest

    naming = _naming()
    models = json.loads(zoo_manifest.SHIPPED_MANIFEST.read_text())["models"]
    named = {name: record for name, record in models.items() if "-ref-s" in name and "-sprites-" in name}
    assert len(named) >= 20
    assert {name: naming.zoo_name(record["config"], "cpu") for name, record in named.items()} == {n: n for n in named}


def test_each_campaign_run_is_trained_by_the_recipe_it_is_published_with():
    """``zoo publish --recipe`` records naming.recipe(config): training that recipe by name (with the
    seed, steps, precision, init and strength, as tests/zoo/test_shipped.py does) must give the run's id."""
    from disentangle.config import load_config
    from disentangle.sweep.grid import load_sweep
    from disentangle.sweep.ids import run_id
    from disentangle.zoo.recipes import FAMILIES

    naming = _naming()
    names = set()
    for sweep in ("zoo_sprites_ref300k", "zoo_sprites_ref300k_more", "zoo_sprites_ref300k_ada_seeds"):
        for run in load_sweep(sweep).runs:
            config = run.config
            objective = config["objective"]
            overrides = [f"seed={config['seed']}", f"train.steps={config['train']['steps']}",
                         f"model.init={config['model']['init']}", f"train.precision={config['train']['precision']}"]
            key = next(f.parameter[objective["name"]] for f in FAMILIES if objective["name"] in f.parameter)
            overrides.append(f"objective.{key}={objective[key]}")
            assert run_id(load_config(naming.recipe(config), overrides).to_dict()) == run.run_id, objective["name"]
            names.add(naming.zoo_name(config, "cpu"))
    assert len(names) == 19
    assert "annealed_vae-sprites-c_max25-ramp100k-cpu300k-ref-s0" in names
    assert "dip_vae_ii-sprites-lambda_od10-cpu300k-ref-s0" in names
