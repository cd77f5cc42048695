"""The class/content metrics, by value: ``class_leakage`` on planted codes and ``swap_accuracy`` with
planted models whose decoder draws the class from the class code, ignores it, or takes it from the
content code; their settings errors; and ``python -m disentangle.evaluate`` reading a class/content
run's ``class_factors`` and ``class_dim``.

The dataset is :class:`~disentangle.metrics.synthetic.FactorObservationDataset`: an observation is
its factor vector scaled to [0, 1], so a planted code or image is a known function of the factors.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch import nn

from disentangle.errors import ConfigError, ParameterError
from disentangle.metrics import METRICS, class_leakage, swap_accuracy, validate_settings
from disentangle.metrics.synthetic import FactorObservationDataset

pytestmark = pytest.mark.usefixtures("one_thread")

SIZES = (3, 4, 5)
NAMES = ("a", "b", "c")
SMALL = {"num_train": 2_000, "num_test": 2_000}


def dataset(sizes=SIZES, names=NAMES) -> FactorObservationDataset:
    return FactorObservationDataset(sizes, names)


def factors_of(x: torch.Tensor, sizes=SIZES) -> torch.Tensor:
    """The factor classes of observations (which are ``factor / (size − 1)``)."""
    return torch.round(torch.as_tensor(x, dtype=torch.float64) * (torch.tensor(sizes, dtype=torch.float64) - 1)).long()


def one_hot(values: torch.Tensor, size: int) -> torch.Tensor:
    return nn.functional.one_hot(values, size).to(torch.float64)


# ---------------------------------------------------------------- class_leakage
def test_a_content_code_independent_of_the_class_leaks_nothing():
    # codes [b, c | a]: the content code is the other factors, the class code (the last dimension) the class
    scores = class_leakage(dataset(), lambda x: x[:, [1, 2, 0]], class_factors=["a"], class_dim=1, **SMALL)
    assert scores["class_leakage"] < 0.02
    assert abs(scores["class_leakage_accuracy"] - scores["class_leakage_chance"]) < 0.03
    assert scores["class_code_accuracy"] == 1.0


def test_a_content_code_that_is_the_one_hot_class_leaks_everything():
    def codes(x):
        f = factors_of(x)
        return torch.cat([one_hot(f[:, 0], 3), x[:, 1:2]], dim=1)  # content: one-hot of a; class code: b

    scores = class_leakage(dataset(), codes, class_factors=["a"], class_dim=1, **SMALL)
    assert scores["class_leakage"] == 1.0 and scores["class_leakage_accuracy"] == 1.0
    assert abs(scores["class_code_accuracy"] - scores["class_leakage_chance"]) < 0.03  # b tells nothing of a


def test_chance_is_the_majority_rate_of_the_test_draws_and_leakage_its_normalisation():
    seed, n_train, n_test = 5, 400, 300
    scores = class_leakage(dataset(), lambda x: x, seed=seed, num_train=n_train, num_test=n_test, class_factors=["b"])
    rng = np.random.default_rng(seed)  # the metric's draws, made again: train points, then test points
    dataset().sample_factors(n_train, rng)
    test = dataset().sample_factors(n_test, rng)
    chance = np.bincount(test[:, 1]).max() / n_test
    assert scores["class_leakage_chance"] == chance
    assert abs(chance - 1 / 4) < 0.06  # four uniform classes
    accuracy = scores["class_leakage_accuracy"]  # codes [a | b, c] with the default class_dim 1: b is in the content
    assert scores["class_leakage"] == pytest.approx(max(0.0, (accuracy - chance) / (1 - chance)))
    assert accuracy == 1.0 and scores["class_code_accuracy"] < 0.5


def test_a_class_of_two_factors_is_their_combination():
    # the class is (a, b): 12 classes; a content code that tells a alone guesses b at 1/4, so
    # accuracy ≈ 1/4, chance ≈ 1/12 and leakage ≈ (1/4 − 1/12) / (1 − 1/12) = 2/11
    def codes(x):
        f = factors_of(x)
        return torch.cat([one_hot(f[:, 0], 3), one_hot(f[:, 0] * 4 + f[:, 1], 12)], dim=1)

    scores = class_leakage(dataset(), codes, class_factors=["a", "b"], class_dim=12, num_train=3_000, num_test=5_000)
    assert scores["class_leakage"] == pytest.approx(2 / 11, abs=0.03)
    assert scores["class_leakage_chance"] == pytest.approx(1 / 12, abs=0.02)
    assert scores["class_code_accuracy"] == 1.0
    same = class_leakage(dataset(), codes, class_factors=[0, 1], class_dim=12, num_train=3_000, num_test=5_000)
    assert same == scores  # factors by index or by name


def test_a_nonlinear_leak_is_missed_by_the_linear_probe_and_found_by_the_mlp():
    # two classes; the content code is ±1 for class 0 (its sign set by b) and 0 for class 1: no line splits it
    sizes = (2, 4, 3)

    def codes(x):
        f = factors_of(x, sizes)
        sign = 1.0 - 2.0 * (f[:, 1] % 2)
        content = torch.where(f[:, 0] == 0, sign, torch.zeros_like(sign)).to(torch.float64)
        return torch.stack([content, x[:, 0].to(torch.float64)], dim=1)

    ds = dataset(sizes)
    linear = class_leakage(ds, codes, class_factors=["a"], class_dim=1, num_train=1_000, num_test=1_000)
    mlp = class_leakage(ds, codes, class_factors=["a"], class_dim=1, num_train=1_000, num_test=1_000, predictor="mlp")
    assert linear["class_leakage"] < 0.1
    assert mlp["class_leakage"] == 1.0


def test_the_default_class_is_the_first_varying_factor_and_the_default_split_half_the_code():
    ds = FactorObservationDataset((1, 3, 4), ("constant", "b", "c"))
    # codes [b, c | b, c]: with the default class_dim 2 the class code is the last two dimensions
    default = class_leakage(ds, lambda x: x[:, [1, 2, 1, 2]], num_train=500, num_test=500)
    explicit = class_leakage(ds, lambda x: x[:, [1, 2, 1, 2]], num_train=500, num_test=500, class_factors=["b"], class_dim=2)
    assert default == explicit
    assert default["class_leakage_chance"] == pytest.approx(1 / 3, abs=0.06)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"class_factors": ["d"]}, "lacks"),
        ({"class_factors": []}, "non-empty list"),
        ({"class_factors": ["a", "a"]}, "twice"),
        ({"class_factors": ["a", "b", "c"]}, "every factor"),
        ({"class_dim": 0}, "class_dim"),
        ({"class_dim": 3}, "between 1 and 2"),
        ({"predictor": "logistic"}, "Did you mean 'logistic_regression'"),
        ({"num_train": 1}, "num_train"),
    ],
)
def test_bad_class_leakage_settings_are_parameter_errors(settings, message):
    with pytest.raises(ParameterError, match=message):
        class_leakage(dataset(), lambda x: x, **{"num_train": 50, "num_test": 50, **settings})


def test_form_errors_are_found_without_a_run():
    for name in ("class_leakage", "swap_accuracy"):
        assert validate_settings(name, {"class_factors": "shape"}) == {"class_factors": ("shape",)}
        with pytest.raises(ParameterError, match="class_factors"):
            validate_settings(name, {"class_factors": [1.5]})
        with pytest.raises(ParameterError, match="class_dim"):
            validate_settings(name, {"class_dim": -1})
    with pytest.raises(ParameterError, match="steps"):
        validate_settings("swap_accuracy", {"steps": 0})
    with pytest.raises(ParameterError, match="num_pairs"):
        validate_settings("swap_accuracy", {"num_pairs": 0})


# ---------------------------------------------------------------- swap_accuracy
class PlantedModel(nn.Module):
    """A model of the factor observations ``x = [a, b, c] / (size − 1)``.

    ``encode`` gives codes whose last dimension (the class code, ``class_dim=1``) is ``a``; the
    content code is ``[b, c]``, or ``[a, b, c]`` with ``leaky``. ``decode`` draws the observation back:
    ``a`` from the class code (``decoder="class"``), from the content code (``"content"``, with
    ``leaky``), or always 0 (``"constant"``: the class code is ignored)."""

    def __init__(self, decoder: str = "class", leaky: bool = False) -> None:
        super().__init__()
        self.decoder, self.leaky = decoder, leaky
        self.register_buffer("anchor", torch.zeros(1))

    def encode(self, x):
        x = x.to(torch.float32)
        content = x if self.leaky else x[:, 1:]
        mu = torch.cat([content, x[:, :1]], dim=1)
        return mu, torch.zeros_like(mu)

    def decode(self, z):
        a = {"class": z[:, -1], "content": z[:, 0], "constant": torch.zeros_like(z[:, 0])}[self.decoder]
        rest = z[:, 1:3] if self.leaky else z[:, 0:2]
        x = torch.cat([a[:, None], rest], dim=1)
        return torch.logit(x.clamp(1e-4, 1 - 1e-4))


SWAP = {"num_pairs": 600, "num_test": 500, "steps": 1_000, "class_factors": ["a"], "class_dim": 1}


def test_swaps_drawn_from_the_class_code_are_recognised():
    scores = swap_accuracy(dataset(), PlantedModel("class"), **SWAP)
    assert scores["swap_classifier_accuracy"] == 1.0
    assert scores["swap_accuracy"] == 1.0 and scores["swap_reconstruction_accuracy"] == 1.0
    assert scores["swap_content_class"] == 0.0  # every pair has two classes
    assert 1 / 3 <= scores["swap_chance"] < 0.4


def test_a_decoder_that_ignores_the_class_code_scores_chance():
    scores = swap_accuracy(dataset(), PlantedModel("constant"), **SWAP)
    # every swap is drawn as class 0, recognised as j's class exactly when j is of class 0 (≈ 1/3 of pairs)
    assert scores["swap_accuracy"] == pytest.approx(1 / 3, abs=0.05)
    assert scores["swap_accuracy"] <= scores["swap_chance"]
    assert scores["swap_accuracy"] + scores["swap_content_class"] <= 1.0
    assert scores["swap_classifier_accuracy"] == 1.0


def test_a_class_carried_by_the_content_code_is_never_swapped():
    scores = swap_accuracy(dataset(), PlantedModel("content", leaky=True), **SWAP)
    assert scores["swap_accuracy"] == 0.0 and scores["swap_content_class"] == 1.0
    assert scores["swap_reconstruction_accuracy"] == 1.0  # it reconstructs, it does not swap


def test_swap_accuracy_is_deterministic_and_checks_its_model():
    model = PlantedModel("constant")
    small = {**SWAP, "num_pairs": 100, "steps": 20, "num_test": 50}
    assert swap_accuracy(dataset(), model, seed=3, **small) == swap_accuracy(dataset(), model, seed=3, **small)
    with pytest.raises(ConfigError, match="encode"):
        swap_accuracy(dataset(), lambda x: x, **small)
    with pytest.raises(ParameterError, match="between 1 and 2"):
        swap_accuracy(dataset(), model, **{**small, "class_dim": 3})
    with pytest.raises(ParameterError, match="lacks"):
        swap_accuracy(dataset(), model, **{**small, "class_factors": ["shape"]})


def test_the_image_classifier_learns_the_class_of_real_images(tiny_dataset):
    """The convolutional classifier on the tiny 16×16 grid: its held-out accuracy is reported, and a
    model that reconstructs nothing of the class scores what the classifier gives one image."""
    from disentangle.models import VAE

    torch.manual_seed(0)
    model = VAE.from_backbone("mlp", image_shape=(1, 16, 16), latent_dim=4, hidden_sizes=[8])
    scores = swap_accuracy(tiny_dataset, model, num_pairs=200, num_test=200, steps=150, class_factors=["a"])
    assert scores["swap_classifier_accuracy"] == 1.0  # 24 images, two classes of 12
    assert scores["swap_chance"] == pytest.approx(0.5, abs=0.1)
    assert METRICS.get("swap_accuracy") is swap_accuracy


# ---------------------------------------------------------------- evaluate fills the settings of a class/content run
def test_evaluate_takes_class_factors_and_class_dim_from_a_class_content_config():
    from disentangle.objectives.class_content import class_content_settings

    config = {"objective": {"name": "mathieu2016", "class_factors": ["a"], "class_dim": 1}}
    filled = class_content_settings(config, ["mig", "class_leakage", "swap_accuracy"], {"class_leakage": {"class_dim": 2}})
    assert filled["class_leakage"] == {"class_dim": 2, "class_factors": ("a",)}  # --set wins
    assert filled["swap_accuracy"] == {"class_factors": ("a",), "class_dim": 1}
    assert "mig" not in filled
    other = {"objective": {"name": "beta_vae", "beta": 4.0}}
    assert class_content_settings(other, ["class_leakage"], {}) == {}


def test_the_evaluate_cli_scores_a_class_content_run_with_its_class(tmp_path, tiny_overrides, capsys):
    from disentangle.config import load_config
    from disentangle.evaluate import main
    from disentangle.training.trainer import fit

    run = tmp_path / "run"
    fit(load_config(None, tiny_overrides(run, steps=2, **{
        "objective.name": "mathieu2016", "objective.class_factors": "[b]", "objective.class_dim": 1,
    })))
    rc = main([str(run), "-m", "class_leakage", "--set", "class_leakage.num_train=300",
               "--set", "class_leakage.num_test=200", "--no-progress"])
    assert rc == 0, capsys.readouterr().err
    record = json.loads((run / "metrics.json").read_text())
    assert record["metric_settings"]["class_leakage"]["class_factors"] == ["b"]
    assert record["metric_settings"]["class_leakage"]["class_dim"] == 1
    assert record["metrics"]["class_leakage"]["class_leakage_chance"] == pytest.approx(1 / 3, abs=0.1)  # b has 3 values


# ---------------------------------------------------------------- a labelled sample without a grid
def labelled_sample():
    """40 images of 8×8 with labels (kind, tone): 20, 12 and 8 images of kind 0, 1, 2; pixel (0, 0)
    shows the kind, pixel (0, 1) the tone, the rest is black."""
    from disentangle.data import from_arrays

    rng = np.random.default_rng(0)
    kind = np.repeat([0, 1, 2], [20, 12, 8])
    tone = rng.integers(0, 2, size=40)
    images = np.zeros((40, 8, 8), dtype=np.uint8)
    images[:, 0, 0], images[:, 0, 1] = kind * 100, tone * 200
    return from_arrays(images, np.stack([kind, tone], 1), ["kind", "tone"], grid=False)


def test_the_class_metrics_run_on_a_labelled_sample():
    data = labelled_sample()
    assert data.is_grid is False
    # codes [kind | tone]: the content code is the kind itself, the class code the tone
    scores = class_leakage(data, lambda x: torch.as_tensor(x)[:, 0, 0, :2], class_factors=["kind"], class_dim=1,
                           num_train=800, num_test=2_000)
    assert scores["class_leakage"] == 1.0
    assert scores["class_leakage_chance"] == pytest.approx(0.5, abs=0.04)  # the majority kind, 20 of 40 images
    assert scores["class_code_accuracy"] == pytest.approx(0.5, abs=0.06)  # the tone tells nothing: the majority

    class Pixels(nn.Module):
        """codes [tone, a black pixel | kind] from the pixels; decodes the image back, the kind from the class code."""

        def encode(self, x):
            mu = torch.stack([x[:, 0, 0, 1], x[:, 0, 3, 3], x[:, 0, 0, 0]], dim=1)
            return mu, torch.zeros_like(mu)

        def decode(self, z):
            image = torch.zeros(len(z), 1, 8, 8)
            image[:, 0, 0, 0], image[:, 0, 0, 1] = z[:, 2], z[:, 0]
            return torch.logit(image.clamp(1e-4, 1 - 1e-4))

    swaps = swap_accuracy(data, Pixels(), num_pairs=300, num_test=300, steps=400, class_factors=["kind"], class_dim=1)
    assert swaps["swap_classifier_accuracy"] == 1.0
    assert swaps["swap_accuracy"] == 1.0 and swaps["swap_content_class"] == 0.0
