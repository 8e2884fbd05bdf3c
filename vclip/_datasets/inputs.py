"""Where a dataset's videos come from: (path, label) pairs or labelled segments, a file list, or one
folder per class; read the same way by the loader, the catalog and the command line."""

from __future__ import annotations

import codecs
import csv
import math
import numbers
import operator
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._bytes.sources import is_url
from ..errors import ArgumentError, PathNotFoundError

__all__ = ["LabeledVideo", "LABEL_RANGE", "UNLABELLED", "list_file_paths", "list_file_text", "load_videos",
           "video_files", "VIDEO_EXTENSIONS"]

VIDEO_EXTENSIONS = (".mp4", ".m4v", ".mkv", ".webm", ".mov", ".avi", ".mpg", ".mpeg", ".ts", ".flv", ".wmv")

LABEL_RANGE = (-(2**63), 2**63 - 1)
"""Labels are int64 (the loader's ``labels`` tensor, the catalog's column)."""

# Byte order marks of list files, longest first (UTF-32 LE begins like UTF-16 LE).
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))

# Header names of a list file's columns, and the column each stands for.
_COLUMNS = {
    "path": "path", "video": "path", "label": "label",
    "start": "start", "start_seconds": "start", "start_time": "start",
    "end": "end", "end_seconds": "end", "end_time": "end",
}


@dataclass(frozen=True)
class LabeledVideo:
    """One video of a dataset (or one labelled segment of it) and its class label.

    Attributes:
        path: The video file.
        label: The class label.
        start, end: The segment in seconds (None: the video's start or end); clips are drawn
            from the frames whose pts lie in ``[start, end)``. One video may be listed several
            times with different segments and labels.
    """

    path: str
    label: int
    start: float | None = None
    end: float | None = None

    def __post_init__(self):
        object.__setattr__(self, "label", _label(self.label, str(self.path)))
        where = f"{self.path}: segment"
        for name in ("start", "end"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, _seconds(value, f"{where} {name}"))
        if self.start is not None and self.end is not None and self.start >= self.end:
            raise ArgumentError(f"{where} start ({self.start}) must be before its end ({self.end})")

    @property
    def segment(self) -> tuple[float | None, float | None] | None:
        """``(start, end)`` seconds, or None for the whole video."""
        return None if self.start is None and self.end is None else (self.start, self.end)


VideoSource = str | os.PathLike | Iterable[tuple | LabeledVideo]


def load_videos(source: VideoSource) -> tuple[list[LabeledVideo], tuple[str, ...] | None]:
    """The videos of ``source`` and, for class folders and class-name labels, the class names
    (label ``i`` is name ``i``; None where every label is an integer).

    Args:
        source: Either (path, label) pairs, ``(path, label, start, end)`` segments (seconds,
            either may be None) or :class:`LabeledVideo` rows; a text or CSV file with one
            ``path label`` / ``path,label`` or ``path start end label`` / ``path,start,end,label``
            per line, or a CSV whose header names the columns (``path``, ``label`` and optionally
            ``start``, ``end``, in any order); blank lines and ``#`` comments are skipped, relative
            paths are taken from the list's folder (URLs are kept as they are), times are seconds or
            ``[HH:]MM:SS[.ff]``;
            or a root folder with one subfolder per class, whose video files (by extension,
            searched recursively) get the label of the subfolder's position in sorted order; a
            folder of videos without subfolders gives them no class: label -1.

            Labels are integers, or class names (``abseiling``, ``playing guitar``): when no
            label of a list file or of the pairs is an integer, they are class names, numbered in
            sorted name order as the class folders are (and torchvision's ``ImageFolder``): label
            ``i`` is ``class_names[i]``; integers and names mixed are refused. In a whitespace-separated list
            the label is the last word: names with spaces need a CSV.

    A list file may be UTF-8 (with or without a byte order mark), or UTF-16 or UTF-32 (with a byte
    order mark, or UTF-16 told by its zero bytes); bytes that are not UTF-8 (a Latin-1 list) stay
    the bytes of the file names they spell, as the file system has them.

    Raises:
        PathNotFoundError: (a FileNotFoundError) ``source`` is a path that does not exist.
        ArgumentError: (a ValueError) A malformed line or pair, a label that is neither an int64
            integer nor a class name (an empty one, or integers mixed with names in pairs), a bad
            segment, a list file that is not text, no videos at all; the message names the file
            and line.
    """
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if path.is_dir():
            videos, names = _from_class_folders(path)
        elif path.is_file():
            videos, names = _from_file_list(path)
        else:
            raise PathNotFoundError(f"videos ({os.fspath(source)!r}) is neither a folder nor a file list that "
                                    "exists")
    else:
        videos, names = _from_pairs(source)
    if not videos:
        raise ArgumentError(f"videos ({source!r}) holds no videos")
    return videos, names


_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")  # seconds as CSVs write them
_CLOCK_PART = re.compile(r"[0-9]+(?:\.[0-9]*)?")  # MM or SS[.ff] of [HH:]MM:SS[.ff]


def _label(value, where: str) -> int:
    expected = f"{where}: label ({value!r}) must be an integer in [{LABEL_RANGE[0]}, {LABEL_RANGE[1]}] (int64)"
    if isinstance(value, bool):
        raise ArgumentError(expected)
    if isinstance(value, int):
        label = value
    elif isinstance(value, str) and _INTEGER.fullmatch(text := value.strip()):
        label = int(text)  # Python's int() would also take "1_0" as 10
    else:
        try:
            label = operator.index(value)  # NumPy integers
        except TypeError:
            raise ArgumentError(expected) from None
    if not LABEL_RANGE[0] <= label <= LABEL_RANGE[1]:
        raise ArgumentError(expected)
    return label


def _seconds(value, where: str) -> float:
    """Seconds from a number or a string (``12.5``, ``MM:SS[.ff]``, ``HH:MM:SS[.ff]``), >= 0."""
    expected = f"{where} ({value!r}) must be seconds >= 0 (a number or [HH:]MM:SS[.ff])"
    if isinstance(value, bool):
        raise ArgumentError(expected)
    if isinstance(value, numbers.Real):
        seconds = float(value)
    elif isinstance(value, str):
        parts = value.strip().split(":")
        pattern = _DECIMAL if len(parts) == 1 else _CLOCK_PART  # Python's float() would take "1_0" as 10
        if len(parts) > 3 or not all(pattern.fullmatch(part) for part in parts) or any(
                float(part) >= 60 for part in parts[1:]):
            raise ArgumentError(expected)
        seconds = sum(float(part) * 60 ** power for power, part in enumerate(reversed(parts)))
    else:
        raise ArgumentError(expected)
    if not math.isfinite(seconds) or seconds < 0:
        raise ArgumentError(expected)
    return seconds


def _is_seconds(text: str) -> bool:
    try:
        _seconds(text, "")
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class _Row:
    """A row of a dataset as written: its label is an integer or a class name, decided for the
    whole dataset by :func:`_numbered`."""

    path: str
    label: Any
    start: Any
    end: Any
    where: str

    def video(self, label: int) -> LabeledVideo:
        """The row's video with ``label``; an empty start or end is None."""
        start, end = (None if isinstance(value, str) and not value.strip() else value
                      for value in (self.start, self.end))
        try:
            return LabeledVideo(self.path, label, start, end)
        except ValueError as error:
            raise ArgumentError(f"{self.where}: {error}") from None


def _is_integer_label(value) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, str):
        return _INTEGER.fullmatch(value.strip()) is not None
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


def _numbered(rows: list[_Row]) -> tuple[list[LabeledVideo], tuple[str, ...] | None]:
    """The videos of ``rows`` and their class names: integer labels as they are when every label
    is an integer; otherwise every label is a class name, numbered in sorted name order as
    torchvision's ``ImageFolder`` numbers its folders (label ``i`` is name ``i``)."""
    integers = [row for row in rows if _is_integer_label(row.label)]
    if len(integers) == len(rows):
        return [row.video(_label(row.label, row.where)) for row in rows], None
    if integers:  # a typo in one integer label must not renumber the whole dataset as names
        named = next(row for row in rows if not _is_integer_label(row.label))
        raise ArgumentError(f"the labels mix integers ({integers[0].where}: {integers[0].label!r}) and class names "
                            f"({named.where}: {named.label!r}); give every video an integer label, or every video "
                            "a class name")
    names = {row.where: _class_name(row) for row in rows}
    classes = tuple(sorted(set(names.values())))
    numbers = {name: number for number, name in enumerate(classes)}
    return [row.video(numbers[names[row.where]]) for row in rows], classes


def _class_name(row: _Row) -> str:
    """The label of ``row`` as a class name: text, not empty, not a video file's name."""
    if isinstance(row.label, str):
        name = row.label.strip()
        if not name:
            raise ArgumentError(f"{row.where}: the label is empty; give every video a class name or an integer")
        if os.path.splitext(name)[1].lower() in VIDEO_EXTENSIONS:
            raise ArgumentError(f"{row.where}: label ({name!r}) is a video's file name, not a class name: a path "
                                "with spaces and no label? Give every line a label")
        return name
    raise ArgumentError(f"{row.where}: label ({row.label!r}) must be a class name (text) or an integer")


def _from_pairs(pairs: Iterable) -> tuple[list[LabeledVideo], tuple[str, ...] | None]:
    rows: list[_Row | LabeledVideo] = []
    for number, pair in enumerate(pairs):
        if isinstance(pair, LabeledVideo):
            rows.append(pair)
        elif isinstance(pair, (str, os.PathLike)) or not hasattr(pair, "__len__") or len(pair) not in (2, 4):
            raise ArgumentError(f"videos[{number}] ({pair!r}) must be a (path, label) pair or a "
                                "(path, label, start_seconds, end_seconds) segment")
        else:
            path, label, start, end = (*pair, None, None)[:4]
            rows.append(_Row(os.fspath(path), label, start, end, f"videos[{number}]"))
    written = [row for row in rows if isinstance(row, _Row)]
    if len(written) < len(rows) and not all(_is_integer_label(row.label) for row in written):
        raise ArgumentError("videos mixes LabeledVideo entries (integer labels) with class-name labels; give "
                            "every video a class name, or every video an integer label")
    numbered, names = _numbered(written)
    numbered_rows = iter(numbered)
    return [row if isinstance(row, LabeledVideo) else next(numbered_rows) for row in rows], names


def _numbered_rows(text: str) -> list[tuple[int, str]]:
    """The lines of a list file that are not blank or ``#`` comments, stripped, with their numbers."""
    lines = [(number, line.strip()) for number, line in enumerate(text.splitlines(), start=1)]
    return [(number, line) for number, line in lines if line and not line.startswith("#")]


def list_file_text(list_file: Path) -> str:
    """The text of a list file (see :func:`load_videos` for the encodings read).

    Raises:
        OSError: The file cannot be read.
        ArgumentError: It is not text: zero bytes that are not UTF-16, or invalid UTF-16/UTF-32.
    """
    data = list_file.read_bytes()
    encoding = next((name for bom, name in _BOMS if data.startswith(bom)), None)
    if encoding is None and b"\0" in data:
        head = data[:4096]
        if head[1::2].count(0) >= len(head) // 4:  # ASCII-heavy text, every other byte zero
            encoding = "utf-16-le"
        elif head[0::2].count(0) >= len(head) // 4:
            encoding = "utf-16-be"
        else:
            raise ArgumentError(f"{list_file}: holds zero bytes but is not UTF-16: not a list of videos")
    if encoding is None or encoding == "utf-8-sig":
        return data.decode(encoding or "utf-8", "surrogateescape")
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as error:
        raise ArgumentError(f"{list_file}: not valid {encoding.upper()} text ({error.reason} at byte "
                            f"{error.start})") from None


def _from_file_list(list_file: Path) -> tuple[list[LabeledVideo], tuple[str, ...] | None]:
    lines = _numbered_rows(list_file_text(list_file))
    columns = _header(lines[0][1], list_file) if lines else None
    if columns is not None:
        return _numbered([_from_columns(list_file, number, text, columns) for number, text in lines[1:]])
    return _numbered([_from_line(list_file, number, text) for number, text in lines])


def list_file_paths(list_file: Path) -> list[str]:
    """The videos a list file names, read as the loader reads it (a header naming its columns, or
    ``path label``, ``path,label`` or ``path start end label`` lines), where a line may also be a
    path alone: commands that need no labels take plain lists of files.

    Raises:
        OSError: The file cannot be read.
        ArgumentError: (a ValueError) The file is not text, a header names an unknown column, or a
            row does not fit its header.
    """
    lines = _numbered_rows(list_file_text(list_file))
    if lines and lines[0][1].lower() == "path":  # the header of a plain list
        lines = lines[1:]
    columns = _header(lines[0][1], list_file) if lines else None
    if columns is not None:
        return [_from_columns(list_file, number, line, columns).path for number, line in lines[1:]]
    paths = []
    for number, line in lines:
        whole = _located(list_file, line)
        if is_url(line) or not os.path.exists(whole):
            try:
                row = _from_line(list_file, number, line)
            except ValueError:  # no label: the line is the path
                row = None
            if row is not None and (_is_integer_label(row.label) or is_url(row.path) or os.path.exists(row.path)):
                whole = row.path  # a label after the path (a class name only where the path exists)
        paths.append(whole)
    return paths


def _split(text: str, limit: int = -1) -> list[str]:
    """Fields of a CSV line (quotes honoured) or of a whitespace-separated one."""
    if "," in text:
        return [field.strip() for field in next(csv.reader([text]))]
    return text.split(None, limit) if limit < 0 else text.rsplit(None, limit)


def _header(text: str, list_file: Path) -> list[str] | None:
    """The columns a header line names (one of them ``label``), or None when the line is not a
    header; without a known path column, the first column holds the paths."""
    names = [field.lower() for field in _split(text)]
    if "label" not in names:
        return None
    if not any(_COLUMNS.get(name) == "path" for name in names):
        names[0] = "path"
    unknown = [name for name in names if name not in _COLUMNS]
    if unknown:
        raise ArgumentError(f"{list_file}: unknown column {unknown[0]!r} in the header "
                            f"(known: {', '.join(sorted(_COLUMNS))})")
    return [_COLUMNS[name] for name in names]


def _from_columns(list_file: Path, number: int, text: str, columns: list[str]) -> _Row:
    where = f"{list_file}, line {number}"
    fields = _split(text)
    if len(fields) != len(columns):
        raise ArgumentError(f"{where} ({text!r}) has {len(fields)} fields, the header names {len(columns)}")
    row = dict(zip(columns, fields))
    return _Row(_located(list_file, row["path"]), row["label"], row.get("start"), row.get("end"), where)


def _from_line(list_file: Path, number: int, text: str) -> _Row:
    """A headerless line: ``path start end label`` when its two fields before the label are
    times, else ``path label`` (paths may hold spaces or commas)."""
    where = f"{list_file}, line {number}"
    separator = "," if "," in text else None
    parts = text.rsplit(separator, 3)
    if len(parts) == 4 and _is_seconds(parts[1]) and _is_seconds(parts[2]):
        path, start, end, label = (part.strip() for part in parts)
        return _Row(_located(list_file, path), label, start, end, where)
    parts = text.rsplit(separator, 1)
    if len(parts) != 2:
        raise ArgumentError(f"{where} ({text!r}) must be 'path label', 'path,label' or 'path start end label'")
    return _Row(_located(list_file, parts[0].strip()), parts[1].strip(), None, None, where)


def _located(list_file: Path, path: str) -> str:
    """A path of a list file: relative ones from the list's folder, URLs as they are."""
    return path if is_url(path) else os.fspath(list_file.parent / path)


def video_files(folder: Path) -> list[Path]:
    """The video files under ``folder`` (searched recursively, by extension), sorted."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in VIDEO_EXTENSIONS)


UNLABELLED = -1
"""The label of a video that has none (a flat folder of videos, a catalog row without a label)."""


def _from_class_folders(root: Path) -> tuple[list[LabeledVideo], tuple[str, ...] | None]:
    classes = sorted(entry.name for entry in root.iterdir() if entry.is_dir() and not entry.name.startswith("."))
    if not classes:  # a flat folder of videos: no labels, as ``vclip index`` reads it
        files = video_files(root)
        if not files:
            raise ArgumentError(f"videos ({os.fspath(root)!r}) is a folder without class subfolders or videos "
                                f"(by extension: {', '.join(VIDEO_EXTENSIONS)})")
        return [LabeledVideo(os.fspath(path), UNLABELLED) for path in files], None
    videos: list[LabeledVideo] = []
    for label, name in enumerate(classes):
        files = video_files(root / name)
        videos.extend(LabeledVideo(os.fspath(p), label) for p in files)
    return videos, tuple(classes)
