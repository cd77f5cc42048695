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
