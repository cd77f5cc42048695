"""examples/notebook.ipynb runs top to bottom and shows its pictures (skipped without nbclient/ipykernel)."""
from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("matplotlib")  # the notebook draws its plots with it (the plots extra)

NOTEBOOK = Path(__file__).resolve().parents[2] / "examples" / "notebook.ipynb"


def test_notebook_is_stored_without_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(not c.outputs and c.execution_count is None for c in code)
    loading = [c for c in code if "LOADING CELL" in c.source]
    assert len(loading) == 1 and "disentangle.load(" in loading[0].source


def test_notebook_executes_and_shows_every_picture(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the kernel's temporary folder (the GIF) lands here
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    mimes = [m for o in outputs if o.output_type in ("display_data", "execute_result") for m in o.get("data", {})]
    # KL bars, traversal grid, reconstructions, metrics bars, latent responses; and the animation
    assert mimes.count("image/png") == 5
    assert mimes.count("image/gif") == 1
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "KL per latent" in text and "mig {'mig':" in text and "sap_score {'sap':" in text
    assert "beta_tcvae-sprites-beta6-cpu20k-ref-s0 - 20000 steps" in text  # the zoo model was loaded
    with Image.open(next(tmp_path.glob("disentangle_notebook_*")) / "traversals.gif") as gif:
        assert gif.n_frames > 1 and gif.size[0] > 64
