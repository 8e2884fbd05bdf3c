"""VideoIndex: what one demux pass tells about a video stream, frame by frame (the record and its
stored form live in :mod:`vclip._index.record`, below everything that reads an index), and
:func:`index_video`, which builds it (:mod:`vclip._index.demux`) or serves it from the caches
(:mod:`vclip._index.lookup`) when the file's content is unchanged."""

from __future__ import annotations

import os

import numpy as np

from ._bytes.shards import resolve_video_name
from ._bytes.sources import VideoInput
from ._index.demux import demux_stream
from ._index.lookup import IndexKind, cached_index, memory_cache
from ._index.record import (
    ARRAY_DTYPES,
    INDEX_FORMAT_VERSION,
    VideoIndex,
    check_index,
    index_record,
    record_fields,
)
from .errors import parse_bytes

__all__ = [
    "VideoIndex",
    "index_video",
    "clear_index_cache",
    "set_index_cache_limit",
    "index_cache_info",
    "check_index",
    "index_to_record",
    "index_from_record",
    "INDEX_FORMAT_VERSION",
]

VideoIndex.__module__ = __name__  # defined with its stored form (vclip._index.record), public here


def index_to_record(index: VideoIndex) -> dict[str, np.ndarray]:
    """``index`` as named NumPy arrays (for ``np.savez``, Parquet...): a ``format_version``, the
    stream facts as one JSON string ``facts``, ``extradata`` as uint8, and the per-frame and
    per-packet arrays under their field names. :func:`index_from_record` reads it back."""
    return index_record(index)


def index_from_record(record, path: str | os.PathLike) -> VideoIndex:
    """The :class:`VideoIndex` of ``path`` from a record made by :func:`index_to_record`.

    ``record`` is any mapping of those names to arrays (a dict, an open ``np.load`` file).

    Raises:
        ValueError: Another format version, missing or ill-typed fields, or an inconsistent index
            (see :func:`check_index`).
    """
    index = VideoIndex(path=os.fspath(path), **record_fields(record))
    check_index(index)
    return index


def clear_index_cache() -> None:
    """Forget all in-memory indexes."""
    memory_cache.clear()


def set_index_cache_limit(max_bytes: int | str) -> int:
    """Bound the in-memory index cache to ``max_bytes`` (``8 << 20``, ``"512MiB"``; 0 turns it off).

    The size of an index is the bytes of its arrays (about 50 bytes per frame); the least
    recently used indexes are dropped first. The default is 256 MiB, or the environment variable
    ``VCLIP_INDEX_CACHE_BYTES``. Returns the previous limit.

    Raises:
        ValueError: Not a size.
    """
    return memory_cache.set_limit(parse_bytes(max_bytes))


def index_cache_info() -> dict:
    """``{"entries", "bytes", "limit_bytes"}`` of the in-memory index cache."""
    return memory_cache.info()


def _index_nbytes(index: VideoIndex) -> int:
    return sum(getattr(index, name).nbytes for name in ARRAY_DTYPES) + len(index.extradata) + 1024


def index_video(
    path: VideoInput,
    *,
    stream_index: int | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> VideoIndex:
    """Index one video stream with a single demux pass (no decoding).

    Results are cached in memory (bounded in bytes, see :func:`set_index_cache_limit`) and, with
    ``cache_dir``, on disk as ``.npz`` files. A cached index is served only for the same content:
    each entry keeps a fingerprint of the file (:func:`vclip._bytes.fingerprint.content_fingerprint`:
    size, mtime and a digest of about 200 KB of sampled bytes). In memory, a file whose device,
    inode, size, mtime and ctime are unchanged is served without reading it (a replacement, even
    ``cp -p`` or ``rsync -t``, changes the inode or ctime); otherwise, and while the file was changed
    in the last 2 seconds, the fingerprint is compared. A disk entry is used only when its format
    version, fields, consistency checks and fingerprint all pass; anything else is rebuilt and
    rewritten. Disk entries are written atomically (an exclusive, no-symlink temporary file,
    then a rename) into a folder created with mode 0o700; a folder that is not yours or that
    others can write is not used (one :class:`~vclip.errors.IndexCacheWarning`).

    A URL (``s3://``, ``gs://``, ``https://``: anything fsspec opens), a member of a WebDataset
    shard (``SHARD.tar#MEMBER``, or the shard of a single video: named by its byte range in the
    index, see :mod:`vclip.webdataset`), ``bytes`` or a binary file object is read through
    :mod:`vclip._bytes.sources` (the indexing pass reads the whole file once).
    Remote indexes are cached by URL and a metadata fingerprint (size, ETag, last-modified: one
    HEAD/stat request, made again when the entry was last checked over 30 seconds ago), bytes by
    their digest; file objects are not cached. The index of
    bytes or a file object names them ``<bytes:DIGEST>``/``<file:ID>``: its frames can be decoded
    while a :class:`~vclip.VideoDecoder` made from the same object is alive.

    A stream whose timestamps are missing (e.g. negative timestamps Matroska cannot store) gets
    them reconstructed from the decoder's output order (the frames are decoded once, up to the
    last such frame). An MPEG-TS file that ends inside the stream's last packet has that packet
    (the last in decode order) left out of the index, with a
    :class:`~vclip.errors.TruncatedVideoWarning`: its frame would come out concealed.

    Args:
        path: The video file, a URL, bytes or a binary file object.
        stream_index: Container stream index of the video stream; default: the first video stream.
        cache_dir: Folder for an on-disk cache of indexes (created if missing).

    Raises:
        VideoNotFoundError: The file does not exist (a URL: HTTP 404, no such object).
        UnreadableVideoError: The file cannot be read (permission denied, a symlink loop, a name
            too long, an I/O error).
        NotAVideoError: Not a container FFmpeg can read, no video stream, or ``stream_index``
            is not a video stream.
        UnsupportedCodecError: FFmpeg has no decoder for the stream's codec.
        CorruptVideoError: Empty, truncated, damaged headers, or no frame to show.
    """
    return cached_index(resolve_video_name(path), stream_index, cache_dir, VIDEO_INDEX)


VIDEO_INDEX = IndexKind("", demux_stream, index_to_record, index_from_record, _index_nbytes)
"""Video indexes, as the caches keep them."""
