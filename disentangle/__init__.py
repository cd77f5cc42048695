"""disentangle: learning and measuring disentangled representations in PyTorch."""
from __future__ import annotations

__version__ = "0.1.0"

from . import config as _config  # noqa: E402
from .loading import load  # noqa: E402
from .registry import ConfigError, DisentangleError, Registry, UnknownNameError  # noqa: E402


def _zoo_config(name: str) -> dict:
    """The ``zoo:NAME`` config source (registered here, at the top of the package, so that
    ``disentangle.config`` need not know the zoo and the zoo may use ``disentangle.config``)."""
    from .zoo import config_dict

    return config_dict(name)


_config.CONFIG_SOURCES.register(_config.ZOO_PREFIX.rstrip(":"), _zoo_config)

__all__ = ["ConfigError", "DisentangleError", "Registry", "UnknownNameError", "load", "__version__"]

#: subpackages reachable as attributes after a plain ``import disentangle`` (imported on first use,
#: so ``import disentangle`` stays light): ``disentangle.zoo.names()``, ``disentangle.metrics.mig``...
_LAZY_SUBMODULES = (
    "backbones", "checks", "config", "data", "metrics", "objectives", "study", "sweep", "trainer",
    "visualize", "zoo",
)


def __getattr__(name: str):
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'disentangle' has no attribute '{name}'")
