"""Swap accuracy: does the decoded swap ``[content(x_i), class(x_j)]`` show ``x_j``'s class?"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from .._core.gaussian import model_device
from ..errors import ConfigError
from . import _gaussian as G
from ._representation import default_representation_batch_size, eval_mode
from ._sampling import sample_factors
from ._settings import SettingsChecks, as_float_dict, count, derived_seed, is_sample
from .class_leakage import (
    check_class_dim_setting,
    check_class_factors_setting,
    class_labels,
    majority_rate,
    resolve_metric_class_dim,
    resolve_metric_class_factors,
)
from .registration import register_metric

#: the image classifier's optimiser: Adam with this learning rate (PyTorch's other defaults)
CLASSIFIER_LEARNING_RATE = 1e-3
#: its convolutions: 4×4, stride 2, these output channels, while the image side is above 8 pixels
CLASSIFIER_CHANNELS = (16, 32, 32, 64)
#: its hidden fully connected layer
CLASSIFIER_HIDDEN = 128
#: images rendered, classified or decoded per call
_CHUNK = 512
#: rounds of redrawing the class images that share their content image's class
_MAX_REDRAWS = 1_000

CHECK_SETTINGS = SettingsChecks(
    num_pairs=count("num_pairs"),
    num_test=count("num_test"),
    steps=count("steps"),
    batch_size=count("batch_size"),
    class_factors=check_class_factors_setting,
    class_dim=check_class_dim_setting,
)


@register_metric(
    checks=CHECK_SETTINGS, requires_encoder=True, data="labels",
    draws=lambda s: s["steps"] * s["batch_size"] + s["num_test"] + 2 * s["num_pairs"],
)
def swap_accuracy(
    dataset: Any,
    model: Any,
    *,
    seed: int = 0,
    num_pairs: int = 1_000,
    num_test: int = 1_000,
    steps: int = 1_000,
    batch_size: int = 64,
    class_factors: Sequence[str | int] | None = None,
    class_dim: int | None = None,
    representation_batch_size: int | None = None,
) -> dict[str, float]:
    """The rate at which an image decoded from one image's content code and another's class code is
    recognised as the second image's class.

    Models of the class/content objectives (Mathieu et al. 2016; DrNet, Denton & Birodkar 2017;
    LORD, Gabbay & Hoshen 2020; the F-statistic loss, Ridgeway & Mozer 2018) split a code into a
    content code and a class code (:mod:`disentangle.objectives.class_content`); Mathieu et al.,
    DrNet and LORD show theirs by swap grids, the content of one image drawn with the class of
    another (:func:`disentangle.visualize.swaps.swap_grid`). This scores such swaps with a
    classifier trained on real images:

    1. **An image classifier of the class**, independent of the model, trained on the dataset's own
       images and their class (the combination of the values of ``class_factors``): a small
       convolutional network (4×4 stride-2 convolutions of 16, 32, 32, 64 channels while the side
       is above 8 pixels, ReLU, a hidden layer of 128, then one logit per class; a two-layer MLP for
       observations that are not ``(C, H, W)`` images), He-uniform weights and zero biases from a
       generator seeded by ``seed``, trained for ``steps`` Adam steps (learning rate 1e-3) on the
       cross-entropy of ``batch_size`` images drawn afresh at every step (uniform grid points, or
       uniform images of a labelled sample, with replacement). ``swap_classifier_accuracy`` is its
       accuracy on ``num_test`` images drawn before it trains: trust the other scores as far as
       this one, and raise ``steps`` where it is low.
    2. **Swaps**: ``num_pairs`` content images ``x_i`` and as many class images ``x_j``, each ``x_j``
       redrawn until its class differs from ``x_i``'s. With ``μ`` the posterior mean
       (``model.encode(x)[0]``), ``C = class_dim`` and ``D`` the code size, the swap is
       ``x̂_ij = sigmoid(model.decode([μ(x_i)[:D−C], μ(x_j)[D−C:]]))`` (``model.decode_mean``).
    3. Scores, from the classifier's predictions ``ĉ`` on the swaps:

       * ``swap_accuracy``: the rate of ``ĉ(x̂_ij) = class(x_j)`` (1: the class code decides the class);
       * ``swap_content_class``: the rate of ``ĉ(x̂_ij) = class(x_i)`` (the class came with the
         content code: it leaks, or the decoder ignores the class code);
       * ``swap_chance``: the rate of the most frequent class among the ``x_j`` (what a decoder that
         always draws that class would score);
       * ``swap_reconstruction_accuracy``: the rate of ``ĉ(sigmoid(decode(μ(x_j)))) = class(x_j)``
         on the unswapped reconstructions, what ``swap_accuracy`` is to be read against (blurry
         reconstructions can fool a classifier trained on sharp images).

    ``class_factors`` (default: the first factor with more than one value, ``shape`` on dSprites and
    sprites) and ``class_dim`` (default ``D // 2``) as in :func:`~disentangle.metrics.class_leakage`;
    ``python -m disentangle.evaluate`` takes them from the run's ``objective`` section for a model of
    a class/content objective. Deterministic given ``seed`` on one device (cuDNN is told to choose
    deterministic algorithms while the classifier trains); the classifier trains on the model's
    device. ``model`` needs ``encode(x) -> (mu, logvar)`` and ``decode(z) -> logits``.

    Returns ``swap_accuracy``, ``swap_content_class``, ``swap_chance``,
    ``swap_reconstruction_accuracy`` and ``swap_classifier_accuracy``.
    """
    from ..data.classes import num_classes

    G.encoder_of(model)
    decode = _decoder_of(model)
    chosen = resolve_metric_class_factors(dataset, class_factors, "the metric 'swap_accuracy'")
    k = num_classes(dataset, chosen)
    if k < 2:
        raise ConfigError(
            f"the metric 'swap_accuracy' swaps the classes of images, and class_factors {list(chosen)} give a single "
            "class on this dataset. Name factors with more than one value."
        )
    if isinstance(getattr(model, "latent_dim", None), int):  # a bad class_dim is found before anything trains
        resolve_metric_class_dim(class_dim, model.latent_dim, "the metric 'swap_accuracy'")
    device = model_device(model)
    chunk = representation_batch_size or default_representation_batch_size(device)
    rng = np.random.default_rng(seed)
    with torch.inference_mode(False):  # the classifier trains, even under an outer inference mode
        x_test, y_test = _draw_images(dataset, num_test, rng, chosen, device)
        classifier = train_image_classifier(
            lambda n: _draw_images(dataset, n, rng, chosen, device), x_test.shape[1:], k,
            steps=steps, batch_size=batch_size, seed=derived_seed(seed, 2), device=device,
        )
        classifier_accuracy = float(np.mean(predict_classes(classifier, x_test) == y_test))
        del x_test
        content_keys, content_factors = _draw_keys(dataset, num_pairs, rng)
        content_labels = class_labels(dataset, content_factors, chosen)
        class_keys, class_factors_ = _draw_keys(dataset, num_pairs, rng)
        class_keys, class_factors_ = _redraw_same_class(dataset, rng, chosen, content_labels, class_keys, class_factors_)
        target_labels = class_labels(dataset, class_factors_, chosen)
        content_images = _render(dataset, content_keys, rng, device)
        class_images = _render(dataset, class_keys, rng, device)

        with torch.no_grad(), eval_mode(model):
            mu_content = _posterior_means(model, content_images, chunk)
            mu_class = _posterior_means(model, class_images, chunk)
            c = resolve_metric_class_dim(class_dim, mu_content.shape[1], "the metric 'swap_accuracy'")
            swapped = torch.cat([mu_content[:, :-c], mu_class[:, -c:]], dim=1)
            swapped_pred = predict_classes(classifier, _decoded(decode, swapped, chunk))
            reconstructed_pred = predict_classes(classifier, _decoded(decode, mu_class, chunk))
    return as_float_dict({
        "swap_accuracy": np.mean(swapped_pred == target_labels),
        "swap_content_class": np.mean(swapped_pred == content_labels),
        "swap_chance": majority_rate(target_labels),
        "swap_reconstruction_accuracy": np.mean(reconstructed_pred == target_labels),
        "swap_classifier_accuracy": classifier_accuracy,
    })


# ---------------------------------------------------------------- the image classifier
def image_classifier(observation_shape: Sequence[int], num_classes: int) -> nn.Sequential:
    """The classifier of :func:`swap_accuracy` for observations of ``observation_shape`` (untrained:
    call :func:`init_classifier`)."""
    layers: list[nn.Module] = []
    shape = tuple(int(s) for s in observation_shape)
    if len(shape) == 3:
        channels, height, width = shape
        for out in CLASSIFIER_CHANNELS:
            if min(height, width) <= 8:
                break
            layers += [nn.Conv2d(channels, out, kernel_size=4, stride=2, padding=1), nn.ReLU()]
            channels, height, width = out, height // 2, width // 2
        features = channels * height * width
    else:
        features = math.prod(shape)
    layers += [nn.Flatten(), nn.Linear(features, CLASSIFIER_HIDDEN), nn.ReLU(), nn.Linear(CLASSIFIER_HIDDEN, num_classes)]
    return nn.Sequential(*layers)


@torch.no_grad()
def init_classifier(network: nn.Module, generator: torch.Generator) -> nn.Module:
    """He-uniform weights (``U(±sqrt(6 / fan_in))``) and zero biases, drawn from ``generator`` (a CPU
    generator: the same weights on every device)."""
    for layer in network.modules():
        if isinstance(layer, (nn.Conv2d, nn.Linear)):
            fan_in = layer.weight[0].numel()
            bound = math.sqrt(6.0 / fan_in)
            weight = torch.empty(layer.weight.shape).uniform_(-bound, bound, generator=generator)
            layer.weight.copy_(weight)
            layer.bias.zero_()
    return network


def train_image_classifier(
    draw: Callable[[int], tuple[torch.Tensor, np.ndarray]], observation_shape: Sequence[int], num_classes: int, *,
    steps: int = 1_000, batch_size: int = 64, seed: int = 0, device: torch.device | str = "cpu",
) -> nn.Module:
    """:func:`image_classifier` trained on ``device`` as :func:`swap_accuracy` says: ``steps`` Adam
    steps on the cross-entropy of batches ``draw(batch_size)`` (float images ``(batch_size, ...)`` on
    ``device`` and their classes ``(batch_size,)`` in ``[0, num_classes)``); weights drawn from a CPU
    generator seeded by ``seed``. Returned in eval mode."""
    generator = torch.Generator().manual_seed(int(seed))
    network = init_classifier(image_classifier(observation_shape, num_classes), generator).to(device)
    optimizer = torch.optim.Adam(network.parameters(), lr=CLASSIFIER_LEARNING_RATE)
    network.train()
    flags = torch.backends.cudnn.flags(enabled=True, benchmark=False, deterministic=True)
    with flags, torch.enable_grad():
        for _ in range(steps):
            images, labels = draw(batch_size)
            targets = torch.as_tensor(np.asarray(labels), dtype=torch.int64, device=images.device)
            loss = nn.functional.cross_entropy(network(images), targets)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    return network.eval()


@torch.no_grad()
def predict_classes(classifier: nn.Module, images: torch.Tensor) -> np.ndarray:
    """The classifier's most likely class ``(n,)`` int64 of ``images``, in chunks."""
    parts = [classifier(images[i : i + _CHUNK]).argmax(dim=1).cpu() for i in range(0, len(images), _CHUNK)]
    return torch.cat(parts).numpy().astype(np.int64) if parts else np.zeros(0, dtype=np.int64)


# ---------------------------------------------------------------- drawing images, encoding, decoding
def _decoder_of(model: Any):
    """``model.decode_mean`` (images in [0, 1]), or ``sigmoid(model.decode(z))``; a clear error without one."""
    if callable(getattr(model, "decode_mean", None)):
        return model.decode_mean
    decode = getattr(model, "decode", None)
    if callable(decode):
        return lambda z: torch.sigmoid(decode(z))
    raise ConfigError(
        f"the metric 'swap_accuracy' decodes swapped codes, and {type(model).__name__} has no decode(z); pass the "
        "trained model (disentangle.load(run_dir))."
    )


def _draw_keys(dataset: Any, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``n`` draws: ``(keys, factors)``, the factor rows themselves on a grid (uniform), image indices
    and their labels on a labelled sample (uniform over its images, with replacement)."""
    if is_sample(dataset):
        dataset.require_labels("the metric 'swap_accuracy'")
        indices = dataset.sample_labelled_indices(n, rng)
        return indices, np.asarray(dataset.indices_to_factors(indices))
    factors = sample_factors(dataset, n, rng)
    return factors, factors


def _render(dataset: Any, keys: np.ndarray, rng: np.random.Generator, device: torch.device) -> torch.Tensor:
    """Float32 observations of ``keys`` (:func:`_draw_keys`) on ``device``, rendered in chunks."""
    parts = []
    for start in range(0, len(keys), _CHUNK):
        chunk = keys[start : start + _CHUNK]
        if is_sample(dataset):
            obs = dataset.observe(torch.as_tensor(chunk, device=dataset.device))
        else:
            obs = dataset.sample_observations_from_factors(chunk, rng)
        parts.append(torch.as_tensor(obs).to(device=device, dtype=torch.float32))
    return torch.cat(parts)


def _draw_images(
    dataset: Any, n: int, rng: np.random.Generator, class_factors: tuple[int, ...], device: torch.device
) -> tuple[torch.Tensor, np.ndarray]:
    keys, factors = _draw_keys(dataset, n, rng)
    return _render(dataset, keys, rng, device), class_labels(dataset, factors, class_factors)


def _redraw_same_class(
    dataset: Any, rng: np.random.Generator, class_factors: tuple[int, ...], content_labels: np.ndarray,
    keys: np.ndarray, factors: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """``keys``/``factors`` with every draw whose class equals ``content_labels`` at its row drawn
    again (only those, in row order) until none does."""
    keys, factors = keys.copy(), factors.copy()
    for _ in range(_MAX_REDRAWS):
        same = np.flatnonzero(class_labels(dataset, factors, class_factors) == content_labels)
        if len(same) == 0:
            return keys, factors
        new_keys, new_factors = _draw_keys(dataset, len(same), rng)
        keys[same], factors[same] = new_keys, new_factors
    raise ValueError(
        f"the metric 'swap_accuracy' found no image of another class after {_MAX_REDRAWS} draws: nearly every image "
        "of this dataset has one class. Choose class_factors that split the images into several classes."
    )


def _posterior_means(model: Any, images: torch.Tensor, chunk: int) -> torch.Tensor:
    parts = []
    for start in range(0, len(images), chunk):
        out = model.encode(images[start : start + chunk])
        parts.append(torch.as_tensor(out[0]).float())
    return torch.cat(parts)


def _decoded(decode: Any, codes: torch.Tensor, chunk: int) -> torch.Tensor:
    return torch.cat([torch.as_tensor(decode(codes[i : i + chunk])).float() for i in range(0, len(codes), chunk)])


__all__ = ["image_classifier", "init_classifier", "predict_classes", "swap_accuracy", "train_image_classifier"]
