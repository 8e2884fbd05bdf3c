"""WebDataset tar shards as a dataset: :class:`WebDatasetSource` lists the videos of shards on
disk, behind HTTP or on S3 without extracting them, for :class:`~vclip.ClipLoader`, the catalog
(``vclip index``) and the command line; :func:`write_shards` (``vclip shard``) writes them.

A member is read from its byte range inside the shard through the same range-read layer as a
remote file (:mod:`vclip._sources`: coalesced, concurrent, retried requests), so a clip of a video
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
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from ._dataset import LabeledVideo, list_file_paths, load_videos, video_files
from ._shard_writer import ShardWriteResult, SourceVideo, write_video_shards
from ._sources import open_reader
from ._units import parse_bytes
from ._validation import check_integer
from ._webdataset import (
    DEFAULT_VIDEO_EXTENSIONS,
    LABEL_PAYLOAD_LIMIT,
    LabelRule,
    ShardSample,
    decode_member,
    is_shard_source,
    list_shards,
    shard_names,
)
from .errors import ArgumentError, fail
from .huggingface import HuggingFaceSource, is_hf_dataset
from .index import VideoIndex, index_video

__all__ = ["DEFAULT_VIDEO_EXTENSIONS", "ShardWriteResult", "WebDatasetSource", "write_shards"]


class WebDatasetSource:
    """The videos of WebDataset tar shards, with their labels: a dataset for
    :class:`~vclip.ClipLoader` (``ClipLoader(WebDatasetSource(...), sampler)``; a string naming
    ``.tar`` shards is read with the defaults), :func:`vclip.catalog.build_catalog` and ``vclip index``.

    Each shard's member table comes from the ``wds2idx`` index beside it when there is one
    (``NAME.idx`` or ``NAME.tar.idx``, as ``vclip shard`` writes) and it fits the shard, else from one
    pass over the shard's headers (payloads are skipped; label members are read in the same
    requests). Members form samples by key, as WebDataset groups them; a sample's video is its
    first member with an extension of ``video_extensions``; samples without one are left out
    (counted in :attr:`without_video`).

    Args:
        shards: A shard (local path, ``https://`` or ``s3://`` URL: anything fsspec opens), a brace
            pattern (``"s3://bucket/shard-{000000..000127}.tar"``), a list of these, or a ``wids``
            dataset description (``.json``, with a ``shardlist``; vclip also reads its ``class_names``).
        video_extensions: Extensions of video members, in order of preference (lower case).
        label: Where a sample's label is: ``"auto"`` (default: the ``.cls`` member when every sample
            has one, no labels when none has); a member's extension whose text is the label
            (``"cls"``, ``"txt"``); ``"EXT:KEY.PATH"`` into a JSON member (``"json:label"``,
            ``"json:annotations.0.class"``); or None (every label -1). A label is an integer or a
            class name: names become positions in ``class_names``.
        class_names: Names of the labels (label ``i`` is ``class_names[i]``). Default: the wids
            description's ``class_names``, else the sorted distinct names when labels are names,
            else None.
        cache_dir: Folder for an on-disk cache of video indexes (as :class:`~vclip.ClipLoader`'s).
        workers: Shards whose member tables are read at once (default 16).

    Attributes:
        shards: The shards, in order (local ones as absolute paths).
        samples: One :class:`~vclip._webdataset.ShardSample` per video, in order.
        videos: ``LabeledVideo(name, label)`` per video, in the same order.
        class_names: As above.
        label_rule: The rule the labels came from (None: no labels).
        without_video: Samples left out for want of a video member.
        from_member_index: How many shards' member tables came from an index file.

    Raises:
        ArgumentError: Bad options; a label that is missing from some samples, not an integer or a
            name, or a name not in ``class_names``; no video in the shards.
        FileNotFoundError: A local shard that does not exist.
        VideoError: A shard that cannot be read, is compressed or is not a tar archive.
    """

    def __init__(
        self,
        shards: str | os.PathLike | Sequence[str | os.PathLike],
        *,
        video_extensions: Sequence[str] = DEFAULT_VIDEO_EXTENSIONS,
        label: str | None = "auto",
        class_names: Sequence[str] | None = None,
        cache_dir: str | os.PathLike | None = None,
        workers: int = 16,
    ):
        if isinstance(video_extensions, str) or not video_extensions or not all(
                isinstance(extension, str) and extension for extension in video_extensions):
            raise fail("video_extensions", video_extensions, "a non-empty sequence of extensions, e.g. ('mp4', 'webm')")
        self.video_extensions = tuple(extension.lower().lstrip(".") for extension in video_extensions)
        rule = None if label is None or label == "auto" else LabelRule.parse(label)
        if label is not None and not isinstance(label, str):
            raise fail("label", label, "'auto', an extension such as 'cls', 'EXT:KEY.PATH' such as 'json:label', "
                       "or None")
        workers = check_integer("workers", workers, minimum=1)
        names, description = shard_names(shards)
        listings = list_shards(names, self.video_extensions, (rule or LabelRule("cls")).extension if label else None,
                               workers)
        self.shards: tuple[str, ...] = tuple(names)
        self.cache_dir = cache_dir
        self.samples: list[ShardSample] = [sample for listing in listings for sample in listing.samples]
        self.without_video = sum(listing.without_video for listing in listings)
        self.from_member_index = sum(listing.from_member_index for listing in listings)
        if not self.samples:
            raise ArgumentError(f"shards ({shards!r}) hold no video member (extensions "
                                f"{', '.join(self.video_extensions)}; {self.without_video} samples without one)")
        payloads = {(listing.shard, name): data for listing in listings for name, data in listing.payloads.items()}
        if class_names is None and isinstance(description, dict) and isinstance(description.get("class_names"), list):
            class_names = description["class_names"]
        labels, self.class_names, self.label_rule = _labels(self.samples, payloads, rule, label == "auto", class_names)
        self.videos: list[LabeledVideo] = [LabeledVideo(sample.name, value)
                                           for sample, value in zip(self.samples, labels)]

    def __len__(self) -> int:
        return len(self.videos)

    def __repr__(self) -> str:
        classes = f", {len(self.class_names)} classes" if self.class_names else ""
        return f"WebDatasetSource({len(self.shards)} shards, {len(self.videos)} videos{classes})"

    def index(self, number: int) -> VideoIndex:
        """The index of video ``number`` (one demux pass over its member's bytes; cached)."""
        return index_video(self.videos[number].path, cache_dir=self.cache_dir)

    stored_index = index

    def metadata(self, number: int) -> dict[str, Any]:
        """The other members of video ``number``'s sample, by extension, decoded as WebDataset
        decodes them (JSON parsed, ``cls`` an integer, ``txt`` a string, anything else bytes):
        e.g. ``{"json": {"caption": ...}, "txt": "..."}``. Read when asked for (one request)."""
        sample = self.samples[number]
        others = [(extension, member) for extension, member in sample.members.items()
                  if extension != sample.video_extension]
        if not others:
            return {}
        data = open_reader(sample.shard).read_ranges([(member.offset, member.size) for _, member in others])
        return {extension: decode_member(extension, payload) for (extension, _), payload in zip(others, data)}


def _labels(samples: list[ShardSample], payloads: dict[tuple[str, str], bytes], rule: LabelRule | None, auto: bool,
            class_names: Sequence[str] | None) -> tuple[list[int], tuple[str, ...] | None, LabelRule | None]:
    """Each sample's label (-1 without a rule), the class names and the rule the labels came from."""
    names = tuple(class_names) if class_names is not None else None
    if rule is None and not auto:
        return [-1] * len(samples), names, None
    chosen = rule or LabelRule("cls")
    found: list[int | str] = []
    missing = []
    for sample in samples:
        member = sample.members.get(chosen.extension)
        data = payloads.get((sample.shard, member.name)) if member is not None else None
        if data is None:
            missing.append(sample)
            continue
        try:
            found.append(chosen.value(data, f"{sample.shard}#{sample.key}"))
        except ValueError as error:
            raise ArgumentError(str(error)) from None
    if auto and rule is None and len(missing) == len(samples):
        return [-1] * len(samples), names, None
    if missing:
        first = missing[0]
        raise ArgumentError(f"{len(missing)} of {len(samples)} samples have no .{chosen.extension} label member "
                            f"(of at most {LABEL_PAYLOAD_LIMIT:,} bytes), e.g. {first.shard}#{first.key}; pass "
                            "label= with where the labels are (e.g. 'json:label'), or label=None")
    kinds = {type(value) for value in found}
    if kinds == {int}:
        return [int(value) for value in found], names, chosen
    if kinds != {str}:
        raise ArgumentError(f"labels ({chosen}) mix integers and class names; give them one kind")
    if names is None:
        names = tuple(sorted(set(map(str, found))))
    position = {name: number for number, name in enumerate(names)}
    unknown = sorted({str(value) for value in found} - set(position))
    if unknown:
        raise ArgumentError(f"labels ({chosen}) name classes not in class_names: {unknown[:5]}")
    return [position[str(value)] for value in found], names, chosen


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
        overwrite: Replace shards and a ``shardindex.json`` already there (default: refuse).
        on_video: Called once per video handled (for a progress bar).

    Returns:
        What was written (:class:`ShardWriteResult`); videos that could not be read are in
        ``skipped``, with the problem.

    Raises:
        ArgumentError: Bad options, an ``out`` without a placeholder, shards already there.
        FileNotFoundError: A source folder or list file that does not exist.
        OSError: A shard cannot be written.
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
