"""Dotted overrides merged into a config, by the exact nested dict they give: values holding ``=``,
sections written empty, a component renamed (its section restarted, ``model.latent_dim`` kept) or
named as it already is (nothing restarted)."""
from __future__ import annotations

import logging

from disentangle.config import apply_overrides, load_config


def test_an_override_is_split_at_its_first_equals_sign():
    raw = apply_overrides({}, ["train.out_dir=runs/beta=4,gamma=2", "data.path=/data/x=1.npz"])
    assert raw == {"train": {"out_dir": "runs/beta=4,gamma=2"}, "data": {"path": "/data/x=1.npz"}}


def test_an_override_fills_a_section_written_empty():
    """``train:`` with nothing under it is a YAML null: the override creates the section's mapping."""
    assert apply_overrides({"train": None, "seed": 3}, ["train.steps=5"]) == {"train": {"steps": 5}, "seed": 3}


def test_a_new_backbone_restarts_the_model_section_but_keeps_latent_dim():
    raw = {"model": {"backbone": "conv64", "latent_dim": 6, "init": "pytorch"}, "train": {"steps": 9}}
    assert apply_overrides(raw, ["model.backbone=mlp"]) == {"model": {"latent_dim": 6, "backbone": "mlp"},
                                                            "train": {"steps": 9}}
    assert raw["model"]["init"] == "pytorch"  # a copy: the given config is left as it was


def test_renaming_one_section_restarts_it_whatever_the_sections_before_it_do():
    """data is the first named section: an override that renames only the objective (or only the
    backbone) still restarts the objective's (the model's) section."""
    raw = {"data": {"name": "sprites", "image_size": 32}, "model": {"backbone": "conv64", "latent_dim": 6, "init": "pytorch"},
           "objective": {"name": "beta_vae", "beta": 4.0}}
    got = apply_overrides(raw, ["objective.name=factor_vae", "objective.gamma=20"])
    assert got["objective"] == {"name": "factor_vae", "gamma": 20}
    assert got["data"] == raw["data"] and got["model"] == raw["model"]
    got = apply_overrides(raw, ["model.backbone=mlp"])
    assert got["model"] == {"latent_dim": 6, "backbone": "mlp"} and got["objective"] == raw["objective"]


def test_naming_the_component_a_section_already_has_restarts_nothing(caplog):
    """A config without objective.name trains the default objective (beta_vae): the override
    objective.name=beta_vae changes nothing, so objective.beta stays (and no warning)."""
    raw = {"objective": {"beta": 4.0}, "model": {"latent_dim": 6, "init": "pytorch"}}
    with caplog.at_level(logging.WARNING, logger="disentangle.config"):
        got = apply_overrides(raw, ["objective.name=beta_vae", "model.backbone=conv64"])
    assert got == {"objective": {"beta": 4.0, "name": "beta_vae"},
                   "model": {"latent_dim": 6, "init": "pytorch", "backbone": "conv64"}}
    assert caplog.records == []
    assert load_config(None, ["objective.beta=2", "objective.name=beta_vae"]).objective.params["beta"] == 2.0


def test_the_restart_warning_names_only_the_keys_left_out(caplog):
    """Keys given again as overrides are not left out: the warning lists the others only."""
    raw = {"objective": {"name": "beta_vae", "beta": 4.0, "reconstruction": "gaussian"}}
    with caplog.at_level(logging.WARNING, logger="disentangle.config"):
        got = apply_overrides(raw, ["objective.name=factor_vae", "objective.reconstruction=gaussian"])
    assert got == {"objective": {"name": "factor_vae", "reconstruction": "gaussian"}}
    (record,) = caplog.records
    message = record.getMessage()
    assert "its keys objective.beta=4.0 are left out" in message and "objective.reconstruction" not in message
