"""Checks of public arguments, with one wording for every error, and byte counts as people write
them (``parse_bytes("8GiB")``, ``format_bytes(3_185_049_600)``).

Every message echoes the value and names what is allowed: ``stride (0) must be an integer >= 1``.
Errors are :class:`ArgumentError`, which is both a ``ValueError`` and a ``TypeError`` so that
callers catching either keep working whichever of the two a check would once have raised.
"""

from __future__ import annotations

import math
import numbers
import operator
import re
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, TypeVar

import numpy as np

from .errors import ArgumentError, fail

__all__ = [
    "check_choice",
    "check_count_or_auto",
    "check_integer",
    "check_number",
    "check_optional_integer",
    "check_size",
    "fail",
    "format_bytes",
    "parse_bytes",
]

T = TypeVar("T")


def _integer_or_none(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)  # int, numpy integers, anything with __index__
    except TypeError:
        return None


def is_integer(value: Any) -> bool:
    """Whether ``value`` is an integer (an ``int``, a NumPy integer, anything with ``__index__``), not a bool."""
    return _integer_or_none(value) is not None


def check_integer(name: str, value: Any, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """``value`` as an ``int`` (NumPy integers accepted, bools and floats not), within the bounds."""
    number = _integer_or_none(value)
    if number is None or (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
        raise fail(name, value, _integer_words(minimum, maximum))
    return number


def check_optional_integer(name: str, value: Any, *, minimum: int | None = None, none_means: str = "") -> int | None:
    """Like :func:`check_integer`, but ``None`` passes through (``none_means`` says what it means)."""
    if value is None:
        return None
    try:
        return check_integer(name, value, minimum=minimum)
    except ArgumentError:
        suffix = f", or None {none_means}".rstrip() if none_means else ", or None"
        raise fail(name, value, _integer_words(minimum, None) + suffix) from None


def check_count_or_auto(name: str, value: Any) -> int | str:
    """``"auto"`` as it is, or ``value`` as an integer >= 0 (a count the caller may leave to vclip)."""
    if isinstance(value, str) and value == "auto":
        return value
    try:
        return check_integer(name, value, minimum=0)
    except ArgumentError:
        raise fail(name, value, '"auto" or an integer >= 0') from None


def check_number(
    name: str,
    value: Any,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    minimum_inclusive: bool = True,
    maximum_inclusive: bool = True,
) -> float:
    """``value`` as a finite ``float`` (ints and NumPy numbers accepted, bools not), within the bounds."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(float(value))
    if ok:
        number = float(value)
        if minimum is not None:
            ok = number >= minimum if minimum_inclusive else number > minimum
        if ok and maximum is not None:
            ok = number <= maximum if maximum_inclusive else number < maximum
    if not ok:
        raise fail(name, value, _number_words(minimum, maximum, minimum_inclusive, maximum_inclusive))
    return float(value)


def check_choice(name: str, value: Any, allowed: Sequence[T]) -> T:
    """``value`` if it is one of ``allowed``."""
    try:
        if value in allowed:
            return value
    except TypeError:  # unhashable or incomparable values are simply not allowed
        pass
    raise fail(name, value, "one of " + ", ".join(map(repr, allowed)))


def check_size(name: str, value: Any) -> tuple[int, int]:
    """``(height, width)`` from a positive integer (a square) or a pair of positive integers."""
    expected = "a positive integer or a (height, width) pair of positive integers"
    single = _integer_or_none(value)
    if single is not None:
        pair: tuple[Any, ...] = (single, single)
    elif isinstance(value, (tuple, list)) or type(value).__name__ == "ndarray":
        pair = tuple(value)
    else:
        raise fail(name, value, expected)
    numbers_ = [_integer_or_none(v) for v in pair]
    if len(numbers_) != 2 or any(n is None or n < 1 for n in numbers_):
        raise fail(name, value, expected)
    return int(numbers_[0]), int(numbers_[1])  # type: ignore[arg-type]


def _integer_words(minimum: int | None, maximum: int | None) -> str:
    if minimum is not None and maximum is not None:
        return f"an integer in [{minimum}, {maximum}]"
    if minimum is not None:
        return f"an integer >= {minimum}"
    if maximum is not None:
        return f"an integer <= {maximum}"
    return "an integer"


def _number_words(minimum, maximum, minimum_inclusive: bool, maximum_inclusive: bool) -> str:
    if minimum is not None and maximum is not None:
        left, right = "[" if minimum_inclusive else "(", "]" if maximum_inclusive else ")"
        return f"a number in {left}{minimum:g}, {maximum:g}{right}"
    if minimum is not None:
        return f"a number {'>=' if minimum_inclusive else '>'} {minimum:g}"
    if maximum is not None:
        return f"a number {'<=' if maximum_inclusive else '<'} {maximum:g}"
    return "a finite number"


def is_finite_number(value: Any) -> bool:
    """Whether ``value`` is a finite real number (ints and NumPy numbers, not bools)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(float(value))


def check_range(name: str, value: Any, *, low: float | None = None, high: float | None = None,
           positive: bool = False) -> tuple[float, float]:
    """A ``(min, max)`` pair of finite numbers, ``min <= max``, inside ``[low, high]`` (above 0 when ``positive``)."""
    where = (f" in [{low:g}, {high:g}]" if low is not None and high is not None else
             f" >= {low:g}" if low is not None else " > 0" if positive else "")
    expected = f"a (min, max) pair of numbers{where} with min <= max"
    try:
        pair = tuple(value)
    except TypeError:
        raise fail(name, value, expected) from None
    if len(pair) != 2 or not all(is_finite_number(v) for v in pair):
        raise fail(name, value, expected)
    first, second = float(pair[0]), float(pair[1])
    if (first > second or (low is not None and first < low) or (high is not None and second > high)
            or (positive and first <= 0)):
        raise fail(name, value, expected)
    return first, second


def check_flag(name: str, value: Any) -> bool:
    """``value`` as a ``bool`` (NumPy bools accepted, anything else refused)."""
    if not isinstance(value, (bool, np.bool_)):
        raise fail(name, value, "True or False")
    return bool(value)


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
