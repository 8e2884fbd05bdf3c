"""The CPU path's conversion: the kernel twin's math (:mod:`vclip._engine.reference`) in fewer
operations. The colour step is the definition's, bit for bit, worked out in place. The resampling
is summed otherwise where a geometry allows: the weights are the taps', only the order of the
additions differs, so the values are the definition's up to float64 rounding (a uint8 output may
round the other way at an exact tie):

- **Whole blocks.** A downscale by a whole factor (640x360 to 64x36) averages whole blocks of
  samples: the integer codes summed exactly, rows then columns, then one division.
- **Runs of rows.** An area downscale by 3 rows or more that no whole factor serves: each output
  row is a run of rows its taps weigh alike, summed exactly, plus its few edge rows.

Elsewhere the taps are applied as the definition applies them. ``tests/engine/test_host_fast.py``
checks each form against the definition on random cases. :func:`sum_neighbours` is the one
helper for sums over short axes, here and in the scene method's features.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
from numpy.typing import DTypeLike

from ..transforms import NO_COLOR_CHANGE, ColorAdjustment, FrameGeometry
from .reference import (
    RESAMPLE_AREA,
    AxisWindow,
    adjust_colors,
    bfloat16_bits,
    color_coefficients,
    frame_taps,
    resample_columns,
    resample_mode,
    resample_rows,
    source_windows,
)

__all__ = ["Blocks", "RowRuns", "block_means", "block_row_sums", "frame_blocks", "frame_row_runs",
           "planes_to_rgb_tensor", "sum_neighbours", "sum_row_runs", "window_blocks", "yuv420_to_rgb_tensor"]

_MIN_MEAN_RUN = 3  # rows per run below which gathering every tap is as quick


def sum_neighbours(values: np.ndarray, size: int, axis: int = -1, dtype: DTypeLike | None = None) -> np.ndarray:
    """Sums of each ``size`` neighbours along ``axis`` (its length a multiple of ``size``, which
    becomes a ``size`` times shorter axis), in ``dtype`` (default: ``values``'), added left to right:
    NumPy's reductions over short axes are several times slower than these additions."""
    axis %= values.ndim
    grouped = values.reshape(*values.shape[:axis], values.shape[axis] // size, size, *values.shape[axis + 1:])
    neighbours = np.moveaxis(grouped, axis + 1, 0)  # a view: neighbours[k] is each group's k-th
    total = neighbours[0].astype(dtype if dtype is not None else values.dtype)  # a copy
    for neighbour in neighbours[1:]:
        total += neighbour
    return total


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
    """:func:`vclip._engine.reference.yuv420_to_rgb_tensor` of one frame, in whole blocks or runs
    of rows where ``geometry`` allows."""
    height, width = y.shape
    mode = resample_mode(antialias, interpolation)
    blocks = frame_blocks(geometry, mode)
    if blocks is not None:
        planes = [block_means(block_row_sums(plane, blocks[0], subsampling), *blocks, subsampling)
                  for plane, subsampling in ((y, 1), (u, 2), (v, 2))]
    else:
        rows, columns = frame_taps(height, width, geometry, mode)
        planes = []
        for plane, subsampling in ((y, 1), (u, 2), (v, 2)):
            runs = frame_row_runs(height, width, geometry, mode, subsampling)
            vertical = resample_rows(plane, rows, subsampling) if runs is None else sum_row_runs(plane, runs)
            planes.append(resample_columns(vertical, columns, subsampling))
    return planes_to_rgb_tensor(planes, bit_depth=bit_depth, matrix=matrix, color_range=color_range,
                                transpose=geometry.orientation.transpose, scale=scale, bias=bias, dtype=dtype,
                                color=color)


def planes_to_rgb_tensor(planes: list[np.ndarray], *, bit_depth: int, matrix: str, color_range: str, transpose: bool,
                         scale: np.ndarray, bias: np.ndarray, dtype: str,
                         color: ColorAdjustment = NO_COLOR_CHANGE) -> np.ndarray:
    """:func:`vclip._engine.reference.planes_to_rgb_tensor`, bit for bit, worked out in place on one
    plane per channel (every value takes the definition's operations in its order) and cast and
    interleaved in one pass."""
    if transpose:  # [displayed column, displayed row] -> [row, column]
        planes = [np.swapaxes(plane, -1, -2) for plane in planes]
    y_offset, y_scale, c_offset, c_scale, r_cr, g_cb, g_cr, b_cb = color_coefficients(matrix, color_range, bit_depth)
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


# -- whole blocks -------------------------------------------------------------------------------------

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


@functools.lru_cache(maxsize=64)
def frame_blocks(geometry: FrameGeometry, mode: int) -> tuple[Blocks, Blocks] | None:
    """The row and column :class:`Blocks` of ``geometry`` when both axes are whole-sample area
    averages (a downscale by a whole factor, as 640x360 to 64x36), else None."""
    along_x, along_y = source_windows(geometry)
    rows, columns = window_blocks(along_y, mode), window_blocks(along_x, mode)
    return None if rows is None or columns is None else (rows, columns)


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
    several stacked ``[pictures, rows, width]``: the taps' weights (``1/step`` per sample and
    axis), summed exactly before one division."""
    columns, repeat = _in_plane_samples(columns, subsampling)
    if repeat:
        row_sums = np.repeat(row_sums, subsampling, axis=-1)
    span = row_sums[..., columns.first:columns.first + columns.step * columns.outputs]
    sums = sum_neighbours(span, columns.step, dtype=np.int64)
    if columns.reverse:
        sums = sums[..., ::-1]
    return sums / float(_in_plane_samples(rows, subsampling)[0].step * columns.step)


# -- runs of rows -------------------------------------------------------------------------------------

class RowRuns(NamedTuple):
    """The vertical pass of a downscale, in a plane's own rows: output row ``k`` is ``weight[k]``
    times the exact sum of a run of plane rows that its taps weigh alike, plus its other rows
    ``edge_index[k]`` times ``edge_weight[k]`` (zero weights pad). The runs are gathered by length:
    each of ``groups`` is ``(outputs, rows)``, the rows ``[outputs, length]`` of those outputs' runs."""

    groups: tuple[tuple[np.ndarray, np.ndarray], ...]
    weight: np.ndarray
    edge_index: np.ndarray
    edge_weight: np.ndarray


@functools.lru_cache(maxsize=64)
def frame_row_runs(height: int, width: int, geometry: FrameGeometry, mode: int, subsampling: int) -> RowRuns | None:
    """The :class:`RowRuns` of an area downscale of a ``height x width`` picture's rows for
    ``geometry``, in a plane ``subsampling`` times smaller; None for other resampling, and where
    the runs are too short to pay."""
    if mode != RESAMPLE_AREA:
        return None
    runs = row_runs(frame_taps(height, width, geometry, mode)[0], subsampling)
    if runs is not None:
        for array in (*runs[1:], *(array for group in runs.groups for array in group)):
            array.setflags(write=False)  # shared by the cache
    return runs


def row_runs(rows: tuple[np.ndarray, np.ndarray], subsampling: int) -> RowRuns | None:
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


def sum_row_runs(plane: np.ndarray, runs: RowRuns) -> np.ndarray:
    """The vertical pass of :class:`RowRuns` over ``plane`` (float64 ``[outputs, width]``): the
    values of :func:`vclip._engine.reference.resample_rows` up to float64 rounding."""
    vertical = np.zeros((runs.weight.size, plane.shape[1]))
    for outputs, rows in runs.groups:
        exact = np.uint16 if plane.dtype == np.uint8 and rows.shape[1] <= 257 else None  # else the default sum's
        vertical[outputs] = plane[rows].sum(axis=1, dtype=exact)
    vertical *= runs.weight[:, None]
    vertical += np.einsum("ok,okw->ow", runs.edge_weight, plane[runs.edge_index])  # gathered codes taken as float64
    return vertical
