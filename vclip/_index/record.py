"""VideoIndex, what one demux pass tells about a video stream frame by frame (the record that
samplers, decode plans and the engine read; :func:`vclip.index.index_video` builds it), and its
stored form: its fields as named NumPy arrays plus one JSON string of stream facts (for ``np.savez``
files of the disk cache, Parquet catalog rows...), the parsing of stored facts back into field
values, and the consistency check every stored index must pass before it is trusted."""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

import numpy as np

from ..errors import ArgumentError, FrameIndexError
from .orientation import Orientation

__all__ = ["VideoIndex", "INDEX_FORMAT_VERSION", "ARRAY_DTYPES", "COLOR_MATRICES", "LARGEST_SAMPLE_ASPECT_RATIO",
           "parse_stored_facts", "check_facts", "check_index", "index_record", "record_fields", "stored_facts"]

COLOR_MATRICES = ("bt601", "bt709", "bt2020", "smpte240m")
"""The YUV to RGB matrices an index may name (the demux pass maps every other stream to BT.601)."""

LARGEST_SAMPLE_ASPECT_RATIO = Fraction(16)
"""Pixels wider than this over their height, or higher than this over their width, are a damaged
header (real anamorphic video stays within 4:1): stretched to square pixels, a 2147483647:1 pixel
asked NumPy for 36 TiB."""

INDEX_FORMAT_VERSION = 3
"""Version of :func:`index_record`'s layout; a stored record of another version is rebuilt."""

ARRAY_DTYPES = {
    "pts": np.int64, "frame_packet": np.int64, "packet_pts": np.int64, "packet_pos": np.int64,
    "packet_size": np.int64, "packet_is_keyframe": np.bool_, "packet_is_reference": np.bool_,
    "packet_frame": np.int64,
}
"""The per-frame and per-packet arrays of an index and their dtypes; every other field but the path is a fact."""
_FACT_TYPES = {  # name: accepted JSON types
    "stream_index": (int,), "codec": (str,), "width": (int,), "height": (int,), "pixel_format": (str,),
    "bit_depth": (int,), "color_matrix": (str,), "color_range": (str,), "time_base": (str,),
    "average_fps": (float, int), "header_frame_count": (int, type(None)), "packets_addressable": (bool,),
    "last_frame_duration": (int,), "rotation": (int,), "mirrored": (bool,), "sample_aspect_ratio": (str,),
}


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
            ArgumentError: (a ValueError) ``seconds`` is before the first frame or at/after the end
                of the stream.
        """
        if not (self.start_seconds <= seconds < self.end_seconds):
            raise ArgumentError(
                f"{self.path}: time {seconds} s is outside the stream "
                f"[{self.start_seconds:.6f}, {self.end_seconds:.6f}) s"
            )
        return int(np.searchsorted(self.pts_seconds, seconds, side="right") - 1)

    def check_frame_indices(self, indices) -> np.ndarray:
        """Indices as int64, negative ones counted from the end.

        Raises:
            FrameIndexError: (an IndexError) An index out of range, named.
            ArgumentError: (a ValueError) No index.
        """
        array = np.asarray(indices, dtype=np.int64).reshape(-1)
        if array.size == 0:
            raise ArgumentError(f"{self.path}: the list of frame indices is empty")
        n = self.num_frames
        bad = array[(array < -n) | (array >= n)]
        if bad.size:
            raise FrameIndexError(f"{self.path}: frame index {int(bad[0])} is out of range [0, {n - 1}] ({n} frames)")
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


# -- the stored form -------------------------------------------------------------------------------
def parse_stored_facts(stored: dict) -> dict:
    """``stored`` (the fields of an index as :meth:`~vclip.index.VideoIndex.to_arrays`, :func:`index_record` or a
    catalog row store them) with its stream facts as :class:`~vclip.index.VideoIndex` field values: ``time_base``
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


def check_index(index: Any) -> None:
    """Check that the arrays and facts of ``index`` agree with each other (cheap, O(frames)).

    A built index always passes; an index read back from storage that fails was damaged or
    tampered with and must be rebuilt.

    Raises:
        ValueError: What is inconsistent.
    """
    n, m = index.pts.size, index.packet_pts.size
    for name, dtype in ARRAY_DTYPES.items():
        array = getattr(index, name)
        if not isinstance(array, np.ndarray) or array.ndim != 1:
            raise ValueError(f"{name} is not a one-dimensional array")
        if array.dtype != dtype:
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
    check_facts({name: getattr(index, name) for name in _FACT_TYPES})


def check_facts(facts: Any) -> None:
    """Check that the stream facts of an index (a mapping of :class:`~vclip.index.VideoIndex` field
    values, ``time_base`` and ``sample_aspect_ratio`` as Fractions) are possible.

    Raises:
        ValueError: What is impossible.
    """
    width, height, bit_depth = facts["width"], facts["height"], facts["bit_depth"]
    if width <= 0 or height <= 0 or not 1 <= bit_depth <= 16:
        raise ValueError(f"impossible picture {width}x{height}, {bit_depth}-bit")
    if facts["color_matrix"] not in COLOR_MATRICES or facts["color_range"] not in ("limited", "full"):
        raise ValueError(f"unknown colour {facts['color_matrix']}/{facts['color_range']}")
    if (facts["time_base"] <= 0 or facts["stream_index"] < 0 or not facts["codec"]
            or facts["last_frame_duration"] < 0):
        raise ValueError("impossible stream facts")
    ratio = facts["sample_aspect_ratio"]
    if facts["rotation"] not in (0, 90, 180, 270) or not 1 / LARGEST_SAMPLE_ASPECT_RATIO <= ratio <= (
            LARGEST_SAMPLE_ASPECT_RATIO):
        raise ValueError(f"impossible rotation {facts['rotation']} or sample aspect ratio {ratio}")


def index_record(index: Any) -> dict[str, np.ndarray]:
    """``index`` as named NumPy arrays (for ``np.savez``, Parquet...): a ``format_version``, the
    stream facts as one JSON string ``facts``, ``extradata`` as uint8, and the per-frame and
    per-packet arrays under their field names. :func:`record_fields` reads it back."""
    facts = {name: getattr(index, name) for name in _FACT_TYPES if name not in ("time_base", "sample_aspect_ratio")}
    facts["time_base"] = str(index.time_base)
    facts["sample_aspect_ratio"] = str(index.sample_aspect_ratio)
    record = {
        "format_version": np.asarray(INDEX_FORMAT_VERSION, dtype=np.int64),
        "facts": np.asarray(json.dumps(facts, sort_keys=True)),
        "extradata": np.frombuffer(index.extradata, dtype=np.uint8),
    }
    record.update({name: getattr(index, name) for name in ARRAY_DTYPES})
    return record


def stored_facts(record, version: int, fact_types: Mapping[str, tuple[type, ...]]) -> dict[str, Any]:
    """The stream facts of a stored record (an index's or an audio index's) of format ``version``:
    its JSON string ``facts``, with exactly the names of ``fact_types``, each of its accepted types.

    Raises:
        ValueError: Another format version, other names, a fact of another type.
        KeyError, TypeError: No such fields (the callers report the record as unreadable).
    """
    found = int(np.asarray(record["format_version"]))
    if found != version:
        raise ValueError(f"format version {found}, expected {version}")
    facts = json.loads(str(np.asarray(record["facts"])))
    if not isinstance(facts, dict) or set(facts) != set(fact_types):
        raise ValueError("stream facts have unexpected names")
    for name, types in fact_types.items():
        value = facts[name]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise ValueError(f"stream fact {name} has type {type(value).__name__}")
    return facts


def record_fields(record) -> dict[str, Any]:
    """The index fields (all but ``path``) of a record made by :func:`index_record`.

    ``record`` is any mapping of those names to arrays (a dict, an open ``np.load`` file).

    Raises:
        ValueError: Another format version, missing or ill-typed fields.
    """
    try:
        facts = parse_stored_facts(stored_facts(record, INDEX_FORMAT_VERSION, _FACT_TYPES))
        arrays: dict[str, Any] = {}  # keyword arguments of VideoIndex
        for name, dtype in ARRAY_DTYPES.items():
            array = np.asarray(record[name])
            if array.dtype.kind != np.dtype(dtype).kind or array.ndim != 1:
                raise ValueError(f"{name} has dtype {array.dtype} and {array.ndim} dimensions")
            arrays[name] = array.astype(dtype, copy=False)
        extradata = np.asarray(record["extradata"])
        if extradata.dtype != np.uint8 or extradata.ndim != 1:
            raise ValueError("extradata is not bytes")
    except (KeyError, TypeError, ZeroDivisionError, OverflowError) as error:
        raise ValueError(f"not an index record ({type(error).__name__}: {error})") from None
    return {"extradata": extradata.tobytes(), **facts, **arrays}


