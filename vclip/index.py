"""VideoIndex: what one demux pass (no decoding) tells about a video stream, frame by frame."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Literal

import av
import numpy as np

from ._bitstream import is_reference_packet, nal_length_size
from .errors import CorruptVideoError, NotAVideoError, UnsupportedCodecError, VideoNotFoundError

__all__ = ["VideoIndex", "index_video", "clear_index_cache"]

ColorMatrix = Literal["bt601", "bt709", "bt2020", "smpte240m"]
ColorRange = Literal["limited", "full"]

_INDEX_FORMAT_VERSION = 1
# AVColorSpace values. Unspecified and unknown matrices fall back to BT.601, as FFmpeg's swscale does.
_MATRIX_BY_AVCOL_SPC = {1: "bt709", 5: "bt601", 6: "bt601", 7: "smpte240m", 9: "bt2020", 10: "bt2020"}
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

    def __repr__(self) -> str:
        return (
            f"VideoIndex(path={self.path!r}, stream_index={self.stream_index}, codec={self.codec!r}, "
            f"size={self.width}x{self.height}, pixel_format={self.pixel_format!r}, "
            f"num_frames={self.num_frames}, keyframes={len(self.keyframe_indices)}, "
            f"average_fps={self.average_fps:.3f}, duration_seconds={self.duration_seconds:.3f}, "
            f"color={self.color_matrix}/{self.color_range})"
        )

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

        Facts come as plain Python values (``time_base`` as a ``"num/den"`` string, ``extradata``
        as bytes, ``header_frame_count`` may be None); the names of :attr:`STORED_ARRAYS` map to
        NumPy arrays. :meth:`from_arrays` turns the dict back into an equal index.
        """
        stored = {name: getattr(self, name) for name in self.__dataclass_fields__ if name != "path"}
        stored["time_base"] = str(self.time_base)
        return stored

    @classmethod
    def from_arrays(cls, path: str | os.PathLike, stored: dict) -> "VideoIndex":
        """The index that :meth:`to_arrays` gave, for ``path``, without opening the file.

        Arrays are taken as they are when their dtype is right (no copy; views stay views).

        Raises:
            ValueError: A field is missing or unknown, or the arrays do not fit together
                (lengths, frame and packet numbers out of range).
        """
        names = set(cls.__dataclass_fields__) - {"path"}
        missing, unknown = names - set(stored) - {"last_frame_duration"}, set(stored) - names
        if missing or unknown:
            raise ValueError(f"{os.fspath(path)}: stored index has missing fields {sorted(missing)} "
                             f"and unknown fields {sorted(unknown)}")
        fields = dict(stored)
        for name, dtype in cls.STORED_ARRAYS.items():
            value = fields[name]
            if not (isinstance(value, np.ndarray) and value.dtype == dtype and value.ndim == 1):
                fields[name] = np.asarray(value, dtype=dtype).reshape(-1)
        fields["time_base"] = Fraction(fields["time_base"])
        fields["extradata"] = bytes(fields["extradata"] or b"")
        header = fields["header_frame_count"]
        fields["header_frame_count"] = None if header is None else int(header)
        frames, packets = fields["pts"].size, fields["packet_pts"].size
        per_packet = [n for n in cls.STORED_ARRAYS if n.startswith("packet_") and fields[n].size != packets]
        if fields["frame_packet"].size != frames or per_packet or frames > packets:
            raise ValueError(f"{os.fspath(path)}: stored index arrays do not fit together ({frames} frames, "
                             f"{packets} packets; wrong lengths: {per_packet or ['frame_packet']})")
        if frames and not (0 <= fields["frame_packet"].min() and fields["frame_packet"].max() < packets
                           and -1 <= fields["packet_frame"].min() and fields["packet_frame"].max() < frames):
            raise ValueError(f"{os.fspath(path)}: stored index has frame or packet numbers out of range")
        return cls(path=os.fspath(path), **fields)


# ---------------------------------------------------------------------------------------------
_cache: OrderedDict[tuple, VideoIndex] = OrderedDict()
_cache_lock = threading.Lock()
_CACHE_ENTRIES = 4096


def clear_index_cache() -> None:
    """Forget all in-memory indexes."""
    with _cache_lock:
        _cache.clear()


def index_video(
    path: str | os.PathLike,
    *,
    stream_index: int | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> VideoIndex:
    """Index one video stream with a single demux pass (no decoding).

    Results are cached in memory per (file, size, modification time, stream); with ``cache_dir``
    they are also kept on disk as ``.npz`` files.

    Args:
        path: The video file.
        stream_index: Container stream index of the video stream; default: the first video stream.
        cache_dir: Folder for an on-disk cache of indexes (created if missing).

    Raises:
        VideoNotFoundError: The file does not exist.
        NotAVideoError: Not a container FFmpeg can read, no video stream, or ``stream_index``
            is not a video stream.
        UnsupportedCodecError: FFmpeg has no decoder for the stream's codec.
        CorruptVideoError: Empty, truncated, or without a single video packet.
    """
    path = os.fspath(path)
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        raise VideoNotFoundError(path, "file does not exist") from None
    if not os.path.isfile(path):
        raise NotAVideoError(path, "is not a regular file")
    if stat.st_size == 0:
        raise CorruptVideoError(path, "file is empty (0 bytes)")
    key = (os.path.realpath(path), stat.st_size, stat.st_mtime_ns, stream_index)
    with _cache_lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    disk_file = _disk_cache_file(cache_dir, key) if cache_dir is not None else None
    index = _load_from_disk(disk_file, path) if disk_file is not None else None
    if index is None:
        index = _build_index(path, stream_index, stat.st_size)
        if disk_file is not None:
            _save_to_disk(index, disk_file)
    with _cache_lock:
        _cache[key] = index
        while len(_cache) > _CACHE_ENTRIES:
            _cache.popitem(last=False)
    return index


def open_container(path: str):
    try:
        return av.open(path)
    except av.error.FileNotFoundError:
        raise VideoNotFoundError(path, "file does not exist") from None
    except (av.error.InvalidDataError, av.error.EOFError) as error:
        raise NotAVideoError(path, f"not a video container FFmpeg can read ({error.strerror})") from None
    except av.error.FFmpegError as error:
        raise CorruptVideoError(path, f"FFmpeg could not open it ({error.strerror})") from None


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


def _color_of(codec_context, pixel_format: str) -> tuple[str, str]:
    matrix = _MATRIX_BY_AVCOL_SPC.get(int(codec_context.colorspace or 2), "bt601")
    full = int(codec_context.color_range or 0) == 2 or pixel_format.startswith("yuvj")
    return matrix, ("full" if full else "limited")


def _build_index(path: str, stream_index: int | None, file_size: int) -> VideoIndex:
    container = open_container(path)
    try:
        stream = _select_video_stream(container, path, stream_index)
        context = stream.codec_context
        if context.codec is None:
            raise UnsupportedCodecError(path, "this FFmpeg build has no decoder for the video stream's codec")
        codec = context.codec.canonical_name
        extradata = bytes(context.extradata or b"")
        length_size = nal_length_size(codec, extradata)
        pixel_format = context.pix_fmt or "unknown"
        pts, dts, pos, size, key, ref, discard, corrupt, durations = ([] for _ in range(9))
        samples = []
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
            raise CorruptVideoError(path, f"demuxing failed after {len(pts)} packets ({error.strerror})") from None
        _check_complete(path, stream, pos, size, corrupt, file_size)
        if any(p is None for p in pts):
            if any(d is None for d in dts):
                raise CorruptVideoError(path, "packets carry neither pts nor dts; frame order is unknown")
            pts = [d if p is None else p for p, d in zip(pts, dts)]
        addressable = container.format.name.split(",")[0] in _ADDRESSABLE_FORMATS and all(
            p >= 0 for p in pos
        ) and _bytes_match(path, samples)

        packet_pts = np.asarray(pts, dtype=np.int64)
        shown = np.flatnonzero(~np.asarray(discard, dtype=bool))
        order = shown[np.argsort(packet_pts[shown], kind="stable")]
        packet_frame = np.full(packet_pts.size, -1, dtype=np.int64)
        packet_frame[order] = np.arange(order.size)
        frame_pts = packet_pts[order]
        gaps = np.diff(frame_pts)
        last_duration = int(durations[order[-1]]) if order.size and durations[order[-1]] else (
            int(np.median(gaps)) if gaps.size else 0
        )
        if not last_duration and stream.average_rate:
            last_duration = int(round(1 / (stream.average_rate * stream.time_base)))
        time_base = Fraction(stream.time_base)
        span = (frame_pts[-1] - frame_pts[0] + last_duration) * time_base if frame_pts.size else 0
        average_fps = float(stream.average_rate) if stream.average_rate else (
            float(frame_pts.size / span) if span else 0.0
        )
        matrix, color_range = _color_of(context, pixel_format)
        fmt = av.VideoFormat(pixel_format) if pixel_format != "unknown" else None
        return VideoIndex(
            path=path,
            stream_index=stream.index,
            codec=codec,
            width=context.width,
            height=context.height,
            pixel_format=pixel_format,
            bit_depth=fmt.components[0].bits if fmt is not None else 8,
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
        )
    finally:
        container.close()


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


def _bytes_match(path: str, samples: list[tuple[int, bytes]]) -> bool:
    """Whether packet bytes sit contiguously in the file at their demuxer position."""
    with open(path, "rb") as file:
        for position, data in samples:
            file.seek(position)
            if file.read(len(data)) != data:
                return False
    return True


# -- on-disk cache ------------------------------------------------------------------------------
_ARRAY_FIELDS = (
    "pts", "frame_packet", "packet_pts", "packet_pos", "packet_size",
    "packet_is_keyframe", "packet_is_reference", "packet_frame",
)


def _disk_cache_file(cache_dir, key: tuple) -> Path:
    digest = hashlib.sha1(repr((_INDEX_FORMAT_VERSION,) + key).encode()).hexdigest()[:20]
    return Path(cache_dir) / f"{Path(key[0]).name}.{digest}.npz"


def _save_to_disk(index: VideoIndex, file: Path) -> None:
    file.parent.mkdir(parents=True, exist_ok=True)
    facts = {
        name: getattr(index, name)
        for name in ("stream_index", "codec", "width", "height", "pixel_format", "bit_depth", "color_matrix",
                     "color_range", "average_fps", "header_frame_count", "packets_addressable",
                     "last_frame_duration")
    }
    facts["time_base"] = str(index.time_base)
    arrays = {name: getattr(index, name) for name in _ARRAY_FIELDS}
    temporary = file.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp.npz")
    np.savez(temporary, facts=json.dumps(facts), extradata=np.frombuffer(index.extradata, np.uint8), **arrays)
    os.replace(temporary, file)


def _load_from_disk(file: Path, path: str) -> VideoIndex | None:
    if not file.exists():
        return None
    try:
        with np.load(file) as stored:
            facts = json.loads(str(stored["facts"]))
            facts["time_base"] = Fraction(facts["time_base"])
            arrays = {name: stored[name] for name in _ARRAY_FIELDS}
            extradata = stored["extradata"].tobytes()
    except (OSError, ValueError, KeyError):
        return None  # unreadable cache entry: rebuild it
    return VideoIndex(path=path, extradata=extradata, **facts, **arrays)

