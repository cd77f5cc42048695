"""The variance shares (η²) against chance: expected shares under pure noise, F-test p-values,
Holm's correction, the figure's chance levels and a report that reads only effects beating chance."""
from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import f as f_distribution

from disentangle.study import analyze, variance_explained
from disentangle.study import statistics as st


def _design(methods: int, strengths: int, seeds: int) -> tuple[list[str], list[str]]:
    cells = [(f"m{m}", f"s{s}") for m in range(methods) for s in range(strengths) for _ in range(seeds)]
    return [m for m, _ in cells], [s for _, s in cells]


def test_chance_levels_of_the_issue_design():
    # 3 methods x 2 strengths x 2 seeds: df 2, 3, 6 of 11
    assert st.chance_shares(12, 3, 6) == pytest.approx((2 / 11, 3 / 11, 6 / 11))
    s = variance_explained(np.random.default_rng(0).normal(size=12), *_design(3, 2, 2))
    assert (s.df_method, s.df_strength, s.df_residual) == (2, 3, 6)
    assert (s.chance_method, s.chance_strength, s.chance_residual) == pytest.approx((2 / 11, 3 / 11, 6 / 11))


@pytest.mark.parametrize("shape", [(3, 2, 2), (2, 3, 4)])
def test_pure_noise_gives_the_chance_levels_and_uniform_p_values(shape):
    """Monte Carlo: the mean shares of pure noise are the chance levels; p < 0.05 about 5 % of the time."""
    methods, settings = _design(*shape)
    rng = np.random.default_rng(1)
    sims = [variance_explained(rng.normal(size=len(methods)), methods, settings) for _ in range(4000)]
    mean = np.mean([(s.method, s.strength, s.residual) for s in sims], axis=0)
    np.testing.assert_allclose(mean, (sims[0].chance_method, sims[0].chance_strength, sims[0].chance_residual), atol=0.01)
    for key in ("p_method", "p_strength"):
        rejected = np.mean([getattr(s, key) < 0.05 for s in sims])
        assert rejected == pytest.approx(0.05, abs=0.015)


def _rss(y: np.ndarray, labels: list[str]) -> float:
    levels = sorted(set(labels))
    x = np.array([[lab == level for level in levels] for lab in labels], dtype=np.float64)
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    return float(np.sum((y - x @ coef) ** 2))


def test_f_tests_match_a_regression_comparison():
    """F of nested least-squares models: grand mean < method means < setting means (unbalanced design)."""
    rng = np.random.default_rng(2)
    methods, settings = _design(3, 3, 3)
    methods, settings = methods[:-2], settings[:-2]  # unbalanced: the last setting has one run
    y = rng.normal(size=len(methods)) + np.array([0.5 * int(m[1:]) for m in methods])
    s = variance_explained(y, methods, settings)
    cells = [f"{m}/{c}" for m, c in zip(methods, settings)]
    rss0, rss_m, rss_s = float(np.sum((y - y.mean()) ** 2)), _rss(y, methods), _rss(y, cells)
    df_m, df_s, df_r = 2, 9 - 3, len(y) - 9
    assert (s.df_method, s.df_strength, s.df_residual) == (df_m, df_s, df_r)
    f_method = ((rss0 - rss_m) / df_m) / (rss_s / df_r)
    f_strength = ((rss_m - rss_s) / df_s) / (rss_s / df_r)
    assert s.p_method == pytest.approx(f_distribution.sf(f_method, df_m, df_r), rel=1e-9)
    assert s.p_strength == pytest.approx(f_distribution.sf(f_strength, df_s, df_r), rel=1e-9)
    assert st.f_test(0.5, 0, 0.5, 3) != st.f_test(0.5, 0, 0.5, 3)  # NaN: nothing to test
    assert st.f_test(0.5, 2, 0.0, 3) == 0.0


def test_holm_hand_computed():
    # sorted 0.01, 0.02, 0.04 (k = 3): 0.03, 0.04, 0.04 (monotone); NaN stays NaN and is not counted
    np.testing.assert_allclose(st.holm([0.04, np.nan, 0.01, 0.02]), [0.04, np.nan, 0.03, 0.04])
    np.testing.assert_allclose(st.holm([0.5, 0.9]), [1.0, 1.0])


def test_detectable_share():
    # 3 x 2 x 2: F_crit(2, 6) at 5 %
    critical = f_distribution.isf(0.05, 2, 6)
    assert st.detectable_share(2, 6) == pytest.approx(critical * 2 / (6 + critical * 2))
    assert st.detectable_share(2, 6) > 0.6  # a method effect must explain over 60 % to be seen
    assert st.detectable_share(2, 600) < 0.02


# --------------------------------------------------------------------------------------- the report

SCORES = ["mig.mig", "dci.disentanglement", "sap_score.sap", "unsupervised_scores.gaussian_total_correlation"]


def _write(path: Path, seeds: int, method_effect: dict[str, float], rng_seed: int) -> None:
    """3 methods x 2 strengths x ``seeds``; every score N(0, 1) noise, mig.mig plus the method's effect."""
    rng = np.random.default_rng(rng_seed)
    rows = []
    for method, key in (("beta_vae", "objective.beta"), ("factor_vae", "objective.gamma"), ("beta_tcvae", "objective.beta")):
        for strength in (1, 8):
            for seed in range(seeds):
                row = {"run_id": f"{method}-{strength}-{seed}", "status": "finished", "seed": seed,
                       "objective.name": method, "objective.beta": "", "objective.gamma": ""}
                row[key] = strength
                row.update({score: rng.normal() for score in SCORES})
                row["mig.mig"] += method_effect.get(method, 0.0)
                rows.append(row)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _variance_section(text: str) -> str:
    return text[text.index("## How much does the seed matter?"):text.index("## Scores by method")]


def test_planted_method_effect_is_found(tmp_path):
    _write(tmp_path / "results.csv", seeds=5, method_effect={"beta_vae": -3.0, "beta_tcvae": 3.0}, rng_seed=0)
    result = analyze(tmp_path / "results.csv", tmp_path / "report", figures=False, progress=False)
    rows = {r["score"]: r for r in result.variance_explained}
    mig = rows["mig.mig"]
    assert mig["method"] > 0.8 and mig["method_p"] < 1e-6 and mig["method_p_holm"] < 1e-5
    assert mig["method_chance"] == pytest.approx(2 / 29) and mig["strength_chance"] == pytest.approx(3 / 29)
    for score in SCORES[1:]:
        assert rows[score]["method_p_holm"] > 0.05 and rows[score]["strength_p_holm"] > 0.05
    section = _variance_section(result.report)
    assert "The method explains more than chance for MIG (" in section
    assert "DCI disentanglement" not in section.split("The method explains more than chance for")[1].split(".")[0]
    assert "strength within the method explains more than chance" not in section
    assert "| MIG | **" in section  # bold: beats chance
    with open(tmp_path / "report" / "variance_explained.csv", newline="") as f:
        header = next(csv.reader(f))
    assert header[:7] == ["score", "method", "strength", "residual", "n_runs", "n_methods", "n_settings"]
    assert {"method_chance", "strength_chance", "residual_chance", "method_p", "strength_p", "method_p_holm",
            "strength_p_holm"} <= set(header)


@pytest.mark.parametrize("rng_seed", [0, 1, 2])
def test_pure_noise_in_the_issue_design_claims_nothing(tmp_path, rng_seed):
    """3 methods x 2 strengths x 2 seeds of pure noise: no finding, and the design is said to be too small."""
    _write(tmp_path / "results.csv", seeds=2, method_effect={}, rng_seed=rng_seed)
    result = analyze(tmp_path / "results.csv", tmp_path / "report", figures=False, progress=False)
    section = _variance_section(result.report)
    assert "explains more than chance" not in section
    assert not re.search(r"\| \*\*\d", section)  # no share in bold
    assert "seed matters more" not in section and "largest share" not in section
    assert "Neither the method nor the strength beats chance for any score" in section
    assert "The design is too small to tell" in section
    assert "the method 18%, the strength within the method 27% and the residual 55%" in section


def test_family_wise_false_findings_stay_rare():
    """Over many pure-noise studies of 4 scores, the reading's rule (Holm-adjusted p < 0.05) claims an effect
    in at most about 5 % of them."""
    methods, settings = _design(3, 2, 3)
    rng = np.random.default_rng(3)
    claims = 0
    for _ in range(1000):
        shares = [variance_explained(rng.normal(size=len(methods)), methods, settings) for _ in SCORES]
        claims += bool(np.any(st.holm([p for s in shares for p in (s.p_method, s.p_strength)]) < 0.05))
    assert claims / 1000 < 0.07


def test_the_figure_draws_each_chance_level(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from disentangle.study import figures

    _write(tmp_path / "results.csv", seeds=2, method_effect={"beta_vae": -3.0, "beta_tcvae": 3.0}, rng_seed=0)
    result = analyze(tmp_path / "results.csv", progress=False)
    drawn = {}
    monkeypatch.setattr(figures, "_save", lambda fig, path: drawn.setdefault("fig", fig))
    from disentangle.study.result import shares_of_row

    shares = {"": {r["score"]: shares_of_row(r) for r in result.variance_explained}}
    figures.variance_figure(shares, tmp_path / "v.png", several_datasets=False)
    axes = [ax for ax in drawn["fig"].axes if ax.get_visible()]
    assert len(axes) == 3
    for ax, chance in zip(axes, (2 / 11, 3 / 11, 6 / 11)):
        ticks = [line.get_xdata() for line in ax.lines]
        assert len(ticks) == len(SCORES)  # one chance tick per score
        for x in ticks:
            assert x[0] == pytest.approx(chance) and x[1] == pytest.approx(chance)
    legend = [t.get_text() for t in drawn["fig"].legends[0].get_texts()]
    assert any("chance level" in t for t in legend)


def test_spearman_exact_permutation_p_matches_an_independent_enumeration():
    """Exact p of Spearman's rho with ties, against every pairing enumerated here: the share of the
    6! orderings of ``b`` whose |rho| reaches the observed one (scipy's ``permutation_test`` with
    ``permutation_type="pairings"`` computes the same, but in about two minutes)."""
    import itertools

    from scipy.stats import spearmanr

    a = np.array([1.0, 1.0, 2.0, 4.0, 4.0, 8.0])
    b = np.array([0.3, 0.1, 0.5, 0.4, 0.9, 0.7])
    rho, p, n = st.spearman_test(a, b)
    observed = spearmanr(a, b).statistic
    rhos = np.array([spearmanr(a, b[list(order)]).statistic for order in itertools.permutations(range(6))])
    reference = np.mean(np.abs(rhos) >= abs(observed) * (1 - 1e-12))
    assert n == 6 and rho == pytest.approx(observed)
    assert p == pytest.approx(reference)


def _write_strength(path: Path, strengths: list[float], seeds: int, slope: float, rng_seed: int) -> None:
    """One method; mig.mig rises with the strength by ``slope`` per step of its rank, other scores noise."""
    rng = np.random.default_rng(rng_seed)
    rows = []
    for i, strength in enumerate(strengths):
        for seed in range(seeds):
            row = {"run_id": f"b-{strength}-{seed}", "status": "finished", "seed": seed,
                   "objective.name": "beta_vae", "objective.beta": strength}
            row.update({score: rng.normal() for score in SCORES})
            row["mig.mig"] += slope * i
            rows.append(row)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _strength_line(text: str) -> str:
    return next(line for line in text.splitlines() if "as beta grows" in line)


def test_a_planted_strength_trend_is_read_and_noise_is_not(tmp_path):
    _write_strength(tmp_path / "trend.csv", [1, 2, 4, 6, 8, 16], seeds=2, slope=3.0, rng_seed=0)
    line = _strength_line(analyze(tmp_path / "trend.csv", tmp_path / "a", figures=False, progress=False).report)
    assert "rises: MIG (" in line and "DCI" not in line and "no score falls beyond chance" in line
    _write_strength(tmp_path / "noise.csv", [1, 2, 4, 6, 8, 16], seeds=2, slope=0.0, rng_seed=1)
    line = _strength_line(analyze(tmp_path / "noise.csv", tmp_path / "b", figures=False, progress=False).report)
    assert "no score rises beyond chance" in line and "no score falls beyond chance" in line


def test_four_runs_at_two_strengths_are_too_few_to_read_a_trend(tmp_path):
    """With 2 strengths x 2 seeds, even a perfect trend has exact p = 1/3: the report says so."""
    _write_strength(tmp_path / "r.csv", [1, 8], seeds=2, slope=10.0, rng_seed=0)
    line = _strength_line(analyze(tmp_path / "r.csv", tmp_path / "a", figures=False, progress=False).report)
    assert "too few runs to tell" in line and "p = 0.33" in line and "rises" not in line


def test_spearman_leaves_out_the_runs_missing_either_score():
    """A study in which some runs lack a score (NaN: not scored, or 0/0) correlates the others: ρ and
    n are those of scipy on the pairs where both are finite, in a single pair or in the matrix."""
    from scipy.stats import spearmanr

    rng = np.random.default_rng(3)
    a, b = rng.normal(size=12), rng.normal(size=12)
    a[[1, 7]], b[[4]] = np.nan, np.inf
    finite = np.isfinite(a) & np.isfinite(b)
    rho, n = st.spearman(a, b)
    assert n == 9 == int(finite.sum())
    assert rho == pytest.approx(spearmanr(a[finite], b[finite]).statistic, abs=1e-12)
    matrix = st.rank_correlation_matrix({"a": a, "b": b}, ["a"], ["b"])
    assert matrix.counts[0, 0] == 9 and matrix.values[0, 0] == pytest.approx(rho, abs=1e-12)
