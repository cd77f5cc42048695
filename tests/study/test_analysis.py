"""The study analyses: planted effects recovered, CSVs checked against independent computations,
figures read back, the disentanglement_lib reader, and the errors."""
from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import rankdata

from disentangle import ConfigError, DisentangleError
from disentangle.study import analyze, infer_design, read_table, variance_explained
from disentangle.study import report as report_module
from disentangle.study.__main__ import main as study_main

METHODS = {"beta_vae": ("objective.beta", [1, 2, 4, 8]), "factor_vae": ("objective.gamma", [10, 20, 40, 80]),
           "dip_vae_i": ("objective.lambda_od", [1, 5, 10, 50])}
METHOD_EFFECT = {"beta_vae": -1.0, "factor_vae": 0.0, "dip_vae_i": 1.0}
COLUMNS = ["run_id", "status", "seed", "objective.name", "objective.beta", "objective.gamma", "objective.lambda_od",
           "mig.mig", "dci.disentanglement", "sap_score.sap", "unsupervised_scores.gaussian_total_correlation"]
SEEDS = 40
# mig.mig = method effect (population variance 2/3 over three equal-sized methods) + N(0, 1) noise:
PLANTED_METHOD_SHARE = (2 / 3) / (2 / 3 + 1.0)


def write_results(path: Path, seeds: int = SEEDS, rng_seed: int = 0, extra_rows: list[dict] | None = None,
                  columns: list[str] = COLUMNS) -> list[dict]:
    """A synthetic results.csv in the sweeps format with planted effects:

    * ``mig.mig``: depends only on the method (+ unit Gaussian noise);
    * ``dci.disentanglement = exp(3 · mig)``: a monotone function of MIG (rank correlation 1);
    * ``sap_score.sap``: pure noise (rank correlation ≈ 0 with everything);
    * ``unsupervised_scores.gaussian_total_correlation = −mig``: rank correlation −1.
    """
    rng = np.random.default_rng(rng_seed)
    rows = []
    for method, (key, strengths) in METHODS.items():
        for strength in strengths:
            for seed in range(seeds):
                mig = METHOD_EFFECT[method] + rng.normal()
                rows.append({"run_id": f"{method}-{strength}-{seed}", "status": "finished", "seed": seed,
                             "objective.name": method, key: strength, "mig.mig": mig,
                             "dci.disentanglement": math.exp(3 * mig), "sap_score.sap": rng.normal(),
                             "unsupervised_scores.gaussian_total_correlation": -mig})
    rows += extra_rows or []
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return rows


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def independent_spearman(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.corrcoef(rankdata(a), rankdata(b))[0, 1])


def r_squared(y: np.ndarray, labels: list[str]) -> float:
    """R² of a least-squares fit of y on one indicator column per label (an independent ANOVA)."""
    levels = sorted(set(labels))
    x = np.array([[lab == level for level in levels] for lab in labels], dtype=np.float64)
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    return 1.0 - np.sum((y - x @ coef) ** 2) / np.sum((y - y.mean()) ** 2)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    folder = tmp_path_factory.mktemp("study")
    rows = write_results(folder / "results.csv")
    result = analyze(folder / "results.csv", folder / "report", progress=False)
    return folder, rows, result


def test_planted_effects_are_recovered(study):
    _, _, result = study
    shares = {r["score"]: r for r in result.variance_explained}
    mig = shares["mig.mig"]
    assert mig["method"] == pytest.approx(PLANTED_METHOD_SHARE, abs=0.05)
    assert mig["strength"] < 0.05  # no strength effect planted
    noise = shares["sap_score.sap"]
    assert noise["method"] < 0.03 and noise["residual"] > 0.9
    for r in result.variance_explained:
        assert r["method"] + r["strength"] + r["residual"] == pytest.approx(1.0, abs=1e-12)
        assert r["n_runs"] == 3 * 4 * SEEDS

    m = result.rank_correlation["all"]
    rho = dict(zip(m.rows, m.values))
    col = {c: j for j, c in enumerate(m.columns)}
    assert rho["mig.mig"][col["dci.disentanglement"]] == pytest.approx(1.0, abs=1e-12)  # monotone pair
    assert abs(rho["mig.mig"][col["sap_score.sap"]]) < 0.15  # noise
    assert abs(rho["dci.disentanglement"][col["sap_score.sap"]]) < 0.15
    assert (m.counts == 3 * 4 * SEEDS).all()
    u = result.unsupervised_vs_supervised["all"]
    assert u.rows == ["unsupervised_scores.gaussian_total_correlation"]
    assert u.values[0, u.columns.index("mig.mig")] == pytest.approx(-1.0, abs=1e-12)


def test_design_inferred_from_results_csv(study):
    _, _, result = study
    d = result.design
    assert d.method_column == "objective.name" and d.seed_column == "seed"
    assert d.supervised == ["mig.mig", "dci.disentanglement", "sap_score.sap"]
    assert d.unsupervised == ["unsupervised_scores.gaussian_total_correlation"]
    assert d.strength_name[("all", "factor_vae")] == "objective.gamma"
    i = d.table.rows.index(next(r for r in d.table.rows if r["run_id"] == "factor_vae-40-3"))
    assert d.configuration[i] == "gamma=40" and d.strength[i] == 40.0
    assert "strength of dip_vae_i: objective.lambda_od" in d.inferred


def test_csvs_match_independent_computations(study):
    folder, rows, _ = study
    report = folder / "report"
    values = {c: np.array([r[c] for r in rows], dtype=float) for c in ("mig.mig", "dci.disentanglement", "sap_score.sap",
                                                                         "unsupervised_scores.gaussian_total_correlation")}
    corr = read_csv(report / "metric_rank_correlation.csv")
    assert [r["score"] for r in corr] == ["mig.mig", "dci.disentanglement", "sap_score.sap"]
    for r in corr:
        for other in ("mig.mig", "dci.disentanglement", "sap_score.sap"):
            assert float(r[other]) == pytest.approx(independent_spearman(values[r["score"]], values[other]), abs=1e-12)
    unsup = read_csv(report / "unsupervised_vs_supervised.csv")
    assert float(unsup[0]["sap_score.sap"]) == pytest.approx(
        independent_spearman(values["unsupervised_scores.gaussian_total_correlation"], values["sap_score.sap"]), abs=1e-12)

    methods = [r["objective.name"] for r in rows]
    cells = [f"{r['objective.name']}/{r.get('objective.beta', r.get('objective.gamma', r.get('objective.lambda_od')))}"
             for r in rows]
    variance = read_csv(report / "variance_explained.csv")
    assert list(variance[0])[:4] == ["score", "method", "strength", "residual"]
    for r in variance:
        y = values[r["score"]] if r["score"] in values else None
        if y is None:
            continue
        method_r2 = r_squared(y, methods)
        assert float(r["method"]) == pytest.approx(method_r2, abs=1e-9)
        assert float(r["strength"]) == pytest.approx(r_squared(y, cells) - method_r2, abs=1e-9)
        assert float(r["residual"]) == pytest.approx(1 - r_squared(y, cells), abs=1e-9)

    summary = read_csv(report / "summary.csv")
    assert len(summary) == 3 * 4 * 4  # methods × strengths × scores
    for r in summary:
        key = METHODS[r["method"]][0]
        strength = float(r["strength"])
        sel = [x for x in rows if x["objective.name"] == r["method"] and float(x[key]) == strength]
        v = np.array([x[r["score"]] for x in sel], dtype=float)
        assert int(r["n_runs"]) == SEEDS
        assert float(r["median"]) == pytest.approx(np.median(v), abs=1e-12)
        assert float(r["q25"]) == pytest.approx(np.quantile(v, 0.25), abs=1e-12)
        assert float(r["q75"]) == pytest.approx(np.quantile(v, 0.75), abs=1e-12)


def test_report_reads_the_numbers(study):
    folder, _, result = study
    text = (folder / "report" / "report.md").read_text()
    assert f"**{3 * 4 * SEEDS} runs**" in text
    assert "Strong agreement (ρ ≥ 0.8): MIG and DCI disentanglement (1.00)" in text
    assert "MIG is best tracked by Gaussian TC (ρ = -1.00" in text
    for name in ("metric_rank_correlation.png", "variance_explained.png", "summary.csv", "variance_explained.csv"):
        assert f"({name})" in text
    # only effects that beat chance are read as findings: MIG's planted method effect, not SAP's noise
    assert "The method explains more than chance for MIG (" in text
    assert "For the other scores (SAP) neither share beats chance" in text
    assert "seed matters more" not in text
    assert text == result.report


def test_figures_are_written_and_not_blank(study):
    pytest.importorskip("matplotlib")
    from PIL import Image

    folder, _, _ = study
    for name in ("metric_rank_correlation.png", "unsupervised_vs_supervised.png", "variance_explained.png",
                 "scores_by_method.png", "score_vs_strength.png"):
        with Image.open(folder / "report" / name) as im:
            assert im.format == "PNG"
            width, height = im.size
            assert width >= 600 and height >= 300
            rgb = np.asarray(im.convert("RGB"), dtype=np.uint32)
        pixels = rgb.astype(np.float64)
        assert pixels.std() > 10  # not a blank canvas
        packed = (rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]
        assert len(np.unique(packed)) > 50  # text, colours and shading
        assert (pixels < 128).mean() > 0.002  # some dark ink (labels, lines)


def test_without_matplotlib_csvs_and_report_are_still_written(tmp_path, monkeypatch):
    write_results(tmp_path / "results.csv", seeds=3)
    monkeypatch.setattr("disentangle.study.figures.matplotlib_available", lambda: False)
    analyze(tmp_path / "results.csv", tmp_path / "report", progress=False)
    files = {p.name for p in (tmp_path / "report").iterdir()}
    assert not any(name.endswith(".png") for name in files)
    assert {"summary.csv", "variance_explained.csv", "metric_rank_correlation.csv", "report.md"} <= files
    assert report_module.PLOTS_HINT in (tmp_path / "report" / "report.md").read_text()
    assert report_module.PLOTS_HINT == 'pip install "disentangle-torch[plots]"'


def test_rerun_replaces_the_report(tmp_path):
    write_results(tmp_path / "results.csv", seeds=3)
    analyze(tmp_path / "results.csv", tmp_path / "report", figures=False, progress=False)
    first = (tmp_path / "report" / "summary.csv").read_text()
    analyze(tmp_path / "results.csv", tmp_path / "report", figures=False, progress=False)
    assert (tmp_path / "report" / "summary.csv").read_text() == first
    assert not [p for p in (tmp_path / "report").iterdir() if p.name.startswith(".")]  # no temporary files left


def test_variance_explained_hand_computed():
    # method a: settings x (1, 3) and y (5, 7); method b: setting z (10, 12)
    y = np.array([1, 3, 5, 7, 10, 12], dtype=float)
    s = variance_explained(y, ["a", "a", "a", "a", "b", "b"], ["x", "x", "y", "y", "z", "z"])
    grand = y.mean()
    ss_total = np.sum((y - grand) ** 2)
    ss_method = 4 * (4 - grand) ** 2 + 2 * (11 - grand) ** 2
    ss_strength = 2 * (2 - 4) ** 2 + 2 * (6 - 4) ** 2
    ss_residual = 6 * 1.0
    assert ss_method + ss_strength + ss_residual == pytest.approx(ss_total)
    assert (s.method, s.strength, s.residual) == pytest.approx((ss_method / ss_total, ss_strength / ss_total, ss_residual / ss_total))
    assert (s.n_runs, s.n_methods, s.n_settings) == (6, 2, 3)


def test_several_datasets_are_analysed_separately(tmp_path):
    rows = write_results(tmp_path / "a.csv", seeds=4, rng_seed=1)
    rows_b = write_results(tmp_path / "b.csv", seeds=4, rng_seed=2)
    for r in rows:
        r["data.name"] = "dsprites"
    for r in rows_b:
        r["data.name"] = "shapes3d"
        r["run_id"] += "-b"
    with open(tmp_path / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, [*COLUMNS, "data.name"], extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows + rows_b)
    result = analyze(tmp_path / "results.csv", tmp_path / "report", figures=False, progress=False)
    assert set(result.rank_correlation) == {"dsprites", "shapes3d"}
    for dataset, source in (("dsprites", rows), ("shapes3d", rows_b)):
        a = np.array([r["mig.mig"] for r in source])
        b = np.array([r["sap_score.sap"] for r in source])
        m = result.rank_correlation[dataset]
        assert m.values[m.rows.index("mig.mig"), m.columns.index("sap_score.sap")] == pytest.approx(independent_spearman(a, b))
        assert (m.counts == len(source)).all()
    variance = read_csv(tmp_path / "report" / "variance_explained.csv")
    assert list(variance[0])[:5] == ["dataset", "score", "method", "strength", "residual"]
    assert {r["dataset"] for r in variance} == {"dsprites", "shapes3d"}


# ---------------------------------------------------------------------------------------------- errors


def test_no_method_column_is_a_clear_error_and_nothing_is_created(tmp_path, capsys):
    columns = [c for c in COLUMNS if c != "objective.name"]
    write_results(tmp_path / "results.csv", seeds=2, columns=columns)
    with pytest.raises(DisentangleError, match="no method column 'objective.name'.*--method-column"):
        analyze(tmp_path / "results.csv", tmp_path / "report", progress=False)
    assert study_main([str(tmp_path / "results.csv"), "--out", str(tmp_path / "report"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err
    assert not (tmp_path / "report").exists()


def test_method_filled_from_run_folders_of_a_sweep(tmp_path):
    columns = [c for c in COLUMNS if c != "objective.name"]
    rows = write_results(tmp_path / "results.csv", seeds=2, columns=columns)
    for r in rows:
        run = tmp_path / "runs" / r["run_id"]
        run.mkdir(parents=True)
        (run / "config.yaml").write_text(f"seed: {r['seed']}\ndata: {{name: sprites}}\nobjective: {{name: {r['objective.name']}}}\n")
    table = read_table(tmp_path)
    assert [r["objective.name"] for r in table.rows] == [r["objective.name"] for r in rows]
    assert any("read from the run folders' config.yaml" in n for n in table.notes)


def test_single_seed_skips_variance_and_says_so(tmp_path):
    write_results(tmp_path / "results.csv", seeds=1)
    result = analyze(tmp_path / "results.csv", tmp_path / "report", figures=False, progress=False)
    assert "variance_explained" in result.skipped and "single seed" in result.skipped["variance_explained"]
    assert not (tmp_path / "report" / "variance_explained.csv").exists()
    assert "*Skipped: the study has a single seed" in (tmp_path / "report" / "report.md").read_text()
    assert result.rank_correlation  # the other analyses still run


def test_missing_metrics_is_a_clear_error(tmp_path):
    columns = [c for c in COLUMNS if "." not in c or c.startswith("objective.")]
    write_results(tmp_path / "results.csv", seeds=2, columns=columns)
    with pytest.raises(DisentangleError, match="has no scores.*Evaluate the runs first"):
        analyze(tmp_path / "results.csv", tmp_path / "report", progress=False)
    assert not (tmp_path / "report").exists()


def test_unknown_score_name_suggests_the_closest(tmp_path):
    write_results(tmp_path / "results.csv", seeds=2)
    with pytest.raises(ConfigError, match="Did you mean 'mig.mig'"):
        analyze(tmp_path / "results.csv", scores=["mig.mgi"], progress=False)


def test_one_supervised_score_skips_the_agreement_analysis(tmp_path):
    write_results(tmp_path / "results.csv", seeds=2)
    result = analyze(tmp_path / "results.csv", scores=["mig.mig"], progress=False)
    assert "metric_rank_correlation" in result.skipped and not result.rank_correlation


def test_missing_input_and_unfinished_rows(tmp_path):
    with pytest.raises(DisentangleError, match="does not exist"):
        read_table(tmp_path / "nope.csv")
    write_results(tmp_path / "results.csv", seeds=2, extra_rows=[
        {"run_id": "x", "status": "failed", "seed": 0, "objective.name": "beta_vae", "objective.beta": 1}])
    table = read_table(tmp_path / "results.csv")
    assert "x" not in [r["run_id"] for r in table.rows]
    assert any("status failed" in n for n in table.notes)


# ------------------------------------------------------------------------------- disentanglement_lib


def _dlib_rows() -> list[dict]:
    """Rows as dlib_aggregate_results gathers them: one per (model, postprocessing, metric) evaluation."""
    models = [("beta_vae", "vae.beta", 1.0), ("beta_vae", "vae.beta", 4.0), ("beta_tc_vae", "beta_tc_vae.beta", 6.0),
              ("annealed_vae", "annealed_vae.c_max", 25.0)]
    rows = []
    for number, (name, key, strength) in enumerate(models * 2):  # two seeds each
        seed = number // len(models)
        train = {"train_config.model.name": f"'{name}'", f"train_config.{key}": repr(strength),
                 "train_config.model.random_seed": str(seed), "train_config.dataset.name": "'dsprites_full'",
                 "train_config.encoder.num_latent": "10", "train_results.uuid": f"uuid-{number}"}
        if name == "annealed_vae":
            train["train_config.annealed_vae.gamma"] = "1000"
        for post in ("mean", "sampled"):
            offset = 0.0 if post == "mean" else 0.5  # sampled-representation values must not leak in
            for fn, results in (("@mig", {"evaluation_results.discrete_mig": 0.1 * number + offset}),
                                ("@sap_score", {"evaluation_results.SAP_score": 0.01 * number + offset}),
                                ("@beta_vae_sklearn", {"evaluation_results.train_accuracy": 0.9,
                                                       "evaluation_results.eval_accuracy": 0.5 + 0.05 * number + offset}),
                                ("@unsupervised_metrics", {"evaluation_results.gaussian_total_correlation": 1.0 - 0.1 * number + offset}),
                                ("@downstream_task", {"evaluation_results.10:mean_test_accuracy": 0.3 + offset,
                                                      "evaluation_config.predictor.predictor_fn": "@logistic_regression_cv"})):
                row = {**train, "postprocess_config.postprocess.postprocess_fn": f"@{post}_representation",
                       "evaluation_config.evaluation.evaluation_fn": fn, "evaluation_results.elapsed_time": 3.2,
                       "evaluation_results.uuid": "e", "path": f"output/{number}/metrics/{post}/{fn[1:]}/results/aggregate/evaluation.json"}
                row.update(results)
                rows.append(row)
    return rows


def write_dlib_json(path: Path, rows: list[dict]) -> None:
    """The layout of pandas DataFrame.to_json (orient="columns"): {column: {row_index: value}}, missing as null."""
    columns = sorted({c for r in rows for c in r})
    path.write_text(json.dumps({c: {str(i): r.get(c) for i, r in enumerate(rows)} for c in columns}))


def test_dlib_aggregated_json_is_read_into_the_same_table(tmp_path):
    write_dlib_json(tmp_path / "results.json", _dlib_rows())
    table = read_table(tmp_path / "results.json")
    assert len(table) == 8
    by_id = {r["run_id"]: r for r in table.rows}
    r5 = by_id["uuid-5"]  # second seed of the first beta_vae model with beta 4
    assert r5["objective.name"] == "beta_vae" and float(r5["objective.beta"]) == 4.0 and r5["seed"] == "1"
    assert r5["data.name"] == "dsprites"
    assert r5["mig.mig"] == pytest.approx(0.5) and r5["sap_score.sap"] == pytest.approx(0.05)
    assert r5["beta_vae_score.eval_accuracy"] == pytest.approx(0.75)
    assert r5["downstream_task.lr_10:mean_test_accuracy"] == pytest.approx(0.3)
    assert by_id["uuid-2"]["objective.name"] == "beta_tcvae"
    assert by_id["uuid-3"]["objective.c_max"] == "25.0"
    assert "mig.elapsed_time" not in table.columns and "mig.uuid" not in table.columns
    assert "train_config.encoder.num_latent" not in table.columns  # constant keys are dropped, as in results.csv

    design = infer_design(table)
    assert design.strength_name[("dsprites", "beta_vae")] == "objective.beta"
    assert set(design.unsupervised) == {"unsupervised_scores.gaussian_total_correlation"}

    sampled = read_table(tmp_path / "results.json", postprocess="sampled_representation")
    assert {r["run_id"]: r for r in sampled.rows}["uuid-5"]["mig.mig"] == pytest.approx(1.0)


def test_dlib_json_end_to_end_from_the_command_line(tmp_path):
    write_dlib_json(tmp_path / "results.json", _dlib_rows())
    assert study_main([str(tmp_path / "results.json"), "--out", str(tmp_path / "report"), "--no-figures", "--no-progress"]) == 0
    corr = read_csv(tmp_path / "report" / "metric_rank_correlation.csv")
    # mig, sap and the BetaVAE score all increase with the model number: identical rankings
    assert {r["score"]: float(r["sap_score.sap"]) for r in corr}["mig.mig"] == pytest.approx(1.0)


def test_dlib_json_errors(tmp_path):
    (tmp_path / "bad.json").write_text(json.dumps({"a": 1}))
    with pytest.raises(DisentangleError, match="dlib_aggregate_results"):
        read_table(tmp_path / "bad.json")
    write_dlib_json(tmp_path / "results.json", _dlib_rows())
    with pytest.raises(ConfigError, match="mean_representation, sampled_representation"):
        read_table(tmp_path / "results.json", postprocess="median_representation")


def test_label_columns_do_not_split_settings(tmp_path):
    """Non-config columns such as the sweep's dlib_model_number (one per run) are labels, not settings."""
    rows = write_results(tmp_path / "results.csv", seeds=3)
    for number, r in enumerate(rows):
        r["dlib_model_number"] = number
    with open(tmp_path / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, [*COLUMNS[:7], "dlib_model_number", *COLUMNS[7:]], extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    design = infer_design(read_table(tmp_path / "results.csv"))
    assert len(set(zip(design.methods, design.configuration))) == 3 * 4


def test_two_keys_varying_within_a_method_form_categorical_settings(tmp_path):
    rows = write_results(tmp_path / "results.csv", seeds=3)
    for r in rows:
        r["train.steps"] = 1000 if r["seed"] % 2 == 0 and r["objective.name"] == "beta_vae" else 2000
    with open(tmp_path / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, [*COLUMNS, "train.steps"], extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    result = analyze(tmp_path / "results.csv", tmp_path / "report", progress=False)
    d = result.design
    labels = {c for m, c in zip(d.methods, d.configuration) if m == "beta_vae"}
    assert labels == {f"beta={b}, train.steps={s}" for b in (1, 2, 4, 8) for s in (1000, 2000)}
    assert np.isnan(d.strength[[m == "beta_vae" for m in d.methods]]).all()  # no single numeric strength
    assert any("also varying within beta_vae" in line and "train.steps" in line for line in d.inferred)
    if "score_vs_strength.png" in result.files:
        assert result.files["score_vs_strength.png"].stat().st_size > 10_000
