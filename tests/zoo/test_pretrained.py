"""Pretrained zoo models: publish a tiny run into a temporary zoo, load it back through the package
location, file:// and a local HTTP server, refuse corrupt files, work offline, use a mirror."""
from __future__ import annotations

import functools
import http.server
import json
import os
import threading
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

import disentangle
import disentangle.zoo as zoo
from disentangle import ConfigError, UnknownNameError
from disentangle.config import load_config
from disentangle.data import build_dataset
from disentangle.errors import HashMismatchError
from disentangle.metrics import mig
from disentangle.training.trainer import fit
from disentangle.zoo import manifest as zoo_manifest
from disentangle.zoo.__main__ import main as zoo_main
from disentangle.zoo.publish import wall_time_from_log
from disentangle.zoo.weights import decode_weights, read_verified

NAME = "tiny-mlp-test-s0"
REPO = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------- helpers
@pytest.fixture(scope="module")
def train_tiny(tiny_overrides):
    """``train_tiny(out_dir, steps=12, seed=0) -> out_dir``: a tiny run trained into ``out_dir``."""

    def train_tiny(out_dir: Path, steps: int = 12, seed: int = 0) -> Path:
        fit(load_config(None, tiny_overrides(out_dir, steps=steps) + [f"seed={seed}"]))
        return out_dir

    return train_tiny


@contextmanager
def serve(folder: Path, replace: bytes | None = None):
    """An HTTP server on 127.0.0.1 serving ``folder`` (or ``replace`` for every file);
    yields (base URL, list of requested paths)."""
    requested: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            requested.append(self.path)
            if replace is None:
                return super().do_GET()
            self.send_response(200)
            self.send_header("Content-Length", str(len(replace)))
            self.end_headers()
            self.wfile.write(replace)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", requested
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture(scope="module")
def published(tmp_path_factory, train_tiny):
    """A tiny run published (MIG only) into a temporary zoo folder: (run_dir, manifest, record)."""
    root = tmp_path_factory.mktemp("zoo")
    run = train_tiny(root / "run")
    manifest = root / "myzoo" / "manifest.json"
    record = zoo.publish(run, NAME, manifest=manifest, metrics=["mig"], notes="12 steps, test")
    return run, manifest, record


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    for var in ("DISENTANGLE_ZOO_MANIFEST", "DISENTANGLE_ZOO_URL", "DISENTANGLE_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("DISENTANGLE_DATA", str(tmp_path / "cache"))
    return tmp_path / "cache"


def remote_manifest(tmp_path: Path, published, urls: list[str]) -> Path:
    """A manifest for the published model whose only sources are ``urls`` (no local file)."""
    _, manifest, record = published
    data = json.loads(manifest.read_text())
    entry = dict(data["models"][NAME], urls=urls)
    entry.pop("file")
    path = tmp_path / "remote" / "manifest.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"format": 1, "models": {NAME: entry}}))
    return path


def weight_file(published) -> Path:
    return published[1].parent / published[2]["file"]


def assert_same_weights(model, run_dir):
    reference = disentangle.load(run_dir)
    for key, value in reference.state_dict().items():
        assert torch.equal(model.state_dict()[key], value), key


# ---------------------------------------------------------------------- publish
def test_publish_writes_a_safetensors_file_and_manifest_entry(published):
    run, manifest, record = published
    path = weight_file(published)
    assert path == manifest.parent / "weights" / f"{NAME}.safetensors" and record["file"] == f"weights/{NAME}.safetensors"
    data = path.read_bytes()
    import hashlib

    assert record["sha256"] == hashlib.sha256(data).hexdigest() and record["size"] == len(data)
    tensors, meta = decode_weights(data)
    assert set(tensors) == set(disentangle.load(run).state_dict())
    assert all(k.startswith(("encoder.", "decoder.")) for k in tensors)
    assert meta["name"] == NAME and meta["trained_steps"] == "12" and meta["config"]["data"]["name"] == "_tiny_test"
    assert meta["library_version"] == disentangle.__version__ and meta["machine"]["cpu"]
    assert float(meta["wall_time_s"]) > 0
    on_disk = json.loads(manifest.read_text())["models"][NAME]
    assert on_disk == record
    assert set(record["metrics"]) == {"mig"} and record["metrics_seed"] == 0 and record["trained_steps"] == 12
    assert record["model_number"] is None and record["recipe"] is None
    assert b"pickle" not in data[:200] and data[8:9] == b"{"  # a safetensors JSON header, no pickle


def test_load_from_the_manifest_folder_reproduces_the_recorded_mig(published, monkeypatch):
    run, manifest, record = published
    monkeypatch.setenv("DISENTANGLE_ZOO_MANIFEST", str(manifest))
    assert NAME in zoo.names(pretrained=True) and NAME in zoo.names()
    assert zoo.fetch(NAME) == weight_file(published)
    model = zoo.load(NAME)
    assert not model.training and model.trained_steps == 12 and model.config["objective"]["name"] == "beta_vae"
    assert_same_weights(model, run)
    dataset = build_dataset(dict(model.config["data"]))
    assert mig(dataset, model, seed=record["metrics_seed"]) == record["metrics"]["mig"]
    via_load = disentangle.load(f"zoo:{NAME}")
    assert_same_weights(via_load, run)
    info = zoo.info(NAME)
    assert info["pretrained"] and info["sha256"] == record["sha256"] and info["metrics"]["mig"] == record["metrics"]["mig"]
    assert zoo.config(NAME).train.steps == 12 and zoo.config_dict(NAME)["train"]["out_dir"] == f"runs/{NAME}"


def test_publish_uses_a_fresh_metrics_json_and_ignores_a_stale_one(tmp_path, train_tiny):
    run = train_tiny(tmp_path / "run")
    planted = {"seed": 7, "metrics": {"mig": {"mig": 0.123456}}}
    (run / "metrics.json").write_text(json.dumps(planted))
    record = zoo.publish(run, "planted", manifest=tmp_path / "z" / "manifest.json", metrics=["mig"])
    assert record["metrics"] == {"mig": {"mig": 0.123456}} and record["metrics_seed"] == 7
    stale = 1_000_000_000
    os.utime(run / "metrics.json", (stale, stale))
    record = zoo.publish(run, "planted2", manifest=tmp_path / "z" / "manifest.json", metrics=["mig"])
    assert record["metrics"]["mig"]["mig"] != 0.123456 and record["metrics_seed"] == 0
    assert json.loads((run / "metrics.json").read_text())["metrics"] == record["metrics"]


def test_publish_recomputes_a_score_recorded_with_other_settings(tmp_path, train_tiny):
    """A metrics.json score computed with other settings than publish asks for is computed again
    (issue 18), and the rewritten metrics.json records the settings of every score."""
    run = train_tiny(tmp_path / "run")
    manifest = tmp_path / "z" / "manifest.json"
    planted = {"seed": 0, "metrics": {"mig": {"mig": 0.123456}}, "metric_settings": {"mig": {"num_train": 300}}}
    (run / "metrics.json").write_text(json.dumps(planted))
    # asked with the same settings: the recorded score is reused
    record = zoo.publish(run, "same", manifest=manifest, metrics=["mig"], metric_settings={"mig": {"num_train": 300}})
    assert record["metrics"] == {"mig": {"mig": 0.123456}}
    # asked at the defaults (num_train 10,000): computed again, not the planted value
    record = zoo.publish(run, "defaults", manifest=manifest, metrics=["mig"])
    assert record["metrics"]["mig"]["mig"] != 0.123456
    written = json.loads((run / "metrics.json").read_text())
    assert written["metrics"] == record["metrics"]
    assert written["metric_settings"]["mig"]["num_train"] == 10_000
    # and that score, now recorded at the defaults, is reused by the next publish at the defaults
    again = zoo.publish(run, "defaults2", manifest=manifest, metrics=["mig"])
    assert again["metrics"] == record["metrics"]


def test_publish_is_idempotent_and_refuses_to_replace_other_weights(tmp_path, published, train_tiny):
    run, _, _ = published
    manifest = tmp_path / "z" / "manifest.json"
    first = zoo.publish(run, "same", manifest=manifest, metrics=["mig"])
    before = (manifest.parent / first["file"]).read_bytes()
    again = zoo.publish(run, "same", manifest=manifest, metrics=["mig"])
    assert again["sha256"] == first["sha256"] and (manifest.parent / first["file"]).read_bytes() == before
    other = train_tiny(tmp_path / "other", seed=1)
    with pytest.raises(ConfigError, match="already has a model 'same'"):
        zoo.publish(other, "same", manifest=manifest, metrics=["mig"])
    assert (manifest.parent / first["file"]).read_bytes() == before
    replaced = zoo.publish(other, "same", manifest=manifest, metrics=["mig"], force=True)
    assert replaced["sha256"] != first["sha256"]
    assert sorted(json.loads(manifest.read_text())["models"]) == ["same"]


def test_publish_bad_input_creates_nothing(tmp_path, published):
    run, _, _ = published
    manifest = tmp_path / "z" / "manifest.json"
    with pytest.raises(ConfigError, match="cannot be a pretrained model name"):
        zoo.publish(run, "Bad Name", manifest=manifest)
    with pytest.raises(ConfigError, match="not a run folder"):
        zoo.publish(tmp_path / "missing", "ok", manifest=manifest)
    with pytest.raises(UnknownNameError, match="Did you mean 'mig'"):
        zoo.publish(run, "ok", manifest=manifest, metrics=["migg"])
    assert not (tmp_path / "z").exists()


def test_default_metrics_are_the_six_and_unsupervised():
    assert zoo.DEFAULT_METRICS == (
        "beta_vae_score", "factor_vae_score", "mig", "modularity_explicitness", "dci", "sap_score", "unsupervised_scores",
    )


def test_wall_time_from_log(tmp_path):
    (tmp_path / "log.jsonl").write_text(
        "\n".join(json.dumps(r) for r in [{"step": 10, "steps_per_s": 5.0}, {"step": 20, "steps_per_s": 10.0}, {"step": 20, "metrics": {}}])
    )
    assert wall_time_from_log(tmp_path)[0] == pytest.approx(10 / 5 + 10 / 10)
    with (tmp_path / "log.jsonl").open("a") as f:
        f.write("\n" + json.dumps({"step": 30, "steps_per_s": 9.0, "wall_time_s": 4.5}))
    assert wall_time_from_log(tmp_path) == (4.5, "log.jsonl wall_time_s")
    with (tmp_path / "log.jsonl").open("a") as f:  # a run that was stopped: its wall time already leaves it out
        f.write("\n" + json.dumps({"step": 40, "steps_per_s": 9.0, "wall_time_s": 5.5, "paused_s": 2356.4}))
    assert wall_time_from_log(tmp_path) == (5.5, "log.jsonl wall_time_s (2,356 s stopped left out)")


# ---------------------------------------------------------------------- remote sources
def test_load_through_file_url_into_the_cache(tmp_path, published, monkeypatch, isolated):
    url = weight_file(published).as_uri()
    monkeypatch.setenv("DISENTANGLE_ZOO_MANIFEST", str(remote_manifest(tmp_path, published, [url])))
    path = zoo.fetch(NAME, progress=False)
    assert path == isolated / "zoo" / f"{NAME}.safetensors"
    assert path.read_bytes() == weight_file(published).read_bytes()
    assert_same_weights(zoo.load(NAME), published[0])
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left


def test_load_through_a_local_http_server(tmp_path, published, monkeypatch, isolated):
    with serve(weight_file(published).parent) as (base, requested):
        monkeypatch.setenv("DISENTANGLE_ZOO_MANIFEST", str(remote_manifest(tmp_path, published, [f"{base}/{NAME}.safetensors"])))
        model = zoo.load(NAME)
        assert requested == [f"/{NAME}.safetensors"]
        zoo.load(NAME)  # the verified cached copy is used: no second download
        assert len(requested) == 1
    assert_same_weights(model, published[0])
    assert (isolated / "zoo" / f"{NAME}.safetensors").is_file()


def test_mirror_env_var_is_tried_first(tmp_path, published, monkeypatch):
    with serve(weight_file(published).parent) as (base, requested):
        dead = "http://127.0.0.1:9/nowhere/" + f"{NAME}.safetensors"
        monkeypatch.setenv("DISENTANGLE_ZOO_MANIFEST", str(remote_manifest(tmp_path, published, [dead])))
        monkeypatch.setenv("DISENTANGLE_ZOO_URL", base + "/")
        assert_same_weights(zoo.load(NAME), published[0])
        assert requested == [f"/{NAME}.safetensors"]


def test_a_corrupt_download_is_refused_and_leaves_no_file(tmp_path, published, monkeypatch, isolated):
    good = weight_file(published).read_bytes()
    bad = good[:-1] + bytes([good[-1] ^ 1])
    with serve(tmp_path, replace=bad) as (base, requested):
        monkeypatch.setenv("DISENTANGLE_ZOO_MANIFEST", str(remote_manifest(tmp_path, published, [f"{base}/{NAME}.safetensors"])))
        with pytest.raises(zoo.ZooFileError, match="checksum") as err:
            zoo.load(NAME)
        assert published[2]["sha256"] in str(err.value) and requested
    assert not (isolated / "zoo").exists() or list((isolated / "zoo").iterdir()) == []


def test_a_corrupt_cached_file_is_never_loaded(tmp_path, published, monkeypatch, isolated):
    monkeypatch.setenv("DISENTANGLE_ZOO_MANIFEST", str(remote_manifest(tmp_path, published, [weight_file(published).as_uri()])))
    cached = zoo.fetch(NAME, progress=False)
    data = bytearray(cached.read_bytes())
    data[-5] ^= 0xFF  # a flipped bit in a weight
    cached.write_bytes(bytes(data))
    assert zoo.verify(NAME)[0].status == "mismatch"
    monkeypatch.setenv("DISENTANGLE_OFFLINE", "1")
    with pytest.raises(zoo.ZooFileError, match="does not have the manifest's sha256"):
        zoo.load(NAME)
    with pytest.raises(HashMismatchError, match="was not loaded"):
        read_verified(cached, published[2]["sha256"])
    monkeypatch.delenv("DISENTANGLE_OFFLINE")
    assert_same_weights(zoo.load(NAME), published[0])  # re-fetched from the verified source
    assert zoo.verify(NAME)[0].status == "ok"


def test_a_corrupt_package_file_without_sources_is_refused(tmp_path, published, monkeypatch):
    _, manifest, record = published
    copy = tmp_path / "copy"
    (copy / "weights").mkdir(parents=True)
    data = bytearray(weight_file(published).read_bytes())
    data[100] ^= 0xFF
    (copy / "weights" / f"{NAME}.safetensors").write_bytes(bytes(data))
    (copy / "manifest.json").write_text(manifest.read_text())
    monkeypatch.setenv("DISENTANGLE_ZOO_MANIFEST", str(copy / "manifest.json"))
    with pytest.raises(zoo.ZooFileError, match="does not have the manifest's sha256") as err:
        zoo.load(NAME)
    assert record["sha256"] in str(err.value)


def test_offline_error_names_url_hash_and_exact_path(tmp_path, published, monkeypatch, isolated):
    url = "https://example.org/zoo/" + f"{NAME}.safetensors"
    monkeypatch.setenv("DISENTANGLE_ZOO_MANIFEST", str(remote_manifest(tmp_path, published, [url])))
    monkeypatch.setenv("DISENTANGLE_OFFLINE", "1")
    target = isolated / "zoo" / f"{NAME}.safetensors"
    with pytest.raises(zoo.ZooFileError) as err:
        zoo.fetch(NAME)
    message = str(err.value)
    assert url in message and published[2]["sha256"] in message and str(target) in message and "\n" not in message
    target.parent.mkdir(parents=True)
    target.write_bytes(weight_file(published).read_bytes())  # placed by hand, as the message says
    assert_same_weights(zoo.load(NAME), published[0])


def test_unknown_and_untrained_names(published, monkeypatch):
    monkeypatch.setenv("DISENTANGLE_ZOO_MANIFEST", str(published[1]))
    with pytest.raises(UnknownNameError, match="recipe without pretrained weights") as err:
        zoo.load("beta_vae-dsprites-beta4-s0")
    # its method's pretrained models, not a did-you-mean of another method or the whole list
    assert "Pretrained models of beta_vae: beta_vae-" in str(err.value)
    assert "beta_vae-sprites-beta4-cpu20k-ref-s0" in str(err.value)
    assert "factor_vae" not in str(err.value) and "--config zoo:beta_vae-dsprites-beta4-s0" in str(err.value)
    with pytest.raises(UnknownNameError, match=f"Did you mean '{NAME}'"):
        zoo.load("tiny-mlp-test-s1")


# ---------------------------------------------------------------------- CLI and torch.hub
def cli(capsys, *argv):
    code = zoo_main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_list_info_fetch_verify(published, monkeypatch, capsys):
    monkeypatch.setenv("DISENTANGLE_ZOO_MANIFEST", str(published[1]))
    code, out, _ = cli(capsys, "list", "--pretrained")
    assert code == 0 and NAME in out and f"{published[2]['metrics']['mig']['mig']:.3f}" in out and "MIG" in out
    code, out, _ = cli(capsys, "list", "--method", "beta_tcvae", "--dataset", "cars3d")
    assert code == 0 and "beta_tcvae-cars3d-beta6-s0" in out and "beta_vae-" not in out and "6 recipes" in out
    code, out, _ = cli(capsys, "info", NAME)
    assert code == 0 and published[2]["sha256"] in out and "mig.mig" in out
    code, out, _ = cli(capsys, "info", "annealed_vae-shapes3d-c_max100-s49", "--json")
    assert code == 0 and json.loads(out)["model_number"] == 12_599
    code, out, _ = cli(capsys, "fetch", NAME)
    assert code == 0 and out.strip() == str(weight_file(published))
    code, out, _ = cli(capsys, "verify", "--all")
    assert code == 0 and out.startswith("ok")


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["info", "beta_vae-dsprites-beta3-s0"], "one of 1, 2, 4, 6, 8, 16"),
        (["list", "--method", "betavae"], "Did you mean 'beta_vae'"),
        (["list", "--dataset", "dsprite"], "Did you mean 'dsprites'"),
        (["fetch", "beta_vae-dsprites-beta4-s0"], "recipe without pretrained weights"),
        (["verify", "beta_vae-dsprites-beta4-s0", "--all"], "not both"),
        (["publish", "/nonexistent/run", "--name", "x"], "not a run folder"),
        (["publish", "/nonexistent/run", "--name", "x", "--metrics", "mgi"], "Did you mean 'mig'"),
    ],
)
def test_cli_bad_input_exits_2_with_one_paragraph(argv, fragment, capsys):
    code, out, err = cli(capsys, *argv)
    assert code == 2 and err.startswith("error: ") and fragment in err and err.count("\n") == 1


def test_a_damaged_cache_copy_beside_a_good_file_is_named_not_reported_unloadable(published, monkeypatch, isolated):
    """verify follows what loading uses: the manifest's good file loads, so the model is ok, and the
    damaged cache copy is named with its fix (not 'reinstall the package')."""
    monkeypatch.setenv("DISENTANGLE_ZOO_MANIFEST", str(published[1]))
    cached = isolated / "zoo" / f"{NAME}.safetensors"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"garbage")
    (result,) = zoo.verify(NAME)
    assert result.status == "ok" and result.path == weight_file(published)
    assert f"the damaged copy {cached}" in result.detail and "delete it" in result.detail
    assert_same_weights(zoo.load(NAME), published[0])


def test_cli_publish_into_a_user_zoo_and_verify_a_corrupt_file(tmp_path, published, monkeypatch, capsys):
    manifest, weights = tmp_path / "mine" / "manifest.json", tmp_path / "blobs"
    code, out, err = cli(capsys, "publish", str(published[0]), "--name", "mine-s0", "--manifest", str(manifest),
                         "--weights-dir", str(weights), "--metrics", "mig", "--url", "https://example.org/mine-s0.safetensors")
    assert code == 0, err
    record = json.loads(manifest.read_text())["models"]["mine-s0"]
    assert record["file"] == str((weights / "mine-s0.safetensors").resolve())
    assert record["urls"] == ["https://example.org/mine-s0.safetensors"]
    monkeypatch.setenv("DISENTANGLE_ZOO_MANIFEST", str(manifest))
    assert_same_weights(zoo.load("mine-s0"), published[0])
    (weights / "mine-s0.safetensors").write_bytes(b"not the weights")
    code, out, err = cli(capsys, "verify", "mine-s0")
    assert code == 3 and out.startswith("mismatch") and "error:" in err  # bad data


def test_torch_hub_lists_and_loads_pretrained_models(published, monkeypatch):
    monkeypatch.setenv("DISENTANGLE_ZOO_MANIFEST", str(published[1]))
    # torch.hub.list reads only GitHub repositories; its rule for entry points: the callables of
    # hubconf.py whose names do not start with "_"
    hubconf = torch.hub._import_module("hubconf", str(REPO / "hubconf.py"))
    entry_points = [f for f in dir(hubconf) if callable(getattr(hubconf, f)) and not f.startswith("_")]
    # the shipped pretrained models, the one published into this test's zoo, and the generic loader
    assert sorted(entry_points) == sorted([*zoo.names(pretrained=True), "zoo_model"])
    assert NAME in entry_points
    model = torch.hub.load(str(REPO), NAME, source="local")
    assert_same_weights(model, published[0])
    generic = torch.hub.load(str(REPO), "zoo_model", name=NAME, source="local")
    assert_same_weights(generic, published[0])


def test_user_manifest_paths_are_read_from_the_env_var(tmp_path, published, monkeypatch):
    missing = tmp_path / "none.json"
    monkeypatch.setenv("DISENTANGLE_ZOO_MANIFEST", os.pathsep.join([str(published[1]), str(missing)]))
    assert zoo_manifest.manifest_paths()[1:] == [published[1], missing]
    with pytest.raises(zoo.ManifestError, match="does not exist"):
        zoo.names(pretrained=True)


def test_published_files_are_world_readable(published):
    # mkstemp files are owner-only; a wheel would carry that mode into a shared installation
    umask = os.umask(0)
    os.umask(umask)
    for path in (weight_file(published), published[1]):
        assert path.stat().st_mode & 0o777 == 0o666 & ~umask


def test_verify_says_how_to_get_a_file_back_and_a_lost_one_is_an_error(tmp_path, published, monkeypatch, capsys):
    """A model of your own manifest without a URL: deleting a corrupt file does not make it
    fetchable, so verify says to publish it again, and a file that is gone is an error too."""
    manifest, weights = tmp_path / "mine" / "manifest.json", tmp_path / "blobs"
    code, _, err = cli(capsys, "publish", str(published[0]), "--name", "nourl-s0", "--manifest", str(manifest),
                       "--weights-dir", str(weights), "--metrics", "mig")
    assert code == 0, err
    monkeypatch.setenv("DISENTANGLE_ZOO_MANIFEST", str(manifest))
    monkeypatch.delenv("DISENTANGLE_ZOO_URL", raising=False)
    (weights / "nourl-s0.safetensors").write_bytes(b"not the weights")
    code, out, err = cli(capsys, "verify", "nourl-s0")
    assert code == 3 and "publish the model again" in err and "fetch it again" not in err
    (weights / "nourl-s0.safetensors").unlink()
    code, out, err = cli(capsys, "verify", "nourl-s0")
    assert code == 3 and out.startswith("unavailable") and "publish the model again" in err


def test_a_changed_shipped_file_is_restored_by_reinstalling():
    from disentangle.zoo.fetching import remedy

    entry = zoo.entry(zoo.names(pretrained=True)[0]).pretrained.entry
    assert "reinstall the package" in remedy(entry)


# ---------------------------------------------------------------------- retired models
def test_a_retired_model_names_its_replacement_keeps_its_record_and_comes_back_when_republished(
    tmp_path, published, train_tiny, monkeypatch, capsys
):
    """retire_entry moves a model to 'retired': loading it is refused with its replacement's name
    and scores, its config and record stay readable (and trainable), listings leave it out and
    name it, and publishing the name again brings it back."""
    run, source, record = published
    folder = tmp_path / "zoo"
    folder.mkdir()
    (folder / "weights").mkdir()
    data = json.loads(source.read_text())
    new = "tiny-mlp-test-ref-s0"
    data["models"][new] = dict(data["models"][NAME])
    for name in (NAME, new):
        (folder / data["models"][name]["file"]).write_bytes(weight_file(published).read_bytes())
    manifest = folder / "manifest.json"
    manifest.write_text(json.dumps(data))
    monkeypatch.setenv("DISENTANGLE_ZOO_MANIFEST", str(manifest))

    with pytest.raises(zoo.ManifestError, match="replacement must be another model"):
        zoo_manifest.retire_entry(manifest, NAME, "no-such-model", "why", "2026-11-24")
    kept = zoo_manifest.retire_entry(manifest, NAME, new, "trained with PyTorch's default init.", "2026-11-24")
    assert kept["sha256"] == record["sha256"] and kept["replaced_by"] == new
    stored = json.loads(manifest.read_text())
    assert NAME not in stored["models"] and stored["retired"][NAME]["config"] == record["config"]

    assert NAME not in zoo.names(pretrained=True) and NAME not in zoo.names() and new in zoo.names(pretrained=True)
    with pytest.raises(zoo.RetiredModelError) as err:
        zoo.load(NAME)
    message = str(err.value)
    mig = record["metrics"]["mig"]["mig"]
    assert f"'{new}' (MIG {mig:.3f}, against MIG {mig:.3f})" in message
    assert "trained with PyTorch's default init" in message and record["sha256"] in message
    assert f"--config zoo:{NAME}" in message and "retired from the zoo on 2026-11-24" in message
    assert isinstance(err.value, UnknownNameError)

    info = zoo.info(NAME)
    assert info["kind"] == "retired" and info["pretrained"] is False and info["replaced_by"] == new
    assert info["metrics"] == record["metrics"] and info["sha256"] == record["sha256"]
    assert zoo.config(NAME).seed == record["config"]["seed"]  # retrainable from its name
    assert zoo.config_dict(NAME)["train"]["out_dir"] == f"runs/{NAME}"

    code, out, _ = cli(capsys, "list", "--pretrained")
    count = len(zoo.catalog.retired())  # the shipped manifest's retired models and this one
    assert code == 0 and f"{count} retired models are not listed (python -m disentangle.zoo list --retired)" in out
    code, out, _ = cli(capsys, "list", "--retired")
    row = next(line for line in out.splitlines() if line.startswith(NAME))
    assert code == 0 and row.split() == [NAME, "2026-11-24", f"{mig:.3f}", new, f"{mig:.3f}"]
    assert f"{count} retired models" in out
    code, out, err_text = cli(capsys, "info", NAME)
    assert code == 0 and f"replaced_by: {new}" in out
    code, out, err_text = cli(capsys, "fetch", NAME)
    assert code == 2 and f"Its replacement is '{new}'" in err_text and "Traceback" not in err_text

    zoo_manifest.write_entry(manifest, NAME, dict(record, file=data["models"][NAME]["file"]))
    assert NAME in zoo.names(pretrained=True) and NAME not in json.loads(manifest.read_text())["retired"]
    assert_same_weights(zoo.load(NAME), run)


def test_a_manifest_with_a_bad_retired_record_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"format": 1, "models": {}, "retired": {"old": {"reason": "x"}}}))
    with pytest.raises(zoo.ManifestError, match="needs 'replaced_by'"):
        zoo_manifest.read_manifest(path)


def test_a_later_manifest_that_lists_a_retired_model_makes_it_loadable_again(tmp_path, published, monkeypatch):
    """The way back the retirement message gives: a manifest of one's own listing the file."""
    run, source, record = published
    data = json.loads(source.read_text())
    shipped_like = tmp_path / "shipped" / "manifest.json"
    shipped_like.parent.mkdir()
    retired_record = {"replaced_by": "other-s0", "reason": "test", "retired": "2026-11-24", **data["models"][NAME]}
    shipped_like.write_text(json.dumps({"format": 1, "models": {"other-s0": data["models"][NAME]},
                                        "retired": {NAME: retired_record}}))
    monkeypatch.setenv("DISENTANGLE_ZOO_MANIFEST", str(shipped_like))
    with pytest.raises(zoo.RetiredModelError):
        zoo.load(NAME)
    mine = tmp_path / "mine" / "manifest.json"
    mine.parent.mkdir()
    mine.write_text(json.dumps({"format": 1, "models": {NAME: dict(data["models"][NAME], file=str(weight_file(published)))}}))
    monkeypatch.setenv("DISENTANGLE_ZOO_MANIFEST", os.pathsep.join([str(shipped_like), str(mine)]))
    assert NAME not in zoo.catalog.retired()
    assert_same_weights(zoo.load(NAME), run)


def test_the_machine_record_names_the_cpus_family_and_model(tmp_path):
    """``AMD EPYC`` names three generations in these virtual machines; ``cpu family``/``model`` of
    the first processor tell them apart (``26/2``: Zen 5), and a file without them gives None."""
    from disentangle.zoo.publish import cpu_family_model, machine_info

    block = ("processor\t: {n}\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\n"
             "model name\t: AMD EPYC\nflags\t\t: fpu avx512f avx512_bf16\n")
    (tmp_path / "cpuinfo").write_text(block.format(n=0) + "\n" + block.format(n=1).replace(": 26", ": 25") + "\n")
    assert cpu_family_model(str(tmp_path / "cpuinfo")) == "26/2"
    (tmp_path / "arm").write_text("processor\t: 0\nBogoMIPS\t: 50.00\nCPU part\t: 0xd0c\n")
    assert cpu_family_model(str(tmp_path / "arm")) is None
    assert cpu_family_model(str(tmp_path / "missing")) is None
    assert "cpu_family_model" in machine_info()


def test_a_cache_that_cannot_be_written_is_named_not_blamed_on_the_source(tmp_path, published, monkeypatch):
    """DISENTANGLE_DATA under a file (or without permission): the message names the folder and how to
    change it, not the download source, which was never tried."""
    monkeypatch.setenv("DISENTANGLE_ZOO_MANIFEST", str(remote_manifest(tmp_path, published, [weight_file(published).as_uri()])))
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("DISENTANGLE_DATA", str(blocker / "cache"))
    with pytest.raises(zoo.ZooFileError, match=r"cannot be written \((FileExistsError|NotADirectoryError).*Set "
                                               r"DISENTANGLE_DATA to a folder you can write") as err:
        zoo.fetch(NAME, progress=False)
    assert "file://" not in str(err.value).split("or download")[0]


def test_a_later_manifest_overrides_an_earlier_one_and_hashes_compare_in_any_case(tmp_path, published, monkeypatch,
                                                                                   capsys):
    """``DISENTANGLE_ZOO_MANIFEST=A:B`` with one name in both: B's record is the model (a user's own
    manifest after a shared one replaces its entry). A sha256 written in upper case (as some tools
    print it) is the same hash."""
    _, manifest, record = published
    data = json.loads(manifest.read_text())
    entry = dict(data["models"][NAME], file=str(weight_file(published)))
    first, second = tmp_path / "a" / "manifest.json", tmp_path / "b" / "manifest.json"
    for path, sha in ((first, "0" * 64), (second, record["sha256"].upper())):
        path.parent.mkdir()
        path.write_text(json.dumps({"format": 1, "models": {NAME: {**entry, "sha256": sha}}}))
    monkeypatch.setenv("DISENTANGLE_ZOO_MANIFEST", os.pathsep.join([str(first), str(second)]))
    found = zoo_manifest.entries()[NAME]
    assert found.manifest == second and found.sha256 == record["sha256"]
    assert_same_weights(zoo.load(NAME), published[0])
    assert zoo_main(["verify", NAME]) == 0
    assert "ok" in capsys.readouterr().out
