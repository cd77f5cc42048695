"""benchmarks/bf16_vs_fp32.py's report: a well-formed table with or without MIG curves, and the
paired differences of the finished pairs computed from the runs' values."""
from __future__ import annotations

from pathlib import Path

import pytest


def _cells(line: str) -> list[str]:
    assert line.startswith("|") and line.endswith("|"), line
    return line[1:-1].split("|")


def _runs(module, with_curves: bool):
    run = module.Run
    curve = (lambda *v: dict(zip((2000, 4000, 8000), v))) if with_curves else (lambda *v: {})
    return [
        run(Path("a"), "ada_gvae", 4.0, 0, "fp32", "reference", 20000, curve(0.1, 0.2, 0.3), mig=0.30, dci=0.40),
        run(Path("b"), "ada_gvae", 4.0, 0, "bf16", "reference", 20000, curve(0.1, 0.2, 0.2), mig=0.25, dci=0.41),
        run(Path("c"), "ada_gvae", 4.0, 1, "fp32", "reference", 20000, curve(0.2, 0.3, 0.3), mig=0.20, dci=0.30),
        run(Path("d"), "ada_gvae", 4.0, 1, "bf16", "reference", 20000, curve(0.2, 0.3, 0.4), mig=0.30, dci=0.35),
        run(Path("e"), "ada_ml_vae", 4.0, 0, "bf16", "reference", 20000, curve(0.1), last_step=6000),
    ]


@pytest.mark.parametrize("with_curves", [True, False])
def test_the_runs_table_has_as_many_cells_in_every_row_as_in_its_header(benchmark_script, with_curves):
    module = benchmark_script("bf16_vs_fp32")
    text = module.report(_runs(module, with_curves))
    table = text.split("\n\n")[0].splitlines()
    widths = {len(_cells(line)) for line in table}
    assert widths == {len(_cells(table[0]))}, table
    assert len(table) == 2 + 5
    assert ("MIG@2k" in table[0]) is with_curves
    assert "partial, step 6,000" in text  # the unfinished run says how far it got


def test_the_paired_difference_is_the_mean_of_the_per_seed_differences(benchmark_script):
    module = benchmark_script("bf16_vs_fp32")
    text = module.report(_runs(module, with_curves=False))
    (line,) = [x for x in text.splitlines() if x.startswith("| ada_gvae (4.0) | 2 |")]
    cells = [c.strip() for c in _cells(line)]
    # bf16 - fp32 by seed: -0.05 and +0.10 -> mean 0.025; DCI: +0.01 and +0.05 -> 0.030
    assert cells[4].startswith("0.025") and cells[7].startswith("0.030"), cells
    assert module.STRENGTH_KEYS["ada_gvae"] == module.STRENGTH_KEYS["ada_ml_vae"] == "beta"
