"""Errors raised for bad videos. Each names the file and the problem."""

from __future__ import annotations

import os

__all__ = [
    "VideoError",
    "VideoNotFoundError",
    "NotAVideoError",
    "CorruptVideoError",
    "UnsupportedCodecError",
    "FallbackWarning",
]


class VideoError(Exception):
    """A video could not be read. ``path`` and ``problem`` say which and why."""

    def __init__(self, path: str | os.PathLike, problem: str):
        self.path = os.fspath(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")

    def __reduce__(self):  # keep path and problem across processes (DataLoader workers)
        return (type(self), (self.path, self.problem))


class VideoNotFoundError(VideoError, FileNotFoundError):
    """The file does not exist."""


class NotAVideoError(VideoError):
    """The file is not a container FFmpeg can read, or it holds no video stream."""


class CorruptVideoError(VideoError):
    """The file is a video but is empty, truncated or cannot be decoded."""


class UnsupportedCodecError(VideoError):
    """The stream's codec cannot be decoded by the requested backend."""


class FallbackWarning(UserWarning):
    """A GPU request was served on the CPU (no usable GPU, or a stream NVDEC cannot decode)."""
