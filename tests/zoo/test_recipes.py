"""Zoo recipes: names, configs, the naming scheme and its errors."""
from __future__ import annotations

import pytest

import disentangle.zoo as zoo
from disentangle import ConfigError, UnknownNameError
from disentangle.config import Config, shipped_config_names, shipped_config_path
from disentangle.objectives import OBJECTIVES
from disentangle.zoo import locatello, recipes


def test_names_hold_shipped_configs_and_every_generated_recipe_once():
    names = zoo.names()
    assert len(names) == len(set(names))
    for shipped in shipped_config_names():
        assert shipped in names
    generated = [n for n in names if recipes.parse_generated(n)]
    # 6 methods x 6 strengths x 7 datasets + InfoVAE/AAE x 7 datasets + 2 weak methods x 6 betas x 5 datasets
    # + 5 semi-supervised methods x 5 gamma_sup x 7 datasets
    assert len(generated) == 252 + 14 + 60 + 175
    assert all(n.endswith("-s0") for n in generated)
    assert "beta_tcvae-dsprites-beta6-s0" in names and "quickstart" in names and "dsprites/factor_vae" in names


def test_semi_supervised_recipes_carry_their_labels_and_twin_strength():
    cfg = Config.from_dict(zoo.config_dict("s2_beta_tcvae-shapes3d-gamma_sup16-s2"))
    assert (cfg.objective.name, cfg.objective.params["gamma_sup"], cfg.objective.params["beta"]) == ("s2_beta_tcvae", 16.0, 6.0)
    assert cfg.data.labels["num_labelled"] == 1000 and cfg.data.labels["labeller"] == "perfect"
    assert (cfg.seed, cfg.train.steps, cfg.model.init) == (2, 300_000, "reference")
    assert zoo.entry("s2_dip_vae_ii-cars3d-gamma_sup1-s0").kind == "few_labels2020"


def test_shipped_config_recipe_is_the_yaml_file():
    import yaml

    for name in ("quickstart", "dsprites/factor_vae"):
        assert zoo.config_dict(name) == yaml.safe_load(shipped_config_path(name).read_text())
    assert zoo.config("dsprites/factor_vae").objective.params["gamma"] == 30.0


@pytest.mark.parametrize(
    "name, objective, dataset, strength, seed",
    [
        ("beta_tcvae-dsprites-beta6-s0", "beta_tcvae", "dsprites", 6.0, 0),
        ("annealed_vae-cars3d-c_max25-s3", "annealed_vae", "cars3d", 25.0, 3),
        ("dip_vae_i-shapes3d-lambda_od10-s49", "dip_vae_i", "shapes3d", 10.0, 49),
        ("factor_vae-scream_dsprites-gamma100-s7", "factor_vae", "scream_dsprites", 100.0, 7),
        ("beta_vae-smallnorb-beta16-s123", "beta_vae", "smallnorb", 16.0, 123),
    ],
)
def test_grid_recipe_configs(name, objective, dataset, strength, seed):
    cfg = zoo.config(name)
    m = locatello.method(objective)
    assert cfg.objective.name == objective and cfg.data.name == dataset and cfg.seed == seed
    assert cfg.objective.params[m.parameter] == strength
    assert (cfg.model.backbone, cfg.model.latent_dim) == ("conv64", 10)
    assert (cfg.train.steps, cfg.train.batch_size, cfg.train.lr) == (300_000, 64, 1e-4)
    assert cfg.train.out_dir == f"runs/{name}"
    info = zoo.info(name)
    assert info["kind"] == "locatello2019" and info["pretrained"] is False
    expected = locatello.model_number(dataset, objective, strength, seed) if seed < 50 else None
    assert info["model_number"] == expected
    if expected is not None:
        assert recipes.name_of_model_number(expected) == name
        assert locatello.model_number_for_config(cfg) == expected


def test_model_number_names_round_trip_on_known_points():
    assert recipes.name_of_model_number(0) == "beta_vae-dsprites-beta1-s0"
    assert recipes.name_of_model_number(12_599) == "annealed_vae-shapes3d-c_max100-s49"
    assert recipes.name_of_model_number(1350) == "beta_tcvae-dsprites-beta6-s0"
    for n in range(0, 12_600, 97):
        assert recipes.model_number_of(recipes.name_of_model_number(n)) == n


def test_info_vae_and_aae_recipes():
    info = zoo.config("info_vae-cars3d-lambda1000-s2")
    assert info.objective.params["lambda_"] == 1000.0 and info.objective.params["alpha"] == 0.0 and info.seed == 2
    aae = zoo.config("aae-shapes3d-adversarial_weight1-s0")
    assert aae.objective.params["encoder"] == "deterministic" and aae.objective.params["adversarial_weight"] == 1.0
    assert zoo.info("aae-shapes3d-adversarial_weight1-s0")["model_number"] is None


def test_weakly_supervised_recipes_generated():
    pretrained = set(zoo.names(pretrained=True))  # e.g. ada_gvae-sprites-beta4-cpu20k-ref-s0, not a generated recipe
    names = [n for n in zoo.names() if n.startswith(("ada_gvae-", "ada_ml_vae-")) and n not in pretrained]
    assert len(names) == 60
    raw = zoo.config_dict("ada_ml_vae-mpi3d-beta16-s4")
    assert raw["objective"] == {"name": "ada_ml_vae", "beta": 16.0, "k": "random", "reconstruction": "bernoulli"}
    assert raw["data"] == {"name": "mpi3d", "variant": "real"} and raw["seed"] == 4
    assert raw["train"]["steps"] == 300_000
    if "ada_gvae" not in OBJECTIVES:
        pytest.skip("the ada_gvae objective is not registered yet")
    cfg = zoo.config("ada_gvae-dsprites-beta2-s0")
    assert cfg.objective.name == "ada_gvae" and cfg.objective.params["beta"] == 2.0


def test_overrides_apply_to_recipes():
    cfg = zoo.config("beta_vae-dsprites-beta4-s0", ["train.steps=10", "objective.beta=3"])
    assert cfg.train.steps == 10 and cfg.objective.params["beta"] == 3.0
    assert locatello.model_number_for_config(cfg) is None


@pytest.mark.parametrize(
    "bad, fragment",
    [
        ("beta_tcvae-dsprites-beta5-s0", "one of 1, 2, 4, 6, 8, 10"),
        ("beta_tcvae-dsprite-beta6-s0", "Did you mean 'dsprites'"),
        ("beta_vae-dsprites-gamma4-s0", "name their strength 'beta'"),
        ("beta_vae-dsprites-beta4", "'beta_vae-dsprites-beta4-s0'"),
        ("beta_vae-dsprites-beta4.0-s0", "without a decimal point"),
        ("quickstar", "Did you mean 'quickstart'"),
        ("betavae-dsprites-beta4-s0", "Did you mean 'beta_vae'"),
    ],
)
def test_unknown_names_get_one_paragraph_with_a_suggestion(bad, fragment):
    with pytest.raises(UnknownNameError) as err:
        zoo.config(bad)
    message = str(err.value)
    assert fragment in message and "\n" not in message and "python -m disentangle.zoo list" in message
    assert isinstance(err.value, ConfigError)


def test_every_listed_recipe_resolves_and_validates():
    """Every name gives a config; those whose objective and dataset are registered validate."""
    from disentangle.data import DATASETS

    for name in zoo.names():
        raw = zoo.config_dict(name)
        objective = raw.get("objective", {}).get("name", "beta_vae")
        if objective in OBJECTIVES and raw.get("data", {}).get("name", "sprites") in DATASETS:
            assert isinstance(Config.from_dict(raw), Config), name


def test_a_shipped_config_of_the_study_has_its_model_number():
    # configs/datasets/dsprites.yaml: beta-VAE beta=4, seed 0 on dSprites with the study's settings
    assert zoo.info("datasets/dsprites")["model_number"] == 2 * 50
    assert zoo.info("quickstart")["model_number"] is None


def test_default_published_metrics_are_the_studys_six_and_the_unsupervised_scores():
    from disentangle.metrics import LOCATELLO_METRICS

    assert zoo.DEFAULT_METRICS == (*LOCATELLO_METRICS, "unsupervised_scores")


def test_a_recipe_has_one_spelling_of_its_seed():
    """``-s007`` is not seed 7's recipe (nor "6.0" β = 6's): one name per model, or two names would
    share a cache folder, a run folder and a Locatello model number."""
    assert recipes.parse_generated("beta_vae-dsprites-beta1-s7") is not None
    for name in ("beta_vae-dsprites-beta1-s007", "beta_vae-dsprites-beta1-s07", "beta_vae-dsprites-beta1.0-s7"):
        assert recipes.parse_generated(name) is None
        with pytest.raises(UnknownNameError):
            zoo.info(name)
