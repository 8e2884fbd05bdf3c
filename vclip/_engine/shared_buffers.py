"""Output buffers that decode worker processes write into: allocated by the parent, opened by the
workers, never copied between them.

On the CPU a buffer is a POSIX shared-memory segment (opened by name); on the GPU a CUDA allocation
of its own, outside CuPy's pool (opened through a CUDA IPC handle). The difference lives in the two
allocation and the two view classes below, chosen once from the device; :class:`BufferRegistry`
numbers the buffers of one or more process backends, and when a buffer is garbage-collected it
tells every member's workers to close their mapping of it and releases the memory.
"""

from __future__ import annotations

import itertools
import queue
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._device import Device

__all__ = ["BufferHandle", "BufferRegistry", "open_buffer"]


@dataclass(frozen=True)
class BufferHandle:
    """What a worker needs to open one output buffer: an IPC handle or a shared-memory name."""

    number: int
    shape: tuple[int, ...]
    dtype: str
    device: Device
    handle: bytes | str


def _nbytes(shape: tuple[int, ...], dtype: str) -> int:
    return max(1, int(np.prod(shape)) * np.dtype(dtype).itemsize)


def buffer_address(array) -> int:
    """Where a NumPy or CuPy array's data starts (the key a buffer is known by)."""
    return array.data.ptr if hasattr(array.data, "ptr") else array.ctypes.data


def _unlink(memory) -> None:
    try:
        memory.unlink()
    except FileNotFoundError:  # already unlinked by the owner's close
        pass


class _HostAllocation:
    """A shared-memory segment; its mapping lives as long as the array over it."""

    def __init__(self, nbytes: int):
        from multiprocessing.shared_memory import SharedMemory

        self._memory = SharedMemory(create=True, size=nbytes)
        self.handle: bytes | str = self._memory.name

    def array(self, shape: tuple[int, ...], dtype: str) -> np.ndarray:
        return np.ndarray(shape, dtype, buffer=self._memory.buf)

    def lifetime(self, array) -> Any:
        return array

    def release(self) -> Callable[[], None]:
        """What frees the memory: unlinking the segment's name (a callable that does not hold this object)."""
        memory = self._memory
        return lambda: _unlink(memory)


class _CudaAllocation:
    """A CUDA allocation exported for IPC; it lives as long as any view of it (CuPy frees it then)."""

    def __init__(self, device: Device, nbytes: int):
        import cupy

        with cupy.cuda.Device(device.index):
            self._memory = cupy.cuda.Memory(nbytes)  # its own allocation (not CuPy's pool), so it can be exported
            self.handle = cupy.cuda.runtime.ipcGetMemHandle(self._memory.ptr)

    def array(self, shape: tuple[int, ...], dtype: str):
        import cupy

        view = cupy.cuda.UnownedMemory(self._memory.ptr, self._memory.size, self)  # keeps this object alive
        return cupy.ndarray(shape, dtype, cupy.cuda.MemoryPointer(view, 0))

    def lifetime(self, array) -> Any:
        return self

    def release(self) -> Callable[[], None] | None:
        return None  # freed with the allocation object


def _allocate(device: Device, nbytes: int) -> _HostAllocation | _CudaAllocation:
    return _CudaAllocation(device, nbytes) if device.is_cuda else _HostAllocation(nbytes)


class _HostView:
    """A worker's view of a shared-memory buffer of the parent."""

    def __init__(self, handle: BufferHandle):
        from multiprocessing.shared_memory import SharedMemory

        self._memory = SharedMemory(name=str(handle.handle))
        self.array: Any = np.ndarray(handle.shape, handle.dtype, buffer=self._memory.buf)

    def close(self) -> None:
        self.array = None
        try:
            self._memory.close()
        except BufferError:  # a view is still alive somewhere; the mapping goes with it
            pass


class _CudaView:
    """A worker's view of a CUDA buffer of the parent, through its IPC handle."""

    def __init__(self, handle: BufferHandle):
        import cupy

        with cupy.cuda.Device(handle.device.index):
            self._pointer = cupy.cuda.runtime.ipcOpenMemHandle(handle.handle)
        memory = cupy.cuda.UnownedMemory(self._pointer, _nbytes(handle.shape, handle.dtype), self)
        self.array: Any = cupy.ndarray(handle.shape, handle.dtype, cupy.cuda.MemoryPointer(memory, 0))

    def close(self) -> None:
        import cupy

        self.array = None
        cupy.cuda.runtime.ipcCloseMemHandle(self._pointer)


def open_buffer(handle: BufferHandle) -> _HostView | _CudaView:
    """Open, in a worker, the buffer ``handle`` names; ``.array`` is the view, ``close()`` unmaps it."""
    return _CudaView(handle) if handle.device.is_cuda else _HostView(handle)


class BufferRegistry:
    """The output buffers of a process backend, ``owner``: numbered, and when one is freed the
    owner's workers close their mapping of it (``owner.close_in_workers(number)``)."""

    def __init__(self, owner: Any):
        self.lock = threading.Lock()
        self._numbers = itertools.count()
        self._handles: dict[int, BufferHandle] = {}  # by the array's address
        self._pending_release: dict[int, Callable[[], None]] = {}  # done by the owner's close at the latest
        self._owner = weakref.ref(owner)  # the owner holds the registry
        # Buffers garbage-collected and not yet forgotten: a finalizer runs wherever the collector
        # does, possibly in a thread holding one of the locks forget_freed() takes, so it only queues.
        self._freed: queue.SimpleQueue[tuple[int, int, Callable[[], None] | None]] = queue.SimpleQueue()

    def empty(self, device: Device, shape: tuple[int, ...], dtype: str):
        """A new buffer on ``device`` that workers can open by its handle."""
        self.forget_freed()
        shape, dtype = tuple(int(n) for n in shape), str(np.dtype(dtype))
        allocation = _allocate(device, _nbytes(shape, dtype))
        array = allocation.array(shape, dtype)
        release = allocation.release()
        with self.lock:
            handle = BufferHandle(next(self._numbers), shape, dtype, device, allocation.handle)
            self._handles[buffer_address(array)] = handle
            if release is not None:
                self._pending_release[handle.number] = release
        weakref.finalize(allocation.lifetime(array), self._freed.put, (buffer_address(array), handle.number, release))
        return array

    def handle_of(self, array) -> BufferHandle | None:
        """The handle of a buffer made by :meth:`empty`, or None."""
        with self.lock:
            return self._handles.get(buffer_address(array))

    def forget_freed(self) -> None:
        """Forget the buffers freed since the last call (call it holding none of the locks)."""
        while True:
            try:
                address, number, release = self._freed.get_nowait()
            except queue.Empty:
                return
            with self.lock:
                self._handles.pop(address, None)
                self._pending_release.pop(number, None)
            owner = self._owner()
            if owner is not None:
                owner.close_in_workers(number)
            if release is not None:
                release()

    def release_all(self) -> None:
        """Release the memory of every buffer still alive that needs it (the owner closes: the arrays
        stay usable in this process, workers can no longer open them)."""
        with self.lock:
            releases, self._pending_release = list(self._pending_release.values()), {}
        for release in releases:
            release()
