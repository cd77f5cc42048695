"""``data.placement``: images kept on the training device or streamed from a memory-mapped file on the
host; the same batches either way (bit-exact on a CPU), the choice and its reason in ``execution.jsonl``."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image

from disentangle.config import load_config
from disentangle.data import build_dataset
from disentangle.data import samples as samples_module
from disentangle.errors import ConfigError
from disentangle.training import fit

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def folder(tmp_path):
    rng = np.random.default_rng(0)
    root = tmp_path / "images"
    root.mkdir()
    for i in range(40):
        Image.fromarray(rng.integers(0, 256, (16, 16), dtype=np.uint8)).save(root / f"{i:03d}.png")
    return root


def _mapped_file(address: int) -> str | None:
    """The file mapped at ``address`` in this process (Linux's /proc/self/maps), or None."""
    for line in open("/proc/self/maps"):
        parts = line.split(maxsplit=5)
        start, end = (int(x, 16) for x in parts[0].split("-"))
        if start <= address < end:
            return parts[5].strip() if len(parts) == 6 else None
    return None


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/maps"), reason="reads Linux's /proc/self/maps")
def test_a_streamed_folder_stays_on_the_host_memory_mapped(folder, tmp_path):
    streamed = build_dataset({"name": "image_folder", "path": str(folder), "image_size": 16, "placement": "stream",
                              "cache": str(tmp_path / "cache")})
    held = build_dataset({"name": "image_folder", "path": str(folder), "image_size": 16, "placement": "device",
                          "cache": str(tmp_path / "cache")})
    assert streamed.stream and streamed.placement == "stream" and not held.stream
    assert torch.equal(streamed.images, held.images)
    # the stored images are the cache file's pages (a mapping of that file in this process), not a copy
    cache_file = next((tmp_path / "cache").rglob("*.npy"))
    assert _mapped_file(streamed.images.data_ptr()) == str(cache_file.resolve())
    assert _mapped_file(held.images.data_ptr()) != str(cache_file.resolve())
    assert streamed.to("meta").images.device.type == "cpu"  # moving a streamed sample keeps its images on the host
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    assert torch.equal(streamed.sample_batch(8, g1), held.sample_batch(8, g2))


def test_auto_streams_what_does_not_fit_a_quarter_of_free_memory(monkeypatch):
    import disentangle._core.hardware as hardware

    monkeypatch.setattr(hardware, "available_memory_bytes", lambda device: 1000)
    assert samples_module.choose_placement("auto", 251, "cpu")[0] == "stream"
    placed, reason = samples_module.choose_placement("auto", 250, "cpu")
    assert placed == "device" and "25%" in reason
    assert samples_module.choose_placement("device", 10**12, "cpu") == ("device", "set")
    monkeypatch.setattr(hardware, "available_memory_bytes", lambda device: None)
    assert samples_module.choose_placement("auto", 10, "cpu")[0] == "device"
    with pytest.raises(ConfigError, match="data.placement is 'disk'; choose auto, device or stream"):
        samples_module.choose_placement("disk", 10, "cpu")


def test_streaming_trains_the_same_model_and_resumes_bit_exactly(folder, tmp_path, tiny_overrides):
    def data(placement):
        return {"data.name": "image_folder", "data.path": str(folder), "data.image_size": 16,
                "data.placement": placement, "data.cache": str(tmp_path / "cache")}

    held = fit(load_config(None, tiny_overrides(tmp_path / "held", steps=8, **data("device")))).out_dir
    fit(load_config(None, tiny_overrides(tmp_path / "streamed", steps=4, **data("stream"))))
    streamed = fit(load_config(None, tiny_overrides(tmp_path / "streamed", steps=8, **data("stream"))), resume=True).out_dir
    a = torch.load(held / "checkpoint.pt", weights_only=True)["model"]
    b = torch.load(streamed / "checkpoint.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    execution = [json.loads(line) for line in (streamed / "execution.jsonl").read_text().splitlines()]
    assert [e["placement"] for e in execution] == ["stream", "stream"] and execution[0]["placement_reason"] == "set"
    assert json.loads((held / "execution.jsonl").read_text().splitlines()[0])["placement"] == "device"


def test_a_run_begun_on_the_device_resumes_streamed_from_another_cache_bit_exactly(folder, tmp_path, tiny_overrides):
    """How and where the images are kept may change on resume (a machine with less memory, a cache
    moved to a scratch disk), as they may change in a sweep's rerun without changing the run id."""
    def data(placement, cache):
        return {"data.name": "image_folder", "data.path": str(folder), "data.image_size": 16,
                "data.placement": placement, "data.cache": str(tmp_path / cache)}

    whole = fit(load_config(None, tiny_overrides(tmp_path / "whole", steps=8, **data("device", "a")))).out_dir
    fit(load_config(None, tiny_overrides(tmp_path / "moved", steps=4, **data("device", "a"))))
    moved = fit(load_config(None, tiny_overrides(tmp_path / "moved", steps=8, **data("stream", "b"))), resume=True).out_dir
    a = torch.load(whole / "checkpoint.pt", weights_only=True)["model"]
    b = torch.load(moved / "checkpoint.pt", weights_only=True)["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert (tmp_path / "b").is_dir()  # the second session decoded into its own cache
    execution = [json.loads(line) for line in (moved / "execution.jsonl").read_text().splitlines()]
    assert [e["placement"] for e in execution] == ["device", "stream"]
    with pytest.raises(ConfigError, match=r"data.image_size: checkpoint 16, now 8.*data.\{materialize, placement"):
        fit(load_config(None, tiny_overrides(tmp_path / "moved", steps=12,
                                             **{**data("stream", "b"), "data.image_size": 8})), resume=True)


def test_the_data_keys_left_out_of_a_run_id_may_change_on_resume():
    from disentangle.sweep.ids import EXCLUDED_KEYS
    from disentangle.training.resume import RESUMABLE_DATA_KEYS

    assert {k.split(".", 1)[1] for k in EXCLUDED_KEYS if k.startswith("data.")} <= set(RESUMABLE_DATA_KEYS)


def test_celeba_streams_with_its_labels(tmp_path):
    from tests.data.test_celeba import write_celeba

    root = write_celeba(tmp_path / "celeba")
    common = {"name": "celeba", "path": str(root), "image_size": 16, "cache": str(tmp_path / "cache")}
    streamed = build_dataset({**common, "placement": "stream"})
    held = build_dataset({**common, "placement": "device"})
    assert streamed.stream and not held.stream and streamed.placement_reason == "set"
    assert torch.equal(streamed.images, held.images) and np.array_equal(streamed.labels, held.labels)
    assert streamed.factor_names == held.factor_names and len(streamed.factor_names) == 40


@pytest.mark.skipif(not __import__("os").path.exists("/proc/self/maps"), reason="reads Linux's /proc/self/maps")
def test_auto_streaming_on_the_first_build_maps_the_cache_file_too(folder, tmp_path, monkeypatch):
    """auto learns the images' size by decoding them the first time: when it then streams, the images
    are the cache file's pages from that first build on, not the decoded copy in memory."""
    from disentangle.data import image_folder as module

    monkeypatch.setattr(module, "choose_placement", lambda setting, nbytes, device: ("stream", "auto: faked"))
    cache = tmp_path / "cache"
    first = build_dataset({"name": "image_folder", "path": str(folder), "image_size": 16, "cache": str(cache)})
    assert first.stream and not any(cache.rglob("*.tmp*"))
    assert _mapped_file(first.images.data_ptr()) == str(next(cache.rglob("*.npy")).resolve())
