"""The scene method's features and gap distances on the GPU: ``kernels/shot_features.cu`` through
CuPy, with the functions of :mod:`vclip._scenes.features` (its NumPy twin) on CuPy arrays.

Four kernels in one module, compiled once per machine (CuPy's disk cache, under the lock the
transform kernel takes), and no CuPy array operation besides allocation and copies: each of those
is a kernel CuPy would build on first use, which cost a fresh container about 16 s before its first
shot boundary.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from .._engine.kernel import compiling_once_per_machine
from .._engine.kernel_args import kernel_source_path
from .features import BINS, MAX_GAP, block_grid

__all__ = ["frame_features", "gap_distances", "recent_features"]

_THREADS = 128  # per block of every launch
_KERNEL_NAMES = ("vclip_shot_rows", "vclip_shot_blocks", "vclip_shot_finish", "vclip_shot_gaps")
_kernels: dict[int, dict[str, Any]] = {}
_kernels_lock = threading.Lock()


def _kernels_on(device_id: int) -> dict[str, Any]:
    with _kernels_lock:
        if device_id not in _kernels:
            import cupy

            source = kernel_source_path("shot_features.cu").read_text()
            with cupy.cuda.Device(device_id), compiling_once_per_machine():
                module = cupy.RawModule(code=source, options=("--std=c++17",))
                _kernels[device_id] = {name: module.get_function(name) for name in _KERNEL_NAMES}
        return _kernels[device_id]


def _blocks_for(threads: int) -> tuple[int]:
    return (max(1, -(-threads // _THREADS)),)


def frame_features(frames, synchronize: bool = False) -> dict:
    """Features of RGB uint8 frames ``[n, h, w, 3]`` (CuPy) as :func:`vclip._scenes.features.frame_features`,
    on their GPU's current stream (``synchronize``: finished when this returns)."""
    import cupy

    with frames.device:
        features = _launch_features(cupy.ascontiguousarray(frames))  # decoded chunks already are: no copy
        if synchronize:
            cupy.cuda.get_current_stream().synchronize()
    return features


def _launch_features(frames) -> dict:
    import cupy

    n, height, width, _ = frames.shape
    rows, columns, block_h, block_w = block_grid(height, width)
    num_blocks = rows * columns
    counts = cupy.zeros((n, BINS), dtype=np.uint32)
    luma_sums = cupy.zeros(n, dtype=np.uint64)
    dark_counts = cupy.zeros(n, dtype=np.uint32)
    features = {"H": cupy.empty((n, BINS), dtype=np.float32), "B": cupy.empty((n, num_blocks, 3), dtype=np.float32),
                "mean": cupy.empty(n, dtype=np.float32), "dark": cupy.empty(n, dtype=np.float32)}
    if n == 0:
        return features
    kernels = _kernels_on(frames.device.id)
    size = (np.int32(n), np.int32(height), np.int32(width))
    kernels["vclip_shot_rows"](_blocks_for(n * height), (_THREADS,), (frames, *size, counts, luma_sums, dark_counts))
    kernels["vclip_shot_blocks"](_blocks_for(n * num_blocks * 3), (_THREADS,), (
        frames, *size, np.int32(columns), np.int32(num_blocks), np.int32(block_h), np.int32(block_w), features["B"]))
    kernels["vclip_shot_finish"](_blocks_for(n * BINS), (_THREADS,), (
        np.int32(n), np.int32(height * width), counts, luma_sums, dark_counts, features["H"], features["mean"],
        features["dark"]))
    return features


def gap_distances(features: dict, previous: dict | None) -> dict:
    """As :func:`vclip._scenes.features.gap_distances`, of CuPy features, on their GPU's current stream."""
    import cupy

    hist, blocks = features["H"], features["B"]
    n = hist.shape[0]
    tables = {name: cupy.empty((MAX_GAP + 1, n), dtype=np.float32) for name in ("H", "B")}
    if n == 0:
        return tables
    earlier = previous if previous is not None else {name: features[name][:0] for name in ("H", "B")}
    grid = (_blocks_for(n)[0], MAX_GAP + 1)
    with hist.device:
        _kernels_on(hist.device.id)["vclip_shot_gaps"](grid, (_THREADS,), (
            np.int32(n), np.int32(blocks.shape[1]), hist, blocks, earlier["H"], earlier["B"],
            np.int32(earlier["H"].shape[0]), tables["H"], tables["B"]))
    return tables


def recent_features(previous: dict | None, features: dict) -> dict:
    """The ``H`` and ``B`` features of the last ``MAX_GAP`` frames of ``previous`` then ``features``
    (copies of device memory: no kernel)."""
    import cupy

    recent = {}
    for name in ("H", "B"):
        current = features[name]
        earlier = previous[name] if previous is not None else current[:0]
        keep_current = min(current.shape[0], MAX_GAP)
        keep_earlier = min(earlier.shape[0], MAX_GAP - keep_current)
        if keep_earlier == 0:
            recent[name] = current[current.shape[0] - keep_current:]  # a view: rows of a C-contiguous array
            continue
        kept = cupy.empty((keep_earlier + keep_current, *current.shape[1:]), dtype=current.dtype)
        head, tail = earlier[earlier.shape[0] - keep_earlier:], current[current.shape[0] - keep_current:]
        kept.data.copy_from_device_async(head.data, head.nbytes)
        if tail.nbytes:
            (kept.data + head.nbytes).copy_from_device_async(tail.data, tail.nbytes)
        recent[name] = kept
    return recent
