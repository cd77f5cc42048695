"""Mutation-audit value tests: the Locatello et al. 2019 grid against disentanglement_lib's own
values (``config/unsupervised_study_v1/sweep.py`` and ``shared.gin``), the model-number boundaries
and the generated recipes' published settings. Pure functions: no training, no files."""
from __future__ import annotations

import copy

import pytest

from disentangle.errors import ConfigError
from disentangle.zoo import locatello, recipes

# disentanglement_lib unsupervised_study_v1/sweep.py, written out independently of the module
DISLIB_GRID = {
    # method: (strength parameter, the six values in sweep order, fixed objective settings)
    "beta_vae": ("beta", [1, 2, 4, 6, 8, 16], {"reconstruction": "bernoulli"}),
    "factor_vae": ("gamma", [10, 20, 30, 40, 50, 100], {
        "discriminator_lr": 1e-4, "discriminator_betas": [0.5, 0.9], "discriminator_hidden": 1000,
        "discriminator_layers": 6, "reconstruction": "bernoulli"}),
    "dip_vae_i": ("lambda_od", [1, 2, 5, 10, 20, 50], {"lambda_d": None, "reconstruction": "bernoulli"}),
    "dip_vae_ii": ("lambda_od", [1, 2, 5, 10, 20, 50], {"lambda_d": None, "reconstruction": "bernoulli"}),
    "beta_tcvae": ("beta", [1, 2, 4, 6, 8, 10], {"alpha": 1.0, "gamma": 1.0, "estimator": "mws",
                                                  "reconstruction": "bernoulli"}),
    "annealed_vae": ("c_max", [5, 10, 25, 50, 75, 100], {"gamma": 1000.0, "iteration_threshold": 100_000,
                                                           "reconstruction": "bernoulli"}),
}


@pytest.mark.parametrize("method", list(DISLIB_GRID))
def test_each_method_has_dislibs_strengths_and_fixed_settings(method):
    parameter, values, fixed = DISLIB_GRID[method]
    m = locatello.method(method)
    assert m.parameter == parameter
    assert list(m.values) == values
    raw = locatello.grid_config("dsprites", method, values[-1], 0)
    assert raw["objective"] == {"name": method, parameter: float(values[-1]), **fixed}


def test_the_shared_settings_are_shared_gin():
    raw = locatello.grid_config("cars3d", "beta_vae", 4.0, 7)  # a float strength is written "4"
    assert raw["train"] == {"steps": 300_000, "batch_size": 64, "lr": 1e-4, "betas": [0.9, 0.999], "eps": 1e-8,
                            "out_dir": "runs/beta_vae-cars3d-beta4-s7"}
    assert raw["model"] == {"backbone": "conv64", "latent_dim": 10, "init": "reference"}
    assert raw["seed"] == 7 and raw["data"] == {"name": "cars3d"}


def test_the_numbering_formula_at_every_method_and_strength_boundary():
    # n = ((dataset · 6 + method) · 6 + strength) · 50 + seed, computed here by hand
    order = list(DISLIB_GRID)
    for d, dataset in enumerate(["dsprites", "color_dsprites", "noisy_dsprites", "scream_dsprites",
                                 "smallnorb", "cars3d", "shapes3d"]):
        for mi, method in enumerate(order):
            for s, value in enumerate(DISLIB_GRID[method][1]):
                for seed in (0, 49):
                    n = ((d * 6 + mi) * 6 + s) * 50 + seed
                    assert locatello.model_number(dataset, method, value, seed) == n
                    assert locatello.from_model_number(n) == (dataset, method, float(value), seed)


def test_seed_50_is_outside_the_study_but_a_valid_recipe_seed():
    with pytest.raises(ConfigError, match="seed 50"):
        locatello.model_number("dsprites", "beta_vae", 1, 50)
    raw = locatello.grid_config("dsprites", "beta_vae", 1, 50)  # any seed trains
    assert raw["seed"] == 50 and locatello.model_number_for_config(raw) is None
    assert locatello.model_number_for_config(locatello.grid_config("dsprites", "beta_vae", 1, 49)) == 49
    assert recipes.model_number_of("beta_vae-dsprites-beta1-s50") is None
    assert recipes.model_number_of("beta_vae-dsprites-beta1-s49") == 49


def test_a_strength_near_but_not_on_the_grid_has_no_number():
    with pytest.raises(ConfigError, match="not one of the study's values"):
        locatello.model_number("dsprites", "beta_vae", 4.01, 0)
    with pytest.raises(ConfigError):  # a bool is no strength, even though True == 1
        locatello.model_number("dsprites", "beta_vae", True, 0)
    raw = locatello.grid_config("dsprites", "beta_vae", 4, 0)
    raw["objective"]["beta"] = 4.001
    assert locatello.model_number_for_config(raw) is None


def test_dip_vae_lambda_d_is_ten_or_one_times_lambda_od():
    i = locatello.grid_config("dsprites", "dip_vae_i", 5, 0)
    assert locatello.model_number_for_config(i) == 2 * 300 + 2 * 50
    i["objective"]["lambda_d"] = 50.0  # the study's 10 · lambda_od
    assert locatello.model_number_for_config(i) == 700
    i["objective"]["lambda_d"] = 5.0  # DIP-VAE-II's factor on DIP-VAE-I: another model
    assert locatello.model_number_for_config(i) is None
    ii = locatello.grid_config("dsprites", "dip_vae_ii", 5, 0)
    ii["objective"]["lambda_d"] = 5.0
    assert locatello.model_number_for_config(ii) == 3 * 300 + 2 * 50
    ii["objective"]["lambda_d"] = 50.0
    assert locatello.model_number_for_config(ii) is None


@pytest.mark.parametrize("key, value", [("lr", 1e-3), ("betas", [0.9, 0.99]), ("eps", 1e-7), ("batch_size", 32),
                                        ("steps", 100_000)])
def test_a_changed_shared_setting_has_no_number(key, value):
    raw = locatello.grid_config("dsprites", "beta_vae", 4, 0)
    assert locatello.model_number_for_config(raw) == 100
    raw["train"][key] = value
    assert locatello.model_number_for_config(raw) is None


@pytest.mark.parametrize("key, value", [
    ("optimizer", "adamw"), ("weight_decay", 0.1), ("lr_schedule", "cosine"), ("warmup_steps", 100),
    ("schedules", {"objective.beta": {"kind": "linear", "start": 0, "end": 4, "steps": 1000}}),
])
def test_a_run_trained_otherwise_than_the_study_has_no_number(key, value):
    raw = copy.deepcopy(locatello.grid_config("dsprites", "beta_vae", 4, 0))
    assert locatello.model_number_for_config(raw) == 100 + 0  # beta_vae beta=4: model 100 (seed 0)
    raw["train"][key] = value
    assert locatello.model_number_for_config(raw) is None


def test_a_config_written_before_the_optimiser_keys_existed_keeps_its_number():
    raw = copy.deepcopy(locatello.grid_config("dsprites", "beta_vae", 4, 0))
    for key in ("optimizer", "weight_decay", "lr_schedule", "warmup_steps", "schedules"):
        raw["train"].pop(key, None)
    assert locatello.model_number_for_config(raw) == 100


# ---------------------------------------------------------------------- generated recipes
def _objective(name):
    return recipes.generated_config(*recipes.parse_generated(name)[1:])["objective"]


def test_semi_supervised_recipes_fix_the_unsupervised_strength_of_the_shipped_configs():
    # beta-VAE beta 4, FactorVAE gamma 30, beta-TCVAE beta 6, DIP-VAE lambda_od 10 (module docstring)
    assert _objective("s2_beta_vae-dsprites-gamma_sup4-s0")["beta"] == 4.0
    assert _objective("s2_factor_vae-dsprites-gamma_sup4-s0")["gamma"] == 30.0
    assert _objective("s2_beta_tcvae-dsprites-gamma_sup4-s0")["beta"] == 6.0
    assert _objective("s2_dip_vae_i-dsprites-gamma_sup4-s0")["lambda_od"] == 10.0
    assert _objective("s2_dip_vae_ii-dsprites-gamma_sup4-s0")["lambda_od"] == 10.0
    raw = recipes.generated_config("s2_beta_vae", "cars3d", 16, 0)
    assert raw["data"]["labels"] == {"num_labelled": 1000, "labeller": "perfect", "train_fraction": 0.9, "seed": 0}
    assert list(recipes.FEW_LABELS_2020.values["s2_beta_vae"]) == [1.0, 2.0, 4.0, 8.0, 16.0]


def test_info_vae_and_aae_recipes_are_the_shipped_dsprites_configs():
    shipped_aae = recipes.shipped_config("dsprites/aae")["objective"]
    assert _objective("aae-dsprites-adversarial_weight1-s0") == shipped_aae
    assert _objective("aae-dsprites-adversarial_weight1-s0")["discriminator_layers"] == 2
    info = _objective("info_vae-dsprites-lambda1000-s0")
    assert info["lambda_"] == 1000.0 and info["alpha"] == 0.0
    assert recipes.shipped_config("dsprites/info_vae")["objective"]["lambda_"] == 1000.0


def test_weakly_supervised_recipes_sweep_betas_of_the_2020_paper_on_mpi3d_real():
    for objective in ("ada_gvae", "ada_ml_vae"):
        assert list(recipes.WEAK_2020.values[objective]) == [1.0, 2.0, 4.0, 6.0, 8.0, 16.0]
    raw = recipes.generated_config("ada_gvae", "mpi3d", 16, 0)
    assert raw["data"] == {"name": "mpi3d", "variant": "real"}
    assert raw["objective"] == {"name": "ada_gvae", "beta": 16.0, "k": "random", "reconstruction": "bernoulli"}
