"""One name per metric: the registry name, in Python and on the CLI, with a few short aliases.

``disentangle.metrics.NAME`` is the metric registered as ``NAME`` for every registered name and
alias (never the module that implements it: ``from disentangle.metrics import sap`` is
``sap_score``), ``python -m disentangle.evaluate -m NAME`` accepts the same names, and an alias
resolves to its metric's name wherever scores are recorded, so the result keys do not change.
"""
from __future__ import annotations

import importlib
import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

import disentangle.metrics
from disentangle.errors import ConfigError, UnknownNameError
from disentangle.metrics import (
    METRICS,
    evaluate_metrics,
    metric_spec,
    register_metric,
    resolve_metric_names,
    validate_settings,
)

from .test_common import dataset, perfect

ROOT = Path(__file__).resolve().parents[2]

#: the short aliases (each the name of the module that implements its metric)
ALIASES = {
    "beta_vae": "beta_vae_score",
    "downstream": "downstream_task",
    "factor_vae": "factor_vae_score",
    "modularity": "modularity_explicitness",
    "reduced_downstream": "reduced_downstream_task",
    "sap": "sap_score",
    "strong_downstream": "strong_downstream_task",
    "unsupervised": "unsupervised_scores",
}

#: the metrics of the package itself (other tests may register private ones)
PACKAGE_METRICS = [name for name in METRICS.names() if not name.startswith("_")]


def test_the_registry_knows_the_aliases_and_lists_only_the_metric_names():
    assert METRICS.aliases() == ALIASES
    assert not set(ALIASES) & set(METRICS.names())  # names() (what "all" runs) holds no alias
    for alias, name in ALIASES.items():
        assert alias in METRICS
        assert METRICS.get(alias) is METRICS.get(name)
        assert METRICS.canonical(alias) == name
        assert METRICS.canonical(name) == name
    with pytest.raises(UnknownNameError, match="Did you mean 'sap'"):
        METRICS.get("sapp")
    with pytest.raises(UnknownNameError, match="Did you mean 'sap'"):
        METRICS.canonical("sapp")


@pytest.mark.parametrize("name", PACKAGE_METRICS + sorted(ALIASES))
def test_every_metric_name_and_alias_is_the_package_attribute_of_that_name(name):
    attribute = getattr(disentangle.metrics, name)
    assert not inspect.ismodule(attribute)
    assert callable(attribute)
    assert attribute is METRICS.get(name)


def test_from_disentangle_metrics_import_sap_is_sap_score():
    from disentangle.metrics import beta_vae, factor_vae, modularity, sap, sap_score

    assert callable(sap) and sap is sap_score
    assert beta_vae is disentangle.metrics.beta_vae_score
    assert factor_vae is disentangle.metrics.factor_vae_score
    assert modularity is disentangle.metrics.modularity_explicitness
    assert sap.__name__ == "sap_score"  # one name: the function is the registered metric


def test_no_package_attribute_is_the_module_of_a_metric():
    modules = {METRICS.get(name).__module__ for name in PACKAGE_METRICS}
    shadowed = [
        name for name, value in vars(disentangle.metrics).items()
        if inspect.ismodule(value) and value.__name__ in modules
    ]
    assert not shadowed, f"disentangle.metrics.{shadowed[0]} is a module, not a metric"
    # the attribute named after a metric's module is that metric (an alias replaces no other module)
    for name in PACKAGE_METRICS:
        module_name = METRICS.get(name).__module__.rsplit(".", 1)[-1]
        assert getattr(disentangle.metrics, module_name) is METRICS.get(name), module_name
    for alias, name in ALIASES.items():
        module = sys.modules.get(f"disentangle.metrics.{alias}")
        assert module is None or module.__name__ == METRICS.get(name).__module__, alias


def test_the_implementation_modules_stay_importable_by_their_paths():
    """A fresh interpreter importing a metric's module by path first: the module imports, and the
    package attribute is still the metric (importing a submodule would otherwise set it)."""
    code = (
        "import importlib, inspect\n"
        "from disentangle.metrics.sap import sap_from_score_matrix\n"
        "from disentangle.metrics.modularity import modularity_from_mutual_info\n"
        "import disentangle.metrics.beta_vae, disentangle.metrics.factor_vae\n"
        "import disentangle.metrics as m\n"
        "for alias in ('sap', 'modularity', 'beta_vae', 'factor_vae', 'downstream', 'unsupervised'):\n"
        "    assert inspect.ismodule(importlib.import_module('disentangle.metrics.' + alias)), alias\n"
        "    assert inspect.isfunction(getattr(m, alias)), alias\n"
        "assert m.sap is m.sap_score and callable(sap_from_score_matrix)\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
    assert importlib.import_module("disentangle.metrics.sap").sap_score is disentangle.metrics.sap_score


def test_an_alias_resolves_to_its_metric_name_everywhere():
    assert resolve_metric_names("sap, mig, sap_score, modularity") == ["sap_score", "mig", "modularity_explicitness"]
    assert resolve_metric_names(["beta_vae", "factor_vae"]) == ["beta_vae_score", "factor_vae_score"]
    assert metric_spec("sap").name == "sap_score"
    assert metric_spec("sap").function is METRICS.get("sap_score")
    assert metric_spec("sap").draws({}) == metric_spec("sap_score").draws({}) == 15_000
    assert validate_settings("sap", {"num_train": 200.0}) == {"num_train": 200}
    with pytest.raises(ConfigError, match="has no setting 'num_trian'"):
        validate_settings("sap", {"num_trian": 200})


def test_evaluate_metrics_records_an_alias_under_its_metric_name():
    small = {"num_train": 300, "num_test": 100}
    out = evaluate_metrics(dataset(), perfect, "sap", seed=2, settings={"sap": small})
    assert list(out) == ["sap_score"]  # the results' keys do not change
    assert out["sap_score"] == METRICS.get("sap_score")(dataset(), perfect, seed=2, **small)
    assert evaluate_metrics(dataset(), perfect, ["sap_score"], seed=2, settings={"sap": small}) == out
    with pytest.raises(ConfigError, match="both"):
        evaluate_metrics(dataset(), perfect, "sap", settings={"sap": small, "sap_score": small})
    with pytest.raises(UnknownNameError, match="Did you mean 'sap'"):
        evaluate_metrics(dataset(), perfect, ["sap"], settings={"sapp": {}})


def _unregistered_metric(dataset, representation, *, seed: int = 0) -> dict[str, float]:
    return {}


@pytest.mark.parametrize("alias", ["mig", "sap", "all"])
def test_an_alias_that_would_shadow_a_name_is_refused(alias):
    """An alias may not take a metric's name, another metric's alias, or "all"; nothing is registered."""
    before_names, before_aliases = METRICS.names(), METRICS.aliases()
    with pytest.raises(ValueError, match=alias):
        register_metric("_alias_clash", aliases=(alias,))(_unregistered_metric)
    assert METRICS.names() == before_names and METRICS.aliases() == before_aliases
    with pytest.raises(ValueError, match="alias"):
        register_metric("sap")(_unregistered_metric)  # a metric may not take an alias's name
    assert METRICS.names() == before_names


def test_the_evaluate_cli_accepts_an_alias():
    """``python -m disentangle.evaluate MODEL -m sap``: the name is checked before the model is loaded,
    so a missing model is the first error for a valid name, and the name's for an unknown one."""
    def evaluate(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "disentangle.evaluate", *args, "--no-progress"],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)

    missing = str(ROOT / "no-such-run-for-the-alias-test")
    accepted = evaluate(missing, "-m", "sap,beta_vae")
    assert accepted.returncode == 2
    assert "Cannot load a model" in accepted.stderr and "Unknown metric" not in accepted.stderr, accepted.stderr
    refused = evaluate(missing, "-m", "sapp")
    assert refused.returncode == 2 and "Did you mean 'sap'" in refused.stderr, refused.stderr


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, tiny_overrides):
    from disentangle.config import load_config
    from disentangle.training.trainer import fit

    run = tmp_path_factory.mktemp("alias") / "run"
    fit(load_config(None, tiny_overrides(run, steps=2)))
    return run


def test_the_evaluate_cli_records_an_alias_under_its_metric_name(run_dir, capsys):
    from disentangle.evaluate import main

    rc = main([str(run_dir), "-m", "sap", "--set", "sap_score.num_train=200", "--set", "sap_score.num_test=100",
               "--no-progress"])
    assert rc == 0, capsys.readouterr().err
    record = json.loads((run_dir / "metrics.json").read_text())
    assert set(record["metrics"]) == {"sap_score"} and "sap" in record["metrics"]["sap_score"]
    assert record["metric_settings"]["sap_score"]["num_train"] == 200


def test_the_metrics_guide_lists_every_alias():
    guide = (ROOT / "docs" / "guides" / "metrics.md").read_text()
    rows = {line.split("`")[1]: line for line in guide.splitlines() if line.startswith("| [`")}
    for name in PACKAGE_METRICS:
        aliases = [a for a, n in METRICS.aliases().items() if n == name]
        cell = ", ".join(f"`{a}`" for a in aliases)
        assert f"] | {cell} | " in rows[name], (name, aliases)


def test_settings_keyed_by_an_alias_reach_their_metric_on_the_cli_and_in_sweep_files():
    from disentangle.evaluate import parse_settings
    from disentangle.sweep.grid import _parse_metrics

    assert parse_settings(["sap.num_train=100"], ["sap_score"])["sap_score"]["num_train"] == 100
    names, settings = _parse_metrics(["sap"], {"sap": {"num_train": 100}}, "sweep.yaml")
    assert names == ["sap_score"] and settings["sap_score"]["num_train"] == 100

