"""Barcode-stamped test videos and their audio: the frames, the encoder settings, reading a frame's
number back."""


from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import av
import numpy as np

from ..errors import ArgumentError

BARCODE_BITS = 12
_BOX_COLORS = ((230, 60, 40), (40, 200, 70), (50, 90, 230))


def _band_height(height: int) -> int:
    return max(4, math.ceil(height / 8))


def _texture(width: int, height: int, rng: np.random.Generator) -> np.ndarray:
    """Fractal noise: value noise at scales 64/16/4/1 px (bilinear between grid points), amplitudes
    90/50/25/12 around 128 (uint8 RGB)."""
    texture = np.full((height, width, 3), 128.0, dtype=np.float32)
    for scale, amplitude in ((64, 90), (16, 50), (4, 25), (1, 12)):
        grid = rng.uniform(-1.0, 1.0, size=(height // scale + 2, width // scale + 2, 3)).astype(np.float32)
        rows = np.arange(height) / scale
        columns = np.arange(width) / scale
        top, left = rows.astype(np.int64), columns.astype(np.int64)
        down = (rows - top)[:, None, None]
        right = (columns - left)[None, :, None]
        upper = grid[top][:, left] * (1 - right) + grid[top][:, left + 1] * right
        lower = grid[top + 1][:, left] * (1 - right) + grid[top + 1][:, left + 1] * right
        texture += amplitude * (upper * (1 - down) + lower * down)
    return np.clip(texture, 0, 255).astype(np.uint8)


def _draw_barcode(frame: np.ndarray, index: int) -> None:
    height, width = frame.shape[:2]
    band = _band_height(height)
    for bit in range(BARCODE_BITS):
        left = round(bit * width / BARCODE_BITS)
        right = round((bit + 1) * width / BARCODE_BITS)
        on = (index >> (BARCODE_BITS - 1 - bit)) & 1
        frame[:band, left:right] = 235 if on else 16


def render_frame(index: int, texture: np.ndarray, width: int, height: int, num_frames: int) -> np.ndarray:
    """Frame ``index`` of a synthetic video (uint8 RGB ``[height, width, 3]``)."""
    travel_x, travel_y = texture.shape[1] - width, texture.shape[0] - height
    phase = index / max(num_frames - 1, 1)
    x0 = int(travel_x * phase)
    y0 = int(travel_y * (0.5 + 0.5 * math.sin(2 * math.pi * phase)))
    frame = texture[y0:y0 + height, x0:x0 + width].copy()
    box_w, box_h = min(60, width // 3), min(40, height // 3)
    for k, color in enumerate(_BOX_COLORS):
        bx = int((width - box_w) * (0.5 + 0.5 * math.sin(0.11 * index * (k + 1) + k)))
        by = int((height - box_h) * (0.5 + 0.5 * math.cos(0.07 * index * (k + 2) + 2 * k)))
        frame[by:by + box_h, bx:bx + box_w] = color
    _draw_barcode(frame, index)
    return frame


def make_video(
    path: str | os.PathLike,
    *,
    num_frames: int = 60,
    width: int = 320,
    height: int = 240,
    fps: int = 30,
    codec: str = "libx264",
    pixel_format: str = "yuv420p",
    keyframe_interval: int = 60,
    b_frames: int = 2,
    crf: int = 23,
    preset: str = "veryfast",
    adaptive_b_frames: bool = True,
    frame_pts: Sequence[int] | None = None,
    time_base: Fraction | None = None,
    seed: int = 0,
    encoder_options: Mapping[str, str] | None = None,
    audio_codec: str | None = None,
    audio_sample_rate: int = 48000,
    audio_channels: int = 2,
    audio_offset_seconds: float = 0.0,
    audio_seconds: float | None = None,
    audio_chunk_seconds: float | None = None,
) -> str:
    """Encode a barcode-stamped synthetic video with PyAV and return its path.

    With ``audio_codec``, the file also holds an audio track of :func:`audio_signal` (the same on
    every channel): the audio that goes with the frame shown ``t`` seconds after the first frame
    is ``audio_signal(t)``, so tests can tell to the sample which audio came out.

    Args:
        path: Output file; the container follows the extension (.mp4, .mkv...).
        num_frames, width, height, fps: Frame count, size and nominal rate.
        codec: ``"libx264"``, ``"libx265"``, ``"mpeg4"``... (``"mpeg4"`` allows odd sizes).
        pixel_format: Encoder pixel format (``"yuv420p"``, ``"yuv420p10le"``, ``"yuvj420p"``...).
        keyframe_interval: Frames between keyframes (scene-cut keyframes are off).
        b_frames: Consecutive B-frames.
        crf, preset: x264/x265 rate control and speed.
        adaptive_b_frames: Let x264 choose where B-frames go (its default); False puts
            ``b_frames`` B-frames between all reference frames (x264 ``b-adapt=0``).
        frame_pts: Presentation timestamps in ``time_base`` ticks (for variable frame rate or a
            first pts other than 0); default ``0, 1, 2...`` at ``1/fps``.
        time_base: Tick length for ``frame_pts``; default ``1/fps``.
        seed: Texture seed.
        encoder_options: More FFmpeg encoder options, added last (e.g. ``{"deadline": "realtime"}``
            for a quick VP9 encode).
        audio_codec: FFmpeg audio encoder (``"aac"``, ``"libopus"``, ``"pcm_s16le"``...), or None
            (default) for a video without audio.
        audio_sample_rate, audio_channels: Of the audio track (1 or 2 channels).
        audio_offset_seconds: When the audio starts, in seconds after the first frame (negative:
            before it; the frames then start that much after the file's start).
        audio_seconds: Length of the audio; default: from its start to the end of the last frame.
        audio_chunk_seconds: Irregular interleaving: the audio is handed to the muxer in chunks of
            this many seconds, each after the frames it covers (the file then stores it in such
            chunks); default: interleaved by time.
    """
    path = os.fspath(path)
    rng = np.random.default_rng(seed)
    texture = _texture(2 * width, 2 * height, rng)
    time_base = time_base or Fraction(1, fps)
    pts = list(frame_pts) if frame_pts is not None else list(range(num_frames))
    if len(pts) != num_frames:
        raise ArgumentError(f"frame_pts has {len(pts)} values for {num_frames} frames")
    first_frame = pts[0] * time_base
    audio_start = first_frame + Fraction(audio_offset_seconds).limit_denominator(10**6)
    if audio_codec is not None and audio_start < 0:  # the frames move later, the audio starts the file
        shift = math.ceil(-audio_start / time_base)
        pts = [value + shift for value in pts]
        first_frame, audio_start = first_frame + shift * time_base, audio_start + shift * time_base
    frame_end = (pts[-1] + (pts[-1] - pts[-2] if num_frames > 1 else 1)) * time_base
    options = {"max_interleave_delta": "1"} if audio_chunk_seconds else {}
    if audio_codec is not None and path.lower().endswith((".mp4", ".mov", ".m4v")):
        options["movie_timescale"] = str(audio_sample_rate)  # edit lists to the sample, not the millisecond
    with av.open(path, "w", options=options) as container:
        stream = _add_video_stream(container, codec, fps, width, height, pixel_format, time_base, keyframe_interval,
                                   b_frames, crf, preset, adaptive_b_frames, encoder_options)
        events: list[tuple[Fraction, int, Any]] = [
            (value * time_base, 1, number) for number, value in enumerate(pts)
        ]
        audio = None
        if audio_codec is not None:
            audio = _add_audio_stream(container, audio_codec, audio_sample_rate, audio_channels)
            length = Fraction(audio_seconds).limit_denominator(10**6) if audio_seconds is not None else (
                frame_end - audio_start)
            events += _audio_events(audio, audio_start, first_frame, length, audio_sample_rate, audio_channels,
                                    audio_chunk_seconds)
        for _, kind, item in sorted(events, key=lambda event: (event[0], event[1])):
            if kind == 1:
                frame = av.VideoFrame.from_ndarray(render_frame(item, texture, width, height, num_frames),
                                                   format="rgb24")
                frame.pts = pts[item]
                frame.time_base = time_base
                container.mux(stream.encode(frame))
            else:
                container.mux(audio.encode(item))  # type: ignore[union-attr]  # set with audio events
        container.mux(stream.encode(None))
        if audio is not None:
            container.mux(audio.encode(None))
    return path


def _add_video_stream(container, codec: str, fps: int, width: int, height: int, pixel_format: str,
                      time_base: Fraction, keyframe_interval: int, b_frames: int, crf: int, preset: str,
                      adaptive_b_frames: bool, encoder_options: Mapping[str, str] | None):
    stream = container.add_stream(codec, rate=fps)
    if not isinstance(stream, av.VideoStream):
        raise ArgumentError(f"{codec!r} is not a video codec")
    stream.width, stream.height, stream.pix_fmt = width, height, pixel_format
    stream.time_base = time_base
    stream.codec_context.time_base = time_base
    if codec == "libx264":
        stream.options = {
            "preset": preset, "crf": str(crf), "bf": str(b_frames), "g": str(keyframe_interval),
            "keyint_min": str(keyframe_interval), "sc_threshold": "0",
        }
        if not adaptive_b_frames:
            stream.options["x264-params"] = "b-adapt=0"
    elif codec == "libx265":
        stream.options = {
            "preset": preset, "crf": str(crf),
            "x265-params": f"keyint={keyframe_interval}:min-keyint={keyframe_interval}:bframes={b_frames}"
                           ":scenecut=0:log-level=error",
        }
    else:
        stream.codec_context.gop_size = keyframe_interval
        stream.codec_context.max_b_frames = b_frames
    if encoder_options:
        stream.options = {**stream.options, **encoder_options}
    return stream


# --- Audio that tells the time -----------------------------------------------------------------

AUDIO_STEP_SECONDS = Fraction(1, 30)
""":func:`audio_signal` changes its pitch every this many seconds."""
_AUDIO_FREQUENCIES = 300 + 50 * np.arange(12)  # Hz, in turn, one per step


def audio_signal(seconds) -> np.ndarray:
    """The synthetic audio at these times (seconds after the first frame, any shape, float64).

    A tone of amplitude 0.5 whose pitch steps every :data:`AUDIO_STEP_SECONDS` through 300, 350,
    ..., 850 Hz and round again, its phase continuous: no two stretches of a few milliseconds
    look alike, so where a clip's audio lies in time can be found to a fraction of a sample.
    """
    t = np.asarray(seconds, dtype=np.float64)
    step = float(AUDIO_STEP_SECONDS)
    number = np.floor(t / step)
    rounds, within = np.divmod(number, 12)
    # cycles before step k: step * (300 k + 50 * (66 * rounds + within * (within - 1) / 2)), for any integer k
    cycles = step * (300 * number + 50 * (66 * rounds + within * (within - 1) / 2))
    frequency = _AUDIO_FREQUENCIES[within.astype(np.int64)]
    return 0.5 * np.sin(2 * np.pi * (cycles + frequency * (t - number * step)))


_AUDIO_FORMATS = {"aac": "fltp", "libopus": "flt", "opus": "flt", "flac": "s16", "mp3": "fltp", "libmp3lame": "fltp"}


def _add_audio_stream(container, codec: str, sample_rate: int, channels: int):
    if channels not in (1, 2):
        raise ArgumentError(f"audio_channels ({channels}) must be 1 or 2")
    stream = container.add_stream(codec, rate=sample_rate)
    if not isinstance(stream, av.AudioStream):
        raise ArgumentError(f"{codec!r} is not an audio codec")
    stream.layout = "mono" if channels == 1 else "stereo"
    stream.format = _AUDIO_FORMATS.get(codec, "s16")
    stream.time_base = Fraction(1, sample_rate)
    return stream


def _audio_events(stream, start: Fraction, first_frame: Fraction, length: Fraction, sample_rate: int,
                  channels: int, chunk_seconds: float | None) -> list[tuple[Fraction, int, Any]]:
    """The audio frames of :func:`audio_signal` from ``start`` for ``length`` seconds, each with the
    time at which it is handed to the muxer."""
    frame_size = {"aac": 1024, "libopus": 960 * sample_rate // 48000}.get(stream.codec_context.name, 1024)
    first, total = round(start * sample_rate), round(length * sample_rate)
    packed = stream.format.name in ("flt", "s16")
    events = []
    for offset in range(0, total, frame_size):
        count = min(frame_size, total - offset)
        seconds = (first + offset + np.arange(count)) / sample_rate - float(first_frame)
        samples = np.repeat(audio_signal(seconds)[None].astype(np.float32), channels, axis=0)
        if stream.format.name.startswith("s16"):
            samples = np.round(samples * 32767).astype(np.int16)
        frame = av.AudioFrame.from_ndarray(samples.T.reshape(1, -1).copy() if packed else samples,
                                           format=stream.format.name, layout=stream.layout.name)
        frame.sample_rate, frame.pts, frame.time_base = sample_rate, first + offset, Fraction(1, sample_rate)
        when = Fraction(first + offset, sample_rate)
        if chunk_seconds:
            chunk = Fraction(chunk_seconds).limit_denominator(10**6)
            when = (math.floor(when / chunk) + 1) * chunk  # after the frames of its chunk
        events.append((when, 0, frame))
    return events


def read_barcode(frame: np.ndarray, *, flipped: bool = False) -> int:
    """The frame index stamped into a decoded RGB frame ``[H, W, 3]`` (any size, uint8 or float).

    Args:
        frame: RGB image, channel last.
        flipped: The frame was mirrored left-right.
    """
    image = np.asarray(frame, dtype=np.float64)
    if image.max() <= 1.5:  # float in [0, 1]
        image = image * 255.0
    gray = image.mean(axis=-1)
    height, width = gray.shape
    band = height / 8.0
    rows = slice(int(band * 0.3), max(int(band * 0.3) + 1, int(band * 0.7)))
    value = 0
    for bit in range(BARCODE_BITS):
        left = (bit + 0.3) * width / BARCODE_BITS
        right = (bit + 0.7) * width / BARCODE_BITS
        columns = slice(int(left), max(int(left) + 1, int(right)))
        cell = gray[rows, columns]
        if flipped:
            cell = gray[rows, width - columns.stop:width - columns.start]
        value = (value << 1) | int(cell.mean() > 125.0)
    return value
