"""NumPy twin of ``kernels/nv12_transform.cu``: the same math in float64, the kernel's reference.

This is the definition, in one code path: every output sample is its taps' weighted sum. The CPU
path converts frames with it, through the quicker forms of :mod:`vclip._engine.host_fast` where a
geometry allows (the same weights, summed otherwise), so CPU and GPU results agree within rounding.

The model: chroma is upsampled to full size by repeating each sample over its 2x2 luma block (as
FFmpeg's rgb24 conversion does at native size); each plane is resampled to the output grid with
the same separable weights, at the stored-picture coordinates that the display orientation maps
each output pixel to. Each output pixel covers an interval of the source along each axis (the
frame's window, :func:`source_windows`); the weights are the area average of the covered samples
when shrinking with antialias, a triangle filter as wide as the interval (torchvision's
antialiased bilinear) when asked for, else bilinear with pixel centres aligned. The colour
matrix and range then turn YUV into RGB in [0, 1], clamped; the colour adjustments of the sample
apply in order (brightness, contrast, saturation and hue as torchvision's float functions, then
grayscale; contrast blends with the mean grayscale of the whole output frame); then
``out = rgb * scale + bias`` per channel (uint8 rounds ``rgb * 255`` half up, bfloat16 rounds to
nearest even from float32 and is stored as its uint16 bit pattern).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from ..transforms import GRAY_WEIGHTS, NO_COLOR_CHANGE, ColorAdjustment, FrameGeometry

__all__ = [
    "color_coefficients", "source_windows", "window_taps", "frame_taps", "resample_mode", "resample", "resample_rows",
    "resample_columns", "adjust_colors", "yuv420_to_rgb_tensor", "planes_to_rgb_tensor", "bfloat16_bits",
    "RESAMPLE_BILINEAR", "RESAMPLE_AREA", "RESAMPLE_TRIANGLE", "AxisWindow",
]

_KR_KB = {"bt601": (0.299, 0.114), "bt709": (0.2126, 0.0722), "bt2020": (0.2627, 0.0593), "smpte240m": (0.212, 0.087)}

# How an axis is resampled when it shrinks (the kernel's TransformParams.filter): bilinear
# (aliases), area average, or the triangle filter of torchvision's antialiased bilinear.
RESAMPLE_BILINEAR, RESAMPLE_AREA, RESAMPLE_TRIANGLE = 0, 1, 2


def resample_mode(antialias: bool, interpolation: str) -> int:
    """The resampling of a spec's ``antialias`` and ``interpolation``."""
    if not antialias:
        return RESAMPLE_BILINEAR
    return RESAMPLE_TRIANGLE if interpolation == "bilinear" else RESAMPLE_AREA


@functools.lru_cache(maxsize=64)
def color_coefficients(matrix: str, color_range: str, bit_depth: int) -> np.ndarray:
    """``[y_offset, y_scale, c_offset, c_scale, r_cr, g_cb, g_cr, b_cb]`` (float64).

    With ``Y = (y - y_offset) * y_scale`` and ``Cb, Cr = (c - c_offset) * c_scale``:
    ``R = Y + r_cr*Cr``, ``G = Y + g_cb*Cb + g_cr*Cr``, ``B = Y + b_cb*Cb``, all in [0, 1].
    """
    kr, kb = _KR_KB[matrix]
    kg = 1.0 - kr - kb
    unit = float(1 << (bit_depth - 8))
    if color_range == "full":
        peak = float((1 << bit_depth) - 1)
        y_offset, y_scale, c_scale = 0.0, 1.0 / peak, 1.0 / peak
    else:
        y_offset, y_scale, c_scale = 16.0 * unit, 1.0 / (219.0 * unit), 1.0 / (224.0 * unit)
    c_offset = 128.0 * unit
    coefficients = np.array([
        y_offset, y_scale, c_offset, c_scale,
        2.0 * (1.0 - kr),
        -2.0 * kb * (1.0 - kb) / kg,
        -2.0 * kr * (1.0 - kr) / kg,
        2.0 * (1.0 - kb),
    ])
    coefficients.setflags(write=False)  # shared by the cache
    return coefficients


class AxisWindow(NamedTuple):
    """What one stored axis of the source gives the output's ``outputs`` samples along it: output
    sample ``k`` (``k`` counted backwards when ``reverse``) covers the source interval
    ``[origin + k*step, origin + (k+1)*step)``; only samples ``low .. high-1`` are read."""

    origin: float
    step: float
    outputs: int
    reverse: bool
    low: int
    high: int


def source_windows(geometry: FrameGeometry) -> tuple[AxisWindow, AxisWindow]:
    """The windows of the stored x and y axes of the source for ``geometry``.

    The output window (in the displayed resized picture) is mapped to the stored resized picture
    (axes swapped when the orientation transposes, mirrored where it mirrors, the flip reversing
    the axis that shows as the output's x), then to source pixels.
    """
    g = geometry
    transpose = g.orientation.transpose
    displayed = ((g.crop_x, g.crop_width, g.output_width, g.flip), (g.crop_y, g.crop_height, g.output_height, False))
    along_x, along_y = (displayed[1], displayed[0]) if transpose else displayed
    resized_width, resized_height = g.stored_resized_size
    windows = []
    for (start, length, count, flipped), resized, source, mirror in (
        (along_x, resized_width, g.source_width, g.orientation.mirror_x),
        (along_y, resized_height, g.source_height, g.orientation.mirror_y),
    ):
        if mirror:
            start = resized - start - length
        scale = source / resized
        origin = start * scale
        low, high = 0, source
        if g.crop_before_resize:
            low = max(0, math.floor(origin))
            high = min(source, math.ceil((start + length) * scale))
        windows.append(AxisWindow(origin, scale * (length / count), count, bool(mirror) != flipped, low, high))
    return windows[0], windows[1]


def window_taps(window: AxisWindow, mode: int) -> tuple[np.ndarray, np.ndarray]:
    """Source sample indices and weights ``[window.outputs, taps]`` of one axis (zero weights pad)."""
    positions = np.arange(window.outputs, dtype=np.float64)
    if window.reverse:
        positions = positions[::-1]
    step, low_bound, high_bound = window.step, window.low, window.high
    if step > 1.0 and mode == RESAMPLE_AREA:
        low = np.maximum(window.origin + positions * step, low_bound)
        high = np.minimum(window.origin + (positions + 1) * step, high_bound)
        index = np.floor(low)[:, None] + np.arange(math.ceil(step) + 1)
        weight = np.clip(np.minimum(high[:, None], index + 1) - np.maximum(low[:, None], index), 0.0, None) / step
    elif step > 1.0 and mode == RESAMPLE_TRIANGLE:
        center = window.origin + (positions + 0.5) * step
        first = np.maximum(np.floor(center - step + 0.5), low_bound)
        end = np.minimum(np.floor(center + step + 0.5), high_bound)
        index = first[:, None] + np.arange(math.ceil(2 * step) + 2)
        weight = np.maximum(0.0, 1.0 - np.abs(index + 0.5 - center[:, None]) / step)
        weight[index >= end[:, None]] = 0.0
        weight /= weight.sum(axis=1, keepdims=True)
    else:
        position = np.clip(window.origin + (positions + 0.5) * step - 0.5, low_bound, high_bound - 1)
        left = np.floor(position)
        fraction = position - left
        index = np.stack([left, np.minimum(left + 1, high_bound - 1)], axis=1)
        weight = np.stack([1.0 - fraction, fraction], axis=1)
    weight[index >= high_bound] = 0.0
    return np.clip(index, low_bound, high_bound - 1).astype(np.int64), weight


def resample(plane: np.ndarray, rows: tuple[np.ndarray, np.ndarray], columns: tuple[np.ndarray, np.ndarray],
             subsampling: int = 1) -> np.ndarray:
    """``plane`` resampled at full-resolution taps (:func:`window_taps` of its rows and columns),
    float64; a plane ``subsampling`` times smaller is read at ``index // subsampling`` (each of its
    samples stands for a square of full-resolution pixels)."""
    return resample_columns(resample_rows(plane, rows, subsampling), columns, subsampling)


def resample_rows(plane: np.ndarray, rows: tuple[np.ndarray, np.ndarray], subsampling: int = 1) -> np.ndarray:
    """The vertical pass of :func:`resample`: ``[output rows, plane width]``, float64."""
    row_index, row_weight = rows
    return np.einsum("ok,okw->ow", row_weight, plane[row_index // subsampling].astype(np.float64))


def resample_columns(vertical: np.ndarray, columns: tuple[np.ndarray, np.ndarray], subsampling: int = 1) -> np.ndarray:
    """The horizontal pass of :func:`resample`, of its vertical pass ``vertical``: ``[output rows, output columns]``."""
    column_index, column_weight = columns
    return np.einsum("pk,opk->op", column_weight, vertical[:, column_index // subsampling])


def _gray(rgb: np.ndarray) -> np.ndarray:
    return rgb @ np.asarray(GRAY_WEIGHTS)


def _turn_hue(rgb: np.ndarray, turn: float) -> np.ndarray:
    """The hue of every pixel turned by ``turn`` of a full circle (HSV; saturation and value kept)."""
    value = rgb.max(axis=-1)
    spread = value - rgb.min(axis=-1)
    gray = spread == 0
    saturation = np.where(gray, 0.0, spread / np.where(value == 0, 1.0, value))
    red, green, blue = np.moveaxis(rgb, -1, 0)
    divisor = np.where(gray, 1.0, spread)
    sector = np.where(value == red, (green - blue) / divisor,
                      np.where(value == green, 2.0 + (blue - red) / divisor, 4.0 + (red - green) / divisor))
    hue = np.mod(np.mod(sector / 6.0 + 1.0, 1.0) + turn, 1.0)
    scaled = hue * 6.0
    part = np.floor(scaled)
    fraction = scaled - part
    part = np.mod(part, 6).astype(np.int64)
    low = value * (1.0 - saturation)
    falling = value * (1.0 - saturation * fraction)
    rising = value * (1.0 - saturation * (1.0 - fraction))
    # (R, G, B) of each of the six sectors of the hue circle
    table = np.stack([
        np.stack([value, rising, low], -1), np.stack([falling, value, low], -1), np.stack([low, value, rising], -1),
        np.stack([low, falling, value], -1), np.stack([rising, low, value], -1), np.stack([value, low, falling], -1),
    ])
    return np.take_along_axis(table, part[None, ..., None], axis=0)[0]


def adjust_colors(rgb: np.ndarray, color: ColorAdjustment) -> np.ndarray:
    """``color``'s adjustments applied in order to one frame ``[H, W, 3]`` of RGB in [0, 1] (float64)."""
    for operation in color.operations:
        if operation == "brightness":
            rgb = np.clip(rgb * color.brightness, 0.0, 1.0)
        elif operation == "contrast":
            rgb = np.clip(color.contrast * rgb + (1.0 - color.contrast) * _gray(rgb).mean(), 0.0, 1.0)
        elif operation == "saturation":
            rgb = np.clip(color.saturation * rgb + (1.0 - color.saturation) * _gray(rgb)[..., None], 0.0, 1.0)
        elif operation == "hue":
            rgb = _turn_hue(rgb, color.hue)
        else:
            rgb = np.repeat(_gray(rgb)[..., None], 3, axis=-1)
    return rgb


def bfloat16_bits(values: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (uint16) of ``values``: rounded to float32, then to nearest even."""
    bits = np.asarray(values, np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def yuv420_to_rgb_tensor(
    y: np.ndarray,
    u: np.ndarray,
    v: np.ndarray,
    *,
    bit_depth: int,
    matrix: str,
    color_range: str,
    geometry: FrameGeometry,
    scale: np.ndarray,
    bias: np.ndarray,
    dtype: str,
    antialias: bool = True,
    interpolation: str = "area",
    color: ColorAdjustment = NO_COLOR_CHANGE,
) -> np.ndarray:
    """One frame of 4:2:0 planes (integer codes, ``bit_depth`` bits) to ``[H, W, 3]`` in ``dtype``
    (bfloat16 as its uint16 bit patterns)."""
    height, width = y.shape
    rows, columns = frame_taps(height, width, geometry, resample_mode(antialias, interpolation))
    planes = [resample(plane, rows, columns, subsampling) for plane, subsampling in ((y, 1), (u, 2), (v, 2))]
    return planes_to_rgb_tensor(planes, bit_depth=bit_depth, matrix=matrix, color_range=color_range,
                                transpose=geometry.orientation.transpose, scale=scale, bias=bias, dtype=dtype,
                                color=color)


def planes_to_rgb_tensor(planes: list[np.ndarray], *, bit_depth: int, matrix: str, color_range: str, transpose: bool,
                         scale: np.ndarray, bias: np.ndarray, dtype: str,
                         color: ColorAdjustment = NO_COLOR_CHANGE) -> np.ndarray:
    """Resampled Y, Cb, Cr planes (float64 codes, stored axes) of one frame ``[H, W]`` to ``[H, W, 3]``
    in ``dtype``; of frames stacked ``[N, H, W]`` to ``[N, H, W, 3]`` when ``color`` changes nothing."""
    if transpose:  # [displayed column, displayed row] -> [row, column]
        planes = [np.swapaxes(plane, -1, -2) for plane in planes]
    y_offset, y_scale, c_offset, c_scale, r_cr, g_cb, g_cr, b_cb = color_coefficients(matrix, color_range, bit_depth)
    luma = (planes[0] - y_offset) * y_scale
    cb, cr = (planes[1] - c_offset) * c_scale, (planes[2] - c_offset) * c_scale
    rgb = np.clip(np.stack([luma + r_cr * cr, luma + g_cb * cb + g_cr * cr, luma + b_cb * cb], axis=-1), 0.0, 1.0)
    if color.operations:
        rgb = adjust_colors(rgb, color)
    values = rgb * np.asarray(scale, np.float64) + np.asarray(bias, np.float64)
    if dtype == "uint8":
        return np.floor(values + 0.5).astype(np.uint8)
    if dtype == "bfloat16":
        return bfloat16_bits(values)
    return values.astype(dtype)


@functools.lru_cache(maxsize=64)
def frame_taps(height: int, width: int, geometry: FrameGeometry, mode: int) -> tuple[tuple, tuple]:
    """The row and column taps of a ``height x width`` picture for ``geometry`` (the same for every
    frame of a clip: computed once)."""
    along_x, along_y = source_windows(geometry)
    row_taps = window_taps(along_y, mode)
    column_taps = window_taps(along_x, mode)
    for array in (*row_taps, *column_taps):
        array.setflags(write=False)  # shared by the cache
    return row_taps, column_taps
