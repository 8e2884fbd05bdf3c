"""Every exception and warning vclip raises. A video's problem names the file and says what is wrong;
a bad argument repeats the value and says what is allowed.

    Exception
    ├── VideoError                  a video cannot be used: ``path`` and ``problem``
    │   ├── VideoNotFoundError      (also a FileNotFoundError) the file does not exist
    │   ├── UnreadableVideoError    it exists but cannot be read: permissions, I/O, a dead server
    │   ├── NotAVideoError          not a container FFmpeg reads, or no video stream in it
    │   ├── CorruptVideoError       empty, truncated, or its frames cannot be decoded
    │   ├── UnsupportedCodecError   the codec cannot be decoded by the backend asked for
    │   ├── NoAudioError            audio was required and the video has no audio stream
    │   ├── NoClipFitsError         (also a ValueError) the video or segment gives no clip asked for
    │   └── NoVideoLeftError        (also a RuntimeError) a loader's shard has no usable video left
    ├── ArgumentError               (also a ValueError and a TypeError) a bad argument
    │   ├── FrameIndexError         (also an IndexError) a frame number outside the stream
    │   ├── PathNotFoundError       (also a FileNotFoundError) a dataset input that does not exist
    │   └── NotInCatalogError       (also a KeyError) a video the catalog does not hold
    ├── OutputError                 an output path of the command line cannot be used
    └── UsageError                  a command-line argument that was refused (exit status 2)
    UserWarning
    ├── FallbackWarning             a GPU request was served on the CPU
    ├── TruncatedVideoWarning       a cut-off last frame was left out of an index
    ├── IndexCacheWarning           the index cache folder cannot be used safely
    ├── CatalogWarning              a catalogued video changed and was indexed again
    ├── RemoteReadWarning           a server makes remote reads costly (it ignores Range)
    └── DamagedHeaderWarning        an impossible value of a header was ignored

The exported classes are also names of the package (``vclip.VideoError``...) and say so in their
``__module__``. Each class that takes the place of a built-in exception also derives from it, so
``except IndexError`` still catches a frame number out of range.

Below the classes are the checks that raise them, for vclip's own modules: of public arguments
(one wording for every error: the message echoes the value and names what is allowed, ``stride (0)
must be an integer >= 1``), of byte counts as people write them (``parse_bytes("8GiB")``,
``format_bytes(3_185_049_600)``), and of reads that got fewer bytes than they asked.
"""

from __future__ import annotations

import builtins
import errno
import math
import numbers
import operator
import os
import re
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, TypeVar

import numpy as np

__all__ = [
    "VideoError",
    "VideoNotFoundError",
    "UnreadableVideoError",
    "NotAVideoError",
    "CorruptVideoError",
    "UnsupportedCodecError",
    "NoAudioError",
    "NoClipFitsError",
    "NoVideoLeftError",
    "ArgumentError",
    "FrameIndexError",
    "PathNotFoundError",
    "NotInCatalogError",
    "OutputError",
    "UsageError",
    "FallbackWarning",
    "TruncatedVideoWarning",
    "IndexCacheWarning",
    "CatalogWarning",
    "RemoteReadWarning",
    "DamagedHeaderWarning",
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


class NoClipFitsError(VideoError, ValueError):
    """The video (or the segment asked for) gives none of the clips asked for: it is shorter than one
    clip with ``end_policy="error"``, no frame lies in the segment, it has no frames, or no frame rate
    to sample it in seconds. Also a ``ValueError``."""


class NoVideoLeftError(VideoError, RuntimeError):
    """A loader with ``on_error="skip"`` (or ``"replace"``) found no video of its shard left to take
    the place of a failed one: every one it tried failed too (``loader.stats().skipped`` lists them).
    ``path`` is the video that needed replacing. Also a ``RuntimeError``."""


class ArgumentError(ValueError, TypeError):
    """A public argument has the wrong type or value; the message echoes it and names what is allowed."""


class FrameIndexError(ArgumentError, IndexError):
    """A frame number outside the stream (``-num_frames <= i < num_frames`` is allowed). Also an ``IndexError``."""


class PathNotFoundError(ArgumentError, FileNotFoundError):
    """A dataset input that does not exist: a folder, a list file or CSV, a catalog. Also a
    ``FileNotFoundError`` (a video that does not exist is a :class:`VideoNotFoundError`)."""


class NotInCatalogError(ArgumentError, KeyError):
    """A video the catalog does not hold. Also a ``KeyError``."""

    def __str__(self) -> str:  # the message as it is, not quoted as KeyError quotes its key
        return str(self.args[0]) if self.args else ""


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


class DamagedHeaderWarning(UserWarning):
    """A video's header holds a value no real video has, which vclip ignores while the frames are
    fine (a pixel aspect ratio beyond 16:1 is taken as square pixels)."""


_EXPORTED = (VideoError, VideoNotFoundError, UnreadableVideoError, NotAVideoError, CorruptVideoError,
             UnsupportedCodecError, NoAudioError, NoClipFitsError, NoVideoLeftError, ArgumentError, FrameIndexError,
             PathNotFoundError, NotInCatalogError, FallbackWarning, TruncatedVideoWarning, IndexCacheWarning,
             CatalogWarning, RemoteReadWarning, DamagedHeaderWarning)
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


# -- checks ---------------------------------------------------------------------------------------
T = TypeVar("T")


def _integer_or_none(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)  # int, numpy integers, anything with __index__
    except TypeError:
        return None


def is_integer(value: Any) -> bool:
    """Whether ``value`` is an integer (an ``int``, a NumPy integer, anything with ``__index__``), not a bool."""
    return _integer_or_none(value) is not None


def check_integer(name: str, value: Any, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """``value`` as an ``int`` (NumPy integers accepted, bools and floats not), within the bounds."""
    number = _integer_or_none(value)
    if number is None or (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
        raise fail(name, value, _integer_words(minimum, maximum))
    return number


def check_optional_integer(name: str, value: Any, *, minimum: int | None = None, none_means: str = "") -> int | None:
    """Like :func:`check_integer`, but ``None`` passes through (``none_means`` says what it means)."""
    if value is None:
        return None
    try:
        return check_integer(name, value, minimum=minimum)
    except ArgumentError:
        suffix = f", or None {none_means}".rstrip() if none_means else ", or None"
        raise fail(name, value, _integer_words(minimum, None) + suffix) from None


def check_count_or_auto(name: str, value: Any, *, minimum: int = 0) -> int | str:
    """``"auto"`` as it is, or ``value`` as an integer >= ``minimum`` (a count the caller may leave to vclip)."""
    if isinstance(value, str) and value == "auto":
        return value
    try:
        return check_integer(name, value, minimum=minimum)
    except ArgumentError:
        raise fail(name, value, f'"auto" or an integer >= {minimum}') from None


def check_number(
    name: str,
    value: Any,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    minimum_inclusive: bool = True,
    maximum_inclusive: bool = True,
) -> float:
    """``value`` as a finite ``float`` (ints and NumPy numbers accepted, bools not), within the bounds."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(float(value))
    if ok:
        number = float(value)
        if minimum is not None:
            ok = number >= minimum if minimum_inclusive else number > minimum
        if ok and maximum is not None:
            ok = number <= maximum if maximum_inclusive else number < maximum
    if not ok:
        raise fail(name, value, _number_words(minimum, maximum, minimum_inclusive, maximum_inclusive))
    return float(value)


def check_choice(name: str, value: Any, allowed: Sequence[T]) -> T:
    """``value`` if it is one of ``allowed``."""
    try:
        if value in allowed:
            return value
    except TypeError:  # unhashable or incomparable values are simply not allowed
        pass
    raise fail(name, value, "one of " + ", ".join(map(repr, allowed)))


def check_size(name: str, value: Any) -> tuple[int, int]:
    """``(height, width)`` from a positive integer (a square) or a pair of positive integers."""
    expected = "a positive integer or a (height, width) pair of positive integers"
    single = _integer_or_none(value)
    if single is not None:
        pair: tuple[Any, ...] = (single, single)
    elif isinstance(value, (tuple, list)) or type(value).__name__ == "ndarray":
        pair = tuple(value)
    else:
        raise fail(name, value, expected)
    numbers_ = [_integer_or_none(v) for v in pair]
    if len(numbers_) != 2 or any(n is None or n < 1 for n in numbers_):
        raise fail(name, value, expected)
    return int(numbers_[0]), int(numbers_[1])  # type: ignore[arg-type]


def _integer_words(minimum: int | None, maximum: int | None) -> str:
    if minimum is not None and maximum is not None:
        return f"an integer in [{minimum}, {maximum}]"
    if minimum is not None:
        return f"an integer >= {minimum}"
    if maximum is not None:
        return f"an integer <= {maximum}"
    return "an integer"


def _number_words(minimum, maximum, minimum_inclusive: bool, maximum_inclusive: bool) -> str:
    if minimum is not None and maximum is not None:
        left, right = "[" if minimum_inclusive else "(", "]" if maximum_inclusive else ")"
        return f"a number in {left}{minimum:g}, {maximum:g}{right}"
    if minimum is not None:
        return f"a number {'>=' if minimum_inclusive else '>'} {minimum:g}"
    if maximum is not None:
        return f"a number {'<=' if maximum_inclusive else '<'} {maximum:g}"
    return "a finite number"


def is_finite_number(value: Any) -> bool:
    """Whether ``value`` is a finite real number (ints and NumPy numbers, not bools)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(float(value))


def check_range(name: str, value: Any, *, low: float | None = None, high: float | None = None,
           positive: bool = False) -> tuple[float, float]:
    """A ``(min, max)`` pair of finite numbers, ``min <= max``, inside ``[low, high]`` (above 0 when ``positive``)."""
    where = (f" in [{low:g}, {high:g}]" if low is not None and high is not None else
             f" >= {low:g}" if low is not None else " > 0" if positive else "")
    expected = f"a (min, max) pair of numbers{where} with min <= max"
    try:
        pair = tuple(value)
    except TypeError:
        raise fail(name, value, expected) from None
    if len(pair) != 2 or not all(is_finite_number(v) for v in pair):
        raise fail(name, value, expected)
    first, second = float(pair[0]), float(pair[1])
    if (first > second or (low is not None and first < low) or (high is not None and second > high)
            or (positive and first <= 0)):
        raise fail(name, value, expected)
    return first, second


def check_flag(name: str, value: Any) -> bool:
    """``value`` as a ``bool`` (NumPy bools accepted, anything else refused)."""
    if not isinstance(value, (bool, np.bool_)):
        raise fail(name, value, "True or False")
    return bool(value)


_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}


def parse_bytes(value: int | float | str, *, name: str = "memory size") -> int:
    """Bytes from ``8589934592``, ``"8GiB"``, ``"1.5 GB"``, ``"512MiB"`` (decimal and binary units).

    Args:
        name: What the value is, for the error message (e.g. ``"memory_budget"``).

    Raises:
        ArgumentError: (a ValueError) Unknown unit, negative or malformed value.
    """
    expected = "a number of bytes >= 0 or a number with a unit: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB (e.g. '8GiB')"
    if isinstance(value, bool):
        raise fail(name, value, expected)
    if isinstance(value, str):
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", value)
        if not match or match.group(2).lower() not in _UNITS:
            raise fail(name, value, expected)
        number, unit = Fraction(match.group(1)), match.group(2).lower()
    else:
        try:
            number = Fraction(check_integer(name, value)) if is_integer(value) else Fraction(
                str(check_number(name, value)))
        except ValueError:
            raise fail(name, value, expected) from None
        unit = ""
    if number < 0:
        raise fail(name, value, expected)
    return math.floor(number * _UNITS[unit])


_SIZE_UNITS = (("TB", "TiB", 4), ("GB", "GiB", 3), ("MB", "MiB", 2), ("KB", "KiB", 1))  # largest first


def format_bytes(count: int) -> str:
    """``"3,185,049,600 bytes (3.19 GB, 2.97 GiB)"``, in the largest unit that shows at least 1.00
    (``"4,194,304 bytes (4.19 MB, 4.00 MiB)"``; below 1.00 KB the bytes alone)."""
    for decimal, binary, power in _SIZE_UNITS:
        if round(abs(count) / 1000**power, 2) >= 1:
            return f"{count:,} bytes ({count / 1000**power:.2f} {decimal}, {count / 1024**power:.2f} {binary})"
    return f"{count:,} bytes"


def check_lengths(name: str, ranges: list[tuple[int, int]], chunks: list[bytes]) -> list[bytes]:
    """``chunks`` if each is as long as its range.

    Raises:
        CorruptVideoError: The source ends inside a range.
    """
    for (offset, length), data in zip(ranges, chunks):
        if len(data) != length:
            raise CorruptVideoError(name, f"ends at byte {offset + len(data)}, {offset + length} are needed "
                                          "(it was changed after indexing?)")
    return chunks
