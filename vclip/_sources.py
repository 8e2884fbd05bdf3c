"""Where a video's bytes come from: a local file, a URL fsspec opens, bytes, or a file-like object.

Every video is named by one string (``VideoIndex.path``): a local path, a URL (``s3://b/k.mp4``,
``https://host/v.mp4``, ``gs://...``: anything with a ``scheme://`` that fsspec opens), a slice of
another file or URL (``CONTAINER#LABEL@OFFSET+SIZE``: the ``SIZE`` bytes from ``OFFSET`` of
``CONTAINER``, e.g. a member of a tar shard, :func:`slice_name`), or, for data handed over in memory,
a name this process registers (``<bytes:DIGEST>``, ``<file:ID>``) that stays readable while the
object that registered it (e.g. a ``VideoDecoder``) is alive.

Remote files are read by byte range: :meth:`RemoteReader.read_ranges` coalesces nearby ranges into
one request, sends the requests concurrently on a small thread pool, and retries transient failures
(HTTP 5xx/429, connection resets, timeouts) with exponential backoff. Every failure is a
:class:`~vclip.errors.VideoError` naming the URL: :class:`VideoNotFoundError` for a missing object
(HTTP 404, no such key or bucket), :class:`UnreadableVideoError` for access denied, a missing
fsspec driver or failures that outlast the retries.

Index caches key remote files by URL and a metadata fingerprint (:func:`source_fingerprint`: size,
ETag and last-modified time from one HEAD/stat request), not by reading sampled bytes as for local
files: a server that changes content without changing size, ETag or date is not detected. A slice
is read through its container's reader (a local file by ``pread``, a URL as above), so a clip of a
member of a shard on S3 reads only its packets; its fingerprint is its container's metadata
fingerprint (a URL) or a digest of its own sampled bytes (a local file), with its offset and size.
"""

from __future__ import annotations

import hashlib
import io
import os
import random
import re
import threading
import time
import weakref
from collections import OrderedDict
from typing import BinaryIO

from ._ahead import SharedThreadPool
from ._fingerprint import sampled_ranges
from .errors import (
    CorruptVideoError,
    UnreadableVideoError,
    VideoError,
    VideoNotFoundError,
    fail,
    video_error_from_os_error,
)

__all__ = [
    "RangeReader",
    "RemoteReader",
    "VideoInput",
    "coalesce",
    "hold_video",
    "is_local",
    "is_url",
    "open_binary",
    "open_reader",
    "read_ranges",
    "remote_error",
    "slice_name",
    "source_fingerprint",
    "split_slice_name",
]

VideoInput = str | os.PathLike | bytes | bytearray | memoryview | BinaryIO
"""A video: a path, a URL, its bytes, or a binary file-like object with ``read`` and ``seek``."""

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]+://")  # two letters or more: "C://" is a drive
_MEMORY_NAME = re.compile(r"^<(bytes|file):[0-9a-f]+>$")
_SLICE_NAME = re.compile(r"^(.+)#([^#]*)@(\d+)\+(\d+)$", re.DOTALL)  # the label is the part after the last "#"
COALESCE_GAP_BYTES = 256 << 10  # ranges closer than this are fetched in one request
MAX_REQUEST_BYTES = 64 << 20  # a coalesced request never grows past this
REQUEST_THREADS = 8
ATTEMPTS = 4  # tries per request; waits of 0.1, 0.2, 0.4 s (+ jitter) between them
_BACKOFF_SECONDS = 0.1
_READERS_KEPT = 64  # opened remote files (filesystem handle + path) kept for reuse


def is_url(name: str) -> bool:
    """Whether ``name`` is a URL (``scheme://...``) rather than a local path."""
    return bool(_URL.match(name))


def is_local(video: object) -> bool:
    """Whether ``video`` is a local path (not a URL, bytes, file object or in-memory name)."""
    if not isinstance(video, (str, os.PathLike)):
        return False
    name = os.fspath(video)
    return isinstance(name, bytes) or not (is_url(name) or _MEMORY_NAME.match(name) or _SLICE_NAME.match(name))


class RangeReader:
    """Random access to one video's bytes. ``name`` is what errors and the index call it."""

    name: str

    def size(self) -> int:
        """Length in bytes."""
        raise NotImplementedError

    def read_ranges(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        """The bytes of each ``(offset, length)`` range, in order.

        Raises:
            VideoError: The source cannot be read, or ends inside a range.
        """
        raise NotImplementedError


class _MemoryReader(RangeReader):
    def __init__(self, data: bytes | memoryview):
        self.data = data
        self.name = f"<bytes:{hashlib.blake2b(data, digest_size=12).hexdigest()}>"

    def size(self) -> int:
        return len(self.data)

    def read_ranges(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        return _checked(self.name, ranges, [bytes(self.data[offset:offset + length]) for offset, length in ranges])


class _FileObjectReader(RangeReader):
    """A caller's binary file object; reads are serialised, so it may be shared by threads."""

    def __init__(self, file: BinaryIO):
        self.file = file
        self.name = f"<file:{id(file):x}>"
        self._lock = threading.Lock()

    def size(self) -> int:
        with self._lock:
            return self.file.seek(0, io.SEEK_END)

    def read_ranges(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        chunks = []
        with self._lock:
            try:
                for offset, length in ranges:
                    self.file.seek(offset)
                    chunks.append(self.file.read(length))
            except (OSError, ValueError) as error:
                raise UnreadableVideoError(self.name, f"the file object cannot be read ({error})") from None
        return _checked(self.name, ranges, chunks)


class RemoteReader(RangeReader):
    """A file fsspec opens, read by byte range with coalescing, concurrency and retries.

    Args:
        url: ``protocol://...``; storage options come from fsspec's configuration (environment
            variables, ``~/.config/fsspec``), e.g. credentials or ``endpoint_url`` for S3.
    """

    def __init__(self, url: str):
        self.name = url
        try:
            import fsspec.core

            self.fs, self.path = fsspec.core.url_to_fs(url)
        except ImportError as error:
            raise UnreadableVideoError(
                url, f"reading URLs needs fsspec and its driver for this protocol ({error}); "
                "install them with pip install 'vclip-nvdec[remote]'"
            ) from None
        except (ValueError, TypeError) as error:
            raise UnreadableVideoError(url, f"fsspec cannot open this URL ({error})") from None
        self._size: int | None = None

    def info(self) -> dict:
        """Fresh metadata (size, ETag...) from the server: one HEAD or stat request."""
        info = _with_retries(self.name, lambda: self.fs.info(self.path))
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
        spans = coalesce(ranges, gap)
        fetched = list(_requests.get().map(self._fetch, spans)) if len(spans) > 1 else [self._fetch(spans[0])]
        by_span = {span: data for span, data in zip(spans, fetched)}
        chunks = []
        for offset, length in ranges:
            start, end = next(span for span in spans if span[0] <= offset and offset + length <= span[1])
            data = by_span[(start, end)]
            chunks.append(data[offset - start:offset - start + length])
        return _checked(self.name, ranges, chunks)

    def _fetch(self, span: tuple[int, int]) -> bytes:
        start, end = span
        data = _with_retries(self.name, lambda: self.fs.cat_file(self.path, start=start, end=end))
        if len(data) > end - start and self._size is not None and len(data) == self._size:
            data = data[start:end]  # a server that ignores Range sends the whole file
        return data


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


def _checked(name: str, ranges: list[tuple[int, int]], chunks: list[bytes]) -> list[bytes]:
    for (offset, length), data in zip(ranges, chunks):
        if len(data) != length:
            raise CorruptVideoError(name, f"ends at byte {offset + len(data)}, {offset + length} are needed "
                                          "(it was changed after indexing?)")
    return chunks


# -- errors and retries -------------------------------------------------------------------------
_TRANSIENT_NAMES = {"ClientConnectionError", "ClientPayloadError", "ServerDisconnectedError",
                    "ServerTimeoutError", "ReadTimeoutError", "ConnectTimeoutError", "EndpointConnectionError"}


def _status(error: BaseException | None) -> int | None:
    """The HTTP status of ``error`` or of the error it was raised from (fsspec's HTTP ``info``
    reports any failed HEAD/GET as a FileNotFoundError raised from the response error)."""
    while error is not None:
        status = getattr(error, "status", None) or getattr(error, "code", None)
        if isinstance(status, int):
            return status
        error = error.__cause__
    return None


def _is_transient(error: BaseException) -> bool:
    status = _status(error)
    if status is not None:
        return status >= 500 or status in (408, 429)
    if isinstance(error, (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)):
        return False
    if isinstance(error, (ConnectionError, TimeoutError)):
        return True
    return any(kind.__name__ in _TRANSIENT_NAMES for kind in type(error).__mro__)


def remote_error(url: str, error: BaseException) -> VideoError:
    """The :class:`VideoError` for a failure of a remote read of ``url``."""
    status = _status(error)
    reason = str(error) or type(error).__name__
    if isinstance(error, VideoError):
        return error
    if status in (401, 403) or isinstance(error, PermissionError):
        return UnreadableVideoError(url, f"access denied ({f'HTTP {status}' if status else reason})")
    if status == 404 or (status is None and isinstance(error, FileNotFoundError)):
        return VideoNotFoundError(url, "not found (no such object; HTTP 404)")
    if status is not None:
        return UnreadableVideoError(url, f"the server answered HTTP {status} ({reason})")
    return UnreadableVideoError(url, f"cannot be read ({type(error).__name__}: {reason})")


def _with_retries(url: str, request):
    """``request()``, retried on transient errors; any failure as a VideoError naming ``url``."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return request()
        except Exception as error:  # noqa: BLE001  fsspec drivers raise their own types (aiohttp, botocore)
            transient = _is_transient(error)
            if not transient or attempt == ATTEMPTS:
                failure = remote_error(url, error)
                if transient:
                    failure = UnreadableVideoError(url, f"{failure.problem}, still failing after {ATTEMPTS} tries")
                raise failure from None
        time.sleep(_BACKOFF_SECONDS * 2 ** (attempt - 1) * (1 + random.random() / 2))


# -- shared state: the request pool, opened remote files, in-memory videos ----------------------
_lock = threading.Lock()
_requests = SharedThreadPool(REQUEST_THREADS, "vclip-range")
_readers: OrderedDict[str, RangeReader] = OrderedDict()  # remote files and containers of slices
_held: weakref.WeakValueDictionary[str, RangeReader] = weakref.WeakValueDictionary()


def _after_fork() -> None:  # threads and event loops do not survive fork: start afresh in the child
    global _lock
    _lock = threading.Lock()
    _readers.clear()
    _container_fingerprints.clear()


os.register_at_fork(after_in_child=_after_fork)


def hold_video(video: VideoInput) -> tuple[str, RangeReader | None]:
    """The name of ``video`` and, for bytes and file objects, the reader that keeps it readable.

    Bytes and file objects are registered under their name while the returned reader is
    referenced; paths and URLs need no holder (None).

    Raises:
        ArgumentError: ``video`` is none of the accepted kinds.
    """
    if isinstance(video, (str, os.PathLike)):
        return os.fspath(video), None
    if isinstance(video, memoryview) and video.readonly and video.c_contiguous:  # e.g. a memory-mapped Arrow column
        reader: RangeReader = _MemoryReader(video.cast("B"))
    elif isinstance(video, (bytes, bytearray, memoryview)):
        reader = _MemoryReader(bytes(video))
    elif callable(getattr(video, "read", None)) and callable(getattr(video, "seek", None)):
        reader = _FileObjectReader(video)
    else:
        raise fail("video", video, "a path, a URL, bytes or a binary file object with read() and seek()")
    with _lock:
        reader = _held.setdefault(reader.name, reader)
    return reader.name, reader


def open_reader(name: str) -> RangeReader:
    """The reader of a URL, slice or in-memory name (readers of remote files and of the containers
    of slices are kept and reused; a local container replaced since is opened again).

    Raises:
        VideoError: An in-memory video no longer held, a URL fsspec cannot open, or a slice whose
            container cannot be opened.
    """
    if _MEMORY_NAME.match(name):
        reader = _held.get(name)
        if reader is None:
            raise VideoNotFoundError(name, "this in-memory video is no longer held (keep the VideoDecoder "
                                           "or the object that opened it)")
        return reader
    parts = split_slice_name(name)
    if parts is not None:
        return _open_slice(name, *parts)
    local = is_local(name)
    with _lock:
        kept = _readers.get(name)
    if kept is not None and local and _identity_of(name) != getattr(kept, "identity", None):
        kept = None
    if kept is not None:
        with _lock:
            if name in _readers:
                _readers.move_to_end(name)
        return kept
    opened: RangeReader = _LocalFileReader(name) if local else RemoteReader(name)
    with _lock:
        _readers[name] = opened
        while len(_readers) > _READERS_KEPT:
            _readers.popitem(last=False)
    return opened


def source_fingerprint(name: str) -> str | None:
    """What identifies the current content of a URL or in-memory video for index caches.

    Remote: ``"remote-<size>-<ETag>-<last-modified>"`` from fresh metadata (one request); bytes:
    their digest; file objects: None (not cached, their content may change unseen); a slice:
    ``"slice-<offset>-<size>-"`` followed by its container's fingerprint when that is remote or in
    memory, by a digest of the slice's sampled bytes when it is a local file.

    Raises:
        VideoError: The URL cannot be reached, is missing or is not readable.
    """
    parts = split_slice_name(name)
    if parts is not None:
        return _slice_fingerprint(name, *parts)
    reader = open_reader(name)
    if isinstance(reader, _MemoryReader):
        return f"bytes-{len(reader.data)}-{reader.name[7:-1]}"
    if not isinstance(reader, RemoteReader):
        return None
    info = reader.info()
    tag = next((str(info[key]) for key in ("ETag", "etag", "ETAG", "md5", "generation") if info.get(key)), "")
    modified = next((str(info[key]) for key in ("Last-Modified", "LastModified", "mtime", "updated")
                     if info.get(key)), "")
    return f"remote-{reader.size()}-{tag.strip(chr(34))}-{modified}"


def read_ranges(name: str, ranges: list[tuple[int, int]]) -> list[bytes]:
    """The bytes of each ``(offset, length)`` range of a URL, slice or in-memory video."""
    return open_reader(name).read_ranges(ranges)


class _RangeFile(io.RawIOBase):
    """A seekable read-only file over a reader, reading ahead more after each sequential read."""

    _FIRST_READ = 64 << 10
    _LARGEST_READ = 8 << 20

    def __init__(self, reader: RangeReader):
        self._reader = reader
        self._size = reader.size()
        self._position = 0
        self._buffer, self._buffer_start = b"", 0
        self._ahead = self._FIRST_READ

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}[whence]
        self._position = max(0, base + offset)
        return self._position

    def readinto(self, target) -> int:
        view = memoryview(target).cast("B")
        start = self._position - self._buffer_start
        if not 0 <= start < len(self._buffer):
            if self._position >= self._size:
                return 0
            sequential = self._position == self._buffer_start + len(self._buffer)
            self._ahead = min(self._ahead * 2, self._LARGEST_READ) if sequential else self._FIRST_READ
            length = min(max(len(view), self._ahead), self._size - self._position)
            self._buffer, self._buffer_start = self._reader.read_ranges([(self._position, length)])[0], self._position
            start = 0
        count = min(len(view), len(self._buffer) - start)
        view[:count] = self._buffer[start:start + count]
        self._position += count
        return count


def open_binary(name: str) -> BinaryIO:
    """A seekable binary file of any video name (a local path is opened with ``open``).

    Raises:
        OSError: A local file cannot be opened. VideoError: A remote or in-memory one cannot.
    """
    if is_local(name):
        return open(name, "rb")
    reader = open_reader(name)
    if isinstance(reader, _MemoryReader):
        return io.BytesIO(reader.data)
    return _RangeFile(reader)  # type: ignore[return-value]


# -- slices: videos stored inside other files (members of tar shards) ---------------------------
def slice_name(container: str, label: str, offset: int, size: int) -> str:
    """The name of the ``size`` bytes from ``offset`` of ``container`` (a local path or a URL),
    called ``label`` in messages: ``CONTAINER#LABEL@OFFSET+SIZE``; ``%`` and ``#`` in the label are
    percent-encoded."""
    return f"{container}#{label.replace('%', '%25').replace('#', '%23')}@{int(offset)}+{int(size)}"


def split_slice_name(name: str) -> tuple[str, str, int, int] | None:
    """``(container, label, offset, size)`` of a :func:`slice_name`, or None for any other name."""
    match = _SLICE_NAME.match(name)
    if match is None:
        return None
    container, label, offset, size = match.groups()
    return container, label.replace("%23", "#").replace("%25", "%"), int(offset), int(size)


class _LocalFileReader(RangeReader):
    """A local file read with ``pread`` (thread-safe); the container of slices named by its path."""

    def __init__(self, path: str):
        self.name = path
        self._descriptor = -1
        try:
            self._descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            self.identity = _identity(os.fstat(self._descriptor))
        except OSError as error:
            raise video_error_from_os_error(path, error) from None

    def __del__(self):  # closed when no reader of its slices holds it any more
        if self._descriptor >= 0:
            os.close(self._descriptor)

    def size(self) -> int:
        return os.fstat(self._descriptor).st_size

    def read_ranges(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        try:
            chunks = [os.pread(self._descriptor, length, offset) for offset, length in ranges]
        except OSError as error:
            raise video_error_from_os_error(self.name, error) from None
        return _checked(self.name, ranges, chunks)


def _identity(stat: os.stat_result) -> tuple[int, int, int, int]:
    """What tells a replaced local file from the one a reader holds open."""
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns


class SliceReader(RangeReader):
    """The ``size`` bytes from ``offset`` of another reader's source (a member of a tar shard), read
    through that reader: a remote container's coalescing, concurrency and retries serve its slices.

    Args:
        container: The reader of the whole file. offset, size: Where the slice lies in it.
        name: The slice's name (:func:`slice_name`), used by errors.
    """

    def __init__(self, container: RangeReader, offset: int, size: int, name: str):
        self.container, self.offset, self.length, self.name = container, offset, size, name

    def size(self) -> int:
        return self.length

    def read_ranges(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        inside = [(self.offset + offset, max(0, min(length, self.length - offset))) for offset, length in ranges]
        try:
            chunks = self.container.read_ranges(inside)
        except VideoError as error:  # the container's problem, told as this slice's
            raise type(error)(self.name, f"{error.path}: {error.problem}") from None
        return _checked(self.name, ranges, chunks)


def _open_slice(name: str, container: str, label: str, offset: int, size: int) -> SliceReader:
    try:
        return SliceReader(open_reader(container), offset, size, name)
    except VideoError as error:
        raise type(error)(name, f"{error.path}: {error.problem}") from None


def _slice_fingerprint(name: str, container: str, label: str, offset: int, size: int) -> str | None:
    where = f"slice-{offset}-{size}-"
    if not is_local(container):
        outer = _container_fingerprint(container)
        return None if outer is None else where + outer
    digest = hashlib.blake2b(digest_size=16)
    for chunk in open_reader(name).read_ranges(sampled_ranges(size)):
        digest.update(chunk)
    return where + digest.hexdigest()


_CONTAINER_TRUST_SECONDS = 30.0  # a remote container's metadata serves all its slices this long
_container_fingerprints: dict[str, tuple[float, str | None]] = {}


def _container_fingerprint(container: str) -> str | None:
    """:func:`source_fingerprint` of a remote container, asked again after
    :data:`_CONTAINER_TRUST_SECONDS`: the members of a shard share one HEAD request."""
    with _lock:
        known = _container_fingerprints.get(container)
    if known is not None and time.monotonic() - known[0] < _CONTAINER_TRUST_SECONDS:
        return known[1]
    fingerprint = source_fingerprint(container)
    with _lock:
        _container_fingerprints[container] = (time.monotonic(), fingerprint)
        if len(_container_fingerprints) > 4 * _READERS_KEPT:
            del _container_fingerprints[next(iter(_container_fingerprints))]
    return fingerprint


def _identity_of(path: str) -> tuple[int, int, int, int] | None:
    try:
        return _identity(os.stat(path))
    except OSError:
        return None
