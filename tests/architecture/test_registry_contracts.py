"""Contract tests over the registries (as timm's tests run over ``list_models()``): a new objective,
metric or backbone registered in one file is covered here without a line of test of its own.

* every objective: one short run has finite losses, and a run interrupted and resumed ends with the
  very weights of the run trained in one go;
* every metric: its defaults validate and an unknown setting is refused before anything runs, its
  scores are finite floats, and the same seed gives the same scores;
* every backbone: encoder and decoder shapes, and the reference initialisation
  (``tests/backbones/test_init.py``).

Components registered by the tests themselves (names starting with ``_``) are left out.
"""
from __future__ import annotations

import inspect
import math

import pytest
import torch

from disentangle.backbones import BACKBONES
from disentangle.config import load_config
from disentangle.errors import ConfigError, ParameterError
from disentangle.metrics import METRICS, metric_spec, validate_settings
from disentangle.metrics.synthetic import FactorObservationDataset
from disentangle.models import VAE
from disentangle.objectives import OBJECTIVES
from disentangle.training.checkpoint import load_checkpoint
from disentangle.training.trainer import fit

pytestmark = pytest.mark.usefixtures("one_thread")


def _public(registry) -> list[str]:
    return [n for n in registry.names() if not n.startswith("_")]


# ---------------------------------------------------------------------- objectives
@pytest.mark.parametrize("name", _public(OBJECTIVES))
def test_every_objective_trains_finite_and_resumes_bit_exactly(name, tmp_path, tiny_overrides):
    extra = {"objective.name": name, "train.checkpoint_every": 3}
    whole = fit(load_config(None, tiny_overrides(tmp_path / "whole", steps=6, **extra)))
    assert all(math.isfinite(v) for v in whole.last_terms.values() if isinstance(v, float)), whole.last_terms
    fit(load_config(None, tiny_overrides(tmp_path / "part", steps=3, **extra)))
    fit(load_config(None, tiny_overrides(tmp_path / "part", steps=6, **extra)), resume=True)
    a = load_checkpoint(tmp_path / "whole" / "checkpoint.pt")
    b = load_checkpoint(tmp_path / "part" / "checkpoint.pt")
    for section in ("model", "objective"):
        assert a[section].keys() == b[section].keys()
        for key in a[section]:
            assert torch.equal(a[section][key], b[section][key]), f"{name}: {section}.{key} differs after resume"


# ---------------------------------------------------------------------- metrics
#: settings that make any metric quick on a small grid (given only where the metric has them)
_SMALL = {
    "num_train": 300, "num_eval": 150, "num_test": 150, "num_variance_estimate": 300, "batch_size": 8,
    "num_samples": 64, "num_points": 300, "n_jobs": 1, "steps": 50,
}


def _quick_settings(name: str) -> dict:
    parameters = inspect.signature(METRICS.get(name)).parameters
    return {k: v for k, v in _SMALL.items() if k in parameters}


def _representation(x: torch.Tensor) -> torch.Tensor:
    """An informative, entangled, deterministic code of the factor observations."""
    x = torch.as_tensor(x, dtype=torch.float64)
    mix = torch.tensor([[1.0, 0.3, 0.0], [0.0, 1.0, 0.2], [0.1, 0.0, 1.0]], dtype=torch.float64)
    return torch.cat([x @ mix, torch.sin(3 * x[:, :1])], dim=1)


@pytest.mark.parametrize("name", _public(METRICS))
def test_every_metric_validates_first_and_is_deterministic(name):
    assert validate_settings(name, {}) == {}  # its defaults are valid
    with pytest.raises(ConfigError, match="has no setting"):
        validate_settings(name, {"no_such_setting": 1})
    settings = _quick_settings(name)
    if metric_spec(name).requires_encoder:  # a model with encode, on images
        from disentangle.data import build_dataset

        dataset = build_dataset({"name": "sprites"})
        torch.manual_seed(0)
        representation = VAE.from_backbone("mlp", image_shape=(1, 64, 64), latent_dim=3, hidden_sizes=[16])
    else:
        dataset, representation = FactorObservationDataset((4, 5, 6)), _representation
    first = METRICS.get(name)(dataset, representation, seed=3, **settings)
    again = METRICS.get(name)(dataset, representation, seed=3, **settings)
    assert first and first == again
    assert all(isinstance(v, float) and math.isfinite(v) for v in first.values()), first


@pytest.mark.parametrize("name", _public(METRICS))
def test_every_metric_has_a_frozen_settings_dataclass_validated_at_construction(name):
    import dataclasses

    spec = metric_spec(name)
    settings_type = spec.settings_type
    assert dataclasses.is_dataclass(settings_type) and settings_type.__dataclass_params__.frozen
    fields = {f.name: f for f in dataclasses.fields(settings_type)}
    assert list(fields) == list(spec.defaults())  # declared once: the function's keyword parameters
    defaults = spec.settings()
    with pytest.raises(dataclasses.FrozenInstanceError):
        defaults.seed = 1
    if spec.check is not None:  # an instance holds the checked values of every field
        assert dataclasses.asdict(defaults) == spec.check(**spec.defaults())
        with pytest.raises(ParameterError):
            spec.settings(seed="not a seed")
    with pytest.raises(TypeError, match="no_such_setting"):
        spec.settings(no_such_setting=1)


# ---------------------------------------------------------------------- backbones
@pytest.mark.parametrize("name", _public(BACKBONES))
def test_every_backbone_maps_images_to_a_posterior_and_back(name):
    side = getattr(BACKBONES.get(name), "image_side", 64)  # conv128: 128×128 images
    params = {"num_categories": 3} if name == "infogan_categorical" else {}  # at most latent_dim categories
    model = VAE.from_backbone(name, image_shape=(1, side, side), latent_dim=5, **params)
    x = torch.rand(3, 1, side, side)
    mu, logvar = model.encode(x)
    assert mu.shape == logvar.shape == (3, 5)
    assert model.decode(mu).shape == (3, 1, side, side)
    assert torch.isfinite(model(x).logits).all()
