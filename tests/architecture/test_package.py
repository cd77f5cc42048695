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
