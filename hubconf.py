"""torch.hub entry points of the disentangle model zoo.

    torch.hub.load("path/to/disentangle", "beta_vae-sprites-beta4-cpu20k-ref-s0", source="local")
    torch.hub.load("path/to/disentangle", "zoo_model", name="beta_vae-sprites-beta4-cpu20k-ref-s0", source="local")

Every pretrained model of the manifests (``python -m disentangle.zoo list --pretrained``) is an
entry point under its own name, returning the model in eval mode; ``zoo_model(name)`` loads any of
them. The weight files are verified against the manifest's sha256 (see ``disentangle.zoo``).
"""
dependencies = ["torch", "safetensors", "yaml"]


def zoo_model(name: str, map_location: str = "cpu"):
    """The pretrained zoo model ``name`` (a :class:`disentangle.models.vae.VAE` in eval mode)."""
    from disentangle import zoo

    return zoo.load(name, map_location=map_location)


def _entry_point(name: str):
    def load(map_location: str = "cpu"):
        return zoo_model(name, map_location=map_location)

    load.__name__ = name
    load.__doc__ = f"The pretrained zoo model {name!r} in eval mode (see python -m disentangle.zoo info {name})."
    return load


def _register_pretrained() -> None:
    from disentangle import zoo

    for name in zoo.names(pretrained=True):
        # torch.hub looks entry points up with getattr, so names need not be identifiers
        globals()[name] = _entry_point(name)


_register_pretrained()
