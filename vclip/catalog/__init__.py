"""A dataset catalog: one Parquet table with every video's index, label and content fingerprint.

:func:`build_catalog` (``vclip index`` on the command line) indexes every video of a dataset once,
in parallel, and writes one row per video: the facts ``vclip info`` shows (codec, size, frame rate,
frame and keyframe counts, duration, colour, time base...), the label and class name, a content
fingerprint, and the per-frame and per-packet arrays a decode plan needs, as list columns. A video
that cannot be read gets a row too, with ``usable`` false and the error. Running it again into the
same file indexes only the videos that are new or changed and keeps the others. Videos inside the
catalog's folder are named relative to it, so a dataset moves with its catalog (absolute paths for
videos outside it; URLs as they are).

:func:`read_catalog` opens it without opening any video: a loader on every rank of every node
starts from it at once. Each entry's :class:`~vclip.VideoIndex` is built from the stored arrays
when first asked for; ``entry.index(verify=True)`` also checks the file's fingerprint once and
re-indexes a video that changed since (with a :class:`CatalogWarning`).

The file is a plain table: query it with pandas, polars or DuckDB (``usable``, ``label``,
``class_name``, ``codec``, ``width``, ``height``, ``average_fps``, ``num_frames``,
``duration_seconds``, ``size_bytes``... one row per video).
"""

from __future__ import annotations

try:
    import pyarrow  # noqa: F401 - every part of the catalog needs it: say which extra brings it
except ImportError as _error:  # pragma: no cover - depends on the environment
    raise ImportError("vclip.catalog needs pyarrow: pip install 'vclip-nvdec[catalog]'") from _error

from ..errors import CatalogWarning
from ._build import CatalogBuild, ResolvedSources, build_catalog, resolve_sources
from ._build import check_catalog_out as check_catalog_out  # outside __all__: for vclip's CLI and Ray jobs
from ._build import rows_table as rows_table
from ._indexing import IndexItem as IndexItem
from ._indexing import index_row as index_row
from ._read import Catalog, CatalogEntry, CatalogSource, read_catalog

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

for _name in ("Catalog", "CatalogBuild", "CatalogEntry", "CatalogSource", "ResolvedSources", "build_catalog",
              "read_catalog", "resolve_sources"):  # built and read in private modules, public here
    globals()[_name].__module__ = __name__
del _name
