"""The package's import structure: no import cycle, and imports that flow one way between layers.

The import graph is read from the source with :mod:`ast` (nothing is imported): one node per
module (a package is its ``__init__``), one edge per ``import`` / ``from ... import`` statement,
module-level or inside a function, except under ``if TYPE_CHECKING:``. An edge goes to the exact
module named (``from .metrics import mig`` -> ``disentangle.metrics.mig`` when that is a module,
else ``disentangle.metrics``), not to its parent packages; a module importing a package it lives in
adds no edge (Python has already imported that package before the module).
"""
from __future__ import annotations

import ast
import importlib
import typing
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "disentangle"
NAME = PACKAGE.name


def _modules() -> dict[str, Path]:
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(module: str, is_package: bool, node: ast.Import | ast.ImportFrom, modules: dict[str, Path]) -> set[str]:
    """The package modules an import statement of ``module`` names."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level:
            base = module.split(".") if is_package else module.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        # "from pkg import name": the submodule pkg.name if there is one, else pkg itself
        names = [f"{target}.{alias.name}" if f"{target}.{alias.name}" in modules else target for alias in node.names]
    found = set()
    for name in names:
        if name != NAME and not name.startswith(NAME + "."):
            continue
        while name not in modules and "." in name:  # "import pkg.mod.attr" or an unknown name: its module
            name = name.rsplit(".", 1)[0]
        if name in modules:
            found.add(name)
    return found


class _ImportVisitor(ast.NodeVisitor):
    """The package modules one module's import statements name (skipping ``if TYPE_CHECKING:``)."""

    def __init__(self, module: str, is_package: bool, modules: dict[str, Path]) -> None:
        self.module, self.is_package, self.modules = module, is_package, modules
        self.edges: set[str] = set()

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            for child in node.orelse:  # the else branch runs
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self.edges.update(_imported(self.module, self.is_package, node, self.modules))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self.edges.update(_imported(self.module, self.is_package, node, self.modules))


def import_graph() -> dict[str, set[str]]:
    """``{module: modules it imports}`` over the whole package (see the module docstring)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        visitor = _ImportVisitor(module, path.name == "__init__.py", modules)
        visitor.visit(ast.parse(path.read_text(), filename=str(path)))
        # a package the module lives in (or the module itself) is no edge
        graph[module] = {t for t in visitor.edges if t != module and not module.startswith(t + ".")}
    return graph


def strongly_connected_components(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; every component, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph.get(succ, ())))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    components.append(sorted(component))
    return components


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others (``start`` excluded)."""
    seen: set[str] = set()
    todo = list(graph[start])
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph.get(module, ()))
    seen.discard(start)
    return seen


def _in(module: str, part: str) -> bool:
    name = f"{NAME}.{part}"
    return module == name or module.startswith(name + ".")


# ---------------------------------------------------------------------- the graph reader itself
def test_the_graph_reader_resolves_imports_as_python_does(tmp_path, monkeypatch):
    graph = import_graph()
    assert "disentangle._core.checks" in graph["disentangle.config.validation"]  # from .._core import checks: the module
    assert "disentangle.objectives" in graph["disentangle.config.validation"]  # function-level, a package's __init__
    assert "disentangle.metrics.mig" in graph["disentangle.metrics"]  # from .mig import mig
    assert "disentangle.config" not in graph["disentangle.config.validation"]  # no edge to a package the module is in
    assert all(not t.startswith("disentangle.") or t in graph for deps in graph.values() for t in deps)
    # a cycle is found, and a chain is not one
    assert strongly_connected_components({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"], ["d"]]
    assert all(len(c) == 1 for c in strongly_connected_components({"a": {"b"}, "b": {"c"}, "c": set()}))


def test_imports_under_type_checking_are_not_edges(tmp_path, monkeypatch):
    package = tmp_path / NAME
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\nelse:\n    from . import c\n"
        "def f():\n    from .b import g\n"
    )
    (package / "b.py").write_text("from .a import f\n")
    (package / "c.py").write_text("")
    monkeypatch.setattr(f"{__name__}.PACKAGE", package)
    graph = import_graph()
    assert graph[f"{NAME}.a"] == {f"{NAME}.b", f"{NAME}.c"}  # the function-level import counts
    assert graph[f"{NAME}.b"] == {f"{NAME}.a"}
    assert [f"{NAME}.a", f"{NAME}.b"] in strongly_connected_components(graph)


# ---------------------------------------------------------------------- the package
def test_no_import_cycle():
    cycles = [c for c in strongly_connected_components(import_graph()) if len(c) > 1]
    assert not cycles, f"modules that import each other (directly or around a loop): {cycles}"


#: The layers of the package, lowest first, as folders (and the few root modules): a module may
#: import its own layer and those below it, never one above, directly or through other modules.
#: A package's ``__main__`` (its command line) belongs to the top layer, whatever its folder.
LAYER_ORDER: list[tuple[str, tuple[str, ...]]] = [
    ("core", ("errors", "_compat", "_core")),
    ("components", ("backbones", "data", "models", "objectives", "metrics", "visualize")),
    ("config", ("config",)),
    ("training", ("training",)),
    ("experiments", ("zoo", "sweep", "study", "evaluate", "loading")),
    ("interface", ("train",)),
]


def layer_of(module: str) -> str:
    """The layer of a package module (``interface`` for the root package and every ``__main__``)."""
    if module == NAME or module.endswith(".__main__"):
        return "interface"
    for layer, parts in LAYER_ORDER:
        if any(_in(module, part) for part in parts):
            return layer
    raise AssertionError(f"{module} is in no layer: add its folder to LAYER_ORDER")


def test_every_module_is_in_a_layer_and_the_root_is_small():
    """The tree shows the architecture: every module sits in a layer's folder, and the package root
    holds at most ten modules beside its folders."""
    for module in import_graph():
        layer_of(module)
    root_modules = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(root_modules) <= 10, root_modules


def test_imports_never_go_up_a_layer():
    graph = import_graph()
    rank = {layer: i for i, (layer, _) in enumerate(LAYER_ORDER)} | {"interface": len(LAYER_ORDER)}
    up = {
        module: sorted(t for t in targets if rank[layer_of(t)] > rank[layer_of(module)])
        for module, targets in graph.items()
    }
    up = {m: t for m, t in up.items() if t}
    assert not up, f"imports against the layers (a lower layer importing a higher one): {up}"


#: within a layer: (part, parts it must not import, directly or through other modules)
LAYERS = [
    ("data", ("training", "sweep", "models", "objectives")),
    ("models", ("training", "sweep", "objectives")),
    ("metrics", ("training", "sweep", "objectives")),
    ("study", ("training", "sweep")),
    ("objectives", ("training", "sweep")),
    ("zoo", ("sweep", "study")),
]


def _violations(graph: dict[str, set[str]], layer: str, forbidden: tuple[str, ...], transitive: bool) -> dict:
    bad = {}
    for module in sorted(m for m in graph if _in(m, layer)):
        targets = reachable(graph, module) if transitive else graph[module]
        hits = sorted(t for t in targets if any(_in(t, f) for f in forbidden))
        if hits:
            bad[module] = hits
    return bad


@pytest.mark.parametrize("layer, forbidden", LAYERS, ids=[layer for layer, _ in LAYERS])
def test_imports_flow_one_way_between_layers(layer, forbidden):
    """No module of a lower layer imports a higher one, and none reaches one through the modules
    between them (such as ``config``, whose functions import the registries of the layers)."""
    graph = import_graph()
    direct = _violations(graph, layer, forbidden, transitive=False)
    assert not direct, f"{layer} must import nothing of {', '.join(forbidden)}: {direct}"
    through = _violations(graph, layer, forbidden, transitive=True)
    assert not through, f"{layer} must reach nothing of {', '.join(forbidden)}, even through other modules: {through}"


# ---------------------------------------------------------------------- one list, one place
def test_each_choice_list_is_written_once():
    """The train choices are the Literals of disentangle._core.choices; every other list is derived."""
    from disentangle import config
    from disentangle._core import choices
    from disentangle.config import validation as _validation  # noqa: F401  (config.validation below)
    from disentangle.training import optim, precision

    hints = typing.get_type_hints(config.TrainConfig)
    assert hints["optimizer"] is choices.OptimizerName
    assert hints["lr_schedule"] is choices.LrScheduleName
    assert hints["precision"] is choices.PrecisionSetting
    assert choices.PRECISION_SETTINGS == ("auto", *choices.PRECISIONS)  # the concrete ones, written once
    assert tuple(optim.OPTIMIZERS) == typing.get_args(choices.OptimizerName)
    with pytest.warns(DeprecationWarning, match="disentangle.trainer.LR_SCHEDULES moved"):
        old_path = importlib.import_module("disentangle.trainer").LR_SCHEDULES  # the 0.1 path
    assert optim.LR_SCHEDULES is old_path is config.validation.LR_SCHEDULES is choices.LR_SCHEDULES
    assert precision.PRECISIONS is choices.PRECISIONS and config.validation.PRECISION_SETTINGS is choices.PRECISION_SETTINGS


def test_metric_names_are_written_once_in_a_light_module():
    import subprocess
    import sys

    from disentangle import metrics, zoo
    from disentangle.metrics import names as metric_names

    assert metrics.LOCATELLO_METRICS is metric_names.LOCATELLO_METRICS
    assert zoo.DEFAULT_METRICS is metric_names.PUBLISHED_METRICS
    assert not import_graph()["disentangle.metrics.names"]  # imports nothing of the package
    code = "import sys, disentangle.metrics.names; print(sorted({'torch', 'sklearn', 'numpy'} & set(sys.modules)))"
    heavy = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    # the package root imports torch; the metric names add neither scikit-learn nor the metrics
    assert "sklearn" not in heavy


# ---------------------------------------------------------------------- names that collide
def test_shard_means_a_slice_of_a_batch_and_rank_info_a_process():
    """``distributed.RankInfo`` is a process's place in the run and ``data.base.BatchShard`` the rows
    it renders; the old names stay as aliases of the new ones."""
    from disentangle._core import distributed

    assert distributed.Shard is distributed.RankInfo and distributed.shard is distributed.rank_info
    assert distributed.rank_info() == distributed.RankInfo(rank=0, world_size=1, local_rank=0)
