"""Byte counts as people write them: ``parse_bytes("8GiB")`` and ``format_bytes(3_185_049_600)``.

Used by the memory planner, the loader's ``memory_budget``, the index cache's limit and the command
line; below all of them, so that none imports the others for it."""

from __future__ import annotations

import math
import re
from fractions import Fraction

from ._validation import check_integer, check_number, fail, is_integer

__all__ = ["parse_bytes", "format_bytes"]

_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}


def parse_bytes(value: int | float | str, *, name: str = "memory size") -> int:
    """Bytes from ``8589934592``, ``"8GiB"``, ``"1.5 GB"``, ``"512MiB"`` (decimal and binary units).

    Args:
        name: What the value is, for the error message (e.g. ``"memory_budget"``).

    Raises:
        ArgumentError: (a ValueError) Unknown unit, negative or malformed value.
    """
    expected = "a number of bytes >= 0 or a number with a unit: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB (e.g. '8GiB')"
    if isinstance(value, bool):
        raise fail(name, value, expected)
    if isinstance(value, str):
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", value)
        if not match or match.group(2).lower() not in _UNITS:
            raise fail(name, value, expected)
        number, unit = Fraction(match.group(1)), match.group(2).lower()
    else:
        try:
            number = Fraction(check_integer(name, value)) if is_integer(value) else Fraction(
                str(check_number(name, value)))
        except ValueError:
            raise fail(name, value, expected) from None
        unit = ""
    if number < 0:
        raise fail(name, value, expected)
    return math.floor(number * _UNITS[unit])


def format_bytes(count: int) -> str:
    """``"3,185,049,600 bytes (3.19 GB, 2.97 GiB)"``."""
    return f"{count:,} bytes ({count / 1e9:.2f} GB, {count / 2**30:.2f} GiB)"
