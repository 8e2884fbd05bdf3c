"""Where a video's bytes come from: a local file, a URL fsspec opens, bytes, or a file-like object.

Every video is named by one string (``VideoIndex.path``): a local path, a URL (``s3://b/k.mp4``,
``https://host/v.mp4``, ``gs://...``: anything with a ``scheme://`` that fsspec opens), a slice of
another file or URL (``CONTAINER#LABEL@OFFSET+SIZE``: the ``SIZE`` bytes from ``OFFSET`` of
``CONTAINER``, e.g. a member of a tar shard, :func:`slice_name`), or, for data handed over in memory,
a name this process registers (``<bytes:DIGEST>``, ``<file:ID>``) that stays readable while the
object that registered it (e.g. a ``VideoDecoder``) is alive.

Any of them opens three ways: by byte ranges (:func:`open_reader`), as a seekable file
(:func:`open_binary`), or as a container FFmpeg reads (:func:`open_container`, every failure a
VideoError naming the file; :data:`DEMUX_ERRORS` is what demuxing a damaged one raises).

Remote files are read by byte range through :mod:`vclip._bytes.remote` (coalesced, concurrent requests
with vclip's timeouts and retries). Every failure is a :class:`~vclip.errors.VideoError` naming the
URL: :class:`VideoNotFoundError` for a missing object (HTTP 404, no such key or bucket),
:class:`UnreadableVideoError` for access denied, a dead or misbehaving server, a missing fsspec
driver or failures that outlast the retries.

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
import re
import threading
import time
import weakref
from collections import OrderedDict
from typing import Any, BinaryIO

import av
from av.container import InputContainer

from ..errors import (
    CorruptVideoError,
    NotAVideoError,
    UnreadableVideoError,
    VideoError,
    VideoNotFoundError,
    check_lengths,
    fail,
    os_reason,
    video_error_from_os_error,
)
from .fingerprint import sampled_ranges
from .range_reader import RangeReader
from .remote import RemoteReader

__all__ = [
    "DEMUX_ERRORS",
    "VideoInput",
    "demux_failure",
    "hold_video",
    "is_local",
    "is_shareable",
    "is_url",
    "open_binary",
    "open_container",
    "open_reader",
    "read_ranges",
    "slice_name",
    "source_fingerprint",
    "split_slice_name",
]

VideoInput = str | os.PathLike | bytes | bytearray | memoryview | BinaryIO
"""A video: a path, a URL, its bytes, or a binary file-like object with ``read`` and ``seek``."""

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]+://")  # two letters or more: "C://" is a drive
_MEMORY_NAME = re.compile(r"^<(bytes|file):[0-9a-f]+>$")
_SLICE_NAME = re.compile(r"^(.+)#([^#]*)@(\d+)\+(\d+)$", re.DOTALL)  # the label is the part after the last "#"
_READERS_KEPT = 64  # opened remote files (filesystem handle + path) kept for reuse


def is_url(name: str) -> bool:
    """Whether ``name`` is a URL (``scheme://...``) rather than a local path."""
    return bool(_URL.match(name))


def is_local(video: object) -> bool:
    """Whether ``video`` is a local path (not a URL, bytes, file object or in-memory name)."""
    if not isinstance(video, (str, os.PathLike)):
        return False
    name = os.fspath(video)
    return isinstance(name, bytes) or not (is_url(name) or _MEMORY_NAME.match(name) or _slice_match(name))


def is_shareable(name: str) -> bool:
    """Whether another process can open the video called ``name``: a path, a URL or a slice of
    either (not bytes or a file object held by this process, nor a slice of one)."""
    parts = split_slice_name(name)
    return not _MEMORY_NAME.match(parts[0] if parts is not None else name)


class _MemoryReader(RangeReader):
    def __init__(self, data: bytes | memoryview):
        self.data = data
        self.name = f"<bytes:{hashlib.blake2b(data, digest_size=12).hexdigest()}>"

    def size(self) -> int:
        return len(self.data)

    def read_ranges(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        return check_lengths(self.name, ranges, [bytes(self.data[offset:offset + length]) for offset, length in ranges])


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
        return check_lengths(self.name, ranges, chunks)


# -- shared state: opened remote files and containers of slices, in-memory videos ---------------
_lock = threading.Lock()
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


# -- containers: a video opened by FFmpeg -------------------------------------------------------
_OPEN_OPTIONS: dict[str, Any] = {"metadata_errors": "replace"}
"""Options of ``av.open`` for reading: PyAV up to 18 refuses metadata that is not valid UTF-8
unless told to replace it; later PyAV has no such option (and no such refusal)."""


DEMUX_ERRORS = (av.error.FFmpegError, IndexError)
"""What demuxing a damaged file raises: FFmpeg's errors, and PyAV's IndexError for a packet of a
stream that appeared after the header (PyAV up to 18 does not follow new streams)."""


def demux_failure(error: BaseException) -> str:
    """The reason of one of :data:`DEMUX_ERRORS`, for messages."""
    if isinstance(error, IndexError):
        return "a packet of a stream that appears in the middle of the file"
    return os_reason(error)


_NO_PICTURES_PROBED = {"skip_frame": "all"}
"""Options of an ``av.open`` whose stream probe decodes no picture (FFmpeg gives them to the probe's
decoder of every stream; see :func:`open_container`)."""


def _open_for_reading(source: str | BinaryIO, options: dict[str, str] | None) -> InputContainer:
    try:
        return av.open(source, "r", options=options, **_OPEN_OPTIONS)
    except TypeError as error:
        if "metadata_errors" not in str(error):
            raise
        _OPEN_OPTIONS.clear()
        return av.open(source, "r", options=options)


def open_container(path: str, *, probe_pictures: bool = True):
    """``av.open(path)`` for reading, every failure a VideoError naming the file.

    Metadata that is not valid UTF-8 is read with replacement characters, not refused. URLs and
    in-memory videos are opened through :func:`open_binary`. ``probe_pictures`` False: FFmpeg's
    stream probe decodes no picture (for H.264 it decodes several, to guess how far frames are
    reordered: 3 ms of a 4 ms open at 640x360, 30 ms at 1080p), so the codec contexts know no pixel
    format, and no reordering depth beyond the stream headers', until they decode a picture.
    """
    local = is_local(path)
    try:
        return _open_for_reading(path if local else open_binary(path), None if probe_pictures else _NO_PICTURES_PROBED)
    except VideoError:
        raise
    except av.error.FileNotFoundError:
        raise VideoNotFoundError(path, "file does not exist") from None
    except (av.error.InvalidDataError, av.error.EOFError) as error:
        raise NotAVideoError(path, f"not a video container FFmpeg can read ({os_reason(error)})") from None
    except av.error.FFmpegError as error:
        if isinstance(error, OSError) and local:  # permission, loop, name length: let the OS say which
            try:
                with open(path, "rb"):
                    pass
            except OSError as os_error:
                raise video_error_from_os_error(path, os_error) from None
        raise CorruptVideoError(path, f"FFmpeg could not open it ({os_reason(error)})") from None
    except OSError as error:
        raise video_error_from_os_error(path, error) from None
    except (ValueError, ArithmeticError) as error:  # UnicodeDecodeError and friends from PyAV's wrappers
        raise CorruptVideoError(path, f"FFmpeg could not open it ({type(error).__name__}: {error})") from None


# -- slices: videos stored inside other files (members of tar shards) ---------------------------
def slice_name(container: str, label: str, offset: int, size: int) -> str:
    """The name of the ``size`` bytes from ``offset`` of ``container`` (a local path or a URL),
    called ``label`` in messages: ``CONTAINER#LABEL@OFFSET+SIZE``; ``%`` and ``#`` in the label are
    percent-encoded."""
    return f"{container}#{label.replace('%', '%25').replace('#', '%23')}@{int(offset)}+{int(size)}"


def split_slice_name(name: str) -> tuple[str, str, int, int] | None:
    """``(container, label, offset, size)`` of a :func:`slice_name`, or None for any other name
    (a local file whose own name looks like a slice's, ``clip#cut@0+100``, is that file)."""
    match = _slice_match(name)
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
        return check_lengths(self.name, ranges, chunks)


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
        return check_lengths(self.name, ranges, chunks)


def _slice_match(name: str) -> re.Match | None:
    """The match of ``name`` as a slice name, None when it is not one or names an existing local
    file (checked only for names that look like slices of local files)."""
    match = _SLICE_NAME.match(name)
    if match is None or is_url(match.group(1)) or _MEMORY_NAME.match(match.group(1)):
        return match
    return None if os.path.lexists(name) else match


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
