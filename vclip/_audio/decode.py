"""Decoding a time span of an audio stream to exactly the samples that cover it.

For ``[start, end)`` seconds at rate ``R`` the result has ``ceil((end - start) * R)`` samples and
sample ``j`` is the audio at ``start + j / R`` (to within half a sample). Only the packets of the
span are read (through the index and :func:`vclip._index.packets.read_packets`, so a URL reads
just their byte ranges), plus a few before it that the decoder needs to settle (two for most lossy
codecs, 250 ms for Opus, none for PCM): the samples are then FFmpeg's decode of the whole stream,
within 1e-3 (AAC's noise substitution draws from a generator a decoder started mid-stream does
not share; PCM is exact). Decoded samples are placed on the stream's sample grid (see
:class:`~vclip.AudioIndex`), where the container trims them (edit lists, pre-skip) trimmed, and
then FFmpeg's resampler (``av.AudioResampler``) turns them into the requested rate and channel
layout; its filter sees real samples on both sides of the span (a margin is decoded around it).
Time the stream does not cover (audio that starts after the clip, or ends before it) is silence.
"""

from __future__ import annotations

import math
from fractions import Fraction

import av
import numpy as np

from .._index.packets import read_packets
from ..errors import CorruptVideoError, UnsupportedCodecError, os_reason
from .record import AudioIndex

__all__ = ["decode_audio", "span_samples", "LAYOUTS"]

LAYOUTS = {1: "mono", 2: "stereo"}
"""Output channel layouts by channel count."""

_MARGIN = 64  # samples at the output rate decoded on each side of a span, for the resampler's filter
_JUMP_TICKS = 1.5  # packets this many ticks from where the samples before them end start a new run
_LOSSLESS = ("flac", "alac", "wavpack", "tta", "truehd", "mlp")
_SCALE = {"s16": 1 / 32768, "s32": 1 / 2147483648, "s64": 1 / 9223372036854775808}


def span_samples(seconds: float, sample_rate: int) -> int:
    """Samples at ``sample_rate`` whose times ``start + j / sample_rate`` fall in a span of ``seconds``."""
    return max(0, math.ceil(seconds * sample_rate - 1e-6))


def decode_audio(index: AudioIndex, start_seconds: float, end_seconds: float, *, sample_rate: int,
                 channels: int) -> np.ndarray:
    """The audio of ``[start_seconds, end_seconds)``, float32 ``[channels, S]`` in [-1, 1] (FFmpeg's
    downmix may exceed it), ``S = span_samples(end - start, sample_rate)``; silence where the stream
    has no audio.

    Raises:
        VideoError: The packets cannot be read back or decoded (naming the file).
    """
    count = span_samples(end_seconds - start_seconds, sample_rate)
    output = np.zeros((channels, count), dtype=np.float32)
    if count == 0 or index.num_packets == 0:
        return output
    rate = index.sample_rate
    origin = float(index.origin_seconds)
    margin = _MARGIN + math.ceil(_MARGIN * rate / sample_rate)
    first = math.floor((start_seconds - origin) * rate) - margin  # grid samples [first, end) are decoded
    end = math.ceil((end_seconds - origin) * rate) + margin
    # The output grid starts on an input sample: of the input samples within one output sample, the
    # one nearest to an output sample time makes the rounding below smallest.
    first = min(range(first - math.ceil(rate / sample_rate), first + 1),
                key=lambda candidate: _rounding((start_seconds - origin - candidate / rate) * sample_rate))
    numbers = _packets_between(index, first, end)
    if numbers.size == 0:
        return output
    native = _decode_grid(index, numbers, first, end)
    converted = _resample(native, index, sample_rate, channels)
    offset = round((start_seconds - (origin + first / rate)) * sample_rate)
    low, high = max(0, offset), min(converted.shape[1], offset + count)
    if high > low:
        output[:, low - offset:high - offset] = converted[:, low:high]
    return output


def _rounding(value: float) -> float:
    return abs(value - round(value))


def _packets_between(index: AudioIndex, first: int, end: int) -> np.ndarray:
    """Packets (file order) from the decoder's preroll before grid samples ``[first, end)`` to the
    last one decoding into them; empty when none does."""
    if index.grid_in_order:  # packets one after another on the grid: two binary searches
        low = int(np.searchsorted(index.packet_start + index.packet_samples, first, side="right"))
        high = int(np.searchsorted(index.packet_start, end, side="left")) - 1
        touching = np.arange(low, high + 1) if high >= low else np.zeros(0, dtype=np.int64)
    else:
        touching = np.flatnonzero((index.packet_start < end) & (index.packet_start + index.packet_samples > first))
    if touching.size == 0:
        return touching
    low, high = int(touching[0]), int(touching[-1])
    codec = index.codec
    if codec.startswith("pcm_") or codec in _LOSSLESS:
        preroll_packets, preroll_samples = 0, 0
    elif codec == "opus":  # RFC 7845 asks for 80 ms; FFmpeg's decoder was 0.07 off then, 1e-4 after 250 ms
        preroll_packets, preroll_samples = 1, round(0.25 * index.sample_rate)
    else:
        preroll_packets, preroll_samples = (3 if codec in ("mp3", "mp2", "mp1") else 2), 0
    low = max(0, low - preroll_packets)
    while low > 0 and index.packet_start[low] > index.packet_start[touching[0]] - preroll_samples:
        low -= 1
    return np.arange(low, high + 1, dtype=np.int64)


def _decoder(index: AudioIndex) -> av.AudioCodecContext:
    """A decoder for the stream from the index's facts (no container is opened)."""
    try:
        context = av.CodecContext.create(index.codec, "r")
    except (av.error.FFmpegError, ValueError) as error:
        raise CorruptVideoError(index.path, f"no decoder for its audio codec {index.codec!r} ({error})") from None
    if not isinstance(context, av.AudioCodecContext):
        raise CorruptVideoError(index.path, f"stream {index.stream_index} is not an audio stream")
    context.extradata = index.extradata or None
    context.sample_rate = index.sample_rate
    context.layout = index.layout or f"{index.channels} channels"
    context.thread_type, context.thread_count = "SLICE", 1
    return context


def _decode_grid(index: AudioIndex, numbers: np.ndarray, first: int, end: int) -> np.ndarray:
    """Decode packets ``numbers`` and place their shown samples on grid samples ``[first, end)``:
    float32 ``[index.channels, end - first]``, zeros where nothing is shown."""
    grid = np.zeros((index.channels, end - first), dtype=np.float32)
    starts, counts = index.packet_start[numbers], index.packet_samples[numbers]
    shown_first = starts + index.packet_skip_start[numbers]
    shown_end = np.where(index.packet_is_discard[numbers], shown_first,
                         np.maximum(shown_first, starts + counts - index.packet_skip_end[numbers]))
    shown = {number: (int(low), int(high)) for number, low, high in zip(numbers.tolist(), shown_first, shown_end)}
    packet_of_pts: dict[int, int] = {}
    for number in numbers.tolist():
        packet_of_pts.setdefault(int(index.packet_pts[number]), number)
    cursor: int | None = None  # the grid sample after the last frame placed
    # where packets sit to within their timestamps' precision only, decoded samples follow each other
    slack = -1 if index.exact_grid else math.ceil(_JUMP_TICKS * float(index.time_base) * index.sample_rate)

    def place(frame: av.AudioFrame) -> None:
        nonlocal cursor
        number = packet_of_pts.get(frame.pts) if frame.pts is not None else None
        samples = frame.samples
        if frame.sample_rate != index.sample_rate or len(frame.layout.channels) != index.channels:
            raise CorruptVideoError(
                index.path, f"its audio decodes to {frame.sample_rate} Hz, {len(frame.layout.channels)} channels "
                f"where the stream header says {index.sample_rate} Hz, {index.channels} channels"
            )
        if number is not None and cursor is not None and abs(int(index.packet_start[number]) - cursor) <= slack:
            at = cursor  # timed by the samples before it
            low = at + int(index.packet_skip_start[number])
            high = low if index.packet_is_discard[number] else at + samples - int(index.packet_skip_end[number])
        elif number is not None:
            expected = int(index.packet_samples[number])
            at = int(index.packet_start[number]) + (expected - samples if 0 < samples < expected else 0)
            low, high = shown[number]
            if not index.exact_grid:
                high = low if index.packet_is_discard[number] else at + samples - int(index.packet_skip_end[number])
        elif cursor is not None:  # a frame the decoder did not time by a packet: right after the last one
            at, low, high = cursor, cursor, cursor + samples
        else:
            return
        cursor = at + samples
        low, high = max(low, at, first), min(high, at + samples, end)
        if high > low:
            _copy_samples(frame, low - at, grid[:, low - first:high - first])

    context = _decoder(index)
    try:
        for number, payload in zip(numbers.tolist(), read_packets(index, numbers)):
            packet = av.Packet(len(payload))  # FFmpeg's own allocation: zeroed padding after the data
            packet.update(payload)
            packet.pts = int(index.packet_pts[number])
            for frame in context.decode(packet):
                place(frame)
        for frame in context.decode(None):
            place(frame)
    except av.error.FFmpegError as error:
        raise CorruptVideoError(index.path, f"its audio could not be decoded ({os_reason(error)})") from None
    return grid


def _copy_samples(frame: av.AudioFrame, offset: int, target: np.ndarray) -> None:
    """Samples ``offset:`` of a decoded frame into ``target`` (float32 ``[channels, n]``), in [-1, 1]."""
    count = target.shape[1]
    if frame.format.name == "fltp":  # what AAC, Opus, MP3... decode to: one plane per channel, no copy
        for channel, plane in enumerate(frame.planes):
            target[channel] = np.frombuffer(plane, np.float32, count=count, offset=4 * offset)  # type: ignore[call-overload]
        return
    target[...] = _planar_float(frame)[:, offset:offset + count]


def _planar_float(frame: av.AudioFrame) -> np.ndarray:
    """A decoded frame's samples as float32 ``[channels, samples]`` in [-1, 1]."""
    array = frame.to_ndarray()
    if not frame.format.is_planar:
        array = array.reshape(-1, len(frame.layout.channels)).T
    name = frame.format.name.rstrip("p")
    if name in ("flt", "dbl"):
        return array.astype(np.float32, copy=False)
    if name == "u8":
        return (array.astype(np.float32) - 128) / 128
    return (array * _SCALE[name]).astype(np.float32)


def _resample(native: np.ndarray, index: AudioIndex, sample_rate: int, channels: int) -> np.ndarray:
    """``native`` (on the stream's grid, from its first sample) at ``sample_rate`` in ``LAYOUTS[channels]``,
    sample 0 at the same time; FFmpeg's resampler, or the samples themselves when nothing changes.

    Raises:
        UnsupportedCodecError: The stream's channels are in no layout FFmpeg can downmix (9 channels
            in no named order, say).
    """
    layout = index.layout if not index.layout.endswith(" channels") else LAYOUTS.get(index.channels, index.layout)
    if sample_rate == index.sample_rate and layout == LAYOUTS[channels]:
        return native
    try:
        # Interleaved (one plane): PyAV fills the planes of a planar frame of 8 channels or more wrongly.
        frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(native.T).reshape(1, -1), format="flt", layout=layout)
        frame.sample_rate = index.sample_rate
        frame.pts, frame.time_base = 0, Fraction(1, index.sample_rate)
        resampler = av.AudioResampler(format="fltp", layout=LAYOUTS[channels], rate=sample_rate)
        frames = resampler.resample(frame) + resampler.resample(None)
    except (av.error.FFmpegError, ValueError) as error:
        raise UnsupportedCodecError(index.path, f"its audio's {index.channels} channels ({index.layout}) cannot be "
                                                f"mixed to {LAYOUTS[channels]} ({os_reason(error)})") from None
    if not frames:
        return np.zeros((channels, 0), dtype=np.float32)
    return np.concatenate([out.to_ndarray() for out in frames], axis=1)
