"""Regenerate this report from its stored tables, without the trained models.

    python examples/output/study/regenerate.py

The report is the study analyses run over the zoo campaign's sweep folder (the pretrained models'
own training runs, 20,000 steps each on the sprites: every objective at its recipe's strength,
three seeds of β-VAE, β-TCVAE and FactorVAE, and β-VAE β = 16 / FactorVAE γ = 100):

    python -m disentangle.study ~/zoo-campaign/cpu20k_fp32 --out examples/output/study --udr

``results.csv`` is that folder's results table and ``udr.csv`` the UDR the command computed from
the run folders (each run compared with the other seeds of its setting). The run folders are not
in the repository, so this script recomputes every analysis from ``results.csv`` and takes UDR from
``udr.csv`` (``data.name``, constant, is a column here rather than read from the run folders);
every table it writes equals the command's.
"""
from __future__ import annotations

import csv
from pathlib import Path

from disentangle.study.analysis import _compute
from disentangle.study.report import write_report
from disentangle.study.table import infer_design, read_table

HERE = Path(__file__).resolve().parent


def main() -> None:
    table = read_table(HERE / "results.csv")
    table.source = "examples/output/study/results.csv"
    with open(HERE / "udr.csv", newline="") as handle:  # a run alone in its setting has no UDR (empty)
        udr = {row["run_id"]: {"udr": float(row["udr"] or "nan"), "udr_models": float(row["models_compared"])}
               for row in csv.DictReader(handle)}
    table = table.with_column("udr.udr", [udr[str(r["run_id"])]["udr"] for r in table.rows])
    result = _compute(infer_design(table, scores="headline"))
    result.udr = udr
    write_report(result, HERE, figures=True, progress=False)


if __name__ == "__main__":
    main()
