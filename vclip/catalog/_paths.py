"""How a catalog names its videos: relative to the catalog's folder where a video lies inside it,
so that a dataset moves (or mounts elsewhere) with its catalog; absolute where it lies outside;
URLs as they are. A member of a WebDataset shard (``SHARD.tar#MEMBER@OFFSET+SIZE``) is named by its
shard the same way. Catalogs of format 1 stored absolute paths, which read as they are."""

from __future__ import annotations

import os

from .._bytes.sources import is_url, slice_name, split_slice_name

__all__ = ["resolved_path", "stored_path"]


def stored_path(path: str, folder: str) -> str:
    """``path`` (absolute, a URL or a member of a shard) as the catalog in ``folder`` stores it."""
    member = split_slice_name(path)
    if member is not None:
        container, label, offset, size = member
        return slice_name(stored_path(container, folder), label, offset, size)
    if is_url(path) or not os.path.isabs(path):
        return path
    try:
        inside = os.path.commonpath([folder, path]) == folder
    except ValueError:  # another drive
        inside = False
    return os.path.relpath(path, folder) if inside else path


def resolved_path(stored: str, folder: str) -> str:
    """The path of a video the catalog in ``folder`` stores as ``stored`` (absolute paths and URLs
    as they are)."""
    member = split_slice_name(stored)
    if member is not None:
        container, label, offset, size = member
        return slice_name(resolved_path(container, folder), label, offset, size)
    if is_url(stored) or os.path.isabs(stored):
        return stored
    return os.path.normpath(os.path.join(folder, stored))
