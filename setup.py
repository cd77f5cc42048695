"""Package layout (the metadata is in pyproject.toml).

The shipped configs live in the top-level ``configs/`` folder of the repository (their single
source) and are installed as ``disentangle/configs/``, so that ``python -m disentangle.train
--config quickstart`` works after a plain (non-editable) ``pip install``. In a checkout,
``disentangle.config.configs_root`` finds the top-level folder instead.
"""
from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["disentangle", "disentangle.*"]), "disentangle.configs"],
    package_dir={"disentangle.configs": "configs"},
    package_data={
        "disentangle.configs": ["*.yaml", "*/*.yaml", "*/*/*.yaml"],
        "disentangle": ["zoo/*.json", "zoo/weights/*.safetensors"],
    },
)
