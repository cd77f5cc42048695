"""``benchmarks/init_curves.py``: the reference-init runs of a sweep against the PyTorch-init points of
``benchmarks/time_to_disentangle.md``, on fake run folders (nothing is trained)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml


def _fake_run(runs_dir: Path, name: str, seed: int, migs: dict[int, float], init: str | None,
              precision: str = "fp32") -> None:
    run = runs_dir / name
    run.mkdir(parents=True)
    model = {"backbone": "conv64", "latent_dim": 10, **({"init": init} if init else {})}
    config = {"seed": seed, "model": model, "objective": {"name": "beta_vae", "beta": 4.0},
              "train": {"steps": 20000, "precision": precision}}
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    lines = [json.dumps({"step": step, "loss": 1.0, "steps_per_s": 10.0, "wall_time_s": step / 10})
             for step in migs]
    lines += [json.dumps({"step": step, "metrics": {"mig": {"mig": value, "mig_shape": 0.0}}})
              for step, value in migs.items()]
    (run / "log.jsonl").write_text("\n".join(lines) + "\n")


def test_summary_and_figure(tmp_path, benchmark_script):
    script = benchmark_script("init_curves")
    runs_dir = tmp_path / "sweep" / "runs"
    _fake_run(runs_dir, "a", 0, {2000: 0.10, 10000: 0.20, 20000: 0.30}, "reference")
    _fake_run(runs_dir, "b", 1, {2000: 0.20, 10000: 0.40, 20000: 0.50}, "reference")
    _fake_run(runs_dir, "c", 2, {2000: 0.90, 10000: 0.90, 20000: 0.90}, None)  # PyTorch init: left out
    _fake_run(runs_dir, "d", 3, {2000: 0.90, 10000: 0.90, 20000: 0.90}, "reference", precision="bf16")  # left out

    reference = script.reference_runs([tmp_path / "sweep"])
    assert sorted(r["seed"] for r in reference) == [0, 1]
    pytorch = script.pytorch_points()
    shipped = next(p for p in pytorch if (p["objective"], p["strength_value"], p["seed"]) == ("beta_vae", 4.0, 0))
    assert shipped["curve"] == [(2000, 0.077), (10000, 0.100), (20000, 0.128)]  # the md table's row

    rows = {row["init"]: row for row in script.summary_rows(reference, pytorch)}
    assert set(rows) == {"reference", "pytorch"}
    ours = rows["reference"]
    assert (ours["objective"], ours["strength"], ours["seeds"]) == ("beta_vae", "beta 4", [0, 1])
    # by hand: mean (a + b) / 2, sd (n - 1) |a - b| / sqrt(2)
    for step, mean, sd in ((2000, 0.15, 0.1 / math.sqrt(2)), (10000, 0.30, 0.2 / math.sqrt(2)),
                           (20000, 0.40, 0.2 / math.sqrt(2))):
        assert ours["mean"][step] == pytest.approx(mean, abs=1e-12)
        assert ours["sd"][step] == pytest.approx(sd, abs=1e-12)
    old = rows["pytorch"]
    assert old["seeds"] == [0, 1, 2]  # beta_vae beta 4 in fp32: seeds 0, 1, 2 in the md table
    assert old["mean"][2000] == pytest.approx((0.077 + 0.024 + 0.020) / 3, abs=1e-12)
    table = script.markdown_table(list(rows.values()))
    assert "| beta_vae | beta 4 | reference | 0, 1 | 0.150 ± 0.071 (n = 2) | 0.300 ± 0.141 (n = 2) |" in table

    pytest.importorskip("matplotlib")
    from matplotlib.text import Text
    from PIL import Image

    from disentangle.study.figures import DPI, MAX_WIDTH_IN

    fig = script.draw_figure(reference, pytorch, "title")
    small = [t.get_text() for t in fig.findobj(Text) if t.get_text().strip() and t.get_fontsize() < 8]
    assert not small, small
    script.plot(reference, pytorch, tmp_path / "curves.png", "title")
    with Image.open(tmp_path / "curves.png") as image:
        assert image.size[0] / DPI <= MAX_WIDTH_IN


def test_pytorch_points_come_only_from_pytorch_init_rows(tmp_path, benchmark_script):
    """``init_ab._shipped_curves`` finds its columns by the header; a table with an ``init`` column
    (time_to_disentangle.md written after model.init existed) gives only its ``pytorch`` rows."""
    benchmark_script("init_curves")  # puts benchmarks/ on sys.path
    from init_ab import _shipped_curves

    table = tmp_path / "time_to_disentangle.md"
    table.write_text(
        "| objective | strength | seed | precision | init | steps done | steps/s (1 thread) | wall time "
        "| MIG@2k | MIG@10k | MIG@20k | first step with MIG ≥ 0.1 | final MIG |\n"
        "|---|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n"
        "| beta_vae | beta 4 | 0 | fp32 | pytorch | 20,000 | 12.0 | 28 min | 0.011 | 0.012 | 0.013 | not yet | 0.013 |\n"
        "| beta_vae | beta 4 | 1 | fp32 | reference | 20,000 | 12.0 | 28 min | 0.5 | 0.5 | 0.5 | 2,000 | 0.5 |\n"
        "| beta_vae | beta 4 | 2 | bf16 | pytorch | 20,000 | 12.0 | 28 min | 0.7 | 0.7 | 0.7 | 2,000 | 0.7 |\n"
    )
    assert _shipped_curves(table) == {("beta_vae", 4.0, 0): {2000: 0.011, 10000: 0.012, 20000: 0.013}}
