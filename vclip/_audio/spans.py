"""The times a clip's audio covers: each position's own span, the clip's span, and the longest span
any clip of a video can have (what a batch of audio must hold).

A position's span is its frame's display interval ``[pts, pts + duration)`` (the duration: up to
the next frame's pts, or the stream's last frame duration); sampled in seconds (``fps``,
``duration``), its target time's interval ``[t, t + stride / fps)``, so audio is cut by the same
times as the frames. A clip's span runs from the earliest start to the latest end of its positions
(a strided clip gets the whole span, the frames between its positions included). Positions the end
policy padded have no span, and every span is clipped to the video (and to the segment, when the
clips come from one)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._index.record import VideoIndex
from ..sampling import ClipSampler, SampledClip, Segment, segment_frames

__all__ = ["ClipSpans", "clip_spans", "longest_spans"]


class ClipSpans(NamedTuple):
    """Where one clip lies in time, in seconds.

    Attributes:
        starts, ends: float64 ``[T]``: each position's span; equal where the position has none
            (padded by the end policy, or outside the video or segment).
        start, end: The clip's span (``start == end``: none).
    """

    starts: np.ndarray
    ends: np.ndarray
    start: float
    end: float


def _bounds(video: VideoIndex, segment: Segment | None) -> tuple[float, float]:
    low, high = video.start_seconds, video.end_seconds
    if segment is not None:
        low = max(low, segment[0]) if segment[0] is not None else low
        high = min(high, segment[1]) if segment[1] is not None else high
    return low, high


def _seconds(video: VideoIndex, frames: np.ndarray) -> np.ndarray:
    """The pts of ``frames`` in seconds (as :attr:`VideoIndex.pts_seconds` has them)."""
    return video.pts[frames] * float(video.time_base)


def _frame_ends(video: VideoIndex, frames: np.ndarray) -> np.ndarray:
    """When each of ``frames`` stops being shown (seconds)."""
    ends = _seconds(video, np.minimum(frames + 1, video.num_frames - 1))
    last = frames == video.num_frames - 1
    ends[last] = video.end_seconds
    return ends


def clip_spans(video: VideoIndex, clip: SampledClip, sampler: ClipSampler, segment: Segment | None = None
               ) -> ClipSpans:
    """The spans of ``clip`` (as :meth:`ClipSampler.sample_with_padding` drew it) of ``video``."""
    frames = np.asarray(clip.frame_indices, dtype=np.int64)
    if clip.target_seconds is not None:
        starts = np.asarray(clip.target_seconds, dtype=np.float64)
        ends = starts + sampler.timing(video)[1]
    else:
        starts = _seconds(video, frames)
        ends = _frame_ends(video, frames)
    low, high = _bounds(video, segment)
    starts = np.clip(starts, low, high)
    ends = np.clip(ends, starts, high)
    padded = np.asarray(clip.padded, dtype=bool)
    ends = np.where(padded, starts, ends)
    real = ends > starts
    if not real.any():
        return ClipSpans(starts, ends, float(low), float(low))
    return ClipSpans(starts, ends, float(starts[real].min()), float(ends[real].max()))


def longest_spans(sampler: ClipSampler, video: VideoIndex, segment: Segment | None = None) -> tuple[float, float]:
    """``(clip seconds, position seconds)``: the longest span a clip of ``video`` (in ``segment``)
    drawn by ``sampler`` can have, and the longest span of one of its positions.

    Raises:
        ValueError: As :meth:`ClipSampler.sample` (the mode needs frames the video lacks).
    """
    low, high = _bounds(video, segment)
    if sampler.mode in ("indexed", "keyframe"):
        clip = sampler.sample_with_padding(video, seed=0)[0]
        spans = clip_spans(video, clip, sampler, segment)
        return spans.end - spans.start, float((spans.ends - spans.starts).max())
    if sampler.in_seconds:
        length, period = sampler.timing(video)
        spread = (length - 1) * period + 2 * sampler.jitter * period / sampler.stride + period
        return min(spread, high - low), min(period, high - low)
    first, count = (0, video.num_frames) if segment is None else segment_frames(video, segment)[:2]
    frames = np.arange(first, first + count, dtype=np.int64)
    starts = np.clip(_seconds(video, frames), low, high)
    ends = np.clip(_frame_ends(video, frames), starts, high)
    width = min(sampler.span + 2 * sampler.jitter, count)
    clip_seconds = ends[width - 1:] - starts[:count - width + 1]
    return float(clip_seconds.max()), float((ends - starts).max())
