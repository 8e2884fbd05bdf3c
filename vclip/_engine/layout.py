"""Axis orders of one clip (``THWC``, ``TCHW``, ``CTHW``): shapes, strides and frame views, in one place."""

from __future__ import annotations

from typing import Any, Literal

__all__ = ["LAYOUTS", "Layout", "clip_shape", "frame_strides", "frame_view"]

Layout = Literal["THWC", "TCHW", "CTHW"]
LAYOUTS: tuple[Layout, ...] = ("THWC", "TCHW", "CTHW")


def clip_shape(layout: str, frames: int, height: int, width: int, channels: int = 3) -> tuple[int, int, int, int]:
    """Shape of one clip of ``frames`` frames in ``layout``."""
    if layout == "THWC":
        return (frames, height, width, channels)
    if layout == "TCHW":
        return (frames, channels, height, width)
    if layout == "CTHW":
        return (channels, frames, height, width)
    raise ValueError(f"layout ({layout!r}) must be one of 'THWC', 'TCHW', 'CTHW'")


def frame_strides(layout: str, frames: int, height: int, width: int) -> tuple[int, tuple[int, int, int]]:
    """Elements between consecutive frames of a clip, and the (channel, row, column) strides."""
    if layout == "THWC":
        return height * width * 3, (1, width * 3, 3)
    if layout == "TCHW":
        return 3 * height * width, (height * width, width, 1)
    if layout == "CTHW":
        return height * width, (frames * height * width, width, 1)
    raise ValueError(f"layout ({layout!r}) must be one of 'THWC', 'TCHW', 'CTHW'")


def frame_view(clip: Any, layout: str, position: int) -> Any:
    """The ``[H, W, 3]`` view of frame ``position`` inside one clip array of ``layout``."""
    if layout == "THWC":
        return clip[position]
    if layout == "TCHW":
        return clip[position].transpose(1, 2, 0)
    return clip[:, position].transpose(1, 2, 0)
