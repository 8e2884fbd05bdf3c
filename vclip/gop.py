"""Groups of pictures: bounding decode work per clip in long GOPs, and what it does to where clips
start; ranges of frames cut at keyframes (:func:`keyframe_chunks`), so that no group is decoded twice.

A clip starting ``k`` frames after a keyframe costs about ``k`` decoded pictures before its first
frame; with a keyframe every 250 frames a random start wastes 125 on average. :func:`bound_lead`
moves a clip whose lead ``k`` exceeds ``N = max_lead_frames`` earlier, to start ``k mod (N + 1)``
frames after its keyframe (its frames keep their spacing). Starts drawn uniformly thus stay
uniform, but over the first ``N + 1`` frames of each GOP only: positions later in a GOP are never
starts. A clip of a segment never moves before the segment's first frame: its lead counts from
that frame when the keyframe is earlier. :func:`start_distribution` measures the change against
uniform starts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ._index.record import VideoIndex
from .errors import check_integer

__all__ = ["StartDistribution", "bound_lead", "keyframe_chunks", "lead_frames", "start_distribution"]


def _keyframe_before(index: VideoIndex, frame: int) -> int:
    keyframes = index.keyframe_indices
    position = int(np.searchsorted(keyframes, frame, side="right")) - 1
    return int(keyframes[max(position, 0)]) if keyframes.size else 0


def lead_frames(index: VideoIndex, start: int) -> int:
    """Frames between the keyframe at or before ``start`` and ``start`` (presentation order)."""
    return int(start) - _keyframe_before(index, int(start))


def bound_lead(index: VideoIndex, frames: np.ndarray, max_lead_frames: int, *, first_frame: int = 0) -> np.ndarray:
    """``frames`` (one clip, ascending) moved earlier so that it starts at most ``max_lead_frames``
    after its keyframe (lead ``k`` becomes ``k mod (max_lead_frames + 1)``); unchanged when it
    already does. The clip never moves before ``first_frame`` (a segment's first frame): the lead
    counts from the later of the keyframe and ``first_frame``."""
    check_integer("max_lead_frames", max_lead_frames, minimum=0)
    check_integer("first_frame", first_frame, minimum=0)
    start = int(frames[0])
    lead = start - max(_keyframe_before(index, start), first_frame)
    return frames if lead <= max_lead_frames else frames - (lead - lead % (max_lead_frames + 1))


@dataclass(frozen=True)
class StartDistribution:
    """Where clips start within their GOP, against starts spread uniformly over the same positions.

    Attributes:
        edges: Bin edges of the position within the GOP, as a fraction of its length ([0, 1]).
        observed: Share of the clips starting in each bin.
        uniform: Share each bin would get if every frame that can start a clip were equally likely.
        total_variation: Half the summed absolute difference of the two (0: same distribution,
            1: disjoint).
        mean_lead: Mean frames from the keyframe to the start, observed and uniform.
    """

    edges: np.ndarray
    observed: np.ndarray
    uniform: np.ndarray
    total_variation: float
    mean_lead: tuple[float, float]

    def __str__(self) -> str:
        rows = [f"position in GOP  observed  uniform   (total variation {self.total_variation:.3f}; "
                f"mean lead {self.mean_lead[0]:.1f} frames, uniform {self.mean_lead[1]:.1f})"]
        for low, high, seen, even in zip(self.edges[:-1], self.edges[1:], self.observed, self.uniform):
            rows.append(f"  [{low:.1f}, {high:.1f})    {100 * seen:6.1f}%  {100 * even:6.1f}%")
        return "\n".join(rows)


def _gop_positions(index: VideoIndex, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(relative position within the GOP, lead in frames) of each start."""
    keyframes = index.keyframe_indices
    bounds = np.append(keyframes, index.num_frames)
    slot = np.clip(np.searchsorted(keyframes, starts, side="right") - 1, 0, len(keyframes) - 1)
    lead = starts - keyframes[slot]
    return lead / (bounds[slot + 1] - keyframes[slot]), lead


def start_distribution(clips: Iterable[tuple[VideoIndex, int]], possible: Iterable[tuple[VideoIndex, np.ndarray]],
                       bins: int = 10) -> StartDistribution:
    """Compare where clips start within their GOP with uniform starts.

    Args:
        clips: ``(index, start frame)`` of every drawn clip.
        possible: ``(index, frames that may start a clip)`` of every video, each weighted by how
            many clips that video gave (pass it once per clip drawn from it).
        bins: Bins of the position within the GOP.
    """
    observed_positions, observed_leads = [], []
    for index, start in clips:
        position, lead = _gop_positions(index, np.array([start]))
        observed_positions.append(position)
        observed_leads.append(lead)
    uniform_positions, uniform_weights, uniform_leads = [], [], []
    for index, starts in possible:
        position, lead = _gop_positions(index, np.asarray(starts))
        uniform_positions.append(position)
        uniform_weights.append(np.full(position.size, 1.0 / position.size))
        uniform_leads.append(lead * (1.0 / position.size))
    edges = np.linspace(0.0, 1.0, bins + 1)
    observed = np.histogram(np.concatenate(observed_positions), edges)[0].astype(float)
    uniform = np.histogram(np.concatenate(uniform_positions), edges, weights=np.concatenate(uniform_weights))[0]
    observed /= max(observed.sum(), 1)
    uniform /= max(uniform.sum(), 1e-12)
    videos = max(len(uniform_positions), 1)
    return StartDistribution(
        edges=edges, observed=observed, uniform=uniform,
        total_variation=float(0.5 * np.abs(observed - uniform).sum()),
        mean_lead=(float(np.concatenate(observed_leads).mean()),
                   float(sum(lead.sum() for lead in uniform_leads) / videos)),
    )


def keyframe_chunks(index: VideoIndex, chunk_frames: int) -> list[tuple[int, int]]:
    """``[start, stop)`` frame ranges of at least ``chunk_frames`` (but the last) that start at
    keyframes, so that no group of pictures is decoded twice."""
    boundaries = [0]
    for keyframe in index.keyframe_indices.tolist():
        if keyframe - boundaries[-1] >= chunk_frames:
            boundaries.append(keyframe)
    boundaries.append(index.num_frames)
    return [(start, stop) for start, stop in zip(boundaries[:-1], boundaries[1:]) if stop > start]
