"""The "Your own data" guide's figure: a β-VAE trained on a small sample in CelebA's format.

Real CelebA cannot be downloaded here, so this script writes a folder in its exact format (178×218
JPEGs in ``img_align_celeba/``, ``list_attr_celeba.txt`` with the 40 official attribute names,
``list_eval_partition.txt``) holding drawn "faces": an ellipse on a plain background whose skin tone,
width, hair colour, mouth curvature and horizontal position are drawn uniformly at random; four of the
40 attributes follow them (``Pale_Skin``, ``Chubby``, ``Blond_Hair``, ``Smiling``), the others are -1.
It then trains through the ``celeba`` loader (the official 140×140 centre crop, resized to 64×64) and
writes the model's traversals, and MIG and DCI against the four attributes on the labelled sample::

    python benchmarks/own_data_figure.py                      # 4,000 steps, 5,000 images
    python benchmarks/own_data_figure.py --steps 500 --images 500 --out /tmp/fig   # a quick look

Writes ``benchmarks/own_data_traversals.png`` and ``benchmarks/own_data_reconstructions.png`` (or
into ``--out``), and prints the scores and the CPU.
"""
from __future__ import annotations

import argparse
import math
import platform
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

ATTRIBUTES = (
    "5_o_Clock_Shadow Arched_Eyebrows Attractive Bags_Under_Eyes Bald Bangs Big_Lips Big_Nose Black_Hair "
    "Blond_Hair Blurry Brown_Hair Bushy_Eyebrows Chubby Double_Chin Eyeglasses Goatee Gray_Hair Heavy_Makeup "
    "High_Cheekbones Male Mouth_Slightly_Open Mustache Narrow_Eyes No_Beard Oval_Face Pale_Skin Pointy_Nose "
    "Receding_Hairline Rosy_Cheeks Sideburns Smiling Straight_Hair Wavy_Hair Wearing_Earrings Wearing_Hat "
    "Wearing_Lipstick Wearing_Necklace Wearing_Necktie Young"
).split()
FACTORS = ("tone", "width", "hair", "smile", "shift")
#: the attribute that follows each factor (> 0.5 sets it), or None
LABELLED = {"tone": "Pale_Skin", "width": "Chubby", "hair": "Blond_Hair", "smile": "Smiling"}


def draw_face(f: dict[str, float]) -> Image.Image:
    """A 178×218 RGB picture; the face sits in the 140×140 centre box (19, 39)-(159, 179)."""
    image = Image.new("RGB", (178, 218), (70, 90, 110))
    d = ImageDraw.Draw(image)
    cx, cy = 89 + (f["shift"] - 0.5) * 40, 115
    half_w, half_h = 28 + 22 * f["width"], 55
    skin = tuple(int(v) for v in np.array([150, 95, 70]) + f["tone"] * np.array([100, 130, 140]))
    hair = tuple(int(v) for v in np.array([40, 25, 15]) + f["hair"] * np.array([200, 180, 90]))
    d.ellipse([cx - half_w - 6, cy - half_h - 14, cx + half_w + 6, cy + 10], fill=hair)  # hair behind
    d.ellipse([cx - half_w, cy - half_h, cx + half_w, cy + half_h], fill=skin)
    for ex in (-0.4, 0.4):  # eyes
        d.ellipse([cx + ex * half_w - 5, cy - 15, cx + ex * half_w + 5, cy - 7], fill=(30, 30, 30))
    bend = (f["smile"] - 0.5) * 24  # > 0: the middle below the corners (a smile)
    d.line([(cx + t * 18, cy + 25 + bend * (1 - t * t) - bend / 2) for t in np.linspace(-1, 1, 15)],
           fill=(120, 30, 40), width=4)
    return image


def write_sample(root: Path, n: int, seed: int) -> np.ndarray:
    """Write ``n`` faces in CelebA's layout under ``root``; returns the factors ``(n, 5)``."""
    rng = np.random.default_rng(seed)
    factors = rng.uniform(size=(n, len(FACTORS)))
    folder = root / "img_align_celeba"
    folder.mkdir(parents=True, exist_ok=True)
    rows = [str(n), " ".join(ATTRIBUTES)]
    partition = []
    for i in range(n):
        name = f"{i + 1:06d}.jpg"
        f = dict(zip(FACTORS, factors[i]))
        draw_face(f).save(folder / name, quality=95)
        values = [-1] * len(ATTRIBUTES)
        for factor, attribute in LABELLED.items():
            values[ATTRIBUTES.index(attribute)] = 1 if f[factor] > 0.5 else -1
        rows.append(name + " " + " ".join(f"{v:>2}" for v in values))
        partition.append(f"{name} 0\n")
    (root / "list_attr_celeba.txt").write_text("\n".join(rows) + "\n")
    (root / "list_eval_partition.txt").write_text("".join(partition))
    return factors


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux), else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=5000)
    parser.add_argument("--steps", type=int, default=4000)
    parser.add_argument("--beta", type=float, default=4.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent))
    args = parser.parse_args(argv)

    import torch

    from disentangle import load
    from disentangle.config import load_config
    from disentangle.data import build_dataset
    from disentangle.metrics import evaluate_metrics
    from disentangle.training.trainer import Trainer
    from disentangle.visualize.pictures import write_training_pictures

    work = Path(tempfile.mkdtemp(prefix="own_data_figure_"))
    try:
        write_sample(work / "celeba", args.images, args.seed)
        overrides = [
            "data.name=celeba", f"data.path={work / 'celeba'}", f"data.cache={work / 'cache'}",
            "model.backbone=conv64", "model.latent_dim=10", "objective.name=beta_vae", f"objective.beta={args.beta}",
            f"train.steps={args.steps}", "train.batch_size=64", "train.lr=1e-4", "train.progress=false",
            "train.traversals=false", "train.device=cpu", f"train.out_dir={work / 'run'}",
            f"train.checkpoint_every={args.steps}", "train.log_every=500", f"seed={args.seed}",
        ]
        config = load_config(None, overrides)
        started = time.perf_counter()
        Trainer(config).fit()
        wall = time.perf_counter() - started
        dataset = build_dataset(config.data, device="cpu")
        model = load(work / "run")
        model.eval()
        pictures = write_training_pictures(model, dataset, work / "pictures", seed=0)
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        for path in pictures.values():
            shutil.copy(path, out / f"own_data_{Path(path).name}")
        attributes = list(LABELLED.values())  # the other 36 are constant
        settings = {"mig": {"num_train": 2000, "factors": attributes},
                    "dci": {"num_train": 2000, "num_test": 1000, "factors": attributes}}
        scores = evaluate_metrics(dataset, model, ["mig", "dci"], settings=settings)
        labelled = [ATTRIBUTES.index(a) for a in LABELLED.values()]
        print(f"CPU: {cpu_name()}, torch {torch.__version__}, "
              f"{torch.backends.cpu.get_cpu_capability()}, {torch.get_num_threads()} threads")
        print(f"{args.images} images, {args.steps} steps, beta {args.beta}: {wall:.0f} s to write the data and train")
        names = dataset.factor_names
        for attribute_index in labelled:
            key = f"mig_{names[attribute_index]}"
            if key in scores["mig"]:
                print(f"  MIG {names[attribute_index]}: {scores['mig'][key]:.3f}")
        print(f"  MIG (the four attributes): {scores['mig']['mig']:.3f}")
        print(f"  DCI disentanglement: {scores['dci']['disentanglement']:.3f}")
        print("wrote", ", ".join(str(out / f"own_data_{Path(p).name}") for p in pictures.values()))
        return 0 if all(math.isfinite(v) for v in scores["mig"].values()) else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
