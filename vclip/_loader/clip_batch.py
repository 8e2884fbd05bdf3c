"""One batch of clips as the loader hands it over: the tensors and where every clip came from."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..transforms import Augmentations

__all__ = ["ClipBatch"]


@dataclass(frozen=True, eq=False)
class ClipBatch:
    """One batch of clips, with where every clip came from.

    Attributes:
        data: ``[B, T, C, H, W]`` for layout ``"TCHW"`` (``[B, T, H, W, C]`` for ``"THWC"``,
            ``[B, C, T, H, W]`` for ``"CTHW"``; RGB uint8 ``[B, T, H, W, 3]`` without a
            transform), dtype of the transform, on the loader's device. It is a view of one of
            the loader's pooled buffers (no copy): valid until the next batch is drawn; ``clone()``
            it to keep it longer.
        labels: int64 ``[B]``, on the loader's device.
        video_ids: int64 ``[B]`` (CPU): each clip's video, a position in ``loader.videos`` (a row
            of the dataset: with labelled segments, the segment; see :attr:`segment_ids`).
        frame_indices: int64 ``[B, T]`` (CPU): the frame numbers of each clip.
        pts_seconds: float64 ``[B, T]`` (CPU): the presentation times of those frames.
        padded: bool ``[B, T]`` (CPU): True where a clip ran past its video's (or segment's) last
            frame and the sampler's ``end_policy`` filled the position (``"repeat_last"``: the
            last frame again, ``"wrap"``: a frame from the start), as ``Frames.padded``; mask
            them out of a loss that must not see repeated frames.
        skipped_videos: Videos that could not be read and whose clips in this batch were
            replaced by clips of other videos (in evaluation: left out) (paths, sorted).
        epoch: The epoch the batch belongs to.
        batch_number: Position of the batch in its epoch, from 0.
        clip_ids: int64 ``[B]`` (CPU): each sample's clip, its number among the clips of its
            video in the epoch (0 to ``clips_per_video - 1``).
        view_ids: int64 ``[B]`` (CPU): each sample's spatial view (0 to ``spatial_views - 1``):
            with ``TransformSpec(spatial_views=3)`` each clip is 3 samples next to each other, so
            ``B`` is ``3 x batch_size``; 0 otherwise.
        augmentations: What the transform drew for each sample (crop box, scale, flip, colour
            factors and order, grayscale), NumPy arrays of one row per sample (``[B, T, ...]``
            with per-frame draws): see :class:`vclip.transforms.Augmentations`.
        audio: With ``ClipLoader(audio=AudioSpec(...))``: each clip's audio, float32 or int16
            ``[B, C, S]`` (``[B, T, C, S]`` for ``span="frame"``) on the loader's device; ``S`` is
            the longest span of the dataset, shorter ones padded with zeros at the end. On the CPU
            a view of a pooled buffer like ``data``; on the GPU a copy of its own. Else None.
        audio_lengths: int64 ``[B]`` (``[B, T]``), on the loader's device: the samples of each
            span; ``audio[..., n:]`` past them is padding (0 for positions the end policy padded).
        has_audio: bool ``[B]``, on the loader's device: False where the clip's video has no
            (such) audio stream and its audio is silence.

    Multi-view evaluation, averaging predictions per video:

    ```python
    scores.index_add_(0, batch.video_ids.to(device), model(batch.data).softmax(-1))
    ```
    """

    data: torch.Tensor
    labels: torch.Tensor
    video_ids: torch.Tensor
    frame_indices: torch.Tensor
    pts_seconds: torch.Tensor
    padded: torch.Tensor
    skipped_videos: tuple[str, ...]
    epoch: int
    batch_number: int
    clip_ids: torch.Tensor | None = None
    view_ids: torch.Tensor | None = None
    augmentations: Augmentations | None = None
    audio: torch.Tensor | None = None
    audio_lengths: torch.Tensor | None = None
    has_audio: torch.Tensor | None = None

    def __len__(self) -> int:
        return int(self.data.shape[0])

    @property
    def segment_ids(self) -> torch.Tensor:
        """Each clip's segment: its row in ``loader.videos`` (``LabeledVideo`` with ``start``,
        ``end`` and ``label``); the same numbers as ``video_ids``, under the name that fits
        datasets of labelled segments."""
        return self.video_ids

    def __repr__(self) -> str:
        return (
            f"ClipBatch(data=[{', '.join(map(str, self.data.shape))}] {str(self.data.dtype).removeprefix('torch.')} "
            f"{self.data.device}, labels=[{self.labels.shape[0]}], frame_indices={list(self.frame_indices.shape)}, "
            f"epoch={self.epoch}, batch_number={self.batch_number}, skipped_videos={len(self.skipped_videos)}"
            + (f", audio=[{', '.join(map(str, self.audio.shape))}] {str(self.audio.dtype).removeprefix('torch.')})"
               if self.audio is not None else ")")
        )
