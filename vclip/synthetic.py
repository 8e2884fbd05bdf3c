"""Synthetic test videos whose frames carry their own index as a barcode, and whose audio tells the time.

Each frame is a window panned across a fractal-noise texture twice the frame size, with three
coloured boxes moving on sine paths, and a 12-bit barcode of the frame index across the top band
(one cell per bit, most significant first, white for 1). :func:`read_barcode` reads the index back
from any decoded RGB frame, at any size, so tests can tell exactly which frame came out. An audio
track (``make_video(audio_codec=...)``) carries :func:`audio_signal`, a tone whose pitch steps
every 1/30 s, so tests can tell to the sample which audio came out.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import av
import numpy as np

from .errors import fail

__all__ = [
    "make_video", "read_barcode", "audio_signal", "AUDIO_STEP_SECONDS", "BARCODE_BITS",
    "make_scene_video", "LabelledVideo", "LabelledEvent",
    "BOUNDARY_KINDS", "SCENE_VIDEO_CLASSES", "make_shots_video",
]

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
        raise ValueError(f"frame_pts has {len(pts)} values for {num_frames} frames")
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
        raise ValueError(f"{codec!r} is not a video codec")
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
        raise ValueError(f"audio_channels ({channels}) must be 1 or 2")
    stream = container.add_stream(codec, rate=sample_rate)
    if not isinstance(stream, av.AudioStream):
        raise ValueError(f"{codec!r} is not an audio codec")
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


# --- Labelled shot-boundary videos -------------------------------------------------------------

BOUNDARY_KINDS = ("cut", "dissolve", "fade")
SCENE_VIDEO_CLASSES = ("cuts", "dissolves", "fades", "motion", "flashes", "hard_motion")
_CRASH_ZOOM = 3.5  # how far a crash zoom of a "hard_motion" shot goes in


@dataclass(frozen=True)
class LabelledEvent:
    """Something that happens in a labelled video, frames ``start`` to ``end`` inclusive.

    Shot boundaries (``kind`` in :data:`BOUNDARY_KINDS`): ``end`` is the first frame that shows
    the new shot alone and ``start`` the first frame that is not the old shot alone, so a cut has
    ``start == end``, a dissolve's ``start..end-1`` are blends, and a fade's ``start..end-1``
    are the frames dimmed towards, at, and back from black. Events that are not boundaries:
    ``"flash"`` (a few overexposed frames) and ``"motion"`` (a fast pan, shake, zoom or large
    object crossing the frame, with motion blur; in ``"hard_motion"`` videos a whip pan, a crash
    zoom, hand-held shake or a large object crossing the frame fast).
    """

    kind: str
    start: int
    end: int

    @property
    def is_boundary(self) -> bool:
        return self.kind in BOUNDARY_KINDS


@dataclass(frozen=True)
class LabelledVideo:
    """A synthetic video and the ground truth of what happens in it."""

    path: str
    num_frames: int
    fps: int
    events: tuple[LabelledEvent, ...]

    @property
    def boundaries(self) -> tuple[LabelledEvent, ...]:
        """The shot boundaries (frame 0, the start of the first shot, is not one of them)."""
        return tuple(event for event in self.events if event.is_boundary)

    def score(self, found: Sequence[int], *, cut_tolerance: int = 2) -> dict[str, int]:
        """Count detections (frame numbers of new shots) against the labels.

        A cut is found by a detection within ``cut_tolerance`` frames of it; a dissolve or fade by
        one within its span (``start`` to ``end``). Each detection finds one boundary at most (the
        one whose new-shot frame it is nearest); the detections left over are false.

        Returns:
            ``true`` (boundaries found), ``missed`` (boundaries not found), ``false`` (detections
            that are no boundary).
        """
        unused = sorted({int(frame) for frame in found})
        hits = 0
        for boundary in self.boundaries:
            margin = cut_tolerance if boundary.kind == "cut" else 0
            inside = [frame for frame in unused if boundary.start - margin <= frame <= boundary.end + margin]
            if inside:
                unused.remove(min(inside, key=lambda frame: abs(frame - boundary.end)))
                hits += 1
        return {"true": hits, "missed": len(self.boundaries) - hits, "false": len(unused)}


def _tinted_texture(width: int, height: int, rng: np.random.Generator) -> np.ndarray:
    """:func:`_texture` with a palette of its own: its colours mixed by a random matrix, a random
    contrast, a random mean colour and a colour ramp across it (uint8 RGB)."""
    texture = _texture(width, height, rng).astype(np.float32) - 128.0
    mix = rng.uniform(-0.6, 0.6, size=(3, 3)) + np.eye(3) * rng.uniform(0.3, 1.2)
    base = rng.uniform(50, 200, size=3)
    ramp = rng.uniform(-60, 60, size=3)
    angle = rng.uniform(0, 2 * math.pi)
    ys, xs = np.mgrid[0:height, 0:width].astype(np.float32)
    along = (np.cos(angle) * xs / width + np.sin(angle) * ys / height)[..., None]
    look = (texture @ mix.T.astype(np.float32)) * rng.uniform(0.6, 1.3) + base + ramp * (along - 0.5)
    return np.clip(look, 0, 255).astype(np.uint8)


class _Shot:
    """One synthetic shot: a camera moving over a tinted noise texture with coloured boxes moving
    across it, rendered as float32 RGB (0-255) for any shot-local time, fractions included."""

    def __init__(self, rng: np.random.Generator, width: int, height: int, *, motion: str = "slow",
                 look: np.ndarray | None = None):
        self.width, self.height = width, height
        if look is None:  # a new place: texture, palette, brightness and contrast of its own
            look = _tinted_texture(3 * width, 3 * height, rng).astype(np.float32)
        self.look = look
        th, tw = look.shape[:2]
        self.x0, self.y0 = rng.uniform(0, tw), rng.uniform(0, th)
        self.zoom0 = rng.uniform(0.9, 1.4)
        self.motion = motion
        slow = rng.uniform(0.2, 1.5) * width / 160
        direction = rng.uniform(0, 2 * math.pi)
        self.vx, self.vy, self.zoom_rate = slow * math.cos(direction), slow * math.sin(direction), 0.0
        self.shake = 0.0
        self.big_box = None
        self.whip = None  # (time of the fastest frame, its pixels per frame, frames of the swing, direction)
        self.crash = None  # shot time of a crash zoom's middle
        if motion == "pan":
            fast = rng.uniform(0.06, 0.15) * width
            self.vx, self.vy = fast * math.cos(direction), 0.3 * fast * math.sin(direction)
        elif motion == "shake":
            self.shake = rng.uniform(0.04, 0.08) * width
        elif motion == "zoom":
            self.zoom_rate = rng.uniform(0.1, 0.15)  # zooming in and out: up to 2x either way
        elif motion == "object":
            self.big_box = (rng.uniform(0, 255, size=3), rng.uniform(0.07, 0.12) * width)
        elif motion == "whip":  # the camera swings several frame widths away in a few frames
            self.whip = (rng.uniform(10, 30), rng.uniform(0.35, 0.6) * width, rng.uniform(1.5, 3.0), direction)
        elif motion == "crash":  # a zoom of _CRASH_ZOOM x in a few frames
            self.crash = rng.uniform(10, 30)
        elif motion == "handheld":
            self.shake = rng.uniform(0.12, 0.2) * width
        elif motion == "crossing":  # a large object crossing the frame in 3 to 5 frames, back and forth
            self.big_box = (rng.uniform(0, 255, size=3), rng.uniform(0.2, 0.35) * width)
        self.seed = int(rng.integers(1 << 30))
        self.boxes = [(rng.uniform(0, 255, size=3), rng.uniform(0.1, 0.25), rng.uniform(0, 6)) for _ in range(2)]

    def render(self, t: float) -> np.ndarray:
        width, height = self.width, self.height
        th, tw = self.look.shape[:2]
        zoom = self.zoom0 * math.exp(math.log(2) * math.sin(self.zoom_rate * t))
        if self.crash is not None:
            zoom *= math.exp(math.log(_CRASH_ZOOM) / (1 + math.exp(-(t - self.crash) / 1.5)))
        swing_x = swing_y = 0.0
        if self.whip is not None:  # the distance covered by a bell-shaped speed over the swing
            middle, speed, frames, direction = self.whip
            moved = speed * frames * math.sqrt(math.pi / 2) * (1 + math.erf((t - middle) / (frames * math.sqrt(2))))
            swing_x, swing_y = moved * math.cos(direction), 0.3 * moved * math.sin(direction)
        jitter_x = jitter_y = 0.0
        if self.shake:
            whole = math.floor(t)
            here, after = (np.random.default_rng([self.seed, whole + k + 1000]).normal(size=2) for k in (0, 1))
            jitter_x, jitter_y = (here + (after - here) * (t - whole)) * self.shake
        cx = self.x0 + self.vx * t + jitter_x + swing_x
        cy = self.y0 + self.vy * t + jitter_y + swing_y
        rows = np.floor(cy + (np.arange(height) - height / 2) / zoom).astype(np.int64) % th
        columns = np.floor(cx + (np.arange(width) - width / 2) / zoom).astype(np.int64) % tw
        frame = self.look[rows][:, columns]
        box_w, box_h = max(2, width // 8), max(2, height // 6)
        for color, speed, phase in self.boxes:
            bx = int((width - box_w) * (0.5 + 0.5 * math.sin(speed * t + phase)))
            by = int((height - box_h) * (0.5 + 0.5 * math.cos(0.7 * speed * t + 2 * phase)))
            frame[by:by + box_h, bx:bx + box_w] = color
        if self.big_box is not None:  # a large object crossing the frame fast, back and forth
            color, speed = self.big_box
            size_w, size_h = width // 2, (2 * height) // 3
            span = width + size_w
            bx = int((speed * t) % (2 * span)) - size_w
            bx = bx if bx < width else 2 * width - bx
            left, right = max(0, bx), min(width, bx + size_w)
            if right > left:
                frame[height // 6:height // 6 + size_h, left:right] = color
        return frame

    def frame(self, t: float, *, blur: bool) -> np.ndarray:
        """The picture at shot time ``t``; ``blur``: averaged over the frame interval (motion blur)."""
        if not blur:
            return self.render(t)
        return np.mean([self.render(t - s) for s in (0.0, 0.25, 0.5, 0.75)], axis=0)


def _encode_rgb(path: str, frames: Iterable[np.ndarray], *, fps: int, keyframe_interval: int, crf: int = 20) -> str:
    """libx264 at a fixed keyframe interval, x264's own scene-cut keyframes off."""
    with av.open(path, "w") as container:
        stream = None
        for image in frames:
            if stream is None:
                stream = container.add_stream("libx264", rate=fps)
                stream.width, stream.height, stream.pix_fmt = image.shape[1], image.shape[0], "yuv420p"
                stream.options = {"preset": "veryfast", "crf": str(crf), "g": str(keyframe_interval),
                                  "keyint_min": str(keyframe_interval), "sc_threshold": "0"}
            container.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
        if stream is None:
            raise ValueError("no frames to encode")
        container.mux(stream.encode(None))
    return path


def make_scene_video(
    path: str | os.PathLike,
    kind: str,
    *,
    num_shots: int = 6,
    width: int = 192,
    height: int = 108,
    fps: int = 25,
    keyframe_interval: int = 250,
    seed: int = 0,
) -> LabelledVideo:
    """A video of ``num_shots`` synthetic shots with labelled shot boundaries of one class.

    ``kind``:

    - ``"cuts"``: hard cuts; shots of 8 to 60 frames; one in three new shots is the same place as
      the shot before (same texture and palette, another camera position), so only the picture's
      structure changes, not its colours.
    - ``"dissolves"``: cross-dissolves of 10 to 30 frames, both shots moving through them.
    - ``"fades"``: fade to black (6-20 frames), 0-8 black frames, fade from black (6-20 frames);
      one in three leaves out the fade-out (a cut to black) or the fade-in (a cut from black).
    - ``"motion"``: hard cuts between shots in fast motion (fast pans, shaky camera, fast zooms, a
      large object crossing the frame), all with motion blur; each shot's motion is an event.
    - ``"flashes"``: hard cuts between shots lit by 1-3 flashes each, 1-3 overexposed frames.
    - ``"hard_motion"``: as ``"motion"``, with the camera moves that fool detectors most: a whip
      pan (the camera swings several frame widths in a few frames, 0.35-0.6 of the width per frame
      at its fastest), a crash zoom (3.5x in about 6 frames), hand-held shake (12-20% of the width
      from frame to frame) and a large object crossing the frame in 3 to 5 frames, back and forth.

    Every frame carries its index as a barcode (:func:`read_barcode`). The shots pan slowly and
    their boxes move, so no two consecutive frames are identical.

    Returns:
        The path, frame count, frame rate and every event (boundaries and, for ``"motion"`` and
        ``"flashes"``, what is not a boundary).
    """
    if kind not in SCENE_VIDEO_CLASSES:
        raise fail("kind", kind, "one of " + ", ".join(map(repr, SCENE_VIDEO_CLASSES)))
    path = os.fspath(path)
    rng = np.random.default_rng([seed, SCENE_VIDEO_CLASSES.index(kind)])
    motions = {"motion": ("pan", "shake", "zoom", "object"), "hard_motion": ("whip", "handheld", "crash", "crossing")}
    shots: list[_Shot] = []
    for number in range(num_shots):
        moves = motions.get(kind)
        motion = moves[(number + seed) % len(moves)] if moves else "slow"
        same_place = kind == "cuts" and number > 0 and number % 3 == 2
        shots.append(_Shot(rng, width, height, motion=motion, look=shots[-1].look if same_place else None))
    frames: list[np.ndarray] = []
    events: list[LabelledEvent] = []
    blur = kind in motions
    origin = 0  # frame number of the current shot's time 0
    for number, shot in enumerate(shots):
        length = int(rng.integers(8, 61)) if kind == "cuts" else int(rng.integers(40, 71))
        lead_in = 0  # frames of this shot already shown by the transition into it
        if number > 0 and (kind in ("cuts", "flashes") or kind in motions):
            events.append(LabelledEvent("cut", len(frames), len(frames)))
        elif number > 0 and kind == "dissolves":
            lead_in = int(rng.integers(10, 31))
            start = len(frames) - lead_in  # the last frames of the shot before become the blends
            previous = shots[number - 1]
            for i in range(lead_in):
                alpha = (i + 1) / (lead_in + 1)
                old = previous.frame(start + i - origin, blur=blur)
                frames[start + i] = (1 - alpha) * old + alpha * shot.frame(i, blur=blur)
            events.append(LabelledEvent("dissolve", start, len(frames)))
        elif number > 0:  # fades
            variant = number % 3
            fade_out = 0 if variant == 2 else int(rng.integers(6, 21))
            lead_in = 0 if variant == 1 else int(rng.integers(6, 21))
            black = int(rng.integers(0, 9)) if fade_out and lead_in else int(rng.integers(2, 9))
            start = len(frames) - fade_out
            for i in range(fade_out):
                frames[start + i] = frames[start + i] * (1 - (i + 1) / (fade_out + 1))
            frames.extend(np.zeros((height, width, 3), np.float32) for _ in range(black))
            frames.extend(shot.frame(i, blur=blur) * ((i + 1) / (lead_in + 1)) for i in range(lead_in))
            events.append(LabelledEvent("fade", start, len(frames)))
        origin = len(frames) - lead_in
        body = [shot.frame(lead_in + i, blur=blur) for i in range(length)]
        first = len(frames)
        if kind in motions:
            events.append(LabelledEvent("motion", first, first + length - 1))
        if kind == "flashes":
            count = int(rng.integers(1, 4)) if length >= 30 else 1
            spots = np.arange(3, length - 8, 8)  # flashes at least 8 frames apart, not at the shot's ends
            places = rng.choice(spots, size=min(count, spots.size), replace=False)
            for place in sorted(places.tolist()):
                duration = int(rng.integers(1, 4))
                strength = rng.uniform(0.55, 0.9)
                for i in range(duration):
                    level = strength * 0.75 ** i
                    body[place + i] = body[place + i] * (1 - level) + 255.0 * level
                events.append(LabelledEvent("flash", first + place, first + place + duration - 1))
        frames.extend(body)
    images = []
    for index, frame in enumerate(frames):
        image = np.clip(frame, 0, 255).astype(np.uint8)
        _draw_barcode(image, index)
        images.append(image)
    _encode_rgb(path, images, fps=fps, keyframe_interval=keyframe_interval)
    return LabelledVideo(path, len(images), fps, tuple(sorted(events, key=lambda e: (e.start, e.end))))


def make_shots_video(
    path: str | os.PathLike,
    *,
    shot_lengths: Sequence[int] = (45, 52, 68, 35),
    dissolves: Sequence[int] | None = None,
    width: int = 320,
    height: int = 240,
    fps: int = 30,
    keyframe_interval: int = 60,
    seed: int = 1,
) -> str:
    """A synthetic video of several shots with cuts or dissolves between them (libx264, a keyframe
    every ``keyframe_interval`` frames wherever the shots change).

    Each shot pans a texture of its own colours (seeds ``seed``, ``seed + 1``...); every frame carries its
    index as a barcode (:func:`read_barcode`), counted across shots, so shot ``k``
    is shown alone from frame ``sum(shot_lengths[:k])``. ``dissolves[k - 1]`` frames before that
    (0: a cut) are blends of shot ``k - 1`` into shot ``k``, taken from the end of shot ``k - 1``.
    """
    total = sum(shot_lengths)
    dissolves = list(dissolves) if dissolves is not None else [0] * (len(shot_lengths) - 1)
    if len(dissolves) != len(shot_lengths) - 1:
        raise ValueError(f"dissolves has {len(dissolves)} values for {len(shot_lengths) - 1} boundaries")
    textures = [_tinted_texture(2 * width, 2 * height, np.random.default_rng(seed + shot))
                for shot in range(len(shot_lengths))]
    frames: list[np.ndarray] = []
    for shot, length in enumerate(shot_lengths):
        first = len(frames)
        frames.extend(render_frame(i, textures[shot], width, height, total) for i in range(first, first + length))
        blends = dissolves[shot - 1] if shot > 0 else 0
        for k in range(blends):  # the last frames of the shot before fade into this one
            i = first - blends + k
            alpha = (k + 1) / (blends + 1)
            incoming = render_frame(i, textures[shot], width, height, total).astype(np.float32)
            frames[i] = np.clip((1 - alpha) * frames[i] + alpha * incoming + 0.5, 0, 255).astype(np.uint8)
            _draw_barcode(frames[i], i)
    return _encode_rgb(os.fspath(path), frames, fps=fps, keyframe_interval=keyframe_interval)
