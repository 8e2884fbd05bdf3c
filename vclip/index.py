"""VideoIndex: what one demux pass tells about a video stream, frame by frame, and
:func:`index_video`, which builds it (:mod:`vclip._demux`) or serves it from the caches
(:mod:`vclip._index_cache`) when the file's content is unchanged."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from fractions import Fraction
from stat import S_ISDIR, S_ISREG
from typing import Any, Literal

import numpy as np

from ._demux import demux_stream
from ._fingerprint import content_fingerprint
from ._index_cache import DiskCache, MemoryCache, MemoryEntry
from ._index_record import (
    ARRAY_DTYPES,
    INDEX_FORMAT_VERSION,
    check_index,
    index_record,
    parse_stored_facts,
    record_fields,
)
from ._orientation import Orientation
from ._sources import VideoInput, hold_video, is_local, open_reader, source_fingerprint
from ._validation import parse_bytes
from .errors import CorruptVideoError, NotAVideoError, VideoNotFoundError, video_error_from_os_error

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

ColorMatrix = Literal["bt601", "bt709", "bt2020", "smpte240m"]
ColorRange = Literal["limited", "full"]


@dataclass(frozen=True, eq=False)
class VideoIndex:
    """Per-frame timing and stream facts of one video stream, from a single demux pass.

    Frames are numbered in presentation order: frame ``i`` is the i-th frame a player shows.
    Packets are numbered in decode order. Per-frame arrays have length ``num_frames``;
    per-packet arrays have length ``num_packets`` (a packet the container marks as discarded is
    decoded for its references but is not a frame).

    Attributes:
        path: The file.
        stream_index: Index of the video stream inside the container.
        codec: FFmpeg codec name (``"h264"``, ``"hevc"``, ``"av1"``...).
        width, height: Coded picture size in pixels.
        pixel_format: FFmpeg pixel format (``"yuv420p"``, ``"yuv420p10le"``...).
        bit_depth: Bits per sample (8, 10...).
        color_matrix: YUV to RGB matrix; unspecified streams get BT.601, as in FFmpeg.
        color_range: ``"limited"`` (16-235) or ``"full"`` (0-255).
        time_base: Seconds per pts tick.
        average_fps: Frames per second averaged over the stream.
        header_frame_count: Frame count the container header claims (may be wrong or None).
        extradata: Codec configuration record (avcC/hvcC...), needed to decode packets alone.
        packets_addressable: Packet bytes can be read straight from the file at ``packet_pos``.
        pts: Presentation timestamp of each frame, in ``time_base`` ticks (int64, ascending).
        frame_packet: Decode-order packet number of each frame (int64).
        packet_pts, packet_pos, packet_size: Per packet, decode order (int64).
        packet_is_keyframe, packet_is_reference: Per packet (bool).
        packet_frame: Frame number of each packet, -1 for discarded packets (int64).
        rotation: Counter-clockwise turn (0, 90, 180, 270 degrees) a player gives the picture, from
            the stream's display matrix (FFmpeg's and PyAV's ``VideoFrame.rotation`` convention:
            a phone video shot upright usually says 270, i.e. turn 90 degrees clockwise).
        mirrored: The display matrix also mirrors the picture left-right, after the turn.
        sample_aspect_ratio: Width of a stored pixel over its height (1 when square or unknown).
    """

    path: str
    stream_index: int
    codec: str
    width: int
    height: int
    pixel_format: str
    bit_depth: int
    color_matrix: ColorMatrix
    color_range: ColorRange
    time_base: Fraction
    average_fps: float
    header_frame_count: int | None
    extradata: bytes = field(repr=False)
    packets_addressable: bool
    pts: np.ndarray
    frame_packet: np.ndarray
    packet_pts: np.ndarray
    packet_pos: np.ndarray
    packet_size: np.ndarray
    packet_is_keyframe: np.ndarray
    packet_is_reference: np.ndarray
    packet_frame: np.ndarray
    last_frame_duration: int = 0
    rotation: int = 0
    mirrored: bool = False
    sample_aspect_ratio: Fraction = Fraction(1)

    def __repr__(self) -> str:
        return (
            f"VideoIndex(path={self.path!r}, stream_index={self.stream_index}, codec={self.codec!r}, "
            f"size={self.width}x{self.height}, pixel_format={self.pixel_format!r}, "
            f"num_frames={self.num_frames}, keyframes={len(self.keyframe_indices)}, "
            f"average_fps={self.average_fps:.3f}, duration_seconds={self.duration_seconds:.3f}, "
            f"color={self.color_matrix}/{self.color_range}, rotation={self.rotation}"
            f"{', mirrored' if self.mirrored else ''}, sample_aspect_ratio={self.sample_aspect_ratio})"
        )

    @property
    def orientation(self) -> Orientation:
        """How a player turns the stored picture (from :attr:`rotation` and :attr:`mirrored`)."""
        return Orientation.from_rotation(self.rotation, self.mirrored)

    @property
    def display_size(self) -> tuple[int, int]:
        """``(width, height)`` of the picture a player shows: turned, with square pixels."""
        width, height = self.width, self.height
        if self.sample_aspect_ratio > 1:
            width = max(1, math.floor(width * self.sample_aspect_ratio + Fraction(1, 2)))
        elif self.sample_aspect_ratio < 1:
            height = max(1, math.floor(height / self.sample_aspect_ratio + Fraction(1, 2)))
        return self.orientation.displayed_size(width, height)

    # -- frames -------------------------------------------------------------------------------
    @property
    def num_frames(self) -> int:
        """Frames a player shows, counted from the packets (not from the header)."""
        return int(self.pts.size)

    def __len__(self) -> int:
        return self.num_frames

    @property
    def num_packets(self) -> int:
        return int(self.packet_pts.size)

    @property
    def pts_seconds(self) -> np.ndarray:
        """Presentation time of each frame in seconds (float64)."""
        return self.pts * float(self.time_base)

    @property
    def is_keyframe(self) -> np.ndarray:
        """Whether each frame is a keyframe (bool, presentation order)."""
        return self.packet_is_keyframe[self.frame_packet]

    @property
    def is_reference(self) -> np.ndarray:
        """Whether other frames may reference each frame (bool, presentation order)."""
        return self.packet_is_reference[self.frame_packet]

    @property
    def decode_order(self) -> np.ndarray:
        """Decode-order position of each frame (same as ``frame_packet``)."""
        return self.frame_packet

    @property
    def keyframe_indices(self) -> np.ndarray:
        """Frame numbers of the keyframes, ascending."""
        return np.flatnonzero(self.is_keyframe)

    @property
    def start_seconds(self) -> float:
        return float(self.pts[0] * self.time_base) if self.num_frames else 0.0

    @property
    def end_seconds(self) -> float:
        """When the last frame stops being shown."""
        if not self.num_frames:
            return 0.0
        return float((self.pts[-1] + self.last_frame_duration) * self.time_base)

    @property
    def duration_seconds(self) -> float:
        return self.end_seconds - self.start_seconds

    @property
    def is_variable_frame_rate(self) -> bool:
        """True when the gaps between consecutive frames differ by more than 0.1%."""
        if self.num_frames < 3:
            return False
        gaps = np.diff(self.pts)
        return bool(np.ptp(gaps) > max(1, 0.001 * float(np.median(gaps))))

    def frame_at(self, seconds: float) -> int:
        """Frame number of the frame a player shows at ``seconds`` (pts time, not ``i / fps``).

        Raises:
            ValueError: ``seconds`` is before the first frame or at/after the end of the stream.
        """
        if not (self.start_seconds <= seconds < self.end_seconds):
            raise ValueError(
                f"{self.path}: time {seconds} s is outside the stream "
                f"[{self.start_seconds:.6f}, {self.end_seconds:.6f}) s"
            )
        return int(np.searchsorted(self.pts_seconds, seconds, side="right") - 1)

    def check_frame_indices(self, indices) -> np.ndarray:
        """Indices as int64, negative ones counted from the end. Raises IndexError naming the bad one."""
        array = np.asarray(indices, dtype=np.int64).reshape(-1)
        if array.size == 0:
            raise ValueError(f"{self.path}: the list of frame indices is empty")
        n = self.num_frames
        bad = array[(array < -n) | (array >= n)]
        if bad.size:
            raise IndexError(f"{self.path}: frame index {int(bad[0])} is out of range [0, {n - 1}] ({n} frames)")
        return np.where(array < 0, array + n, array)

    # -- decoding dependencies ----------------------------------------------------------------
    def decode_start_packets(self, frames: np.ndarray) -> np.ndarray:
        """Packet (decode order) of the keyframe to start decoding from, for each of ``frames``.

        The last keyframe at or before the frame in decode order that is also shown no later
        than the frame (so open-GOP leading pictures start from the previous keyframe).
        """
        frames = np.asarray(frames, dtype=np.int64)
        keys = self._keyframe_packets
        position = np.searchsorted(keys, self.frame_packet[frames], side="right") - 1
        leading = (position > 0) & (self.packet_pts[keys[position]] > self.pts[frames])
        while leading.any():
            position[leading] -= 1
            leading = (position > 0) & (self.packet_pts[keys[position]] > self.pts[frames])
        return keys[np.maximum(position, 0)]

    def decode_start_packet(self, frame: int) -> int:
        """:meth:`decode_start_packets` for one frame."""
        return int(self.decode_start_packets(np.array([frame]))[0])

    @property
    def _keyframe_packets(self) -> np.ndarray:
        cached = self.__dict__.get("_keys")
        if cached is None:
            cached = np.flatnonzero(self.packet_is_keyframe)
            if cached.size == 0 or cached[0] != 0:
                cached = np.concatenate([[0], cached])  # streams must be decodable from the start
            object.__setattr__(self, "_keys", cached)
        return cached

    def to_dict(self) -> dict:
        """Stream facts and per-frame timing as plain Python types (for JSON)."""
        return {
            "path": self.path,
            "stream_index": self.stream_index,
            "codec": self.codec,
            "width": self.width,
            "height": self.height,
            "pixel_format": self.pixel_format,
            "bit_depth": self.bit_depth,
            "color_matrix": self.color_matrix,
            "color_range": self.color_range,
            "time_base": str(self.time_base),
            "average_fps": self.average_fps,
            "num_frames": self.num_frames,
            "header_frame_count": self.header_frame_count,
            "start_seconds": self.start_seconds,
            "duration_seconds": self.duration_seconds,
            "variable_frame_rate": self.is_variable_frame_rate,
            "keyframe_indices": self.keyframe_indices.tolist(),
            "rotation": self.rotation,
            "mirrored": self.mirrored,
            "sample_aspect_ratio": str(self.sample_aspect_ratio),
        }

    # -- storage (catalogs) -------------------------------------------------------------------
    # Per-frame and per-packet arrays, and their dtypes; every other field but ``path`` is a fact.
    STORED_ARRAYS = ARRAY_DTYPES

    def to_arrays(self) -> dict:
        """Every field but ``path``, to store the index elsewhere (a catalog row).

        Facts come as plain Python values (``time_base`` and ``sample_aspect_ratio`` as ``"num/den"``
        strings, ``extradata`` as bytes, ``header_frame_count`` may be None); the names of
        :attr:`STORED_ARRAYS` map to NumPy arrays. :meth:`from_arrays` turns the dict back into an equal index.
        """
        stored = {name: getattr(self, name) for name in self.__dataclass_fields__ if name != "path"}
        stored["time_base"] = str(self.time_base)
        stored["sample_aspect_ratio"] = str(self.sample_aspect_ratio)
        return stored

    @classmethod
    def from_arrays(cls, path: str | os.PathLike, stored: dict) -> VideoIndex:
        """The index that :meth:`to_arrays` gave, for ``path``, without opening the file.

        Arrays are taken as they are when their dtype is right (no copy; views stay views).

        Raises:
            ValueError: A field is missing or unknown, or the arrays do not fit together
                (lengths, frame and packet numbers out of range).
        """
        names = set(cls.__dataclass_fields__) - {"path"}
        optional = {"last_frame_duration", "rotation", "mirrored", "sample_aspect_ratio"}  # have defaults
        missing, unknown = names - set(stored) - optional, set(stored) - names
        if missing or unknown:
            raise ValueError(f"{os.fspath(path)}: stored index has missing fields {sorted(missing)} "
                             f"and unknown fields {sorted(unknown)}")
        fields = parse_stored_facts(stored)
        for name, dtype in cls.STORED_ARRAYS.items():
            value = fields[name]
            if not (isinstance(value, np.ndarray) and value.dtype == dtype and value.ndim == 1):
                fields[name] = np.asarray(value, dtype=dtype).reshape(-1)
        frames, packets = fields["pts"].size, fields["packet_pts"].size
        per_packet = [n for n in cls.STORED_ARRAYS if n.startswith("packet_") and fields[n].size != packets]
        if fields["frame_packet"].size != frames or per_packet or frames > packets:
            raise ValueError(f"{os.fspath(path)}: stored index arrays do not fit together ({frames} frames, "
                             f"{packets} packets; wrong lengths: {per_packet or ['frame_packet']})")
        if frames and not (0 <= fields["frame_packet"].min() and fields["frame_packet"].max() < packets
                           and -1 <= fields["packet_frame"].min() and fields["packet_frame"].max() < frames):
            raise ValueError(f"{os.fspath(path)}: stored index has frame or packet numbers out of range")
        return cls(path=os.fspath(path), **fields)


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


# -- the caches (vclip/_index_cache.py) ---------------------------------------------------------
# A file's change times are trusted to reveal later changes only once they are this much older
# than the content read (file system clocks tick coarsely: ~4 ms on ext4, 2 s on FAT).
_SETTLE_NS = 2_000_000_000
# A URL's cached index is served without asking the server again for this long after a check.
_REMOTE_TRUST_SECONDS = 30.0

_memory_cache = MemoryCache(parse_limit=parse_bytes)


def clear_index_cache() -> None:
    """Forget all in-memory indexes."""
    _memory_cache.clear()


def set_index_cache_limit(max_bytes: int | str) -> int:
    """Bound the in-memory index cache to ``max_bytes`` (``8 << 20``, ``"512MiB"``; 0 turns it off).

    The size of an index is the bytes of its arrays (about 50 bytes per frame); the least
    recently used indexes are dropped first. The default is 256 MiB, or the environment variable
    ``VCLIP_INDEX_CACHE_BYTES``. Returns the previous limit.

    Raises:
        ValueError: Not a size.
    """
    return _memory_cache.set_limit(parse_bytes(max_bytes))


def index_cache_info() -> dict:
    """``{"entries", "bytes", "limit_bytes"}`` of the in-memory index cache."""
    return _memory_cache.info()


def _index_nbytes(index: VideoIndex) -> int:
    return sum(getattr(index, name).nbytes for name in ARRAY_DTYPES) + len(index.extradata) + 1024


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


def index_video(
    path: VideoInput,
    *,
    stream_index: int | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> VideoIndex:
    """Index one video stream with a single demux pass (no decoding).

    Results are cached in memory (bounded in bytes, see :func:`set_index_cache_limit`) and, with
    ``cache_dir``, on disk as ``.npz`` files. A cached index is served only for the same content:
    each entry keeps a fingerprint of the file (:func:`vclip._fingerprint.content_fingerprint`:
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
    :mod:`vclip._sources` (the indexing pass reads the whole file once).
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
    return cached_index(path, stream_index, cache_dir, VIDEO_INDEX)


@dataclass(frozen=True)
class IndexKind:
    """One kind of index the caches keep (video indexes; audio indexes, :mod:`vclip._audio_index`).

    Every kind is served under the same rules (see :func:`index_video`), from the same memory cache
    (one bound, one :func:`clear_index_cache`) and disk folder, under keys of its own.

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
    (and cached); the rules of :func:`index_video`, which raises what this raises."""
    if isinstance(path, str) and ".tar" in path.lower():  # a shard of one video, or SHARD.tar#MEMBER
        from ._webdataset import resolve_member_name

        path = resolve_member_name(path)
    if not (isinstance(path, (str, os.PathLike)) and is_local(path)):  # only paths are local
        name, _holder = hold_video(path)  # the holder keeps bytes or a file object readable meanwhile
        return _index_source(name, stream_index, cache_dir, kind)
    path = os.fspath(path)
    stat = _stat_video(path)
    key = kind.key(os.path.realpath(path), stream_index)
    signature = _signature(stat)
    entry = _memory_cache.get(key)
    fingerprint = None
    if entry is not None:
        if entry.signature == signature and entry.settled:
            return _named(entry.index, path)
        if entry.signature[2:4] == signature[2:4]:  # same size and mtime: compare contents
            fingerprint, settled = _fingerprint(path, stat)
            if fingerprint == entry.fingerprint:
                _memory_cache.remember(key, replace(entry, signature=signature, settled=settled))
                return _named(entry.index, path)
    if fingerprint is None:
        fingerprint, settled = _fingerprint(path, stat)
    index, keep = _through_disk_cache(
        cache_dir, key, stream_index, fingerprint, path, lambda: kind.build(path, stream_index, stat.st_size), kind,
        unchanged=lambda: _signature(_stat_video(path)) == signature,
    )
    if keep:  # else the file changed while it was read: keep nothing
        _memory_cache.remember(key, MemoryEntry(index, fingerprint, signature, settled, kind.nbytes(index)))
    return index


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
    entry = _memory_cache.get(key)
    if entry is not None and entry.signature and time.monotonic() - entry.signature[0] < _REMOTE_TRUST_SECONDS:
        return entry.index
    fingerprint = source_fingerprint(name)  # None for file objects: never cached
    if fingerprint is None:
        return _build_source_index(name, stream_index, kind)
    checked = (time.monotonic(),)  # bytes are named by their digest: trusting them is safe too
    if entry is not None and entry.fingerprint == fingerprint:
        _memory_cache.remember(key, replace(entry, signature=checked))
        return entry.index
    index, _ = _through_disk_cache(cache_dir, key, stream_index, fingerprint, name,
                                   lambda: _build_source_index(name, stream_index, kind), kind)
    _memory_cache.remember(key, MemoryEntry(index, fingerprint, checked, False, kind.nbytes(index)))
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


def _build_index(path: str, stream_index: int | None, file_size: int) -> VideoIndex:
    return VideoIndex(path=path, **demux_stream(path, stream_index, file_size))




VIDEO_INDEX = IndexKind("", _build_index, index_to_record, index_from_record, _index_nbytes)
"""Video indexes, as the caches keep them."""
