"""Hugging Face ``datasets`` as a dataset: :class:`HuggingFaceSource` turns a ``datasets.Dataset``
whose column holds paths, URLs, bytes or the ``Video`` feature into the videos and labels of a
:class:`~vclip.ClipLoader` (which also takes the Dataset itself) or of :func:`~vclip.webdataset.write_shards`.

vclip reads the column's stored form (``{"bytes", "path"}`` for the ``Video`` feature, without
torchcodec decoding it) through the Dataset's Arrow table: bytes are used where they lie (a
memory-mapped Arrow file is not copied) and named by their digest, paths and URLs are opened as
any other video. Nothing here imports ``datasets``: any object with its API (``column_names``,
``features``, ``with_format("arrow")``) works.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ._bytes.sources import RangeReader, hold_video
from ._datasets.inputs import LabeledVideo
from .errors import ArgumentError, fail
from .index import VideoIndex, index_video

__all__ = ["HuggingFaceSource", "is_hf_dataset"]

_VIDEO_COLUMNS = ("video", "path", "file", "filename", "url", "mp4")  # looked for when no column has the Video feature


def is_hf_dataset(value: object) -> bool:
    """Whether ``value`` looks like a ``datasets.Dataset`` (duck-typed: no import of ``datasets``)."""
    return all(hasattr(value, name) for name in ("column_names", "features", "with_format", "__len__"))


class HuggingFaceSource:
    """The videos of a Hugging Face ``datasets.Dataset``, one per row, with their labels.

    Args:
        dataset: The Dataset (a split, after any ``select``/``shuffle``/``filter``).
        video_column: The column of videos: paths or URLs (strings), bytes, or the ``Video``
            feature (``{"bytes", "path"}`` stored, bytes used when present). Default: the column
            with the ``Video`` feature, else one named ``video``, ``path``, ``file``, ``filename``,
            ``url`` or ``mp4``.
        label_column: The column of labels: integers (a ``ClassLabel`` names them) or class names
            (strings, numbered in ``class_names`` or in sorted order). Default: the ``ClassLabel``
            column, else ``label`` when there is one, else none (every label -1).
        class_names: Names of the labels (default: the ``ClassLabel``'s, or the sorted names).
        cache_dir: Folder for an on-disk cache of video indexes (as :class:`~vclip.ClipLoader`'s).

    Attributes:
        videos: ``LabeledVideo(name, label)`` per row; a row's bytes are named ``<bytes:DIGEST>``
            and readable while this source is alive (decode them in this process: decode worker
            processes take paths and URLs only).
        class_names: As above.

    Raises:
        ArgumentError: No such column (the message lists the columns), a row without a video, a
            label that is neither an integer nor a class name.
    """

    def __init__(self, dataset: Any, *, video_column: str | None = None, label_column: str | None = None,
                 class_names: Sequence[str] | None = None, cache_dir: str | os.PathLike | None = None):
        if not is_hf_dataset(dataset):
            raise fail("dataset", type(dataset).__name__, "a datasets.Dataset (column_names, features, with_format)")
        columns = list(dataset.column_names)
        features = dataset.features
        self.video_column = video_column or _video_column(columns, features)
        if self.video_column not in columns:
            raise ArgumentError(f"video_column ({self.video_column!r}) is not a column of the dataset "
                                f"(columns: {', '.join(columns)})")
        self.label_column = label_column if label_column is not None else _label_column(columns, features)
        if self.label_column is not None and self.label_column not in columns:
            raise ArgumentError(f"label_column ({self.label_column!r}) is not a column of the dataset "
                                f"(columns: {', '.join(columns)})")
        self.dataset = dataset
        self.cache_dir = cache_dir
        self._class_names_given = class_names
        table = dataset.with_format("arrow")
        self._held: list[RangeReader] = []  # keeps in-memory videos readable while the source lives
        names = [self._video_name(value, row) for row, value in enumerate(table[self.video_column])]
        labels, self.class_names = self._labels(table, features, class_names)
        self.videos: list[LabeledVideo] = [LabeledVideo(name, label) for name, label in zip(names, labels)]

    def __reduce__(self):  # a copy (a DataLoader worker) reads the Dataset again; its bytes get the same names
        return (_rebuilt, (self.dataset, self.video_column, self.label_column, self._class_names_given,
                           self.cache_dir))

    def __len__(self) -> int:
        return len(self.videos)

    def __repr__(self) -> str:
        classes = f", {len(self.class_names)} classes" if self.class_names else ""
        return f"HuggingFaceSource({len(self.videos)} videos from column {self.video_column!r}{classes})"

    def index(self, number: int) -> VideoIndex:
        """The index of video ``number`` (one demux pass; cached)."""
        return index_video(self.videos[number].path, cache_dir=self.cache_dir)

    stored_index = index

    def _video_name(self, value: Any, row: int) -> str:
        """A row's video (an Arrow scalar) as a name: its path or URL, or its bytes held where they lie."""
        import pyarrow as pa  # what datasets stores its tables in

        if pa.types.is_struct(value.type):  # the Video feature's stored form: {"bytes", "path"}
            if value["bytes"].is_valid:
                value = value["bytes"]
            else:
                value = value["path"]
        if (pa.types.is_binary(value.type) or pa.types.is_large_binary(value.type)) and value.is_valid:
            return self._hold(memoryview(value.as_buffer()).toreadonly())
        stored = value.as_py()
        if not isinstance(stored, str) or not stored:
            raise ArgumentError(f"row {row} of column {self.video_column!r} holds no video ({stored!r}): a path, a "
                                "URL, bytes or a Video feature's {'bytes', 'path'} is needed")
        return stored

    def _hold(self, data: bytes | memoryview) -> str:
        name, reader = hold_video(data)
        if reader is not None:
            self._held.append(reader)
        return name

    def _labels(self, table: Any, features: Any, class_names: Sequence[str] | None) -> tuple[
            list[int], tuple[str, ...] | None]:
        names = tuple(class_names) if class_names is not None else None
        if self.label_column is None:
            return [-1] * len(self.dataset), names
        feature = features[self.label_column]
        if names is None and type(feature).__name__ == "ClassLabel":
            names = tuple(feature.names)
        values = table[self.label_column].to_pylist()
        if all(isinstance(value, int) and not isinstance(value, bool) for value in values):
            return [int(value) for value in values], names
        if not all(isinstance(value, str) for value in values):
            bad = next(value for value in values if not isinstance(value, (int, str)) or isinstance(value, bool))
            raise ArgumentError(f"label_column ({self.label_column!r}) holds {bad!r}: labels must be integers or "
                                "class names (strings)")
        names = names or tuple(sorted(set(values)))
        position = {name: number for number, name in enumerate(names)}
        unknown = sorted(set(values) - set(position))
        if unknown:
            raise ArgumentError(f"label_column ({self.label_column!r}) names classes not in class_names: {unknown[:5]}")
        return [position[value] for value in values], names


def _rebuilt(dataset, video_column, label_column, class_names, cache_dir) -> HuggingFaceSource:
    return HuggingFaceSource(dataset, video_column=video_column, label_column=label_column,
                             class_names=class_names, cache_dir=cache_dir)


def _video_column(columns: list[str], features: Any) -> str:
    with_video = [name for name in columns if type(features.get(name)).__name__ == "Video"]
    if with_video:
        return with_video[0]
    named = [name for name in _VIDEO_COLUMNS if name in columns]
    if not named:
        raise ArgumentError(f"no video column found (none has the Video feature or is named "
                            f"{', '.join(_VIDEO_COLUMNS)}); pass video_column= (columns: {', '.join(columns)})")
    return named[0]


def _label_column(columns: list[str], features: Any) -> str | None:
    labelled = [name for name in columns if type(features.get(name)).__name__ == "ClassLabel"]
    if labelled:
        return labelled[0]
    return "label" if "label" in columns else None
