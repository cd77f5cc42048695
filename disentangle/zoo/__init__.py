"""The model zoo: recipes by name and pretrained weights (see :mod:`disentangle.zoo.locatello`)."""
from __future__ import annotations
