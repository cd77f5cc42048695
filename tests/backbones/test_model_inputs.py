"""The model's public entry points (``encode``, ``model(x)``, ``decode``) name a batch of the wrong
dtype or layout in one paragraph with its fix, instead of failing inside the first layer.

Reproduced failure: ``model.encode(torch.from_numpy(images))`` with numpy's float64 images raised
``RuntimeError: Input type (double) and bias type (float) should be the same`` from the first
convolution, and a channels-last batch ``(B, H, W, C)`` got no hint about the layout.
"""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from disentangle.errors import InputError
from disentangle.models import VAE

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def model() -> VAE:
    torch.manual_seed(0)
    return VAE.from_backbone("conv64", image_shape=(1, 64, 64), latent_dim=4).eval()


def _apply_the_fix(message: str, name: str, value: torch.Tensor) -> torch.Tensor:
    """What the message's last sentence tells the user to pass (``Pass x.permute(0, 3, 1, 2).float().``)."""
    match = re.search(rf"[Pp]ass ({name}(?:\.\w+\([\d, ]*\))+)\.$", message)
    assert match, f"no fix at the end of: {message}"
    return eval(match.group(1), {name: value})  # noqa: S307 (the message's own expression)


def test_numpy_float64_images_name_the_dtype_and_the_fix(model):
    images = torch.from_numpy(np.random.default_rng(0).random((2, 1, 64, 64)))  # float64, as numpy makes them
    with pytest.raises(InputError) as error:  # was: RuntimeError, "Input type (double) and bias type (float)"
        model.encode(images)
    message = str(error.value)
    assert "float64" in message and "float32" in message and "torch.from_numpy" in message and "\n" not in message
    assert message.endswith("Pass x.float().")
    mu, logvar = model.encode(_apply_the_fix(message, "x", images))
    assert mu.shape == logvar.shape == (2, 4)
    with pytest.raises(InputError, match=r"float64"):  # model(x) and reconstruct go through encode
        model(images)
    with pytest.raises(InputError, match=r"float64"):
        model.reconstruct(images)
    assert model.representation(images.numpy()).shape == (2, 4)  # converts, as documented


def test_a_channels_last_batch_is_named_with_the_permutation(model):
    images = torch.rand(2, 64, 64, 1)
    with pytest.raises(InputError) as error:
        model.encode(images)
    message = str(error.value)
    assert "got shape (2, 64, 64, 1)" in message and "channels-last (B, H, W, C)" in message
    assert message.endswith("Pass x.permute(0, 3, 1, 2).")
    assert torch.equal(model.encode(_apply_the_fix(message, "x", images))[0], model.encode(images.permute(0, 3, 1, 2))[0])


def test_a_channels_last_float64_batch_gets_one_paragraph_with_both_fixes(model):
    images = torch.from_numpy(np.random.default_rng(1).random((3, 64, 64, 1)))
    with pytest.raises(InputError) as error:
        model.encode(images)
    message = str(error.value)
    assert "channels-last" in message and "float64" in message and message.endswith("Pass x.permute(0, 3, 1, 2).float().")
    assert model.encode(_apply_the_fix(message, "x", images))[0].shape == (3, 4)


def test_a_channels_last_image_and_another_channel_count(model):
    with pytest.raises(InputError) as error:
        model.encode(torch.rand(64, 64, 1))
    assert str(error.value).endswith("For this image, pass x.permute(2, 0, 1).unsqueeze(0).")
    assert model.encode(_apply_the_fix(str(error.value), "x", torch.rand(64, 64, 1)))[0].shape == (1, 4)
    with pytest.raises(InputError, match=r"channels-last .*trained on 1-channel images; the batch has 3 channels\.$"):
        model.encode(torch.rand(2, 64, 64, 3))  # no permutation fixes that: none is offered


def test_decode_names_the_codes_shape_and_dtype(model):
    with pytest.raises(InputError, match=r"model.decode takes latent codes \(B, 4\); got shape \(2, 5\)"):
        model.decode(torch.rand(2, 5))
    with pytest.raises(InputError) as error:
        model.decode(torch.from_numpy(np.zeros((2, 4))))
    assert "float64" in str(error.value) and str(error.value).endswith("Pass z.float().")
    with pytest.raises(InputError) as error:
        model.decode(torch.zeros(4))
    assert str(error.value).endswith("For one code, pass z.unsqueeze(0).")
    assert model.decode(_apply_the_fix(str(error.value), "z", torch.zeros(4))).shape == (1, 1, 64, 64)
    with pytest.raises(InputError, match=r"got dtype int64\. Pass z.float\(\)\."):
        model.decode_mean(torch.zeros(2, 4, dtype=torch.long))


def test_autocast_and_a_converted_model_take_their_own_dtypes(model):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert model.encode(torch.rand(2, 1, 64, 64, dtype=torch.bfloat16))[0].shape == (2, 4)
        with pytest.raises(InputError, match="float64"):  # autocast casts no float64 input
            model.encode(torch.rand(2, 1, 64, 64, dtype=torch.float64))
    with pytest.raises(InputError, match=r"got bfloat16 outside torch.autocast\. Pass x.float\(\)\."):
        model.encode(torch.rand(2, 1, 64, 64, dtype=torch.bfloat16))
    double = VAE.from_backbone("mlp", image_shape=(1, 8, 8), latent_dim=2).double().eval()
    assert double.encode(torch.rand(2, 1, 8, 8, dtype=torch.float64))[0].dtype == torch.float64
    assert double.representation(np.random.rand(3, 1, 8, 8)).dtype == torch.float64
    with pytest.raises(InputError, match=r"takes float64 images, the dtype of its weights; got float32\. Pass x.double\(\)\."):
        double.encode(torch.rand(2, 1, 8, 8))


def test_the_checks_read_only_shape_and_dtype(model):
    """A tensor on the ``meta`` device has a shape and a dtype but no values: the checks (which run
    on every training step) raise from them alone, with no read from the device."""
    with pytest.raises(InputError, match="channels-last"):
        model.encode(torch.empty(2, 64, 64, 1, device="meta"))
    with pytest.raises(InputError, match="float64"):
        model.encode(torch.empty(2, 1, 64, 64, device="meta", dtype=torch.float64))
    with pytest.raises(InputError, match="float64"):
        model.decode(torch.empty(2, 4, device="meta", dtype=torch.float64))


def test_reconstruct_takes_what_representation_takes(model):
    """model.reconstruct(numpy_array) raised AttributeError ('ndarray' has no 'to'); uint8 images are
    divided by 255, as representation does."""
    x = torch.rand(2, *model.image_shape)
    expected = model.reconstruct(x)
    torch.testing.assert_close(model.reconstruct(x.numpy()), expected)
    as_uint8 = (x * 255).round().to(torch.uint8)
    torch.testing.assert_close(model.reconstruct(as_uint8), model.reconstruct(as_uint8.float() / 255))
    # the codes tell the scale where an untrained decoder's output barely moves: exactly x / 255
    torch.testing.assert_close(model.representation(as_uint8), model.representation(as_uint8.float() / 255),
                               rtol=0, atol=0)
    assert isinstance(np.asarray(model.reconstruct(x.numpy())), np.ndarray)


def test_representation_takes_numpy_and_pil_layouts_where_the_shape_tells(model):
    """A notebook's images come channels-last (numpy, PIL) and gray ones as (H, W): representation
    and reconstruct take them as they come, and give what the channels-first batch gives."""
    images = torch.rand(2, *model.image_shape)
    expected = model.representation(images)
    last = images.permute(0, 2, 3, 1).numpy()
    torch.testing.assert_close(model.representation(last), expected)
    torch.testing.assert_close(model.representation(last[0]), expected[:1])
    if model.image_shape[0] == 1:
        torch.testing.assert_close(model.representation(images[0, 0].numpy()), expected[:1])
    torch.testing.assert_close(model.reconstruct(last), model.reconstruct(images))
    with pytest.raises(InputError, match="got shape"):  # what the shape cannot tell is still named
        model.representation(torch.rand(2, 5, 64, 64))


def test_decode_mean_is_the_sigmoid_of_the_logits(model):
    """decode gives Bernoulli logits, decode_mean the images: their sigmoid (not a clamp of the
    logits to [0, 1], which agrees with it nowhere but at the ends)."""
    z = 3.0 * torch.randn(8, 4, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits, mean = model.decode(z), model.decode_mean(z)
    torch.testing.assert_close(mean, torch.sigmoid(logits), rtol=0, atol=0)
    assert not torch.allclose(mean, logits.clamp(0, 1), atol=1e-3)
