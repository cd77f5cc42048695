"""Every command line checks where it will write before it works, and reads text files as text.

A read-only destination (a read-only mount, another user's folder) used to surface as a traceback
after the training, the scores or the analysis were done; a checkpoint given where a config goes as
a UnicodeDecodeError. Tests run as root here, where permissions do not stop a write, so a read-only
folder is simulated where the check probes it (``tempfile.mkstemp`` in
:mod:`disentangle._core.writable`), and each command is asserted to stop before its work.
"""
from __future__ import annotations

import errno
import json
import logging
import tempfile
from pathlib import Path

import pytest

from disentangle._core import writable
from disentangle.config import load_config
from disentangle.errors import ConfigError
from disentangle.training.trainer import fit

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def read_only(monkeypatch):
    """``read_only(folder)``: creating a file in ``folder`` or below fails as on a read-only mount."""
    blocked: list[Path] = []
    real = tempfile.mkstemp

    def mkstemp(*args, dir=None, **kwargs):
        if dir is not None and any(Path(dir) == b or b in Path(dir).parents for b in blocked):
            raise OSError(errno.EROFS, "Read-only file system", str(dir))
        return real(*args, dir=dir, **kwargs)

    monkeypatch.setattr(writable.tempfile, "mkstemp", mkstemp)

    def block(folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        blocked.append(folder)
        return folder
    return block


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, tiny_overrides):
    run = tmp_path_factory.mktemp("destinations") / "run"
    fit(load_config(None, tiny_overrides(run, steps=2)))
    return run


def _one_paragraph(capsys, *needles: str) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith("error: ") and err.count("\n") == 1, err
    for needle in needles:
        assert needle in err, (needle, err)
    return err


def test_the_probe_finds_files_in_the_way_and_leaves_nothing(tmp_path, read_only):
    assert writable.unwritable_reason(tmp_path / "new" / "deeper") is None
    assert list(tmp_path.iterdir()) == []  # the probe file is gone, no folder was made
    a_file = tmp_path / "f"
    a_file.write_text("x")
    assert writable.unwritable_reason(a_file) == "it is a file"
    assert writable.unwritable_reason(a_file / "sub") == f"'{a_file}' is a file"
    ro = read_only(tmp_path / "ro")
    assert "Read-only file system" in writable.unwritable_reason(ro)
    reason = writable.unwritable_reason(ro / "a" / "b")
    assert f"no file can be created in '{ro}'" in reason and "the folder it would be created in" in reason
    with pytest.raises(ConfigError, match=r"--out 'x' cannot be written: .*Nothing was done\. .*e\.g\. --out y"):
        writable.check_writable(ro, "--out 'x'", "--out y")


def test_the_file_in_the_way_of_a_folder_is_the_nearest_existing_path_when_it_is_a_file(tmp_path, monkeypatch):
    a_file = tmp_path / "f"
    a_file.write_text("x")
    assert writable.file_in_the_way(a_file) == a_file
    assert writable.file_in_the_way(a_file / "a" / "b") == a_file
    assert writable.file_in_the_way(tmp_path) is None
    assert writable.file_in_the_way(tmp_path / "new" / "deeper") is None
    # a folder below a file that cannot be looked into: nothing to say (the command's mkdir reports it)
    real_exists = Path.exists

    def exists(path, *args, **kwargs):
        if path == tmp_path / "locked":
            raise PermissionError(13, "Permission denied")
        return real_exists(path, *args, **kwargs)

    monkeypatch.setattr(Path, "exists", exists)
    assert writable.file_in_the_way(tmp_path / "locked" / "run") is None


@pytest.mark.parametrize("check", ["train", "sweep", "zoo"])
def test_every_command_names_the_file_in_the_way_of_its_folder(check, tmp_path):
    from disentangle.sweep.api import check_out_dir as sweep_check
    from disentangle.training.trainer import check_out_dir as train_check
    from disentangle.zoo.publish import check_output_paths

    a_file = tmp_path / "f"
    a_file.write_text("x")
    folder = a_file / "runs" / "x"
    call, needle = {
        "train": (lambda: train_check(folder), f"is inside '{a_file}', which is a file"),
        "sweep": (lambda: sweep_check(folder), f"lies under '{a_file}', which is a file"),
        "zoo": (lambda: check_output_paths(folder / "manifest.json", tmp_path / "w"), f"'{a_file}' is a file"),
    }[check]
    with pytest.raises(ConfigError) as raised:
        call()
    assert needle in str(raised.value)
    assert a_file.read_text() == "x" and sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_train_refuses_a_read_only_run_folder_before_building_anything(tmp_path, read_only, capsys, tiny_overrides,
                                                                       monkeypatch):
    from disentangle import train
    from disentangle.training import trainer as trainer_module

    def never(*args, **kwargs):
        raise AssertionError("the dataset was built")

    monkeypatch.setattr(trainer_module, "build_dataset", never)
    ro = read_only(tmp_path / "ro")
    assert train.main(["--config", "quickstart", *tiny_overrides(ro / "run", steps=2)]) == 2
    _one_paragraph(capsys, f"train.out_dir '{ro / 'run'}' cannot be written", "Read-only file system",
                   "train.out_dir=runs/NAME")
    assert list(ro.iterdir()) == []


def test_evaluate_refuses_a_read_only_output_before_loading(run_dir, tmp_path, read_only, capsys, monkeypatch):
    import disentangle.evaluate as evaluate_module

    def never(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(evaluate_module, "_load_run", never)
    ro = read_only(tmp_path / "ro")
    assert evaluate_module.main([str(run_dir), "-m", "mig", "-o", str(ro / "m.json"), "--no-progress"]) == 2
    _one_paragraph(capsys, f"--output '{ro / 'm.json'}' cannot be written", "Read-only file system")
    # the default output, beside the run's own files
    read_only(run_dir)
    assert evaluate_module.main([str(run_dir), "-m", "mig", "--no-progress"]) == 2
    _one_paragraph(capsys, "(the default without --output)", "cannot be written")


def test_visualize_refuses_a_read_only_folder_before_loading(run_dir, tmp_path, read_only, capsys, monkeypatch):
    from disentangle.visualize import __main__ as visualize_main

    def never(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(visualize_main, "_load", never)
    ro = read_only(tmp_path / "ro")
    assert visualize_main.main([str(run_dir), "-w", "samples", "-o", str(ro / "pics")]) == 2
    _one_paragraph(capsys, f"--out '{ro / 'pics'}' cannot be written", "--out pictures/NAME")
    assert not (ro / "pics").exists()


def _sweep_file(tmp_path) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(  # a dataset the sweep's worker processes know (the tiny one is this process's)
        "name: s\nbase: quickstart\n"
        "set: {data.name: sprites, model.backbone: mlp, model.hidden_sizes: [16], train.steps: 2, "
        "train.batch_size: 8, train.device: cpu, train.progress: false, train.traversals: false}\n"
        "seeds: [0]\nmetrics: []\n"
    )
    return path


def test_sweep_refuses_read_only_folders_before_planning(tmp_path, read_only, capsys):
    from disentangle.sweep.__main__ import main

    ro = read_only(tmp_path / "ro")
    assert main(["run", str(_sweep_file(tmp_path)), "--out", str(ro / "sw")]) == 2
    _one_paragraph(capsys, f"The sweep folder '{ro / 'sw'}' (--out) cannot be written", "--out sweeps/NAME")
    assert list(ro.iterdir()) == []


def test_sweep_results_checks_its_output(tmp_path, read_only, capsys):
    from disentangle.sweep.__main__ import main

    out = tmp_path / "sw"
    assert main(["run", str(_sweep_file(tmp_path)), "--out", str(out)]) == 0
    capsys.readouterr()
    folder = tmp_path / "tables"
    folder.mkdir()
    assert main(["results", str(out), "--output", str(folder)]) == 2
    _one_paragraph(capsys, f"--output '{folder}' is a folder", f"--output {folder / 'results.csv'}")
    read_only(out)
    assert main(["results", str(out)]) == 2
    _one_paragraph(capsys, "(the default without --output)", "--output results.csv")
    assert main(["results", str(out), "--output", str(folder / "r.csv")]) == 0  # elsewhere: written
    assert (folder / "r.csv").read_text().startswith("run_id")


def _scored_sweep(root: Path, columns: str, rows: list[str]) -> Path:
    sweep = root / "sweep"
    (sweep / "runs").mkdir(parents=True)
    (sweep / "results.csv").write_text("\n".join([columns, *rows]) + "\n")
    return sweep


def test_study_refuses_before_writing_the_report(tmp_path, read_only, capsys):
    from disentangle.study.__main__ import main

    sweep = _scored_sweep(tmp_path, "run_id,status,objective.name,objective.beta,seed,mig.mig",
                          ["a,finished,beta_vae,1,0,0.1", "b,finished,beta_vae,4,0,0.2",
                           "c,finished,beta_tcvae,1,0,0.3", "d,finished,beta_tcvae,4,0,0.25"])
    ro = read_only(tmp_path / "ro")
    assert main([str(sweep), "--out", str(ro / "report"), "--no-figures", "--no-progress"]) == 2
    _one_paragraph(capsys, f"--out '{ro / 'report'}' cannot be written", "--out reports/NAME")
    # U/S selection by a score the sweep lacks, and ModelCentrality without finished runs: refused first
    report = tmp_path / "report"
    assert main([str(sweep), "--out", str(report), "--no-figures", "--no-progress", "--few-labels", "dci"]) == 2
    err = _one_paragraph(capsys, "full-label score 'dci.disentanglement'", "Its score columns: mig.mig")
    assert "objective.beta" not in err
    assert main([str(sweep), "--out", str(report), "--no-figures", "--no-progress", "--centrality"]) == 2
    _one_paragraph(capsys, "ModelCentrality (--centrality) compares runs", "0 finished run(s)")
    assert not report.exists()


def test_zoo_publish_refuses_a_read_only_manifest_before_scoring(run_dir, tmp_path, read_only, capsys, monkeypatch):
    from disentangle.zoo import __main__ as zoo_main
    from disentangle.zoo import publish as publish_module

    ro = read_only(tmp_path / "ro")
    assert zoo_main.main(["publish", str(run_dir), "--name", "mine-s0", "--manifest", str(ro / "manifest.json"),
                          "--url", "https://example.org/w.safetensors", "--metrics", "mig"]) == 2
    _one_paragraph(capsys, f"--manifest '{ro / 'manifest.json'}' cannot be written")
    assert list(ro.iterdir()) == []
    del publish_module


@pytest.mark.parametrize("command", ["train", "sweep", "study", "visualize"])
def test_a_binary_file_where_text_goes_is_named_as_such(command, run_dir, tmp_path, capsys):
    checkpoint = run_dir / "checkpoint.pt"
    if command == "train":
        from disentangle.train import main
        args = ["--config", str(checkpoint)]
    elif command == "sweep":
        from disentangle.sweep.__main__ import main
        args = ["run", str(checkpoint), "--dry-run", "--out", str(tmp_path / "sw")]
    elif command == "study":
        from disentangle.study.__main__ import main
        renamed = tmp_path / "results.csv"
        renamed.write_bytes(checkpoint.read_bytes())
        checkpoint = renamed
        args = [str(renamed), "--out", str(tmp_path / "report"), "--no-progress"]
    else:
        from disentangle.visualize.__main__ import main
        args = [str(run_dir), "-w", "metrics", "--metrics", str(checkpoint), "-o", str(tmp_path / "pics")]
    assert main(args) == 2
    _one_paragraph(capsys, f"'{checkpoint}' is not a text file (it starts as a zip archive", "is not UTF-8 text")


def test_evaluate_given_a_runs_text_file_points_at_the_run(run_dir, capsys):
    from disentangle.evaluate import main

    for name in ("config.yaml", "log.jsonl"):
        assert main([str(run_dir / name), "-m", "mig", "--no-progress"]) == 2
        err = _one_paragraph(capsys, f"'{run_dir / name}' is a text file, not a checkpoint",
                             f"Pass the run folder, '{run_dir}'")
        assert "weights_only" not in err


def test_an_override_that_changes_a_component_starts_its_section_afresh(caplog):
    with caplog.at_level(logging.WARNING, logger="disentangle.config.sources"):
        config = load_config("quickstart", ["objective.name=factor_vae", "objective.gamma=10"])
    assert config.objective.name == "factor_vae" and config.objective.params["gamma"] == 10.0
    assert "beta" not in config.objective.params
    assert "objective.name=factor_vae replaces the config's objective" in caplog.text
    assert "objective.beta=4" in caplog.text and "objective.gamma" not in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="disentangle.config.sources"):
        same = load_config("quickstart", ["objective.name=beta_vae"])  # the same name: nothing starts afresh
    assert same.objective.params["beta"] == load_config("quickstart", []).objective.params["beta"]
    assert caplog.text == ""
    assert json.loads(json.dumps(config.to_dict()))["objective"]["name"] == "factor_vae"
