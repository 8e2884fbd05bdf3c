"""The audio that goes with each clip, cut by the clip's own presentation times.

Ask for it with an :class:`AudioSpec` (``VideoDecoder.get_clips(..., audio=AudioSpec())``,
``ClipLoader(..., audio=AudioSpec())``, ``vclip sample --audio-sample-rate``): each clip then comes with
the samples covering its span (see :mod:`vclip._audio.spans`: from its first frame's pts to the end
of its last frame, the frames between its positions included; in seconds, its target times),
resampled by FFmpeg to the requested rate and channels. Sample ``j`` of a clip's audio is the
audio shown at ``start + j / sample_rate``: the first is the one at the clip's first frame's pts,
to within half a sample, whether the audio stream starts before the video or after it (edit
lists, start times), at any frame rate and however the file interleaves its packets. Only the
audio packets of the span are read (an :class:`~vclip.AudioIndex` records where they are, once per
file), so a clip of a video at a URL reads just their byte ranges.

Time the audio stream does not cover (it starts after the clip, or ends before it) is silence; a
video without an audio stream gives silence with ``has_audio=False``, or :class:`~vclip.NoAudioError`
with ``AudioSpec(missing="error")``. Stereo becomes mono as FFmpeg mixes it (``ffmpeg -ac 1``:
each channel times 0.707, so a sound on both channels comes out louder than on either).

"The audio shown at" a time is the stream as FFmpeg presents it: where the container's clock is
coarser than a sample (Matroska and WebM count milliseconds) the samples are counted from the
stream's start, which is exact for PCM, Opus and fixed-size frames (AAC, MP3, AC-3); FLAC and
Vorbis there are placed by their millisecond timestamps (``AudioIndex.exact_grid`` False). The
samples themselves are FFmpeg's decode of the whole stream, within 1e-3 for lossy codecs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ._audio.decode import decode_audio, span_samples
from ._audio.index import index_audio
from ._audio.record import AudioIndex
from ._audio.spans import ClipSpans
from .errors import ArgumentError, NoAudioError, check_choice, check_integer, check_optional_integer, fail

__all__ = ["AudioSpec", "AudioClips", "AudioIndex", "index_audio"]

AudioDtype = Literal["float32", "int16"]
AudioSpan = Literal["clip", "frame"]
MissingAudio = Literal["silence", "error"]

_GROUP_GAP_SECONDS = 1.0  # positions' spans closer than this are decoded in one run


@dataclass(frozen=True)
class AudioSpec:
    """Which audio comes with each clip, and in what form.

    Attributes:
        sample_rate: Samples per second of the output (default 16000), any rate FFmpeg's resampler takes.
        channels: 1 (mono, default) or 2 (stereo); other layouts are mixed by FFmpeg's resampler.
        dtype: ``"float32"`` (default, in [-1, 1]; FFmpeg's stereo-to-mono mix can exceed it) or
            ``"int16"`` (FFmpeg's conversion: rounded, clipped).
        span: ``"clip"`` (default): one stretch of audio per clip, from the start of its first
            position to the end of its last, ``[clips, channels, samples]`` (keyframe and indexed
            clips: from the earliest of their frames to the end of the latest, which for keyframes
            is most of the video); ``"frame"``: each position's own span (its frame's display
            interval, or its target time's), ``[clips, T, channels, samples]``, shorter spans
            padded at the end.
        stream_index: Container index of the audio stream; None (default): the first audio stream.
        missing: What a video without (that) audio stream gives: ``"silence"`` (default: zeros,
            flagged by ``has_audio``) or ``"error"`` (:class:`~vclip.NoAudioError`).
    """

    sample_rate: int = 16000
    channels: int = 1
    dtype: AudioDtype = "float32"
    span: AudioSpan = "clip"
    stream_index: int | None = None
    missing: MissingAudio = "silence"

    def __post_init__(self):
        object.__setattr__(self, "sample_rate", check_integer("sample_rate", self.sample_rate, minimum=1000,
                                                             maximum=768000))
        if check_integer("channels", self.channels, minimum=1) not in (1, 2):
            raise fail("channels", self.channels, "1 (mono) or 2 (stereo)")
        object.__setattr__(self, "channels", int(self.channels))
        check_choice("dtype", self.dtype, ("float32", "int16"))
        check_choice("span", self.span, ("clip", "frame"))
        check_choice("missing", self.missing, ("silence", "error"))
        object.__setattr__(self, "stream_index", check_optional_integer(
            "stream_index", self.stream_index, minimum=0, none_means="(the first audio stream)"))

    @property
    def itemsize(self) -> int:
        """Bytes per sample of one channel."""
        return 4 if self.dtype == "float32" else 2


def audio_samples(spec: AudioSpec, clip_seconds: float, position_seconds: float, positions: int) -> int:
    """Samples of one channel that the audio of one clip takes in a batch: ``S`` for
    ``span="clip"``, ``T * S`` for ``span="frame"``."""
    if spec.span == "clip":
        return span_samples(clip_seconds, spec.sample_rate)
    return positions * span_samples(position_seconds, spec.sample_rate)


@dataclass(frozen=True, eq=False)
class AudioClips:
    """The audio of some clips of one video.

    Attributes:
        data: float32 or int16 ``[clips, channels, S]`` (``span="clip"``) or ``[clips, T, channels, S]``
            (``span="frame"``), on the CPU; ``S`` is the longest span's sample count and shorter
            spans are padded with zeros at the end.
        lengths: int64 ``[clips]`` (or ``[clips, T]``): the samples of each span; ``data[..., n:]``
            past them is padding (0 for positions the end policy padded).
        start_seconds: float64, shaped like ``lengths``: when each span's first sample is shown.
        sample_rate: Samples per second.
        has_audio: False when the video has no (such) audio stream and ``data`` is silence.
        stream_index: The audio stream the samples came from (None without one).
    """

    data: np.ndarray
    lengths: np.ndarray
    start_seconds: np.ndarray
    sample_rate: int
    has_audio: bool
    stream_index: int | None = None

    def __post_init__(self):
        if self.lengths.shape != self.data.shape[:self.lengths.ndim] or self.start_seconds.shape != self.lengths.shape:
            raise ArgumentError(f"audio of {list(self.data.shape)} does not fit lengths {list(self.lengths.shape)} "
                             f"and start times {list(self.start_seconds.shape)}")

    def __repr__(self) -> str:
        return (f"AudioClips(data=[{', '.join(map(str, self.data.shape))}] {self.data.dtype}, "
                f"sample_rate={self.sample_rate}, has_audio={self.has_audio}, stream_index={self.stream_index})")

    def torch(self):
        """``data`` as a torch tensor (no copy)."""
        import torch

        return torch.from_numpy(self.data)


def empty_audio(spec: AudioSpec, clips: int, positions: int, samples: int) -> np.ndarray:
    """Zeros for the audio of ``clips`` clips, ``samples`` per span, in ``spec``'s shape and dtype."""
    shape = (clips, spec.channels, samples) if spec.span == "clip" else (clips, positions, spec.channels, samples)
    return np.zeros(shape, dtype=spec.dtype)


def _as_dtype(samples: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "float32":
        return samples
    return np.clip(np.rint(samples * 32768.0), -32768, 32767).astype(np.int16)


def audio_index_for(path: str, spec: AudioSpec, cache_dir: str | os.PathLike | None = None) -> AudioIndex | None:
    """The index of ``spec``'s audio stream of ``path``; None when the video has none (or the stream
    asked for is not an audio stream) and ``spec.missing`` is ``"silence"``.

    Raises:
        NoAudioError: No such audio stream and ``spec.missing == "error"``.
        VideoError: The file cannot be read.
    """
    try:
        index = index_audio(path, stream_index=spec.stream_index, cache_dir=cache_dir)
    except NoAudioError:
        if spec.missing == "error":
            raise
        return None
    if index is None and spec.missing == "error":
        raise NoAudioError(path, "has no audio stream; AudioSpec(missing='silence') gives silence instead")
    return index


def clips_audio(
    index: AudioIndex | None, spans: list[ClipSpans], spec: AudioSpec, *, positions: int,
    output: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Decode the audio of clips of one video into ``output`` (or a new array, see :class:`AudioClips`).

    Args:
        index: The audio stream's index (:func:`audio_index_for`); None: silence.
        spans: Each clip's spans (:func:`vclip._audio.spans.clip_spans`).
        spec: What to decode.
        positions: Positions (frames) per clip.
        output: Where the clips go (``[len(spans), ...]`` as :func:`empty_audio` makes it, zeroed
            here); default: a new array as long as the longest span.

    Returns:
        ``(data, lengths, start_seconds)``; spans longer than ``output`` holds are cut short.

    Raises:
        VideoError: The audio cannot be read or decoded (naming the file).
    """
    rate = spec.sample_rate
    if spec.span == "clip":
        starts = np.array([span.start for span in spans], dtype=np.float64)
        lengths = np.array([span_samples(span.end - span.start, rate) for span in spans], dtype=np.int64)
    else:
        starts = np.array([span.starts for span in spans], dtype=np.float64).reshape(len(spans), positions)
        ends = np.array([span.ends for span in spans], dtype=np.float64).reshape(len(spans), positions)
        lengths = np.array([[span_samples(e - s, rate) for s, e in zip(*row)] for row in zip(starts, ends)],
                           dtype=np.int64).reshape(len(spans), positions)
    if output is None:
        output = empty_audio(spec, len(spans), positions, int(lengths.max(initial=0)))
    else:
        output[...] = 0
    lengths = np.minimum(lengths, output.shape[-1])
    if index is None:
        return output, lengths, starts
    for number, span in enumerate(spans):
        if spec.span == "frame":
            _frame_audio(index, span, lengths[number], spec, output[number])
        elif lengths[number]:
            decoded = decode_audio(index, span.start, span.end, sample_rate=rate, channels=spec.channels)
            output[number, :, :lengths[number]] = _as_dtype(decoded[:, :lengths[number]], spec.dtype)
    return output, lengths, starts


def _frame_audio(index: AudioIndex, span: ClipSpans, lengths: np.ndarray, spec: AudioSpec, output: np.ndarray) -> None:
    """Each position's audio into ``output`` ``[T, channels, S]``: positions whose spans lie close
    together are decoded in one run and cut from it (each at its own start, to the nearest sample)."""
    rate = spec.sample_rate
    order = [k for k in np.argsort(span.starts, kind="stable").tolist() if lengths[k]]
    runs: list[list[int]] = []
    for k in order:
        if runs and span.starts[k] - max(span.ends[j] for j in runs[-1]) < _GROUP_GAP_SECONDS:
            runs[-1].append(k)
        else:
            runs.append([k])
    for run in runs:
        begin = float(min(span.starts[k] for k in run))
        finish = max(float(span.starts[k]) + lengths[k] / rate for k in run) + 1 / rate
        decoded = _as_dtype(decode_audio(index, begin, finish, sample_rate=rate, channels=spec.channels), spec.dtype)
        for k in run:
            at = round((float(span.starts[k]) - begin) * rate)
            part = decoded[:, at:at + lengths[k]]
            output[k, :, :part.shape[1]] = part
