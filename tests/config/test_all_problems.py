"""A config with several problems reports every one of them, in one ConfigError paragraph, before
anything is created: unknown keys of every section (each with its did-you-mean and the valid keys)
and bad values."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from disentangle.config import load_config
from disentangle.data.labels import LabelsSpec
from disentangle.errors import ConfigError, ParameterError

REPO = Path(__file__).resolve().parents[2]

#: two unknown keys in different sections and one bad value
THREE_PROBLEMS = """\
data:
  name: sprites
model:
  backbone: conv64
  latent_dim: 4
objective:
  name: beta_vae
  beta: -1
  reconstrution: bernoulli
train:
  batchsize: 32
  steps: 10
  out_dir: {out}
"""

#: what each of the three problems says
FRAGMENTS = [
    "Unknown key 'objective.reconstrution'", "Did you mean 'reconstruction'?",
    "Valid keys in 'objective' for 'beta_vae': name, beta, reconstruction",
    "Unknown key 'train.batchsize'", "Did you mean 'batch_size'?", "Valid keys in 'train':",
    "objective.beta must be a non-negative number",
]


def _write(tmp_path: Path) -> Path:
    path = tmp_path / "three.yaml"
    path.write_text(THREE_PROBLEMS.format(out=tmp_path / "run"))
    return path


def test_every_problem_of_a_file_is_reported_in_one_error(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path))
    message = str(err.value)
    assert message.startswith("The config has 3 problems")
    assert all(f"({n})" in message for n in (1, 2, 3)) and "(4)" not in message
    for fragment in FRAGMENTS:
        assert fragment in message, (fragment, message)
    assert "\n" not in message
    assert not (tmp_path / "run").exists()


def test_the_cli_reports_them_all_and_exits_2(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run(
        [sys.executable, "-m", "disentangle.train", "--config", str(_write(tmp_path))],
        capture_output=True, text=True, env=env, timeout=300, cwd=REPO,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.startswith("error: The config has 3 problems") and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    for fragment in FRAGMENTS:
        assert fragment in proc.stderr, (fragment, proc.stderr)
    assert not (tmp_path / "run").exists()


def test_model_latent_dims_suggests_latent_dim():
    with pytest.raises(ConfigError) as err:
        load_config(None, ["model.latent_dims=8"])
    message = str(err.value)
    assert "Unknown key 'model.latent_dims'" in message and "Did you mean 'latent_dim'?" in message
    assert "Valid keys in 'model' for 'conv64': backbone, latent_dim, init" in message


def test_one_problem_keeps_its_own_error_and_wording():
    with pytest.raises(ParameterError) as err:  # not wrapped: its class and message as before
        load_config(None, ["train.batch_size=0"])
    assert str(err.value) == "train.batch_size must be an integer >= 1, got 0."
    with pytest.raises(ConfigError) as err:
        load_config(None, ["objective.beta=-1"])
    assert str(err.value) == "objective.beta must be a non-negative number (>= 0), got -1.0. (in objective 'beta_vae')"


def test_problems_of_every_section_and_value_are_collected():
    overrides = [
        "seed=x", "sede=1", "data.sizee=3", "model.latent_dim=0", "model.init=glorot", "objective.bta=2",
        "train.steps=0", "train.lr=fast", "train.device=gpu", "train.eval_metrics=[mig, migg]",
    ]
    with pytest.raises(ConfigError) as err:
        load_config(None, overrides)
    message = str(err.value)
    expected = [
        "Config key 'seed' has the wrong type", "Unknown config section 'sede'", "Did you mean 'seed'?",
        "Unknown key 'data.sizee'", "model.latent_dim must be a positive integer", "model.init is 'glorot'",
        "Unknown key 'objective.bta'", "Did you mean 'beta'?", "train.steps must be an integer >= 1",
        "Config key 'train.lr' has the wrong type", "train.device is 'gpu'", "unknown metric 'migg'",
    ]
    assert message.startswith("The config has 10 problems"), message
    for fragment in expected:
        assert fragment in message, (fragment, message)
    assert "\n" not in message


def test_a_bad_value_of_one_key_is_not_reported_again_as_missing_or_invalid():
    # the bad type of train.steps leaves its default in place: no second complaint about train.steps
    with pytest.raises(ConfigError) as err:
        load_config(None, ["train.steps=many", "train.batchsize=3"])
    message = str(err.value)
    assert message.startswith("The config has 2 problems") and message.count("train.steps") == 1


def test_an_unknown_name_stops_only_its_own_section():
    with pytest.raises(ConfigError) as err:
        load_config(None, ["objective.name=beta_vea", "objective.bta=2", "train.stpes=3"])
    message = str(err.value)
    assert message.startswith("The config has 2 problems")  # objective.bta cannot be checked against no objective
    assert "Unknown objective 'beta_vea'" in message and "Did you mean 'steps'?" in message


def test_labels_report_every_problem_too():
    with pytest.raises(ConfigError) as err:
        LabelsSpec.from_dict({"num_labeled": 10, "labeller": "perfekt", "noise": 2})
    message = str(err.value)
    assert message.startswith("data.labels has 3 problems")
    assert "Did you mean 'num_labelled'?" in message and "Did you mean 'perfect'?" in message and "data.labels.noise" in message
    with pytest.raises(ConfigError) as err:
        load_config(None, ["data.labels={num_labeled: 10}", "train.batchsize=3"])
    assert str(err.value).startswith("The config has 2 problems") and "num_labelled" in str(err.value)
