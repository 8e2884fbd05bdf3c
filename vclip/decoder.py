"""VideoDecoder: exact frames and clips of one video, on the CPU or with NVDEC."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ._backends import JobRunner, make_backend
from ._device import resolve_device
from ._pipeline import ClipTarget, DecodeStats, VideoJob, resolve_transform
from .index import VideoIndex, index_video
from .sampling import ClipSampler, check_scaling_factor
from .transforms import TransformSpec

__all__ = ["VideoDecoder", "Frames"]


@dataclass(frozen=True, eq=False)
class Frames:
    """Decoded frames or clips, with where they came from.

    Attributes:
        data: NumPy array on the CPU, CuPy array on the GPU. ``get_frames`` gives ``[N, H, W, 3]``
            (or the transform's layout), ``get_clips`` gives ``[clips, ...one clip...]``.
            Without a transform: RGB uint8, 0-255; see :class:`TransformSpec` otherwise.
        frame_indices: Frame numbers, shaped like the leading (frame/clip) axes of ``data``.
        pts_seconds: Presentation time of each of those frames.
        device: ``"cpu"`` or ``"cuda:N"``.
        fell_back_to_cpu: A GPU request was decoded on the CPU (no GPU, or a stream NVDEC lacks).
    """

    data: object
    frame_indices: np.ndarray
    pts_seconds: np.ndarray
    device: str
    fell_back_to_cpu: bool = False

    def __repr__(self) -> str:
        return (
            f"Frames(data={type(self.data).__module__.split('.')[0]}[{', '.join(map(str, self.data.shape))}] "
            f"{self.data.dtype}, frame_indices={list(self.frame_indices.shape)}, device={self.device!r}, "
            f"fell_back_to_cpu={self.fell_back_to_cpu})"
        )

    def torch(self):
        """``data`` as a torch tensor, shared without a copy (DLPack)."""
        import torch

        return torch.from_dlpack(self.data) if self.device != "cpu" else torch.from_numpy(self.data)


class VideoDecoder:
    """Frames of one video stream, exact by presentation order.

    Args:
        path: The video file.
        stream_index: Container index of the video stream; default: the first video stream.
        device: ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"auto"``. A GPU request that cannot be
            served falls back to the CPU with one :class:`~vclip.errors.FallbackWarning`, and
            ``Frames.fell_back_to_cpu`` says so.
        cache_dir: Folder for an on-disk cache of the video's index.
        skip_non_reference: Do not decode non-reference pictures nobody asked for.

    Raises:
        VideoNotFoundError, NotAVideoError, CorruptVideoError, UnsupportedCodecError: see
            :func:`~vclip.index_video`.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        stream_index: int | None = None,
        device: str = "cpu",
        cache_dir: str | os.PathLike | None = None,
        skip_non_reference: bool = True,
    ):
        resolved = resolve_device(device)
        self.index: VideoIndex = index_video(path, stream_index=stream_index, cache_dir=cache_dir)
        self._runner = JobRunner(make_backend(resolved.device, skip_non_reference=skip_non_reference), num_workers=1)
        self.device: str = str(resolved.device)
        self.fell_back_to_cpu: bool = resolved.fell_back_to_cpu
        self.stats = DecodeStats()

    def __len__(self) -> int:
        return self.index.num_frames

    def __repr__(self) -> str:
        return f"VideoDecoder({self.index!r}, device={self.device!r})"

    def get_frames(
        self,
        indices: Sequence[int] | np.ndarray,
        *,
        transform: TransformSpec | None = None,
        scaling_factor: float = 1.0,
        seed: int | None = None,
    ) -> Frames:
        """Exactly these frames, in this order, duplicates kept (negative counts from the end).

        Without a transform or scaling, CPU frames are FFmpeg's rgb24 conversion bit for bit.

        Raises:
            IndexError: An index is out of range. ValueError: The list is empty.
        """
        indices = self.index.check_frame_indices(indices)
        check_scaling_factor(scaling_factor)
        clips = self._decode([indices], transform, scaling_factor, seed)
        return Frames(clips.data[0], clips.frame_indices[0], clips.pts_seconds[0], clips.device, clips.fell_back_to_cpu)

    def get_frames_at(self, seconds: Sequence[float] | float, **options) -> Frames:
        """The frames a player shows at these times (pts seconds); options as :meth:`get_frames`."""
        times = np.atleast_1d(np.asarray(seconds, dtype=np.float64))
        return self.get_frames([self.index.frame_at(float(t)) for t in times], **options)

    def get_clips(self, sampler: ClipSampler, *, transform: TransformSpec | None = None, seed: int | None = None) -> Frames:
        """The clips ``sampler`` picks, ``data`` shaped ``[clips, ...]``.

        ``seed`` drives the sampler (default: its own seed) and the transform's random crop/flip.

        Raises:
            ValueError: No clip fits (``end_policy="drop"`` on a short video gives none).
        """
        clips = sampler.sample(self.index, seed=seed)
        if not clips:
            raise ValueError(
                f"{self.index.path}: no clip of {sampler.span} frames fits in {self.index.num_frames} frames "
                f"(end_policy={sampler.end_policy!r})"
            )
        return self._decode(clips, transform, sampler.scaling_factor, seed)

    def _decode(self, clips: list[np.ndarray], transform: TransformSpec | None, scaling_factor: float, seed) -> Frames:
        index = self.index
        conversion = resolve_transform(transform, scaling_factor)
        rng = np.random.default_rng(seed)
        targets = [
            ClipTarget(np.asarray(frames, dtype=np.int64), conversion.geometry(index.width, index.height, rng), slot)
            for slot, frames in enumerate(clips)
        ]
        shape = conversion.clip_shape(clips[0].size, targets[0].geometry)
        output = self._runner.backend.empty((len(clips),) + shape, conversion.dtype)
        fallbacks_before = self.stats.fallback_videos
        result = self._runner.run([VideoJob(index, tuple(targets))], conversion, output, self.stats)
        if result.errors[0] is not None:
            raise result.errors[0]
        for completion in result.completions:
            completion.synchronize()
        frame_indices = np.stack([np.asarray(c, dtype=np.int64) for c in clips])
        return Frames(
            data=output,
            frame_indices=frame_indices,
            pts_seconds=index.pts_seconds[frame_indices],
            device=self.device,
            fell_back_to_cpu=self.fell_back_to_cpu or self.stats.fallback_videos > fallbacks_before,
        )
