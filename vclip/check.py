"""Check a dataset before training: decode every frame of every video and say which are bad.

On the CPU each video gets one plain PyAV pass over all its packets, with FFmpeg's error
concealment reporting on, and every frame that comes out is matched to the index by its pts. A
frame is bad when decoding its packet failed, when FFmpeg flagged it as damaged (concealed), when
it was decoded from such a frame (every frame after a damaged reference picture in decode order,
up to the next keyframe: FFmpeg flags only the damaged picture itself), or when it never came out;
the video is corrupt too when frames come out after the last one its index shows (a cut-off end: the
index leaves out what the cut damaged and what follows it). :func:`check_videos` checks many in
parallel, one process per core.

On the GPU (``device="cuda"``, or ``"auto"`` with a usable GPU) every frame goes through
:class:`~vclip.VideoDecoder`, group of pictures by group of pictures, at a small output size:
decode failures and frames NVDEC never returned are found; pictures NVDEC conceals without an
error are not (check on the CPU for those).

A video that cannot be opened or indexed is unreadable, with the reason.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from functools import partial
from typing import Literal

import av
import numpy as np

from ._bytes.sources import open_container
from ._device import Device, resolve_device
from ._jobs.runner import Outcome, choose_runner
from .errors import CorruptVideoError, VideoError, check_optional_integer
from .gop import keyframe_chunks
from .index import VideoIndex, index_video

__all__ = ["CheckResult", "check_video", "check_videos"]

CheckStatus = Literal["ok", "corrupt", "unreadable"]
_GPU_WORKERS = 4  # videos checked at once on the GPU (NVDEC has several engines)
_GPU_CHUNK_FRAMES = 256  # frames per decode call on the GPU
_GPU_CHECK_WIDTH = 64  # output width of the GPU pass: every frame is decoded, little is kept


@dataclass(frozen=True)
class CheckResult:
    """What decoding every frame of one video found.

    Attributes:
        path: The video file.
        status: ``"ok"``; ``"corrupt"`` (some frames bad, see ``bad_frames``); ``"unreadable"``
            (the file cannot be opened or indexed, see ``error``).
        num_frames: Frames the index lists (0 when unreadable).
        bad_frames: Frame numbers that failed to decode, came out damaged, or never came out.
        problems: One line per kind of damage, naming the frames (``"frames 45-47: decode
            error (Invalid data found when processing input)"``).
        error: Why the video is unreadable, else None.
        device: Where it was decoded (``"cpu"`` or ``"cuda:N"``).
        seconds: Wall-clock time of the check.
    """

    path: str
    status: CheckStatus
    num_frames: int = 0
    bad_frames: tuple[int, ...] = ()
    problems: tuple[str, ...] = ()
    error: str | None = None
    device: str = "cpu"
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict:
        """The result as JSON-ready values."""
        return {"file": self.path, "status": self.status, "num_frames": self.num_frames,
                "bad_frames": list(self.bad_frames), "problems": list(self.problems), "error": self.error,
                "device": self.device, "seconds": round(self.seconds, 4)}


@dataclass
class _Damage:
    """Bad frames by kind, in the order kinds were first seen."""

    kinds: dict[str, set[int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # damage that no frame number names (frames past the end)

    def add(self, kind: str, frames: Iterable[int]) -> None:
        self.kinds.setdefault(kind, set()).update(int(f) for f in frames)

    def frames(self) -> set[int]:
        return set().union(*self.kinds.values()) if self.kinds else set()

    def result(self, path: str, num_frames: int, device: str, started: float) -> CheckResult:
        bad = sorted(self.frames())
        problems = tuple(f"{_frame_ranges(sorted(frames))}: {kind}" if frames else kind
                         for kind, frames in self.kinds.items()) + tuple(self.notes)
        return CheckResult(path, "corrupt" if problems else "ok", num_frames, tuple(bad), problems,
                           device=device, seconds=time.perf_counter() - started)


def _frame_ranges(frames: Sequence[int], limit: int = 8) -> str:
    """``"frame 4"``, ``"frames 3-5, 9"``; long lists end in ``"... (N frames)"``."""
    runs: list[list[int]] = []
    for frame in frames:
        if runs and frame == runs[-1][1] + 1:
            runs[-1][1] = frame
        else:
            runs.append([frame, frame])
    text = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs[:limit])
    if len(runs) > limit:
        text += f", ... ({len(frames)} frames)"
    return ("frame " if len(frames) == 1 else "frames ") + text


def check_video(
    path: str | os.PathLike,
    *,
    device: str | Device = "auto",
    stream_index: int | None = None,
) -> CheckResult:
    """Decode every frame of one video stream and report what is bad.

    Args:
        path: The video file.
        device: ``"auto"`` (default: the GPU when NVDEC is usable, else the CPU), ``"cpu"``,
            ``"cuda"``, ``"cuda:N"`` (or a device another vclip function resolved). The CPU also
            finds the damage NVDEC conceals (see the module docstring).
        stream_index: Container index of the video stream; default: the first video stream.

    Returns:
        A :class:`CheckResult`; a problem of the video never raises (one that trips vclip itself
        is reported as unreadable, "vclip failed on it").

    Raises:
        ArgumentError: A bad ``device`` or ``stream_index``.
    """
    check_optional_integer("stream_index", stream_index, minimum=0)
    resolved = resolve_device(device).device
    path = os.fsdecode(path)
    started = time.perf_counter()
    try:
        index = index_video(path, stream_index=stream_index)
        if index.num_frames == 0:
            raise CorruptVideoError(path, "the stream has no frames to show")
        if resolved.is_cuda:
            return _check_on_gpu(index, resolved, started)
        return _check_on_cpu(index, started)
    except VideoError as error:
        problem = error.problem
    except Exception as error:  # a file that trips vclip itself is still a file the dataset cannot use
        problem = f"vclip failed on it ({type(error).__name__}: {error}); please report it"
    return CheckResult(path, "unreadable", error=problem, device=str(resolved), seconds=time.perf_counter() - started)


def check_videos(
    paths: Sequence[str | os.PathLike],
    *,
    device: str = "auto",
    stream_index: int | None = None,
    workers: int | None = None,
    ray: bool = False,
    ray_address: str | None = None,
    on_result: Callable[[CheckResult], None] | None = None,
) -> list[CheckResult]:
    """:func:`check_video` for many videos, in parallel: on the CPU in spawned processes, on the
    GPU a few videos at once on threads, or as Ray tasks. In a script, call it under
    ``if __name__ == "__main__":`` (the processes are spawned).

    A file that crashes its worker process (FFmpeg can, on damaged bytes) is reported unreadable,
    and only that file: the others are checked again in fresh processes.

    Args:
        paths: Video files.
        device: As :func:`check_video` (default ``"auto"``); with ``ray``, a GPU request gives each
            task a share of a GPU when the cluster has GPUs.
        stream_index: As :func:`check_video`, for every video.
        workers: Videos checked at once; default: one per usable CPU core (CPU), 4 (GPU), or what
            the Ray cluster runs at once.
        ray: Check as Ray tasks on the cluster of ``ray_address`` (default: ``RAY_ADDRESS``'s or
            ``ray start``'s, else a local one); needs ``pip install 'vclip-nvdec[ray]'``.
        ray_address: The Ray cluster to join (implies ``ray``).
        on_result: Called with each result as it is ready (in completion order), e.g. for progress.

    Returns:
        One :class:`CheckResult` per path, in the order of ``paths``.

    Raises:
        ArgumentError: A bad ``device``, ``stream_index`` or ``workers``.
        ImportError: ``ray`` without Ray installed.
    """
    check_optional_integer("stream_index", stream_index, minimum=0)
    names = [os.fsdecode(p) for p in paths]
    runner = choose_runner(device, workers=workers, items=len(names), gpu_workers=_GPU_WORKERS, ray=ray,
                           ray_address=ray_address)
    check = partial(check_video, device=runner.device, stream_index=stream_index)
    results: list[CheckResult | None] = [None] * len(names)
    with closing(runner.run(check, names, ordered=False)) as outcomes:  # stopped at once by an error in on_result
        for outcome in outcomes:
            result = _result_of(outcome, names[outcome.position], str(runner.device))
            results[outcome.position] = result
            if on_result is not None:
                on_result(result)
    return [result for result in results if result is not None]


def _result_of(outcome: Outcome[CheckResult], path: str, device: str) -> CheckResult:
    """The check result of one video's outcome: a file that crashed its worker, or a failure of
    vclip itself (check_video reports every problem of the file), is unreadable."""
    if outcome.value is not None:
        return outcome.value
    if outcome.crashed:
        problem = outcome.crash_problem()
    else:
        problem = f"vclip failed on it ({type(outcome.error).__name__}: {outcome.error}); please report it"
    return CheckResult(path, "unreadable", error=problem, device=device)


def _check_on_cpu(index: VideoIndex, started: float) -> CheckResult:
    """One single-threaded PyAV pass over every packet; frames matched to the index by pts.

    One thread: FFmpeg's slice threads turn its error concealment (and so its damage flags) off,
    and its frame threads were seen to lose decode errors; parallelism comes from checking
    several videos at once."""
    frame_of_pts = dict(zip(index.pts.tolist(), range(index.num_frames)))
    frame_of_packet_pts = dict(zip(index.packet_pts.tolist(), index.packet_frame.tolist()))
    seen = np.zeros(index.num_frames, dtype=bool)
    damage = _Damage()
    last_pts = int(index.pts[-1])
    beyond: set[int] = set()  # pts of frames shown after the last indexed one: a cut-off end the index left out

    def match(frame: av.VideoFrame) -> None:
        number = frame_of_pts.get(frame.pts)
        if number is None:
            if frame.pts is not None and frame.pts > last_pts:
                beyond.add(frame.pts)
            return
        seen[number] = True
        if frame.is_corrupt:
            damage.add("damaged, concealed by the decoder", [number])
            _add_decoded_from(index, number, damage)

    with av.logging.Capture(local=True), open_container(index.path) as container:  # FFmpeg's own log: not shown
        stream = container.streams[index.stream_index]
        context = stream.codec_context
        context.thread_type = "SLICE"
        context.thread_count = 1
        packets = container.demux(stream)
        while True:
            try:
                packet = next(packets)
            except StopIteration:
                break
            except av.error.FFmpegError as error:
                damage.add(f"demuxing stopped ({error.strerror})", np.flatnonzero(~seen))
                break
            if not packet.size:  # the demuxer's end-of-stream packet; the decoder is flushed below
                continue
            try:
                frames = context.decode(packet)
            except av.error.FFmpegError as error:
                frame = frame_of_packet_pts.get(packet.pts, -1)
                damage.add(f"decode error ({error.strerror})", [frame] if frame >= 0 else [])
                if frame >= 0:
                    _add_decoded_from(index, frame, damage)
                continue
            for frame in frames:
                match(frame)
        try:
            for frame in context.decode(None):
                match(frame)
        except av.error.FFmpegError as error:
            damage.add(f"decode error at the end ({error.strerror})", [])
        if beyond:
            damage.notes.append(f"{len(beyond)} frames after the last one it can show come out of a cut-off end "
                                "(truncated: its index leaves them out)")
        _check_length(index, container, stream, damage)
    already = damage.frames()
    missing = [int(f) for f in np.flatnonzero(~seen) if int(f) not in already]
    if missing:
        damage.add("never came out of the decoder", missing)
    return damage.result(index.path, index.num_frames, "cpu", started)


def _add_decoded_from(index: VideoIndex, frame: int, damage: _Damage) -> None:
    """Add the frames decoded after damaged ``frame`` up to the next keyframe (decode order), when
    other pictures reference it: their pictures are built on its damage."""
    packet = int(index.frame_packet[frame])
    if not index.packet_is_reference[packet]:
        return
    later_keys = np.flatnonzero(index.packet_is_keyframe[packet + 1:])
    end = packet + 1 + int(later_keys[0]) if later_keys.size else index.num_packets
    followers = [int(f) for f in index.packet_frame[packet + 1:end] if f >= 0]
    if followers:
        damage.add(f"decoded from damaged frame {frame}", followers)


def _check_length(index: VideoIndex, container, stream, damage: _Damage) -> None:
    """Note frames the container announces but the file no longer holds (a cut-off end)."""
    if index.header_frame_count and index.header_frame_count > index.num_frames:
        damage.notes.append(f"the container lists {index.header_frame_count} frames, the file holds "
                            f"{index.num_frames} (truncated?)")
        return
    if stream.duration:
        announced = float(stream.duration * stream.time_base)
    elif container.duration and len(container.streams) == 1:  # the container's length is this stream's
        announced = container.duration / 1_000_000
    else:
        return
    frame_seconds = 1 / index.average_fps if index.average_fps else 0.0
    covered = index.end_seconds - index.start_seconds
    if announced - covered > 2 * frame_seconds + 0.001:
        damage.notes.append(f"the container says the stream lasts {announced:.3f} s, its frames cover "
                            f"{covered:.3f} s: about {round((announced - covered) * index.average_fps)} frames "
                            "after the last one are missing (truncated?)")


def _check_on_gpu(index: VideoIndex, device: Device, started: float) -> CheckResult:
    """Every frame through VideoDecoder, chunk by chunk; a chunk that fails is retried group of
    pictures by group of pictures so that only the bad ones are reported."""
    from .decoder import VideoDecoder

    decoder = VideoDecoder(index.path, stream_index=index.stream_index, device=device)
    scaling_factor = min(1.0, _GPU_CHECK_WIDTH / index.width)
    damage = _Damage()
    for start, stop in keyframe_chunks(index, _GPU_CHUNK_FRAMES):
        try:
            decoder.get_frames(np.arange(start, stop), scaling_factor=scaling_factor)
            continue
        except CorruptVideoError:
            pass
        for group_start, group_stop in keyframe_chunks(index, 1):
            if group_stop <= start or group_start >= stop:
                continue
            try:
                decoder.get_frames(np.arange(group_start, group_stop), scaling_factor=scaling_factor)
            except CorruptVideoError as error:
                damage.add(error.problem, range(group_start, group_stop))
    with open_container(index.path) as container:
        _check_length(index, container, container.streams[index.stream_index], damage)
    return damage.result(index.path, index.num_frames, decoder.device, started)
