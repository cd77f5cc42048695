"""The disentanglement_lib reader on a file laid out exactly as ``dlib_aggregate_results`` writes it.

What disentanglement_lib writes (read from its source, ``bin/dlib_reproduce``,
``methods/unsupervised/train.py``, ``postprocessing/postprocess.py``, ``utils/results.py`` and
``utils/aggregate_results.py``):

* each step saves ``json/<step>_config.json`` (the operative gin config, ``{binding: gin string}``)
  and ``json/<step>_results.json`` (its results plus a fresh ``uuid`` and ``elapsed_time``), and
  copies the earlier steps' files along, so ``metrics/<mean|sampled>/<metric>/results/aggregate/
  evaluation.json`` holds every key namespaced by its file: ``train_config.*``, ``train_results.*``,
  ``postprocess_config.*``, ``postprocess_results.*``, ``evaluation_config.*``,
  ``evaluation_results.*``;
* ``dlib_reproduce`` binds ``model.name`` and ``model.model_num = N`` before the study's bindings,
  and ``postprocess.random_seed`` / ``evaluation.random_seed`` drawn from a master seed;
* ``dlib_aggregate_results`` loads every such file, adds its ``path``, builds a pandas
  ``DataFrame`` (one row per file, columns in order of appearance, missing cells NaN) and writes
  ``DataFrame.to_json()``: ``{column: {"row index": value}}`` with NaN as ``null``.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from disentangle.study import analyze, infer_design, read_table

# unsupervised_study_v1's order (sweep.py: get_default_models) and its strengths
STUDY_METHODS = {
    "beta_vae": ("vae.beta", [1.0, 2.0, 4.0, 6.0, 8.0, 16.0]),
    "factor_vae": ("factor_vae.gamma", [10.0, 20.0, 30.0, 40.0, 50.0, 100.0]),
    "dip_vae_i": ("dip_vae.lambda_od", [1.0, 2.0, 5.0, 10.0, 20.0, 50.0]),
    "dip_vae_ii": ("dip_vae.lambda_od", [1.0, 2.0, 5.0, 10.0, 20.0, 50.0]),
    "beta_tc_vae": ("beta_tc_vae.beta", [1.0, 2.0, 4.0, 6.0, 8.0, 10.0]),
    "annealed_vae": ("annealed_vae.c_max", [5.0, 10.0, 25.0, 50.0, 75.0, 100.0]),
}
# metric config file (its name is the metrics/ folder and evaluation.name) -> evaluation.evaluation_fn
EVALUATION_FN = {"beta_vae_sklearn": "@beta_vae_sklearn", "mig": "@mig", "sap_score": "@sap_score",
                 "unsupervised": "@unsupervised_metrics"}
MODEL_FN = {"beta_vae": "@vae()", "factor_vae": "@factor_vae()", "beta_tc_vae": "@beta_tc_vae()"}
# the models of the fixture: 3 methods x 2 strengths x 3 seeds on dsprites_full
MODELS = [(m, s, seed) for m, strengths in (("beta_vae", (1.0, 4.0)), ("factor_vae", (10.0, 40.0)),
                                               ("beta_tc_vae", (1.0, 6.0)))
          for s in strengths for seed in range(3)]
METHOD_EFFECT = {"beta_vae": 0.1, "factor_vae": 0.3, "beta_tc_vae": 0.5}
SAMPLED_OFFSET = 100.0  # the sampled representation's scores, far from the mean one's


def dlib_model_num(method: str, strength: float, seed: int) -> int:
    """The index of (dsprites_full, method, strength, seed) in unsupervised_study_v1's get_config()."""
    methods = list(STUDY_METHODS)
    strength_index = STUDY_METHODS[method][1].index(strength)
    return ((0 * len(methods) + methods.index(method)) * 6 + strength_index) * 50 + seed


def _gin(value) -> str:
    """A value as gin's operative config prints it: strings quoted, floats with a decimal point."""
    return repr(value)


def _train_config(method: str, strength: float, seed: int, number: int) -> dict[str, str]:
    key, _ = STUDY_METHODS[method]
    config = {
        "dataset.name": _gin("dsprites_full"),
        "decoder.decoder_fn": "@deconv_decoder",
        "encoder.encoder_fn": "@conv_encoder",
        "encoder.num_latent": "10",
        "model.batch_size": "64",
        "model.eval_steps": "1000",
        "model.model": MODEL_FN[method],
        "model.model_num": str(number),
        "model.name": _gin(method),
        "model.random_seed": str(seed),
        "model.training_steps": "300000",
        "reconstruction_loss.loss_fn": "@bernoulli_loss",
        "vae_optimizer.optimizer_fn": "@vae/AdamOptimizer",
        "vae/AdamOptimizer.learning_rate": "0.0001",
        key: _gin(strength),
    }
    if method == "factor_vae":
        config["discriminator.discriminator_fn"] = "@fc_discriminator"
        config["discriminator_optimizer.optimizer_fn"] = "@discriminator/AdamOptimizer"
    return config


def _scores(method: str, strength: float, seed: int, rng: np.random.Generator) -> dict[str, dict[str, float]]:
    """Planted: MIG depends on the method (+ small seed noise); the others are smooth in it."""
    mig = METHOD_EFFECT[method] + 0.01 * rng.normal()
    return {
        "mig": {"discrete_mig": mig},
        "sap_score": {"SAP_score": 0.1 * mig},
        "beta_vae_sklearn": {"train_accuracy": 0.9, "eval_accuracy": 0.5 + mig},
        "unsupervised": {"gaussian_total_correlation": 2.0 - mig, "gaussian_wasserstein_correlation": 1.0 - mig,
                         "gaussian_wasserstein_correlation_norm": 0.5 - mig, "mutual_info_score": 0.3 - mig},
    }


def dlib_evaluation_files(rng_seed: int = 0) -> list[dict]:
    """The evaluation.json dicts of every (model, postprocessing, metric), each with the ``path`` _load adds."""
    rng = np.random.default_rng(rng_seed)
    files = []
    for method, strength, seed in MODELS:
        number = dlib_model_num(method, strength, seed)
        train_config = _train_config(method, strength, seed, number)
        # per-model bookkeeping that must never become a setting: uuids, times, losses
        train_results = {"elapsed_time": 3000.0 + 17.0 * number, "uuid": f"train-uuid-{number}",
                         "loss": 40.0 + rng.normal(), "reconstruction_loss": 30.0 + rng.normal(),
                         "regularizer": 10.0 + rng.normal(), "kl_loss": 10.0 + rng.normal(), "elbo": -40.0,
                         "global_step": 300000}
        scores = _scores(method, strength, seed, rng)
        # per-model random seeds of the later steps (dlib_reproduce draws them from a master seed;
        # here they differ per model too, which must not matter)
        seeds = np.random.RandomState(number).randint(2**31, size=16)
        for p, post in enumerate(("mean", "sampled")):
            postprocess_config = {"dataset.name": "'auto'", "postprocess.name": _gin(post),
                                  "postprocess.postprocess_fn": f"@{post}_representation",
                                  "postprocess.random_seed": str(seeds[p])}
            postprocess_results = {"elapsed_time": 12.5 + number, "uuid": f"post-uuid-{number}-{post}"}
            for k, metric in enumerate(sorted(scores)):
                evaluation_config = {"dataset.name": "'auto'", "evaluation.evaluation_fn": EVALUATION_FN[metric],
                                     "evaluation.name": _gin(metric),
                                     "evaluation.random_seed": str(seeds[2 + 2 * k + p])}
                if metric == "mig":
                    evaluation_config.update({"discretizer.discretizer_fn": "@histogram_discretizer",
                                              "discretizer.num_bins": "20", "mig.num_train": "10000"})
                offset = 0.0 if post == "mean" else SAMPLED_OFFSET
                evaluation_results = {name: value + (offset if name != "train_accuracy" else 0.0)
                                      for name, value in scores[metric].items()}
                evaluation_results.update({"elapsed_time": 45.0 + k + number, "uuid": f"eval-uuid-{number}-{post}-{metric}"})
                record = {}
                for namespace, values in (("evaluation_config", evaluation_config),
                                          ("evaluation_results", evaluation_results),
                                          ("postprocess_config", postprocess_config),
                                          ("postprocess_results", postprocess_results),
                                          ("train_config", train_config), ("train_results", train_results)):
                    record.update({f"{namespace}.{key}": value for key, value in values.items()})
                record["path"] = (f"output/unsupervised_study_v1/{number}/metrics/{post}/{metric}/results/"
                                  f"aggregate/evaluation.json")
                files.append(record)
    return files


def write_aggregated_json(path: Path, files: list[dict]) -> None:
    """``pd.DataFrame(files).to_json(path)``: columns in order of appearance, ``{column: {index: value}}``,
    missing cells null; a numeric column with a missing cell is float (pandas' NaN upcast)."""
    columns: list[str] = []
    for record in files:
        columns.extend(c for c in record if c not in columns)
    out = {}
    for column in columns:
        cells = [record.get(column) for record in files]
        upcast = any(c is None for c in cells) and all(isinstance(c, (int, float)) or c is None for c in cells)
        out[column] = {str(i): (float(c) if upcast and c is not None else c) for i, c in enumerate(cells)}
    path.write_text(json.dumps(out))


@pytest.fixture()
def dlib_json(tmp_path):
    path = tmp_path / "results.json"
    write_aggregated_json(path, dlib_evaluation_files())
    return path


def test_fixture_has_dlib_layout(dlib_json):
    data = json.loads(dlib_json.read_text())
    assert "train_config.model.model_num" in data and "train_results.uuid" in data
    assert data["train_config.model.name"]["0"] == "'beta_vae'" and data["train_config.vae.beta"]["0"] == "1.0"
    assert data["train_config.vae.beta"][str(6 * 8)] is None  # the first factor_vae row: no vae.beta
    assert {v for v in data["postprocess_config.postprocess.postprocess_fn"].values()} == {
        "@mean_representation", "@sampled_representation"}
    assert len(data["path"]) == len(MODELS) * 2 * 4


def test_model_number_is_a_label_not_a_setting(dlib_json):
    table = read_table(dlib_json)
    assert len(table) == len(MODELS)
    # read as the model number, like the seed a label of the run
    assert "dlib_model_number" in table.columns
    numbers = {r["run_id"]: r["dlib_model_number"] for r in table.rows}
    assert numbers["train-uuid-300"] == "300"  # factor_vae (method 1), gamma 10 (strength 0), seed 0
    assert sorted(int(n) for n in numbers.values()) == sorted(dlib_model_num(*m) for m in MODELS)
    # no bookkeeping key is a column that could become a setting
    for column in table.columns:
        assert not column.startswith(("train_results.", "postprocess_", "evaluation_")), column
        assert not column.endswith(("random_seed", "model_num", "uuid", "elapsed_time")), column

    design = infer_design(table)
    settings = {(m, c) for m, c in zip(design.methods, design.configuration)}
    assert settings == {("beta_vae", "beta=1"), ("beta_vae", "beta=4"), ("factor_vae", "gamma=10"),
                        ("factor_vae", "gamma=40"), ("beta_tcvae", "beta=1"), ("beta_tcvae", "beta=6")}
    assert design.strength_name[("dsprites", "beta_vae")] == "objective.beta"  # the figure's axis label
    assert design.strength_name[("dsprites", "factor_vae")] == "objective.gamma"
    assert not any("model_num" in line or "random_seed" in line for line in design.inferred)


def test_sampled_rows_do_not_leak_and_the_analyses_run(dlib_json, tmp_path):
    result = analyze(dlib_json, tmp_path / "report", figures=False, progress=False)
    assert "variance_explained" not in result.skipped
    shares = {r["score"]: r for r in result.variance_explained}
    assert shares["mig.mig"]["n_runs"] == len(MODELS) and shares["mig.mig"]["n_settings"] == 6
    assert shares["mig.mig"]["method"] > 0.95  # the planted method effect
    # every score is the mean representation's: the sampled ones are SAMPLED_OFFSET higher
    for score, values in result.design.scores.items():
        assert np.nanmax(values) < SAMPLED_OFFSET / 2, score
    mig = result.design.scores["mig.mig"]
    assert np.all(np.abs(mig - 0.3) < 0.25)
    run = result.design.table.rows.index(next(r for r in result.design.table.rows if r["run_id"] == "train-uuid-0"))
    assert result.design.methods[run] == "beta_vae" and result.design.seeds[run] == "0"
    assert math.isclose(result.design.scores["sap_score.sap"][run], 0.1 * mig[run])
    text = (tmp_path / "report" / "report.md").read_text()
    assert "no method × strength setting has more than one seed" not in text


def test_bookkeeping_columns_of_a_results_table_are_labels(tmp_path):
    """A results.csv carrying disentanglement_lib's per-model keys: they must not split the settings."""
    rows = []
    for method, strength, seed in MODELS:
        number = dlib_model_num(method, strength, seed)
        rows.append({"run_id": f"m{number}", "seed": seed, "objective.name": method, "objective.strength": strength,
                     "train_config.model.model_num": number,
                     "evaluation_config.evaluation.random_seed": 1000 + number,
                     "mig.mig": METHOD_EFFECT[method] + 0.01 * seed, "sap_score.sap": 0.1 * seed})
    import csv

    with open(tmp_path / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    design = infer_design(read_table(tmp_path / "results.csv"))
    assert len(set(zip(design.methods, design.configuration))) == 6
    assert design.strength_name[("all", "beta_vae")] == "objective.strength"
