"""Videos at URLs, read by byte range through fsspec, with vclip's own timeouts, retries and counts.

:class:`RemoteReader` coalesces nearby ranges into one request and sends separate requests
concurrently on a small thread pool. Every request has vclip's connect and read timeouts (HTTP(S)
through aiohttp, S3 through botocore; other protocols keep their driver's), and transient failures
are tried again with exponential backoff: refused or reset connections, timeouts, truncated bodies,
HTTP 5xx, 408 and 429 (waiting as long as ``Retry-After`` asks, up to a minute). A missing object
(HTTP 404) or a denied one (401/403) is reported at once, a redirect loop as such. A server that
ignores ``Range`` (it answers a range request with the whole file) is detected at its first answer:
one :class:`~vclip.errors.RemoteReadWarning`, then the file is kept in a local spill file, within
a limit for the whole process, and later ranges are read from there.

The options (:class:`RemoteOptions`) live in environment variables, so that decode processes
started later use them too; :func:`set_remote_options` sets them. What was read from each URL
(requests, retries, bytes) is counted per process (:func:`remote_reads`); decode processes send
their counts back with each decoded video.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections import OrderedDict
from typing import BinaryIO

from .._thread_pools import SharedThreadPool
from ..errors import RemoteReadWarning, UnreadableVideoError, VideoNotFoundError, check_lengths, format_bytes
from .answers import Answer, http_info, read_span, serves_http, spill_file, too_large_to_spill
from .range_reader import RangeReader
from .remote_failures import remote_error, with_retries
from .remote_options import RemoteOptions, remote_options, set_remote_options, storage_options
from .remote_reads import RemoteReads, add_remote_reads, count_read, remote_reads, take_remote_reads

__all__ = [
    "RemoteOptions",
    "RemoteReader",
    "RemoteReads",
    "add_remote_reads",
    "coalesce",
    "remote_error",
    "remote_options",
    "remote_reads",
    "set_remote_options",
    "take_remote_reads",
]

COALESCE_GAP_BYTES = 256 << 10  # ranges closer than this are fetched in one request
MAX_REQUEST_BYTES = 64 << 20  # a coalesced request never grows past this
REQUEST_THREADS = 8


# -- spill files for servers that ignore Range ---------------------------------------------------
class _Spill:
    """A remote file's whole content in an anonymous local file; reads fail once it is closed."""

    def __init__(self, file: BinaryIO, size: int):
        self.size = size
        self._file = file
        self._lock = threading.Lock()

    def read(self, ranges: list[tuple[int, int]]) -> list[bytes] | None:
        with self._lock:
            if self._file.closed:
                return None
            return [os.pread(self._file.fileno(), length, offset) for offset, length in ranges]

    def close(self) -> None:
        with self._lock:
            self._file.close()


class _Spills:
    """The spill files of the process, most recently used last, within ``spill_limit`` bytes."""

    def __init__(self):
        self._lock = threading.Lock()
        self._spills: OrderedDict[str, _Spill] = OrderedDict()

    def get(self, url: str) -> _Spill | None:
        with self._lock:
            spill = self._spills.get(url)
            if spill is not None:
                self._spills.move_to_end(url)
            return spill

    def put(self, url: str, spill: _Spill, limit: int) -> _Spill:
        evicted = []
        with self._lock:
            previous = self._spills.pop(url, None)
            if previous is not None:
                evicted.append(previous)
            while self._spills and sum(s.size for s in self._spills.values()) + spill.size > limit:
                evicted.append(self._spills.popitem(last=False)[1])
            self._spills[url] = spill
        for old in evicted:
            old.close()
        return spill


_spills = _Spills()
_warned_whole: set[str] = set()
_warned_lock = threading.Lock()
_requests = SharedThreadPool(REQUEST_THREADS, "vclip-range")


def _after_fork() -> None:  # locks and spill files do not belong to the child
    global _spills, _warned_lock
    _spills, _warned_lock = _Spills(), threading.Lock()


os.register_at_fork(after_in_child=_after_fork)


# -- the reader ----------------------------------------------------------------------------------
class RemoteReader(RangeReader):
    """A file fsspec opens, read by byte range with coalescing, concurrency, retries and counts.

    Until a server has answered one range request with the range, a read of several spans sends
    its first span alone: a server that ignores ``Range`` then sends the whole file once, not once
    per span.

    Args:
        url: ``protocol://...``; storage options come from fsspec's configuration (environment
            variables, ``~/.config/fsspec``), e.g. credentials or ``endpoint_url`` for S3, plus
            vclip's timeouts (:class:`RemoteOptions`).
    """

    def __init__(self, url: str):
        self.name = url
        self._options: RemoteOptions | None = None
        self._filesystem()
        self._size: int | None = None
        self._ignores_ranges = False
        self._honours_ranges = False
        self._whole_lock = threading.Lock()

    def _filesystem(self):
        """The fsspec filesystem for the options in force (made again when they change)."""
        options = remote_options()
        if options is not self._options:
            try:
                import fsspec.core

                protocol = fsspec.core.split_protocol(self.name)[0] or "file"
                self.fs, self.path = fsspec.core.url_to_fs(self.name, **storage_options(protocol, options))
            except ImportError as error:
                raise UnreadableVideoError(
                    self.name, f"reading URLs needs fsspec and its driver for this protocol ({error}); "
                    "install them with pip install 'vclip-nvdec[remote]'"
                ) from None
            except (ValueError, TypeError) as error:
                raise UnreadableVideoError(self.name, f"fsspec cannot open this URL ({error})") from None
            self._options = options
        return self.fs, options

    def info(self) -> dict:
        """Fresh metadata (size, ETag...) from the server: one HEAD or stat request."""
        fs, options = self._filesystem()
        if serves_http(fs):
            info = with_retries(self.name, lambda: http_info(fs, self.path), options)
        else:
            info = with_retries(self.name, lambda: fs.info(self.path), options)
        if info.get("type") == "directory":
            raise VideoNotFoundError(self.name, "is a folder (prefix), not a file")
        size = info.get("size", info.get("Size"))
        if size is None:
            raise UnreadableVideoError(self.name, "the server does not tell the file's size (no Content-Length)")
        self._size = int(size)
        return info

    def size(self) -> int:
        if self._size is None:
            self.info()
        return self._size  # type: ignore[return-value]

    def read_ranges(self, ranges: list[tuple[int, int]], *, gap: int = COALESCE_GAP_BYTES) -> list[bytes]:
        """As :meth:`RangeReader.read_ranges`; ranges closer than ``gap`` bytes share a request
        (0: only touching or overlapping ones, for small ranges far apart such as label members)."""
        if self._ignores_ranges:
            return check_lengths(self.name, ranges, self._from_spill(ranges))
        spans = coalesce(ranges, gap)
        fetched = [self._fetch(spans[0])] if len(spans) == 1 or not self._honours_ranges else []
        if self._ignores_ranges:  # found by the first span: the rest from its spill
            return check_lengths(self.name, ranges, self._from_spill(ranges))
        if len(fetched) < len(spans):
            fetched += list(_requests.get().map(self._fetch, spans[len(fetched):]))
        by_span = {span: data for span, data in zip(spans, fetched)}
        chunks = []
        for offset, length in ranges:
            start, end = next(span for span in spans if span[0] <= offset and offset + length <= span[1])
            data = by_span[(start, end)]
            chunks.append(data[offset - start:offset - start + length])
        return check_lengths(self.name, ranges, chunks)

    def _fetch(self, span: tuple[int, int]) -> bytes:
        start, end = span
        fs, options = self._filesystem()
        size = self.size()
        answer = with_retries(self.name, lambda: read_span(fs, self.path, self.name, start, end, file_size=size,
                                                           whole_limit=options.spill_limit), options)
        if answer.whole is not None:
            chunks = self._keep_whole(answer.whole, asked=end - start).read([(start, end - start)])
            if chunks is not None:
                return chunks[0]
            raise UnreadableVideoError(self.name, "its spill file was evicted while it was read (spill_limit too "
                                                  "small for the files read at once)")
        if answer.ranges_ignored:  # the whole file, too large to keep: later reads are refused
            count_read(self.name, whole_file_reads=1)
            self._ignores_ranges = True
        else:
            self._honours_ranges = True
        return answer.data

    def _keep_whole(self, file: BinaryIO, *, asked: int) -> _Spill:
        """Keep the whole file (in the anonymous ``file``) as this URL's spill; warn the first time."""
        self._warn_whole(asked=asked)
        self._ignores_ranges = True
        return _spills.put(self.name, _Spill(file, self.size()), self._filesystem()[1].spill_limit)

    def _warn_whole(self, *, asked: int) -> None:
        count_read(self.name, whole_file_reads=1)  # one whole-file answer
        with _warned_lock:
            first = self.name not in _warned_whole
            _warned_whole.add(self.name)
        if first:
            warnings.warn(
                f"{self.name}: the server ignores Range requests (it sent the whole file, "
                f"{format_bytes(self.size())}, for {asked} bytes); the file is kept in a local spill file and "
                "read from there", RemoteReadWarning, stacklevel=3,
            )

    def _from_spill(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        spill = _spills.get(self.name)
        chunks = spill.read(ranges) if spill is not None else None
        if chunks is not None:
            return chunks
        with self._whole_lock:  # evicted: one thread reads the whole file again
            spill = _spills.get(self.name)
            chunks = spill.read(ranges) if spill is not None else None
            if chunks is None:
                fs, options = self._filesystem()
                size = self.size()
                answer = with_retries(self.name, lambda: read_span(fs, self.path, self.name, 0, size, file_size=size,
                                                                   whole_limit=options.spill_limit), options)
                if answer.whole is None and answer.data is not None and size <= options.spill_limit:
                    answer = Answer(whole=spill_file(answer.data))
                if answer.whole is None:
                    raise too_large_to_spill(self.name, size, options.spill_limit)
                chunks = self._keep_whole(answer.whole, asked=size).read(ranges)
        if chunks is None:
            raise UnreadableVideoError(self.name, "its spill file was evicted while it was read (spill_limit too "
                                                  "small for the files read at once)")
        return chunks


def coalesce(ranges: list[tuple[int, int]], gap: int = COALESCE_GAP_BYTES,
             limit: int = MAX_REQUEST_BYTES) -> list[tuple[int, int]]:
    """``(start, end)`` spans covering every ``(offset, length)`` range, neighbours closer than
    ``gap`` bytes merged while a span stays under ``limit`` bytes (overlapping ones always)."""
    spans: list[list[int]] = []
    for offset, length in sorted(ranges):
        end = offset + length
        if spans and (offset < spans[-1][1] or
                      (offset - spans[-1][1] <= gap and max(end, spans[-1][1]) - spans[-1][0] <= limit)):
            spans[-1][1] = max(spans[-1][1], end)
        else:
            spans.append([offset, end])
    return [(start, end) for start, end in spans]
