"""disentangle: learning and measuring disentangled representations in PyTorch."""
from __future__ import annotations

__version__ = "0.2.0.dev0"

# Before anything imports torch, whose OpenMP reads it once: waiting threads sleep rather than spin, so
# a CPU shared with other jobs slows a run down gracefully (disentangle._core.threads).
from ._core.threads import default_wait_policy as _default_wait_policy  # noqa: E402

_default_wait_policy()

import logging as _logging  # noqa: E402

# a library's messages go through logging, shown where the application (our CLIs: --quiet,
# --verbose) installs a handler; Python shows warnings without one
_logging.getLogger(__name__).addHandler(_logging.NullHandler())

from . import _compat  # noqa: E402
from . import config as _config  # noqa: E402
from ._core.registry import Registry  # noqa: E402
from .errors import ConfigError, DisentangleError, UnknownNameError  # noqa: E402
from .loading import load  # noqa: E402

_compat.install()  # the import paths of 0.1 (disentangle.trainer, ...), with a DeprecationWarning


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
    "backbones", "config", "data", "errors", "evaluate", "metrics", "models", "objectives", "study", "sweep",
    "training", "visualize", "zoo",
)


def __getattr__(name: str):
    import importlib

    if name in _LAZY_SUBMODULES or f"{__name__}.{name}" in _compat.MOVED_MODULES:  # the latter warn
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'disentangle' has no attribute '{name}'")
