"""Serving an index from the caches (:mod:`vclip._index.caches`): the rules of
:func:`vclip.index.index_video`, the same for every kind of index (:class:`IndexKind`: video
indexes, audio indexes). A local file's index is served while the file's signature (device, inode,
size, times) is unchanged and settled, else while its content fingerprint is; a URL's or a slice's
by its metadata fingerprint, and bytes by their digest; anything else is built, and cached."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from stat import S_ISDIR, S_ISREG
from typing import Any

from .._bytes.fingerprint import content_fingerprint
from .._bytes.sources import VideoInput, hold_video, is_local, open_reader, source_fingerprint
from ..errors import CorruptVideoError, NotAVideoError, VideoNotFoundError, parse_bytes, video_error_from_os_error
from .caches import DiskCache, MemoryCache, MemoryEntry

__all__ = ["IndexKind", "cached_index", "memory_cache"]

# A file's change times are trusted to reveal later changes only once they are this much older
# than the content read (file system clocks tick coarsely: ~4 ms on ext4, 2 s on FAT).
_SETTLE_NS = 2_000_000_000
# A URL's cached index is served without asking the server again for this long after a check.
_REMOTE_TRUST_SECONDS = 30.0

memory_cache = MemoryCache(parse_limit=parse_bytes)
"""Every kind's indexes in memory: one bound, cleared by :func:`vclip.clear_index_cache`."""


@dataclass(frozen=True)
class IndexKind:
    """One kind of index the caches keep (video indexes, :mod:`vclip.index`; audio indexes,
    :mod:`vclip._audio.index`).

    Every kind is served under the same rules (see :func:`vclip.index.index_video`), from the same
    memory cache (one bound, one :func:`vclip.clear_index_cache`) and disk folder, under keys of its own.

    Attributes:
        tag: Told apart from other kinds in cache keys; ``""`` for video indexes (their disk entries
            keep the names they always had).
        build: ``build(name, stream_index, file_size)``: the index, from the file.
        to_record: The index as named arrays, for the disk cache.
        from_record: ``from_record(record, name)``: the index back; raises on anything inconsistent.
        nbytes: What an index weighs against the memory bound.
    """

    tag: str
    build: Callable[[str, int | None, int], Any]
    to_record: Callable[[Any], dict]
    from_record: Callable[[Any, str], Any]
    nbytes: Callable[[Any], int]

    def key(self, name: str, stream_index: int | None) -> tuple:
        return (name, f"{self.tag}:{stream_index}" if self.tag else stream_index)


def cached_index(path: VideoInput, stream_index: int | None, cache_dir: str | os.PathLike | None,
                 kind: IndexKind) -> Any:
    """The index of ``kind`` of ``path``: from the caches when the content is unchanged, else built
    (and cached); the rules of :func:`vclip.index.index_video`, which raises what this raises.
    ``path`` names the video itself: a member of a shard by its slice name (its callers resolve
    ``SHARD.tar#MEMBER`` first, :func:`vclip._bytes.shards.resolve_video_name`)."""
    if not (isinstance(path, (str, os.PathLike)) and is_local(path)):  # only paths are local
        name, _holder = hold_video(path)  # the holder keeps bytes or a file object readable meanwhile
        return _index_source(name, stream_index, cache_dir, kind)
    path = os.fspath(path)
    stat = _stat_video(path)
    key = kind.key(os.path.realpath(path), stream_index)
    signature = _signature(stat)
    entry = memory_cache.get(key)
    fingerprint = None
    if entry is not None:
        if entry.signature == signature and entry.settled:
            return _named(entry.index, path)
        if entry.signature[2:4] == signature[2:4]:  # same size and mtime: compare contents
            fingerprint, settled = _fingerprint(path, stat)
            if fingerprint == entry.fingerprint:
                memory_cache.remember(key, replace(entry, signature=signature, settled=settled))
                return _named(entry.index, path)
    if fingerprint is None:
        fingerprint, settled = _fingerprint(path, stat)
    index, keep = _through_disk_cache(
        cache_dir, key, stream_index, fingerprint, path, lambda: kind.build(path, stream_index, stat.st_size), kind,
        unchanged=lambda: _signature(_stat_video(path)) == signature,
    )
    if keep:  # else the file changed while it was read: keep nothing
        memory_cache.remember(key, MemoryEntry(index, fingerprint, signature, settled, kind.nbytes(index)))
    return index


def _signature(stat: os.stat_result) -> tuple:
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


def _stat_video(path: str) -> os.stat_result:
    """``os.stat`` of a video file, every failure a VideoError naming it."""
    try:
        stat = os.stat(path)
    except OSError as error:
        raise video_error_from_os_error(path, error) from None
    except ValueError:  # a NUL byte in the name
        raise VideoNotFoundError(path, "file does not exist (its name contains a NUL byte)") from None
    if not S_ISREG(stat.st_mode):
        raise NotAVideoError(path, "is not a regular file" + (" (it is a folder)" if S_ISDIR(stat.st_mode) else ""))
    if stat.st_size == 0:
        raise CorruptVideoError(path, "file is empty (0 bytes)")
    return stat


def _fingerprint(path: str, stat: os.stat_result) -> tuple[str, bool]:
    """The content fingerprint of ``path`` and whether ``stat`` is old enough to be trusted later."""
    started = time.time_ns()
    try:
        fingerprint = content_fingerprint(path, stat)
    except OSError as error:
        raise video_error_from_os_error(path, error) from None
    return fingerprint, max(stat.st_mtime_ns, stat.st_ctime_ns) < started - _SETTLE_NS


def _named(index: Any, path: str) -> Any:
    """``index`` from the memory cache (keyed by the file's real path, so shared by every name of the
    file) naming ``path``, the name asked for; the arrays are shared, not copied."""
    return index if index.path == path else replace(index, path=path)


def _index_source(name: str, stream_index: int | None, cache_dir: str | os.PathLike | None, kind: IndexKind) -> Any:
    """:func:`cached_index` of a URL or in-memory name, cached by its metadata fingerprint.

    A URL's (or a slice's) in-memory entry is served without a request for
    :data:`_REMOTE_TRUST_SECONDS` after its fingerprint was last checked (the loader asks for a
    video's index once per clip).
    """
    key = kind.key(name, stream_index)
    entry = memory_cache.get(key)
    if entry is not None and entry.signature and time.monotonic() - entry.signature[0] < _REMOTE_TRUST_SECONDS:
        return entry.index
    fingerprint = source_fingerprint(name)  # None for file objects: never cached
    if fingerprint is None:
        return _build_source_index(name, stream_index, kind)
    checked = (time.monotonic(),)  # bytes are named by their digest: trusting them is safe too
    if entry is not None and entry.fingerprint == fingerprint:
        memory_cache.remember(key, replace(entry, signature=checked))
        return entry.index
    index, _ = _through_disk_cache(cache_dir, key, stream_index, fingerprint, name,
                                   lambda: _build_source_index(name, stream_index, kind), kind)
    memory_cache.remember(key, MemoryEntry(index, fingerprint, checked, False, kind.nbytes(index)))
    return index


def _through_disk_cache(
    cache_dir: str | os.PathLike | None, key: tuple, stream_index: int | None, fingerprint: str, name: str,
    build: Callable[[], Any], kind: IndexKind, unchanged: Callable[[], bool] | None = None,
) -> tuple[Any, bool]:
    """The index of ``key`` from the on-disk cache when an entry validates, else built and saved.

    Returns:
        The index, and whether it may be kept: False when ``unchanged()`` says the source changed
        while it was read (then nothing is saved either).
    """
    disk = DiskCache.open(cache_dir) if cache_dir is not None else None
    try:
        entry_name = DiskCache.entry_name(key)
        stored = _stored_index(disk, entry_name, fingerprint, stream_index, name, kind) if disk is not None else None
        index = stored if stored is not None else build()
        if unchanged is not None and not unchanged():
            return index, False
        if stored is None and disk is not None:
            disk.save(entry_name, fingerprint, stream_index, kind.to_record(index))
        return index, True
    finally:
        if disk is not None:
            disk.close()


def _stored_index(disk: DiskCache, entry_name: str, fingerprint: str, stream_index: int | None,
                  name: str, kind: IndexKind) -> Any:
    """The index stored in ``disk`` for this content and stream request, or None when there is none
    or it does not validate in every way (format version, fields, consistency, stream)."""
    record = disk.load(entry_name, fingerprint, stream_index)
    if record is None:
        return None
    try:
        index = kind.from_record(record, name)
    except Exception:  # unknown fields, tampered values: rebuild, never raise
        return None
    if stream_index is not None and index.stream_index != stream_index:
        return None
    return index


def _build_source_index(name: str, stream_index: int | None, kind: IndexKind) -> Any:
    size = open_reader(name).size()
    if size == 0:
        raise CorruptVideoError(name, "file is empty (0 bytes)")
    return kind.build(name, stream_index, size)
