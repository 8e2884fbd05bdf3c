"""Keyframes of a video, to summarize it: the codec's own keyframes, or the first frame of every shot.

``method="codec"`` decodes only the keyframe packets (each keyframe is its own decode segment, no
P or B picture is decoded). ``method="scene"`` finds the shot boundaries (:func:`find_shot_boundaries`)
and returns frame 0 and the first frame of every later shot. :func:`extract_keyframes_many` does
either for many videos at once (threads on the GPU, processes on the CPU, or Ray tasks), a bad
video being one result among the others.

How shot boundaries are found
-----------------------------
Every frame is decoded downscaled to ``analysis_width`` pixels across: on the GPU (NVDEC, the
resize in the conversion kernel) when the decoder runs there, else by FFmpeg with the kernel's
NumPy twin resizing, so both devices see nearly the same pixels. The video is cut into chunks at
keyframes that several decoders (or the threads of ``decode_processes``) decode at once. There,
each frame gets two features: its colour histogram (4 x 4 x 4 RGB bins) and its layout (the mean
colour of 4 x 4-pixel blocks); then, for every frame t and every gap g up to 40 frames, two
distances to frame t - g:

- ``H``: half the L1 distance of the histograms. A camera move over one place hardly changes it;
  a new shot does.
- ``B``: how much the typical block changed (the median over blocks), so a caption, a logo or one
  moving object does not count; it tells apart two shots of the same place.

Only these tables come back to the host, with a thumbnail of each frame (its 2x2-pixel means),
where the decision is made, the same for both devices, in the steps below; their numbers are the
fields of :class:`SceneRules`, one group per step (``rules=`` changes them):

1. **Flashes** (:class:`FlashRules`): a short run of frames that differs from both sides while the
   frames either side of it are alike (a few overexposed frames, a brief occlusion) is left out of
   everything below.
2. **The usual change** (:class:`UsualChangeRules`) at each gap is the median distance of the frame
   pairs just before and just after a place (the mean of the two sides, or only the side that does
   not reach across a boundary already found): fast motion raises it, so a boundary has to stand
   out from the motion around it, not from zero. A change stands out when it is at least
   ``scene_threshold`` times the usual change plus a noise floor, and above a least change.
3. **Fades** (:class:`FadeRules`): a run of black frames between two shots, far darker than both
   sides; the fade starts where the frames start to dim and ends at the first frame about as
   bright as the frames after it. No cut or dissolve is looked for in it or next to it.
4. **Cuts** (:class:`CutRules`): frame b starts a shot when its change from frame b - 1 stands out
   in either feature, is made at once (most of the change over more frames each side) and for good
   (the picture does not come back), and is not motion: it is several times the change of each
   frame pair beside it (a whip pan or a crash zoom changes every pair about alike), the other
   feature also changes more than beside it (a whip pan sweeps new colours in while every block
   keeps changing alike), and the new picture is new: none of the frames just before comes close
   to the first new frame, nor any just after to the last old frame, counting the frames left out
   as flashes too (shake and an object passing back and forth bring earlier pictures back). Of
   cuts closer than the longest flash, the one of most evidence is kept.
5. **Dissolves** (:class:`DissolveRules`) and other gradual transitions: at several scales, frames
   ``c - h - j`` against ``c + h + j`` for a range of half-widths ``h`` and a few ``j``, each
   against the usual change at that gap; around each place where that stands out, the window whose
   middle frames are most like blends of its two sides. It is a dissolve when its middle frames
   are blends (the block distances add up: d(a, m) + d(m, z) about d(a, z), moving steadily from a
   to z), which fast pans, zooms and objects crossing the frame are not; when it goes straight
   from the old shot to the new (the block changes of its frame pairs add up to little more than
   the change across it, where a whip pan or a crash zoom sweeps through other pictures); when its
   new picture is no mosaic of the old one (the first new frame's thumbnail, in small blocks each
   matched with the best place nearby in the last old frame's, still differs by a good share of
   its plain difference: a tilt or a zoom under motion blur is the old picture moved); and when
   its middle frames are no moved copies of the frames before them (a crash zoom's are). The
   boundary is the first frame most of the way to the new shot.

The rules were set on synthetic labelled videos (:func:`vclip.synthetic.make_scene_video`) and
checked on held-out ones and on real footage (``docs/notes/scene-rules.md`` says how each number
was chosen); ``benchmarks/scenes.py`` measures precision and recall per kind of transition against
PySceneDetect.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Generator, Sequence
from contextlib import closing
from functools import partial
from typing import Any

import numpy as np

from ._device import CPU, Device, resolve_device
from ._engine.processes import THREADS_PER_PROCESS
from ._jobs.cpu_beside_gpu import BesideCpuDecoders, resolve_cpu_decoders
from ._jobs.runner import InThisThread, Outcome, Processes, Runner, Threads, choose_runner
from ._machine import usable_cores
from ._outputs.images import to_numpy
from ._scenes.features import SceneSignals
from ._scenes.keyframes import KEYFRAME_METHODS, THUMBNAIL_WIDTH, KeyframeMethod, Keyframes
from ._scenes.rules import CutRules, DissolveRules, FadeRules, FlashRules, SceneRules, UsualChangeRules, check_rules
from ._scenes.shots import ShotBoundary, shot_boundaries
from ._scenes.signals import scene_signals
from .decoder import VideoDecoder
from .errors import (
    ArgumentError,
    CorruptVideoError,
    VideoError,
    check_choice,
    check_integer,
    check_number,
    check_optional_integer,
)
from .sampling import check_scaling_factor, scaled_size

__all__ = [
    "KEYFRAME_METHODS", "THUMBNAIL_WIDTH", "CutRules", "DissolveRules", "FadeRules", "FlashRules", "Keyframes",
    "ProgressCallback", "SceneRules", "ShotBoundary", "UsualChangeRules", "extract_keyframes", "extract_keyframes_many",
    "find_shot_boundaries", "find_shot_boundaries_many",
]


_GPU_SESSIONS = 8
"""NVDEC sessions of this process decoding chunks at once (without decode processes)."""
_CPU_SESSIONS = 2
"""FFmpeg decoders of a video decoding chunks at once on the CPU (without decode processes): one
frame-threaded decoder leaves cores idle at 640x360; two, with the analysis on the caller's thread
meanwhile, fill them (docs/notes/cpu-resampling.md)."""
_GPU_WORKERS = 8
"""Videos of extract_keyframes_many at once on the GPU: threads sharing the scene method's NVDEC sessions."""

for _class in (Keyframes, ShotBoundary, SceneRules, FlashRules, UsualChangeRules, CutRules, FadeRules, DissolveRules):
    _class.__module__ = __name__  # made by the scene method (vclip._scenes), shown and pickled as vclip.keyframes

ProgressCallback = Callable[[int, int], None]
"""``on_progress(frames_done, frames_total)``: called as a video's frames are read."""


def extract_keyframes(
    path: str | os.PathLike,
    *,
    method: KeyframeMethod = "codec",
    max_frames: int | None = None,
    device: str | Device = "auto",
    stream_index: int | None = None,
    scaling_factor: float = 1.0,
    scene_threshold: float = 2.0,
    rules: SceneRules | None = None,
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
        device: ``"auto"`` (default: NVDEC when usable, else the CPU), ``"cpu"``, ``"cuda"`` or
            ``"cuda:N"`` (see :class:`~vclip.VideoDecoder`).
        stream_index: Container index of the video stream; default: the first video stream.
        scaling_factor: The returned frames come out at ``round(W*f) x round(H*f)``, ``0 < f <= 1``.
        scene_threshold: How many times the usual change around it (at the same frame gap) a
            shot boundary's change must be. Larger finds fewer, clearer boundaries.
        rules: The scene method's other thresholds (default: ``SceneRules()``, the tuned ones).
        analysis_width: Width in pixels the scene method compares frames at.
        cache_dir: Folder for an on-disk cache of the video's index.
        on_progress: Called as ``on_progress(frames_done, frames_total)`` while the video is
            read: for ``"scene"`` after each chunk of frames analysed (``frames_total`` is the
            stream's frame count), for ``"codec"`` before and after the keyframes are decoded.
        decode_processes: As :func:`find_shot_boundaries`.

    Raises:
        ValueError: Unknown ``method``; ``max_frames`` below 1; ``scaling_factor`` outside (0, 1];
            ``scene_threshold`` not above 1; ``rules`` not a :class:`SceneRules`; ``analysis_width``
            below 1.
        VideoNotFoundError, NotAVideoError, CorruptVideoError, UnsupportedCodecError: The file.
    """
    max_frames, scene_threshold, rules, scaling_factor, analysis_width = _check_keyframe_options(
        method, max_frames, scene_threshold, rules, scaling_factor, analysis_width)
    resolved = resolve_device(device)
    found = _keyframes_of(path, method=method, max_frames=max_frames, device=resolved.device,
                          stream_index=stream_index, scaling_factor=scaling_factor, scene_threshold=scene_threshold,
                          rules=rules, analysis_width=analysis_width, cache_dir=cache_dir, on_progress=on_progress,
                          decode_processes=decode_processes, cpu_sessions=_cpu_sessions())
    return _flagged(found, resolved.fell_back_to_cpu)


def _keyframes_of(path: str | os.PathLike, *, method: KeyframeMethod, max_frames: int | None, device: Device,
                  stream_index: int | None, scaling_factor: float, scene_threshold: float, rules: SceneRules,
                  analysis_width: int, cache_dir: str | os.PathLike | None, on_progress: ProgressCallback | None,
                  decode_processes: int, cpu_sessions: int) -> Keyframes:
    """:func:`extract_keyframes` with checked options; ``cpu_sessions``: FFmpeg decoders reading
    the scene method's chunks at once on the CPU (without decode processes)."""
    decoder = VideoDecoder(path, stream_index=stream_index, device=device, cache_dir=cache_dir,
                           decode_processes=decode_processes)
    index = decoder.index
    boundaries: dict[int, ShotBoundary | None] | None = None
    if method == "codec":
        found = index.keyframe_indices
    else:
        if on_progress is not None:
            on_progress(0, index.num_frames)
        signals = _signals_of(decoder, device, analysis_width, decode_processes, cpu_sessions, on_progress)
        boundaries = {0: None, **{boundary.frame: boundary
                                  for boundary in shot_boundaries(signals, scene_threshold, rules)}}
        found = np.asarray(sorted(boundaries), dtype=np.int64)
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
        boundaries=None if boundaries is None else tuple(boundaries[int(f)] for f in frames.frame_indices),
    )


def find_shot_boundaries(
    path: str | os.PathLike,
    *,
    device: str = "auto",
    stream_index: int | None = None,
    scene_threshold: float = 2.0,
    rules: SceneRules | None = None,
    analysis_width: int = 64,
    cache_dir: str | os.PathLike | None = None,
    decode_processes: int = 0,
) -> list[ShotBoundary]:
    """Where the shots of one video stream change: cuts, fades through black and dissolves.

    Every frame is decoded at ``analysis_width`` pixels across (on the GPU where NVDEC is usable);
    the module documentation describes the method. Flashes, fast motion and objects crossing the
    frame are not boundaries.

    Args:
        path, device, stream_index, cache_dir: As :func:`extract_keyframes`.
        scene_threshold: How many times the usual change around it a boundary's change must be.
        rules: Every other threshold of the method, by step (default: ``SceneRules()``, the
            tuned ones), e.g. ``SceneRules(cuts=CutRules(above_neighbours=3.0))``.
        analysis_width: Width in pixels the frames are compared at.
        decode_processes: Decode the chunks in this many worker processes, shared by every video
            of this process (see :class:`~vclip.VideoDecoder`), instead of threads of this one,
            whose Python work shares one interpreter lock: faster on long videos in a process
            that lives on. Starting them takes seconds, once per process, more than they save
            over a folder of short videos (docs/performance.md, docs/notes/decode-processes.md).

    Returns:
        The boundaries in order, frame 0 (the start of the first shot) not among them; each with
        the first frame of the new shot, the first frame of the transition and its kind.

    Raises:
        ValueError: ``scene_threshold`` not above 1; ``rules`` not a :class:`SceneRules`;
            ``analysis_width`` below 1.
        VideoNotFoundError, NotAVideoError, CorruptVideoError, UnsupportedCodecError: The file.
    """
    scene_threshold, rules, analysis_width = _check_scene_options(scene_threshold, rules, analysis_width)
    return _boundaries_of(path, device=resolve_device(device).device, stream_index=stream_index,
                          scene_threshold=scene_threshold, rules=rules, analysis_width=analysis_width,
                          cache_dir=cache_dir, decode_processes=decode_processes, cpu_sessions=_cpu_sessions())


def _boundaries_of(path: str | os.PathLike, *, device: Device, stream_index: int | None, scene_threshold: float,
                   rules: SceneRules, analysis_width: int, cache_dir: str | os.PathLike | None, decode_processes: int,
                   cpu_sessions: int) -> list[ShotBoundary]:
    """:func:`find_shot_boundaries` with checked options; ``cpu_sessions`` as :func:`_keyframes_of`."""
    decoder = VideoDecoder(path, stream_index=stream_index, device=device, cache_dir=cache_dir,
                           decode_processes=decode_processes)
    signals = _signals_of(decoder, device, analysis_width, decode_processes, cpu_sessions)
    return shot_boundaries(signals, scene_threshold, rules)


def find_shot_boundaries_many(
    paths: Sequence[str | os.PathLike],
    *,
    device: str = "auto",
    stream_index: int | None = None,
    scene_threshold: float = 2.0,
    rules: SceneRules | None = None,
    analysis_width: int = 64,
    cache_dir: str | os.PathLike | None = None,
    decode_processes: int = 0,
    workers: int | None = None,
    cpu_decoders: int | str = 0,
    ray: bool = False,
    ray_address: str | None = None,
    on_result: Callable[[list[ShotBoundary] | VideoError], None] | None = None,
) -> Generator[list[ShotBoundary] | VideoError]:
    """:func:`find_shot_boundaries` of many videos, several at once, as :func:`extract_keyframes_many`
    runs them (threads on the GPU, processes on the CPU, or Ray tasks): one result per path, in the
    order of ``paths``, each the video's boundaries or the :class:`~vclip.VideoError` that stopped it.

    Every frame is decoded once, at ``analysis_width``; no frame is decoded at full size, so this is
    the quicker way to split videos into shots (``extract_keyframes_many(..., method="scene")`` also
    decodes each shot's first frame).

    For example:

    ```python
    for path, found in zip(paths, find_shot_boundaries_many(paths)):
        if not isinstance(found, vclip.VideoError):
            print(path, [boundary.frame for boundary in found])
    ```

    Args:
        paths: Video files.
        device, stream_index, scene_threshold, rules, analysis_width, cache_dir, decode_processes: As
            :func:`find_shot_boundaries`, for every video.
        workers, ray, ray_address, on_result: As :func:`extract_keyframes_many`.
        cpu_decoders: On the GPU, CPU processes that read videos beside its threads, for the
            cores the GPU's feeders leave idle: each reads one video at a time with FFmpeg (the
            CPU path, whose boundaries are the GPU's on the labelled test set), taking the next
            whenever every GPU thread has one. 0 (default): none; a count: that many; ``"auto"``:
            one per usable core beside 2 (and the decode processes) on machines of 8 cores or
            more, no more than the videos beyond the GPU's threads. None on the CPU (processes
            already read a video per core), on Ray, or for one video.

    Returns:
        An iterator of one ``list[ShotBoundary] | VideoError`` per path (see :func:`extract_keyframes_many`).

    Raises:
        ArgumentError: A bad option (checked before any video is read).
        ImportError: ``ray`` without Ray installed.
    """
    scene_threshold, rules, analysis_width = _check_scene_options(scene_threshold, rules, analysis_width)
    names, runner, decode_processes = _folder_job(paths, device, stream_index, decode_processes, workers, ray,
                                                  ray_address)
    of_video = partial(_boundaries_of, stream_index=stream_index, scene_threshold=scene_threshold, rules=rules,
                       analysis_width=analysis_width, cache_dir=cache_dir)
    find = partial(of_video, device=runner.device, decode_processes=decode_processes,
                   cpu_sessions=_cpu_sessions_of(runner))
    helpers = resolve_cpu_decoders(cpu_decoders, runner, len(names), decode_processes)
    if helpers:
        assert isinstance(runner, Threads)
        runner = BesideCpuDecoders(runner, helpers, partial(of_video, device=CPU, decode_processes=0, cpu_sessions=1))
    return _results_in_order(runner, find, names, on_result)


def extract_keyframes_many(
    paths: Sequence[str | os.PathLike],
    *,
    method: KeyframeMethod = "codec",
    max_frames: int | None = None,
    device: str = "auto",
    stream_index: int | None = None,
    scaling_factor: float = 1.0,
    scene_threshold: float = 2.0,
    rules: SceneRules | None = None,
    analysis_width: int = 64,
    cache_dir: str | os.PathLike | None = None,
    decode_processes: int = 0,
    workers: int | None = None,
    ray: bool = False,
    ray_address: str | None = None,
    on_result: Callable[[Keyframes | VideoError], None] | None = None,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> Generator[Keyframes | VideoError]:
    """:func:`extract_keyframes` of many videos, several at once: one result per path, in the
    order of ``paths``, each the video's :class:`Keyframes` or the :class:`~vclip.VideoError` that
    stopped it (a value, not raised: the other videos go on).

    Videos run on threads on the GPU (they share the scene method's NVDEC sessions), in spawned
    processes on the CPU (in a script, under ``if __name__ == "__main__":``), or as Ray tasks. The
    results come out as they are ready, in order, with at most two per worker done and waiting, so
    memory stays bounded over any number of videos: save each one and let it go. A video that
    crashes its worker process (FFmpeg can, on damaged bytes) is a
    :class:`~vclip.CorruptVideoError` saying so, and only that video is lost; a failure of vclip
    itself on one video is a VideoError asking to report it.

    For example:

    ```python
    for path, found in zip(paths, extract_keyframes_many(paths, method="scene")):
        if isinstance(found, vclip.VideoError):
            print("skipped", found)
        else:
            found.save(Path("keyframes") / Path(path).stem)
    ```

    Args:
        paths: Video files.
        method, max_frames, stream_index, scaling_factor, scene_threshold, rules, analysis_width, cache_dir:
            As :func:`extract_keyframes`, for every video.
        device: As :func:`extract_keyframes` (default ``"auto"``); with ``ray``, a GPU request
            gives each task a share of a GPU when the cluster has GPUs. Frames are CuPy arrays
            from threads on the GPU, NumPy arrays otherwise (always from Ray and processes).
        decode_processes: As :func:`find_shot_boundaries` (default 0: threads of this process).
            A fresh process over a folder is faster without them, whose start takes longer than
            they save there (docs/performance.md); they pay in a long-lived process over long
            videos.
        workers: Videos at once; default: 8 on the GPU, one per usable CPU core on the CPU, what
            the Ray cluster runs at once with ``ray``; never more than the videos. On the CPU the
            scene method reads each video with 2 FFmpeg decoders, or 1 where the videos at once
            already fill the cores.
        ray: Run each video as a Ray task on the cluster of ``ray_address`` (default:
            ``RAY_ADDRESS``'s or ``ray start``'s, else a local one); needs
            ``pip install 'vclip-nvdec[ray]'``.
        ray_address: The Ray cluster to join (implies ``ray``).
        on_result: Called with each result as it is ready (in completion order, while the
            results are being taken), e.g. for progress.
        on_progress: ``on_progress(path, frames_done, frames_total)`` as each video is read (see
            :func:`extract_keyframes`); only when the videos are read one after another in this
            thread (one worker, not Ray).

    Returns:
        An iterator of one ``Keyframes | VideoError`` per path; the work starts as it is first
        advanced and stops when it is closed or on Ctrl-C (which is raised).

    Raises:
        ArgumentError: A bad option (checked before any video is read), ``on_progress`` with
            several workers or Ray.
        ImportError: ``ray`` without Ray installed.
    """
    max_frames, scene_threshold, rules, scaling_factor, analysis_width = _check_keyframe_options(
        method, max_frames, scene_threshold, rules, scaling_factor, analysis_width)
    names, runner, decode_processes = _folder_job(paths, device, stream_index, decode_processes, workers, ray,
                                                  ray_address)
    if on_progress is not None and not isinstance(runner, InThisThread):
        raise ArgumentError(f"on_progress follows videos read one after another in this thread, not {runner!r}: "
                            "pass workers=1, or follow whole videos with on_result")
    options = dict(method=method, max_frames=max_frames, device=runner.device, stream_index=stream_index,
                   scaling_factor=scaling_factor, scene_threshold=scene_threshold, rules=rules,
                   analysis_width=analysis_width, cache_dir=cache_dir, decode_processes=decode_processes,
                   cpu_sessions=_cpu_sessions_of(runner))
    extract = partial(_extract_one, options, not runner.in_this_process, on_progress)
    return _results_in_order(runner, extract, names, on_result)


def _folder_job(paths: Sequence[str | os.PathLike], device: object, stream_index: int | None, decode_processes: int,
                workers: int | None, ray: bool, ray_address: str | None) -> tuple[list[str], Runner, int]:
    """The names of ``paths``, the runner of a job over them (``device``, the public request,
    resolved into its Device), and ``decode_processes``, checked."""
    check_optional_integer("stream_index", stream_index, minimum=0)
    decode_processes = check_integer("decode_processes", decode_processes, minimum=0)
    names = [os.fsdecode(path) for path in paths]
    runner = choose_runner(device, workers=workers, items=len(names), gpu_workers=_GPU_WORKERS, ray=ray,
                           ray_address=ray_address)
    return names, runner, decode_processes


def _cpu_sessions_of(runner: Runner) -> int:
    """FFmpeg decoders per video of the scene method for the videos ``runner`` reads at once."""
    return _cpu_sessions(runner.workers if isinstance(runner, Processes) else 1)


def _cpu_sessions(videos_at_once: int = 1) -> int:
    """FFmpeg decoders per video of the scene method on the CPU when this machine reads
    ``videos_at_once`` at once: :data:`_CPU_SESSIONS`, fewer where the videos already fill its cores
    (one decoder each for two videos at once on two cores is quicker than two each)."""
    return max(1, min(_CPU_SESSIONS, usable_cores() // videos_at_once))


def _extract_one(options: dict, to_host: bool, on_progress: Callable[[str, int, int], None] | None,
                 path: str) -> Keyframes:
    """:func:`extract_keyframes` of ``path`` (module level, so that worker processes and Ray can
    run it), its options checked; ``to_host``: frames as NumPy arrays, to travel to another process."""
    found = _keyframes_of(path, on_progress=partial(on_progress, path) if on_progress else None, **options)
    return dataclasses.replace(found, frames=to_numpy(found.frames)) if to_host else found


def _results_in_order(runner: Runner, extract: Callable[[str], Any], names: list[str],
                      on_result) -> Generator[Any]:
    """``extract`` of each name on ``runner``: its value or the VideoError that stopped it, in order."""
    finished: dict[int, Any] = {}

    def done(outcome: Outcome[Keyframes]) -> None:
        finished[outcome.position] = result = _result_of(outcome, names[outcome.position], runner.fell_back_to_cpu)
        if on_result is not None:
            on_result(result)

    with closing(runner.run(extract, names, on_outcome=done)) as outcomes:
        for outcome in outcomes:
            yield finished.pop(outcome.position)


def _result_of(outcome: Outcome[Any], path: str, fell_back_to_cpu: bool) -> Any:
    """One video's result: its value (keyframes flagged when the GPU request was served on the
    CPU), or the VideoError that stopped it (a crashed worker, a failure of vclip itself included)."""
    if outcome.value is not None:
        return _flagged(outcome.value, fell_back_to_cpu)
    if outcome.crashed:
        return CorruptVideoError(path, outcome.crash_problem())
    if isinstance(outcome.error, VideoError):
        return outcome.error
    return VideoError(path, f"vclip failed on it ({type(outcome.error).__name__}: {outcome.error}); please report it")


def _check_keyframe_options(method, max_frames, scene_threshold, rules, scaling_factor, analysis_width) -> tuple:
    """``max_frames, scene_threshold, rules, scaling_factor, analysis_width`` checked (numbers as Python numbers)."""
    check_choice("method", method, KEYFRAME_METHODS)
    max_frames = check_optional_integer("max_frames", max_frames, minimum=1, none_means="for all")
    scene_threshold, rules, analysis_width = _check_scene_options(scene_threshold, rules, analysis_width)
    return max_frames, scene_threshold, rules, check_scaling_factor(scaling_factor), analysis_width


def _check_scene_options(scene_threshold, rules, analysis_width) -> tuple[float, SceneRules, int]:
    """``scene_threshold, rules, analysis_width`` checked (the default rules for None)."""
    return (check_number("scene_threshold", scene_threshold, minimum=1, minimum_inclusive=False), check_rules(rules),
            check_integer("analysis_width", analysis_width, minimum=1))


def _evenly_spread(frame_indices: np.ndarray, count: int | None) -> np.ndarray:
    """``count`` of the (ascending) frame numbers, first and last included, evenly spaced by position."""
    frame_indices = np.asarray(frame_indices, dtype=np.int64)
    if count is None or frame_indices.size <= count:
        return frame_indices
    return frame_indices[np.floor(np.linspace(0, frame_indices.size - 1, count) + 0.5).astype(np.int64)]


def _flagged(found: Any, fell_back_to_cpu: bool) -> Any:
    """``found``, its keyframes flagged when the GPU request was served on the CPU."""
    if fell_back_to_cpu and isinstance(found, Keyframes):
        return dataclasses.replace(found, fell_back_to_cpu=True)
    return found


def _signals_of(decoder: VideoDecoder, device: Device, analysis_width: int, decode_processes: int,
                cpu_sessions: int, on_progress: ProgressCallback | None = None) -> SceneSignals:
    """The scene signals of ``decoder``'s video, decoded by the sessions of its device: ``device``, or
    the CPU where the decoder fell back."""
    sessions = _sessions(CPU if decoder.fell_back_to_cpu else device, decode_processes, cpu_sessions)
    return scene_signals(decoder, analysis_width, on_progress, sessions)


def _sessions(device: Device, decode_processes: int, cpu_sessions: int) -> int:
    """Chunks decoded at once on ``device`` (the CPU where a decoder fell back: a Ray task's
    ``Device("cuda")`` without NVDEC): every thread of the decode processes; without them 8 NVDEC
    sessions on the GPU, ``cpu_sessions`` FFmpeg decoders on the CPU."""
    if decode_processes:
        return decode_processes * THREADS_PER_PROCESS[device.type]
    return _GPU_SESSIONS if device.is_cuda else cpu_sessions


