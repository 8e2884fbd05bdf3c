"""NumPy twin of ``kernels/nv12_transform.cu``: the same math in float64, the kernel's reference.

It is also the CPU path for transformed frames, so CPU and GPU results agree within rounding.

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
    "color_coefficients", "source_windows", "window_taps", "resample_mode", "adjust_colors", "yuv420_to_rgb_tensor",
    "bfloat16_bits", "RESAMPLE_BILINEAR", "RESAMPLE_AREA", "RESAMPLE_TRIANGLE", "AxisWindow", "Blocks",
    "window_blocks", "frame_blocks", "block_row_sums", "block_means", "planes_to_rgb_tensor",
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


def _resample(plane: np.ndarray, rows, columns, subsampling: int = 1, runs: RowRuns | None = None) -> np.ndarray:
    """Resample ``plane`` at full-resolution taps; a plane ``subsampling`` times smaller is read at
    ``index // subsampling`` (each of its samples stands for a square of full-resolution pixels).
    With ``runs`` (:func:`_row_runs` of ``rows``) the vertical pass sums runs of rows."""
    column_index, column_weight = columns
    if runs is None:
        row_index, row_weight = rows
        vertical = np.einsum("ok,okw->ow", row_weight, plane[row_index // subsampling].astype(np.float64))
    else:
        vertical = _sum_row_runs(plane, runs)
    return np.einsum("pk,opk->op", column_weight, vertical[:, column_index // subsampling])


class RowRuns(NamedTuple):
    """The vertical pass of a downscale, in a plane's own rows: output row ``k`` is ``weight[k]``
    times the exact sum of a run of plane rows that its taps weigh alike, plus its other rows
    ``edge_index[k]`` times ``edge_weight[k]`` (zero weights pad). The runs are gathered by length:
    each of ``groups`` is ``(outputs, rows)``, the rows ``[outputs, length]`` of those outputs' runs."""

    groups: tuple[tuple[np.ndarray, np.ndarray], ...]
    weight: np.ndarray
    edge_index: np.ndarray
    edge_weight: np.ndarray


_MIN_MEAN_RUN = 3  # rows per run below which gathering every tap is as quick


def _row_runs(rows: tuple[np.ndarray, np.ndarray], subsampling: int) -> RowRuns | None:
    """The :class:`RowRuns` of the row taps ``rows`` in a plane ``subsampling`` times smaller (the
    taps that read one of its rows merged), or None when its runs are too short to pay."""
    spans, weights, edges = [], [], []
    for indices, tap_weights in zip(*rows):
        merged: dict[int, float] = {}
        for index, weight in zip(indices.tolist(), tap_weights.tolist()):
            if weight > 0.0:
                merged[index // subsampling] = merged.get(index // subsampling, 0.0) + weight
        start, end = _longest_run(merged)
        spans.append((start, end))
        weights.append(merged[start] if end > start else 0.0)
        edges.append([(row, weight) for row, weight in merged.items() if not start <= row < end])
    lengths = np.array([end - start for start, end in spans])
    if lengths.sum() < _MIN_MEAN_RUN * len(spans):
        return None
    starts = np.array([start for start, _ in spans])
    groups = tuple((np.flatnonzero(lengths == length), starts[lengths == length, None] + np.arange(length))
                   for length in np.unique(lengths[lengths > 0]).tolist())
    edge_index = np.zeros((len(edges), max(map(len, edges), default=0)), np.int64)
    edge_weight = np.zeros(edge_index.shape)
    for output, taps in enumerate(edges):
        for slot, (row, weight) in enumerate(taps):
            edge_index[output, slot], edge_weight[output, slot] = row, weight
    return RowRuns(groups, np.asarray(weights), edge_index, edge_weight)


def _longest_run(weights: dict[int, float]) -> tuple[int, int]:
    """``start, end`` of the longest run of consecutive rows of equal weight (at least 2), else ``0, 0``."""
    best = (0, 0)
    rows = sorted(weights)
    first = 0
    for position in range(1, len(rows) + 1):
        if (position == len(rows) or rows[position] != rows[position - 1] + 1
                or weights[rows[position]] != weights[rows[first]]):
            if position - first >= 2 and position - first > best[1] - best[0]:
                best = (rows[first], rows[position - 1] + 1)
            first = position
    return best


def _sum_row_runs(plane: np.ndarray, runs: RowRuns) -> np.ndarray:
    """The vertical pass of :class:`RowRuns` over ``plane`` (float64 ``[outputs, width]``)."""
    vertical = np.zeros((runs.weight.size, plane.shape[1]))
    for outputs, rows in runs.groups:
        exact = np.uint16 if plane.dtype == np.uint8 and rows.shape[1] <= 257 else None  # else the default sum's
        vertical[outputs] = plane[rows].sum(axis=1, dtype=exact)
    vertical *= runs.weight[:, None]
    vertical += np.einsum("ok,okw->ow", runs.edge_weight, plane[runs.edge_index])  # gathered codes taken as float64
    return vertical


class Blocks(NamedTuple):
    """An area average by a whole step along one stored axis: output sample ``k`` (counted
    backwards when ``reverse``) is the mean of source samples ``first + k*step .. first + (k+1)*step - 1``."""

    first: int
    step: int
    outputs: int
    reverse: bool


def window_blocks(window: AxisWindow, mode: int) -> Blocks | None:
    """The :class:`Blocks` of ``window`` when its area weights are whole samples (a whole step from
    a whole origin, inside the samples read), else None."""
    step, first = window.step, window.origin
    if mode != RESAMPLE_AREA or step <= 1.0 or not step.is_integer() or not float(first).is_integer():
        return None
    blocks = Blocks(int(first), int(step), window.outputs, window.reverse)
    if blocks.first < window.low or blocks.first + blocks.step * blocks.outputs > window.high:
        return None
    return blocks


def _in_plane_samples(blocks: Blocks, subsampling: int) -> tuple[Blocks, bool]:
    """``blocks`` counted in the samples of a plane ``subsampling`` times smaller along the axis,
    and whether that plane must first repeat each sample ``subsampling`` times (as the model
    upsamples chroma): only when the blocks do not fall on whole samples of it."""
    if blocks.first % subsampling == 0 and blocks.step % subsampling == 0:
        return blocks._replace(first=blocks.first // subsampling, step=blocks.step // subsampling), False
    return blocks, True


def block_row_sums(plane: np.ndarray, rows: Blocks, subsampling: int = 1) -> np.ndarray:
    """The first half of an area average over whole-sample blocks (:func:`block_means`): the rows
    of ``plane`` summed over each block of ``rows`` (exact integers, ``[rows.outputs, plane width]``)."""
    rows, repeat = _in_plane_samples(rows, subsampling)
    if repeat:
        plane = np.repeat(plane, subsampling, axis=0)
    narrow = np.uint16 if rows.step * np.iinfo(plane.dtype).max < 1 << 16 else np.int64
    end = rows.first + rows.step * rows.outputs
    sums = plane[rows.first:end].reshape(rows.outputs, rows.step, -1).sum(axis=1, dtype=narrow)
    return sums[::-1] if rows.reverse else sums


def block_means(row_sums: np.ndarray, rows: Blocks, columns: Blocks, subsampling: int = 1) -> np.ndarray:
    """The area averages of the :func:`block_row_sums` of one picture ``[rows, width]``, or of
    several stacked ``[pictures, rows, width]``: the weights of :func:`_resample` (``1/step`` per
    sample and axis), summed exactly before one division."""
    columns, repeat = _in_plane_samples(columns, subsampling)
    if repeat:
        row_sums = np.repeat(row_sums, subsampling, axis=-1)
    span = row_sums[..., columns.first:columns.first + columns.step * columns.outputs]
    sums = span[..., ::columns.step].astype(np.int64)
    for offset in range(1, columns.step):  # strided adds: quicker than a reduction along the last axis
        sums += span[..., offset::columns.step]
    if columns.reverse:
        sums = sums[..., ::-1]
    return sums / float(_in_plane_samples(rows, subsampling)[0].step * columns.step)


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
    mode = resample_mode(antialias, interpolation)
    blocks = frame_blocks(geometry, mode)
    if blocks is not None:  # the same weights, quicker: sums of whole blocks
        planes = [block_means(block_row_sums(plane, blocks[0], subsampling), *blocks, subsampling)
                  for plane, subsampling in ((y, 1), (u, 2), (v, 2))]
    else:
        row_taps, column_taps = _frame_taps(height, width, geometry, mode)
        planes = [_resample(plane, row_taps, column_taps, subsampling, _frame_row_runs(height, width, geometry, mode,
                                                                                       subsampling))
                  for plane, subsampling in ((y, 1), (u, 2), (v, 2))]
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
    # One plane per channel [3, ...], worked on in place: every value takes the kernel's operations in its order.
    ycc = np.empty((3,) + planes[0].shape)
    for channel, (plane, offset) in enumerate(zip(planes, (y_offset, c_offset, c_offset))):
        np.subtract(plane, offset, out=ycc[channel])
    ycc[0] *= y_scale
    ycc[1:] *= c_scale
    luma, cb, cr = ycc
    rgb = np.empty_like(ycc)
    red, green, blue = rgb
    np.add(luma, np.multiply(r_cr, cr, out=red), out=red)
    np.add(luma, np.multiply(g_cb, cb, out=green), out=green)
    green += np.multiply(g_cr, cr, out=cr)
    np.add(luma, np.multiply(b_cb, cb, out=blue), out=blue)
    np.clip(rgb, 0.0, 1.0, out=rgb)
    if color.operations:  # the adjustments of one frame, on its [H, W, 3] pixels
        rgb = np.moveaxis(adjust_colors(np.ascontiguousarray(np.moveaxis(rgb, 0, -1)), color), -1, 0)
    per_channel = (3,) + (1,) * (rgb.ndim - 1)
    values = np.multiply(rgb, np.asarray(scale, np.float64).reshape(per_channel), out=rgb)
    values += np.asarray(bias, np.float64).reshape(per_channel)
    if dtype == "uint8":
        values += 0.5
        np.floor(values, out=values)
    elif dtype == "bfloat16":
        values = bfloat16_bits(values)
    converted = np.empty(values.shape[1:] + (3,), np.uint16 if dtype == "bfloat16" else dtype)
    converted[...] = np.moveaxis(values, 0, -1)  # cast and interleaved in one pass
    return converted


@functools.lru_cache(maxsize=64)
def _frame_taps(height: int, width: int, geometry: FrameGeometry, mode: int) -> tuple[tuple, tuple]:
    """The row and column taps of a ``height x width`` picture for ``geometry`` (the same for every
    frame of a clip: computed once)."""
    along_x, along_y = source_windows(geometry)
    row_taps = window_taps(along_y, mode)
    column_taps = window_taps(along_x, mode)
    for array in (*row_taps, *column_taps):
        array.setflags(write=False)  # shared by the cache
    return row_taps, column_taps


@functools.lru_cache(maxsize=64)
def _frame_row_runs(height: int, width: int, geometry: FrameGeometry, mode: int, subsampling: int) -> RowRuns | None:
    """The :class:`RowRuns` of an area downscale of a ``height x width`` picture's rows for
    ``geometry``, in a plane ``subsampling`` times smaller; None for other resampling."""
    if mode != RESAMPLE_AREA:
        return None
    runs = _row_runs(_frame_taps(height, width, geometry, mode)[0], subsampling)
    if runs is not None:
        for array in (*runs[1:], *(array for group in runs.groups for array in group)):
            array.setflags(write=False)  # shared by the cache
    return runs


@functools.lru_cache(maxsize=64)
def frame_blocks(geometry: FrameGeometry, mode: int) -> tuple[Blocks, Blocks] | None:
    """The row and column :class:`Blocks` of ``geometry`` when both axes are whole-sample area
    averages (a downscale by a whole factor, as 640x360 to 64x36), else None."""
    along_x, along_y = source_windows(geometry)
    rows, columns = window_blocks(along_y, mode), window_blocks(along_x, mode)
    return None if rows is None or columns is None else (rows, columns)
