"""What a decode request carries: the clips of one video, how pictures become output (resolved
once), where each decoded frame goes, and counters of decode work."""

from __future__ import annotations

import threading
import weakref
from collections import defaultdict
from dataclasses import dataclass, field, fields

import numpy as np

from .._index.record import VideoIndex
from ..sampling import scaled_size
from ..transforms import NO_COLOR_CHANGE, ColorAdjustment, FrameGeometry, SampleDraw, TransformSpec, as_transform_spec
from .layout import clip_shape as layout_clip_shape


@dataclass(frozen=True, eq=False)
class ClipTarget:
    """One clip (or one spatial view of it) to decode into slot ``slot`` of an output batch.

    Attributes:
        frames: Frame numbers of the clip.
        geometry, color: Where its pixels come from and how their colour changes (with per-frame
            draws: those of its first frame).
        slot: Position in the output batch.
        frame_draws: With per-frame draws, ``(geometry, color)`` of each frame; None when the
            clip's frames share one.
    """

    frames: np.ndarray
    geometry: FrameGeometry
    slot: int
    color: ColorAdjustment = NO_COLOR_CHANGE
    frame_draws: tuple[tuple[FrameGeometry, ColorAdjustment], ...] | None = None

    @classmethod
    def of(cls, frames: np.ndarray, draw: SampleDraw, slot: int) -> ClipTarget:
        """The target of one sample's ``draw``."""
        return cls(frames, draw.geometry, slot, draw.color, draw.frames)

    def draw_at(self, position: int) -> tuple[FrameGeometry, ColorAdjustment]:
        """The geometry and colour changes of the clip's frame ``position``."""
        if self.frame_draws is None:
            return self.geometry, self.color
        return self.frame_draws[position]


@dataclass(frozen=True, eq=False)
class VideoRequest:
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
    def storage_dtype(self) -> str:
        """The dtype of output arrays: ``dtype``, but uint16 for bfloat16 (its bit patterns, as
        NumPy and CuPy have no bfloat16)."""
        return "uint16" if self.spec.dtype == "bfloat16" else self.spec.dtype

    @property
    def views(self) -> int:
        """Samples per clip (the spec's spatial views)."""
        return self.spec.spatial_views

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

    def draw(self, index: VideoIndex, rng: np.random.Generator | None, frames: int) -> tuple[SampleDraw, ...]:
        """Everything one clip of ``frames`` frames of the video of ``index`` gets (one draw per
        spatial view), from ``rng`` (see :meth:`vclip.TransformSpec.draw`)."""
        base_size = scaled_size(index.width, index.height, self.scaling_factor)
        return self.spec.draw(
            index.width, index.height, rng, frames=frames, base_size=base_size, orientation=index.orientation,
            sample_aspect_ratio=index.sample_aspect_ratio,
        )

    def clip_shape(self, frames: int, geometry: FrameGeometry) -> tuple[int, ...]:
        """Shape of one clip of ``frames`` frames."""
        return layout_clip_shape(self.spec.layout, frames, geometry.output_height, geometry.output_width)


def resolve_transform(transform: TransformSpec | None, scaling_factor: float = 1.0) -> Conversion:
    """The :class:`Conversion` for a public ``transform`` argument (a spec, a torchvision v2
    pipeline it fuses, or None) and a sampler's scaling factor."""
    transform = as_transform_spec(transform)
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
