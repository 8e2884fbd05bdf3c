"""CPU decoders beside a GPU job over many videos: fresh CPU processes that take videos from the
queue of the GPU's threads whenever all those threads have one.

On a GPU, a job over many videos (:func:`vclip.keyframes.find_shot_boundaries_many`) runs on threads
of this process, whose Python work shares one interpreter lock, and leaves the machine's other
cores idle. A CPU decoder is a fresh interpreter (:mod:`vclip._jobs.child_process`: it imports no module
of the user's, so a script needs no ``if __name__ == "__main__":`` guard) that reads one video at a
time with the job's CPU function: the same operation on the CPU, whose results are the GPU's. A
video that kills its CPU decoder is reported as crashed, as in worker processes, and a new decoder
takes its place.
"""

from __future__ import annotations

import pickle
import queue
import signal
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from .._machine import usable_cores
from ..errors import check_integer, fail
from .child_process import ChildProcess, child_pipes, watch_parent
from .pools import _failed_task, _Pool, _run_task, _ThreadPool, _WorkerDied
from .runner import _TASKS_PER_WORKER, Runner, Threads

__all__ = ["BesideCpuDecoders", "auto_cpu_decoders", "resolve_cpu_decoders"]

MIN_CORES = 8
"""Machines with fewer cores get no CPU decoders by default: the GPU's feeders need them."""

CORES_KEPT = 2
"""Cores ``"auto"`` leaves to this process (the GPU threads' interpreter lock and the CUDA driver)."""

_CLOSE_SECONDS = 5.0  # for a CPU decoder to exit once its pipe is closed


def _on_gpu_threads(runner: Runner) -> bool:
    return isinstance(runner, Threads) and runner.device.is_cuda


def auto_cpu_decoders(runner: Runner, items: int, decode_processes: int = 0, cores: int | None = None) -> int:
    """CPU decoders for ``cpu_decoders="auto"``: on a GPU's threads, the cores beside
    :data:`CORES_KEPT` and the decode processes, on machines of :data:`MIN_CORES` or more, and no
    more than the videos left once every GPU thread has one; none on the CPU, on Ray or for one video."""
    if not _on_gpu_threads(runner):
        return 0
    cores = usable_cores() if cores is None else cores
    if cores < MIN_CORES:
        return 0
    return max(0, min(cores - CORES_KEPT - decode_processes, items - runner.workers))


def resolve_cpu_decoders(cpu_decoders: int | str, runner: Runner, items: int, decode_processes: int = 0) -> int:
    """The CPU decoders ``cpu_decoders`` asks for beside ``runner``: a count as given (none where
    the runner is not a GPU's threads), or :func:`auto_cpu_decoders`.

    Raises:
        ArgumentError: Neither ``"auto"`` nor a count of at least 0.
    """
    if cpu_decoders == "auto":
        return auto_cpu_decoders(runner, items, decode_processes)
    if isinstance(cpu_decoders, str):
        raise fail("cpu_decoders", cpu_decoders, '"auto" or a count of at least 0')
    count = check_integer("cpu_decoders", cpu_decoders, minimum=0)
    return count if _on_gpu_threads(runner) else 0


class BesideCpuDecoders(Runner):
    """Items on the threads of ``gpu`` and, when all of them hold one, in ``cpu_decoders`` CPU
    processes that run ``cpu_function`` instead (a picklable function of vclip's: the same
    operation on the CPU). Values from the CPU decoders come back pickled."""

    in_this_process = False

    def __init__(self, gpu: Threads, cpu_decoders: int, cpu_function: Callable):
        self.gpu_workers = gpu.workers
        self.cpu_decoders = check_integer("cpu_decoders", cpu_decoders, minimum=1)
        self.workers = self.gpu_workers + self.cpu_decoders
        self.device, self.fell_back_to_cpu = gpu.device, gpu.fell_back_to_cpu
        self.cpu_function = cpu_function

    def _tasks_in_flight(self) -> int:
        return _TASKS_PER_WORKER * self.gpu_workers + self.cpu_decoders  # a CPU decoder holds one task

    def _open(self, function, workers):
        return _BesidePool(function, self.gpu_workers, self.cpu_function, self.cpu_decoders)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(gpu_workers={self.gpu_workers}, cpu_decoders={self.cpu_decoders}, "
                f"device={str(self.device)!r})")


class _BesidePool(_Pool):
    isolates = True  # a CPU decoder holds one task: its death fails only that task

    def __init__(self, function: Callable, gpu_workers: int, cpu_function: Callable, cpu_decoders: int):
        self.gpu_workers, self.cpu_decoders = gpu_workers, cpu_decoders
        self.gpu = _ThreadPool(function, gpu_workers)
        self.cpu = _CpuDecoders(cpu_function, cpu_decoders)
        self.on_gpu: set[Future] = set()
        self.on_cpu: set[Future] = set()

    def submit(self, task):
        if len(self.on_gpu) >= self.gpu_workers and len(self.on_cpu) < self.cpu_decoders:
            handle = self.cpu.submit(task)
            self.on_cpu.add(handle)
        else:
            handle = self.gpu.submit(task)
            self.on_gpu.add(handle)
        return handle

    def wait(self, handles):
        return self.gpu.wait(handles)  # futures, from either side

    def results(self, handle):
        self.on_gpu.discard(handle)
        self.on_cpu.discard(handle)
        return handle.result()

    def close(self, handles: Iterable, *, abandon: bool) -> None:
        self.cpu.close(abandon=abandon)
        self.gpu.close(handles, abandon=abandon)


class _CpuDecoders:
    """``count`` CPU decoder processes, started at once (they start while the GPU works), each
    served by a thread of this process that waits for its answer without the interpreter lock."""

    def __init__(self, function: Callable, count: int):
        self.function = function
        self.closing = False
        self.started: list[ChildProcess] = []
        self.idle: queue.SimpleQueue[ChildProcess] = queue.SimpleQueue()
        for _ in range(count):
            self.idle.put(self._start())
        self.threads = ThreadPoolExecutor(count, thread_name_prefix="vclip-cpu-decoder")

    def _start(self) -> ChildProcess:
        decoder = ChildProcess(f"{__name__}:serve_cpu_decoder")
        self.started.append(decoder)
        return decoder

    def submit(self, task: list) -> Future:
        return self.threads.submit(self._run, task)

    def _run(self, task: list) -> list[tuple[int, bool, Any]]:
        decoder = self.idle.get()
        if not decoder.is_alive():  # it died between tasks (killed from outside): not this task's doing
            decoder = self._start()
        try:
            reply = decoder.ask((self.function, task))
        except ChildProcess.Died as died:
            if not self.closing:
                decoder = self._start()  # in its place
            raise _WorkerDied(died.args[0]) from None
        finally:
            self.idle.put(decoder)
        if isinstance(reply, Exception):  # the task did not reach the function, or its results did not pickle
            return _failed_task(reply, [position for position, _ in task])
        assert isinstance(reply, list)
        return reply

    def close(self, *, abandon: bool) -> None:
        self.closing = True
        if abandon:
            for decoder in self.started:
                decoder.kill()  # the threads waiting on them see their pipes close
        self.threads.shutdown(wait=True, cancel_futures=True)
        for decoder in self.started:
            decoder.stop(_CLOSE_SECONDS)


def serve_cpu_decoder() -> None:
    """A CPU decoder's main: run each task it is sent, reply its results, until the pipe closes."""
    requests, replies, parent = child_pipes()
    watch_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops it
    while True:
        try:
            message = requests.recv_bytes()
        except (EOFError, OSError):  # the parent closed the pipe, or is gone
            return
        try:
            function, task = pickle.loads(message)
            reply: Any = pickle.dumps(_run_task(function, task, True))
        except Exception as error:
            reply = pickle.dumps(RuntimeError(f"{type(error).__name__}: {error}"))
        try:
            replies.send_bytes(reply)
        except OSError:  # the parent is gone
            return
