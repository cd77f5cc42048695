"""Sweep records: metric settings per score (metrics.json), results.csv after every run and never
mixing settings, each sweep file of a folder judged by its own metrics, the plan's lock."""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from disentangle.sweep import api, load_sweep, sweep_from_dict
from disentangle.sweep.runner import run_one

from .test_sweep import tiny_sweep_dict, write_sweep_file

REPO = Path(__file__).resolve().parents[2]
MIG_200 = {"mig": {"num_train": 200}}


def settings_identity(metric, settings):
    from disentangle.metrics.results import settings_identity

    return settings_identity(metric, settings)


def run_in_process(plan, out: Path):
    """Every run of ``plan`` through the run-one function, in this process (no worker pool)."""
    api.write_plan(plan, out)
    return [run_one(api._task(r, out, plan, 1, False)) for r in plan.runs]


def read_csv(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


# ---------------------------------------------------------------------- item 4: metric settings
def test_a_metric_scored_with_other_settings_is_missing_and_never_mixed(tmp_path):
    a = load_sweep(write_sweep_file(tmp_path, grid={}, seeds=2, metrics=["mig"], metric_settings=MIG_200))
    out = tmp_path / "out"
    assert [o.status for o in run_in_process(a, out)] == ["finished", "finished"]
    first = out / "runs" / a.runs[0].run_id
    trained = (first / "log.jsonl").read_text()

    (tmp_path / "b").mkdir()
    b = load_sweep(write_sweep_file(tmp_path / "b", grid={}, seeds=[0], metrics=["mig"],
                               metric_settings={"mig": {"num_train": 300}}))
    assert b.runs[0].run_id == a.runs[0].run_id  # the same run, asked with other settings
    assert api.run(b, out, dry_run=True, log=None).before["partial"] == 1  # not "finished": mig is missing
    record = json.loads((first / "metrics.json").read_text())
    assert record["metric_settings"]["mig"] == settings_identity("mig", {"num_train": 200})
    assert record["metric_settings"]["mig"]["num_train"] == 200 and "n_jobs" not in record["metric_settings"]["mig"]
    state, detail = api.run_state(first, ["mig"], {"mig": {"num_train": 300}})
    assert state == "partial" and "metrics to compute: mig (scored with other settings)" in detail
    # settings that only change the speed, or a default spelled out, do not make a score missing
    assert api.run_state(first, ["mig"], {"mig": {"num_train": 200, "n_jobs": 3}})[0] == "finished"

    assert [o.status for o in run_in_process(b, out)] == ["finished"]  # re-scored, not retrained
    assert (first / "log.jsonl").read_text() == trained
    record = json.loads((first / "metrics.json").read_text())
    assert record["metric_settings"]["mig"]["num_train"] == 300

    # run 0 holds mig at num_train 300, run 1 at 200: the columns are split, never mixed
    columns, rows = read_csv(out / "results.csv")
    assert "mig.mig" not in columns
    assert {"mig.mig[num_train=200]", "mig.mig[num_train=300]"} <= set(columns)
    by_id = {r["run_id"]: r for r in rows}
    assert by_id[a.runs[0].run_id]["mig.mig[num_train=200]"] == ""
    assert float(by_id[a.runs[0].run_id]["mig.mig[num_train=300]"]) == record["metrics"]["mig"]["mig"]
    assert by_id[a.runs[1].run_id]["mig.mig[num_train=300]"] == ""
    table = api.results(out)
    assert table.notes and "split by settings" in table.notes[0]


def test_metrics_json_without_settings_per_metric_counts_as_the_defaults(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    # written by an earlier version: the sweep's own settings (only those given) for every metric
    finished = {"finished_at": "2026-11-22T10:00:00+0000"}  # the sweep's record of a finished run
    (run / "metrics.json").write_text(json.dumps({"metrics": {"mig": {"mig": 0.2}, "dci": {"disentanglement": 0.1}},
                                                  "metric_settings": MIG_200, **finished}))
    assert api.run_state(run, ["mig", "dci"], MIG_200)[0] == "finished"
    assert api.run_state(run, ["mig"], {})[0] == "partial"
    assert api.run_state(run, ["dci"], {"dci": {"num_train": 10000}})[0] == "finished"  # a default spelled out
    # merged by an earlier python -m disentangle.evaluate: no settings at all, the defaults
    (run / "metrics.json").write_text(json.dumps({"metrics": {"mig": {"mig": 0.2}}, **finished}))
    assert api.run_state(run, ["mig"])[0] == "finished"
    assert api.run_state(run, ["mig"], MIG_200)[0] == "partial"
    # written by evaluate alone, into a folder the sweep has not finished: not the sweep's record
    (run / "metrics.json").write_text(json.dumps({"metrics": {"mig": {"mig": 0.2}}, "step": 4}))
    assert api.run_state(run, ["mig"])[0] == "not started"  # (no checkpoint in this folder)


# ---------------------------------------------------------------------- item 5: results after each run
def test_results_csv_is_rewritten_after_every_finished_run(tmp_path):
    path = write_sweep_file(tmp_path, grid={}, seeds=2, metrics=["mig"], metric_settings=MIG_200)
    out = tmp_path / "out"
    seen: list[tuple[str, list[str]]] = []

    def log(line: str) -> None:
        if line.startswith("[1/2]"):  # the first run ended; the sweep goes on with the second
            _, rows = read_csv(out / "results.csv")
            seen.append((line.split()[2], [r["run_id"] for r in rows]))

    report = api.run(path, out, workers=1, threads_per_run=1, log=log)
    assert report.ok and len(seen) == 1
    first, listed = seen[0]
    assert first in listed
    assert not list(out.glob(".results.csv.*.tmp"))  # written atomically: no temporary file left


# ---------------------------------------------------------------------- item 8: sweep files in one folder
def test_each_sweep_file_of_a_folder_is_judged_by_its_own_metrics(tmp_path):
    a = sweep_from_dict(tiny_sweep_dict(tmp_path, grid={"objective.beta": [1.0]}, seeds=1, metrics=["mig"],
                                        metric_settings=MIG_200), source="a.yaml", folder=tmp_path)
    b = sweep_from_dict(tiny_sweep_dict(tmp_path, grid={"objective.beta": [4.0]}, seeds=1,
                                        metrics=["mig", "unsupervised_scores"], metric_settings={}),
                        source="b.yaml", folder=tmp_path)
    out = tmp_path / "out"
    api.write_plan(a, out)
    api.write_plan(b, out)
    done = a.runs[0].run_id
    (out / "runs" / done).mkdir(parents=True)
    (out / "runs" / done / "metrics.json").write_text(json.dumps(
        {"run_id": done, "metrics": {"mig": {"mig": 0.1}}, "metric_settings": MIG_200,
         "finished_at": "2026-11-22T10:00:00+0000"}
    ))
    status = api.status(out)
    assert {r.run_id: r.state for r in status.runs} == {done: "finished", b.runs[0].run_id: "not started"}
    plan = json.loads((out / "sweep.json").read_text())
    assert [(s["source"], s["metrics"], s["metric_settings"], s["run_ids"]) for s in plan["studies"]] == [
        ("a.yaml", ["mig"], MIG_200, [done]),
        ("b.yaml", ["mig", "unsupervised_scores"], {}, [b.runs[0].run_id]),
    ]
    assert plan["metrics"] == ["mig", "unsupervised_scores"]  # the union: the results' column order

    # a plan written before per-file entries: every run is judged by the union, as then
    for entry in plan["studies"]:
        del entry["run_ids"], entry["metrics"], entry["metric_settings"]
    (out / "sweep.json").write_text(json.dumps(plan))
    assert {r.run_id: r.state for r in api.status(out).runs}[done] == "partial"


def test_a_plan_written_by_an_earlier_version_is_read_and_merged_with_its_keys(tmp_path):
    """sweep.json keeps the key names of the versions before the rename to "sweep file": ``studies``
    (the sweep files run into the folder) and, in each entry, ``study`` (the file as written)."""
    plan = sweep_from_dict(tiny_sweep_dict(tmp_path, grid={"objective.beta": [1.0, 4.0]}, seeds=1, metrics=["mig"],
                                           metric_settings=MIG_200), source="x", folder=tmp_path)
    done, todo = (r.run_id for r in plan.runs)
    out = tmp_path / "out"
    (out / "runs" / done).mkdir(parents=True)
    (out / "runs" / done / "metrics.json").write_text(json.dumps(
        {"run_id": done, "metrics": {"mig": {"mig": 0.1}}, "metric_settings": MIG_200,
         "finished_at": "2026-11-22T10:00:00+0000"}
    ))
    old_source = str(tmp_path / "configs" / "studies" / "a.yaml")  # a shipped file in its folder of then
    old = {  # an entry as written before per-file run ids: the settings are those of the file as written
        "format": 2, "studies": [{"source": old_source, "name": "a", "study": {"metric_settings": MIG_200}}],
        "varying_keys": ["objective.beta"], "metrics": ["mig"],
        "runs": [{"run_id": rid, "seed": 0, "values": {}, "steps": 6} for rid in (done, todo)],
    }
    (out / "sweep.json").write_text(json.dumps(old))
    assert {r.run_id: r.state for r in api.status(out).runs} == {done: "finished", todo: "not started"}
    old["studies"][0]["study"] = {}  # the file as written asked the defaults: the run's scores are another's
    (out / "sweep.json").write_text(json.dumps(old))
    assert {r.run_id: r.state for r in api.status(out).runs}[done] == "partial"

    # the same file run again from its new folder replaces its entry, under the same keys
    plan.source = str(tmp_path / "configs" / "sweeps" / "a.yaml")
    api.write_plan(plan, out)
    written = json.loads((out / "sweep.json").read_text())
    assert [(s["source"], s["study"], s["run_ids"]) for s in written["studies"]] == [
        (plan.source, plan.raw, [done, todo])
    ]
    assert {r.run_id: r.state for r in api.status(out).runs} == {done: "finished", todo: "not started"}


WRITER = """
import os, sys, time
from pathlib import Path
from disentangle.sweep import api
from disentangle.sweep.grid import RunSpec, SweepPlan

name, out, go = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
real_replace = os.replace

def slow_replace(src, dst, *args, **kwargs):  # widen the window between reading and writing the plan
    if Path(dst).name == "sweep.json":
        time.sleep(1.5)
    return real_replace(src, dst, *args, **kwargs)

os.replace = slow_replace
runs = [RunSpec((name * 16)[:15] + str(i), i, i, {}, {"train": {"steps": 1}}) for i in range(2)]
plan = SweepPlan(source=name + ".yaml", name=name, base="quickstart", set={}, grid=[{}], seeds=[0, 1],
              metrics=["mig"], metric_settings={}, imports=[], raw={"name": name}, runs=runs)
print("ready", flush=True)
while not go.exists():
    time.sleep(0.005)
api.write_plan(plan, out)
"""


def test_two_sweeps_writing_the_plan_together_keep_both(tmp_path):
    out, go = tmp_path / "out", tmp_path / "go"
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, name, str(out), str(go)], cwd=REPO,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name in ("a", "b")
    ]
    try:
        for w in writers:
            assert w.stdout.readline().strip() == "ready", w.stderr.read()
        go.touch()
        for w in writers:
            _, err = w.communicate(timeout=120)
            assert w.returncode == 0, err
    finally:
        for w in writers:
            if w.poll() is None:
                w.kill()
                w.wait()
    plan = json.loads((out / "sweep.json").read_text())
    assert sorted(s["name"] for s in plan["studies"]) == ["a", "b"]
    assert sorted(r["run_id"] for r in plan["runs"]) == ["aaaaaaaaaaaaaaa0", "aaaaaaaaaaaaaaa1",
                                                         "bbbbbbbbbbbbbbb0", "bbbbbbbbbbbbbbb1"]
    assert sorted(p.name for p in out.iterdir()) == [".plan.lock", "sweep.json"]


def test_scores_written_by_hand_into_a_run_still_training_do_not_finish_it(tmp_path):
    """A sweep's run interrupted at step 4 of 12, then scored with ``python -m disentangle.evaluate``
    (to peek at it): the sweep took that metrics.json for its own record, called the run finished,
    never trained its last 8 steps and listed the step-4 scores in results.csv. The run is partial
    until the sweep itself has trained and scored it."""
    from disentangle.config import Config
    from disentangle.evaluate import main as evaluate
    from disentangle.training.trainer import fit

    path = write_sweep_file(tmp_path, seeds=1, grid={}, metrics=["mig"], metric_settings=MIG_200)
    out = tmp_path / "out"
    (task,) = load_sweep(path).runs
    run = out / "runs" / task.run_id
    sys.path.insert(0, str(tmp_path))  # the plugin that registers the tiny dataset
    try:
        import tiny_plugin  # noqa: F401
        fit(Config.from_dict(dict(task.config, train={**task.config["train"], "steps": 4, "out_dir": str(run)})))
        assert evaluate([str(run), "--metrics", "mig", "--set", "mig.num_train=200", "--quiet"]) == 0
    finally:
        sys.path.remove(str(tmp_path))
    assert json.loads((run / "metrics.json").read_text())["step"] == 4
    state, detail = api.run_state(run, ["mig"], MIG_200)
    assert (state, detail) == ("partial", "last logged step 4")
    report = api.run(path, out, workers=1, threads_per_run=1, log=None)
    assert {o.run_id: o.status for o in report.outcomes} == {task.run_id: "finished"}
    record = json.loads((run / "metrics.json").read_text())
    assert record["steps"] == task.config["train"]["steps"] == 12 and "step" not in record
    _, rows = read_csv(out / "results.csv")
    assert [r["run_id"] for r in rows] == [task.run_id]
    assert api.run_state(run, ["mig"], MIG_200)[0] == "finished"


def test_a_finished_run_folder_no_sweep_file_plans_is_left_out_with_a_note(tmp_path):
    """A run id an earlier version computed otherwise leaves the old folder beside the new: the same
    setting and seed must not count twice in results.csv (the study would read a seed effect of 0)."""
    a = sweep_from_dict(tiny_sweep_dict(tmp_path, grid={"objective.beta": [1.0]}, seeds=1, metrics=["mig"],
                                        metric_settings=MIG_200), source="a.yaml", folder=tmp_path)
    out = tmp_path / "out"
    api.write_plan(a, out)
    done = a.runs[0].run_id
    record = {"run_id": done, "metrics": {"mig": {"mig": 0.1}}, "metric_settings": MIG_200, "config": a.runs[0].config,
              "finished_at": "2026-12-07T06:00:00+0000"}
    for rid in (done, "0123456789abcdef"):
        (out / "runs" / rid).mkdir(parents=True)
        (out / "runs" / rid / "metrics.json").write_text(json.dumps({**record, "run_id": rid}))
    table = api.results(out)
    assert [r["run_id"] for r in table.rows] == [done]
    assert any(n.startswith("1 finished run folder(s) under runs/ belong to no sweep file of this folder "
                            "(0123456789abcdef)") for n in table.notes)


def test_every_seed_is_checked_before_anything_is_created(tmp_path):
    """Only the first seed went through the config's check: [0, 2**63] was accepted, and its second
    run would fail when it started."""
    from disentangle.errors import ConfigError

    with pytest.raises(ConfigError, match=r"'seeds' lists 9223372036854775808; a seed is an integer from 0 to 2\*\*63"):
        sweep_from_dict(tiny_sweep_dict(tmp_path, seeds=[0, 2**63]), source="s.yaml", folder=tmp_path)


def test_a_section_written_as_a_mapping_and_a_schedule_in_set(tmp_path):
    """set: {train: {steps: 10}} was refused ("'steps' is not a dotted config key"), and a schedule
    under set was split into its own keys; both now reach the runs' configs."""
    raw = tiny_sweep_dict(tmp_path, grid={"objective.beta": [1.0]}, seeds=1)
    raw["set"] = {**raw["set"], "train": {"steps": 10, "lr": 3.0e-4},
                  "train.schedules": {"objective.beta": {"kind": "linear", "start": 0.0, "end": 4.0, "steps": 5}}}
    raw["set"].pop("train.steps", None)
    plan = sweep_from_dict(raw, source="s.yaml", folder=tmp_path)
    config = plan.runs[0].config
    assert (config["train"]["steps"], config["train"]["lr"]) == (10, 3.0e-4)
    assert config["train"]["schedules"]["objective.beta"]["end"] == 4.0


def test_a_run_ended_by_early_stopping_is_scored_where_it_stopped_and_says_why(tmp_path):
    path = write_sweep_file(tmp_path, grid={"objective.beta": [1.0]}, seeds=1, metrics=["mig"],
                            metric_settings=MIG_200, extra_set={
                                "train.callbacks": [{"name": "early_stopping", "monitor": "loss", "patience": 1,
                                                     "min_delta": 1.0e9}]})
    out = tmp_path / "out"
    report = api.run(path, out, workers=1, threads_per_run=1, log=None)
    (run_id,) = [r.run_id for r in report.plan.runs]
    record = json.loads((out / "runs" / run_id / "metrics.json").read_text())
    assert record["steps"] == 4 and "loss has not improved" in record["stop_reason"]  # checks at 2 and 4
    assert api.run(path, out, workers=1, log=None).to_run == 0  # ended, not partial
