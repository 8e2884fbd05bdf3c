"""Device resolution as PyTorch means it: "cuda" is the process's current CUDA device (set by
torch.cuda.set_device, else LOCAL_RANK under torchrun, else 0); "cuda:N" is explicit; "auto"
falls back silently, "cuda" with a FallbackWarning. NVDEC's presence is stubbed: no GPU here."""

import pytest
from helpers import require_extra

import vclip
import vclip._device as device_module
from vclip._device import CPU, Device, resolve_device

torch = require_extra("torch")


@pytest.fixture
def gpus(monkeypatch):
    """Pretend NVDEC is usable on ``count`` devices and torch has not touched CUDA."""

    def pretend(count: int) -> None:
        monkeypatch.setattr(device_module, "gpu_unavailable_reason", lambda: None)
        monkeypatch.setattr(device_module, "cuda_device_count", lambda: count)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
        monkeypatch.delenv("LOCAL_RANK", raising=False)

    return pretend


def test_cuda_is_device_zero_when_nothing_says_otherwise(gpus):
    gpus(2)
    assert resolve_device("cuda").device == Device("cuda", 0)
    assert resolve_device("auto").device == Device("cuda", 0)


def test_local_rank_picks_the_device_under_torchrun(gpus, monkeypatch):
    gpus(2)
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert resolve_device("cuda").device == Device("cuda", 1)
    assert resolve_device("auto").device == Device("cuda", 1)
    assert resolve_device("cuda:0").device == Device("cuda", 0)  # explicit wins


def test_torch_current_device_wins_once_set(gpus, monkeypatch):
    gpus(2)
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    assert resolve_device("cuda").device == Device("cuda", 1)
    assert str(resolve_device(torch.device("cuda", 0)).device) == "cuda:0"


def test_a_device_that_does_not_exist_is_refused(gpus, monkeypatch):
    gpus(1)
    with pytest.raises(vclip.ArgumentError, match=r"device \('cuda:3'\) must be a CUDA device that exists"):
        resolve_device("cuda:3")
    monkeypatch.setenv("LOCAL_RANK", "2")
    with pytest.raises(ValueError, match="cuda:2"):
        resolve_device("cuda")
    monkeypatch.setenv("LOCAL_RANK", "two")
    with pytest.raises(ValueError, match=r"LOCAL_RANK \('two'\) must be an integer"):
        resolve_device("cuda")


@pytest.mark.parametrize("text", ["cpu", "CPU", " cpu "])
def test_cpu_in_any_case(text):
    assert resolve_device(text).device == CPU and not resolve_device(text).fell_back_to_cpu


@pytest.mark.parametrize("text", ["CUDA", "Cuda:0"])
def test_gpu_request_without_gpu_falls_back_with_one_warning(monkeypatch, text):
    monkeypatch.setattr(device_module, "gpu_unavailable_reason", lambda: "no CUDA device")
    with pytest.warns(vclip.FallbackWarning, match="no CUDA device"):
        resolved = resolve_device(text)
    assert resolved.device == CPU and resolved.fell_back_to_cpu
    assert not resolve_device("auto").fell_back_to_cpu  # auto is not a request for the GPU


@pytest.mark.parametrize("bad", ["gpu", "cuda:", "cuda:-1", 0, None])
def test_bad_devices_are_named(bad):
    with pytest.raises(ValueError, match="must be 'cpu', 'cuda', 'cuda:N' or 'auto'"):
        resolve_device(bad)
