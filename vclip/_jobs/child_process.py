"""Worker processes that run a function of vclip's own in a fresh ``python``, speaking to their
parent over two pipes of pickled messages.

Unlike :mod:`multiprocessing`'s spawn, a child started this way imports no module of the user's
(spawn imports the main script again, so a script without ``if __name__ == "__main__":`` would
start its work over in every child); like it, the child is a fresh interpreter (fork and exec)
that inherits no CUDA state, threads or locks. It finds vclip and its dependencies on the parent's
``sys.path``, and shares the parent's resource tracker (as spawn's children do), so shared memory it
opens stays the parent's to unlink. The parent sees a child much as a ``multiprocessing.Process``: ``pid``,
``is_alive()``, ``exitcode`` (``-N`` after signal N), ``kill()``, ``join()``, and a ``sentinel``
that :func:`multiprocessing.connection.wait` finds ready once the child has exited.

Beside its environment a child takes over fsspec's configuration as the parent holds it when the
child starts (``fsspec.config.conf``: endpoints, credentials and client options a program may set
in memory rather than in files or ``FSSPEC_*`` variables), so that it reads URLs as its parent does.

The child runs ``main`` (``"module:function"``), which calls :func:`child_pipes`, then
:func:`watch_parent` so that a parent killed with SIGKILL leaves no orphan.
"""

from __future__ import annotations

import importlib
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection

from ..errors import warning_class

__all__ = ["ChildProcess", "RaisedWarnings", "child_pipes", "interrupts_held", "watch_parent"]


class ChildProcess:
    """``main`` (``"module:function"``, a function of vclip's) run in a fresh interpreter;
    ``requests`` (write) and ``replies`` (read) are its pipes."""

    class Died(Exception):
        """The child died before it replied; ``args[0]`` is its exit code."""

    def __init__(self, main: str):
        requests_read, requests_write = os.pipe()
        replies_read, replies_write = os.pipe()
        alive_read, alive_write = os.pipe()  # the child holds the write end until it exits
        child_ends = (requests_read, replies_write, alive_write)
        tracker = resource_tracker.getfd()  # started if need be
        assert tracker is not None
        environment = dict(os.environ)
        environment["PYTHONPATH"] = os.pathsep.join(path for path in sys.path if path)
        try:
            with interrupts_held():
                self._popen = subprocess.Popen(
                    [sys.executable, "-c", "from vclip._jobs.child_process import run; run()", main,
                     *map(str, child_ends), str(tracker), str(os.getpid())],
                    pass_fds=(*child_ends, tracker), stdin=subprocess.DEVNULL, env=environment)
        except BaseException:
            for descriptor in (requests_write, replies_read, alive_read):
                os.close(descriptor)
            raise
        finally:
            for descriptor in child_ends:
                os.close(descriptor)
        self.pid = self._popen.pid
        self.requests = Connection(requests_write, readable=False)
        self.replies = Connection(replies_read, writable=False)
        self.sentinel = Connection(alive_read, writable=False)
        try:
            self.requests.send_bytes(_inherited_settings())
        except OSError:  # it died at once: its exit code says so
            pass

    def is_alive(self) -> bool:
        return self._popen.poll() is None

    @property
    def exitcode(self) -> int | None:
        return self._popen.poll()

    def kill(self) -> None:
        if self._popen.poll() is None:
            self._popen.kill()

    def join(self, timeout: float | None = None) -> None:
        try:
            self._popen.wait(timeout)
        except subprocess.TimeoutExpired:
            pass

    def ask(self, request: object) -> object:
        """Send ``request`` and wait for the reply, for a child that answers each request in turn.

        Raises:
            ChildProcess.Died: The child died first.
        """
        try:
            self.requests.send(request)
            return self.replies.recv()
        except (EOFError, OSError):
            self.join()
            raise ChildProcess.Died(self.exitcode) from None

    def stop(self, timeout: float) -> None:
        """Close its request pipe (the child exits when it reads the end of it), and kill it if it
        is still running ``timeout`` seconds later."""
        self.requests.close()
        self.join(timeout)
        self.kill()
        self.join()


def run() -> None:
    """A child's entry point: share the parent's resource tracker, then call its ``main``."""
    module, function = sys.argv[1].split(":")
    resource_tracker._resource_tracker._fd = int(sys.argv[5])  # type: ignore[attr-defined]  # as spawn does
    getattr(importlib.import_module(module), function)()


class RaisedWarnings:
    """Warnings that children caught and sent as ``(class name, message)``, raised again in the
    parent, each once."""

    def __init__(self):
        self._lock = threading.Lock()
        self._shown: set[tuple[str, str]] = set()

    def show(self, raised: list[tuple[str, str]], stacklevel: int) -> None:
        for category_name, message in raised:
            with self._lock:
                if (category_name, message) in self._shown:
                    continue
                self._shown.add((category_name, message))
            warnings.warn(message, warning_class(category_name), stacklevel=stacklevel + 1)


def _inherited_settings() -> bytes:
    """What a child takes over beside its environment, pickled: fsspec's configuration, when this
    process loaded fsspec (a configuration that does not pickle is left out, with a warning)."""
    config = sys.modules.get("fsspec.config")
    if config is None:
        return pickle.dumps({})
    try:
        return pickle.dumps({"fsspec_config": config.conf})
    except Exception as error:  # an object of the program's that pickle cannot copy
        warnings.warn(f"fsspec's configuration cannot be passed to vclip's worker processes ({error}): they "
                      "read URLs with the configuration of fsspec's files and FSSPEC_* variables only",
                      RuntimeWarning, stacklevel=3)
        return pickle.dumps({})


def child_pipes() -> tuple[Connection, Connection, int]:
    """In a child: its request and reply pipes and its parent's pid, from its command line, once
    the settings the parent sent first are in force."""
    requests, replies, _alive, _tracker, parent = (int(argument) for argument in sys.argv[2:7])
    reading = Connection(requests, writable=False)
    try:
        sent = reading.recv_bytes()
    except (EOFError, OSError):  # the parent is gone
        os._exit(0)
    try:
        settings = pickle.loads(sent)
    except Exception as error:  # e.g. an object of a class of the parent's main script
        warnings.warn(f"vclip worker process {os.getpid()}: fsspec's configuration of the parent could not be "
                      f"read ({error}); using fsspec's files and FSSPEC_* variables only", RuntimeWarning,
                      stacklevel=2)
        settings = {}
    if "fsspec_config" in settings:
        import fsspec.config

        fsspec.config.conf.clear()
        fsspec.config.conf.update(settings["fsspec_config"])
    return reading, Connection(replies, readable=False), parent


@contextmanager
def interrupts_held() -> Iterator[None]:
    """Ctrl-C (SIGINT) held back while this thread starts worker processes.

    A Ctrl-C reaches the whole process group (as a terminal sends it): a worker still importing its
    modules would stop with a traceback of its own, and one interrupted while its parent hands it
    its start-up data with another. So the signal is blocked in this thread, and the workers it
    starts inherit the block (the process that started them stops them); and in the main thread,
    where Python raises KeyboardInterrupt (another thread of the process may take the signal), a
    Ctrl-C meanwhile is kept and raised once the block ends. Without signal masks (not POSIX) only
    the latter holds."""
    caught: list[int] = []
    handler = None
    if threading.current_thread() is threading.main_thread() and (
            signal.getsignal(signal.SIGINT) is signal.default_int_handler):  # a program's own handler is kept
        handler = signal.signal(signal.SIGINT, lambda number, frame: caught.append(number))
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if hasattr(signal, "pthread_sigmask") else None
    try:
        yield
    finally:
        if previous is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)  # a Ctrl-C kept pending arrives now
        if handler is not None:
            signal.signal(signal.SIGINT, handler)
        if caught:
            raise KeyboardInterrupt


def watch_parent(parent_pid: int) -> None:
    """Exit this child as soon as its parent is gone (killed without a chance to stop it)."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, name="vclip-watch-parent", daemon=True).start()
