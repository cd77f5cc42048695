"""Writing the report folder: the CSVs, the figures and ``report.md`` with a reading of the numbers."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from ._io import atomic_write_text, write_csv
from .figures import pretty, pretty_method
from .result import StudyResult, shares_of_row
from .statistics import ALPHA, Matrix, VarianceShares, detectable_share, holm, spearman_test

PLOTS_HINT = 'pip install "disentangle-torch[plots]"'
AGREE = 0.8  # |ρ| at or above: the scores agree
WEAK = 0.5  # |ρ| below: they do not
TOO_SMALL = 0.5  # an effect needing more than this share of the variance to be detected: the design is too small


# ------------------------------------------------------------------------------------------------ CSVs


def _matrix_rows(matrices: dict[str, Matrix], several: bool) -> tuple[list[str], list[list[Any]]]:
    first = next(iter(matrices.values()))
    header = (["dataset"] if several else []) + ["score", *first.columns]
    rows = []
    for dataset, m in matrices.items():
        for i, r in enumerate(m.rows):
            rows.append(([dataset] if several else []) + [r, *[float(v) for v in m.values[i]]])
    return header, rows


def _dict_rows(records: list[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    header = list(records[0]) if records else []
    return header, [[r[h] for h in header] for r in records]


def write_tables(result: StudyResult, out: Path) -> dict[str, Path]:
    """Write every CSV of the report; returns name -> path."""
    several = result.design.several_datasets
    files: dict[str, Path] = {}
    if result.rank_correlation:
        files["metric_rank_correlation.csv"] = out / "metric_rank_correlation.csv"
        write_csv(files["metric_rank_correlation.csv"], *_matrix_rows(result.rank_correlation, several))
    if result.unsupervised_vs_supervised:
        files["unsupervised_vs_supervised.csv"] = out / "unsupervised_vs_supervised.csv"
        write_csv(files["unsupervised_vs_supervised.csv"], *_matrix_rows(result.unsupervised_vs_supervised, several))
    if result.variance_explained:
        files["variance_explained.csv"] = out / "variance_explained.csv"
        write_csv(files["variance_explained.csv"], *_dict_rows(result.variance_explained))
    files["summary.csv"] = out / "summary.csv"
    write_csv(files["summary.csv"], *_dict_rows(result.summary))
    if result.udr:
        d = result.design
        header = ["run_id", *(["dataset"] if several else []), "method", "setting", "seed", "udr", "models_compared"]
        rows = []
        for i, row in enumerate(d.table.rows):
            run_id = str(row.get("run_id"))
            if run_id in result.udr:
                rows.append([run_id, *([d.datasets[i]] if several else []), d.methods[i], d.configuration[i], d.seeds[i],
                             result.udr[run_id]["udr"], int(result.udr[run_id]["udr_models"])])
        files["udr.csv"] = out / "udr.csv"
        write_csv(files["udr.csv"], header, rows)
    return files


# --------------------------------------------------------------------------------------------- figures


def write_figures(result: StudyResult, out: Path, progress: bool = True) -> dict[str, Path]:
    """Draw every figure whose analysis was done; returns name -> path."""
    from . import figures as F

    d = result.design
    several = d.several_datasets
    jobs = []
    if result.rank_correlation:
        jobs.append(("metric_rank_correlation.png", lambda p: F.correlation_figure(
            result.rank_correlation, p, title="Rank correlation between the supervised scores", several_datasets=several)))
    if result.unsupervised_vs_supervised:
        jobs.append(("unsupervised_vs_supervised.png", lambda p: F.correlation_figure(
            result.unsupervised_vs_supervised, p, title="Rank correlation of unsupervised (rows) with supervised scores",
            several_datasets=several)))
    if result.variance_explained:
        shares: dict[str, dict[str, VarianceShares]] = {}
        for r in result.variance_explained:
            shares.setdefault(r.get("dataset", ""), {})[r["score"]] = shares_of_row(r)
        jobs.append(("variance_explained.png", lambda p: F.variance_figure(shares, p, several_datasets=several)))
    groups = [(ds, m) for ds in d.dataset_names for m in d.method_names(ds)]
    group_of_run = list(zip(d.datasets, d.methods))
    jobs.append(("scores_by_method.png", lambda p: F.scores_by_method_figure(
        d.scores, groups, group_of_run, p, several_datasets=several)))
    panels: dict[str, dict[tuple[str, str], list[tuple[Any, str, np.ndarray]]]] = {}
    for score, values in d.scores.items():
        per: dict[tuple[str, str], list[tuple[Any, str, np.ndarray]]] = {}
        for ds, m in groups:
            idx = [i for i in range(len(d.methods)) if d.datasets[i] == ds and d.methods[i] == m]
            settings = sorted({d.configuration[i] for i in idx},
                              key=lambda c: (_strength_of(d, idx, c) if not math.isnan(_strength_of(d, idx, c)) else math.inf, c))
            per[(ds, m)] = [
                (None if math.isnan(_strength_of(d, idx, c)) else _strength_of(d, idx, c), c,
                 values[[i for i in idx if d.configuration[i] == c]])
                for c in settings
            ]
        panels[score] = per
    jobs.append(("score_vs_strength.png", lambda p: F.score_vs_strength_figure(panels, d.strength_name, p)))

    from tqdm.auto import tqdm

    files: dict[str, Path] = {}
    for name, draw in tqdm(jobs, desc="figures", unit="figure", disable=not progress):
        path = out / name
        draw(path)
        files[name] = path
    return files


def _strength_of(d: Any, idx: list[int], setting: str) -> float:
    return float(next(d.strength[i] for i in idx if d.configuration[i] == setting))


# ------------------------------------------------------------------------------------------ report.md


def _f(v: float, digits: int = 2) -> str:
    return "–" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}f}"


def _md_matrix(m: Matrix) -> list[str]:
    lines = ["| | " + " | ".join(pretty(c) for c in m.columns) + " |", "|---" * (len(m.columns) + 1) + "|"]
    for i, r in enumerate(m.rows):
        lines.append(f"| **{pretty(r)}** | " + " | ".join(_f(v) for v in m.values[i]) + " |")
    return lines


def _runs_range(m: Matrix) -> str:
    n = m.counts[m.counts > 0]
    if not n.size:
        return "0 runs"
    return f"{n.min()} runs" if n.min() == n.max() else f"{n.min()}–{n.max()} runs (pairs with missing scores have fewer)"


def _agreement_reading(m: Matrix) -> list[str]:
    pairs = []
    for i in range(len(m.rows)):
        for j in range(i + 1, len(m.columns)):
            if not math.isnan(m.values[i, j]):
                pairs.append((m.values[i, j], m.rows[i], m.columns[j], m.counts[i, j]))
    if not pairs:
        return ["No pair of scores has a rank correlation (too few runs, or constant scores)."]
    rho = np.array([p[0] for p in pairs])
    agree = [p for p in pairs if p[0] >= AGREE]
    weak = [p for p in pairs if abs(p[0]) < WEAK]
    negative = [p for p in pairs if p[0] <= -WEAK]
    out = [f"Over the {len(pairs)} pairs of supervised scores the median rank correlation is {np.median(rho):.2f} "
           f"(from {rho.min():.2f} to {rho.max():.2f})."]
    if agree:
        out.append(f"Strong agreement (ρ ≥ {AGREE}): " + "; ".join(f"{pretty(a)} and {pretty(b)} ({r:.2f})" for r, a, b, _ in
                                                                  sorted(agree, reverse=True)) + ".")
    else:
        out.append(f"No pair agrees strongly (ρ ≥ {AGREE}).")
    if weak:
        out.append(f"Little or no agreement (|ρ| < {WEAK}): " + "; ".join(f"{pretty(a)} and {pretty(b)} ({r:.2f})"
                                                                       for r, a, b, _ in sorted(weak)) + ".")
    if negative:
        out.append("Opposite rankings (ρ ≤ −0.5): " + "; ".join(f"{pretty(a)} and {pretty(b)} ({r:.2f})" for r, a, b, _ in negative) + ".")
    return [" ".join(out)]


def _unsupervised_reading(m: Matrix) -> list[str]:
    out = []
    for j, sup in enumerate(m.columns):
        col = m.values[:, j]
        if np.all(np.isnan(col)):
            continue
        best = int(np.nanargmax(np.abs(col)))
        if abs(col[best]) >= WEAK:
            out.append(f"{pretty(sup)} is best tracked by {pretty(m.rows[best])} (ρ = {col[best]:.2f}, {m.counts[best, j]} runs)")
        else:
            out.append(f"no unsupervised score tracks {pretty(sup)} (largest |ρ| = {abs(col[best]):.2f}, {pretty(m.rows[best])})")
    if not out:
        return ["No unsupervised score has a rank correlation with a supervised one here."]
    strongest = np.nanmax(np.abs(m.values)) if np.isfinite(m.values).any() else float("nan")
    verdict = (
        "at least one unsupervised score ranks models much like a supervised one"
        if strongest >= AGREE else
        "no unsupervised score ranks models reliably like a supervised one (all |ρ| < 0.8)"
    )
    text = "; ".join(out)
    return [text[0].upper() + text[1:] + f". In short, {verdict}."]


def _p(p: float) -> str:
    return "p < 0.001" if p < 0.001 else (f"p = {p:.3f}" if p < 0.1 else f"p = {p:.2f}")


def _pc(v: float) -> str:
    """A share in whole percent, with one decimal below 10 % (so a 0.4 % chance level is not "0%")."""
    return "–" if math.isnan(v) else (f"{v:.1%}" if abs(v) < 0.095 and v != 0 else f"{v:.0%}")


def _beats(p: float) -> bool:
    return math.isfinite(p) and p < ALPHA


def _variance_reading(rows: list[dict[str, Any]], several: bool) -> list[str]:
    """The reading of the variance analysis: only shares that beat chance are findings.

    A share beats chance when its F-test against the residual has a Holm-adjusted p < ``ALPHA``
    (the family: every method and strength test of the dataset's scores). When some score shows
    no effect and an effect would need more than ``TOO_SMALL`` of the variance to be detected
    (:func:`~disentangle.study.statistics.detectable_share` at Holm's first-step level α / k),
    the reading says the design is too small to tell.
    """
    out = []
    by_dataset: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_dataset.setdefault(r.get("dataset", ""), []).append(r)
    for dataset, items in by_dataset.items():
        valid = [r for r in items if not math.isnan(r["residual"])]
        if not valid:
            continue
        on = f"On {dataset}, p" if several else "P"
        # the design of the scores with the most runs (scores with missing values have fewer)
        ref = max(valid, key=lambda r: r["n_runs"])
        n_runs = sorted({r["n_runs"] for r in valid})
        runs = f"{n_runs[0]}" if len(n_runs) == 1 else f"{n_runs[0]}–{n_runs[-1]}"
        residual = np.array([r["residual"] for r in valid])
        text = (f"{on}ure noise would already give the method {_pc(ref['method_chance'])}, the strength within the method "
                f"{_pc(ref['strength_chance'])} and the residual {_pc(ref['residual_chance'])} of a score's sum of squares on "
                f"average ({ref['n_runs']} runs in {ref['n_settings']} settings of {ref['n_methods']} methods: "
                f"{ref['df_method']}, {ref['df_strength']} and {ref['df_residual']} of {ref['n_runs'] - 1} degrees of freedom), "
                f"so a share is a finding only when it beats that chance level. The residual (seed and noise) is a median "
                f"{np.median(residual):.0%} of a score's sum of squares (from {residual.min():.0%} to {residual.max():.0%}; "
                f"{runs} runs per score). ")
        k = sum(math.isfinite(r[key]) for r in valid for key in ("method_p", "strength_p"))
        method_hits = [r for r in valid if _beats(r["method_p_holm"])]
        strength_hits = [r for r in valid if _beats(r["strength_p_holm"])]
        if method_hits:
            text += ("The method explains more than chance for " + ", ".join(
                f"{pretty(r['score'])} ({_pc(r['method'])}, chance {_pc(r['method_chance'])}, {_p(r['method_p_holm'])})"
                for r in method_hits) + ". ")
        if strength_hits:
            text += ("The strength within the method explains more than chance for " + ", ".join(
                f"{pretty(r['score'])} ({_pc(r['strength'])}, chance {_pc(r['strength_chance'])}, {_p(r['strength_p_holm'])})"
                for r in strength_hits) + ". ")
        hit_scores = {r["score"] for r in method_hits + strength_hits}
        rest = [r for r in valid if r["score"] not in hit_scores]
        test = f"F-tests against the residual, Holm-adjusted over the {k} tests, α = {ALPHA:g}"
        if not hit_scores:
            text += f"Neither the method nor the strength beats chance for any score ({test}). "
        elif rest:
            text += (f"For the other scores ({', '.join(pretty(r['score']) for r in rest)}) neither share beats chance "
                     f"({test}). ")
        else:
            text += f"({test}.) "
        if rest and k:
            level = ALPHA / k  # the level the strongest effect has to pass (Holm's first step)
            need_method = detectable_share(ref["df_method"], ref["df_residual"], level)
            need_strength = detectable_share(ref["df_strength"], ref["df_residual"], level)
            needs = [(what, v) for what, v in (("a method effect", need_method), ("a strength effect", need_strength))
                     if math.isfinite(v)]
            if needs:
                need_text = " and ".join(f"{what} of at least {_pc(v)}" for what, v in needs)
                if max(v for _, v in needs) > TOO_SMALL:
                    text += (f"The design is too small to tell: with {ref['df_residual']} residual degrees of freedom and "
                             f"{k} tests, {need_text} of a score's variance (with no other effect) would be needed to "
                             f"tell it apart from noise, so the absence of a finding says little: these runs cannot show "
                             f"whether the method or its strength matters. Run more seeds per setting.")
                else:
                    text += (f"With this design {need_text} of a score's variance would have been detected, so these "
                             f"scores show no large method or strength effect beyond seed-to-seed variation.")
        out.append(text.strip())
    return out


def _best_method_reading(result: StudyResult) -> list[str]:
    d = result.design
    out = []
    for dataset in d.dataset_names:
        mask = d.rows_of(dataset)
        parts = []
        for score, values in d.scores.items():
            medians = []
            for m in d.method_names(dataset):
                sel = mask & np.array([x == m for x in d.methods]) & np.isfinite(values)
                if sel.any():
                    medians.append((float(np.median(values[sel])), m, int(sel.sum())))
            if len(medians) >= 2:
                top = max(medians)
                parts.append(f"{pretty(score)}: {pretty_method(top[1])} (median {top[0]:.3g} over {top[2]} runs)")
        if parts:
            prefix = f"On {dataset}, highest" if d.several_datasets else "Highest"
            out.append(f"{prefix} median per score: " + "; ".join(parts) + ".")
    return out or ["There is a single method: nothing to compare."]


def _strength_reading(result: StudyResult) -> list[str]:
    """Per method, the scores whose rank correlation with the strength beats chance (exact
    permutation p of Spearman's ρ, Holm-adjusted over the method's scores), and a plain statement
    when the runs are too few for any correlation to reach p < ALPHA."""
    d = result.design
    out = []
    for dataset in d.dataset_names:
        for m in d.method_names(dataset):
            sel = d.rows_of(dataset) & np.array([x == m for x in d.methods])
            strength = d.strength[sel]
            if np.isfinite(strength).sum() < 3 or len(set(strength[np.isfinite(strength)])) < 2:
                continue
            name = (d.strength_name.get((dataset, m)) or "strength").replace("objective.", "")
            where = f" on {dataset}" if d.several_datasets else ""
            head = f"{pretty_method(m)}{where}, as {name} grows (Spearman ρ over {int(sel.sum())} runs"
            best_p = spearman_test(strength, strength)[1]  # the most extreme ordering these runs allow
            if not best_p < ALPHA:
                out.append(f"{head}): too few runs to tell; even a perfect rank correlation would have "
                           f"p = {best_p:.2g} ≥ {ALPHA}.")
                continue
            tests = [(score, *spearman_test(strength, values[sel])[:2]) for score, values in d.scores.items()]
            adjusted = holm([p for _, _, p in tests])
            up = [f"{pretty(score)} (ρ {rho:.2f}, p {_p(p)})" for (score, rho, _), p in zip(tests, adjusted)
                  if p < ALPHA and rho > 0]
            down = [f"{pretty(score)} (ρ {rho:.2f}, p {_p(p)})" for (score, rho, _), p in zip(tests, adjusted)
                    if p < ALPHA and rho < 0]
            text = f"{head}, exact permutation p, Holm-adjusted over the scores): "
            text += ("rises: " + ", ".join(up) if up else "no score rises beyond chance")
            text += ("; falls: " + ", ".join(down) if down else "; no score falls beyond chance") + "."
            out.append(text)
    return out or ["No method has a numeric strength with at least two values: nothing to read."]


def _summary_table(result: StudyResult, limit: int = 60) -> list[str]:
    d = result.design
    scores = list(d.scores)
    keyed: dict[tuple[str, str, str], dict[str, dict[str, Any]]] = {}
    for r in result.summary:
        keyed.setdefault((r.get("dataset", ""), r["method"], r["setting"]), {})[r["score"]] = r
    head = (["dataset"] if d.several_datasets else []) + ["method", "setting", "runs"] + [pretty(s) for s in scores]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for (dataset, method, setting), per in list(keyed.items())[:limit]:
        n = max(r["n_runs"] for r in per.values())
        cells = [f"{_f(per[s]['median'], 3)} [{_f(per[s]['q25'], 3)}, {_f(per[s]['q75'], 3)}]" if s in per else "–" for s in scores]
        lines.append("| " + " | ".join(([dataset] if d.several_datasets else []) + [pretty_method(method), setting, str(n)] + cells) + " |")
    if len(keyed) > limit:
        lines.append(f"\n({len(keyed) - limit} more rows in summary.csv.)")
    return lines


def render_report(result: StudyResult, files: dict[str, Path], figures_written: bool, figures_note: str) -> str:
    d = result.design
    n_methods = len({(ds, m) for ds, m in zip(d.datasets, d.methods)})
    n_settings = len({(ds, m, c) for ds, m, c in zip(d.datasets, d.methods, d.configuration)})
    lines = [
        "# Study report",
        "",
        f"Source: `{d.table.source or '(table)'}`: **{len(d.table)} runs**, {n_methods} method(s), {n_settings} "
        f"method × strength setting(s), {len(set(d.seeds))} distinct seed(s)"
        + (f", {len(d.dataset_names)} datasets (each analysed separately)" if d.several_datasets else "") + ".",
        "",
        "## What was inferred",
        "",
        *[f"- {line}" for line in d.inferred],
    ]
    notes = list(d.notes) + ([figures_note] if figures_note else [])
    if result.udr:
        n_models = sorted({int(v["udr_models"]) for v in result.udr.values()})
        notes.append(f"UDR (Duan et al. 2020) was computed for {len(result.udr)} runs from their run folders, each compared with "
                     f"the other seeds of its setting ({'/'.join(map(str, n_models))} models per setting); values in udr.csv.")
    if notes:
        lines += ["", "## Notes", "", *[f"- {n}" for n in notes]]

    def figure(name: str, alt: str) -> list[str]:
        return [f"![{alt}]({name})", ""] if figures_written and name in files else []

    def skipped(name: str) -> list[str]:
        return [f"*Skipped: {result.skipped[name]}*", ""] if name in result.skipped else []

    lines += ["", "## Do the supervised metrics agree?", ""]
    lines += skipped("metric_rank_correlation")
    if result.rank_correlation:
        lines += figure("metric_rank_correlation.png", "Rank correlation between supervised scores")
        for dataset, m in result.rank_correlation.items():
            lines += [f"Spearman rank correlation{' on ' + dataset if d.several_datasets else ''} over {_runs_range(m)} "
                      f"([metric_rank_correlation.csv](metric_rank_correlation.csv)):", ""]
            lines += _md_matrix(m) + [""] + _agreement_reading(m) + [""]

    lines += ["## Do the unsupervised scores track the supervised ones?", ""]
    lines += skipped("unsupervised_vs_supervised")
    if result.unsupervised_vs_supervised:
        lines += figure("unsupervised_vs_supervised.png", "Rank correlation of unsupervised with supervised scores")
        for dataset, m in result.unsupervised_vs_supervised.items():
            lines += [f"Spearman rank correlation{' on ' + dataset if d.several_datasets else ''} over {_runs_range(m)} "
                      f"(rows: unsupervised; [unsupervised_vs_supervised.csv](unsupervised_vs_supervised.csv)):", ""]
            lines += _md_matrix(m) + [""] + _unsupervised_reading(m) + [""]

    lines += ["## How much does the seed matter?", ""]
    lines += skipped("variance_explained")
    if result.variance_explained:
        lines += figure("variance_explained.png", "Variance explained")
        lines += ["Share of each score's sum of squares explained by the method, by the strength within the method, and "
                  "the residual (seed and noise), from a nested ANOVA; the three sum to 1. In brackets: the chance level "
                  "(the share pure noise gives on average, degrees of freedom / (runs − 1)) and, for the method and the "
                  "strength, the p-value of the F-test against the residual, Holm-adjusted over all the tests of the "
                  f"table{' per dataset' if d.several_datasets else ''}; **bold**: beats chance (p < {ALPHA:g}) "
                  "([variance_explained.csv](variance_explained.csv), with the unadjusted p-values):", ""]
        several = d.several_datasets
        head = (["dataset"] if several else []) + ["score", "method", "strength", "residual (seed)", "runs"]
        lines += ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
        for r in result.variance_explained:
            lines.append("| " + " | ".join(([r["dataset"]] if several else []) + [
                pretty(r["score"]), _share_cell(r["method"], r["method_chance"], r["method_p_holm"]),
                _share_cell(r["strength"], r["strength_chance"], r["strength_p_holm"]),
                _share_cell(r["residual"], r["residual_chance"], math.nan), str(r["n_runs"])]) + " |")
        lines += [""] + _variance_reading(result.variance_explained, several) + [""]

    lines += ["## Scores by method", ""]
    lines += figure("scores_by_method.png", "Scores by method")
    lines += _best_method_reading(result) + [""]

    lines += ["## Scores against the strength", ""]
    lines += figure("score_vs_strength.png", "Scores against the regularisation strength")
    lines += _strength_reading(result) + [""]

    lines += ["## Summary", "", "Median [first quartile, third quartile] over seeds of every score per method × strength "
              "([summary.csv](summary.csv)):", ""]
    lines += _summary_table(result) + [""]
    lines += ["## Files", ""] + [f"- [{name}]({name})" for name in files] + [""]
    return "\n".join(lines)


def _pct(v: float) -> str:
    return "–" if math.isnan(v) else f"{v:.1%}"


def _share_cell(share: float, chance: float, p: float) -> str:
    """``63.2% (chance 18%; p = 0.003)``, bold when the share beats chance."""
    if math.isnan(share):
        return "–"
    inside = [f"chance {_pc(chance)}"] if math.isfinite(chance) else []
    if math.isfinite(p):
        inside.append(_p(p))
    text = f"**{_pct(share)}**" if _beats(p) else _pct(share)
    return f"{text} ({'; '.join(inside)})" if inside else text


def write_report(result: StudyResult, out: Path, *, figures: bool = True, progress: bool = True) -> None:
    """Write the CSVs, the figures (when matplotlib is installed and ``figures``) and ``report.md`` into ``out``."""
    from .figures import matplotlib_available

    out.mkdir(parents=True, exist_ok=True)
    files = write_tables(result, out)
    figures_note = ""
    figures_written = False
    if figures and matplotlib_available():
        files.update(write_figures(result, out, progress))
        figures_written = True
    elif figures:
        figures_note = f"The figures were not drawn because matplotlib is not installed: {PLOTS_HINT}, then run the study again."
    else:
        figures_note = "Figures were not requested (--no-figures)."
    report = render_report(result, {**files, "report.md": out / "report.md"}, figures_written, figures_note)
    atomic_write_text(out / "report.md", report)
    files["report.md"] = out / "report.md"
    result.files = files
    result.report = report
