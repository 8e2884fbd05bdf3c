"""Shot boundaries from the scene signals: the decisions of the scene method, on the host, the same
whichever device computed the signals. One function per detector, each reading its group of
:class:`~vclip._scenes.rules.SceneRules`: :func:`flash_frames`, :func:`usual_change`,
:func:`find_fades`, :func:`find_cuts` and :func:`find_dissolves`; :func:`shot_boundaries` runs them
in that order (:mod:`vclip.keyframes` describes the method).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._engine.host_fast import sum_neighbours
from .features import MAX_GAP, SceneSignals
from .rules import CutRules, DissolveRules, FadeRules, FlashRules, SceneRules, UsualChangeRules

__all__ = ["ShotBoundary", "find_cuts", "find_dissolves", "find_fades", "flash_frames", "median_of_numbers",
           "shot_boundaries", "usual_change"]

DEFAULT_RULES = SceneRules()


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


def shot_boundaries(signals: SceneSignals, threshold: float, rules: SceneRules = DEFAULT_RULES) -> list[ShotBoundary]:
    """Flashes left out, the usual change, fades, then cuts, then dissolves (each outside the
    boundaries found before it), in frame order; frame 0 is never one."""
    num_frames = signals.luma_mean.size
    if num_frames < 2:
        return []
    flashes = flash_frames(signals.distances, rules.flashes, rules.usual_change)
    tables = {name: _without_flashes(table, flashes) for name, table in signals.distances.items()}
    usual = {name: usual_change(table, rules.usual_change, rules.dissolves) for name, table in tables.items()}
    fades = find_fades(signals, rules.fades)
    taken = np.zeros(num_frames, dtype=bool)  # frames inside a boundary found already
    for fade in fades:
        taken[max(0, fade.start - rules.fades.margin_frames):fade.frame + rules.fades.margin_frames + 1] = True
    cuts = [cut for cut in find_cuts(tables, usual, signals.distances, threshold, rules) if not taken[cut.frame]]
    for cut in cuts:
        taken[cut.frame] = True
    dissolves = find_dissolves(tables, usual, signals.thumbnails, cuts + fades, taken, threshold, rules)
    found, seen = [], set()
    for boundary in sorted(cuts + fades + dissolves, key=lambda b: b.frame):
        if boundary.frame not in seen and boundary.frame > 0:
            seen.add(boundary.frame)
            found.append(boundary)
    return found


# -- flashes ------------------------------------------------------------------------------------------

def flash_frames(tables: dict, flashes: FlashRules, usual: UsualChangeRules) -> np.ndarray:
    """Frames that differ from both sides while the frames either side of them are alike
    (flashes, a brief occlusion): bool ``[num_frames]``. For a run of at most
    ``longest_frames`` frames between frames p and q, with distances in units of the least changes
    (the larger of the two features): when some frame of the run is at least ``run_differs`` from
    both p and q, and p and q are ``sides_closer`` times closer than that, the frames of the run
    that are at least ``frame_differs`` from both, and ``frame_over_sides`` times as far as p from
    q, are flashes."""
    num_frames = tables["H"].shape[1]
    frames = np.arange(num_frames)
    found_frames = np.zeros(num_frames, dtype=bool)
    unit = usual.least_change

    def combined(first, second):
        return np.fmax(*(_pair_distance(tables[name], first, second) / unit[name] for name in ("H", "B")))

    for length in range(1, flashes.longest_frames + 1):
        before, after = frames - 1, frames + length  # p and q around the run frames..frames+length-1
        bridge = combined(before, after)
        legs = [np.fmin(combined(before, frames + k), combined(frames + k, after)) for k in range(length)]
        strongest = np.max(np.stack(legs), axis=0)  # NaN where the run leaves the video
        found = (strongest >= flashes.run_differs) & (bridge * flashes.sides_closer <= strongest)
        for k in range(length):  # within such a run, the frames that differ from both sides
            marked = found & (legs[k] >= flashes.frame_differs) & (legs[k] >= flashes.frame_over_sides * bridge)
            found_frames[np.flatnonzero(marked) + k] = True
    return found_frames


def _without_flashes(table: np.ndarray, flashes: np.ndarray) -> np.ndarray:
    """The gap table with every pair that has a flash frame in it set to NaN (not counted)."""
    if not flashes.any():
        return table
    gaps = np.arange(MAX_GAP + 1)[:, None]
    later = np.arange(flashes.size)[None, :]
    sooner = later - gaps
    touched = flashes[later] | flashes[np.clip(sooner, 0, None)]
    return np.where(touched, np.float32(np.nan), table)


# -- the usual change ---------------------------------------------------------------------------------

def usual_change(table: np.ndarray, usual: UsualChangeRules,
                 dissolves: DissolveRules) -> tuple[np.ndarray, np.ndarray]:
    """Median distance at each gap of the ``pairs_each_side`` pairs ending at frame t (``before``)
    and of those starting at frame t (``after``: pairs whose earlier frame is t), [gap, frame]; at
    the gaps the cuts and dissolves read only (NaN at the others)."""
    gaps, num_frames = table.shape
    window = usual.pairs_each_side
    compared = np.array(dissolves.compared_gaps)
    padded = np.concatenate([np.full((compared.size, window - 1), np.nan, np.float32), table[compared],
                             np.full((compared.size, window - 1 + MAX_GAP), np.nan, np.float32)], axis=1)
    medians = median_of_numbers(np.lib.stride_tricks.sliding_window_view(padded, window, axis=1))
    before, after = (np.full((gaps, num_frames), np.nan, np.float32) for _ in range(2))
    before[compared] = medians[:, :num_frames]  # windows ending at t
    for row, g in enumerate(compared):
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


def _standing_out(tables: dict, usual: dict, first: np.ndarray, last: np.ndarray, *, spread: int,
                  rules: UsualChangeRules, found_before: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Per feature, how clearly frames up to ``first`` and from ``last`` on belong to different
    shots: for the pairs (first - j, last + j), j = 0..spread, their distance divided by the usual
    distance at that gap (the mean of the medians of the pairs just before ``first`` and just after
    ``last``, leaving out a side that reaches past a boundary counted in ``found_before``) plus the
    noise floor; the smallest over the pairs; 0 where the pairs are closer than the least change."""
    standing_out = {}
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
                reach_before = np.clip(a - gap - rules.pairs_each_side, 0, n)
                reach_after = np.clip(z + gap + rules.pairs_each_side, 0, n)
                crossed_before = found_before[np.clip(a + 1, 0, n)] > found_before[reach_before]
                crossed_after = found_before[reach_after] > found_before[np.clip(z + 1, 0, n)]
                base = np.where(crossed_before & ~crossed_after & ~np.isnan(base_after), base_after, base)
                base = np.where(crossed_after & ~crossed_before & ~np.isnan(base_before), base_before, base)
            base = np.where(np.isnan(base), 0.0, base)
            ratios.append(distance / (base + rules.noise_floor[name]))
            distances.append(distance)
        ratio = np.fmin.reduce(np.stack(ratios), axis=0)  # NaN only where all are: nanmin without its warning
        distance = np.fmin.reduce(np.stack(distances), axis=0)
        standing_out[name] = np.where(distance >= rules.least_change[name], ratio, 0.0)
    return standing_out


# -- fades --------------------------------------------------------------------------------------------

def find_fades(signals: SceneSignals, fades: FadeRules) -> list[ShotBoundary]:
    """Transitions through black: every run of black frames that is not at either end of the video,
    far darker than both sides, with the dimming frames before it and the brightening frames after it."""
    mean = signals.luma_mean
    dark = signals.dark_share >= fades.black_share
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
        brightest_before = mean[max(0, run_start - fades.reach_frames):run_start].max()
        brightest_after = mean[t:t + fades.reach_frames].max()
        if mean[run_start:t].min() > min(fades.black_luma, fades.depth * min(brightest_before, brightest_after)):
            continue
        # The fade-out starts after the last frame at least as bright as the frames before it;
        # the fade-in ends at the first frame about as bright as the frames after it.
        start = run_start
        while start > 0 and mean[start - 1] < fades.settled * mean[
                max(0, start - 1 - fades.settle_frames):start - 1].max(initial=0):
            start -= 1
        end = t
        while end + 1 < num_frames and mean[end] < fades.settled * mean[end:end + 1 + fades.settle_frames].max():
            end += 1
        found.append(ShotBoundary(frame=end, start=start, kind="fade"))
    return found


# -- cuts ---------------------------------------------------------------------------------------------

def find_cuts(tables: dict, usual: dict, with_flashes: dict, threshold: float,
              rules: SceneRules) -> list[ShotBoundary]:
    """Frames whose change from the frame before stands out ``threshold`` times from the usual
    change at gap 1 in either feature (flashes left out of ``tables``: a cut is one pair) and passes
    :func:`_cut_evidence`'s tests; of cuts closer than the longest flash, the one of most evidence."""
    frames = np.arange(tables["H"].shape[1])
    evidence = _cut_evidence(tables, usual, with_flashes, frames - 1, frames, rules)
    evidence[0] = 0.0
    return [ShotBoundary(b, b, "cut") for b in _local_maxima(evidence, threshold, rules.flashes.longest_frames)]


def _cut_evidence(tables: dict, usual: dict, with_flashes: dict, first: np.ndarray, last: np.ndarray,
                  rules: SceneRules) -> np.ndarray:
    """How clearly ``first`` and ``last`` belong to different shots (:func:`_standing_out`, the
    largest over the two features), 0 where a feature's change is no cut (:func:`_made_at_once`,
    :func:`_looks_like_motion`) and 0 in both where either changes about as much as the frame pairs
    beside it (``with_flashes``: the tables before flashes were left out)."""
    cuts = rules.cuts
    standing_out = _standing_out(tables, usual, first, last, spread=0, rules=rules.usual_change)
    best = np.zeros(first.shape, dtype=np.float32)
    alike = np.zeros(first.shape, dtype=bool)  # a feature changing at the cut about as beside it
    for name, table in tables.items():
        jump = _pair_distance(table, first, last)
        beside = np.fmax(_pair_distance(table, first - 1, first), _pair_distance(table, last, last + 1))
        cut_like = _made_at_once(table, first, last, jump, cuts) & ~_looks_like_motion(
            table, with_flashes[name], first, last, jump, beside, cuts)
        ratio = np.where(cut_like, standing_out[name], 0.0)
        alike |= jump < cuts.both_above_neighbours * beside
        best = np.fmax(best, np.nan_to_num(ratio))
    return np.where(alike, np.float32(0.0), best)


def _made_at_once(table: np.ndarray, first: np.ndarray, last: np.ndarray, jump: np.ndarray,
                  cuts: CutRules) -> np.ndarray:
    """Whether the change ``jump`` from ``first`` to ``last`` is made at once and for good: at least
    ``abrupt_share`` of the change over ``wider_frames`` more frames each side, which is at least
    ``lasting_share`` of it (the frames further out differ about as much as these two)."""
    across = _pair_distance(table, first - cuts.wider_frames, last + cuts.wider_frames)
    across = np.where(np.isnan(across), jump, across)
    return (jump >= cuts.abrupt_share * across) & (across >= cuts.lasting_share * jump)


def _looks_like_motion(table: np.ndarray, with_flashes: np.ndarray, first: np.ndarray, last: np.ndarray,
                       jump: np.ndarray, beside: np.ndarray, cuts: CutRules) -> np.ndarray:
    """Whether the change ``jump`` looks like motion: less than ``above_neighbours`` times the
    change of a frame pair ``beside`` it, or a frame of the ``look_frames`` before (after) within
    ``new_share`` of it of the first new (last old) frame, or within ``new_share_with_flashes``
    counting the frames left out as flashes (``with_flashes``). NaN (pairs past the video's ends,
    or over a flash) compares False: no sign of motion."""
    return ((jump < cuts.above_neighbours * beside)
            | (_nearest_picture(table, first, last, cuts.look_frames) < cuts.new_share * jump)
            | (_nearest_picture(with_flashes, first, last, cuts.look_frames) < cuts.new_share_with_flashes * jump))


def _nearest_picture(table: np.ndarray, first: np.ndarray, last: np.ndarray, look_frames: int) -> np.ndarray:
    """The least distance of frame ``last`` to the ``look_frames`` frames before ``first``, and
    of frame ``first`` to the ``look_frames`` after ``last`` (NaN where there are none)."""
    offsets = np.arange(2, look_frames + 1).reshape((-1,) + (1,) * np.ndim(first))  # one row per frame looked at
    pairs = np.concatenate([_pair_distance(table, last - offsets, last), _pair_distance(table, first, first + offsets)])
    return np.fmin.reduce(pairs, axis=0)


# -- dissolves ----------------------------------------------------------------------------------------

def find_dissolves(tables: dict, usual: dict, thumbnails: np.ndarray, found: list[ShotBoundary],
                   taken: np.ndarray, threshold: float, rules: SceneRules) -> list[ShotBoundary]:
    """Gradual transitions: windows of every half-width whose two sides stand out ``threshold``
    times from the usual change, away from the boundaries ``found`` already (``taken``: their
    frames); around each peak of that evidence, the most blend-like window, kept when it passes
    every dissolve test (:func:`_is_dissolve`); of overlapping ones, the most blend-like."""
    dissolves = rules.dissolves
    spread = dissolves.pair_spread
    num_frames = taken.size
    frames = np.arange(num_frames)
    starts = np.zeros(num_frames, dtype=bool)  # first frames of the shots found so far (cuts, fade ends)
    for boundary in found:
        starts[boundary.frame] = True
        starts[boundary.start] = True
    found_before = np.concatenate([[0], np.cumsum(starts)])
    half_widths = np.asarray(dissolves.half_widths)
    standing_out = _standing_out(tables, usual, frames - half_widths[:, None], frames + half_widths[:, None],
                                 spread=spread, rules=rules.usual_change, found_before=found_before)
    evidence = np.zeros((half_widths.size, num_frames), dtype=np.float32)  # one row per half-width
    for ratio in standing_out.values():
        evidence = np.fmax(evidence, np.nan_to_num(ratio))
    # A window that straddles a boundary found already is that boundary's evidence.
    taken_before = np.concatenate([[0], np.cumsum(taken)])
    for row, h in enumerate(dissolves.half_widths):
        low = np.clip(frames - h - spread, 0, num_frames)
        high = np.clip(frames + h + spread + 1, 0, num_frames)
        evidence[row, taken_before[high] - taken_before[low] > 0] = 0.0
    blocks = tables["B"]
    candidates = []
    # A wide window reaches a transition from further off than a narrow one, so the strongest
    # evidence may lie off its middle: around each peak, the frame whose frames either side are
    # best explained as blends is the middle.
    for peak in _local_maxima(evidence.max(axis=0), threshold, dissolves.peak_radius):
        first_centre = max(0, peak - dissolves.peak_radius)
        # every half-width (its row) and centre around the peak whose evidence stands out (the peak's, at least)
        rows, centres = np.nonzero(evidence[:, first_centre:peak + dissolves.peak_radius + 1] >= threshold)
        centres += first_centre
        betweenness = _betweenness(blocks, centres, half_widths[rows] + spread)
        best = np.lexsort((rows, centres, betweenness))[0]  # the most blend-like; then the first centre, the narrowest
        between, centre, h = float(betweenness[best]), int(centres[best]), int(half_widths[rows[best]])
        if not _blends_between(between, dissolves):
            continue
        start, end = _transition_span(blocks, centre, h + spread, dissolves.span_edge)
        if _is_dissolve(blocks, thumbnails, start, end, dissolves):
            candidates.append((between, ShotBoundary(end, start, "dissolve")))
    kept: list[ShotBoundary] = []
    for _, boundary in sorted(candidates, key=lambda c: c[0]):  # the clearest first; no overlaps
        if all(boundary.frame < other.start or boundary.start > other.frame for other in kept):
            kept.append(boundary)
    return kept


def _blends_between(betweenness: float, dissolves: DissolveRules) -> bool:
    """Whether the middle frames of a window are blends of its two sides (:func:`_betweenness`)."""
    return betweenness <= dissolves.max_betweenness


def _is_dissolve(blocks: np.ndarray, thumbnails: np.ndarray, start: int, end: int, dissolves: DissolveRules) -> bool:
    """Whether the blended frames from ``start`` to ``end`` are a dissolve, not a camera move: it
    goes straight from the old shot to the new, its new picture is not the old one moved, and its
    middle frames are no moved copies of the frames before them."""
    return (_goes_straight(blocks, start, end, dissolves)
            and _new_picture_is_not_the_old_moved(thumbnails, start, end, dissolves)
            and not _middle_frames_moved(thumbnails, start, end, dissolves))


def _goes_straight(blocks: np.ndarray, start: int, end: int, dissolves: DissolveRules) -> bool:
    """Whether the block changes of the frame pairs from ``start - 1`` to ``end`` add up to at most
    ``max_path`` times the change across (:func:`_path_length`)."""
    return _path_length(blocks, start - 1, end) <= dissolves.max_path


def _new_picture_is_not_the_old_moved(thumbnails: np.ndarray, start: int, end: int,
                                      dissolves: DissolveRules) -> bool:
    """Whether the first new frame (``end``) is no mosaic of the last old one (``start - 1``):
    :func:`_moved_share` at least ``moved_share`` (no old frame at the video's start: True)."""
    return start == 0 or _moved_share(thumbnails[start - 1], thumbnails[end], dissolves) >= dissolves.moved_share


def _middle_frames_moved(thumbnails: np.ndarray, start: int, end: int,
                         dissolves: DissolveRules = DEFAULT_RULES.dissolves) -> bool:
    """Whether the frames of the transition from ``start`` to ``end`` are moved copies of the
    frame before each: the median :func:`_moved_share` at a quarter, half and three quarters of the
    way below ``moving_share``; False for a transition of fewer than ``moving_frames`` frames."""
    if end - start < dissolves.moving_frames or start < 1:
        return False
    shares = [_moved_share(thumbnails[k - 1], thumbnails[k], dissolves) for k in _transition_middles(start, end)]
    return float(np.median(shares)) < dissolves.moving_share


def _transition_middles(start: int, end: int) -> list[int]:
    """The frames a quarter, half and three quarters of the way from ``start`` to ``end`` (in order, once each)."""
    return sorted({start + (end - start) // 4, (start + end) // 2, start + 3 * (end - start) // 4})


def _moved_share(old: np.ndarray, new: np.ndarray, dissolves: DissolveRules = DEFAULT_RULES.dissolves) -> float:
    """How well the blocks of the ``old`` thumbnail (``moved_block`` pixels a side), each moved up to
    ``moved_reach`` pixels, rebuild the ``new`` one: the median over ``new``'s blocks of the least
    absolute RGB difference over the moves, divided by the median without moving (1 when nothing
    moved helps, near 0 when the new picture is the old one moved); 1 for thumbnails smaller than one block."""
    size, reach = dissolves.moved_block, dissolves.moved_reach
    height, width, _ = new.shape
    rows, columns = height // size * size, width // size * size
    if not rows or not columns:
        return 1.0
    # int16: a block's sum of absolute differences is at most 16 x 3 x 255, exact and quicker than floats
    padded = np.pad(old[:rows, :columns].astype(np.int16), ((reach, reach), (reach, reach), (0, 0)), mode="edge")
    moves = np.lib.stride_tricks.sliding_window_view(padded, (rows, columns), axis=(0, 1))  # [dy, dx, ch, r, c]
    difference = np.abs(moves - np.moveaxis(new[:rows, :columns].astype(np.int16), 2, 0))
    blocks = sum_neighbours(sum_neighbours(difference, 3, axis=2)[:, :, 0], size)  # |dR| + |dG| + |dB| of each row
    blocks = sum_neighbours(blocks, size, axis=2)  # [dy, dx, block row, block column]
    typical = float(np.median(blocks[reach, reach]))
    return float(np.median(blocks.min(axis=(0, 1)))) / typical if typical > 0 else 1.0


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


def _transition_span(table: np.ndarray, centre: int, half_width: int, edge: float) -> tuple[int, int]:
    """First and last-plus-one frames of a gradual transition around ``centre``: with frames a and
    z ``half_width`` before and after it, each frame t between is a share
    ``d(a, t) / (d(a, t) + d(t, z))`` of the way from a to z (block distances); the transition
    starts after the last frame at most ``edge`` of the way and ends at the first frame at least
    ``1 - edge`` of the way (mostly the new shot: the motion of the shots makes the last few
    percent uncertain)."""
    num_frames = table.shape[1]
    a, z = max(0, centre - half_width), min(num_frames - 1, centre + half_width)
    between = np.arange(a, z + 1)
    from_a, to_z = _pair_distance(table, np.asarray(a), between), _pair_distance(table, between, np.asarray(z))
    with np.errstate(all="ignore"):
        share = np.nan_to_num(from_a / (from_a + to_z), nan=0.5)
    low = np.flatnonzero((share <= edge) & (between <= centre))
    high = np.flatnonzero((share >= 1.0 - edge) & (between >= centre))
    start = int(between[low[-1]]) + 1 if low.size else a
    end = int(between[high[0]]) if high.size else z
    return start, max(end, start)


# -- reading the tables -------------------------------------------------------------------------------

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


def _at(table: np.ndarray, gap: np.ndarray, frame: np.ndarray) -> np.ndarray:
    frame = np.asarray(frame)
    gap = np.broadcast_to(gap, frame.shape)
    valid = (frame >= 0) & (frame < table.shape[1])
    out = np.full(frame.shape, np.nan, dtype=np.float32)
    out[valid] = table[gap[valid], frame[valid]]
    return out


def _local_maxima(values: np.ndarray, threshold: float, radius: int) -> list[int]:
    """Indices whose value is at least ``threshold`` and the largest within ``radius`` each side
    (the first of equal values)."""
    padded = np.pad(values, radius, constant_values=-np.inf)
    windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * radius + 1)
    before, after = windows[:, :radius].max(axis=1), windows[:, radius + 1:].max(axis=1)
    return np.flatnonzero((values >= threshold) & (values > before) & (values >= after)).tolist()
