"""The six sampling modes. Samplers are pure: a video's frame count (and keyframes) plus a seed
give the clips, as arrays of frame indices in presentation order, the same on every device."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal, NamedTuple, Sequence

import numpy as np

from ._validation import (
    check_choice,
    check_integer,
    check_number,
    check_optional_integer,
    fail,
)
from .index import VideoIndex

__all__ = [
    "ClipSampler",
    "SampledClip",
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
    """Kept for callers outside this module (the loader); use ``_validation.check_choice``."""
    check_choice(name, value, allowed)


def _at_least(name: str, value, minimum: int) -> None:
    """Kept for callers outside this module (the loader); use ``_validation.check_integer``."""
    check_integer(name, value, minimum=minimum)


def check_scaling_factor(scaling_factor) -> float:
    """``scaling_factor`` as a float; raises :class:`~vclip.ArgumentError` unless ``0 < f <= 1``."""
    return check_number("scaling_factor", scaling_factor, minimum=0, maximum=1, minimum_inclusive=False)


class SampledClip(NamedTuple):
    """One clip as :meth:`ClipSampler.sample_with_padding` draws it.

    Attributes:
        frame_indices: int64 ``[T]``: frame numbers in presentation order.
        padded: bool ``[T]``: True where the clip ran past the last frame and the end policy
            filled the position (``"repeat_last"``: the last frame again; ``"wrap"``: a frame
            from the start). All False for clips that fit the video.
    """

    frame_indices: np.ndarray
    padded: np.ndarray


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
        check_choice("mode", self.mode, _MODES)
        check_choice("starts", self.starts, _START_POLICIES)
        check_choice("end_policy", self.end_policy, _END_POLICIES)
        check_choice("keyframe_selection", self.keyframe_selection, ("first", "even"))
        temporal = self.mode in ("contiguous", "strided", "jittered")
        if temporal:
            if self.sequence_length is None:
                raise fail("sequence_length", None, f"an integer >= 1 (frames per clip; {self.mode} clips need one)")
            self._set_integer("sequence_length", 1)
            self._set_integer("stride", 1)
            self._set_integer("jitter", 0)
            self._set_integer("clips_per_video", 1)
            if self.starts == "step":
                if self.step is None:
                    raise fail("step", None, "an integer >= 1 (frames between clip starts; starts='step' needs one)")
                self._set_integer("step", 1)
        if self.mode == "indexed":
            object.__setattr__(self, "frame_indices", _frame_index_tuple(self.frame_indices))
        if self.max_frames is not None:
            self._set_integer("max_frames", 1)
        if self.seed is not None:
            self._set_integer("seed", 0)
        object.__setattr__(self, "scaling_factor", check_scaling_factor(self.scaling_factor))

    def _set_integer(self, name: str, minimum: int) -> None:
        """Check the field ``name`` and store it as a plain ``int`` (NumPy integers accepted)."""
        object.__setattr__(self, name, check_integer(name, getattr(self, name), minimum=minimum))

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
                mode without an index; a video without frames.
            ArgumentError: ``video`` or ``seed`` of the wrong type.
            IndexError: An indexed frame is out of range.
        """
        return [clip.frame_indices for clip in self.sample_with_padding(video, seed=seed)]

    def sample_with_padding(
        self, video: VideoIndex | int, *, seed: int | np.random.Generator | None = None
    ) -> list[SampledClip]:
        """The clips of :meth:`sample` (the same draws), each with which positions the end policy padded.

        Returns:
            One :class:`SampledClip` ``(frame_indices, padded)`` per clip; ``padded`` is True
            where the clip ran past the last frame (``"repeat_last"`` and ``"wrap"`` fill those
            positions; ``"drop"`` leaves such clips out, so the list may be empty).

        Raises:
            As :meth:`sample`.
        """
        if isinstance(video, VideoIndex):
            num_frames, name = video.num_frames, video.path
        else:
            if not isinstance(video, (int, np.integer)) or isinstance(video, bool):
                raise fail("video", video, "a VideoIndex or a frame count (an integer)")
            num_frames, name = int(video), "video"
        if not isinstance(seed, np.random.Generator):
            seed = check_optional_integer("seed", seed, minimum=0, none_means="(the sampler's own seed)")
        if num_frames < 1:
            raise ValueError(f"{name}: has no frames to sample")
        if self.mode in ("indexed", "keyframe"):
            if self.mode == "indexed":
                wanted = self.frame_indices or ()
                frames = (video.check_frame_indices(wanted) if isinstance(video, VideoIndex)
                          else _check_indices(wanted, num_frames))
            elif not isinstance(video, VideoIndex):
                raise ValueError("keyframe sampling needs the video's VideoIndex, not a frame count")
            else:
                frames = self._select_keyframes(video.keyframe_indices)
            return [SampledClip(frames, np.zeros(frames.shape, dtype=bool))]
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(
            self.seed if seed is None else seed
        )
        clips = []
        length = self.sequence_length or 0  # set for every temporal mode (checked when built)
        for start in self._clip_starts(num_frames, rng):
            positions = start + np.arange(length, dtype=np.int64) * self.stride
            padded = positions >= num_frames
            if padded[-1]:
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
            clips.append(SampledClip(positions, padded))
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


def _frame_index_tuple(frame_indices) -> tuple[int, ...]:
    """The frames of an indexed clip as a tuple of ints (NumPy integers accepted)."""
    expected = "a non-empty sequence of integers (frame numbers; negative counts from the end)"
    if frame_indices is None or isinstance(frame_indices, (str, bytes)):
        raise fail("frame_indices", frame_indices, expected)
    try:
        if not isinstance(frame_indices, (np.ndarray, list, tuple, range)):
            frame_indices = list(frame_indices)  # any other iterable, once
        array = np.asarray(frame_indices)
    except (TypeError, ValueError):
        raise fail("frame_indices", frame_indices, expected) from None
    if array.ndim != 1 or array.size == 0 or array.dtype.kind not in "iu":
        raise fail("frame_indices", frame_indices, expected)
    return tuple(int(i) for i in array.tolist())


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
    _factory.__doc__ = (_factory.__doc__ or "").format(_CLIP_OPTIONS)


def keyframe(
    max_frames: int | None = None, *, selection: KeyframeSelection = "even", scaling_factor: float = 1.0
) -> ClipSampler:
    """One clip of the stream's keyframes; with ``max_frames``, the first ones or evenly chosen ones."""
    return ClipSampler("keyframe", max_frames=max_frames, keyframe_selection=selection, scaling_factor=scaling_factor)


def indexed(frame_indices: Sequence[int] | np.ndarray, *, scaling_factor: float = 1.0) -> ClipSampler:
    """One clip of exactly these frames, in this order, duplicates kept (negative counts from the end)."""
    return ClipSampler("indexed", frame_indices=frame_indices, scaling_factor=scaling_factor)  # type: ignore[arg-type]


def downscaled(sampler: ClipSampler, scaling_factor: float) -> ClipSampler:
    """The same clips as ``sampler`` at ``round(W*f) x round(H*f)`` (antialiased)."""
    return replace(sampler, scaling_factor=scaling_factor)
