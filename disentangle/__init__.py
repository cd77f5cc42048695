"""disentangle: learning and measuring disentangled representations in PyTorch."""
from __future__ import annotations

__version__ = "0.2.0.dev0"

# Before anything imports torch, whose OpenMP reads it once: waiting threads sleep rather than spin, so
# a CPU shared with other jobs slows a run down gracefully (disentangle._core.threads).
from ._core.threads import default_wait_policy as _default_wait_policy  # noqa: E402

_default_wait_policy()

# The package's messages go through logging (the logger "disentangle"), shown where the application
# installs a handler (our command lines: --quiet, --verbose). No NullHandler here: without any
# handler, Python's last resort shows warnings and errors on stderr, so a notebook or a script that
# configured nothing still sees a warning the guides promise (a setting that does nothing, a slowdown).

from . import _compat  # noqa: E402
from ._core.registry import Registry  # noqa: E402
from .errors import ConfigError, DisentangleError, UnknownNameError  # noqa: E402

_compat.install()  # the import paths of 0.1 (disentangle.trainer, ...), with a DeprecationWarning

__all__ = ["ConfigError", "DisentangleError", "Registry", "UnknownNameError", "load", "__version__"]

#: subpackages reachable as attributes after a plain ``import disentangle`` (imported on first use,
#: so ``import disentangle`` stays light): ``disentangle.zoo.names()``, ``disentangle.metrics.mig``...
_LAZY_SUBMODULES = (
    "backbones", "config", "data", "errors", "evaluate", "metrics", "models", "objectives", "study", "sweep",
    "training", "visualize", "zoo",
)


def __getattr__(name: str):
    import importlib

    if name == "load":  # disentangle.load: the loading module (and torch's models) on first use
        from .loading import load

        return load
    if name in _LAZY_SUBMODULES or f"{__name__}.{name}" in _compat.MOVED_MODULES:  # the latter warn
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'disentangle' has no attribute '{name}'")
