import pytest

from disentangle import Registry, UnknownNameError
from disentangle.backbones import BACKBONES
from disentangle.data import DATASETS
from disentangle.objectives import OBJECTIVES


def test_register_build_names():
    reg = Registry("widget")

    @reg.register("double")
    def double(x: int = 1):
        return 2 * x

    reg.register("triple", lambda x=1: 3 * x)
    assert reg.names() == ("double", "triple")
    assert reg.build("double", x=4) == 8
    assert reg.build("triple", x=2) == 6
    assert "double" in reg and "nope" not in reg
    assert list(reg.parameters("double")) == ["x"]


def test_unknown_name_lists_choices_and_suggests():
    reg = Registry("objective")
    reg.register("beta_vae", lambda: None)
    reg.register("factor_vae", lambda: None)
    with pytest.raises(UnknownNameError) as err:
        reg.build("beta_vea")
    msg = str(err.value)
    assert "Unknown objective 'beta_vea'" in msg
    assert "Did you mean 'beta_vae'?" in msg
    assert "beta_vae, factor_vae" in msg


def test_duplicate_registration_is_refused():
    reg = Registry("thing")
    reg.register("a", lambda: 1)
    with pytest.raises(ValueError, match="already registered"):
        reg.register("a", lambda: 2)
    reg.register("a", lambda: 3, overwrite=True)
    assert reg.build("a") == 3


def test_public_registries_are_one_type():
    for reg in (BACKBONES, OBJECTIVES, DATASETS):
        assert isinstance(reg, Registry)
    assert {"conv64", "conv64_burgess", "mlp"} <= set(BACKBONES.names())
    assert "beta_vae" in OBJECTIVES
