"""disentangle: learning and measuring disentangled representations in PyTorch."""
from __future__ import annotations

__version__ = "0.1.0"

from .registry import ConfigError, DisentangleError, Registry, UnknownNameError  # noqa: E402
from .loading import load  # noqa: E402

__all__ = ["ConfigError", "DisentangleError", "Registry", "UnknownNameError", "load", "__version__"]
