"""Pieces shared by the decoder backends: where each decoded frame goes, and decode statistics."""

from __future__ import annotations

import threading
import weakref
from collections import defaultdict
from dataclasses import dataclass, field, fields

import numpy as np

from .index import VideoIndex
from .transforms import FrameGeometry, TransformSpec, output_shape


@dataclass(frozen=True, eq=False)
class ClipTarget:
    """One clip to decode into slot ``slot`` of an output batch."""

    frames: np.ndarray
    geometry: FrameGeometry
    slot: int


@dataclass(frozen=True, eq=False)
class VideoJob:
    """All clips wanted from one video in one batch."""

    index: VideoIndex
    targets: tuple[ClipTarget, ...]


@dataclass
class DecodeStats:
    """Counters of decode work; thread-safe ``add``. Seconds are summed over worker threads:
    ``demux_seconds`` reading packets, ``decode_seconds`` decoding them, ``convert_seconds``
    turning decoded frames into output on the host (the CPU path's NumPy transform)."""

    videos: int = 0
    segments: int = 0
    packets_sent: int = 0
    frames_requested: int = 0
    frames_delivered: int = 0
    fallback_videos: int = 0
    demux_seconds: float = 0.0
    decode_seconds: float = 0.0
    convert_seconds: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **amounts) -> None:
        with self._lock:
            for name, amount in amounts.items():
                setattr(self, name, getattr(self, name) + amount)

    def as_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if not f.name.startswith("_")}


def frame_destinations(targets: tuple[ClipTarget, ...] | list[ClipTarget]) -> dict[int, list[tuple[int, int]]]:
    """For each requested frame, the (target number, position in clip) pairs that want it."""
    destinations: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for number, target in enumerate(targets):
        for position, frame in enumerate(target.frames.tolist()):
            destinations[frame].append((number, position))
    return destinations


def clip_shape(spec: TransformSpec | None, frames: int, geometry: FrameGeometry) -> tuple[int, ...]:
    """Shape of one clip; without a spec, RGB frames channel last."""
    layout = spec.layout if spec is not None else "THWC"
    return output_shape(layout, frames, geometry.output_height, geometry.output_width)


def frame_view(clip: np.ndarray, layout: str, position: int) -> np.ndarray:
    """The ``[H, W, 3]`` view of frame ``position`` inside one clip array of ``layout``."""
    if layout == "THWC":
        return clip[position]
    if layout == "TCHW":
        return clip[position].transpose(1, 2, 0)
    return clip[:, position].transpose(1, 2, 0)


class VideoLookups:
    """Per-video lookups of the decode loops as plain Python objects, built once per index."""

    def __init__(self, index: VideoIndex):
        self.frame_of_pts = dict(zip(index.pts.tolist(), range(index.num_frames)))
        self.packet_pts = index.packet_pts.tolist()
        self.packet_frame = index.packet_frame.tolist()


_lookups: "weakref.WeakKeyDictionary[VideoIndex, VideoLookups]" = weakref.WeakKeyDictionary()
_lookups_lock = threading.Lock()


def video_lookups(index: VideoIndex) -> VideoLookups:
    """The (cached) :class:`VideoLookups` of ``index``."""
    with _lookups_lock:
        lookups = _lookups.get(index)
        if lookups is None:
            lookups = _lookups[index] = VideoLookups(index)
        return lookups
