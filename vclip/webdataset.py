"""WebDataset tar shards as a dataset: :class:`WebDatasetSource` lists the videos of shards on
disk, behind HTTP or on S3 without extracting them, for :class:`~vclip.ClipLoader`, the catalog
(``vclip index``) and the command line; :func:`write_shards` (``vclip shard``) writes them.

A member is read from its byte range inside the shard through the same range-read layer as a
remote file (:mod:`vclip._bytes.sources`: coalesced, concurrent, retried requests), so a clip of a video
in a shard on S3 transfers only the packets its decode plan needs, as a clip of a separate file
does. Each video is named by its shard, member name and byte range
(``s3://bucket/shard-000003.tar#000123.mp4@1536+2300000``); that name works wherever a path is
taken (``VideoDecoder``, ``index_video``, ``vclip info``), and so does the short form
``SHARD.tar#MEMBER`` (the shard's member table is read to find it).

Random access (this module) against streaming (:class:`vclip.ClipStream`): random access indexes
every video once (one demux pass, or a catalog) and then reads only the packets of each clip, in
any order, so epochs shuffle freely over all videos and a resumed run continues exactly; streaming
reads each shard once from start to end and draws clips from a shuffle buffer of recent videos,
which suits very many small members on storage where a request costs more than the bytes it
returns, at the price of a shuffle bounded by the buffer.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ._bytes.shards import (
    DEFAULT_VIDEO_EXTENSIONS,
    is_shard_source,
)
from ._datasets.inputs import LabeledVideo, list_file_paths, load_videos, video_files
from ._datasets.shard_source import WebDatasetSource
from ._datasets.shard_writer import ShardWriteResult, SourceVideo, write_video_shards
from .errors import ArgumentError, check_integer, fail, parse_bytes
from .huggingface import HuggingFaceSource, is_hf_dataset

__all__ = ["DEFAULT_VIDEO_EXTENSIONS", "ShardWriteResult", "WebDatasetSource", "write_shards"]

WebDatasetSource.__module__ = __name__  # defined in a private module, public here


def write_shards(
    source: Any,
    out: str | os.PathLike,
    *,
    max_size: int | str = "1GB",
    max_count: int | None = None,
    overwrite: bool = False,
    on_video: Callable[[], None] | None = None,
) -> ShardWriteResult:
    """Write the videos of ``source`` as WebDataset shards (``vclip shard``), in its order.

    Each video becomes one sample: ``KEY.EXT`` (the video; an MP4 whose ``moov`` atom follows its
    data is remuxed, without re-encoding, with ``movflags=faststart`` so that a reader finds its
    index in the first bytes), ``KEY.cls`` (its label, when it has one) and ``KEY.json``
    (``label``, ``class_name``, ``source``, and ``start``/``end`` of a segment). Keys count up across
    shards from ``000000000``. Beside each shard its ``wds2idx`` member index (``NAME.idx``, read by
    :class:`WebDatasetSource` and DALI's ``fn.readers.webdataset``) and, for the set, a ``wids``
    dataset description ``shardindex.json`` (with the class names). The same source gives the
    same bytes (member headers carry no time or owner).

    Args:
        source: A folder (one subfolder per class, labelled as :class:`~vclip.ClipLoader` labels
            them, or videos without classes), a list file (``path label`` lines, or paths alone), a
            catalog (``.parquet`` or ``vclip.catalog.Catalog``: its usable videos), shards (a
            :class:`WebDatasetSource` or a pattern, to re-shard), a Hugging Face ``datasets.Dataset``
            or :class:`~vclip.HuggingFaceSource` (bytes too), or ``(path, label)`` pairs /
            :class:`~vclip.LabeledVideo` rows.
        out: The shard files, with a placeholder for the shard number:
            ``"out/shard-{000000}.tar"`` (zero-padded to the braces' width) or ``%06d``.
        max_size: Largest shard, in bytes or with a unit (default ``"1GB"``); a video larger
            than that gets a shard of its own.
        max_count: Largest number of videos per shard (default: no limit).
        overwrite: Replace the shard set already there: every file in the folder that ``out``
            names (with any number), their indexes and the ``shardindex.json`` (default: refuse if
            there is any). The new set is written in a private staging folder and swapped in at
            the end, so the old set stays whole until then; old shards the new set does not
            replace are removed then.
        on_video: Called once per video handled (for a progress bar).

    Returns:
        What was written (:class:`ShardWriteResult`); videos that could not be read are in
        ``skipped``, with the problem.

    Only videos go into shards: every file is opened as a video first (a container FFmpeg reads,
    not a still image or text, with a video stream and a packet of it); anything else is skipped,
    with the reason, and so is a video that fails while it is copied.

    Raises:
        ArgumentError: Bad options, an ``out`` without a placeholder (or with one in a folder's
            name), files of the shard set already there, an ``out`` whose files the source reads
            (re-sharding in place).
        PathNotFoundError: (a FileNotFoundError) A source folder or list file that does not exist.
        OSError: The shards cannot be written (a full disk): nothing of the run is left, and the
            files that were there are unchanged.
    """
    limit = parse_bytes(max_size, name="max_size")
    if limit < 16 << 10:
        raise fail("max_size", max_size, "at least 16 KiB (e.g. '1GB')")
    if max_count is not None:
        check_integer("max_count", max_count, minimum=1)
    if is_hf_dataset(source):
        source = HuggingFaceSource(source)  # kept here while its in-memory videos are written
    videos, class_names = _videos_to_write(source)
    return write_video_shards(videos, out, max_size=limit, max_count=max_count, class_names=class_names,
                              overwrite=bool(overwrite), on_video=on_video)


def _videos_to_write(source: Any) -> tuple[list[SourceVideo], tuple[str, ...] | None]:
    """The videos of a :func:`write_shards` source, with whether each has a label, and the class names."""
    if isinstance(source, HuggingFaceSource):
        names = source.class_names
        return [SourceVideo(video, source.label_column is not None,
                            names[video.label] if names and 0 <= video.label < len(names) else None)
                for video in source.videos], names
    if isinstance(source, WebDatasetSource) or is_shard_source(source):
        shards = source if isinstance(source, WebDatasetSource) else WebDatasetSource(source)
        names = shards.class_names
        return [SourceVideo(video, shards.label_rule is not None,
                            names[video.label] if names and 0 <= video.label < len(names) else None)
                for video in shards.videos], names
    if type(source).__name__ == "Catalog" or (isinstance(source, (str, os.PathLike))
                                              and os.fspath(source).endswith(".parquet")):
        from .catalog import read_catalog  # needs pyarrow: the [catalog] extra

        catalog = read_catalog(source) if isinstance(source, (str, os.PathLike)) else source
        return [SourceVideo(LabeledVideo(entry.path, -1 if entry.label is None else entry.label),
                            entry.label is not None, entry.class_name) for entry in catalog.usable], \
            catalog.class_names
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if path.is_dir() and not any(entry.is_dir() and not entry.name.startswith(".") for entry in path.iterdir()):
            files = video_files(path)
            if not files:
                raise ArgumentError(f"source ({os.fspath(source)!r}) holds no video files")
            return [SourceVideo(LabeledVideo(os.fspath(file), -1), False, None) for file in files], None
        if path.is_file():
            try:
                listed, _ = load_videos(path)
            except ValueError:  # paths without labels
                return [SourceVideo(LabeledVideo(name, -1), False, None) for name in list_file_paths(path)], None
            return [SourceVideo(video, True, None) for video in listed], None
    if not isinstance(source, (str, os.PathLike, Iterable)):
        raise fail("source", source, "a folder, a list file, a catalog, shards or (path, label) pairs")
    listed, names = load_videos(source)
    return [SourceVideo(video, True, names[video.label] if names else None) for video in listed], names
