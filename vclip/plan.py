"""Decode plans: the least decode work that yields a set of requested frames of one video.

Every backend executes the same plan. A segment starts at a keyframe, sends packets in decode
order and stops after the last packet a requested frame needs. Requests for the same video are
merged so that each group of pictures is decoded once, and, where the bitstream marks a picture
as non-reference, it is only sent to the decoder when it was requested itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ._index.record import VideoIndex

__all__ = ["DecodeSegment", "DecodePlan", "plan_decode"]


@dataclass(frozen=True, eq=False)
class DecodeSegment:
    """One run of the decoder: start at a keyframe, flush at the end.

    Attributes:
        packets: Decode-order packet numbers to send, ascending; the first is a keyframe.
        frames: Requested frame numbers this segment yields, ascending.
    """

    packets: np.ndarray
    frames: np.ndarray

    def __repr__(self) -> str:
        return (
            f"DecodeSegment(packets={self.packets.size} from #{int(self.packets[0])} to "
            f"#{int(self.packets[-1])}, frames={self.frames.size})"
        )


@dataclass(frozen=True, eq=False)
class DecodePlan:
    """Segments that together yield every requested frame of one video exactly once."""

    index: VideoIndex
    segments: tuple[DecodeSegment, ...]
    frames: np.ndarray

    @property
    def packets_sent(self) -> int:
        """Pictures the decoder decodes (one per packet)."""
        return int(sum(segment.packets.size for segment in self.segments))

    @property
    def frames_requested(self) -> int:
        return int(self.frames.size)

    def __repr__(self) -> str:
        return (
            f"DecodePlan(path={self.index.path!r}, segments={len(self.segments)}, "
            f"frames={self.frames_requested}, packets_sent={self.packets_sent})"
        )


def plan_decode(
    index: VideoIndex,
    frame_lists: Sequence[Sequence[int] | np.ndarray],
    *,
    skip_non_reference: bool = True,
) -> DecodePlan:
    """Plan the decoding of all frames named in ``frame_lists`` (indices already in range).

    Args:
        index: The video's index.
        frame_lists: Requested frames, one list per clip; duplicates and overlaps are merged.
        skip_non_reference: Leave out non-reference pictures that were not requested.
    """
    arrays = [np.asarray(frames, dtype=np.int64).reshape(-1) for frames in frame_lists]
    needed = np.unique(np.concatenate(arrays)) if arrays else np.empty(0, np.int64)
    if needed.size == 0:
        return DecodePlan(index, (), needed)
    starts = index.decode_start_packets(needed)
    ends = index.frame_packet[needed]

    # One run per start keyframe, then join runs whose packet ranges touch or overlap.
    runs: list[list] = []
    for start in np.unique(starts):
        members = needed[starts == start]
        end = int(ends[starts == start].max())
        if runs and start <= runs[-1][1] + 1:
            runs[-1][1] = max(runs[-1][1], end)
            runs[-1][2].append(members)
        else:
            runs.append([int(start), end, [members]])

    wanted_packets = np.zeros(index.num_packets, dtype=bool)
    wanted_packets[index.frame_packet[needed]] = True
    segments = []
    for start, end, members in runs:
        span = np.arange(start, end + 1)
        if skip_non_reference:
            keep = wanted_packets[span] | index.packet_is_reference[span]
        else:
            keep = np.ones(span.size, bool)
        keep[0] = True
        segments.append(DecodeSegment(packets=span[keep], frames=np.sort(np.concatenate(members))))
    return DecodePlan(index, tuple(segments), needed)
