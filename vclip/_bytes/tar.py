"""Tar archives read without extracting them: the member table from one pass over the 512-byte
headers (payloads are skipped, not read), and the ``.idx`` member index that DALI's ``wds2idx``
writes beside a WebDataset shard, read and written.

The header pass understands POSIX ustar (names split into prefix and name), GNU long names
(``L`` records) and PAX extended headers (``x`` records with ``path`` and ``size``; global ``g``
records are skipped); only regular files become members. It reads through a
:class:`~vclip._bytes.range_reader.RangeReader`, so a shard on S3 or behind HTTP costs one small range request
per member (two where an extension header precedes it) and never its payload, except the payloads
the caller asks for (small label files, read in the same request as the next header).

A member is located by the offset of its data (not of its header) and its size, as in the
``wds2idx`` format (version 1.2: per sample one line of ``ext offset size name`` groups, after a
``v1.2 <samples>`` line; version 1.1 lacks the names).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

from ..errors import CorruptVideoError, NotAVideoError
from .range_reader import RangeReader

__all__ = ["BLOCK", "LARGEST_MEMBER", "TarMember", "TarStream", "TarTable", "format_member_index", "header_problem",
           "index_layout_problem", "parse_member_index", "read_tar_table"]

BLOCK = 512
_REGULAR = (b"0", b"\0", b"7")  # a file (7: contiguous file, read as one)
_GNU_LONG_NAME, _GNU_LONG_LINK, _PAX_HEADER, _PAX_GLOBAL = b"L", b"K", b"x", b"g"
_EXTENSIONS_LIMIT = 1 << 20  # a long name or PAX record larger than this is a damaged archive
LARGEST_MEMBER = 1 << 46  # 64 TiB: a size field beyond this is damage, not a file
_OCTAL = re.compile(rb"[0-7]*")
_DECIMAL = re.compile(r"[0-9]+")
_GZIP, _BZIP2, _XZ, _ZSTD = b"\x1f\x8b", b"BZh", b"\xfd7zXZ", b"\x28\xb5\x2f\xfd"
INDEX_VERSION = "v1.2"


@dataclass(frozen=True)
class TarMember:
    """One regular file of a tar archive.

    Attributes:
        name: Its path inside the archive (long names resolved).
        offset: Byte offset of its data in the archive (its header lies in the 512 bytes before,
            or before that with extension headers).
        size: Length of its data in bytes.
    """

    name: str
    offset: int
    size: int


@dataclass(frozen=True)
class TarTable:
    """The member table of an archive, and the payloads read on the way (by member offset).

    Attributes:
        members: The regular files, in archive order, up to where the walk stopped.
        payloads: The data of the members ``payload_wanted`` asked for, by their offset.
        problem: Why the walk stopped before the end-of-archive marker (the archive is cut off or
            a later header is damaged); None for a whole archive.
        cut_member: The member the archive ends inside (its data is incomplete and it is not in
            ``members``), or None.
    """

    members: list[TarMember]
    payloads: dict[int, bytes]
    problem: str | None = None
    cut_member: str | None = None


@dataclass(frozen=True)
class _Header:
    """One header of the walk: a regular member's or an extension's."""

    kind: bytes
    name: str
    length: int
    data: int  # where its data starts
    following: int  # where the next header starts

    @property
    def is_extension(self) -> bool:
        return self.kind in (_GNU_LONG_NAME, _GNU_LONG_LINK, _PAX_HEADER, _PAX_GLOBAL)

    @property
    def is_regular(self) -> bool:
        return self.kind in _REGULAR


def _header(block: bytes, position: int, pending: dict[str, str], archive: str) -> _Header:
    """The header ``block`` at byte ``position`` (``pending``: what extension headers before it said).

    Raises:
        CorruptVideoError: A bad checksum, a size that is negative, absurd or not a number, an
            extension header too large.
    """
    if not _is_header(block):
        raise CorruptVideoError(archive, f"damaged tar header at byte {position} (bad checksum)")
    kind = block[156:157]
    length = _number(block[124:136], archive, position)
    extension = kind in (_GNU_LONG_NAME, _GNU_LONG_LINK, _PAX_HEADER, _PAX_GLOBAL)
    if extension and length > _EXTENSIONS_LIMIT:
        raise CorruptVideoError(archive, f"tar extension header at byte {position} claims {length} bytes")
    if not extension and "size" in pending:
        length = _pax_size(pending["size"], archive, position)
    data = position + BLOCK
    following = data + -(-length // BLOCK) * BLOCK
    if following <= position:  # sizes are never negative, so every step moves forward
        raise CorruptVideoError(archive, f"damaged tar header at byte {position} (the walk does not advance)")
    return _Header(kind, _name(block, pending), length, data, following)


def _take_extension(header: _Header, record: bytes, pending: dict[str, str], archive: str, position: int) -> None:
    if header.kind == _GNU_LONG_NAME:
        pending["path"] = record.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
    elif header.kind == _PAX_HEADER:
        pending.update(_pax_records(record, archive, position))


def _ends_inside(header: _Header, end: int) -> str:
    return (f"it ends at byte {end} inside member {header.name!r} (whose data ends at byte "
            f"{header.data + header.length})")


def _without_end_marker(end: int) -> str:
    return f"it ends at byte {end} without the end-of-archive marker (cut off after its last whole member?)"


def read_tar_table(reader: RangeReader, *, payload_wanted: Callable[[TarMember], bool] | None = None) -> TarTable:
    """The regular files of the tar archive ``reader`` reads, in archive order, from its headers.

    An archive cut off, or damaged after its first member, gives the members before the damage,
    and says why in :attr:`TarTable.problem`.

    Args:
        reader: The archive's bytes.
        payload_wanted: Members whose data is also wanted (e.g. small label files): read in the
            same request as the header that follows them.

    Raises:
        NotAVideoError: A compressed archive (gzip, bzip2, xz, zstd: members cannot be read by
            byte range), or not a tar archive at all.
        CorruptVideoError: A damaged first header (bad checksum, size or record), or an archive
            that ends inside its first member.
    """
    size = reader.size()
    members: list[TarMember] = []
    payloads: dict[int, bytes] = {}
    position = 0
    pending: dict[str, str] = {}  # from extension headers, for the next member
    problem: str | None = None
    cut: str | None = None
    if size < BLOCK:
        raise NotAVideoError(reader.name, f"is not a tar archive ({size} bytes, less than one 512-byte header)")
    block = _read(reader, 0, BLOCK, size)
    if any(block) and not _is_header(block):
        raise NotAVideoError(reader.name, _not_a_tar(block))
    while True:
        if position + BLOCK > size:
            problem = _without_end_marker(size)
            break
        if not any(block):
            break  # the end-of-archive marker (two zero blocks; one is enough to stop)
        try:
            header = _header(block, position, pending, reader.name)
        except CorruptVideoError as error:
            problem = error.problem
            break
        if header.data + header.length > size:
            problem, cut = _ends_inside(header, size), header.name if header.is_regular else None
            break
        if header.is_extension:
            record, block = _read_with_next(reader, header.data, header.length, header.following, size)
            try:
                _take_extension(header, record, pending, reader.name, position)
            except CorruptVideoError as error:
                problem = error.problem
                break
            position = header.following
            continue
        pending = {}
        if header.is_regular:
            member = TarMember(header.name, header.data, header.length)
            members.append(member)
            if payload_wanted is not None and payload_wanted(member):
                payloads[member.offset], block = _read_with_next(reader, header.data, header.length,
                                                                 header.following, size)
                position = header.following
                continue
        position = header.following
        block = _read(reader, position, BLOCK, size) if position + BLOCK <= size else b""
    if problem is not None and not members:
        raise CorruptVideoError(reader.name, problem)
    return TarTable(members, payloads, problem, cut)


class TarStream:
    """The regular members of a tar archive and their data, read in one sequential pass from the
    start of ``file`` (a stream: nothing is sought), with the checks of :func:`read_tar_table`.

    Iterating gives ``(member, data)``; an archive cut off, or damaged after its first member,
    ends the iteration early, and :attr:`problem` (and :attr:`cut_member`) say why afterwards.

    Raises (while iterating):
        NotAVideoError: A compressed archive or not a tar archive at all.
        CorruptVideoError: A damaged first header, or an archive that ends inside its first member.
    """

    def __init__(self, file: BinaryIO, name: str):
        self.file, self.name = file, name
        self.problem: str | None = None
        self.cut_member: str | None = None

    def __iter__(self) -> Iterator[tuple[TarMember, bytes]]:
        position, found = 0, 0
        pending: dict[str, str] = {}
        while self.problem is None:
            block = _read_exactly(self.file, BLOCK)
            if position == 0 and (len(block) < BLOCK or (any(block) and not _is_header(block))):
                raise NotAVideoError(self.name, _not_a_tar(block) if len(block) == BLOCK else
                                     f"is not a tar archive ({len(block)} bytes, less than one 512-byte header)")
            if len(block) < BLOCK:
                self.problem = _without_end_marker(position + len(block))
                break
            if not any(block):
                return  # the end-of-archive marker
            try:
                header = _header(block, position, pending, self.name)
            except CorruptVideoError as error:
                self.problem = error.problem
                break
            data = _read_exactly(self.file, header.length)
            if len(data) < header.length:
                self.problem = _ends_inside(header, header.data + len(data))
                self.cut_member = header.name if header.is_regular else None
                break
            _read_exactly(self.file, header.following - header.data - header.length)  # the padding
            position = header.following
            if header.is_extension:
                try:
                    _take_extension(header, data, pending, self.name, header.data - BLOCK)
                except CorruptVideoError as error:
                    self.problem = error.problem
                continue
            pending = {}
            if header.is_regular:
                found += 1
                yield TarMember(header.name, header.data, header.length), data
        if not found and self.problem is not None:
            raise CorruptVideoError(self.name, self.problem)


_STREAM_CHUNK = 16 << 20  # a member's data is read in pieces, so a size field cannot make one huge allocation


def _read_exactly(file: BinaryIO, length: int) -> bytes:
    """``length`` bytes of ``file``, fewer only at its end."""
    pieces, left = [], length
    while left > 0:
        piece = file.read(min(left, _STREAM_CHUNK))
        if not piece:
            break
        pieces.append(piece)
        left -= len(piece)
    return b"".join(pieces)


def _read(reader: RangeReader, offset: int, length: int, size: int) -> bytes:
    return reader.read_ranges([(offset, min(length, size - offset))])[0]


def _read_with_next(reader: RangeReader, data: int, length: int, following: int, size: int) -> tuple[bytes, bytes]:
    """A member's data and the header block after it, in one request."""
    end = min(following + BLOCK, size)
    chunk = reader.read_ranges([(data, end - data)])[0]
    return chunk[:length], chunk[following - data:]


def _is_header(block: bytes) -> bool:
    """Whether ``block`` is a tar header: its checksum (unsigned or signed sum) matches."""
    if len(block) < BLOCK:
        return False
    try:
        stored = int(block[148:156].split(b"\0", 1)[0].strip() or b"-1", 8)
    except ValueError:
        return False
    unsigned = sum(block[:148]) + 8 * 32 + sum(block[156:BLOCK])
    signed = unsigned - 256 * sum(1 for byte in block[:148] + block[156:BLOCK] if byte > 127)
    return stored in (unsigned, signed)


def _not_a_tar(block: bytes) -> str:
    for magic, kind in ((_GZIP, "gzip"), (_BZIP2, "bzip2"), (_XZ, "xz"), (_ZSTD, "zstd")):
        if block.startswith(magic):
            return (f"is a {kind}-compressed archive, whose members cannot be read by byte range; store shards "
                    "as uncompressed .tar (videos do not compress further)")
    return "is not a tar archive (no valid tar header at its start)"


def _number(field: bytes, name: str, position: int) -> int:
    """A size field: octal digits, or GNU base-256 (first byte 0x80) for sizes of 8 GiB and more.

    Raises:
        CorruptVideoError: A negative size (a minus sign, or base-256 starting 0xff), anything
            but octal digits, or more than :data:`LARGEST_MEMBER` bytes.
    """
    if field[:1] and field[0] & 0x80:
        if field[0] != 0x80:
            raise CorruptVideoError(name, f"damaged tar header at byte {position} (a negative base-256 size)")
        value = int.from_bytes(field[1:], "big")
    else:
        text = field.split(b"\0", 1)[0].strip()
        if not _OCTAL.fullmatch(text):
            raise CorruptVideoError(name, f"damaged tar header at byte {position} (size {text!r})")
        value = int(text or b"0", 8)
    return _checked_size(value, name, position)


def _checked_size(value: int, name: str, position: int) -> int:
    if value > LARGEST_MEMBER:
        raise CorruptVideoError(name, f"damaged tar header at byte {position} (a size of {value} bytes)")
    return value


def _name(block: bytes, pending: dict[str, str]) -> str:
    if "path" in pending:
        return pending["path"]
    name = block[0:100].split(b"\0", 1)[0]
    if block[257:263] == b"ustar\0":  # POSIX: a prefix holds the leading folders of long paths
        prefix = block[345:500].split(b"\0", 1)[0]
        if prefix:
            name = prefix + b"/" + name
    return name.decode("utf-8", "surrogateescape")


def _pax_records(record: bytes, name: str, position: int) -> dict[str, str]:
    """``path`` and ``size`` of a PAX extended header (``"<length> <key>=<value>\\n"`` records)."""
    found: dict[str, str] = {}
    at = 0
    while at < len(record) and record[at:at + 1] not in (b"\0", b""):
        space = record.find(b" ", at)
        digits = record[at:space] if space > at else b""
        length = int(digits) if digits.isdigit() else 0  # bytes.isdigit: ASCII digits only
        if space < 0 or length <= space - at or at + length > len(record):
            raise CorruptVideoError(name, f"damaged PAX header at byte {position}")
        key, _, value = record[space + 1:at + length - 1].partition(b"=")
        if key in (b"path", b"size"):
            found[key.decode()] = value.decode("utf-8", "surrogateescape")
        at += length
    return found


def _pax_size(text: str, name: str, position: int) -> int:
    """A PAX ``size`` record: decimal digits only (no sign, no spaces, no underscores)."""
    if not _DECIMAL.fullmatch(text):
        raise CorruptVideoError(name, f"damaged PAX header at byte {position} (size {text!r})")
    return _checked_size(int(text), name, position)


# -- the wds2idx member index ------------------------------------------------------------------
def parse_member_index(text: str, name: str) -> list[TarMember]:
    """The members a ``wds2idx`` index lists (version 1.2 with names, or 1.1 without), in order.

    Names of a version 1.1 index are made from the sample's position and the extension
    (``"<sample number>.<ext>"``): it stores no names.

    Raises:
        ValueError: Not such an index (the message names ``name``, the index file, and the line).
    """
    lines = [line for line in text.splitlines() if line.strip()]
    head = lines[0].split() if lines else []
    if len(head) != 2 or head[0] not in ("v1.1", "v1.2") or not _DECIMAL.fullmatch(head[1]):
        raise ValueError(f"{name}: not a wds2idx member index (its first line must be 'v1.2 <samples>' "
                         f"or 'v1.1 <samples>', not {lines[0][:60] if lines else ''!r})")
    width = 4 if head[0] == "v1.2" else 3
    members = []
    for number, line in enumerate(lines[1:], start=2):
        fields = line.split(" ")
        if len(fields) % width:
            raise ValueError(f"{name}, line {number}: {len(fields)} fields, not groups of {width} "
                             f"({'ext offset size name' if width == 4 else 'ext offset size'})")
        for at in range(0, len(fields), width):
            ext, offset, size = fields[at:at + 3]
            if not (_DECIMAL.fullmatch(offset) and _DECIMAL.fullmatch(size)):
                raise ValueError(f"{name}, line {number}: offset {offset!r} and size {size!r} must be integers")
            member_name = fields[at + 3] if width == 4 else f"{number - 2:09d}.{ext}"
            members.append(TarMember(member_name, int(offset), int(size)))
    if len(lines) - 1 != int(head[1]):
        raise ValueError(f"{name}: the header says {head[1]} samples, the index lists {len(lines) - 1}")
    return members


def format_member_index(samples: list[list[tuple[str, TarMember]]]) -> str:
    """A ``wds2idx`` version 1.2 index of ``samples`` (each a list of ``(ext, member)``); member
    names must hold no spaces (the format separates fields by spaces)."""
    lines = [f"{INDEX_VERSION} {len(samples)}"]
    for sample in samples:
        lines.append(" ".join(f"{ext} {member.offset} {member.size} {member.name}" for ext, member in sample))
    return "\n".join(lines) + "\n"


def index_layout_problem(members: list[TarMember], size: int) -> str | None:
    """Why the members a member index lists cannot lie in a ``size``-byte archive as listed (None
    when they can): off the 512-byte grid, outside it, out of archive order, or without room for
    a header between one member's data and the next."""
    room = BLOCK  # the first member's header
    for member in members:
        if member.offset % BLOCK or member.size > LARGEST_MEMBER or member.offset + member.size > size:
            return (f"member {member.name!r} at byte {member.offset} (+{member.size}) lies outside the "
                    f"{size}-byte archive or off its 512-byte grid")
        if member.offset < room:
            return (f"member {member.name!r} at byte {member.offset} overlaps the member before it (or its header): "
                    "the index is not in archive order")
        room = member.offset + -(-member.size // BLOCK) * BLOCK + BLOCK
    return None


def header_problem(member: TarMember, block: bytes, *, named: bool = True) -> str | None:
    """Why ``block``, the 512 bytes before ``member``'s data, is not the header an index entry
    promises (None when it is): no tar header, not a file, another size, or (``named``) another
    name. A name the header holds only in part (a long or non-ASCII one, from an extension
    header before it) is compared by the part the header holds."""
    where = f"before byte {member.offset}"
    if not _is_header(block) or block[156:157] not in _REGULAR:
        return f"no tar header of a file {member.name!r} ({member.size} bytes) {where}"
    try:
        stored = _number(block[124:136], "", member.offset - BLOCK)
    except CorruptVideoError:
        stored = -1
    if stored != member.size and not (member.size >= 8 << 30 and stored == 0):  # PAX holds sizes from 8 GiB
        return f"the tar header {where} is of a {stored}-byte member, not of {member.name!r} ({member.size} bytes)"
    held = _name(block, {})
    if named and not _names_agree(held, member.name):
        return f"the tar header {where} is of member {held!r}, not {member.name!r}"
    return None


def _names_agree(held: str, name: str) -> bool:
    """Whether a header holding ``held`` may be the header of ``name``: the same name, or, for a
    name in an extension header, its first 100 bytes with ``?`` for non-ASCII characters (PAX)."""
    if held == name:
        return True
    if name.isascii() and len(name) <= 100:
        return False
    start = name[:len(held)]
    return len(start) == len(held) and all(h == n or (h == "?" and not n.isascii()) for h, n in zip(held, start))
