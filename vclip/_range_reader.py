"""Random access to one video's bytes by ``(offset, length)`` ranges: the contract of every source
that is not a local file (bytes, file objects, URLs), and the check that a read got what it asked."""

from __future__ import annotations

from .errors import CorruptVideoError

__all__ = ["RangeReader", "check_lengths"]


class RangeReader:
    """Random access to one video's bytes. ``name`` is what errors and the index call it."""

    name: str

    def size(self) -> int:
        """Length in bytes."""
        raise NotImplementedError

    def read_ranges(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        """The bytes of each ``(offset, length)`` range, in order.

        Raises:
            VideoError: The source cannot be read, or ends inside a range.
        """
        raise NotImplementedError


def check_lengths(name: str, ranges: list[tuple[int, int]], chunks: list[bytes]) -> list[bytes]:
    """``chunks`` if each is as long as its range.

    Raises:
        CorruptVideoError: The source ends inside a range.
    """
    for (offset, length), data in zip(ranges, chunks):
        if len(data) != length:
            raise CorruptVideoError(name, f"ends at byte {offset + len(data)}, {offset + length} are needed "
                                          "(it was changed after indexing?)")
    return chunks
