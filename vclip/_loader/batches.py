"""Building one batch of a ClipLoader: draw its clips, decode them (one job per video) into an
output buffer (each spatial view of a clip in a slot of its own), and replace the clips of videos
that fail by clips of other videos (seeded), or, in evaluation, leave them out."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np

from .._engine.pipeline import ClipTarget, VideoRequest, needs_any
from .._index.record import VideoIndex
from ..errors import CorruptVideoError, NoVideoLeftError, VideoError
from ..sampling import SampledClip, Segment
from ..transforms import Augmentations, SampleDraw
from .audio import LoaderAudio
from .clips import ClipDrawer
from .epoch import ClipRef, replacement_order
from .source import DatasetSource, as_video_error
from .stats import LoaderCounters

__all__ = ["BadVideos", "BatchBuilder", "BuiltBatch", "SCAN"]

logger = logging.getLogger("vclip")

OnError = Literal["skip", "raise"]

SCAN = -1  # the "epoch" in which the scan at construction found a video bad


class BadVideos:
    """The videos found unusable: the problem of each and the epoch in which it was found (``SCAN``
    for the scan at construction); thread-safe; each is logged once. Also the videos with damaged
    frames, which stay in use: only their clips that need those frames are replaced.

    A video found bad mid-epoch is left out from the next epoch on; within the epoch in which it
    was found, its later clips are still tried (and replaced when they fail). So which clips a
    batch gets never depends on the order in which batches built at once happened to fail, and a
    resumed epoch replaces exactly the clips an uninterrupted one would have replaced.
    """

    def __init__(self, paths: list[str], *, replaced: bool = True):
        self._paths = paths
        self._found: dict[int, tuple[str, int]] = {}
        self._damaged: dict[int, str] = {}
        self._lock = threading.Lock()
        self._fate = "replaced by clips of other videos" if replaced else "left out (evaluation)"

    def add(self, video: int, problem: str, epoch: int) -> None:
        """Record that ``video`` failed in ``epoch`` (the earliest epoch is kept)."""
        with self._lock:
            known = self._found.get(video)
            if known is not None:
                if epoch < known[1]:
                    self._found[video] = (known[0], epoch)
                return
            self._found[video] = (problem, epoch)
        logger.warning("vclip: skipping %s: %s; its clips are %s", self._paths[video], problem, self._fate)

    def add_damaged(self, video: int, problem: str) -> None:
        """Record that ``video`` has damaged frames (the first problem is kept and logged)."""
        with self._lock:
            if video in self._damaged:
                return
            self._damaged[video] = problem
        logger.warning("vclip: damaged %s: %s; its clips that need those frames are replaced by clips of other "
                       "videos", self._paths[video], problem)

    def excluded(self, video: int, epoch: int) -> bool:
        """Whether ``video`` is left out of ``epoch`` (found bad in an earlier epoch or by the scan)."""
        known = self._found.get(video)
        return known is not None and known[1] < epoch

    def excluded_count(self, epoch: int) -> int:
        """How many videos are left out of ``epoch``: while a loader runs this only grows, so an
        unchanged count means the same videos."""
        with self._lock:
            return sum(1 for _, found in self._found.values() if found < epoch)

    def __len__(self) -> int:
        return len(self._found)

    def problems(self) -> dict[int, str]:
        """The problem of every video left out, and of every video with damaged frames."""
        with self._lock:
            damaged = {video: f"{problem}; the clips that need those frames are replaced"
                       for video, problem in self._damaged.items() if video not in self._found}
            return {**damaged, **{video: problem for video, (problem, _) in self._found.items()}}

    def entries(self) -> list[tuple[int, int, str]]:
        """``(video, epoch found, problem)`` of every bad video, by video."""
        with self._lock:
            return sorted((video, epoch, problem) for video, (problem, epoch) in self._found.items())

    def __getstate__(self) -> dict:
        return {"_paths": self._paths, "_found": dict(self._found), "_fate": self._fate,
                "_damaged": dict(self._damaged)}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()


@dataclass(frozen=True, eq=False)
class _Clip:
    ref: ClipRef
    index: VideoIndex
    frames: np.ndarray
    draws: tuple[SampleDraw, ...]  # one per sample: each spatial view of each repeated draw
    drawn: SampledClip  # with its padded positions and target times (for its audio)
    segment: Segment | None

    @property
    def padded(self) -> np.ndarray:
        """bool ``[T]``: the positions the end policy filled."""
        return self.drawn.padded


@dataclass(frozen=True, eq=False)
class BuiltBatch:
    """A batch written into a buffer (the GPU writes may still be in flight: the runtime keeps the
    events). One row per sample: a clip, or each spatial view of a clip, views next to each other."""

    number: int
    labels: np.ndarray
    video_ids: np.ndarray
    frame_indices: np.ndarray
    pts_seconds: np.ndarray
    padded: np.ndarray
    skipped_videos: tuple[str, ...]
    skipped_clips: int  # clips replaced by clips of other videos (in evaluation: left out)
    clip_ids: np.ndarray
    view_ids: np.ndarray
    augmentations: Augmentations
    audio_lengths: np.ndarray | None = None  # samples of each clip's (or position's) audio
    has_audio: np.ndarray | None = None  # per clip: its video has the audio stream


class BatchBuilder:
    """Draws and decodes the clips of one batch; with ``on_error="skip"`` no problem of one video
    ends the batch: the video is recorded in ``bad`` and its clips are replaced (``replace=False``,
    for evaluation: left out, the batch then smaller)."""

    def __init__(self, source: DatasetSource, drawer: ClipDrawer, bad: BadVideos, *, seed: int, on_error: OnError,
                 replace: bool = True, audio: LoaderAudio | None = None):
        self.source = source
        self.drawer = drawer
        self.bad = bad
        self.seed = seed
        self.on_error = on_error
        self.replace = replace
        self.views = drawer.samples_per_clip  # rows of the batch per clip
        self.spatial_views = drawer.conversion.views
        self.audio = audio

    def build(self, runner, counters: LoaderCounters, wait_for_writes: Callable[[], None], epoch: int,
              shard: np.ndarray, refs: list[ClipRef], number: int, output, events: list,
              audio_output: np.ndarray | None = None) -> BuiltBatch:
        """Decode the clips ``refs`` (batch ``number`` of ``epoch``) into ``output`` with ``runner``
        (a ThreadDispatcher or SharedQueueDispatcher), counting into ``counters``; the GPU work's events are
        appended to ``events``; ``wait_for_writes()`` waits for writes still in flight. With audio,
        the clips' audio goes into ``audio_output``, decoded meanwhile."""
        started = time.perf_counter()
        clip_shape = tuple(output.shape[1:])
        if self.replace:
            candidates = [self._candidates(epoch, shard, ref, clip_shape) for ref in refs]
            clips = [next(candidate) for candidate in candidates]
        else:
            clips = [clip for clip in (self._clip(epoch, ref, clip_shape) for ref in refs) if clip is not None]
        counters.add(sample_seconds=time.perf_counter() - started)
        audio = (self.audio.batch(audio_output[:len(refs)]) if self.audio is not None and audio_output is not None
                 else None)
        todo = list(range(len(clips)))
        while todo:
            videos, jobs = _requests(clips, todo, self.views)
            pending = audio.start(clips, todo) if audio is not None else {}
            result = runner.run(jobs, self.drawer.conversion, output, counters)
            events.extend(result.completions)
            errors = audio.errors(pending, jobs, result.errors) if audio is not None else result.errors
            failed = [(video, job, error) for video, job, error in zip(videos, jobs, errors) if error]
            if not failed:
                break
            wait_for_writes()  # a failed job may have left writes in flight
            if self.on_error == "raise":
                raise failed[0][2]
            lost_positions = set()
            for video, job, error in failed:
                lost = error.frames if isinstance(error, CorruptVideoError) else None
                if lost is None:  # the whole video
                    self.bad.add(video, error.problem if isinstance(error, VideoError) else str(error), epoch)
                else:  # damaged frames: the clips that do not need them were decoded
                    self.bad.add_damaged(video, error.problem)
                lost_positions |= {target.slot // self.views for target in job.targets
                                   if lost is None or needs_any(target, lost)}
            if self.replace:
                todo = sorted(lost_positions)
                for position in todo:
                    clips[position] = next(candidates[position])
            else:  # the lost clips leave the batch; the others are decoded again into their new slots
                clips = [clip for position, clip in enumerate(clips) if position not in lost_positions]
                todo = list(range(len(clips)))
        dataset = self.source.videos
        if self.replace:
            left_out = [clip.ref.replaces for clip in clips if clip.ref.replaces >= 0]
        else:
            kept = {clip.ref for clip in clips}
            left_out = [ref.video for ref in refs if ref not in kept]
        views = self.views
        rows = lambda values: np.repeat(values, views, axis=0)  # noqa: E731 (a clip's views are rows of their own)
        frames = self.drawer.frames_per_clip
        return BuiltBatch(
            number=number,
            labels=rows(np.array([dataset[clip.ref.video].label for clip in clips], dtype=np.int64)),
            video_ids=rows(np.array([clip.ref.video for clip in clips], dtype=np.int64)),
            frame_indices=rows(np.stack([clip.frames for clip in clips]) if clips else np.zeros((0, frames), np.int64)),
            pts_seconds=rows(np.stack([clip.index.pts_seconds[clip.frames] for clip in clips]) if clips else
                             np.zeros((0, frames))),
            padded=rows(np.stack([clip.padded for clip in clips]) if clips else np.zeros((0, frames), bool)),
            skipped_videos=tuple(sorted({dataset[video].path for video in left_out})),
            skipped_clips=len(left_out),
            clip_ids=rows(np.array([clip.ref.clip for clip in clips], dtype=np.int64)),
            view_ids=np.tile(np.arange(self.spatial_views, dtype=np.int64), len(clips) * self.drawer.repeats),
            audio_lengths=audio.lengths[:len(clips)] if audio is not None else None,
            has_audio=audio.has_audio[:len(clips)] if audio is not None else None,
            augmentations=Augmentations.from_draws([draw for clip in clips for draw in clip.draws],
                                                   per_frame=self.drawer.conversion.spec.per_frame, frames=frames),
        )

    def _candidates(self, epoch: int, shard: np.ndarray, ref: ClipRef, clip_shape: tuple[int, ...]) -> Iterator[_Clip]:
        """The clip ``ref``, then, while they fail, its replacements from the shard (seeded order)."""
        clip = self._clip(epoch, ref, clip_shape)
        if clip is not None:
            yield clip
        for video in replacement_order(self.seed, epoch, ref, shard):
            if video != ref.video:
                clip = self._clip(epoch, ref._replace(video=int(video), replaces=ref.video), clip_shape)
                if clip is not None:
                    yield clip
        raise NoVideoLeftError(
            self.source.videos[ref.video].path, "no usable video is left in this shard to replace it: "
            f"{len(self.bad)} of the {len(self.source.videos)} videos failed (see loader.stats().skipped)"
        )

    def _clip(self, epoch: int, ref: ClipRef, clip_shape: tuple[int, ...]) -> _Clip | None:
        """The frames and draws of clip ``ref``; None when its video cannot be used (also when its
        clips no longer come out ``clip_shape``, the batch's: the file was replaced since it was indexed)."""
        if self.bad.excluded(ref.video, epoch):
            return None
        doing = "indexing"
        try:
            index = self.source.index(ref.video)
            doing = "drawing its clip"
            segment = self.source.videos[ref.video].segment
            frames, draws, drawn = self.drawer.draw(index, ref, self.seed, epoch, segment)
            shape = self.drawer.conversion.clip_shape(frames.size, draws[0].geometry)
            if shape != clip_shape:
                raise VideoError(self.source.videos[ref.video].path, (
                    f"its clips come out {list(shape)} (a {index.width}x{index.height} video) but the batch holds "
                    f"{list(clip_shape)}: the file changed size since it was indexed"))
        except Exception as error:  # one video's problem, whatever it is
            video_error = as_video_error(self.source.videos[ref.video].path, error, doing)
            if self.on_error == "raise":
                if video_error is error:
                    raise
                raise video_error from error
            self.bad.add(ref.video, video_error.problem, epoch)
            return None
        return _Clip(ref, index, frames, draws, drawn, segment)


def _requests(clips: list[_Clip], positions: list[int], views: int) -> tuple[list[int], list[VideoRequest]]:
    """One job per video for the clips at ``positions`` (slot = position in the batch x views + view)."""
    targets: dict[int, list[ClipTarget]] = {}
    for position in positions:
        clip = clips[position]
        for view, draw in enumerate(clip.draws):
            targets.setdefault(clip.ref.video, []).append(ClipTarget.of(clip.frames, draw, position * views + view))
    videos = list(targets)
    first = {clip.ref.video: clip for clip in reversed(clips)}
    return videos, [VideoRequest(first[video].index, tuple(targets[video])) for video in videos]
