"""The 300k campaign's scripts on fake run folders: ``benchmarks/campaign_milestones.py`` keeps a
checkpoint at a milestone step once, ``benchmarks/trajectories_300k.py`` reads the logged
evaluations and tabulates mean ± sd over seeds (nothing is trained)."""
from __future__ import annotations

import json
import statistics
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
    files = module.sweep_files(tmp_path, "beta_tcvae:1,2 factor_vae:0", ["false", "reduce-overhead"])
    campaign = {(r.config["objective"]["name"], r.seed): r.run_id for r in load_sweep("zoo_sprites_ref300k").runs}
    planned = {}
    for file in files:
        (run,) = load_sweep(str(file)).runs
        config = run.config
        planned[(config["objective"]["name"], run.seed)] = (run.run_id, config["train"]["compile"], config["train"]["callbacks"])
    assert {k: v[0] for k, v in planned.items()} == {k: campaign[k] for k in planned}
    assert [v[1] for v in planned.values()] == [False, "reduce-overhead", False]
    assert all(v[2][0]["name"] == "keep_checkpoints" for v in planned.values())
