"""The 300k campaign's scripts on fake run folders: ``benchmarks/campaign_milestones.py`` keeps a
checkpoint at a milestone step once, ``benchmarks/trajectories_300k.py`` reads the logged
evaluations and tabulates mean ± sd over seeds (nothing is trained)."""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import numpy as np
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
        "a/step_0100000", "b/step_0020000", "c/step_0030000"]  # by default every 10,000th step too


def test_a_milestone_is_a_step_named_or_a_multiple_of_the_interval(benchmark_script):
    script = benchmark_script("campaign_milestones")
    named = {20_000, 100_000}
    assert [s for s in (0, 2_000, 10_000, 20_000, 22_000, 30_000, 100_000, 150_000)
            if script.is_milestone(s, named, 10_000)] == [10_000, 20_000, 30_000, 100_000, 150_000]
    assert [s for s in (0, 10_000, 20_000, 30_000, 100_000) if script.is_milestone(s, named, 0)] == [20_000, 100_000]
    assert not script.is_milestone(None, named, 10_000)  # a checkpoint being replaced


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
    text = (tmp_path / "trajectories.csv").read_text()
    script.write_data(again)
    assert (tmp_path / "trajectories.csv").read_text() == text  # counts stay counts: 20000, not 20000.0
    assert ",20000," in text and ",20000.0," not in text
    assert sorted((r["run_id"], int(r["step"]), r["dci_disentanglement"]) for r in again) == [
        ("s0", 10_000, 0.2), ("s0", 20_000, 0.3), ("s1", 10_000, 0.1), ("s1", 20_000, 0.5)]
    table = script.table(again)
    row = next(line for line in table.splitlines() if "| 20,000 |" in line)
    assert f"{statistics.mean([0.2, 0.4]):.3f} ± {statistics.stdev([0.2, 0.4]):.3f} (n=2)" in row
    assert f"{statistics.mean([0.3, 0.5]):.3f} ± {statistics.stdev([0.3, 0.5]):.3f} (n=2)" in row
    assert "| 10,000 |" not in table  # only the steps of the table
    assert {r["precision"] for r in rows} == {"bf16"}


def test_a_trajectory_row_names_the_precisions_that_trained_the_run_up_to_its_step(tmp_path, benchmark_script):
    script = benchmark_script("trajectories_300k")
    run = _fake_run(tmp_path / "runs", "s2", "beta_tcvae", 2, 270_000,
                    {250_000: (0.17, 0.3), 260_000: (0.17, 0.3), 270_000: (0.17, 0.3)})
    sessions = [(0, "bf16"), (148_755, "bf16"), (255_041, "fp32"), (262_000, "fp32")]
    (run / "execution.jsonl").write_text("".join(json.dumps({"step": a, "precision": p}) + "\n" for a, p in sessions))
    assert [(r["step"], r["precision"]) for r in script.logged_rows(run)] == [
        (250_000, "bf16"), (260_000, "bf16>fp32"), (270_000, "bf16>fp32")]
    before = script.precision_before(tmp_path / "absent", "fp32")
    assert before(100) == "fp32"
    # a run whose last session, in another precision, is the one training now (no session after it)
    (run / "execution.jsonl").write_text("".join(json.dumps({"step": a, "precision": p}) + "\n"
                                                 for a, p in [(0, "bf16"), (255_041, "fp32")]))
    assert [(r["step"], r["precision"]) for r in script.logged_rows(run)] == [
        (250_000, "bf16"), (260_000, "bf16>fp32"), (270_000, "bf16>fp32")]


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


def test_cached_rows_of_a_run_here_are_kept_where_its_log_no_longer_holds_them(tmp_path, benchmark_script,
                                                                               monkeypatch):
    """A run folder restored from an older save logs fewer steps than the data holds: the rows of the
    steps its log lacks, and their milestone scores, stay; a step it logs is read from the log."""
    script = benchmark_script("trajectories_300k")
    monkeypatch.setattr(script, "DATA", tmp_path / "trajectories.csv")
    script.write_data([{"run_id": "s0", "objective": "beta_vae", "seed": 0, "precision": "fp32", "step": step,
                        "mig": mig, "dci_disentanglement": 0.2, "factor_vae_score": 0.7, "mig_rotated": 0.3,
                        "position_latents": 2, "active_latents": 6}
                       for step, mig in [(10_000, 0.9), (20_000, 0.25)]])
    _fake_run(tmp_path / "sweep" / "runs", "s0", "beta_vae", 0, 10_000, {10_000: (0.1, 0.2)})
    rows = {int(r["step"]): r for r in script.collect(tmp_path / "sweep", None)}
    assert sorted(rows) == [10_000, 20_000]
    assert rows[10_000]["mig"] == 0.1 and rows[10_000]["factor_vae_score"] == 0.7  # the log's, the cached score
    assert rows[20_000]["mig"] == 0.25 and rows[20_000]["factor_vae_score"] == 0.7


def test_a_seed_trained_by_a_run_and_its_twin_is_counted_once(benchmark_script, tmp_path, monkeypatch):
    """FactorVAE s0's bf16 run and its fp32 twin (one zoo name; one is trained to the end): the
    table and the figure take the run that reached the furthest step, so the seed counts once."""
    script = benchmark_script("trajectories_300k")
    monkeypatch.setattr(script, "FIGURE", tmp_path / "trajectories.png")
    rows = [{"run_id": run_id, "objective": "factor_vae", "seed": seed, "precision": precision, "step": step,
             "mig": mig, "dci_disentanglement": 0.3}
            for run_id, seed, precision, steps, mig in [("bf16-s0", 0, "bf16", (20_000, 100_000), 0.2),
                                                        ("fp32-s0", 0, "fp32", (20_000,), 0.6),
                                                        ("fp32-s1", 1, "fp32", (20_000,), 0.1)]
            for step in steps]
    kept = script.one_run_per_seed(rows)
    assert sorted({r["run_id"] for r in kept}) == ["bf16-s0", "fp32-s1"]
    table = script.table(rows)
    assert (f"| FactorVAE (γ = 30) | 20,000 | {statistics.mean([0.2, 0.1]):.3f} ± "
            f"{statistics.stdev([0.2, 0.1]):.3f} (n=2)") in table
    pytest.importorskip("matplotlib")
    fig = script.figure(rows)
    assert len([line for line in fig.axes[0].lines if line.get_label().startswith("seed")]) == 2


def test_active_latents_are_those_whose_posterior_mean_varies_over_the_data(benchmark_script, rng):
    script = benchmark_script("trajectories_300k")
    codes = rng.standard_normal((20_000, 4)) * np.sqrt([1.0, 0.03, 0.003, 0.0])  # variances 1, .03, .003, 0
    assert script.active_latents(codes) == 2
    assert script.active_latents(codes + 5.0) == 2  # a shifted mean is not activity


def test_every_kept_checkpoint_gets_the_code_scores_and_the_table_steps_the_factor_vae_score(
        tmp_path, benchmark_script, monkeypatch):
    """The cache is kept: a row with the FactorVAE score but no active latents gets only the code
    scores (seconds), not the FactorVAE score again (minutes); a kept checkpoint off the table's steps
    gets the code scores only, unless every step is asked for; a second pass computes nothing."""
    script = benchmark_script("trajectories_300k")
    monkeypatch.setattr(script, "DATA", tmp_path / "trajectories.csv")
    run = _fake_run(tmp_path / "sweep" / "runs", "s0", "beta_vae", 0, 20_000, {10_000: (0.1, 0.2), 20_000: (0.2, 0.3)})
    (run / "metrics.json").write_text("{}")  # finished: its own checkpoint is the step-20,000 one
    kept = tmp_path / "milestones" / "s0" / "step_0010000"
    kept.mkdir(parents=True)
    torch.save({"step": 10_000, "model": {}}, kept / "checkpoint.pt")
    script.write_data([{"run_id": "s0", "objective": "beta_vae", "seed": 0, "precision": "bf16", "step": 20_000,
                        "mig": 0.2, "factor_vae_score": 0.7, "mig_rotated": 0.25, "rotation_degrees": 10.0,
                        "position_latents": 2}])
    calls = []
    monkeypatch.setattr(script, "code_scores", lambda folder, seed, device: calls.append(("code", folder)) or {
        "mig_rotated": 0.15, "rotation_degrees": 3.0, "position_latents": 4, "active_latents": 7})
    monkeypatch.setattr(script, "factor_vae_score_of", lambda folder, seed, device: calls.append(("fvae", folder)) or {
        "factor_vae_score": 0.5})
    rows = {int(r["step"]): r for r in script.collect(tmp_path / "sweep", tmp_path / "milestones",
                                                      factor_vae_steps=(20_000,))}
    assert sorted(calls, key=str) == sorted([("code", run), ("code", kept)], key=str)
    assert (rows[20_000]["factor_vae_score"], rows[20_000]["mig_rotated"], rows[20_000]["active_latents"]) == (
        0.7, 0.15, 7)
    assert (rows[10_000]["factor_vae_score"], rows[10_000]["position_latents"]) == (None, 4)
    calls.clear()
    assert script.collect(tmp_path / "sweep", tmp_path / "milestones", factor_vae_steps=(20_000,)) and calls == []
    rows = {int(r["step"]): r for r in script.collect(tmp_path / "sweep", tmp_path / "milestones",
                                                      factor_vae_steps=None)}
    assert calls == [("fvae", kept)]  # every step asked for: only the missing score
    assert rows[10_000]["factor_vae_score"] == 0.5 and rows[20_000]["factor_vae_score"] == 0.7
    calls.clear()
    script.collect(tmp_path / "sweep", tmp_path / "milestones", factor_vae_steps=None)
    assert calls == []  # everything cached now


def test_missing_scores_reads_the_row_and_the_steps_due(benchmark_script):
    script = benchmark_script("trajectories_300k")
    full = {"factor_vae_score": 0.7, "mig_rotated": 0.2, "rotation_degrees": 0.0, "position_latents": 2,
            "active_latents": 9}
    assert script.missing_scores(full, 10_000, (20_000,)) == (False, False)
    assert script.missing_scores({**full, "rotation_degrees": None}, 10_000, (20_000,)) == (True, False)
    assert script.missing_scores({**full, "factor_vae_score": None}, 10_000, (20_000,)) == (False, False)
    assert script.missing_scores({**full, "factor_vae_score": None}, 20_000, (20_000,)) == (False, True)
    assert script.missing_scores({}, 10_000, None) == (True, True)


def _published(run_id: str, objective: str, seed: int, mig: float, dci: float) -> dict:
    return {"trained_steps": 300_000, "metrics_seed": seed,
            "config": {"seed": seed, "objective": {"name": objective},
                       "train": {"precision": "bf16", "out_dir": f"/elsewhere/sweep/runs/{run_id}"}},
            "metrics": {"mig": {"mig": mig}, "dci": {"disentanglement": dci, "completeness": 0.5,
                                                     "informativeness_test": 0.6}}}


def test_a_published_run_trained_elsewhere_gets_its_final_row_from_the_zoo(tmp_path, benchmark_script, monkeypatch):
    """A run published from another machine has no folder here: its 300k row is the zoo's evaluation
    and its milestone columns are scored on the zoo's weights, once; a run of a folder here, a zoo
    model of no campaign and a row already scored are left alone."""
    script = benchmark_script("trajectories_300k")
    monkeypatch.setattr(script, "DATA", tmp_path / "trajectories.csv")
    run = _fake_run(tmp_path / "sweep" / "runs", "here", "beta_vae", 0, 300_000, {300_000: (0.1, 0.2)})
    (run / "metrics.json").write_text("{}")
    script.write_data([{"run_id": "cached", "objective": "beta_vae", "seed": 2, "precision": "bf16",
                        "step": 300_000, "mig": 0.3, "factor_vae_score": 0.6, "mig_rotated": 0.3,
                        "rotation_degrees": 5.0, "position_latents": 2, "active_latents": 8}])
    zoo = {"beta_vae-sprites-beta4-cpu300k-ref-s0": _published("here", "beta_vae", 0, 0.1, 0.2),
           "beta_vae-sprites-beta4-cpu300k-ref-s1": _published("gone", "beta_vae", 1, 0.4, 0.5),
           "beta_vae-sprites-beta4-cpu300k-ref-s2": _published("cached", "beta_vae", 2, 0.3, 0.4),
           "beta_vae-dsprites-beta4-s1": _published("other", "beta_vae", 1, 0.9, 0.9)}
    calls = []
    monkeypatch.setattr(script, "code_scores", lambda folder, seed, device: calls.append((str(folder), seed)) or {
        "mig_rotated": 0.45, "rotation_degrees": 50.0, "position_latents": 3, "active_latents": 6})
    monkeypatch.setattr(script, "factor_vae_score_of", lambda folder, seed, device: calls.append((str(folder), seed))
                        or {"factor_vae_score": 0.7})
    rows = {r["run_id"]: r for r in script.collect(tmp_path / "sweep", None, zoo=zoo)}
    assert sorted(calls) == [(str(run), 0)] * 2 + [("zoo:beta_vae-sprites-beta4-cpu300k-ref-s1", 1)] * 2
    assert sorted(rows) == ["cached", "gone", "here"]
    gone = rows["gone"]
    assert (gone["seed"], gone["step"], gone["mig"], gone["dci_disentanglement"], gone["dci_informativeness"],
            gone["factor_vae_score"], gone["active_latents"]) == (1, 300_000, 0.4, 0.5, 0.6, 0.7, 6)
    assert rows["cached"]["factor_vae_score"] == 0.6  # not scored again
    table = script.table(list(rows.values()))
    mean, sd = statistics.mean([0.1, 0.4, 0.3]), statistics.stdev([0.1, 0.4, 0.3])
    assert f"| β-VAE (β = 4) | 300,000 | {mean:.3f} ± {sd:.3f} (n=3)" in table
    calls.clear()
    script.collect(tmp_path / "sweep", None, zoo=zoo)
    assert calls == []  # the data keep it


def test_the_figure_breaks_a_line_where_evaluations_are_missing(benchmark_script):
    script = benchmark_script("trajectories_300k")
    points = [(s, {"mig": s / 1e6, "dci_disentanglement": s / 2e6}) for s in (10_000, 20_000, 300_000)]
    steps, migs, dcis = script._with_gaps_broken(points)
    assert steps == [10.0, 20.0, 160.0, 300.0]
    assert migs[:2] == [0.01, 0.02] and np.isnan(migs[2]) and migs[3] == 0.3
    assert np.isnan(dcis[2]) and dcis[3] == 0.15
    assert script._with_gaps_broken(points[:2])[0] == [10.0, 20.0]  # evaluations every 10,000: no break


def test_the_figure_marks_the_first_evaluation_after_a_switch_of_precision(benchmark_script):
    script = benchmark_script("trajectories_300k")
    chains = {10_000: "bf16", 20_000: "bf16", 30_000: "bf16>fp32", 40_000: "bf16>fp32", 50_000: "bf16>fp32>bf16"}
    points = [(s, {"precision": p, "mig": 0.1}) for s, p in chains.items()]
    assert [(s, now) for s, _, now in script.precision_switches(points)] == [(30_000, "fp32"), (50_000, "bf16")]
    assert script.precision_switches(points[:2]) == []
    assert script.precision_switches([(10_000, {"precision": None}), (20_000, {"precision": "fp32"})]) == []


@pytest.mark.usefixtures("one_thread")
def test_trajectories_figure_is_drawn(tmp_path, benchmark_script, monkeypatch):
    pytest.importorskip("matplotlib")
    script = benchmark_script("trajectories_300k")
    monkeypatch.setattr(script, "FIGURE", tmp_path / "t.png")
    rows = [{"run_id": "a", "objective": "beta_tcvae", "seed": 0, "step": s, "mig": 0.1, "dci_disentanglement": 0.2,
             "mig_rotated": 0.2 if s == 20_000 else None, "precision": "bf16" if s == 10_000 else "bf16>fp32"}
            for s in (10_000, 20_000)]
    rows.append({"run_id": "b", "objective": "dip_vae_i", "seed": 0, "step": 10_000, "mig": 0.03,
                 "dci_disentanglement": 0.5, "mig_rotated": None, "precision": "fp32"})
    fig = script.figure(rows)
    assert (tmp_path / "t.png").stat().st_size > 1000
    # one scale for every objective: MIG up to the published band's top (0.3), DCI up to 0.5
    mig_top, dci_top = script.shared_limits(rows)
    assert (mig_top, dci_top) == pytest.approx((1.05 * 0.3, 1.05 * 0.5))
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert len(visible) == 4
    assert sorted(v for ax in visible for v in ax.get_ylim()) == pytest.approx(
        sorted([0, mig_top] * 2 + [0, dci_top] * 2))


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
    assert all(v[2] == [{"name": "keep_checkpoints", "every": 10_000, "folder": "milestones"}] for v in planned.values())
    for file in files:  # every kept step has a checkpoint, and a logged evaluation
        train = load_sweep(str(file)).runs[0].config["train"]
        assert 10_000 % train["checkpoint_every"] == 0 and 10_000 % train["eval_every"] == 0


def test_the_lanes_train_every_campaign_run_the_zoo_lacks_once_in_order_under_its_own_id(tmp_path):
    """A new machine has the zoo but not the folders of the runs it published: the lanes must leave
    those out (they retrained them from step 0 on 2026-11-27) and train the others under the
    campaign's ids, in the sweeps' order, each run in the folder of its campaign sweep."""
    import importlib.util

    from disentangle.sweep.grid import load_sweep

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "campaign300k" / "lane_files.py"
    spec = importlib.util.spec_from_file_location("lane_files", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sweeps = ("zoo_sprites_ref300k", "zoo_sprites_ref300k_more", "zoo_sprites_ref300k_ada_seeds")
    campaign = [(name, r.run_id, r.config["objective"]["name"], r.seed) for name in sweeps for r in load_sweep(name).runs]
    zoo = {"beta_vae-sprites-beta4-cpu300k-ref-s0", "beta_vae-sprites-beta4-cpu300k-ref-s2",
           "info_vae-sprites-lambda1000-gpu300k-ref-s0", "beta_tcvae-sprites-beta6-cpu20k-ref-s1"}  # 20k: not this run
    files = module.lane_files(tmp_path, zoo)
    planned = []
    for file, sweep, resume_in in files:
        assert resume_in is None
        (run,) = load_sweep(str(file)).runs
        planned.append((sweep, run.run_id, run.config["objective"]["name"], run.seed))
    left_out = {("beta_vae", 0), ("beta_vae", 2), ("info_vae", 0)}
    expected = [row for row in campaign if (row[2], row[3]) not in left_out]
    assert sorted(planned) == sorted(expected) and len(planned) == 19 - 3
    assert [row[0] for row in planned] == sorted((row[0] for row in planned), key=sweeps.index)  # sweeps in order
    assert planned[0][2:] == ("beta_vae", 1)
    again = module.lane_files(tmp_path, zoo | {"beta_vae-sprites-beta4-cpu300k-ref-s1"})  # a rerun replaces the files
    assert len(list(tmp_path.glob("*.yaml"))) == len(again) == len(files) - 1


def test_the_lanes_keep_the_precisions_and_runs_asked_for_in_the_campaign_s_order(tmp_path):
    """On a CPU without native bf16 resume.sh asks for the fp32 runs only (bf16 emulated: 7x slower);
    CAMPAIGN_RUNS narrows the lanes to the runs it names, still in the campaign's order."""
    import importlib.util

    from disentangle.sweep.grid import load_sweep

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "campaign300k" / "lane_files.py"
    spec = importlib.util.spec_from_file_location("lane_files", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def planned(**kwargs):
        return [(run.config["objective"]["name"], run.seed, run.config["train"]["precision"])
                for file, *_ in module.lane_files(tmp_path, set(), **kwargs) for run in load_sweep(str(file)).runs]

    fp32 = planned(precisions={"fp32"})
    assert fp32 and all(p == "fp32" for *_, p in fp32)
    assert not {o for o, *_ in fp32} & {"beta_vae", "beta_tcvae"}  # the bf16 sweep waits ...
    assert fp32[:3] == [("factor_vae", 2, "fp32"), ("factor_vae", 1, "fp32"), ("factor_vae", 0, "fp32")]  # its twins
    assert len(fp32) + 6 == len(planned())  # everything else is kept
    # where bf16 is trained, FactorVAE is, and its fp32 twins are not: one run per zoo name
    assert [r for r in planned() if r[0] == "factor_vae"] == [("factor_vae", s, "bf16") for s in (0, 1, 2)]
    assert planned(runs=module.parse_runs("info_vae:0 dip_vae_ii:0 ada_gvae:2,1")) == [
        ("dip_vae_ii", 0, "fp32"), ("info_vae", 0, "fp32"), ("ada_gvae", 1, "fp32"), ("ada_gvae", 2, "fp32")]
    assert planned(runs=module.parse_runs("factor_vae:1"), precisions={"fp32"}) == [("factor_vae", 1, "fp32")]
    assert planned(runs=module.parse_runs("beta_vae:1"), precisions={"fp32"}) == []
    for bad in ("info_vae", "info_vae:", "info_vae:x", ":0"):
        with pytest.raises(ValueError, match="OBJECTIVE:SEED"):
            module.parse_runs(bad)


def test_the_lanes_resume_each_sweep_s_partial_runs_before_they_start_its_others(tmp_path):
    """A session on an fp32-only machine must go on with the DIP-VAE runs an earlier one began, not
    start the Ada runs listed before them; the sweeps keep their order (FactorVAE before the rest)."""
    import importlib.util

    from disentangle.sweep.grid import load_sweep

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "campaign300k" / "lane_files.py"
    spec = importlib.util.spec_from_file_location("lane_files", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    campaign = tmp_path / "campaign"
    runs = {(r.config["objective"]["name"], r.seed): (name, r.run_id)
            for name in ("zoo_sprites_ref300k", "zoo_sprites_ref300k_more") for r in load_sweep(name).runs}
    for key in (("dip_vae_ii", 0), ("factor_vae", 2)):
        sweep, run_id = runs[key]
        (campaign / sweep / "runs" / run_id).mkdir(parents=True)
        (campaign / sweep / "runs" / run_id / "checkpoint.pt").write_bytes(b"")
    (campaign / "zoo_sprites_ref300k_more" / "runs" / runs[("info_vae", 0)][1]).mkdir()  # a folder, no checkpoint

    def order(**kwargs):
        return [f"{run.config['objective']['name']}:{run.seed}"
                for file, *_ in module.lane_files(tmp_path / "lanes", set(), campaign=campaign, **kwargs)
                for run in load_sweep(str(file)).runs]

    every = order()
    assert every[:9] == ["factor_vae:2", "beta_vae:0", "beta_vae:1", "beta_vae:2", "beta_tcvae:0", "beta_tcvae:1",
                         "beta_tcvae:2", "factor_vae:0", "factor_vae:1"]
    assert every[9:12] == ["dip_vae_ii:0", "ada_gvae:0", "ada_ml_vae:0"]  # info_vae has no checkpoint: in its place
    # FactorVAE s2 was begun in bf16: its fp32 twin is not started beside it, the other two are
    assert order(precisions={"fp32"})[:5] == ["factor_vae:1", "factor_vae:0", "dip_vae_ii:0", "ada_gvae:0",
                                              "ada_ml_vae:0"]
    assert len(every) == len(set(every)) == 19  # every model once (the fp32 FactorVAE twins left out)
    names = [f.name for f, *_ in module.lane_files(tmp_path / "lanes", set(), campaign=campaign)]
    assert names == sorted(names) and names[0].startswith("00-zoo_sprites_ref300k-factor_vae-s2")
    # an fp32-only machine may continue the partial bf16 run in fp32; the bf16 runs not begun still wait
    continued = [(load_sweep(str(f)).runs[0].config["objective"]["name"], load_sweep(str(f)).runs[0].seed, p)
                 for f, _, p in module.lane_files(tmp_path / "lanes", set(), campaign=campaign,
                                                   precisions={"fp32"}, continue_in="fp32")]
    assert continued[:4] == [("factor_vae", 2, "fp32"), ("factor_vae", 1, None), ("factor_vae", 0, None),
                             ("dip_vae_ii", 0, None)]
    assert len(continued) == 1 + len(order(precisions={"fp32"}))


def test_a_machine_with_native_bf16_continues_a_begun_fp32_twin_in_bf16(tmp_path):
    """An fp32 FactorVAE twin begun on an AVX2 machine goes on in bf16 (its twin's precision) where
    bf16 is native, under its own id; a partial run without a bf16 twin stays in its precision."""
    import importlib.util

    from disentangle.sweep.grid import load_sweep

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "campaign300k" / "lane_files.py"
    spec = importlib.util.spec_from_file_location("lane_files", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    campaign = tmp_path / "campaign"
    begun = {}
    for sweep, key in (("zoo_sprites_ref300k_factor_fp32", ("factor_vae", 2)), ("zoo_sprites_ref300k_more", ("dip_vae_ii", 0))):
        (run,) = [r for r in load_sweep(sweep).runs if (r.config["objective"]["name"], r.seed) == key]
        (campaign / sweep / "runs" / run.run_id).mkdir(parents=True)
        (campaign / sweep / "runs" / run.run_id / "checkpoint.pt").write_bytes(b"")
        begun[key] = run.run_id

    def plan(**kwargs):
        out = []
        for file, _, resume_in in module.lane_files(tmp_path / "lanes", set(), campaign=campaign,
                                                         precisions={"bf16", "fp32"}, **kwargs):
            (run,) = load_sweep(str(file)).runs
            out.append((run.config["objective"]["name"], run.seed, run.run_id, resume_in))
        return out

    twins = plan(twins_in="bf16")
    ref = {r.seed: r.run_id for r in load_sweep("zoo_sprites_ref300k").runs if r.config["objective"]["name"] == "factor_vae"}
    factor = sorted(row[1:] for row in twins if row[0] == "factor_vae")
    assert factor == [(0, ref[0], None), (1, ref[1], None),  # not begun: the bf16 runs
                      (2, begun[("factor_vae", 2)], "bf16")]  # the fp32 run's id, trained on in bf16
    assert ("dip_vae_ii", 0, begun[("dip_vae_ii", 0)], None) in twins  # fp32 without a bf16 twin: as it is
    assert {row[3] for row in plan()} == {None}  # without --twins-in every run goes on in its own precision
    assert [row[:3] for row in plan()] == [row[:3] for row in twins]


def test_a_machine_without_native_bf16_trains_the_fp32_twins_after_the_rest(tmp_path):
    """On an AVX2 CPU an fp32 FactorVAE step is five to eight times slower than its bf16 twin's on a
    CPU with native bf16, the other fp32 runs about two: --twins-last (resume.sh's default there)
    puts the twins, begun or not, after every other run, the begun one first among them."""
    import importlib.util

    from disentangle.sweep.grid import load_sweep

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "campaign300k" / "lane_files.py"
    spec = importlib.util.spec_from_file_location("lane_files", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    campaign = tmp_path / "campaign"
    for sweep, key in (("zoo_sprites_ref300k_factor_fp32", ("factor_vae", 1)), ("zoo_sprites_ref300k_more", ("info_vae", 0))):
        (run,) = [r for r in load_sweep(sweep).runs if (r.config["objective"]["name"], r.seed) == key]
        (campaign / sweep / "runs" / run.run_id).mkdir(parents=True)
        (campaign / sweep / "runs" / run.run_id / "checkpoint.pt").write_bytes(b"")

    def order(**kwargs):
        return [f"{run.config['objective']['name']}:{run.seed}"
                for file, *_ in module.lane_files(tmp_path / "lanes", set(), campaign=campaign,
                                                  precisions={"fp32"}, **kwargs)
                for run in load_sweep(str(file)).runs]

    first = order()
    assert first[:4] == ["factor_vae:1", "factor_vae:2", "factor_vae:0", "info_vae:0"]
    last = order(twins_last=True)
    assert sorted(last) == sorted(first)  # the same runs, in another order
    assert last[0] == "info_vae:0" and last[-3:] == ["factor_vae:1", "factor_vae:2", "factor_vae:0"]
    assert last[:-3] == [run for run in first if not run.startswith("factor_vae")]


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


def test_the_position_code_diagnosis_recovers_planted_codes(benchmark_script, rng):
    """An axis-aligned linear code, a non-linear one (a fold: |x - 15.5|, and y through a cosine) and a
    collapsed one, each told apart by position_code's columns."""
    script = benchmark_script("position_code")
    n = script.NUM_POINTS
    factors = np.column_stack([rng.integers(0, 3, n), rng.integers(0, 32, n), rng.integers(0, 32, n)])
    names = ["shape", "position_x", "position_y"]
    x, y = factors[:, 1].astype(float), factors[:, 2].astype(float)
    noise = rng.standard_normal((n, 3)) * 0.01
    linear = script.position_code(np.column_stack([x / 10, y / 10, factors[:, 0], noise]), factors, names)
    assert linear["linear_x"] > 0.99 and linear["linear_y"] > 0.99 and linear["knn_x"] > 0.95
    assert (linear["carry_x"], linear["carry_y"], linear["shared"], linear["active"]) == (1, 1, 0, 3)
    assert linear["mig_x"] > 0.8  # 20 bins for 32 positions: at most about log 20 / log 32 = 0.86
    turn = 1.8 * np.pi  # x and y as angles on (most of) a circle: two latents each, read back only non-linearly
    circles = np.column_stack([np.cos(turn * x / 31), np.sin(turn * x / 31), np.cos(turn * y / 31),
                               np.sin(turn * y / 31), noise])
    circle = script.position_code(circles, factors, names)
    assert circle["linear_x"] < 0.8 and circle["knn_x"] > 0.95 and circle["linear_y"] < 0.8 and circle["knn_y"] > 0.95
    assert (circle["carry_x"], circle["carry_y"], circle["shared"], circle["active"]) == (2, 2, 0, 4)
    collapsed = script.position_code(np.column_stack([x / 10, np.zeros((n, 4))]), factors, names)
    assert collapsed["active"] == 1 and collapsed["carry_y"] == 0 and collapsed["knn_y"] < 0.05


def _status():
    """``benchmarks/campaign300k/status.py`` as a module."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "campaign300k" / "status.py"
    spec = importlib.util.spec_from_file_location("campaign_status", path)
    status = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(status)
    return status


def test_the_campaign_status_counts_the_hours_left_from_the_rates_it_has(tmp_path, monkeypatch):
    status = _status()
    run = tmp_path / "run"
    run.mkdir()
    lines = [json.dumps({"step": 100 * i, "steps_per_s": 50.0 if i <= 10 else 10.0 + (i % 2)}) for i in range(1, 41)]
    lines.insert(5, json.dumps({"step": 500, "metrics": {"mig": {"mig": 0.1}}}))  # an evaluation: no rate
    (run / "log.jsonl").write_text("\n".join(lines) + "\n{\"step\": 41")  # a line being written
    step, rate = status.progress(run)
    assert step == 4000 and rate == statistics.median([10.0 + (i % 2) for i in range(21, 41)])  # the last 20 only
    assert status.progress(tmp_path / "absent") == (0, None)
    # the precision column says where a run's latest session trained in another precision than its own
    assert status.session_precision(run, "bf16") == "bf16"  # no execution.jsonl
    (run / "execution.jsonl").write_text(json.dumps({"step": 0, "precision": "bf16"}) + "\n")
    assert status.session_precision(run, "bf16") == "bf16"
    with (run / "execution.jsonl").open("a") as f:
        f.write(json.dumps({"step": 255_041, "precision": "fp32"}) + "\n")
    assert status.session_precision(run, "bf16") == "bf16>fp32"

    def row(objective, precision, state, step, rate):
        return {"objective": objective, "precision": precision, "state": state, "step": step, "steps": 300_000,
                "rate": rate, "source": "log" if rate else "", "seed": 0}

    table = [row("beta_vae", "bf16", "finished", 300_000, 9.0), row("beta_tcvae", "bf16", "running", 100_000, 20.0),
             row("beta_tcvae", "bf16", "not started", 0, None), row("dip_vae_i", "fp32", "not started", 0, None),
             row("lord", "fp32", "not started", 0, None)]
    monkeypatch.setattr(status, "zoo_rates", lambda: {"dip_vae_i": 5.0})
    status.fill_rates(table)
    twins = [dict(row("factor_vae", "bf16", "not started", 0, 10.0), zoo="f-s0"),
             dict(row("factor_vae", "fp32", "running", 150_000, 5.0), zoo="f-s0"),
             dict(row("beta_vae", "bf16", "not started", 0, 10.0), zoo="b-s0")]
    hours = [status.hours_left(r) for r in twins]
    assert status.total_hours(twins) == pytest.approx(min(hours[0], hours[1]) + hours[2])
    assert [(r["rate"], r["source"]) for r in table] == [(9.0, "log"), (20.0, "log"), (20.0, "campaign"), (5.0, "zoo"),
                                                         (None, "")]
    assert [status.hours_left(r) for r in table] == [0.0, 200_000 / 20 / 3600, 300_000 / 20 / 3600,
                                                     300_000 / 5 / 3600, None]
    # a run the zoo holds is published, its folder here finished or not; one it lacks keeps its state
    config = status.load_sweep("zoo_sprites_ref300k").runs[5].config
    assert (config["objective"]["name"], config["seed"]) == ("beta_tcvae", 2)
    cpu_name = status.zoo_name(config, "cpu")
    assert status.run_state("finished", config, {cpu_name}) == "published"
    assert status.run_state("not started", config, {status.zoo_name(config, "gpu")}) == "published"
    assert status.run_state("finished", config, {cpu_name.replace("-s2", "-s1")}) == "finished"
    assert status.run_state("partial", config, set()) == "partial"


def test_the_campaign_status_tells_the_spans_of_machine_and_precision_that_trained_a_run(tmp_path):
    status = _status()
    run = tmp_path / "run"
    run.mkdir()
    # four sessions: two on an AVX2 CPU in fp32 (a restart at 2,000), one in bf16 elsewhere, one back
    sessions = [{"step": 0, "precision": "fp32", "cpu_capability": "AVX2"},
                {"step": 2_000, "precision": "fp32", "cpu_capability": "AVX2"},
                {"step": 5_050, "precision": "bf16", "cpu": "AMD EPYC (family/model 26/2)"},
                {"step": 9_000, "precision": "fp32", "cpu": "AMD EPYC (family/model 23/1)"}]
    (run / "execution.jsonl").write_text("".join(json.dumps(s) + "\n" for s in sessions))
    # the clock: 2 s a step up to 5,000 (fp32), 0.5 s a step to 9,000, 4 s a step after
    def clock(step):
        return 2.0 * min(step, 5_000) + 0.5 * max(0, min(step, 9_000) - 5_000) + 4.0 * max(0, step - 9_000)
    lines = [json.dumps({"step": s, "steps_per_s": 1.0, "wall_time_s": clock(s)}) for s in range(100, 10_001, 100)]
    lines.insert(30, json.dumps({"step": 3_000, "metrics": {"mig": {"mig": 0.1}}}))  # an evaluation: no clock
    (run / "log.jsonl").write_text("\n".join(lines) + "\n{\"step\": 10")
    found = status.spans(run)
    assert [(s["start"], s["end"], s["precision"], s["machine"]) for s in found] == [
        (0, 5_050, "fp32", "CPU AVX2"), (5_050, 9_000, "bf16", "AMD EPYC (family/model 26/2)"),
        (9_000, 10_000, "fp32", "AMD EPYC (family/model 23/1)")]
    # a span's ends are read off the last record at or before them (5,050 -> the record at 5,000)
    assert [s["hours"] for s in found] == pytest.approx(
        [clock(5_000) / 3600, (clock(9_000) - clock(5_000)) / 3600, (clock(10_000) - clock(9_000)) / 3600])
    assert found[2]["rate"] == pytest.approx(1_000 / 4_000)
    assert status.spans(tmp_path / "absent") == []


def test_publishing_takes_out_the_pauses_the_trainer_did_not_see_and_only_those():
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "campaign300k" / "publish.py"
    spec = importlib.util.spec_from_file_location("campaign_publish", path)
    publish = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(publish)
    # 100-step intervals of 6 s; one with an evaluation (70 s); a 2,000 s SIGSTOP the trainer did not
    # record (interval 5), and in the same interval a 3,000 s one it recorded as paused_s (left out of
    # its clock already: taken out again, it would hide the unseen one)
    gaps = [6, 6, 70, 6, 2006, 6, 6, 6, 6]
    records, wall, paused = [], 0.0, 0.0
    for i, gap in enumerate([0, *gaps]):
        wall += gap
        record = {"step": 100 * (i + 1), "steps_per_s": 16.0, "wall_time_s": wall}
        if i == 5:
            paused = 3000.0  # left out of wall_time_s by the trainer
        if paused:
            record["paused_s"] = paused
        records.append(json.dumps(record))
    records.insert(4, json.dumps({"step": 400, "metrics": {"mig": {"mig": 0.1}}}))
    logged, pauses = publish.wall_time(records)
    assert pauses == [2000.0] and logged == wall - 2000.0
    config = {"objective": {"name": "beta_tcvae", "beta": 6.0}, "train": {"steps": 300_000, "precision": "bf16"},
              "model": {"init": "reference"}, "seed": 1}
    text = publish.notes(config, "zoo_sprites_ref300k", logged, pauses)
    assert "configs/sprites/beta_tcvae.yaml" in text and "bf16" in text and "seed 1" in text
    assert f"log.jsonl's {wall:,.0f} s less a 2,000 s SIGSTOP pause" in text
    assert "SIGSTOP" not in publish.notes(config, "zoo_sprites_ref300k", logged, [])
    assert publish.wall_time([]) == (None, [])
    # a bf16 run continued in fp32 from step 255,041 (sweep run --resume-precision fp32) says so
    sessions = [{"step": 0, "precision": "bf16"}, {"step": 120_000, "precision": "bf16"},
                {"step": 255_041, "precision": "fp32"}, {"step": 280_000, "precision": "fp32"}]
    assert publish.precision_spans([json.dumps(s) for s in sessions], 300_000) == [
        ("bf16", 0, 255_041), ("fp32", 255_041, 300_000)]
    text = publish.notes(config, "zoo_sprites_ref300k", logged, [], [("bf16", 0, 255_041), ("fp32", 255_041, 300_000)])
    assert ("in bf16 autocast (its A/B against fp32 held: benchmarks/RESULTS-bf16*.md), for steps 0-255,041, then "
            "in fp32, the reference's precision, for steps 255,041-300,000 (sweep run --resume-precision" in text)
    assert "each resume bit-exact, the switch of precision making it another run" in text
    assert "each session in the precision its machine computes faster; the run's train.precision is bf16)" in text
    # an fp32 FactorVAE twin continued in bf16 on a native-bf16 CPU, then in fp32 again on an AVX2 one
    sessions = [{"step": 0, "precision": "fp32"}, {"step": 27_229, "precision": "bf16"},
                {"step": 120_000, "precision": "bf16"}, {"step": 213_000, "precision": "fp32"}]
    spans = publish.precision_spans([json.dumps(s) for s in sessions], 300_000)
    assert spans == [("fp32", 0, 27_229), ("bf16", 27_229, 213_000), ("fp32", 213_000, 300_000)]
    twin = {"objective": {"name": "factor_vae", "gamma": 30.0}, "train": {"steps": 300_000, "precision": "fp32"},
            "model": {"init": "reference"}, "seed": 2}
    text = publish.notes(twin, "zoo_sprites_ref300k_factor_fp32", logged, [], spans)
    assert ("in fp32, the reference's precision, for steps 0-27,229, then in bf16 autocast (its A/B against fp32 "
            "held: benchmarks/RESULTS-bf16*.md), for steps 27,229-213,000, then in fp32, the reference's precision, "
            "for steps 213,000-300,000 (sweep run --resume-precision: each session in the precision its machine "
            "computes faster; the run's train.precision is fp32)") in text
    assert "the switches of precision making it another run" in text
    # disentanglement_lib's FactorVAE made half as many updates as its steps: the note says so
    assert ("trained 300,000 steps as Locatello et al. state (disentanglement_lib's own FactorVAE stopped at "
            "150,000 updates of each network") in text
    assert "300,000 steps as disentanglement_lib does," in publish.notes(config, "zoo_sprites_ref300k", logged, [])
    # the threads of each session: the lanes' one, and a run left alone on two (CAMPAIGN_THREADS=2)
    sessions = [{"step": 0, "threads": 1}, {"step": 270_411, "threads": 1}, {"step": 272_499, "threads": 2},
                {"step": 275_845, "threads": 1}, {"step": 283_689, "threads": 2}, {"step": 283_689, "threads": 1}]
    threads = publish.thread_spans([json.dumps(s) for s in sessions], 300_000)
    assert threads == [(1, 0, 272_499), (2, 272_499, 275_845), (1, 275_845, 300_000)]
    assert ", on one thread beside another run, and on 2 threads alone for steps 272,499-275,845." in publish.notes(
        config, "zoo_sprites_ref300k", logged, [], threads=threads)
    assert publish.notes(config, "zoo_sprites_ref300k", logged, []).endswith("on one thread beside another run.")
    # sessions in the order they ran, one that trained no step left out (it died at once), whatever
    # the names of the precisions
    sessions = [{"step": 0, "precision": "fp32"}, {"step": 27_229, "precision": "bf16"},
                {"step": 27_229, "precision": "fp32"}]
    assert publish.precision_spans([json.dumps(s) for s in sessions], 300_000) == [("fp32", 0, 300_000)]
    sessions = [{"step": 0, "precision": "bf16"}, {"step": 5_000, "precision": "fp32"},
                {"step": 5_000, "precision": "bf16"}]
    assert publish.precision_spans([json.dumps(s) for s in sessions], 300_000) == [("bf16", 0, 300_000)]
    assert "across sessions, with bit-exact resume," in publish.notes(config, "zoo_sprites_ref300k", logged, [])
    assert publish.notes(config, "zoo_sprites_ref300k", logged, [], [("bf16", 0, 300_000)]) == \
        publish.notes(config, "zoo_sprites_ref300k", logged, [])


def test_the_published_notes_say_from_which_step_denormals_were_flushed():
    import importlib.util
    import json as _json

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "campaign300k" / "publish.py"
    spec = importlib.util.spec_from_file_location("campaign_publish", path)
    publish = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(publish)
    sessions = [_json.dumps({"step": 0, "precision": "fp32"}),
                _json.dumps({"step": 154_620, "precision": "fp32", "flush_denormal": "off"}),
                _json.dumps({"step": 168_930, "precision": "fp32", "flush_denormal": "on"}),
                _json.dumps({"step": 190_000, "precision": "fp32", "flush_denormal": "on"})]
    assert publish.flushed_from(sessions) == 168_930
    assert publish.flushed_from(sessions[:2]) is None
    config = {"train": {"precision": "fp32", "steps": 300_000}, "model": {"init": "reference"}, "seed": 2,
              "objective": {"name": "factor_vae", "gamma": 30.0}, "data": {"name": "sprites"}}
    text = publish.notes(config, "zoo_sprites_ref300k_factor_fp32", 1000.0, [], None, 168_930)
    assert "Denormal floats flushed to zero from step 168,930 (train.flush_denormal" in text
    assert "Denormal" not in publish.notes(config, "zoo_sprites_ref300k_factor_fp32", 1000.0, [], None)


def test_the_submission_size_counts_binary_files_added_changed_and_removed(tmp_path, monkeypatch):
    """save.sh asks submission_size.py before it saves. A diff counts as git prints it with --binary:
    a binary file deflated and in base85 (5 characters for 4 bytes, and a length byte and a newline a
    line) each time a commit adds or removes it, and a *replaced* one twice, old and new (the session
    that saved one FactorVAE pair over the committed one was refused for it); over the budget it exits 1."""
    import importlib.util
    import os
    import subprocess

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "campaign300k" / "submission_size.py"
    spec = importlib.util.spec_from_file_location("submission_size", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.chdir(tmp_path)
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "CAMPAIGN_SESSION_MARKER": str(tmp_path / "no marker")}
    for key, value in env.items():
        monkeypatch.setenv(key, value)

    def commit(message):
        subprocess.run(["git", "add", "-A"], check=True)
        subprocess.run(["git", "commit", "-qm", message, "--allow-empty"], check=True)

    subprocess.run(["git", "init", "-q", "-b", "main"], check=True)
    (tmp_path / "notes.txt").write_text("start\n")
    commit("base")
    base = module.session_base()
    rng = np.random.default_rng(0)
    ckpt = tmp_path / "checkpoint.pt"
    ckpt.write_bytes(rng.bytes(300_000) + b"\0")  # a NUL byte: git takes it as binary
    commit("save 1")
    ckpt.write_bytes(rng.bytes(200_000) + b"\0")
    (tmp_path / "notes.txt").write_text("start\nmore\n")
    commit("save 2")
    ckpt.unlink()
    commit("published")
    diffs = module.diff_bytes(base)
    # added 300,001; replaced: 300,001 old + 200,001 new; removed 200,001; random bytes do not deflate
    written = 300_001 + 300_001 + 200_001 + 200_001
    assert written * 67 / 52 <= diffs < written * 67 / 52 + 5_000
    assert module.pack_bytes(base) > 500_000
    assert module.main(["--budget", "1.5"]) == 0  # 1.23 MiB
    assert module.main(["--budget", "1.5", "--adding", str(400_000)]) == 1
    # a save about to replace a committed checkpoint: both versions count, as in the commit it makes
    old, new = tmp_path / "old.pt", tmp_path / "new.pt"
    old.write_bytes(rng.bytes(150_000) + b"\0")
    assert 150_001 * 67 / 52 <= module.pending_bytes() < 150_001 * 67 / 52 + 2_000  # untracked: git add -A adds it
    commit("save 3")
    base_diffs = module.diff_bytes(base)
    new.write_bytes(rng.bytes(100_000) + b"\0")
    assert 250_002 * 67 / 52 <= module.replacing_bytes(str(old), str(new)) < 250_002 * 67 / 52 + 2_000
    assert 100_001 * 67 / 52 <= module.replacing_bytes(str(tmp_path / "not saved yet.pt"), str(new)) \
        < 100_001 * 67 / 52 + 2_000
    assert module.pending_bytes([str(new)]) == 0
    # a save run again before its commit: the work tree's copy is already the new one, the commit will
    # still hold the committed version and the new one
    old.write_bytes(new.read_bytes())
    assert 250_002 * 67 / 52 <= module.replacing_bytes(str(old), str(new)) < 250_002 * 67 / 52 + 2_000
    assert 250_002 * 67 / 52 <= module.pending_bytes([str(new)]) < 250_002 * 67 / 52 + 2_000
    assert module.pending_bytes([str(old), str(new)]) == 0
    budget = str((base_diffs + 250_002 * 67 / 52 + 20_000) / (1 << 20))
    assert module.main(["--budget", budget, "--replacing", str(old), str(new)]) == 0
    assert module.main(["--budget", budget, "--replacing", str(old), str(new),
                        "--replacing", str(tmp_path / "gone.pt"), str(new)]) == 1  # 0.12 MiB more
    subprocess.run(["git", "checkout", "-q", "--", "old.pt"], check=True)
    old.unlink()
    new.unlink()
    commit("published 3")
    assert module.session_base() == base and os.path.exists(".git")
    # a machine kept from an earlier session: main's reflog goes back to it; the base is where main
    # stood when this session began (the marker's time), not the oldest entry
    monkeypatch.setenv("GIT_COMMITTER_DATE", "@2000000000 +0000")
    (tmp_path / "notes.txt").write_text("next session\n")
    commit("a later session")
    landed = subprocess.run(["git", "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    monkeypatch.setenv("GIT_COMMITTER_DATE", "@2000007200 +0000")
    commit("this session")
    assert module.session_base(start=2_000_003_600) == landed
    assert module.session_base(start=1_000_000_000) == base  # begun before every entry: a fresh checkout
    marker = tmp_path / "marker"
    marker.mkdir()
    os.utime(marker, (2_000_003_600, 2_000_003_600))
    monkeypatch.setenv("CAMPAIGN_SESSION_MARKER", str(marker))
    assert module.session_base() == landed
    monkeypatch.setenv("CAMPAIGN_SESSION_MARKER", str(tmp_path / "absent"))
    assert module.session_base() == base


def test_the_ada_bf16_ab_arms_differ_from_the_zoo_s_runs_in_the_precision_or_seed_only():
    """bf16_ab/ada_fp32.yaml's settings with seed 0 give the zoo's two Ada runs again (the fp32 arm's
    seed 0), and bf16_ab/ada.yaml's runs are those runs with bf16: a pair differs in one thing only."""
    import copy

    import yaml as _yaml

    from disentangle.sweep.grid import load_sweep, sweep_from_dict
    from disentangle.sweep.ids import run_id

    sweeps = Path(__file__).resolve().parents[2] / "configs" / "sweeps"
    zoo = {r.config["objective"]["name"]: r for r in load_sweep("zoo_sprites_ref20k").runs
           if r.config["objective"]["name"] in ("ada_gvae", "ada_ml_vae")}
    fp32 = _yaml.safe_load((sweeps / "bf16_ab" / "ada_fp32.yaml").read_text())
    again = sweep_from_dict(dict(fp32, seeds=[0]), source="ada_fp32", folder=sweeps / "bf16_ab").runs
    assert {r.config["objective"]["name"]: r.run_id for r in again} == {k: r.run_id for k, r in zoo.items()}
    bf16 = load_sweep("bf16_ab/ada").runs
    assert sorted((r.config["objective"]["name"], r.seed) for r in bf16) == [
        (o, s) for o in ("ada_gvae", "ada_ml_vae") for s in (0, 1, 2)]
    fp32_runs = {(r.config["objective"]["name"], r.seed): r for r in load_sweep("bf16_ab/ada_fp32").runs}
    for run in bf16:
        assert run.config["train"]["precision"] == "bf16"
        twin = copy.deepcopy(run.config)
        twin["train"]["precision"] = "fp32"
        key = (run.config["objective"]["name"], run.seed)
        expected = zoo[key[0]].run_id if run.seed == 0 else fp32_runs[key].run_id
        assert run_id(twin) == expected, key


def test_the_published_notes_name_the_machines_that_trained_the_run(tmp_path):
    import importlib.util
    import json as _json

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "campaign300k" / "publish.py"
    spec = importlib.util.spec_from_file_location("campaign_publish", path)
    publish = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(publish)
    run = tmp_path / "run"
    run.mkdir()
    (run / "execution.jsonl").write_text("".join(_json.dumps(r) + "\n" for r in [
        {"step": 0, "precision": "fp32", "cpu_capability": "AVX2"},
        {"step": 200, "precision": "fp32", "cpu": "AMD EPYC (family/model 23/1)"},
        {"step": 300, "precision": "fp32", "cpu": "AMD EPYC (family/model 23/1)"}]))
    (run / "log.jsonl").write_text("".join(_json.dumps({"step": s, "wall_time_s": t}) + "\n"
                                           for s, t in [(100, 360.0), (200, 720.0), (300, 1080.0), (400, 1800.0)]))
    spans = publish.machine_spans(run)
    assert publish.machines_note(spans) == (
        " Trained on: steps 0-200 on CPU AVX2 (0.20 h, 0.3 steps/s); steps 200-400 on AMD EPYC (family/model 23/1) "
        "(0.30 h, 0.2 steps/s) (execution.jsonl and log.jsonl's clock).")
    config = {"train": {"precision": "fp32", "steps": 400}, "model": {"init": "reference"}, "seed": 0,
              "objective": {"name": "dip_vae_ii", "lambda_od": 10.0}, "data": {"name": "sprites"}}
    assert publish.notes(config, "zoo_sprites_ref300k_more", 1800.0, [], machine_spans=spans).endswith(
        publish.machines_note(spans))
    assert publish.machines_note([]) == ""


def test_publishing_both_finished_twins_publishes_one_and_says_why_the_other_is_left_out(
        tmp_path, monkeypatch, capsys):
    """A bf16 run and its fp32 twin of one seed share a zoo name: the first found is published, the
    second is named and left out (before, the zoo refused it as other weights and the script stopped)."""
    import importlib.util
    import json as _json

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "campaign300k" / "publish.py"
    spec = importlib.util.spec_from_file_location("campaign_publish", path)
    publish = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(publish)
    runs = []
    for sweep, precision, run_id in [("zoo_sprites_ref300k", "bf16", "aaaa"),
                                     ("zoo_sprites_ref300k_factor_fp32", "fp32", "bbbb")]:
        run = tmp_path / sweep / "runs" / run_id
        run.mkdir(parents=True)
        config = {"train": {"precision": precision, "steps": 300_000}, "model": {"init": "reference"}, "seed": 2,
                  "objective": {"name": "factor_vae", "gamma": 30.0}, "data": {"name": "sprites"}}
        (run / "config.yaml").write_text(yaml.safe_dump(config))
        (run / "log.jsonl").write_text(_json.dumps({"step": 300_000, "wall_time_s": 100.0}) + "\n")
        (run / "metrics.json").write_text("{}")
        runs.append((sweep, run))
    monkeypatch.setattr(publish, "finished_runs", lambda campaign: runs)
    monkeypatch.setattr(publish, "shipped_names", lambda: set())
    assert publish.main([str(tmp_path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.count("would publish") == 1 and "would publish aaaa as factor_vae-sprites-gamma30-cpu300k-ref-s2" in out
    assert "left out bbbb: its twin aaaa is to be published as factor_vae-sprites-gamma30-cpu300k-ref-s2" in out
