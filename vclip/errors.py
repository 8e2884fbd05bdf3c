"""Every exception and warning vclip raises. A video's problem names the file and says what is wrong;
a bad argument repeats the value and says what is allowed.

    Exception
    ├── VideoError                  a video cannot be used: ``path`` and ``problem``
    │   ├── VideoNotFoundError      (also a FileNotFoundError) the file does not exist
    │   ├── UnreadableVideoError    it exists but cannot be read: permissions, I/O, a dead server
    │   ├── NotAVideoError          not a container FFmpeg reads, or no video stream in it
    │   ├── CorruptVideoError       empty, truncated, or its frames cannot be decoded
    │   ├── UnsupportedCodecError   the codec cannot be decoded by the backend asked for
    │   └── NoAudioError            audio was required and the video has no audio stream
    ├── ArgumentError               (also a ValueError and a TypeError) a bad argument
    ├── OutputError                 an output path of the command line cannot be used
    └── UsageError                  a command-line argument that was refused (exit status 2)
    UserWarning
    ├── FallbackWarning             a GPU request was served on the CPU
    ├── TruncatedVideoWarning       a cut-off last frame was left out of an index
    ├── IndexCacheWarning           the index cache folder cannot be used safely
    ├── CatalogWarning              a catalogued video changed and was indexed again
    └── RemoteReadWarning           a server makes remote reads costly (it ignores Range)

The exported classes are also names of the package (``vclip.VideoError``...) and say so in their
``__module__``.
"""

from __future__ import annotations

import builtins
import errno
import os

__all__ = [
    "VideoError",
    "VideoNotFoundError",
    "UnreadableVideoError",
    "NotAVideoError",
    "CorruptVideoError",
    "UnsupportedCodecError",
    "NoAudioError",
    "ArgumentError",
    "OutputError",
    "UsageError",
    "FallbackWarning",
    "TruncatedVideoWarning",
    "IndexCacheWarning",
    "CatalogWarning",
    "RemoteReadWarning",
    "video_error_from_os_error",
    "os_reason",
    "fail",
    "warning_class",
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


class UnreadableVideoError(VideoError):
    """The file (or its path) exists but cannot be read: permission denied, a symlink loop, a
    name longer than the file system allows, an I/O error. Not a problem of the video's content."""


class NotAVideoError(VideoError):
    """The file is not a container FFmpeg can read, or it holds no video stream."""


class CorruptVideoError(VideoError):
    """The file is a video but is empty, truncated or cannot be decoded.

    Attributes:
        frames: When only some frames are lost (a damaged picture and those decoded from it), the
            frame numbers of a request that could not be decoded, sorted; the request's other
            frames were written. None when the whole video is unusable.
    """

    def __init__(self, path: str | os.PathLike, problem: str, frames=None):
        super().__init__(path, problem)
        self.frames: tuple[int, ...] | None = None if frames is None else tuple(int(f) for f in frames)

    def __reduce__(self):
        return (type(self), (self.path, self.problem, self.frames))


class UnsupportedCodecError(VideoError):
    """The stream's codec cannot be decoded by the requested backend."""


class NoAudioError(VideoError):
    """Audio was asked for with ``AudioSpec(missing="error")`` and the video has no audio stream."""


class ArgumentError(ValueError, TypeError):
    """A public argument has the wrong type or value; the message echoes it and names what is allowed."""


class OutputError(Exception):
    """An output of the command line (``--out``) cannot be used as asked; the message says why (exit status 2)."""


class UsageError(Exception):
    """A command-line argument the library refused (exit status 2); the message says why."""


class FallbackWarning(UserWarning):
    """A GPU request was served on the CPU (no usable GPU, or a stream NVDEC cannot decode)."""


class TruncatedVideoWarning(UserWarning):
    """A video was cut off mid-frame; the incomplete frame was left out of its index."""


class IndexCacheWarning(UserWarning):
    """The on-disk index cache folder cannot be used safely (writable by others, not a folder...);
    indexes are still built, just not stored there."""


class CatalogWarning(UserWarning):
    """A video changed since the catalog was built; it was indexed again."""


class RemoteReadWarning(UserWarning):
    """A server answers range requests with the whole file; vclip keeps the file in a local spill
    file (within ``vclip.set_remote_options(spill_limit=...)``) and reads it from there."""


_EXPORTED = (VideoError, VideoNotFoundError, UnreadableVideoError, NotAVideoError, CorruptVideoError,
             UnsupportedCodecError, NoAudioError, ArgumentError, FallbackWarning, TruncatedVideoWarning,
             IndexCacheWarning, CatalogWarning, RemoteReadWarning)
for _class in _EXPORTED:
    _class.__module__ = "vclip"


def fail(name: str, value: object, expected: str) -> ArgumentError:
    """The error for argument ``name`` (``value``), which must be ``expected``: ``raise fail(...)``."""
    return ArgumentError(f"{name} ({value!r}) must be {expected}")


def warning_class(name: str) -> type[Warning]:
    """The warning class called ``name`` (vclip's or a built-in one; else UserWarning): a worker
    process names the warnings it caught, and its parent raises them again."""
    found = globals().get(name) or getattr(builtins, name, None)
    return found if isinstance(found, type) and issubclass(found, Warning) else UserWarning


def os_reason(error: BaseException) -> str:
    """The short reason of an OS (or other) error, for messages."""
    return getattr(error, "strerror", None) or str(error) or type(error).__name__


def video_error_from_os_error(path: str | os.PathLike, error: OSError) -> VideoError:
    """The :class:`VideoError` for an ``OSError`` met while looking at or reading ``path``.

    A missing file (or a file where a folder of the path should be) is :class:`VideoNotFoundError`;
    a folder is :class:`NotAVideoError`; permission problems, symlink loops, names that are too long
    and I/O errors are :class:`UnreadableVideoError`, each with a problem in plain words.
    """
    number = getattr(error, "errno", None)
    reason = getattr(error, "strerror", None) or str(error)
    if isinstance(error, FileNotFoundError) or number == errno.ENOENT:
        return VideoNotFoundError(path, "file does not exist")
    if number == errno.ENOTDIR:
        return VideoNotFoundError(path, "file does not exist (a folder in its path is a file)")
    if isinstance(error, IsADirectoryError) or number == errno.EISDIR:
        return NotAVideoError(path, "is a folder, not a file")
    if isinstance(error, PermissionError) or number in (errno.EACCES, errno.EPERM):
        return UnreadableVideoError(
            path, "permission denied (the file, or a folder above it, cannot be read by this user)"
        )
    if number == errno.ELOOP:
        return UnreadableVideoError(path, "too many levels of symbolic links (a symlink loop)")
    if number == errno.ENAMETOOLONG:
        return UnreadableVideoError(path, "file name too long for the file system (a name over 255 bytes?)")
    return UnreadableVideoError(path, f"cannot be read ({reason})")
