"""The package's top level: subpackages reachable after a plain ``import disentangle``."""
from __future__ import annotations

import subprocess
import sys


def test_subpackages_are_attributes_after_import_disentangle():
    # a fresh interpreter: in this one, other tests have imported the subpackages already
    code = (
        "import sys, disentangle; "
        "assert 'disentangle.zoo' not in sys.modules; "  # nothing heavy on import
        "print(disentangle.zoo.names()[0], disentangle.metrics.mig.__name__, disentangle.sweep.run.__name__); "
        "getattr(disentangle, 'nonexistent')"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.stdout.split()[1:] == ["mig", "run"], proc.stderr
    assert "AttributeError: module 'disentangle' has no attribute 'nonexistent'" in proc.stderr


def test_import_disentangle_is_light():
    """``import disentangle`` loads at most ten of its modules and not torch: the rest (and torch)
    come on first use (``disentangle.load``, ``disentangle.metrics``, ...)."""
    code = (
        "import sys, disentangle; "
        "print(len([m for m in sys.modules if m == 'disentangle' or m.startswith('disentangle.')]), 'torch' in sys.modules); "
        "from disentangle import load; import disentangle.config as c; print(load.__module__, 'zoo' in c.CONFIG_SOURCES)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    lines = proc.stdout.split("\n")
    count, torch_loaded = lines[0].split()
    assert int(count) <= 10 and torch_loaded == "False", proc.stdout + proc.stderr
    assert lines[1] == "disentangle.loading True", proc.stdout + proc.stderr
