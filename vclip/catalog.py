"""A dataset catalog: one Parquet table with every video's index, label and content fingerprint.

:func:`build_catalog` (``vclip index`` on the command line) indexes every video of a dataset once,
in parallel, and writes one row per video: the facts ``vclip info`` shows (codec, size, frame rate,
frame and keyframe counts, duration, colour, time base...), the label and class name, a content
fingerprint, and the per-frame and per-packet arrays a decode plan needs, as list columns. A video
that cannot be read gets a row too, with ``usable`` false and the error. Running it again into the
same file indexes only the videos that are new or changed and keeps the others.

:func:`read_catalog` opens it without opening any video: a loader on every rank of every node
starts from it at once. Each entry's :class:`~vclip.VideoIndex` is built from the stored arrays
when first asked for; ``entry.index(verify=True)`` also checks the file's fingerprint once and
re-indexes a video that changed since (with a :class:`CatalogWarning`).

The file is a plain table: query it with pandas, polars or DuckDB (``usable``, ``label``,
``class_name``, ``codec``, ``width``, ``height``, ``average_fps``, ``num_frames``,
``duration_seconds``, ``size_bytes``... one row per video).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
import uuid
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

try:
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError as _error:  # pragma: no cover - depends on the environment
    raise ImportError("vclip.catalog needs pyarrow: pip install 'vclip-nvdec[catalog]'") from _error

from . import errors
from ._dataset import VIDEO_EXTENSIONS, load_videos, video_files
from ._fingerprint import content_fingerprint
from ._indexing import IndexJob, run_jobs
from ._machine import usable_cores
from ._sources import is_local, source_fingerprint, split_slice_name
from ._version import __version__
from ._webdataset import is_shard_source
from .errors import CatalogWarning, VideoError, VideoNotFoundError, os_reason
from .huggingface import HuggingFaceSource, is_hf_dataset
from .index import VideoIndex, index_video, parse_stored_facts

__all__ = [
    "Catalog",
    "CatalogBuild",
    "CatalogEntry",
    "CatalogSource",
    "CatalogWarning",
    "ResolvedSources",
    "build_catalog",
    "read_catalog",
    "resolve_sources",
]

logger = logging.getLogger("vclip")

FORMAT_VERSION = 1
_METADATA_KEY = b"vclip.catalog"
_ROW_GROUP_ROWS = 512
_DEFAULT_CACHE_BYTES = 256 * 2**20

# Columns, in file order: who and what, the file, the stream's facts, the index arrays, timing.
_FACT_TYPES = {
    "path": pa.string(), "label": pa.int64(), "class_name": pa.string(),
    "usable": pa.bool_(), "error": pa.string(), "error_type": pa.string(),
    "size_bytes": pa.int64(), "mtime_ns": pa.int64(), "fingerprint": pa.string(),
    "stream_index": pa.int64(), "codec": pa.string(), "width": pa.int64(), "height": pa.int64(),
    "pixel_format": pa.string(), "bit_depth": pa.int64(), "color_matrix": pa.string(),
    "color_range": pa.string(), "time_base": pa.string(), "average_fps": pa.float64(),
    "num_frames": pa.int64(), "num_packets": pa.int64(), "keyframe_count": pa.int64(),
    "start_seconds": pa.float64(), "duration_seconds": pa.float64(), "variable_frame_rate": pa.bool_(),
    "header_frame_count": pa.int64(), "packets_addressable": pa.bool_(), "last_frame_duration": pa.int64(),
    "rotation": pa.int64(), "mirrored": pa.bool_(), "sample_aspect_ratio": pa.string(), "extradata": pa.binary(),
}
_ARRAY_TYPES = {
    name: pa.list_(pa.bool_() if dtype is np.bool_ else pa.int64()) for name, dtype in VideoIndex.STORED_ARRAYS.items()
}
_TIMING_TYPES = {"index_seconds": pa.float64()}
# Where a member of a WebDataset shard lies (null for a file of its own): written after the other
# columns, read by queries (``to_table(["path", "shard", "member", "offset_bytes", "size_bytes"])``);
# the path names the same place (vclip._sources.slice_name).
_LOCATION_TYPES = {"shard": pa.string(), "member": pa.string(), "offset_bytes": pa.int64()}
SCHEMA = pa.schema([pa.field(name, kind) for name, kind in {**_FACT_TYPES, **_ARRAY_TYPES, **_TIMING_TYPES}.items()])
_INDEX_FACTS = tuple(name for name in VideoIndex.__dataclass_fields__
                     if name != "path" and name not in VideoIndex.STORED_ARRAYS)
_SCALAR_COLUMNS = tuple(name for name in SCHEMA.names if name not in _ARRAY_TYPES)


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
            class subfolders (no labels); a text/CSV list file of ``path label`` lines; a
            ``(path, label)`` pair; WebDataset shards (a ``.tar`` path, URL or brace pattern, or a
            :class:`vclip.webdataset.WebDatasetSource`: one row per video member, named by its
            shard, member and byte range, labelled as the source labels it); a Hugging Face
            ``datasets.Dataset`` or :class:`vclip.huggingface.HuggingFaceSource` whose videos are
            paths or URLs. With several class
            folders, labels follow the sorted union of their class names. A path listed twice is
            kept once (the first).

    Raises:
        FileNotFoundError: A folder or list file that does not exist.
        ValueError: A malformed list file or pair, or no videos at all.
    """
    items = [sources] if isinstance(sources, (str, os.PathLike)) or _is_dataset_object(sources) else list(sources)
    groups: list[tuple[list[tuple[str, int | None]], tuple[str, ...] | None]] = []
    for item in items:
        if _is_dataset_object(item) or is_shard_source(item):
            groups.append(_dataset_source(item))
        elif isinstance(item, (str, os.PathLike)):
            groups.append(_one_source(Path(item)))
        else:
            loaded, _ = load_videos([item])
            groups.append(([(loaded[0].path, loaded[0].label)], None))
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
        raise ValueError(f"sources ({sources!r}) hold no videos")
    return ResolvedSources(resolved, class_names)


def _is_dataset_object(item) -> bool:
    return type(item).__name__ in ("WebDatasetSource", "HuggingFaceSource") or is_hf_dataset(item)


def _dataset_source(item) -> tuple[list[tuple[str, int | None]], tuple[str, ...] | None]:
    """The videos of shards or of a Hugging Face dataset (paths, URLs or members of shards)."""
    from .webdataset import WebDatasetSource

    if is_hf_dataset(item) or type(item).__name__ == "HuggingFaceSource":
        rows = item if type(item).__name__ == "HuggingFaceSource" else HuggingFaceSource(item)
        held = [video.path for video in rows.videos if video.path.startswith("<bytes:")]
        if held:
            raise ValueError(f"a catalog names videos that outlive this process, but column {rows.video_column!r} "
                             "holds bytes; write them as shards first (vclip.webdataset.write_shards(source, "
                             "'out/shard-{000000}.tar')) and catalog the shards")
        labelled = rows.label_column is not None
        return [(video.path, video.label if labelled else None) for video in rows.videos], rows.class_names
    shards = item if isinstance(item, WebDatasetSource) else WebDatasetSource(item)
    labelled = shards.label_rule is not None
    return [(video.path, video.label if labelled else None) for video in shards.videos], shards.class_names


def _one_source(path: Path) -> tuple[list[tuple[str, int | None]], tuple[str, ...] | None]:
    if path.is_dir():
        if any(entry.is_dir() and not entry.name.startswith(".") for entry in path.iterdir()):
            videos, names = load_videos(path)
            return [(video.path, video.label) for video in videos], names
        files = video_files(path)
        return [(os.fspath(p), None) for p in files], None
    if path.suffix.lower() in VIDEO_EXTENSIONS:
        return [(os.fspath(path), None)], None  # a missing video becomes an unusable row
    if not path.is_file():
        raise FileNotFoundError(f"{os.fspath(path)!r} is not a video, a folder or a list file that exists")
    videos, _ = load_videos(path)
    return [(video.path, video.label) for video in videos], None


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
        workers: Processes (or Ray actors) that indexed.
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
    ray: bool | str = False,
    progress: bool | None = None,
) -> CatalogBuild:
    """Index every video of ``sources`` in parallel and write the catalog to ``out`` (Parquet).

    Args:
        sources: Video files, class folders, list files or (path, label) pairs (see
            :func:`resolve_sources`), or what :func:`resolve_sources` returned.
        out: The Parquet file to write (replaced atomically; its folder is created).
        workers: Indexing processes (default: every core this process may use); 1 indexes here.
            Not used with ``ray``, where one actor per CPU of the cluster indexes.
        stream_index: Container index of the video stream in every file (default: the first).
        incremental: When ``out`` already holds a catalog, keep the rows of videos whose size,
            mtime and content fingerprint are unchanged and index only the others.
        ray: Index on a Ray cluster instead of local processes: True (``ray.init()``: the cluster
            of ``RAY_ADDRESS`` or ``ray start``, else a local one) or a cluster address. Needs
            ``pip install 'vclip-nvdec[ray]'``; the catalog is the same.
        progress: Draw a progress bar on stderr (tqdm): None (default) when stderr is a terminal.

    Returns:
        What was done (:class:`CatalogBuild`); unusable videos are listed there and in the catalog.

    Raises:
        FileNotFoundError, ValueError: see :func:`resolve_sources`; also ValueError when ``out``
            is a folder or a file that is not a vclip catalog (it is never replaced).
    """
    started = time.perf_counter()
    videos, class_names = sources if isinstance(sources, ResolvedSources) else resolve_sources(sources)
    out = os.path.abspath(os.fspath(out))
    exists = _check_out(out)
    earlier = _earlier_rows(out) if incremental and exists else {}
    jobs = []
    for position, (path, _) in enumerate(videos):
        known = earlier.get(path)
        known_fingerprint = None
        if known is not None and (stream_index is None or known[2] == stream_index):
            known_fingerprint = known[1]
        jobs.append(IndexJob(position, path, stream_index, known_fingerprint))
    workers = workers or usable_cores()
    bar = _progress_bar(len(jobs), progress)
    try:
        if ray:
            from .ray import index_tables_on_ray

            tables, workers = index_tables_on_ray(
                jobs, address=None if ray is True else str(ray), on_rows=bar.update if bar else None)
            table = pa.concat_tables(tables)
            engine = "ray"
        else:
            table = pa.concat_tables(_tables_of(run_jobs(jobs, workers, on_rows=bar.update if bar else None)))
            engine = "processes"
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
    labels = [label for _, label in videos]  # labels and class names always follow the sources
    table = table.set_column(SCHEMA.get_field_index("label"), SCHEMA.field("label"), pa.array(labels, pa.int64()))
    table = table.set_column(SCHEMA.get_field_index("class_name"), SCHEMA.field("class_name"), pa.array(
        [class_names[label] if class_names is not None and label is not None else None for label in labels],
        pa.string()))
    _write(_with_locations(table), out, class_names)
    unusable = tuple((path, problem) for path, usable, problem in zip(
        table.column("path").to_pylist(), table.column("usable").to_pylist(), table.column("error").to_pylist())
        if not usable)
    built = CatalogBuild(
        path=out, videos=table.num_rows, indexed=tuple(videos[p][0] for p in np.sort(positions[~unchanged])),
        kept=int(kept_positions.size),
        unusable=unusable, seconds=time.perf_counter() - started, workers=workers, engine=engine,
    )
    logger.info("vclip: catalog %s: %d videos, %d indexed, %d kept, %d unusable, %.1f s", out, built.videos,
                len(built.indexed), built.kept, len(unusable), built.seconds)
    return built


def _with_locations(table: pa.Table) -> pa.Table:
    """``table`` with the shard, member and offset of each member of a shard (:data:`_LOCATION_TYPES`)."""
    parts = [split_slice_name(path) for path in table.column("path").to_pylist()]
    columns = {
        "shard": [part[0] if part else None for part in parts],
        "member": [part[1] if part else None for part in parts],
        "offset_bytes": [part[2] if part else None for part in parts],
    }
    for name, kind in _LOCATION_TYPES.items():
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


def _check_out(out: str) -> bool:
    """Whether ``out`` holds a vclip catalog (False: nothing there). Anything else is refused
    before any work, so that no other file is replaced by mistake.

    Raises:
        ValueError: ``out`` is a folder, or a file that is not a vclip catalog.
    """
    if not os.path.lexists(out):
        return False
    if os.path.isdir(out):
        raise ValueError(f"out ({out!r}) is a folder; name the catalog file, "
                         f"e.g. {os.path.join(out, 'catalog.parquet')}")
    try:
        _catalog_metadata(pq.read_schema(out), out)
    except (OSError, ValueError, pa.ArrowException):
        raise ValueError(f"out ({out!r}) exists and is not a vclip catalog; refusing to replace it "
                         "(remove it, or write the catalog elsewhere)") from None
    return True


def _earlier_rows(out: str) -> dict[str, tuple[int, str, int | None]]:
    """``path -> (row, fingerprint, stream_index)`` of an existing catalog's rows that can be kept."""
    try:
        if _catalog_metadata(pq.read_schema(out), out).get("format_version") != FORMAT_VERSION:
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
            earlier[path] = (row, fingerprint, stream)
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
    """Rows of :func:`vclip._indexing.index_row` as a table: the catalog's columns, then
    ``position`` and ``unchanged`` (True for a row that only says the earlier row still holds)."""
    columns = {}
    for name, kind in {**_FACT_TYPES, **_TIMING_TYPES, **_WORK_TYPES}.items():
        columns[name] = pa.array([row.get(name, False if name == "unchanged" else None) for row in rows], type=kind)
    for name, kind in _ARRAY_TYPES.items():
        arrays = [row.get(name) for row in rows]
        lengths = np.array([0 if a is None else len(a) for a in arrays], dtype=np.int64)
        if lengths.sum() >= 2**31:
            raise ValueError(f"more than 2**31 {name} values in one batch of rows; index fewer videos at once")
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
        "catalog_id": uuid.uuid4().hex,
        "class_names": list(class_names) if class_names is not None else None,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "vclip_version": __version__,
    }
    table = table.replace_schema_metadata({_METADATA_KEY: json.dumps(metadata).encode()})
    folder = os.path.dirname(out)
    os.makedirs(folder, exist_ok=True)
    temporary = os.path.join(folder, f".{os.path.basename(out)}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        # Delta encoding for the per-frame integers (pts and byte offsets grow steadily): a
        # quarter smaller than dictionary encoding, and as standard (pandas, polars, DuckDB read it).
        pq.write_table(table, temporary, compression="zstd", row_group_size=_ROW_GROUP_ROWS,
                       use_dictionary=["codec", "pixel_format", "color_matrix", "color_range", "time_base",
                                       "class_name", "error_type"],
                       column_encoding={f"{name}.list.element": "DELTA_BINARY_PACKED"
                                        for name, kind in _ARRAY_TYPES.items() if kind.value_type == pa.int64()})
        os.replace(temporary, out)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def _catalog_metadata(schema: pa.Schema, path: str) -> dict:
    raw = (schema.metadata or {}).get(_METADATA_KEY)
    if raw is None:
        raise ValueError(f"{path} is a Parquet file but not a vclip catalog (no {_METADATA_KEY.decode()} metadata)")
    return json.loads(raw)


# -- reading -------------------------------------------------------------------------------------
class CatalogSource(NamedTuple):
    """One video for a loader: its path, its label (-1 when it has none) and how to get its index.

    ``index()`` builds the :class:`~vclip.VideoIndex` from the catalog (no video file is opened;
    a video the catalog lists as unusable raises its :class:`~vclip.VideoError`);
    ``index(verify=True)`` also checks the file's fingerprint the first time (per process) and
    re-indexes the video, with a :class:`CatalogWarning`, when it changed.
    """

    path: str
    label: int
    index: Callable[..., VideoIndex]  # type: ignore[assignment]  # the field shadows tuple.index on purpose


class CatalogEntry:
    """One video of a :class:`Catalog`.

    Attributes:
        path: The video file (absolute).
        label: Its class label, or None (a file given alone, or a folder without classes).
        class_name: The label's class name, when the sources were class folders.
        fingerprint: Size, mtime and a hash of sampled bytes when it was indexed.
        error: Why the video cannot be used, or None.
        row: Its row in the catalog.
    """

    __slots__ = ("_catalog", "row", "path", "label", "class_name", "fingerprint", "error")

    def __init__(self, catalog: Catalog, row: int):
        self._catalog = catalog
        self.row = row
        self.path: str = catalog._path_list[row]
        self.label: int | None = catalog._label_list[row]
        self.class_name: str | None = catalog._lists["class_name"][row]
        self.fingerprint: str | None = catalog._lists["fingerprint"][row]
        self.error: str | None = catalog._lists["error"][row]

    @property
    def usable(self) -> bool:
        return self.error is None

    def index(self, *, verify: bool = False) -> VideoIndex:
        """The video's index, built from the catalog without opening the file.

        Args:
            verify: First check (once per process) that the file still has its fingerprint; a
                file that changed is indexed again, with a :class:`CatalogWarning`.

        Raises:
            VideoError: The catalog lists the video as unusable (the error it recorded), or
                ``verify`` and the file is gone or cannot be indexed any more.
        """
        return self._catalog._index(self.row, verify=verify)

    def verified_index(self) -> VideoIndex:
        """``index(verify=True)``: what :class:`~vclip.VideoDecoder` uses when given this entry."""
        return self.index(verify=True)

    def is_current(self) -> bool:
        """Whether the file still has the fingerprint it had when indexed (reads sampled bytes)."""
        return self._catalog._matches(self.row)

    def facts(self) -> dict:
        """The row's facts: every column but the per-frame arrays."""
        return {name: self._catalog._column(name)[self.row].as_py() for name in _SCALAR_COLUMNS}

    def __repr__(self) -> str:
        state = "usable" if self.usable else f"unusable: {self.error}"
        return f"CatalogEntry(path={self.path!r}, label={self.label!r}, class_name={self.class_name!r}, {state})"


# A cached row group: its index arrays (name -> (offsets, values)), each row's parsed facts (empty
# for unusable rows), its damaged rows (see _damaged_rows) and its size in bytes.
_RowGroup = tuple[dict[str, tuple[np.ndarray, np.ndarray]], list[dict], set[int], int]


class Catalog:
    """A dataset catalog read from its Parquet file; no video is opened to read it.

    Opening reads the facts of every row (paths, labels, fingerprints, stream facts); the
    per-frame arrays are read a row group at a time when an index is first built, and kept in a
    cache of ``cache_bytes``. A catalog can be pickled (to DataLoader workers): the copy reopens
    the file and refuses it if it was replaced since.

    Attributes:
        path: The catalog file.
        class_names: Class names for class-folder sources (label ``i`` is name ``i``), else None.
        created: When the catalog was written (ISO 8601).
        metadata: Everything stored in the file's ``vclip.catalog`` metadata.
    """

    def __init__(self, path: str | os.PathLike, *, cache_bytes: int = _DEFAULT_CACHE_BYTES):
        self.path = os.path.abspath(os.fspath(path))
        self.cache_bytes = int(cache_bytes)
        self._open()

    def _open(self, expected_id: str | None = None) -> None:
        if not os.path.isfile(self.path):
            raise FileNotFoundError(f"catalog {self.path!r} does not exist")
        try:
            self._file = pq.ParquetFile(self.path)
        except (pa.ArrowException, OSError) as error:
            raise ValueError(f"{self.path} is not a readable Parquet file ({error})") from None
        self.metadata: dict = _catalog_metadata(self._file.schema_arrow, self.path)
        if self.metadata.get("format_version", 0) > FORMAT_VERSION:
            raise ValueError(f"{self.path} is catalog format {self.metadata['format_version']}; this vclip reads "
                             f"format {FORMAT_VERSION} and older: upgrade vclip")
        if expected_id is not None and self.metadata.get("catalog_id") != expected_id:
            raise ValueError(f"catalog {self.path} was replaced since it was read; read it again")
        missing = [name for name in SCHEMA.names if name not in self._file.schema_arrow.names]
        if missing:
            raise ValueError(f"{self.path} lacks the catalog columns {missing}")
        self.class_names: tuple[str, ...] | None = (
            tuple(self.metadata["class_names"]) if self.metadata.get("class_names") is not None else None)
        self.created: str | None = self.metadata.get("created")
        self._facts = self._file.read(columns=list(_SCALAR_COLUMNS))
        self._columns = {name: self._facts.column(name) for name in _SCALAR_COLUMNS}
        self._lists = {name: self._columns[name].to_pylist() for name in (
            "path", "label", "class_name", "fingerprint", "error", "error_type", "stream_index", "usable")}
        self._path_list: list[str] = self._lists["path"]
        self._label_list: list[int | None] = self._lists["label"]
        self._usable = np.array(self._lists["usable"], dtype=bool)
        group_rows = [self._file.metadata.row_group(g).num_rows for g in range(self._file.num_row_groups)]
        self._group_starts = np.concatenate([[0], np.cumsum(group_rows)]).astype(np.int64)
        self._groups: OrderedDict[int, _RowGroup] = OrderedDict()
        self._groups_bytes = 0
        self._rows_by_path: dict[str, int] | None = None
        self._entries: list[CatalogEntry] | None = None
        self._verified: dict[int, bool] = {}
        self._lock = threading.Lock()
        self._file_lock = threading.Lock()

    # -- pickling: the copy reopens the file ----------------------------------------------------
    def __getstate__(self) -> dict:
        return {"path": self.path, "cache_bytes": self.cache_bytes, "catalog_id": self.metadata.get("catalog_id")}

    def __setstate__(self, state: dict) -> None:
        self.path, self.cache_bytes = state["path"], state["cache_bytes"]
        self._open(expected_id=state["catalog_id"])

    # -- the table --------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._path_list)

    def __repr__(self) -> str:
        unusable = int((~self._usable).sum())
        classes = f", {len(self.class_names)} classes" if self.class_names is not None else ""
        return f"Catalog({self.path!r}, {len(self)} videos, {unusable} unusable{classes})"

    @property
    def entries(self) -> list[CatalogEntry]:
        """Every video, in catalog order (the sources' order)."""
        if self._entries is None:
            self._entries = [CatalogEntry(self, row) for row in range(len(self))]
        return self._entries

    def __iter__(self) -> Iterator[CatalogEntry]:
        return iter(self.entries)

    def __getitem__(self, row: int) -> CatalogEntry:
        return self.entries[row]

    @property
    def paths(self) -> list[str]:
        return list(self._path_list)

    @property
    def usable(self) -> list[CatalogEntry]:
        return [entry for entry, ok in zip(self.entries, self._usable) if ok]

    @property
    def unusable(self) -> list[CatalogEntry]:
        return [entry for entry, ok in zip(self.entries, self._usable) if not ok]

    def entry(self, path: str | os.PathLike) -> CatalogEntry:
        """The entry of ``path`` (as listed, or its absolute form).

        Raises:
            KeyError: The catalog has no such video.
        """
        if self._rows_by_path is None:
            self._rows_by_path = {path: row for row, path in enumerate(self._path_list)}
        text = os.fspath(path)
        row = self._rows_by_path.get(text, self._rows_by_path.get(os.path.abspath(text)))
        if row is None:
            raise KeyError(f"{text!r} is not in catalog {self.path}")
        return self.entries[row]

    def __contains__(self, path) -> bool:
        try:
            self.entry(path)
        except (KeyError, TypeError):
            return False
        return True

    def index_of(self, path: str | os.PathLike, *, verify: bool = False) -> VideoIndex:
        """The index of ``path`` from the catalog, without opening the file (see :meth:`CatalogEntry.index`).

        Raises:
            KeyError: Not in the catalog. VideoError: The catalog lists it as unusable.
        """
        return self.entry(path).index(verify=verify)

    def sources(self) -> Iterator[CatalogSource]:
        """``(path, label, index)`` for every video in catalog order, unusable ones included (their
        ``index()`` raises the recorded error); label -1 where the catalog has none."""
        for entry in self.entries:
            yield CatalogSource(entry.path, -1 if entry.label is None else entry.label, entry.index)

    def to_table(self, columns: Iterable[str] | None = None) -> pa.Table:
        """The catalog as a pyarrow Table (default: every column but the per-frame arrays)."""
        return self._file.read(columns=list(columns) if columns is not None else list(_SCALAR_COLUMNS))

    def to_pandas(self, columns: Iterable[str] | None = None):
        """The catalog as a pandas DataFrame (default: every column but the per-frame arrays)."""
        return self.to_table(columns).to_pandas()

    # -- indexes -----------------------------------------------------------------------------------
    def _column(self, name: str) -> pa.ChunkedArray:
        return self._columns[name]

    def _index(self, row: int, *, verify: bool) -> VideoIndex:
        if not self._usable[row]:
            raise self._recorded_error(row)
        if verify:
            with self._lock:
                matches = self._verified.get(row)
            if matches is None:
                matches = self._matches(row)
                with self._lock:
                    self._verified[row] = matches
                if not matches:
                    warnings.warn(f"{self._path_list[row]} changed since catalog {self.path} was built; indexing it "
                                  "again (run `vclip index` again to update the catalog)", CatalogWarning, stacklevel=3)
            if not matches:
                return index_video(self._path_list[row], stream_index=self._lists["stream_index"][row])
        stored, valid = self._stored(row)
        if not valid:
            warnings.warn(f"{self._path_list[row]}: its row in catalog {self.path} is damaged (arrays that do not "
                          "fit together); indexing the video instead", CatalogWarning, stacklevel=3)
            return index_video(self._path_list[row], stream_index=self._lists["stream_index"][row])
        # The row group was checked as a whole when read (what from_arrays checks per video).
        return VideoIndex(path=self._path_list[row], **stored)

    def _matches(self, row: int) -> bool:
        path = self._path_list[row]
        if not is_local(path):  # a URL or a member of a shard: a VideoError names what went wrong
            return source_fingerprint(path) == self._lists["fingerprint"][row]
        try:
            return content_fingerprint(path) == self._lists["fingerprint"][row]
        except FileNotFoundError:
            raise VideoNotFoundError(path, "file does not exist (it was in the catalog)") from None
        except OSError as error:
            raise VideoError(path, f"cannot be read ({os_reason(error)})") from None

    def _recorded_error(self, row: int) -> VideoError:
        kind = getattr(errors, self._lists["error_type"][row] or "", None)
        kind = kind if isinstance(kind, type) and issubclass(kind, VideoError) else VideoError
        return kind(self._path_list[row], self._lists["error"][row])

    def _stored(self, row: int) -> tuple[dict, bool]:
        """The fields of ``row``'s VideoIndex but its path, and whether its arrays fit together:
        its row group's facts and arrays are read and checked once and kept in the cache (the
        arrays are views into them, no copy)."""
        group = int(np.searchsorted(self._group_starts, row, side="right") - 1)
        with self._lock:
            cached = self._groups.get(group)
            if cached is not None:
                self._groups.move_to_end(group)
        if cached is None:
            with self._file_lock:
                table = self._file.read_row_group(group, columns=list(_ARRAY_TYPES))
            arrays = {}
            for name in _ARRAY_TYPES:
                column = table.column(name).combine_chunks()
                offsets = _numpy_of(column, np.int32, len(column) + 1)
                arrays[name] = (offsets, _numpy_of(column.values, VideoIndex.STORED_ARRAYS[name], len(column.values)))
            start, stop = int(self._group_starts[group]), int(self._group_starts[group + 1])
            columns = [self._columns[name].slice(start, stop - start).to_pylist() for name in _INDEX_FACTS]
            facts = [parse_stored_facts(dict(zip(_INDEX_FACTS, values))) if usable else {}
                     for usable, values in zip(self._usable[start:stop], zip(*columns))]
            size = sum(values.nbytes + offsets.nbytes for offsets, values in arrays.values())
            read = (arrays, facts, _damaged_rows(arrays), size)
            with self._lock:
                cached = self._groups.setdefault(group, read)
                if cached is read:  # else another thread read the group meanwhile: it is counted once
                    self._groups_bytes += size
                    while self._groups_bytes > self.cache_bytes and len(self._groups) > 1:
                        _, (_, _, _, dropped) = self._groups.popitem(last=False)
                        self._groups_bytes -= dropped
                else:
                    self._groups.move_to_end(group)
        local = row - int(self._group_starts[group])
        stored = dict(cached[1][local])
        for name, (offsets, values) in cached[0].items():
            stored[name] = values[offsets[local]:offsets[local + 1]]
        return stored, local not in cached[2]


def _damaged_rows(arrays: dict[str, tuple[np.ndarray, np.ndarray]]) -> set[int]:
    """Rows of a row group whose index arrays do not fit together, checked for the whole group at
    once: the checks of :meth:`VideoIndex.from_arrays` (lengths, frame and packet numbers in range)."""
    frames = np.diff(arrays["pts"][0])
    packets = np.diff(arrays["packet_pts"][0])
    bad = (np.diff(arrays["frame_packet"][0]) != frames) | (frames > packets)
    for name in VideoIndex.STORED_ARRAYS:
        if name.startswith("packet_"):
            bad |= np.diff(arrays[name][0]) != packets
    if bad.any():  # lengths are wrong: the range checks below would misalign
        return set(np.flatnonzero(bad).tolist())
    rows = np.arange(frames.size)
    frame_packet, packet_frame = arrays["frame_packet"][1], arrays["packet_frame"][1]
    limit = np.repeat(packets, frames)
    out = np.repeat(rows, frames)[(frame_packet < 0) | (frame_packet >= limit)]
    limit = np.repeat(frames, packets)
    out2 = np.repeat(rows, packets)[(packet_frame < -1) | (packet_frame >= limit)]
    return set(out.tolist()) | set(out2.tolist())


def _numpy_of(array: pa.Array, dtype, count: int) -> np.ndarray:
    """The values buffer of a null-free Arrow array (the offsets of a list array) as NumPy, without
    a copy for integers (Arrow's own ``to_numpy`` imports pandas, a second on a cold start)."""
    buffer = array.buffers()[1]
    if dtype is np.bool_:
        bits = np.unpackbits(np.frombuffer(buffer, np.uint8), bitorder="little")
        return bits[array.offset:array.offset + count].astype(bool)
    return np.frombuffer(buffer, dtype=dtype)[array.offset:array.offset + count]


def read_catalog(path: str | os.PathLike, *, cache_bytes: int = _DEFAULT_CACHE_BYTES) -> Catalog:
    """Open a catalog written by :func:`build_catalog` (``vclip index``); no video is opened.

    Args:
        path: The Parquet file.
        cache_bytes: Memory for the per-frame arrays of recently used row groups (default 256 MiB).

    Raises:
        FileNotFoundError: No such file. ValueError: Not a vclip catalog, or a newer format.
    """
    return Catalog(path, cache_bytes=cache_bytes)
