"""Brace patterns, as shard lists are written: ``shard-{000000..000127}.tar`` names 128 shards,
``{train,val}-{0..3}.tar`` eight; a range keeps the zero padding of its bounds (the width of the
wider one when either starts with ``0``), ranges and lists nest and combine left to right."""

from __future__ import annotations

import re

__all__ = ["expand_braces", "has_braces"]

_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)(?:\.\.(\d+))?$")
_LIMIT = 10_000_000  # names one pattern may expand to: a typo such as {0..999999999} is refused


def has_braces(text: str) -> bool:
    """Whether ``text`` holds a brace pattern (``{a,b}`` or ``{0..9}``)."""
    return bool(re.search(r"\{[^{}]*(,|\.\.)[^{}]*\}", text))


def expand_braces(pattern: str) -> list[str]:
    """Every name ``pattern`` stands for, in order (a text without braces is itself).

    Raises:
        ValueError: Unbalanced braces, or more than ten million names (both name ``pattern``).
    """
    return _expand(pattern, pattern)


def _expand(text: str, pattern: str) -> list[str]:
    start = text.find("{")
    if start < 0:
        if "}" in text:
            raise ValueError(f"pattern ({pattern!r}) has a '}}' without its '{{'")
        return [text]
    depth, end = 0, -1
    for position in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[position], 0)
        if depth == 0:
            end = position
            break
    if end < 0:
        raise ValueError(f"pattern ({pattern!r}) has a '{{' without its '}}'")
    head, body, tail = text[:start], text[start + 1:end], text[end + 1:]
    choices = _choices(body, pattern)
    rest = _expand(tail, pattern)
    if len(choices) * len(rest) > _LIMIT:
        raise ValueError(f"pattern ({pattern!r}) names more than {_LIMIT:,} files")
    return [head + choice + after for choice in choices for after in rest]


def _choices(body: str, pattern: str) -> list[str]:
    """What one ``{...}`` stands for: a numeric range, or a comma list (each part expanded)."""
    match = _RANGE.match(body)
    if match:
        first, last, step = match.group(1), match.group(2), int(match.group(3) or 1)
        if step == 0:
            raise ValueError(f"pattern ({pattern!r}) has a range step of 0")
        if abs(int(last) - int(first)) // step + 1 > _LIMIT:
            raise ValueError(f"pattern ({pattern!r}) names more than {_LIMIT:,} files")
        padded = any(bound.lstrip("-").startswith("0") and len(bound.lstrip("-")) > 1 for bound in (first, last))
        width = max(len(first), len(last)) if padded else 0
        direction = 1 if int(last) >= int(first) else -1
        return [f"{number:0{width}d}" for number in range(int(first), int(last) + direction, direction * step)]
    parts, depth, current = [], 0, ""
    for character in body:
        if character == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        depth += {"{": 1, "}": -1}.get(character, 0)
        current += character
    parts.append(current)
    if len(parts) == 1:  # "{x}" is no pattern: kept as written
        return ["{" + name + "}" for name in _expand(body, pattern)]
    return [name for part in parts for name in _expand(part, pattern)]
