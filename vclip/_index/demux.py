"""The one demux pass that gives a video stream's facts and per-packet arrays (only the first
picture is decoded, for the display matrix FFmpeg attaches to decoded frames and the pixel format),
over a container :func:`vclip._bytes.sources.open_container` opened, where it can without FFmpeg's
decoding probe. :func:`vclip.index.index_video` turns what it finds into a
:class:`~vclip.index.VideoIndex`."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

import av
import numpy as np

from .._bytes.sources import DEMUX_ERRORS, demux_failure, is_local, open_binary, open_container
from ..errors import (
    CorruptVideoError,
    DamagedHeaderWarning,
    NotAVideoError,
    TruncatedVideoWarning,
    UnsupportedCodecError,
    VideoError,
    os_reason,
    video_error_from_os_error,
)
from .bitstream import is_random_access_packet, is_reference_packet, nal_length_size
from .cut_off import (
    WARNING_STACKLEVEL,
    _first_lost_pts,
    _intact_packets,
    _leave_out_a_cut_off_end,
    _ts_last_packet_is_cut,
    _ts_tail,
)
from .orientation import Orientation
from .record import LARGEST_SAMPLE_ASPECT_RATIO, ColorMatrix, ColorRange, VideoIndex

__all__ = ["demux_stream"]

# AVColorSpace values. Unspecified and unknown matrices fall back to BT.601, as FFmpeg's swscale does.
_MATRIX_BY_AVCOL_SPC: dict[int, ColorMatrix] = {
    1: "bt709", 5: "bt601", 6: "bt601", 7: "smpte240m", 9: "bt2020", 10: "bt2020"}
_ADDRESSABLE_FORMATS = ("mov", "mp4", "matroska", "webm")
_STREAMS_IN_HEADER_FORMATS = ("mov", "matroska")  # FFmpeg's names: every stream and its codec in the header


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


def demux_stream(path: str, stream_index: int | None, file_size: int) -> VideoIndex:
    """The :class:`~vclip.index.VideoIndex` of a video stream of ``path``, from one demux pass;
    ``stream_index`` None: the first video stream.

    Raises:
        VideoError: Any problem of the file, naming it (see :func:`vclip.index.index_video`).
    """
    # A local MP4 or Matroska file first without FFmpeg's decoding probe (for H.264 it costs most
    # of the pass): the first picture, decoded anyway, gives the facts the probe would. Read again
    # with the probe: any other container (streams may appear as the probe reads on), a stream
    # whose first picture does not give them, or whose missing timestamps need the reordering
    # depth the probe guesses. Not a URL: the probe that decodes nothing reads further in some formats.
    if is_local(path):
        index = _demux_stream(path, stream_index, file_size, probe_pictures=False)
        if index is not None:
            return index
    index = _demux_stream(path, stream_index, file_size, probe_pictures=True)
    assert index is not None  # with the probe, a stream gives its index or raises
    return index


def _demux_stream(path: str, stream_index: int | None, file_size: int, *,
                  probe_pictures: bool) -> VideoIndex | None:
    container = open_container(path, probe_pictures=probe_pictures)
    try:
        return _index_stream(container, path, stream_index, file_size, probe_pictures=probe_pictures)
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


def _index_stream(container, path: str, stream_index: int | None, file_size: int, *,
                  probe_pictures: bool) -> VideoIndex | None:
    """The index of :func:`demux_stream` from ``container``, phase by phase: the stream's header,
    its packets, the display matrix and pixel format of its first picture, the packets the file
    holds whole, the frames in presentation order. None where it was opened without the decoding
    probe (``probe_pictures`` False) and the stream needs it."""
    header = _stream_header(container, path, stream_index, probe_pictures=probe_pictures)
    if header is None:
        return None
    packets = _read_packets(container, path, header)
    context = header.stream.codec_context
    orientation = _display_orientation(context, packets.samples[0][1] if packets.samples else b"")  # sets pix_fmt
    if not probe_pictures and (context.pix_fmt is None or None in packets.pts):
        return None
    packets, truncated = _whole_packets(path, header, packets, file_size)
    if any(p is None for p in packets.pts):
        packets = replace(packets, pts=_fill_missing_pts(path, header.stream, context, packets.pts, packets.dts,
                                                         packets.discard))
    frames = _frame_order(path, header.stream, packets, truncated)
    return _video_index(path, header, packets, frames, orientation)


@dataclass(frozen=True)
class _StreamHeader:
    """What the container tells of the video stream before any packet is read."""

    container_format: str  # FFmpeg's first name of the format: "mov", "matroska", "mpegts"...
    stream: Any  # the PyAV video stream (its codec context holds the size and colour)
    codec: str
    extradata: bytes
    length_size: int | None  # bytes of each NAL length prefix; None for Annex B streams


@dataclass(frozen=True)
class _Packets:
    """The stream's packets in decode order, one entry per packet in each list, as the demuxer gave them."""

    pts: Sequence[int | None]
    dts: Sequence[int | None]
    pos: list[int]  # -1 where unknown
    size: list[int]
    key: list[bool]  # a keyframe a decoder can start from
    ref: list[bool]  # other pictures may reference it
    discard: list[bool]  # decoded for its references, not shown
    corrupt: list[bool]
    durations: list[int]
    samples: list[tuple[int, bytes]]  # (position, data) of the first packets
    group: list[bytes]  # MPEG-TS: the packets since the last keyframe, to check the last one

    def first(self, count: int) -> _Packets:
        """The first ``count`` packets (``samples`` and ``group`` as they were)."""
        return replace(self, pts=self.pts[:count], dts=self.dts[:count], pos=self.pos[:count],
                       size=self.size[:count], key=self.key[:count], ref=self.ref[:count],
                       discard=self.discard[:count], corrupt=self.corrupt[:count], durations=self.durations[:count])


@dataclass(frozen=True)
class _FrameOrder:
    """The shown packets in presentation order, and the timing that follows from it."""

    pts: np.ndarray  # of each frame, ascending (int64)
    frame_packet: np.ndarray  # decode-order packet of each frame (int64)
    packet_pts: np.ndarray  # of each packet, decode order (int64)
    packet_frame: np.ndarray  # frame of each packet, -1 where discarded (int64)
    last_frame_duration: int
    average_fps: float


def _stream_header(container, path: str, stream_index: int | None, *, probe_pictures: bool) -> _StreamHeader | None:
    """The chosen video stream's header, checked; None where the container was opened without
    the decoding probe and its header does not hold the stream's facts."""
    container_format = container.format.name.split(",")[0]
    if not probe_pictures and container_format not in _STREAMS_IN_HEADER_FORMATS:
        return None
    stream = _select_video_stream(container, path, stream_index)
    context = stream.codec_context
    if context is None:
        raise CorruptVideoError(path, f"video stream #{stream.index} has no codec parameters (damaged header)")
    if context.codec is None:
        raise UnsupportedCodecError(path, "this FFmpeg build has no decoder for the video stream's codec")
    if not context.width or not context.height or context.width < 0 or context.height < 0:
        if not probe_pictures:
            return None
        raise CorruptVideoError(path, f"video stream #{stream.index} has no picture size "
                                      f"({context.width}x{context.height}; damaged header)")
    if not stream.time_base or stream.time_base <= 0:
        raise CorruptVideoError(path, f"video stream #{stream.index} has no time base (damaged header)")
    codec = context.codec.canonical_name
    extradata = bytes(context.extradata or b"")
    return _StreamHeader(container_format, stream, codec, extradata, nal_length_size(codec, extradata))


def _read_packets(container, path: str, header: _StreamHeader) -> _Packets:
    """Every packet of the stream, in one demux pass."""
    codec, length_size = header.codec, header.length_size
    pts, dts, pos, size, key, ref, discard, corrupt, durations = ([] for _ in range(9))
    samples: list[tuple[int, bytes]] = []
    group: list[bytes] = []
    try:
        for packet in container.demux(header.stream):
            if packet.size == 0:  # flush packet at end of stream
                continue
            data = bytes(packet)
            pts.append(packet.pts)
            dts.append(packet.dts)
            pos.append(-1 if packet.pos is None else packet.pos)
            size.append(packet.size)
            # a container's keyframe whose picture is not one a decoder can start from (a damaged
            # sync-sample table) would start decode plans where no frame comes out
            key.append(packet.is_keyframe and is_random_access_packet(codec, data, length_size) is not False)
            discard.append(packet.is_discard)
            corrupt.append(packet.is_corrupt)
            durations.append(packet.duration or 0)
            ref.append(is_reference_packet(codec, data, length_size))
            if len(samples) < 3:
                samples.append((pos[-1], data))
            if header.container_format == "mpegts":
                group = [data] if key[-1] else [*group, data]
    except DEMUX_ERRORS as error:
        raise CorruptVideoError(path, f"demuxing failed after {len(pts)} packets ({demux_failure(error)})") from None
    return _Packets(pts, dts, pos, size, key, ref, discard, corrupt, durations, samples, group)


def _whole_packets(path: str, header: _StreamHeader, packets: _Packets, file_size: int) -> tuple[_Packets, bool]:
    """The packets the file holds whole: a truncated file's cut-off end left out, with a
    :class:`~vclip.errors.TruncatedVideoWarning` (and, where frames shown after the first lost one
    would leave a gap, those frames marked discarded); and whether the file is cut off."""
    stream, pos = header.stream, packets.pos
    truncated = False
    if header.container_format == "mpegts" and pos:
        lists: list[list[Any]] = [list(values) for values in (packets.pts, packets.dts, pos, packets.size,
                                                              packets.key, packets.ref, packets.discard,
                                                              packets.corrupt, packets.durations)]
        pts, dts, discard = lists[0], lists[1], lists[6]
        tail = _ts_tail(path, file_size, stream.id, pos[-1])  # read once: both checks below need it
        truncated = _leave_out_a_cut_off_end(path, stream, pts, dts, discard, tuple(lists),
                                             _ts_last_packet_is_cut(stream, tail, packets.group), tail == "lost")
        packets = replace(packets, pts=lists[0], dts=lists[1], pos=lists[2], size=lists[3], key=lists[4],
                          ref=lists[5], discard=lists[6], corrupt=lists[7], durations=lists[8])
        pos = packets.pos
    kept = _intact_packets(path, stream, pos, packets.size, packets.corrupt, file_size)
    if kept < len(pos) or kept < len(stream.index_entries):
        truncated = True
        first_lost = _first_lost_pts(stream, kept, packets.pts[kept] if kept < len(packets.pts) else None)
        packets = packets.first(kept)
        if first_lost is not None:  # frames shown after the first lost one would leave a gap: not shown
            # (strictly after: a lost frame's timestamp is one no kept frame has, so a kept frame at
            # the bound, a decode time, is shown before it)
            packets = replace(packets, discard=[gone or (stamp is not None and stamp > first_lost)
                                                for gone, stamp in zip(packets.discard, packets.pts)])
        total = len(stream.index_entries) or len(packets.pos) + 1
        warnings.warn(
            f"{path}: truncated: the file ends at byte {file_size}, inside packet {kept} of {total}; its first "
            f"{packets.discard.count(False)} frames are indexed, the frames after them are missing",
            TruncatedVideoWarning, stacklevel=WARNING_STACKLEVEL,
        )
    return packets, truncated


def _frame_order(path: str, stream, packets: _Packets, truncated: bool) -> _FrameOrder:
    """The shown packets ordered by pts into frames (of a file that is cut off, ``truncated``), and
    the last frame's duration and the rate.

    Raises:
        CorruptVideoError: No packet is shown, or two frames share a timestamp.
    """
    packet_pts = np.asarray(packets.pts, dtype=np.int64)
    shown = np.flatnonzero(~np.asarray(packets.discard, dtype=bool))
    if shown.size == 0:
        reason = ("the file is cut off before a frame it can show" if truncated else
                  "an edit list or composition offsets leave no frame to show")
        raise CorruptVideoError(
            path, f"no decodable frames: all {len(packets.pts)} packets of video stream #{stream.index} are marked "
            f"discarded ({reason})"
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
    last_duration = int(packets.durations[order[-1]])
    if last_duration <= 0:
        last_duration = int(np.median(gaps)) if gaps.size else 0
    if not last_duration and stream.average_rate:
        last_duration = max(0, int(round(1 / (stream.average_rate * stream.time_base))))
    span = (frame_pts[-1] - frame_pts[0] + last_duration) * Fraction(stream.time_base)
    average_fps = float(stream.average_rate) if stream.average_rate else (float(frame_pts.size / span) if span else 0.0)
    return _FrameOrder(frame_pts, order.astype(np.int64), packet_pts, packet_frame, last_duration, average_fps)


def _video_index(path: str, header: _StreamHeader, packets: _Packets, frames: _FrameOrder,
                 orientation: Orientation) -> VideoIndex:
    """The record of the phases: the header's and the first picture's facts, the packets, the frames."""
    stream = header.stream
    context = stream.codec_context
    pixel_format = context.pix_fmt or "unknown"
    matrix, color_range = _color_of(context, pixel_format)
    try:
        bit_depth = av.VideoFormat(pixel_format).components[0].bits if pixel_format != "unknown" else 8
    except (ValueError, IndexError):
        bit_depth = 8
    addressable = (header.container_format in _ADDRESSABLE_FORMATS and all(p >= 0 for p in packets.pos)
                   and _bytes_match(path, packets.samples))
    return VideoIndex(
        path=path,
        stream_index=stream.index,
        codec=header.codec,
        width=context.width,
        height=context.height,
        pixel_format=pixel_format,
        bit_depth=bit_depth,
        color_matrix=matrix,
        color_range=color_range,
        time_base=Fraction(stream.time_base),
        average_fps=frames.average_fps,
        header_frame_count=stream.frames or None,
        extradata=header.extradata,
        packets_addressable=bool(addressable),
        pts=frames.pts,
        frame_packet=frames.frame_packet,
        packet_pts=frames.packet_pts,
        packet_pos=np.asarray(packets.pos, dtype=np.int64),
        packet_size=np.asarray(packets.size, dtype=np.int64),
        packet_is_keyframe=np.asarray(packets.key, dtype=bool),
        packet_is_reference=np.asarray(packets.ref, dtype=bool),
        packet_frame=frames.packet_frame,
        last_frame_duration=frames.last_frame_duration,
        rotation=orientation.rotation,
        mirrored=orientation.hflip,
        sample_aspect_ratio=_sample_aspect_ratio(path, stream),
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


def _sample_aspect_ratio(path: str, stream) -> Fraction:
    """The stream's pixel aspect ratio; square pixels when it has none, or one no real video has
    (a damaged header, with a DamagedHeaderWarning: its frames are still fine)."""
    ratio = stream.sample_aspect_ratio or stream.codec_context.sample_aspect_ratio
    if not ratio or ratio <= 0:
        return Fraction(1)
    ratio = Fraction(ratio)
    if not 1 / LARGEST_SAMPLE_ASPECT_RATIO <= ratio <= LARGEST_SAMPLE_ASPECT_RATIO:
        warnings.warn(f"{path}: its pixel aspect ratio {ratio.numerator}:{ratio.denominator} is impossible (beyond "
                      f"{LARGEST_SAMPLE_ASPECT_RATIO}:1 either way; a damaged header): taken as square pixels",
                      DamagedHeaderWarning, stacklevel=4)
        return Fraction(1)
    return ratio


def _fill_missing_pts(path: str, stream, context, pts: Sequence, dts: Sequence, discard: Sequence) -> list[int]:
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
        except DEMUX_ERRORS as error:
            raise CorruptVideoError(
                path, f"packets carry neither pts nor dts, and decoding them to find their order failed "
                f"({demux_failure(error)})"
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
