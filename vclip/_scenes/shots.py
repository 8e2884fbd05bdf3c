"""Shot boundaries from per-frame features: the math of the scene method, no decoding.

:func:`frame_features` and :func:`gap_distances` turn analysis frames (RGB uint8) into small
tables: here with NumPy on the host, in :mod:`vclip._scenes.features_cuda` with the same functions on the
GPU that decoded them (``kernels/shot_features.cu``, of which this code is the twin).
:func:`shot_boundaries` decides, on the host,
where shots change: flashes left out, the usual change around each frame, cuts, fades through
black and dissolves (the method is described in :mod:`vclip.keyframes`, which drives the decoding).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["BINS", "MAX_GAP", "SceneSignals", "ShotBoundary", "block_grid", "frame_features", "gap_distances",
           "median_of_numbers", "recent_features", "shot_boundaries", "thumbnails"]

# Features of each analysis frame (RGB uint8, ``analysis_width`` pixels across), the same values on
# the CPU and the GPU:
#   hist    the colour distribution: a 4x4x4 joint RGB histogram, fractions of the pixels (64 bins);
#           a camera move over one place hardly changes it, a new shot does.
#   blocks  the picture's layout: mean RGB of 4x4-pixel blocks (16 x 9 blocks at 64 x 36).
#   luma    the mean BT.601 luma (0-255) and the share of dark pixels, for fades through black.
# Distances between frames t and t-g, for every gap g = 1..MAX_GAP, also computed on that device:
#   H_g(t)  half the L1 distance of the histograms (0: same colours, 1: no colour in common)
#   B_g(t)  the median over blocks of the mean absolute RGB difference, / 255: how much the typical
#           block changed, so a caption, a logo or a moving object (a minority of blocks) does not count.
# Everything after that works on these [gap, frame] tables on the host (a few KB per frame), and
# on a thumbnail of each frame (its 2x2-pixel means, 32 x 18 at 64 x 36; 1.7 KB), kept on the host
# to tell a dissolve from a camera move (_moved_share).

_HIST_LEVELS = 4  # per channel: 4 x 4 x 4 bins
BINS = _HIST_LEVELS ** 3
_LEVEL_SHIFT = 8 - (_HIST_LEVELS.bit_length() - 1)  # keeps the top log2(_HIST_LEVELS) bits of each channel
_BLOCK = 4  # pixels per block side
MAX_GAP = 40  # longest frame gap compared (2 x the largest half-width + 2 x _PAIR_SPREAD)
_BETWEEN = 1.3  # a dissolve's middle frames are blends: see _betweenness
# And a dissolve goes straight from the old shot to the new: the block changes of its frame pairs
# add up to at most this many times its whole change (a pan or a zoom sweeps through other pictures).
_STRAIGHT = 1.4
_SPAN_EDGE = 0.25  # a dissolve ends at the first frame 75% of the way to the new shot
_PEAK_RADIUS = 8  # frames around a peak of gradual evidence where its middle is looked for
_PAIR_SPREAD = 3  # a gradual boundary must hold for the pairs (a - j, z + j), j = 0.._PAIR_SPREAD
# A cut's change is at least half the change over 8 more frames each side (else it is gradual),
# and that wider change at least 60% of the cut's (else the picture came back: not a new shot).
_ABRUPT_SPAN, _ABRUPT_SHARE, _LASTING_SHARE = 8, 0.5, 0.6
# A cut's change is also this many times the change of each frame pair beside it: fast motion (a
# whip pan, a crash zoom, hand-held shake, an object crossing the frame) changes every pair about alike.
_ABOVE_NEIGHBOURS = 2.0
# And whichever feature passes that test, the other changes at least this many times as much as at
# the pairs beside it: a whip pan sweeps new colours in while every block keeps changing alike, an
# object crossing the frame back and forth moves the blocks while the colours change alike.
_EACH_ABOVE_NEIGHBOURS = 1.15
# And the new picture is new: none of the _NEW_LOOK frames before the cut comes within
# _NEW_SHARE of the cut's change of its first frame, nor does any of the _NEW_LOOK frames after it
# of its last old frame; nor within _NEW_SHARE_WITH_FLASHES, counting the frames left out as flashes.
# Shake and an object passing back and forth bring earlier pictures back (an object that crosses the
# frame in a few frames, again and again, is left out as flashes).
_NEW_LOOK, _NEW_SHARE, _NEW_SHARE_WITH_FLASHES = 8, 0.7, 0.5
# And a dissolve's new picture is no mosaic of its old one: cut the first new frame's thumbnail into
# _MOVED_BLOCK-pixel blocks and let each take the best match of the last old frame within
# _MOVED_REACH pixels; if the typical block then differs by less than _MOVED_SHARE of its plain
# difference, the camera (or the objects) moved: a pan, a tilt, a zoom under motion blur. A blend of
# two shots is no such mosaic (over 432 labelled videos: 0.43 and more at the 494 dissolves of the
# dissolve videos, 0.21-0.38 at the camera moves that passed the other tests).
_MOVED_BLOCK, _MOVED_REACH, _MOVED_SHARE = 4, 5, 0.4
# Nor is each of its middle frames a mosaic of the frame before (a crash zoom's frames are): at a
# quarter, half and three quarters of a transition of at least _MOVING_FRAMES frames, the median
# of the three shares is at least _MOVING_SHARE (0.57 and more at the 322 labelled dissolves found
# over 504 videos; the crash zooms that pass every other test, 0.30-0.53).
_MOVING_FRAMES, _MOVING_SHARE = 3, 0.55
_HALF_WIDTHS = (2, 3, 4, 6, 8, 11, 14, 17)  # half-lengths of the gradual transitions looked for
_BASE_WINDOW = 12  # frame pairs each side whose median distance is the usual change at that gap
# The gaps at which the usual change is read: a cut's pair, and the pairs (a - j, z + j) of every
# gradual window.
_COMPARED_GAPS = np.array(sorted({1} | {2 * (h + j) for h in _HALF_WIDTHS for j in range(_PAIR_SPREAD + 1)}))
_TRANSIENT_FRAMES = 4  # the longest flash (or brief occlusion) bridged over
# Distances below these (histogram, blocks) are never boundaries, whatever the change around them;
# the same values are the unit of the combined distance used to find flashes.
_MIN_DISTANCE = {"H": 0.15, "B": 0.05}
# Added to the usual change before dividing by it, so a still shot's near-zero change does not
# turn noise into a boundary.
_NOISE_FLOOR = {"H": 0.045, "B": 0.015}
# A frame is black (in a fade) when this share of its pixels is darker than this luma: not all
# of them, so a logo or a caption kept over the black does not count.
_DARK_LUMA, _DARK_SHARE = 24, 0.85
_LUMA_WEIGHTS = np.array([299, 587, 114], dtype=np.float32)  # 1000 x BT.601 luma: exact integer sums
_FADE_SETTLED, _FADE_LOOK = 0.8, 8  # a fade ends at the first frame with 80% of the brightest luma of the next 8
_FADE_DEPTH = 0.3  # and its mean luma is at most this share of the brightest frames either side


@dataclass(frozen=True)
class ShotBoundary:
    """Where one shot ends and the next begins.

    Attributes:
        frame: The first frame of the new shot (for a gradual transition, the first frame after it).
        start: The first frame of the transition (``== frame`` for a cut).
        kind: ``"cut"``, ``"dissolve"`` (gradual, through blended frames) or ``"fade"`` (through black).
    """

    frame: int
    start: int
    kind: str


@dataclass
class SceneSignals:
    """Per-frame tables the shot-boundary decision reads (NumPy, host)."""

    distances: dict  # "H", "B": float32 [MAX_GAP + 1, num_frames], NaN where t - g < 0
    luma_mean: np.ndarray  # float32 [num_frames]
    dark_share: np.ndarray  # float32 [num_frames]: share of pixels darker than _DARK_LUMA
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
    blocks = _sum_of_neighbours(lines.reshape(n, rows, columns * block_w, 3), block_w, axis=2)
    blocks = blocks.reshape(n, rows * columns, 3)
    blocks /= np.float32(block_h * block_w)
    # 1000 x luma: integers below 2^24, exact in float32 (whose product BLAS computes)
    weighted = (frames.astype(np.float32) @ _LUMA_WEIGHTS).reshape(n, -1)
    mean = (weighted.sum(axis=1, dtype=np.float64) / (1000.0 * pixels)).astype(np.float32)
    dark = np.count_nonzero(weighted < _DARK_LUMA * 1000, axis=1).astype(np.float32) / np.float32(pixels)
    return {"H": hist, "B": blocks, "mean": mean, "dark": dark}


def thumbnails(frames: np.ndarray) -> np.ndarray:
    """The means of 2x2 pixels of RGB uint8 frames ``[n, h, w, 3]`` (an odd last row or column
    left out), rounded: uint8 ``[n, h // 2, w // 2, 3]``, on the host whichever device decoded them."""
    n, height, width, _ = frames.shape
    rows, columns = height // 2, width // 2
    row_pairs = frames[:, :2 * rows, :2 * columns].reshape(n, rows, 2, 2 * columns * 3)
    pairs = np.add(row_pairs[:, :, 0], row_pairs[:, :, 1], dtype=np.uint16).reshape(n, rows, columns, 2, 3)
    sums = np.add(pairs[:, :, :, 0], pairs[:, :, :, 1])  # two additions: several times faster than sum()
    sums += 2
    sums >>= 2
    return sums.astype(np.uint8)


def _moved_share(old: np.ndarray, new: np.ndarray) -> float:
    """How well the blocks of the ``old`` thumbnail, each moved up to :data:`_MOVED_REACH` pixels,
    rebuild the ``new`` one: the median over ``new``'s blocks of the least absolute RGB difference
    over the moves, divided by the median without moving (1 when nothing moved helps,
    near 0 when the new picture is the old one moved); 1 for thumbnails smaller than one block."""
    height, width, _ = new.shape
    rows, columns = height // _MOVED_BLOCK * _MOVED_BLOCK, width // _MOVED_BLOCK * _MOVED_BLOCK
    if not rows or not columns:
        return 1.0
    reach = _MOVED_REACH
    # int16: a block's sum of absolute differences is at most 16 x 3 x 255, exact and quicker than floats
    padded = np.pad(old[:rows, :columns].astype(np.int16), ((reach, reach), (reach, reach), (0, 0)), mode="edge")
    moves = np.lib.stride_tricks.sliding_window_view(padded, (rows, columns), axis=(0, 1))  # [dy, dx, ch, r, c]
    difference = np.abs(moves - np.moveaxis(new[:rows, :columns].astype(np.int16), 2, 0))
    blocks = _sum_of_neighbours(difference[:, :, 0] + difference[:, :, 1] + difference[:, :, 2], _MOVED_BLOCK)
    blocks = _sum_of_neighbours(blocks, _MOVED_BLOCK, axis=2)  # [dy, dx, block row, block column]
    typical = float(np.median(blocks[reach, reach]))
    return float(np.median(blocks.min(axis=(0, 1)))) / typical if typical > 0 else 1.0


def _moving_inside(thumbnails: np.ndarray, start: int, end: int) -> bool:
    """Whether the frames of the transition from ``start`` to ``end`` are moved copies of the
    frame before each: the median :func:`_moved_share` at a quarter, half and three quarters of the
    way below :data:`_MOVING_SHARE`; False for a transition of fewer than :data:`_MOVING_FRAMES` frames."""
    if end - start < _MOVING_FRAMES or start < 1:
        return False
    shares = [_moved_share(thumbnails[k - 1], thumbnails[k]) for k in _transition_middles(start, end)]
    return float(np.median(shares)) < _MOVING_SHARE


def _transition_middles(start: int, end: int) -> list[int]:
    """The frames a quarter, half and three quarters of the way from ``start`` to ``end`` (in order, once each)."""
    return sorted({start + (end - start) // 4, (start + end) // 2, start + 3 * (end - start) // 4})


def _sum_of_neighbours(values: np.ndarray, size: int, axis: int = -1) -> np.ndarray:
    """Sums of each ``size`` neighbours along ``axis`` (its length a multiple of ``size``), by
    additions: NumPy's reductions over short axes are several times slower."""
    axis %= values.ndim
    grouped = values.reshape(*values.shape[:axis], values.shape[axis] // size, size, *values.shape[axis + 1:])
    neighbours = np.moveaxis(grouped, axis + 1, 0)  # a view: neighbours[k] is each group's k-th
    total = neighbours[0].copy()
    for neighbour in neighbours[1:]:
        total += neighbour
    return total


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
                change = np.abs(later - sooner)
                # Two additions: NumPy's reduction over 3 channels is several times slower (same values).
                change = (change[..., 0] + change[..., 1]) + change[..., 2]
                middle = change.shape[1] // 2  # the upper median (no averaging of two: one partition)
                table[gap, first:] = np.partition(change, middle, axis=1)[:, middle] / np.float32(3 * 255)
        tables[name] = table
    return tables


def recent_features(previous: dict | None, features: dict) -> dict:
    """The ``H`` and ``B`` features of the last ``MAX_GAP`` frames of ``previous`` then ``features``."""
    return {name: (np.concatenate([previous[name], features[name]]) if previous is not None
                   else features[name])[-MAX_GAP:] for name in ("H", "B")}


def _pair_distance(table: np.ndarray, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Distance between frames ``first`` and ``second`` (arrays) read from a gap table: 0 for the
    same frame, NaN where a frame is outside the video or further apart than ``MAX_GAP``."""
    first, second = np.broadcast_arrays(np.asarray(first), np.asarray(second))
    low, high = np.minimum(first, second), np.maximum(first, second)
    gap = high - low
    valid = (low >= 0) & (high < table.shape[1]) & (gap <= MAX_GAP)
    out = np.full(first.shape, np.nan, dtype=np.float32)
    out[valid] = table[gap[valid], high[valid]]
    out[valid & (gap == 0)] = 0.0
    return out


def _transient_frames(tables: dict) -> np.ndarray:
    """Frames that differ from both sides while the frames either side of them are alike
    (flashes, a brief occlusion): bool ``[num_frames]``. For a run of at most
    ``_TRANSIENT_FRAMES`` frames between frames p and q, with distances in units of
    :data:`_MIN_DISTANCE` (the larger of the two features): when some frame of the run is at least
    1 from both p and q, and p and q are at most a third of that apart, the frames of the run that
    are at least 0.5 from both, and twice as far as p from q, are transient."""
    num_frames = tables["H"].shape[1]
    frames = np.arange(num_frames)
    transient = np.zeros(num_frames, dtype=bool)

    def combined(first, second):
        return np.fmax(*(_pair_distance(tables[name], first, second) / _MIN_DISTANCE[name] for name in ("H", "B")))

    for length in range(1, _TRANSIENT_FRAMES + 1):
        before, after = frames - 1, frames + length  # p and q around the run frames..frames+length-1
        bridge = combined(before, after)
        legs = [np.fmin(combined(before, frames + k), combined(frames + k, after)) for k in range(length)]
        strongest = np.max(np.stack(legs), axis=0)  # NaN where the run leaves the video
        found = (strongest >= 1.0) & (bridge * 3.0 <= strongest)
        for k in range(length):  # within such a run, the frames that differ from both sides
            marked = found & (legs[k] >= 0.5) & (legs[k] >= 2.0 * bridge)
            transient[np.flatnonzero(marked) + k] = True
    return transient


def _without_transients(table: np.ndarray, transient: np.ndarray) -> np.ndarray:
    """The gap table with every pair that has a transient frame in it set to NaN (not counted)."""
    if not transient.any():
        return table
    gaps = np.arange(MAX_GAP + 1)[:, None]
    later = np.arange(transient.size)[None, :]
    sooner = later - gaps
    touched = transient[later] | transient[np.clip(sooner, 0, None)]
    return np.where(touched, np.float32(np.nan), table)


def _usual_change(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Median distance at each gap of the ``_BASE_WINDOW`` pairs ending at frame t (``before``)
    and of those starting at frame t (``after``: pairs whose earlier frame is t), [gap, frame]; for
    the gaps :data:`_COMPARED_GAPS` only (NaN at the others, which no test reads)."""
    gaps, num_frames = table.shape
    window = _BASE_WINDOW
    padded = np.concatenate([np.full((_COMPARED_GAPS.size, window - 1), np.nan, np.float32), table[_COMPARED_GAPS],
                             np.full((_COMPARED_GAPS.size, window - 1 + MAX_GAP), np.nan, np.float32)], axis=1)
    medians = median_of_numbers(np.lib.stride_tricks.sliding_window_view(padded, window, axis=1))
    before, after = (np.full((gaps, num_frames), np.nan, np.float32) for _ in range(2))
    before[_COMPARED_GAPS] = medians[:, :num_frames]  # windows ending at t
    for row, g in enumerate(_COMPARED_GAPS):
        after[g] = medians[row, window - 1 + g:window - 1 + g + num_frames]
    return before, after


def median_of_numbers(values: np.ndarray) -> np.ndarray:
    """The median over the last axis of the values that are not NaN, NaN where there are none: the
    result of ``np.nanmedian``, several times quicker and without its warning on all-NaN rows."""
    ordered = np.sort(values, axis=-1)  # NaN last
    count = np.count_nonzero(~np.isnan(values), axis=-1)[..., None]
    low = np.take_along_axis(ordered, np.maximum(count - 1, 0) // 2, axis=-1)
    high = np.take_along_axis(ordered, count // 2, axis=-1)  # NaN where count is 0
    return ((low + high) / 2)[..., 0]


def _mean_of_numbers(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Element-wise mean of the values that are not NaN (NaN where neither is), without the
    warning of ``np.nanmean``: silencing it would change the process's warning filters, which
    threads share (shot detection runs on several threads in ``vclip keyframes --workers``)."""
    count = (~np.isnan(first)).astype(np.float32) + ~np.isnan(second)
    total = np.nan_to_num(first) + np.nan_to_num(second)
    with np.errstate(invalid="ignore", divide="ignore"):  # per thread, unlike warning filters
        return np.where(count > 0, total / count, np.float32(np.nan))


def _boundary_evidence(tables: dict, usual: dict, first: np.ndarray, last: np.ndarray, *, spread: int,
                       with_flashes: dict | None = None, found_before: np.ndarray | None = None) -> np.ndarray:
    """How clearly frames up to ``first`` and from ``last`` on belong to different shots: for the
    pairs (first - j, last + j), j = 0..spread, their distance divided by the usual distance at
    that gap (the mean of the medians of the pairs just before ``first`` and just after ``last``,
    leaving out a side that reaches past a boundary counted in ``found_before``) plus a noise floor; the
    smallest over the pairs, the largest over the two features; 0 where the pairs are closer than
    :data:`_MIN_DISTANCE`. For a cut, ``with_flashes`` (the tables before flashes were left out)
    is given, and the evidence is also 0 where the change is less than half the change over
    :data:`_ABRUPT_SPAN` more frames each side (a gradual change, not a cut), and where it looks
    like motion: less than :data:`_ABOVE_NEIGHBOURS` times the change of a frame pair beside it, or
    a frame of the :data:`_NEW_LOOK` before (after) within :data:`_NEW_SHARE` of it of the first new
    (last old) frame, or within :data:`_NEW_SHARE_WITH_FLASHES` counting the frames left out as flashes;
    and 0 in both features where either changes less than :data:`_EACH_ABOVE_NEIGHBOURS` times a
    frame pair beside it."""
    best = np.zeros(first.shape, dtype=np.float32)
    alike = np.zeros(first.shape, dtype=bool)  # a feature changing at the cut about as beside it
    for name, table in tables.items():
        before, after = usual[name]
        ratios, distances = [], []
        for j in range(spread + 1):
            a, z = first - j, last + j
            gap = np.clip(z - a, 1, MAX_GAP)
            distance = _pair_distance(table, a, z)
            base_before = _at(before, gap, a)
            base_after = _at(after, gap, z)
            base = _mean_of_numbers(base_before, base_after)
            if found_before is not None:  # a side whose pairs reach past a boundary found already
                n = found_before.size - 1
                reach_before, reach_after = np.clip(a - gap - _BASE_WINDOW, 0, n), np.clip(z + gap + _BASE_WINDOW, 0, n)
                crossed_before = found_before[np.clip(a + 1, 0, n)] > found_before[reach_before]
                crossed_after = found_before[reach_after] > found_before[np.clip(z + 1, 0, n)]
                base = np.where(crossed_before & ~crossed_after & ~np.isnan(base_after), base_after, base)
                base = np.where(crossed_after & ~crossed_before & ~np.isnan(base_before), base_before, base)
            base = np.where(np.isnan(base), 0.0, base)
            ratios.append(distance / (base + _NOISE_FLOOR[name]))
            distances.append(distance)
        ratio = np.fmin.reduce(np.stack(ratios), axis=0)  # NaN only where all are: nanmin without its warning
        distance = np.fmin.reduce(np.stack(distances), axis=0)
        ratio = np.where(distance >= _MIN_DISTANCE[name], ratio, 0.0)
        if with_flashes is not None:  # a cut makes the whole change at once, and for good: the frames further out
            jump = _pair_distance(table, first, last)  # differ about as much as these two
            across = _pair_distance(table, first - _ABRUPT_SPAN, last + _ABRUPT_SPAN)
            across = np.where(np.isnan(across), jump, across)
            beside = np.fmax(_pair_distance(table, first - 1, first), _pair_distance(table, last, last + 1))
            # NaN (pairs past the video's ends, or over a flash) compares False: no sign of motion
            motion = ((jump < _ABOVE_NEIGHBOURS * beside) | (_nearest_picture(table, first, last) < _NEW_SHARE * jump)
                      | (_nearest_picture(with_flashes[name], first, last) < _NEW_SHARE_WITH_FLASHES * jump))
            ratio = np.where((jump >= _ABRUPT_SHARE * across) & (across >= _LASTING_SHARE * jump) & ~motion,
                             ratio, 0.0)
            alike |= jump < _EACH_ABOVE_NEIGHBOURS * beside
        best = np.fmax(best, np.nan_to_num(ratio))
    return np.where(alike, np.float32(0.0), best)


def _nearest_picture(table: np.ndarray, first: np.ndarray, last: np.ndarray) -> np.ndarray:
    """The least distance of frame ``last`` to the :data:`_NEW_LOOK` frames before ``first``, and
    of frame ``first`` to the :data:`_NEW_LOOK` after ``last`` (NaN where there are none)."""
    offsets = np.arange(2, _NEW_LOOK + 1).reshape((-1,) + (1,) * np.ndim(first))  # one row per frame looked at
    pairs = np.concatenate([_pair_distance(table, last - offsets, last), _pair_distance(table, first, first + offsets)])
    return np.fmin.reduce(pairs, axis=0)


def _at(table: np.ndarray, gap: np.ndarray, frame: np.ndarray) -> np.ndarray:
    frame = np.asarray(frame)
    gap = np.broadcast_to(gap, frame.shape)
    valid = (frame >= 0) & (frame < table.shape[1])
    out = np.full(frame.shape, np.nan, dtype=np.float32)
    out[valid] = table[gap[valid], frame[valid]]
    return out


def _fades(signals: SceneSignals) -> list[ShotBoundary]:
    """Transitions through black: every run of black frames that is not at either end of the video,
    with the dimming frames before it and the brightening frames after it."""
    mean = signals.luma_mean
    dark = signals.dark_share >= _DARK_SHARE
    num_frames = mean.size
    found = []
    t = 0
    while t < num_frames:
        if not dark[t]:
            t += 1
            continue
        run_start = t
        while t < num_frames and dark[t]:
            t += 1
        if run_start == 0 or t == num_frames:
            continue
        # Black between brighter shots, not a dark shot: the run is far darker than both sides.
        reach = 2 * MAX_GAP
        brightest_before = mean[max(0, run_start - reach):run_start].max()
        brightest_after = mean[t:t + reach].max()
        if mean[run_start:t].min() > min(_DARK_LUMA, _FADE_DEPTH * min(brightest_before, brightest_after)):
            continue
        # The fade-out starts after the last frame at least as bright as the frames before it;
        # the fade-in ends at the first frame about as bright as the frames after it.
        start = run_start
        while start > 0 and mean[start - 1] < _FADE_SETTLED * mean[max(0, start - 1 - _FADE_LOOK):start - 1].max(
                initial=0):
            start -= 1
        end = t
        while end + 1 < num_frames and mean[end] < _FADE_SETTLED * mean[end:end + 1 + _FADE_LOOK].max():
            end += 1
        found.append(ShotBoundary(frame=end, start=start, kind="fade"))
    return found


def _local_maxima(values: np.ndarray, threshold: float, radius: int) -> list[int]:
    """Indices whose value is at least ``threshold`` and the largest within ``radius`` each side
    (the first of equal values)."""
    padded = np.pad(values, radius, constant_values=-np.inf)
    windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * radius + 1)
    before, after = windows[:, :radius].max(axis=1), windows[:, radius + 1:].max(axis=1)
    return np.flatnonzero((values >= threshold) & (values > before) & (values >= after)).tolist()


def shot_boundaries(signals: SceneSignals, threshold: float) -> list[ShotBoundary]:
    """Fades, then cuts, then gradual transitions from the per-frame tables (module documentation)."""
    num_frames = signals.luma_mean.size
    if num_frames < 2:
        return []
    transient = _transient_frames(signals.distances)
    tables = {name: _without_transients(table, transient) for name, table in signals.distances.items()}
    usual = {name: _usual_change(table) for name, table in tables.items()}
    frames = np.arange(num_frames)
    fades = _fades(signals)
    taken = np.zeros(num_frames, dtype=bool)  # frames inside a boundary found already
    for fade in fades:
        taken[max(0, fade.start - 2):fade.frame + 3] = True
    # Flashes are out of the tables already, so a cut is one pair: the frame before and the frame.
    cut_evidence = _boundary_evidence(tables, usual, frames - 1, frames, spread=0, with_flashes=signals.distances)
    cut_evidence[0] = 0.0
    # A shot lasts longer than a flash: of cuts closer than that, the strongest.
    peaks = _local_maxima(cut_evidence, threshold, _TRANSIENT_FRAMES)
    cuts = [ShotBoundary(b, b, "cut") for b in peaks if not taken[b]]
    for cut in cuts:
        taken[cut.frame] = True
    starts = np.zeros(num_frames, dtype=bool)  # first frames of the shots found so far (cuts, fade ends)
    for boundary in cuts + fades:
        starts[boundary.frame] = True
        starts[boundary.start] = True
    found_before = np.concatenate([[0], np.cumsum(starts)])
    half_widths = np.asarray(_HALF_WIDTHS)[:, None]  # one row of evidence per half-width, in one pass
    evidence = _boundary_evidence(tables, usual, frames - half_widths, frames + half_widths, spread=_PAIR_SPREAD,
                                  found_before=found_before)
    # A window that straddles a boundary found already is that boundary's evidence.
    taken_before = np.concatenate([[0], np.cumsum(taken)])
    for row, h in enumerate(_HALF_WIDTHS):
        low = np.clip(frames - h - _PAIR_SPREAD, 0, num_frames)
        high = np.clip(frames + h + _PAIR_SPREAD + 1, 0, num_frames)
        evidence[row, taken_before[high] - taken_before[low] > 0] = 0.0
    strongest = evidence.max(axis=0)
    # A wide window reaches a transition from further off than a narrow one, so the strongest
    # evidence may lie off its middle: around each peak, the frame whose frames either side are
    # best explained as blends is the middle.
    candidates = []
    half_widths = half_widths[:, 0]
    for peak in _local_maxima(strongest, threshold, _PEAK_RADIUS):
        first_centre = max(0, peak - _PEAK_RADIUS)
        # every half-width (its row) and centre around the peak whose evidence stands out (the peak's, at least)
        rows, centres = np.nonzero(evidence[:, first_centre:peak + _PEAK_RADIUS + 1] >= threshold)
        centres += first_centre
        betweenness = _betweenness(tables["B"], centres, half_widths[rows] + _PAIR_SPREAD)
        best = np.lexsort((rows, centres, betweenness))[0]  # the most blend-like; then the first centre, the narrowest
        between, centre, h = float(betweenness[best]), int(centres[best]), int(half_widths[rows[best]])
        if between <= _BETWEEN:
            start, end = _transition_span(tables["B"], centre, h + _PAIR_SPREAD)
            if (_path_length(tables["B"], start - 1, end) <= _STRAIGHT
                    and (start == 0 or _moved_share(signals.thumbnails[start - 1], signals.thumbnails[end])
                         >= _MOVED_SHARE)
                    and not _moving_inside(signals.thumbnails, start, end)):
                candidates.append((between, ShotBoundary(end, start, "dissolve")))
    dissolves: list[ShotBoundary] = []
    for _, boundary in sorted(candidates, key=lambda c: c[0]):  # the clearest first; no overlaps
        if all(boundary.frame < other.start or boundary.start > other.frame for other in dissolves):
            dissolves.append(boundary)
    found, seen = [], set()
    for boundary in sorted(cuts + fades + dissolves, key=lambda b: b.frame):
        if boundary.frame not in seen and boundary.frame > 0:
            seen.add(boundary.frame)
            found.append(boundary)
    return found


def _betweenness(table: np.ndarray, centres: np.ndarray, half_widths: np.ndarray) -> np.ndarray:
    """How far frames between a = centre - half_width and z = centre + half_width are from being
    blends of a and z, for each centre and half-width: the largest ``(d(a, m) + d(m, z)) / d(a, z)``
    over m at a quarter, half and three quarters of the way (1 when m is a blend: the median block
    change of a blend is that fraction of the whole; about 2 when the pictures are unrelated, as in
    fast motion), or infinity when the blends do not move steadily from a to z."""
    a, z = centres - half_widths, centres + half_widths
    whole = _pair_distance(table, a, z)[:, None]
    middles = np.stack([centres - half_widths // 2, centres, centres + half_widths // 2], axis=1)
    from_a, to_z = _pair_distance(table, a[:, None], middles), _pair_distance(table, middles, z[:, None])
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.max((from_a + to_z) / whole, axis=1)  # NaN where a frame is missing: not finite
    steady = np.all(np.diff(from_a, axis=1) >= 0, axis=1) & np.all(np.diff(to_z, axis=1) <= 0, axis=1)
    return np.where(np.isfinite(value) & steady, value, np.inf)


def _path_length(table: np.ndarray, first: int, last: int) -> float:
    """The block changes of the frame pairs from ``first`` to ``last`` added up, over the change
    from ``first`` to ``last``: about 1 for a blend, more for motion; 0 where that change is 0 or
    not in the table (over a flash), which no test then refuses."""
    first = max(0, first)
    whole = float(_pair_distance(table, np.asarray(first), np.asarray(last)))
    steps = float(np.nansum(table[1, first + 1:last + 1]))  # pairs over a flash are NaN: left out
    return steps / whole if whole > 0 else 0.0


def _transition_span(table: np.ndarray, centre: int, half_width: int) -> tuple[int, int]:
    """First and last-plus-one frames of a gradual transition around ``centre``: with frames a and
    z ``half_width`` before and after it, each frame t between is a share
    ``d(a, t) / (d(a, t) + d(t, z))`` of the way from a to z (block distances); the transition
    starts after the last frame below 25% and ends at the first frame above 75% (mostly the new
    shot: the motion of the shots makes the last few percent uncertain)."""
    num_frames = table.shape[1]
    a, z = max(0, centre - half_width), min(num_frames - 1, centre + half_width)
    between = np.arange(a, z + 1)
    from_a, to_z = _pair_distance(table, np.asarray(a), between), _pair_distance(table, between, np.asarray(z))
    with np.errstate(all="ignore"):
        share = np.nan_to_num(from_a / (from_a + to_z), nan=0.5)
    low = np.flatnonzero((share <= _SPAN_EDGE) & (between <= centre))
    high = np.flatnonzero((share >= 1.0 - _SPAN_EDGE) & (between >= centre))
    start = int(between[low[-1]]) + 1 if low.size else a
    end = int(between[high[0]]) if high.size else z
    return start, max(end, start)
