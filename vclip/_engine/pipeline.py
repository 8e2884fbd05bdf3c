"""What a decode request carries: the clips of one video, how pictures become output (resolved
once), where each decoded frame goes, and counters of decode work."""

from __future__ import annotations

import threading
import weakref
from collections import defaultdict
from dataclasses import dataclass, field, fields

import numpy as np

from .._validation import fail
from ..index import VideoIndex
from ..sampling import scaled_size
from ..transforms import FrameGeometry, TransformSpec
from .layout import clip_shape as layout_clip_shape


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


def needs_any(target: ClipTarget, frames) -> bool:
    """Whether clip ``target`` has any of ``frames`` (e.g. the frames a failed decode lost)."""
    return bool(np.isin(target.frames, np.asarray(frames, dtype=np.int64)).any())


def frame_destinations(targets: tuple[ClipTarget, ...] | list[ClipTarget]) -> dict[int, list[tuple[int, int]]]:
    """For each requested frame, the (target number, position in clip) pairs that want it."""
    destinations: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for number, target in enumerate(targets):
        for position, frame in enumerate(target.frames.tolist()):
            destinations[frame].append((number, position))
    return destinations


@dataclass(frozen=True)
class Conversion:
    """How decoded pictures become output, resolved once per request.

    Attributes:
        spec: The concrete transform (never None: no transform is the identity spec, RGB uint8
            ``THWC``).
        scaling_factor: Frames are first downscaled to ``round(W*f) x round(H*f)`` (area average);
            ``resize``/``crop`` then apply to that size.
        native_rgb24: No transform (or only ``orientation="stored"``) and no downscale: the CPU
            path returns FFmpeg's own rgb24 conversion bit for bit, turned as the display matrix
            says (the GPU's kernel matches it within its tolerance).
    """

    spec: TransformSpec
    scaling_factor: float = 1.0
    native_rgb24: bool = False

    @property
    def dtype(self) -> str:
        return self.spec.dtype

    @property
    def layout(self) -> str:
        return self.spec.layout

    def geometry(self, width: int, height: int, rng: np.random.Generator | None = None) -> FrameGeometry:
        """One clip's geometry for a ``width`` x ``height`` video with square pixels and no display
        matrix (random crop/flip drawn from ``rng``)."""
        base_size = scaled_size(width, height, self.scaling_factor)
        return self.spec.geometry(width, height, rng, base_size=base_size)

    def index_geometry(self, index: VideoIndex, rng: np.random.Generator | None = None) -> FrameGeometry:
        """One clip's geometry for the video of ``index``: its size, display orientation and pixel aspect."""
        base_size = scaled_size(index.width, index.height, self.scaling_factor)
        return self.spec.geometry(
            index.width, index.height, rng, base_size=base_size, orientation=index.orientation,
            sample_aspect_ratio=index.sample_aspect_ratio,
        )

    def clip_shape(self, frames: int, geometry: FrameGeometry) -> tuple[int, ...]:
        """Shape of one clip of ``frames`` frames."""
        return layout_clip_shape(self.spec.layout, frames, geometry.output_height, geometry.output_width)


def resolve_transform(transform: TransformSpec | None, scaling_factor: float = 1.0) -> Conversion:
    """The :class:`Conversion` for a public ``transform`` argument and a sampler's scaling factor."""
    if transform is not None and not isinstance(transform, TransformSpec):
        raise fail("transform", transform, "a vclip.TransformSpec or None")
    native = (transform is None or transform == TransformSpec(orientation="stored")) and scaling_factor == 1.0
    return Conversion(transform or TransformSpec(), float(scaling_factor), native)


class VideoLookups:
    """Per-video lookups of the decode loops as plain Python objects, built once per index."""

    def __init__(self, index: VideoIndex):
        self.frame_of_pts = dict(zip(index.pts.tolist(), range(index.num_frames)))
        self.packet_pts = index.packet_pts.tolist()
        self.packet_frame = index.packet_frame.tolist()


_lookups: weakref.WeakKeyDictionary[VideoIndex, VideoLookups] = weakref.WeakKeyDictionary()
_lookups_lock = threading.Lock()


def video_lookups(index: VideoIndex) -> VideoLookups:
    """The (cached) :class:`VideoLookups` of ``index``."""
    with _lookups_lock:
        lookups = _lookups.get(index)
        if lookups is None:
            lookups = _lookups[index] = VideoLookups(index)
        return lookups
