"""The worker pools behind :mod:`vclip._jobs.runner`: threads, spawned processes and Ray tasks, each
taking tasks (lists of ``(position, item)``) and giving back every item's result, and telling a
worker's death apart from an item's failure."""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from .child_process import interrupts_held, watch_parent

_EXIT_CODE_WAIT_SECONDS = 5.0  # for a dead worker's exit code (the pool stops the others at once)


def import_ray():
    """The ``ray`` module.

    Raises:
        ImportError: Ray is not installed; the message names the extra that installs it.
    """
    try:
        import ray
    except ImportError as error:
        raise ImportError("running on Ray needs Ray: pip install 'vclip-nvdec[ray]'") from error
    return ray


class _WorkerDied(Exception):
    """A task's worker died; ``exit_code`` when known."""

    def __init__(self, exit_code: int | None):
        super().__init__(exit_code)
        self.exit_code = exit_code


def _run_task(function: Callable, task: list, portable: bool) -> list[tuple[int, bool, Any]]:
    """``(position, succeeded, value or exception)`` of each ``(position, item)`` of ``task`` (in a
    worker). ``portable``: exceptions that would not pickle back become a RuntimeError naming them."""
    results = []
    for position, item in task:
        try:
            results.append((position, True, function(item)))
        except Exception as error:
            results.append((position, False, _portable(error) if portable else error))
    return results


def _portable(error: Exception) -> Exception:
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:  # an exception class that does not rebuild from its args
        return RuntimeError(f"{type(error).__name__}: {error}")
    return error


class _Pool(ABC):
    """Workers started for one run: tasks (lists of ``(position, item)``) in, their results out."""

    isolates = False
    """A dead worker fails only its own task (Ray); else the pool breaks for every task in flight."""

    @abstractmethod
    def submit(self, task: list) -> Any:
        """Send ``task`` to a worker; returns its handle."""

    @abstractmethod
    def wait(self, handles: Iterable) -> list:
        """Some handles of finished tasks (at least one; blocks until then)."""

    @abstractmethod
    def results(self, handle) -> list[tuple[int, bool, Any]]:
        """The task's ``(position, succeeded, value or exception)`` per item.

        Raises:
            _WorkerDied: The task's worker died (or the pool broke) before it finished.
        """

    @abstractmethod
    def close(self, handles: Iterable, *, abandon: bool) -> None:
        """Stop the workers; with ``abandon``, cancel the queued tasks (``handles``: those in flight)
        and stop those running instead of waiting for them."""


def _failed_task(handle_error: Exception, task_positions: list[int]) -> list[tuple[int, bool, Any]]:
    return [(position, False, handle_error) for position in task_positions]


class _ThreadPool(_Pool):
    def __init__(self, function: Callable, workers: int):
        self.function = function
        self.executor = ThreadPoolExecutor(workers, thread_name_prefix="vclip-jobs")

    def submit(self, task):
        return self.executor.submit(_run_task, self.function, task, False)

    def wait(self, handles):
        return list(wait(list(handles), return_when=FIRST_COMPLETED).done)

    def results(self, handle):
        return handle.result()

    def close(self, handles, *, abandon):
        self.executor.shutdown(wait=True, cancel_futures=True)  # a running thread cannot be stopped


class _ProcessPool(_Pool):
    def __init__(self, function: Callable, workers: int):
        self.function = function
        self.tasks: dict = {}
        with interrupts_held():  # the workers start with Ctrl-C blocked: this process stops them
            self.executor = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                                initializer=_start_worker, initargs=(os.getpid(),))
        try:
            # The executor spawns a worker for each task sent while none is idle: one task each starts
            # them all at once, not one per task of the run; the first answer shows that they start.
            with interrupts_held():
                starts = [self.executor.submit(_ready) for _ in range(workers)]
            starts[0].result()
        except BrokenProcessPool:
            self.close((), abandon=True)
            raise RuntimeError(
                "the worker processes could not start (they are spawned: a script that runs vclip jobs over "
                "many videos must do so under `if __name__ == \"__main__\":`); or pass workers=1 to work in this "
                "process") from None
        except BaseException:
            self.close((), abandon=True)
            raise

    def submit(self, task):
        try:
            future = self.executor.submit(_run_task, self.function, task, True)
        except BrokenProcessPool as broken:  # a worker died since the last wait: this task goes with those in flight
            future = Future()
            future.set_exception(broken)
        self.tasks[future] = [position for position, _ in task]
        return future

    def wait(self, handles):
        return list(wait(list(handles), return_when=FIRST_COMPLETED).done)

    def results(self, handle):
        positions = self.tasks.pop(handle, [])
        try:
            return handle.result()
        except BrokenProcessPool:
            raise _WorkerDied(self._dead_worker_exit_code()) from None
        except Exception as error:  # the results did not come back (a value that does not pickle)
            return _failed_task(error, positions)

    def _dead_worker_exit_code(self) -> int | None:
        """The exit code of the worker that died: the pool learns of a death when the worker's
        pipe closes, a moment before its exit code can be read, and then stops the others
        (SIGTERM), so wait for every code and prefer one that is not SIGTERM's."""
        processes = list((getattr(self.executor, "_processes", None) or {}).values())
        deadline = time.monotonic() + _EXIT_CODE_WAIT_SECONDS
        # Polled, not joined: the pool's own thread reaps them too, and a join that loses that race
        # returns before the exit code is stored.
        while any(process.exitcode is None for process in processes) and time.monotonic() < deadline:
            time.sleep(0.01)
        codes = [process.exitcode for process in processes if process.exitcode not in (None, 0)]
        codes.sort(key=lambda code: code == -signal.SIGTERM)
        return codes[0] if codes else None

    def close(self, handles, *, abandon):
        if abandon:  # the workers ignore SIGINT: this process stops them
            for process in list((getattr(self.executor, "_processes", None) or {}).values()):
                if process.is_alive():
                    process.terminate()
        self.executor.shutdown(wait=True, cancel_futures=True)


def _ready() -> bool:
    return True


def _start_worker(parent_pid: int) -> None:
    """A worker process leaves Ctrl-C to the process that started it, which stops it, and exits as
    soon as that process is gone: one killed outright (SIGKILL, the OOM killer) cannot stop its
    workers, which would otherwise wait on the task queue for ever, keeping the resource tracker
    and its semaphores in /dev/shm alive with them."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    watch_parent(parent_pid)


class _RayPool(_Pool):
    isolates = True

    def __init__(self, function: Callable, options: dict):
        self.ray = import_ray()
        self.remote = self.ray.remote(_run_task).options(**options)
        self.function = self.ray.put(function)  # sent to the cluster once, not with every task
        self.tasks: dict = {}
        self.died = tuple(getattr(self.ray.exceptions, name) for name in (
            "WorkerCrashedError", "OutOfMemoryError", "NodeDiedError") if hasattr(self.ray.exceptions, name))

    def submit(self, task):
        reference = self.remote.remote(self.function, task, True)
        self.tasks[reference] = [position for position, _ in task]
        return reference

    def wait(self, handles):
        ready, _ = self.ray.wait(list(handles), num_returns=1)
        return ready

    def results(self, handle):
        positions = self.tasks.pop(handle, [])
        try:
            return self.ray.get(handle)
        except self.died:
            raise _WorkerDied(None) from None
        except self.ray.exceptions.RayError as error:  # a result that did not come back, a cancelled task
            return _failed_task(error, positions)

    def close(self, handles, *, abandon):
        if abandon:
            for reference in handles:
                self.ray.cancel(reference, force=True)

