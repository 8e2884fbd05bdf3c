"""index_audio: the :class:`~vclip.AudioIndex` (:mod:`vclip._audio.record`) of an audio
stream, built by its demux pass (:mod:`vclip._audio.demux`) or served from the index caches beside
the video indexes (same rules, same folder, an entry of its own: a video index's stored form, its
disk entries and catalogs are unchanged by it)."""

from __future__ import annotations

import os
from fractions import Fraction
from typing import Any

import numpy as np

from .._bytes.shards import resolve_video_name
from .._bytes.sources import VideoInput
from .._index.lookup import IndexKind, cached_index
from ..errors import check_optional_integer
from .demux import demux_audio_stream
from .record import AUDIO_ARRAY_DTYPES, AudioIndex, audio_index_from_record, audio_index_record

__all__ = ["index_audio"]


def _absent(path: str) -> AudioIndex:
    """The index of a file without an audio stream (what the caches keep for it)."""
    empty: dict[str, Any] = {name: np.zeros(0, dtype=dtype) for name, dtype in AUDIO_ARRAY_DTYPES.items()}
    return AudioIndex(path=path, stream_index=-1, codec="", sample_rate=1, channels=0, layout="",
                      time_base=Fraction(1), extradata=b"", packets_addressable=False, exact_grid=True,
                      origin_seconds=Fraction(0), **empty)


def _build(path: str, stream_index: int | None, file_size: int) -> AudioIndex:
    fields = demux_audio_stream(path, stream_index)
    return _absent(path) if fields is None else AudioIndex(path=path, **fields)


def _nbytes(index: AudioIndex) -> int:
    return sum(getattr(index, name).nbytes for name in AUDIO_ARRAY_DTYPES) + len(index.extradata) + 512


AUDIO_INDEX = IndexKind("audio", _build, audio_index_record, audio_index_from_record, _nbytes)
"""Audio indexes, as the index caches keep them."""


def index_audio(
    path: VideoInput,
    *,
    stream_index: int | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> AudioIndex | None:
    """Index one audio stream with a single demux pass (no decoding); None when the file has no
    audio stream (and ``stream_index`` is None).

    Cached like video indexes (:func:`vclip.index_video`: in memory and, with ``cache_dir``, on
    disk, served only for the same content), under entries of their own.

    Args:
        path: The video file, a URL, bytes or a binary file object.
        stream_index: Container stream index of the audio stream; default: the first audio stream.
        cache_dir: Folder for an on-disk cache of indexes (created if missing).

    Raises:
        VideoError: The file cannot be read (as :func:`vclip.index_video`).
        NoAudioError: ``stream_index`` is not an audio stream of it.
        ArgumentError: ``stream_index`` is not an integer >= 0.
    """
    check_optional_integer("stream_index", stream_index, minimum=0, none_means="(the first audio stream)")
    index = cached_index(resolve_video_name(path), stream_index, cache_dir, AUDIO_INDEX)
    return index if index.present else None
