"""Your own ground-truth dataset: arrays of images plus their factor classes.

Two ways in:

* In Python, :func:`from_arrays` turns ``images`` and ``factor_classes`` (one row of class
  indices per image, any order) into an :class:`~disentangle.data.IndexedImageDataset` that
  metrics and the trainer accept::

      from disentangle.data.custom import from_arrays
      ds = from_arrays(images, classes, factor_names=("size", "x", "y"))

* From a YAML config, ``data.name: npz`` with ``data.path`` pointing to an ``.npz`` file holding
  ``images`` (uint8) and ``factor_classes`` (integers), optionally ``factor_names`` (strings)::

      np.savez("mine.npz", images=images, factor_classes=classes,
               factor_names=np.array(["size", "x", "y"]))
      python -m disentangle.train --config cfg.yaml data.name=npz data.path=mine.npz

Classes that cover the full factor grid (every combination exactly once, as in all the benchmark
datasets) give a grid, on which every metric is defined (``sample_observations_from_factors``
observes any combination). Any other labels (duplicated or missing combinations), or none, give a
:class:`~disentangle.data.SampleDataset`: it trains the same way, and the metrics of (code, label)
pairs run on it (:mod:`disentangle.data.samples`).
See ``examples/custom_dataset.py`` for a complete, runnable example.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
import torch

from .._core.devices import check_device
from ..errors import CorruptDataFileError
from . import DATASETS
from .base import IndexedImageDataset, factor_strides, to_nchw_uint8
from .download import load_npz_array, npz_keys, require_path
from .samples import SampleDataset

Layout = Literal["auto", "NHW", "NHWC", "NCHW"]
#: what ``data.path`` of the ``npz`` dataset names
_EXPECTED = (
    "data.name: npz reads your own .npz file, holding 'images' (uint8) and 'factor_classes' (integers), "
    "optionally 'factor_names'; write it with np.savez (see disentangle.data.custom and "
    "examples/custom_dataset.py) and point data.path to it."
)


def infer_layout(shape: Sequence[int]) -> str:
    """``"NHW"``, ``"NHWC"`` or ``"NCHW"`` for an image-stack shape; raises if ambiguous."""
    if len(shape) == 3:
        return "NHW"
    if len(shape) != 4:
        raise ValueError(f"images must have 3 or 4 axes (N,H,W / N,H,W,C / N,C,H,W), got shape {tuple(shape)}.")
    last_is_c, second_is_c = shape[3] in (1, 3), shape[1] in (1, 3)
    if last_is_c and not second_is_c:
        return "NHWC"
    if second_is_c and not last_is_c:
        return "NCHW"
    hint = ""
    if 4 in (shape[1], shape[3]) and not (last_is_c or second_is_c):
        hint = (" A channel axis of 4 is often RGBA: composite the alpha first (rgb * alpha on black, as an image "
                "folder does), or give the layout to train on the 4 channels as they are.")
    raise ValueError(f"cannot tell whether images of shape {tuple(shape)} are NHWC or NCHW (a channel axis has 1 or "
                     f"3 entries); pass layout='NHWC' or 'NCHW' (data.layout in an npz config).{hint}")


def is_complete_grid(factor_classes) -> bool:
    """Whether the rows of ``factor_classes`` cover their factor grid exactly once (:func:`grid_order`)."""
    try:
        grid_order(np.asarray(factor_classes))
    except ValueError:
        return False
    return True


def grid_order(factor_classes: np.ndarray) -> tuple[tuple[int, ...], np.ndarray]:
    """Factor sizes of a complete grid and the permutation putting rows in row-major order.

    Raises ``ValueError`` unless every combination of classes occurs exactly once.
    """
    classes = np.asarray(factor_classes)
    if classes.ndim != 2 or not np.issubdtype(classes.dtype, np.integer):
        raise ValueError(f"factor_classes must be an integer array (N, K), got {classes.dtype} {classes.shape}.")
    if classes.size == 0 or (classes < 0).any():
        raise ValueError("factor_classes must be non-empty with classes >= 0.")
    classes = classes.astype(np.int64, copy=False)
    sizes = tuple(int(s) for s in classes.max(axis=0) + 1)
    n = int(np.prod(sizes))
    index = classes @ factor_strides(sizes)
    if classes.shape[0] != n or np.bincount(index, minlength=n).max() != 1:
        missing = n - np.unique(index).size
        raise ValueError(
            f"factor_classes must cover the full grid of sizes {sizes} ({n} combinations) exactly "
            f"once; got {classes.shape[0]} rows with {missing} combinations missing."
        )
    return sizes, np.argsort(index, kind="stable")


def from_arrays(
    images,
    factor_classes=None,
    factor_names: Sequence[str] | None = None,
    *,
    layout: Layout = "auto",
    scale: float | None = None,
    factor_values: Sequence[np.ndarray] | None = None,
    device: str | torch.device = "cpu",
    grid: bool | Literal["auto"] = "auto",
    name: str | None = None,
    placement: Literal["auto", "device", "stream"] = "device",
) -> IndexedImageDataset | SampleDataset:
    """A dataset from in-memory arrays: a factor grid when the classes form one, else a sample.

    Parameters
    ----------
    images:
        uint8 (or bool) images, numpy or torch, ``(N, H, W)``, ``(N, H, W, C)`` or
        ``(N, C, H, W)`` (``layout="auto"`` tells them apart by a channel axis of size 1 or 3).
        Float images in [0, 1] are quantised to uint8.
    factor_classes:
        Integer array ``(N, K)``: the class of each factor for each image, in any row order; or
        None for unlabelled images.
    factor_names:
        ``K`` names (default ``factor0``, ``factor1``, ...).
    layout:
        The axis order of ``images``: ``"NHW"``, ``"NHWC"`` or ``"NCHW"``; ``"auto"`` (default)
        infers it and asks for it when a 4-axis shape is ambiguous.
    scale:
        Multiplier from the stored integers to [0, 1]; default 1.0 for 0/1 images, else 1/255.
    factor_values:
        Optional physical value of each class, one array per factor.
    device:
        Where the images are stored and batches drawn; one that is not a device of this machine
        (``"cuda"`` without CUDA, ``"gpu"``) is a :class:`~disentangle.ConfigError` naming the devices
        there are, before the images are read (:func:`disentangle._core.devices.check_device`).
    grid:
        ``"auto"`` (default): an :class:`~disentangle.data.IndexedImageDataset` when the classes
        cover the full factor grid exactly once (every metric applies), else a
        :class:`~disentangle.data.SampleDataset` (duplicated or missing combinations, or no
        labels: the metrics of (code, label) pairs apply, those that intervene on factors refuse).
        ``True`` requires a grid (an error says what is missing); ``False`` always gives a sample.
    name:
        What the data is, for a sample's messages (default: ``N images from arrays``).
    placement:
        ``"device"`` (default): the images are stored on ``device``; ``"stream"``: they stay on the
        host as given and each batch is copied to ``device`` (``data.placement: stream``);
        ``"auto"``: stream when they take more than a quarter of ``device``'s free memory
        (:func:`~disentangle.data.samples.choose_placement`; give the placement explicitly for a run
        to be resumed on a GPU, where the two draw their batches from different generators). The
        same batches either way on a CPU.

    Notes
    -----
    The stored images share memory with ``images`` when these are already a contiguous uint8
    array in grid order (no copy), or, streamed, in any order (a grid point then reads its image
    through :attr:`~disentangle.data.IndexedImageDataset.rows`); otherwise they are a copy. So a
    memory-mapped ``(N, C, H, W)`` uint8 array (``np.load(path, mmap_mode="r")``) larger than
    memory, streamed, stays in its file: the operating system pages in the images each batch draws
    (give ``scale``, e.g. ``1 / 255``, or the images are read once to find their largest value).
    """
    device = check_device(device, "device")
    from .._core import checks
    from .samples import choose_placement

    placement = checks.choice("placement", placement, ("auto", "device", "stream"))
    if isinstance(images, torch.Tensor):
        images = images.detach().cpu().numpy()
    images = np.asarray(images)
    if images.dtype == np.bool_:
        images = images.astype(np.uint8)
    elif np.issubdtype(images.dtype, np.floating):
        finite = np.isfinite(images)
        if not finite.all():
            first = int(np.argwhere(~finite)[0][0])
            raise ValueError(
                f"float images hold NaN or infinite values ({int((~finite).sum()):,} of them; the first in image "
                f"{first}); expected values in [0, 1]. Find where they come from and fix or drop those images."
            )
        if images.size and (images.min() < 0 or images.max() > 1):
            raise ValueError("float images must lie in [0, 1]; pass uint8 images otherwise.")
        images = np.round(images * 255).astype(np.uint8)
    elif images.dtype != np.uint8:
        raise TypeError(f"images must be uint8, bool or float in [0, 1], got {images.dtype}.")
    if grid not in (True, False, "auto"):
        raise ValueError(f"grid must be 'auto', True or False, got {grid!r}.")
    if factor_classes is None and (factor_names is not None or factor_values is not None):
        given = "factor_names" if factor_names is not None else "factor_values"
        raise ValueError(f"{given} were given without factor_classes: they name or value the classes of labelled "
                         "images. Pass factor_classes (an (N, K) integer array) too, or leave them out.")
    if factor_classes is not None and len(factor_classes) != images.shape[0]:
        raise ValueError(f"{images.shape[0]} images but {len(factor_classes)} rows of factor_classes.")
    if factor_classes is None or grid is False or (grid == "auto" and not is_complete_grid(factor_classes)):
        if grid is True:
            raise ValueError("grid=True needs factor_classes; pass grid='auto' or False for unlabelled images.")
        fmt = infer_layout(images.shape) if layout == "auto" else layout
        if scale is None:
            scale = 1.0 if int(images.max(initial=0)) <= 1 else 1.0 / 255.0
        labels = None if factor_classes is None else np.asarray(factor_classes)
        if labels is not None and factor_names is None and labels.ndim in (1, 2):
            factor_names = [f"factor{k}" for k in range(1 if labels.ndim == 1 else labels.shape[1])]  # as a grid's
        placed, reason = choose_placement(placement, images.nbytes, device)
        stored = _host_images(images, fmt, placed == "stream")
        sample = SampleDataset(stored if placed == "stream" else stored.to(device), labels, factor_names, scale=scale,
                               name=name or f"{images.shape[0]:,} images from arrays", stream=placed == "stream")
        sample.placement_reason = reason
        if factor_values is not None:
            sample.factor_values = [np.asarray(v) for v in factor_values]
        return sample
    sizes, order = grid_order(np.asarray(factor_classes))
    if factor_names is None:
        factor_names = tuple(f"factor{k}" for k in range(len(sizes)))
    if len(factor_names) != len(sizes):
        raise ValueError(f"{len(factor_names)} factor_names for {len(sizes)} factors.")
    fmt = infer_layout(images.shape) if layout == "auto" else layout
    if scale is None:
        scale = 1.0 if int(images.max(initial=0)) <= 1 else 1.0 / 255.0
    placed, reason = choose_placement(placement, images.nbytes, device)
    rows = None
    if not np.array_equal(order, np.arange(order.size)):
        if placed == "stream":  # as they lie (a memory map larger than memory is not copied): read through rows
            rows = torch.from_numpy(np.ascontiguousarray(order, dtype=np.int64))
        else:
            images = images[order]
    tensor = _host_images(images, fmt, placed == "stream")
    dataset = IndexedImageDataset(tensor if placed == "stream" else tensor.to(device), factor_names, sizes,
                                  scale=scale, factor_values=factor_values, stream=placed == "stream", rows=rows)
    dataset.placement, dataset.placement_reason = placed, reason
    return dataset


def _host_images(images: np.ndarray, layout: str, stream: bool) -> torch.Tensor:
    """``images`` as a uint8 ``(N, C, H, W)`` tensor: wrapped without a copy when they already are
    (a streamed read-only memory map too: a dataset never writes to its images), else a copy
    (:func:`~disentangle.data.base.to_nchw_uint8`)."""
    if stream and layout != "NHWC" and images.dtype == np.uint8 and images.flags.c_contiguous \
            and not images.flags.writeable:
        import warnings

        n = images.shape[0]
        with warnings.catch_warnings():  # torch warns that a read-only array could be written through it
            warnings.simplefilter("ignore", UserWarning)
            wrapped = torch.from_numpy(images)
        return wrapped.view(n, 1, *images.shape[1:]) if layout == "NHW" else wrapped
    return to_nchw_uint8(images, layout)


@DATASETS.register("npz")
def npz_dataset(
    path: str,
    *,
    images_key: str = "images",
    classes_key: str = "factor_classes",
    factor_names: list[str] | None = None,
    layout: Layout = "auto",
    grid: bool | Literal["auto"] = "auto",
    device: str = "cpu",
    placement: Literal["auto", "device", "stream"] = "auto",
) -> IndexedImageDataset | SampleDataset:
    """Your own dataset from an ``.npz`` file (read without pickle); see the module docstring.

    ``factor_names`` defaults to the file's ``factor_names`` array if it has one. A file without a
    ``classes_key`` array holds unlabelled images; ``grid`` and ``placement`` (``data.placement``:
    ``auto``, the default as for the other datasets read from files, ``device`` or ``stream``) are
    :func:`from_arrays`'s.
    """
    path = require_path(path, what="npz dataset file", option="data.path", expected=_EXPECTED)
    keys = npz_keys(path)
    if images_key not in keys:
        raise CorruptDataFileError(
            f"{path} has no array '{images_key}' (it has {', '.join(keys) or 'none'}); set "
            "data.images_key (and data.classes_key) to the names your file uses."
        )
    images = load_npz_array(path, images_key)
    classes = load_npz_array(path, classes_key) if classes_key in keys else None
    if factor_names is None and "factor_names" in keys and classes is not None:
        factor_names = [str(s) for s in load_npz_array(path, "factor_names")]
    try:
        return from_arrays(images, classes, factor_names, layout=layout, device=device, grid=grid,
                           name=f"the images of {path}", placement=placement)
    except (ValueError, TypeError) as err:
        raise CorruptDataFileError(f"{path}: {err}") from err


def resize_images(images: np.ndarray, size: int = 64) -> np.ndarray:
    """Resize a uint8 stack ``(N, H, W)`` or ``(N, H, W, C)`` to ``size``×``size`` (Lanczos).

    Used once at load time by the loaders whose originals are larger than 64×64 (SmallNORB 96,
    Cars3D 128), with the same filter family as disentanglement_lib's PIL ``ANTIALIAS``. It loops
    over images with PIL (about 20 µs each): loading only, never sampling.
    """
    from PIL import Image

    if images.shape[1:3] == (size, size):
        return images
    lanczos = getattr(Image, "Resampling", Image).LANCZOS  # Pillow < 9.1 has no Resampling
    out = np.empty((images.shape[0], size, size, *images.shape[3:]), dtype=np.uint8)
    for i in range(images.shape[0]):
        img = Image.fromarray(images[i].squeeze(-1) if images.ndim == 4 and images.shape[3] == 1 else images[i])
        out[i] = np.asarray(img.resize((size, size), lanczos)).reshape(out.shape[1:])
    return out
