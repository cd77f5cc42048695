"""The Python snippets of the README and of the docs' pages that give whole programs run as written.

A user copies them first: a renamed function, a variable a block forgets to define, or a tensor
that still carries its autograd graph where the text turns it into an array, would be their first
error. Each page's ```python blocks run in order in one namespace, in a folder that holds
``runs/quickstart`` (the quickstart's config, trained for a few steps: the snippets read the run
folder the quickstart writes, not what it learned)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from disentangle.train import main as train_main

pytestmark = pytest.mark.usefixtures("one_thread")

ROOT = Path(__file__).resolve().parents[2]
# the pages whose blocks are whole programs; the others' are fragments (a user's images, config)
# or register names in the global registries (extending.md), and examples/ tests own_loop.md's
PAGES = ["README.md", "docs/index.md", "docs/getting-started.md", "docs/guides/metrics.md",
         "docs/guides/datasets.md", "docs/guides/training.md", "docs/guides/zoo.md"]


#: the settings the snippets' metric calls run with: small samples (each metric has tests of its own)
SMALL_SAMPLES = {"mig": {"num_train": 500}, "dci": {"num_train": 300, "num_test": 200}}


def python_blocks(text: str) -> list[str]:
    """The bodies of a Markdown page's ```python fenced blocks, in order."""
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


def test_python_blocks_are_found_in_order():
    text = "a\n```python\nx = 1\n```\ntext\n```bash\nls\n```\n```python\ny = x + 1\n```\n"
    assert python_blocks(text) == ["x = 1\n", "y = x + 1\n"]


@pytest.fixture(scope="module")
def quickstart_folder(tmp_path_factory) -> Path:
    """A folder holding ``runs/quickstart``: the quickstart config trained for 4 steps."""
    folder = tmp_path_factory.mktemp("user")
    status = train_main(["--config", str(ROOT / "configs" / "quickstart.yaml"), "--quiet",
                         "train.steps=4", "train.checkpoint_every=4", "train.log_every=2", "train.device=cpu",
                         "train.traversals=false", "train.progress=false", "train.threads=1",
                         f"train.out_dir={folder / 'runs' / 'quickstart'}"])
    assert status == 0
    return folder


@pytest.mark.parametrize("page", PAGES)
def test_the_pages_python_snippets_run_as_written(page, quickstart_folder, monkeypatch):
    blocks = python_blocks((ROOT / page).read_text())
    assert blocks, f"{page} has no ```python block"
    monkeypatch.chdir(quickstart_folder)
    import disentangle.metrics

    # "all" metrics at their reference sizes take minutes on one thread, and each metric has tests of
    # its own: what a snippet can get wrong is the call, so "all" is resolved against the model and
    # data as the library resolves it, and two of its metrics run on small samples
    evaluate = disentangle.metrics.evaluate_metrics

    def evaluate_small(dataset, model, metrics, **kwargs):
        if metrics != "all":
            return evaluate(dataset, model, metrics, **kwargs)
        names = disentangle.metrics.resolve_metric_names(metrics, model, dataset)
        assert {"mig", "dci", "factor_vae_score"} <= set(names)
        return evaluate(dataset, model, ["mig", "dci"], settings=SMALL_SAMPLES, **kwargs)

    monkeypatch.setattr(disentangle.metrics, "evaluate_metrics", evaluate_small)
    # the same for the metrics a snippet calls by name: smaller samples, unless it chose its own
    for name, small in SMALL_SAMPLES.items():
        metric = getattr(disentangle.metrics, name)
        monkeypatch.setattr(disentangle.metrics, name,
                            lambda dataset, model, *, _metric=metric, _small=small, **kw: _metric(dataset, model,
                                                                                                 **{**_small, **kw}))
    # a snippet that trains runs a few steps on one thread, evaluating twice
    import disentangle.config

    load_config = disentangle.config.load_config
    short = ["train.steps=8", "train.eval_every=4", "train.log_every=4", "train.checkpoint_every=4",
             "train.threads=1", "train.device=cpu", "train.traversals=false", "train.progress=false"]
    monkeypatch.setattr(disentangle.config, "load_config",
                        lambda source, overrides=(), **kw: load_config(source, [*overrides, *short], **kw))
    namespace: dict = {"__name__": "__snippet__"}
    for number, block in enumerate(blocks, 1):
        try:
            exec(compile(block, f"{page} python block {number}", "exec"), namespace)
        except Exception as error:  # say which block, as the user would see it
            pytest.fail(f"{page}, python block {number} fails: {type(error).__name__}: {error}\n{block}")
    for name in ("images", "mu"):  # the tensors the text turns into pictures or arrays
        if name in namespace:
            tensor = namespace[name]
            assert isinstance(tensor, torch.Tensor) and not tensor.requires_grad, \
                f"{page}: '{name}' carries the autograd graph, so .numpy() on it fails"
            tensor.numpy()
