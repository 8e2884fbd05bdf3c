"""The two caches behind :func:`vclip.index_video`: indexes in memory, bounded in bytes (the least
recently used leave first), and index records on disk, one ``.npz`` file per video, written
atomically into a folder only its owner can write. What a cached entry must match (fingerprints,
file signatures) is decided by :mod:`vclip._index.lookup`; these only keep entries."""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from stat import S_ISDIR, S_ISREG
from typing import Any

import numpy as np

from ..errors import IndexCacheWarning, os_reason

__all__ = ["DiskCache", "MemoryCache", "MemoryEntry"]

DEFAULT_CACHE_BYTES = 256 << 20
CACHE_BYTES_VARIABLE = "VCLIP_INDEX_CACHE_BYTES"


# -- memory ----------------------------------------------------------------------------------------
@dataclass
class MemoryEntry:
    index: Any  # a VideoIndex
    fingerprint: str
    signature: tuple  # (device, inode, size, mtime_ns, ctime_ns) at the last check; a URL's: (monotonic time,)
    settled: bool  # any change after that check alters the signature
    nbytes: int


class MemoryCache:
    """Entries by key, bounded in bytes (``VCLIP_INDEX_CACHE_BYTES``, default 256 MiB); thread-safe.

    ``parse_limit`` reads the variable's text (``"512MiB"``) as bytes, raising ValueError when it cannot.
    """

    def __init__(self, parse_limit: Callable[[str], int]):
        self._parse_limit = parse_limit
        self._entries: OrderedDict[tuple, MemoryEntry] = OrderedDict()
        self._lock = threading.Lock()
        self._bytes = 0
        self._limit: int | None = None  # resolved on first use

    def _limit_bytes(self) -> int:
        if self._limit is None:
            text = os.environ.get(CACHE_BYTES_VARIABLE)
            self._limit = DEFAULT_CACHE_BYTES
            if text:
                try:
                    self._limit = self._parse_limit(text)
                except ValueError as error:
                    warnings.warn(f"{CACHE_BYTES_VARIABLE}: {error}; using 256 MiB", IndexCacheWarning, stacklevel=3)
        return self._limit

    def get(self, key: tuple) -> MemoryEntry | None:
        """The entry of ``key`` (now the most recently used), or None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
            return entry

    def remember(self, key: tuple, entry: MemoryEntry) -> None:
        """Keep ``entry`` under ``key`` (replacing what was there) unless it alone exceeds the bound."""
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old.nbytes
            if entry.nbytes <= self._limit_bytes():
                self._entries[key] = entry
                self._bytes += entry.nbytes
                self._evict()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def set_limit(self, limit: int) -> int:
        """Bound the cache to ``limit`` bytes; returns the previous bound."""
        with self._lock:
            previous = self._limit_bytes()
            self._limit = limit
            self._evict()
        return previous

    def info(self) -> dict:
        with self._lock:
            return {"entries": len(self._entries), "bytes": self._bytes, "limit_bytes": self._limit_bytes()}

    def _evict(self) -> None:
        while self._entries and self._bytes > self._limit_bytes():
            _, entry = self._entries.popitem(last=False)
            self._bytes -= entry.nbytes


# -- disk ------------------------------------------------------------------------------------------
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_MAX_ENTRY_BYTES = 1 << 30
_warned_folders: set[str] = set()


def _warn_folder(folder: str, problem: str) -> None:
    if folder not in _warned_folders:
        _warned_folders.add(folder)
        warnings.warn(f"index cache folder {folder}: {problem}; indexes are not stored there",
                      IndexCacheWarning, stacklevel=4)


class DiskCache:
    """An open cache folder (by file descriptor, so a swapped path cannot redirect it)."""

    def __init__(self, folder: str, descriptor: int):
        self.folder = folder
        self.descriptor = descriptor

    @classmethod
    def open(cls, cache_dir) -> DiskCache | None:
        """The folder, created with mode 0o700 if missing; None (and one warning per folder) when it
        cannot be used, belongs to another user or others can write it."""
        folder = os.fspath(cache_dir)
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
            descriptor = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _O_CLOEXEC)
        except (OSError, ValueError) as error:
            _warn_folder(folder, f"cannot be used ({os_reason(error)})")
            return None
        stat = os.fstat(descriptor)
        problem = None
        if not S_ISDIR(stat.st_mode):
            problem = "is not a folder"
        elif hasattr(os, "geteuid") and stat.st_uid != os.geteuid():
            problem = f"belongs to another user (uid {stat.st_uid})"
        elif stat.st_mode & 0o022:
            problem = f"can be written by other users (mode {stat.st_mode & 0o777:o}; chmod 700 it)"
        if problem:
            os.close(descriptor)
            _warn_folder(folder, problem)
            return None
        return cls(folder, descriptor)

    def close(self) -> None:
        os.close(self.descriptor)

    @staticmethod
    def entry_name(key: tuple) -> str:
        real_path, stream_index = key
        digest = hashlib.sha256(os.fsencode(real_path) + b"\0" + str(stream_index).encode()).hexdigest()[:32]
        stem = re.sub(r"[^A-Za-z0-9._-]", "_", os.path.basename(real_path))[:64].lstrip(".")
        return f"{stem or 'video'}.{digest}.npz"

    def load(self, name: str, fingerprint: str, stream_index: int | None) -> dict[str, np.ndarray] | None:
        """The stored record of entry ``name`` when it was stored for this fingerprint and stream
        request, else None (also when it is missing, too large, not a regular file or unreadable)."""
        try:
            descriptor = os.open(name, os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC, dir_fd=self.descriptor)
        except OSError:
            return None
        try:
            with os.fdopen(descriptor, "rb") as file:
                stat = os.fstat(file.fileno())
                if not S_ISREG(stat.st_mode) or stat.st_size > _MAX_ENTRY_BYTES:
                    return None
                with np.load(file, allow_pickle=False) as stored:
                    if str(stored["fingerprint"]) != fingerprint:
                        return None
                    if int(stored["stream_request"]) != (-1 if stream_index is None else stream_index):
                        return None
                    return {field: stored[field] for field in stored.files}
        except Exception:  # truncated, not a zip, tampered: rebuild, never raise
            return None

    def save(self, name: str, fingerprint: str, stream_index: int | None, record: dict[str, np.ndarray]) -> None:
        """Store ``record`` atomically; a failure (disk full, read-only folder) only skips storing."""
        record = {**record, "fingerprint": np.asarray(fingerprint),
                  "stream_request": np.asarray(-1 if stream_index is None else stream_index, dtype=np.int64)}
        temporary = f".{name}.{secrets.token_hex(8)}.tmp"
        try:
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC,
                                 0o600, dir_fd=self.descriptor)
        except OSError as error:
            _warn_folder(self.folder, f"cannot write in it ({os_reason(error)})")
            return
        try:
            with os.fdopen(descriptor, "wb") as file:
                np.savez(file, allow_pickle=True, **record)  # the default, named so mypy maps no array to it
            os.replace(temporary, name, src_dir_fd=self.descriptor, dst_dir_fd=self.descriptor)
        except OSError as error:
            _warn_folder(self.folder, f"cannot write in it ({os_reason(error)})")
            try:
                os.unlink(temporary, dir_fd=self.descriptor)
            except OSError:
                pass
