"""Mutation-audit value tests of publishing's checks, without training: other weights under a name
are refused (by hash and by content), URLs, and the wall time read back from a log."""
from __future__ import annotations

import json

import pytest
import torch

from disentangle.errors import ConfigError
from disentangle.zoo.publish import _check_not_other_weights, _same_content, check_urls, wall_time_from_log
from disentangle.zoo.weights import encode_weights, sha256_bytes

META = {"name": "m", "config": {"model": {"backbone": "mlp", "latent_dim": 4}}, "image_shape": [1, 8, 8]}


def _file(value: float, **meta) -> bytes:
    return encode_weights({"encoder.w": torch.full((3,), value)}, {**META, **meta})


def test_same_content_compares_tensors_and_metadata_and_may_leave_out_provenance():
    a = _file(1.0, machine={"cpu": "A"}, library_version="0.1")
    assert _same_content(a, a)
    assert not _same_content(a, _file(1.5, machine={"cpu": "A"}, library_version="0.1"))  # other weights
    elsewhere = _file(1.0, machine={"cpu": "B"}, library_version="0.2")
    assert not _same_content(a, elsewhere) and _same_content(a, elsewhere, provenance=False)
    assert not _same_content(a, _file(1.0, machine={"cpu": "A"}, library_version="0.1", name="other"), provenance=False)
    assert not _same_content(a, b"not a weight file at all")


def test_other_weights_under_a_name_are_refused_unless_forced(tmp_path):
    ours, theirs = _file(1.0), _file(2.0)
    manifest = tmp_path / "manifest.json"
    weights = tmp_path / "weights" / "m.safetensors"
    manifest.write_text(json.dumps({"format": 1, "models": {"m": {"sha256": sha256_bytes(theirs)}}}))
    with pytest.raises(ConfigError, match="already has a model 'm' with other weights"):
        _check_not_other_weights(manifest, weights, "m", sha256_bytes(ours), False, ours)
    _check_not_other_weights(manifest, weights, "m", sha256_bytes(ours), True, ours)  # --force
    _check_not_other_weights(manifest, weights, "m", sha256_bytes(theirs), False, theirs)  # the same model again
    manifest.write_text(json.dumps({"format": 1, "models": {}}))
    weights.parent.mkdir()
    weights.write_bytes(theirs)
    with pytest.raises(ConfigError, match="exists and holds other weights"):
        _check_not_other_weights(manifest, weights, "m", sha256_bytes(ours), False, ours)
    # the same tensors and config published from another machine are not other weights
    weights.write_bytes(_file(1.0, machine={"cpu": "B"}))
    _check_not_other_weights(manifest, weights, "m", sha256_bytes(_file(1.0, machine={"cpu": "A"})), False,
                             _file(1.0, machine={"cpu": "A"}))


@pytest.mark.parametrize("url", ["https://", "https:///", "http://", "file://", "ftp://example.org/m.safetensors",
                                 "example.org/m.safetensors", "HTTPS://example.org/m"])
def test_a_url_the_zoo_cannot_fetch_is_refused(url):
    with pytest.raises(ConfigError, match="is not a download URL"):
        check_urls([url])


def test_fetchable_urls_pass():
    check_urls(["https://example.org/zoo/m.safetensors", "http://127.0.0.1:8000/m", "file:///tmp/m.safetensors"])


def _log(tmp_path, records):
    (tmp_path / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return tmp_path


def test_wall_time_is_the_sum_of_the_logged_intervals_over_their_rates(tmp_path):
    run = _log(tmp_path, [{"step": 10, "steps_per_s": 5.0}, {"step": 30, "steps_per_s": 10.0},
                          {"step": 30, "metrics": {}}, {"step": 40, "steps_per_s": 2.0}])
    assert wall_time_from_log(run) == (9.0, "estimated from log.jsonl steps_per_s (training loop only)")  # 2 + 2 + 5


def test_a_recorded_wall_time_of_the_last_record_wins(tmp_path):
    run = _log(tmp_path, [{"step": 10, "steps_per_s": 5.0, "wall_time_s": 3.0},
                          {"step": 20, "steps_per_s": 5.0, "wall_time_s": 7.5, "paused_s": 100.0}])
    assert wall_time_from_log(run) == (7.5, "log.jsonl wall_time_s (100 s stopped left out)")
    run = _log(tmp_path, [{"step": 10, "wall_time_s": 3.0}, {"step": 20, "wall_time_s": 6.0}])
    assert wall_time_from_log(run) == (6.0, "log.jsonl wall_time_s")
