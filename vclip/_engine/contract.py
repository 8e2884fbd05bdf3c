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
from ..errors import CorruptVideoError, VideoError
from ..plan import DecodePlan, plan_decode
from .packets import read_packets
from .pipeline import (
    Conversion,
    DecodeStats,
    VideoJob,
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
        default_workers: Jobs worth running at once (threads of a :class:`~vclip._engine.runner.JobRunner`).
    """

    device: Device
    default_workers: int

    def empty(self, shape: tuple[int, ...], dtype: str) -> Any:
        """An uninitialised output buffer on :attr:`device` (NumPy or CuPy array)."""
        ...

    def decode_job(self, job: VideoJob, conversion: Conversion, output: Any, stats: DecodeStats) -> Completion | None:
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
    plan: DecodePlan, job: VideoJob, decoder: PictureDecoder, converter: PictureConverter, stats: DecodeStats
) -> None:
    """Execute ``plan`` for ``job``: every requested frame decoded once and converted into every
    slot that wants it; the caller then calls ``converter.finish()``.

    Raises:
        CorruptVideoError: Packets could not be read or decoded, or requested frames never came out.
    """
    index = job.index
    lookups = video_lookups(index)
    destinations = frame_destinations(job.targets)
    frame_of_pts = lookups.frame_of_pts
    wanted = frozenset(plan.frames.tolist())
    remaining = set(wanted)
    convert_seconds = 0.0

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
        for segment in plan.segments:
            started = time.perf_counter()
            packets = segment.packets.tolist()
            run = PacketRun(
                read_packets(index, segment.packets),
                [lookups.packet_pts[number] for number in packets],
                [lookups.packet_frame[number] not in wanted for number in packets],
            )
            decoding = time.perf_counter()
            converted_before = convert_seconds
            try:
                deliver(decoder.send(run))
                deliver(decoder.flush())
            except VideoError:
                raise
            except Exception as error:  # the decoder's own error type: name the file and the frames
                raise CorruptVideoError(
                    index.path,
                    f"decoding frames {int(segment.frames[0])}-{int(segment.frames[-1])} failed ({_describe(error)})",
                ) from error
            stats.add(
                segments=1, packets_sent=len(packets), demux_seconds=decoding - started,
                decode_seconds=time.perf_counter() - decoding - (convert_seconds - converted_before),
            )
    finally:
        decoder.close()
    if remaining:
        missing = sorted(remaining)
        raise CorruptVideoError(index.path, f"frames {missing[:5]} could not be decoded ({len(missing)} missing)")
    stats.add(
        videos=1, frames_requested=plan.frames_requested,
        frames_delivered=sum(target.frames.size for target in job.targets), convert_seconds=convert_seconds,
    )


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
    def open_job(self, job: VideoJob, conversion: Conversion, output: Any) -> tuple[PictureDecoder, PictureConverter]:
        """The decoder and converter for one job."""

    def plan(self, job: VideoJob) -> DecodePlan:
        return plan_decode(job.index, [target.frames for target in job.targets],
                           skip_non_reference=self.skip_non_reference)

    def decode_job(self, job: VideoJob, conversion: Conversion, output: Any, stats: DecodeStats) -> Completion | None:
        decoder, converter = self.open_job(job, conversion, output)
        execute_plan(self.plan(job), job, decoder, converter, stats)
        return converter.finish()

    def close(self) -> None:  # noqa: B027 (nothing to release by default)
        """Nothing to release: in-process backends hold no processes or shared memory."""
