"""The user's own components: modules that register backbones, objectives, datasets or metrics.

A module of the user's registers its components when it is imported (``@OBJECTIVES.register("mine")``
and the like). Python code imports it itself; the command lines take ``--import MODULE`` (a dotted
module name importable here, or a path to a ``.py`` file), and a sweep file ``imports:``, so that the
names it registers can be used in a config, and a run trained with them can be resumed, evaluated
and shown. A folder is refused (given as a path, or by the name of a folder without ``__init__.py``,
which Python imports as an empty namespace package that runs none of its files): the message names
the ``.py`` files to give instead.
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
    registrations; a module that cannot be found, or a folder (a path, or a folder without
    ``__init__.py`` named as a module: it would register nothing), is one
    :class:`~disentangle.ConfigError` naming ``where`` it was given and the module to give instead.
    An error raised while a module runs is the module's own and propagates."""
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
            folder = Path(item).expanduser()
            if _looks_like_a_path(item) and folder.is_dir():
                raise ConfigError(_folder_message(item, [folder], where, package=(folder / "__init__.py").is_file()))
            if not item.strip() or item.startswith(".") or item != item.strip():
                raise ConfigError(
                    f"{where} {item!r} is not a module name. Give a dotted name importable here (mylab.components), "
                    f"or the path of a .py file (./mylab.py)."
                )
            try:
                module = importlib.import_module(item)
            except ModuleNotFoundError as err:
                if err.name is None or not (item == err.name or item.startswith(err.name + ".")):
                    raise  # the module was found and runs an import of its own that fails: its error, as it is
                raise ConfigError(
                    f"{where} '{item}' cannot be imported ({err}). Install it, put its folder on PYTHONPATH, or "
                    f"give the path of its .py file."
                ) from None
            if _is_namespace_package(module):
                del sys.modules[item]  # it ran nothing; an __init__.py added later is imported in this process
                raise ConfigError(_folder_message(item, [Path(p) for p in module.__path__], where, package=False))


def _looks_like_a_path(item: str) -> bool:
    """Whether ``item`` is written as a path (``my_lab/``, ``./mine``, ``~/lab``), not a dotted name."""
    return "/" in item or "\\" in item or item.startswith((".", "~"))


def _is_namespace_package(module: object) -> bool:
    """A folder without ``__init__.py`` imported by its name: importing it runs none of its files."""
    return getattr(module, "__file__", None) is None and hasattr(module, "__path__")


def _folder_message(item: str, folders: list[Path], where: str, package: bool) -> str:
    """Why a folder given to ``--import`` registers nothing, and the module to give instead."""

    def give(value: object) -> str:  # as the user would write it: --import VALUE, or 'VALUE' in a sweep file
        return f"{where} {value}" if where.startswith("--") else f"'{value}'"

    shown = " and ".join(f"'{f.resolve()}'" for f in folders)
    files = sorted({_relative(p) for f in folders for p in f.glob("*.py") if p.name != "__init__.py"})
    if package:
        return (f"{where} '{item}' is a folder ({shown}), not a module name or a .py file. Give the package's "
                f"name, {give(Path(item).expanduser().resolve().name)}, with the folder above it on PYTHONPATH, "
                f"or the path of the .py file that registers your components.")
    if len(files) == 1:
        fix = f"give its .py file, {give(files[0])}, or add an __init__.py to the folder that imports it"
    elif files:
        names = ", ".join(str(p) for p in files[:8]) + (f" and {len(files) - 8} more" if len(files) > 8 else "")
        each = f"one {where} each" if where.startswith("--") else "each listed"
        fix = (f"give the .py files that register your components, {each} ({names}), or add an "
               f"__init__.py to the folder that imports them")
    else:
        fix = "it holds no .py file; give the path of the .py file that registers your components"
    return (f"{where} '{item}' is a folder without an __init__.py ({shown}): importing it runs none of its files, "
            f"so it would register nothing. Name the module to import: {fix}.")


def _relative(path: Path) -> Path:
    """``path`` relative to the current folder when it lies under it, else absolute."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return path.resolve()
