"""What was read from each URL (:class:`RemoteReads`: requests, retries, bytes, whole-file answers),
counted per process; decode processes send their counts to their parent with each decoded video."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, fields

__all__ = ["RemoteReads", "add_remote_reads", "count_read", "remote_reads", "take_remote_reads"]


@dataclass(frozen=True)
class RemoteReads:
    """What was read from one URL.

    Attributes:
        requests: Requests vclip made (every try counted; a driver may send more than one for
            a request: fsspec's HTTP metadata is a HEAD, then a GET when the HEAD tells no size).
        retries: Tries after a transient failure.
        bytes_read: Body bytes received.
        whole_file_reads: Answers that carried the whole file because the server ignores ``Range``.
    """

    requests: int = 0
    retries: int = 0
    bytes_read: int = 0
    whole_file_reads: int = 0


_reads_lock = threading.Lock()
_reads: dict[str, list[int]] = {}


def count_read(url: str, **amounts: int) -> None:
    with _reads_lock:
        counts = _reads.setdefault(url, [0] * len(fields(RemoteReads)))
        for k, field in enumerate(fields(RemoteReads)):
            counts[k] += amounts.get(field.name, 0)


def remote_reads(urls=None, *, since: dict[str, RemoteReads] | None = None) -> dict[str, RemoteReads]:
    """What this process (with the decode processes it heard from) read per URL: of ``urls``
    (default all), minus what ``since`` (an earlier answer) held; URLs with nothing read left out."""
    with _reads_lock:
        now = {url: list(counts) for url, counts in _reads.items() if urls is None or url in urls}
    result = {}
    for url, counts in now.items():
        before = (since or {}).get(url, RemoteReads())
        difference = RemoteReads(*(c - getattr(before, f.name) for c, f in zip(counts, fields(RemoteReads))))
        if any(getattr(difference, f.name) for f in fields(RemoteReads)):
            result[url] = difference
    return result


def take_remote_reads() -> dict[str, tuple[int, ...]]:
    """The counts since the last call, as plain tuples (a decode process sends them to its parent)."""
    with _reads_lock:
        taken = {url: tuple(counts) for url, counts in _reads.items()}
        _reads.clear()
    return taken


def add_remote_reads(taken: dict[str, tuple[int, ...]]) -> None:
    """Add counts a decode process took with :func:`take_remote_reads`."""
    for url, counts in taken.items():
        count_read(url, **{f.name: count for f, count in zip(fields(RemoteReads), counts)})



def _after_fork() -> None:  # the counts go on in the child; the lock starts afresh
    global _reads_lock
    _reads_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)
