"""``train.threads`` / ``--threads`` and OpenMP's wait policy: ``auto`` reads the CPUs this process
may use (affinity mask, cgroup quota, OMP_NUM_THREADS, torchrun's local processes), faked here; the
package sets a passive wait policy before torch is imported; a slowdown is reported."""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from disentangle._core import threads
from disentangle._core.threads import (
    ThreadChoice,
    cgroup_cpu_quota,
    check_threads_setting,
    choose_threads,
)
from disentangle.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("affinity", "quota", "environ", "threads", "why"), [
    (8, None, {}, 8, "auto: the"),                              # nothing restricts: every CPU
    (2, None, {}, 2, "auto: the"),
    (8, 2.0, {}, 2, "cgroup's CPU quota (2 CPUs; 8 in the affinity mask)"),
    (8, 1.5, {}, 2, "quota (1.5 CPUs"),                         # a fractional quota rounds up
    (8, 0.5, {}, 1, "quota (0.5 CPUs"),
    (4, 16.0, {}, 4, "auto: the"),                              # a quota above the mask does not raise it
    (8, 4.0, {"OMP_NUM_THREADS": "3"}, 3, "OMP_NUM_THREADS"),   # the user's variable wins
    (8, None, {"OMP_NUM_THREADS": "junk"}, 8, "auto: the"),     # an unusable one is ignored
    (8, None, {"LOCAL_WORLD_SIZE": "4"}, 2, "shared by 4 processes"),
    (2, None, {"LOCAL_WORLD_SIZE": "4"}, 1, "shared by 4 processes"),
])
def test_auto_uses_the_cpus_this_process_may_use(affinity, quota, environ, threads, why):
    choice = choose_threads("auto", affinity=affinity, quota=quota, environ=environ)
    assert choice.threads == threads
    assert why in choice.reason


def test_a_number_is_taken_as_given():
    assert choose_threads(3, affinity=1, quota=0.5, environ={"OMP_NUM_THREADS": "8"}) == ThreadChoice(3, "set")


@pytest.mark.parametrize("bad", [0, -1, "two", 1.5, True, None])
def test_bad_settings_are_refused_with_the_choices(bad):
    with pytest.raises(ConfigError, match="expected 'auto'.*positive number of threads"):
        check_threads_setting("train.threads", bad)
    assert check_threads_setting("x", "4") == 4 and check_threads_setting("x", "auto") == "auto"


def _cgroup_tree(tmp_path: Path, files: dict[str, str], self_cgroup: str) -> tuple[Path, Path]:
    root = tmp_path / "cgroup"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    proc = tmp_path / "self_cgroup"
    proc.write_text(self_cgroup)
    return root, proc


def test_cgroup_v2_quota_is_the_smallest_over_the_cgroup_and_its_ancestors(tmp_path):
    root, proc = _cgroup_tree(tmp_path, {
        "cpu.max": "max 100000\n",
        "job/cpu.max": "300000 100000\n",       # the parent: 3 CPUs
        "job/step/cpu.max": "max 100000\n",     # the process's own cgroup: no limit
    }, "0::/job/step\n")
    assert cgroup_cpu_quota(root, proc) == pytest.approx(3.0)


def test_cgroup_v2_without_a_limit_and_hybrid_hosts(tmp_path):
    root, proc = _cgroup_tree(tmp_path, {"cpu.max": "max 100000\n"}, "0::/\n")
    assert cgroup_cpu_quota(root, proc) is None
    root, proc = _cgroup_tree(tmp_path / "h", {"unified/cpu.max": "150000 100000\n"}, "1:cpu:/\n0::/\n")
    assert cgroup_cpu_quota(root, proc) == pytest.approx(1.5)


def test_cgroup_v1_quota(tmp_path):
    root, proc = _cgroup_tree(tmp_path, {
        "cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "50000\n",
        "cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000\n",
        "cpu,cpuacct/cpu.cfs_quota_us": "-1\n",
        "cpu,cpuacct/cpu.cfs_period_us": "100000\n",
    }, "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n")
    assert cgroup_cpu_quota(root, proc) == pytest.approx(0.5)


def test_unreadable_cgroups_mean_no_quota(tmp_path):
    assert cgroup_cpu_quota(tmp_path / "none", tmp_path / "missing") is None


def _python(code: str, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items()
               if k not in ("OMP_WAIT_POLICY", "DISENTANGLE_SET_OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")}
    proc = subprocess.run([sys.executable, "-c", code], env={**environ, **env, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120, check=True)
    return proc.stdout.strip()


REPORT = "import os; from disentangle._core.threads import wait_policy; print(os.environ.get('OMP_WAIT_POLICY'), wait_policy())"


def test_the_package_sets_a_passive_wait_policy_before_torch_starts_openmp():
    out = _python(f"import disentangle, torch; {REPORT}")
    assert out.startswith("PASSIVE ('passive', \"disentangle's default")


def test_a_users_wait_policy_is_kept():
    out = _python(f"import disentangle; {REPORT}", OMP_WAIT_POLICY="active")
    assert out.startswith("active ('active', 'OMP_WAIT_POLICY in the environment')")


def test_torch_imported_first_keeps_openmps_default_and_says_so():
    out = _python(f"import torch, disentangle; {REPORT}")
    assert out.startswith("None (\"OpenMP's default\", 'torch was imported before disentangle")


def test_a_users_spin_setting_is_kept_and_reported():
    out = _python(f"import disentangle; {REPORT}", GOMP_SPINCOUNT="10000")
    assert out.startswith("None ('GOMP_SPINCOUNT=10000', 'GOMP_SPINCOUNT in the environment')")


def test_a_run_records_its_threads_and_wait_policy(tmp_path, tiny_overrides):
    import torch

    from disentangle.config import load_config
    from disentangle.training.trainer import fit

    before = torch.get_num_threads()
    try:
        fit(load_config(None, tiny_overrides(tmp_path / "run", steps=2, **{"train.threads": 1})))
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    record = json.loads((tmp_path / "run/execution.jsonl").read_text().splitlines()[-1])
    assert record["threads"] == 1 and record["threads_reason"] == "set"
    from disentangle._core.threads import wait_policy

    assert (record["wait_policy"], record["wait_policy_reason"]) == wait_policy()


def test_threads_may_change_on_resume_and_are_not_part_of_a_run_id():
    from disentangle.config import Config
    from disentangle.sweep.ids import run_id

    a, b = Config().to_dict(), Config().to_dict()
    b["train"]["threads"] = 1
    assert run_id(a) == run_id(b)


def test_a_sweep_workers_thread_count_reaches_auto(monkeypatch):
    import torch

    from disentangle.sweep.runner import configure_worker

    before = torch.get_num_threads()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    try:
        configure_worker(1)
        assert os.environ["OMP_NUM_THREADS"] == "1"
        assert choose_threads("auto").threads == 1
    finally:
        torch.set_num_threads(before)


def test_a_slowdown_is_reported_once_and_again_after_a_recovery():
    import torch

    from disentangle.training.runtime import Execution
    from disentangle.training.trainer import _Session

    session = _Session(0, torch.device("cpu"))
    execution = Execution("cpu", "AVX512", "fp32", False, "", None, "", threads=2, threads_reason="auto: x",
                          wait_policy="active", wait_policy_reason="y")
    messages = [session.stall_message(rate, i, execution) for i, rate in enumerate([5, 10, 9, 2, 1.5, 9, 2])]
    assert [m is not None for m in messages] == [False, False, False, True, False, False, True]
    assert "slowed to 2 steps/s at step 3, from 10 steps/s" in messages[3]
    assert "train.threads=1" in messages[3] and "2 CPU threads (auto: x)" in messages[3]


@pytest.mark.parametrize("module", ["disentangle.evaluate", "disentangle.visualize"])
def test_cli_threads_option_refuses_bad_values_with_exit_2(module, tmp_path):
    proc = subprocess.run([sys.executable, "-m", module, str(tmp_path), "--threads", "0"], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "--threads is 0; expected 'auto'" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize(("affinity", "quota", "expected"), [(2, None, 2), (64, 2.0, 2), (64, 3.5, 4), (64, None, 8)])
def test_auto_test_workers_are_the_usable_cpus_at_most_eight(pytestconfig, monkeypatch, affinity, quota, expected):
    # the README's `pytest -n auto`: a container's quota lowers the count, a large machine is capped
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # not a count of CPUs: left out
    monkeypatch.setattr(threads, "affinity_cpus", lambda: affinity)
    monkeypatch.setattr(threads, "cgroup_cpu_quota", lambda: quota)
    assert pytestconfig.hook.pytest_xdist_auto_num_workers(config=pytestconfig) == expected


def test_auto_test_workers_follow_pytest_xdists_variable_where_it_is_set(pytestconfig, monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "3")
    assert pytestconfig.hook.pytest_xdist_auto_num_workers(config=pytestconfig) == 3


# ---------------------------------------------------------------------- more threads than CPUs
def _two_cpus(monkeypatch, cpus: int = 2) -> None:
    """This process may use ``cpus`` CPUs, whatever the machine has."""
    monkeypatch.setattr(threads, "affinity_cpus", lambda: cpus)
    monkeypatch.setattr(threads, "cgroup_cpu_quota", lambda: None)


def test_more_threads_than_cpus_are_warned_about_with_what_to_use(caplog):
    from disentangle._core.threads import warn_if_oversubscribed

    caplog.set_level(logging.WARNING, logger="disentangle")
    message = warn_if_oversubscribed(999, threads_option="train.threads=", affinity=2, quota=None)
    assert message.startswith("train.threads is 999, but this process may use 2 CPUs (")
    assert message.endswith("Use train.threads=2 or fewer, or train.threads=1 on CPUs shared with other jobs.")
    assert [r.getMessage() for r in caplog.records] == [message]
    message = warn_if_oversubscribed(8, threads_option="--threads-per-run ", processes=4, processes_option="--workers ",
                                     affinity=8, quota=2.5)
    assert message.startswith("--workers 4 × --threads-per-run 8 is 32 CPU threads, but this process may use 3 CPUs "
                              "(the cgroup's CPU quota (2.5 CPUs; 8 in the affinity mask))")
    assert message.endswith("Keep --workers × --threads-per-run at 3 or below, e.g. --workers 3 --threads-per-run 1.")
    caplog.clear()
    assert warn_if_oversubscribed(2, threads_option="train.threads=", affinity=2, quota=None) is None
    assert warn_if_oversubscribed(1, threads_option="--threads-per-run ", processes=8, processes_option="--workers ",
                                  affinity=8, quota=None) is None
    assert caplog.records == []


@pytest.mark.parametrize("how", ["config", "cli"])
def test_train_warns_about_more_threads_than_cpus(tmp_path, tiny_overrides, monkeypatch, capsys, caplog, how):
    import torch

    from disentangle.config import load_config
    from disentangle.train import main
    from disentangle.training.trainer import fit

    _two_cpus(monkeypatch, cpus=1)  # two threads (cheap here) on a process that may use one CPU
    caplog.set_level(logging.WARNING, logger="disentangle")
    before, package = torch.get_num_threads(), logging.getLogger("disentangle").level
    try:
        if how == "config":
            fit(load_config(None, tiny_overrides(tmp_path / "run", steps=2, **{"train.threads": 2})))
            shown = "\n".join(r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
        else:
            assert main([*tiny_overrides(tmp_path / "run", steps=2), "--config", "quickstart", "--threads", "2"]) == 0
            shown = capsys.readouterr().err
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
        logging.getLogger("disentangle").setLevel(package)
    assert "train.threads is 2, but this process may use 1 CPU (" in shown
    assert "Use train.threads=1 or fewer" in shown
    caplog.clear()
    fit(load_config(None, tiny_overrides(tmp_path / "auto", steps=2)))  # auto: what the process may use
    assert not any("CPU threads" in r.getMessage() or "may use" in r.getMessage() for r in caplog.records)


def test_a_sweep_warns_when_workers_times_threads_exceed_the_cpus(tmp_path, monkeypatch, capsys):
    from disentangle.sweep.__main__ import main

    _two_cpus(monkeypatch)
    package = logging.getLogger("disentangle").level
    try:
        out = tmp_path / "sweep"
        assert main(["run", "mini", "--out", str(out), "--workers", "4", "--threads-per-run", "8", "--dry-run"]) == 0
        err = capsys.readouterr().err
        assert "--workers 4 × --threads-per-run 8 is 32 CPU threads, but this process may use 2 CPUs (" in err
        assert "e.g. --workers 2 --threads-per-run 1." in err
        assert main(["run", "mini", "--out", str(out), "--workers", "3", "--dry-run"]) == 0  # one thread each: 3 > 2
        assert "--workers 3 × --threads-per-run 1 is 3 CPU threads" in capsys.readouterr().err
        for fitting in (["--workers", "2", "--threads-per-run", "1"], ["--workers", "2"], ["--threads-per-run", "2"]):
            assert main(["run", "mini", "--out", str(out), *fitting, "--dry-run"]) == 0
            assert "CPU threads" not in capsys.readouterr().err
        # three runs left, so --workers 8 starts three: 3 × 1 > 2 counts the runs, not the option
        few = tmp_path / "few.yaml"
        few.write_text("name: few\nbase: quickstart\ngrid:\n  - objective.beta: [1.0, 2.0, 3.0]\n")
        assert main(["run", str(few), "--out", str(out), "--workers", "8", "--dry-run"]) == 0
        assert "--workers 8 with 3 runs to do × --threads-per-run 1 is 3 CPU threads" in capsys.readouterr().err
        few.write_text("name: few\nbase: quickstart\ngrid:\n  - objective.beta: [1.0, 2.0]\n")
        assert main(["run", str(few), "--out", str(out), "--workers", "8", "--dry-run"]) == 0
        assert "CPU threads" not in capsys.readouterr().err
    finally:
        logging.getLogger("disentangle").setLevel(package)
    assert not out.exists()


def test_a_sweep_s_default_threads_per_run_honour_the_cgroup_quota(monkeypatch):
    """A container limited to 2 CPUs on a 16-CPU host: 2 workers get one thread each, not eight
    (the affinity mask alone shows the host's 16)."""
    from disentangle.sweep.backends.local import available_cores

    monkeypatch.setattr(threads, "affinity_cpus", lambda: 16)
    monkeypatch.setattr(threads, "cgroup_cpu_quota", lambda: 2.0)
    assert available_cores() == 2
    monkeypatch.setattr(threads, "cgroup_cpu_quota", lambda: None)
    assert available_cores() == 16
