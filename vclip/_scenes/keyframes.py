"""What the keyframes of one video are: their frames, numbers and times, and the shots they start
(:class:`Keyframes`, public as :class:`vclip.keyframes.Keyframes`), written as images with a
contact sheet and manifest records."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from .._outputs.files import all_or_none
from .._outputs.images import IMAGE_FORMATS, columns_for, contact_sheet, to_numpy, write_image
from ..errors import check_choice, check_integer
from .shots import ShotBoundary

__all__ = ["KEYFRAME_METHODS", "THUMBNAIL_WIDTH", "KeyframeMethod", "Keyframes"]

KeyframeMethod = Literal["codec", "scene"]
KEYFRAME_METHODS = ("codec", "scene")
THUMBNAIL_WIDTH = 320
"""Default width of contact-sheet thumbnails: a 1080p frame at 1/6, five across a 1920-pixel sheet."""


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
        boundaries: ``"scene"``: the :class:`ShotBoundary` that starts each frame's shot (its kind:
            cut, fade or dissolve; None for frame 0, the first shot); ``"codec"``: None.
    """

    path: str
    method: KeyframeMethod
    frame_indices: np.ndarray
    pts_seconds: np.ndarray
    frames: Any  # NumPy or CuPy (untyped)
    device: str
    fell_back_to_cpu: bool
    packets_decoded: int
    boundaries: tuple[ShotBoundary | None, ...] | None = None

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
            ``image`` (the path written); with ``"scene"`` also ``transition`` (``"cut"``,
            ``"fade"``, ``"dissolve"``, or None for the first shot) and ``transition_start`` (its first frame).

        Raises:
            ValueError: ``image_format`` is not ``"jpg"`` or ``"png"``; ``thumbnail_width`` below 16.
            OSError: An image could not be written (a full disk); the images written before it are
                removed again (and ``folder`` when this call made it), so none is left half done.
        """
        check_choice("image_format", image_format, IMAGE_FORMATS)
        thumbnail_width = check_integer("thumbnail_width", thumbnail_width, minimum=16)
        frames = to_numpy(self.frames)
        indices, times = self.frame_indices.tolist(), self.pts_seconds.tolist()
        records: list[dict] = []
        with all_or_none(folder) as written:  # a full disk: the video's images go whole or not at all
            for number, (frame, index, seconds) in enumerate(zip(frames, indices, times)):
                written.append(write_image(Path(folder) / f"frame_{index:06d}.{image_format}", frame))
                records.append({"file": self.path, "frame_index": index, "pts_seconds": seconds,
                                "method": self.method, "image": written[-1]})
                if self.boundaries is not None:
                    boundary = self.boundaries[number]
                    records[-1].update(transition=boundary and boundary.kind,
                                       transition_start=boundary and boundary.start)
            if not records:
                return records
            columns = columns_for(min(thumbnail_width, frames.shape[2]), len(frames))
            labels = [f"{i}: {t:.2f}s" for i, t in zip(indices, times)]
            sheet = contact_sheet([list(frames[i:i + columns]) for i in range(0, len(frames), columns)],
                                  tile_width=thumbnail_width,
                                  tile_labels=[labels[i:i + columns] for i in range(0, len(labels), columns)])
            written.append(write_image(Path(folder) / f"contact_sheet.{image_format}", sheet))
        return records
