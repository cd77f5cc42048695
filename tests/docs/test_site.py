"""The documentation site (docs/, mkdocs.yml): the API reference covers the public API, the
generated pages are generated, and every page is in the navigation.

Fast and without MkDocs: the API pages are read as text (their ``::: identifier`` directives),
the generator functions of ``docs/hooks/generated.py`` are called directly. ``mkdocs build
--strict`` itself runs in ``.ci/run``.
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
PACKAGE = REPO / "disentangle"
DIRECTIVE = re.compile(r"^:::\s*([\w.]+)\s*$", re.MULTILINE)


def _directives() -> dict[str, str]:
    """``{identifier: page}`` of every ``::: identifier`` in docs/api/."""
    found: dict[str, str] = {}
    for page in sorted((DOCS / "api").glob("*.md")):
        for identifier in DIRECTIVE.findall(page.read_text()):
            found.setdefault(identifier, page.name)
    return found


def _modules_with_all() -> list[str]:
    """Every public module of the package that declares ``__all__`` (found without importing)."""
    modules = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(REPO).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if any(p.startswith("_") for p in parts[1:]):  # private modules and __main__
            continue
        tree = ast.parse(path.read_text())
        if any(
            isinstance(node, (ast.Assign, ast.AnnAssign))
            and any(getattr(t, "id", None) == "__all__" for t in (node.targets if isinstance(node, ast.Assign) else [node.target]))
            for node in tree.body
        ):
            modules.append(".".join(parts))
    return modules


def _resolve(identifier: str):
    """The object an identifier names: the longest importable module prefix, then attributes."""
    parts = identifier.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            obj = getattr(obj, name)
        return obj
    raise ImportError(identifier)


def _is_documented_object(obj) -> bool:
    """Objects compared by identity (functions, classes, modules, registries), not plain values."""
    return inspect.isfunction(obj) or inspect.isclass(obj) or inspect.ismodule(obj) or hasattr(obj, "register")


def test_the_public_packages_have_all():
    modules = _modules_with_all()
    for package in ("disentangle", "disentangle.backbones", "disentangle.data", "disentangle.metrics",
                    "disentangle.objectives", "disentangle.study", "disentangle.sweep",
                    "disentangle.visualize", "disentangle.zoo"):
        assert package in modules


@pytest.mark.parametrize("module_name", _modules_with_all())
def test_every_public_name_is_in_the_api_reference(module_name):
    """Every name of a module's ``__all__`` has a ``::: module.name`` directive in docs/api/, or is
    the same object as a documented identifier (a re-export documented where it is public), or its
    whole module is documented (``::: module``)."""
    directives = _directives()
    module = importlib.import_module(module_name)
    documented_objects = {}
    for identifier in directives:
        try:
            obj = _resolve(identifier)
        except (ImportError, AttributeError):
            continue
        if _is_documented_object(obj):
            documented_objects.setdefault(id(obj), identifier)
    missing = []
    for name in module.__all__:
        if f"{module_name}.{name}" in directives or module_name in directives:
            continue
        obj = getattr(module, name)
        if _is_documented_object(obj) and id(obj) in documented_objects:
            continue
        missing.append(name)
    assert not missing, (
        f"{module_name}.__all__ names missing from the API reference (docs/api/*.md): {missing}; "
        f"add a '::: {module_name}.NAME' directive to the right page"
    )


def test_every_api_directive_names_an_existing_object():
    bad = []
    for identifier, page in _directives().items():
        try:
            obj = _resolve(identifier)
        except (ImportError, AttributeError) as error:
            bad.append(f"{page}: {identifier} ({error})")
            continue
        # a package attribute that shares its name with a submodule (disentangle.metrics.mig) is
        # rendered as the submodule: name the function by its module (disentangle.metrics.mig.mig)
        path = REPO / identifier.replace(".", "/")
        if not inspect.ismodule(obj) and (path.with_suffix(".py").exists() or path.is_dir()):
            bad.append(f"{page}: {identifier} is also a module; write {identifier}.{identifier.rsplit('.', 1)[-1]}")
    assert not bad, bad


def _nav_pages(nav) -> list[str]:
    pages = []
    for item in nav:
        if isinstance(item, str):
            pages.append(item)
        elif isinstance(item, dict):
            for value in item.values():
                pages.extend(_nav_pages(value) if isinstance(value, list) else [value])
    return pages


def _mkdocs_config() -> dict:
    class Loader(yaml.SafeLoader):
        pass

    # mkdocs.yml may use !ENV / !relative tags; the test needs only the plain keys
    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    return yaml.load((REPO / "mkdocs.yml").read_text(), Loader=Loader)


def test_every_page_is_in_the_navigation_and_exists():
    config = _mkdocs_config()
    nav = set(_nav_pages(config["nav"]))
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md") if "hooks" not in p.parts}
    assert pages - nav == set(), f"pages not in mkdocs.yml's nav: {sorted(pages - nav)}"
    assert nav - pages == set(), f"nav entries without a page: {sorted(nav - pages)}"


# ------------------------------------------------------------------------------ generated pages
def _hook():
    spec = importlib.util.spec_from_file_location("docs_generated_hook", DOCS / "hooks" / "generated.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_generated_marker_is_known_and_expands():
    hook = _hook()
    markers = {}
    for page in DOCS.rglob("*.md"):
        for name, _ in hook.MARKER.findall(page.read_text()):
            markers[name] = page.relative_to(DOCS).as_posix()
    assert set(markers) <= set(hook.GENERATORS), set(markers) - set(hook.GENERATORS)
    # every generator is used somewhere, and the zoo and the registries' pages hold their blocks
    assert set(hook.GENERATORS) == set(markers), set(hook.GENERATORS) - set(markers)
    with pytest.raises(KeyError, match="unknown generated block"):
        hook.expand("<!-- generated: no-such-block -->\n<!-- end generated -->")


def _tables(content: str) -> list[list[str]]:
    """The tables of generated Markdown: runs of consecutive ``| ...`` lines."""
    tables: list[list[str]] = []
    previous = False
    for line in content.splitlines():
        is_row = line.startswith("| ")
        if is_row and not previous:
            tables.append([])
        if is_row:
            tables[-1].append(line)
        previous = is_row
    return tables


def test_every_generated_table_is_a_table():
    """Each generated block renders (a Markdown table needs as many cells in every row as in its
    header, or it prints as text): every generator runs, and every line of each of its tables has
    that table's header's number of cells."""
    hook = _hook()
    for name, generate in hook.GENERATORS.items():
        for table in _tables(generate()):
            cells = [len(re.split(r"(?<!\\)\|", row.strip())) for row in table]
            assert len(set(cells)) == 1, f"{name}: rows with {sorted(set(cells))} cells in the table of {table[0]}"


#: a Markdown code span (a run of backticks, its text, the same run)
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")


def test_a_pipe_in_a_generated_table_shows_as_a_pipe():
    """In a table cell, ``\\|`` inside a code span shows its backslash on the site (Python-Markdown
    keeps code literal) and a bare ``|`` splits the row on GitHub: such a span is written as
    ``<code>`` with ``&#124;``; a pipe outside code is escaped."""
    hook = _hook()
    assert hook.table_cell("`fp32 | bf16`") == "<code>fp32 &#124; bf16</code>"
    assert hook.table_cell("a | b, `N|auto` and `x_y*`") == "a \\| b, <code>N&#124;auto</code> and `x_y*`"
    assert hook.table_cell("`` q(z | x) < `p` ``") == "<code>q(z &#124; x) &lt; &#96;p&#96;</code>"
    table = hook._table(["values"], [["`fp32 | bf16`"], ["auto | cpu"]])
    assert table.splitlines()[2:] == ["| <code>fp32 &#124; bf16</code> |", "| auto \\| cpu |"]
    for name, generate in hook.GENERATORS.items():  # no generated table holds the escape inside code
        for row in (line for table in _tables(generate()) for line in table):
            spans = [code for _, code in _CODE_SPAN.findall(row)]
            assert not [code for code in spans if "|" in code], f"{name}: a pipe inside a code span: {row}"
    markdown = pytest.importorskip("markdown")  # the docs extra: the site's renderer
    html = markdown.markdown(table, extensions=["tables"])
    assert "<td><code>fp32 &#124; bf16</code></td>" in html and "<td>auto | cpu</td>" in html and "\\" not in html


def _config_keys() -> list[str]:
    """Every key of a config as a dotted name (``model.init``), from the dataclasses of the schema:
    ``Config``'s plain fields (``seed``) and each section's fields, less its ``params`` (the
    registered component's parameters, flattened into the section)."""
    import dataclasses
    import typing

    from disentangle.config import Config

    keys = []
    hints = typing.get_type_hints(Config)
    for field in dataclasses.fields(Config):
        section = hints[field.name]
        if not dataclasses.is_dataclass(section):
            keys.append(field.name)
            continue
        keys += [f"{field.name}.{f.name}" for f in dataclasses.fields(section) if f.name != "params"]
    return keys


def test_every_key_of_the_config_schema_is_in_the_config_keys_page():
    """docs/reference/config-keys.md is generated from disentangle/config/schema.py: each section
    has its heading, each key (``model.init`` was missing from the hand-written reference) its row,
    with a description (the field's ``#:`` comment)."""
    hook = _hook()
    page = (DOCS / "reference" / "config-keys.md").read_text()
    keys = _config_keys()
    assert {"seed", "model.init", "train.precision", "data.subgrid"} <= set(keys)
    for section in {key.split(".")[0] for key in keys}:
        assert f"## `{section}` {{#{section}}}" in page, f"no heading for the config section '{section}'"
    rows = {row.split(" | ")[0].removeprefix("| "): row for table in _tables(page) for row in table[2:]}
    missing = [key for key in keys if f"`{key}`" not in rows]
    assert not missing, f"config keys missing from docs/reference/config-keys.md: {missing}; run: python docs/hooks/generated.py"
    undescribed = [key for key in keys if rows[f"`{key}`"].rstrip(" |").endswith("| –")]
    assert not undescribed, (
        f"config keys without a description: {undescribed}; give each field a '#:' comment in "
        f"disentangle/config/schema.py (or a note in KEY_NOTES of docs/hooks/generated.py)"
    )
    assert "| `model.init` | `reference` or `pytorch` | `reference` |" in hook.config_keys()
    for section, kind in (("data", "dataset"), ("model", "backbone"), ("objective", "objective")):
        assert f"Besides these keys, `{section}` holds the parameters of the {kind}" in page


def test_the_zoo_page_lists_every_pretrained_model_of_the_manifest():
    import json

    hook = _hook()
    models = json.loads((PACKAGE / "zoo" / "manifest.json").read_text())["models"]
    scores, schedules, notes = hook.pretrained_scores(), hook.pretrained_schedules(), hook.pretrained_notes()
    for name in models:
        assert f"`{name}`" in scores and f"`{name}`" in schedules and name in notes
    # a manifest that changes changes the page: nothing about the models is written by hand
    guide = hook.MARKER.sub("", (DOCS / "guides" / "zoo.md").read_text())  # outside the generated blocks
    assert not any(name in guide for name in models), "the zoo guide names a pretrained model by hand"
    fake = {"m-s0": {"trained_steps": 5, "config": {}, "metrics": {"mig": {"mig": 0.5}}}}
    assert "`m-s0`" in hook.pretrained_scores(fake) and "0.500" in hook.pretrained_scores(fake)


def test_the_registered_names_pages_list_every_registered_name():
    from disentangle.backbones import BACKBONES
    from disentangle.data import DATASETS
    from disentangle.metrics import METRICS
    from disentangle.objectives import OBJECTIVES

    hook = _hook()
    for kind, registry in (("dataset", DATASETS), ("backbone", BACKBONES), ("objective", OBJECTIVES), ("metric", METRICS)):
        table = hook.registry_table(kind)
        for name in registry.names():
            # private names (a leading underscore: the tests' own datasets) are left out
            assert (f"| `{name}` |" in table) != name.startswith("_"), (kind, name)


def test_the_shipped_configs_page_lists_every_shipped_config():
    from disentangle.config import shipped_config_names

    hook = _hook()
    table = hook.shipped_configs()
    for name in shipped_config_names():
        assert f"| `{name}` |" in table
    assert "`mini`" in hook.shipped_sweeps()


def test_every_key_of_every_section_is_in_the_config_guide():
    """The guide's YAML shows every key (model.init was missing): each section's fields but the open
    ``params`` (a component's own parameters, written beside the keys)."""
    import dataclasses

    from disentangle.config import DataConfig, ModelConfig, ObjectiveConfig, TrainConfig

    reference = (DOCS / "guides" / "configs.md").read_text()
    for section, schema in (("data", DataConfig), ("model", ModelConfig), ("objective", ObjectiveConfig),
                            ("train", TrainConfig)):
        block = re.search(rf"^{section}:\n((?:[ #].*\n)+)", reference, re.MULTILINE)
        assert block, f"docs/guides/configs.md's YAML has no {section}: section"
        missing = [f.name for f in dataclasses.fields(schema) if f.name != "params"
                   and not re.search(rf"^\s+#?\s*{f.name}:", block.group(1), re.MULTILINE)]
        assert not missing, f"{section} keys missing from the YAML reference of docs/guides/configs.md: {missing}"


def test_the_pictures_the_guides_show_exist():
    hook = _hook()
    shown = {p.relative_to(hook.EXAMPLES).as_posix() for p in hook.example_pictures()}
    for page in DOCS.rglob("*.md"):
        for uri in re.findall(r"assets/examples/([\w./-]+)", page.read_text()):
            assert uri in shown, f"{page.relative_to(DOCS)} shows {uri}, which is not in examples/output"


def test_the_docs_extra_and_ci_build_the_site():
    pyproject = (REPO / "pyproject.toml").read_text()
    assert re.search(r'^docs = \[.*mkdocs-material.*mkdocstrings\[python\]', pyproject, re.MULTILINE | re.DOTALL)
    ci = (REPO / ".ci" / "run").read_text()
    assert 'pip install -e ".[docs]"' in ci and "mkdocs build --strict" in ci


def test_the_docstring_converter_renders_rest_as_markdown():
    spec = importlib.util.spec_from_file_location("docs_griffe_rest", DOCS / "hooks" / "griffe_rest.py")
    if importlib.util.find_spec("griffe") is None:
        pytest.skip("griffe (installed with the docs extra) is not installed")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    class Obj:  # the little of a griffe object the converter reads
        path = "disentangle.zoo"
        is_class = False
        is_module = True
        parent = None

    text = (
        "See :func:`~disentangle.zoo.load` and :meth:`names`.\n\n"
        "Run folder::\n\n    config.yaml   the config\n\n"
        ">>> import disentangle\n>>> disentangle.load('x')\n\n"
        "Parameters\n----------\nx:\n    A value.\n\nTerms: ``loss``, ``recon``.\n"
    )
    out = module.rest_to_markdown(text, Obj())
    assert '<autoref identifier="disentangle.zoo.load" optional>`load()`</autoref>' in out
    assert 'identifier="disentangle.zoo.names"' in out
    assert "Run folder:\n\n```text\nconfig.yaml   the config\n```" in out
    assert "```pycon\n>>> import disentangle" in out
    assert "Notes\n-----\nTerms:" in out
    # reST indents an item's later paragraphs and nested lists to its text; Markdown wants 4 spaces
    listed = module.rest_to_markdown(
        "Steps:\n\n1. First.\n2. Second:\n\n   a. inner\n      more\n\n* item\n\n  second paragraph\n* next\n", Obj()
    )
    assert "2.  Second:\n\n    *   a. inner\n        more" in listed
    assert "*   item\n\n    second paragraph\n\n*   next" in listed


def test_the_readme_pretrained_table_is_the_manifest():
    """README.md's table is generated (python docs/hooks/generated.py refreshes it after a publish)."""
    hook = _hook()
    text = hook.README.read_text()
    assert hook.readme_with_current_tables(text) == text, "run: python docs/hooks/generated.py"
    assert "| `beta_tcvae-sprites-beta6-cpu20k-ref-s0` |" in text


def test_the_seeds_table_gives_mean_and_sample_std_over_the_shipped_seeds():
    import statistics

    hook = _hook()

    def record(mig, dci=None):
        metrics = {"mig": {"mig": mig}}
        if dci is not None:
            metrics["dci"] = {"disentanglement": dci}
        return {"metrics": metrics}

    models = {
        "a-cpu20k-s0": record(0.2, 0.3), "a-cpu20k-s1": record(0.1, 0.5), "a-cpu20k-s2": record(0.3, 0.1),
        "b-cpu20k-s0": record(0.5), "b-cpu20k-s3": record(0.4),  # no DCI: that cell is left out
        "c-cpu20k-s0": record(0.9),  # one seed: no row
    }
    assert set(hook.seed_groups(models)) == {"a-cpu20k", "b-cpu20k"}
    table = hook.pretrained_seeds(models).splitlines()
    assert [line.split(" | ")[0] for line in table[2:]] == ["| `b-cpu20k-sN`", "| `a-cpu20k-sN`"]  # best mean MIG first
    a = [c.strip() for c in table[3].strip("|").split("|")]
    mig, dci = [0.2, 0.1, 0.3], [0.3, 0.5, 0.1]
    assert a[1] == "0, 1, 2"
    assert a[2] == f"{statistics.mean(mig):.3f} ± {statistics.stdev(mig):.3f}" == "0.200 ± 0.100"
    assert a[3] == f"{statistics.mean(dci):.3f} ± {statistics.stdev(dci):.3f}" == "0.300 ± 0.200"
    b = [c.strip() for c in table[2].strip("|").split("|")]
    assert b[1] == "0, 3" and b[3] == "–" and b[2] == "0.450 ± 0.071"
    assert hook.pretrained_seeds({"c-s0": record(0.1)}) == ""


def test_the_readme_rejects_an_unknown_generated_block():
    hook = _hook()
    text = "<!-- readme: pretrained_scores -->\nx\n<!-- end -->\n<!-- readme: nonsense -->\n<!-- end -->\n"
    with pytest.raises(KeyError, match="nonsense"):
        hook.readme_with_current_tables(text)


@pytest.mark.parametrize("page", ["guides/zoo.md", "guides/benchmarks.md", "guides/pictures.md", "reference/configs.md",
                                  "reference/names.md", "reference/config-keys.md", "reference/cli.md"])
def test_the_generated_blocks_of_the_sources_are_current(page):
    """The pages read complete on GitHub: each generated block holds what the build would generate
    (python docs/hooks/generated.py refreshes them)."""
    hook = _hook()
    path = hook.DOCS / page
    text = path.read_text()
    assert "<!-- generated:" in text and "<!-- end generated -->" in text
    assert hook.expand(text, page, wrap=False) == text, "run: python docs/hooks/generated.py"
    assert path in hook.pages_with_blocks()


def test_the_sources_link_pictures_where_they_are_in_the_repository():
    """No page links a file that only the build creates; the build points the links at its copies."""
    hook = _hook()
    for page in hook.DOCS.rglob("*.md"):
        text = page.read_text()
        assert "assets/examples/" not in text and "assets/benchmarks/" not in text, page
        for target in re.findall(r"\]\(((?:\.\./)+(?:examples/output|benchmarks)/[^)\s]+)\)", text):
            assert (page.parent / target).resolve().is_file(), (page, target)
    linked = hook.site_links("![a](../../examples/output/visualize/x.png) ![b](../../benchmarks/t.png)", "guides/p.md")
    assert linked == "![a](../assets/examples/visualize/x.png) ![b](../assets/benchmarks/t.png)"
    assert hook.site_links("![a](../examples/output/v/x.png)", "index.md") == "![a](assets/examples/v/x.png)"


def test_the_docs_home_describes_the_library_as_the_readme_does():
    """The first paragraph of the docs' home page is the README's (it listed fewer methods)."""

    def first_paragraph(text: str) -> str:
        start = text.index("A PyTorch library for")
        return text[start:text.index("\n\n", start)]

    assert first_paragraph((DOCS / "index.md").read_text()) == first_paragraph((REPO / "README.md").read_text())


def test_a_shipped_files_description_is_never_cut_inside_brackets():
    """The shipped-configs tables take each file's first sentence; it was cut at the first ':' or ';'
    even inside brackets ("GVAE with the label (Hosoya 2019", "initialisation (model.init")."""
    hook = _hook()
    assert hook.first_sentence("Trained (model.init: reference; seeds 0-2). Then more") == \
        "Trained (model.init: reference; seeds 0-2)."
    assert hook.first_sentence("As in Locatello et al. 2019: the grid") == "As in Locatello et al. 2019"
    for table in (hook.shipped_configs(), hook.shipped_sweeps()):
        for row in table.splitlines()[2:]:
            described = row.rstrip(" |").rsplit(" | ", 1)[-1]
            assert described.count("(") == described.count(")"), row
