"""Where a ClipLoader's videos and their indexes come from, and the scan at construction that
finds each video's clips and shape (and the videos that cannot be used).

Anything with ``videos``, ``class_names``, ``stored_index(number)`` and ``index(number)``
(:class:`DatasetSource`) can feed the loader: :class:`FileSource` indexes the files themselves,
:class:`CatalogDatasetSource` takes the indexes a dataset catalog stored, so the loader starts
without opening any video and checks a video's fingerprint only at its first clip.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from .._bytes.shards import is_shard_source
from .._bytes.sources import is_url, split_slice_name
from .._datasets.inputs import UNLABELLED, LabeledVideo, VideoSource, load_videos
from ..errors import ArgumentError, CorruptVideoError, VideoError
from ..huggingface import HuggingFaceSource, is_hf_dataset
from ..index import VideoIndex, index_video
from .clips import ClipDrawer, VideoFacts

__all__ = [
    "remote_url",
    "CatalogDatasetSource", "DatasetSource", "FileSource", "open_source", "ScanResult", "scan", "as_video_error",
    "MixedSizes",
]

logger = logging.getLogger("vclip")

MixedSizes = Literal["error", "skip"]


@runtime_checkable
class DatasetSource(Protocol):
    """The videos of a dataset and their indexes.

    Attributes:
        videos: The dataset, in order (a video's id is its position).
        class_names: Class names (label ``i`` is name ``i``), or None.
    """

    @property
    def videos(self) -> Sequence[LabeledVideo]: ...

    @property
    def class_names(self) -> tuple[str, ...] | None: ...

    def stored_index(self, number: int) -> VideoIndex:
        """The index of video ``number`` as the source holds it, for the scan at construction.

        Raises:
            VideoError: The video cannot be indexed (any other exception is reported as a
                :class:`CorruptVideoError` of that video).
        """
        ...

    def index(self, number: int) -> VideoIndex:
        """The index of video ``number`` for decoding it (checked against the file where the
        source can); raises as :meth:`stored_index`."""
        ...


class FileSource:
    """Videos indexed from their files (cached in memory, and on disk with ``cache_dir``)."""

    def __init__(self, videos: Sequence[LabeledVideo], class_names: tuple[str, ...] | None = None, *,
                 cache_dir: str | os.PathLike | None = None):
        self.videos = list(videos)
        self.class_names = class_names
        self.cache_dir = cache_dir

    def index(self, number: int) -> VideoIndex:
        return index_video(self.videos[number].path, cache_dir=self.cache_dir)

    stored_index = index


class CatalogDatasetSource:
    """The videos of a dataset catalog (:mod:`vclip.catalog`): the scan uses the stored indexes
    (no file opened); a video's first clip checks its fingerprint and re-indexes it if it changed."""

    def __init__(self, catalog):
        if not len(catalog):
            raise ArgumentError(f"videos (catalog {catalog.path}) holds no videos")
        self.catalog = catalog
        self.videos = [LabeledVideo(entry.path, UNLABELLED if entry.label is None else entry.label)
                       for entry in catalog.entries]
        self.class_names = tuple(catalog.class_names) if catalog.class_names else None

    def stored_index(self, number: int) -> VideoIndex:
        return self.catalog.entries[number].index()

    def index(self, number: int) -> VideoIndex:
        return self.catalog.entries[number].index(verify=True)


def open_source(videos: VideoSource | DatasetSource, cache_dir: str | os.PathLike | None) -> DatasetSource:
    """``videos`` itself when it is a :class:`DatasetSource`; a catalog (a ``vclip.catalog.Catalog``
    or its ``.parquet`` file) as a :class:`CatalogDatasetSource`; ``.tar`` shards (paths, URLs, brace
    patterns) as a :class:`vclip.webdataset.WebDatasetSource`; a Hugging Face ``datasets.Dataset`` as a
    :class:`vclip.huggingface.HuggingFaceSource`; else a :class:`FileSource` of it."""
    if isinstance(videos, DatasetSource) and not isinstance(videos, (str, os.PathLike)):
        return videos
    if type(videos).__name__ == "Catalog":
        return CatalogDatasetSource(videos)
    if isinstance(videos, (str, os.PathLike)) and os.fspath(videos).endswith(".parquet"):
        from ..catalog import read_catalog  # needs pyarrow: the [catalog] extra

        return CatalogDatasetSource(read_catalog(videos))
    if is_shard_source(videos):  # WebDataset shards: paths, URLs or brace patterns of .tar files
        from .._datasets.shard_source import WebDatasetSource

        return WebDatasetSource(videos, cache_dir=cache_dir)
    if is_hf_dataset(videos):  # a Hugging Face datasets.Dataset, read with the default columns
        return HuggingFaceSource(videos, cache_dir=cache_dir)
    listed, class_names = load_videos(videos)
    return FileSource(listed, class_names, cache_dir=cache_dir)


def as_video_error(path: str, error: Exception, doing: str) -> VideoError:
    """``error`` if it is a VideoError, else a CorruptVideoError of ``path`` that names it."""
    if isinstance(error, VideoError):
        return error
    return CorruptVideoError(path, f"{doing} failed ({type(error).__name__}: {error})")


@dataclass(frozen=True)
class ScanResult:
    """What the scan found: per video its facts or its problem.

    Attributes:
        facts: Per video, its :class:`VideoFacts` or the :class:`VideoError` that excludes it.
        clip_shape: The shape of one clip (the same for every usable video).
        clip_counts: Clips per video and epoch (a video left out counts as the loader's
            ``clips_per_video``, or 0 with ``starts="step"``, so that plans do not depend on
            which videos failed).
    """

    facts: list[VideoFacts | VideoError]
    clip_shape: tuple[int, ...]
    clip_counts: list[int]

    @property
    def usable(self) -> list[VideoFacts]:
        return [entry for entry in self.facts if isinstance(entry, VideoFacts)]

    @property
    def problems(self) -> dict[int, VideoError]:
        return {number: entry for number, entry in enumerate(self.facts) if isinstance(entry, VideoError)}


LOCAL_INDEX_THREADS = 3
"""Threads that index a dataset of local files at a loader's construction. Indexing demuxes every
packet in Python, under the one interpreter lock, so more threads only contend for it: 64 videos
of 640x360 on an H100 machine of 16 cores took 0.69 s with 1 thread, 0.34 s with 3, 0.88 s with 8
and 0.81 s with 20. A dataset with videos at URLs is indexed by as many threads as the loader has
decode workers, since its reads wait on the network."""


def scan(source: DatasetSource, drawer: ClipDrawer, *, workers: int, mixed_sizes: MixedSizes,
         raise_errors: bool, remote: bool = False) -> tuple[ScanResult, float]:
    """Index every video in parallel and check that its clips can be drawn and batched together
    (``remote``: some videos are read from URLs, see :data:`LOCAL_INDEX_THREADS`).

    Returns:
        The result and the seconds it took.

    Raises:
        VideoError: ``raise_errors`` and a video cannot be used.
        ArgumentError: No video can be used; or videos give clips of different shapes and
            ``mixed_sizes="error"`` (the message names the sizes and the resize to pass).
    """
    started = time.perf_counter()
    if not source.videos:
        raise ArgumentError("the dataset source holds no videos")
    numbers = range(len(source.videos))
    if isinstance(source, CatalogDatasetSource):  # indexes in memory: threads would only add overhead
        facts = [_inspect(source, drawer, number) for number in numbers]
    else:  # indexing reads the files
        threads = workers if remote else min(workers, LOCAL_INDEX_THREADS)
        with ThreadPoolExecutor(max(threads, 1), thread_name_prefix="vclip-index") as pool:
            facts = list(pool.map(lambda number: _inspect(source, drawer, number), numbers))
    if raise_errors:
        error = next((entry for entry in facts if isinstance(entry, VideoError)), None)
        if error is not None:
            raise error
    usable = [entry for entry in facts if isinstance(entry, VideoFacts)]
    if not usable:
        first = next(entry for entry in facts if isinstance(entry, VideoError))
        raise ArgumentError(f"none of the {len(facts)} videos can be used; the first: {first}")
    shapes = Counter(entry.clip_shape for entry in usable)
    batch_shape = shapes.most_common(1)[0][0]
    if len(shapes) > 1:
        if mixed_sizes == "error":
            raise ArgumentError(_mixed_sizes_message(source, facts))
        for number, entry in enumerate(facts):
            if isinstance(entry, VideoFacts) and entry.clip_shape != batch_shape:
                facts[number] = VideoError(
                    source.videos[number].path,
                    f"its clips come out {list(entry.clip_shape)} but the batch holds {list(batch_shape)} "
                    "(mixed_sizes='skip')",
                )
    counts = [entry.clip_count if isinstance(entry, VideoFacts) else drawer.clips_per_video or 0 for entry in facts]
    return ScanResult(facts, batch_shape, counts), time.perf_counter() - started


def _inspect(source: DatasetSource, drawer: ClipDrawer, number: int) -> VideoFacts | VideoError:
    """Index one video and check that its clips can be drawn (worker thread); never raises."""
    path = source.videos[number].path
    try:
        index = source.stored_index(number)
    except Exception as error:  # one video's problem, whatever it is, excludes that video only
        return as_video_error(path, error, "indexing")
    try:
        return drawer.inspect(index, source.videos[number].segment)
    except VideoError as error:  # no clip fits (NoClipFitsError): the message says why
        return error
    except ValueError as error:  # a transform that does not fit its frames: the message says why
        return VideoError(path, str(error).removeprefix(f"{path}: "))
    except Exception as error:  # anything else keeps its type in the message
        return as_video_error(path, error, "checking its clips")


def _mixed_sizes_message(source: DatasetSource, facts: list) -> str:
    by_size: dict[tuple[int, int], list[int]] = {}  # by the size clips come out (turned, as displayed)
    for number, entry in enumerate(facts):
        if isinstance(entry, VideoFacts):
            by_size.setdefault(entry.output_size, []).append(number)
    ranked = sorted(by_size.items(), key=lambda item: (-len(item[1]), item[1][0]))
    sizes = "; ".join(
        f"{width}x{height}: {len(numbers)} video{'s' if len(numbers) > 1 else ''} "
        f"(e.g. {source.videos[numbers[0]].path})"
        for (width, height), numbers in ranked
    )
    width, height = facts[ranked[0][1][0]].output_size
    return (
        f"the videos come in {len(ranked)} sizes whose clips cannot share a batch: {sizes}. "
        f"Pass a transform that resizes every clip to one size, e.g. "
        f"transform=vclip.TransformSpec(resize=({height}, {width})) (height, width), "
        "or mixed_sizes='skip' to leave out the videos whose clips differ from the most common shape"
    )


def remote_url(path: str) -> str | None:
    """The URL a loader reads video ``path`` from (a member of a shard: the shard's), or None for a
    local file: what ``stats().remote_reads`` counts by."""
    member = split_slice_name(path)
    container = member[0] if member is not None else path
    return container if is_url(container) else None
