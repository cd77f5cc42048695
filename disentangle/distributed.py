"""The global batch across processes: data-parallel training with ``torchrun``.

A run launched with ``torchrun --nproc_per_node W -m disentangle.train --config X`` trains the
objective of the single-process run on the same global batch (``train.batch_size`` images or
pairs), up to floating-point reduction order. This module is the only place that knows about
ranks; with one process every function here is the identity (or a no-op) and nothing is
initialised.

How the single-process objective is kept:

* **Every random draw of a step is made for the global batch** from generators that are identical
  on every rank, and each rank keeps its rows: the batch (``objective.sample_batch`` with the
  global size, then :func:`shard_batch`), the reparameterisation noise and the AAE's prior samples
  (:func:`normal` with a per-sample layout), and draws on gathered tensors (FactorVAE's
  permutation, InfoVAE's prior samples; :func:`global_generator`). The per-step generator is the
  trainer's, installed with :func:`random_source` and checkpointed.
* **Every logged term on a rank is either a mean over the rank's rows or a quantity of the whole
  batch.** Terms that depend on the whole batch (β-TCVAE's MSS/MWS estimates, DIP-VAE's
  covariance, InfoVAE's MMD, FactorVAE's permuted codes) are computed on tensors gathered from all
  ranks with :func:`gather`, whose backward sums the gradient that every rank's loss sends to a
  rank's rows. With equal shards, the average over ranks of a rank's loss is then the global-batch
  loss, and so is the average of its gradients.
* **Gradients are averaged over ranks before every optimizer step** (:func:`average_gradients`,
  called by :class:`~disentangle.precision.Precision` for the model's and the objectives' own
  optimizers), which gives each optimizer the gradient of the global-batch loss. This is what
  ``DistributedDataParallel`` does, done explicitly because objectives call ``model.encode`` and
  ``model.decode`` directly and take several backward passes per step (the AAE), which DDP's
  forward hook would not see. Parameters are broadcast from rank 0 at the start.
* Logged values are averaged over ranks (:func:`mean_over_ranks`), the non-finite check is agreed
  (:func:`any_over_ranks`), and rank 0 alone writes files.
"""
from __future__ import annotations

import contextlib
import datetime
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from .registry import ConfigError

#: how long a rank waits at a collective for the others (rank 0 evaluates metrics alone meanwhile)
TIMEOUT = datetime.timedelta(minutes=60)


@dataclass(frozen=True)
class Shard:
    """This process's place in the run: ``rank`` of ``world_size``, and its ``local_rank`` on the node."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0


class _State:
    shard = Shard()
    generator: torch.Generator | None = None
    initialised_here = False


_STATE = _State()


# ---------------------------------------------------------------------------- process group
def launched_world_size() -> int:
    """``WORLD_SIZE`` set by torchrun (1 when not launched by it)."""
    try:
        return int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        return 1


def setup(device: torch.device) -> tuple[Shard, torch.device]:
    """Join the process group torchrun describes (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
    ``MASTER_ADDR``/``MASTER_PORT``) and return this process's shard and device.

    NCCL on CUDA (each rank on ``cuda:LOCAL_RANK``), gloo otherwise. Without torchrun (or with one
    process) nothing is initialised and ``(Shard(), device)`` is returned.
    """
    world = launched_world_size()
    if world <= 1:
        _STATE.shard = Shard()
        return _STATE.shard, device
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
    _STATE.shard = Shard(dist.get_rank(), dist.get_world_size(), local_rank)
    return _STATE.shard, device


def teardown() -> None:
    """Leave the process group if :func:`setup` created it."""
    if _STATE.initialised_here and dist.is_initialized():
        dist.destroy_process_group()
    _STATE.initialised_here = False
    _STATE.shard = Shard()


def shard() -> Shard:
    """This process's :class:`Shard` (``Shard()`` outside a multi-process run)."""
    return _STATE.shard


def is_distributed() -> bool:
    return _STATE.shard.world_size > 1


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
    s = _STATE.shard
    size = global_size // s.world_size
    return slice(s.rank * size, (s.rank + 1) * size)


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
        ctx.rows = local_rows(tensor.shape[0] * _STATE.shard.world_size)
        parts = [torch.empty_like(tensor) for _ in range(_STATE.shard.world_size)]
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
        raise RuntimeError("a random draw outside disentangle.distributed.random_source in a multi-process run")
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
    world = _STATE.shard.world_size
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
    return draws[:, _STATE.shard.rank].reshape(local_shape)


def global_normal(
    shape: tuple[int, ...] | torch.Size, *, dtype: torch.dtype = torch.float32, device: torch.device | str | None = None
) -> torch.Tensor:
    """Standard normal draws for a quantity of the whole batch (e.g. InfoVAE's prior samples set
    against the gathered codes): the same values on every rank, from :func:`global_generator`."""
    return torch.randn(tuple(shape), generator=global_generator(), dtype=dtype, device=device)


# ---------------------------------------------------------------------------- reductions
def average_gradients(parameters: Iterable[torch.nn.Parameter]) -> None:
    """Replace each parameter's gradient by its mean over ranks (one all-reduce per dtype/device).

    Parameters without a gradient on this rank count as zero; a parameter must have a gradient on
    all ranks or none (true for the data-parallel objectives here). A no-op in one process.
    """
    if not is_distributed():
        return
    grads = [p.grad for p in parameters if p.grad is not None]
    buckets: dict[tuple[torch.dtype, torch.device], list[torch.Tensor]] = {}
    for g in grads:
        buckets.setdefault((g.dtype, g.device), []).append(g)
    world = _STATE.shard.world_size
    for bucket in buckets.values():
        flat = torch.cat([g.reshape(-1) for g in bucket])
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        flat /= world
        offset = 0
        for g in bucket:
            g.copy_(flat[offset : offset + g.numel()].view_as(g))
            offset += g.numel()


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
    flat /= _STATE.shard.world_size
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


def broadcast_object(obj: Any) -> Any:
    """Rank 0's ``obj`` on every rank (e.g. the checkpoint rank 0 read). Identity in one process."""
    if not is_distributed():
        return obj
    box = [obj if _STATE.shard.is_main else None]
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
    "Shard",
    "any_over_ranks",
    "average_gradients",
    "barrier",
    "broadcast_module",
    "broadcast_object",
    "check_batch_size",
    "gather",
    "gather_detached",
    "global_generator",
    "global_normal",
    "is_distributed",
    "launched_world_size",
    "local_rows",
    "mean_over_ranks",
    "normal",
    "random_source",
    "setup",
    "shard",
    "shard_batch",
    "sync_optimizer_gradients",
    "teardown",
]
