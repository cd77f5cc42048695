"""Locatello et al. 2019's grid and disentanglement_lib's model numbers."""
from __future__ import annotations

import itertools

import pytest

from disentangle import ConfigError
from disentangle.config import Config
from disentangle.zoo import locatello as L


def _dislib_order():
    """The study's configs in disentanglement_lib's order, rebuilt from sweep.py's structure:
    product(datasets, [architecture], chain(method zips), seeds) with the last factor fastest."""
    datasets = ["dsprites_full", "color_dsprites", "noisy_dsprites", "scream_dsprites", "smallnorb", "cars3d", "shapes3d"]
    models = (
        [("beta_vae", b) for b in (1.0, 2.0, 4.0, 6.0, 8.0, 16.0)]
        + [("factor_vae", g) for g in (10.0, 20.0, 30.0, 40.0, 50.0, 100.0)]
        + [("dip_vae_i", l) for l in (1.0, 2.0, 5.0, 10.0, 20.0, 50.0)]
        + [("dip_vae_ii", l) for l in (1.0, 2.0, 5.0, 10.0, 20.0, 50.0)]
        + [("beta_tc_vae", b) for b in (1.0, 2.0, 4.0, 6.0, 8.0, 10.0)]
        + [("annealed_vae", c) for c in (5.0, 10.0, 25.0, 50.0, 75.0, 100.0)]
    )
    return list(itertools.product(datasets, ["conv"], models, range(50)))


def test_whole_grid_matches_dislib_order_and_round_trips():
    order = _dislib_order()
    assert len(order) == L.NUM_MODELS == 12_600
    ours_by_dislib = {v: k for k, v in L.DISLIB_DATASET_NAMES.items()}
    method_by_dislib = {m.dislib_name: m.name for m in L.METHODS}
    for n, (dataset, _, (model, strength), seed) in enumerate(order):
        point = L.from_model_number(n)
        assert point == (ours_by_dislib[dataset], method_by_dislib[model], strength, seed)
        assert L.model_number(*point) == n


@pytest.mark.parametrize(
    "number, point",
    [
        (0, ("dsprites", "beta_vae", 1.0, 0)),
        (49, ("dsprites", "beta_vae", 1.0, 49)),
        (50, ("dsprites", "beta_vae", 2.0, 0)),
        (300, ("dsprites", "factor_vae", 10.0, 0)),
        (600, ("dsprites", "dip_vae_i", 1.0, 0)),
        (900, ("dsprites", "dip_vae_ii", 1.0, 0)),
        (1200, ("dsprites", "beta_tcvae", 1.0, 0)),
        (1500, ("dsprites", "annealed_vae", 5.0, 0)),
        (1800, ("color_dsprites", "beta_vae", 1.0, 0)),
        (3600, ("noisy_dsprites", "beta_vae", 1.0, 0)),
        (5400, ("scream_dsprites", "beta_vae", 1.0, 0)),
        (7200, ("smallnorb", "beta_vae", 1.0, 0)),
        (9000, ("cars3d", "beta_vae", 1.0, 0)),
        (10800, ("shapes3d", "beta_vae", 1.0, 0)),
        (12_599, ("shapes3d", "annealed_vae", 100.0, 49)),
    ],
)
def test_known_model_numbers(number, point):
    assert L.from_model_number(number) == point
    assert L.model_number(*point) == number


def test_first_model_of_each_method_and_dataset():
    for d, dataset in enumerate(L.DATASETS):
        for m, method in enumerate(L.METHODS):
            assert L.model_number(dataset, method.name, method.values[0], 0) == 1800 * d + 300 * m


@pytest.mark.parametrize("bad", [-1, 12_600, 3.0, True])
def test_model_number_out_of_range(bad):
    with pytest.raises(ConfigError, match="0 to 12599"):
        L.from_model_number(bad)


def test_bad_points_name_valid_choices():
    with pytest.raises(ConfigError, match="Did you mean 'dsprites'"):
        L.model_number("dsprite", "beta_vae", 1.0, 0)
    with pytest.raises(ConfigError, match="our name is 'dsprites'"):
        L.model_number("dsprites_full", "beta_vae", 1.0, 0)
    with pytest.raises(ConfigError, match="Did you mean 'beta_tcvae'"):
        L.model_number("dsprites", "beta_tc_vae", 1.0, 0)
    with pytest.raises(ConfigError, match="1, 2, 4, 6, 8, 16"):
        L.model_number("dsprites", "beta_vae", 3.0, 0)
    with pytest.raises(ConfigError, match="0 to 49"):
        L.model_number("dsprites", "beta_vae", 1.0, 50)


def test_grid_configs_validate_and_map_back_to_their_number():
    for n in (0, 347, 777, 1234, 1499, 5000, 12_599):
        point = L.from_model_number(n)
        raw = L.grid_config(*point)
        config = Config.from_dict(raw)
        assert L.model_number_for_config(config) == n
        assert L.model_number_for_config(raw) == n
        assert config.train.steps == 300_000 and config.train.batch_size == 64 and config.train.lr == 1e-4
        assert config.model.backbone == "conv64" and config.model.latent_dim == 10


def test_published_settings_in_the_configs():
    fvae = Config.from_dict(L.grid_config("dsprites", "factor_vae", 30.0, 0)).objective.params
    assert fvae["discriminator_layers"] == 6 and fvae["discriminator_hidden"] == 1000
    assert tuple(fvae["discriminator_betas"]) == (0.5, 0.9) and fvae["discriminator_lr"] == 1e-4
    annealed = L.grid_config("dsprites", "annealed_vae", 25.0, 0)["objective"]
    assert annealed["gamma"] == 1000.0 and annealed["iteration_threshold"] == 100_000
    from disentangle.objectives import OBJECTIVES

    dip_i = OBJECTIVES.build("dip_vae_i", **{k: v for k, v in L.grid_config("dsprites", "dip_vae_i", 5.0)["objective"].items() if k != "name"})
    dip_ii = OBJECTIVES.build("dip_vae_ii", **{k: v for k, v in L.grid_config("dsprites", "dip_vae_ii", 5.0)["objective"].items() if k != "name"})
    assert (dip_i.lambda_od, dip_i.lambda_d) == (5.0, 50.0)
    assert (dip_ii.lambda_od, dip_ii.lambda_d) == (5.0, 5.0)


def test_configs_outside_the_grid_have_no_number():
    base = L.grid_config("cars3d", "dip_vae_i", 10.0, 3)
    n = L.model_number_for_config(base)
    assert n == L.model_number("cars3d", "dip_vae_i", 10.0, 3)
    explicit = {**base, "objective": {**base["objective"], "lambda_d": 100.0}}
    assert L.model_number_for_config(explicit) == n
    runtime = {**base, "train": {**base["train"], "device": "cpu", "precision": "bf16", "out_dir": "elsewhere"}}
    assert L.model_number_for_config(runtime) == n

    def changed(section, key, value):
        raw = {**base, section: {**base[section], key: value}}
        return L.model_number_for_config(raw)

    assert changed("objective", "lambda_d", 99.0) is None
    assert changed("objective", "lambda_od", 3.0) is None
    assert changed("objective", "reconstruction", "gaussian") is None
    assert changed("train", "steps", 1000) is None
    assert changed("train", "lr", 5e-4) is None
    assert changed("train", "batch_size", 32) is None
    assert changed("model", "latent_dim", 6) is None
    assert changed("model", "backbone", "conv64_burgess") is None
    assert changed("data", "name", "sprites") is None
    assert L.model_number_for_config({**base, "seed": 50}) is None
    tc = L.grid_config("dsprites", "beta_tcvae", 6.0, 0)
    assert L.model_number_for_config(tc) == 1200 + 3 * 50
    tc["objective"]["estimator"] = "mss"
    assert L.model_number_for_config(tc) is None
    info = {"data": {"name": "dsprites"}, "objective": {"name": "info_vae"}, "model": {"backbone": "conv64"}}
    assert L.model_number_for_config(info) is None
