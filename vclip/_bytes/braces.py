"""Brace patterns, as shard lists are written: ``shard-{000000..000127}.tar`` names 128 shards,
``{train,val}-{0..3}.tar`` eight; a range keeps the zero padding of its bounds (the width of the
wider one when either starts with ``0``), ranges and lists nest and combine left to right."""

from __future__ import annotations

import re

__all__ = ["expand_braces", "has_braces"]

_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)(?:\.\.(\d+))?$")
_LIMIT = 1_000_000  # names one pattern may expand to (a million 1 GB shards are a petabyte): a typo such as
# {0..99999999} is refused, counted before any name is made


def has_braces(text: str) -> bool:
    """Whether ``text`` holds a brace pattern (``{a,b}`` or ``{0..9}``)."""
    return bool(re.search(r"\{[^{}]*(,|\.\.)[^{}]*\}", text))


def expand_braces(pattern: str) -> list[str]:
    """Every name ``pattern`` stands for, in order (a text without braces is itself).

    Raises:
        ValueError: Unbalanced or too many braces, or more than a million names (naming ``pattern``).
    """
    try:
        count = _count(pattern, pattern)
        if count > _LIMIT:
            raise ValueError(f"pattern ({pattern!r}) names {count:,} files, more than {_LIMIT:,}")
        return _expand(pattern, pattern)
    except RecursionError:
        raise ValueError(f"pattern ({pattern[:60]!r}...) has too many braces") from None


def _count(text: str, pattern: str) -> int:
    """How many names ``text`` stands for, without making them."""
    split = _first_group(text, pattern)
    if split is None:
        return 1
    _, body, tail = split
    match = _RANGE.match(body)
    if match:
        first, last, step = int(match.group(1)), int(match.group(2)), int(match.group(3) or 1)
        if step == 0:
            raise ValueError(f"pattern ({pattern!r}) has a range step of 0")
        choices = abs(last - first) // step + 1
    else:
        parts = _parts(body)
        choices = _count(body, pattern) if len(parts) == 1 else sum(_count(part, pattern) for part in parts)
    return choices * _count(tail, pattern)


def _first_group(text: str, pattern: str) -> tuple[str, str, str] | None:
    """``(head, body, tail)`` around the first ``{...}`` of ``text`` (None: no brace).

    Raises:
        ValueError: Unbalanced braces.
    """
    start = text.find("{")
    if start < 0:
        if "}" in text:
            raise ValueError(f"pattern ({pattern!r}) has a '}}' without its '{{'")
        return None
    depth = 0
    for position in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[position], 0)
        if depth == 0:
            return text[:start], text[start + 1:position], text[position + 1:]
    raise ValueError(f"pattern ({pattern!r}) has a '{{' without its '}}'")


def _parts(body: str) -> list[str]:
    """The comma-separated parts of a ``{...}`` body (commas inside nested braces kept)."""
    parts, depth, current = [], 0, ""
    for character in body:
        if character == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        depth += {"{": 1, "}": -1}.get(character, 0)
        current += character
    parts.append(current)
    return parts


def _expand(text: str, pattern: str) -> list[str]:
    split = _first_group(text, pattern)
    if split is None:
        return [text]
    head, body, tail = split
    choices = _choices(body, pattern)
    rest = _expand(tail, pattern)
    return [head + choice + after for choice in choices for after in rest]


def _choices(body: str, pattern: str) -> list[str]:
    """What one ``{...}`` stands for: a numeric range, or a comma list (each part expanded)."""
    match = _RANGE.match(body)
    if match:
        first, last, step = match.group(1), match.group(2), int(match.group(3) or 1)
        padded = any(bound.lstrip("-").startswith("0") and len(bound.lstrip("-")) > 1 for bound in (first, last))
        width = max(len(first), len(last)) if padded else 0
        direction = 1 if int(last) >= int(first) else -1
        return [f"{number:0{width}d}" for number in range(int(first), int(last) + direction, direction * step)]
    parts = _parts(body)
    if len(parts) == 1:  # "{x}" is no pattern: kept as written
        return ["{" + name + "}" for name in _expand(body, pattern)]
    return [name for part in parts for name in _expand(part, pattern)]
