"""Decoding in worker processes that write straight into the caller's output buffers.

One Python process feeds NVDEC with one ``Decode`` call per packet and one kernel launch per frame,
all under one GIL: at 640x360 about 12 threads saturate it, far below what the 7 engines of an
H200 decode. Worker processes, each with its own backend and a few decode threads, lift that
ceiling. Output buffers are allocated here and opened by the workers (CUDA IPC on the GPU, shared
memory on the CPU), so decoded clips are never copied between processes.

A request carries the clips of one video; the video's index and a buffer's handle travel to a
worker only the first time it needs them. Both sides keep the same bounded most-recently-used
list of the indexes a worker holds (the worker reads requests in the order they were sent), so
they always agree on which index must be sent again. A worker that dies fails the videos it was
decoding (as bad videos, so a loader's error policy applies) and is started again.
"""

from __future__ import annotations

import builtins
import itertools
import multiprocessing
import os
import threading
import traceback
import warnings
import weakref
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from multiprocessing.connection import wait as wait_for_connections

import numpy as np

from . import errors
from ._pipeline import DecodeStats, VideoJob
from .errors import CorruptVideoError, VideoError
from .index import VideoIndex
from .transforms import TransformSpec

__all__ = ["ProcessBackend"]

INDEXES_PER_WORKER = 512
"""Video indexes each worker process keeps (most recently used)."""


class RecentKeys:
    """A bounded most-recently-used mapping; both sides of a worker apply the same operations."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._items: OrderedDict = OrderedDict()

    def use(self, key, value=None):
        """Mark ``key`` used; store ``value`` if given. Returns the stored value (None: unknown)."""
        if value is not None:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)
            return value
        if key in self._items:
            self._items.move_to_end(key)
        return self._items.get(key)


# -- shared output buffers -------------------------------------------------------------------------
@dataclass(frozen=True)
class BufferHandle:
    """What a worker needs to open one output buffer: an IPC handle or a shared-memory name."""

    number: int
    shape: tuple[int, ...]
    dtype: str
    device: str
    handle: bytes | str


class _SharedAllocation:
    """The memory behind one shared buffer; it lives as long as any view of the buffer."""

    def __init__(self, device: str, nbytes: int):
        self.device = device
        if device == "cpu":
            from multiprocessing.shared_memory import SharedMemory

            self.memory = SharedMemory(create=True, size=nbytes)
            self.handle = self.memory.name
            return
        import cupy

        with cupy.cuda.Device(int(device.split(":")[1])):
            self.memory = cupy.cuda.Memory(nbytes)  # its own allocation (not CuPy's pool), so it can be exported
            self.handle = cupy.cuda.runtime.ipcGetMemHandle(self.memory.ptr)

    def array(self, shape: tuple[int, ...], dtype: str):
        if self.device == "cpu":
            return np.ndarray(shape, dtype, buffer=self.memory.buf)
        import cupy

        view = cupy.cuda.UnownedMemory(self.memory.ptr, self.memory.size, self)  # keeps this object alive
        return cupy.ndarray(shape, dtype, cupy.cuda.MemoryPointer(view, 0))

    @staticmethod
    def release(memory, device: str) -> None:
        if device == "cpu":
            memory.unlink()


def _buffer_address(array) -> int:
    return array.data.ptr if hasattr(array.data, "ptr") else array.ctypes.data


def _nbytes(shape: tuple[int, ...], dtype: str) -> int:
    return max(1, int(np.prod(shape)) * np.dtype(dtype).itemsize)


class _OpenedBuffer:
    """A worker's view of one of the parent's buffers."""

    def __init__(self, handle: BufferHandle):
        self.device = handle.device
        if handle.device == "cpu":
            from multiprocessing.shared_memory import SharedMemory

            self._memory = SharedMemory(name=handle.handle)
            self.array = np.ndarray(handle.shape, handle.dtype, buffer=self._memory.buf)
            return
        import cupy

        with cupy.cuda.Device(int(handle.device.split(":")[1])):
            self._pointer = cupy.cuda.runtime.ipcOpenMemHandle(handle.handle)
        memory = cupy.cuda.UnownedMemory(self._pointer, _nbytes(handle.shape, handle.dtype), self)
        self.array = cupy.ndarray(handle.shape, handle.dtype, cupy.cuda.MemoryPointer(memory, 0))

    def close(self) -> None:
        self.array = None
        if self.device == "cpu":
            try:
                self._memory.close()
            except BufferError:  # a view is still alive somewhere; the mapping goes with it
                pass
        else:
            import cupy

            cupy.cuda.runtime.ipcCloseMemHandle(self._pointer)


# -- the worker process ------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Request:
    number: int
    index_key: int
    index: VideoIndex | None
    buffer: int
    buffer_handle: BufferHandle | None
    targets: tuple
    spec: TransformSpec | None


@dataclass
class _Reply:
    number: int
    error: BaseException | None = None
    stats: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)


def _serve(device: str, threads: int, skip_non_reference: bool, index_capacity: int, requests, replies) -> None:
    """Main function of a worker process: decode requests on ``threads`` threads until None arrives."""
    from ._backends import make_backend

    backend, _ = make_backend(device, skip_non_reference=skip_non_reference)
    reply_lock = threading.Lock()
    raised: list[tuple[str, str]] = []

    def record_warning(message, category, *_):
        with reply_lock:
            raised.append((category.__name__, str(message)))

    warnings.showwarning = record_warning
    warnings.simplefilter("always")  # the parent decides what is shown once

    def send(reply: _Reply) -> None:
        with reply_lock:
            reply.warnings, raised[:] = list(raised), []
            replies.send(reply)

    def run(request: _Request, index: VideoIndex, output) -> None:
        stats = DecodeStats()
        reply = _Reply(request.number)
        try:
            event = backend.decode_job(VideoJob(index, request.targets), request.spec, output, stats)
            if event is not None:
                event.synchronize()
        except VideoError as error:
            reply.error = error
        except Exception as error:  # a bug, not a bad video: the parent raises it
            details = "".join(traceback.format_exception(error))
            reply.error = RuntimeError(f"decode worker process {os.getpid()}: {details}")
        reply.stats = stats.as_dict()
        del output
        send(reply)

    indexes = RecentKeys(index_capacity)
    buffers: dict[int, _OpenedBuffer] = {}
    with ThreadPoolExecutor(threads, thread_name_prefix="vclip-decode") as pool:
        while True:
            message = requests.recv()
            if message is None:
                break
            if isinstance(message, int):  # the parent freed that buffer
                opened = buffers.pop(message, None)
                if opened is not None:
                    opened.close()
                continue
            index = indexes.use(message.index_key, message.index)
            if message.buffer_handle is not None:
                buffers[message.buffer] = _OpenedBuffer(message.buffer_handle)
            pool.submit(run, message, index, buffers[message.buffer].array)
    for opened in buffers.values():
        opened.close()


# -- the parent's side ------------------------------------------------------------------------------
class _WorkerProcess:
    """One worker process seen from the parent: its pipes, outstanding requests and what it holds."""

    def __init__(self, context, device: str, threads: int, skip_non_reference: bool, index_capacity: int):
        requests_read, self.requests = context.Pipe(duplex=False)
        self.replies, replies_write = context.Pipe(duplex=False)
        self.process = context.Process(
            target=_serve, args=(device, threads, skip_non_reference, index_capacity, requests_read, replies_write),
            name="vclip-decode-process", daemon=True,
        )
        self.process.start()
        requests_read.close()
        replies_write.close()
        self.lock = threading.Lock()
        self.outstanding: dict[int, tuple[Future, str]] = {}
        self.indexes = RecentKeys(index_capacity)
        self.opened: set[int] = set()
        self.replied = False
        self.retired = False


class ProcessBackend:
    """Decodes in ``processes`` worker processes with ``threads`` decode threads each.

    Output buffers must come from :meth:`empty`. Same interface as the in-process backends, plus
    :meth:`close`.
    """

    def __init__(self, device: str, processes: int, threads: int = 0, *, skip_non_reference: bool = True,
                 indexes_per_worker: int = INDEXES_PER_WORKER):
        if multiprocessing.current_process().daemon:
            raise ValueError(
                "decode_processes needs a process that may start children; inside DataLoader workers "
                "(daemon processes) decode with threads (decode_processes=0)"
            )
        self.device = device
        self.processes = processes
        self.threads = threads or (4 if device != "cpu" else 2)
        self.default_workers = processes * self.threads
        self.skip_non_reference = skip_non_reference
        self._index_capacity = indexes_per_worker
        self._context = multiprocessing.get_context("spawn")  # forked children must not inherit CUDA state
        self._lock = threading.Lock()
        self._numbers = itertools.count()
        self._buffers: dict[int, BufferHandle] = {}
        self._index_keys: weakref.WeakKeyDictionary[VideoIndex, int] = weakref.WeakKeyDictionary()
        self._shown_warnings: set[tuple[str, str]] = set()
        self._failed_starts = 0
        self._closing = False
        self._workers = [self._start_worker() for _ in range(processes)]
        self._wake_read, self._wake = self._context.Pipe(duplex=False)
        self._listener = threading.Thread(target=self._listen, name="vclip-decode-replies", daemon=True)
        self._listener.start()

    def _start_worker(self) -> _WorkerProcess:
        return _WorkerProcess(self._context, self.device, self.threads, self.skip_non_reference, self._index_capacity)

    # -- buffers ------------------------------------------------------------------------------
    def empty(self, shape: tuple[int, ...], dtype: str):
        """An output buffer the workers can write (shared memory or CUDA IPC)."""
        shape, dtype = tuple(int(n) for n in shape), str(np.dtype(dtype))
        allocation = _SharedAllocation(self.device, _nbytes(shape, dtype))
        array = allocation.array(shape, dtype)
        handle = BufferHandle(next(self._numbers), shape, dtype, self.device, allocation.handle)
        with self._lock:
            self._buffers[_buffer_address(array)] = handle
        # On the GPU the allocation object lives as long as any view; on the CPU the array does.
        owner = allocation if self.device != "cpu" else array
        weakref.finalize(owner, self._forget_buffer, _buffer_address(array), handle.number, allocation.memory)
        return array

    def _forget_buffer(self, address: int, number: int, memory) -> None:
        with self._lock:
            self._buffers.pop(address, None)
            workers = [] if self._closing else list(self._workers)
        for worker in workers:
            with worker.lock:
                if number in worker.opened:
                    worker.opened.discard(number)
                    try:
                        worker.requests.send(number)
                    except OSError:  # the worker is gone, and its mapping with it
                        pass
        _SharedAllocation.release(memory, self.device)

    # -- decoding -----------------------------------------------------------------------------
    def decode_job(self, job: VideoJob, spec: TransformSpec | None, output, stats: DecodeStats) -> None:
        """Decode ``job`` into ``output`` in a worker process; returns when the frames are written."""
        with self._lock:
            handle = self._buffers.get(_buffer_address(output))
            if handle is None:
                raise ValueError("output buffers of a ProcessBackend must come from its empty()")
            key = self._index_keys.get(job.index)
            if key is None:
                key = self._index_keys[job.index] = next(self._numbers)
        future: Future = Future()
        number = next(self._numbers)
        while not self._send(number, future, key, job, handle, spec):
            pass  # that worker was just replaced: pick again
        reply: _Reply = future.result()
        stats.add(**reply.stats)
        self._show_warnings(reply.warnings)
        if reply.error is not None:
            raise reply.error

    def _send(self, number: int, future: Future, key: int, job: VideoJob, handle: BufferHandle, spec) -> bool:
        """Send one request to the least busy worker; False if that worker had just died."""
        if self._closing:
            raise RuntimeError("this ProcessBackend is closed")
        with self._lock:
            worker = min(self._workers, key=lambda w: len(w.outstanding))
        with worker.lock:
            if worker.retired:
                return False
            known = worker.indexes.use(key) is not None
            if not known:
                worker.indexes.use(key, True)
            opened = handle.number in worker.opened
            worker.opened.add(handle.number)
            worker.outstanding[number] = (future, job.index.path)
            request = _Request(number, key, None if known else job.index, handle.number, None if opened else handle,
                               job.targets, spec)
            try:
                worker.requests.send(request)
            except OSError:  # it died after all: the listener fails the request and replaces it
                pass
        return True

    def _show_warnings(self, raised: list[tuple[str, str]]) -> None:
        for category_name, message in raised:
            with self._lock:
                if (category_name, message) in self._shown_warnings:
                    continue
                self._shown_warnings.add((category_name, message))
            category = getattr(errors, category_name, None) or getattr(builtins, category_name, None)
            if not (isinstance(category, type) and issubclass(category, Warning)):
                category = UserWarning
            warnings.warn(message, category, stacklevel=4)

    def _listen(self) -> None:
        """Resolve replies as they come; fail and restart a worker that died."""
        while True:
            with self._lock:  # once closing, workers that exited are no longer watched
                workers = [w for w in self._workers if not self._closing or w.process.is_alive()]
            by_connection = {worker.replies: worker for worker in workers}
            by_sentinel = {worker.process.sentinel: worker for worker in workers}
            ready = wait_for_connections([*by_connection, *by_sentinel, self._wake_read])
            if self._wake_read in ready:
                return
            for item in ready:
                if item in by_connection:
                    self._receive(by_connection[item])
            for item in ready:
                if item in by_sentinel and not by_sentinel[item].process.is_alive():
                    self._replace(by_sentinel[item])

    def _receive(self, worker: _WorkerProcess) -> None:
        try:
            while worker.replies.poll():
                reply: _Reply = worker.replies.recv()
                worker.replied = True
                with worker.lock:
                    future, _ = worker.outstanding.pop(reply.number)
                future.set_result(reply)
        except (EOFError, OSError):  # it died mid-reply: the sentinel says so next
            pass

    def _replace(self, worker: _WorkerProcess) -> None:
        self._receive(worker)  # replies sent before it died
        code = worker.process.exitcode
        with self._lock:
            if self._closing:
                return
            self._workers[self._workers.index(worker)] = self._start_worker()
            self._failed_starts = 0 if worker.replied else self._failed_starts + 1
            failed_starts = self._failed_starts
        with worker.lock:
            worker.retired = True
            lost, worker.outstanding = worker.outstanding, {}
        for number, (future, path) in lost.items():
            if failed_starts >= 3:  # not this video's fault: workers die before decoding anything
                error: Exception = RuntimeError(
                    f"decode worker processes on {self.device} keep dying before decoding anything "
                    f"(exit code {code}); see their output on stderr")
            else:
                problem = f"the decode worker process died (exit code {code}) while decoding this video"
                error = CorruptVideoError(path, problem)
            future.set_result(_Reply(number, error))

    def close(self) -> None:
        """Stop the worker processes (after the requests they hold)."""
        with self._lock:
            if self._closing:
                return
            self._closing = True
            workers = list(self._workers)
        for worker in workers:
            with worker.lock:
                try:
                    worker.requests.send(None)
                except OSError:
                    pass
        for worker in workers:
            worker.process.join(timeout=30)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
        self._wake.send(None)
        self._listener.join()
        for worker in workers:
            self._receive(worker)
            for future, path in worker.outstanding.values():
                closed = RuntimeError(f"{path}: the decoder was closed before this video was decoded")
                future.set_result(_Reply(-1, closed))
