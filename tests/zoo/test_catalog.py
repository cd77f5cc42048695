"""The zoo's one table: built once per manifest state, typed pretrained records, wildcard listing,
and zoo: names resolved by a source the package registers (the config package does not import the zoo)."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import disentangle
from disentangle import zoo
from disentangle.config import CONFIG_SOURCES, load_config
from disentangle.zoo import catalog, manifest


def test_the_table_is_built_once_until_a_manifest_changes(monkeypatch, tmp_path):
    reads = []
    real = manifest.entries
    monkeypatch.setattr(manifest, "entries", lambda: reads.append(1) or real())
    catalog.clear()
    for _ in range(3):
        zoo.names()
        zoo.config_dict("beta_tcvae-dsprites-beta6-s0")
        zoo.info("quickstart")
    assert len(reads) == 1
    extra = tmp_path / "manifest.json"
    extra.write_text(json.dumps({"format": 1, "models": {}}))
    monkeypatch.setenv(manifest.MANIFEST_ENV, str(extra))
    zoo.names()
    assert len(reads) == 2  # a new manifest list rebuilds the table
    extra.write_text(json.dumps({"format": 1, "models": {}}) + "\n")
    zoo.names()
    assert len(reads) == 3  # so does a manifest whose content changed


def test_pretrained_entries_are_typed_and_agree_with_the_manifest():
    raw = json.loads(manifest.SHIPPED_MANIFEST.read_text())["models"]
    assert raw, "the package ships pretrained models"
    for name, record in raw.items():
        entry = zoo.entry(name)
        assert entry.kind == "pretrained" and entry.pretrained is not None
        p = entry.pretrained
        assert (p.sha256, p.size, p.trained_steps, p.recipe) == (
            record["sha256"], record["size"], record["trained_steps"], record["recipe"])
        assert isinstance(p.trained_steps, int) and isinstance(p.urls, tuple)
        assert p.metrics["mig"]["mig"] == record["metrics"]["mig"]["mig"]
        assert (p.dataset, p.objective) == (record["config"]["data"]["name"], record["config"]["objective"]["name"])


def test_kinds_and_sources():
    assert zoo.entry("quickstart").kind == "shipped"
    assert zoo.entry("quickstart").source == "configs/quickstart.yaml"
    assert zoo.entry("beta_vae-dsprites-beta4-s0").kind == "locatello2019"
    assert zoo.entry("beta_vae-dsprites-beta4-s37").kind == "locatello2019"  # any seed, parsed on demand
    assert zoo.entry("info_vae-cars3d-lambda1000-s0").kind == "extra"
    assert zoo.entry("ada_gvae-shapes3d-beta2-s0").kind == "weak2020"
    with pytest.raises(disentangle.UnknownNameError, match="beta_vae-dsprites-beta4-s0"):
        zoo.entry("beta_vae-dsprites-beta4")


def test_names_filter_with_wildcards():
    assert zoo.names(filter="beta_tcvae-dsprites-*") == [f"beta_tcvae-dsprites-beta{b}-s0" for b in (1, 2, 4, 6, 8, 10)]
    pretrained = zoo.names(pretrained=True)
    assert zoo.names(pretrained=True, filter="*-sprites-*") == [n for n in pretrained if "-sprites-" in n]
    assert zoo.names(pretrained=True, filter="no-such-*") == []


def test_config_dicts_are_fresh_copies():
    a = zoo.config_dict("beta_tcvae-dsprites-beta6-s0")
    a["objective"]["beta"] = 99.0
    assert zoo.config_dict("beta_tcvae-dsprites-beta6-s0")["objective"]["beta"] == 6.0


def test_zoo_names_resolve_through_a_registered_source_and_config_does_not_import_the_zoo():
    assert "zoo" in CONFIG_SOURCES
    assert load_config("zoo:beta_tcvae-dsprites-beta6-s3").seed == 3
    imported = {
        ast.unparse(n)
        for path in Path(disentangle.config.__file__).parent.glob("*.py")
        for n in ast.walk(ast.parse(path.read_text()))
        if isinstance(n, (ast.Import, ast.ImportFrom))
    }
    assert not [i for i in imported if "zoo" in i], imported
