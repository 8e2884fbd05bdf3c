"""The six sampling modes. Samplers are pure: a video's frame count (and keyframes) plus a seed
give the clips, as arrays of frame indices in presentation order, the same on every device."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal, Sequence

import numpy as np

from .index import VideoIndex

__all__ = [
    "ClipSampler",
    "contiguous",
    "strided",
    "keyframe",
    "indexed",
    "jittered",
    "downscaled",
    "scaled_size",
    "check_scaling_factor",
]

Mode = Literal["contiguous", "strided", "keyframe", "indexed", "jittered"]
StartPolicy = Literal["random", "even", "step"]
EndPolicy = Literal["repeat_last", "wrap", "drop", "error"]
KeyframeSelection = Literal["first", "even"]

_MODES = ("contiguous", "strided", "keyframe", "indexed", "jittered")
_START_POLICIES = ("random", "even", "step")
_END_POLICIES = ("repeat_last", "wrap", "drop", "error")


def _one_of(name: str, value, allowed: Sequence[str]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} ({value!r}) must be one of {', '.join(map(repr, allowed))}")


def _at_least(name: str, value, minimum: int) -> None:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
        raise TypeError(f"{name} ({value!r}) must be an integer")
    if value < minimum:
        raise ValueError(f"{name} ({value}) must be >= {minimum}")


def check_scaling_factor(scaling_factor) -> None:
    """Raise ValueError unless ``0 < scaling_factor <= 1``."""
    if isinstance(scaling_factor, bool) or not isinstance(scaling_factor, (int, float)) or not 0 < scaling_factor <= 1:
        raise ValueError(f"scaling_factor ({scaling_factor!r}) must be in (0, 1]")


def scaled_size(width: int, height: int, scaling_factor: float) -> tuple[int, int]:
    """``(round(width * f), round(height * f))``, rounding halves up, at least 1 pixel."""
    return (max(1, math.floor(width * scaling_factor + 0.5)), max(1, math.floor(height * scaling_factor + 0.5)))


@dataclass(frozen=True)
class ClipSampler:
    """Which frames make up the clips of one video.

    Build one with :func:`contiguous`, :func:`strided`, :func:`keyframe`, :func:`indexed`,
    :func:`jittered`, and :func:`downscaled` (which combines with any of them).

    Attributes:
        mode: The temporal mode.
        sequence_length: Frames per clip (temporal modes).
        stride: Distance between consecutive frames of a clip.
        jitter: Each position of a jittered clip moves by a random offset in ``[-jitter, jitter]``.
        frame_indices: The frames of an ``indexed`` clip, in order, duplicates kept.
        max_frames: Keyframe mode: at most this many keyframes (all when None).
        keyframe_selection: Keyframe mode: the ``"first"`` ``max_frames`` or ``"even"``-ly chosen ones.
        starts: Where clips start: ``"random"`` (uniform), ``"even"`` (``clips_per_video`` evenly
            spaced) or ``"step"`` (every ``step`` frames).
        clips_per_video: Clips per video for ``"random"`` and ``"even"`` starts.
        step: Frames between starts for ``"step"`` starts.
        end_policy: What a clip that runs past the last frame does: ``"repeat_last"`` repeats the
            last frame, ``"wrap"`` continues from frame 0, ``"drop"`` discards the clip,
            ``"error"`` raises. Clips only run past the end when the video is shorter than one clip.
        scaling_factor: Frames come out at ``round(W*f) x round(H*f)``, ``0 < f <= 1`` (downscaled mode).
        seed: Seed for random starts and jitter when :meth:`sample` gets none.
    """

    mode: Mode
    sequence_length: int | None = None
    stride: int = 1
    jitter: int = 0
    frame_indices: tuple[int, ...] | None = None
    max_frames: int | None = None
    keyframe_selection: KeyframeSelection = "even"
    starts: StartPolicy = "random"
    clips_per_video: int = 1
    step: int | None = None
    end_policy: EndPolicy = "repeat_last"
    scaling_factor: float = 1.0
    seed: int | None = None

    def __post_init__(self):
        _one_of("mode", self.mode, _MODES)
        _one_of("starts", self.starts, _START_POLICIES)
        _one_of("end_policy", self.end_policy, _END_POLICIES)
        _one_of("keyframe_selection", self.keyframe_selection, ("first", "even"))
        if self.mode in ("contiguous", "strided", "jittered"):
            if self.sequence_length is None:
                raise ValueError(f"sequence_length is required for {self.mode} clips")
            _at_least("sequence_length", self.sequence_length, 1)
            _at_least("stride", self.stride, 1)
            _at_least("jitter", self.jitter, 0)
            _at_least("clips_per_video", self.clips_per_video, 1)
            if self.starts == "step":
                if self.step is None:
                    raise ValueError("step is required when starts='step'")
                _at_least("step", self.step, 1)
        if self.mode == "indexed":
            if self.frame_indices is None or len(self.frame_indices) == 0:
                raise ValueError("frame_indices must not be empty")
            object.__setattr__(self, "frame_indices", tuple(int(i) for i in self.frame_indices))
        if self.max_frames is not None:
            _at_least("max_frames", self.max_frames, 1)
        check_scaling_factor(self.scaling_factor)

    @property
    def span(self) -> int:
        """Frames from the first to the last position of a temporal clip, both included."""
        return (self.sequence_length - 1) * self.stride + 1 if self.sequence_length else 0

    def output_size(self, width: int, height: int) -> tuple[int, int]:
        """Frame size the clips come out at for a ``width`` x ``height`` stream."""
        return scaled_size(width, height, self.scaling_factor)

    def sample(self, video: VideoIndex | int, *, seed: int | np.random.Generator | None = None) -> list[np.ndarray]:
        """Clips of one video, each an int64 array of frame indices in presentation order.

        Args:
            video: The video's index, or its frame count (enough for every mode but keyframe).
            seed: Seed or generator for random starts and jitter; default: the sampler's ``seed``.

        Raises:
            ValueError: ``end_policy="error"`` and the video is shorter than one clip; keyframe
                mode without an index.
            IndexError: An indexed frame is out of range.
        """
        num_frames = video.num_frames if isinstance(video, VideoIndex) else int(video)
        name = video.path if isinstance(video, VideoIndex) else "video"
        if num_frames < 1:
            raise ValueError(f"{name}: has no frames to sample")
        if self.mode == "indexed":
            if isinstance(video, VideoIndex):
                return [video.check_frame_indices(self.frame_indices)]
            return [_check_indices(self.frame_indices, num_frames)]
        if self.mode == "keyframe":
            if not isinstance(video, VideoIndex):
                raise ValueError("keyframe sampling needs the video's VideoIndex, not a frame count")
            return [self._select_keyframes(video.keyframe_indices)]
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(
            self.seed if seed is None else seed
        )
        clips = []
        for start in self._clip_starts(num_frames, rng):
            positions = start + np.arange(self.sequence_length, dtype=np.int64) * self.stride
            if positions[-1] >= num_frames:
                if self.end_policy == "drop":
                    continue
                if self.end_policy == "error":
                    raise ValueError(
                        f"{name}: a clip needs {self.span} frames (sequence_length={self.sequence_length}, "
                        f"stride={self.stride}) but the video has {num_frames}; end_policy='error'"
                    )
                positions = np.minimum(positions, num_frames - 1) if self.end_policy == "repeat_last" else (
                    positions % num_frames
                )
            if self.jitter:
                offsets = rng.integers(-self.jitter, self.jitter + 1, size=positions.size)
                positions = np.sort(np.clip(positions + offsets, 0, num_frames - 1))
            clips.append(positions)
        return clips

    def _clip_starts(self, num_frames: int, rng: np.random.Generator) -> np.ndarray:
        last_start = max(num_frames - self.span, 0)
        if self.starts == "random":
            return rng.integers(0, last_start + 1, size=self.clips_per_video)
        if self.starts == "even":
            if self.clips_per_video == 1:
                return np.array([last_start // 2])
            return np.floor(np.linspace(0, last_start, self.clips_per_video) + 0.5).astype(np.int64)
        return np.arange(0, last_start + 1, self.step, dtype=np.int64)

    def _select_keyframes(self, keyframes: np.ndarray) -> np.ndarray:
        keyframes = keyframes.astype(np.int64)
        if self.max_frames is None or keyframes.size <= self.max_frames:
            return keyframes
        if self.keyframe_selection == "first":
            return keyframes[: self.max_frames]
        chosen = np.floor(np.linspace(0, keyframes.size - 1, self.max_frames) + 0.5).astype(np.int64)
        return keyframes[chosen]


def _check_indices(indices: Sequence[int], num_frames: int) -> np.ndarray:
    array = np.asarray(indices, dtype=np.int64)
    bad = array[(array < -num_frames) | (array >= num_frames)]
    if bad.size:
        raise IndexError(f"frame index {int(bad[0])} is out of range [0, {num_frames - 1}] ({num_frames} frames)")
    return np.where(array < 0, array + num_frames, array)


_CLIP_OPTIONS = "starts, clips_per_video, step, end_policy, scaling_factor, seed"


def contiguous(sequence_length: int, **options) -> ClipSampler:
    """Clips of consecutive frames ``s, s+1, ..., s+L-1``. Options: {}."""
    return ClipSampler("contiguous", sequence_length=sequence_length, **options)


def strided(sequence_length: int, stride: int, **options) -> ClipSampler:
    """Clips ``s, s+k, ..., s+(L-1)k`` with ``k = stride``. Options: {}."""
    return ClipSampler("strided", sequence_length=sequence_length, stride=stride, **options)


def jittered(sequence_length: int, stride: int, jitter: int, **options) -> ClipSampler:
    """Strided positions each moved by a seeded random offset in ``[-jitter, jitter]``, kept in
    range and in order. Options: {}."""
    return ClipSampler("jittered", sequence_length=sequence_length, stride=stride, jitter=jitter, **options)


for _factory in (contiguous, strided, jittered):
    _factory.__doc__ = _factory.__doc__.format(_CLIP_OPTIONS)


def keyframe(max_frames: int | None = None, *, selection: KeyframeSelection = "even", scaling_factor: float = 1.0) -> ClipSampler:
    """One clip of the stream's keyframes; with ``max_frames``, the first ones or evenly chosen ones."""
    return ClipSampler("keyframe", max_frames=max_frames, keyframe_selection=selection, scaling_factor=scaling_factor)


def indexed(frame_indices: Sequence[int], *, scaling_factor: float = 1.0) -> ClipSampler:
    """One clip of exactly these frames, in this order, duplicates kept (negative counts from the end)."""
    return ClipSampler("indexed", frame_indices=tuple(frame_indices), scaling_factor=scaling_factor)


def downscaled(sampler: ClipSampler, scaling_factor: float) -> ClipSampler:
    """The same clips as ``sampler`` at ``round(W*f) x round(H*f)`` (antialiased)."""
    return replace(sampler, scaling_factor=scaling_factor)
