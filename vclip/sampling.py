"""The six sampling modes. Samplers are pure: a video's frame count (and keyframes) plus a seed
give the clips, as arrays of frame indices in presentation order, the same on every device.

The temporal modes can also be asked in seconds (``fps``, ``duration``, ``step_seconds``): then a
clip is a grid of target times and each position is the frame a player shows at its time (the
last frame whose pts <= t), chosen from the index's timestamps, so variable frame rates are exact.
A ``segment`` (start, end) in seconds keeps a video's clips inside that time window."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal, NamedTuple

import numpy as np

from ._index.record import VideoIndex
from .errors import (
    ArgumentError,
    FrameIndexError,
    NoClipFitsError,
    check_choice,
    check_integer,
    check_number,
    check_optional_integer,
    fail,
)

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
    "frames_shown_at",
    "draw_seed",
]

Mode = Literal["contiguous", "strided", "keyframe", "indexed", "jittered"]
StartPolicy = Literal["random", "even", "step"]
EndPolicy = Literal["repeat_last", "wrap", "drop", "error"]
KeyframeSelection = Literal["first", "even"]

_MODES = ("contiguous", "strided", "keyframe", "indexed", "jittered")
_START_POLICIES = ("random", "even", "step")
_END_POLICIES = ("repeat_last", "wrap", "drop", "error")


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
        target_seconds: float64 ``[T]``: sampling in seconds, the time each position was chosen
            for (its frame is the one shown then); None for clips chosen by frame number.
    """

    frame_indices: np.ndarray
    padded: np.ndarray
    target_seconds: np.ndarray | None = None


# Timestamps are compared in ticks with this slack, so that a target time computed in floating
# point that equals a frame's pts (e.g. 3 * (1/15) against 6/30) selects that frame.
_TICK_SLACK = 1e-6


def frames_shown_at(video: VideoIndex, seconds) -> np.ndarray:
    """The frame a player shows at each time: the last frame whose pts <= t (frame 0 before it).

    Args:
        video: The video's index (its pts in presentation order).
        seconds: Times in seconds, any shape.

    Returns:
        int64 frame numbers, shaped like ``seconds``.
    """
    ticks = np.asarray(seconds, dtype=np.float64) / float(video.time_base)
    shown = np.searchsorted(video.pts, ticks + _TICK_SLACK, side="right") - 1
    return np.maximum(shown, 0).astype(np.int64)


def _first_frame_from(video: VideoIndex, seconds: float) -> int:
    """The first frame whose pts >= ``seconds`` (``num_frames`` if none)."""
    return int(np.searchsorted(video.pts, seconds / float(video.time_base) - _TICK_SLACK, side="left"))


Segment = tuple[float | None, float | None]

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
        jitter: Each position of a jittered clip moves by a random offset in ``[-jitter, jitter]``;
            at most ``stride`` (larger ones are refused: positions would pass their neighbours).
            From ``2 * jitter >= stride`` on, two neighbouring positions may land on one frame.
        frame_indices: The frames of an ``indexed`` clip, in order, duplicates kept.
        max_frames: Keyframe mode: at most this many keyframes (all when None).
        keyframe_selection: Keyframe mode: the ``"first"`` ``max_frames`` or ``"even"``-ly chosen ones.
        starts: Where clips start: ``"random"`` (uniform), ``"even"`` (``clips_per_video`` evenly
            spaced) or ``"step"`` (every ``step`` frames, or ``step_seconds``).
        clips_per_video: Clips per video for ``"random"`` and ``"even"`` starts.
        step: Frames between starts for ``"step"`` starts.
        end_policy: What a clip that runs past the last frame does: ``"repeat_last"`` repeats the
            last frame, ``"wrap"`` continues from frame 0, ``"drop"`` discards the clip,
            ``"error"`` raises. Clips only run past the end when the video (or segment) is
            shorter than one clip; in seconds, when the clip's target times run past its end.
        scaling_factor: Frames come out at ``round(W*f) x round(H*f)``, ``0 < f <= 1`` (downscaled mode).
        seed: Seed for random starts and jitter when :meth:`sample` gets none.
        fps: Sampling in seconds: the target rate; position ``k`` of a clip starting at ``s`` is
            the frame shown at ``s + k * stride / fps`` (jitter moves it by whole ``1/fps`` steps).
        duration: Sampling in seconds: the seconds one clip covers. With ``fps``, a clip has
            ``round(duration * fps / stride)`` frames (``sequence_length`` may be left out); with
            ``sequence_length`` and no ``fps``, its frames are spread evenly over ``duration``;
            alone, frames come at each video's own average rate (so clip lengths vary by video).
        step_seconds: Seconds between starts for ``"step"`` starts (sampling in seconds; without
            ``fps`` or ``duration``, positions follow the video's average rate).
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
    fps: float | None = None
    duration: float | None = None
    step_seconds: float | None = None

    def __post_init__(self):
        check_choice("mode", self.mode, _MODES)
        check_choice("starts", self.starts, _START_POLICIES)
        check_choice("end_policy", self.end_policy, _END_POLICIES)
        check_choice("keyframe_selection", self.keyframe_selection, ("first", "even"))
        temporal = self.mode in ("contiguous", "strided", "jittered")
        for name in ("fps", "duration", "step_seconds"):
            if getattr(self, name) is not None:
                if not temporal:
                    raise fail(name, getattr(self, name), f"None ({self.mode} clips are chosen by frame, not by time)")
                object.__setattr__(self, name, check_number(name, getattr(self, name), minimum=0,
                                                            minimum_inclusive=False))
        if temporal:
            if self.sequence_length is None and self.duration is None:
                raise fail("sequence_length", None, f"an integer >= 1 (frames per clip; {self.mode} clips need one, "
                                                    "or a duration in seconds)")
            if self.sequence_length is not None:
                self._set_integer("sequence_length", 1)
            self._set_integer("stride", 1)
            self._set_integer("jitter", 0)
            if self.jitter > self.stride:  # positions would pass their neighbours: sorted, frames repeat
                raise fail("jitter", self.jitter, f"an integer in [0, {self.stride}] (at most the stride: a larger "
                                                  "one moves positions past their neighbours and repeats frames)")
            self._set_integer("clips_per_video", 1)
            if self.starts == "step" and self.in_seconds:
                if self.step_seconds is None:
                    raise fail("step_seconds", None, "a number > 0 (seconds between clip starts; starts='step' "
                                                     "with fps or duration steps in seconds)")
                if self.step is not None:
                    raise fail("step", self.step, "None when step_seconds is given")
            elif self.starts == "step":
                if self.step is None:
                    raise fail("step", None, "an integer >= 1 (frames between clip starts; starts='step' needs one)")
                self._set_integer("step", 1)
            elif self.step_seconds is not None:
                raise fail("step_seconds", self.step_seconds, "None unless starts='step'")
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

    @property
    def in_seconds(self) -> bool:
        """Whether clips are chosen in time (``fps``, ``duration`` or ``step_seconds`` given)."""
        return self.fps is not None or self.duration is not None or self.step_seconds is not None

    def timing(self, video: VideoIndex) -> tuple[int, float]:
        """Sampling in seconds: ``(frames per clip, seconds between positions)`` for ``video``.

        Raises:
            NoClipFitsError: The rate must come from the video, which reports none.
        """
        if self.fps is not None:
            rate = self.fps
        elif self.sequence_length is not None and self.duration is not None:
            rate = self.sequence_length * self.stride / self.duration
        elif video.average_fps > 0:
            rate = float(video.average_fps)
        else:
            raise NoClipFitsError(video.path, "reports no frame rate; pass fps= to sample it in seconds")
        length = self.clip_length or max(1, round((self.duration or 0.0) * rate / self.stride))
        return length, self.stride / rate

    @property
    def clip_length(self) -> int | None:
        """Frames of a temporal clip when every video gives the same number: ``sequence_length``,
        or ``round(duration * fps / stride)`` (at least 1); None for a ``duration`` without ``fps``,
        whose frame count follows each video's rate."""
        if self.sequence_length is not None:
            return self.sequence_length
        if self.fps is not None and self.duration is not None:
            return max(1, round(self.duration * self.fps / self.stride))
        return None

    def output_size(self, width: int, height: int) -> tuple[int, int]:
        """Frame size the clips come out at for a ``width`` x ``height`` stream."""
        return scaled_size(width, height, self.scaling_factor)

    def sample(
        self, video: VideoIndex | int, *, seed: int | np.random.Generator | None = None, segment: Segment | None = None
    ) -> list[np.ndarray]:
        """Clips of one video, each an int64 array of frame indices in presentation order.

        Args:
            video: The video's index, or its frame count (enough for every mode but keyframe and
                sampling in seconds).
            seed: Seed or generator for random starts and jitter; default: the sampler's ``seed``.
            segment: ``(start, end)`` seconds (either may be None: the video's start or end): clips
                use only the frames whose pts lie in ``[start, end)``, and the end policy pads
                (``"repeat_last"``, ``"wrap"``) inside the segment. Temporal modes, with an index.

        Raises:
            NoClipFitsError: (a ValueError) ``end_policy="error"`` and the video (or segment) is
                shorter than one clip; a video (or segment) without frames; no frame rate to
                sample in seconds.
            ArgumentError: (a ValueError) ``video``, ``seed`` or ``segment`` of the wrong type;
                keyframe mode, sampling in seconds or a segment without an index.
            FrameIndexError: (an IndexError) An indexed frame is out of range.
        """
        return [clip.frame_indices for clip in self.sample_with_padding(video, seed=seed, segment=segment)]

    def sample_with_padding(
        self, video: VideoIndex | int, *, seed: int | np.random.Generator | None = None, segment: Segment | None = None
    ) -> list[SampledClip]:
        """The clips of :meth:`sample` (the same draws), each with which positions the end policy padded.

        Returns:
            One :class:`SampledClip` ``(frame_indices, padded, target_seconds)`` per clip;
            ``padded`` is True where the clip ran past the last frame (``"repeat_last"`` and
            ``"wrap"`` fill those positions; ``"drop"`` leaves such clips out, so the list may be
            empty); ``target_seconds`` holds each position's target time when sampling in
            seconds (after the end policy and jitter), else None.

        Raises:
            NoClipFitsError, ArgumentError, FrameIndexError: As :meth:`sample`.
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
            raise NoClipFitsError(name, "has no frames to sample")
        if segment is not None or self.in_seconds:
            if not isinstance(video, VideoIndex):
                raise ArgumentError("sampling in seconds or inside a segment needs the video's VideoIndex, "
                                    "not a frame count")
            if self.mode in ("indexed", "keyframe"):
                raise fail("segment", segment, f"None ({self.mode} clips take their frames from the whole video)")
        if self.mode in ("indexed", "keyframe"):
            if self.mode == "indexed":
                wanted = self.frame_indices or ()
                frames = (video.check_frame_indices(wanted) if isinstance(video, VideoIndex)
                          else _check_indices(wanted, num_frames))
            elif not isinstance(video, VideoIndex):
                raise ArgumentError("keyframe sampling needs the video's VideoIndex, not a frame count")
            else:
                frames = self._select_keyframes(video.keyframe_indices)
            return [SampledClip(frames, np.zeros(frames.shape, dtype=bool))]
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(
            self.seed if seed is None else seed
        )
        first, where, end_seconds = 0, "the video", None
        if segment is not None:
            assert isinstance(video, VideoIndex)  # checked above
            first, num_frames, where, end_seconds = segment_frames(video, segment)
        if self.in_seconds:
            assert isinstance(video, VideoIndex)  # checked above
            end = video.end_seconds if end_seconds is None else min(end_seconds, video.end_seconds)
            return self._sample_in_seconds(video, first, first + num_frames, end, where, rng)
        clips = []
        length = self.sequence_length or 0  # set for every temporal mode (checked when built)
        for start in self._clip_starts(num_frames, rng):
            positions = start + np.arange(length, dtype=np.int64) * self.stride
            padded = positions >= num_frames
            if padded[-1]:
                if self.end_policy == "drop":
                    continue
                if self.end_policy == "error":
                    raise NoClipFitsError(
                        name, f"a clip needs {self.span} frames (sequence_length={self.sequence_length}, "
                              f"stride={self.stride}) but {where} has {num_frames}; end_policy='error'"
                    )
                positions = np.minimum(positions, num_frames - 1) if self.end_policy == "repeat_last" else (
                    positions % num_frames
                )
            if self.jitter:
                offsets = rng.integers(-self.jitter, self.jitter + 1, size=positions.size)
                positions = np.sort(np.clip(positions + offsets, 0, num_frames - 1))
            clips.append(SampledClip(positions + first, padded))
        return clips

    def _sample_in_seconds(
        self, video: VideoIndex, first: int, stop: int, end: float, where: str, rng: np.random.Generator
    ) -> list[SampledClip]:
        """Clips of target times in ``[pts of first, end)``, each position the frame shown at its
        time (one of frames ``[first, stop)``)."""
        length, period = self.timing(video)
        begin = float(video.pts_seconds[first])
        clips = []
        for start in self._clip_start_seconds(begin, end, length * period, rng):
            times = start + np.arange(length) * period
            padded = times / float(video.time_base) >= end / float(video.time_base) - _TICK_SLACK
            if padded[-1]:
                if self.end_policy == "drop":
                    continue
                if self.end_policy == "error":
                    raise NoClipFitsError(
                        video.path, f"a clip needs {length * period:.6g} s ({length} frames every {period:.6g} s) "
                                    f"but {where} lasts {end - begin:.6g} s; end_policy='error'"
                    )
                if self.end_policy == "wrap":
                    times = begin + np.mod(times - begin, end - begin)
            if self.jitter:
                steps = rng.integers(-self.jitter, self.jitter + 1, size=times.size)
                times = np.sort(np.clip(times + steps * (period / self.stride), begin, end))
            frames = np.clip(frames_shown_at(video, times), first, stop - 1)  # past the end: the last frame
            clips.append(SampledClip(frames, padded, times))
        return clips

    def _clip_start_seconds(
        self, begin: float, end: float, clip_seconds: float, rng: np.random.Generator
    ) -> np.ndarray:
        last_start = max(end - clip_seconds, begin)
        if self.starts == "random":
            return begin + rng.random(self.clips_per_video) * (last_start - begin)
        if self.starts == "even":
            if self.clips_per_video == 1:
                return np.array([(begin + last_start) / 2])
            return np.linspace(begin, last_start, self.clips_per_video)
        step = self.step_seconds or 0.0  # set for step starts (checked when built)
        return begin + np.arange(int(np.floor((last_start - begin) / step + 1e-9)) + 1) * step

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


def segment_frames(video: VideoIndex, segment) -> tuple[int, int, str, float | None]:
    """``(first frame, frame count, description, end seconds)`` of the frames whose pts lie in the segment.

    Raises:
        ArgumentError: ``segment`` is not ``(start, end)`` seconds with ``start < end``.
        NoClipFitsError: No frame lies in it.
    """
    expected = "a (start, end) pair of seconds (None for the video's start or end), start < end"
    if isinstance(segment, (str, bytes)) or not isinstance(segment, (tuple, list)) or len(segment) != 2:
        raise fail("segment", segment, expected)
    start, end = (None if value is None else check_number("segment", value) for value in segment)
    if start is not None and end is not None and start >= end:
        raise fail("segment", segment, expected)
    first = 0 if start is None else _first_frame_from(video, start)
    stop = video.num_frames if end is None else _first_frame_from(video, end)
    where = describe_segment((start, end))
    if stop <= first:
        raise NoClipFitsError(video.path, f"{where} holds no frame (the frames span "
                                          f"{video.start_seconds:.6g} to {video.end_seconds:.6g} s)")
    return first, stop - first, where, end


def describe_segment(segment: Segment) -> str:
    """``the segment [1.5 s, 3 s)`` (``start``/``end`` for an open side), for messages."""
    start, end = (name if value is None else f"{value:.6g} s" for name, value in zip(("start", "end"), segment))
    return f"the segment [{start}, {end})"


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
        raise FrameIndexError(f"frame index {int(bad[0])} is out of range [0, {num_frames - 1}] ({num_frames} frames)")
    return np.where(array < 0, array + num_frames, array)


_CLIP_OPTIONS = (
    "starts, clips_per_video, step, end_policy, scaling_factor, seed; in seconds: fps, duration, "
    "step_seconds (see :class:`ClipSampler`)"
)


def contiguous(sequence_length: int | None = None, **options) -> ClipSampler:
    """Clips of consecutive frames ``s, s+1, ..., s+L-1`` (with ``fps``: the frames shown at
    ``t, t+1/fps, ...``). Options: {}."""
    return ClipSampler("contiguous", sequence_length=sequence_length, **options)


def strided(sequence_length: int | None, stride: int, **options) -> ClipSampler:
    """Clips ``s, s+k, ..., s+(L-1)k`` with ``k = stride`` (with ``fps``: the frames shown every
    ``k/fps`` seconds). Options: {}."""
    return ClipSampler("strided", sequence_length=sequence_length, stride=stride, **options)


def jittered(sequence_length: int | None, stride: int, jitter: int, **options) -> ClipSampler:
    """Strided positions each moved by a seeded random offset in ``[-jitter, jitter]``, kept in
    range and in order (with ``fps``: in steps of ``1/fps`` seconds); ``jitter`` is at most
    ``stride`` (a larger one is refused: it used to repeat frames silently). Options: {}."""
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


def draw_seed(seed: int | None, sampler: ClipSampler) -> int:
    """The one seed a loader draws every clip with: ``seed``, else the sampler's own ``seed``, else 0.

    Raises:
        ArgumentError: ``seed`` is not an integer >= 0, or differs from the sampler's own seed.
    """
    if seed is None:
        return 0 if sampler.seed is None else sampler.seed
    seed = check_integer("seed", seed, minimum=0)
    if sampler.seed is not None and sampler.seed != seed:
        raise fail("seed", seed, f"the sampler's own seed ({sampler.seed}) or None: the loader draws every clip from "
                                 "one seed; give it once, to the loader or to the sampler")
    return seed
