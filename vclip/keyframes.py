"""Keyframes of a video, to summarize it: the codec's own keyframes, or the first frame of every shot.

``method="codec"`` decodes only the keyframe packets (each keyframe is its own decode segment, no
P or B picture is decoded). ``method="scene"`` decodes every frame downscaled to 64 pixels across
(on the GPU when the decoder runs there), measures how much the typical pixel changed from the
frame before (the median over pixels, so a changing caption or a moving object does not count),
and keeps the frames where that change jumps far above the change around them: shot
boundaries. Frame 0 always starts the first shot.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal

import numpy as np

from ._images import IMAGE_FORMATS, columns_for, contact_sheet, to_numpy, write_image
from ._validation import (
    check_choice,
    check_integer,
    check_number,
    check_optional_integer,
)
from .decoder import VideoDecoder
from .index import VideoIndex
from .sampling import check_scaling_factor, scaled_size

__all__ = ["KEYFRAME_METHODS", "THUMBNAIL_WIDTH", "Keyframes", "ProgressCallback", "extract_keyframes"]

KeyframeMethod = Literal["codec", "scene"]
KEYFRAME_METHODS = ("codec", "scene")

# At a shot boundary the typical pixel changes by at least this much (of 255), whatever the
# motion around it.
_MIN_CUT_DIFFERENCE = 12.0
_LOCAL_WINDOW = 7  # frames each side whose median difference is the "usual" change
_CHUNK_FRAMES = 1024  # frames analysed per decode call (chunks start at keyframes) and per float block
THUMBNAIL_WIDTH = 320
"""Default width of contact-sheet thumbnails: a 1080p frame at 1/6, five across a 1920-pixel sheet."""

ProgressCallback = Callable[[int, int], None]
"""``on_progress(frames_done, frames_total)``: called as a video's frames are read."""


@dataclass(frozen=True, eq=False)
class Keyframes:
    """Frames that summarize one video, with where they are.

    Attributes:
        path: The video file.
        method: ``"codec"`` (the stream's keyframes) or ``"scene"`` (first frame of every shot).
        frame_indices: Frame numbers in presentation order, ascending (int64 ``[N]``).
        pts_seconds: Presentation time of each (float64 ``[N]``).
        frames: RGB uint8 ``[N, H, W, 3]``: NumPy on the CPU, CuPy on the GPU.
        device: ``"cpu"`` or ``"cuda:N"``.
        fell_back_to_cpu: A GPU request was decoded on the CPU.
        packets_decoded: Compressed pictures the decoder decoded to find and deliver these frames.
    """

    path: str
    method: KeyframeMethod
    frame_indices: np.ndarray
    pts_seconds: np.ndarray
    frames: object
    device: str
    fell_back_to_cpu: bool
    packets_decoded: int

    def __len__(self) -> int:
        return int(self.frame_indices.size)

    def __repr__(self) -> str:
        return (
            f"Keyframes(path={self.path!r}, method={self.method!r}, frame_indices={self.frame_indices.tolist()}, "
            f"frames={type(self.frames).__module__.split('.')[0]}[{', '.join(map(str, self.frames.shape))}], "
            f"device={self.device!r}, packets_decoded={self.packets_decoded})"
        )

    def save(
        self,
        folder: str | os.PathLike,
        *,
        image_format: Literal["jpg", "png"] = "jpg",
        thumbnail_width: int = THUMBNAIL_WIDTH,
    ) -> list[dict]:
        """Write each frame as ``frame_NNNNNN.<format>`` and a ``contact_sheet.<format>`` into ``folder``
        (no contact sheet when there are no frames).

        The contact sheet shows every frame as a thumbnail ``thumbnail_width`` pixels wide (frames
        narrower than that keep their size), captioned with its frame number and time, as many
        across as fit about 1920 pixels.

        Returns:
            One manifest record per frame: ``file``, ``frame_index``, ``pts_seconds``, ``method``,
            ``image`` (the path written).

        Raises:
            ValueError: ``image_format`` is not ``"jpg"`` or ``"png"``; ``thumbnail_width`` below 16.
        """
        check_choice("image_format", image_format, IMAGE_FORMATS)
        thumbnail_width = check_integer("thumbnail_width", thumbnail_width, minimum=16)
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        frames = to_numpy(self.frames)
        records = []
        for frame, index, seconds in zip(frames, self.frame_indices.tolist(), self.pts_seconds.tolist()):
            image = write_image(folder / f"frame_{index:06d}.{image_format}", frame)
            records.append({"file": self.path, "frame_index": index, "pts_seconds": seconds,
                            "method": self.method, "image": image})
        if not records:
            return records
        columns = columns_for(min(thumbnail_width, frames.shape[2]), len(frames))
        labels = [f"{i}: {t:.2f}s" for i, t in zip(self.frame_indices.tolist(), self.pts_seconds.tolist())]
        sheet = contact_sheet([list(frames[i:i + columns]) for i in range(0, len(frames), columns)],
                              tile_width=thumbnail_width,
                              tile_labels=[labels[i:i + columns] for i in range(0, len(labels), columns)])
        write_image(folder / f"contact_sheet.{image_format}", sheet)
        return records


def extract_keyframes(
    path: str | os.PathLike,
    *,
    method: KeyframeMethod = "codec",
    max_frames: int | None = None,
    device: str = "cpu",
    stream_index: int | None = None,
    scaling_factor: float = 1.0,
    scene_threshold: float = 2.0,
    analysis_width: int = 64,
    cache_dir: str | os.PathLike | None = None,
    on_progress: ProgressCallback | None = None,
) -> Keyframes:
    """The keyframes of one video stream, decoded.

    Args:
        path: The video file.
        method: ``"codec"``: the stream's keyframes (I-frames), decoding only their packets.
            ``"scene"``: the first frame of every shot, found from how much consecutive frames
            downscaled to ``analysis_width`` pixels across differ; always frame 0.
        max_frames: At most this many, evenly spread over the ones found (all when None).
        device: ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"auto"`` (see :class:`~vclip.VideoDecoder`).
        stream_index: Container index of the video stream; default: the first video stream.
        scaling_factor: The returned frames come out at ``round(W*f) x round(H*f)``, ``0 < f <= 1``.
        scene_threshold: A frame starts a shot when the change from the previous frame is this
            many times the usual change of the frames around it (their median), and its typical
            pixel changed by at least 12 of 255 levels. Larger finds fewer, clearer cuts.
        analysis_width: Width in pixels the scene method compares frames at.
        cache_dir: Folder for an on-disk cache of the video's index.
        on_progress: Called as ``on_progress(frames_done, frames_total)`` while the video is
            read: for ``"scene"`` after each chunk of frames analysed (``frames_total`` is the
            stream's frame count), for ``"codec"`` before and after the keyframes are decoded.

    Raises:
        ValueError: Unknown ``method``; ``max_frames`` below 1; ``scaling_factor`` outside (0, 1];
            ``scene_threshold`` not above 1; ``analysis_width`` below 1.
        VideoNotFoundError, NotAVideoError, CorruptVideoError, UnsupportedCodecError: The file.
    """
    check_choice("method", method, KEYFRAME_METHODS)
    max_frames = check_optional_integer("max_frames", max_frames, minimum=1, none_means="for all")
    scene_threshold = check_number("scene_threshold", scene_threshold, minimum=1, minimum_inclusive=False)
    scaling_factor = check_scaling_factor(scaling_factor)
    analysis_width = check_integer("analysis_width", analysis_width, minimum=1)
    decoder = VideoDecoder(path, stream_index=stream_index, device=device, cache_dir=cache_dir)
    index = decoder.index
    if method == "codec":
        found = index.keyframe_indices
    else:
        if on_progress is not None:
            on_progress(0, index.num_frames)
        found = _shot_starts(_frame_differences(decoder, analysis_width, on_progress), scene_threshold)
    chosen = _evenly_spread(found, max_frames)
    if method == "codec" and on_progress is not None:
        on_progress(0, chosen.size)
    if chosen.size == 0:  # a stream that flags no keyframe at all
        width, height = scaled_size(index.width, index.height, scaling_factor)
        empty = np.empty((0, height, width, 3), np.uint8)
        return Keyframes(
            index.path, method, chosen, index.pts_seconds[chosen], empty, decoder.device, decoder.fell_back_to_cpu, 0
        )
    frames = decoder.get_frames(chosen, scaling_factor=scaling_factor)
    if method == "codec" and on_progress is not None:
        on_progress(chosen.size, chosen.size)
    return Keyframes(
        path=index.path,
        method=method,
        frame_indices=frames.frame_indices,
        pts_seconds=frames.pts_seconds,
        frames=frames.data,
        device=frames.device,
        fell_back_to_cpu=frames.fell_back_to_cpu,
        packets_decoded=decoder.stats.packets_sent,
    )


def _evenly_spread(frame_indices: np.ndarray, count: int | None) -> np.ndarray:
    """``count`` of the (ascending) frame numbers, first and last included, evenly spaced by position."""
    frame_indices = np.asarray(frame_indices, dtype=np.int64)
    if count is None or frame_indices.size <= count:
        return frame_indices
    return frame_indices[np.floor(np.linspace(0, frame_indices.size - 1, count) + 0.5).astype(np.int64)]


def _keyframe_chunks(index: VideoIndex, chunk_frames: int) -> list[tuple[int, int]]:
    """``[start, stop)`` frame ranges of at least ``chunk_frames`` (but the last) that start at
    keyframes, so that no group of pictures is decoded twice."""
    boundaries = [0]
    for keyframe in index.keyframe_indices.tolist():
        if keyframe - boundaries[-1] >= chunk_frames:
            boundaries.append(keyframe)
    boundaries.append(index.num_frames)
    return [(start, stop) for start, stop in zip(boundaries[:-1], boundaries[1:]) if stop > start]


def _frame_differences(decoder: VideoDecoder, analysis_width: int,
                       on_progress: ProgressCallback | None = None) -> np.ndarray:
    """How much the typical pixel of each frame changed from the previous frame, at ``analysis_width``
    pixels across: the median over pixels of the absolute difference averaged over R, G, B (0-255);
    0 for frame 0 (float32 ``[num_frames]``). ``on_progress(stop, num_frames)`` follows each chunk."""
    index = decoder.index
    scaling_factor = min(1.0, analysis_width / index.width)
    differences = np.zeros(index.num_frames, dtype=np.float32)
    previous = None
    for start, stop in _keyframe_chunks(index, _CHUNK_FRAMES):
        frames = decoder.get_frames(np.arange(start, stop), scaling_factor=scaling_factor).data
        xp = _array_module(frames)
        if previous is not None:
            frames = xp.concatenate([previous[None], frames])
        first_frame = stop - frames.shape[0] + 1  # frame number of frames[1]
        for first in range(0, frames.shape[0] - 1, _CHUNK_FRAMES):  # float32 copies of bounded size
            block = frames[first:first + _CHUNK_FRAMES + 1].astype(xp.float32)
            per_pixel = xp.abs(block[1:] - block[:-1]).mean(axis=3).reshape(block.shape[0] - 1, -1)
            change = to_numpy(xp.median(per_pixel, axis=1))
            differences[first_frame + first:first_frame + first + change.size] = change
        previous = frames[-1]
        if on_progress is not None:
            on_progress(stop, index.num_frames)
    return differences


def _shot_starts(differences: np.ndarray, threshold: float) -> np.ndarray:
    """Frame 0 and every frame whose change is ``threshold`` times the median change of the frames
    around it and at least :data:`_MIN_CUT_DIFFERENCE`."""
    changes = differences[1:]
    if changes.size == 0:
        return np.zeros(1, dtype=np.int64)
    padded = np.pad(changes, _LOCAL_WINDOW, mode="edge")
    local = np.median(np.lib.stride_tricks.sliding_window_view(padded, 2 * _LOCAL_WINDOW + 1), axis=1)
    cuts = np.flatnonzero((changes >= _MIN_CUT_DIFFERENCE) & (changes >= threshold * local)) + 1
    return np.concatenate([[0], cuts]).astype(np.int64)


def _array_module(array):
    """NumPy for NumPy arrays, CuPy for arrays on the GPU."""
    if isinstance(array, np.ndarray):
        return np
    import cupy

    return cupy
