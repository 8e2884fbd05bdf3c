"""Thread pools shared by a process, and work submitted a bounded number of items ahead."""

from __future__ import annotations

import itertools
import os
import threading
from collections import deque
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any


class SharedThreadPool:
    """A thread pool made on first use and shared by the whole process; a forked child makes its
    own (threads do not survive fork)."""

    def __init__(self, workers: int, name: str):
        self.workers, self.name = workers, name
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        os.register_at_fork(after_in_child=self._forget)

    def _forget(self) -> None:
        self._pool, self._lock = None, threading.Lock()

    def get(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix=self.name)
            return self._pool


def submitted_ahead(pool: Executor, work: Callable[[Any], Any], items: Iterable, window: int) -> Generator[Future]:
    """The futures of ``work(item)`` for ``items`` in order, at most ``window`` submitted ahead of
    the one taken. Closing the iterator (or leaving it by an exception) cancels those not started."""
    pending: deque[Future] = deque()
    remaining = iter(items)
    try:
        for item in itertools.islice(remaining, window):
            pending.append(pool.submit(work, item))
        while pending:
            future = pending.popleft()
            following = next(remaining, None)
            if following is not None:
                pending.append(pool.submit(work, following))
            yield future
    finally:
        for future in pending:
            future.cancel()
