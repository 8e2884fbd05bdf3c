"""The table of a dataset catalog: its Parquet columns (one row per video: who and what, the file,
the stream's facts, the index arrays as list columns, timing), its format version and the key of its
metadata. The writer (:mod:`vclip.catalog._build`) and the reader (:mod:`vclip.catalog._read`) share it."""

from __future__ import annotations

import json

import numpy as np

try:
    import pyarrow as pa
except ImportError as _error:  # pragma: no cover - depends on the environment
    raise ImportError("vclip.catalog needs pyarrow: pip install 'vclip-nvdec[catalog]'") from _error

from .._index.record import VideoIndex
from ..errors import ArgumentError

__all__ = ["FORMAT_VERSION", "READABLE_VERSIONS", "METADATA_KEY", "ROW_GROUP_ROWS", "SCHEMA", "FACT_TYPES",
           "ARRAY_TYPES", "TIMING_TYPES", "INDEX_FACTS", "SCALAR_COLUMNS", "LOCATION_TYPES", "catalog_metadata"]

FORMAT_VERSION = 2
"""The catalog format this vclip writes: 2 stores paths relative to the catalog's folder (see
:mod:`vclip.catalog._paths`); format 1 stored absolute paths, with the same columns."""
READABLE_VERSIONS = (1, 2)
METADATA_KEY = b"vclip.catalog"
ROW_GROUP_ROWS = 512

# Columns, in file order: who and what, the file, the stream's facts, the index arrays, timing.
FACT_TYPES = {
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
ARRAY_TYPES = {
    name: pa.list_(pa.bool_() if dtype is np.bool_ else pa.int64()) for name, dtype in VideoIndex.STORED_ARRAYS.items()
}
TIMING_TYPES = {"index_seconds": pa.float64()}
# Where a member of a WebDataset shard lies (null for a file of its own): written after the other
# columns, read by queries (``to_table(["path", "shard", "member", "offset_bytes", "size_bytes"])``);
# the path names the same place (vclip._bytes.sources.slice_name).
LOCATION_TYPES = {"shard": pa.string(), "member": pa.string(), "offset_bytes": pa.int64()}
SCHEMA = pa.schema([pa.field(name, kind) for name, kind in {**FACT_TYPES, **ARRAY_TYPES, **TIMING_TYPES}.items()])
INDEX_FACTS = tuple(name for name in VideoIndex.__dataclass_fields__
                     if name != "path" and name not in VideoIndex.STORED_ARRAYS)
SCALAR_COLUMNS = tuple(name for name in SCHEMA.names if name not in ARRAY_TYPES)


def catalog_metadata(schema: pa.Schema, path: str) -> dict:
    """The vclip metadata of a catalog's Parquet schema (``path`` names the file in the error).

    Raises:
        ArgumentError: (a ValueError) The file is Parquet but not a vclip catalog.
    """
    raw = (schema.metadata or {}).get(METADATA_KEY)
    if raw is None:
        raise ArgumentError(f"{path} is a Parquet file but not a vclip catalog (no {METADATA_KEY.decode()} metadata)")
    return json.loads(raw)
