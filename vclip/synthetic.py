"""Synthetic test videos whose frames carry their own index as a barcode.

Each frame is a window panned across a fractal-noise texture twice the frame size, with three
coloured boxes moving on sine paths, and a 12-bit barcode of the frame index across the top band
(one cell per bit, most significant first, white for 1). :func:`read_barcode` reads the index back
from any decoded RGB frame, at any size, so tests can tell exactly which frame came out.
"""

from __future__ import annotations

import math
import os
from fractions import Fraction
from typing import Sequence

import av
import numpy as np

__all__ = ["make_video", "read_barcode", "BARCODE_BITS"]

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
) -> str:
    """Encode a barcode-stamped synthetic video with PyAV and return its path.

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
    """
    path = os.fspath(path)
    rng = np.random.default_rng(seed)
    texture = _texture(2 * width, 2 * height, rng)
    time_base = time_base or Fraction(1, fps)
    pts = list(frame_pts) if frame_pts is not None else list(range(num_frames))
    if len(pts) != num_frames:
        raise ValueError(f"frame_pts has {len(pts)} values for {num_frames} frames")
    with av.open(path, "w") as container:
        stream = container.add_stream(codec, rate=fps)
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
        for i in range(num_frames):
            frame = av.VideoFrame.from_ndarray(render_frame(i, texture, width, height, num_frames), format="rgb24")
            frame.pts = pts[i]
            frame.time_base = time_base
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return path


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
