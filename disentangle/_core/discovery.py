"""Import every module of a package so that its ``@REGISTRY.register`` decorators run."""
from __future__ import annotations

import importlib
import pkgutil


def import_submodules(package_name: str, package_path: list[str], skip: tuple[str, ...] = ()) -> None:
    for info in sorted(pkgutil.iter_modules(package_path), key=lambda m: m.name):
        if info.name.startswith("_") or info.name in skip:
            continue
        importlib.import_module(f"{package_name}.{info.name}")
