"""GPU memory budgeting: the formula, the largest batch or clip length that fits, byte parsing.

    bytes = width x height x channels x bytes_per_element x batch_size x sequence_length x (1 + augmentation_factor)
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction

__all__ = [
    "MemoryEstimate",
    "estimate_memory",
    "largest_batch_size",
    "largest_sequence_length",
    "parse_bytes",
    "format_bytes",
    "BYTES_PER_ELEMENT",
]

BYTES_PER_ELEMENT = {"uint8": 1, "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}
_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}


def parse_bytes(value: int | float | str) -> int:
    """Bytes from ``8589934592``, ``"8GiB"``, ``"1.5 GB"``, ``"512MiB"`` (decimal and binary units).

    Raises:
        ValueError: Unknown unit, negative or malformed value.
    """
    if isinstance(value, bool):
        raise ValueError(f"memory size ({value!r}) must be a number of bytes or a string like '8GiB'")
    if isinstance(value, (int, float)):
        number, unit = Fraction(str(value)), ""
    else:
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", str(value))
        if not match or match.group(2).lower() not in _UNITS:
            raise ValueError(
                f"memory size ({value!r}) must be bytes or a number with a unit: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB"
            )
        number, unit = Fraction(match.group(1)), match.group(2).lower()
    if number < 0:
        raise ValueError(f"memory size ({value!r}) must be >= 0")
    return math.floor(number * _UNITS[unit])


def format_bytes(count: int) -> str:
    """``"3,185,049,600 bytes (3.19 GB, 2.97 GiB)"``."""
    return f"{count:,} bytes ({count / 1e9:.2f} GB, {count / 2**30:.2f} GiB)"


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes of one batch by the formula, with the inputs that gave it."""

    width: int
    height: int
    channels: int
    bytes_per_element: int
    batch_size: int
    sequence_length: int
    augmentation_factor: float
    bytes: int

    @property
    def gb(self) -> float:
        return self.bytes / 1e9

    @property
    def gib(self) -> float:
        return self.bytes / 2**30

    def __str__(self) -> str:
        return format_bytes(self.bytes)


def _positive(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} ({value!r}) must be an integer >= 1")
    return value


def _element_bytes(dtype: str | int) -> int:
    if isinstance(dtype, int) and not isinstance(dtype, bool):
        return _positive("bytes_per_element", dtype)
    if dtype not in BYTES_PER_ELEMENT:
        raise ValueError(f"dtype ({dtype!r}) must be one of {', '.join(BYTES_PER_ELEMENT)} or a byte count")
    return BYTES_PER_ELEMENT[dtype]


def estimate_memory(
    *,
    width: int,
    height: int,
    batch_size: int,
    sequence_length: int,
    channels: int = 3,
    dtype: str | int = "uint8",
    augmentation_factor: float = 0.0,
) -> MemoryEstimate:
    """Bytes by the formula ``W x H x C x bytes x batch x sequence_length x (1 + augmentation_factor)``.

    ``augmentation_factor`` is taken as written in decimal (0.1 means one tenth exactly); the result
    is rounded up to whole bytes. 1920x1080 RGB uint8, batch 32, 16 frames: 3,185,049,600 bytes.

    Args:
        dtype: ``"uint8"``, ``"float16"``, ``"bfloat16"``, ``"float32"``, ``"float64"`` or bytes per element.

    Raises:
        ValueError: A size or count below 1, a negative augmentation factor, an unknown dtype.
    """
    for name, value in (("width", width), ("height", height), ("channels", channels),
                        ("batch_size", batch_size), ("sequence_length", sequence_length)):
        _positive(name, value)
    element = _element_bytes(dtype)
    if isinstance(augmentation_factor, bool) or not isinstance(augmentation_factor, (int, float)) or augmentation_factor < 0:
        raise ValueError(f"augmentation_factor ({augmentation_factor!r}) must be a number >= 0")
    exact = width * height * channels * element * batch_size * sequence_length * (1 + Fraction(str(augmentation_factor)))
    return MemoryEstimate(width, height, channels, element, batch_size, sequence_length,
                          float(augmentation_factor), math.ceil(exact))


def _exact_bytes(**inputs) -> Fraction:
    estimate = estimate_memory(**inputs)
    return estimate.width * estimate.height * estimate.channels * estimate.bytes_per_element * estimate.batch_size * (
        estimate.sequence_length * (1 + Fraction(str(estimate.augmentation_factor)))
    )


def largest_batch_size(budget: int | str, *, width: int, height: int, sequence_length: int, **options) -> int:
    """The largest batch size whose formula bytes fit ``budget`` (0 when not even one clip fits).

    Options as :func:`estimate_memory` (``channels``, ``dtype``, ``augmentation_factor``).
    """
    per_clip = _exact_bytes(width=width, height=height, batch_size=1, sequence_length=sequence_length, **options)
    return math.floor(parse_bytes(budget) / per_clip)


def largest_sequence_length(budget: int | str, *, width: int, height: int, batch_size: int, **options) -> int:
    """The largest clip length whose formula bytes fit ``budget`` (0 when not even one frame fits)."""
    per_frame = _exact_bytes(width=width, height=height, batch_size=batch_size, sequence_length=1, **options)
    return math.floor(parse_bytes(budget) / per_frame)
