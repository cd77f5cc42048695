"""A device the user names (``map_location``, a dataset's ``device``) is checked against the devices
of this machine before anything is read or built: one paragraph saying what is wrong, the devices
there are and what to pass instead, never torch's ``AssertionError: Torch not compiled with CUDA
enabled`` nor its list of every device type it knows (``"gpu"``)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import disentangle
import disentangle.zoo as zoo
from disentangle._core.devices import available_devices, check_device
from disentangle.config import load_config
from disentangle.data import build_dataset, from_arrays, from_torch
from disentangle.errors import ConfigError


@pytest.fixture
def no_cuda(monkeypatch):
    """This machine as one without CUDA (whatever it has): the check must say so, not torch."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, tiny_overrides):
    from disentangle.training.trainer import fit

    run = tmp_path_factory.mktemp("devices") / "run"
    fit(load_config(None, tiny_overrides(run, steps=2)))
    return run


def _pretrained_name() -> str:
    names = zoo.names(pretrained=True)
    if not names:
        pytest.skip("no pretrained model in the manifests")
    return names[0]


def test_devices_of_this_machine_pass_and_come_back_as_torch_devices():
    assert available_devices()[0] == "cpu"
    assert check_device("cpu") == torch.device("cpu")
    assert check_device(torch.device("cpu")) == torch.device("cpu")
    for device in available_devices():
        assert check_device(device) == torch.device(device)


def test_cuda_without_cuda_is_one_paragraph_naming_the_devices_here(no_cuda):
    for device in ("cuda", "cuda:0", torch.device("cuda")):
        with pytest.raises(ConfigError) as info:
            check_device(device, "map_location")
        message = str(info.value)
        assert "map_location is 'cuda" in message and "CUDA is not available on this machine" in message
        assert "Use one of the devices of this machine (cpu" in message and "map_location='cpu'" in message
        assert "\n" not in message


def test_an_unknown_device_name_is_refused_with_the_names_there_are():
    for device in ("gpu", "GPU:0", "", None, 1.5, True):
        with pytest.raises(ConfigError) as info:
            check_device(device)
        message = str(info.value)
        assert "which is not a device name" in message and "cuda (a CUDA GPU" in message
        assert "Expected one of" not in message and "device='cpu'" in message


def test_a_cuda_index_beyond_the_gpus_present_is_refused(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert check_device("cuda:1") == torch.device("cuda:1")
    with pytest.raises(ConfigError, match=r"'cuda:2', but this machine has 2 CUDA devices \(cuda:0 to cuda:1\)"):
        check_device("cuda:2")


def test_a_device_type_torch_knows_but_this_machine_lacks_is_refused():
    with pytest.raises(ConfigError, match="torch has no usable 'meta' device on this machine"):
        check_device("meta")


@pytest.mark.parametrize("device, fragment", [("cuda", "CUDA is not available on this machine"),
                                              ("gpu", "which is not a device name")])
def test_every_loader_checks_its_device_first(device, fragment, no_cuda, tiny_run, tiny_dataset_name):
    """disentangle.load of a run folder, a checkpoint file, zoo:NAME and a weight file, zoo.load,
    build_dataset, from_arrays and from_torch: the same paragraph, before anything is read."""
    name = _pretrained_name()
    weight_file = zoo.fetch(name, progress=False)
    images = np.zeros((4, 8, 8), np.uint8)
    calls = {
        "run folder": lambda: disentangle.load(tiny_run, map_location=device),
        "checkpoint": lambda: disentangle.load(tiny_run / "checkpoint.pt", map_location=device),
        "zoo:NAME": lambda: disentangle.load(f"zoo:{name}", map_location=device),
        "weight file": lambda: disentangle.load(weight_file, map_location=device),
        "zoo.load": lambda: zoo.load(name, map_location=device),
        "build_dataset": lambda: build_dataset({"name": tiny_dataset_name}, device=device),
        "from_arrays": lambda: from_arrays(images, device=device),
        "from_torch": lambda: from_torch([torch.zeros(1, 8, 8, dtype=torch.uint8)] * 3, device=device),
    }
    for what, call in calls.items():
        with pytest.raises(ConfigError, match=fragment) as info:
            call()
        assert "devices of this machine (cpu" in str(info.value), what


@pytest.mark.parametrize("tool", ["disentangle.evaluate", "disentangle.visualize"])
@pytest.mark.parametrize("device, fragment", [("cuda", "CUDA is not available on this machine"),
                                              ("gpu", "which is not a device name")])
def test_the_command_line_tools_check_their_device_before_loading(tool, device, fragment, no_cuda, tmp_path,
                                                                  monkeypatch, capsys):
    """evaluate --device gpu ended in torch's RuntimeError traceback: one paragraph and exit 2 now,
    before the model is loaded (the run folder does not even exist)."""
    import importlib

    import disentangle.loading

    def no_loading(*args, **kwargs):
        raise AssertionError("loaded before the device was checked")

    monkeypatch.setattr(disentangle.loading, "load", no_loading)
    monkeypatch.setattr(disentangle, "load", no_loading)
    main = importlib.import_module(f"{tool}.__main__" if tool.endswith("visualize") else tool).main
    args = [str(tmp_path / "no run here"), "--device", device]
    try:
        code = main(args)
    except SystemExit as exited:
        code = exited.code
    assert code == 2
    err = capsys.readouterr().err
    assert fragment in err and "--device cpu" in err and "Traceback" not in err


def test_the_training_device_is_checked_like_every_other(monkeypatch):
    """train.device: an index that is not a number is refused with the config's other problems; a GPU
    index beyond this machine's, or CUDA where there is none, is the shared paragraph, with the fix
    written as an override; a CPU run asks torch nothing about GPUs."""
    from disentangle.training.runtime import resolve_device

    with pytest.raises(ConfigError, match=r"train.device is 'cuda:abc'. Did you mean 'cuda'\? Valid choices: auto, cpu"):
        load_config(None, ["train.device=cuda:abc"])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(ConfigError, match=r"train.device is 'cuda:5', but this machine has 1 CUDA device \(cuda:0\)"):
        resolve_device("cuda:5")
    assert resolve_device("cuda:0") == torch.device("cuda", 0)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match=r"but CUDA is not available on this machine: .* e.g. train.device=cpu"):
        resolve_device("cuda")

    def asked(*args):
        raise AssertionError("a CPU run asked torch about CUDA")

    monkeypatch.setattr(torch.cuda, "is_available", asked)
    assert resolve_device("cpu") == torch.device("cpu") and check_device("cpu") == torch.device("cpu")
