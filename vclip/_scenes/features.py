"""The scene method's per-frame features and frame-to-frame distances, with NumPy on the host: the
twin of ``kernels/shot_features.cu`` (:mod:`vclip._scenes.features_cuda` runs the same functions on
the GPU that decoded the frames). The same values on both devices:

- ``H``: the colour distribution of an analysis frame (RGB uint8, ``analysis_width`` pixels across):
  a 4x4x4 joint RGB histogram, fractions of the pixels (64 bins). A camera move over one place
  hardly changes it; a new shot does.
- ``B``: the picture's layout: the mean RGB of 4x4-pixel blocks (16 x 9 blocks at 64 x 36).
- ``mean`` and ``dark``: the mean BT.601 luma (0-255) and the share of pixels darker than
  :data:`DARK_LUMA`, for fades through black.

Between frames t and t - g, for every gap g = 1..:data:`MAX_GAP`, two distances make the tables
the decisions read (:mod:`vclip._scenes.shots`, a few KB per frame):

- ``H_g(t)``: half the L1 distance of the histograms (0: the same colours, 1: no colour in common);
- ``B_g(t)``: the median over blocks of the mean absolute RGB difference, / 255: how much the typical
  block changed, so a caption, a logo or a moving object (a minority of blocks) does not count.

A thumbnail of each frame (its 2x2-pixel means, 32 x 18 at 64 x 36; 1.7 KB) is kept on the host
whichever device decoded it, to tell a dissolve from a camera move.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._engine.host_fast import sum_neighbours

__all__ = ["BINS", "DARK_LUMA", "MAX_GAP", "SceneSignals", "block_grid", "frame_features", "gap_distances",
           "recent_features", "thumbnails"]

_HIST_LEVELS = 4  # per channel: 4 x 4 x 4 bins
BINS = _HIST_LEVELS ** 3
_LEVEL_SHIFT = 8 - (_HIST_LEVELS.bit_length() - 1)  # keeps the top log2(_HIST_LEVELS) bits of each channel
_BLOCK = 4  # pixels per block side
MAX_GAP = 40
"""The longest frame gap whose distances are computed (the scene rules read none further)."""
DARK_LUMA = 24
"""A pixel darker than this BT.601 luma counts as dark (``kernels/shot_features.cu`` has the same)."""
_LUMA_WEIGHTS = np.array([299, 587, 114], dtype=np.float32)  # 1000 x BT.601 luma: exact integer sums


@dataclass
class SceneSignals:
    """Per-frame tables the shot-boundary decision reads (NumPy, host)."""

    distances: dict  # "H", "B": float32 [MAX_GAP + 1, num_frames], NaN where t - g < 0
    luma_mean: np.ndarray  # float32 [num_frames]
    dark_share: np.ndarray  # float32 [num_frames]: share of pixels darker than DARK_LUMA
    thumbnails: np.ndarray  # uint8 [num_frames, h // 2, w // 2, 3]: see thumbnails()


def block_grid(height: int, width: int) -> tuple[int, int, int, int]:
    """``rows, columns, block_h, block_w``: the grid of blocks of a ``height`` x ``width`` frame."""
    rows, columns = max(1, height // _BLOCK), max(1, width // _BLOCK)
    return rows, columns, height // rows, width // columns


def frame_features(frames: np.ndarray) -> dict:
    """Features of RGB uint8 frames ``[n, h, w, 3]``: ``H`` [n, 64] and ``B`` [n, blocks, 3],
    ``mean`` and ``dark`` [n], all float32 (the twin of ``kernels/shot_features.cu``)."""
    n, height, width, _ = frames.shape
    levels = frames >> _LEVEL_SHIFT  # each channel's level, 0 .. _HIST_LEVELS - 1: the bin fits in uint8
    codes = (levels[..., 0] * np.uint8(_HIST_LEVELS) + levels[..., 1]) * np.uint8(_HIST_LEVELS) + levels[..., 2]
    codes = codes.reshape(n, -1) + (np.arange(n, dtype=np.int32) * BINS)[:, None]
    hist = np.bincount(codes.reshape(-1), minlength=n * BINS).reshape(n, BINS).astype(np.float32)
    pixels = height * width
    hist /= np.float32(pixels)
    rows, columns, block_h, block_w = block_grid(height, width)
    cropped = frames[:, :rows * block_h, :columns * block_w].astype(np.float32)  # sums of integers: exact
    # Sum the rows of each block (contiguous lines), then the columns: quicker than one mean over both.
    lines = cropped.reshape(n, rows, block_h, columns * block_w * 3).sum(axis=2)
    blocks = sum_neighbours(lines.reshape(n, rows, columns * block_w, 3), block_w, axis=2)
    blocks = blocks.reshape(n, rows * columns, 3)
    blocks /= np.float32(block_h * block_w)
    # 1000 x luma: integers below 2^24, exact in float32 (whose product BLAS computes)
    weighted = (frames.astype(np.float32) @ _LUMA_WEIGHTS).reshape(n, -1)
    mean = (weighted.sum(axis=1, dtype=np.float64) / (1000.0 * pixels)).astype(np.float32)
    dark = np.count_nonzero(weighted < DARK_LUMA * 1000, axis=1).astype(np.float32) / np.float32(pixels)
    return {"H": hist, "B": blocks, "mean": mean, "dark": dark}


def thumbnails(frames: np.ndarray) -> np.ndarray:
    """The means of 2x2 pixels of RGB uint8 frames ``[n, h, w, 3]`` (an odd last row or column
    left out), rounded: uint8 ``[n, h // 2, w // 2, 3]``, on the host whichever device decoded them."""
    n, height, width, _ = frames.shape
    rows, columns = height // 2, width // 2
    row_pairs = frames[:, :2 * rows, :2 * columns].reshape(n, rows, 2, 2 * columns * 3)
    pairs = sum_neighbours(row_pairs, 2, axis=2, dtype=np.uint16).reshape(n, rows, columns, 2, 3)
    sums = sum_neighbours(pairs, 2, axis=3)[:, :, :, 0]
    sums += 2
    sums >>= 2
    return sums.astype(np.uint8)


def gap_distances(features: dict, previous: dict | None) -> dict:
    """``H`` and ``B`` distances of each frame in ``features`` to the ``MAX_GAP`` frames before it
    (``previous``: the features of up to ``MAX_GAP`` frames before these), float32
    ``[MAX_GAP + 1, n]``, NaN where there is no such frame (the twin of ``kernels/shot_features.cu``)."""
    n = features["H"].shape[0]
    tables = {}
    for name in ("H", "B"):
        current = features[name]
        earlier = previous[name] if previous is not None else current[:0]
        both = np.concatenate([earlier, current])
        offset = earlier.shape[0]
        table = np.full((MAX_GAP + 1, n), np.nan, dtype=np.float32)
        for gap in range(1, MAX_GAP + 1):
            first = max(0, gap - offset)  # the first frame of this chunk that has a frame `gap` before it
            if first >= n:
                break
            later = both[offset + first:offset + n]
            sooner = both[offset + first - gap:offset + n - gap]
            if name == "H":
                table[gap, first:] = 0.5 * np.abs(later - sooner).sum(axis=1)
            else:
                change = sum_neighbours(np.abs(later - sooner), 3)[..., 0]  # |dR| + |dG| + |dB|
                middle = change.shape[1] // 2  # the upper median (no averaging of two: one partition)
                table[gap, first:] = np.partition(change, middle, axis=1)[:, middle] / np.float32(3 * 255)
        tables[name] = table
    return tables


def recent_features(previous: dict | None, features: dict) -> dict:
    """The ``H`` and ``B`` features of the last ``MAX_GAP`` frames of ``previous`` then ``features``."""
    return {name: (np.concatenate([previous[name], features[name]]) if previous is not None
                   else features[name])[-MAX_GAP:] for name in ("H", "B")}
