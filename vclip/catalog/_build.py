"""Building a dataset catalog: the videos of the sources in order (:func:`resolve_sources`), each
indexed once by the job runner (:mod:`vclip.catalog._indexing`), written as one Parquet row per video
(:mod:`vclip.catalog._schema`); an earlier catalog's rows are kept for the videos that did not
change. :func:`build_catalog` is public as :func:`vclip.catalog.build_catalog`."""

from __future__ import annotations

import itertools
import json
import logging
import os
import sys
import time
import uuid
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .. import errors
from .._bytes.shards import is_shard_source
from .._bytes.sources import is_local, split_slice_name
from .._datasets.inputs import VIDEO_EXTENSIONS, load_videos, video_files
from .._datasets.shard_source import WebDatasetSource
from .._index.record import VideoIndex
from .._jobs.runner import RayTasks, choose_runner
from .._outputs.files import check_output_file, written_whole
from .._version import __version__
from ..errors import ArgumentError, CatalogWarning, OutputError, PathNotFoundError
from ..huggingface import HuggingFaceSource, is_hf_dataset
from ._indexing import IndexItem, index_rows, unusable_row
from ._paths import resolved_path, stored_path
from ._schema import (
    ARRAY_TYPES,
    FACT_TYPES,
    FORMAT_VERSION,
    LOCATION_TYPES,
    METADATA_KEY,
    READABLE_VERSIONS,
    ROW_GROUP_ROWS,
    SCHEMA,
    TIMING_TYPES,
    catalog_metadata,
)

__all__ = ["CatalogBuild", "ResolvedSources", "build_catalog", "check_catalog_out", "resolve_sources", "rows_table"]

logger = logging.getLogger("vclip")


# -- sources -----------------------------------------------------------------------------------
class ResolvedSources(NamedTuple):
    """The videos of a dataset in order, as (absolute path, label or None), and the class names
    (label ``i`` is ``class_names[i]``) or None."""

    videos: list[tuple[str, int | None]]
    class_names: tuple[str, ...] | None


def resolve_sources(sources) -> ResolvedSources:
    """The videos of ``sources`` as (absolute path, label or None) in order, and the class names.

    Args:
        sources: One item or a list of items, each one of: a video file (by extension, no
            label); a folder with one subfolder per class (labelled as :class:`~vclip.ClipLoader`
            labels them: the subfolder's position in sorted order); a folder of videos without
            class subfolders (no labels); a text/CSV list file of ``path label`` lines (labels
            that are class names are numbered in sorted name order); a ``(path, label)`` pair;
            WebDataset shards (a ``.tar`` path, URL or brace pattern, or a
            :class:`vclip.webdataset.WebDatasetSource`: one row per video member, named by its
            shard, member and byte range, labelled as the source labels it); a Hugging Face
            ``datasets.Dataset`` or :class:`vclip.huggingface.HuggingFaceSource` whose videos are
            paths or URLs. With several sources of class names, labels follow the sorted union
            of their class names. A path listed twice is kept once (the first).

    Raises:
        PathNotFoundError: (a FileNotFoundError) A folder or list file that does not exist.
        ArgumentError: (a ValueError) A malformed list file or pair, or no videos at all.
    """
    items = [sources] if isinstance(sources, (str, os.PathLike)) or _is_dataset_object(sources) else list(sources)
    groups: list[tuple[list[tuple[str, int | None]], tuple[str, ...] | None]] = []
    for item in items:
        if _is_dataset_object(item) or is_shard_source(item):
            groups.append(_dataset_source(item))
        elif isinstance(item, (str, os.PathLike)):
            groups.append(_one_source(Path(item)))
        else:
            loaded, names = load_videos([item])
            groups.append(([(loaded[0].path, loaded[0].label)], names))
    named = [names for _, names in groups if names is not None]
    class_names = tuple(sorted(set().union(*named))) if named else None
    seen: set[str] = set()
    resolved: list[tuple[str, int | None]] = []
    for videos, names in groups:
        for path, label in videos:
            path = os.path.abspath(path) if is_local(path) else path
            if path in seen:
                continue
            seen.add(path)
            if names is not None and class_names is not None and label is not None:
                label = class_names.index(names[label])
            resolved.append((path, label))
    if not resolved:
        raise ArgumentError(f"sources ({sources!r}) hold no videos")
    return ResolvedSources(resolved, class_names)


def _is_dataset_object(item) -> bool:
    return type(item).__name__ in ("WebDatasetSource", "HuggingFaceSource") or is_hf_dataset(item)


def _dataset_source(item) -> tuple[list[tuple[str, int | None]], tuple[str, ...] | None]:
    """The videos of shards or of a Hugging Face dataset (paths, URLs or members of shards)."""
    if is_hf_dataset(item) or type(item).__name__ == "HuggingFaceSource":
        rows = item if type(item).__name__ == "HuggingFaceSource" else HuggingFaceSource(item)
        held = [video.path for video in rows.videos if video.path.startswith("<bytes:")]
        if held:
            raise ArgumentError(f"a catalog names videos that outlive this process, but column "
                                f"{rows.video_column!r} holds bytes; write them as shards first "
                                "(vclip.webdataset.write_shards(source, 'out/shard-{000000}.tar')) and catalog the "
                                "shards")
        labelled = rows.label_column is not None
        return [(video.path, video.label if labelled else None) for video in rows.videos], rows.class_names
    shards = item if isinstance(item, WebDatasetSource) else WebDatasetSource(item)
    labelled = shards.label_rule is not None
    return [(video.path, video.label if labelled else None) for video in shards.videos], shards.class_names


def _one_source(path: Path) -> tuple[list[tuple[str, int | None]], tuple[str, ...] | None]:
    try:
        folder, file = path.is_dir(), path.is_file()
    except OSError:  # a name too long, a folder that may not be entered: a video's own problem, in its row
        folder, file = False, path.suffix.lower() in VIDEO_EXTENSIONS
    if folder:
        if any(entry.is_dir() and not entry.name.startswith(".") for entry in path.iterdir()):
            videos, names = load_videos(path)
            return [(video.path, video.label) for video in videos], names
        files = video_files(path)
        return [(os.fspath(p), None) for p in files], None
    if path.suffix.lower() in VIDEO_EXTENSIONS:
        return [(os.fspath(path), None)], None  # a missing video becomes an unusable row
    if not file:
        raise PathNotFoundError(f"{os.fspath(path)!r} is not a video, a folder or a list file that exists")
    videos, names = load_videos(path)
    return [(video.path, video.label) for video in videos], names


# -- building ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CatalogBuild:
    """What one :func:`build_catalog` run did.

    Attributes:
        path: The catalog written.
        videos: Rows in the catalog (one per video of the sources).
        indexed: Paths indexed in this run (new or changed files, or all without an earlier catalog).
        kept: Rows taken over unchanged from the earlier catalog.
        unusable: ``(path, problem)`` of each video that cannot be used (also listed in the catalog).
        seconds: Wall time of the run.
        workers: Videos indexed at once: by processes (or in this process, for 1) or Ray tasks.
        engine: ``"processes"`` or ``"ray"``.
    """

    path: str
    videos: int
    indexed: tuple[str, ...]
    kept: int
    unusable: tuple[tuple[str, str], ...]
    seconds: float
    workers: int
    engine: str = "processes"

    @property
    def videos_per_second(self) -> float:
        """Videos indexed per second of the run."""
        return len(self.indexed) / self.seconds if self.seconds > 0 else 0.0


def build_catalog(
    sources,
    out: str | os.PathLike,
    *,
    workers: int | None = None,
    stream_index: int | None = None,
    incremental: bool = True,
    ray: bool = False,
    ray_address: str | None = None,
    progress: bool | None = None,
) -> CatalogBuild:
    """Index every video of ``sources`` in parallel and write the catalog to ``out`` (Parquet).

    Args:
        sources: Video files, class folders, list files or (path, label) pairs (see
            :func:`resolve_sources`), or what :func:`resolve_sources` returned.
        out: The Parquet file to write (replaced atomically; its folder is created).
        workers: Videos indexed at once: spawned processes (default: one per core this process
            may use; 1 indexes in this process), or with ``ray`` Ray tasks (default and most: one
            per CPU of the cluster).
        stream_index: Container index of the video stream in every file (default: the first).
        incremental: When ``out`` already holds a catalog, keep the rows of videos whose size,
            mtime and content fingerprint are unchanged and index only the others.
        ray: Index as Ray tasks instead of local processes, on the cluster of ``ray_address``
            (default: ``RAY_ADDRESS``'s or ``ray start``'s, else a local one). Needs
            ``pip install 'vclip-nvdec[ray]'``; the catalog is the same.
        ray_address: The Ray cluster to join (implies ``ray``).
        progress: Draw a progress bar on stderr (tqdm): None (default) when stderr is a terminal.

    Returns:
        What was done (:class:`CatalogBuild`); unusable videos are listed there and in the catalog.

    Raises:
        PathNotFoundError, ArgumentError: see :func:`resolve_sources`; also ArgumentError when ``out``
            is a folder or a file that is not a vclip catalog (it is never replaced), and
            ArgumentError for ``workers`` below 1 or a ``ray`` that is not a bool.
        ImportError: ``ray`` without Ray installed.
    """
    started = time.perf_counter()
    videos, class_names = sources if isinstance(sources, ResolvedSources) else resolve_sources(sources)
    videos, unnameable = _nameable(videos)
    out = os.path.abspath(os.fspath(out))
    exists = check_catalog_out(out)
    runner = choose_runner("cpu", workers=workers, items=len(videos), ray=ray, ray_address=ray_address)
    earlier = _earlier_rows(out) if incremental and exists else {}
    jobs = []
    for position, (path, _) in enumerate(videos):
        if position in unnameable:
            continue
        known = earlier.get(path)
        known_fingerprint = None
        if known is not None and (stream_index is None or known[2] == stream_index):
            known_fingerprint = known[1]
        jobs.append(IndexItem(position, path, stream_index, known_fingerprint))
    bar = _progress_bar(len(jobs), progress)
    try:
        rows = index_rows(jobs, runner, on_row=(lambda _: bar.update()) if bar else None)
        named_not = [unusable_row(IndexItem(position, videos[position][0]), "UnreadableVideoError", problem)
                     for position, problem in unnameable.items()]
        table = pa.concat_tables(_tables_of(itertools.chain(rows, named_not)))
    finally:
        if bar is not None:
            bar.close()
    positions = np.array(table.column("position").to_pylist(), dtype=np.int64)
    unchanged = np.array(table.column("unchanged").to_pylist(), dtype=bool)
    fresh = table.filter(pa.array(~unchanged)).select(SCHEMA.names)
    kept_positions = np.sort(positions[unchanged])
    if kept_positions.size:
        old = pq.read_table(out).select(SCHEMA.names).cast(SCHEMA)
        old_rows = [earlier[videos[position][0]][0] for position in kept_positions]
        fresh = pa.concat_tables([fresh, old.take(pa.array(old_rows, pa.int64()))])
    order = np.argsort(np.concatenate([positions[~unchanged], kept_positions]), kind="stable")
    table = fresh.take(pa.array(order))
    paths = [path for path, _ in videos]  # the rows are in the sources' order now (kept rows hold stored paths)
    labels = [label for _, label in videos]  # labels and class names always follow the sources
    table = table.set_column(SCHEMA.get_field_index("label"), SCHEMA.field("label"), pa.array(labels, pa.int64()))
    table = table.set_column(SCHEMA.get_field_index("class_name"), SCHEMA.field("class_name"), pa.array(
        [class_names[label] if class_names is not None and label is not None else None for label in labels],
        pa.string()))
    folder = os.path.dirname(out)
    stored = pa.array([stored_path(path, folder) for path in paths], pa.string())
    _write(_with_locations(table.set_column(SCHEMA.get_field_index("path"), SCHEMA.field("path"), stored)), out,
           class_names)
    unusable = tuple((path, problem) for path, usable, problem in zip(
        paths, table.column("usable").to_pylist(), table.column("error").to_pylist()) if not usable)
    built = CatalogBuild(
        path=out, videos=table.num_rows, indexed=tuple(videos[p][0] for p in np.sort(positions[~unchanged])),
        kept=int(kept_positions.size),
        unusable=unusable, seconds=time.perf_counter() - started, workers=runner.workers,
        engine="ray" if isinstance(runner, RayTasks) else "processes",
    )
    logger.info("catalog %s: %d videos, %d indexed, %d kept, %d unusable, %.1f s", out, built.videos,
                len(built.indexed), built.kept, len(unusable), built.seconds)
    return built


def _nameable(videos: list[tuple[str, int | None]]) -> tuple[list[tuple[str, int | None]], dict[int, str]]:
    """``videos`` with each name that is not UTF-8 (file-name bytes a Parquet text column cannot
    hold: a Latin-1 name, read as surrogate escapes) written with those bytes as ``\\xNN``, and
    the problem of each such video by position: it is listed as unusable, not indexed."""
    unnameable: dict[int, str] = {}
    shown = []
    for position, (path, label) in enumerate(videos):
        try:
            path.encode("utf-8")
        except UnicodeEncodeError:
            path = path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            unnameable[position] = ("its name is not valid UTF-8 (the \\xNN bytes), which a catalog cannot hold; "
                                    "rename the file to UTF-8 (e.g. convmv -f latin1 -t utf8) to catalog it")
        shown.append((path, label))
    return shown, unnameable


def _with_locations(table: pa.Table) -> pa.Table:
    """``table`` with the shard, member and offset of each member of a shard (:data:`LOCATION_TYPES`)."""
    parts = [split_slice_name(path) for path in table.column("path").to_pylist()]
    columns = {
        "shard": [part[0] if part else None for part in parts],
        "member": [part[1] if part else None for part in parts],
        "offset_bytes": [part[2] if part else None for part in parts],
    }
    for name, kind in LOCATION_TYPES.items():
        table = table.append_column(pa.field(name, kind), pa.array(columns[name], kind))
    return table


def _progress_bar(total: int, progress: bool | None):
    if progress is False:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(total=total, unit="video", desc="indexing", file=sys.stderr, dynamic_ncols=True,
                disable=None if progress is None else False)


def check_catalog_out(out: str) -> bool:
    """Whether ``out`` holds a vclip catalog (False: nothing there). Anything else is refused
    before any work, so that no other file is replaced by mistake.

    Raises:
        ArgumentError: (a ValueError) ``out`` is a folder, a file that is not a vclip catalog, or a
            path that cannot be written (a symbolic link to nothing, below a file, a name too long).
    """
    try:
        check_output_file(Path(out), "out", make_folder=True)
    except OutputError as error:
        if not os.path.isdir(out):
            raise ArgumentError(str(error)) from None
    if not os.path.lexists(out):
        return False
    if os.path.isdir(out):
        raise ArgumentError(f"out ({out!r}) is a folder; name the catalog file, "
                            f"e.g. {os.path.join(out, 'catalog.parquet')}")
    try:
        catalog_metadata(pq.read_schema(out), out)
    except (OSError, ValueError, pa.ArrowException):
        raise ArgumentError(f"out ({out!r}) exists and is not a vclip catalog; refusing to replace it "
                         "(remove it, or write the catalog elsewhere)") from None
    return True


def _earlier_rows(out: str) -> dict[str, tuple[int, str, int | None]]:
    """``path -> (row, fingerprint, stream_index)`` of an existing catalog's rows that can be kept."""
    try:
        if catalog_metadata(pq.read_schema(out), out).get("format_version") not in READABLE_VERSIONS:
            return {}  # another format: index everything again
        table = pq.read_table(out, columns=["path", "fingerprint", "stream_index", "error_type"])
    except (OSError, ValueError, pa.ArrowException) as error:
        warnings.warn(f"catalog {out} cannot be read back ({error}); indexing every video", CatalogWarning,
                      stacklevel=3)
        return {}
    earlier = {}
    for row, (path, fingerprint, stream, error_type) in enumerate(zip(*(table.column(n).to_pylist() for n in (
            "path", "fingerprint", "stream_index", "error_type")))):
        # Rows of usable videos and of videos FFmpeg refused can be kept; other failures
        # (an unreadable file, a crash) are tried again.
        if fingerprint and (error_type is None or hasattr(errors, error_type)):
            earlier[resolved_path(path, os.path.dirname(out))] = (row, fingerprint, stream)
    return earlier


_WORK_TYPES = {"position": pa.int64(), "unchanged": pa.bool_()}  # while building: source order, kept rows
_ROWS_PER_TABLE = 1024


def _tables_of(rows: Iterable[dict]) -> Iterator[pa.Table]:
    """Rows as they arrive, turned into tables of up to ``_ROWS_PER_TABLE`` rows (and at least one table)."""
    chunk: list[dict] = []
    emitted = False
    for row in rows:
        chunk.append(row)
        if len(chunk) == _ROWS_PER_TABLE:
            yield rows_table(chunk)
            chunk, emitted = [], True
    if chunk or not emitted:
        yield rows_table(chunk)


def rows_table(rows: list[dict]) -> pa.Table:
    """Rows of :func:`vclip.catalog._indexing.index_row` as a table: the catalog's columns, then
    ``position`` and ``unchanged`` (True for a row that only says the earlier row still holds)."""
    columns = {}
    for name, kind in {**FACT_TYPES, **TIMING_TYPES, **_WORK_TYPES}.items():
        columns[name] = pa.array([row.get(name, False if name == "unchanged" else None) for row in rows], type=kind)
    for name, kind in ARRAY_TYPES.items():
        arrays = [row.get(name) for row in rows]
        lengths = np.array([0 if a is None else len(a) for a in arrays], dtype=np.int64)
        if lengths.sum() >= 2**31:
            raise ArgumentError(f"more than 2**31 {name} values in one batch of rows; index fewer videos at "
                                "once")
        offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
        present = [a for a in arrays if a is not None]
        dtype = VideoIndex.STORED_ARRAYS[name]
        values = pa.array(np.concatenate(present).astype(dtype) if present else np.zeros(0, dtype), kind.value_type)
        missing = pa.array([a is None for a in arrays], pa.bool_())
        columns[name] = pa.ListArray.from_arrays(offsets, values, mask=missing)
    names = SCHEMA.names + list(_WORK_TYPES)
    return pa.table([columns[name] for name in names], schema=pa.schema(list(SCHEMA) + [
        pa.field(name, kind) for name, kind in _WORK_TYPES.items()]))


def _write(table: pa.Table, out: str, class_names: tuple[str, ...] | None) -> None:
    metadata = {
        "format_version": FORMAT_VERSION,
        "paths": "relative to the catalog's folder for videos inside it, else absolute; URLs as they are",
        "catalog_id": uuid.uuid4().hex,
        "class_names": list(class_names) if class_names is not None else None,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "vclip_version": __version__,
    }
    table = table.replace_schema_metadata({METADATA_KEY: json.dumps(metadata).encode()})
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with written_whole(out) as temporary:
        # Delta encoding for the per-frame integers (pts and byte offsets grow steadily): a
        # quarter smaller than dictionary encoding, and as standard (pandas, polars, DuckDB read it).
        pq.write_table(table, temporary, compression="zstd", row_group_size=ROW_GROUP_ROWS,
                       use_dictionary=["codec", "pixel_format", "color_matrix", "color_range", "time_base",
                                       "class_name", "error_type"],
                       column_encoding={f"{name}.list.element": "DELTA_BINARY_PACKED"
                                        for name, kind in ARRAY_TYPES.items() if kind.value_type == pa.int64()})
