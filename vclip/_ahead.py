"""Work submitted a bounded number of items ahead, results taken in order."""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import Executor, Future
from typing import Any


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
