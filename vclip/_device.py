"""Where decoding runs: a device request (``"cpu"``, ``"cuda"``, ``"cuda:N"``, ``"auto"``)
resolved once, at a public entry point, into a :class:`Device`. Below the entry points every
function takes a :class:`Device`; a device string appears only at the edges (public arguments, the
command line, ``repr`` and JSON), and only this module reads one (:func:`parse_device`).

``"cuda"`` and ``"auto"`` mean the process's current CUDA device, as PyTorch means it: the device
``torch.cuda.set_device`` chose once torch has initialised CUDA, else ``LOCAL_RANK`` (set by
torchrun for each process of a node), else device 0. ``"cuda:N"`` is explicit.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import warnings
from dataclasses import dataclass
from typing import Literal

from .errors import FallbackWarning, fail

__all__ = [
    "CPU", "Device", "DeviceRequest", "ResolvedDevice", "cuda_device_count", "current_cuda_index",
    "gpu_unavailable_reason", "parse_device", "resolve_device",
]


@dataclass(frozen=True)
class Device:
    """A device to decode on: ``Device("cpu")`` or ``Device("cuda", N)``; ``str()`` gives ``"cpu"`` / ``"cuda:N"``.

    ``Device("cuda")`` (no index, ``str()`` ``"cuda"``) is the current CUDA device of the process
    that will decode, resolved there: what a Ray task or actor given a share of a GPU decodes on.
    """

    type: Literal["cpu", "cuda"]
    index: int | None = None

    @property
    def is_cuda(self) -> bool:
        return self.type == "cuda"

    def __str__(self) -> str:
        if self.type == "cpu":
            return "cpu"
        return "cuda" if self.index is None else f"cuda:{self.index}"


CPU = Device("cpu")


@dataclass(frozen=True)
class ResolvedDevice:
    """The device to decode on, and why a GPU request fell back to the CPU (None when it did not)."""

    device: Device
    fallback_reason: str | None = None

    @property
    def fell_back_to_cpu(self) -> bool:
        return self.fallback_reason is not None


def gpu_unavailable_reason() -> str | None:
    """Why NVDEC decoding cannot run here, or None when it can."""
    try:
        import cupy
        import PyNvVideoCodec  # noqa: F401
    except Exception as error:  # ImportError, or the driver libraries failing to load
        return f"PyNvVideoCodec/CuPy not usable ({type(error).__name__}: {error})"
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "no CUDA device"
    except Exception as error:
        return f"no CUDA device ({error})"
    return None


def cuda_device_count() -> int:
    """CUDA devices this process sees (after CUDA_VISIBLE_DEVICES)."""
    import cupy

    return int(cupy.cuda.runtime.getDeviceCount())


def current_cuda_index() -> int:
    """The process's current CUDA device, as PyTorch means it (see the module docstring)."""
    torch = sys.modules.get("torch")  # only if the caller uses torch: never import it here
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        return int(torch.cuda.current_device())
    local_rank = os.environ.get("LOCAL_RANK", "").strip()
    if local_rank:
        if not local_rank.isdigit():
            raise fail("LOCAL_RANK", local_rank, "an integer >= 0 (it picks the CUDA device of this process)")
        return int(local_rank)
    return 0


@dataclass(frozen=True)
class DeviceRequest:
    """A device request checked but not resolved (:func:`parse_device`): ``kind`` is ``"cpu"``,
    ``"cuda"`` or ``"auto"``; ``index`` only for ``"cuda:N"``."""

    kind: Literal["cpu", "cuda", "auto"]
    index: int | None = None

    @property
    def is_auto(self) -> bool:
        """``"auto"``: the GPU where NVDEC is usable, else the CPU."""
        return self.kind == "auto"

    @property
    def may_use_gpu(self) -> bool:
        """``"auto"``, ``"cuda"`` or ``"cuda:N"``: a GPU is taken where there is one."""
        return self.kind != "cpu"

    @property
    def names_cuda(self) -> bool:
        """``"cuda"`` or ``"cuda:N"``: the GPU insisted on, so that serving it on the CPU is a fallback."""
        return self.kind == "cuda"

    def __str__(self) -> str:
        return f"cuda:{self.index}" if self.index is not None else self.kind


_PLAIN_REQUESTS = {"cpu": DeviceRequest("cpu"), "cuda": DeviceRequest("cuda"), "auto": DeviceRequest("auto")}


def parse_device(device: object) -> DeviceRequest:
    """A request (a string, a :class:`Device` or a ``torch.device``) checked but not resolved.

    Raises:
        ArgumentError: Not a device request (see :func:`resolve_device`).
    """
    if isinstance(device, Device):
        return DeviceRequest(device.type, device.index)
    if type(device).__name__ == "device" and hasattr(device, "type") and hasattr(device, "index"):  # torch.device
        return parse_device(str(device))
    text = str(device).strip().lower() if isinstance(device, str) else None
    if text in _PLAIN_REQUESTS:
        return _PLAIN_REQUESTS[text]
    if text is not None and text.startswith("cuda:") and text[5:].isdigit():
        return DeviceRequest("cuda", int(text[5:]))
    raise fail("device", device, "'cpu', 'cuda', 'cuda:N' or 'auto'")


def _gpu_stack_installed() -> bool:
    """Whether PyNvVideoCodec or CuPy is installed (the GPU extra): then a GPU was meant to be used."""
    return any(importlib.util.find_spec(name) is not None for name in ("PyNvVideoCodec", "cupy"))


def resolve_device(device: object, *, warn: bool = True) -> ResolvedDevice:
    """Resolve a device request once.

    ``"auto"`` (every public function's default) gives the current CUDA device when NVDEC is
    usable, else the CPU: silently where the GPU extra (PyNvVideoCodec, CuPy) is not installed, a
    CPU install; where it is installed but cannot be used (no driver, no device), as a fallback.
    ``"cuda"``/``"cuda:N"`` fall back to the CPU when NVDEC is not usable. A fallback carries its
    reason and, with ``warn``, gives one :class:`~vclip.FallbackWarning` saying so. A
    :class:`Device` resolves to itself where it is usable (``Device("cuda")``, without an index, to
    the current CUDA device), so that a function handed one may resolve it again where it decodes.

    Raises:
        ArgumentError: ``device`` is not "cpu", "cuda", "cuda:N", "auto", a :class:`Device` or a
            ``torch.device``; or ``cuda:N`` names a device that does not exist.
    """
    request = parse_device(device)
    if not request.may_use_gpu:
        return ResolvedDevice(CPU)
    reason = gpu_unavailable_reason()
    if reason:
        if request.is_auto and not _gpu_stack_installed():
            return ResolvedDevice(CPU)
        if warn:
            warnings.warn(f"device={_shown(device)} requested but {reason}; decoding on the CPU", FallbackWarning,
                          stacklevel=3)
        return ResolvedDevice(CPU, reason)
    index = request.index
    explicit = index is not None
    if index is None:
        index = current_cuda_index()
    count = cuda_device_count()
    if index >= count:
        shown = device if explicit else f"{device} -> the current CUDA device, cuda:{index}"
        raise fail("device", shown,
                   f"a CUDA device that exists (this process sees {count}: cuda:0 to cuda:{count - 1})")
    return ResolvedDevice(Device("cuda", index))


def _shown(device: object) -> str:
    """A request as a message shows it: ``'cuda'``, as the user wrote it or as a :class:`Device` reads."""
    return repr(str(device)) if isinstance(device, Device) else repr(device)
