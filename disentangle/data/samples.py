"""Images that are not a factor grid: a folder of photographs, CelebA, any ``torch`` dataset, or
arrays whose labels do not cover every combination (or that have no labels at all).

A :class:`SampleDataset` holds its images on one device as a ``uint8`` stack ``(N, C, H, W)``, like
the grids, and draws training batches by index with a ``torch.Generator`` (so a resumed run repeats
its batches bit for bit). It may carry labels, one row of integer classes per image
(``labels (N, K)``), and then metrics that need only (code, label) pairs run on it: they draw their
points uniformly, with replacement, from the ``N`` labelled images instead of from a grid (see
:meth:`SampleDataset.sample_labelled_indices`), as disentanglement_lib's
``compute_unified_score_on_fixed_data`` scores a fixed labelled sample. Metrics that intervene on the
factors (the BetaVAE and FactorVAE scores fix one factor and draw the others) need a grid and refuse
such data (:attr:`SampleDataset.is_grid` is False).

Three ways to make one:

* :func:`disentangle.data.from_arrays` with labels that do not form a complete grid, or none;
* :func:`from_torch` from any ``torch.utils.data.Dataset`` of images or ``(image, labels)`` items;
* the registered ``image_folder`` and ``celeba`` datasets (``data.name`` in a config).
"""
from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from .._core.devices import check_device
from ..errors import NotAGridError
from .base import BatchShard, current_sampling_shard, gather_rows, rendering_shard
from .image_modes import to_l_or_rgb

logger = logging.getLogger(__name__)


class SampleDataset:
    """``N`` stored images, optionally labelled, without a factor grid (module docstring).

    Parameters
    ----------
    images:
        ``uint8`` tensor ``(N, C, H, W)`` (``(N, H, W)`` gets a channel axis). It is kept as given
        (no copy) and moved with :meth:`to`.
    labels:
        Optional integer array ``(N, K)``: the class of each of ``K`` attributes for each image,
        classes ``0 .. size-1``. Duplicated and missing combinations are allowed.
    label_names:
        ``K`` names (default ``label0``, ``label1``, ...). Metrics call them factors.
    label_sizes:
        The number of classes of each attribute; default: the largest class seen plus one.
    scale:
        Multiplier from the stored integers to [0, 1]: ``1/255`` (default) for 8-bit images,
        ``1.0`` for 0/1 masks.
    name:
        What the data is, for messages (``"image folder ~/faces"``).
    stream:
        Keep the images where they are (on the host, typically a memory-mapped file: see
        :func:`choose_placement`) when the dataset is moved to a training device with :meth:`to`:
        batches are then gathered on the host and copied to the device one at a time. The same
        indices are drawn either way, so on a CPU a streamed run repeats an in-memory one bit for bit.
    """

    #: a sample is not a grid: metrics that fix a factor and draw the rest refuse it
    is_grid = False
    #: an observation is the stored image: the same whenever it is drawn
    deterministic_observations = True
    #: a shard of a batch renders its rows alone (multi-process training)
    shard_rendering = True
    factor_values = None

    def __init__(
        self,
        images: torch.Tensor,
        labels: np.ndarray | torch.Tensor | None = None,
        label_names: Sequence[str] | None = None,
        *,
        label_sizes: Sequence[int] | None = None,
        scale: float = 1.0 / 255.0,
        name: str = "a sample of images",
        stream: bool = False,
    ) -> None:
        if not isinstance(images, torch.Tensor) or images.dtype != torch.uint8:
            raise TypeError(
                f"SampleDataset needs a uint8 tensor of images (N, C, H, W), got "
                f"{type(images).__name__}{'' if not isinstance(images, torch.Tensor) else ' of ' + str(images.dtype)}. "
                "disentangle.data.from_arrays converts numpy, float and bool images."
            )
        if images.ndim == 3:
            images = images.unsqueeze(1)
        if images.ndim != 4 or images.shape[0] == 0:
            raise ValueError(f"images must have shape (N, C, H, W) with N >= 1, got {tuple(images.shape)}.")
        self.images = images
        self.scale = float(scale)
        self.name = str(name)
        self.stream = bool(stream)
        self.placement = "stream" if self.stream else "device"
        self.placement_reason = "set"
        self.labels, self.factor_names, self.factor_sizes = _check_labels(
            labels, label_names, label_sizes, len(images)
        )

    # ------------------------------------------------------------------ description
    @property
    def image_shape(self) -> tuple[int, int, int]:
        """``(C, H, W)`` of one image."""
        c, h, w = self.images.shape[1:]
        return int(c), int(h), int(w)

    @property
    def num_channels(self) -> int:
        return self.image_shape[0]

    @property
    def device(self) -> torch.device:
        return self.images.device

    @property
    def labelled(self) -> bool:
        """Whether every image has labels (``K`` >= 1 attributes)."""
        return self.labels is not None

    def __len__(self) -> int:
        """The number of images ``N`` (β-TCVAE's estimators take it as the dataset size)."""
        return int(self.images.shape[0])

    def __repr__(self) -> str:
        labels = f", labels {', '.join(self.factor_names)}" if self.labelled else ", unlabelled"
        return f"SampleDataset({self.name}: {len(self):,} images of {self.image_shape}{labels})"

    def to(self, device: torch.device | str) -> SampleDataset:
        """Move the images to ``device`` in place and return ``self`` (a streamed sample keeps them on
        the host: its batches go to the device one at a time)."""
        if not self.stream:
            self.images = self.images.to(device)
        return self

    # ------------------------------------------------------------------ observations
    def raw(self, indices: torch.Tensor) -> torch.Tensor:
        """The stored ``uint8`` images of ``indices``."""
        return gather_rows(self.images, indices)

    def observe(self, indices: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """Float images in [0, 1], ``(n, C, H, W)``, of ``indices`` (``generator`` is unused: the
        images are stored)."""
        out = self.raw(indices).float()
        return out if self.scale == 1.0 else out.mul_(self.scale)

    def sample_batch(self, batch_size: int, generator: torch.Generator) -> torch.Tensor:
        """A batch of ``batch_size`` images drawn uniformly with replacement, as a grid's
        (:meth:`disentangle.data.GridDataset.sample_batch`, multi-process shards included)."""
        idx = torch.randint(len(self), (batch_size,), generator=generator, device=self.device)
        shard: BatchShard | None = current_sampling_shard()
        if shard is None:
            return self.observe(idx)
        with rendering_shard(shard):
            return self.observe(shard.rows(idx))

    def as_torch_dataset(self, seed: int = 0):
        """This dataset as a ``torch.utils.data.Dataset`` of ``(image, labels)`` items
        (:class:`disentangle.data.TorchDataset`; an unlabelled sample gives empty label tensors)."""
        from .torch_view import TorchDataset

        return TorchDataset(self, seed=seed)

    # ------------------------------------------------------------------ labels, for metrics
    def indices_to_factors(self, indices: np.ndarray | torch.Tensor) -> np.ndarray:
        """The labels ``(n, K)`` of the images at ``indices`` (``(n, 0)`` when unlabelled)."""
        idx = np.asarray(indices.cpu() if isinstance(indices, torch.Tensor) else indices, dtype=np.int64)
        if self.labels is None:
            return np.zeros((len(idx), 0), dtype=np.int64)
        return self.labels[idx]

    def sample_labelled_indices(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` image indices drawn uniformly with replacement from ``rng``: the points a metric of
        (code, label) pairs scores. Two draws (a metric's train and test sets) may share images,
        as two draws from a grid may; with ``n`` close to ``N`` many will."""
        self.require_labels("a metric that compares codes with labels")
        return rng.integers(len(self), size=int(n), dtype=np.int64)

    def require_labels(self, what: str) -> None:
        """Raise :class:`NotAGridError` (one paragraph) when the sample has no labels."""
        if self.labels is None:
            raise NotAGridError(
                f"{what} needs labelled images, and {self.name} has none. Give labels (from_arrays(images, "
                "labels), a torch dataset of (image, labels) items, celeba's attributes), or use what needs "
                "none: the unsupervised scores, the ELBO of the model, UDR across runs."
            )

    def sample_factors(self, n: int, rng: np.random.Generator) -> np.ndarray:
        raise self._intervention_error("drawing factor values independently (sample_factors)")

    def sample_observations_from_factors(self, factors: np.ndarray, rng: np.random.Generator) -> torch.Tensor:
        raise self._intervention_error("observing chosen factor values (sample_observations_from_factors)")

    def _intervention_error(self, what: str) -> NotAGridError:
        return NotAGridError(
            f"{what} needs a complete factor grid, and {self.name} is a sample of {len(self):,} images "
            "without one: there may be no image for a combination of factors. The metrics that fix a factor "
            "and draw the others (beta_vae_score, factor_vae_score) and those that encode the whole grid "
            "(mig with estimator=chen, elbo_decomposition) need a grid; the metrics of (code, label) pairs "
            "(mig, dci, sap_score, modularity_explicitness, downstream_task, ...) run on a labelled sample."
        )


def _check_labels(
    labels: Any, names: Sequence[str] | None, sizes: Sequence[int] | None, n: int
) -> tuple[np.ndarray | None, tuple[str, ...], tuple[int, ...]]:
    """Validated ``(labels (n, K) int64 or None, names, sizes)``; a bad input raises one paragraph."""
    if labels is None:
        if names:
            raise ValueError(f"label_names {list(names)} were given without labels.")
        return None, (), ()
    if isinstance(labels, torch.Tensor):
        labels = labels.detach().cpu().numpy()
    labels = np.asarray(labels)
    if labels.ndim == 1:
        labels = labels[:, None]
    if labels.ndim != 2 or labels.shape[0] != n:
        raise ValueError(
            f"labels must be an integer array (N, K) with one row per image: {n:,} images but labels of "
            f"shape {labels.shape}."
        )
    if labels.shape[1] == 0:
        return None, (), ()
    if labels.dtype == np.bool_:
        labels = labels.astype(np.int64)
    if not np.issubdtype(labels.dtype, np.integer):
        missing = ""
        if np.issubdtype(labels.dtype, np.floating) and np.isnan(labels).any():
            row = int(np.argwhere(np.isnan(labels))[0][0])
            missing = (f" They hold {int(np.isnan(labels).sum()):,} NaN (missing) values, the first in row {row}: "
                       "drop those images or give the missing labels a class of their own.")
        raise ValueError(
            f"labels must hold integer classes (0, 1, ...), got {labels.dtype}.{missing} Map each attribute's "
            "values to classes first (e.g. np.unique(values, return_inverse=True)[1])."
        )
    labels = labels.astype(np.int64, copy=False)
    if (labels < 0).any():
        row, col = np.argwhere(labels < 0)[0]
        raise ValueError(f"labels must be classes >= 0; row {row} has {labels[row, col]} for attribute {col}.")
    k = labels.shape[1]
    seen = tuple(int(s) for s in labels.max(axis=0) + 1)
    if sizes is None:
        sizes = seen
    else:
        sizes = tuple(int(s) for s in sizes)
        if len(sizes) != k or any(s < m for s, m in zip(sizes, seen)):
            raise ValueError(f"label_sizes {sizes} do not fit labels whose classes go up to {tuple(s - 1 for s in seen)}.")
    if names is None:
        names = tuple(f"label{i}" for i in range(k))
    names = tuple(str(s) for s in names)
    if len(names) != k:
        raise ValueError(f"{len(names)} label_names for {k} label columns.")
    return labels, names, sizes


# ---------------------------------------------------------------------------- from a torch dataset
def from_torch(
    dataset: Any,
    *,
    label_names: Sequence[str] | None = None,
    label_sizes: Sequence[int] | None = None,
    batch_size: int = 256,
    num_workers: int = 0,
    device: str | torch.device = "cpu",
    name: str | None = None,
    alpha: str = "keep",
) -> SampleDataset:
    """A :class:`SampleDataset` from any map-style ``torch.utils.data.Dataset``.

    Each item is an image or an ``(image, labels)`` pair (further elements are ignored). An image is
    a tensor or array ``(C, H, W)``, ``(H, W, C)`` (when its last axis has 1, 3 or 4 entries and its
    first has not) or ``(H, W)``: ``uint8``, ``bool``, or float in [0, 1] (as
    torchvision's ``ToTensor`` gives; rounded to ``uint8``), or a ``PIL.Image`` (converted to
    ``(C, H, W)`` ``uint8``). Every image must have the same shape: resize them in the dataset's own
    transform. Labels are an integer (one attribute) or a sequence/tensor of ``K`` integers. Items are
    read once, ``batch_size`` at a time through a ``DataLoader`` with ``num_workers`` workers, and
    stored as ``uint8`` on ``device``; the trainer then samples them by index. A ``device`` that is
    not a device of this machine (``"cuda"`` without CUDA, ``"gpu"``) is a
    :class:`~disentangle.ConfigError` naming the devices there are, before any item is read
    (:func:`disentangle._core.devices.check_device`). ``alpha``: ``"keep"`` (default) stores an
    array or tensor of four channels as it is (RGB-D, four bands: a fourth channel is not always an
    alpha); ``"composite"`` takes it as RGBA and composites it on black, as a PIL image's alpha and
    an image folder's are (three channels stored). A PIL image's mode says what it is: RGBA is
    always composited.
    """
    from torch.utils.data import DataLoader

    from .._core import checks

    device = check_device(device, "device")
    composite = checks.choice("alpha", alpha, ("keep", "composite")) == "composite"

    what = name or f"the torch dataset {type(dataset).__name__}"
    try:
        n = len(dataset)
    except TypeError:
        raise TypeError(
            f"from_torch needs a map-style dataset with a length (len(dataset)); {what} has none. "
            "Wrap an iterable dataset's items in a list, or stack them and call disentangle.data.from_arrays."
        ) from None
    if n == 0:
        raise ValueError(f"{what} is empty: from_torch needs at least one item.")
    images: torch.Tensor | None = None
    labels: np.ndarray | None = None
    has_labels: bool | None = None
    loader = DataLoader(dataset, batch_size=batch_size, num_workers=num_workers, shuffle=False,
                        collate_fn=_as_they_are)
    start = 0
    for items in loader:
        for offset, item in enumerate(items):
            index = start + offset
            image, label = _split_item(item, index, what)
            if has_labels is None:
                has_labels = label is not None
            elif has_labels != (label is not None):
                raise TypeError(f"{what}: item {index} {'has no' if has_labels else 'has'} labels, unlike item 0; "
                                "every item must be an image, or every item an (image, labels) pair.")
            image = _image_to_uint8(image, index, what, composite)
            if images is None:
                images = torch.empty((n, *image.shape), dtype=torch.uint8)
                if image.shape[0] == 4:
                    logger.info("%s: images of four channels, stored as they are; for RGBA images, "
                                "from_torch(..., alpha='composite') composites them on black as an image folder does.",
                                what)
                if has_labels:
                    labels = np.empty((n, len(label)), dtype=np.int64)
            elif image.shape[0] != images.shape[1]:
                raise ValueError(
                    f"{what}: item {index} has {image.shape[0]} channel(s), item 0 {images.shape[1]}; every image "
                    "must have the same channels. Convert them in the dataset's transform (PIL's "
                    "image.convert('RGB') for colour, or 'L' for grey)."
                )
            elif image.shape != images.shape[1:]:
                raise ValueError(
                    f"{what}: item {index} is an image of shape {tuple(image.shape)}, item 0 one of "
                    f"{tuple(images.shape[1:])}; every image must have the same shape. Resize in the dataset's "
                    "transform (e.g. torchvision's Resize(64) and CenterCrop(64))."
                )
            images[index] = image
            if has_labels:
                if len(label) != labels.shape[1]:
                    raise ValueError(f"{what}: item {index} has {len(label)} labels, item 0 has {labels.shape[1]}.")
                labels[index] = label
        start += len(items)
    assert images is not None
    return SampleDataset(images.to(device), labels, label_names, label_sizes=label_sizes, name=what)


def _split_item(item: Any, index: int, what: str) -> tuple[Any, np.ndarray | None]:
    if isinstance(item, (tuple, list)) and not _is_image(item):
        if not item:
            raise TypeError(f"{what}: item {index} is an empty {type(item).__name__}; expected an image or (image, labels).")
        image = item[0]
        if len(item) == 1:
            return image, None
        label = item[1]
        if isinstance(label, torch.Tensor):
            label = label.detach().cpu().numpy()
        label = np.atleast_1d(np.asarray(label))
        if label.ndim != 1 or not (np.issubdtype(label.dtype, np.integer) or label.dtype == np.bool_):
            raise TypeError(
                f"{what}: item {index}'s labels are {label.dtype} of shape {label.shape}; expected an integer or "
                "a sequence of integer classes (one per attribute)."
            )
        return image, label.astype(np.int64)
    return item, None


def _as_they_are(items: list[Any]) -> list[Any]:
    """The data loader's batch: the items unchanged (a module function: workers that are spawned,
    not forked, as on macOS and Windows, must pickle it)."""
    return items


def _is_image(value: Any) -> bool:
    return isinstance(value, (torch.Tensor, np.ndarray)) or type(value).__module__.startswith("PIL")


#: the channel counts that tell an image's channel axis: gray, RGB, RGBA
CHANNELS = (1, 3, 4)


def _image_to_uint8(image: Any, index: int, what: str, composite: bool = False) -> torch.Tensor:
    """An item's image as a ``(C, H, W)`` uint8 tensor: ``(H, W, C)`` (numpy's and PIL's layout) when
    its last axis has 1, 3 or 4 entries and its first has not, else ``(C, H, W)``. With ``composite``,
    four channels are RGBA, composited on black as a PIL image or an image folder's file is (RGB out)."""
    out = _image_to_uint8_channels(image, index, what)
    if out.shape[0] != 4 or not composite:
        return out
    from PIL import Image

    rgba = Image.fromarray(out.permute(1, 2, 0).contiguous().numpy(), mode="RGBA")
    array = np.asarray(to_l_or_rgb(rgba))
    array = array[None] if array.ndim == 2 else array.transpose(2, 0, 1)
    return torch.from_numpy(np.array(array, order="C"))


def _image_to_uint8_channels(image: Any, index: int, what: str) -> torch.Tensor:
    """:func:`_image_to_uint8` before RGBA is composited."""
    if type(image).__module__.startswith("PIL"):
        array = np.asarray(to_l_or_rgb(image))  # as an image folder reads it: 16-bit scaled, alpha on black
        array = array[None] if array.ndim == 2 else array.transpose(2, 0, 1)
        return torch.from_numpy(np.array(array, order="C"))  # a copy: PIL's buffer is read-only
    if isinstance(image, np.ndarray):
        image = torch.from_numpy(np.array(image, order="C"))
    if not isinstance(image, torch.Tensor):
        raise TypeError(
            f"{what}: item {index} is a {type(image).__name__}; expected an image (a tensor or array (C, H, W), "
            "or a PIL image) or a pair (image, labels)."
        )
    if image.ndim == 2:
        image = image[None]
    if image.ndim != 3:
        raise ValueError(f"{what}: item {index} is an image of shape {tuple(image.shape)}; expected (C, H, W).")
    if image.shape[0] not in CHANNELS and image.shape[-1] in CHANNELS:
        image = image.permute(2, 0, 1)  # (H, W, C), as numpy and PIL lay images out
    if image.dtype == torch.bool:
        return image.to(torch.uint8) * 255
    if image.dtype == torch.uint8:
        return image
    if image.is_floating_point():
        if not bool(torch.isfinite(image).all()):
            raise ValueError(
                f"{what}: item {index} is a float image with NaN or infinite values; expected values in [0, 1]. "
                "Find where they come from (a division by zero in a transform, a broken file) and fix or drop them."
            )
        lo, hi = float(image.min()), float(image.max())
        if lo < 0 or hi > 1:
            raise ValueError(
                f"{what}: item {index} is a float image with values in [{lo:.3g}, {hi:.3g}]; expected [0, 1]. "
                "Leave out a Normalize transform: the models expect [0, 1]."
            )
        return (image * 255).round_().to(torch.uint8)
    raise TypeError(f"{what}: item {index} is an image of dtype {image.dtype}; expected uint8, bool or float in [0, 1].")


# ---------------------------------------------------------------------------- placement
#: ``auto`` keeps the images on the training device when they take at most this share of its free memory
DEVICE_SHARE = 0.25


def choose_placement(setting: str, nbytes: int, device: torch.device | str) -> tuple[str, str]:
    """``data.placement`` resolved: ``("device" | "stream", reason)``.

    ``device`` holds every image on the training device (GPU memory, or RAM for a CPU run);
    ``stream`` leaves them in a memory-mapped file on the host and copies each batch to the device.
    ``auto`` streams when the images (``nbytes``) take more than :data:`DEVICE_SHARE` of the free
    memory of ``device`` (:func:`disentangle._core.hardware.available_memory_bytes`)."""
    from .._core.hardware import available_memory_bytes

    if setting not in ("auto", "device", "stream"):
        from ..errors import ConfigError

        raise ConfigError(f"data.placement is {setting!r}; choose auto, device or stream.")
    if setting != "auto":
        return setting, "set"
    free = available_memory_bytes(torch.device(device))
    gib = nbytes / 2**30
    if free is None:
        return "device", f"auto: free memory of {device} unknown"
    if nbytes > DEVICE_SHARE * free:
        return "stream", f"auto: {gib:.2f} GiB of images > {DEVICE_SHARE:.0%} of {free / 2**30:.1f} GiB free on {device}"
    return "device", f"auto: {gib:.2f} GiB of images <= {DEVICE_SHARE:.0%} of {free / 2**30:.1f} GiB free on {device}"


def content_identity(dataset: Any) -> dict[str, Any] | None:
    """What tells the images of a dataset read from files (an image folder, CelebA) from other images:
    ``{"images": N, "files_sha256": ...}``, the count of its images and a sha256 of their relative
    names and byte sizes, in order (not their times: a folder copied to another machine keeps it).
    None for a dataset without ``files`` and ``file_sizes`` (a grid is what its config section
    builds). A checkpoint records it, so a resume on other images, or scores of other images, are
    told apart from the run's own."""
    import hashlib
    import json

    files, sizes = getattr(dataset, "files", None), getattr(dataset, "file_sizes", None)
    if files is None or sizes is None or len(files) != len(sizes):
        return None
    listing = json.dumps([[str(name), int(size)] for name, size in zip(files, sizes)], separators=(",", ":"))
    return {"images": len(files), "files_sha256": hashlib.sha256(listing.encode()).hexdigest()}
