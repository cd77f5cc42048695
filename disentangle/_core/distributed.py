"""The global batch across processes: data-parallel training with ``torchrun``.

A run launched with ``torchrun --nproc_per_node W -m disentangle.train --config X`` trains the
objective of the single-process run on the same global batch (``train.batch_size`` images or
pairs), up to floating-point reduction order. This module is the only place that knows about
ranks; with one process every function here is the identity (or a no-op) and nothing is
initialised.

How the single-process objective is kept:

* **Every random draw of a step is made for the global batch** from generators that are identical
  on every rank, and each rank keeps its rows: the batch (``objective.sample_batch`` with the
  global size inside :func:`disentangle.training.trainer.local_sampling`: the indices and every per-sample draw of the
  dataset are made for the whole batch, and a dataset that can, e.g. the sprites and their
  variants, renders only this rank's rows; any other batch is rendered whole and sliced by
  :func:`local_batch`), the reparameterisation noise and the AAE's prior samples (:func:`normal`
  with a per-sample layout), and draws on gathered tensors (FactorVAE's permutation, InfoVAE's
  prior samples; :func:`global_generator`). The per-step generator is the trainer's, installed
  with :func:`random_source` and checkpointed.
* **Every logged term on a rank is either a mean over the rank's rows or a quantity of the whole
  batch.** Terms that depend on the whole batch (β-TCVAE's MSS/MWS estimates, DIP-VAE's
  covariance, InfoVAE's MMD, FactorVAE's permuted codes) are computed on tensors gathered from all
  ranks with :func:`gather`, whose backward sums the gradient that every rank's loss sends to a
  rank's rows. With equal shards, the average over ranks of a rank's loss is then the global-batch
  loss, and so is the average of its gradients.
* **Gradients are averaged over ranks before every optimizer step** (:func:`average_gradients`:
  one all-reduce per device and dtype of a persistent flat buffer per optimizer,
  ``ReduceOp.AVG`` where the backend has it), which gives each optimizer the gradient of the
  global-batch loss. This is what ``DistributedDataParallel`` does, done explicitly because
  objectives call ``model.encode`` and ``model.decode`` directly and take several backward passes
  per step (the AAE), which DDP's forward hook would not see. The trainer hands
  :func:`sync_optimizer_gradients` to :class:`~disentangle.training.precision.Precision`, which calls it
  between the backward pass and the step: before the fp16 GradScaler looks for overflows, so that
  every rank takes the same decision. Parameters are broadcast from rank 0 at the start.
* Logged values are averaged over ranks (:func:`mean_over_ranks`), the non-finite check is agreed
  (:func:`any_over_ranks`), and rank 0 alone writes files and evaluates metrics, through
  :func:`run_on_main`, which raises rank 0's exception on every rank (no rank waits for the
  collective timeout).
"""
from __future__ import annotations

import contextlib
import datetime
import os
import pickle
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from ..errors import ConfigError, DisentangleError, GradientMismatchError

#: how long a rank waits at a collective for the others (rank 0 evaluates metrics alone meanwhile)
TIMEOUT = datetime.timedelta(minutes=60)


@dataclass(frozen=True)
class RankInfo:
    """This process's place in the run: ``rank`` of ``world_size``, and its ``local_rank`` on the node."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0


class _State:
    rank_info = RankInfo()
    generator: torch.Generator | None = None
    initialised_here = False
    #: the reduction that averages (ReduceOp.AVG, or SUM then a division where the backend lacks AVG)
    average_op: Any = None
    #: a gradient averager per list of parameters (see average_gradients)
    averagers: dict[tuple[int, ...], GradientAverager] = {}
    #: names of parameters for error messages, by id (set by the trainer)
    parameter_names: dict[int, str] = {}


_STATE = _State()


# ---------------------------------------------------------------------------- process group
def launched_world_size() -> int:
    """``WORLD_SIZE`` set by torchrun (1 when not launched by it)."""
    try:
        return int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        return 1


def setup(device: torch.device) -> tuple[RankInfo, torch.device]:
    """Join the process group torchrun describes (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
    ``MASTER_ADDR``/``MASTER_PORT``) and return this process's rank information and device.

    NCCL on CUDA (each rank on ``cuda:LOCAL_RANK``), gloo otherwise. Without torchrun (or with one
    process) nothing is initialised and ``(RankInfo(), device)`` is returned.
    """
    world = launched_world_size()
    if world <= 1:
        _STATE.rank_info = RankInfo()
        return _STATE.rank_info, device
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device.type == "cuda":
        if device.index is not None and device.index != local_rank:
            raise ConfigError(
                f"train.device is '{device}' but torchrun places this process (local rank {local_rank}) "
                f"on cuda:{local_rank}. Use train.device=cuda (or auto) with torchrun."
            )
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    elif device.type != "cpu":
        raise ConfigError(
            f"train.device is '{device}'; multi-process training runs on CUDA (NCCL) or the CPU (gloo). "
            f"Use train.device=cuda or cpu with torchrun."
        )
    if not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        kwargs: dict[str, Any] = {"backend": backend, "timeout": TIMEOUT}
        if device.type == "cuda":
            kwargs["device_id"] = device
        dist.init_process_group(**kwargs)
        _STATE.initialised_here = True
    _STATE.rank_info = RankInfo(dist.get_rank(), dist.get_world_size(), local_rank)
    _STATE.averagers, _STATE.parameter_names = {}, {}
    _STATE.average_op = _average_op(device)
    return _STATE.rank_info, device


def _average_op(device: torch.device) -> Any:
    """``ReduceOp.AVG`` if the process group's backend has it (NCCL; gloo in recent torch), else
    ``None`` (sum, then divide). Asked of the backend with one all-reduce of one value, on every
    rank alike: an unsupported op is refused before any communication."""
    if dist.get_backend() == "nccl":
        return dist.ReduceOp.AVG
    probe = torch.ones(1, device=device)
    try:
        dist.all_reduce(probe, op=dist.ReduceOp.AVG)
    except (RuntimeError, ValueError):  # e.g. "Cannot use ReduceOp.AVG with Gloo" (torch < 2.6)
        return None
    return dist.ReduceOp.AVG


def teardown() -> None:
    """Leave the process group if :func:`setup` created it."""
    if _STATE.initialised_here and dist.is_initialized():
        dist.destroy_process_group()
    _STATE.initialised_here = False
    _STATE.rank_info = RankInfo()
    _STATE.averagers, _STATE.parameter_names, _STATE.average_op = {}, {}, None


def rank_info() -> RankInfo:
    """This process's :class:`RankInfo` (``RankInfo()`` outside a multi-process run)."""
    return _STATE.rank_info


#: the names before issue 19 ("shard" also meant a slice of a batch, now only :class:`~disentangle.data.base.BatchShard`)
Shard = RankInfo
shard = rank_info


def is_distributed() -> bool:
    return _STATE.rank_info.world_size > 1


def check_batch_size(batch_size: int, world_size: int) -> None:
    """The global batch must split into equal shards (equal shards make the mean of the ranks'
    means the global mean)."""
    if batch_size % world_size:
        raise ConfigError(
            f"train.batch_size is {batch_size}, the global batch, which must split evenly over the "
            f"{world_size} processes. Use a multiple of {world_size} (e.g. "
            f"{(batch_size // world_size + 1) * world_size}) or another --nproc_per_node."
        )


# ---------------------------------------------------------------------------- batches
def local_rows(global_size: int) -> slice:
    """This rank's rows of a global batch of ``global_size``."""
    s = _STATE.rank_info
    size = global_size // s.world_size
    return slice(s.rank * size, (s.rank + 1) * size)


def _batch_rows(batch: Any) -> int:
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0])
    if isinstance(batch, tuple) and batch:
        return _batch_rows(batch[0])
    raise TypeError(f"cannot split a batch of type {type(batch).__name__} over processes; return tensors or tuples of them.")


def local_batch(batch: Any, global_size: int) -> Any:
    """This rank's rows of a batch drawn for a global batch of ``global_size`` inside
    :func:`disentangle.training.trainer.local_sampling`: the batch itself if the sampler rendered only this rank's rows, else
    (the whole batch) its rows by :func:`shard_batch`."""
    if not is_distributed():
        return batch
    rows, world = _batch_rows(batch), _STATE.rank_info.world_size
    if rows == global_size:
        return shard_batch(batch)
    if rows * world == global_size:
        return batch
    raise ValueError(
        f"the sampler returned {rows} rows for a global batch of {global_size} over {world} processes; "
        f"return the whole batch or, inside local_sampling, this process's {global_size // world} rows."
    )


def shard_batch(batch: Any) -> Any:
    """This rank's rows of a global batch: a tensor, or a (named) tuple of tensors with the batch
    first (e.g. a :class:`~disentangle.data.pairs.PairBatch`)."""
    if not is_distributed():
        return batch
    if isinstance(batch, torch.Tensor):
        return batch[local_rows(batch.shape[0])]
    if isinstance(batch, tuple):
        parts = [shard_batch(part) for part in batch]
        return type(batch)(*parts) if hasattr(batch, "_fields") else tuple(parts)
    raise TypeError(f"cannot split a batch of type {type(batch).__name__} over processes; return tensors or tuples of them.")


class _Gather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor: torch.Tensor) -> torch.Tensor:
        ctx.rows = local_rows(tensor.shape[0] * _STATE.rank_info.world_size)
        parts = [torch.empty_like(tensor) for _ in range(_STATE.rank_info.world_size)]
        dist.all_gather(parts, tensor.contiguous())
        return torch.cat(parts)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        # every rank's loss depends on every rank's rows: the gradient of a rank's rows is the sum
        # over ranks of what each rank's loss sends them
        grad = grad.contiguous()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        return grad[ctx.rows]


def gather(tensor: torch.Tensor) -> torch.Tensor:
    """The global batch of ``tensor`` (every rank's rows, in rank order), differentiable.

    The backward sums over ranks, so a loss computed by every rank on the gathered tensor and then
    averaged over ranks (as gradients are, see :func:`average_gradients`) has the single-process
    gradient. The identity in a single process.
    """
    if not is_distributed():
        return tensor
    return _Gather.apply(tensor)


def gather_detached(tensor: torch.Tensor) -> torch.Tensor:
    """:func:`gather` without a graph (for the discriminators' inputs)."""
    if not is_distributed():
        return tensor.detach()
    with torch.no_grad():
        return _Gather.apply(tensor.detach())


# ---------------------------------------------------------------------------- randomness
@contextlib.contextmanager
def random_source(generator: torch.Generator | None) -> Iterator[None]:
    """Within the block, the draws of :func:`normal` and :func:`global_generator` come from
    ``generator`` (the trainer's per-step generator, identical on every rank)."""
    previous = _STATE.generator
    _STATE.generator = generator
    try:
        yield
    finally:
        _STATE.generator = previous


def global_generator() -> torch.Generator | None:
    """The per-step generator for draws on gathered (global) tensors; ``None`` outside a trainer's
    step, meaning torch's global RNG (then there must be one process)."""
    if _STATE.generator is None and is_distributed():
        raise RuntimeError("a random draw outside disentangle._core.distributed.random_source in a multi-process run")
    return _STATE.generator


def normal(
    local_shape: tuple[int, ...] | torch.Size,
    *,
    groups: int = 1,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Standard normal draws for this rank's rows of a per-sample tensor of the global batch.

    ``local_shape[0]`` rows are this rank's; the rows are ``groups`` blocks of equal size (e.g. the
    first and second elements of pairs, ``groups=2``), each block the rank's shard of a global block.
    The global tensor ``(groups · world_size · rows_per_block, ...)`` is drawn (always the same
    number of values, in the same order, whatever the world size) and this rank's rows are returned,
    so every sample gets the noise it gets in a single process.
    """
    local_shape = tuple(int(s) for s in local_shape)
    world = _STATE.rank_info.world_size
    generator = global_generator()
    if local_shape[0] % groups:
        raise ValueError(f"{local_shape[0]} rows do not split into {groups} groups")
    rows = local_shape[0] // groups
    rest = local_shape[1:]
    if generator is not None and device is not None and torch.device(device).type != generator.device.type:
        raise ValueError(f"the step generator lives on {generator.device}, the draw is for {device}")
    if world == 1:
        return torch.randn(local_shape, generator=generator, dtype=dtype, device=device)
    draws = torch.randn((groups, world, rows, *rest), generator=generator, dtype=dtype, device=device)
    return draws[:, _STATE.rank_info.rank].reshape(local_shape)


def global_normal(
    shape: tuple[int, ...] | torch.Size, *, dtype: torch.dtype = torch.float32, device: torch.device | str | None = None
) -> torch.Tensor:
    """Standard normal draws for a quantity of the whole batch (e.g. InfoVAE's prior samples set
    against the gathered codes): the same values on every rank, from :func:`global_generator`."""
    return torch.randn(tuple(shape), generator=global_generator(), dtype=dtype, device=device)


# ---------------------------------------------------------------------------- reductions
def _foreach_copy(dst: list[torch.Tensor], src: list[torch.Tensor]) -> None:
    if not dst:
        return
    if hasattr(torch, "_foreach_copy_"):
        torch._foreach_copy_(dst, src)
    else:  # pragma: no cover - torch < 2.1
        for d, s in zip(dst, src):
            d.copy_(s)


class GradientAverager:
    """Averages the gradients of a fixed list of parameters over the ranks.

    One persistent flat buffer per (device, dtype) of the parameters holds every gradient, then
    one presence flag per parameter (1 where this rank has a gradient). Each call copies the
    gradients in (zeros where there is none), all-reduces each buffer once (``ReduceOp.AVG``, or
    a sum and a division) and copies the means back into the gradients that exist; nothing is
    allocated after the first call. Every rank reduces the same buffers whatever gradients it has,
    so a gradient missing on some ranks cannot make the collectives disagree (and hang); its
    averaged flag, strictly between 0 and 1, marks it, and :meth:`check` raises
    :class:`GradientMismatchError` naming it (read at the trainer's log and checkpoint steps:
    reading it at every step would make the host wait for the device). A parameter with no
    gradient on any rank keeps none (optimizers skip it).
    """

    def __init__(self, parameters: Iterable[torch.nn.Parameter]) -> None:
        self.params = tuple(parameters)
        groups: dict[tuple[torch.device, torch.dtype], list[int]] = {}
        for i, p in enumerate(self.params):
            groups.setdefault((p.device, p.dtype), []).append(i)
        self._groups = []
        for (device, dtype), members in groups.items():
            sizes = [self.params[i].numel() for i in members]
            total = sum(sizes)
            buffer = torch.zeros(total + len(members), dtype=dtype, device=device)
            views, offset = [], 0
            for i, n in zip(members, sizes):
                views.append(buffer[offset : offset + n].view(self.params[i].shape))
                offset += n
            flags = buffer[total:]
            mismatched = torch.zeros(len(members), dtype=torch.bool, device=device)
            self._groups.append((members, buffer, views, flags, mismatched, {}))

    def average(self) -> None:
        """Every existing gradient replaced by its mean over ranks (the global-batch gradient)."""
        op, world = _STATE.average_op, _STATE.rank_info.world_size
        for members, buffer, views, flags, mismatched, patterns in self._groups:
            grads = [self.params[i].grad for i in members]
            present = tuple(g is not None for g in grads)
            have = [k for k, p in enumerate(present) if p]
            _foreach_copy([views[k] for k in have], [grads[k] for k in have])
            missing = [views[k] for k, p in enumerate(present) if not p]
            if missing:
                torch._foreach_zero_(missing)
            pattern = patterns.get(present)
            if pattern is None:  # once per pattern (one per optimizer in practice): not per step
                pattern = patterns[present] = torch.tensor(present, dtype=buffer.dtype, device=buffer.device)
            flags.copy_(pattern)
            if op is None:
                dist.all_reduce(buffer, op=dist.ReduceOp.SUM)
                buffer.div_(world)
            else:
                dist.all_reduce(buffer, op=op)
            _foreach_copy([grads[k] for k in have], [views[k] for k in have])
            # the fraction of ranks with the gradient: anything but 0 or 1 is a mismatch
            half = 0.5 / world
            mismatched.logical_or_((flags > half) & (flags < 1.0 - half))

    def check(self) -> None:
        """Raise :class:`GradientMismatchError` if, since the last check, a parameter had a
        gradient on some ranks and not on others (the same answer on every rank)."""
        bad = []
        for members, _, _, _, mismatched, _ in self._groups:
            if bool(mismatched.any()):
                bad += [i for i, flag in zip(members, mismatched.tolist()) if flag]
        if bad:
            names = [
                _STATE.parameter_names.get(id(self.params[i]), f"parameter {i} {tuple(self.params[i].shape)}")
                for i in bad
            ]
            raise GradientMismatchError(
                f"{', '.join(names)} had a gradient on some processes and none on others in the same "
                f"step, so the processes no longer train the same model. Every rank must compute the "
                f"same losses of the same parameters (a data-dependent branch that skips a loss on some "
                f"ranks does this); multiply the loss by zero instead of leaving it out."
            )


def average_gradients(parameters: Iterable[torch.nn.Parameter]) -> None:
    """Replace each parameter's gradient by its mean over ranks: the global-batch gradient.

    Through a :class:`GradientAverager` kept per list of parameters (persistent flat buffers, one
    all-reduce per device and dtype). A parameter must have a gradient on every rank or on none:
    one that has it on some ranks only is averaged as if it were zero elsewhere, and
    :func:`check_gradients` raises :class:`GradientMismatchError` at the next check. A no-op in
    one process.
    """
    if not is_distributed():
        return
    params = tuple(parameters)
    key = tuple(id(p) for p in params)
    averager = _STATE.averagers.get(key)
    if averager is None or any(a is not b for a, b in zip(averager.params, params)):
        averager = _STATE.averagers[key] = GradientAverager(params)
    averager.average()


def check_gradients() -> None:
    """Raise :class:`GradientMismatchError` if a parameter had a gradient on some ranks and not on
    others since the last check (every rank raises alike). Reads the device: the trainer calls it
    at log and checkpoint steps only. A no-op in one process."""
    for averager in list(_STATE.averagers.values()):
        averager.check()


def name_parameters(named: Mapping[str, torch.nn.Parameter]) -> None:
    """Names for the parameters in :class:`GradientMismatchError` messages."""
    _STATE.parameter_names = {id(p): name for name, p in named.items()}


def optimizer_parameters(optimizer: torch.optim.Optimizer) -> list[torch.nn.Parameter]:
    return [p for group in optimizer.param_groups for p in group["params"]]


def sync_optimizer_gradients(optimizer: torch.optim.Optimizer) -> None:
    """:func:`average_gradients` of an optimizer's parameters (what Precision calls before a step)."""
    average_gradients(optimizer_parameters(optimizer))


def mean_over_ranks(terms: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Every tensor term averaged over ranks (one all-reduce): the global-batch value of a term that
    is a mean over the rank's rows or a quantity of the whole batch. Identity in one process."""
    terms = dict(terms)
    if not is_distributed() or not terms:
        return terms
    names = list(terms)
    values = [terms[n].detach().float().reshape(-1) for n in names]
    flat = torch.cat(values)
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    flat /= _STATE.rank_info.world_size
    out, offset = {}, 0
    for name, v in zip(names, values):
        out[name] = flat[offset : offset + v.numel()].view_as(terms[name]).to(terms[name].dtype)
        offset += v.numel()
    return out


def any_over_ranks(flag: torch.Tensor) -> bool:
    """Whether ``flag`` (a bool tensor) is true on any rank; every rank gets the same answer."""
    if not is_distributed():
        return bool(flag)
    value = flag.detach().to(torch.int32).reshape(1).clone()
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())


def _portable(error: BaseException | None) -> BaseException | None:
    """``error``, or a :class:`DisentangleError` with its type and message if it does not pickle."""
    if error is None:
        return None
    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:
        return DisentangleError(f"{type(error).__name__}: {error}")


def run_on_main(fn: Callable[[], Any]) -> Any:
    """``fn()`` on rank 0 alone; its result on every rank, or its exception raised on every rank.

    Rank 0's work (reading and writing the run folder, evaluating metrics) is followed by one
    broadcast, so when it fails the other ranks raise the same error at once instead of waiting at
    their next collective for the timeout. ``fn()`` itself in one process.
    """
    if not is_distributed():
        return fn()
    result, error = None, None
    if _STATE.rank_info.is_main:
        try:
            result = fn()
        except Exception as err:  # shared below, so no rank waits
            error = err
        shared = broadcast_object((result, _portable(error)))
        if error is not None:
            raise error
        return shared[0]
    result, error = broadcast_object(None)
    if error is not None:
        error.add_note(f"(raised on rank 0; this is rank {_STATE.rank_info.rank})")
        raise error
    return result


def broadcast_object(obj: Any) -> Any:
    """Rank 0's ``obj`` on every rank (e.g. the checkpoint rank 0 read). Identity in one process."""
    if not is_distributed():
        return obj
    box = [obj if _STATE.rank_info.is_main else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def broadcast_module(module: torch.nn.Module) -> None:
    """Copy rank 0's parameters and buffers into ``module`` on every rank."""
    if not is_distributed():
        return
    with torch.no_grad():
        for tensor in [*module.parameters(), *module.buffers()]:
            dist.broadcast(tensor.data, src=0)


def barrier() -> None:
    if is_distributed():
        dist.barrier()


__all__ = [
    "RankInfo",
    "RankInfo",
    "Shard",
    "GradientAverager",
    "GradientMismatchError",
    "any_over_ranks",
    "average_gradients",
    "barrier",
    "broadcast_module",
    "broadcast_object",
    "check_batch_size",
    "check_gradients",
    "gather",
    "gather_detached",
    "global_generator",
    "global_normal",
    "is_distributed",
    "launched_world_size",
    "local_batch",
    "local_rows",
    "mean_over_ranks",
    "name_parameters",
    "normal",
    "random_source",
    "run_on_main",
    "setup",
    "rank_info",
    "shard",
    "shard_batch",
    "sync_optimizer_gradients",
    "teardown",
]
