"""Every command line of the package goes through disentangle._core.cli.run_main, so that piping its
output into ``head`` ends quietly (the behaviour itself is tested in test_zoo_cli.py)."""
from __future__ import annotations

import ast
from pathlib import Path

import disentangle

PACKAGE = Path(disentangle.__file__).parent
#: the modules users run with python -m
CLI_MODULES = sorted(
    [p for p in PACKAGE.rglob("__main__.py")]
    + [PACKAGE / "train.py", PACKAGE / "evaluate.py", PACKAGE / "training" / "bench.py"]
)


def _main_guard_calls(path: Path) -> list[str]:
    """The calls made under ``if __name__ == "__main__":`` in a module, as source text."""
    tree = ast.parse(path.read_text())
    calls = []
    for node in tree.body:
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            calls += [ast.unparse(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)]
    return calls


def test_every_cli_runs_its_main_through_run_main():
    assert len(CLI_MODULES) >= 7  # train, evaluate, bench, zoo, sweep, study, visualize
    missing = [str(p.relative_to(PACKAGE)) for p in CLI_MODULES if "run_main" not in _main_guard_calls(p)]
    assert not missing, f"these CLIs end in a traceback when piped into head: {missing}"
