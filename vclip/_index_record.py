"""The stored form of a video index: its fields as named NumPy arrays plus one JSON string of
stream facts (for ``np.savez`` files of the disk cache, Parquet catalog rows...), the parsing of
stored facts back into field values, and the consistency check every stored index must pass
before it is trusted."""

from __future__ import annotations

import functools
import json
from fractions import Fraction
from typing import Any

import numpy as np

__all__ = ["INDEX_FORMAT_VERSION", "ARRAY_DTYPES", "COLOR_MATRICES", "LARGEST_SAMPLE_ASPECT_RATIO",
           "parse_stored_facts", "check_facts", "check_index", "index_record", "record_fields"]

def parse_stored_facts(stored: dict) -> dict:
    """``stored`` (the fields of an index as :meth:`~vclip.index.VideoIndex.to_arrays`, :func:`index_record` or a
    catalog row store them) with its stream facts as :class:`~vclip.index.VideoIndex` field values: ``time_base``
    and ``sample_aspect_ratio`` as Fractions, ``extradata`` as bytes, ``header_frame_count`` as an int
    or None. Everything else is kept as it is; absent facts stay absent (their defaults apply).

    Raises:
        ValueError, ZeroDivisionError, TypeError: A value that is not a number of its kind.
    """
    fields = dict(stored)
    for name in ("time_base", "sample_aspect_ratio"):
        if name in fields:
            fields[name] = _fraction(fields[name])
    if "extradata" in fields:
        fields["extradata"] = bytes(fields["extradata"] or b"")
    if fields.get("header_frame_count") is not None:
        fields["header_frame_count"] = int(fields["header_frame_count"])
    return fields


@functools.lru_cache(maxsize=1024)
def _fraction(value: str | Fraction) -> Fraction:
    """``Fraction(value)``, parsed once per distinct text (a catalog repeats a few time bases)."""
    return Fraction(value)


COLOR_MATRICES = ("bt601", "bt709", "bt2020", "smpte240m")
"""The YUV to RGB matrices an index may name (the demux pass maps every other stream to BT.601)."""

LARGEST_SAMPLE_ASPECT_RATIO = Fraction(16)
"""Pixels wider than this over their height, or higher than this over their width, are a damaged
header (real anamorphic video stays within 4:1): stretched to square pixels, a 2147483647:1 pixel
asked NumPy for 36 TiB."""

INDEX_FORMAT_VERSION = 3
"""Version of :func:`index_record`'s layout; a stored record of another version is rebuilt."""

ARRAY_DTYPES = {
    "pts": np.int64, "frame_packet": np.int64, "packet_pts": np.int64, "packet_pos": np.int64,
    "packet_size": np.int64, "packet_is_keyframe": np.bool_, "packet_is_reference": np.bool_,
    "packet_frame": np.int64,
}
"""The per-frame and per-packet arrays of an index and their dtypes; every other field but the path is a fact."""
_FACT_TYPES = {  # name: accepted JSON types
    "stream_index": (int,), "codec": (str,), "width": (int,), "height": (int,), "pixel_format": (str,),
    "bit_depth": (int,), "color_matrix": (str,), "color_range": (str,), "time_base": (str,),
    "average_fps": (float, int), "header_frame_count": (int, type(None)), "packets_addressable": (bool,),
    "last_frame_duration": (int,), "rotation": (int,), "mirrored": (bool,), "sample_aspect_ratio": (str,),
}


def check_index(index: Any) -> None:
    """Check that the arrays and facts of ``index`` agree with each other (cheap, O(frames)).

    A built index always passes; an index read back from storage that fails was damaged or
    tampered with and must be rebuilt.

    Raises:
        ValueError: What is inconsistent.
    """
    n, m = index.pts.size, index.packet_pts.size
    for name, dtype in ARRAY_DTYPES.items():
        array = getattr(index, name)
        if not isinstance(array, np.ndarray) or array.ndim != 1:
            raise ValueError(f"{name} is not a one-dimensional array")
        if array.dtype != dtype:
            raise ValueError(f"{name} has dtype {array.dtype}")
        if array.size != (n if name in ("pts", "frame_packet") else m):
            raise ValueError(f"{name} has {array.size} values")
    if n == 0 or m < n:
        raise ValueError(f"{n} frames from {m} packets")
    if np.any(np.diff(index.pts) <= 0):
        raise ValueError("frame timestamps are not strictly increasing")
    if index.frame_packet.min() < 0 or index.frame_packet.max() >= m:
        raise ValueError("frame_packet points outside the packets")
    if not np.array_equal(index.packet_frame[index.frame_packet], np.arange(n)):
        raise ValueError("packet_frame is not the inverse of frame_packet")
    if int(np.count_nonzero(index.packet_frame >= 0)) != n or index.packet_frame.min() < -1:
        raise ValueError("packet_frame numbers packets that are not frames")
    if not np.array_equal(index.packet_pts[index.frame_packet], index.pts):
        raise ValueError("frame timestamps disagree with their packets'")
    if index.packet_size.min() < 0 or index.packet_pos.min() < -1:
        raise ValueError("negative packet sizes or positions")
    check_facts({name: getattr(index, name) for name in _FACT_TYPES})


def check_facts(facts: Any) -> None:
    """Check that the stream facts of an index (a mapping of :class:`~vclip.index.VideoIndex` field
    values, ``time_base`` and ``sample_aspect_ratio`` as Fractions) are possible.

    Raises:
        ValueError: What is impossible.
    """
    width, height, bit_depth = facts["width"], facts["height"], facts["bit_depth"]
    if width <= 0 or height <= 0 or not 1 <= bit_depth <= 16:
        raise ValueError(f"impossible picture {width}x{height}, {bit_depth}-bit")
    if facts["color_matrix"] not in COLOR_MATRICES or facts["color_range"] not in ("limited", "full"):
        raise ValueError(f"unknown colour {facts['color_matrix']}/{facts['color_range']}")
    if (facts["time_base"] <= 0 or facts["stream_index"] < 0 or not facts["codec"]
            or facts["last_frame_duration"] < 0):
        raise ValueError("impossible stream facts")
    ratio = facts["sample_aspect_ratio"]
    if facts["rotation"] not in (0, 90, 180, 270) or not 1 / LARGEST_SAMPLE_ASPECT_RATIO <= ratio <= (
            LARGEST_SAMPLE_ASPECT_RATIO):
        raise ValueError(f"impossible rotation {facts['rotation']} or sample aspect ratio {ratio}")


def index_record(index: Any) -> dict[str, np.ndarray]:
    """``index`` as named NumPy arrays (for ``np.savez``, Parquet...): a ``format_version``, the
    stream facts as one JSON string ``facts``, ``extradata`` as uint8, and the per-frame and
    per-packet arrays under their field names. :func:`record_fields` reads it back."""
    facts = {name: getattr(index, name) for name in _FACT_TYPES if name not in ("time_base", "sample_aspect_ratio")}
    facts["time_base"] = str(index.time_base)
    facts["sample_aspect_ratio"] = str(index.sample_aspect_ratio)
    record = {
        "format_version": np.asarray(INDEX_FORMAT_VERSION, dtype=np.int64),
        "facts": np.asarray(json.dumps(facts, sort_keys=True)),
        "extradata": np.frombuffer(index.extradata, dtype=np.uint8),
    }
    record.update({name: getattr(index, name) for name in ARRAY_DTYPES})
    return record


def record_fields(record) -> dict[str, Any]:
    """The index fields (all but ``path``) of a record made by :func:`index_record`.

    ``record`` is any mapping of those names to arrays (a dict, an open ``np.load`` file).

    Raises:
        ValueError: Another format version, missing or ill-typed fields.
    """
    try:
        version = int(np.asarray(record["format_version"]))
        if version != INDEX_FORMAT_VERSION:
            raise ValueError(f"format version {version}, expected {INDEX_FORMAT_VERSION}")
        facts = json.loads(str(np.asarray(record["facts"])))
        if not isinstance(facts, dict) or set(facts) != set(_FACT_TYPES):
            raise ValueError("stream facts have unexpected names")
        for name, types in _FACT_TYPES.items():
            value = facts[name]
            if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
                raise ValueError(f"stream fact {name} has type {type(value).__name__}")
        facts = parse_stored_facts(facts)
        arrays: dict[str, Any] = {}  # keyword arguments of VideoIndex
        for name, dtype in ARRAY_DTYPES.items():
            array = np.asarray(record[name])
            if array.dtype.kind != np.dtype(dtype).kind or array.ndim != 1:
                raise ValueError(f"{name} has dtype {array.dtype} and {array.ndim} dimensions")
            arrays[name] = array.astype(dtype, copy=False)
        extradata = np.asarray(record["extradata"])
        if extradata.dtype != np.uint8 or extradata.ndim != 1:
            raise ValueError("extradata is not bytes")
    except (KeyError, TypeError, ZeroDivisionError, OverflowError) as error:
        raise ValueError(f"not an index record ({type(error).__name__}: {error})") from None
    return {"extradata": extradata.tobytes(), **facts, **arrays}


