"""VideoIndex: what one demux pass tells about a video stream, frame by frame (only the first
picture is decoded, for the display matrix FFmpeg attaches to decoded frames)."""

from __future__ import annotations

import functools
import json
import math
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from fractions import Fraction
from stat import S_ISDIR, S_ISREG
from typing import Any, BinaryIO, Literal

import av
import numpy as np
from av.container import InputContainer

from ._engine.bitstream import is_reference_packet, nal_length_size
from ._fingerprint import content_fingerprint
from ._index_cache import DiskCache, MemoryCache, MemoryEntry, os_reason
from ._sources import (
    VideoInput,
    hold_video,
    is_local,
    is_url,
    open_binary,
    open_reader,
    source_fingerprint,
)
from .errors import (
    CorruptVideoError,
    NotAVideoError,
    TruncatedVideoWarning,
    UnsupportedCodecError,
    VideoError,
    VideoNotFoundError,
    video_error_from_os_error,
)
from .transforms import Orientation

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

# AVColorSpace values. Unspecified and unknown matrices fall back to BT.601, as FFmpeg's swscale does.
_MATRIX_BY_AVCOL_SPC: dict[int, ColorMatrix] = {
    1: "bt709", 5: "bt601", 6: "bt601", 7: "smpte240m", 9: "bt2020", 10: "bt2020",
}
_ADDRESSABLE_FORMATS = ("mov", "mp4", "matroska", "webm")


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
    STORED_ARRAYS = {
        "pts": np.int64, "frame_packet": np.int64, "packet_pts": np.int64, "packet_pos": np.int64,
        "packet_size": np.int64, "packet_is_keyframe": np.bool_, "packet_is_reference": np.bool_,
        "packet_frame": np.int64,
    }

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


# -- checking and (de)serializing indexes ------------------------------------------------------
def parse_stored_facts(stored: dict) -> dict:
    """``stored`` (the fields of an index as :meth:`VideoIndex.to_arrays`, :func:`index_to_record` or a
    catalog row store them) with its stream facts as :class:`VideoIndex` field values: ``time_base``
    and ``sample_aspect_ratio`` as Fractions, ``extradata`` as bytes, ``header_frame_count`` as an int
    or None. Everything else is kept as it is; absent facts stay absent (their defaults apply).

    Raises:
        ValueError, ZeroDivisionError, TypeError: A value that is not a number of its kind.
    """
    fields = dict(stored)
    for name in ("time_base", "sample_aspect_ratio"):
        if name in fields:
            fields[name] = _fraction(fields[name])
    if "extradata" in fields:
        fields["extradata"] = bytes(fields["extradata"] or b"")
    if fields.get("header_frame_count") is not None:
        fields["header_frame_count"] = int(fields["header_frame_count"])
    return fields


@functools.lru_cache(maxsize=1024)
def _fraction(value: str | Fraction) -> Fraction:
    """``Fraction(value)``, parsed once per distinct text (a catalog repeats a few time bases)."""
    return Fraction(value)


INDEX_FORMAT_VERSION = 3
"""Version of :func:`index_to_record`'s layout; a stored record of another version is rebuilt."""

_ARRAY_FIELDS = {  # name: dtype kind ("i" int64, "b" bool)
    "pts": "i", "frame_packet": "i", "packet_pts": "i", "packet_pos": "i", "packet_size": "i",
    "packet_is_keyframe": "b", "packet_is_reference": "b", "packet_frame": "i",
}
_FACT_TYPES = {  # name: accepted JSON types
    "stream_index": (int,), "codec": (str,), "width": (int,), "height": (int,), "pixel_format": (str,),
    "bit_depth": (int,), "color_matrix": (str,), "color_range": (str,), "time_base": (str,),
    "average_fps": (float, int), "header_frame_count": (int, type(None)), "packets_addressable": (bool,),
    "last_frame_duration": (int,), "rotation": (int,), "mirrored": (bool,), "sample_aspect_ratio": (str,),
}


def check_index(index: VideoIndex) -> None:
    """Check that the arrays and facts of ``index`` agree with each other (cheap, O(frames)).

    A built index always passes; an index read back from storage that fails was damaged or
    tampered with and must be rebuilt.

    Raises:
        ValueError: What is inconsistent.
    """
    n, m = index.pts.size, index.packet_pts.size
    for name, kind in _ARRAY_FIELDS.items():
        array = getattr(index, name)
        if not isinstance(array, np.ndarray) or array.ndim != 1:
            raise ValueError(f"{name} is not a one-dimensional array")
        if array.dtype != (np.int64 if kind == "i" else np.bool_):
            raise ValueError(f"{name} has dtype {array.dtype}")
        if array.size != (n if name in ("pts", "frame_packet") else m):
            raise ValueError(f"{name} has {array.size} values")
    if n == 0 or m < n:
        raise ValueError(f"{n} frames from {m} packets")
    if np.any(np.diff(index.pts) <= 0):
        raise ValueError("frame timestamps are not strictly increasing")
    if index.frame_packet.min() < 0 or index.frame_packet.max() >= m:
        raise ValueError("frame_packet points outside the packets")
    if not np.array_equal(index.packet_frame[index.frame_packet], np.arange(n)):
        raise ValueError("packet_frame is not the inverse of frame_packet")
    if int(np.count_nonzero(index.packet_frame >= 0)) != n or index.packet_frame.min() < -1:
        raise ValueError("packet_frame numbers packets that are not frames")
    if not np.array_equal(index.packet_pts[index.frame_packet], index.pts):
        raise ValueError("frame timestamps disagree with their packets'")
    if index.packet_size.min() < 0 or index.packet_pos.min() < -1:
        raise ValueError("negative packet sizes or positions")
    if index.width <= 0 or index.height <= 0 or not 1 <= index.bit_depth <= 16:
        raise ValueError(f"impossible picture {index.width}x{index.height}, {index.bit_depth}-bit")
    if index.color_matrix not in _MATRIX_BY_AVCOL_SPC.values() or index.color_range not in ("limited", "full"):
        raise ValueError(f"unknown colour {index.color_matrix}/{index.color_range}")
    if index.time_base <= 0 or index.stream_index < 0 or not index.codec or index.last_frame_duration < 0:
        raise ValueError("impossible stream facts")
    if index.rotation not in (0, 90, 180, 270) or index.sample_aspect_ratio <= 0:
        raise ValueError(f"impossible rotation {index.rotation} or sample aspect ratio {index.sample_aspect_ratio}")


def index_to_record(index: VideoIndex) -> dict[str, np.ndarray]:
    """``index`` as named NumPy arrays (for ``np.savez``, Parquet...): a ``format_version``, the
    stream facts as one JSON string ``facts``, ``extradata`` as uint8, and the per-frame and
    per-packet arrays under their field names. :func:`index_from_record` reads it back."""
    facts = {name: getattr(index, name) for name in _FACT_TYPES if name not in ("time_base", "sample_aspect_ratio")}
    facts["time_base"] = str(index.time_base)
    facts["sample_aspect_ratio"] = str(index.sample_aspect_ratio)
    record = {
        "format_version": np.asarray(INDEX_FORMAT_VERSION, dtype=np.int64),
        "facts": np.asarray(json.dumps(facts, sort_keys=True)),
        "extradata": np.frombuffer(index.extradata, dtype=np.uint8),
    }
    record.update({name: getattr(index, name) for name in _ARRAY_FIELDS})
    return record


def index_from_record(record, path: str | os.PathLike) -> VideoIndex:
    """The :class:`VideoIndex` of ``path`` from a record made by :func:`index_to_record`.

    ``record`` is any mapping of those names to arrays (a dict, an open ``np.load`` file).

    Raises:
        ValueError: Another format version, missing or ill-typed fields, or an inconsistent index
            (see :func:`check_index`).
    """
    try:
        version = int(np.asarray(record["format_version"]))
        if version != INDEX_FORMAT_VERSION:
            raise ValueError(f"format version {version}, expected {INDEX_FORMAT_VERSION}")
        facts = json.loads(str(np.asarray(record["facts"])))
        if not isinstance(facts, dict) or set(facts) != set(_FACT_TYPES):
            raise ValueError("stream facts have unexpected names")
        for name, types in _FACT_TYPES.items():
            value = facts[name]
            if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
                raise ValueError(f"stream fact {name} has type {type(value).__name__}")
        facts = parse_stored_facts(facts)
        arrays: dict[str, Any] = {}  # keyword arguments of VideoIndex
        for name, kind in _ARRAY_FIELDS.items():
            array = np.asarray(record[name])
            if array.dtype.kind != kind or array.ndim != 1:
                raise ValueError(f"{name} has dtype {array.dtype} and {array.ndim} dimensions")
            arrays[name] = array.astype(np.int64 if kind == "i" else np.bool_, copy=False)
        extradata = np.asarray(record["extradata"])
        if extradata.dtype != np.uint8 or extradata.ndim != 1:
            raise ValueError("extradata is not bytes")
    except (KeyError, TypeError, ZeroDivisionError, OverflowError) as error:
        raise ValueError(f"not an index record ({type(error).__name__}: {error})") from None
    index = VideoIndex(path=os.fspath(path), extradata=extradata.tobytes(), **facts, **arrays)
    check_index(index)
    return index


# -- the caches (vclip/_index_cache.py) ---------------------------------------------------------
# A file's change times are trusted to reveal later changes only once they are this much older
# than the content read (file system clocks tick coarsely: ~4 ms on ext4, 2 s on FAT).
_SETTLE_NS = 2_000_000_000
# A URL's cached index is served without asking the server again for this long after a check.
_REMOTE_TRUST_SECONDS = 30.0

_memory_cache = MemoryCache()


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
    from ._units import parse_bytes

    return _memory_cache.set_limit(parse_bytes(max_bytes))


def index_cache_info() -> dict:
    """``{"entries", "bytes", "limit_bytes"}`` of the in-memory index cache."""
    return _memory_cache.info()


def _index_nbytes(index: VideoIndex) -> int:
    return sum(getattr(index, name).nbytes for name in _ARRAY_FIELDS) + len(index.extradata) + 1024


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

    A URL (``s3://``, ``gs://``, ``https://``: anything fsspec opens), ``bytes`` or a binary file
    object is read through :mod:`vclip._sources` (the indexing pass reads the whole file once).
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
    if not (isinstance(path, (str, os.PathLike)) and is_local(path)):  # only paths are local
        name, _holder = hold_video(path)  # the holder keeps bytes or a file object readable meanwhile
        return _index_source(name, stream_index, cache_dir)
    path = os.fspath(path)
    stat = _stat_video(path)
    key = (os.path.realpath(path), stream_index)
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
        cache_dir, key, fingerprint, path, lambda: _build_index(path, stream_index, stat.st_size),
        unchanged=lambda: _signature(_stat_video(path)) == signature,
    )
    if keep:  # else the file changed while it was read: keep nothing
        _memory_cache.remember(key, MemoryEntry(index, fingerprint, signature, settled, _index_nbytes(index)))
    return index


def _named(index: VideoIndex, path: str) -> VideoIndex:
    """``index`` from the memory cache (keyed by the file's real path, so shared by every name of the
    file) naming ``path``, the name asked for; the arrays are shared, not copied."""
    return index if index.path == path else replace(index, path=path)


def _index_source(name: str, stream_index: int | None, cache_dir: str | os.PathLike | None) -> VideoIndex:
    """:func:`index_video` of a URL or in-memory name, cached by its metadata fingerprint.

    A URL's in-memory entry is served without a request for :data:`_REMOTE_TRUST_SECONDS` after
    its metadata was last checked (the loader asks for a video's index once per clip).
    """
    key = (name, stream_index)
    entry = _memory_cache.get(key)
    if entry is not None and entry.signature and time.monotonic() - entry.signature[0] < _REMOTE_TRUST_SECONDS:
        return entry.index
    fingerprint = source_fingerprint(name)  # None for file objects: never cached
    if fingerprint is None:
        return _build_source_index(name, stream_index)
    checked = (time.monotonic(),) if is_url(name) else ()
    if entry is not None and entry.fingerprint == fingerprint:
        _memory_cache.remember(key, replace(entry, signature=checked))
        return entry.index
    index, _ = _through_disk_cache(cache_dir, key, fingerprint, name, lambda: _build_source_index(name, stream_index))
    _memory_cache.remember(key, MemoryEntry(index, fingerprint, checked, False, _index_nbytes(index)))
    return index


def _through_disk_cache(
    cache_dir: str | os.PathLike | None, key: tuple[str, int | None], fingerprint: str, name: str,
    build: Callable[[], VideoIndex], unchanged: Callable[[], bool] | None = None,
) -> tuple[VideoIndex, bool]:
    """The index of ``key`` from the on-disk cache when an entry validates, else built and saved.

    Returns:
        The index, and whether it may be kept: False when ``unchanged()`` says the source changed
        while it was read (then nothing is saved either).
    """
    disk = DiskCache.open(cache_dir) if cache_dir is not None else None
    try:
        entry_name = DiskCache.entry_name(key)
        stored = _stored_index(disk, entry_name, fingerprint, key[1], name) if disk is not None else None
        index = stored if stored is not None else build()
        if unchanged is not None and not unchanged():
            return index, False
        if stored is None and disk is not None:
            disk.save(entry_name, fingerprint, key[1], index_to_record(index))
        return index, True
    finally:
        if disk is not None:
            disk.close()


def _stored_index(disk: DiskCache, entry_name: str, fingerprint: str, stream_index: int | None,
                  name: str) -> VideoIndex | None:
    """The index stored in ``disk`` for this content and stream request, or None when there is none
    or it does not validate in every way (format version, fields, consistency, stream)."""
    record = disk.load(entry_name, fingerprint, stream_index)
    if record is None:
        return None
    try:
        index = index_from_record(record, name)
    except Exception:  # unknown fields, tampered values: rebuild, never raise
        return None
    if stream_index is not None and index.stream_index != stream_index:
        return None
    return index


def _build_source_index(name: str, stream_index: int | None) -> VideoIndex:
    size = open_reader(name).size()
    if size == 0:
        raise CorruptVideoError(name, "file is empty (0 bytes)")
    return _build_index(name, stream_index, size)


# -- reading containers -------------------------------------------------------------------------
_OPEN_OPTIONS: dict[str, Any] = {"metadata_errors": "replace"}
"""Options of ``av.open`` for reading: PyAV up to 18 refuses metadata that is not valid UTF-8
unless told to replace it; later PyAV has no such option (and no such refusal)."""


def _open_for_reading(source: str | BinaryIO) -> InputContainer:
    try:
        return av.open(source, "r", **_OPEN_OPTIONS)
    except TypeError as error:
        if "metadata_errors" not in str(error):
            raise
        _OPEN_OPTIONS.clear()
        return av.open(source, "r")


def open_container(path: str):
    """``av.open(path)`` for reading, every failure a VideoError naming the file.

    Metadata that is not valid UTF-8 is read with replacement characters, not refused. URLs and
    in-memory videos are opened through :func:`vclip._sources.open_binary`.
    """
    local = is_local(path)
    try:
        return _open_for_reading(path if local else open_binary(path))
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


def _select_video_stream(container, path: str, stream_index: int | None):
    video_streams = [s for s in container.streams if s.type == "video"]
    if not video_streams:
        kinds = ", ".join(f"#{s.index} {s.type}" for s in container.streams) or "none"
        raise NotAVideoError(path, f"has no video stream (streams: {kinds})")
    if stream_index is None:
        return video_streams[0]
    for stream in video_streams:
        if stream.index == stream_index:
            return stream
    allowed = ", ".join(str(s.index) for s in video_streams)
    raise NotAVideoError(path, f"stream {stream_index} is not a video stream; video streams: {allowed}")


def _color_of(codec_context, pixel_format: str) -> tuple[ColorMatrix, ColorRange]:
    matrix = _MATRIX_BY_AVCOL_SPC.get(int(codec_context.colorspace or 2), "bt601")
    full = int(codec_context.color_range or 0) == 2 or pixel_format.startswith("yuvj")
    return matrix, ("full" if full else "limited")


def _build_index(path: str, stream_index: int | None, file_size: int) -> VideoIndex:
    container = open_container(path)
    try:
        return _index_container(container, path, stream_index, file_size)
    except VideoError:
        raise
    except av.error.FFmpegError as error:
        raise CorruptVideoError(path, f"FFmpeg could not read it ({os_reason(error)})") from None
    except OSError as error:  # the file went away or became unreadable while it was read
        raise video_error_from_os_error(path, error) from None
    except (ValueError, ArithmeticError, TypeError) as error:  # odd values from a damaged header
        raise CorruptVideoError(path, f"unreadable stream facts ({type(error).__name__}: {error})") from None
    finally:
        container.close()


def _index_container(container, path: str, stream_index: int | None, file_size: int) -> VideoIndex:
    stream = _select_video_stream(container, path, stream_index)
    context = stream.codec_context
    if context is None:
        raise CorruptVideoError(path, f"video stream #{stream.index} has no codec parameters (damaged header)")
    if context.codec is None:
        raise UnsupportedCodecError(path, "this FFmpeg build has no decoder for the video stream's codec")
    if not context.width or not context.height or context.width < 0 or context.height < 0:
        raise CorruptVideoError(path, f"video stream #{stream.index} has no picture size "
                                      f"({context.width}x{context.height}; damaged header)")
    if not stream.time_base or stream.time_base <= 0:
        raise CorruptVideoError(path, f"video stream #{stream.index} has no time base (damaged header)")
    codec = context.codec.canonical_name
    extradata = bytes(context.extradata or b"")
    length_size = nal_length_size(codec, extradata)
    pixel_format = context.pix_fmt or "unknown"
    pts, dts, pos, size, key, ref, discard, corrupt, durations = ([] for _ in range(9))
    samples: list[tuple[int, bytes]] = []  # (position, data) of the first packets
    try:
        for packet in container.demux(stream):
            if packet.size == 0:  # flush packet at end of stream
                continue
            data = bytes(packet)
            pts.append(packet.pts)
            dts.append(packet.dts)
            pos.append(-1 if packet.pos is None else packet.pos)
            size.append(packet.size)
            key.append(packet.is_keyframe)
            discard.append(packet.is_discard)
            corrupt.append(packet.is_corrupt)
            durations.append(packet.duration or 0)
            ref.append(is_reference_packet(codec, data, length_size))
            if len(samples) < 3:
                samples.append((pos[-1], data))
    except av.error.FFmpegError as error:
        raise CorruptVideoError(path, f"demuxing failed after {len(pts)} packets ({os_reason(error)})") from None
    container_format = container.format.name.split(",")[0]
    if container_format == "mpegts" and pos and _ts_ends_inside_last_packet(path, file_size, stream.id, pos[-1]):
        warnings.warn(
            f"{path}: truncated: the file ends inside the last packet of video stream #{stream.index} "
            f"(packet {len(pos) - 1}, decode order); its frame is left out",
            TruncatedVideoWarning, stacklevel=4,
        )
        for values in (pts, dts, pos, size, key, ref, discard, corrupt, durations):
            values.pop()
    _check_complete(path, stream, pos, size, corrupt, file_size)
    if any(p is None for p in pts):
        pts = _fill_missing_pts(path, stream, context, pts, dts, discard)
    addressable = container_format in _ADDRESSABLE_FORMATS and all(p >= 0 for p in pos) and _bytes_match(path, samples)

    packet_pts = np.asarray(pts, dtype=np.int64)
    shown = np.flatnonzero(~np.asarray(discard, dtype=bool))
    if shown.size == 0:
        raise CorruptVideoError(
            path, f"no decodable frames: all {len(pts)} packets of video stream #{stream.index} are marked discarded "
            "(an edit list or composition offsets leave no frame to show)"
        )
    order = shown[np.argsort(packet_pts[shown], kind="stable")]
    frame_pts = packet_pts[order]
    same = np.flatnonzero(np.diff(frame_pts) == 0)
    if same.size:
        raise CorruptVideoError(
            path, f"frames {int(same[0])} and {int(same[0]) + 1} share the timestamp {int(frame_pts[same[0]])} "
            f"({same.size} such pairs); frame order is ambiguous"
        )
    packet_frame = np.full(packet_pts.size, -1, dtype=np.int64)
    packet_frame[order] = np.arange(order.size)
    gaps = np.diff(frame_pts)
    last_duration = int(durations[order[-1]])
    if last_duration <= 0:
        last_duration = int(np.median(gaps)) if gaps.size else 0
    if not last_duration and stream.average_rate:
        last_duration = max(0, int(round(1 / (stream.average_rate * stream.time_base))))
    time_base = Fraction(stream.time_base)
    span = (frame_pts[-1] - frame_pts[0] + last_duration) * time_base
    average_fps = float(stream.average_rate) if stream.average_rate else (float(frame_pts.size / span) if span else 0.0)
    matrix, color_range = _color_of(context, pixel_format)
    orientation = _display_orientation(context, samples[0][1] if samples else b"")
    try:
        bit_depth = av.VideoFormat(pixel_format).components[0].bits if pixel_format != "unknown" else 8
    except (ValueError, IndexError):
        bit_depth = 8
    return VideoIndex(
        path=path,
        stream_index=stream.index,
        codec=codec,
        width=context.width,
        height=context.height,
        pixel_format=pixel_format,
        bit_depth=bit_depth,
        color_matrix=matrix,
        color_range=color_range,
        time_base=time_base,
        average_fps=average_fps,
        header_frame_count=stream.frames or None,
        extradata=extradata,
        packets_addressable=bool(addressable),
        pts=frame_pts,
        frame_packet=order.astype(np.int64),
        packet_pts=packet_pts,
        packet_pos=np.asarray(pos, dtype=np.int64),
        packet_size=np.asarray(size, dtype=np.int64),
        packet_is_keyframe=np.asarray(key, dtype=bool),
        packet_is_reference=np.asarray(ref, dtype=bool),
        packet_frame=packet_frame,
        last_frame_duration=last_duration,
        rotation=orientation.rotation,
        mirrored=orientation.hflip,
        sample_aspect_ratio=_sample_aspect_ratio(stream),
    )


def _display_orientation(context, first_packet: bytes) -> Orientation:
    """The display matrix FFmpeg attaches to decoded frames (from the container's track header or
    the bitstream), read by decoding the first packet; no matrix, or no picture, reads as upright."""
    if not first_packet:
        return Orientation()
    context.thread_type, context.thread_count = "SLICE", 1
    packet = av.Packet(len(first_packet))
    packet.update(first_packet)
    try:
        frames = list(context.decode(packet)) or list(context.decode(None))
    except (av.error.FFmpegError, ValueError):
        return Orientation()
    for kind, side_data in _side_data_items(frames[0]) if frames else ():
        if getattr(kind, "name", str(kind)).upper().endswith("DISPLAYMATRIX") and len(bytes(side_data)) == 36:
            return Orientation.from_display_matrix(np.frombuffer(bytes(side_data), dtype="<i4"))
    return Orientation()


def _side_data_items(frame) -> list:
    """``(type, data)`` of a frame's side data: iterating it gives the entries (each with a
    ``type``) up to PyAV 18, and the types, which map to the entries, later."""
    side_data = frame.side_data
    return [(entry.type, entry) if hasattr(entry, "type") else (entry, side_data[entry]) for entry in side_data]


def _sample_aspect_ratio(stream) -> Fraction:
    ratio = stream.sample_aspect_ratio or stream.codec_context.sample_aspect_ratio
    return Fraction(ratio) if ratio and ratio > 0 else Fraction(1)


def _check_complete(path: str, stream, pos: list, size: list, corrupt: list, file_size: int) -> None:
    """Raise CorruptVideoError when packets are missing or cut off by the end of the file."""
    if not pos:
        raise CorruptVideoError(path, "stream has no video packets (empty or truncated)")
    listed = [(entry.pos, entry.size) for entry in stream.index_entries]  # the container's sample table
    for number, (position, length) in enumerate(listed or zip(pos, size)):
        if position is not None and position >= 0 and position + length > file_size:
            raise CorruptVideoError(
                path, f"truncated: packet {number} of {len(listed) or len(pos)} ends at byte {position + length}, "
                f"the file has {file_size} bytes"
            )
    if any(corrupt):
        raise CorruptVideoError(path, f"damaged: packet {corrupt.index(True)} of {len(pos)} is incomplete")


def _ts_ends_inside_last_packet(path: str, file_size: int, pid: int, last_position: int) -> bool:
    """Whether an MPEG-TS file ends inside a transport packet that continues the PES packet that
    starts at ``last_position`` (the stream's last packet): FFmpeg drops the partial transport
    packet and hands over the rest, which decodes to a concealed frame."""
    if last_position < 0:
        return False
    with open_binary(path) as file:
        def byte_at(offset: int) -> int | None:
            file.seek(offset)
            value = file.read(1)
            return value[0] if value else None

        # raw packet size, bytes before the sync byte in each (M2TS's 4-byte timecode)
        for packet_size, lead in ((188, 0), (192, 4), (204, 0)):
            if byte_at(last_position) != 0x47:
                return False
            following = last_position + packet_size
            if following < file_size and byte_at(following) != 0x47:
                continue
            partial = (file_size - (last_position - lead)) % packet_size
            if partial <= lead:
                return False
            file.seek(file_size - partial + lead)
            header = file.read(3)
            if len(header) < 3 or header[0] != 0x47:
                return False
            tail_pid = ((header[1] & 0x1F) << 8) | header[2]
            starts_unit = bool(header[1] & 0x40)
            return tail_pid == pid and not starts_unit
    return False


def _fill_missing_pts(path: str, stream, context, pts: list, dts: list, discard: list) -> list[int]:
    """Timestamps for packets the demuxer gave none (e.g. negative ones Matroska cannot store).

    Without frame reordering, the dts says where they go; otherwise the stream is decoded up to
    the last such frame and they are placed by the decoder's output order, between the timestamps
    of their neighbours (before the first one, one frame duration apart).
    """
    missing = [number for number, value in enumerate(pts) if value is None]
    if not context.has_b_frames and all(dts[number] is not None for number in missing):
        return [d if p is None else p for p, d in zip(pts, dts)]
    needed = {number for number in missing if not discard[number]}
    outputs = _decoder_output_order(path, stream.index, needed, len(pts))
    outputs = [number for number in outputs if not discard[number]]
    lost = needed - set(outputs)
    if lost:
        raise CorruptVideoError(
            path, f"{len(missing)} packets carry neither pts nor dts, and the frames of {len(lost)} of them "
            "could not be decoded to find their order"
        )
    known = sorted(pts[number] for number in range(len(pts)) if pts[number] is not None and not discard[number])
    steps = [b - a for a, b in zip(known, known[1:]) if b > a]
    step = int(np.median(steps)) if steps else 0
    if step <= 0 and stream.average_rate:
        step = int(round(1 / (stream.average_rate * stream.time_base)))
    step = max(step, 1)
    filled = list(pts)

    def place(run: list[int], low: int | None, high: int | None) -> None:
        count = len(run)
        if not count:
            return
        if low is not None and high is not None:
            if high - low <= count:
                raise CorruptVideoError(
                    path, f"{count} frames without timestamps sit between timestamps {low} and {high}; "
                    "frame order is unknown"
                )
            values = [low + (high - low) * j // (count + 1) for j in range(1, count + 1)]
        elif high is not None:
            values = [high - step * (count + 1 - j) for j in range(1, count + 1)]
        else:
            start = 0 if low is None else low + step
            values = [start + step * j for j in range(count)]
        for number, value in zip(run, values):
            filled[number] = value

    run: list[int] = []
    low = None
    for number in outputs:
        if pts[number] is None:
            run.append(number)
        else:
            place(run, low, pts[number])
            run, low = [], pts[number]
    place(run, low, None)
    in_order = [filled[number] for number in outputs]
    if any(b <= a for a, b in zip(in_order, in_order[1:])):
        raise CorruptVideoError(path, "packets without timestamps: the decoder's frame order contradicts the others")
    floor = min(value for value in filled if value is not None)
    for number in missing:  # discarded packets: below every frame
        if filled[number] is None:
            floor -= 1
            filled[number] = dts[number] if dts[number] is not None else floor
    return filled


def _decoder_output_order(path: str, stream_index: int, needed: set[int], count: int) -> list[int]:
    """Decode-order numbers of the packets whose frames a decoder outputs, in output order,
    decoding until every packet of ``needed`` has come out and one frame after it."""
    outputs: list[int] = []
    remaining = set(needed)
    with open_container(path) as container:
        context = container.streams[stream_index].codec_context
        try:
            number = 0
            for packet in container.demux(container.streams[stream_index]):
                if packet.size == 0:
                    continue
                packet.pts, packet.dts = number, None
                number += 1
                for frame in context.decode(packet):
                    if frame.pts is not None and 0 <= frame.pts < count:
                        outputs.append(int(frame.pts))
                        remaining.discard(int(frame.pts))
                if not remaining and outputs and outputs[-1] not in needed:
                    return outputs
            for frame in context.decode(None):
                if frame.pts is not None and 0 <= frame.pts < count:
                    outputs.append(int(frame.pts))
        except av.error.FFmpegError as error:
            raise CorruptVideoError(
                path, f"packets carry neither pts nor dts, and decoding them to find their order failed "
                f"({os_reason(error)})"
            ) from None
    return outputs


def _bytes_match(path: str, samples: list[tuple[int, bytes]]) -> bool:
    """Whether packet bytes sit contiguously in the file at their demuxer position."""
    with open_binary(path) as file:
        for position, data in samples:
            file.seek(position)
            if file.read(len(data)) != data:
                return False
    return True


# -- the on-disk cache --------------------------------------------------------------------------
