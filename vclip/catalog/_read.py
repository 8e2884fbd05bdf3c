"""Reading a dataset catalog (:mod:`vclip.catalog`): :func:`read_catalog` opens the Parquet table
without opening any video, and each entry's :class:`~vclip.VideoIndex` is built from the stored
arrays when first asked for (row groups read on demand, within a memory bound);
``entry.index(verify=True)`` also checks the file's fingerprint once and re-indexes a video that
changed since (with a :class:`~vclip.errors.CatalogWarning`)."""

from __future__ import annotations

import logging
import os
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

import numpy as np

try:
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError as _error:  # pragma: no cover - depends on the environment
    raise ImportError("vclip.catalog needs pyarrow: pip install 'vclip-nvdec[catalog]'") from _error

from .. import errors
from .._bytes.fingerprint import content_fingerprint
from .._bytes.sources import is_local, source_fingerprint
from .._datasets.inputs import UNLABELLED
from .._index.record import VideoIndex, check_facts, parse_stored_facts
from ..errors import (
    ArgumentError,
    CatalogWarning,
    NotInCatalogError,
    PathNotFoundError,
    VideoError,
    VideoNotFoundError,
    os_reason,
)
from ..index import index_video
from ._paths import resolved_path
from ._schema import ARRAY_TYPES, FORMAT_VERSION, INDEX_FACTS, SCALAR_COLUMNS, SCHEMA, catalog_metadata

__all__ = ["Catalog", "CatalogEntry", "CatalogSource", "read_catalog"]

logger = logging.getLogger("vclip")

_DEFAULT_CACHE_BYTES = 256 * 2**20


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
        path: The video file (absolute: a path the catalog stores relative to its folder is
            resolved against where the catalog is now), or its URL.
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
        return {name: self._catalog._column(name)[self.row].as_py() for name in SCALAR_COLUMNS}

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
            raise PathNotFoundError(f"catalog {self.path!r} does not exist")
        try:
            self._file = pq.ParquetFile(self.path)
        except (pa.ArrowException, OSError) as error:
            raise ArgumentError(f"{self.path} is not a readable Parquet file ({error})") from None
        self.metadata: dict = catalog_metadata(self._file.schema_arrow, self.path)
        if self.metadata.get("format_version", 0) > FORMAT_VERSION:
            raise ArgumentError(f"{self.path} is catalog format {self.metadata['format_version']}; this vclip "
                                f"reads format {FORMAT_VERSION} and older: upgrade vclip")
        if expected_id is not None and self.metadata.get("catalog_id") != expected_id:
            raise ArgumentError(f"catalog {self.path} was replaced since it was read; read it again")
        schema = self._file.schema_arrow
        missing = [name for name in SCHEMA.names if name not in schema.names]
        if missing:
            raise ArgumentError(f"{self.path} lacks the catalog columns {missing}")
        retyped = [f"{name} is {schema.field(name).type}, not {SCHEMA.field(name).type}"
                   for name in SCHEMA.names if not _same_type(schema.field(name).type, SCHEMA.field(name).type)]
        if retyped:  # its values would be read as what they are not
            raise ArgumentError(f"{self.path} is not a vclip catalog as written: column "
                                f"{'; column '.join(retyped)}")
        self.class_names: tuple[str, ...] | None = (
            tuple(self.metadata["class_names"]) if self.metadata.get("class_names") is not None else None)
        self.created: str | None = self.metadata.get("created")
        self._facts = self._file.read(columns=list(SCALAR_COLUMNS))
        self._columns = {name: self._facts.column(name) for name in SCALAR_COLUMNS}
        self._lists = {name: self._columns[name].to_pylist() for name in (
            "path", "label", "class_name", "fingerprint", "error", "error_type", "stream_index", "usable")}
        folder = os.path.dirname(self.path)
        self._path_list: list[str] = [resolved_path(path, folder) for path in self._lists["path"]]
        self._label_list: list[int | None] = self._lists["label"]
        self._usable = np.array(self._lists["usable"], dtype=bool)
        group_rows = [self._file.metadata.row_group(g).num_rows for g in range(self._file.num_row_groups)]
        self._group_starts = np.concatenate([[0], np.cumsum(group_rows)]).astype(np.int64)
        self._groups: OrderedDict[int, _RowGroup] = OrderedDict()
        self._groups_bytes = 0
        self._rows_by_path: dict[str, int] | None = None
        self._entries: list[CatalogEntry] | None = None
        self._verified: dict[int, bool] = {}
        self._damaged_warned: set[int] = set()
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
        """The videos' paths: absolute (those the catalog stores relative to its folder resolved
        against where the catalog is now), or URLs."""
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
            NotInCatalogError: (a KeyError) The catalog has no such video.
        """
        if self._rows_by_path is None:
            self._rows_by_path = {path: row for row, path in enumerate(self._path_list)}
        text = os.fspath(path)
        row = self._rows_by_path.get(text, self._rows_by_path.get(os.path.abspath(text)))
        if row is None:
            raise NotInCatalogError(f"{text!r} is not in catalog {self.path}")
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
            NotInCatalogError: (a KeyError) Not in the catalog. VideoError: The catalog lists it as
                unusable.
        """
        return self.entry(path).index(verify=verify)

    def sources(self) -> Iterator[CatalogSource]:
        """``(path, label, index)`` for every video in catalog order, unusable ones included (their
        ``index()`` raises the recorded error); label -1 where the catalog has none."""
        for entry in self.entries:
            yield CatalogSource(entry.path, UNLABELLED if entry.label is None else entry.label, entry.index)

    def to_table(self, columns: Iterable[str] | None = None) -> pa.Table:
        """The catalog as a pyarrow Table (default: every column but the per-frame arrays), with
        ``path`` and ``shard`` resolved as :attr:`paths` are (the file stores them relative to its
        folder)."""
        table = self._file.read(columns=list(columns) if columns is not None else list(SCALAR_COLUMNS))
        folder = os.path.dirname(self.path)
        for name in ("path", "shard"):
            if name in table.column_names:
                resolved = [None if value is None else resolved_path(value, folder)
                            for value in table.column(name).to_pylist()]
                table = table.set_column(table.column_names.index(name), table.schema.field(name),
                                         pa.array(resolved, pa.string()))
        return table

    def to_pandas(self, columns: Iterable[str] | None = None):
        """The catalog as a pandas DataFrame (as :meth:`to_table`)."""
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
            with self._lock:
                first = row not in self._damaged_warned
                self._damaged_warned.add(row)
            if first:
                warnings.warn(f"{self._path_list[row]}: its row in catalog {self.path} is damaged (facts that are not "
                              "possible, or arrays that do not fit together); indexing the video instead",
                              CatalogWarning, stacklevel=3)
            return index_video(self._path_list[row], stream_index=_stream_index(self._lists["stream_index"][row]))
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
                table = self._file.read_row_group(group, columns=list(ARRAY_TYPES))
            arrays = {}
            for name in ARRAY_TYPES:
                column = table.column(name).combine_chunks()
                offsets = _numpy_of(column, np.int32, len(column) + 1)
                arrays[name] = (offsets, _numpy_of(column.values, VideoIndex.STORED_ARRAYS[name], len(column.values)))
            start, stop = int(self._group_starts[group]), int(self._group_starts[group + 1])
            columns = [self._columns[name].slice(start, stop - start).to_pylist() for name in INDEX_FACTS]
            usable = self._usable[start:stop]
            facts = [_row_facts(dict(zip(INDEX_FACTS, values))) if ok else {}
                     for ok, values in zip(usable, zip(*columns))]
            damaged = {local for local, fact in enumerate(facts) if fact is None}
            damaged |= _damaged_rows(arrays) & set(np.flatnonzero(usable).tolist())
            size = sum(values.nbytes + offsets.nbytes for offsets, values in arrays.values())
            read = (arrays, [fact or {} for fact in facts], damaged, size)
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


def _same_type(found: pa.DataType, expected: pa.DataType) -> bool:
    """Whether a column's type is the catalog's (list types compared by their values' type: the
    name of a list's item field differs between Parquet writers)."""
    if pa.types.is_list(found) and pa.types.is_list(expected):
        return found.value_type == expected.value_type
    return found == expected


def _stream_index(value) -> int | None:
    return value if isinstance(value, int) and value >= 0 else None


def _row_facts(values: dict) -> dict | None:
    """A usable row's stream facts as index field values, or None when they are not possible (the
    checks every stored index passes: :func:`vclip._index.record.check_facts`)."""
    try:
        facts = parse_stored_facts(values)
        check_facts(facts)
    except (ValueError, TypeError, ArithmeticError):
        return None
    return facts


def _damaged_rows(arrays: dict[str, tuple[np.ndarray, np.ndarray]]) -> set[int]:
    """Rows of a row group whose index arrays do not fit together, checked for the whole group at
    once: the checks of :func:`vclip._index.record.check_index` (lengths, frame and packet numbers in
    range and inverse of each other, timestamps increasing and those of their packets, sizes and
    positions possible)."""
    frame_offsets, packet_offsets = arrays["pts"][0], arrays["packet_pts"][0]
    frames, packets = np.diff(frame_offsets), np.diff(packet_offsets)
    bad = (np.diff(arrays["frame_packet"][0]) != frames) | (frames > packets)
    for name in VideoIndex.STORED_ARRAYS:
        if name.startswith("packet_"):
            bad |= np.diff(arrays[name][0]) != packets
    if bad.any():  # lengths are wrong: the checks below would misalign
        return set(np.flatnonzero(bad).tolist())
    rows = np.arange(frames.size)
    row_of_frame, row_of_packet = np.repeat(rows, frames), np.repeat(rows, packets)
    pts, packet_pts = arrays["pts"][1], arrays["packet_pts"][1]
    frame_packet, packet_frame = arrays["frame_packet"][1], arrays["packet_frame"][1]
    out = set(row_of_frame[(frame_packet < 0) | (frame_packet >= packets[row_of_frame])].tolist())
    out |= set(row_of_packet[(packet_frame < -1) | (packet_frame >= frames[row_of_packet])].tolist())
    out |= set(row_of_packet[(arrays["packet_size"][1] < 0) | (arrays["packet_pos"][1] < -1)].tolist())
    within = row_of_frame[1:] == row_of_frame[:-1]
    out |= set(row_of_frame[1:][within & (np.diff(pts) <= 0)].tolist())
    # frame_packet and packet_frame inverse of each other, frames' pts those of their packets
    packet_of_frame = np.clip(frame_packet, 0, None) + (packet_offsets[:-1] - packet_offsets[0])[row_of_frame]
    packet_of_frame = np.clip(packet_of_frame, 0, max(packet_frame.size - 1, 0))
    frame_in_row = np.arange(pts.size) - (frame_offsets[:-1] - frame_offsets[0])[row_of_frame]
    if pts.size:
        out |= set(row_of_frame[(packet_frame[packet_of_frame] != frame_in_row)
                                | (packet_pts[packet_of_frame] != pts)].tolist())
    shown = np.bincount(row_of_packet, weights=packet_frame >= 0, minlength=frames.size)
    out |= set(np.flatnonzero((shown != frames) | (frames == 0)).tolist())  # unusable rows have none: not asked
    return out


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
        PathNotFoundError: (a FileNotFoundError) No such file. ArgumentError: (a ValueError) Not a
            vclip catalog, or a newer format.
    """
    return Catalog(path, cache_bytes=cache_bytes)
