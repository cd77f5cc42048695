"""MkDocs hook: the parts of the site generated at build time, never copied by hand.

* A page holds ``<!-- generated: NAME -->`` ... ``<!-- end generated -->`` blocks whose content is
  the Markdown of ``GENERATORS[NAME]``, committed in the source (so the pages read complete on
  GitHub) and checked equal to a fresh generation by ``tests/docs/test_site.py``; the build replaces
  it with a fresh one anyway. ``python docs/hooks/generated.py`` rewrites every block (the README's
  too) after a publish or a change of the registries, the config or a command line: the
  pretrained-model tables from the shipped zoo manifest (``disentangle/zoo/manifest.json``), the
  registered datasets, backbones, objectives and metrics with their parameters (from the registries
  themselves), the shipped configs, the zoo's recipe names, every config key (from the dataclasses
  of ``disentangle/config/schema.py`` and their ``#:`` comments) and every option of every command
  line (from the tools' own argparse parsers). An unknown NAME fails the build.
* The example pictures (``examples/output/**/*.png|gif``) and the benchmark figures
  (``benchmarks/*.png``) are added to the site as ``assets/examples/...`` and
  ``assets/benchmarks/...`` without a copy in ``docs/``. The pages link them by their place in the
  repository (``../../examples/output/visualize/traversals.gif`` from a guide), which GitHub shows;
  the build points those links at the site's copies (:func:`site_links`).

The generator functions need only ``disentangle`` (not MkDocs), so ``tests/docs/test_site.py``
calls them directly.
"""
from __future__ import annotations

import argparse
import ast
import html
import importlib
import inspect
import json
import re
import statistics
import textwrap
import typing
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
MANIFEST = REPO / "disentangle" / "zoo" / "manifest.json"
EXAMPLES = REPO / "examples" / "output"
BENCHMARKS = REPO / "benchmarks"
PICTURE_SUFFIXES = (".png", ".gif", ".svg", ".jpg")
MARKER = re.compile(r"<!--\s*generated:\s*([\w-]+)\s*-->\n(.*?)<!-- end generated -->", re.S)
#: a link from a page to a repository file that the site serves under assets/
REPO_LINK = re.compile(r"\]\(((?:\.\./)+)(examples/output|benchmarks)/")

#: the headline score of each metric in the zoo tables: (metric, score, column title)
SCORE_COLUMNS = (
    ("beta_vae_score", "eval_accuracy", "BetaVAE"),
    ("factor_vae_score", "eval_accuracy", "FactorVAE"),
    ("mig", "mig", "MIG"),
    ("modularity_explicitness", "modularity", "Modularity"),
    ("dci", "disentanglement", "DCI D"),
    ("sap_score", "sap", "SAP"),
    ("unsupervised_scores", "gaussian_total_correlation", "Gaussian TC"),
)

_ROLE = re.compile(r":(?:py:)?\w+:`~?([^`]+)`")


# ---------------------------------------------------------------------------------- helpers
#: a Markdown code span: a run of backticks, its text, the same run (CommonMark)
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
#: what a code span's text needs as HTML (``<code>``), where Markdown does not read the text
_CODE_ENTITIES = {"|": "&#124;", "*": "&#42;", "_": "&#95;", "`": "&#96;", "\\": "&#92;", "[": "&#91;"}


def table_cell(text: str) -> str:
    """``text`` as one cell of a Markdown table: on one line, each ``|`` kept from splitting the row.

    Outside code spans a pipe is escaped (``\\|``, shown as ``|``). Inside a code span an escape
    would show: Python-Markdown (the site) prints ``\\|`` there literally, and GitHub splits the row
    at a bare ``|``; so a code span that holds a pipe becomes ``<code>`` with the pipe as
    ``&#124;``, which both show as the code they are (``fp32 | bf16``)."""
    text = text.replace("\n", " ")
    out, end = [], 0
    for match in _CODE_SPAN.finditer(text):
        out.append(text[end:match.start()].replace("|", "\\|"))
        code = match.group(2)
        if "|" in code:
            if code.startswith(" ") and code.endswith(" ") and code.strip():
                code = code[1:-1]  # CommonMark strips one space at each end
            code = html.escape(code, quote=False)
            out.append("<code>" + "".join(_CODE_ENTITIES.get(c, c) for c in code) + "</code>")
        else:
            out.append(match.group(0))
        end = match.end()
    out.append(text[end:].replace("|", "\\|"))
    return "".join(out)


def _table(header: list[str], rows: list[list[str]], align: str | None = None) -> str:
    align = align or "l" * len(header)
    if len(align) != len(header) or any(len(row) != len(header) for row in rows):
        raise ValueError(f"a generated table needs one alignment and one cell per column: {header}")
    rule = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(table_cell(cell) for cell in header) + " |", "| " + " | ".join(rule) + " |"]
    lines += ["| " + " | ".join(table_cell(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _ref(identifier: str, text: str) -> str:
    """A link to ``identifier`` in the API reference, or plain code where it is not documented."""
    return f'<autoref identifier="{identifier}" optional>`{text}`</autoref>'


def _summary(obj: Any) -> str:
    """The first sentence of ``obj``'s docstring, reST roles as code."""
    doc = inspect.getdoc(obj) or ""
    first = doc.split("\n\n", 1)[0].replace("\n", " ").strip()
    return _ROLE.sub(lambda m: f"``{m.group(1).rsplit('.', 1)[-1]}``", first)


def _number(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, (int, float)):
        return f"{value:,.{digits}f}"
    return str(value)


def _minutes(seconds: Any) -> str:
    if not isinstance(seconds, (int, float)):
        return "–"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def read_manifest(path: Path = MANIFEST) -> dict[str, dict[str, Any]]:
    """The ``models`` of the shipped manifest (the file itself: no user manifests, no cache)."""
    return json.loads(path.read_text())["models"]


def _score(record: dict[str, Any], metric: str, score: str) -> float | None:
    value = record.get("metrics", {}).get(metric, {}).get(score)
    return float(value) if isinstance(value, (int, float)) else None


# ---------------------------------------------------------------------------------- the zoo
def _data_text(data: dict[str, Any] | None) -> str:
    """A run's dataset as a table cell: its name, and the factors a ``data.subgrid`` thins."""
    data = data or {}
    text = f"`{data.get('name', '?')}`"
    subgrid = data.get("subgrid")
    if subgrid:
        text += " sub-grid (" + ", ".join(f"{k} {v if isinstance(v, int) else len(v)}" for k, v in subgrid.items()) + ")"
    return text


def pretrained_scores(models: dict[str, dict[str, Any]] | None = None) -> str:
    """Every pretrained model of the shipped manifest with its recorded scores, best MIG first."""
    models = read_manifest() if models is None else models
    if not models:
        return "*The shipped manifest lists no pretrained model.*"
    order = sorted(models, key=lambda n: (-(_score(models[n], "mig", "mig") or -1.0), n))
    header = ["name", "steps", *[title for _, _, title in SCORE_COLUMNS]]
    rows = []
    for name in order:
        record = models[name]
        # a model trained and scored on a sub-grid is marked: its scores are not on the whole grid
        marker = " (sub-grid)" if (record.get("config", {}).get("data") or {}).get("subgrid") else ""
        row = [f"`{name}`{marker}", f"{record.get('trained_steps', 0):,}"]
        row += [_number(_score(record, metric, score)) for metric, score, _ in SCORE_COLUMNS]
        rows.append(row)
    return _table(header, rows, "lr" + "r" * len(SCORE_COLUMNS))


_SEED_SUFFIX = re.compile(r"^(?P<recipe>.+)-s(?P<seed>\d+)$")

#: the scores summarised over seeds, in this order: columns of ``SCORE_COLUMNS``
SEED_COLUMNS = tuple(next(c for c in SCORE_COLUMNS if c[2] == title) for title in ("MIG", "DCI D", "FactorVAE", "BetaVAE"))


def seed_groups(models: dict[str, dict[str, Any]]) -> dict[str, dict[int, dict[str, Any]]]:
    """Pretrained models that differ only in their ``-sSEED`` suffix, by the name without it
    (``beta_vae-sprites-beta4-cpu20k``), for the recipes shipped with two seeds or more."""
    groups: dict[str, dict[int, dict[str, Any]]] = {}
    for name, record in models.items():
        match = _SEED_SUFFIX.match(name)
        if match:
            groups.setdefault(match["recipe"], {})[int(match["seed"])] = record
    return {recipe: dict(sorted(seeds.items())) for recipe, seeds in sorted(groups.items()) if len(seeds) > 1}


def _mean_std(values: list[float]) -> str:
    """``mean ± std`` with the sample standard deviation (n − 1), as the papers report seeds."""
    return f"{statistics.mean(values):.3f} ± {statistics.stdev(values):.3f}"


def pretrained_seeds(models: dict[str, dict[str, Any]] | None = None) -> str:
    """Mean ± std (n − 1) of the headline scores over the shipped seeds of each recipe, best mean
    MIG first; a seed without a score leaves that cell out rather than biasing it."""
    models = read_manifest() if models is None else models
    groups = seed_groups(models)
    if not groups:
        return ""
    rows = []
    for recipe, seeds in groups.items():
        cells, mig = [], []
        for metric, score, _ in SEED_COLUMNS:
            values = [v for v in (_score(r, metric, score) for r in seeds.values()) if v is not None]
            if metric == "mig":
                mig = values
            cells.append(_mean_std(values) if len(values) == len(seeds) else "–")
        seed_text = ", ".join(str(s) for s in seeds)
        rows.append((-(sum(mig) / len(mig)) if mig else 1.0, [f"`{recipe}-sN`", seed_text, *cells]))
    header = ["recipe", "seeds", *[title for _, _, title in SEED_COLUMNS]]
    return _table(header, [row for _, row in sorted(rows, key=lambda r: (r[0], r[1][0]))], "ll" + "r" * len(SEED_COLUMNS))


def pretrained_schedules(models: dict[str, dict[str, Any]] | None = None) -> str:
    """How each pretrained model was trained: data, backbone, schedule, wall time, machine, file."""
    models = read_manifest() if models is None else models
    if not models:
        return ""
    header = ["name", "data", "model", "steps", "batch", "lr", "train.precision", "wall time", "published on", "file"]
    # a run trained over several sessions (the 300k campaign: `sweep run --resume-precision`, machines of
    # their own) may have trained spans in another precision or on other machines: its notes name them
    rows = []
    for name in sorted(models):
        r = models[name]
        cfg = r.get("config", {})
        train, model = cfg.get("train", {}), cfg.get("model", {})
        machine = r.get("machine", {})
        machine_text = f"{machine.get('cpu', '?')} × {machine.get('cpu_count', '?')}" if machine else "–"
        spans = "for steps" in (r.get("notes") or "")  # the notes name each session's span (publish.py)
        precision_text = str(train.get("precision", "?"))
        if spans:
            precision_text += " (sessions: notes)"
            machine_text += " (sessions: notes)"
        size = r.get("size")
        rows.append([
            f"`{name}`",
            _data_text(cfg.get("data")),
            f"`{model.get('backbone', '?')}`, {model.get('latent_dim', '?')} latents",
            f"{r.get('trained_steps', 0):,}",
            str(train.get("batch_size", "?")),
            f"{train.get('lr', '?'):g}" if isinstance(train.get("lr"), (int, float)) else "?",
            precision_text,
            _minutes(r.get("wall_time_s")),
            machine_text,
            f"{size / 1e6:.2f} MB" if isinstance(size, int) else "–",
        ])
    return _table(header, rows, "lllrrrlrll")


def pretrained_notes(models: dict[str, dict[str, Any]] | None = None) -> str:
    """The provenance note of each pretrained model, with its recipe and the scores' seed."""
    models = read_manifest() if models is None else models
    items = []
    for name in sorted(models):
        r = models[name]
        recipe = f" Recipe: `{r['recipe']}`." if r.get("recipe") else ""
        published = f" Published {r['published'][:10]}" if r.get("published") else ""
        seed = f", scores with seed {r['metrics_seed']}" if r.get("metrics_seed") is not None else ""
        sha = f"; sha256 `{r['sha256'][:16]}…`" if r.get("sha256") else ""
        note = markdown_safe(r.get("notes") or "")
        items.append(f"* **`{name}`**: {note}{recipe}{published}{seed}{sha}.")
    return "\n".join(items)


#: a path or glob in free text: characters of file names with a / or a * among them
_PATH_LIKE = re.compile(r"(?<![`\w])([\w.\-]*[/*][\w.\-/*]*[\w*])")


def markdown_safe(text: str) -> str:
    """Free text (a manifest's notes) as Markdown that shows it as written: paths and globs in code
    spans (``configs/x*.yaml`` would otherwise turn ``*`` into emphasis), any other ``*``, ``_``
    and ``<`` escaped."""
    parts = re.split(r"(`[^`]*`)", text)  # code spans the author wrote are kept as they are
    out = []
    for i, part in enumerate(parts):
        if i % 2:
            out.append(part)
            continue
        pieces = _PATH_LIKE.split(part)
        for j, piece in enumerate(pieces):
            if j % 2:
                out.append(f"`{piece}`")
            else:
                out.append(re.sub(r"([*_<])", r"\\\1", piece))
    return "".join(out)


def pretrained_example(models: dict[str, dict[str, Any]] | None = None) -> str:
    """The zoo's Python snippet, with the name of the best-MIG pretrained model of the manifest."""
    models = read_manifest() if models is None else models
    order = sorted(models, key=lambda n: (-(_score(models[n], "mig", "mig") or -1.0), n))
    name = order[0] if order else "NAME"
    return "\n".join([
        "```python",
        "import disentangle",
        f'model = disentangle.load("zoo:{name}")   # eval mode, like a run folder',
        "disentangle.zoo.names(pretrained=True)          # the pretrained models",
        f'disentangle.zoo.info("{name}")["metrics"]      # {{metric: {{score: value}}}}',
        "```",
    ])


def zoo_recipes() -> str:
    """How many recipe names the zoo has, by kind (generated from the zoo itself)."""
    import disentangle.zoo as zoo

    names = zoo.names()
    pretrained = set(zoo.names(pretrained=True))
    kinds: Counter[str] = Counter()
    examples: dict[str, str] = {}
    for name in names:
        if name in pretrained:
            kind = "pretrained"
        else:
            kind = zoo.info(name)["kind"]
        kinds[kind] += 1
        examples.setdefault(kind, name)
    described = {
        "shipped": "the shipped configs, by path",
        "locatello2019": "Locatello et al. 2019: 6 methods × 6 strengths × 7 datasets (seed 0 listed; any `-sN`)",
        "extra": "InfoVAE and the AAE on the same datasets",
        "weak2020": "the weakly-supervised grid of Locatello et al. 2020",
        "few_labels2020": "the semi-supervised (S²) models of Locatello et al. 2020, γ_sup swept",
        "pretrained": "pretrained models (weights in the manifest)",
    }
    rows = [[f"`{kind}`", described.get(kind, ""), f"{count:,}", f"`{examples[kind]}`"] for kind, count in kinds.items()]
    return _table(["kind", "what", "names", "example"], rows, "llrl")


# ---------------------------------------------------------------------------------- registries
_SKIPPED_PARAMETERS = {
    "dataset": {"device"},
    "backbone": {"image_shape", "latent_dim"},
    "objective": set(),
    "metric": {"dataset", "representation"},
    "callback": set(),
}


def _parameters(registry: Any, name: str, kind: str) -> str:
    parts = []
    for parameter in registry.parameters(name).values():
        if parameter.name in _SKIPPED_PARAMETERS[kind]:
            continue
        if parameter.default is inspect.Parameter.empty:
            parts.append(f"`{parameter.name}`")
        else:
            parts.append(f"`{parameter.name}={parameter.default!r}`")
    return ", ".join(parts) or "–"


def _identifier(target: Any) -> str:
    target = getattr(target, "func", target)  # functools.partial
    module = getattr(target, "__module__", None)
    qualname = getattr(target, "__qualname__", None) or type(target).__qualname__
    return f"{module}.{qualname}" if module else qualname


def registry_table(kind: str) -> str:
    """Every registered name of one kind (``dataset``, ``backbone``, ``objective``, ``metric``, ``callback``)."""
    from disentangle.backbones import BACKBONES
    from disentangle.data import DATASETS
    from disentangle.metrics import METRICS
    from disentangle.objectives import OBJECTIVES
    from disentangle.training import CALLBACKS

    registry = {"dataset": DATASETS, "backbone": BACKBONES, "objective": OBJECTIVES, "metric": METRICS,
                "callback": CALLBACKS}[kind]
    key = {"dataset": "data.name", "backbone": "model.backbone", "objective": "objective.name",
           "metric": "train.eval_metrics", "callback": "train.callbacks[].name"}[kind]
    rows = []
    for name in registry.names():
        if name.startswith("_"):  # private registrations (a test's, a plugin's helpers) are not listed
            continue
        target = registry.get(name)
        # a builder object (not a function or class) that wraps a class: link that class
        wrapped = getattr(target, "_wrap", None)
        shown = target if (inspect.isclass(target) or inspect.isfunction(target) or not inspect.isclass(wrapped)) else wrapped
        identifier = _identifier(shown)
        rows.append([
            f"`{name}`",
            _ref(identifier, identifier.rsplit(".", 1)[-1]),
            _summary(target),
            _parameters(registry, name, kind),
        ])
    title = "settings (keyword arguments)" if kind == "metric" else f"parameters (config keys beside `{key}`)"
    return _table([f"`{key}`" if kind != "metric" else "name", "defined by", "what", title], rows)


def registered_datasets() -> str:
    return registry_table("dataset")


def registered_backbones() -> str:
    return registry_table("backbone")


def registered_objectives() -> str:
    return registry_table("objective")


def registered_metrics() -> str:
    return registry_table("metric")


def registered_callbacks() -> str:
    return registry_table("callback")


# ---------------------------------------------------------------------------------- shipped configs
def _header_comment(path: Path) -> str:
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    return first_sentence(" ".join(lines))


def first_sentence(text: str) -> str:
    """Up to the first '.', ':' or ';' followed by a space, not inside brackets ("initialisation
    (model.init: reference, ...)" is one sentence) nor in "et al.", "e.g." or "i.e."."""
    depth = 0
    for i, char in enumerate(text):
        depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(char, 0)
        if (char in ".:;" and depth <= 0 and text[i + 1:i + 2].isspace()
                and not re.search(r"(\bal|\be\.g|\bi\.e)$", text[:i])):
            return text[:i + 1].rstrip(":;")
    return text.rstrip(":;")


def shipped_configs() -> str:
    """Every shipped training config: its name for ``--config`` and what it trains."""
    import yaml

    from disentangle.config import shipped_config_names, shipped_config_path

    rows = []
    for name in shipped_config_names():
        path = shipped_config_path(name)
        raw = yaml.safe_load(path.read_text()) or {}
        objective = raw.get("objective", {}) or {}
        train = raw.get("train", {}) or {}
        steps = train.get("steps")
        rows.append([
            f"`{name}`",
            _data_text({"name": "sprites", **(raw.get("data") or {})}),
            f"`{objective.get('name', 'beta_vae')}`",
            f"`{(raw.get('model') or {}).get('backbone', 'conv64')}`",
            f"{steps:,}" if isinstance(steps, int) else "default",
            _header_comment(path),
        ])
    return _table(["`--config`", "data", "objective", "backbone", "steps", "what (from the file's header)"], rows, "llllrl")


def shipped_sweeps() -> str:
    """Every shipped sweep file (``python -m disentangle.sweep run NAME``)."""
    import yaml

    from disentangle.sweep.grid import sweeps_root

    root = sweeps_root()
    rows = []
    for path in sorted(root.rglob("*.yaml")):
        name = path.relative_to(root).with_suffix("").as_posix()
        raw = yaml.safe_load(path.read_text()) or {}
        grid = raw.get("grid") or {}
        parts = grid if isinstance(grid, list) else [grid]
        points, methods, varying = 0, [], set()
        for part in parts:
            count = 1
            for key, values in part.items():
                values = values if isinstance(values, list) else [values]
                count *= len(values)
                if key == "objective.name":
                    methods += [v for v in values if v not in methods]
                elif len(values) > 1:
                    varying.add(key)
            points += count
        seeds = raw.get("seeds", 1)
        n_seeds = seeds if isinstance(seeds, int) else len(seeds)
        metrics = raw.get("metrics", [])
        rows.append([
            f"`{name}`",
            f"`{raw.get('base', '')}`",
            ", ".join(f"`{m}`" for m in methods) or "–",
            ", ".join(f"`{k}`" for k in sorted(varying)) or "–",
            f"{points * n_seeds:,}",
            ", ".join(metrics) if isinstance(metrics, list) else str(metrics),
            _header_comment(path),
        ])
    return _table(["sweep file", "base", "methods", "strengths that vary", "runs", "metrics", "what (from the file's header)"], rows, "llllrll")


#: folders of examples/output whose pictures the guides show by name
SHOWN_FOLDERS = ("visualize", "study")


def more_figures() -> str:
    """Pictures of any other folder of ``examples/output`` (e.g. a campaign's curves), by folder."""
    sections = []
    for folder in sorted({p.relative_to(EXAMPLES).parts[0] for p in example_pictures() if len(p.relative_to(EXAMPLES).parts) > 1}):
        if folder in SHOWN_FOLDERS:
            continue
        pictures = [p for p in example_pictures() if p.relative_to(EXAMPLES).parts[0] == folder]
        lines = [f"### `examples/output/{folder}`", ""]
        for p in pictures:
            uri = "../../examples/output/" + p.relative_to(EXAMPLES).as_posix()  # from docs/guides/
            lines += [f"![{p.stem.replace('_', ' ')}]({uri})", "", f"*`{p.relative_to(EXAMPLES).as_posix()}`*", ""]
        sections.append("\n".join(lines))
    if not sections:
        return ""
    return "## More figures\n\n" + "\n".join(sections)


def time_to_disentangle() -> str:
    """The zoo campaign's learning curves: ``benchmarks/time_to_disentangle.png`` and the table of
    ``benchmarks/time_to_disentangle.md`` (its title left out), as the benchmark script wrote them."""
    figure = BENCHMARKS / "time_to_disentangle.png"
    table = BENCHMARKS / "time_to_disentangle.md"
    if not figure.is_file() or not table.is_file():
        raise KeyError("benchmarks/time_to_disentangle.png and .md are missing: run benchmarks/time_to_disentangle.py")
    body = table.read_text().split("\n", 1)[1].strip() if table.read_text().startswith("# ") else table.read_text().strip()
    link = f"../../benchmarks/{figure.name}"
    return f"[![MIG against training steps, per objective (click for full size)]({link})]({link})\n\n{body}"


def trajectories_300k() -> str:
    """The 300k campaign's trajectories: ``benchmarks/trajectories_300k.png`` and the table of
    ``benchmarks/trajectories_300k.md`` (its title left out), as ``benchmarks/trajectories_300k.py``
    wrote them from ``benchmarks/campaign300k/trajectories.csv``."""
    figure = BENCHMARKS / "trajectories_300k.png"
    table = BENCHMARKS / "trajectories_300k.md"
    if not figure.is_file() or not table.is_file():
        raise KeyError("benchmarks/trajectories_300k.png and .md are missing: run benchmarks/trajectories_300k.py --from-data")
    text = table.read_text()
    body = text.split("\n", 1)[1].strip() if text.startswith("# ") else text.strip()
    link = f"../../benchmarks/{figure.name}"
    return f"[![MIG and DCI against steps over the published schedule (click for full size)]({link})]({link})\n\n{body}"


# ---------------------------------------------------------------------------------- config keys
#: what a key without a ``#:`` comment in ``disentangle/config/schema.py`` (or ``Config``) is
KEY_NOTES = {
    "seed": "seeds Python, NumPy and torch; the run's random streams (its batches, its noise) are seeded from it",
    "data.name": "the dataset, a registered name ([Registered names](names.md#datasets))",
    "model.backbone": "the encoder and decoder, a registered name ([Registered names](names.md#backbones))",
    "model.latent_dim": "the number of latent dimensions (the size of the code)",
    "objective.name": "the objective, a registered name ([Registered names](names.md#objectives))",
    "train.out_dir": "the run folder (config, checkpoints, logs, pictures); a folder that holds a run is refused, "
                     "except to resume it",
}
#: the registered component whose parameters a section's ``params`` holds, and its anchor on names.md
_PARAMS_OF = {"data": ("dataset", "data.name", "datasets"), "model": ("backbone", "model.backbone", "backbones"),
              "objective": ("objective", "objective.name", "objectives")}


def _field_comments(cls: type) -> dict[str, str]:
    """The ``#:`` comment of each field of the dataclass ``cls``, as griffe reads it for the API
    pages: the comment lines right above the field, else the one beside it; reST roles as links to
    the API reference (plain code where the target is not documented)."""
    source = textwrap.dedent(inspect.getsource(cls))
    lines = source.splitlines()
    comments = {}
    for node in ast.parse(source).body[0].body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        above = []
        i = node.lineno - 2
        while i >= 0 and lines[i].strip().startswith("#:"):
            above.insert(0, lines[i].strip()[2:].strip())
            i -= 1
        beside = re.search(r"#:\s*(.*)$", lines[node.end_lineno - 1])
        text = " ".join(above) if above else (beside.group(1).strip() if beside else "")
        text = re.sub(rf"^``[\w.]*\b{node.target.id}``:\s*", "", text)  # "``data.labels``: ..." names its key again
        comments[node.target.id] = _ROLE.sub(lambda m: _ref(m.group(1), m.group(1)), text)
    return comments


def _value_words(hint: Any) -> list[str]:
    """The values a config key of type ``hint`` takes, as YAML: each literal and ``true``/``false``/
    ``null`` as code, each other type as a word."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Literal:
        return [f"`{value}`" for value in args]
    if origin is typing.Union or type(hint).__name__ == "UnionType":
        return [word for arg in args for word in _value_words(arg)]
    if hint is type(None):
        return ["`null`"]
    if hint is bool:
        return ["`true`", "`false`"]
    if origin is tuple:
        return ["[" + ", ".join(_value_words(arg)[0] for arg in args) + "]"]
    if origin is list:
        inner = _value_words(args[0])[0] if args else "value"
        return ["list" if inner.startswith(("`", "[")) else f"list of {inner}s"]
    if origin is dict or hint is dict:
        return ["mapping"]
    return [{int: "integer", float: "number", str: "string"}.get(hint, "any")]


def _or(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _yaml_value(value: Any) -> str:
    """``value`` as it is written in a config file."""
    import yaml

    plain = json.loads(json.dumps(value))  # tuples as lists
    text = yaml.safe_dump(plain, default_flow_style=True, width=10_000).strip()
    return text.removesuffix("...").strip()


def config_sections() -> dict[str, type]:
    """``{section: dataclass}`` of a config's sections (the fields of ``Config`` that are
    dataclasses; ``seed`` is a plain key)."""
    import dataclasses

    from disentangle.config import Config

    hints = typing.get_type_hints(Config)
    return {f.name: hints[f.name] for f in dataclasses.fields(Config) if dataclasses.is_dataclass(hints[f.name])}


def config_keys() -> str:
    """Every key of a config, by section: the values it takes, its default and what it does, from the
    dataclasses of ``disentangle/config/schema.py`` (and ``Config``'s own ``seed``) and their ``#:``
    comments. A section's ``params`` are no key of their own: the parameters of the registered
    component it names, flattened into the section, listed on the Registered names page."""
    import dataclasses

    from disentangle.config import Config

    def rows(cls: type, prefix: str) -> list[list[str]]:
        hints, comments, out = typing.get_type_hints(cls), _field_comments(cls), []
        for f in dataclasses.fields(cls):
            if f.name == "params" or dataclasses.is_dataclass(hints[f.name]):
                continue
            key = f"{prefix}{f.name}"
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            what = comments.get(f.name) or KEY_NOTES.get(key, "")
            out.append([f"`{key}`", _or(_value_words(hints[f.name])), f"`{_yaml_value(default)}`", what or "–"])
        return out

    header = ["key", "values", "default", "what"]
    parts = ["## `seed` {#seed}", "", "The one key outside the sections.", "", _table(header, rows(Config, ""))]
    for section, cls in config_sections().items():
        parts += ["", f"## `{section}` {{#{section}}}", "", _summary(cls), "", _table(header, rows(cls, f"{section}."))]
        if section in _PARAMS_OF and any(f.name == "params" for f in dataclasses.fields(cls)):
            kind, key, anchor = _PARAMS_OF[section]
            parts += ["", f"Besides these keys, `{section}` holds the parameters of the {kind} that `{key}` names, "
                          f"with their defaults filled in when the config is loaded: listed with each {kind} on "
                          f"[Registered names](names.md#{anchor})."]
    return "\n".join(parts)


# ---------------------------------------------------------------------------------- command lines
#: the command-line tools in the order the reference lists them; any other tool follows (:func:`cli_modules`)
CLI_ORDER = ("disentangle.train", "disentangle.evaluate", "disentangle.visualize", "disentangle.zoo",
             "disentangle.sweep", "disentangle.study")
#: the titles argparse gives its default groups (``optional arguments`` before Python 3.10)
_DEFAULT_GROUPS = ("positional arguments", "options", "optional arguments")
_MAIN_GUARD = re.compile(r'^if __name__ == "__main__":\n(?:\s+.*\n)*?\s+run_main\(main\)', re.M)


def cli_modules() -> list[str]:
    """Every command-line tool of the package, as ``python -m`` names it (``disentangle.zoo``, not
    ``disentangle.zoo.__main__``): each module that ends with ``if __name__ == "__main__":
    run_main(main)`` (:mod:`disentangle._core.cli`); the tools of :data:`CLI_ORDER` first."""
    found = []
    for path in sorted((REPO / "disentangle").rglob("*.py")):
        if _MAIN_GUARD.search(path.read_text()):
            parts = path.relative_to(REPO).with_suffix("").parts
            found.append(".".join(parts[:-1] if parts[-1] == "__main__" else parts))
    return sorted(found, key=lambda name: (CLI_ORDER.index(name) if name in CLI_ORDER else len(CLI_ORDER), name))


class _Parsed(Exception):
    """Raised in place of ``parse_args`` by :func:`cli_parser`: the parser a ``main`` built."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        super().__init__()
        self.parser = parser


def cli_parser(tool: str) -> argparse.ArgumentParser:
    """The argument parser of the command-line tool ``tool`` (``disentangle.sweep``), the live one:
    its module's ``build_parser()`` or ``_parser()`` where it has one, else the parser its ``main``
    builds, taken at its ``parse_args`` call (which raises there, so ``main`` does nothing else)."""
    module = _cli_module(tool)
    for name in ("build_parser", "_parser"):
        if callable(getattr(module, name, None)):
            return getattr(module, name)()
    parse_args = argparse.ArgumentParser.parse_args

    def taken(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        raise _Parsed(self)

    argparse.ArgumentParser.parse_args = taken  # type: ignore[method-assign]
    try:
        module.main([])
    except _Parsed as parsed:
        return parsed.parser
    finally:
        argparse.ArgumentParser.parse_args = parse_args  # type: ignore[method-assign]
    raise RuntimeError(f"python -m {tool}: its main() returned without parsing a command line")


def _cli_module(tool: str) -> Any:
    """The module that ``python -m tool`` runs: the package's ``__main__`` or the module itself."""
    if (REPO / Path(*tool.split("."), "__main__.py")).is_file():
        return importlib.import_module(f"{tool}.__main__")
    return importlib.import_module(tool)


def _visible(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.help != argparse.SUPPRESS and not isinstance(a, argparse._HelpAction)]


def _metavar(action: argparse.Action) -> str:
    """How the command line spells an argument's value(s): ``RUN_DIR``, ``[RUN_DIR]``, ``[overrides ...]``."""
    if action.nargs == 0:
        return ""
    if isinstance(action, argparse._SubParsersAction):
        return "COMMAND"
    metavar = action.metavar if isinstance(action.metavar, str) else (
        action.dest if not action.option_strings else action.dest.upper())
    return {"?": f"[{metavar}]", "*": f"[{metavar} ...]", "+": f"{metavar} [{metavar} ...]",
            argparse.REMAINDER: "..."}.get(action.nargs, metavar)


def _usage(parser: argparse.ArgumentParser, prog: str) -> str:
    """A synopsis of a command line: its required options, ``[options]``, its positionals."""
    words = [prog]
    actions = _visible(parser)
    for action in actions:
        if action.option_strings and action.required:
            words.append(f"{_long_first(action.option_strings)[0]} {_metavar(action)}".strip())
    if any(a.option_strings and not a.required for a in actions):
        words.append("[options]")
    words += [_metavar(a) for a in actions if not a.option_strings]
    return " ".join(words)


def _long_first(option_strings: list[str]) -> list[str]:
    return sorted(option_strings, key=lambda o: (not o.startswith("--"), option_strings.index(o)))


def _plain(text: str) -> str:
    """Terminal text (an argparse help string) as Markdown that shows it as written; reST literals
    (````python -m ...````, as a module docstring used as a description holds them) as code."""
    parts = re.split(r"(``[^`]+``)", text)
    return "".join(part if i % 2 else re.sub(r"([\\`*_\[\]])", r"\\\1", html.escape(part, quote=False))
                   for i, part in enumerate(parts))


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """An argument's help as the command's ``--help`` prints it (``%(default)s`` expanded), with its
    choices and what it cannot be combined with."""
    text = " ".join(parser._get_formatter()._expand_help(action).split()) if action.help else ""
    notes = []
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        notes.append("One of " + _or([f"`{c}`" for c in action.choices]) + ".")
    for group in parser._mutually_exclusive_groups:
        if action in group._group_actions:
            others = [_long_first(a.option_strings)[0] for a in group._group_actions if a is not action]
            notes.append("Not with " + _or([f"`{o}`" for o in others]) + ".")
    if text and notes and not text.endswith("."):
        text += "."
    required = ["**Required.**"] if action.required and action.option_strings else []
    return " ".join([*required, *([_plain(text)] if text else []), *notes]) or "–"


def _argument_cell(action: argparse.Action) -> str:
    metavar = _metavar(action)
    if not action.option_strings:
        return f"`{metavar}`"
    first, *others = _long_first(action.option_strings)
    return ", ".join([f"`{first} {metavar}`" if metavar else f"`{first}`", *[f"`{o}`" for o in others]])


def _default_cell(action: argparse.Action) -> str:
    default = action.default
    if action.nargs == 0 or action.required or default in (None, argparse.SUPPRESS) or default == [] or default is False:
        return "–"
    return f"`{default}`" if default != "" else '`""`'


def _arguments(parser: argparse.ArgumentParser) -> list[str]:
    """The tables of a parser's arguments: positionals and options first, then each named group."""
    header = ["argument", "default", "what"]
    groups = sorted(parser._action_groups, key=lambda g: g.title not in _DEFAULT_GROUPS)
    parts: list[str] = []
    main_rows: list[list[str]] = []
    for group in groups:
        actions = [a for a in group._group_actions if a in _visible(parser) and not isinstance(a, argparse._SubParsersAction)]
        rows = [[_argument_cell(a), _default_cell(a), _help(parser, a)] for a in actions]
        if group.title in _DEFAULT_GROUPS:
            main_rows += rows
        elif rows:
            title = f"**{_plain(group.title or '')}**" + (f": {_plain(group.description)}" if group.description else "")
            parts += ["", title, "", _table(header, rows)]
    return (["", _table(header, main_rows)] if main_rows else []) + parts


def _anchor(tool: str, command: str | None = None) -> str:
    name = tool.removeprefix("disentangle.").replace(".", "-")
    return f"{name}-{command}" if command else name


def _subcommands(parser: argparse.ArgumentParser) -> tuple[argparse._SubParsersAction, dict[str, str]] | None:
    """A parser's subcommands action and ``{name: help}``, or None."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            return action, {name: helps.get(name, "") for name in action.choices}
    return None


def cli_reference() -> str:
    """Every command-line tool (:func:`cli_modules`), each with its usage, its description and every
    argument (name, default, help), subcommand by subcommand, read from the tool's own argparse parser
    (:func:`cli_parser`)."""
    parts: list[str] = []
    for tool in cli_modules():
        parser = cli_parser(tool)
        prog = f"python -m {tool}"
        parts += [f"## `{prog}` {{#{_anchor(tool)}}}", ""]
        if parser.description:
            parts += [_plain(" ".join(parser.description.split())), ""]
        parts += ["```text", _usage(parser, prog), "```"]
        parts += _arguments(parser)
        subcommands = _subcommands(parser)
        if subcommands is not None:
            action, helps = subcommands
            rows = [[f"[`{name}`](#{_anchor(tool, name)})", _plain(helps[name]) or "–"] for name in action.choices]
            parts += ["", _table(["command", "what"], rows)]
        if parser.epilog:
            parts += ["", _plain(" ".join(parser.epilog.split()))]
        parts.append("")
        for name, sub in (subcommands[0].choices.items() if subcommands else ()):
            parts += [f"### `{prog.removeprefix('python -m disentangle.')} {name}` {{#{_anchor(tool, name)}}}", ""]
            description = sub.description or subcommands[1][name]
            if description:
                parts += [_plain(" ".join(description.split())), ""]
            parts += ["```text", _usage(sub, f"{prog} {name}"), "```"]
            parts += _arguments(sub)
            if sub.epilog:
                parts += ["", _plain(" ".join(sub.epilog.split()))]
            parts.append("")
    return "\n".join(parts).rstrip()


GENERATORS: dict[str, Callable[[], str]] = {
    "pretrained-scores": pretrained_scores,
    "pretrained-seeds": pretrained_seeds,
    "pretrained-schedules": pretrained_schedules,
    "pretrained-notes": pretrained_notes,
    "pretrained-example": pretrained_example,
    "zoo-recipes": zoo_recipes,
    "registered-datasets": registered_datasets,
    "registered-backbones": registered_backbones,
    "registered-objectives": registered_objectives,
    "registered-metrics": registered_metrics,
    "registered-callbacks": registered_callbacks,
    "more-figures": more_figures,
    "time-to-disentangle": time_to_disentangle,
    "trajectories-300k": trajectories_300k,
    "shipped-configs": shipped_configs,
    "shipped-sweeps": shipped_sweeps,
    "config-keys": config_keys,
    "cli-reference": cli_reference,
}


def expand(markdown: str, where: str = "a page", wrap: bool = True) -> str:
    """``markdown`` with the content of every ``<!-- generated: NAME -->`` ... ``<!-- end generated -->``
    block generated afresh; ``wrap`` puts it in a ``<div class="generated NAME">`` (the site's
    pages), without it the block stays a block (the sources)."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise KeyError(f"{where}: unknown generated block '{name}'; known: {', '.join(GENERATORS)}")
        content = GENERATORS[name]()
        if wrap:
            return f'<div class="generated {name}" markdown="1">\n\n{content}\n\n</div>' if content else ""
        return f"<!-- generated: {name} -->\n" + (f"{content}\n" if content else "") + "<!-- end generated -->"

    return MARKER.sub(replace, markdown)


def site_links(markdown: str, src_uri: str) -> str:
    """Links from the page ``src_uri`` (relative to ``docs/``) to ``examples/output/...`` or
    ``benchmarks/...`` in the repository, pointed at the site's ``assets/examples/...`` and
    ``assets/benchmarks/...``."""
    prefix = "../" * src_uri.count("/")
    folders = {"examples/output": "assets/examples/", "benchmarks": "assets/benchmarks/"}
    return REPO_LINK.sub(lambda m: f"]({prefix}{folders[m.group(2)]}", markdown)


DOCS = REPO / "docs"


def pages_with_blocks() -> list[Path]:
    """The documentation pages that hold generated blocks."""
    return sorted(p for p in DOCS.rglob("*.md") if "<!-- generated:" in p.read_text())


def example_pictures() -> list[Path]:
    """The example pictures that the site shows (``examples/output/**``)."""
    return sorted(p for p in EXAMPLES.rglob("*") if p.suffix.lower() in PICTURE_SUFFIXES and p.is_file())


# ---------------------------------------------------------------------------------- MkDocs events
def on_files(files, config):  # noqa: ANN001, ANN201 (MkDocs hook)
    from mkdocs.structure.files import File

    for picture in example_pictures():
        uri = "assets/examples/" + picture.relative_to(EXAMPLES).as_posix()
        files.append(File.generated(config, uri, abs_src_path=str(picture)))
    for figure in sorted(BENCHMARKS.glob("*.png")):
        files.append(File.generated(config, f"assets/benchmarks/{figure.name}", abs_src_path=str(figure)))
    return files


def on_page_markdown(markdown, page, config, files):  # noqa: ANN001, ANN201 (MkDocs hook)
    from mkdocs.exceptions import PluginError

    try:
        return site_links(expand(markdown, page.file.src_uri), page.file.src_uri)
    except KeyError as error:
        raise PluginError(str(error.args[0])) from error


# ---------------------------------------------------------------------------------- the README
README = REPO / "README.md"
README_BLOCK = re.compile(r"(<!-- readme: (\w+) -->\n)(.*?)(<!-- end -->)", re.S)
#: the README's generated blocks, ``<!-- readme: NAME -->`` ... ``<!-- end -->``
README_GENERATORS: dict[str, Callable[[], str]] = {
    "pretrained_scores": pretrained_scores,
    "pretrained_seeds": pretrained_seeds,
}


def readme_with_current_tables(text: str) -> str:
    """The README with its generated blocks (``<!-- readme: NAME -->`` ... ``<!-- end -->``, NAME in
    ``README_GENERATORS``) regenerated from the manifest."""
    found = {m.group(2) for m in README_BLOCK.finditer(text)}
    if "pretrained_scores" not in found:
        raise KeyError("README.md has no <!-- readme: pretrained_scores --> ... <!-- end --> block")
    unknown = found - set(README_GENERATORS)
    if unknown:
        raise KeyError(f"README.md: unknown generated block(s) {sorted(unknown)}; known: {', '.join(README_GENERATORS)}")

    def replace(match: re.Match[str]) -> str:
        content = README_GENERATORS[match.group(2)]()
        return match.group(1) + (content + "\n" if content else "") + match.group(4)

    return README_BLOCK.sub(replace, text)


if __name__ == "__main__":  # python docs/hooks/generated.py: refresh every generated block after a publish
    README.write_text(readme_with_current_tables(README.read_text()))
    print(f"updated {README}")
    for page in pages_with_blocks():
        page.write_text(expand(page.read_text(), str(page.relative_to(DOCS)), wrap=False))
        print(f"updated {page}")
