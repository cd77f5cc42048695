"""Griffe extension: the reST markup of disentangle's docstrings, rendered as Markdown.

The docstrings are NumPy style (``Parameters`` / ``----------`` sections) with reST inline markup,
which mkdocstrings would otherwise print literally. Before griffe parses a docstring this rewrites:

* roles (``:class:`~disentangle.zoo.load```, ``:func:``, ``:meth:``, ``:mod:``, ``:attr:``,
  ``:data:``, ``:exc:``, ``:obj:``) into optional cross-references: a link where the target is
  documented on the site, plain code where it is not (no warning either way);
* ``>>>`` example lines into fenced ``pycon`` blocks (Markdown would read ``>>>`` as quotes);
* ``::`` literal blocks (a paragraph ending in ``::`` followed by an indented block) into fenced
  code blocks;
* reST simple tables (``====  ====`` rules) into Markdown tables;
* list items whose later paragraphs or nested lists are indented the reST way (to the item's
  text) into Markdown's 4-space indentation (``a.`` enumerators become bullets);
* prose after a NumPy ``Parameters`` section's items into a ``Notes`` section.

Double backticks (reST code) are already Markdown code spans and stay as they are.
"""
from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(class|func|meth|mod|attr|data|exc|obj|const):`(~?)([^`<>]+?)`")
_PYTHON_HINT = re.compile(r"^\s*(import |from \S+ import|>>>|[\w.\[\]\"']+\s*=\s*[\w.]+\(|[\w.]+\()")
_DOCTEST_DIRECTIVE = re.compile(r"\s*#\s*doctest:.*$")
_TABLE_RULE = re.compile(r"^\s*=+(\s+=+)+\s*$")


def _relative(obj: griffe.Object, target: str) -> str:
    """The full path of a relative role target: a member of the enclosing class, a name of the
    module (what it defines or imports), else a member of the class or module that holds ``obj``."""
    head, _, rest = target.partition(".")
    scopes = []
    node = obj if (obj.is_class or obj.is_module) else obj.parent
    while node is not None:
        scopes.append(node)
        node = node.parent
    for scope in scopes:
        try:
            member = scope.members.get(head)
        except Exception:  # noqa: BLE001 (a member list still being built)
            member = None
        if member is not None:
            path = member.target_path if getattr(member, "is_alias", False) else member.path
            return f"{path}.{rest}" if rest else path
    owner = scopes[0] if scopes else None
    return f"{owner.path}.{target}" if owner is not None else target


def _reference(obj: griffe.Object, role: str, tilde: str, target: str) -> str:
    target = target.strip()
    shown = target.rsplit(".", 1)[-1] if tilde else target
    if role in ("func", "meth"):
        shown += "()"
    identifier = target
    if not target.startswith("disentangle.") and not target.startswith("torch"):
        identifier = _relative(obj, target)
    return f'<autoref identifier="{identifier}" optional>`{shown}`</autoref>'


def _fence(lines: list[str], indent: str, language: str) -> list[str]:
    return [f"{indent}```{language}", *lines, f"{indent}```"]


def _indent_of(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _literal_blocks(lines: list[str]) -> list[str]:
    """``text::`` + blank + indented block -> ``text:`` + fenced block (reST literal blocks)."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.rstrip()
        if stripped.endswith("::") and not stripped.lstrip().startswith(">>>"):
            base = _indent_of(line)
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            block_start = j
            while j < len(lines) and (not lines[j].strip() or _indent_of(lines[j]) > base):
                j += 1
            block = lines[block_start:j]
            while block and not block[-1].strip():
                block.pop()
            if block and _indent_of(block[0]) > base:
                text = stripped[:-2].rstrip()
                if text.strip():
                    out.append(text + ":")
                out.append("")
                inner = min(_indent_of(b) for b in block if b.strip())
                body = [b[inner:] if b.strip() else "" for b in block]
                language = "python" if any(_PYTHON_HINT.match(b) for b in body if b.strip()) else "text"
                out.extend(_fence([" " * base + b if b else "" for b in body], " " * base, language))
                out.append("")
                i = j
                continue
        out.append(line)
        i += 1
    return out


def _doctest_blocks(lines: list[str]) -> list[str]:
    """Consecutive ``>>>`` / ``...`` lines (and their output, up to a blank line) -> ```pycon."""
    out: list[str] = []
    i = 0
    in_fence = False
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        if not in_fence and line.lstrip().startswith(">>>"):
            indent = " " * _indent_of(line)
            block = []
            while i < len(lines) and lines[i].strip():
                block.append(_DOCTEST_DIRECTIVE.sub("", lines[i]))
                i += 1
            if out and out[-1].strip():
                out.append("")
            out.extend(_fence(block, indent, "pycon"))
            continue
        out.append(line)
        i += 1
    return out


def _table_cell(text: str) -> str:
    """One Markdown table cell, its pipes kept from splitting the row: the site's generated tables'
    own :func:`table_cell` (``docs/hooks/generated.py``, read from its file: the hooks are no package)."""
    global _TABLE_CELL
    if _TABLE_CELL is None:
        spec = importlib.util.spec_from_file_location("docs_generated_cells", Path(__file__).with_name("generated.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _TABLE_CELL = module.table_cell
    return _TABLE_CELL(text)


_TABLE_CELL: Callable[[str], str] | None = None


def _tables(lines: list[str]) -> list[str]:
    """reST simple tables (a rule, rows, a rule; or rule, header, rule, rows, rule) -> Markdown."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        if not _TABLE_RULE.match(lines[i]):
            out.append(lines[i])
            i += 1
            continue
        rule = lines[i]
        starts = [m.start() for m in re.finditer(r"=+", rule)]
        j = i + 1
        rows: list[list[str]] = []
        rules_seen = 1
        header: list[str] | None = None
        while j < len(lines) and lines[j].strip():
            if _TABLE_RULE.match(lines[j]):
                rules_seen += 1
                if rules_seen == 2 and len(rows) == 1 and j + 1 < len(lines) and lines[j + 1].strip():
                    header = rows.pop()
                j += 1
                continue
            row = lines[j]
            cells = [row[a:b].strip() for a, b in zip(starts, [*starts[1:], None])]
            if not cells[0] and rows:  # continuation line of the previous row
                rows[-1] = [f"{p} {c}".strip() for p, c in zip(rows[-1], cells)]
            else:
                rows.append(cells)
            j += 1
        indent = " " * _indent_of(rule)
        if header is None:
            header = [""] * len(starts)
        if out and out[-1].strip():
            out.append("")
        out.append(indent + "| " + " | ".join(header) + " |")
        out.append(indent + "|" + "---|" * len(starts))
        out.extend(indent + "| " + " | ".join(_table_cell(c) for c in row) + " |" for row in rows)
        i = j
    return out


#: the NumPy sections that hold items (``name`` lines with indented descriptions)
_ITEM_SECTIONS = {
    "parameters", "other parameters", "returns", "yields", "receives", "raises", "warns",
    "attributes", "methods", "functions", "classes", "modules",
}
_SECTION_RULE = re.compile(r"^\s*-{3,}\s*$")
_ITEM = re.compile(r"^[*\w]+(\s*,\s*[*\w]+)*\s*(:\s*[\w\[\]., |\"'()]*)?$")


def _close_numpy_sections(lines: list[str]) -> list[str]:
    """Prose after a NumPy section's items (``Terms: ...`` after ``Parameters``) gets a ``Notes``
    heading: a NumPy section runs to the next heading, so it would be read as more items."""
    out: list[str] = []
    in_section = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if i + 1 < len(lines) and _SECTION_RULE.match(lines[i + 1]) and line.strip():
            in_section = line.strip().lower() in _ITEM_SECTIONS
            out.extend([line, lines[i + 1]])
            i += 2
            continue
        if in_section and line.strip() and _indent_of(line) == 0 and out and not out[-1].strip():
            block = [line]
            j = i + 1
            while j < len(lines) and lines[j].strip():
                block.append(lines[j])
                j += 1
            is_item = _ITEM.match(line.strip()) is not None or any(_indent_of(b) > 0 for b in block[1:])
            if not is_item:
                out.extend(["Notes", "-----"])
                in_section = False
        out.append(line)
        i += 1
    return out


_LIST_ITEM = re.compile(r"^(\s*)([*+-]|\d+\.|[a-z]\.|#\.)(\s+)(\S.*)$")


def _lists(lines: list[str]) -> list[str]:
    """reST list items indent their later paragraphs and nested lists to the item's text (2 or 3
    spaces); Markdown wants 4. Re-indent every item's content to 4 spaces past its marker, and
    turn ``a.``/``b.`` enumerators (no Markdown equivalent) into bullets that keep the letter."""
    out: list[str] = []
    stack: list[tuple[int, int]] = []  # (reST content column, extra spaces for its content)
    previous_blank = True
    loose = False  # a blank line seen inside the current item
    in_fence = False
    for line in lines:
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        if not line.strip():
            out.append(line)
            previous_blank = True
            loose = loose or bool(stack)
            continue
        indent = _indent_of(line)
        in_list = bool(stack)
        while stack and indent < stack[-1][0] and not in_fence:
            stack.pop()
        extra = stack[-1][1] if stack else 0
        match = None if in_fence else _LIST_ITEM.match(line)
        if match and (previous_blank or in_list):
            if loose and not previous_blank:  # the item before had paragraphs: keep them apart
                out.append("")
            loose = False
            marker = match.group(2)
            content_col = indent + len(marker) + len(match.group(3))
            text = match.group(4)
            if re.fullmatch(r"[a-z]\.", marker):
                marker, text = "*", f"{marker} {text}"
            stack.append((content_col, extra + (indent + 4) - content_col))
            out.append(" " * (indent + extra) + f"{marker}{' ' * (4 - len(marker))}{text}")
        else:
            out.append(" " * extra + line if extra > 0 else line[-extra:] if extra < 0 and line[:-extra].strip() == "" else line)
        previous_blank = False
    return out


def rest_to_markdown(text: str, obj: griffe.Object) -> str:
    """The docstring ``text`` of ``obj`` with its reST markup rewritten as Markdown."""
    lines = text.splitlines()
    lines = _close_numpy_sections(lines)
    lines = _tables(lines)
    lines = _literal_blocks(lines)
    lines = _doctest_blocks(lines)
    lines = _lists(lines)
    # roles outside fenced blocks only
    out, in_fence = [], False
    for line in lines:
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        elif not in_fence:
            line = _ROLE.sub(lambda m: _reference(obj, m.group(1), m.group(2), m.group(3)), line)
        out.append(line)
    return "\n".join(out)


class RestToMarkdown(griffe.Extension):
    """Rewrites every docstring of a package once it is loaded, before any is parsed (see the
    module docstring): then every object exists (relative references resolve) and the docstrings
    that other extensions add (``#:`` comments, through griffe-sphinx) are there too."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        stack: list[griffe.Object] = [pkg]
        while stack:
            obj = stack.pop()
            if obj.docstring is not None and obj.docstring.value:
                obj.docstring.value = rest_to_markdown(obj.docstring.value, obj)
            stack.extend(member for member in obj.members.values() if not member.is_alias)
