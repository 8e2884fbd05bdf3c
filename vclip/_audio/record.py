"""AudioIndex, what one demux pass tells about an audio stream packet by packet (the record the
audio of clips is cut from; :func:`vclip.index_audio` builds it), and its stored form: named NumPy
arrays plus one JSON string of stream facts, for the disk entries of the index caches."""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from .._index.record import stored_facts

__all__ = [
    "AUDIO_INDEX_FORMAT_VERSION", "AUDIO_ARRAY_DTYPES", "AudioIndex", "audio_index_record", "audio_index_from_record",
]

AUDIO_INDEX_FORMAT_VERSION = 1
"""Version of :func:`audio_index_record`'s layout; a stored record of another version is rebuilt."""

AUDIO_ARRAY_DTYPES = {
    "packet_pts": np.int64, "packet_pos": np.int64, "packet_size": np.int64, "packet_start": np.int64,
    "packet_samples": np.int64, "packet_skip_start": np.int64, "packet_skip_end": np.int64,
    "packet_is_discard": np.bool_,
}
"""The per-packet arrays of an audio index and their dtypes; every other field but the path is a fact."""
_FACT_TYPES = {  # name: accepted JSON types
    "stream_index": (int,), "codec": (str,), "sample_rate": (int,), "channels": (int,), "layout": (str,),
    "time_base": (str,), "packets_addressable": (bool,), "exact_grid": (bool,), "origin_seconds": (str,),
}


@dataclass(frozen=True, eq=False)
class AudioIndex:
    """Per-packet timing and stream facts of one audio stream, from a single demux pass.

    Samples sit on the stream's sample grid: grid sample ``n`` is shown at
    ``origin_seconds + n / sample_rate`` (the time line of the video's frames). Packets are
    numbered in file order; a packet decodes to ``packet_samples`` samples, the first on grid
    sample ``packet_start``, of which the first ``packet_skip_start`` and last ``packet_skip_end``
    are trimmed (Opus pre-skip, padding) and none is shown when ``packet_is_discard`` (audio an
    edit list cuts away).

    Attributes:
        path: The file.
        stream_index: Index of the audio stream inside the container (-1: the file has none).
        codec: FFmpeg codec name (``"aac"``, ``"opus"``, ``"pcm_s16le"``...).
        sample_rate: Samples per second of the decoded audio.
        channels: Channels of the decoded audio.
        layout: FFmpeg's channel layout name (``"stereo"``, ``"5.1"``, ``"2 channels"``...).
        time_base: Seconds per pts tick.
        extradata: Codec configuration (AudioSpecificConfig, OpusHead...), to decode packets alone.
        packets_addressable: Packet bytes can be read straight from the file at ``packet_pos``.
        exact_grid: Packets are placed on the grid to the sample (always where the time base is
            as fine as a sample; in Matroska/WebM for PCM, Opus and fixed-size frames); False:
            placed by their timestamps, as precise as the time base (FLAC, Vorbis in Matroska),
            their decoded samples then laid end to end.
        origin_seconds: When grid sample 0 is shown.
        packet_pts, packet_pos, packet_size: Per packet (int64).
        packet_start, packet_samples, packet_skip_start, packet_skip_end: Per packet, in samples (int64).
        packet_is_discard: Per packet (bool).
    """

    path: str
    stream_index: int
    codec: str
    sample_rate: int
    channels: int
    layout: str
    time_base: Fraction
    extradata: bytes = field(repr=False)
    packets_addressable: bool
    exact_grid: bool
    origin_seconds: Fraction
    packet_pts: np.ndarray = field(repr=False)
    packet_pos: np.ndarray = field(repr=False)
    packet_size: np.ndarray = field(repr=False)
    packet_start: np.ndarray = field(repr=False)
    packet_samples: np.ndarray = field(repr=False)
    packet_skip_start: np.ndarray = field(repr=False)
    packet_skip_end: np.ndarray = field(repr=False)
    packet_is_discard: np.ndarray = field(repr=False)

    def __repr__(self) -> str:
        return (f"AudioIndex(path={self.path!r}, stream_index={self.stream_index}, codec={self.codec!r}, "
                f"{self.sample_rate} Hz, {self.channels} channels, packets={self.num_packets}, "
                f"start_seconds={self.start_seconds:.6f}, duration_seconds={self.duration_seconds:.6f})")

    @property
    def present(self) -> bool:
        """Whether the file has this audio stream (an index of a file without audio has none)."""
        return self.stream_index >= 0

    @property
    def num_packets(self) -> int:
        return int(self.packet_pts.size)

    @functools.cached_property
    def grid_in_order(self) -> bool:
        """Whether packets follow one another on the grid in file order (as they do but for odd files)."""
        ends = self.packet_start + self.packet_samples
        return bool(np.all(np.diff(self.packet_start) >= 0) and np.all(np.diff(ends) >= 0))

    @property
    def shown_ranges(self) -> tuple[np.ndarray, np.ndarray]:
        """Per packet, the grid samples ``[first, end)`` that are shown (empty for discarded packets)."""
        first = self.packet_start + self.packet_skip_start
        end = np.maximum(first, self.packet_start + self.packet_samples - self.packet_skip_end)
        return first, np.where(self.packet_is_discard, first, end)

    @property
    def num_samples(self) -> int:
        """Samples from the first shown to the last shown (gaps included)."""
        first, end = self.shown_ranges
        shown = end > first
        return int(end[shown].max() - first[shown].min()) if shown.any() else 0

    @property
    def start_seconds(self) -> float:
        """When the first shown sample is shown (0.0 without audio)."""
        first, end = self.shown_ranges
        shown = end > first
        return float(self.origin_seconds + Fraction(int(first[shown].min()), self.sample_rate)) if shown.any() else 0.0

    @property
    def end_seconds(self) -> float:
        """When the last shown sample ends."""
        return self.start_seconds + self.num_samples / self.sample_rate

    @property
    def duration_seconds(self) -> float:
        return self.num_samples / self.sample_rate

    def to_dict(self) -> dict:
        """Stream facts as plain Python types (for JSON)."""
        return {
            "stream_index": self.stream_index, "codec": self.codec, "sample_rate": self.sample_rate,
            "channels": self.channels, "layout": self.layout, "time_base": str(self.time_base),
            "num_packets": self.num_packets, "start_seconds": self.start_seconds,
            "duration_seconds": self.duration_seconds, "exact_grid": self.exact_grid,
        }


def audio_index_record(index: AudioIndex) -> dict[str, np.ndarray]:
    """``index`` as named NumPy arrays (for ``np.savez``): a ``format_version``, the stream facts as
    one JSON string ``facts``, ``extradata`` as uint8 and the per-packet arrays under their names."""
    facts = {name: getattr(index, name) for name in _FACT_TYPES}
    facts["time_base"], facts["origin_seconds"] = str(index.time_base), str(index.origin_seconds)
    return {
        "format_version": np.asarray(AUDIO_INDEX_FORMAT_VERSION, dtype=np.int64),
        "facts": np.asarray(json.dumps(facts, sort_keys=True)),
        "extradata": np.frombuffer(index.extradata, dtype=np.uint8),
        **{name: getattr(index, name) for name in AUDIO_ARRAY_DTYPES},
    }


def audio_index_from_record(record, path: str | os.PathLike) -> AudioIndex:
    """The :class:`AudioIndex` of ``path`` from a record made by :func:`audio_index_record`.

    Raises:
        ValueError: Another format version, missing or ill-typed fields, arrays that disagree.
    """
    try:
        facts = stored_facts(record, AUDIO_INDEX_FORMAT_VERSION, _FACT_TYPES)
        facts["time_base"], facts["origin_seconds"] = Fraction(facts["time_base"]), Fraction(facts["origin_seconds"])
        arrays: dict[str, Any] = {}
        for name, dtype in AUDIO_ARRAY_DTYPES.items():
            array = np.asarray(record[name])
            if array.dtype != dtype or array.ndim != 1:
                raise ValueError(f"{name} has dtype {array.dtype} and {array.ndim} dimensions")
            arrays[name] = array
        extradata = np.asarray(record["extradata"])
        if extradata.dtype != np.uint8 or extradata.ndim != 1:
            raise ValueError("extradata is not bytes")
    except (KeyError, TypeError, ZeroDivisionError, OverflowError) as error:
        raise ValueError(f"not an audio index record ({type(error).__name__}: {error})") from None
    index = AudioIndex(path=os.fspath(path), extradata=extradata.tobytes(), **facts, **arrays)
    _check(index)
    return index


def _check(index: AudioIndex) -> None:
    """Raise ValueError when the arrays and facts of ``index`` disagree (a damaged stored record)."""
    sizes = {getattr(index, name).size for name in AUDIO_ARRAY_DTYPES}
    if len(sizes) != 1:
        raise ValueError(f"per-packet arrays have different lengths {sorted(sizes)}")
    if index.present and (index.sample_rate <= 0 or index.channels <= 0 or index.time_base <= 0 or not index.codec):
        raise ValueError("impossible stream facts")
    if index.num_packets and (index.packet_samples.min() < 0 or index.packet_size.min() < 0
                              or index.packet_skip_start.min() < 0 or index.packet_skip_end.min() < 0):
        raise ValueError("negative packet sizes or sample counts")
