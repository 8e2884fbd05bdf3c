"""``wids`` dataset descriptions of WebDataset shards (``shardindex.json``, as ``vclip shard``
writes one beside its shards): read with a size limit, checked field by field, their shard URLs
resolved (relative ones against ``base`` or the description's own folder).

A description read from a server is a stranger's: it may name shards on servers only. A local
path, a ``file://`` URL, an fsspec protocol served from this machine (``memory://``, ``zip://``...)
or a chained URL (``...::file://...``) in it, or a ``base`` that resolves to one, is refused, so
that it cannot point the reader at the client's own files (to read them as shards, or to probe
whether they exist).
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
from typing import Any

from ..errors import ArgumentError, UnreadableVideoError, VideoError, VideoNotFoundError
from .sources import is_url, open_reader

__all__ = ["DESCRIPTION_LIMIT", "DESCRIPTION_NAME", "description_beside", "read_description", "reads_local_files",
           "small_file"]

logger = logging.getLogger("vclip")

DESCRIPTION_NAME = "shardindex.json"
DESCRIPTION_LIMIT = 256 << 20  # a description larger than this is not read (a million shards take ~80 MB)
_LOCAL_PROTOCOLS = frozenset({"file", "local", "memory", "zip", "tar", "libarchive", "reference", "dir", "cached",
                              "simplecache", "filecache", "blockcache"})


def reads_local_files(name: str) -> bool:
    """Whether reading ``name`` reads this machine's files: a local path, a ``file://`` URL, an
    fsspec protocol served locally (``memory://``, ``zip://``...) or a chained URL (``a::b``)."""
    if not is_url(name):
        return True
    return name.split("://", 1)[0].lower() in _LOCAL_PROTOCOLS or "::" in name


def small_file(name: str, limit: int, what: str) -> bytes:
    """The whole content of a file that should be small (an index, a description).

    Raises:
        VideoError: It cannot be read, or holds more than ``limit`` bytes (then it is not read).
    """
    reader = open_reader(name)
    size = reader.size()
    if size > limit:
        raise UnreadableVideoError(name, f"is {size:,} bytes, more than a {what} holds ({limit:,} at most)")
    return reader.read_ranges([(0, size)])[0]


def read_description(path: str) -> tuple[list[str], dict[str, Any]]:
    """The shard URLs of the description at ``path`` (in order), and the description.

    Raises:
        FileNotFoundError: No description there.
        ArgumentError: Not JSON, a field of the wrong kind (naming it), or, from a server, a shard
            or ``base`` that would be read from this machine.
        VideoError: It cannot be read, or is larger than :data:`DESCRIPTION_LIMIT`.
    """
    location = path if is_url(path) else os.path.abspath(path)
    try:
        description = json.loads(small_file(location, DESCRIPTION_LIMIT, "dataset description"))
    except VideoNotFoundError:
        raise FileNotFoundError(f"dataset description {path!r} does not exist") from None
    except (ValueError, RecursionError) as error:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        reason = "nested too deeply" if isinstance(error, RecursionError) else str(error)
        raise ArgumentError(f"{path}: not a JSON dataset description ({reason})") from None
    problem = _problem(description)
    if problem is not None:
        raise ArgumentError(f"{path}: {problem}")
    folder = location.rsplit("/", 1)[0] if is_url(location) else os.path.dirname(location)
    base = description.get("base") or folder
    if not is_url(base) and not os.path.isabs(base):  # relative to the description's folder
        base = posixpath.join(folder, base) if is_url(folder) else os.path.join(folder, base)
    from_server = not reads_local_files(location)
    names = []
    for shard in description["shardlist"]:
        url = shard["url"]
        if is_url(url):
            name = url
        elif is_url(base):
            name = posixpath.join(base, url)
        else:
            name = os.path.abspath(os.path.join(base, url))
        if from_server and reads_local_files(name):
            raise ArgumentError(f"{path}: this description comes from a server but names {name!r}, which is read "
                                "from this machine; a remote description may name remote shards only")
        names.append(name)
    return names, description


def _problem(description: Any) -> str | None:
    """What is wrong with a parsed description's fields (None: nothing)."""
    if not isinstance(description, dict):
        return f"a wids dataset description is a JSON object, not {type(description).__name__}"
    shardlist = description.get("shardlist")
    if not isinstance(shardlist, list) or not all(
            isinstance(shard, dict) and isinstance(shard.get("url"), str) and shard["url"] for shard in shardlist):
        return "a wids dataset description needs a 'shardlist' of {'url': ..., 'nsamples': ...} objects"
    for number, shard in enumerate(shardlist):
        count = shard.get("nsamples")
        if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
            return f"shardlist[{number}]['nsamples'] ({count!r}) must be an integer >= 0"
    base = description.get("base")
    if base is not None and (not isinstance(base, str) or "\0" in base):
        return f"'base' ({base!r}) must be a URL or a folder (a string)"
    names = description.get("class_names")
    if names is not None and (not isinstance(names, list) or not all(isinstance(name, str) for name in names)
                              or len(set(names)) != len(names)):
        return f"'class_names' must be a list of distinct strings, not {str(names)[:60]}"
    return None


def description_beside(shard: str) -> dict[str, Any] | None:
    """The description (``shardindex.json``) in the folder of ``shard`` when it lists that shard (as
    ``vclip shard`` writes it), else None; one that cannot be used is left aside with a warning on
    the ``"vclip"`` logger."""
    folder = shard.rsplit("/", 1)[0] if is_url(shard) else os.path.dirname(shard)
    path = f"{folder}/{DESCRIPTION_NAME}" if is_url(shard) else os.path.join(folder, DESCRIPTION_NAME)
    if not is_url(path) and not os.path.isfile(path):
        return None
    try:
        listed, description = read_description(path)
    except FileNotFoundError:
        return None
    except (VideoError, ArgumentError) as error:
        logger.warning("vclip: the dataset description beside %s is not used: %s", shard, error)
        return None
    return description if shard in listed else None
