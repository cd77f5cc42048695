"""Transposed convolutions whose gradients run on regular-convolution kernels: the same outputs and
gradients as PyTorch's own backward (against autograd and against an independent computation), in
fp32 and under bf16 autocast, with every geometry the class accepts; the module switch keeps
parameters, state-dict keys, deepcopy and optimizers; a training run is unchanged by it."""
from __future__ import annotations

import copy
import json

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from disentangle._core.hardware import choose_conv_transpose_via_conv
from disentangle.config import load_config
from disentangle.training import Trainer
from disentangle.training.conv_transpose import (
    ConvTranspose2dViaConv,
    conv_transpose2d_via_conv,
    use_convolution_kernels,
)

GEOMETRIES = [  # (in, out, kernel, stride, padding, output_padding, groups, dilation, bias)
    (32, 32, 4, 2, 1, 0, 1, 1, True),  # conv64's decoder
    (32, 1, 4, 2, 1, 0, 1, 1, True),  # its last layer
    (6, 4, 3, 2, 1, 1, 2, 1, False),  # output padding, groups, no bias
    (5, 3, 3, 1, 2, 0, 1, 2, True),  # dilation
    (4, 6, (3, 2), (2, 1), (1, 0), (1, 0), 1, 1, True),  # rectangular kernel, uneven stride
]


def _grads(module: nn.Module, x: torch.Tensor, grad_y: torch.Tensor, autocast: bool):
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        y = module(x)
    inputs = [x, module.weight] + ([module.bias] if module.bias is not None else [])
    return (y, *torch.autograd.grad(y, inputs, grad_y.to(y.dtype)))


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=lambda g: "-".join(map(str, g)))
@pytest.mark.parametrize("channels_last", [False, True], ids=["contiguous", "channels-last"])
def test_outputs_and_gradients_equal_pytorchs(geometry, channels_last):
    cin, cout, k, s, p, op, g, d, bias = geometry
    torch.manual_seed(0)
    native = nn.ConvTranspose2d(cin, cout, k, s, p, op, g, bias, d)
    ours = copy.deepcopy(native)
    assert use_convolution_kernels(ours) == 1 and type(ours) is ConvTranspose2dViaConv
    x = torch.randn(3, cin, 7, 6)
    if channels_last:
        native, ours = (m.to(memory_format=torch.channels_last) for m in (native, ours))
        x = x.contiguous(memory_format=torch.channels_last)
    x.requires_grad_(True)
    grad_y = torch.randn_like(native(x))
    for autocast, tol in ((False, 1e-5), (True, 1e-2)):
        expected = _grads(native, x, grad_y, autocast)
        got = _grads(ours, x, grad_y, autocast)
        for name, e, o in zip(("y", "x", "weight", "bias"), expected, got):
            assert o.dtype == e.dtype and o.shape == e.shape, name
            scale = e.abs().max().clamp_min(1e-12)
            assert ((o.float() - e.float()).abs().max() / scale) <= tol, (name, autocast)


def test_weight_gradient_matches_a_direct_sum():
    """dL/dW[i, o, p, q] = Σ x[n, i, u, v] · dL/dy[n, o, s·u + p − pad, s·v + q − pad] written out."""
    torch.manual_seed(1)
    stride, pad, k = 2, 1, 4
    x = torch.randn(2, 3, 4, 5)
    weight = torch.randn(3, 2, k, k, requires_grad=True)
    y = conv_transpose2d_via_conv(x, weight, None, (stride, stride), (pad, pad))
    grad_y = torch.randn_like(y)
    (grad_w,) = torch.autograd.grad(y, [weight], grad_y)
    direct = torch.zeros(3, 2, k, k, dtype=torch.float64)
    gy, xx = grad_y.double(), x.double()
    for p in range(k):
        for q in range(k):
            for u in range(x.shape[2]):
                for v in range(x.shape[3]):
                    r, c = stride * u + p - pad, stride * v + q - pad
                    if 0 <= r < y.shape[2] and 0 <= c < y.shape[3]:
                        direct[:, :, p, q] += torch.einsum("ni,no->io", xx[:, :, u, v], gy[:, :, r, c])
    torch.testing.assert_close(grad_w.double(), direct, rtol=1e-5, atol=1e-5)


def test_the_switch_keeps_the_module():
    torch.manual_seed(0)
    net = nn.Sequential(nn.ConvTranspose2d(4, 4, 4, 2, 1), nn.ReLU(), nn.ConvTranspose2d(4, 1, 4, 2, 1),
                        nn.ConvTranspose2d(1, 1, 3, padding=1, padding_mode="zeros"), nn.Conv2d(1, 1, 1))
    keys = {k: v.clone() for k, v in net.state_dict().items()}
    params = list(net.parameters())
    opt = torch.optim.Adam(net.parameters())
    assert use_convolution_kernels(net) == 3
    assert use_convolution_kernels(net) == 0  # already switched
    assert all(isinstance(m, nn.ConvTranspose2d) for m in net[:4] if not isinstance(m, nn.ReLU))
    assert list(net.parameters()) == params and opt.param_groups[0]["params"] == params
    assert {k: v for k, v in net.state_dict().items()}.keys() == keys.keys()
    assert all(torch.equal(net.state_dict()[k], v) for k, v in keys.items())
    twin = copy.deepcopy(net)
    assert type(twin[0]) is ConvTranspose2dViaConv and twin[0].weight is not net[0].weight
    x = torch.randn(2, 4, 5, 5)
    torch.testing.assert_close(twin(x), net(x))
    # an explicit output_size goes through the parent's forward (it derives the output padding)
    out = net[0](x, output_size=[11, 11])
    assert out.shape[-2:] == (11, 11)


def test_a_subclass_is_left_alone():
    """A subclass may have its own forward; only plain nn.ConvTranspose2d modules are switched."""

    class Custom(nn.ConvTranspose2d):
        pass

    net = nn.Sequential(Custom(2, 2, 3))
    assert use_convolution_kernels(net) == 0 and type(net[0]) is Custom


def test_auto_choice():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert choose_conv_transpose_via_conv("auto", cpu, "AVX512") == (True, "auto: oneDNN on AVX512")
    assert choose_conv_transpose_via_conv("auto", cpu, "AMX")[0]
    assert choose_conv_transpose_via_conv("auto", cpu, "AVX2") == (True, "auto: oneDNN on AVX2")
    assert choose_conv_transpose_via_conv("auto", cpu, "DEFAULT") == (False, "auto: DEFAULT CPU, not measured")
    assert choose_conv_transpose_via_conv("auto", cuda, "AVX512") == (False, "auto: not measured on cuda")
    assert choose_conv_transpose_via_conv(True, cuda) == (True, "set")
    assert choose_conv_transpose_via_conv(False, cpu, "AVX512") == (False, "set")


def _run(tmp_path, name, setting, precision):
    out = tmp_path / name
    config = load_config(None, [
        f"train.out_dir={out}", "train.steps=12", "train.log_every=3", "train.progress=false",
        "train.traversals=false", "train.checkpoint_every=6", f"train.precision={precision}", "train.batch_size=16",
        f"train.conv_transpose_via_conv={setting}", "train.channels_last=true",
    ])
    trainer = Trainer(config)
    trainer.fit()
    losses = [json.loads(line)["loss"] for line in (out / "log.jsonl").read_text().splitlines()]
    execution = json.loads((out / "execution.jsonl").read_text().splitlines()[0])
    return trainer, losses, execution


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_a_run_trains_the_same_with_either_kernel(tmp_path, precision):
    """The conv64 β-VAE, channels-last: the same losses to 1e-4 (relative) with either backward,
    and the run's execution record says which ran."""
    native, native_losses, native_record = _run(tmp_path, "native", "false", precision)
    ours, our_losses, our_record = _run(tmp_path, "ours", "true", precision)
    assert native_record["conv_transpose_via_conv"] is False and our_record["conv_transpose_via_conv"] is True
    assert our_record["conv_transpose_reason"] == "set"
    decoders = [type(m) for m in ours.model.decoder.modules() if isinstance(m, nn.ConvTranspose2d)]
    assert decoders and set(decoders) == {ConvTranspose2dViaConv}
    assert {type(m) for m in native.model.decoder.modules() if isinstance(m, nn.ConvTranspose2d)} == {nn.ConvTranspose2d}
    assert len(our_losses) == len(native_losses) == 4
    for a, b in zip(our_losses, native_losses):
        assert abs(a - b) <= 1e-4 * abs(b), (a, b)
    state = ours.model.state_dict()
    assert state.keys() == native.model.state_dict().keys()


def test_the_function_under_autocast_returns_the_autocast_dtype():
    x = torch.randn(2, 3, 4, 4)
    w = torch.randn(3, 2, 4, 4, requires_grad=True)
    b = torch.randn(2, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = conv_transpose2d_via_conv(x, w, b, (2, 2), (1, 1))
        expected = F.conv_transpose2d(x, w, b, (2, 2), (1, 1))
    assert y.dtype == expected.dtype == torch.bfloat16
    y.float().sum().backward()
    assert w.grad.dtype == torch.float32 and b.grad.dtype == torch.float32
