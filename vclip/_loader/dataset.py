"""Where a ClipLoader's videos come from: (path, label) pairs, a file list, or one folder per class."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from .._sources import is_url

__all__ = ["LabeledVideo", "load_videos", "VIDEO_EXTENSIONS"]

VIDEO_EXTENSIONS = (".mp4", ".m4v", ".mkv", ".webm", ".mov", ".avi", ".mpg", ".mpeg", ".ts", ".flv", ".wmv")


@dataclass(frozen=True)
class LabeledVideo:
    """One video of a dataset and its class label."""

    path: str
    label: int


VideoSource = str | os.PathLike | Iterable[tuple[str | os.PathLike, int]]


def load_videos(source: VideoSource) -> tuple[list[LabeledVideo], tuple[str, ...] | None]:
    """The videos of ``source`` and, for class folders, the class names (label ``i`` is name ``i``).

    Args:
        source: Either (path, label) pairs; a text or CSV file with one ``path label`` or
            ``path,label`` per line (blank lines, ``#`` comments and a ``path,label`` header are
            skipped; relative paths are taken from the list's folder, URLs are kept); or a root folder with one
            subfolder per class, whose video files (by extension, searched recursively) get the
            label of the subfolder's position in sorted order.

    Raises:
        FileNotFoundError: ``source`` is a path that does not exist.
        ValueError: A malformed line or pair, a label that is not an integer, no videos at all.
    """
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if path.is_dir():
            videos, names = _from_class_folders(path)
        elif path.is_file():
            videos, names = _from_file_list(path), None
        else:
            raise FileNotFoundError(f"videos ({os.fspath(source)!r}) is neither a folder nor a file list")
    else:
        videos, names = _from_pairs(source), None
    if not videos:
        raise ValueError(f"videos ({source!r}) holds no videos")
    return videos, names


def _label(value, where: str) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{where}: label ({value!r}) must be an integer")
    try:
        return int(value) if isinstance(value, int) else int(str(value).strip())
    except ValueError:
        raise ValueError(f"{where}: label ({value!r}) must be an integer") from None


def _from_pairs(pairs: Iterable) -> list[LabeledVideo]:
    videos = []
    for number, pair in enumerate(pairs):
        if isinstance(pair, (str, os.PathLike)) or len(pair) != 2:
            raise ValueError(f"videos[{number}] ({pair!r}) must be a (path, label) pair")
        path, label = pair
        videos.append(LabeledVideo(os.fspath(path), _label(label, f"videos[{number}]")))
    return videos


def _from_file_list(list_file: Path) -> list[LabeledVideo]:
    videos = []
    for number, line in enumerate(list_file.read_text().splitlines(), start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        parts = text.rsplit(",", 1) if "," in text else text.rsplit(None, 1)
        where = f"{list_file}, line {number}"
        if len(parts) != 2:
            raise ValueError(f"{where} ({text!r}) must be 'path label' or 'path,label'")
        path, label = parts[0].strip(), parts[1].strip()
        if not videos and label.lower() == "label":
            continue  # CSV header
        located = path if is_url(path) else os.fspath(list_file.parent / path)  # URLs as they are
        videos.append(LabeledVideo(located, _label(label, where)))
    return videos


def _from_class_folders(root: Path) -> tuple[list[LabeledVideo], tuple[str, ...]]:
    classes = sorted(entry.name for entry in root.iterdir() if entry.is_dir() and not entry.name.startswith("."))
    if not classes:
        raise ValueError(f"videos ({os.fspath(root)!r}) is a folder without class subfolders")
    videos = []
    for label, name in enumerate(classes):
        files = sorted(p for p in (root / name).rglob("*") if p.is_file() and p.suffix.lower() in VIDEO_EXTENSIONS)
        videos.extend(LabeledVideo(os.fspath(p), label) for p in files)
    return videos, tuple(classes)
