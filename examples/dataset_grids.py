"""Write a grid image of random observations of each dataset to ``examples/output/<name>.png``.

Look at them to check that the variants render as intended::

    python examples/dataset_grids.py                       # what is available offline
    python examples/dataset_grids.py --background scream.jpg --download

* The procedural ``sprites`` and its Color/Noisy/Scream variants are always drawn (offline).
* The Color/Noisy/Scream variants are also drawn on real dSprites frames: the dSprites file if it
  is in the cache, else the 320 real frames of ``examples/reference/dsprites.gif`` when present.
* The file datasets (dsprites, shapes3d, smallnorb, cars3d, mpi3d) are drawn when their files are
  in the cache (``--download`` fetches them; they are large).

Without ``--background`` the Scream variants use The Scream if it is in the cache and a synthetic
painting-like image otherwise. Each grid is 2 × 8 images, so the PNGs stay small.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from disentangle.data import DATASETS, IndexedImageDataset  # noqa: E402
from disentangle.data.download import cache_path  # noqa: E402
from disentangle.data.variants import SCREAM_FILE, ColorSprites, NoisySprites, ScreamSprites  # noqa: E402
from disentangle.errors import DisentangleError  # noqa: E402

OUT = Path(__file__).resolve().parent / "output"


def save_grid(batch: torch.Tensor, path: Path, cols: int = 8, pad: int = 2) -> None:
    """Tile ``(n, C, H, W)`` floats in [0, 1] into one PNG with grey separators."""
    x = batch.detach().float().clamp(0, 1).cpu()
    if x.shape[1] == 1:
        x = x.expand(-1, 3, -1, -1)
    n, _, h, w = x.shape
    rows = (n + cols - 1) // cols
    canvas = torch.full((3, rows * (h + pad) + pad, cols * (w + pad) + pad), 0.5)
    for i in range(n):
        r, c = divmod(i, cols)
        canvas[:, pad + r * (h + pad): pad + r * (h + pad) + h, pad + c * (w + pad): pad + c * (w + pad) + w] = x[i]
    Image.fromarray((canvas.permute(1, 2, 0).numpy() * 255).round().astype(np.uint8)).save(path, optimize=True)
    print(f"wrote {path.relative_to(ROOT)} ({path.stat().st_size // 1024} KB)")


def synthetic_background(path: Path) -> Path:
    """A colourful swirl, a stand-in for The Scream when it is not available offline."""
    y, x = np.mgrid[0:274, 0:219] / 60.0
    r = 0.5 + 0.5 * np.sin(2.0 * x + np.sin(3.0 * y))
    g = 0.5 + 0.5 * np.sin(1.3 * y + 2.0 * np.cos(x))
    b = 0.5 + 0.5 * np.cos(x + y + np.sin(2.0 * x * y / 5))
    Image.fromarray((np.stack([r, 0.6 * g, 0.8 * b], -1) * 255).astype(np.uint8)).save(path)
    return path


def gif_frames(path: Path) -> IndexedImageDataset:
    """The real dSprites frames of the reference GIF as a one-factor dataset."""
    from PIL import ImageSequence

    with Image.open(path) as gif:
        frames = np.stack([np.asarray(f.convert("L")) > 127 for f in ImageSequence.Iterator(gif)])
    images = torch.from_numpy(frames.astype(np.uint8)).unsqueeze(1)
    return IndexedImageDataset(images, ("frame",), (len(frames),), scale=1.0)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--background", help="background image for the Scream variants")
    p.add_argument("--download", action="store_true", help="download missing dataset files")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)

    background = args.background
    if background is None:
        scream = cache_path(SCREAM_FILE)
        if scream.is_file():
            background = str(scream)
        else:
            background = str(synthetic_background(Path(tempfile.mkdtemp()) / "background.png"))
    print(f"Scream background: {background}")

    def draw(name, ds):
        g = torch.Generator(device=ds.device).manual_seed(args.seed)
        save_grid(ds.sample_batch(16, g), OUT / f"{name}.png")

    if "sprites" in DATASETS:
        draw("sprites", DATASETS.build("sprites"))
        draw("color_sprites", DATASETS.build("color_sprites"))
        draw("noisy_sprites", DATASETS.build("noisy_sprites"))
        draw("scream_sprites", DATASETS.build("scream_sprites", background=background))
    else:
        print("skip sprites: the procedural renderer is not registered")

    try:
        real = DATASETS.build("dsprites", download=args.download)
        source = "dsprites"
    except DisentangleError as err:
        gif = ROOT / "examples" / "reference" / "dsprites.gif"
        real, source = (gif_frames(gif), "dsprites_frames") if gif.is_file() else (None, None)
        print(f"dsprites file unavailable ({type(err).__name__}); variants drawn on {gif if real else 'nothing'}")
    if real is not None:
        draw(source, real)
        draw(f"color_{source}", ColorSprites(real))
        draw(f"noisy_{source}", NoisySprites(real))
        draw(f"scream_{source}", ScreamSprites(real, background))

    for name, params in [("shapes3d", {}), ("smallnorb", {}), ("cars3d", {}),
                         ("mpi3d_toy", {"variant": "toy"}), ("mpi3d_realistic", {"variant": "realistic"}),
                         ("mpi3d_real", {"variant": "real"})]:
        try:
            ds = DATASETS.build(name.split("_")[0] if name.startswith("mpi3d") else name,
                                download=args.download, **params)
        except DisentangleError as err:
            print(f"skip {name}: {str(err).split('. ')[0]}.")
            continue
        draw(name, ds)


if __name__ == "__main__":
    main()
