"""Compare the procedural ``sprites`` renderer with real dSprites frames.

    python examples/compare_sprites_reference.py [--reference PATH] [--png OUT.png]

The reference is ``examples/reference/dsprites.gif`` (vendored, Apache-2.0): 320 real 64×64
binary dSprites frames, traversals of the real dataset (for the heart, ellipse and square, the
scale, the orientation and, for the heart, the x and y positions swept one at a time).

For every frame the script finds the best-matching rendered image over the *whole* factor grid
(3×6×40×32×32 = 737,280 images) by exhaustive search: the grid is rendered in chunks and the
intersection of every frame with every rendered image is one matrix product of flattened 0/1
masks, ``inter = F @ Rᵀ``, so IoU = inter / (|F| + |R| - inter) for all pairs at once. It reports
the per-shape and overall mean best-match IoU and the histogram of the best-matching factor
classes (which shows whether the scale range and the position mapping are right).

It also renders each frame at the factor classes read off the traversal order of the GIF (see
:func:`traversal_labels`) and reports that IoU and how often the best match agrees with those
classes, a stricter check of the factor mapping (given the assumption, stated in
``disentangle/data/sprites.py``, that every sweep runs upward from class 0 first).

Exits with status 2 and a message when the reference file is missing. Takes about 40 s on one CPU
thread (``--threads 1``, which is also the fastest on a busy two-core machine; ``--device cuda``
if you have one). Last result: mean best-match IoU 0.9997 (square 0.9997, ellipse 0.9996, heart
0.9997), worst frame 0.9890.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from disentangle.data.sprites import (
    FACTOR_NAMES,
    FACTOR_SIZES,
    SHAPE_NAMES,
    ProceduralSprites,
    render_sprites,
)

DEFAULT_REFERENCE = ROOT / "examples" / "reference" / "dsprites.gif"


def load_frames(path: Path) -> np.ndarray:
    """The GIF's frames as a bool array ``(n, H, W)`` (pixels > 127 are on)."""
    from PIL import Image, ImageSequence

    with Image.open(path) as gif:
        frames = [np.asarray(frame.convert("L")) > 127 for frame in ImageSequence.Iterator(gif)]
    return np.stack(frames)


def traversal_labels() -> np.ndarray:
    """Factor classes ``(320, 5)`` of the reference frames, decoded from the GIF's traversal order.

    Decoded by eye and by pixel equalities between frames (e.g. frames 18 and 57 are identical,
    as orientation classes 0 and 39 are): per shape, the scale is swept up, down and up again
    at orientation 0, then the orientation 0 → 39 at scale 1, (heart only:) position y 0 → 31,
    x 0 → 31, y 31 → 0, x 31 → 0 at orientation 39, then the scale down again. The order of the
    shapes is heart, ellipse, square. That each sweep starts *upward* from class 0 is the
    assumption behind the renderer's position-y and rotation sense (the frames themselves run
    both ways).
    """
    rows: list[tuple[int, int, int, int, int]] = []
    up, down = list(range(6)), list(range(5, -1, -1))
    for shape in (2, 1, 0):  # heart, ellipse, square
        for s in up + down + up:
            rows.append((shape, s, 0, 0, 0))
        rows += [(shape, 5, o, 0, 0) for o in range(40)]
        if shape == 2:
            rows += [(shape, 5, 39, 0, p) for p in range(32)]
            rows += [(shape, 5, 39, p, 31) for p in range(32)]
            rows += [(shape, 5, 39, 31, p) for p in range(31, -1, -1)]
            rows += [(shape, 5, 39, p, 0) for p in range(31, -1, -1)]
        rows += [(shape, s, 39, 0, 0) for s in down]
    return np.asarray(rows, dtype=np.int64)


def iou_rows(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """IoU of matching rows of two bool masks ``(n, ...)``."""
    a, b = a.flatten(1), b.flatten(1)
    return (a & b).sum(1).double() / (a | b).sum(1).clamp(min=1).double()


def best_matches(
    frames: torch.Tensor, dataset: ProceduralSprites, chunk: int, progress: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    """Best IoU and its grid index for each frame, over the whole grid (lowest index on ties).

    Exhaustive and exact; three things make it fast:

    * all IoUs of a chunk of rendered images come from one matrix product of flattened 0/1 masks;
    * a frame skips a chunk when no image in it can beat the frame's best IoU so far, by the bound
      ``IoU(F, R) <= min(|F|, |R|) / max(|F|, |R|)`` on the areas (a chunk is a run of
      orientations of one shape and scale, whose areas span a narrow range);
    * a first pass over every 13th grid image seeds the best IoUs, so that the bound bites from
      the start of the full pass.
    """
    device = dataset.device
    f = frames.flatten(1).to(device=device, dtype=torch.float32)  # 0/1: exact sums in float32
    area_f = f.sum(1)
    best = torch.full((f.shape[0],), -1.0, dtype=torch.float64, device=device)
    best_idx = torch.full((f.shape[0],), len(dataset), dtype=torch.int64, device=device)
    pairs = 0

    def visit(idx: torch.Tensor) -> None:
        nonlocal pairs
        r = dataset.render(idx).flatten(1).to(torch.float32)
        area_r = r.sum(1)
        lo, hi = area_r.min(), area_r.max()
        bound = torch.where(area_f < lo, area_f / lo, torch.where(area_f > hi, hi / area_f.clamp(min=1), 1.0))
        active = (bound.double() >= best).nonzero().squeeze(1)  # >=: an equal IoU may have a lower index
        if active.numel() == 0:
            return
        pairs += active.numel() * idx.numel()
        inter = f[active] @ r.T
        union = area_f[active].unsqueeze(1) + area_r.unsqueeze(0) - inter
        iou = (inter / union.clamp(min=1)).double()
        value, _ = iou.max(dim=1)
        # the lowest grid index reaching the maximum (idx is increasing within a visit)
        first = (iou == value.unsqueeze(1)).to(torch.int8).argmax(dim=1)
        cand = idx[first]
        old_v, old_i = best[active], best_idx[active]
        better = (value > old_v) | ((value == old_v) & (cand < old_i))
        best[active] = torch.where(better, value, old_v)
        best_idx[active] = torch.where(better, cand, old_i)

    n = len(dataset)
    start_time = time.perf_counter()
    seeds = torch.arange(0, n, 13, device=device)
    for start in range(0, seeds.numel(), chunk):
        visit(seeds[start : start + chunk])
    if progress:
        print(f"  seeded with {seeds.numel():,} images (mean IoU {best.mean():.3f}, "
              f"{time.perf_counter() - start_time:.1f} s)", flush=True)
    next_report = 0.1
    for start in range(0, n, chunk):
        idx = torch.arange(start, min(start + chunk, n), device=device)
        visit(idx)
        done = (start + idx.numel()) / n
        if progress and done >= next_report:
            print(f"  searched {done:4.0%} of the grid ({time.perf_counter() - start_time:5.1f} s)", flush=True)
            next_report += 0.1
    if progress:
        total = f.shape[0] * (n + seeds.numel())
        print(f"  IoU computed for {pairs / total:.1%} of the (frame, image) pairs; "
              "the rest were ruled out by their areas")
    return best.cpu(), best_idx.cpu()


def histogram_line(values: np.ndarray, size: int) -> str:
    counts = np.bincount(values, minlength=size)
    return " ".join(f"{k}:{c}" for k, c in enumerate(counts) if c)


def save_png(path: Path, frames: np.ndarray, matches: np.ndarray, order: np.ndarray, zoom: int = 3) -> None:
    """Pairs (real | rendered best match) in a grid; on the right image, pixels are white where
    both agree, red where only the real frame has them and blue where only the render has them."""
    from PIL import Image

    _, h, w = frames.shape
    cols = 8
    rows = (len(order) + cols - 1) // cols
    cell_w, cell_h = 2 * w + 3, h + 2
    canvas = np.full((rows * cell_h, cols * cell_w, 3), 90, dtype=np.uint8)
    for k, i in enumerate(order):
        r, c = divmod(k, cols)
        y0, x0 = r * cell_h + 1, c * cell_w + 1
        real, fake = frames[i], matches[i]
        canvas[y0 : y0 + h, x0 : x0 + w] = real[..., None] * 255
        diff = np.zeros((h, w, 3), dtype=np.uint8)
        diff[real & fake] = (255, 255, 255)
        diff[real & ~fake] = (255, 40, 40)
        diff[~real & fake] = (60, 120, 255)
        canvas[y0 : y0 + h, x0 + w + 1 : x0 + 2 * w + 1] = diff
    img = Image.fromarray(canvas).resize((canvas.shape[1] * zoom, canvas.shape[0] * zoom), Image.NEAREST)
    img.save(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE, help="the dSprites GIF")
    parser.add_argument("--device", default="cpu", help="torch device for rendering and matching")
    parser.add_argument("--chunk", type=int, default=8192, help="grid images rendered per step")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--png", type=Path, default=None, help="save frames next to their best matches")
    parser.add_argument("--png-frames", type=int, default=64, help="how many (worst first) frames in --png")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    if not args.reference.is_file():
        print(
            f"error: reference file not found: {args.reference}\n"
            "It holds 320 real dSprites frames and lives in examples/reference/ in the project "
            "root; pass its location with --reference PATH.",
            file=sys.stderr,
        )
        return 2
    frames = load_frames(args.reference)
    n_frames, h, w = frames.shape
    if (h, w) != (64, 64):
        print(f"error: expected 64×64 frames, {args.reference} has {h}×{w}.", file=sys.stderr)
        return 2
    print(f"reference: {args.reference} ({n_frames} frames of {h}×{w}, on-pixels per frame "
          f"{frames.sum((1, 2)).min()}-{frames.sum((1, 2)).max()})")

    dataset = ProceduralSprites(device=args.device)
    print(f"exhaustive search over {len(dataset):,} grid images on {args.device} ...", flush=True)
    t0 = time.perf_counter()
    best, best_idx = best_matches(torch.as_tensor(frames), dataset, args.chunk)
    elapsed = time.perf_counter() - t0
    best_np = best.numpy()
    classes = dataset.indices_to_factors(best_idx.numpy())
    print(f"done in {elapsed:.1f} s\n")

    labels = traversal_labels() if n_frames == 320 else None
    group = labels[:, 0] if labels is not None else classes[:, 0]
    group_source = "traversal order" if labels is not None else "best match"
    print(f"best-match IoU over the whole grid (frames grouped by shape from the {group_source}):")
    for k, name in enumerate(SHAPE_NAMES):
        sel = group == k
        if sel.any():
            print(f"  {name:8s} frames {sel.sum():3d}  mean {best_np[sel].mean():.4f}  min {best_np[sel].min():.4f}")
    print(f"  {'overall':8s} frames {n_frames:3d}  mean {best_np.mean():.4f}  min {best_np.min():.4f}  "
          f"median {np.median(best_np):.4f}")
    print(f"  frames with IoU >= 0.95: {(best_np >= 0.95).mean():.1%}, == 1: {(best_np >= 1 - 1e-12).mean():.1%}\n")

    print("histogram of best-matching classes (class:count):")
    for k, (name, size) in enumerate(zip(FACTOR_NAMES, FACTOR_SIZES)):
        line = histogram_line(classes[:, k], size)
        if k == 0:
            line = " ".join(f"{SHAPE_NAMES[c]}:{n}" for c, n in enumerate(np.bincount(classes[:, 0], minlength=3)))
        print(f"  {name:12s} {line}")

    if labels is not None:
        rendered = render_sprites(torch.as_tensor(labels))[:, 0].bool()
        at_labels = iou_rows(rendered, torch.as_tensor(frames)).numpy()
        print("\nIoU when rendered at the classes read off the traversal order:")
        for k, name in enumerate(SHAPE_NAMES):
            sel = labels[:, 0] == k
            print(f"  {name:8s} mean {at_labels[sel].mean():.4f}  min {at_labels[sel].min():.4f}")
        print(f"  {'overall':8s} mean {at_labels.mean():.4f}  min {at_labels.min():.4f}")
        print("agreement of the best match with those classes (ties broken towards the lowest grid index):")
        for k, name in enumerate(FACTOR_NAMES):
            same = classes[:, k] == labels[:, k]
            if k == 2:  # orientation: 0 and 39 are the same angle
                same |= (classes[:, k] % 39) == (labels[:, k] % 39)
                extra = "  (0 ≡ 39; the ellipse and square are symmetric, so they may match a turned class)"
            else:
                extra = ""
            print(f"  {name:12s} {same.mean():6.1%}{extra}")

    worst = np.argsort(best_np, kind="stable")
    print("\nworst frames: index, best IoU, best-match classes (shape, scale, orientation, x, y)")
    for i in worst[:5]:
        print(f"  {i:3d}  {best_np[i]:.4f}  {tuple(int(c) for c in classes[i])}")

    if args.png is not None:
        matches = dataset.render(best_idx)[:, 0].bool().cpu().numpy()
        order = worst[: args.png_frames]
        save_png(args.png, frames, matches, order)
        print(f"\nsaved {len(order)} frames (worst first) next to their best matches: {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
