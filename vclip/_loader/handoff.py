"""Handing batches from the decode workers to the training loop: a ring of reused output buffers,
torch views of them (no copy), and the CUDA stream synchronisation in both directions.

On the GPU, decode workers write a batch on their own CUDA streams and return events. Before the
batch is handed over, the consumer's current torch stream waits on those events (no host wait).
When the consumer moves past a batch, an event is recorded on its current stream; the buffer is
written again only after that event has fired, so work the training step queued on the batch is
finished before the buffer is refilled, and only if no one holds the batch any more.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .._device import Device

__all__ = ["BufferRing", "CpuHandoff", "CudaHandoff", "make_handoff", "storage_uses", "views_alive"]


class CpuHandoff:
    """Hand-over on the CPU: NumPy buffers shared with torch, nothing to synchronise."""

    def as_tensor(self, array: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(array)

    def labels(self, labels: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(labels)

    def consumer_waits(self, events: list) -> None:
        """Make the consumer wait for the writes of a batch (CPU writes are already done)."""

    def release_event(self):
        """An event marking where the consumer stopped using a batch (None: nothing to wait for)."""
        return None

    def wait(self, events: list) -> None:
        """Block until ``events`` have fired."""

    def synchronize(self) -> None:
        """Block until all work on the device is done."""

    def memory_sample(self) -> dict[str, int]:
        return {}


class CudaHandoff:
    """Hand-over on CUDA device ``device_id``: CuPy buffers seen by torch through DLPack."""

    def __init__(self, device_id: int):
        import cupy

        if not torch.cuda.is_available():
            raise RuntimeError(
                f"the loader decodes on cuda:{device_id} but this torch build has no CUDA "
                f"(torch {torch.__version__}); install a CUDA build of torch or use device='cpu'"
            )
        self._cupy = cupy
        self.device_id = device_id
        self.device = torch.device("cuda", device_id)

    def as_tensor(self, array) -> torch.Tensor:
        return torch.from_dlpack(array)

    def labels(self, labels: np.ndarray) -> torch.Tensor:
        # From pinned memory, asynchronously on the consumer's stream: no host wait for the GPU.
        return torch.from_numpy(labels).pin_memory().to(self.device, non_blocking=True)

    def _consumer_stream(self):
        stream = torch.cuda.current_stream(self.device)
        from_external = getattr(self._cupy.cuda.Stream, "from_external", None)
        if from_external is not None and hasattr(stream, "__cuda_stream__"):
            return from_external(stream)
        return self._cupy.cuda.ExternalStream(stream.cuda_stream, self.device_id)  # CuPy < 14

    def consumer_waits(self, events: list) -> None:
        with self._cupy.cuda.Device(self.device_id):
            stream = self._consumer_stream()
            for event in events:
                stream.wait_event(event)

    def release_event(self):
        with self._cupy.cuda.Device(self.device_id):
            event = self._cupy.cuda.Event(disable_timing=True)
            event.record(self._consumer_stream())
        return event

    def wait(self, events: list) -> None:
        for event in events:
            event.synchronize()

    def synchronize(self) -> None:
        self._cupy.cuda.Device(self.device_id).synchronize()

    def memory_sample(self) -> dict[str, int]:
        """Device memory in use (all processes), CuPy's pool, and torch's allocator (allocated and
        reserved from the device), in bytes."""
        with self._cupy.cuda.Device(self.device_id):
            free, total = self._cupy.cuda.runtime.memGetInfo()
        pool = self._cupy.get_default_memory_pool()
        return {
            "device_used_bytes": int(total - free),
            "cupy_pool_used_bytes": int(pool.used_bytes()),
            "cupy_pool_total_bytes": int(pool.total_bytes()),
            "torch_allocated_bytes": int(torch.cuda.memory_allocated(self.device)),
            "torch_reserved_bytes": int(torch.cuda.memory_reserved(self.device)),
        }


def make_handoff(device: Device) -> CpuHandoff | CudaHandoff:
    """The hand-over for a resolved device."""
    return CudaHandoff(int(device.index or 0)) if device.is_cuda else CpuHandoff()


def storage_uses(tensor: torch.Tensor) -> int | None:
    """How many tensors (views included) share ``tensor``'s storage, or None where torch does not say."""
    count = getattr(torch._C, "_storage_Use_Count", None)
    if count is None:  # pragma: no cover - torch builds without it
        return None
    return int(count(tensor.untyped_storage()._cdata))


def views_alive(tensor: torch.Tensor | None, uses: int | None) -> bool:
    """Whether views of ``tensor`` handed over since its storage counted ``uses`` (:func:`storage_uses`
    when no batch held it) are still referenced; False where there is no tensor or torch does not say."""
    return tensor is not None and uses is not None and storage_uses(tensor) != uses


class BufferRing:
    """``count`` output batch buffers used in turn, each with a torch tensor over it.

    Each buffer keeps the events of its last use (the writes of a batch never handed over, or the
    consumer's release); :meth:`prepare` waits for them before the buffer is written again. Every
    hand-over is a view of the buffer's tensor (:meth:`tensor`); when the buffer comes round again
    and a view of it is still alive (a batch kept in a list, or for logging), the kept batch keeps
    that buffer and the ring allocates a new one (:attr:`replaced` counts them): a kept batch costs
    memory, never its pixels. The ring holds three buffers more than the batches queued ahead, so
    the batch the training loop held last is no longer referenced from its loop when its buffer
    comes round.
    """

    def __init__(self, count: int, allocate: Callable[[], Any], handoff: CpuHandoff | CudaHandoff):
        self.count = count
        self._allocate = allocate
        self._handoff = handoff
        self._arrays: list = [None] * count
        self._tensors: list = [None] * count
        self._uses: list[int | None] = [None] * count  # storage uses of each tensor when no batch holds it
        self._waits: list[list] = [[] for _ in range(count)]
        self._next = 0
        self._lock = threading.Lock()
        self.replaced = 0
        self.audio: Any = None  # the AudioBuffers of the same slots, when batches carry audio

    @property
    def allocated(self) -> int:
        """Buffers the ring holds now (each slot allocates its buffer when first used)."""
        with self._lock:
            return sum(array is not None for array in self._arrays)

    def next_slot(self, used: int | None = None) -> int:
        """The buffer of the next batch, in turn among the first ``used`` slots (default all): a
        loader whose batches in flight stay few allocates no buffer for the depth it never reached."""
        with self._lock:
            limit = min(self.count, used or self.count)
            slot = self._next if self._next < limit else 0
            self._next = slot + 1
            return slot

    def prepare(self, slot: int):
        """The buffer ``slot``, once its last use is over (a new one when a kept batch holds it)."""
        with self._lock:
            waits, self._waits[slot] = self._waits[slot], []
        self._handoff.wait(waits)
        kept = views_alive(self._tensors[slot], self._uses[slot]) or (self.audio is not None and self.audio.kept(slot))
        if kept:  # a batch handed over from this buffer is still referenced: it keeps the buffer
            with self._lock:
                self.replaced += 1
            self._arrays[slot] = self._tensors[slot] = None
            if self.audio is not None:
                self.audio.forget(slot)
        if self._arrays[slot] is None:
            array = self._allocate()
            self._arrays[slot], self._tensors[slot] = array, self._handoff.as_tensor(array)
            self._uses[slot] = storage_uses(self._tensors[slot])
        return self._arrays[slot]

    def tensor(self, slot: int, count: int) -> torch.Tensor:
        """A view of the first ``count`` samples of buffer ``slot``, for the consumer."""
        return self._tensors[slot][:count]

    def set_waits(self, slot: int, events: list) -> None:
        """Events to wait for before ``slot`` is written again."""
        with self._lock:
            self._waits[slot] = list(events)

    @property
    def allocated_bytes(self) -> int:
        return sum(int(array.nbytes) for array in self._arrays if array is not None)
