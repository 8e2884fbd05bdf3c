"""Keyframes of a video, to summarize it: the codec's own keyframes, or the first frame of every shot.

``method="codec"`` decodes only the keyframe packets (each keyframe is its own decode segment, no
P or B picture is decoded). ``method="scene"`` finds the shot boundaries (:func:`find_shot_boundaries`)
and returns frame 0 and the first frame of every later shot.

How shot boundaries are found
-----------------------------
Every frame is decoded downscaled to ``analysis_width`` (64) pixels across: on the GPU (NVDEC, the
resize in the conversion kernel) when the decoder runs there, else by FFmpeg with the kernel's
NumPy twin resizing, so both devices see nearly the same pixels. On the GPU the video is cut into
chunks at keyframes that several NVDEC sessions decode at once (one session decodes a 720p stream
at about 1,150 frames/s on the H200, a seventh of its engines); with ``decode_processes``, the
threads of worker processes decode them, on either device. On the same device,
with the same array code (NumPy or CuPy), each frame gets two features: its colour histogram (4 x 4
x 4 RGB bins) and its layout (mean colour of 4 x 4-pixel blocks, 16 x 9 at 16:9). Then, for every
frame t and every gap g up to 40 frames, two distances to frame t - g:

- ``H``: half the L1 distance of the histograms. A camera move over one place hardly changes it;
  a new shot does.
- ``B``: how much the typical block changed (the median over blocks), so a caption, a logo or one
  moving object does not count; it tells apart two shots of the same place.

Only these tables ([gap, frame], a few hundred bytes per frame) come back to the host, where the
decision is made, the same for both devices:

1. **Flashes** (a few overexposed frames, a brief occlusion): a run of up to 4 frames that differs
   from both sides while the frames either side of it are alike is left out of everything below.
2. **The usual change** at each gap is the median distance of the 12 frame pairs just before and
   just after a place (the mean of the two sides, or only the side that does not reach across a
   boundary already found): fast motion raises it, so a boundary has to stand out from the motion
   around it, not from zero.
3. **Cuts**: frame b starts a shot when the distance from frame b - 1 is at least
   ``scene_threshold`` times the usual change at gap 1 (plus a noise floor) in either feature,
   above a minimum, makes at least half of the change over 8 more frames each side at once, and
   that wider change is at least 60% of it (the picture does not come back).
4. **Fades**: a run of black frames (85% of pixels darker than luma 24, and at most 30% as bright
   as both sides) between two shots; the fade starts where the frames start to dim and ends at the
   first frame with 80% of the brightness of the frames after it.
5. **Dissolves** (and other gradual transitions up to ~35 frames): multi-scale, frames ``c - h - j``
   against ``c + h + j`` for half-widths h from 2 to 17 and j = 0..3, each against the usual
   change at that gap; where that stands out (``scene_threshold``), the middle frames must be
   blends of the two sides (the block distances add up: d(a, m) + d(m, z) <= 1.3 d(a, z), moving
   steadily from a to z), which fast pans, zooms and objects crossing the frame are not. The
   boundary is the first frame 75% of the way to the new shot.

The thresholds were set on synthetic labelled videos (:func:`vclip.synthetic.make_scene_video`)
and checked on held-out ones and on real footage; ``benchmarks/scenes.py`` measures precision and
recall per kind of transition against PySceneDetect.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from ._ahead import SharedThreadPool, submitted_ahead
from ._engine.processes import THREADS_PER_PROCESS
from ._images import IMAGE_FORMATS, columns_for, contact_sheet, to_numpy, write_image
from ._validation import (
    check_choice,
    check_integer,
    check_number,
    check_optional_integer,
)
from .decoder import VideoDecoder
from .index import VideoIndex
from .sampling import check_scaling_factor, scaled_size

__all__ = [
    "KEYFRAME_METHODS", "THUMBNAIL_WIDTH", "Keyframes", "ProgressCallback", "ShotBoundary", "extract_keyframes",
    "find_shot_boundaries",
]

KeyframeMethod = Literal["codec", "scene"]
KEYFRAME_METHODS = ("codec", "scene")

_CHUNK_FRAMES = 1024  # frames analysed per decode call (chunks start at keyframes) and per float block
_MIN_CHUNK_FRAMES = 64  # the shortest chunk cut for parallel decoding
_GPU_SESSIONS = 8
"""NVDEC sessions of this process decoding chunks at once (without decode processes)."""
_session_pools: dict[int, SharedThreadPool] = {}
"""Threads submitting chunks, per count: shared by every video analysed in the process (kept alive,
so their NVDEC decoders are reused; ``vclip keyframes --workers`` shares them too)."""
_session_pools_lock = threading.Lock()
THUMBNAIL_WIDTH = 320
"""Default width of contact-sheet thumbnails: a 1080p frame at 1/6, five across a 1920-pixel sheet."""

ProgressCallback = Callable[[int, int], None]
"""``on_progress(frames_done, frames_total)``: called as a video's frames are read."""


@dataclass(frozen=True, eq=False)
class Keyframes:
    """Frames that summarize one video, with where they are.

    Attributes:
        path: The video file.
        method: ``"codec"`` (the stream's keyframes) or ``"scene"`` (first frame of every shot).
        frame_indices: Frame numbers in presentation order, ascending (int64 ``[N]``).
        pts_seconds: Presentation time of each (float64 ``[N]``).
        frames: RGB uint8 ``[N, H, W, 3]``: NumPy on the CPU, CuPy on the GPU.
        device: ``"cpu"`` or ``"cuda:N"``.
        fell_back_to_cpu: A GPU request was decoded on the CPU.
        packets_decoded: Compressed pictures the decoder decoded to find and deliver these frames.
    """

    path: str
    method: KeyframeMethod
    frame_indices: np.ndarray
    pts_seconds: np.ndarray
    frames: Any  # NumPy or CuPy (untyped)
    device: str
    fell_back_to_cpu: bool
    packets_decoded: int

    def __len__(self) -> int:
        return int(self.frame_indices.size)

    def __repr__(self) -> str:
        return (
            f"Keyframes(path={self.path!r}, method={self.method!r}, frame_indices={self.frame_indices.tolist()}, "
            f"frames={type(self.frames).__module__.split('.')[0]}[{', '.join(map(str, self.frames.shape))}], "
            f"device={self.device!r}, packets_decoded={self.packets_decoded})"
        )

    def save(
        self,
        folder: str | os.PathLike,
        *,
        image_format: Literal["jpg", "png"] = "jpg",
        thumbnail_width: int = THUMBNAIL_WIDTH,
    ) -> list[dict]:
        """Write each frame as ``frame_NNNNNN.<format>`` and a ``contact_sheet.<format>`` into ``folder``
        (no contact sheet when there are no frames).

        The contact sheet shows every frame as a thumbnail ``thumbnail_width`` pixels wide (frames
        narrower than that keep their size), captioned with its frame number and time, as many
        across as fit about 1920 pixels.

        Returns:
            One manifest record per frame: ``file``, ``frame_index``, ``pts_seconds``, ``method``,
            ``image`` (the path written).

        Raises:
            ValueError: ``image_format`` is not ``"jpg"`` or ``"png"``; ``thumbnail_width`` below 16.
        """
        check_choice("image_format", image_format, IMAGE_FORMATS)
        thumbnail_width = check_integer("thumbnail_width", thumbnail_width, minimum=16)
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        frames = to_numpy(self.frames)
        records = []
        for frame, index, seconds in zip(frames, self.frame_indices.tolist(), self.pts_seconds.tolist()):
            image = write_image(folder / f"frame_{index:06d}.{image_format}", frame)
            records.append({"file": self.path, "frame_index": index, "pts_seconds": seconds,
                            "method": self.method, "image": image})
        if not records:
            return records
        columns = columns_for(min(thumbnail_width, frames.shape[2]), len(frames))
        labels = [f"{i}: {t:.2f}s" for i, t in zip(self.frame_indices.tolist(), self.pts_seconds.tolist())]
        sheet = contact_sheet([list(frames[i:i + columns]) for i in range(0, len(frames), columns)],
                              tile_width=thumbnail_width,
                              tile_labels=[labels[i:i + columns] for i in range(0, len(labels), columns)])
        write_image(folder / f"contact_sheet.{image_format}", sheet)
        return records


def extract_keyframes(
    path: str | os.PathLike,
    *,
    method: KeyframeMethod = "codec",
    max_frames: int | None = None,
    device: str = "cpu",
    stream_index: int | None = None,
    scaling_factor: float = 1.0,
    scene_threshold: float = 2.0,
    analysis_width: int = 64,
    cache_dir: str | os.PathLike | None = None,
    on_progress: ProgressCallback | None = None,
    decode_processes: int = 0,
) -> Keyframes:
    """The keyframes of one video stream, decoded.

    Args:
        path: The video file.
        method: ``"codec"``: the stream's keyframes (I-frames), decoding only their packets.
            ``"scene"``: frame 0 and the first frame of every later shot: the frame after a
            cut, after a fade or dissolve (see :func:`find_shot_boundaries`).
        max_frames: At most this many, evenly spread over the ones found (all when None).
        device: ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"auto"`` (see :class:`~vclip.VideoDecoder`).
        stream_index: Container index of the video stream; default: the first video stream.
        scaling_factor: The returned frames come out at ``round(W*f) x round(H*f)``, ``0 < f <= 1``.
        scene_threshold: How many times the usual change around it (at the same frame gap) a
            shot boundary's change must be. Larger finds fewer, clearer boundaries.
        analysis_width: Width in pixels the scene method compares frames at.
        cache_dir: Folder for an on-disk cache of the video's index.
        on_progress: Called as ``on_progress(frames_done, frames_total)`` while the video is
            read: for ``"scene"`` after each chunk of frames analysed (``frames_total`` is the
            stream's frame count), for ``"codec"`` before and after the keyframes are decoded.
        decode_processes: As :func:`find_shot_boundaries`.

    Raises:
        ValueError: Unknown ``method``; ``max_frames`` below 1; ``scaling_factor`` outside (0, 1];
            ``scene_threshold`` not above 1; ``analysis_width`` below 1.
        VideoNotFoundError, NotAVideoError, CorruptVideoError, UnsupportedCodecError: The file.
    """
    check_choice("method", method, KEYFRAME_METHODS)
    max_frames = check_optional_integer("max_frames", max_frames, minimum=1, none_means="for all")
    scene_threshold = check_number("scene_threshold", scene_threshold, minimum=1, minimum_inclusive=False)
    scaling_factor = check_scaling_factor(scaling_factor)
    analysis_width = check_integer("analysis_width", analysis_width, minimum=1)
    decoder = VideoDecoder(path, stream_index=stream_index, device=device, cache_dir=cache_dir,
                           decode_processes=decode_processes)
    index = decoder.index
    if method == "codec":
        found = index.keyframe_indices
    else:
        if on_progress is not None:
            on_progress(0, index.num_frames)
        signals = _scene_signals(decoder, analysis_width, on_progress, _sessions(decoder, decode_processes))
        boundaries = _shot_boundaries(signals, scene_threshold)
        found = np.unique(np.asarray([0] + [b.frame for b in boundaries], dtype=np.int64))
    chosen = _evenly_spread(found, max_frames)
    if method == "codec" and on_progress is not None:
        on_progress(0, chosen.size)
    if chosen.size == 0:  # a stream that flags no keyframe at all
        width, height = scaled_size(index.width, index.height, scaling_factor)
        empty = np.empty((0, height, width, 3), np.uint8)
        return Keyframes(
            index.path, method, chosen, index.pts_seconds[chosen], empty, decoder.device, decoder.fell_back_to_cpu, 0
        )
    frames = decoder.get_frames(chosen, scaling_factor=scaling_factor)
    if method == "codec" and on_progress is not None:
        on_progress(chosen.size, chosen.size)
    return Keyframes(
        path=index.path,
        method=method,
        frame_indices=frames.frame_indices,
        pts_seconds=frames.pts_seconds,
        frames=frames.data,
        device=frames.device,
        fell_back_to_cpu=frames.fell_back_to_cpu,
        packets_decoded=decoder.stats.packets_sent,
    )


def find_shot_boundaries(
    path: str | os.PathLike,
    *,
    device: str = "cpu",
    stream_index: int | None = None,
    scene_threshold: float = 2.0,
    analysis_width: int = 64,
    cache_dir: str | os.PathLike | None = None,
    decode_processes: int = 0,
) -> list[ShotBoundary]:
    """Where the shots of one video stream change: cuts, fades through black and dissolves.

    Every frame is decoded at ``analysis_width`` pixels across (on the GPU for ``device="cuda"``);
    the module documentation describes the method. Flashes, fast motion and objects crossing the
    frame are not boundaries.

    Args:
        path, device, stream_index, cache_dir: As :func:`extract_keyframes`.
        scene_threshold: How many times the usual change around it a boundary's change must be.
        analysis_width: Width in pixels the frames are compared at.
        decode_processes: Decode the chunks in this many worker processes, shared by every video
            of this process (see :class:`~vclip.VideoDecoder`), instead of threads of this one,
            whose Python work shares one interpreter lock: faster on long videos and on many
            (``benchmarks/README.md``). Starting them takes seconds, once per process.

    Returns:
        The boundaries in order, frame 0 (the start of the first shot) not among them; each with
        the first frame of the new shot, the first frame of the transition and its kind.

    Raises:
        ValueError: ``scene_threshold`` not above 1; ``analysis_width`` below 1.
        VideoNotFoundError, NotAVideoError, CorruptVideoError, UnsupportedCodecError: The file.
    """
    _check_scene_options(scene_threshold, analysis_width)
    decoder = VideoDecoder(path, stream_index=stream_index, device=device, cache_dir=cache_dir,
                           decode_processes=decode_processes)
    return _shot_boundaries(_scene_signals(decoder, analysis_width, sessions=_sessions(decoder, decode_processes)),
                            scene_threshold)


def _check_scene_options(scene_threshold, analysis_width) -> None:
    check_number("scene_threshold", scene_threshold, minimum=1, minimum_inclusive=False)
    check_integer("analysis_width", analysis_width, minimum=1)


def _evenly_spread(frame_indices: np.ndarray, count: int | None) -> np.ndarray:
    """``count`` of the (ascending) frame numbers, first and last included, evenly spaced by position."""
    frame_indices = np.asarray(frame_indices, dtype=np.int64)
    if count is None or frame_indices.size <= count:
        return frame_indices
    return frame_indices[np.floor(np.linspace(0, frame_indices.size - 1, count) + 0.5).astype(np.int64)]


def _keyframe_chunks(index: VideoIndex, chunk_frames: int) -> list[tuple[int, int]]:
    """``[start, stop)`` frame ranges of at least ``chunk_frames`` (but the last) that start at
    keyframes, so that no group of pictures is decoded twice."""
    boundaries = [0]
    for keyframe in index.keyframe_indices.tolist():
        if keyframe - boundaries[-1] >= chunk_frames:
            boundaries.append(keyframe)
    boundaries.append(index.num_frames)
    return [(start, stop) for start, stop in zip(boundaries[:-1], boundaries[1:]) if stop > start]


# --- Shot boundaries ------------------------------------------------------------------------------
#
# Features of each analysis frame (RGB uint8, ``analysis_width`` pixels across), computed with the
# same array code by NumPy on the CPU and CuPy on the GPU:
#   hist    the colour distribution: a 4x4x4 joint RGB histogram, fractions of the pixels (64 bins);
#           a camera move over one place hardly changes it, a new shot does.
#   blocks  the picture's layout: mean RGB of 4x4-pixel blocks (16 x 9 blocks at 64 x 36).
#   luma    mean and standard deviation of the luma (0-255), for fades through black.
# Distances between frames t and t-g, for every gap g = 1.._MAX_GAP, also computed on the device:
#   H_g(t)  half the L1 distance of the histograms (0: same colours, 1: no colour in common)
#   B_g(t)  the median over blocks of the mean absolute RGB difference, / 255: how much the typical
#           block changed, so a caption, a logo or a moving object (a minority of blocks) does not count.
# Everything after that works on these [gap, frame] tables on the host (a few KB per frame).

_HIST_LEVELS = 4  # per channel: 4 x 4 x 4 bins
_BLOCK = 4  # pixels per block side
_MAX_GAP = 40  # longest frame gap compared (2 x the largest half-width + 2 x _PAIR_SPREAD)
_BETWEEN = 1.3  # a dissolve's middle frames are blends: see _betweenness
_SPAN_EDGE = 0.25  # a dissolve ends at the first frame 75% of the way to the new shot
_PEAK_RADIUS = 8  # frames around a peak of gradual evidence where its middle is looked for
_PAIR_SPREAD = 3  # a gradual boundary must hold for the pairs (a - j, z + j), j = 0.._PAIR_SPREAD
# A cut's change is at least half the change over 8 more frames each side (else it is gradual),
# and that wider change at least 60% of the cut's (else the picture came back: not a new shot).
_ABRUPT_SPAN, _ABRUPT_SHARE, _LASTING_SHARE = 8, 0.5, 0.6
_HALF_WIDTHS = (2, 3, 4, 6, 8, 11, 14, 17)  # half-lengths of the gradual transitions looked for
_BASE_WINDOW = 12  # frame pairs each side whose median distance is the usual change at that gap
_TRANSIENT_FRAMES = 4  # the longest flash (or brief occlusion) bridged over
# Distances below these (histogram, blocks) are never boundaries, whatever the change around them;
# the same values are the unit of the combined distance used to find flashes.
_MIN_DISTANCE = {"H": 0.15, "B": 0.05}
# Added to the usual change before dividing by it, so a still shot's near-zero change does not
# turn noise into a boundary.
_NOISE_FLOOR = {"H": 0.045, "B": 0.015}
# A frame is black (in a fade) when this share of its pixels is darker than this luma: not all
# of them, so a logo or a caption kept over the black does not count.
_DARK_LUMA, _DARK_SHARE = 24.0, 0.85
_FADE_SETTLED, _FADE_LOOK = 0.8, 8  # a fade ends at the first frame with 80% of the brightest luma of the next 8
_FADE_DEPTH = 0.3  # and its mean luma is at most this share of the brightest frames either side


@dataclass(frozen=True)
class ShotBoundary:
    """Where one shot ends and the next begins.

    Attributes:
        frame: The first frame of the new shot (for a gradual transition, the first frame after it).
        start: The first frame of the transition (``== frame`` for a cut).
        kind: ``"cut"``, ``"dissolve"`` (gradual, through blended frames) or ``"fade"`` (through black).
    """

    frame: int
    start: int
    kind: str


@dataclass
class _SceneSignals:
    """Per-frame tables the shot-boundary decision reads (NumPy, host)."""

    distances: dict  # "H", "B": float32 [_MAX_GAP + 1, num_frames], NaN where t - g < 0
    luma_mean: np.ndarray  # float32 [num_frames]
    dark_share: np.ndarray  # float32 [num_frames]: share of pixels darker than _DARK_LUMA


def _frame_features(frames, xp) -> dict:
    """Features of RGB uint8 frames ``[n, h, w, 3]`` (NumPy or CuPy; results on the same device)."""
    n, height, width, _ = frames.shape
    shift = 8 - int(np.log2(_HIST_LEVELS))
    levels = (frames >> shift).astype(xp.int32)
    codes = (levels[..., 0] * _HIST_LEVELS + levels[..., 1]) * _HIST_LEVELS + levels[..., 2]
    bins = _HIST_LEVELS ** 3
    codes = codes.reshape(n, -1) + (xp.arange(n, dtype=xp.int32) * bins)[:, None]
    hist = xp.bincount(codes.reshape(-1), minlength=n * bins).reshape(n, bins).astype(xp.float32)
    hist /= float(height * width)
    rows, columns = max(1, height // _BLOCK), max(1, width // _BLOCK)
    block_h, block_w = height // rows, width // columns
    pixels = frames[:, :rows * block_h, :columns * block_w].astype(xp.float32)
    # Sum the rows of each block (contiguous lines), then the columns: quicker than one mean over both.
    lines = pixels.reshape(n, rows, block_h, columns * block_w * 3).sum(axis=2)
    blocks = lines.reshape(n, rows, columns, block_w, 3).sum(axis=3).reshape(n, rows * columns, 3)
    blocks /= float(block_h * block_w)
    luma = frames.astype(xp.float32) @ xp.asarray([0.299, 0.587, 0.114], dtype=xp.float32)
    luma = luma.reshape(n, -1)
    dark = (luma < _DARK_LUMA).mean(axis=1, dtype=xp.float32)
    return {"H": hist, "B": blocks, "mean": luma.mean(axis=1), "dark": dark}


def _gap_distances(features: dict, previous: dict | None, xp) -> dict:
    """``H`` and ``B`` distances of each frame in ``features`` to the ``_MAX_GAP`` frames before it
    (``previous``: the features of up to ``_MAX_GAP`` frames before these), float32
    ``[_MAX_GAP + 1, n]`` on the features' device, NaN where there is no such frame."""
    n = features["H"].shape[0]
    tables = {}
    for name in ("H", "B"):
        current = features[name]
        earlier = previous[name] if previous is not None else current[:0]
        both = xp.concatenate([earlier, current])
        offset = earlier.shape[0]
        table = xp.full((_MAX_GAP + 1, n), xp.nan, dtype=xp.float32)
        for gap in range(1, _MAX_GAP + 1):
            first = max(0, gap - offset)  # the first frame of this chunk that has a frame `gap` before it
            if first >= n:
                break
            later = both[offset + first:offset + n]
            sooner = both[offset + first - gap:offset + n - gap]
            if name == "H":
                table[gap, first:] = 0.5 * xp.abs(later - sooner).sum(axis=1)
            else:
                change = xp.abs(later - sooner).sum(axis=2)
                middle = change.shape[1] // 2  # the upper median (no averaging of two: one partition)
                table[gap, first:] = xp.partition(change, middle, axis=1)[:, middle] / (3 * 255.0)
        tables[name] = table
    return tables


def _sessions(decoder: VideoDecoder, decode_processes: int) -> int:
    """Chunks decoded at once: every thread of the decode processes; without them 8 NVDEC sessions
    on the GPU, and on the CPU none beside the caller's thread (FFmpeg's threads use the cores)."""
    if decode_processes:
        return decode_processes * THREADS_PER_PROCESS["cuda" if decoder.device.startswith("cuda") else "cpu"]
    return _GPU_SESSIONS if decoder.device.startswith("cuda") else 0


def _session_pool(sessions: int):
    with _session_pools_lock:
        if sessions not in _session_pools:  # made once: each pool registers a fork handler
            _session_pools[sessions] = SharedThreadPool(sessions, "vclip-scene-decode")
        return _session_pools[sessions].get()


def _scene_signals(decoder: VideoDecoder, analysis_width: int,
                   on_progress: ProgressCallback | None = None, sessions: int = 0) -> _SceneSignals:
    """Decode every frame at ``analysis_width`` pixels across (on the decoder's device, chunk by
    chunk; with ``sessions``, that many chunks at once on threads shared by the process) and compute
    the features and gap distances there; the tables come back to the host.
    ``on_progress(stop, num_frames)`` follows each chunk."""
    index = decoder.index
    scaling_factor = min(1.0, analysis_width / index.width)
    chunk_frames = _CHUNK_FRAMES
    if sessions:  # enough chunks for every session, twice over
        chunk_frames = min(_CHUNK_FRAMES, max(_MIN_CHUNK_FRAMES, -(-index.num_frames // (2 * sessions))))
    chunks = _keyframe_chunks(index, chunk_frames)

    def features_of(chunk: tuple[int, int]) -> list[dict]:
        frames = decoder.get_frames(np.arange(*chunk), scaling_factor=scaling_factor).data
        xp = _array_module(frames)
        if xp is np:
            return _features_in_blocks(frames, xp)
        with frames.device:  # a session thread: the decoder's GPU, and results ready for the caller's stream
            blocks = _features_in_blocks(frames, xp)
            xp.cuda.get_current_stream().synchronize()
        return blocks

    parts: dict[str, list] = {"H": [], "B": [], "mean": [], "dark": []}
    previous = None
    ahead = submitted_ahead(_session_pool(sessions), features_of, chunks, 2 * sessions) if sessions else None
    chunk_features = (future.result() for future in ahead) if ahead else (features_of(chunk) for chunk in chunks)
    try:
        for (_, stop), blocks in zip(chunks, chunk_features):
            for features in blocks:
                xp = _array_module(features["H"])
                tables = _gap_distances(features, previous, xp)
                for name in ("H", "B"):
                    parts[name].append(to_numpy(tables[name]))
                parts["mean"].append(to_numpy(features["mean"]))
                parts["dark"].append(to_numpy(features["dark"]))
                previous = {name: (xp.concatenate([previous[name], features[name]]) if previous is not None
                                   else features[name])[-_MAX_GAP:] for name in ("H", "B")}
            if on_progress is not None:
                on_progress(stop, index.num_frames)
    finally:
        if ahead is not None:
            ahead.close()  # after a failure: the chunks not started are cancelled
    return _SceneSignals(
        distances={name: np.concatenate(parts[name], axis=1) for name in ("H", "B")},
        luma_mean=np.concatenate(parts["mean"]).astype(np.float32),
        dark_share=np.concatenate(parts["dark"]).astype(np.float32),
    )


def _features_in_blocks(frames, xp) -> list[dict]:
    """:func:`_frame_features` of blocks of at most ``_CHUNK_FRAMES`` frames (float32 copies of bounded size)."""
    return [_frame_features(frames[first:first + _CHUNK_FRAMES], xp)
            for first in range(0, frames.shape[0], _CHUNK_FRAMES)]


def _pair_distance(table: np.ndarray, first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Distance between frames ``first`` and ``second`` (arrays) read from a gap table: 0 for the
    same frame, NaN where a frame is outside the video or further apart than ``_MAX_GAP``."""
    first, second = np.broadcast_arrays(np.asarray(first), np.asarray(second))
    low, high = np.minimum(first, second), np.maximum(first, second)
    gap = high - low
    valid = (low >= 0) & (high < table.shape[1]) & (gap <= _MAX_GAP)
    out = np.full(first.shape, np.nan, dtype=np.float32)
    out[valid] = table[gap[valid], high[valid]]
    out[valid & (gap == 0)] = 0.0
    return out


def _transient_frames(tables: dict) -> np.ndarray:
    """Frames that differ from both sides while the frames either side of them are alike
    (flashes, a brief occlusion): bool ``[num_frames]``. For a run of at most
    ``_TRANSIENT_FRAMES`` frames between frames p and q, with distances in units of
    :data:`_MIN_DISTANCE` (the larger of the two features): when some frame of the run is at least
    1 from both p and q, and p and q are at most a third of that apart, the frames of the run that
    are at least 0.5 from both, and twice as far as p from q, are transient."""
    num_frames = tables["H"].shape[1]
    frames = np.arange(num_frames)
    transient = np.zeros(num_frames, dtype=bool)

    def combined(first, second):
        return np.fmax(*(_pair_distance(tables[name], first, second) / _MIN_DISTANCE[name] for name in ("H", "B")))

    for length in range(1, _TRANSIENT_FRAMES + 1):
        before, after = frames - 1, frames + length  # p and q around the run frames..frames+length-1
        bridge = combined(before, after)
        legs = [np.fmin(combined(before, frames + k), combined(frames + k, after)) for k in range(length)]
        strongest = np.max(np.stack(legs), axis=0)  # NaN where the run leaves the video
        found = (strongest >= 1.0) & (bridge * 3.0 <= strongest)
        for k in range(length):  # within such a run, the frames that differ from both sides
            marked = found & (legs[k] >= 0.5) & (legs[k] >= 2.0 * bridge)
            transient[np.flatnonzero(marked) + k] = True
    return transient


def _without_transients(table: np.ndarray, transient: np.ndarray) -> np.ndarray:
    """The gap table with every pair that has a transient frame in it set to NaN (not counted)."""
    if not transient.any():
        return table
    gaps = np.arange(_MAX_GAP + 1)[:, None]
    later = np.arange(transient.size)[None, :]
    sooner = later - gaps
    touched = transient[later] | transient[np.clip(sooner, 0, None)]
    return np.where(touched, np.float32(np.nan), table)


def _usual_change(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Median distance at each gap of the ``_BASE_WINDOW`` pairs ending at frame t (``before``)
    and of those starting at frame t (``after``: pairs whose earlier frame is t), [gap, frame]."""
    gaps, num_frames = table.shape
    window = _BASE_WINDOW
    padded = np.concatenate([np.full((gaps, window - 1), np.nan, np.float32), table,
                             np.full((gaps, window - 1 + _MAX_GAP), np.nan, np.float32)], axis=1)
    medians = _median_of_numbers(np.lib.stride_tricks.sliding_window_view(padded, window, axis=1))
    before = medians[:, :num_frames]  # windows ending at t
    after = np.stack([medians[g, window - 1 + g:window - 1 + g + num_frames] for g in range(gaps)])
    return before, after


def _median_of_numbers(values: np.ndarray) -> np.ndarray:
    """The median over the last axis of the values that are not NaN, NaN where there are none: the
    result of ``np.nanmedian``, several times quicker and without its warning on all-NaN rows."""
    ordered = np.sort(values, axis=-1)  # NaN last
    count = np.count_nonzero(~np.isnan(values), axis=-1)[..., None]
    low = np.take_along_axis(ordered, np.maximum(count - 1, 0) // 2, axis=-1)
    high = np.take_along_axis(ordered, count // 2, axis=-1)  # NaN where count is 0
    return ((low + high) / 2)[..., 0]


def _mean_of_numbers(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Element-wise mean of the values that are not NaN (NaN where neither is), without the
    warning of ``np.nanmean``: silencing it would change the process's warning filters, which
    threads share (shot detection runs on several threads in ``vclip keyframes --workers``)."""
    count = (~np.isnan(first)).astype(np.float32) + ~np.isnan(second)
    total = np.nan_to_num(first) + np.nan_to_num(second)
    with np.errstate(invalid="ignore", divide="ignore"):  # per thread, unlike warning filters
        return np.where(count > 0, total / count, np.float32(np.nan))


def _boundary_evidence(tables: dict, usual: dict, first: np.ndarray, last: np.ndarray, *, spread: int,
                       abrupt: bool = False, found_before: np.ndarray | None = None) -> np.ndarray:
    """How clearly frames up to ``first`` and from ``last`` on belong to different shots: for the
    pairs (first - j, last + j), j = 0..spread, their distance divided by the usual distance at
    that gap (the mean of the medians of the pairs just before ``first`` and just after ``last``,
    leaving out a side that reaches past a boundary counted in ``found_before``) plus a noise floor; the
    smallest over the pairs, the largest over the two features; 0 where the pairs are closer than
    :data:`_MIN_DISTANCE`, and with ``abrupt``, where the change is less than half the change
    over :data:`_ABRUPT_SPAN` more frames each side (a gradual change, not a cut)."""
    best = np.zeros(first.shape, dtype=np.float32)
    for name, table in tables.items():
        before, after = usual[name]
        ratios, distances = [], []
        for j in range(spread + 1):
            a, z = first - j, last + j
            gap = np.clip(z - a, 1, _MAX_GAP)
            distance = _pair_distance(table, a, z)
            base_before = _at(before, gap, a)
            base_after = _at(after, gap, z)
            base = _mean_of_numbers(base_before, base_after)
            if found_before is not None:  # a side whose pairs reach past a boundary found already
                n = found_before.size - 1
                reach_before, reach_after = np.clip(a - gap - _BASE_WINDOW, 0, n), np.clip(z + gap + _BASE_WINDOW, 0, n)
                crossed_before = found_before[np.clip(a + 1, 0, n)] > found_before[reach_before]
                crossed_after = found_before[reach_after] > found_before[np.clip(z + 1, 0, n)]
                base = np.where(crossed_before & ~crossed_after & ~np.isnan(base_after), base_after, base)
                base = np.where(crossed_after & ~crossed_before & ~np.isnan(base_before), base_before, base)
            base = np.where(np.isnan(base), 0.0, base)
            ratios.append(distance / (base + _NOISE_FLOOR[name]))
            distances.append(distance)
        ratio = np.fmin.reduce(np.stack(ratios), axis=0)  # NaN only where all are: nanmin without its warning
        distance = np.fmin.reduce(np.stack(distances), axis=0)
        ratio = np.where(distance >= _MIN_DISTANCE[name], ratio, 0.0)
        if abrupt:  # a cut makes the whole change at once, and for good: the frames further out
            jump = _pair_distance(table, first, last)  # differ about as much as these two
            across = _pair_distance(table, first - _ABRUPT_SPAN, last + _ABRUPT_SPAN)
            across = np.where(np.isnan(across), jump, across)
            ratio = np.where((jump >= _ABRUPT_SHARE * across) & (across >= _LASTING_SHARE * jump), ratio, 0.0)
        best = np.fmax(best, np.nan_to_num(ratio))
    return best


def _at(table: np.ndarray, gap: np.ndarray, frame: np.ndarray) -> np.ndarray:
    frame = np.asarray(frame)
    gap = np.broadcast_to(gap, frame.shape)
    valid = (frame >= 0) & (frame < table.shape[1])
    out = np.full(frame.shape, np.nan, dtype=np.float32)
    out[valid] = table[gap[valid], frame[valid]]
    return out


def _fades(signals: _SceneSignals) -> list[ShotBoundary]:
    """Transitions through black: every run of black frames that is not at either end of the video,
    with the dimming frames before it and the brightening frames after it."""
    mean = signals.luma_mean
    dark = signals.dark_share >= _DARK_SHARE
    num_frames = mean.size
    found = []
    t = 0
    while t < num_frames:
        if not dark[t]:
            t += 1
            continue
        run_start = t
        while t < num_frames and dark[t]:
            t += 1
        if run_start == 0 or t == num_frames:
            continue
        # Black between brighter shots, not a dark shot: the run is far darker than both sides.
        reach = 2 * _MAX_GAP
        brightest_before = mean[max(0, run_start - reach):run_start].max()
        brightest_after = mean[t:t + reach].max()
        if mean[run_start:t].min() > min(_DARK_LUMA, _FADE_DEPTH * min(brightest_before, brightest_after)):
            continue
        # The fade-out starts after the last frame at least as bright as the frames before it;
        # the fade-in ends at the first frame about as bright as the frames after it.
        start = run_start
        while start > 0 and mean[start - 1] < _FADE_SETTLED * mean[max(0, start - 1 - _FADE_LOOK):start - 1].max(
                initial=0):
            start -= 1
        end = t
        while end + 1 < num_frames and mean[end] < _FADE_SETTLED * mean[end:end + 1 + _FADE_LOOK].max():
            end += 1
        found.append(ShotBoundary(frame=end, start=start, kind="fade"))
    return found


def _local_maxima(values: np.ndarray, threshold: float, radius: int) -> list[int]:
    """Indices whose value is at least ``threshold`` and the largest within ``radius`` each side
    (the first of equal values)."""
    padded = np.pad(values, radius, constant_values=-np.inf)
    windows = np.lib.stride_tricks.sliding_window_view(padded, 2 * radius + 1)
    before, after = windows[:, :radius].max(axis=1), windows[:, radius + 1:].max(axis=1)
    return np.flatnonzero((values >= threshold) & (values > before) & (values >= after)).tolist()


def _shot_boundaries(signals: _SceneSignals, threshold: float) -> list[ShotBoundary]:
    """Fades, then cuts, then gradual transitions from the per-frame tables (module documentation)."""
    num_frames = signals.luma_mean.size
    if num_frames < 2:
        return []
    transient = _transient_frames(signals.distances)
    tables = {name: _without_transients(table, transient) for name, table in signals.distances.items()}
    usual = {name: _usual_change(table) for name, table in tables.items()}
    frames = np.arange(num_frames)
    fades = _fades(signals)
    taken = np.zeros(num_frames, dtype=bool)  # frames inside a boundary found already
    for fade in fades:
        taken[max(0, fade.start - 2):fade.frame + 3] = True
    # Flashes are out of the tables already, so a cut is one pair: the frame before and the frame.
    cut_evidence = _boundary_evidence(tables, usual, frames - 1, frames, spread=0, abrupt=True)
    cut_evidence[0] = 0.0
    cuts = [ShotBoundary(b, b, "cut") for b in _local_maxima(cut_evidence, threshold, 2) if not taken[b]]
    for cut in cuts:
        taken[cut.frame] = True
    starts = np.zeros(num_frames, dtype=bool)  # first frames of the shots found so far (cuts, fade ends)
    for boundary in cuts + fades:
        starts[boundary.frame] = True
        starts[boundary.start] = True
    found_before = np.concatenate([[0], np.cumsum(starts)])
    evidence = np.stack([_boundary_evidence(tables, usual, frames - h, frames + h, spread=_PAIR_SPREAD,
                                            found_before=found_before) for h in _HALF_WIDTHS])
    # A window that straddles a boundary found already is that boundary's evidence.
    taken_before = np.concatenate([[0], np.cumsum(taken)])
    for row, h in enumerate(_HALF_WIDTHS):
        low = np.clip(frames - h - _PAIR_SPREAD, 0, num_frames)
        high = np.clip(frames + h + _PAIR_SPREAD + 1, 0, num_frames)
        evidence[row, taken_before[high] - taken_before[low] > 0] = 0.0
    strongest = evidence.max(axis=0)
    # A wide window reaches a transition from further off than a narrow one, so the strongest
    # evidence may lie off its middle: around each peak, the frame whose frames either side are
    # best explained as blends is the middle.
    candidates = []
    for peak in _local_maxima(strongest, threshold, _PEAK_RADIUS):
        best = (np.inf, peak, _HALF_WIDTHS[0])
        for centre in range(max(0, peak - _PEAK_RADIUS), min(num_frames, peak + _PEAK_RADIUS + 1)):
            for row, h in enumerate(_HALF_WIDTHS):
                if evidence[row, centre] >= threshold:
                    best = min(best, (_betweenness(tables["B"], centre, h + _PAIR_SPREAD), centre, h))
        between, centre, h = best
        if between <= _BETWEEN:
            start, end = _transition_span(tables["B"], centre, h + _PAIR_SPREAD)
            candidates.append((between, ShotBoundary(end, start, "dissolve")))
    dissolves: list[ShotBoundary] = []
    for _, boundary in sorted(candidates, key=lambda c: c[0]):  # the clearest first; no overlaps
        if all(boundary.frame < other.start or boundary.start > other.frame for other in dissolves):
            dissolves.append(boundary)
    found, seen = [], set()
    for boundary in sorted(cuts + fades + dissolves, key=lambda b: b.frame):
        if boundary.frame not in seen and boundary.frame > 0:
            seen.add(boundary.frame)
            found.append(boundary)
    return found


def _betweenness(table: np.ndarray, centre: int, half_width: int) -> float:
    """How far frames between a = centre - half_width and z = centre + half_width are from being
    blends of a and z: the largest ``(d(a, m) + d(m, z)) / d(a, z)`` over m at a quarter, half and
    three quarters of the way (1 when m is a blend: the median block change of a blend is that
    fraction of the whole; about 2 when the pictures are unrelated, as in fast motion), or infinity
    when the blends do not move steadily from a to z."""
    a, z = np.asarray(centre - half_width), np.asarray(centre + half_width)
    whole = _pair_distance(table, a, z)
    middles = np.asarray([centre - half_width // 2, centre, centre + half_width // 2])
    from_a, to_z = _pair_distance(table, a, middles), _pair_distance(table, middles, z)
    value = float(np.max((from_a + to_z) / whole))
    steady = bool(np.all(np.diff(from_a) >= 0) and np.all(np.diff(to_z) <= 0))
    return value if np.isfinite(value) and steady else np.inf


def _transition_span(table: np.ndarray, centre: int, half_width: int) -> tuple[int, int]:
    """First and last-plus-one frames of a gradual transition around ``centre``: with frames a and
    z ``half_width`` before and after it, each frame t between is a share
    ``d(a, t) / (d(a, t) + d(t, z))`` of the way from a to z (block distances); the transition
    starts after the last frame below 25% and ends at the first frame above 75% (mostly the new
    shot: the motion of the shots makes the last few percent uncertain)."""
    num_frames = table.shape[1]
    a, z = max(0, centre - half_width), min(num_frames - 1, centre + half_width)
    between = np.arange(a, z + 1)
    from_a, to_z = _pair_distance(table, np.asarray(a), between), _pair_distance(table, between, np.asarray(z))
    with np.errstate(all="ignore"):
        share = np.nan_to_num(from_a / (from_a + to_z), nan=0.5)
    low = np.flatnonzero((share <= _SPAN_EDGE) & (between <= centre))
    high = np.flatnonzero((share >= 1.0 - _SPAN_EDGE) & (between >= centre))
    start = int(between[low[-1]]) + 1 if low.size else a
    end = int(between[high[0]]) if high.size else z
    return start, max(end, start)


def _array_module(array):
    """NumPy for NumPy arrays, CuPy for arrays on the GPU."""
    if isinstance(array, np.ndarray):
        return np
    import cupy

    return cupy
