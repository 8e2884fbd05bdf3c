"""How a ClipLoader draws the clips of one video: the sampler of one clip, clips per video and
epoch, and each clip's frames and augmentations (crop, scale, flip, colour) from its seeded generator."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .._audio.spans import longest_spans
from .._engine.pipeline import resolve_transform
from .._index.record import VideoIndex
from ..errors import ArgumentError, check_optional_integer
from ..gop import bound_lead
from ..sampling import ClipSampler, SampledClip, Segment, describe_segment, segment_frames
from ..transforms import FrameGeometry, SampleDraw, TransformSpec
from .epoch import ClipRef

__all__ = ["ClipDrawer", "VideoFacts"]


@dataclass(frozen=True)
class VideoFacts:
    """What the loader keeps about a usable video (not its index, which may be large)."""

    width: int
    height: int
    bit_depth: int
    codec: str
    clip_count: int
    output_size: tuple[int, int]
    clip_shape: tuple[int, ...]
    longest_spans: tuple[float, float] = (0.0, 0.0)  # seconds: of a clip, of one position (for audio)


class ClipDrawer:
    """Draws the clips of a video for a sampler and transform.

    Clip ``c`` of a video is ``sample(...)[c % n]`` of the per-clip sampler, drawn with the clip's
    own generator, which also draws its augmentations (crop, scale, flip, colour).

    Attributes:
        sampler: The loader's sampler.
        frames_per_clip: Frames of every clip.
        clips_per_video: Clips of each video per epoch; None with ``starts="step"``, where each
            video gives every clip that fits.
        conversion: How decoded frames become clips (the transform, resolved once).
        max_lead_frames: Clips starting more frames than this after their keyframe (or after
            their segment's first frame, when later) are moved earlier to start this many after
            it (see :mod:`vclip.gop`); None: no bound.
        repeats: Samples drawn of each clip, each with its own augmentations (the loader's
            ``repeated_augmentation``), each with every spatial view.
    """

    def __init__(self, sampler: ClipSampler, transform: TransformSpec | None, clips_per_video: int | None,
                 max_lead_frames: int | None = None, repeats: int = 1):
        self.sampler = sampler
        self.repeats = repeats
        self.frames_per_clip = _frames_per_clip(sampler)
        self._clip_sampler, self.clips_per_video = _clip_plan(sampler, clips_per_video)
        self.conversion = resolve_transform(transform, sampler.scaling_factor)
        self._facts_by_timing: dict[tuple, VideoFacts | ValueError] = {}  # see inspect()
        self.max_lead_frames = check_optional_integer("max_lead_frames", max_lead_frames, minimum=0,
                                                      none_means="(no bound)")
        if self.max_lead_frames is not None and (sampler.mode in ("keyframe", "indexed") or sampler.starts == "step"):
            raise ArgumentError(
                f"max_lead_frames ({max_lead_frames}) moves clip starts; it needs random or even starts of a "
                f"temporal sampler, not {sampler.mode} clips with starts={sampler.starts!r}"
            )

    @property
    def dtype(self) -> str:
        return self.conversion.dtype

    @property
    def samples_per_clip(self) -> int:
        """Rows of a batch per clip: the spatial views of each repeated draw."""
        return self.conversion.views * self.repeats

    def inspect(self, index: VideoIndex, segment: Segment | None = None) -> VideoFacts:
        """The facts of a video (or of its ``segment``, seconds) whose clips can be drawn.
        Samplers are pure functions of the index's timing, so videos with the same codec, size,
        display orientation, pixel aspect, timing and segment (common in datasets of clips) share
        one answer.

        Raises:
            ValueError: No clip fits in the video (or segment), or it has fewer keyframes than a
                clip needs.
        """
        key = (index.codec, index.width, index.height, index.bit_depth, index.rotation, index.mirrored,
               index.sample_aspect_ratio, index.time_base, index.last_frame_duration, index.pts.tobytes(),
               index.packet_is_keyframe.tobytes(), index.frame_packet.tobytes(), segment)
        facts = self._facts_by_timing.get(key)
        if facts is None:
            facts = self._facts_by_timing[key] = self._inspect(index, segment)
        if isinstance(facts, ValueError):
            raise facts
        return facts

    def _inspect(self, index: VideoIndex, segment: Segment | None) -> VideoFacts | ValueError:
        clips = self._clip_sampler.sample(index, seed=0, segment=segment)
        if not clips:
            where = f"its {index.num_frames} frames" if segment is None else describe_segment(segment)
            size = (f"{self.frames_per_clip} frames every {self.sampler.timing(index)[1]:.6g} s"
                    if self.sampler.in_seconds else f"{self.sampler.span} frames")
            return ValueError(f"no clip of {size} fits in {where} (end_policy={self.sampler.end_policy!r})")
        if clips[0].size != self.frames_per_clip:
            return ValueError(f"has {clips[0].size} keyframes, fewer than max_frames={self.frames_per_clip}")
        geometry = self._geometry(index, np.random.default_rng(0))
        return VideoFacts(
            width=index.width, height=index.height, bit_depth=index.bit_depth, codec=index.codec,
            clip_count=len(clips) if self.clips_per_video is None else self.clips_per_video,
            output_size=(geometry.output_width, geometry.output_height),
            clip_shape=self.conversion.clip_shape(self.frames_per_clip, geometry),
            longest_spans=longest_spans(self._clip_sampler, index, segment),
        )

    def draw(self, index: VideoIndex, ref: ClipRef, seed: int, epoch: int,
             segment: Segment | None = None) -> tuple[np.ndarray, tuple[SampleDraw, ...], SampledClip]:
        """The frames of clip ``ref`` in ``epoch`` (inside ``segment``, seconds), what its transform
        drew (crop, scale, flip, colour: one draw per spatial view of each of ``repeats`` samples,
        from the clip's generator, after its frames), and the clip as drawn (its padded positions
        and target times; frames moved by ``max_lead_frames`` keep no target times)."""
        rng = ref.rng(seed, epoch)
        clips = self._clip_sampler.sample_with_padding(index, seed=rng, segment=segment)
        drawn = clips[ref.clip % len(clips)]
        frames = drawn.frame_indices
        if self.max_lead_frames is not None:
            first = 0 if segment is None else segment_frames(index, segment)[0]
            frames = bound_lead(index, frames, self.max_lead_frames, first_frame=first)
            if not np.array_equal(frames, drawn.frame_indices):
                drawn = drawn._replace(frame_indices=frames, target_seconds=None)
        draws = tuple(draw for _ in range(self.repeats)
                      for draw in self.conversion.draw(index, rng, frames.size))
        return frames, draws, drawn

    def _geometry(self, index: VideoIndex, rng: np.random.Generator) -> FrameGeometry:
        return self.conversion.index_geometry(index, rng)


def _frames_per_clip(sampler: ClipSampler) -> int:
    if sampler.mode == "indexed":
        return len(sampler.frame_indices or ())
    if sampler.mode == "keyframe":
        if sampler.max_frames is None:
            raise ArgumentError(
                "keyframe sampling without max_frames gives clips of different lengths, which cannot share a batch; "
                "use vclip.keyframe(max_frames=N)"
            )
        return sampler.max_frames
    if sampler.clip_length is None:
        raise ArgumentError(
            f"duration={sampler.duration} without fps or sequence_length gives clips whose frame count follows each "
            "video's own rate, which cannot share a batch; pass fps= (e.g. fps=15) or sequence_length="
        )
    return sampler.clip_length


def _clip_plan(sampler: ClipSampler, clips_per_video: int | None) -> tuple[ClipSampler, int | None]:
    """The sampler that draws one clip, and the clips per video and epoch (None: from each video's
    length, for ``starts="step"``)."""
    clips_per_video = check_optional_integer("clips_per_video", clips_per_video, minimum=1,
                                             none_means="(the sampler's clips_per_video)")
    if sampler.mode in ("keyframe", "indexed"):
        return sampler, clips_per_video or 1
    if sampler.starts == "step":
        if clips_per_video is not None:
            raise ArgumentError(
                f"clips_per_video ({clips_per_video}) cannot be combined with starts='step', "
                "where every video gives each clip that fits"
            )
        return sampler, None
    count = sampler.clips_per_video if clips_per_video is None else clips_per_video
    # Random starts: one independent draw per clip. Even starts: the c-th of `count` positions.
    return replace(sampler, clips_per_video=1 if sampler.starts == "random" else count), count
