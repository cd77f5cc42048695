"""docs/reference/cli.md lists every option of every command-line tool, as the tools' ``--help`` print
them today: the page is generated from the live parsers (``docs/hooks/generated.py``), and this test
reads each tool's and each subcommand's ``--help`` (in this process, for speed) and finds each option
in that tool's section of the committed page. A new option, tool or subcommand fails here until
``python docs/hooks/generated.py`` regenerates the page."""
from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "reference" / "cli.md"
#: the tools the reference must have at least (any other module ending in run_main(main) is found too)
KNOWN_TOOLS = {"disentangle.train", "disentangle.evaluate", "disentangle.visualize", "disentangle.zoo",
               "disentangle.sweep", "disentangle.study", "disentangle.training.bench"}


def _hook():
    spec = importlib.util.spec_from_file_location("docs_generated_hook", ROOT / "docs" / "hooks" / "generated.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TOOLS = _hook().cli_modules()


def _help(tool: str, *words: str) -> str:
    """What ``python -m TOOL WORDS... --help`` prints, read in this process."""
    path = ROOT / Path(*tool.split("."))
    module = importlib.import_module(f"{tool}.__main__" if (path / "__main__.py").is_file() else tool)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exit_:
        module.main([*words, "--help"])
    assert exit_.value.code in (0, None)
    return out.getvalue()


def _options(help_text: str) -> set[str]:
    """The option strings of a ``--help`` text: those of its argument lines (indented by two spaces
    and starting with a dash), not the ones its descriptions mention."""
    found = set()
    for line in help_text.splitlines():
        match = re.match(r"^  (-\S.*?)(?:\s{2,}|$)", line)
        if match:
            found.update(re.findall(r"(?<![\w-])(--?[A-Za-z0-9][\w-]*)", match.group(1)))
    return found


def _subcommands(help_text: str) -> list[str]:
    """The subcommands of a ``--help`` text (its ``{run,status,results}`` argument line)."""
    match = re.search(r"^  \{([\w,-]+)\}", help_text, re.MULTILINE)
    return match.group(1).split(",") if match else []


def _section(page: str, heading: str) -> str:
    """The text of ``page`` from the line that starts with ``heading`` to the next heading of its
    level or above."""
    level = len(heading) - len(heading.lstrip("#"))
    start = page.find(f"\n{heading}")
    assert start >= 0, f"docs/reference/cli.md has no heading '{heading}'; run: python docs/hooks/generated.py"
    ends = [m.start() for m in re.finditer(rf"^#{{1,{level}}} ", page[start + 1:], re.MULTILINE)][1:]
    return page[start:start + 1 + ends[0]] if ends else page[start:]


def _on_page(option: str, section: str) -> bool:
    """Whether ``option`` starts a code span of ``section`` (```--out OUT```, ```-o```, ``<code>--threads N...``)."""
    return re.search(rf"(?:`|<code>){re.escape(option)}(?=[\s`<])", section) is not None


def test_every_command_line_tool_is_found():
    assert KNOWN_TOOLS <= set(TOOLS), KNOWN_TOOLS - set(TOOLS)
    assert TOOLS[0] == "disentangle.train"


@pytest.mark.parametrize("tool", TOOLS)
def test_every_option_of_the_tools_help_is_on_the_page(tool, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # argparse wraps --help at the terminal's width
    page = PAGE.read_text()
    section = _section(page, f"## `python -m {tool}`")
    text = _help(tool)
    commands = _subcommands(text)
    helps = {"": text, **{command: _help(tool, command) for command in commands}}
    missing = []
    for command, help_text in helps.items():
        if command:  # the subcommand's own section, listed in the tool's table of subcommands
            assert f"[`{command}`](#" in section, f"python -m {tool}: subcommand '{command}' is not listed"
            where = _section(section, f"### `{tool.removeprefix('disentangle.')} {command}`")
        else:  # the tool's own arguments, before its subcommands' sections
            where = section.split("\n### ", 1)[0]
        options = _options(help_text) - {"-h", "--help"}  # every tool's: the page says so once
        missing += [f"{command} {option}".strip() for option in sorted(options) if not _on_page(option, where)]
    assert not missing, f"python -m {tool}: options missing from docs/reference/cli.md: {missing}; run: python docs/hooks/generated.py"
    assert "`-h`, `--help`" in page


def test_help_texts_are_read_as_argparse_prints_them():
    text = ("usage: x [-h] {run,status}\n\npositional arguments:\n  {run,status}\n    run          run it\n\n"
            "options:\n  -h, --help            show this help\n  --out OUT, -o OUT     folder, like --other\n"
            "  --threads N|auto\n                        threads; see\n                        --not-an-option\n")
    assert _options(text) == {"-h", "--help", "--out", "-o", "--threads"}
    assert _subcommands(text) == ["run", "status"]
    assert _on_page("--threads", "| <code>--threads N&#124;auto</code> |") and _on_page("-o", "`--out OUT`, `-o`")
    assert not _on_page("--out", "`--output OUTPUT`")
