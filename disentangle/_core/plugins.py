"""The user's own components: modules that register backbones, objectives, datasets or metrics.

A module of the user's registers its components when it is imported (``@OBJECTIVES.register("mine")``
and the like). Python code imports it itself; the command lines take ``--import MODULE`` (a dotted
module name importable here, or a path to a ``.py`` file), and a sweep file ``imports:``, so that the
names it registers can be used in a config, and a run trained with them can be resumed, evaluated
and shown.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path

from ..errors import ConfigError


def plugin_module_name(path: str | Path) -> str:
    """The name a ``.py`` file is imported under: its stem and a hash of its resolved path, so two
    files of one name in two folders are two modules, and one file is imported once per process."""
    resolved = str(Path(path).resolve())
    return f"_disentangle_plugin_{Path(resolved).stem}_{hashlib.sha256(resolved.encode()).hexdigest()[:8]}"


def import_plugins(imports: list[str], where: str = "--import") -> None:
    """Import modules (dotted names, or paths of ``.py`` files) once per process, for their
    registrations; a module that cannot be found is one :class:`~disentangle.ConfigError` naming
    ``where`` it was given. An error raised while a module runs is the module's own and propagates."""
    for item in imports:
        if item.endswith(".py"):
            path = Path(item).expanduser()
            if not path.is_file():
                raise ConfigError(f"{where} '{item}' is not a file (looked for '{path.resolve()}'). Give the path "
                                  f"of a .py file, or the dotted name of a module importable here.")
            module_name = plugin_module_name(path)
            if module_name in sys.modules:
                continue
            spec = importlib.util.spec_from_file_location(module_name, path)
            if spec is None or spec.loader is None:
                raise ConfigError(f"{where} '{item}' cannot be imported: it is not a Python module.")
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module
            try:
                spec.loader.exec_module(module)
            except Exception:
                del sys.modules[module_name]
                raise
        else:
            try:
                importlib.import_module(item)
            except ImportError as err:
                raise ConfigError(
                    f"{where} '{item}' cannot be imported ({err}). Install it, put its folder on PYTHONPATH, or "
                    f"give the path of its .py file."
                ) from None
