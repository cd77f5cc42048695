"""The ground-truth dataset interface and the on-device, index-sampled image dataset base class.

Two layers:

* :class:`GroundTruthDataset` is the *protocol* that metrics depend on (the exact names are a
  public contract): ``factor_names``, ``factor_sizes``, ``sample_factors(n, rng)`` and
  ``sample_observations_from_factors(factors, rng)``. Any object with these members works wherever
  a dataset is expected; it need not inherit from anything here.
* :class:`GridDataset` (and its stored-image form :class:`IndexedImageDataset`) is what our
  datasets build on for training: all images live on one
  device as a ``uint8`` tensor, batches are drawn by index with a ``torch.Generator`` and cast to
  float per batch. There is no per-item ``DataLoader`` anywhere.
"""
from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import torch


@runtime_checkable
class GroundTruthDataset(Protocol):
    """What a metric needs from a dataset with known generative factors."""

    factor_names: tuple[str, ...]
    factor_sizes: tuple[int, ...]

    def sample_factors(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` factor-class vectors, int64 of shape ``(n, K)``, uniformly over the grid."""
        ...

    def sample_observations_from_factors(
        self, factors: np.ndarray, rng: np.random.Generator
    ) -> torch.Tensor:
        """Observations for the given factor classes: float in [0, 1], shape ``(n, C, H, W)``."""
        ...


def factor_strides(factor_sizes: Sequence[int]) -> np.ndarray:
    """Row-major strides of the factor grid (the last factor varies fastest), as int64."""
    sizes = np.asarray(factor_sizes, dtype=np.int64)
    strides = np.ones_like(sizes)
    if len(sizes) > 1:
        strides[:-1] = np.cumprod(sizes[::-1])[::-1][1:]
    return strides


def check_factors(factors: np.ndarray, factor_sizes: Sequence[int]) -> np.ndarray:
    """Validate an ``(n, K)`` array of factor classes and return it as int64."""
    factors = np.asarray(factors)
    sizes = np.asarray(factor_sizes, dtype=np.int64)
    if factors.ndim != 2 or factors.shape[1] != len(sizes):
        raise ValueError(
            f"factors must have shape (n, {len(sizes)}) (one class index per factor), "
            f"got shape {tuple(factors.shape)}."
        )
    if not np.issubdtype(factors.dtype, np.integer):
        raise ValueError(f"factors must hold integer class indices, got dtype {factors.dtype}.")
    factors = factors.astype(np.int64, copy=False)
    if factors.size and ((factors < 0).any() or (factors >= sizes).any()):
        bad = np.argwhere((factors < 0) | (factors >= sizes))[0]
        raise ValueError(
            f"factor {bad[1]} has class {factors[bad[0], bad[1]]} at row {bad[0]}, "
            f"outside [0, {sizes[bad[1]] - 1}] (factor sizes {tuple(sizes.tolist())})."
        )
    return factors


def sample_uniform_factors(
    factor_sizes: Sequence[int], n: int, rng: np.random.Generator
) -> np.ndarray:
    """``n`` factor-class vectors drawn independently and uniformly per factor (int64)."""
    sizes = np.asarray(factor_sizes, dtype=np.int64)
    return (rng.random((n, len(sizes))) * sizes).astype(np.int64)


def sample_with_fixed_factor(
    dataset: GroundTruthDataset, n: int, factor_index: int, rng: np.random.Generator
) -> np.ndarray:
    """``n`` factor vectors sharing one random value of factor ``factor_index``, others uniform.

    This is the sampling step of the BetaVAE and FactorVAE scores.
    """
    factors = np.asarray(dataset.sample_factors(n, rng), dtype=np.int64)
    factors[:, factor_index] = factors[0, factor_index]
    return factors


# ---------------------------------------------------------------------------- a shard of a batch
@dataclass(frozen=True)
class BatchShard:
    """Shard ``index`` of ``count`` equal shards of a batch: the rows one process of a
    multi-process run trains on (``index`` its rank, ``count`` the number of processes)."""

    index: int = 0
    count: int = 1

    def rows(self, tensor: torch.Tensor, groups: int = 1) -> torch.Tensor:
        """This shard's rows of ``tensor`` (the batch on the first axis).

        With ``groups`` > 1 the batch is that many equal blocks (the first and the second elements
        of pairs) and the shard's rows of every block are kept, block after block: the layout of
        :func:`disentangle._core.distributed.normal`.
        """
        n = tensor.shape[0]
        if n % (groups * self.count):
            raise ValueError(f"a batch of {n} rows does not split into {groups} blocks of {self.count} shards")
        if self.count == 1:
            return tensor
        blocks = tensor.unflatten(0, (groups, self.count, n // (groups * self.count)))
        return blocks[:, self.index].flatten(0, 1)


#: the shard the current sampler renders (set by :func:`sampling_shard`)
_SAMPLING_SHARD: contextvars.ContextVar[BatchShard | None] = contextvars.ContextVar("sampling_shard", default=None)
#: while a shard is rendered: the shard and the number of blocks of the batch
_RENDERING: contextvars.ContextVar[tuple[BatchShard, int] | None] = contextvars.ContextVar("rendering", default=None)


@contextlib.contextmanager
def sampling_shard(shard: BatchShard | None) -> Iterator[None]:
    """Within the block, :meth:`GridDataset.sample_batch` and
    :func:`~disentangle.data.pairs.sample_pairs` draw the indices and the per-sample randomness
    of the whole batch, as without it, but render and return only ``shard``'s rows (for datasets
    whose :attr:`~GridDataset.shard_rendering` is true; others return the whole batch). ``None``:
    the whole batch. The trainer enters it through :func:`disentangle._core.distributed.local_sampling`.
    """
    token = _SAMPLING_SHARD.set(shard if shard is not None and shard.count > 1 else None)
    try:
        yield
    finally:
        _SAMPLING_SHARD.reset(token)


def current_sampling_shard() -> BatchShard | None:
    """The shard set by :func:`sampling_shard` (``None``: the whole batch)."""
    return _SAMPLING_SHARD.get()


@contextlib.contextmanager
def rendering_shard(shard: BatchShard, groups: int = 1) -> Iterator[None]:
    """Within the block, the observations rendered are ``shard``'s rows of a batch of ``groups``
    blocks: :func:`per_sample` draws for the whole batch and keeps these rows. Samplers enter it
    around ``observe``; a nested sampler inside draws its own batch whole."""
    sampling, rendering = _SAMPLING_SHARD.set(None), _RENDERING.set((shard, int(groups)))
    try:
        yield
    finally:
        _RENDERING.reset(rendering)
        _SAMPLING_SHARD.reset(sampling)


def per_sample(draw: Callable[[int], torch.Tensor], n: int) -> torch.Tensor:
    """``draw(n)``: a transform's random draw for ``n`` observations, one row per observation.

    While only a shard of a batch is rendered (:func:`rendering_shard`), ``draw`` is called for
    the whole batch and the shard's rows are returned, so every observation gets the nuisance it
    gets when the whole batch is rendered, and the generator moves on exactly as it does then.
    Every per-sample draw of a dataset whose :attr:`~GridDataset.shard_rendering` is true goes
    through here.
    """
    state = _RENDERING.get()
    if state is None:
        return draw(n)
    shard, groups = state
    return shard.rows(draw(n * shard.count), groups)


class GridDataset:
    """Base class of our datasets: a full factor grid, sampled by index on one device.

    Grid point ``i`` has factor classes ``(i // strides) % factor_sizes`` (row-major, the last
    factor fastest, as in the dSprites file). Subclasses provide :meth:`raw` (the stored integer
    images of grid indices, usually uint8) and may override :meth:`transform` to add per-sample
    nuisance such as colour or background noise.

    Capabilities are declared, not inferred: :attr:`deterministic_observations` says whether an
    observation is a function of its factors alone. A subclass that overrides :meth:`transform` or
    :meth:`sample_observations_from_factors` (where per-draw nuisance or hidden factors enter)
    must declare it in its own class body; forgetting is a ``TypeError`` when the class is created. :meth:`observe` turns indices into float images
    in [0, 1]; :meth:`sample_batch` draws a uniform training batch with a ``torch.Generator`` that
    lives on :attr:`device`, so a checkpointed generator state replays the same batches.
    """

    factor_names: tuple[str, ...]
    factor_sizes: tuple[int, ...]
    #: multiplier from the stored integers to [0, 1] (1.0 for 0/1 masks, 1/255 for 8-bit)
    scale: float = 1.0 / 255.0
    #: optional per-factor arrays of the physical value of each class
    factor_values: list[np.ndarray] | None = None
    #: whether the observation of a factor vector is a function of the factors alone (no per-draw
    #: nuisance, no hidden factor): the metrics then encode each grid point once
    #: (:class:`disentangle.metrics.CodeTable`). False unless a dataset class declares it.
    deterministic_observations: bool = False
    #: whether the rows of a shard of a batch can be rendered alone (:func:`sampling_shard`): every
    #: per-sample random draw of :meth:`transform` goes through :func:`per_sample` and :meth:`raw`
    #: renders each index on its own. A class that overrides ``transform`` (or a variant's
    #: ``apply``) without declaring it gets False: its batches are rendered whole and then sliced.
    shard_rendering: bool = True

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        overrides = [m for m in ("transform", "sample_observations_from_factors") if m in cls.__dict__]
        if overrides and "deterministic_observations" not in cls.__dict__:
            raise TypeError(
                f"{cls.__qualname__} overrides {' and '.join(overrides)}, so it must declare whether its "
                "observations are a function of the factors alone: set the class attribute "
                "deterministic_observations = True or False."
            )
        # a transform that draws without per_sample would give every process the same draws
        if any(m in cls.__dict__ for m in ("transform", "apply")) and "shard_rendering" not in cls.__dict__:
            cls.shard_rendering = False

    def _init_grid(
        self, factor_names: Sequence[str], factor_sizes: Sequence[int], device: torch.device | str
    ) -> None:
        self.factor_names = tuple(factor_names)
        self.factor_sizes = tuple(int(s) for s in factor_sizes)
        if len(self.factor_names) != len(self.factor_sizes):
            raise ValueError("factor_names and factor_sizes must have the same length.")
        self._strides_np = factor_strides(self.factor_sizes)
        self._device = torch.device(device)
        self._strides = torch.as_tensor(self._strides_np, device=self._device)
        self._sizes = torch.as_tensor(self.factor_sizes, dtype=torch.int64, device=self._device)

    # ------------------------------------------------------------------ description
    @property
    def image_shape(self) -> tuple[int, int, int]:
        """``(C, H, W)`` of one observation."""
        raise NotImplementedError

    @property
    def num_channels(self) -> int:
        return self.image_shape[0]

    @property
    def device(self) -> torch.device:
        return self._device

    def __len__(self) -> int:
        """The dataset size N (737,280 for dSprites); β-TCVAE's estimators need it."""
        return int(np.prod(self.factor_sizes))

    def to(self, device: torch.device | str) -> GridDataset:
        """Move all storage to ``device`` in place and return ``self``."""
        self._device = torch.device(device)
        self._strides = self._strides.to(self._device)
        self._sizes = self._sizes.to(self._device)
        return self

    # ------------------------------------------------------------------ ground-truth interface
    def sample_factors(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return sample_uniform_factors(self.factor_sizes, n, rng)

    def factors_to_indices(self, factors: np.ndarray) -> np.ndarray:
        return check_factors(factors, self.factor_sizes) @ self._strides_np

    def indices_to_factors(self, indices: np.ndarray | torch.Tensor) -> np.ndarray:
        idx = np.asarray(indices.cpu() if isinstance(indices, torch.Tensor) else indices, np.int64)
        return (idx[:, None] // self._strides_np) % np.asarray(self.factor_sizes, dtype=np.int64)

    def index_tensor_to_factors(self, indices: torch.Tensor) -> torch.Tensor:
        """Like :meth:`indices_to_factors` but on the tensor's device, without a host copy."""
        return torch.div(indices[:, None], self._strides, rounding_mode="floor") % self._sizes

    def sample_observations_from_factors(
        self, factors: np.ndarray, rng: np.random.Generator
    ) -> torch.Tensor:
        idx = torch.as_tensor(self.factors_to_indices(factors), device=self.device)
        generator = torch_generator_from_numpy(rng, self.device)
        return self.observe(idx, generator)

    def sample_indices_from_factors(self, factors: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """The grid indices :meth:`sample_observations_from_factors` would observe for ``factors``,
        drawing from ``rng`` exactly what it draws (so later draws are the same either way)."""
        torch_generator_from_numpy(rng, self.device)
        return self.factors_to_indices(factors)

    # ------------------------------------------------------------------ observations
    def raw(self, indices: torch.Tensor) -> torch.Tensor:
        """Stored integer images ``(n, C, H, W)`` for grid indices (on :attr:`device`)."""
        raise NotImplementedError

    def transform(self, batch: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        """Per-sample nuisance applied to the raw batch; identity here."""
        return batch

    def observe(self, indices: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        """Float images in [0, 1], shape ``(n, C, H, W)``, for grid indices."""
        out = self.transform(self.raw(indices), generator)
        if out.dtype == torch.uint8:
            # binary images (dSprites) have scale 1: skip a second pass over the float batch
            return out.float() if self.scale == 1.0 else out.float().mul_(self.scale)
        return out

    def as_torch_dataset(self, seed: int = 0):
        """This dataset as a ``torch.utils.data.Dataset`` of ``(image, factor classes)`` items, for a
        ``DataLoader`` of one's own (:class:`disentangle.data.TorchDataset`)."""
        from .torch_view import TorchDataset

        return TorchDataset(self, seed=seed)

    def sample_batch(self, batch_size: int, generator: torch.Generator) -> torch.Tensor:
        """A uniformly drawn batch ``(B, C, H, W)`` of float images in [0, 1] on :attr:`device`.

        Within :func:`sampling_shard` (and with :attr:`shard_rendering`) only the shard's rows are
        rendered and returned, from the indices and randomness drawn for the whole batch.
        """
        idx = torch.randint(len(self), (batch_size,), generator=generator, device=self.device)
        shard = current_sampling_shard()
        if shard is None or not self.shard_rendering:
            return self.observe(idx, generator)
        with rendering_shard(shard):
            return self.observe(shard.rows(idx), generator)


class IndexedImageDataset(GridDataset):
    """A grid dataset whose images are all stored on the device as one uint8 tensor.

    Parameters
    ----------
    images:
        ``uint8`` tensor ``(N, C, H, W)`` (or ``(N, H, W)``, which gets a channel axis), stored in
        row-major order of the factor classes so that ``index = factors @ strides``.
    factor_names, factor_sizes:
        The ground-truth factors.
    scale:
        Multiplier taking the stored integers to [0, 1]: ``1.0`` for binary 0/1 images (dSprites),
        ``1/255`` for 8-bit images.
    factor_values:
        Optional per-factor arrays of the physical values of each class.

    stream:
        Keep the images where they are (on the host) when the dataset is moved to a training device
        with :meth:`to`: batches are gathered on the host and copied to the device one at a time
        (``data.placement: stream``, :func:`~disentangle.data.samples.choose_placement`). The same
        indices are drawn either way, so on a CPU a streamed run repeats an in-memory one bit for bit.
    rows:
        Optional int64 permutation ``(N,)``: grid point ``i`` is the image ``images[rows[i]]``, for
        images stored in another order than the grid's (a memory-mapped file streamed as it lies,
        :func:`~disentangle.data.from_arrays`, rather than copied into grid order). None (default):
        the images are in grid order.

    The images are stored and :meth:`transform` is the identity, so observations are
    deterministic.
    """

    deterministic_observations = True
    #: ``data.placement`` as resolved, and why (written to the run's ``execution.jsonl``)
    placement = "device"
    placement_reason = "the dataset lives on the training device"

    def __init__(
        self,
        images: torch.Tensor,
        factor_names: Sequence[str],
        factor_sizes: Sequence[int],
        *,
        scale: float = 1.0 / 255.0,
        factor_values: Sequence[np.ndarray] | None = None,
        stream: bool = False,
        rows: torch.Tensor | None = None,
    ) -> None:
        if images.dtype != torch.uint8:
            raise TypeError(f"images must be a uint8 tensor, got {images.dtype}.")
        if images.ndim == 3:
            images = images.unsqueeze(1)
        if images.ndim != 4:
            raise ValueError(f"images must have shape (N, C, H, W), got {tuple(images.shape)}.")
        self._init_grid(factor_names, factor_sizes, images.device)
        expected = int(np.prod(self.factor_sizes))
        if images.shape[0] != expected:
            raise ValueError(
                f"{images.shape[0]} images given but the factor grid {self.factor_sizes} "
                f"has {expected} points; the images must cover the grid in row-major order."
            )
        self.images = images
        if rows is not None:
            rows = torch.as_tensor(rows, dtype=torch.int64)
            if rows.shape != (expected,) or not torch.equal(torch.sort(rows).values, torch.arange(expected)):
                raise ValueError(f"rows must be a permutation of the {expected} image rows, one per grid point.")
            rows = rows.to(images.device)
        self.rows = rows
        self.scale = float(scale)
        self.factor_values = None if factor_values is None else [np.asarray(v) for v in factor_values]
        self.stream = bool(stream)
        if self.stream:
            self.placement, self.placement_reason = "stream", "set"

    @property
    def image_shape(self) -> tuple[int, int, int]:
        c, h, w = self.images.shape[1:]
        return int(c), int(h), int(w)

    def to(self, device: torch.device | str) -> IndexedImageDataset:
        """Move the images (and the grid's index tensors) to ``device`` in place and return ``self``;
        a streamed dataset keeps everything on the host (its batches go to the device one at a time)."""
        if getattr(self, "stream", False):
            return self
        super().to(device)
        self.images = self.images.to(self.device)
        if getattr(self, "rows", None) is not None:
            self.rows = self.rows.to(self.device)
        return self

    def raw(self, indices: torch.Tensor) -> torch.Tensor:
        rows = getattr(self, "rows", None)  # a dataset pickled before rows existed has none
        return gather_rows(self.images, indices if rows is None else rows[indices.to(rows.device)])


def gather_rows(images: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """``images[indices]`` along the first axis, as a contiguous tensor.

    On the CPU this goes through ``numpy.take``, several times faster than torch's advanced
    indexing for uint8 image stacks; elsewhere it is ``index_select``.
    """
    if images.device.type == "cpu" and indices.device.type == "cpu":
        out = np.take(images.numpy(), indices.numpy(), axis=0)
        return torch.from_numpy(np.ascontiguousarray(out))
    return images.index_select(0, indices.to(images.device)).contiguous()


def to_nchw_uint8(array, layout: str, *, chunk: int = 8192) -> torch.Tensor:
    """Copy an image stack into a contiguous uint8 ``(N, C, H, W)`` tensor in memory.

    ``array`` is anything sliceable along its first axis into numpy arrays (an ndarray, a
    ``np.memmap``, an ``h5py.Dataset``); ``layout`` is ``"NHW"``, ``"NHWC"`` or ``"NCHW"``. The copy
    is made ``chunk`` images at a time, so the peak memory is the result plus one chunk even when
    the source is a memory map or an HDF5 file. A C-contiguous, writable in-memory uint8 ndarray
    already in ``NHW``/``NCHW`` layout is wrapped without a copy (it shares the memory).
    """
    if layout not in ("NHW", "NHWC", "NCHW"):
        raise ValueError(f"layout must be 'NHW', 'NHWC' or 'NCHW', got {layout!r}.")
    shape = tuple(int(s) for s in array.shape)
    if len(shape) != len(layout):
        raise ValueError(f"an image stack of layout {layout} needs {len(layout)} axes, got shape {shape}.")
    if layout == "NHW":
        n, h, w = shape
        c = 1
    elif layout == "NHWC":
        n, h, w, c = shape
    else:
        n, c, h, w = shape
    if type(array) is np.ndarray and array.dtype == np.uint8 and layout != "NHWC" \
            and array.flags.c_contiguous and array.flags.writeable:
        return torch.from_numpy(array).view(n, c, h, w)  # already in place: no copy
    out = torch.empty((n, c, h, w), dtype=torch.uint8)
    dst = out.numpy()
    for start in range(0, n, chunk):
        block = np.asarray(array[start:start + chunk])
        if block.dtype != np.uint8:
            raise TypeError(f"images must be uint8, got {block.dtype}.")
        if layout == "NHW":
            dst[start:start + len(block), 0] = block
        elif layout == "NHWC":
            dst[start:start + len(block)] = block.transpose(0, 3, 1, 2)
        else:
            dst[start:start + len(block)] = block
    return out


def torch_generator_from_numpy(rng: np.random.Generator, device: torch.device) -> torch.Generator:
    """A torch generator on ``device`` seeded from ``rng`` (keeps metric sampling reproducible)."""
    g = torch.Generator(device=device)
    g.manual_seed(int(rng.integers(0, 2**63 - 1)))
    return g
