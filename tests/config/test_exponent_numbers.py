"""Whole numbers in exponent form: YAML 1.1 reads ``3e5`` (no dot, no exponent sign) as text, so a
key that expects an integer takes such text as the integer it writes, and refuses one that is not
whole (``3.5e0``) with the integers around it."""
from __future__ import annotations

import pytest

from disentangle.config import load_config
from disentangle.errors import ConfigError
from disentangle.sweep.grid import load_sweep


def test_a_whole_number_in_exponent_form_is_an_integer(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("train:\n  steps: 3e5\n  eval_every: 1E3\n  checkpoint_every: 2.5e4\nmodel:\n  latent_dim: 1e1\n")
    config = load_config(path, ["train.log_every=5e2", "train.threads=1e0"])
    train = config.train
    assert (train.steps, train.eval_every, train.checkpoint_every, train.log_every, train.threads) == (
        300_000, 1000, 25_000, 500, 1)
    assert all(type(v) is int for v in (train.steps, train.eval_every, train.log_every, config.model.latent_dim))
    assert config.train.lr == 1e-4 and load_config(path, ["train.lr=3e-4"]).train.lr == 3e-4  # floats as before


@pytest.mark.parametrize("override, around", [("train.steps=3.5e0", "3 or 4"), ("train.threads=2.5e0", "2 or 3"),
                                              ("model.latent_dim=1e-1", "0 or 1")])
def test_a_number_in_exponent_form_that_is_not_whole_is_refused(override, around):
    key = override.split("=")[0]
    with pytest.raises(ConfigError) as err:
        load_config(None, [override])
    message = str(err.value)
    assert f"Config key '{key}': '{override.split('=')[1]}' is not a whole number; give an integer (e.g. {around}" in message
    assert "wrong type" not in message


def test_other_text_for_an_integer_is_still_the_wrong_type():
    with pytest.raises(ConfigError, match="'train.steps' has the wrong type: given 'lots' \\(str\\), expected int"):
        load_config(None, ["train.steps=lots"])


def test_a_sweeps_metric_settings_take_exponent_form(tmp_path):
    path = tmp_path / "sweep.yaml"
    text = ("base: quickstart\nset: {train.steps: 2e1}\nseeds: 1\nmetrics: [mig, sap]\n"
            "metric_settings: {mig: {num_train: 5e2, num_bins: 2E1}, sap: {num_train: 1e3}}\n")
    path.write_text(text)
    plan = load_sweep(path)
    assert plan.metric_settings == {"mig": {"num_train": 500, "num_bins": 20}, "sap_score": {"num_train": 1000}}
    assert type(plan.metric_settings["mig"]["num_train"]) is int
    path.write_text(text.replace("num_train: 5e2", "num_train: 5.5e2"))  # 550: whole
    assert load_sweep(path).metric_settings["mig"]["num_train"] == 550
    path.write_text(text.replace("num_train: 5e2", "num_train: 2.25e1"))
    with pytest.raises(ConfigError, match=r"'metric_settings.mig': num_train is '2.25e1', which is not a whole "
                                          r"number; give an integer \(e.g. 22 or 23"):
        load_sweep(path)


def test_a_sweeps_float_metric_settings_take_exponent_form(tmp_path):
    """``diff_quantile: 5e-1`` (YAML 1.1 reads an exponent form without a dot as text) was refused as
    "must be a number"; it is the float it writes now, and still checked against its range."""
    from disentangle._core import checks

    assert checks.in_range("diff_quantile", "5e-1", 0.0, 1.0) == 0.5
    assert checks.positive("lr", "1e-3") == pytest.approx(1e-3)
    with pytest.raises(ConfigError, match="must be a positive number, got '1e-3x'"):
        checks.positive("lr", "1e-3x")
    path = tmp_path / "sweep.yaml"
    text = "base: quickstart\nset: {train.steps: 2e1}\nseeds: 1\nmetrics: [irs]\nmetric_settings: {irs: {diff_quantile: 9e-1}}\n"
    path.write_text(text)
    assert load_sweep(path).metric_settings == {"irs": {"diff_quantile": 0.9}}
    path.write_text(text.replace("9e-1", "2e0"))
    with pytest.raises(ConfigError, match="diff_quantile"):
        load_sweep(path)


def test_an_exponent_beyond_float64_is_refused_by_the_range_checks_not_a_crash():
    """'1e400' is no int of 401 digits and no OverflowError: it is inf, which a bounded setting refuses."""
    from disentangle._core import checks
    from disentangle.errors import ParameterError

    assert checks.exponent_number("1e400") == float("inf") and checks.exponent_number("-1e400") == float("-inf")
    assert checks.exponent_number("1e23") == 10**23  # whole numbers in float64's range stay exact
    with pytest.raises(ParameterError, match=r"q must be in \[0, 1\], got '1e400'"):
        checks.in_range("q", "1e400", 0, 1)
    with pytest.raises(ParameterError, match=r"steps is '1e400', which is not a whole number; give an integer \(3e5"):
        checks.integer("steps", "1e400")
