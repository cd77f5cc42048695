"""No host round trip in a training step (issue 22), checked on a CPU-only machine.

A GPU step must not wait for the GPU (``.item()``, ``bool()``, ``float()``, ``int()`` of a device
tensor), must not copy tensors built on the host to the device, and should not compute in float64
(1/32 to 1/64 of the float32 rate on most GPUs). None of this shows on a CPU run as an error or as
time, so every registered objective's training step runs here under :class:`StepGuard`, which
records:

* ``sync``: ``aten._local_scalar_dense``, what every ``.item()``/``bool()``/``float()``/``int()``
  of a tensor dispatches to (on any device: on the CPU this is where a GPU run would wait);
* ``float64``: an op with a float64 input or output (model, losses and optimizer updates; the data
  draw is left out, see :func:`run_trainer_step`);
* ``host tensor``: ``torch.tensor``/``torch.as_tensor``/``torch.asarray`` of Python or numpy data
  (a host-to-device copy when ``device=`` is a GPU);
* ``host copy``: a copy of a CPU tensor to another device (``.to(device)`` of a host-built tensor),
  and ``host operand``: a CPU tensor as an operand of an op on another device. A CPU run cannot see
  these (everything is on the CPU), so the objective's step also runs with the model, its
  optimizers and the batch on the ``meta`` device: a tensor made without ``device=`` lands on the
  CPU and shows up as one of these (or as a device-mismatch error).

What the guard cannot see: work inside ``optimizer.step`` (torch's own code; the trainer uses the
fused Adam, whose step counters live on the parameters' device), the fp16 GradScaler's per-step
``found_inf`` read (inherent to ``torch.amp.GradScaler``; fp32 and bf16 are checked), syncs that
CUDA does implicitly inside an op (``nonzero``, boolean-mask indexing, a copy from pageable host
memory: ops here, not flagged), ``torch.from_numpy`` (not a torch function), a tensor the data draw
makes on the host with a factory (``torch.ones(n)``) and moves to the device (the draw runs on the
CPU only: a ``torch.Generator`` cannot live on ``meta``), host work that costs time but creates no
tensor, the multi-process path (gathers and gradient averaging run only under ``torchrun``; this
is one process), the trainer loop around the step (log and checkpoint steps read the device on
purpose), and anything of a real GPU run. A step is checked after one warm-up step, so one-time
set-up (optimizer state, caches) is allowed.
"""
from __future__ import annotations

import traceback
from pathlib import Path

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

import disentangle
from disentangle._core import distributed
from disentangle.config import load_config
from disentangle.objectives import OBJECTIVES
from disentangle.objectives.beta_vae import BetaVAE
from disentangle.training.optim import build_optimizers
from disentangle.training.precision import Precision
from disentangle.training.trainer import Trainer

pytestmark = pytest.mark.usefixtures("one_thread")

aten = torch.ops.aten
PACKAGE = str(Path(disentangle.__file__).parent)
HERE = str(Path(__file__).resolve())
#: torch functions that build a tensor from Python or numpy data
HOST_BUILDERS = {torch.tensor, torch.as_tensor, torch.asarray}


_GUARD_FRAMES = {"_where", "report", "__torch_function__", "__torch_dispatch__"}


def _where() -> str:
    """The innermost frame in the package (or in this file), where a finding comes from."""
    for frame in reversed(traceback.extract_stack()):
        if frame.filename == HERE and frame.name in _GUARD_FRAMES:
            continue
        if frame.filename.startswith(PACKAGE) or frame.filename == HERE:
            return f"{Path(frame.filename).name}:{frame.lineno} ({frame.name}: {frame.line})"
    return "?"


class _HostBuilders(TorchFunctionMode):
    def __init__(self, guard: StepGuard) -> None:
        super().__init__()
        self.guard = guard

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in HOST_BUILDERS and args and not isinstance(args[0], torch.Tensor):
            self.guard.report("host tensor", getattr(func, "__name__", str(func)))
        return func(*args, **kwargs)


class StepGuard(TorchDispatchMode):
    """Records the ops a GPU training step must not do (module docstring); ``findings`` lists them.

    Use as a context manager; :meth:`paused` leaves a block unchecked (the data draw for float64,
    ``optimizer.step``)."""

    def __init__(self) -> None:
        super().__init__()
        self.findings: list[str] = []
        self._paused = 0
        self._float64_paused = 0
        self._functions = _HostBuilders(self)

    def __enter__(self):
        self._functions.__enter__()
        try:
            return super().__enter__()
        except BaseException:
            self._functions.__exit__(None, None, None)
            raise

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            self._functions.__exit__(*exc)

    def report(self, kind: str, what: str) -> None:
        if not self._paused:
            self.findings.append(f"{kind}: {what} at {_where()}")

    def pause(self, *_: object) -> None:
        self._paused += 1

    def resume(self, *_: object) -> None:
        self._paused -= 1

    def pause_float64(self) -> _Float64Pause:
        return _Float64Pause(self)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if self._paused:
            return out
        inputs = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        outputs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
        if func is aten._local_scalar_dense.default:
            self.report("sync", f"{func} (.item()/bool()/float()/int() of a tensor)")
        if not self._float64_paused and any(t.dtype == torch.float64 for t in inputs + outputs):
            self.report("float64", str(func))
        devices = {t.device.type for t in inputs}
        if func in (aten._to_copy.default, aten.copy_.default) and inputs and outputs:
            source = inputs[1] if func is aten.copy_.default else inputs[0]
            if source.device.type == "cpu" and outputs[0].device.type != "cpu":
                self.report("host copy", f"{func} cpu -> {outputs[0].device}")
        elif "cpu" in devices and len(devices) > 1:
            self.report("host operand", f"{func} on {sorted(devices)}")
        return out


class _Float64Pause:
    def __init__(self, guard: StepGuard) -> None:
        self.guard = guard

    def __enter__(self) -> None:
        self.guard._float64_paused += 1

    def __exit__(self, *exc: object) -> None:
        self.guard._float64_paused -= 1


def _unchecked_optimizer_steps(guard: StepGuard, optimizers) -> list:
    handles = []
    for opt in optimizers.values():
        handles.append(opt.register_step_pre_hook(guard.pause))
        handles.append(opt.register_step_post_hook(guard.resume))
    return handles


def library_objectives() -> list[str]:
    """Every objective registered by the package (not those tests register)."""
    return [n for n in OBJECTIVES.names() if OBJECTIVES.get(n).__module__.startswith("disentangle.")]


def _small_params(name: str) -> dict[str, object]:
    """Small discriminators where the objective has them (the check is about ops, not sizes)."""
    params = OBJECTIVES.parameters(name)
    small = {"discriminator_hidden": 16, "discriminator_layers": 2}
    return {k: v for k, v in small.items() if k in params}


def _config(name: str, tmp_path: Path, tiny_overrides, precision: str):
    extra = {"objective.name": name, "train.precision": precision}
    extra.update({f"objective.{k}": v for k, v in _small_params(name).items()})
    return load_config(None, tiny_overrides(tmp_path / "run", steps=4, **extra))


def run_trainer_step(name: str, tmp_path: Path, tiny_overrides, precision: str = "fp32") -> list[str]:
    """One trainer step (draw, forward, backward, every optimizer's step, scheduler) on the CPU,
    after a warm-up step, under the guard; returns its findings.

    The data draw is exempt from the float64 check: the pair objectives draw their factor classes
    from float64 uniforms by design (B×K values; :mod:`disentangle.data.pairs`), which keeps the
    published sampling stream. It is checked for syncs and host tensors like the rest.
    """
    trainer = Trainer(_config(name, tmp_path, tiny_overrides, precision))
    trainer.device = torch.device("cpu")
    trainer._build()
    trainer.train_step()
    trainer.step = 1
    guard = StepGuard()
    handles = _unchecked_optimizer_steps(guard, trainer.optimizers)
    sample = trainer.objective.sample_batch

    def sample_without_float64_check(*args, **kwargs):
        with guard.pause_float64():
            return sample(*args, **kwargs)

    trainer.objective.sample_batch = sample_without_float64_check
    try:
        with guard:
            terms = trainer.train_step()
            ~torch.isfinite(terms["loss"].detach())  # the loop's non-finite flag
    finally:
        for h in handles:
            h.remove()
    return guard.findings


def run_meta_step(name: str, tmp_path: Path, tiny_overrides) -> list[str]:
    """The objective's ``train_step`` with model, objective, optimizers and batch on ``meta``
    (after a warm-up step there), under the guard; returns its findings (a device mismatch or an
    ``.item()`` on a meta tensor, which raise there, are findings too)."""
    cfg = _config(name, tmp_path, tiny_overrides, "fp32")
    trainer = Trainer(cfg)
    trainer.device = torch.device("cpu")
    trainer._build()
    batch = trainer.objective.sample_batch(trainer.dataset, cfg.train.batch_size, trainer.data_generator)
    meta = torch.device("meta")
    if isinstance(batch, tuple):  # e.g. a PairBatch
        batch = type(batch)(*(t.to(meta) for t in batch))
    else:
        batch = batch.to(meta)
    model, objective = trainer.model.to(meta), trainer.objective.to(meta)
    optimizers = build_optimizers(model, objective, cfg.train, meta)
    precision = Precision("fp32", meta)
    guard = StepGuard()
    handles = _unchecked_optimizer_steps(guard, optimizers)
    try:
        with distributed.random_source(None):  # draws from torch's RNG, made on the meta device
            objective.train_step(model, batch, step=0, optimizers=optimizers, precision=precision)
            with guard:
                objective.train_step(model, batch, step=1, optimizers=optimizers, precision=precision)
    except (RuntimeError, NotImplementedError) as err:  # .item() of a meta tensor, a device mismatch
        guard.findings.append(f"error on meta: {type(err).__name__}: {err}")
    finally:
        for h in handles:
            h.remove()
    return guard.findings


# ---------------------------------------------------------------------------- every objective
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("name", library_objectives())
def test_a_training_step_has_no_host_round_trip(name, precision, tmp_path, tiny_overrides):
    findings = run_trainer_step(name, tmp_path, tiny_overrides, precision)
    assert not findings, "\n".join(findings)


@pytest.mark.parametrize("name", library_objectives())
def test_a_step_on_the_meta_device_uses_no_host_tensor(name, tmp_path, tiny_overrides):
    findings = run_meta_step(name, tmp_path, tiny_overrides)
    assert not findings, "\n".join(findings)


def test_every_objective_is_covered():
    assert set(library_objectives()) >= {
        "beta_vae", "annealed_vae", "beta_tcvae", "dip_vae_i", "dip_vae_ii", "info_vae", "factor_vae", "aae",
        "ada_gvae", "ada_ml_vae", "gvae", "ml_vae",
    }


# ---------------------------------------------------------------------------- the guard sees defects
class _ItemInStep(BetaVAE):
    def forward(self, model, x, *, step):
        terms = super().forward(model, x, step=step)
        terms["kl_value"] = terms["kl"].item()  # a host sync
        return terms


class _BoolInStep(BetaVAE):
    def forward(self, model, x, *, step):
        terms = super().forward(model, x, step=step)
        if bool((terms["kl"] < 0).any()):  # a host sync
            raise AssertionError
        return terms


class _HostTensorInStep(BetaVAE):
    def forward(self, model, x, *, step):
        terms = super().forward(model, x, step=step)
        terms["loss"] = terms["loss"] * torch.tensor(1.0, device=x.device)  # built on the host
        return terms


class _CopiedToDeviceInStep(BetaVAE):
    def forward(self, model, x, *, step):
        terms = super().forward(model, x, step=step)
        weight = torch.ones(x.shape[0]).to(x.device)  # built on the host, then copied
        terms["loss"] = terms["loss"] * weight.mean()
        return terms


class _Float64InStep(BetaVAE):
    def forward(self, model, x, *, step):
        terms = super().forward(model, x, step=step)
        terms["loss"] = terms["loss"].double().float()
        return terms


DEFECTS = {
    "_item_in_step": (_ItemInStep, "sync"),
    "_bool_in_step": (_BoolInStep, "sync"),
    "_host_tensor_in_step": (_HostTensorInStep, "host tensor"),
    "_copied_to_device_in_step": (_CopiedToDeviceInStep, "host copy"),
    "_float64_in_step": (_Float64InStep, "float64"),
}


@pytest.mark.parametrize("name", list(DEFECTS))
def test_the_guard_catches_a_defect_put_back_into_a_step(name, tmp_path, tiny_overrides, monkeypatch):
    cls, kind = DEFECTS[name]
    monkeypatch.setitem(OBJECTIVES._entries, name, cls)
    findings = run_trainer_step(name, tmp_path / "cpu", tiny_overrides)
    meta_findings = run_meta_step(name, tmp_path / "meta", tiny_overrides)
    if kind == "host copy":  # invisible on the CPU, where .to(cpu) copies nothing
        assert not findings, findings
        assert any(f.startswith("host copy") and "test_host_sync.py" in f for f in meta_findings), meta_findings
    else:
        assert any(f.startswith(kind) and "test_host_sync.py" in f for f in findings), findings
        assert meta_findings, meta_findings

