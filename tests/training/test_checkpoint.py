"""Checkpoints carry a digest of their content (a flipped byte is found, not resumed from), and a
device this machine lacks is reported as such, never as a corrupt checkpoint."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch

import disentangle
from disentangle.config import load_config
from disentangle.errors import CheckpointError, ConfigError
from disentangle.training.checkpoint import (
    CHECKPOINT_NAME,
    DIGEST_KEY,
    PREVIOUS_CHECKPOINT_NAME,
    content_digest,
    load_checkpoint,
    load_latest,
)
from disentangle.training.runtime import Stream, stream_seed
from disentangle.training.trainer import fit

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, tiny_overrides):
    out = tmp_path_factory.mktemp("integrity") / "run"
    fit(load_config(None, tiny_overrides(out, steps=8)))  # checkpoints at 4 and 8: .prev.pt is step 4
    return out


def _flip_a_weight_byte(path) -> None:
    """Flip one byte inside the stored bytes of the decoder's last weight (not in the zip's
    bookkeeping, so ``torch.load`` still reads the file)."""
    weights = torch.load(path, weights_only=True)["model"]
    key = sorted(k for k in weights if k.endswith("weight"))[-1]
    raw = weights[key].contiguous().view(torch.uint8).numpy().tobytes()
    data = bytearray(path.read_bytes())
    at = bytes(data).find(raw[:64])
    assert at > 0 and bytes(data).count(raw[:64]) == 1
    data[at + 33] ^= 0x40
    path.write_bytes(bytes(data))
    assert not torch.equal(torch.load(path, weights_only=True)["model"][key], weights[key])  # it loads, changed


def test_the_digest_covers_every_value():
    state = {"model": {"w": torch.arange(6.0).reshape(2, 3)}, "step": 3, "rng": {"g": [1, 2]}, "name": "a"}
    digest = content_digest(state)
    assert digest == content_digest({**state, DIGEST_KEY: "anything"})  # the digest entry itself is left out
    changed = {**state, "model": {"w": torch.arange(6.0).reshape(2, 3).clone()}}
    changed["model"]["w"][1, 2] = 5.0000005
    assert content_digest(changed) != digest
    assert content_digest({**state, "model": {"w": torch.arange(6.0).reshape(3, 2)}}) != digest  # shape
    assert content_digest({**state, "step": 4}) != digest
    assert content_digest({**state, "rng": {"g": [2, 1]}}) != digest


def test_a_flipped_byte_is_found_and_the_previous_checkpoint_used(run_dir, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    assert DIGEST_KEY not in load_checkpoint(run / CHECKPOINT_NAME)  # checked, then dropped
    _flip_a_weight_byte(run / CHECKPOINT_NAME)
    with pytest.raises(CheckpointError, match="does not match the sha256 digest"):
        load_checkpoint(run / CHECKPOINT_NAME)
    with pytest.warns(UserWarning, match="Falling back to the previous checkpoint"):
        ckpt, path = load_latest(run)
    assert path.name == PREVIOUS_CHECKPOINT_NAME and ckpt["step"] == 4


def test_a_checkpoint_without_a_digest_still_loads(run_dir, tmp_path):
    """Checkpoints written before digests existed."""
    ckpt = torch.load(run_dir / CHECKPOINT_NAME, weights_only=True)
    del ckpt[DIGEST_KEY]
    torch.save(ckpt, tmp_path / "old.pt")
    assert load_checkpoint(tmp_path / "old.pt")["step"] == 8


@pytest.mark.parametrize("device", ["gpu", "cuda", "cuda:0"])
def test_a_device_this_machine_lacks_is_not_a_corrupt_checkpoint(run_dir, device):
    if device.startswith("cuda") and torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    with pytest.raises(ConfigError, match="not a device|CUDA is not available") as info:
        disentangle.load(run_dir, map_location=device)
    assert "corrupt" not in str(info.value) and "new folder" not in str(info.value)
    assert disentangle.load(run_dir, map_location="cpu").trained_steps == 8


def test_evaluate_on_a_missing_device_is_bad_input(run_dir):
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    proc = subprocess.run(
        [sys.executable, "-m", "disentangle.evaluate", str(run_dir), "--device", "cuda", "--metrics", "mig"],
        capture_output=True, text=True,
    )
    assert proc.returncode == 2, proc.stderr
    assert "CUDA is not available" in proc.stderr and "corrupt" not in proc.stderr
    assert "Traceback" not in proc.stderr


def _as_if_saved_on_a_gpu(run, tmp_path, name):
    """A copy of ``run`` whose checkpoint's generator states are CUDA's (16 bytes: Philox seed and
    offset), as a run trained on a GPU leaves them; the digest rewritten to match."""
    import shutil

    copy = tmp_path / name
    shutil.copytree(run, copy)
    (copy / PREVIOUS_CHECKPOINT_NAME).unlink(missing_ok=True)
    state = torch.load(copy / CHECKPOINT_NAME, weights_only=True)
    state.pop(DIGEST_KEY, None)
    state["rng"]["generators"] = {k: torch.arange(16, dtype=torch.uint8) for k in state["rng"]["generators"]}
    torch.save({**state, DIGEST_KEY: content_digest(state)}, copy / CHECKPOINT_NAME)
    return copy


class _StreamsAtStart:
    """A callback that keeps the trainer's generator states as the session starts (after a resume)."""

    def on_fit_start(self, trainer) -> None:
        self.states = {name: g.get_state() for name, g in trainer._generators().items()}


def test_a_run_saved_on_another_kind_of_device_goes_on_here_with_fresh_streams(tmp_path, tiny_overrides, caplog):
    """A GPU's generator states cannot be set on a CPU's generators (it raised a bare RuntimeError): the
    run resumes with its weights and optimizer state, the data and noise streams reseeded from the
    seed and the step (so two such resumes agree), and says so."""
    run = tmp_path / "run"
    fit(load_config(None, tiny_overrides(run, steps=4)))
    saved = torch.load(run / CHECKPOINT_NAME, weights_only=True)
    finals, streams = [], _StreamsAtStart()
    for name in ("a", "b"):
        copy = _as_if_saved_on_a_gpu(run, tmp_path, name)
        with caplog.at_level("WARNING", logger="disentangle.training.trainer"):
            caplog.clear()
            config = load_config(None, tiny_overrides(copy, steps=8))
            fit(config, resume=True, callbacks=[streams])
        # moved on by the step: seeded as seed + stream + 4, not replaying the streams from step 0
        for stream, state in streams.states.items():
            expected = torch.Generator().manual_seed(stream_seed(config.seed, Stream[stream.upper()]) + 4)
            assert torch.equal(state, expected.get_state()), stream
        assert "saved on another kind of device" in caplog.text and "step 4" in caplog.text
        assert "not bit-identical" in caplog.text
        final = torch.load(copy / CHECKPOINT_NAME, weights_only=True)
        assert final["step"] == 8
        finals.append(final["model"])
    assert all(torch.equal(finals[0][k], finals[1][k]) for k in finals[0])  # reseeded the same way each time
    assert any(not torch.equal(finals[0][k], saved["model"][k]) for k in finals[0])  # it trained on
    caplog.clear()
    with caplog.at_level("WARNING", logger="disentangle.training.trainer"):
        fit(load_config(None, tiny_overrides(run, steps=8)), resume=True)  # the CPU's own states: no word
    assert "another kind of device" not in caplog.text


def _rewrite(path, edit) -> None:
    """Apply ``edit`` to the checkpoint at ``path`` and write it back with a matching digest."""
    state = torch.load(path, weights_only=True)
    state.pop(DIGEST_KEY, None)
    edit(state)
    torch.save({**state, DIGEST_KEY: content_digest(state)}, path)


def test_a_resumed_fp16_run_takes_up_its_loss_scale(tmp_path, tiny_overrides):
    """fp16's gradient scaler carries a loss scale that overflows halve and quiet steps grow: a resume
    goes on with the saved one (a fresh scaler would start again at 65,536 and overflow anew)."""
    run = tmp_path / "run"
    fit(load_config(None, tiny_overrides(run, steps=4, **{"train.precision": "fp16"})))
    assert torch.load(run / CHECKPOINT_NAME, weights_only=True)["precision"]["scale"] != 8192.0

    def halved_three_times(state):
        state["precision"]["scale"] = 8192.0
    _rewrite(run / CHECKPOINT_NAME, halved_three_times)
    (run / PREVIOUS_CHECKPOINT_NAME).unlink(missing_ok=True)

    class Scale:
        def on_fit_start(self, trainer) -> None:
            self.value = trainer.precision.scaler.get_scale()
    scale = Scale()
    fit(load_config(None, tiny_overrides(run, steps=8, **{"train.precision": "fp16"})), resume=True, callbacks=[scale])
    assert scale.value == 8192.0


def test_a_callback_drawing_from_the_global_generators_resumes_bit_exact(tmp_path, tiny_overrides):
    """The library draws from its own generators, a user's callback or objective from torch's, NumPy's
    and Python's global ones: a resumed run gives such code the draws of an uninterrupted run."""
    import random

    import numpy as np

    class Draws:
        def __init__(self) -> None:
            self.seen = []

        def on_step_end(self, trainer, step, terms) -> None:
            self.seen.append((step, torch.rand(1).item(), float(np.random.rand()), random.random()))

    straight, split = Draws(), Draws()
    fit(load_config(None, tiny_overrides(tmp_path / "straight", steps=8)), callbacks=[straight])
    fit(load_config(None, tiny_overrides(tmp_path / "split", steps=4)), callbacks=[split])
    # another process's draws in between: the resume must not depend on the global state it finds
    torch.rand(5), np.random.rand(5), random.random()
    fit(load_config(None, tiny_overrides(tmp_path / "split", steps=8)), resume=True, callbacks=[split])
    assert [s for s, *_ in split.seen] == list(range(1, 9))
    assert split.seen == straight.seen


def test_only_a_runs_text_files_are_named_as_text_a_cut_off_rotation_is_a_bad_checkpoint(tmp_path):
    """A checkpoint rotation cut off after its first bytes ("PK\\x03\\x04": ASCII) is a broken
    checkpoint (CheckpointError, which resume skips), not a text file given by mistake."""
    cut = tmp_path / ".checkpoint.pt.123.next"
    cut.write_bytes(b"PK\x03\x04")
    with pytest.raises(CheckpointError):
        load_checkpoint(cut)
    config = tmp_path / "config.yaml"
    config.write_text("seed: 0\n")
    with pytest.raises(disentangle.errors.InputError, match="is a text file, not a checkpoint"):
        load_checkpoint(config)
