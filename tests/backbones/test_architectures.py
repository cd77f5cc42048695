import pytest
import torch
from torch import nn

from disentangle.backbones import BACKBONES
from disentangle.models.vae import VAE


@pytest.mark.parametrize("channels", [1, 3])
@pytest.mark.parametrize("name", ["conv64", "conv64_burgess"])
def test_conv_backbones_shapes(name, channels):
    model = VAE.from_backbone(name, image_shape=(channels, 64, 64), latent_dim=7)
    out = model(torch.rand(2, channels, 64, 64))
    assert out.mu.shape == out.logvar.shape == out.z.shape == (2, 7)
    assert out.logits.shape == (2, channels, 64, 64)


def test_conv64_matches_locatello_architecture():
    enc, dec = BACKBONES.build("conv64", image_shape=(1, 64, 64), latent_dim=10)
    convs = [m for m in enc.modules() if isinstance(m, nn.Conv2d)]
    assert [c.out_channels for c in convs] == [32, 32, 64, 64]
    assert [c.kernel_size[0] for c in convs] == [4, 4, 2, 2]
    assert all(c.stride == (2, 2) for c in convs)
    linears = [m for m in enc.modules() if isinstance(m, nn.Linear)]
    assert [(l.in_features, l.out_features) for l in linears] == [(1024, 256), (256, 10), (256, 10)]
    dec_linears = [m for m in dec.modules() if isinstance(m, nn.Linear)]
    assert [(l.in_features, l.out_features) for l in dec_linears] == [(10, 256), (256, 1024)]
    deconvs = [m for m in dec.modules() if isinstance(m, nn.ConvTranspose2d)]
    assert [(d.in_channels, d.out_channels, d.kernel_size[0], d.stride[0]) for d in deconvs] == [
        (64, 64, 4, 2), (64, 32, 4, 2), (32, 32, 4, 2), (32, 1, 4, 2)]
    # intermediate sizes halve exactly like TensorFlow's "same" padding: 64 -> 32 -> 16 -> 8 -> 4
    h = torch.zeros(1, 1, 64, 64)
    sizes = []
    for m in enc.convs:
        h = m(h)
        if isinstance(m, nn.Conv2d):
            sizes.append(h.shape[-1])
    assert sizes == [32, 16, 8, 4]


def _layers(module):
    return [(type(m).__name__, getattr(m, "in_features", None), getattr(m, "out_features", None))
            for m in module.modules() if isinstance(m, (nn.Linear, nn.ReLU, nn.Tanh))]


def test_mlp_encoder_is_locatello_and_the_reference_decoder_is_an_option():
    """disentanglement_lib's fc_encoder: 1200-1200 ReLU then the Gaussian heads; its fc_decoder:
    1200-1200-1200 with tanh, then the pixels (hardening item 15: the default decoder mirrors the
    encoder, which is not the reference's)."""
    enc, dec = BACKBONES.build("mlp", image_shape=(1, 64, 64), latent_dim=10)
    assert _layers(enc) == [("Linear", 4096, 1200), ("ReLU", None, None), ("Linear", 1200, 1200),
                            ("ReLU", None, None), ("Linear", 1200, 10), ("Linear", 1200, 10)]
    assert _layers(dec) == [("Linear", 10, 1200), ("ReLU", None, None), ("Linear", 1200, 1200),
                            ("ReLU", None, None), ("Linear", 1200, 4096)]
    _, ref = BACKBONES.build("mlp", image_shape=(1, 64, 64), latent_dim=10, decoder="locatello")
    assert _layers(ref) == [("Linear", 10, 1200), ("Tanh", None, None), ("Linear", 1200, 1200),
                            ("Tanh", None, None), ("Linear", 1200, 1200), ("Tanh", None, None),
                            ("Linear", 1200, 4096)]
    assert ref(torch.zeros(2, 10)).shape == (2, 1, 64, 64)


def test_conv64_rejects_wrong_image_size():
    with pytest.raises(ValueError, match="64×64"):
        BACKBONES.build("conv64", image_shape=(1, 32, 32), latent_dim=4)


def test_representation_is_chunked_posterior_mean():
    torch.manual_seed(0)
    model = VAE.from_backbone("mlp", image_shape=(1, 8, 8), latent_dim=3, hidden_sizes=[16]).eval()
    x = torch.rand(50, 1, 8, 8)
    full = model.encode(x)[0]
    torch.testing.assert_close(model.representation(x, batch_size=7), full)
    torch.testing.assert_close(model.representation(x.numpy()), full)
    assert model.representation(x[0]).shape == (1, 3)


def test_user_backbone_can_be_registered_and_trained(tmp_path, tiny_overrides):
    from disentangle.config import load_config
    from disentangle.training.trainer import fit

    class TinyEncoder(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.net = nn.Sequential(nn.Flatten(), nn.Linear(256, 2 * d))

        def forward(self, x):
            return self.net(x).chunk(2, dim=1)

    @BACKBONES.register("_test_user_backbone", overwrite=True)
    def user_backbone(image_shape, latent_dim: int, width: int = 8):
        return TinyEncoder(latent_dim), nn.Sequential(nn.Linear(latent_dim, 256), nn.Unflatten(1, (1, 16, 16)))

    overrides = [o for o in tiny_overrides(tmp_path / "run", steps=4) if not o.startswith("model.")]
    config = load_config(None, overrides + ["model.backbone=_test_user_backbone", "model.width=4", "model.latent_dim=2"])
    assert config.model.params == {"width": 4}
    result = fit(config)
    assert result.step == 4
