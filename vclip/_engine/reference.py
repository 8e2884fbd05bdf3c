"""NumPy twin of ``kernels/nv12_transform.cu``: the same math in float64, the kernel's reference.

It is also the CPU path for transformed frames, so CPU and GPU results agree within rounding.

The model: chroma is upsampled to full size by repeating each sample over its 2x2 luma block (as
FFmpeg's rgb24 conversion does at native size); each plane is resampled to the output grid with
the same separable weights (area average when shrinking with antialias, else bilinear with pixel
centres aligned), at the stored-picture coordinates that the display orientation maps each output
pixel to; then the colour matrix and range turn YUV into RGB in [0, 1], clamped; then
``out = rgb * scale + bias`` per channel (uint8 rounds ``rgb * 255`` half up).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ..transforms import FrameGeometry

_KR_KB = {"bt601": (0.299, 0.114), "bt709": (0.2126, 0.0722), "bt2020": (0.2627, 0.0593), "smpte240m": (0.212, 0.087)}


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


def axis_taps(source: int, resized: int, coords: np.ndarray, antialias: bool) -> tuple[np.ndarray, np.ndarray]:
    """Source sample indices and weights ``[len(coords), taps]`` for output ``coords`` on one axis."""
    scale = source / resized
    coords = np.asarray(coords, dtype=np.float64)
    if antialias and scale > 1.0:
        low = coords * scale
        high = low + scale
        first = np.floor(low)
        taps = math.ceil(scale) + 1
        index = first[:, None] + np.arange(taps)
        weight = np.clip(np.minimum(high[:, None], index + 1) - np.maximum(low[:, None], index), 0.0, None) / scale
        weight[index >= source] = 0.0
        return np.clip(index, 0, source - 1).astype(np.int64), weight
    position = np.clip((coords + 0.5) * scale - 0.5, 0.0, source - 1)
    left = np.floor(position)
    fraction = position - left
    index = np.stack([left, np.minimum(left + 1, source - 1)], axis=1).astype(np.int64)
    return index, np.stack([1.0 - fraction, fraction], axis=1)


def _resample(plane: np.ndarray, rows, columns, subsampling: int = 1) -> np.ndarray:
    """Resample ``plane`` at full-resolution taps; a plane ``subsampling`` times smaller is read at
    ``index // subsampling`` (each of its samples stands for a square of full-resolution pixels)."""
    row_index, row_weight = rows
    column_index, column_weight = columns
    vertical = np.einsum("ok,okw->ow", row_weight, plane[row_index // subsampling].astype(np.float64))
    return np.einsum("pk,opk->op", column_weight, vertical[:, column_index // subsampling])


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
) -> np.ndarray:
    """One frame of 4:2:0 planes (integer codes, ``bit_depth`` bits) to ``[H, W, 3]`` in ``dtype``."""
    height, width = y.shape
    row_taps, column_taps = _frame_taps(height, width, geometry, antialias)
    planes = [_resample(plane, row_taps, column_taps, subsampling) for plane, subsampling in ((y, 1), (u, 2), (v, 2))]
    if geometry.orientation.transpose:  # [displayed column, displayed row] -> [row, column]
        planes = [plane.T for plane in planes]
    y_offset, y_scale, c_offset, c_scale, r_cr, g_cb, g_cr, b_cb = color_coefficients(matrix, color_range, bit_depth)
    luma = (planes[0] - y_offset) * y_scale
    cb = (planes[1] - c_offset) * c_scale
    cr = (planes[2] - c_offset) * c_scale
    rgb = np.clip(np.stack([luma + r_cr * cr, luma + g_cb * cb + g_cr * cr, luma + b_cb * cb], axis=-1), 0.0, 1.0)
    values = rgb * np.asarray(scale, np.float64) + np.asarray(bias, np.float64)
    if dtype == "uint8":
        return np.floor(values + 0.5).astype(np.uint8)
    return values.astype(dtype)


@functools.lru_cache(maxsize=64)
def _frame_taps(height: int, width: int, geometry: FrameGeometry, antialias: bool) -> tuple[tuple, tuple]:
    """The row and column taps of a ``height x width`` picture for ``geometry`` (the same for every
    frame of a clip: computed once)."""
    g = geometry
    rows = np.arange(g.crop_y, g.crop_y + g.output_height)  # in the displayed resized picture
    columns = np.arange(g.crop_x, g.crop_x + g.output_width)
    if g.flip:
        columns = columns[::-1]
    orientation = g.orientation
    stored_columns, stored_rows = (rows, columns) if orientation.transpose else (columns, rows)
    resized_width, resized_height = g.stored_resized_size
    if orientation.mirror_x:
        stored_columns = resized_width - 1 - stored_columns
    if orientation.mirror_y:
        stored_rows = resized_height - 1 - stored_rows
    row_taps = axis_taps(height, resized_height, stored_rows, antialias)
    column_taps = axis_taps(width, resized_width, stored_columns, antialias)
    for array in (*row_taps, *column_taps):
        array.setflags(write=False)  # shared by the cache
    return row_taps, column_taps
