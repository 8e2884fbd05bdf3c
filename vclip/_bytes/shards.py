"""WebDataset shards as a dataset: the shards a pattern names, each shard's member table, members
grouped into samples, the video member of each sample, and its label and metadata.

- Shards: local tar paths, URLs (``https://``, ``s3://``: read through :mod:`vclip._bytes.sources`),
  brace patterns (``shard-{000000..000127}.tar``) and lists of them, or a ``wids`` dataset
  description (:mod:`vclip._bytes.descriptions`).
- Member table: the ``wds2idx`` index beside the shard (``shard-000000.idx`` or
  ``shard-000000.tar.idx``) when there is one and it fits the shard (every member's header is read
  and must be a file's of the listed name and size: :func:`vclip._bytes.tar.header_problem`), else
  one pass over the shard's headers.
- Samples: consecutive members with the same key, the part of the name before the first dot of
  its base name (``videos/000123.mp4`` and ``videos/000123.json`` form sample ``videos/000123``
  with extensions ``mp4`` and ``json``), as WebDataset groups them; names without a dot are left out.
- The video member: the sample's first extension in the order of ``video_extensions``; samples
  without one are counted and left out.
- Labels (:class:`LabelRule`): the text of a member (``"cls"``: the ``.cls`` member, an integer or a
  class name) or a value at a key path of a JSON member (``"json:label"``, ``"json:meta.class"``).
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeGuard

from ..errors import ArgumentError, VideoError, VideoNotFoundError
from .braces import expand_braces
from .descriptions import DESCRIPTION_NAME, description_beside, read_description, small_file
from .range_reader import RangeReader
from .remote import RemoteReader
from .sources import VideoInput, is_local, is_url, open_reader, slice_name, split_slice_name
from .tar import (
    BLOCK,
    TarMember,
    TarTable,
    header_problem,
    index_layout_problem,
    parse_member_index,
    read_tar_table,
)

__all__ = [
    "DEFAULT_VIDEO_EXTENSIONS", "LabelRule", "ShardListing", "ShardSample", "decode_member", "is_shard_source",
    "list_shards", "resolve_member_name", "resolve_video_name", "shard_names", "split_key", "video_names",
]

logger = logging.getLogger("vclip")

DEFAULT_VIDEO_EXTENSIONS = ("mp4", "webm", "mkv", "avi", "mov", "m4v")
LABEL_PAYLOAD_LIMIT = 1 << 20  # a label member larger than this is not a label
_LISTING_THREADS = 16  # shards listed at once (remote shards wait on round trips, not on the CPU)
MEMBER_INDEX_LIMIT = 256 << 20  # a wds2idx index larger than this is not read (a million samples take ~60 MB)
_HEADER_READ_GAP = 64 << 10  # headers of an index check closer than this share a request (small members between)


def split_key(name: str) -> tuple[str, str] | None:
    """``(key, extension)`` of a member name as WebDataset splits it (at the first dot of the base
    name), or None for a name without one (or a hidden file, whose base name starts with a dot)."""
    folder, _, base = name.rpartition("/")
    stem, dot, extension = base.partition(".")
    if not stem or not dot:
        return None
    return (f"{folder}/{stem}" if folder else stem), extension


@dataclass(frozen=True)
class ShardSample:
    """One sample of a shard: its members by extension, one of them the video.

    Attributes:
        shard: The shard (a local path or a URL).
        key: The members' common name part (``"000123"``, ``"videos/000123"``).
        members: Every member of the sample, by extension (``{"mp4": ..., "json": ...}``).
        video_extension: The extension of the video member.
    """

    shard: str
    key: str
    members: dict[str, TarMember]
    video_extension: str

    @property
    def video(self) -> TarMember:
        return self.members[self.video_extension]

    @property
    def name(self) -> str:
        """The video's name everywhere a path is taken (:func:`vclip._bytes.sources.slice_name`)."""
        video = self.video
        return slice_name(self.shard, video.name, video.offset, video.size)


def group_samples(shard: str, members: Iterable[TarMember], video_extensions: Sequence[str]) -> tuple[
        list[ShardSample], int]:
    """The samples of a shard's members with a video member, and the count of those without."""
    groups: list[tuple[str, dict[str, TarMember]]] = []
    for member in members:
        split = split_key(member.name)
        if split is None:
            continue
        key, extension = split
        if not groups or groups[-1][0] != key:
            groups.append((key, {}))
        groups[-1][1].setdefault(extension.lower(), member)
    samples, without = [], 0
    for key, by_extension in groups:
        chosen = next((extension for extension in video_extensions if extension in by_extension), None)
        if chosen is None:
            without += 1
        else:
            samples.append(ShardSample(shard, key, by_extension, chosen))
    return samples, without


@dataclass(frozen=True)
class LabelRule:
    """Where a sample's label is: the text of its member with ``extension`` (``key_path`` empty),
    or the value at ``key_path`` of that member read as JSON.

    Written ``"cls"`` or ``"json:label"`` / ``"json:annotations.0.class"`` (a path of keys and
    list positions joined by dots).
    """

    extension: str
    key_path: tuple[str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> LabelRule:
        """The rule ``text`` writes.

        Raises:
            ArgumentError: Not ``EXT`` or ``EXT:KEY.PATH``.
        """
        extension, colon, path = str(text).partition(":")
        keys = tuple(path.split(".")) if colon else ()
        if not extension or not extension.replace(".", "").isalnum() or (colon and not all(keys)):
            raise ArgumentError(f"label ({text!r}) must be a member's extension (e.g. 'cls', whose text is the "
                                "label) or EXTENSION:KEY.PATH into a JSON member (e.g. 'json:label'), or None")
        return cls(extension.lower(), keys)

    def __str__(self) -> str:
        return self.extension + (":" + ".".join(self.key_path) if self.key_path else "")

    def value(self, payload: bytes, where: str) -> int | str:
        """The label in ``payload``: an integer (that fits int64), or a class name (a string).

        Raises:
            ValueError: Not UTF-8, empty, not JSON (or nested too deeply to read), no such key, or a
                value that is neither such an integer nor a string (naming ``where``).
        """
        try:
            text = payload.decode("utf-8").strip()
        except UnicodeDecodeError:
            raise ValueError(f"{where}: its .{self.extension} member is not UTF-8 text") from None
        if not self.key_path:
            if not text:
                raise ValueError(f"{where}: its .{self.extension} member is empty")
            if not _INTEGER.fullmatch(text):
                return text  # a class name
            if len(text) > 20:  # int() refuses over 4300 digits; no int64 has more than 19
                raise ValueError(f"{where}: label {text[:30]}... (from {self}) does not fit a 64-bit integer")
            return _label_integer(int(text), where, self)
        try:
            value: Any = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as error:
            reason = "nested too deeply" if isinstance(error, RecursionError) else str(error)
            raise ValueError(f"{where}: its .{self.extension} member is not JSON ({reason})") from None
        for depth, key in enumerate(self.key_path):
            try:
                value = value[int(key)] if isinstance(value, list) else value[key]
            except (KeyError, IndexError, TypeError, ValueError):
                raise ValueError(f"{where}: its .{self.extension} member has no "
                                 f"{'.'.join(self.key_path[:depth + 1])!r}") from None
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
            raise ValueError(f"{where}: label {'.'.join(self.key_path)!r} ({shown}) must be an integer or a "
                             "class name (a string)")
        return _label_integer(value, where, self) if isinstance(value, int) else value


_INTEGER = re.compile(r"-?[0-9]+")
_INT64 = 1 << 63


def _label_integer(value: int, where: str, rule: LabelRule) -> int:
    if not -_INT64 <= value < _INT64:
        raise ValueError(f"{where}: label {str(value)[:30]} (from {rule}) does not fit a 64-bit integer")
    return value


def decode_member(extension: str, payload: bytes) -> Any:
    """A sibling member's content as WebDataset's default decoding gives it: JSON parsed, ``cls``
    (and ``cls2``, ``index``) as an integer, ``txt``/``text`` as a string, anything else bytes.

    Raises:
        ValueError: Content that is not what its extension says (the message says what it is not).
    """
    last = extension.rsplit(".", 1)[-1]
    try:
        if last == "json":
            return json.loads(payload)
        if last in ("cls", "cls2", "index"):
            text = payload.decode("utf-8").strip()
            if not _INTEGER.fullmatch(text) or len(text) > 20:
                raise ValueError(f"not an integer ({text[:30]!r})")
            return int(text)
        if last in ("txt", "text"):
            return payload.decode("utf-8")
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        reason = "JSON nested too deeply" if isinstance(error, RecursionError) else str(error)
        raise ValueError(f"not {'JSON' if last == 'json' else 'UTF-8 text'} ({reason})") from None
    return payload


# -- which shards --------------------------------------------------------------------------------
def is_shard_source(value: object) -> TypeGuard[str | os.PathLike | Sequence[str | os.PathLike]]:
    """Whether ``value`` names WebDataset shards: a path, URL or brace pattern ending in ``.tar``,
    or their ``shardindex.json`` description (or a list of them)."""
    if isinstance(value, (str, os.PathLike)):
        text = os.fspath(value)
        return isinstance(text, str) and (text.lower().endswith(".tar")
                                          or text.replace("\\", "/").rsplit("/", 1)[-1] == DESCRIPTION_NAME)
    if isinstance(value, (list, tuple)) and value:
        return all(isinstance(item, (str, os.PathLike)) and is_shard_source(item) for item in value)
    return False


def shard_names(shards: str | os.PathLike | Sequence[str | os.PathLike]) -> tuple[list[str], dict | None]:
    """The shards ``shards`` names, in order (local ones as absolute paths), and the ``wids``
    dataset description when one was given.

    Raises:
        ArgumentError: Nothing named, a malformed pattern or description.
        FileNotFoundError: A local shard or description that does not exist.
    """
    items = [shards] if isinstance(shards, (str, os.PathLike)) else list(shards)
    names: list[str] = []
    description = None
    for item in items:
        if not isinstance(item, (str, os.PathLike)):
            raise ArgumentError(f"shards ({item!r}) must be paths, URLs or brace patterns of .tar shards")
        text = os.fspath(item)
        if text.lower().endswith(".json"):
            found, description = read_description(text)
            names.extend(found)
            continue
        try:
            expanded = expand_braces(text)
        except ValueError as error:
            raise ArgumentError(str(error)) from None
        names.extend(name if is_url(name) else os.path.abspath(name) for name in expanded)
    if not names:
        raise ArgumentError(f"shards ({shards!r}) names no shard")
    for name in names:
        if is_local(name) and not os.path.isfile(name):
            raise FileNotFoundError(f"shard {name!r} does not exist")
    return names, description if description is not None else description_beside(names[0])


# -- member tables and samples -------------------------------------------------------------------
@dataclass(frozen=True)
class ShardListing:
    """What one shard holds.

    Attributes:
        shard: The shard.
        samples: Its samples with a video member, in archive order.
        payloads: The data of the members read for labels, by member offset (names may repeat).
        without_video: Samples left out for want of a video member.
        from_member_index: Whether the member table came from an ``.idx`` file beside the shard
            (else from its headers).
    """

    shard: str
    samples: list[ShardSample]
    payloads: dict[int, bytes]
    without_video: int
    from_member_index: bool


def member_index_names(shard: str) -> list[str]:
    """Where a ``wds2idx`` index of ``shard`` may lie: ``NAME.idx`` (wds2idx's default) and
    ``NAME.tar.idx``."""
    stem = shard[:-4] if shard.lower().endswith(".tar") else shard
    return [stem + ".idx", shard + ".idx"]


def _member_index(shard: str) -> tuple[list[TarMember], bool] | None:
    """The members the index beside ``shard`` lists, and whether it names them (version 1.2); None
    when it has none (or a malformed one, with a warning on the ``"vclip"`` logger)."""
    for name in member_index_names(shard):
        if is_local(name) and not os.path.isfile(name):
            continue
        try:
            text = small_file(name, MEMBER_INDEX_LIMIT, "member index").decode("utf-8", "surrogateescape")
        except VideoNotFoundError:  # missing: the headers will do
            continue
        except VideoError as error:
            logger.warning("vclip: %s; reading the headers of %s instead", error, shard)
            continue
        try:
            return parse_member_index(text, name), text.lstrip().startswith("v1.2")
        except ValueError as error:
            logger.warning("vclip: %s; reading the headers of %s instead", error, shard)
    return None


def _indexed_table(shard: str, reader: RangeReader, members: list[TarMember], named: bool,
                   wanted: Callable[[TarMember], bool] | None) -> TarTable | None:
    """The table a member index gives, with the payloads ``wanted``, once every member's header has
    been read and agrees with it; None (with a warning) when one does not. The headers and the small
    members between them are read together: on a server, about one request per sample."""
    problem = index_layout_problem(members, reader.size())
    payloads: dict[int, bytes] = {}
    if problem is None and members:
        ranges = [(m.offset - BLOCK, BLOCK + (m.size if wanted is not None and wanted(m) else 0)) for m in members]
        chunks = reader.read_ranges(ranges, gap=_HEADER_READ_GAP) if isinstance(reader, RemoteReader) else \
            reader.read_ranges(ranges)
        for member, (_, length), chunk in zip(members, ranges, chunks):
            problem = header_problem(member, chunk[:BLOCK], named=named)
            if problem is not None:
                break
            if length > BLOCK:
                payloads[member.offset] = chunk[BLOCK:]
    if problem is not None:
        logger.warning("vclip: the member index beside %s does not fit it (%s); reading its headers", shard, problem)
        return None
    return TarTable(members, payloads)


def list_shard(shard: str, video_extensions: Sequence[str], label_extension: str | None) -> ShardListing:
    """One shard's samples, and the data of its members with ``label_extension``.

    Raises:
        VideoError: The shard cannot be read, is compressed, or is not a tar archive (naming it).
    """
    reader = open_reader(shard)

    def wanted(member: TarMember) -> bool:
        split = split_key(member.name)
        return (split is not None and split[1].lower() == label_extension
                and member.size <= LABEL_PAYLOAD_LIMIT)

    indexed = _member_index(shard)
    table = _indexed_table(shard, reader, *indexed, wanted if label_extension else None) if indexed else None
    from_index = table is not None
    if table is None:
        table = read_tar_table(reader, payload_wanted=wanted if label_extension else None)
    kept, left_out = _intact_members(table)
    samples, without = group_samples(shard, kept, video_extensions)
    if table.problem is not None:
        logger.warning("vclip: shard %s is incomplete: %s; the samples before that are used (%d)%s", shard,
                       table.problem, len(samples), f", sample {left_out!r} is left out" if left_out else "")
    payloads = dict(table.payloads)
    return ShardListing(shard, samples, payloads, without, from_index)


def _intact_members(table: TarTable) -> tuple[list[TarMember], str | None]:
    """The members of ``table`` that belong to whole samples, and the key of the sample left out:
    an archive that ends inside a member loses that member's sample (its other members too)."""
    members = table.members
    cut = split_key(table.cut_member) if table.cut_member is not None else None
    if cut is None:
        return members, None
    keep = len(members)
    while keep and (split_key(members[keep - 1].name) or ("",))[0] == cut[0]:
        keep -= 1
    return members[:keep], cut[0]


def list_shards(names: Sequence[str], video_extensions: Sequence[str], label_extension: str | None,
                workers: int = _LISTING_THREADS) -> list[ShardListing]:
    """:func:`list_shard` of every shard, several at once, in order."""
    if len(names) == 1 or workers <= 1:
        return [list_shard(name, video_extensions, label_extension) for name in names]
    with ThreadPoolExecutor(min(workers, len(names)), thread_name_prefix="vclip-shards") as pool:
        return list(pool.map(lambda name: list_shard(name, video_extensions, label_extension), names))


def resolve_member_name(name: str, video_extensions: Sequence[str] = DEFAULT_VIDEO_EXTENSIONS) -> str:
    """The slice name of a video named by its shard: ``SHARD.tar#MEMBER`` (a member's name) or
    ``SHARD.tar`` (a shard of one video); any other name is returned as it is.

    Raises:
        ArgumentError: No such member, or a shard of several videos named without one.
        VideoError: The shard cannot be read.
    """
    if split_slice_name(name) is not None:
        return name
    shard, hash_mark, member = name.rpartition("#")
    if not hash_mark:
        shard, member = name, ""
    if not shard.lower().endswith(".tar"):
        return name
    if is_local(shard):
        if not os.path.isfile(shard):
            return name  # not a shard: reported as a missing file by whoever opens it
        shard = os.path.abspath(shard)
    listing = list_shard(shard, video_extensions, None)
    if member:
        for sample in listing.samples:
            if member in (sample.video.name, sample.key):
                return sample.name
        raise ArgumentError(f"{name!r}: shard {shard} has no video member {member!r} "
                            f"(it has {len(listing.samples)} videos, e.g. {_first(listing)})")
    if len(listing.samples) != 1:
        raise ArgumentError(f"{name!r} holds {len(listing.samples)} videos; name one as SHARD#MEMBER, "
                            f"e.g. {shard}#{_first(listing)}")
    return listing.samples[0].name


def resolve_video_name(video: VideoInput) -> VideoInput:
    """``video`` with a name that names it by its shard (``SHARD.tar#MEMBER``, or ``SHARD.tar`` of
    one video) turned into the member's slice name (:func:`resolve_member_name`), as the index
    caches want it; any other video as it is.

    Raises:
        ArgumentError: No such member, or a shard of several videos named without one.
        VideoError: The shard cannot be read.
    """
    if isinstance(video, str) and ".tar" in video.lower():  # a shard of one video, or SHARD.tar#MEMBER
        return resolve_member_name(video)
    return video


def _first(listing: ShardListing) -> str:
    return listing.samples[0].video.name if listing.samples else "(none)"


def video_names(text: str, video_extensions: Sequence[str] = DEFAULT_VIDEO_EXTENSIONS) -> list[str] | None:
    """The videos that ``text`` names when it names shards (``.tar`` paths, URLs or patterns: every
    video member; ``SHARD.tar#MEMBER``: that one), as slice names; None when it names no shard.

    Raises:
        ArgumentError, FileNotFoundError, VideoError: As :func:`shard_names` and :func:`list_shard`.
    """
    if is_shard_source(text):
        names, _ = shard_names(text)
        return [sample.name for listing in list_shards(names, video_extensions, None) for sample in listing.samples]
    if split_slice_name(text) is None and text.rpartition("#")[0].lower().endswith(".tar"):
        return [resolve_member_name(text, video_extensions)]
    return None
