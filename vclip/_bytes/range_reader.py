"""Random access to one video's bytes by ``(offset, length)`` ranges: the contract of every source
that is not a local file (bytes, file objects, URLs). :func:`vclip.errors.check_lengths` checks
that a read got what it asked."""

from __future__ import annotations

__all__ = ["RangeReader"]


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

