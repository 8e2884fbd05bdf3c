"""One runner for work over many videos: a function of one item run over a list of items in this
thread, in threads, in spawned worker processes or as Ray tasks, with the same outcomes whichever runs it.

What runs is separate from where it runs: an operation (index a video, check it, find its
keyframes) is a picklable function of one item, and the :class:`Runner` is an argument that the
operation never sees. Each item's :class:`Outcome` is its value or the exception it raised, so one
item's failure never stops the others. In worker processes an item can also kill its worker
(FFmpeg can crash on damaged bytes), which breaks the pool for every task in flight: those tasks
are run again one item per task, an item in flight at a second crash is run again alone, and an
item that kills a worker alone is reported as crashed; every other item still gets its value. Ray
runs each task in a worker of its own, so there a crash is the task's.

Outcomes come in input order, with a bounded number of items taken ahead of the one handed out (so
memory stays bounded however many items there are), or as they complete; ``on_outcome`` sees each
as it completes. Ctrl-C (or a consumer that stops early) stops submitting, cancels what is queued,
stops the worker processes (or cancels the Ray tasks) and is raised again; threads finish the item
they hold.
"""

from __future__ import annotations

import itertools
import logging
import signal
import warnings
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .._device import CPU, Device, parse_device, resolve_device
from .._machine import usable_cores
from ..errors import FallbackWarning, check_integer, check_optional_integer, fail
from .pools import _Pool, _ProcessPool, _RayPool, _ThreadPool, _WorkerDied, import_ray

__all__ = [
    "GPU_SHARE_PER_TASK", "InThisThread", "Outcome", "Processes", "RayTasks", "Runner", "Threads", "choose_runner",
    "connect_ray", "gpu_share", "import_ray",
]

Item = TypeVar("Item")
Value = TypeVar("Value")

GPU_SHARE_PER_TASK = 0.25
"""A Ray task's (or actor's) share of a GPU by default: NVDEC has several engines per GPU."""

_TASKS_PER_WORKER = 2  # tasks in flight per worker: the next one is there when a worker finishes
_STRIKES_TO_RUN_ALONE = 2  # crashes an item was in flight for before it runs alone


@dataclass(frozen=True)
class Outcome(Generic[Value]):
    """What one item gave.

    Attributes:
        position: The item's position in the input.
        value: What the function returned (None when it failed).
        error: The exception the function raised (from a worker process or Ray: as it pickled
            back, or a RuntimeError naming it when it does not pickle), else None.
        crashed: The item killed its worker process while it ran there alone (on Ray: its
            task's worker died); it has neither value nor error.
        exit_code: The dead worker's exit code when known (``-11``: killed by SIGSEGV).
    """

    position: int
    value: Value | None = None
    error: Exception | None = None
    crashed: bool = False
    exit_code: int | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and not self.crashed

    def crash_problem(self) -> str:
        """A crash in words: ``"its worker process crashed (exit code -11, SIGSEGV); the file may be damaged"``."""
        code = "unknown" if self.exit_code is None else str(self.exit_code)
        if self.exit_code is not None and self.exit_code < 0:
            try:
                code += f", {signal.Signals(-self.exit_code).name}"
            except ValueError:  # not a signal number
                pass
        return f"its worker process crashed (exit code {code}); the file may be damaged"


# -- runners -----------------------------------------------------------------------------------------
class Runner(ABC):
    """Where the items of a job run.

    Attributes:
        workers: Items worked on at once.
        device: Where the items are to decode, as :func:`choose_runner` resolved it (on Ray
            ``Device("cuda")``, the GPU Ray gives each task); the CPU when built directly.
        fell_back_to_cpu: A GPU request is served on the CPU (no usable GPU here).
        in_this_process: Values come back as the function returned them; else pickled (NumPy
            arrays, not CuPy ones, can come back).
    """

    workers: int = 1
    device: Device = CPU
    fell_back_to_cpu: bool = False
    in_this_process: bool = True

    def run(
        self,
        function: Callable[[Item], Value],
        items: Iterable[Item],
        *,
        ordered: bool = True,
        chunk_size: int = 1,
        ahead: int | None = None,
        on_outcome: Callable[[Outcome[Value]], None] | None = None,
    ) -> Generator[Outcome[Value]]:
        """``function(item)`` of every item, one :class:`Outcome` each.

        Args:
            function: A function of one item; in processes and on Ray it must pickle (a function
                of a module, or a ``functools.partial`` of one).
            items: The inputs, taken as they are needed.
            ordered: Outcomes in input order (default); else as they complete.
            chunk_size: Items per task sent to a worker (fewer round trips for quick items).
            ahead: At most this many items taken from ``items`` and not yet handed out (default:
                ``chunk_size`` items for two tasks per worker); in order, a slow item holds back at
                most this many finished ones.
            on_outcome: Called with each outcome as it completes, in this thread.

        Returns:
            An iterator of outcomes; closing it early stops the run as Ctrl-C does.

        Raises:
            ArgumentError: ``chunk_size`` or ``ahead`` below 1.
        """
        chunk_size = check_integer("chunk_size", chunk_size, minimum=1)
        ahead = check_optional_integer("ahead", ahead, minimum=1) or _TASKS_PER_WORKER * self.workers * chunk_size
        work = _Run(self, function, iter(items), chunk_size, ahead)
        return _in_order(work, on_outcome) if ordered else _as_completed(work, on_outcome)

    @abstractmethod
    def _open(self, function: Callable, workers: int) -> _Pool:
        """Start ``workers`` workers that run tasks of ``function``."""

    def _tasks_in_flight(self) -> int:
        """Tasks kept submitted at once: the next one is there when a worker finishes."""
        return _TASKS_PER_WORKER * self.workers

    def __repr__(self) -> str:
        return f"{type(self).__name__}(workers={self.workers}, device={str(self.device)!r})"


class InThisThread(Runner):
    """Items one after another in the calling thread (no pool: callbacks of the function run here too)."""

    def _open(self, function, workers):
        raise NotImplementedError  # never called: _Run runs the items itself


class Threads(Runner):
    """Items on ``workers`` threads of this process: for work that releases the interpreter lock
    (NVDEC decoding, CUDA kernels) and values that must stay in this process (CuPy arrays)."""

    def __init__(self, workers: int):
        self.workers = check_integer("workers", workers, minimum=1)

    def _open(self, function, workers):
        return _ThreadPool(function, workers)


class Processes(Runner):
    """Items in ``workers`` spawned worker processes (each its own interpreter lock, and a crash in
    one fails only its own item). In a script, run the job under ``if __name__ == "__main__":``."""

    in_this_process = False

    def __init__(self, workers: int):
        self.workers = check_integer("workers", workers, minimum=1)

    def _open(self, function, workers):
        return _ProcessPool(function, workers)


class RayTasks(Runner):
    """Items as Ray tasks (a task per chunk of items) on the cluster at ``address``, joined on
    creation (None: ``RAY_ADDRESS``'s cluster, ``ray start``'s, or a new local one).

    ``device``, a request, asks for where the tasks decode: a GPU request (``"auto"`` too) gives each task a
    ``num_gpus`` share of a GPU (default :data:`GPU_SHARE_PER_TASK`) when the cluster has GPUs,
    else one CPU (with a :class:`~vclip.FallbackWarning` when ``device`` insisted on CUDA).
    ``workers``: tasks at once, at most what the cluster runs at once (the default).

    Raises:
        ImportError: Ray is not installed (the message names the extra).
    """

    in_this_process = False

    def __init__(self, *, address: str | None = None, workers: int | None = None, device: object = "cpu",
                 num_gpus: float | None = None):
        workers = check_optional_integer("workers", workers, minimum=1, none_means="for what the cluster runs at once")
        ray = import_ray()
        connect_ray(address)
        share = gpu_share(device, num_gpus, stacklevel=4)  # the warning names the caller of choose_runner's caller
        resources = ray.cluster_resources()
        at_once = int(resources["GPU"] / share) if share is not None else int(resources.get("CPU", 1.0))
        self.workers = max(1, min(workers or at_once, at_once))
        self.device = Device("cuda") if share is not None else CPU  # Ray's GPU of each task, resolved there
        self.fell_back_to_cpu = share is None and parse_device(device).names_cuda
        self._options: dict[str, float] = {"num_gpus": share} if share is not None else {"num_cpus": 1}

    def _open(self, function, workers):
        return _RayPool(function, self._options)


def choose_runner(
    device: object = "cpu",
    *,
    workers: int | None = None,
    items: int,
    gpu_workers: int = 4,
    ray: bool = False,
    ray_address: str | None = None,
    isolate: bool = False,
) -> Runner:
    """The runner of a job over ``items`` videos that decode on ``device``: the public request,
    resolved here into the runner's :class:`~vclip._device.Device`.

    With ``ray`` (or a ``ray_address``): :class:`RayTasks`. Else the device is resolved here (one
    :class:`~vclip.FallbackWarning` when a GPU request falls back) and the items run on
    :class:`Threads` on a GPU (default ``gpu_workers``, 4: they share this process's NVDEC decoders and
    CUDA context) or in :class:`Processes` on the CPU (default one per usable core: FFmpeg's and
    NumPy's Python-side work of several videos would share one interpreter lock in threads); never
    more workers than items, and :class:`InThisThread` for one (with ``isolate``, a single worker
    process on the CPU when there are several items, so that a decoder's native crash costs only
    its video).

    Raises:
        ArgumentError: ``workers`` below 1; ``ray`` not a bool; a bad ``device``.
        ImportError: ``ray`` without Ray installed.
    """
    workers = check_optional_integer("workers", workers, minimum=1)
    if not isinstance(ray, bool):
        raise fail("ray", ray, "True or False (name the cluster with ray_address=)")
    if ray or ray_address is not None:
        return RayTasks(address=ray_address, workers=workers, device=device)
    resolved = resolve_device(device, warn=False)
    if resolved.fell_back_to_cpu:
        warnings.warn(f"device={device!r} requested but {resolved.fallback_reason}; decoding on the CPU",
                      FallbackWarning, stacklevel=3)
    count = min(workers or (gpu_workers if resolved.device.is_cuda else usable_cores()), max(items, 1))
    runner: Runner
    if count == 1 and not (isolate and items > 1 and not resolved.device.is_cuda):
        runner = InThisThread()
    elif resolved.device.is_cuda:
        runner = Threads(count)
    else:
        runner = Processes(count)
    runner.device, runner.fell_back_to_cpu = resolved.device, resolved.fell_back_to_cpu
    return runner


# -- Ray -----------------------------------------------------------------------------------------
def connect_ray(address: str | None = None) -> None:
    """Join the Ray cluster at ``address``, unless this process already has (``ray.init()``).

    ``address=None`` joins the cluster of ``RAY_ADDRESS`` or ``ray start``, else starts a local one.
    """
    ray = import_ray()
    if not ray.is_initialized():
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=True)


def gpu_share(device: object, num_gpus: float | None = None, *, stacklevel: int = 2) -> float | None:
    """Each Ray task's or actor's GPU share when ``device`` (a request) asks for a GPU (``"auto"``
    included) and the joined cluster has one, else None (decode on the CPU; with a FallbackWarning
    when ``device`` insisted on CUDA)."""
    ray = import_ray()
    request = parse_device(device)
    if request.may_use_gpu and ray.cluster_resources().get("GPU", 0.0) > 0:
        return num_gpus or GPU_SHARE_PER_TASK
    if request.names_cuda:
        warnings.warn(f"device={device!r} requested but the Ray cluster has no GPU; decoding on the CPU",
                      FallbackWarning, stacklevel=stacklevel + 1)
    return None


# -- one run -------------------------------------------------------------------------------------------


class _Run:
    """One run of ``function`` over ``items`` on ``runner``: its outcomes as they complete.

    ``held`` is set by an in-order consumer: outcomes it holds back for an earlier one. No item is
    taken while ``ahead`` are taken and not handed out (in flight, to run again, or held)."""

    def __init__(self, runner: Runner, function: Callable, items: Iterator, chunk_size: int, ahead: int):
        self.runner, self.function, self.chunk_size, self.ahead = runner, function, chunk_size, ahead
        self.held = 0
        self._source = enumerate(items)
        self._outcomes: Generator[Outcome] = self._inline() if isinstance(runner, InThisThread) else self._pooled()

    def __iter__(self) -> Iterator[Outcome]:
        return self._outcomes

    def close(self) -> None:
        self._outcomes.close()

    def _inline(self) -> Generator[Outcome]:
        for position, item in self._source:
            try:
                value = self.function(item)
            except Exception as error:
                yield Outcome(position, error=error)
            else:
                yield Outcome(position, value)

    def _pooled(self) -> Generator[Outcome]:
        workers = self.runner.workers
        in_flight: dict[Any, list] = {}  # handle -> task: [(position, item), ...]
        retry: deque[list] = deque()  # tasks to run again, one item each, before any new item
        alone: deque = deque()  # (position, item) to run each alone
        strikes: dict[int, int] = {}
        exhausted = False
        pool: _Pool | None = None
        try:
            while True:
                if alone:
                    yield from self._run_alone(alone)
                if pool is None:
                    pool = self.runner._open(self.function, workers)
                while len(in_flight) < self.runner._tasks_in_flight():
                    if retry:
                        task = retry.popleft()
                    else:
                        taken = sum(map(len, in_flight.values())) + self.held
                        room = min(self.chunk_size, self.ahead - taken)
                        task = [] if exhausted or room <= 0 else list(itertools.islice(self._source, room))
                        if not task:
                            exhausted = exhausted or room > 0
                            break
                    in_flight[pool.submit(task)] = task
                if not in_flight:  # every item taken is done, and no other comes
                    break
                died: _WorkerDied | None = None
                for handle in pool.wait(in_flight):
                    try:
                        yield from _outcomes_of(pool.results(handle))
                        del in_flight[handle]
                    except _WorkerDied as error:
                        died = error
                        if pool.isolates:
                            yield from _after_crash(in_flight.pop(handle), error, True, retry, alone, strikes)
                if died is not None and not pool.isolates:  # a broken pool: every task in flight is cut short
                    for handle, task in in_flight.items():
                        try:
                            yield from _outcomes_of(pool.results(handle))
                        except _WorkerDied as error:
                            yield from _after_crash(task, error, False, retry, alone, strikes)
                    in_flight.clear()
                    pool.close((), abandon=True)
                    pool = None
        except BaseException:  # Ctrl-C, a consumer that stopped, a failed start: leave nothing running
            if pool is not None:
                pool.close(in_flight, abandon=True)
            raise
        if pool is not None:
            pool.close((), abandon=False)

    def _run_alone(self, alone: deque) -> Iterator[Outcome]:
        """Each of ``alone`` by itself in one worker process: a crash then names its item."""
        pool: _Pool | None = None
        try:
            while alone:
                position, item = alone.popleft()
                if pool is None:
                    pool = self.runner._open(self.function, 1)
                try:
                    yield from _outcomes_of(pool.results(pool.submit([(position, item)])))
                except _WorkerDied as died:
                    yield Outcome(position, crashed=True, exit_code=died.exit_code)
                    pool.close((), abandon=True)
                    pool = None
        except BaseException:
            if pool is not None:
                pool.close((), abandon=True)
            raise
        if pool is not None:
            pool.close((), abandon=False)


def _after_crash(task: list, died: _WorkerDied, isolated: bool, retry: deque, alone: deque,
                 strikes: dict[int, int]) -> Iterator[Outcome]:
    """A task whose worker died: the verdict on its item when it ran in a worker of its own
    (``isolated``: a Ray task of one item); else each item again in a task of its own, or, when it
    was in flight at an earlier crash too, alone."""
    if isolated and len(task) == 1:
        yield Outcome(task[0][0], crashed=True, exit_code=died.exit_code)
        return
    for entry in task:
        strikes[entry[0]] = strikes.get(entry[0], 0) + 1
        if strikes[entry[0]] >= _STRIKES_TO_RUN_ALONE and not isolated:
            alone.append(entry)
        else:
            retry.append([entry])


def _outcomes_of(results: list[tuple[int, bool, Any]]) -> Iterator[Outcome]:
    for position, succeeded, value in results:
        yield Outcome(position, value) if succeeded else Outcome(position, error=value)


def _as_completed(work: _Run, on_outcome) -> Generator[Outcome]:
    try:
        for outcome in work:
            if on_outcome is not None:
                on_outcome(outcome)
            yield outcome
    finally:
        work.close()


def _in_order(work: _Run, on_outcome) -> Generator[Outcome]:
    """The outcomes of ``work`` by position; those that complete early wait here, counted in ``work.held``."""
    waiting: dict[int, Outcome] = {}
    following = 0
    try:
        for outcome in work:
            if on_outcome is not None:
                on_outcome(outcome)
            waiting[outcome.position] = outcome
            while following in waiting:
                outcome = waiting.pop(following)
                following += 1
                work.held = len(waiting)
                yield outcome
            work.held = len(waiting)
    finally:
        work.close()
