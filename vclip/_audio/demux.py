"""The demux pass over one audio stream: its facts, and per packet its timestamp, byte range and
where its samples sit on the stream's sample grid (sample ``n`` of the grid is shown at
``origin_seconds + n / sample_rate``), without decoding. :func:`vclip.index_audio` turns what it finds
into an :class:`~vclip.AudioIndex`.

Where the time base is as fine as one sample or finer (MP4 audio tracks count in samples, MPEG-TS
in 1/90000 s), a packet's place on the grid is its pts. Matroska and WebM count in milliseconds,
coarser than a sample: there the grid counts the samples of the packets before (PCM from the
packet's size, Opus from its table-of-contents byte, codecs with a fixed frame size from it) and
takes the pts again only where the stream jumps (a gap or an overlap of more than about one
millisecond). For codecs whose packet length is none of these (FLAC, Vorbis) packets are placed by
their pts, as precise as the time base, and their decoded samples laid one after another
(``exact_grid`` False). Trimming the container asks for (an edit list's discarded packets, Opus's
pre-skip, the padding of the last packet) is recorded per packet.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any

import av
import numpy as np

from .._bytes.sources import open_binary, open_container
from ..errors import (
    CorruptVideoError,
    NoAudioError,
    UnsupportedCodecError,
    VideoError,
    os_reason,
    video_error_from_os_error,
)

__all__ = ["LARGEST_CHANNELS", "LARGEST_SAMPLE_RATE", "audio_streams", "demux_audio_stream", "select_audio_stream"]

_ADDRESSABLE_FORMATS = ("mov", "mp4", "matroska", "webm")
_PCM_BITS = re.compile(r"^pcm_[suf](8|16|24|32|64)")
_BYTE_PCM = ("pcm_alaw", "pcm_mulaw", "pcm_vidc")
_JUMP_TICKS = 1.5  # a coarse pts further than this many ticks from the counted samples is a jump
LARGEST_SAMPLE_RATE = 768_000
"""The highest sample rate a stream may claim (the highest of real PCM; FFmpeg decodes DSD at
352,800 Hz): a header claiming more is damaged, and its clips' buffers would take gigabytes."""
LARGEST_CHANNELS = 64
"""The most channels a stream may claim: FFmpeg's channel layouts name at most 64."""


def audio_streams(container) -> list:
    """The audio streams of an open container, in container order."""
    return [stream for stream in container.streams if stream.type == "audio"]


def select_audio_stream(container, path: str, stream_index: int | None):
    """The audio stream ``stream_index`` (None: the first), or None when the file has no audio stream.

    Raises:
        NoAudioError: ``stream_index`` names no audio stream (the message lists the streams).
    """
    streams = audio_streams(container)
    if stream_index is None:
        return streams[0] if streams else None
    for stream in streams:
        if stream.index == stream_index:
            return stream
    kinds = ", ".join(f"#{s.index} {s.type}" for s in container.streams) or "none"
    raise NoAudioError(path, f"stream {stream_index} is not an audio stream (streams: {kinds})")


def demux_audio_stream(path: str, stream_index: int | None) -> dict[str, Any] | None:
    """The fields of the :class:`~vclip.AudioIndex` of an audio stream of ``path`` (all but ``path``),
    from one demux pass; None when the file has no audio stream and ``stream_index`` is None.

    Raises:
        VideoError: Any problem of the file, naming it (:class:`~vclip.NoAudioError`: ``stream_index``
            is not an audio stream).
    """
    container = open_container(path)
    try:
        stream = select_audio_stream(container, path, stream_index)
        return None if stream is None else _stream_fields(container, stream, path)
    except VideoError:
        raise
    except av.error.FFmpegError as error:
        raise CorruptVideoError(path, f"FFmpeg could not read its audio ({os_reason(error)})") from None
    except OSError as error:
        raise video_error_from_os_error(path, error) from None
    except (ValueError, ArithmeticError, TypeError) as error:  # odd values from a damaged header
        raise CorruptVideoError(path, f"unreadable audio stream facts ({type(error).__name__}: {error})") from None
    finally:
        container.close()


def _stream_fields(container, stream, path: str) -> dict[str, Any]:
    context = stream.codec_context
    where = f"audio stream #{stream.index}"
    if context is None or context.codec is None:
        raise UnsupportedCodecError(path, f"this FFmpeg build has no decoder for the codec of {where}")
    rate, channels = int(context.sample_rate or 0), int(context.channels or 0)
    if rate <= 0 or channels <= 0:
        raise CorruptVideoError(path, f"{where} has no sample rate or channel count ({rate} Hz, {channels} "
                                      "channels; damaged header)")
    if rate > LARGEST_SAMPLE_RATE or channels > LARGEST_CHANNELS:
        raise CorruptVideoError(path, f"{where} claims {rate} Hz and {channels} channels, more than any real audio "
                                      f"(at most {LARGEST_SAMPLE_RATE} Hz and {LARGEST_CHANNELS} channels; damaged "
                                      "header)")
    if not stream.time_base or stream.time_base <= 0:
        raise CorruptVideoError(path, f"{where} has no time base (damaged header)")
    time_base = Fraction(stream.time_base)
    codec = context.codec.canonical_name
    pts, pos, size, durations, discard, skip_start, skip_end, counted = ([] for _ in range(8))
    count_samples = _sample_counter(codec, channels, int(context.frame_size or 0))
    first_packets: list[tuple[int, bytes]] = []  # (position, data) of the first and last packets
    last_packets: list[tuple[int, bytes]] = []
    try:
        for packet in container.demux(stream):
            if packet.size == 0:  # flush packet at end of stream
                continue
            data = bytes(packet)
            pos.append(-1 if packet.pos is None else packet.pos)
            (first_packets if len(first_packets) < 3 else last_packets).append((pos[-1], data))
            del last_packets[:-3]
            pts.append(packet.pts)
            size.append(packet.size)
            durations.append(packet.duration or 0)
            discard.append(packet.is_discard)
            start, end = _skip_samples(packet)
            skip_start.append(start)
            skip_end.append(end)
            counted.append(count_samples(data) if count_samples is not None else 0)
    except av.error.FFmpegError as error:
        raise CorruptVideoError(path, f"demuxing {where} failed after {len(pts)} packets "
                                      f"({os_reason(error)})") from None
    samples = _packet_samples(counted if count_samples is not None else None, durations, pts, time_base, rate)
    filled = _fill_missing_pts(pts, samples, time_base, rate)
    origin, grid = _sample_grid(filled, samples, skip_start, time_base, rate, counted=count_samples is not None)
    container_format = container.format.name.split(",")[0]
    offset = None
    if container_format in _ADDRESSABLE_FORMATS and all(p >= 0 for p in pos) and len(set(pos)) == len(pos):
        offset = _data_offset(path, first_packets + last_packets)
    layout = context.layout.name if context.layout is not None else ""
    return dict(
        stream_index=stream.index,
        codec=codec,
        sample_rate=rate,
        channels=channels,
        layout=layout,
        time_base=time_base,
        extradata=bytes(context.extradata or b""),
        packets_addressable=offset is not None,
        exact_grid=time_base <= Fraction(1, rate) or count_samples is not None,
        origin_seconds=origin,
        packet_pts=np.asarray(filled, dtype=np.int64),
        packet_pos=np.asarray(pos, dtype=np.int64) + (offset or 0),
        packet_size=np.asarray(size, dtype=np.int64),
        packet_start=np.asarray(grid, dtype=np.int64),
        packet_samples=np.asarray(samples, dtype=np.int64),
        packet_skip_start=np.asarray(skip_start, dtype=np.int64),
        packet_skip_end=np.asarray(skip_end, dtype=np.int64),
        packet_is_discard=np.asarray(discard, dtype=bool),
    )


def _data_offset(path: str, samples: list[tuple[int, bytes]]) -> int | None:
    """How far after the demuxer's position each packet's bytes sit in the file (0 in MP4; a
    Matroska block's header, 4 bytes for track numbers below 127, in Matroska and WebM), found on
    the first of ``samples`` (position, data) and checked on all; None when they do not all agree."""
    if not samples:
        return None
    with open_binary(path) as file:
        def found_at(position: int, data: bytes) -> bool:
            file.seek(position)
            return file.read(len(data)) == data

        offset = next((delta for delta in range(12) if found_at(samples[0][0] + delta, samples[0][1])), None)
        if offset is None or not all(found_at(position + offset, data) for position, data in samples):
            return None
    return offset


def _skip_samples(packet) -> tuple[int, int]:
    """The samples to drop from the start and end of a packet's decoded audio (FFmpeg's
    ``skip_samples`` side data: Opus pre-skip, the padding of a last packet...); (0, 0) if none."""
    has = getattr(packet, "has_sidedata", None)  # PyAV 14 and later
    if has is None or not has("skip_samples"):
        return 0, 0
    data = bytes(packet.get_sidedata("skip_samples"))
    if len(data) < 8:
        return 0, 0
    return int.from_bytes(data[0:4], "little"), int.from_bytes(data[4:8], "little")


def _sample_counter(codec: str, channels: int, frame_size: int):
    """A function giving the samples (per channel) a packet decodes to, from its bytes; None when
    the codec's packets do not say (their durations are used instead)."""
    if codec in _BYTE_PCM:
        return lambda data: len(data) // channels
    match = _PCM_BITS.match(codec)
    if match:
        block = int(match.group(1)) // 8 * channels
        return lambda data: len(data) // block
    if codec == "opus":
        return _opus_samples
    if frame_size > 0:
        return lambda data: frame_size
    return None


_OPUS_FRAME_SAMPLES = (  # per table-of-contents configuration (RFC 6716, section 3.1), at 48 kHz
    (480, 960, 1920, 2880) * 3 + (480, 960) * 2 + (120, 240, 480, 960) * 4
)


def _opus_samples(data: bytes) -> int:
    """Samples at 48 kHz of one Opus packet, from its table-of-contents byte (RFC 6716, 3.1)."""
    if not data:
        return 0
    toc = data[0]
    code = toc & 3
    frames = 1 if code == 0 else 2 if code in (1, 2) else (data[1] & 0x3F if len(data) > 1 else 0)
    return _OPUS_FRAME_SAMPLES[toc >> 3] * frames


def _packet_samples(counted: list[int] | None, durations: list[int], pts: list, time_base: Fraction,
                    rate: int) -> list[int]:
    """Samples each packet decodes to: counted from its bytes, else from its duration (or the
    distance to the next packet's pts)."""
    if counted is not None:
        return counted
    ticks = list(durations)
    for number, value in enumerate(ticks):
        if value <= 0:
            following = pts[number + 1] if number + 1 < len(pts) else None
            if pts[number] is not None and following is not None and following > pts[number]:
                ticks[number] = following - pts[number]
            elif number:
                ticks[number] = ticks[number - 1]
    return [max(0, round(value * time_base * rate)) for value in ticks]


def _fill_missing_pts(pts: list, samples: list[int], time_base: Fraction, rate: int) -> list[int]:
    """Timestamps for packets the demuxer gave none: right after the previous packet's samples."""
    filled: list[int] = []
    for number, value in enumerate(pts):
        if value is None:
            value = 0 if not filled else filled[-1] + round(Fraction(samples[number - 1], rate) / time_base)
        filled.append(int(value))
    return filled


def _sample_grid(pts: list[int], samples: list[int], skip_start: list[int], time_base: Fraction,
                 rate: int, *, counted: bool) -> tuple[Fraction, list[int]]:
    """The grid's origin (seconds) and each packet's first decoded sample on it: from its pts where
    the time base is fine or the samples were not ``counted`` from the packets, else by counting.

    The origin is the first packet's first decoded sample: its pts, except where the container
    trims its start (Opus pre-skip): then the first sample shown is put where FFmpeg puts it (the
    pts plus the trimmed samples, rounded to the time base) and the origin that many samples before.
    """
    if not pts:
        return Fraction(0), []
    skip_ticks = _rescale_rounded(Fraction(skip_start[0], rate) / time_base)
    origin = (pts[0] + skip_ticks) * time_base - Fraction(skip_start[0], rate)
    if time_base <= Fraction(1, rate) or not counted:
        return origin, [math.floor((p * time_base - origin) * rate + Fraction(1, 2)) for p in pts]
    grid, expected = [], 0
    for value, count in zip(pts, samples):
        ticks_off = (origin + Fraction(expected, rate) - value * time_base) / time_base
        if abs(ticks_off) > _JUMP_TICKS:  # a gap or an overlap: start again from the pts
            expected = math.floor((value * time_base - origin) * rate + Fraction(1, 2))
        grid.append(expected)
        expected += count
    return origin, grid


def _rescale_rounded(value: Fraction) -> int:
    """``value`` to the nearest integer, halves away from zero (FFmpeg's ``av_rescale_q``)."""
    return int(math.copysign(math.floor(abs(value) + Fraction(1, 2)), value))
