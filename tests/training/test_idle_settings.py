"""A setting that does nothing because another is off (``train.eval_metrics`` with
``train.eval_every: 0``, ``eval_every`` without metrics, ``image_every`` without TensorBoard) is
named in a warning when the run starts; it used to do nothing, silently."""
from __future__ import annotations

import logging

import pytest

from disentangle.config import load_config
from disentangle.training import fit
from disentangle.training.cadence import idle_settings

pytestmark = pytest.mark.usefixtures("one_thread")


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and r.name == "disentangle.training.trainer"]


def test_settings_that_do_nothing_are_warned_about_at_the_start(tmp_path, tiny_overrides, caplog):
    caplog.set_level(logging.WARNING, logger="disentangle")
    fit(load_config(None, tiny_overrides(tmp_path / "a", steps=2, **{"train.eval_metrics": "[mig, sap]"})))
    (message,) = _warnings(caplog)
    assert message.startswith("train.eval_metrics is [mig, sap], but train.eval_every is 0, so they are never "
                              "evaluated during training. Set train.eval_every=N")
    assert not any("metrics" in line for line in (tmp_path / "a" / "log.jsonl").read_text().splitlines())
    caplog.clear()
    fit(load_config(None, tiny_overrides(tmp_path / "b", steps=2, **{"train.eval_every": 1000})))
    (message,) = _warnings(caplog)
    assert message.startswith("train.eval_every is 1,000, but train.eval_metrics is empty, so nothing is evaluated")
    assert "train.eval_metrics=[mig], or set train.eval_every=0" in message
    caplog.clear()
    config = load_config(None, tiny_overrides(tmp_path / "c", steps=2))
    config.train.image_every = 1  # YAML refuses this; a config changed in Python gets it
    fit(config)
    (message,) = _warnings(caplog)
    assert message.startswith("train.image_every is 1, but train.tensorboard is false")
    assert "Set train.tensorboard=true, or train.image_every=0." in message


def test_settings_that_take_effect_give_no_warning(tmp_path, tiny_overrides, caplog):
    caplog.set_level(logging.WARNING, logger="disentangle")
    config = load_config(None, tiny_overrides(tmp_path / "a", steps=2, **{
        "train.eval_metrics": "[mig]", "train.eval_every": 2}))
    assert idle_settings(config.train) == [] and idle_settings(load_config(None, []).train) == []
    fit(config)
    assert _warnings(caplog) == []


def test_a_resumed_run_is_warned_only_about_what_the_resume_changed(tmp_path, tiny_overrides, caplog):
    """A run resumed session after session hears about an idle setting once, at its start; a resume
    that makes a setting idle is warned about it."""
    caplog.set_level(logging.WARNING, logger="disentangle")
    run = tmp_path / "run"
    fit(load_config(None, tiny_overrides(run, steps=2, **{"train.eval_metrics": "[mig]"})))
    assert len(_warnings(caplog)) == 1
    caplog.clear()
    fit(load_config(None, tiny_overrides(run, steps=4, **{"train.eval_metrics": "[mig]"})), resume=True)
    assert _warnings(caplog) == []
    fit(load_config(None, tiny_overrides(run, steps=6, **{"train.eval_metrics": "[mig]", "train.eval_every": 1000,
                                                           "train.tensorboard": "false"})), resume=True)
    assert _warnings(caplog) == []  # eval_every now takes effect: nothing idle
    fit(load_config(None, tiny_overrides(run, steps=8, **{"train.eval_every": 1000})), resume=True)
    (message,) = _warnings(caplog)
    assert message.startswith("train.eval_every is 1,000, but train.eval_metrics is empty")
