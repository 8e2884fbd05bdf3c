"""The decode engine: the backend contract, and the one loop that executes a decode plan.

A backend turns video jobs (the clips wanted from one video) into output clips. Every in-process
backend runs the same loop, :func:`execute_plan`: read the packets of each plan segment, send them
to a :class:`PictureDecoder`, flush it, and hand every picture that some clip wants, once, to a
:class:`PictureConverter` that writes it into the output. A backend supplies only those two
device-specific halves, so the two can run on different devices: PyAV decoding with NumPy
conversion (CPU), NVDEC decoding with the CUDA kernel (GPU), and, by the same contract, a CPU
decoder whose planes the CUDA kernel converts.

Backends that decode elsewhere (worker processes) implement :class:`Backend` directly.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from .._device import Device
from .._index.packets import read_packets
from .._index.record import VideoIndex
from ..errors import CorruptVideoError, VideoError
from ..plan import DecodePlan, plan_decode
from .pipeline import (
    Conversion,
    DecodeStats,
    VideoRequest,
    frame_destinations,
    video_lookups,
)

__all__ = ["Backend", "Completion", "PacketRun", "PictureConverter", "PictureDecoder", "PlanBackend", "execute_plan"]


class Completion(Protocol):
    """What a backend returns when the output of a job is written asynchronously (a CUDA event)."""

    def synchronize(self) -> None: ...


class Backend(Protocol):
    """What decodes video jobs into output buffers: the contract every backend keeps.

    Attributes:
        device: Where the output buffers live.
        default_workers: Jobs worth running at once (threads of a :class:`~vclip._engine.dispatch.ThreadDispatcher`).
    """

    device: Device
    default_workers: int

    def empty(self, shape: tuple[int, ...], dtype: str) -> Any:
        """An uninitialised output buffer on :attr:`device` (NumPy or CuPy array)."""
        ...

    def decode_video(self, job: VideoRequest, conversion: Conversion, output: Any,
                     stats: DecodeStats) -> Completion | None:
        """Decode the clips of ``job`` into their slots of ``output``; thread-safe.

        Returns:
            None when the frames are written on return, else a :class:`Completion` to wait on.

        Raises:
            VideoError: This video cannot be decoded (the caller applies its error policy).
        """
        ...

    def close(self) -> None:
        """Release what this backend holds (worker processes, shared memory); idempotent."""
        ...


@dataclass(frozen=True)
class PacketRun:
    """The packets of one plan segment in decode order, as a decoder receives them.

    Attributes:
        payloads: Compressed bytes of each packet, as stored in the container.
        pts: Presentation timestamp of each packet (stream time base).
        discardable: True where no requested frame is the packet's own picture (it may still be
            needed as a reference, so it is decoded, but its picture need not be returned).
    """

    payloads: list[bytes]
    pts: list[int]
    discardable: list[bool]


class PictureDecoder(ABC):
    """The decoding half of a backend, for one job: compressed packets in, pictures out.

    Pictures are yielded as ``(pts, picture)``, pts None when the decoder has none. A picture is
    only valid until the decoder is asked for the next one; the executor converts it before that.
    """

    @abstractmethod
    def send(self, packets: PacketRun) -> Iterable[tuple[int | None, Any]]:
        """Decode one segment's packets (starting at a keyframe); yield pictures as they come out."""

    @abstractmethod
    def flush(self) -> Iterable[tuple[int | None, Any]]:
        """End of segment: yield the pictures still held, then be ready for the next keyframe."""

    def recover(self) -> bool:
        """After a segment failed: get ready for the next segment's keyframe. False (the default)
        when this decoder cannot go on; the frames not delivered yet are then lost."""
        return False

    def damaged_packet(self, packets: PacketRun) -> int | None:
        """Position in ``packets`` of the first packet that cannot be decoded (decoding them again,
        one at a time, after a segment failed), or None when this decoder cannot tell."""
        return None

    def close(self) -> None:  # noqa: B027 (optional hook)
        """Called once after the last segment, also on errors."""


class PictureConverter(ABC):
    """The converting half of a backend, for one job: a decoded picture into its output slots."""

    @abstractmethod
    def convert(self, picture: Any, destinations: list[tuple[int, int]]) -> None:
        """Write ``picture`` into each ``(target number, position in clip)`` of the job."""

    def finish(self) -> Completion | None:
        """After the last picture: None when all is written, or what to wait on."""
        return None


def execute_plan(
    plan: DecodePlan, job: VideoRequest, decoder: PictureDecoder, converter: PictureConverter, stats: DecodeStats
) -> None:
    """Execute ``plan`` for ``job``: every requested frame decoded once and converted into every
    slot that wants it; the caller then calls ``converter.finish()``.

    A damaged packet costs the frames decoded from it up to the next keyframe, where decoding
    starts afresh (when the decoder can go on): the error then names the damaged frame and carries
    the frames lost (``CorruptVideoError.frames``), so that the clips that do not need them can be
    kept.

    Raises:
        CorruptVideoError: Packets could not be read or decoded, or requested frames never came out.
    """
    index = job.index
    lookups = video_lookups(index)
    destinations = frame_destinations(job.targets)
    frame_of_pts = lookups.frame_of_pts
    wanted = frozenset(plan.frames.tolist())
    remaining = set(wanted)
    suspect: set[int] = set()  # delivered, but decoded after a damaged packet of their group
    convert_seconds = 0.0
    damage: tuple[int | None, Exception] | None = None  # the first damaged packet (None: unknown) and its error

    def deliver(pictures: Iterable[tuple[int | None, Any]]) -> None:
        nonlocal convert_seconds
        for pts, picture in pictures:
            number = frame_of_pts.get(pts)
            if number is not None and number in remaining:
                remaining.discard(number)
                started = time.perf_counter()
                converter.convert(picture, destinations[number])
                convert_seconds += time.perf_counter() - started

    try:
        runs = [segment.packets for segment in plan.segments]
        while runs:
            packets = runs.pop(0)
            started = time.perf_counter()
            numbers = packets.tolist()
            run = PacketRun(
                read_packets(index, packets),
                [lookups.packet_pts[number] for number in numbers],
                [lookups.packet_frame[number] not in wanted for number in numbers],
            )
            decoding = time.perf_counter()
            converted_before = convert_seconds
            try:
                deliver(decoder.send(run))
                deliver(decoder.flush())
            except VideoError:
                raise
            except Exception as error:  # the decoder's own error type: the frames after the damage are lost
                at = decoder.damaged_packet(run)
                damage = damage or ((None if at is None else numbers[at]), error)
                later_keys = [] if at is None else [k for k in range(at + 1, len(numbers))
                                                    if index.packet_is_keyframe[numbers[k]]]
                end = later_keys[0] if later_keys else len(numbers)
                suspect.update(frame for frame in (lookups.packet_frame[n] for n in numbers[at or 0:end])
                               if frame in wanted)
                if not decoder.recover():
                    break
                if later_keys:  # the next group of pictures of the run starts afresh
                    runs.insert(0, packets[end:])
                continue
            stats.add(
                segments=1, packets_sent=len(numbers), demux_seconds=decoding - started,
                decode_seconds=time.perf_counter() - decoding - (convert_seconds - converted_before),
            )
        if remaining or suspect:
            raise _lost_frames(index, sorted(remaining | suspect), damage)
    finally:
        decoder.close()
    stats.add(
        videos=1, frames_requested=plan.frames_requested,
        frames_delivered=sum(target.frames.size for target in job.targets), convert_seconds=convert_seconds,
    )


def _lost_frames(index: VideoIndex, missing: list[int],
                 damage: tuple[int | None, Exception] | None) -> CorruptVideoError:
    """The error for requested frames lost: it names the damaged frame where the decoder could
    find it, and carries the frames lost (``frames``)."""
    shown = f"{missing[:5]}{'...' if len(missing) > 5 else ''} ({len(missing)} of the frames asked for)"
    if damage is None:
        return CorruptVideoError(index.path, f"frames {shown} could not be decoded", frames=missing)
    packet, error = damage
    if packet is None:
        return CorruptVideoError(index.path, f"decoding failed ({_describe(error)}): frames {shown} are lost",
                                 frames=missing)
    frame = int(index.packet_frame[packet])
    damaged = f"frame {frame}" if frame >= 0 else f"packet {packet} (decode order; a picture not shown)"
    return CorruptVideoError(index.path, f"{damaged} cannot be decoded ({_describe(error)}): frames {shown} "
                                         "are lost with it", frames=missing)


def _describe(error: Exception) -> str:
    return getattr(error, "strerror", None) or f"{type(error).__name__}: {error}"


class PlanBackend(ABC):
    """A backend that decodes in this process: it plans each job and runs :func:`execute_plan`
    with the decoder and converter it makes for the job."""

    device: Device
    default_workers: int

    def __init__(self, *, skip_non_reference: bool = True):
        self.skip_non_reference = skip_non_reference

    @abstractmethod
    def empty(self, shape: tuple[int, ...], dtype: str) -> Any: ...

    @abstractmethod
    def open_job(self, job: VideoRequest, conversion: Conversion,
                 output: Any) -> tuple[PictureDecoder, PictureConverter]:
        """The decoder and converter for one job."""

    def plan(self, job: VideoRequest) -> DecodePlan:
        return plan_decode(job.index, [target.frames for target in job.targets],
                           skip_non_reference=self.skip_non_reference)

    def decode_video(self, job: VideoRequest, conversion: Conversion, output: Any,
                     stats: DecodeStats) -> Completion | None:
        decoder, converter = self.open_job(job, conversion, output)
        execute_plan(self.plan(job), job, decoder, converter, stats)
        return converter.finish()

    def close(self) -> None:  # noqa: B027 (nothing to release by default)
        """Nothing to release: in-process backends hold no processes or shared memory."""
