"""Mutation-audit value tests of the zoo's files: the weight format (hash first, refused on one changed
byte, zoo format only, metadata round trip, no foreign tensors), fetching (which copy is used, every
source tried, the size limit, offline), the manifest's checks and the catalog's table. Small files
made here; downloads only from ``file://`` URLs; no training."""
from __future__ import annotations

import json
import os
import warnings

import pytest
import torch
from safetensors.torch import save

from disentangle.errors import HashMismatchError, ManifestError, WeightsError, ZooFileError
from disentangle.zoo import catalog, fetching, manifest
from disentangle.zoo.manifest import Entry
from disentangle.zoo.weights import FORMAT, build_model, decode_weights, encode_weights, read_verified, sha256_bytes

CONFIG = {"model": {"backbone": "mlp", "latent_dim": 4}}


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    for var in ("DISENTANGLE_ZOO_MANIFEST", "DISENTANGLE_ZOO_URL", "DISENTANGLE_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("DISENTANGLE_DATA", str(tmp_path / "cache"))
    catalog.clear()
    yield tmp_path / "cache"
    catalog.clear()


def _bytes(**extra) -> bytes:
    tensors = {"encoder.w": torch.arange(6, dtype=torch.float32).reshape(2, 3), "decoder.b": torch.ones(3)}
    return encode_weights(tensors, {"name": "m", "config": CONFIG, "image_shape": [1, 8, 8], **extra})


# ---------------------------------------------------------------------- weights
def test_a_file_is_read_only_with_its_exact_hash(tmp_path):
    data = _bytes()
    path = tmp_path / "m.safetensors"
    path.write_bytes(data)
    digest = sha256_bytes(data)
    tensors, meta = read_verified(path, digest)
    assert torch.equal(tensors["encoder.w"], torch.arange(6.0).reshape(2, 3)) and meta["format"] == FORMAT
    read_verified(path, digest.upper())  # the manifest's hex digits in either case
    for where in (len(data) - 1, 20, 9):  # a weight, the header, the header's first byte
        bad = bytearray(data)
        bad[where] ^= 0x01
        path.write_bytes(bytes(bad))
        with pytest.raises(HashMismatchError, match=f"sha256 {sha256_bytes(bytes(bad))}, but the manifest records"):
            read_verified(path, digest)
    path.write_bytes(data[:-4])
    with pytest.raises(HashMismatchError):
        read_verified(path, digest)


def test_a_safetensors_file_that_is_not_a_zoo_file_is_refused():
    plain = save({"encoder.w": torch.zeros(2)})
    with pytest.raises(WeightsError, match="not a disentangle zoo weight file"):
        decode_weights(plain)
    other = save({"encoder.w": torch.zeros(2)}, metadata={"format": "disentangle-zoo/2"})
    with pytest.raises(WeightsError, match="format 'disentangle-zoo/2'"):
        decode_weights(other)


def test_the_metadata_round_trips_with_json_values_decoded():
    machine = {"cpu": "Test CPU", "cores": 2}
    _, meta = decode_weights(_bytes(recipe=None, machine=machine, trained_steps=12, wall_time_s=1.5))
    assert meta == {"format": FORMAT, "name": "m", "config": CONFIG, "image_shape": [1, 8, 8], "recipe": "",
                    "machine": machine, "trained_steps": "12", "wall_time_s": "1.5"}


def test_only_encoder_decoder_and_objective_tensors_are_written():
    with pytest.raises(WeightsError, match="optimizer.state"):
        encode_weights({"encoder.w": torch.zeros(1), "optimizer.state": torch.zeros(1)}, {})
    with pytest.raises(WeightsError, match="discriminator.w"):
        encode_weights({"discriminator.w": torch.zeros(1)}, {})


def test_a_built_model_is_in_eval_mode_with_its_objective_state_by_name():
    from disentangle.models.vae import VAE

    reference = VAE.for_weights(CONFIG["model"], (1, 8, 8))
    state = {k: v + 1 for k, v in reference.state_dict().items()}
    state["objective.codebook"] = torch.tensor([0.25, 0.5])
    tensors, meta = decode_weights(encode_weights(state, {"config": CONFIG, "image_shape": [1, 8, 8],
                                                          "trained_steps": 7}))
    model = build_model(tensors, meta)
    assert model.training is False and not any(m.training for m in model.modules())
    assert list(model.objective_state) == ["codebook"]
    assert torch.equal(model.objective_state["codebook"], torch.tensor([0.25, 0.5]))
    assert model.trained_steps == 7
    for key, value in model.state_dict().items():
        assert torch.equal(value, state[key]), key


# ---------------------------------------------------------------------- fetching
def _entry(tmp_path, data: bytes, *, file: bytes | None = None, urls=(), size=None, name="m") -> Entry:
    record = {"sha256": sha256_bytes(data), "size": len(data) if size is None else size, "urls": list(urls)}
    folder = tmp_path / "zoo"
    folder.mkdir(exist_ok=True)
    if file is not None:
        (folder / "weights").mkdir(exist_ok=True)
        (folder / "weights" / f"{name}.safetensors").write_bytes(file)
        record["file"] = f"weights/{name}.safetensors"
    return Entry(name, record, folder / "manifest.json")


def _source(tmp_path, name: str, data: bytes) -> str:
    path = tmp_path / "sources" / name / "m.safetensors"
    path.parent.mkdir(parents=True)
    path.write_bytes(data)
    return path.as_uri()


def _corrupt(data: bytes) -> bytes:
    return data[:-1] + bytes([data[-1] ^ 0xFF])


def test_a_corrupt_package_file_gives_way_to_a_good_cached_copy(tmp_path, isolated):
    data = _bytes()
    entry = _entry(tmp_path, data, file=_corrupt(data))
    cached = isolated / "zoo" / "m.safetensors"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(data)
    with pytest.warns(UserWarning, match="does not have the manifest's sha256"):
        assert fetching.fetch_entry(entry, progress=False) == cached


def test_a_corrupt_cached_copy_is_refused_offline(tmp_path, isolated, monkeypatch):
    data = _bytes()
    entry = _entry(tmp_path, data, urls=["https://example.org/m.safetensors"])
    cached = isolated / "zoo" / "m.safetensors"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(_corrupt(data))
    monkeypatch.setenv("DISENTANGLE_OFFLINE", "1")
    with pytest.raises(ZooFileError, match="the cached .* does not have the manifest's sha256"):
        fetching.fetch_entry(entry, progress=False)


def test_a_bad_source_is_skipped_for_the_next_one(tmp_path, isolated):
    data = _bytes()
    urls = [_source(tmp_path, "bad", _corrupt(data)), _source(tmp_path, "good", data)]
    path = fetching.fetch_entry(_entry(tmp_path, data, urls=urls), progress=False)
    assert path == isolated / "zoo" / "m.safetensors" and path.read_bytes() == data


def test_a_source_larger_than_the_manifests_size_is_cut_off(tmp_path, isolated):
    data = _bytes()
    entry = _entry(tmp_path, data, urls=[_source(tmp_path, "good", data)], size=len(data) - 1)
    with pytest.raises(ZooFileError, match="more than the manifest's size"):
        fetching.fetch_entry(entry, progress=False)
    assert not (isolated / "zoo" / "m.safetensors").exists()


@pytest.mark.parametrize("value, expected", [("1", True), ("true", True), ("YES", True), (" on ", True),
                                             ("0", False), ("", False), ("off", False), ("no", False)])
def test_offline_values(monkeypatch, value, expected):
    monkeypatch.setenv("DISENTANGLE_OFFLINE", value)
    assert fetching.offline() is expected


def test_the_mirror_comes_first_and_once(tmp_path, monkeypatch):
    data = _bytes()
    entry = _entry(tmp_path, data, urls=["https://a.example/m.safetensors", "https://mirror.example/zoo/m.safetensors"])
    assert fetching.sources(entry) == entry.urls
    monkeypatch.setenv("DISENTANGLE_ZOO_URL", "https://mirror.example/zoo/")
    assert fetching.sources(entry) == ["https://mirror.example/zoo/m.safetensors", "https://a.example/m.safetensors"]


def test_verification_statuses(tmp_path, isolated, monkeypatch):
    data = _bytes()
    assert [fetching.Verification("m", s, None, "").ok for s in ("ok", "missing", "mismatch", "unavailable")] == \
        [True, True, False, False]
    assert fetching.verify_entry(_entry(tmp_path, data)).status == "unavailable"
    monkeypatch.setenv("DISENTANGLE_ZOO_URL", "https://mirror.example/zoo")
    assert fetching.verify_entry(_entry(tmp_path, data)).status == "missing"  # the mirror is a source
    monkeypatch.delenv("DISENTANGLE_ZOO_URL")
    entry = _entry(tmp_path, data, file=data)
    cached = isolated / "zoo" / "m.safetensors"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(data)
    result = fetching.verify_entry(entry)  # two good copies: the one loading uses, the manifest's file
    assert (result.status, result.path) == ("ok", entry.local_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fetching.fetch_entry(entry, progress=False) == entry.local_path


# ---------------------------------------------------------------------- manifest
GOOD = "ab" * 32


@pytest.mark.parametrize("change, fragment", [
    ({"sha256": GOOD + "a"}, "no valid sha256"),
    ({"sha256": GOOD[:-1]}, "no valid sha256"),
    ({"sha256": GOOD[:-1] + "g"}, "no valid sha256"),
    ({"size": -1}, "'size' -1"),
    ({"size": True}, "'size' True"),
    ({"file": "weights/.."}, "names no file"),
    ({"file": "weights/"}, "names no file"),
    ({"urls": "https://example.org/m"}, "must be a list"),
])
def test_a_bad_manifest_record_is_refused(tmp_path, change, fragment):
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"format": 1, "models": {"m": {"sha256": GOOD, **change}}}))
    with pytest.raises(ManifestError, match=fragment):
        manifest.read_manifest(path)


def test_manifest_format_and_hash_case(tmp_path, monkeypatch):
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"format": 2, "models": {}}))
    with pytest.raises(ManifestError, match="newer than this library reads"):
        manifest.read_manifest(path)
    path.write_text(json.dumps({"format": 1, "models": {"m": {"sha256": GOOD.upper(), "size": 0}}}))
    monkeypatch.setenv(manifest.MANIFEST_ENV, str(path))
    entry = manifest.entries()["m"]
    assert entry.sha256 == GOOD and entry.size == 0 and entry.local_path is None


def test_a_later_manifest_wins_and_unretires(tmp_path, monkeypatch):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps({"format": 1, "models": {"m": {"sha256": "0" * 64}},
                                 "retired": {"old": {"replaced_by": "m", "reason": "r"}}}))
    second.write_text(json.dumps({"format": 1, "models": {"m": {"sha256": "1" * 64}, "old": {"sha256": "2" * 64}}}))
    monkeypatch.setenv(manifest.MANIFEST_ENV, os.pathsep.join([str(first), str(second)]))
    assert manifest.entries()["m"].sha256 == "1" * 64 and manifest.entries()["m"].manifest == second
    assert "old" not in manifest.retired()


# ---------------------------------------------------------------------- catalog
def test_pretrained_names_are_listed_sorted(tmp_path, monkeypatch):
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"format": 1, "models": {"zz-user": {"sha256": GOOD}, "aa-user": {"sha256": GOOD},
                                                        "mm-user": {"sha256": GOOD}}}))
    monkeypatch.setenv(manifest.MANIFEST_ENV, str(path))
    names = catalog.list_names(pretrained=True)
    assert names == sorted(names) and {"aa-user", "mm-user", "zz-user"} <= set(names)
    assert catalog.list_names("*-user", pretrained=True) == ["aa-user", "mm-user", "zz-user"]
    everything = catalog.list_names()
    assert everything[-len(names):] == names  # recipes first, then the pretrained models, sorted


def test_a_manifest_rewritten_at_the_same_size_rebuilds_the_table(tmp_path, monkeypatch):
    path = tmp_path / "manifest.json"
    one = json.dumps({"format": 1, "models": {"one-user": {"sha256": GOOD}}})
    two = json.dumps({"format": 1, "models": {"two-user": {"sha256": GOOD}}})
    assert len(one) == len(two)
    path.write_text(one)
    monkeypatch.setenv(manifest.MANIFEST_ENV, str(path))
    assert "one-user" in catalog.catalog()
    path.write_text(two)
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))
    table = catalog.catalog()
    assert "two-user" in table and "one-user" not in table


def test_recorded_mig():
    assert catalog.recorded_mig({"metrics": {"mig": {"mig": 0.25, "mig_per_factor": [0.1]}}}) == 0.25
    assert catalog.recorded_mig({"metrics": {"mig": {"mig": 1}}}) == 1.0
    assert catalog.recorded_mig({"metrics": {"dci": {"mig": 0.5}}}) is None
    assert catalog.recorded_mig(None) is None


def test_an_empty_json_metadata_value_stays_empty():
    # a file written by another tool may leave a JSON key empty: it reads as "", not a JSON error
    data = save({"encoder.w": torch.zeros(1)}, metadata={"format": FORMAT, "machine": "", "config": "{\"a\": 1}"})
    _, meta = decode_weights(data)
    assert meta == {"format": FORMAT, "machine": "", "config": {"a": 1}}
