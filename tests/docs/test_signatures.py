"""The calls the docs show match the functions they call: every keyword a page passes to a public
function or class of the package is one of its parameters, and no call passes more positional
arguments than it takes.

The snippet tests run the pages whose blocks are whole programs; the other pages' fragments (a
user's images, a config's keys) and the inline spans of the text (``from_arrays(images,
labels=None)``) are not run, and a renamed parameter there is the user's first ``TypeError``. Each
fragment and span that parses as Python is read with :mod:`ast`; a call is checked when its name
resolves to an object of the package: a dotted name from ``disentangle`` (or from one of its public
subpackages, ``data.from_arrays``), or a bare name that exactly one public object of the package
has.
"""
from __future__ import annotations

import ast
import functools
import importlib
import inspect
import re
import warnings
from collections import defaultdict
from pathlib import Path

import pytest

from tests.docs.test_site import _modules_with_all

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
FENCED = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
#: reST literals in docstrings
LITERAL = re.compile(r"``([^`]+)``")


@functools.cache
def public_modules() -> dict[str, object]:
    """The package's public modules by name (those with ``__all__``), the deprecated old paths
    (``disentangle._compat``'s, which warn when imported) left out: the docs show the new ones."""
    modules = {}
    for module_name in _modules_with_all():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", DeprecationWarning)
            module = importlib.import_module(module_name)
        if not any(issubclass(w.category, DeprecationWarning) for w in caught):
            modules[module_name] = module
    return modules


@functools.cache
def public_callables() -> dict[str, list[object]]:
    """``{name: [objects]}`` of the functions and classes the public modules export."""
    found: dict[str, list[object]] = defaultdict(list)
    for module in public_modules().values():
        for name in module.__all__:
            obj = getattr(module, name, None)
            if (inspect.isfunction(obj) or inspect.isclass(obj)) and not any(obj is o for o in found[name]):
                found[name].append(obj)
    return found


def code_pieces(text: str) -> list[str]:
    """The Python a page shows: its ```python blocks (whole, else line by line) and inline spans."""
    pieces = []
    for block in FENCED.findall(text):
        try:
            ast.parse(block)
            pieces.append(block)
        except SyntaxError:
            pieces.extend(block.splitlines())
    outside = FENCED.sub("", re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL))
    pieces.extend(INLINE.findall(outside))
    return pieces


def docstring_pieces(source: str) -> list[str]:
    """The Python a module's docstrings may show: their ````literals```` and each of their lines
    (a ``::`` block's, a ``>>>`` example's; prose does not parse, or calls nothing of ours)."""
    pieces = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node) or ""
            pieces += LITERAL.findall(doc) + [line.strip().removeprefix(">>> ") for line in doc.splitlines()]
    return pieces


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _attribute_path(dotted: str) -> object | None:
    """What ``dotted`` names as Python code reads it: each part an attribute of the one before
    (importing a submodule only where the attribute is missing); None when a part is absent."""
    parts = dotted.split(".")
    obj = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], 2):
        if not hasattr(obj, part):
            try:
                importlib.import_module(".".join(parts[:i]))
            except ImportError:
                return None
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def resolve_call(name: str, public: dict[str, list[object]]) -> object | None:
    """The package's object a call's dotted name names, or None (not ours, or ambiguous)."""
    root = name.split(".")[0]
    candidates = [name] if root == "disentangle" else []
    if "." in name and f"disentangle.{root}" in public_modules():  # data.from_arrays, metrics.mig
        candidates.append(f"disentangle.{name}")
    for candidate in candidates:
        obj = _attribute_path(candidate)
        if inspect.isfunction(obj) or inspect.isclass(obj):
            return obj
    if "." not in name and len(public.get(name, [])) == 1:
        return public[name][0]
    return None


def signature_problems(call: ast.Call, obj: object) -> list[str]:
    """What is wrong with ``call`` of ``obj``: unknown keywords, too many positional arguments."""
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):
        return []
    parameters = signature.parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        known = None
    else:
        known = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    problems = [f"no parameter '{k.arg}'" for k in call.keywords if k.arg and known is not None and k.arg not in known]
    if not any(p.kind is p.VAR_POSITIONAL for p in parameters) and not any(
            isinstance(a, ast.Starred) for a in call.args):
        positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if len(call.args) > len(positional):
            problems.append(f"{len(call.args)} positional arguments, it takes {len(positional)}")
    return problems


def page_problems(text: str, public: dict[str, list[object]], pieces: list[str] | None = None) -> list[str]:
    """The problems of the calls in a page's :func:`code_pieces` (or in ``pieces``)."""
    problems = []
    for piece in code_pieces(text) if pieces is None else pieces:
        try:
            tree = ast.parse(piece.strip())
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or (name := _dotted(node.func)) is None:
                continue
            obj = resolve_call(name, public)
            if obj is not None:
                problems += [f"{ast.unparse(node)}: {p}" for p in signature_problems(node, obj)]
    return problems


def test_a_wrong_keyword_and_too_many_arguments_are_found():
    public = public_callables()
    text = ("Use `from_arrays(images, labels=None)` or\n```python\nimport disentangle\n"
            "disentangle.data.from_arrays(x, c, n, device='cpu')\ndata.from_arrays(x, layout='NHWC')\n"
            "metrics.mig(ds, model, 1, 2, 3)\nmy_own(x, anything=1)\n```\n")
    assert page_problems(text, public) == [
        "metrics.mig(ds, model, 1, 2, 3): 5 positional arguments, it takes 2",
        "from_arrays(images, labels=None): no parameter 'labels'",
    ]
    source = '"""Use ``from_arrays(x, labels=y)``::\n\n    fit(config, datset=mine)\n"""\n'
    assert page_problems("", public, docstring_pieces(source)) == [
        "from_arrays(x, labels=y): no parameter 'labels'", "fit(config, datset=mine): no parameter 'datset'"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_the_calls_a_page_shows_match_the_signatures(page):
    assert page_problems(page.read_text(), public_callables()) == []


def test_the_calls_the_docstrings_show_match_the_signatures():
    """The API reference is rendered from the docstrings: their examples are read the same way."""
    public = public_callables()
    problems = []
    for path in sorted((REPO / "disentangle").rglob("*.py")):
        found = page_problems("", public, docstring_pieces(path.read_text()))
        problems += [f"{path.relative_to(REPO)}: {p}" for p in found]
    assert problems == []
