"""Precision warns when bf16 is asked for on a CPU that emulates it (several times slower than fp32)."""
import logging

import pytest
import torch

from disentangle._core.hardware import CPU_BF16_ENV
from disentangle.training.precision import Precision, emulated_bf16_warning

CPU = torch.device("cpu")


def test_bf16_on_a_cpu_without_native_bf16_is_warned_with_the_fix(monkeypatch, caplog):
    monkeypatch.setenv(CPU_BF16_ENV, "0")
    with caplog.at_level(logging.WARNING, logger="disentangle.training.precision"):
        precision = Precision("bf16", CPU)
    assert precision.precision == "bf16"  # warned, not changed: the user asked for it
    (record,) = [r for r in caplog.records if r.name == "disentangle.training.precision"]
    assert record.levelno == logging.WARNING
    assert "without native bf16" in record.message and "train.precision: auto" in record.message


@pytest.mark.parametrize(("native", "precision", "device"), [
    ("1", "bf16", "cpu"),   # native bf16: the fast path, nothing to say
    ("0", "fp32", "cpu"),   # fp32: nothing emulated
    ("0", "fp16", "cpu"),   # fp16 is another matter (its scaler), not this warning
    ("0", "bf16", "meta"),  # another device: the CPU's flags say nothing of it
])
def test_no_warning_where_bf16_is_native_or_not_asked_for(monkeypatch, native, precision, device):
    monkeypatch.setenv(CPU_BF16_ENV, native)
    assert emulated_bf16_warning(precision, torch.device(device)) is None


def test_auto_never_warns_it_picks_fp32_where_bf16_is_emulated(monkeypatch, caplog):
    monkeypatch.setenv(CPU_BF16_ENV, "0")
    with caplog.at_level(logging.WARNING, logger="disentangle.training.precision"):
        assert Precision("auto", CPU).precision == "fp32"
    assert not [r for r in caplog.records if r.name == "disentangle.training.precision"]


def test_bf16_where_it_is_native_but_slower_than_fp32_gets_a_note(monkeypatch, caplog):
    """An Intel CPU with AVX512-BF16 and no AMX: bf16 is native but trains slower than fp32 there."""
    from disentangle.training import precision as module

    monkeypatch.setattr(module, "native_cpu_bf16", lambda: True)
    monkeypatch.setattr(module, "fast_cpu_bf16", lambda: False)
    with caplog.at_level(logging.INFO, logger="disentangle.training.precision"):
        assert Precision("bf16", CPU).precision == "bf16"  # noted, not changed
    (record,) = [r for r in caplog.records if r.name == "disentangle.training.precision"]
    assert record.levelno == logging.INFO
    assert "slower than fp32" in record.message and "auto picks fp32" in record.message
    assert module.slow_bf16_note("fp32", CPU) is None
    assert module.slow_bf16_note("bf16", torch.device("meta")) is None
    monkeypatch.setattr(module, "fast_cpu_bf16", lambda: True)  # AMX, or an AMD CPU: nothing to say
    assert module.slow_bf16_note("bf16", CPU) is None
    monkeypatch.setattr(module, "native_cpu_bf16", lambda: False)  # emulated: the warning says it
    assert module.slow_bf16_note("bf16", CPU) is None
