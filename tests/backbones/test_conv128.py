"""``model.backbone: conv128``: conv64's architecture with one more stride-2 stage for 128×128 images.

Shapes by value, the layers and their parameter count by hand, the reference initialisation, the
transposed convolutions through ``train.conv_transpose_via_conv``, and short training runs through
``fit`` on an ``.npz`` file of random 128×128 images (channels-last, every objective that trains a
VAE of conv64)."""
from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest
import torch
from torch import nn

from disentangle.backbones import BACKBONES
from disentangle.config import load_config
from disentangle.errors import ConfigError
from disentangle.models.vae import VAE
from disentangle.objectives import OBJECTIVES
from disentangle.objectives.class_content import ClassContentObjective
from disentangle.objectives.infogan import InfoGAN
from disentangle.training import fit
from disentangle.training.conv_transpose import ConvTranspose2dViaConv, use_convolution_kernels
from disentangle.training.trainer import Trainer

pytestmark = pytest.mark.usefixtures("one_thread")


# ---------------------------------------------------------------------- shapes and layers
@pytest.mark.parametrize("channels", [1, 3])
def test_128_pixels_in_a_latent_out_and_back(channels):
    torch.manual_seed(0)
    model = VAE.from_backbone("conv128", image_shape=(channels, 128, 128), latent_dim=7)
    out = model(torch.rand(2, channels, 128, 128))
    assert out.mu.shape == out.logvar.shape == out.z.shape == (2, 7)
    assert out.logits.shape == (2, channels, 128, 128)
    assert torch.isfinite(out.logits).all()


def test_every_stage_halves_to_the_4x4_map_and_the_decoder_doubles_back():
    enc, dec = BACKBONES.build("conv128", image_shape=(3, 128, 128), latent_dim=10)
    convs = [m for m in enc.modules() if isinstance(m, nn.Conv2d)]
    assert [(c.in_channels, c.out_channels) for c in convs] == [(3, 32), (32, 32), (32, 64), (64, 64), (64, 64)]
    assert all(c.kernel_size == (4, 4) and c.stride == (2, 2) and c.padding == (1, 1) for c in convs)
    linears = [(m.in_features, m.out_features) for m in enc.modules() if isinstance(m, nn.Linear)]
    assert linears == [(1024, 256), (256, 10), (256, 10)]
    assert [(m.in_features, m.out_features) for m in dec.modules() if isinstance(m, nn.Linear)] == [(10, 256), (256, 1024)]
    deconvs = [m for m in dec.modules() if isinstance(m, nn.ConvTranspose2d)]
    assert [(d.in_channels, d.out_channels) for d in deconvs] == [(64, 64), (64, 64), (64, 32), (32, 32), (32, 3)]
    assert all(d.kernel_size == (4, 4) and d.stride == (2, 2) and d.padding == (1, 1) for d in deconvs)

    h, sizes = torch.zeros(1, 3, 128, 128), []
    for m in enc.convs:
        h = m(h)
        if isinstance(m, nn.Conv2d):
            sizes.append(tuple(h.shape[1:]))
    assert sizes == [(32, 64, 64), (32, 32, 32), (64, 16, 16), (64, 8, 8), (64, 4, 4)]
    h, sizes = dec.fc(torch.zeros(1, 10)).view(1, 64, 4, 4), []
    for m in dec.deconvs:
        h = m(h)
        if isinstance(m, nn.ConvTranspose2d):
            sizes.append(tuple(h.shape[1:]))
    assert sizes == [(64, 8, 8), (64, 16, 16), (32, 32, 32), (32, 64, 64), (3, 128, 128)]


def _conv(cin, cout, k=4):
    return cin * cout * k * k + cout


def _dense(fin, fout):
    return fin * fout + fout


@pytest.mark.parametrize("channels, latent_dim", [(1, 10), (3, 10), (3, 6)])
def test_the_parameter_count_is_the_hand_computed_one(channels, latent_dim):
    c, d = channels, latent_dim
    encoder = (_conv(c, 32) + _conv(32, 32) + _conv(32, 64) + _conv(64, 64) + _conv(64, 64)
               + _dense(4 * 4 * 64, 256) + 2 * _dense(256, d))
    decoder = (_dense(d, 256) + _dense(256, 1024)
               + _conv(64, 64) + _conv(64, 64) + _conv(64, 32) + _conv(32, 32) + _conv(32, c))
    # the closed forms of the module docstring
    assert encoder == 512 * c + 442_880 + 514 * d and decoder == 513 * c + 443_840 + 256 * d
    enc, dec = BACKBONES.build("conv128", image_shape=(c, 128, 128), latent_dim=d)
    assert sum(p.numel() for p in enc.parameters()) == encoder
    assert sum(p.numel() for p in dec.parameters()) == decoder
    if (c, d) == (3, 10):
        assert (encoder, decoder) == (449_556, 447_939)


@pytest.mark.parametrize("shape", [(3, 64, 64), (3, 128, 64), (1, 256, 256)])
def test_other_image_sizes_are_refused_by_name(shape):
    with pytest.raises(ConfigError, match="conv128.*128×128"):
        BACKBONES.build("conv128", image_shape=shape, latent_dim=4)


# ---------------------------------------------------------------------- initialisation
def _assert_glorot_uniform_and_zero_bias(name, layer):
    """TensorFlow's Glorot bound a = √(6 / (fan_in + fan_out)) (counted here from the layer's
    shape, independently of disentangle.backbones.init): every weight within ±a, the second moment
    a²/3 of U(−a, a) within 6 standard errors (a²·√(4 / (45 n))), every bias zero."""
    if isinstance(layer, nn.Linear):
        fan_sum = layer.in_features + layer.out_features
    else:
        fan_sum = (layer.in_channels + layer.out_channels) * math.prod(layer.kernel_size)
    a = math.sqrt(6.0 / fan_sum)
    w = layer.weight.detach().double()
    assert w.abs().max() <= a, name
    n = w.numel()
    assert abs(w.square().mean().item() - a * a / 3) < 6 * a * a * math.sqrt(4 / (45 * n)), name
    assert layer.bias is not None and torch.count_nonzero(layer.bias) == 0, name


def test_reference_init_draws_every_layer_from_its_glorot_bound():
    torch.manual_seed(0)
    model = VAE.from_backbone("conv128", image_shape=(3, 128, 128), latent_dim=10)  # model.init: reference
    layers = [(n, m) for n, m in model.named_modules() if isinstance(m, (nn.Linear, nn.Conv2d, nn.ConvTranspose2d))]
    assert len(layers) == 5 + 3 + 2 + 5  # convolutions, dense + heads, decoder dense, transposed convolutions
    for name, layer in layers:
        _assert_glorot_uniform_and_zero_bias(name, layer)
    # the first convolution's bound by value: (3 + 32)·16 = 560
    assert model.encoder.convs[0].weight.abs().max() <= math.sqrt(6 / 560)
    torch.manual_seed(0)
    legacy = VAE.from_backbone("conv128", image_shape=(3, 128, 128), latent_dim=10, init="pytorch")
    assert all(torch.count_nonzero(m.bias) > 0 for _, m in legacy.named_modules()
               if isinstance(m, (nn.Linear, nn.Conv2d, nn.ConvTranspose2d)))


# ---------------------------------------------------------------------- execution options
def test_transposed_convolutions_via_convolution_kernels_give_the_same_gradients():
    torch.manual_seed(0)
    model = VAE.from_backbone("conv128", image_shape=(3, 128, 128), latent_dim=6)
    twin = copy.deepcopy(model)
    assert use_convolution_kernels(twin.decoder) == 5
    assert {type(m) for m in twin.decoder.modules() if isinstance(m, nn.ConvTranspose2d)} == {ConvTranspose2dViaConv}
    z = torch.randn(3, 6)
    target = torch.rand(3, 3, 128, 128)
    losses = []
    for net in (model, twin):
        net = net.to(memory_format=torch.channels_last)
        loss = nn.functional.binary_cross_entropy_with_logits(net.decode(z), target)
        loss.backward()
        losses.append(loss.detach())
    torch.testing.assert_close(losses[0], losses[1])
    for (name, a), b in zip(model.decoder.named_parameters(), twin.decoder.parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-6, msg=name)


# ---------------------------------------------------------------------- training through fit
SIZES = (2, 2, 2)


@pytest.fixture(scope="module")
def random_128_npz(tmp_path_factory):
    """Eight random RGB 128×128 images on a 2×2×2 grid, in the ``npz`` dataset's format."""
    path = tmp_path_factory.mktemp("conv128") / "random128.npz"
    rows = np.indices(SIZES).reshape(len(SIZES), -1).T
    images = np.random.default_rng(0).integers(0, 256, (len(rows), 128, 128, 3), dtype=np.uint8)
    np.savez(path, images=images, factor_classes=rows, factor_names=np.array(["a", "b", "c"]))
    return path


def _overrides(out, npz, **extra):
    items = {
        "data.name": "npz", "data.path": str(npz), "model.backbone": "conv128", "model.latent_dim": 4,
        "train.steps": 3, "train.batch_size": 4, "train.log_every": 1, "train.checkpoint_every": 3,
        "train.out_dir": str(out), "train.progress": "false", "train.device": "cpu", "train.traversals": "false",
        "train.eval_metrics": "[]", **extra,
    }
    return [f"{k}={v}" for k, v in items.items()]


def test_fit_trains_conv128_channels_last_with_convolution_kernels(tmp_path, random_128_npz):
    config = load_config(None, _overrides(tmp_path / "run", random_128_npz, **{
        "objective.name": "beta_vae", "train.channels_last": "true", "train.conv_transpose_via_conv": "true",
    }))
    assert config.model.backbone == "conv128" and config.model.init == "reference"
    trainer = Trainer(config)
    result = trainer.fit()
    assert result.step == 3
    execution = json.loads((tmp_path / "run" / "execution.jsonl").read_text().splitlines()[0])
    assert execution["channels_last"] is True and execution["conv_transpose_via_conv"] is True
    deconvs = [m for m in trainer.model.decoder.modules() if isinstance(m, nn.ConvTranspose2d)]
    assert len(deconvs) == 5 and {type(m) for m in deconvs} == {ConvTranspose2dViaConv}
    assert trainer.model.encoder.convs[0].weight.is_contiguous(memory_format=torch.channels_last)
    losses = [json.loads(line)["loss"] for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert len(losses) == 3 and all(math.isfinite(v) for v in losses)
    # 128×128×3 Bernoulli reconstruction of uniform pixels: about 49,152 · ln 2 nats at the start
    assert 0.5 * 49_152 * math.log(2) < losses[0] < 2 * 49_152 * math.log(2)


#: the objectives that train a VAE on the backbone (not the GANs, which have their own generator)
VAE_OBJECTIVES = [n for n in OBJECTIVES.names() if not n.startswith("_") and not issubclass(OBJECTIVES.get(n), InfoGAN)]


@pytest.mark.parametrize("objective", VAE_OBJECTIVES)
def test_every_vae_objective_trains_conv128(objective, tmp_path, random_128_npz):
    classes = {"objective.class_factors": "[a]"} if issubclass(OBJECTIVES.get(objective), ClassContentObjective) else {}
    result = fit(load_config(None, _overrides(tmp_path, random_128_npz, **{
        "objective.name": objective, "train.steps": 2, "train.checkpoint_every": 2, **classes,
    })))
    assert result.step == 2
    assert all(math.isfinite(v) for v in result.last_terms.values() if isinstance(v, float)), result.last_terms
