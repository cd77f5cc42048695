"""The command lines of the README's and the docs' shell blocks are valid as written.

Each ``python -m disentangle.<command> ...`` line of a ```bash block is parsed by that command's own
argument parser (a renamed or removed flag fails here, not in a user's terminal); a training
command's config, when the repository ships it, is loaded with the line's overrides (a key that
does not exist for its dataset or objective, or a bad value, fails here); a sweep command's shipped
sweep file is expanded into its runs. Each ```yaml block that is a config, a fragment of one or a
sweep file loads as one."""
from __future__ import annotations

import contextlib
import importlib
import io
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
PARSERS = {"train": "disentangle.train", "evaluate": "disentangle.evaluate", "sweep": "disentangle.sweep.__main__",
           "study": "disentangle.study.__main__", "visualize": "disentangle.visualize.__main__",
           "zoo": "disentangle.zoo.__main__"}


def shell_commands(text: str) -> list[tuple[str, list[str]]]:
    """``[(command, arguments)]`` of every ``python -m disentangle.<command>`` line of a page's shell
    blocks, continuation lines joined, shell operators and comments cut off."""
    found = []
    for block in re.findall(r"^```(?:bash|sh|shell)\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            match = re.search(r"python -m disentangle\.(\w+)\b(.*)", line)
            if match is None or match.group(1) not in PARSERS:
                continue
            words = shlex.split(match.group(2), comments=True)
            for i, word in enumerate(words):
                if word in ("&&", "||", "|", ";", ">", ">>", "2>", "&"):
                    words = words[:i]
                    break
            found.append((match.group(1), words))
    return found


def test_shell_commands_are_read_as_a_shell_would():
    text = ("```bash\npython -m disentangle.train --config quickstart \\\n    train.steps=10   # short\n"
            "python -m disentangle.zoo list && ls\nls runs\n```\n```python\npython -m disentangle.study x\n```\n")
    assert shell_commands(text) == [("train", ["--config", "quickstart", "train.steps=10"]), ("zoo", ["list"])]


COMMANDS = [(page.relative_to(ROOT).as_posix(), command, words)
            for page in PAGES for command, words in shell_commands(page.read_text())]


def test_the_docs_have_commands_to_check():
    assert len(COMMANDS) >= 30 and {command for _, command, _ in COMMANDS} >= {"train", "evaluate", "sweep", "zoo"}


@pytest.mark.parametrize("page, command, words", COMMANDS, ids=[f"{p}:{' '.join([c, *w])[:60]}" for p, c, w in COMMANDS])
def test_each_command_line_of_the_docs_is_valid(page, command, words):
    parser = importlib.import_module(PARSERS[command])._parser()
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
            args = parser.parse_args(words)
    except SystemExit as exit_:
        if exit_.code:
            pytest.fail(f"{page}: python -m disentangle.{command} {shlex.join(words)}\n{errors.getvalue()}")
        return  # --help
    if command == "train" and args.config and not args.resume:
        from disentangle.config import load_config, shipped_config_names

        config = args.config
        shipped = config.removesuffix(".yaml").removeprefix("configs/") in shipped_config_names()
        if not (shipped or config.startswith("zoo:")):
            assert config.endswith(".yaml"), f"{page}: '{config}' is no shipped config, zoo name or YAML file"
            return  # the user's own file
        load_config(str(ROOT / config) if (ROOT / config).is_file() else config, args.overrides)
    if command == "sweep" and getattr(args, "sweep_file", None):
        from disentangle.sweep.grid import load_sweep

        sweep = args.sweep_file
        shipped = ROOT / "configs" / "sweeps" / f"{sweep.removesuffix('.yaml').removeprefix('configs/sweeps/')}.yaml"
        if (ROOT / sweep).is_file() or shipped.is_file():
            assert load_sweep(ROOT / sweep if (ROOT / sweep).is_file() else shipped).runs
        else:
            assert sweep.endswith(".yaml"), f"{page}: '{sweep}' is no shipped sweep or YAML file"


def yaml_blocks() -> list[tuple[str, dict]]:
    """``[(page, mapping)]`` of every ```yaml block of the pages that is a config (or a fragment of
    one: its sections) or a sweep file."""
    import yaml

    found = []
    for page in PAGES:
        for block in re.findall(r"^```yaml\n(.*?)^```", page.read_text(), flags=re.MULTILINE | re.DOTALL):
            data = yaml.safe_load(block)
            if isinstance(data, dict) and (set(data) <= CONFIG_SECTIONS or "grid" in data):
                found.append((page.relative_to(ROOT).as_posix(), data))
    return found


CONFIG_SECTIONS = {"seed", "data", "model", "objective", "train"}
YAML_BLOCKS = yaml_blocks()


def test_the_docs_have_yaml_blocks_to_check():
    kinds = ["sweep" if "grid" in data else "config" for _, data in YAML_BLOCKS]
    assert kinds.count("config") >= 5 and kinds.count("sweep") >= 1


@pytest.mark.parametrize("page, data", YAML_BLOCKS, ids=[f"{p}:{','.join(d)[:40]}" for p, d in YAML_BLOCKS])
def test_each_yaml_block_of_the_docs_loads(page, data, tmp_path):
    """A config block (or a fragment: the defaults fill the rest) passes every check of
    ``load_config``; a sweep block expands into its runs (its ``imports``, a user's modules, left out)."""
    import yaml

    from disentangle.config import load_config
    from disentangle.sweep.grid import load_sweep

    path = tmp_path / "block.yaml"
    if "grid" in data:
        path.write_text(yaml.safe_dump({k: v for k, v in data.items() if k != "imports"}))
        assert load_sweep(str(path)).runs
    else:
        path.write_text(yaml.safe_dump(data))
        load_config(path)
