"""A content fingerprint of a file that a same-size, same-mtime replacement changes.

Size and mtime alone miss ``cp -p`` and ``rsync -t`` replacements, and hashing whole videos is
too slow for datasets, so the fingerprint adds a BLAKE2b digest of sampled bytes: the first and
last 64 KiB (the container headers and index) and 16 blocks of 4 KiB spread evenly between.
The same sample of a byte range inside another file (a member of a tar shard) is
:func:`sampled_ranges`.
"""

from __future__ import annotations

import hashlib
import os

__all__ = ["content_fingerprint", "sampled_ranges"]

_EDGE_BYTES = 64 * 1024
_BLOCK_BYTES = 4096
_BLOCKS = 16


def sampled_ranges(size: int) -> list[tuple[int, int]]:
    """The ``(offset, length)`` ranges of a ``size``-byte file that its digest covers (all of it
    when small)."""
    if size <= 2 * _EDGE_BYTES + _BLOCKS * _BLOCK_BYTES:
        return [(0, size)]
    span = size - 2 * _EDGE_BYTES - _BLOCK_BYTES
    blocks = [(_EDGE_BYTES + span * block // (_BLOCKS - 1), _BLOCK_BYTES) for block in range(_BLOCKS)]
    return [(0, _EDGE_BYTES), *blocks, (size - _EDGE_BYTES, _EDGE_BYTES)]


def content_fingerprint(path: str | os.PathLike, stat: os.stat_result | None = None) -> str:
    """``"<size>-<mtime_ns>-<digest>"`` of the file at ``path``.

    Raises:
        OSError: The file cannot be read.
    """
    stat = stat or os.stat(path)
    digest = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as file:
        for offset, length in sampled_ranges(stat.st_size):
            file.seek(offset)
            digest.update(file.read(length))
    return f"{stat.st_size}-{stat.st_mtime_ns}-{digest.hexdigest()}"
