"""docs/guides/own-data.md's table of which metrics run on which data names every registered metric
once, in the row of what it needs (``metric_spec(name).data``): a new metric, or one whose needs
change, fails here until the table says so."""
from __future__ import annotations

import re
from pathlib import Path

from disentangle.metrics import METRICS, metric_spec

PAGE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "own-data.md"
#: the table's rows, by their first cell, and the data each row's metrics need
ROWS = {"(code, label) pairs": "labels", "codes only": "images", "images only": "images",
        "interventions, or the whole grid": "grid"}


def test_the_metrics_table_of_the_own_data_guide_matches_what_each_metric_needs():
    found: dict[str, str] = {}
    for line in PAGE.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or cells[0] not in ROWS:
            continue
        # a metric's estimator named in the row ("`mig` with `estimator: chen`") is not the metric's row
        names = re.findall(r"`(\w+)`(?! with)", re.sub(r"`\w+` with `[^`]+`", "", cells[1]))
        for name in names:
            assert name not in found, f"{name} is in two rows of the table"
            found[name] = ROWS[cells[0]]
    assert set(found) == set(METRICS.names()), (set(METRICS.names()) ^ set(found))
    for name, data in found.items():
        assert metric_spec(name).data({}) == data, f"{name}: the table says {data}, it needs {metric_spec(name).data({})}"
