"""Decoding in worker processes that write straight into the caller's output buffers.

One Python process feeds NVDEC with one ``Decode`` call per packet and one kernel launch per frame,
all under one GIL: at 640x360 about 12 threads saturate it, far below what the 7 engines of an
H200 decode. Worker processes, each with its own backend and a few decode threads, lift that
ceiling. Output buffers are allocated here and opened by the workers (:mod:`vclip._engine.shared_buffers`:
CUDA IPC on the GPU, shared memory on the CPU), so decoded clips are never copied between processes.

A request carries the clips of one video; the video's index and a buffer's handle travel to a
worker only the first time it needs them. Both sides keep the same bounded most-recently-used
list of the indexes a worker holds (the worker reads requests in the order they were sent), so
they always agree on which index must be sent again. A worker that dies (a native crash, the
out-of-memory killer) is started again and every video it held is sent again: those waiting in it
to a worker as usual, those it was decoding each to a worker that decodes nothing else meanwhile.
A video whose worker dies again while decoding it alone is reported (as a bad video, so a loader's
error policy applies): only a video that kills workers repeatedly is lost. A video that takes
longer than ``decode_timeout`` seconds gets its worker killed and replaced, the other videos that
worker held are sent again.

Workers are fresh interpreters that run :func:`serve_worker` (:mod:`vclip._jobs.child_process`), not
through multiprocessing's spawn: they import no module of the user's, so a script needs no
``if __name__ == "__main__":`` guard for them. Workers never outlive their parent: they ignore
Ctrl-C (the parent shuts them down), exit quietly when the parent's pipe closes, and watch the
parent's pid, so a parent killed with SIGKILL leaves no orphans. The parent shuts its workers down
at interpreter exit if nobody called ``close()``,
and shared memory is unlinked on close and at exit.
"""

from __future__ import annotations

import atexit
import itertools
import multiprocessing
import os
import signal
import threading
import time
import traceback
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from multiprocessing.connection import wait as wait_for_connections
from typing import Any

from .._bytes.remote import add_remote_reads, take_remote_reads
from .._bytes.sources import is_shareable
from .._device import Device
from .._index.record import VideoIndex
from .._jobs.child_process import ChildProcess, RaisedWarnings, child_pipes, watch_parent
from ..errors import CorruptVideoError, VideoError
from .contract import Backend
from .pipeline import Conversion, DecodeStats, VideoRequest
from .shared_buffers import BufferHandle, BufferRegistry, open_buffer

__all__ = ["ProcessBackend"]

INDEXES_PER_WORKER = 512
"""Video indexes each worker process keeps (most recently used)."""

THREADS_PER_PROCESS = {"cuda": 4, "cpu": 2}
"""Decode threads of each worker process when none are asked for, on the GPU and on the CPU."""

DEATHS_PER_VIDEO = 2
"""Deaths of decode workers while decoding one video (the last with no other video in the worker)
after which the video is reported instead of sent again."""

DECODE_TIMEOUT_SECONDS = 120.0
"""Default seconds one video's decode may take in a worker process before the worker is considered
stuck, killed and replaced."""


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


# -- the worker process ------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Request:
    number: int
    index_key: int
    index: VideoIndex | None
    buffer: int
    buffer_handle: BufferHandle | None
    targets: tuple
    conversion: Conversion


@dataclass(frozen=True)
class _Started:
    """A worker began decoding request ``number`` (its decode timeout runs from now)."""

    number: int


@dataclass(frozen=True)
class _Ready:
    """A worker's backend is up (on the GPU its CUDA context): it may be sent jobs without their
    waiting for its start."""


@dataclass
class _Reply:
    number: int
    error: BaseException | None = None
    stats: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)
    remote_reads: dict = field(default_factory=dict)  # what the worker read from URLs since its last reply


def _serve(factory: Callable[[], Backend], threads: int, index_capacity: int, parent_pid: int, requests,
           replies) -> None:
    """Main function of a worker process: decode requests on ``threads`` threads until None arrives
    or the parent goes away."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group: the parent decides
    watch_parent(parent_pid)
    backend = factory()
    backend.empty((1,), "uint8")  # brings its device up (a CUDA context) before the first job
    try:
        replies.send(_Ready())
    except OSError:  # the parent is gone
        return
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
            try:
                replies.send(reply)
            except OSError:  # the parent is gone
                os._exit(0)

    def run(request: _Request, index: VideoIndex, output) -> None:
        with reply_lock:
            try:
                replies.send(_Started(request.number))
            except OSError:  # the parent is gone
                os._exit(0)
        stats = DecodeStats()
        reply = _Reply(request.number)
        try:
            completion = backend.decode_video(VideoRequest(index, request.targets), request.conversion, output, stats)
            if completion is not None:
                completion.synchronize()
        except VideoError as error:
            reply.error = error
        except Exception as error:  # a bug, not a bad video: the parent raises it
            details = "".join(traceback.format_exception(error))
            reply.error = RuntimeError(f"{index.path}: decode worker process {os.getpid()}: {details}")
        reply.stats = stats.as_dict()
        reply.remote_reads = take_remote_reads()
        del output
        send(reply)

    indexes = RecentKeys(index_capacity)
    buffers: dict[int, Any] = {}  # opened buffers by number
    with ThreadPoolExecutor(threads, thread_name_prefix="vclip-decode") as pool:
        while True:
            try:
                message = requests.recv()
            except (EOFError, OSError):  # the parent closed its end without saying goodbye
                break
            if message is None:
                break
            if isinstance(message, int):  # the parent freed that buffer
                opened = buffers.pop(message, None)
                if opened is not None:
                    opened.close()
                continue
            index = indexes.use(message.index_key, message.index)
            if message.buffer_handle is not None:
                buffers[message.buffer] = open_buffer(message.buffer_handle)
            pool.submit(run, message, index, buffers[message.buffer].array)
    for opened in buffers.values():
        opened.close()


def serve_worker() -> None:
    """Main function of a worker process that :class:`ProcessBackend` started."""
    requests, replies, parent_pid = child_pipes()
    try:
        factory, threads, index_capacity = requests.recv()
    except (EOFError, OSError):  # the parent is gone
        return
    _serve(factory, threads, index_capacity, parent_pid, requests, replies)


# -- the parent's side ------------------------------------------------------------------------------
@dataclass
class _Pending:
    """A request sent to a worker and not answered yet: enough to send it again."""

    future: Future
    job: VideoRequest
    index_key: int
    buffer: BufferHandle
    conversion: Conversion
    started_at: float | None = None
    timed_out: bool = False
    deaths: list[int | None] = field(default_factory=list)  # exit codes of workers that died decoding it


class _WorkerProcess:
    """One worker process seen from the parent: its pipes, outstanding requests and what it holds."""

    def __init__(self, factory: Callable[[], Backend], threads: int, index_capacity: int):
        self.process = ChildProcess(f"{__name__}:serve_worker")
        self.requests, self.replies = self.process.requests, self.process.replies
        self.requests.send((factory, threads, index_capacity))  # what the worker serves with
        self.lock = threading.Lock()
        self.outstanding: dict[int, _Pending] = {}
        self.indexes = RecentKeys(index_capacity)
        self.opened: set[int] = set()
        self.replied = False
        self.ready = False  # its backend is up (see _Ready)
        self.retired = False
        # A video whose worker died while decoding it: this worker takes no other request and
        # decodes it alone once it has finished what it holds.
        self.reserved_for: _Pending | None = None


class ProcessBackend:
    """Decodes in ``processes`` worker processes with ``threads`` decode threads each; each
    worker runs the backend that ``factory`` makes (a picklable callable).

    Output buffers must come from :meth:`empty`. Keeps the :class:`~vclip._engine.contract.Backend` contract.

    Args:
        factory: Makes the in-process backend a worker decodes with.
        device: Where that backend's outputs live (buffers are shared on it).
        processes: Worker processes (0: none until :meth:`add_processes` starts some).
        threads: Decode threads per worker (default 4 on the GPU, 2 on the CPU).
        indexes_per_worker: Video indexes a worker keeps.
        decode_timeout: Seconds one video's decode may take in a worker before the worker is
            killed and replaced; the video is reported as a CorruptVideoError, the other videos
            that worker held are sent to another.
    """

    def __init__(self, factory: Callable[[], Backend], device: Device, processes: int, threads: int = 0, *,
                 indexes_per_worker: int = INDEXES_PER_WORKER, decode_timeout: float = DECODE_TIMEOUT_SECONDS):
        if multiprocessing.current_process().daemon:
            raise ValueError(
                "decode_processes needs a process that may start children; inside DataLoader workers "
                "(daemon processes) decode with threads (decode_processes=0)"
            )
        self.device = device
        self.processes = processes
        self.threads = threads or THREADS_PER_PROCESS[device.type]
        self.default_workers = processes * self.threads
        self.decode_timeout = float(decode_timeout)
        self._factory = factory
        self._index_capacity = indexes_per_worker
        self._lock = threading.Lock()
        self._numbers = itertools.count()
        self._registry = BufferRegistry(self)
        self._index_keys: weakref.WeakKeyDictionary[VideoIndex, int] = weakref.WeakKeyDictionary()
        self._warnings = RaisedWarnings()
        self._failed_starts = 0
        self._closing = False
        self._waiting: list[_Pending] = []  # requests that found every worker reserved
        self._here: Backend | None = None  # decodes the videos no worker can open, made when one comes
        self._workers = [self._start_worker() for _ in range(processes)]
        self._wake_read, self._wake = multiprocessing.Pipe(duplex=False)
        self._listener = threading.Thread(target=self._listen, name="vclip-decode-replies", daemon=True)
        self._listener.start()
        _open_backends.add(self)

    def add_processes(self, count: int) -> int:
        """Start workers until ``count`` run (each starts in the background: a fresh interpreter, and
        on the GPU a CUDA context); returns how many there are."""
        with self._lock:
            if not self._closing:
                while len(self._workers) < count:
                    self._workers.append(self._start_worker())
            self.processes = len(self._workers)
            self.default_workers = self.processes * self.threads
            return self.processes

    def ready_processes(self) -> int:
        """Workers whose backend is up (a fresh interpreter and, on the GPU, a CUDA context): jobs
        sent to the others would wait for their start."""
        with self._lock:
            return sum(worker.ready for worker in self._workers)

    def _backend_here(self) -> Backend:
        with self._lock:
            if self._here is None:
                self._here = self._factory()
            return self._here

    def _start_worker(self) -> _WorkerProcess:
        return _WorkerProcess(self._factory, self.threads, self._index_capacity)

    # -- buffers ------------------------------------------------------------------------------
    def empty(self, shape: tuple[int, ...], dtype: str):
        """An output buffer the workers can write (shared memory or CUDA IPC)."""
        return self._registry.empty(self.device, shape, dtype)

    def close_in_workers(self, number: int) -> None:
        """Tell the workers that opened buffer ``number`` that it is gone."""
        with self._lock:
            workers = [] if self._closing else list(self._workers)
        for worker in workers:
            with worker.lock:
                if number in worker.opened:
                    worker.opened.discard(number)
                    try:
                        worker.requests.send(number)
                    except OSError:  # the worker is gone, and its mapping with it
                        pass

    # -- decoding -----------------------------------------------------------------------------
    def decode_video(self, job: VideoRequest, conversion: Conversion, output, stats: DecodeStats) -> None:
        """Decode ``job`` into ``output`` in a worker process; returns when the frames are written.
        A video held in this process's memory (bytes, a file object), which no worker can open, is
        decoded here, by the backend the workers run."""
        if not is_shareable(job.index.path):
            completion = self._backend_here().decode_video(job, conversion, output, stats)
            if completion is not None:
                completion.synchronize()
            return
        self._registry.forget_freed()
        handle = self._registry.handle_of(output)
        if handle is None:
            raise ValueError("output buffers of a ProcessBackend must come from its empty()")
        with self._lock:
            key = self._index_keys.get(job.index)
            if key is None:
                key = self._index_keys[job.index] = next(self._numbers)
        pending = _Pending(Future(), job, key, handle, conversion)
        self._send(pending)
        reply: _Reply = pending.future.result()
        stats.add(**reply.stats)
        add_remote_reads(reply.remote_reads)
        self._warnings.show(reply.warnings, stacklevel=3)
        if reply.error is not None:
            raise reply.error

    def _send(self, pending: _Pending) -> None:
        """Send one request to the least busy worker that is alive and not reserved; never waits.

        A request whose worker died while decoding it reserves a worker instead and goes to it when
        that worker holds nothing else. When every worker is reserved the request waits in this
        backend until one is free again.
        """
        while True:
            if self._closing:
                raise RuntimeError("this ProcessBackend is closed")
            with self._lock:
                free = [w for w in self._workers if w.reserved_for is None]
                if not free:
                    self._waiting.append(pending)
                    return
                worker = min(free, key=lambda w: len(w.outstanding))
            with worker.lock:
                if worker.retired or worker.reserved_for is not None:
                    continue  # that worker was just replaced or reserved: pick again
                if pending.deaths:
                    worker.reserved_for = pending
                    if worker.outstanding:
                        return  # sent by _receive once the worker has finished what it holds
                self._dispatch(worker, pending)
            return

    def _dispatch(self, worker: _WorkerProcess, pending: _Pending) -> None:
        """Send ``pending`` to ``worker`` (whose lock the caller holds)."""
        known = worker.indexes.use(pending.index_key) is not None
        if not known:
            worker.indexes.use(pending.index_key, True)
        opened = pending.buffer.number in worker.opened
        worker.opened.add(pending.buffer.number)
        number = next(self._numbers)
        pending.started_at = None
        worker.outstanding[number] = pending
        request = _Request(number, pending.index_key, None if known else pending.job.index,
                           pending.buffer.number, None if opened else pending.buffer, pending.job.targets,
                           pending.conversion)
        try:
            worker.requests.send(request)
        except OSError:  # it died after all: the listener sends the request again and replaces it
            pass

    def _send_waiting(self) -> None:
        """Send the requests that found every worker reserved (they wait again if they still do)."""
        with self._lock:
            waiting, self._waiting = self._waiting, []
        for pending in waiting:
            self._send_again(pending)

    def _listen(self) -> None:
        """Resolve replies as they come; replace a worker that died or is stuck on a video."""
        tick = min(1.0, self.decode_timeout / 4)
        while True:
            with self._lock:  # once closing, workers that exited are no longer watched
                workers = [w for w in self._workers if not self._closing or w.process.is_alive()]
            by_connection = {worker.replies: worker for worker in workers}
            by_sentinel = {worker.process.sentinel: worker for worker in workers}
            ready = wait_for_connections([*by_connection, *by_sentinel, self._wake_read], timeout=tick)
            if self._wake_read in ready:
                return
            self._registry.forget_freed()  # buffers freed while no batch is being decoded
            for item in ready:
                if item in by_connection:
                    self._receive(by_connection[item])
            for item in ready:
                if item in by_sentinel and not by_sentinel[item].process.is_alive():
                    self._replace(by_sentinel[item])
            if not self._closing:
                self._kill_stuck(workers)
                self._send_waiting()

    def _kill_stuck(self, workers: list[_WorkerProcess]) -> None:
        now = time.monotonic()
        for worker in workers:
            with worker.lock:
                stuck = [
                    p for p in worker.outstanding.values()
                    if p.started_at is not None and now - p.started_at > self.decode_timeout
                ]
                for pending in stuck:
                    pending.timed_out = True
            if stuck:
                worker.process.kill()
                worker.process.join()
                self._replace(worker)

    def _receive(self, worker: _WorkerProcess) -> None:
        released = False
        try:
            while worker.replies.poll():
                reply: _Reply | _Started | _Ready = worker.replies.recv()
                worker.replied = True
                if isinstance(reply, _Ready):
                    worker.ready = True
                    continue
                with worker.lock:
                    if isinstance(reply, _Started):
                        started = worker.outstanding.get(reply.number)
                        if started is not None:
                            started.started_at = time.monotonic()
                        continue
                    pending = worker.outstanding.pop(reply.number)
                    if worker.reserved_for is pending:
                        worker.reserved_for, released = None, True
                    elif worker.reserved_for is not None and not worker.outstanding:
                        self._dispatch(worker, worker.reserved_for)
                pending.future.set_result(reply)
        except (EOFError, OSError):  # it died mid-reply: the sentinel says so next
            pass
        if released:
            self._send_waiting()

    def _replace(self, worker: _WorkerProcess) -> None:
        self._receive(worker)  # replies sent before it died
        code = worker.process.exitcode
        with self._lock:
            if self._closing or worker.retired:
                return
            self._workers[self._workers.index(worker)] = self._start_worker()
            self._failed_starts = 0 if worker.replied else self._failed_starts + 1
            failed_starts = self._failed_starts
        with worker.lock:
            worker.retired = True
            lost, worker.outstanding = worker.outstanding, {}
            reserved, worker.reserved_for = worker.reserved_for, None
        if reserved is not None and reserved not in lost.values():  # it was waiting for this worker
            self._send_again(reserved)
        timed_out = any(pending.timed_out for pending in lost.values())
        for number, pending in lost.items():
            path = pending.job.index.path
            if pending.timed_out:
                error: Exception = CorruptVideoError(
                    path, f"decoding took longer than {self.decode_timeout:g} s (decode_timeout); "
                          "its decode worker process was replaced")
            elif timed_out or (pending.started_at is None and failed_starts < 3):
                # Innocent: it only shared the worker with a stuck video, or waited behind the
                # videos it was decoding when it died.
                self._send_again(pending)
                continue
            elif failed_starts >= 3:  # not this video's fault: workers die before decoding anything
                error = RuntimeError(
                    f"decode worker processes on {self.device} keep dying before decoding anything "
                    f"(exit code {code}); see their output on stderr")
            else:
                pending.deaths.append(code)
                if len(pending.deaths) < DEATHS_PER_VIDEO:  # perhaps another video's crash, or memory
                    self._send_again(pending)            # the others took: it goes again, alone
                    continue
                codes = ", ".join(str(died) for died in pending.deaths)
                error = CorruptVideoError(
                    path, f"decoding it killed the decode worker process {len(pending.deaths)} times (exit codes "
                          f"{codes}), the last time with no other video in that worker")
            pending.future.set_result(_Reply(number, error))

    def _send_again(self, pending: _Pending) -> None:
        try:
            self._send(pending)
        except RuntimeError as closed:
            pending.future.set_result(_Reply(-1, closed))

    def close(self, timeout: float = 30.0) -> None:
        """Stop the worker processes (after the requests they hold; killed after ``timeout`` seconds)
        and unlink the shared memory of the CPU buffers. Idempotent."""
        self._registry.forget_freed()
        with self._lock:
            if self._closing:
                return
            self._closing = True
            workers = list(self._workers)
        _open_backends.discard(self)
        for worker in workers:
            with worker.lock:
                try:
                    worker.requests.send(None)
                except OSError:
                    pass
        deadline = time.monotonic() + timeout
        for worker in workers:
            worker.process.join(timeout=max(0.0, deadline - time.monotonic()))
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
        self._wake.send(None)
        self._listener.join()
        if self._here is not None:
            self._here.close()
        unanswered = list(self._waiting)
        for worker in workers:
            self._receive(worker)
            unanswered += worker.outstanding.values()
            if worker.reserved_for is not None and worker.reserved_for not in worker.outstanding.values():
                unanswered.append(worker.reserved_for)
        for pending in unanswered:
            closed = RuntimeError(f"{pending.job.index.path}: the decoder was closed before this video was decoded")
            pending.future.set_result(_Reply(-1, closed))
        self._registry.release_all()


_open_backends: weakref.WeakSet[ProcessBackend] = weakref.WeakSet()


@atexit.register
def _close_open_backends() -> None:
    """At interpreter exit, stop the workers of backends nobody closed, quickly and quietly."""
    for backend in list(_open_backends):
        backend.close(timeout=5.0)

