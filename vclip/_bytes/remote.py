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
import random
import tempfile
import threading
import time
import warnings
from collections import OrderedDict
from dataclasses import dataclass, fields
from email.utils import parsedate_to_datetime
from typing import Any

from .._thread_pools import SharedThreadPool
from ..errors import (
    ArgumentError,
    RemoteReadWarning,
    UnreadableVideoError,
    VideoError,
    VideoNotFoundError,
    check_integer,
    check_lengths,
    check_number,
    format_bytes,
    parse_bytes,
)
from .range_reader import RangeReader

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
_BACKOFF_SECONDS = 0.1  # waits of 0.1, 0.2, 0.4 s... (+ jitter) between tries
_LONGEST_RETRY_AFTER_SECONDS = 60.0


# -- options -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RemoteOptions:
    """How vclip reads videos at URLs.

    Attributes:
        connect_timeout: Seconds to wait for a connection to the server (default 10).
        read_timeout: Seconds to wait for the next data of an answer (default 30): a server that
            accepts a request and never answers fails the try after this long.
        attempts: Tries per request before a transient failure is reported (default 4).
        spill_limit: Bytes of local spill files, all URLs of the process together, for servers
            that ignore ``Range`` (default 2 GiB); a file larger than this from such a server is
            reported as unreadable.
    """

    connect_timeout: float = 10.0
    read_timeout: float = 30.0
    attempts: int = 4
    spill_limit: int = 2 << 30


_ENVIRONMENT = {
    "connect_timeout": "VCLIP_REMOTE_CONNECT_TIMEOUT",
    "read_timeout": "VCLIP_REMOTE_READ_TIMEOUT",
    "attempts": "VCLIP_REMOTE_ATTEMPTS",
    "spill_limit": "VCLIP_REMOTE_SPILL_LIMIT",
}
_options_lock = threading.Lock()
_options_cache: tuple[tuple[str | None, ...], RemoteOptions] | None = None


def _checked_option(name: str, value) -> float | int:
    if name == "attempts":
        return check_integer(name, value, minimum=1)
    if name == "spill_limit":
        return parse_bytes(value, name=name)
    return check_number(name, value, minimum=0, minimum_inclusive=False)


def remote_options() -> RemoteOptions:
    """The options in force (from the environment variables :func:`set_remote_options` sets).

    Raises:
        ArgumentError: One of the variables holds a value the option does not allow.
    """
    global _options_cache
    values = tuple(os.environ.get(variable) for variable in _ENVIRONMENT.values())
    with _options_lock:
        if _options_cache is not None and _options_cache[0] == values:
            return _options_cache[1]
    chosen: dict[str, Any] = {}
    for (name, variable), text in zip(_ENVIRONMENT.items(), values):
        if text is None:
            continue
        value: str | float = text
        try:
            value = {"attempts": int, "spill_limit": str}.get(name, float)(text)
        except ValueError:
            pass  # refused below, with the text as it is
        try:
            chosen[name] = _checked_option(name, value)
        except ArgumentError as error:
            raise ArgumentError(f"environment variable {variable}: {error}") from None
    options = RemoteOptions(**chosen)
    with _options_lock:
        _options_cache = (values, options)
    return options


def set_remote_options(*, connect_timeout: float | None = None, read_timeout: float | None = None,
                       attempts: int | None = None, spill_limit: int | str | None = None) -> RemoteOptions:
    """Set how videos at URLs are read, for this process and the decode processes it starts
    later (the values go to environment variables ``VCLIP_REMOTE_CONNECT_TIMEOUT``,
    ``VCLIP_REMOTE_READ_TIMEOUT``, ``VCLIP_REMOTE_ATTEMPTS`` and ``VCLIP_REMOTE_SPILL_LIMIT``,
    which may also be set before Python starts). Options left None keep their value.

    Args:
        connect_timeout: Seconds to wait for a connection (> 0; default 10).
        read_timeout: Seconds to wait for the next data of an answer (> 0; default 30).
        attempts: Tries per request (>= 1; default 4).
        spill_limit: Bytes of local spill files for servers that ignore ``Range``: an integer
            or a string with a unit (``"8GiB"``; default 2 GiB).

    Returns:
        The options now in force. Fetch timeouts apply from the next request on.

    Raises:
        ArgumentError: A value out of range.
    """
    given = {"connect_timeout": connect_timeout, "read_timeout": read_timeout, "attempts": attempts,
             "spill_limit": spill_limit}
    checked = {name: _checked_option(name, value) for name, value in given.items() if value is not None}
    for name, value in checked.items():
        os.environ[_ENVIRONMENT[name]] = repr(value) if isinstance(value, float) else str(value)
    return remote_options()


def _storage_options(protocol: str, options: RemoteOptions) -> dict:
    """fsspec storage options that give the protocol's driver vclip's timeouts (what fsspec's own
    configuration sets for them is kept: it wins)."""
    import fsspec.config

    if protocol in ("http", "https"):
        import aiohttp

        client = {**fsspec.config.conf.get("http", {}).get("client_kwargs", {}),
                  **fsspec.config.conf.get("https", {}).get("client_kwargs", {})}  # as fsspec merges them
        client.setdefault("timeout", aiohttp.ClientTimeout(
            total=None, sock_connect=options.connect_timeout, sock_read=options.read_timeout))
        return {"client_kwargs": client}
    if protocol in ("s3", "s3a"):
        config = dict(fsspec.config.conf.get(protocol, {}).get("config_kwargs", {}))
        config.setdefault("connect_timeout", options.connect_timeout)
        config.setdefault("read_timeout", options.read_timeout)
        return {"config_kwargs": config}
    return {}


# -- what was read -------------------------------------------------------------------------------
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


def _count(url: str, **amounts: int) -> None:
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
        _count(url, **{f.name: count for f, count in zip(fields(RemoteReads), counts)})


# -- failures and retries ------------------------------------------------------------------------
class _TruncatedBody(Exception):
    """An answer shorter than the range asked, inside the file."""


_TRUNCATED = {"ClientPayloadError", "ContentLengthError", "TransferEncodingError", "IncompleteReadError",
              "ResponseStreamingError", "_TruncatedBody"}
_CONNECT_TIMEOUTS = {"ConnectionTimeoutError", "ConnectTimeoutError"}
_READ_TIMEOUTS = {"SocketTimeoutError", "ReadTimeoutError"}
_TIMEOUTS = {"ServerTimeoutError", "FSTimeoutError", "TimeoutError"} | _CONNECT_TIMEOUTS | _READ_TIMEOUTS
_CONNECTION = {"ClientConnectorError", "ClientConnectionError", "ClientOSError", "ServerDisconnectedError",
               "EndpointConnectionError", "ConnectionClosedError", "ConnectionError"}
_TRANSIENT_STATUS = {408, 425, 429}


@dataclass(frozen=True)
class _Failure:
    """What went wrong with a request, from the error and the errors it was raised from."""

    kind: str  # "status", "truncated", "timeout", "connection", "redirects", "not found", "denied", "other"
    error: BaseException
    status: int | None = None
    retry_after: float | None = None

    @property
    def transient(self) -> bool:
        if self.kind == "status":
            return self.status is not None and (self.status >= 500 or self.status in _TRANSIENT_STATUS)
        return self.kind in ("truncated", "timeout", "connection")


def _chain(error: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and not any(current is seen for seen in chain):
        chain.append(current)
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    return chain


def _retry_after(error: BaseException) -> float | None:
    headers = getattr(error, "headers", None)
    value = headers.get("Retry-After") if headers is not None else None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


def _diagnose(error: BaseException) -> _Failure:
    """Drivers wrap errors (fsspec's HTTP ``info`` raises a FileNotFoundError from a refused
    connection): the innermost specific cause decides."""
    for cause in _chain(error):
        names = {kind.__name__ for kind in type(cause).__mro__}
        if "TooManyRedirects" in names:
            return _Failure("redirects", cause)
        if names & _TRUNCATED:
            return _Failure("truncated", cause)
        if names & _TIMEOUTS:
            return _Failure("timeout", cause)
        status = getattr(cause, "status", None)
        if isinstance(status, int) and not isinstance(status, bool):
            return _Failure("status", cause, status, _retry_after(cause))
        if names & _CONNECTION:
            return _Failure("connection", cause)
    if isinstance(error, PermissionError):
        return _Failure("denied", error)
    if isinstance(error, FileNotFoundError):
        return _Failure("not found", error)
    return _Failure("other", error)


def _reason(error: BaseException) -> str:
    return getattr(error, "strerror", None) or str(error) or type(error).__name__


def _problem(failure: _Failure, options: RemoteOptions) -> str:
    error, status = failure.error, failure.status
    names = {kind.__name__ for kind in type(error).__mro__}
    if failure.kind == "redirects":
        return "too many redirects (a redirect loop?)"
    if failure.kind == "truncated":
        return f"the server ended an answer early (a truncated body: {_reason(error)})"
    if failure.kind == "timeout":
        if names & _CONNECT_TIMEOUTS:
            return f"timed out connecting to the server (connect_timeout {options.connect_timeout:g} s)"
        if names & _READ_TIMEOUTS:
            return f"timed out waiting for the server's answer (read_timeout {options.read_timeout:g} s)"
        return f"timed out ({_reason(error)})"
    if failure.kind == "connection":
        return f"cannot connect to the server ({_reason(error)})"
    if failure.kind == "status":
        if status == 429 or (status is not None and status >= 500):
            return f"the server answered HTTP {status}"
        return f"the server answered HTTP {status} ({_reason(error)})"
    return f"cannot be read ({type(error).__name__}: {_reason(error)})"


def remote_error(url: str, error: BaseException, options: RemoteOptions | None = None) -> VideoError:
    """The :class:`VideoError` for a failure of a remote read of ``url``."""
    if isinstance(error, VideoError):
        return error
    failure = _diagnose(error)
    if failure.kind == "denied" or failure.status in (401, 403):
        because = f"HTTP {failure.status}" if failure.status else _reason(error)
        return UnreadableVideoError(url, f"access denied ({because})")
    if failure.kind == "not found" or failure.status in (404, 410):
        return VideoNotFoundError(url, f"not found (no such object; HTTP {failure.status or 404})")
    return UnreadableVideoError(url, _problem(failure, options or remote_options()))


def _with_retries(url: str, request, options: RemoteOptions):
    """``request()``, tried ``options.attempts`` times on transient failures; counted; any failure
    as a VideoError naming ``url``."""
    for attempt in range(1, options.attempts + 1):
        _count(url, requests=1, retries=int(attempt > 1))
        try:
            return request()
        except Exception as error:  # noqa: BLE001  fsspec drivers raise their own types (aiohttp, botocore)
            if isinstance(error, VideoError):
                raise
            failure = _diagnose(error)
            if not failure.transient or attempt == options.attempts:
                problem = remote_error(url, error, options)
                if failure.transient:
                    problem = UnreadableVideoError(url, f"{problem.problem}, still failing after "
                                                        f"{options.attempts} tries")
                raise problem from None
        wait = _BACKOFF_SECONDS * 2 ** (attempt - 1) * (1 + random.random() / 2)
        if failure.retry_after is not None:
            wait = max(wait, min(failure.retry_after, _LONGEST_RETRY_AFTER_SECONDS))
        time.sleep(wait)


# -- spill files for servers that ignore Range ---------------------------------------------------
class _Spill:
    """A remote file's whole content in an anonymous local file; reads fail once it is closed."""

    def __init__(self, data: bytes):
        self.size = len(data)
        self._file = tempfile.TemporaryFile(prefix="vclip-spill-")
        self._file.write(data)
        self._file.flush()
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

    def put(self, url: str, data: bytes, limit: int) -> _Spill:
        spill = _Spill(data)
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
_requests = SharedThreadPool(REQUEST_THREADS, "vclip-range")


def _after_fork() -> None:  # locks and spill files do not belong to the child; the counts go on
    global _reads_lock, _spills, _options_lock
    _reads_lock, _options_lock = threading.Lock(), threading.Lock()
    _spills = _Spills()


os.register_at_fork(after_in_child=_after_fork)


# -- the reader ----------------------------------------------------------------------------------
class RemoteReader(RangeReader):
    """A file fsspec opens, read by byte range with coalescing, concurrency, retries and counts.

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
        self._whole_lock = threading.Lock()

    def _filesystem(self):
        """The fsspec filesystem for the options in force (made again when they change)."""
        options = remote_options()
        if options is not self._options:
            try:
                import fsspec.core

                protocol = fsspec.core.split_protocol(self.name)[0] or "file"
                self.fs, self.path = fsspec.core.url_to_fs(self.name, **_storage_options(protocol, options))
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
        info = _with_retries(self.name, lambda: fs.info(self.path), options)
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
        fetched = list(_requests.get().map(self._fetch, spans)) if len(spans) > 1 else [self._fetch(spans[0])]
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

        def request() -> bytes:
            data = fs.cat_file(self.path, start=start, end=end)
            _count(self.name, bytes_read=len(data))
            if len(data) < end - start and end <= self.size():
                raise _TruncatedBody(f"{len(data)} of {end - start} bytes")
            return data

        data = _with_retries(self.name, request, options)
        if len(data) > end - start:  # the server ignores Range: it sent the whole file
            self._keep_whole(data, asked=end - start)
            return data[start:end]
        return data

    def _keep_whole(self, data: bytes, *, asked: int) -> _Spill:
        """Keep the whole file ``data`` in a spill file; warn the first time."""
        _count(self.name, whole_file_reads=1)
        size = self.size()
        if len(data) != size:
            raise UnreadableVideoError(self.name, f"the server answered a range request for {asked} bytes with "
                                                  f"{len(data)}: neither the range nor the whole file ({size})")
        limit = self._filesystem()[1].spill_limit
        if size > limit:
            raise UnreadableVideoError(
                self.name, f"the server ignores Range requests, so every read sends the whole file "
                           f"({format_bytes(size)}), more than the spill limit ({format_bytes(limit)}): raise it "
                           "with vclip.set_remote_options(spill_limit=...) or serve the file with Range support")
        with _reads_lock:
            first = self.name not in _warned_whole
            _warned_whole.add(self.name)
        if first:
            warnings.warn(
                f"{self.name}: the server ignores Range requests (it sent the whole file, {format_bytes(size)}, "
                f"for {asked} bytes); the file is kept in a local spill file and read from there",
                RemoteReadWarning, stacklevel=2,
            )
        self._ignores_ranges = True
        return _spills.put(self.name, data, limit)

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

                def request() -> bytes:
                    data = fs.cat_file(self.path)
                    _count(self.name, bytes_read=len(data))
                    return data

                chunks = self._keep_whole(_with_retries(self.name, request, options), asked=self.size()).read(ranges)
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
