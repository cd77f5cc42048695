"""The zoo's command line and manifest checks: verify without a name, the pretrained list's
columns, numpy model numbers, manifest file names, downloads cut at the manifest's size, real
model names in the docs, and a quiet exit when the output pipe closes (zoo and sweep CLIs)."""
from __future__ import annotations

import hashlib
import http.server
import json
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

import disentangle.zoo as zoo
from disentangle import ConfigError
from disentangle.zoo import locatello
from disentangle.zoo import manifest as zoo_manifest
from disentangle.zoo.__main__ import main as zoo_main

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    for var in ("DISENTANGLE_ZOO_MANIFEST", "DISENTANGLE_ZOO_URL", "DISENTANGLE_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("DISENTANGLE_DATA", str(tmp_path / "cache"))
    return tmp_path / "cache"


def cli(capsys, *argv):
    code = zoo_main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def user_manifest(tmp_path: Path, models: dict) -> Path:
    path = tmp_path / "zoo" / "manifest.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"format": 1, "models": models}))
    return path


# ---------------------------------------------------------------------- verify, list
def test_verify_without_a_name_checks_every_pretrained_model(capsys):
    names = zoo.names(pretrained=True)
    assert names
    code, out, err = cli(capsys, "verify")
    assert code == 0, err
    lines = out.splitlines()
    assert sorted(line.split()[1] for line in lines) == names
    assert {line.split()[0] for line in lines} <= {"ok", "missing"}
    assert cli(capsys, "verify", "--all")[1] == out


def test_list_pretrained_shows_the_dataset_and_the_steps_trained(capsys):
    code, out, _ = cli(capsys, "list", "--pretrained")
    assert code == 0
    header = out.splitlines()[0].split()
    assert header[:6] == ["name", "objective", "dataset", "supervision", "steps", "wall"]
    rows = [line for line in out.splitlines()[2:] if line.split()[:1] and line.split()[0] in zoo.names(pretrained=True)]
    assert len(rows) == len(zoo.names(pretrained=True))
    order = []
    for line in rows:
        name, objective, dataset = line.split()[:3]
        record = zoo.info(name)
        assert (objective, dataset) == (record["config"]["objective"]["name"], record["config"]["data"]["name"])
        subgrid = "(sub-grid)" in line
        assert subgrid == bool(record["config"]["data"].get("subgrid"))
        supervision, steps = line.split()[4 if subgrid else 3:6 if subgrid else 5]
        assert int(steps) == record["trained_steps"]
        order.append((dataset + (" (sub-grid)" if subgrid else ""), supervision))
    # grouped by dataset and supervision: a group's rows are contiguous, the unsupervised first
    assert order == sorted(order, key=lambda key: (key[0], key[1] != "none", key[1]))
    assert ("sprites", "weak") in order and ("sprites", "none") == order[0]


# ---------------------------------------------------------------------- model numbers
def test_model_numbers_accept_numpy_integers():
    assert locatello.from_model_number(np.int64(5)) == locatello.from_model_number(5)
    assert locatello.from_model_number(np.uint16(12_599)).method == "annealed_vae"
    assert type(locatello.from_model_number(np.int32(7)).seed) is int
    assert locatello.model_number("dsprites", "beta_vae", 1.0, np.int64(3)) == 3
    assert zoo.recipes.recipe_name("beta_tcvae", "dsprites", 6, np.int64(2)) == "beta_tcvae-dsprites-beta6-s2"
    for bad in (True, np.bool_(True), 5.0, "5", np.float64(5)):
        with pytest.raises(ConfigError, match="0 to 12599"):
            locatello.from_model_number(bad)


# ---------------------------------------------------------------------- manifest entries
@pytest.mark.parametrize("file", ["", ".", "..", "weights/", "weights/.", "weights/..", "../..", "a\\..", 7])
def test_a_manifest_file_that_names_no_file_is_refused(tmp_path, monkeypatch, capsys, file):
    path = user_manifest(tmp_path, {"bad-s0": {"file": file, "sha256": "0" * 64, "size": 10, "config": {}}})
    monkeypatch.setenv("DISENTANGLE_ZOO_MANIFEST", str(path))
    with pytest.raises(zoo.ManifestError, match="bad-s0") as err:
        zoo_manifest.entries()
    assert "\n" not in str(err.value)
    code, _, err_text = cli(capsys, "verify")
    assert code == 3 and err_text.startswith("error: ") and "Traceback" not in err_text  # bad data


def test_a_manifest_size_must_be_a_byte_count(tmp_path, monkeypatch):
    path = user_manifest(tmp_path, {"m-s0": {"file": "m.safetensors", "sha256": "0" * 64, "size": "big"}})
    monkeypatch.setenv("DISENTANGLE_ZOO_MANIFEST", str(path))
    with pytest.raises(zoo.ManifestError, match="'size'"):
        zoo_manifest.entries()


@pytest.mark.parametrize("change, fragment", [
    ({"format": "1"}, "has format '1'; it must be a whole number"),
    ({"urls": "https://example.org/m.safetensors"}, "has 'urls' 'https://example.org/m.safetensors'; it must be a list"),
    ({"sha256": "z" * 64}, "has no valid sha256 (64 hex digits)"),
])
def test_a_hand_written_manifest_s_wrong_types_are_one_paragraph(tmp_path, monkeypatch, capsys, change, fragment):
    """A string format crashed `zoo list` with a TypeError; a string of urls was split into characters
    ('Download ... from h'); a sha256 of 64 non-hex characters was taken."""
    entry = {"file": "m.safetensors", "sha256": "0" * 64, "size": 10, **{k: v for k, v in change.items() if k != "format"}}
    path = user_manifest(tmp_path, {"m-s0": entry})
    if "format" in change:
        data = json.loads(path.read_text())
        data["format"] = change["format"]
        path.write_text(json.dumps(data))
    monkeypatch.setenv("DISENTANGLE_ZOO_MANIFEST", str(path))
    with pytest.raises(zoo.ManifestError, match=re.escape(fragment)):
        zoo_manifest.entries()
    code, _, err_text = cli(capsys, "list")
    assert code != 0 and err_text.startswith("error: ") and "Traceback" not in err_text


# ---------------------------------------------------------------------- downloads cut at the size
class _Endless(http.server.BaseHTTPRequestHandler):
    """Serves ``/endless`` (no Content-Length, bytes until the client hangs up, at most 64 MiB) and
    ``/announced`` (a Content-Length of 1 MiB)."""

    sent: ClassVar[list[int]] = []

    def log_message(self, *args):
        pass

    def do_GET(self):
        self.send_response(200)
        if self.path == "/announced":
            self.send_header("Content-Length", str(1 << 20))
        self.end_headers()
        sent = 0
        try:
            while sent < (64 << 20):
                self.wfile.write(b"x" * 65536)
                sent += 65536
        except (BrokenPipeError, ConnectionResetError):
            pass
        type(self).sent.append(sent)


def test_a_download_longer_than_the_manifest_size_is_stopped(tmp_path, monkeypatch, isolated):
    content = b"x" * 1000
    big = tmp_path / "big.safetensors"
    big.write_bytes(content * 5)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Endless)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        for url in (f"{base}/endless", f"{base}/announced", big.as_uri()):
            entry = {"sha256": hashlib.sha256(content).hexdigest(), "size": len(content), "urls": [url]}
            monkeypatch.setenv("DISENTANGLE_ZOO_MANIFEST", str(user_manifest(tmp_path, {"m-s0": entry})))
            with pytest.raises(zoo.ZooFileError, match="more than the manifest's size of 1000 bytes") as err:
                zoo.fetch("m-s0", progress=False)
            assert url in str(err.value)
            assert not (isolated / "zoo").exists() or list((isolated / "zoo").iterdir()) == []
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert _Endless.sent and max(_Endless.sent) < (32 << 20)  # hung up on long before the end

    # a file of the right size and hash is fetched (file://)
    good = tmp_path / "good.safetensors"
    good.write_bytes(content)
    entry = {"sha256": hashlib.sha256(content).hexdigest(), "size": len(content), "urls": [good.as_uri()]}
    monkeypatch.setenv("DISENTANGLE_ZOO_MANIFEST", str(user_manifest(tmp_path, {"m-s0": entry})))
    assert zoo.fetch("m-s0", progress=False).read_bytes() == content


# ---------------------------------------------------------------------- names in the docs
def test_docs_and_help_name_only_real_pretrained_models(capsys):
    pattern = re.compile(r"\b[a-z_]+-[a-z0-9_]+-[a-z_]+[0-9.e+-]*?-cpu\d+k(?:-ref)?-s\d+\b")
    real = set(zoo.names(pretrained=True)) | set(zoo.catalog.retired())  # a retired name is still known
    sources = [REPO / "disentangle" / "zoo" / f for f in ("__init__.py", "__main__.py", "fetching.py", "manifest.py",
                                                          "locatello.py", "recipes.py", "weights.py")]
    text = "\n".join(p.read_text() for p in sources)
    with pytest.raises(SystemExit):
        zoo_main(["publish", "--help"])
    text += capsys.readouterr().out
    named = set(pattern.findall(text))
    assert named and named <= real, sorted(named - real)


# ---------------------------------------------------------------------- a closed output pipe
def _closed_pipe(argv: list[str]) -> subprocess.CompletedProcess:
    """Run a CLI whose stdout is a pipe nobody reads (closed at once, as ``| head`` does after a line)."""
    proc = subprocess.Popen([sys.executable, *argv], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.stderr.close()
    return subprocess.CompletedProcess(argv, proc.wait(), "", err)


def test_cli_output_into_a_closed_pipe_ends_quietly(tmp_path):
    from disentangle._core.cli import BROKEN_PIPE_STATUS

    result = _closed_pipe(["-m", "disentangle.zoo", "list", "--pretrained"])
    assert (result.returncode, result.stderr) == (BROKEN_PIPE_STATUS, "")
    run = tmp_path / "sweep" / "runs" / "0123456789abcdef"
    run.mkdir(parents=True)
    (run / "metrics.json").write_text(json.dumps({"metrics": {}}))
    result = _closed_pipe(["-m", "disentangle.sweep", "status", str(tmp_path / "sweep")])
    assert (result.returncode, result.stderr) == (BROKEN_PIPE_STATUS, "")
