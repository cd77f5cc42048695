"""``early_stopping`` on a metric score the run never records (the metric left out of
``train.eval_metrics``, ``train.eval_every: 0``, an alias where scores are recorded under the metric's
name) is refused before the run folder exists, with the fix; it used to train to the last step."""
from __future__ import annotations

import pytest

from disentangle.config import load_config
from disentangle.errors import ConfigError
from disentangle.training import fit
from disentangle.training.callbacks import EarlyStopping

pytestmark = pytest.mark.usefixtures("one_thread")


def _stopper(monitor: str) -> str:
    return f"[{{name: early_stopping, monitor: {monitor}, mode: max, patience: 1}}]"


@pytest.mark.parametrize("monitor, extra, fragments", [
    ("metrics/mig/mig", {},
     ["train.eval_metrics is empty; train.eval_every is 0 (no evaluation during training)",
      "To stop on mig, set train.eval_metrics=[mig] and set train.eval_every=N"]),
    ("metrics/mig/mig", {"train.eval_metrics": "[sap_score]", "train.eval_every": 4},
     ["mig is not in train.eval_metrics [sap_score]", "set train.eval_metrics=[sap_score, mig]"]),
    ("metrics/mig/mig", {"train.eval_metrics": "[mig]"},
     ["train.eval_every is 0 (no evaluation during training)", "set train.eval_every=N"]),
    ("metrics/sap/sap", {"train.eval_metrics": "[sap]", "train.eval_every": 4},
     ["scores are recorded under the metric's name, 'sap_score' ('sap' is its alias)",
      "To stop on sap_score, monitor metrics/sap_score/sap"]),
    ("metrics/modularity/modularity", {"train.eval_metrics": "[mig]", "train.eval_every": 4},
     ["'modularity_explicitness' ('modularity' is its alias); modularity_explicitness is not in train.eval_metrics",
      "monitor metrics/modularity_explicitness/modularity and set train.eval_metrics=[mig, modularity_explicitness]"]),
    ("metrics/mgi/mig", {"train.eval_metrics": "[mig]", "train.eval_every": 4},
     ["but 'mgi' is not a metric. Did you mean 'mig'?"]),
    ("metrics/mig", {"train.eval_metrics": "[mig]", "train.eval_every": 4},
     ["which is not a metric score: a score is monitored as metrics/<metric>/<score>"]),
])
def test_a_metric_score_the_run_never_records_is_refused_before_the_run_folder(
        tmp_path, tiny_overrides, monitor, extra, fragments):
    out = tmp_path / "run"
    config = load_config(None, tiny_overrides(out, steps=8, **{"train.callbacks": _stopper(monitor), **extra}))
    with pytest.raises(ConfigError) as err:
        fit(config)
    message = str(err.value)
    assert message.startswith(f"early_stopping monitors '{monitor}'")
    for fragment in fragments:
        assert fragment in message
    assert not out.exists()


def test_an_early_stopping_of_ones_own_is_checked_too(tmp_path, tiny_overrides):
    out = tmp_path / "run"
    config = load_config(None, tiny_overrides(out, steps=8))
    with pytest.raises(ConfigError, match="train.eval_metrics is empty"):
        fit(config, callbacks=[EarlyStopping(monitor="metrics/dci/disentanglement")])
    assert not out.exists()


def test_a_metric_score_the_run_records_passes_and_stops_the_run(tmp_path, tiny_overrides):
    # an alias in train.eval_metrics records its scores under the metric's name, which is monitored
    for metric, monitor in (("mig", "metrics/mig/mig"), ("sap", "metrics/sap_score/sap")):
        config = load_config(None, tiny_overrides(tmp_path / "x", steps=8, **{
            "train.eval_metrics": f"[{metric}]", "train.eval_every": 100}))
        EarlyStopping(monitor=monitor).check_config(config)
    # a logged term is not checked here (the objective decides its terms)
    EarlyStopping(monitor="recon").check_config(load_config(None, tiny_overrides(tmp_path / "x", steps=8)))
    stopper = EarlyStopping(monitor="metrics/mig/mig", mode="max", patience=1, min_delta=10.0)
    overrides = tiny_overrides(tmp_path / "run", steps=12, **{"train.eval_metrics": "[mig]", "train.eval_every": 4})
    assert fit(load_config(None, overrides), callbacks=[stopper]).step == 8


def test_a_score_that_is_not_a_headline_one_is_warned_about_before_training(tmp_path, tiny_overrides, caplog):
    """A misspelt score is known only once the metric runs (its other scores depend on the data), so
    the run is warned before it trains, and stopped with the logged scores at the first evaluation."""
    import logging

    caplog.set_level(logging.WARNING, logger="disentangle")
    extra = {"train.eval_metrics": "[mig]", "train.eval_every": 4}
    config = load_config(None, tiny_overrides(tmp_path / "a", steps=8, **{
        "train.callbacks": _stopper("metrics/mig/mgi"), **extra}))
    with pytest.raises(Exception, match="monitors 'metrics/mig/mgi', which this run does not log; it logs ") as err:
        fit(config)
    assert "metrics/mig/mig" in str(err.value)
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.startswith("early_stopping monitors 'metrics/mig/mgi': 'mgi' is not one of mig's headline scores "
                              "(mig). Did you mean 'mig'? If it is another score mig logs")
    assert "at its first evaluation, at step 4. To stop on the headline score, monitor metrics/mig/mig." in warning
    caplog.clear()
    fit(load_config(None, tiny_overrides(tmp_path / "b", steps=8, **{
        "train.callbacks": _stopper("metrics/mig/mig"), **extra})))
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]
