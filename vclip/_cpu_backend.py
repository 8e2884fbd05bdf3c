"""CPU backend: PyAV (FFmpeg) decoding of a decode plan; NumPy for the transform.

Without a transform, frames are FFmpeg's own rgb24 conversion with nearest chroma, bit for bit:
for 8-bit 4:2:0 that is what FFmpeg always does; for 10-bit it asks FFmpeg's scaler for point
sampling, as its default would blend neighbouring chroma samples where 8-bit and the CUDA kernel
do not. With a transform, the NumPy twin of the CUDA kernel runs on the decoded 4:2:0 planes, so
CPU and GPU agree within rounding.
"""

from __future__ import annotations

import time
from typing import Callable

import av
import numpy as np

from ._packets import read_packets
from ._pipeline import DecodeStats, VideoJob, frame_destinations, frame_view, video_lookups
from ._reference import yuv420_to_rgb_tensor
from .errors import CorruptVideoError
from .index import VideoIndex, open_container
from .plan import DecodePlan, plan_decode
from .transforms import TransformSpec

_NATIVE_420 = {"yuv420p": 8, "yuvj420p": 8, "yuv420p10le": 10, "yuv420p12le": 12}


def decode_plan(plan: DecodePlan, deliver: Callable[[int, av.VideoFrame], None], *, threads: int = 0,
                stats: DecodeStats | None = None) -> float:
    """Decode every segment of ``plan`` and hand each requested frame to ``deliver`` once.

    Returns:
        Seconds spent reading packets (demux).

    Raises:
        CorruptVideoError: The bitstream could not be decoded, or requested frames never came out.
    """
    index = plan.index
    lookups = video_lookups(index)
    demux_seconds = 0.0
    with open_container(index.path) as container:
        context = container.streams[index.stream_index].codec_context
        context.thread_count = threads
        context.thread_type = "AUTO" if threads != 1 else "SLICE"
        for segment in plan.segments:
            started = time.perf_counter()
            data = read_packets(index, segment.packets)
            reading = time.perf_counter() - started
            demux_seconds += reading
            if stats is not None:
                stats.add(demux_seconds=reading, segments=1, packets_sent=segment.packets.size)
            wanted = set(segment.frames.tolist())
            try:
                for number, payload in zip(segment.packets.tolist(), data):
                    packet = av.Packet(len(payload))  # FFmpeg's own allocation: zeroed padding after the data
                    packet.update(payload)
                    packet.pts = lookups.packet_pts[number]
                    _deliver_frames(context.decode(packet), lookups.frame_of_pts, wanted, deliver)
                _deliver_frames(context.decode(None), lookups.frame_of_pts, wanted, deliver)
            except av.error.FFmpegError as error:
                raise CorruptVideoError(
                    index.path,
                    f"decoding frames {int(segment.frames[0])}-{int(segment.frames[-1])} failed ({error.strerror})",
                ) from None
            finally:
                context.flush_buffers()
            if wanted:
                missing = sorted(wanted)
                raise CorruptVideoError(index.path, f"frames {missing[:5]} could not be decoded ({len(missing)} missing)")
    return demux_seconds


def _deliver_frames(frames, frame_of_pts: dict, wanted: set, deliver) -> None:
    for frame in frames:
        number = frame_of_pts.get(frame.pts)
        if number in wanted:
            wanted.discard(number)
            deliver(number, frame)


def yuv420_planes(frame: av.VideoFrame, color_range: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Y, U, V planes (integer codes) and bit depth of a frame, converted to 4:2:0 if needed."""
    bit_depth = _NATIVE_420.get(frame.format.name)
    if bit_depth is None:
        high = frame.format.components[0].bits > 8
        target = "yuv420p10le" if high else ("yuvj420p" if color_range == "full" else "yuv420p")
        frame = frame.reformat(format=target)
        bit_depth = _NATIVE_420[target]
    dtype = np.dtype(np.uint8 if bit_depth == 8 else "<u2")
    planes = []
    for plane in frame.planes:
        row = plane.line_size // dtype.itemsize
        planes.append(np.frombuffer(plane, dtype).reshape(plane.height, row)[:, : plane.width])
    return planes[0], planes[1], planes[2], bit_depth


class CpuBackend:
    """Decodes with PyAV on the CPU; outputs NumPy arrays."""

    device = "cpu"

    def __init__(self, *, threads: int = 0, skip_non_reference: bool = True):
        self.threads = threads
        self.skip_non_reference = skip_non_reference

    def empty(self, shape: tuple[int, ...], dtype: str) -> np.ndarray:
        return np.empty(shape, dtype=dtype)

    def decode_job(self, job: VideoJob, spec: TransformSpec | None, output: np.ndarray, stats: DecodeStats) -> None:
        """Decode the clips of ``job`` into their slots of ``output``."""
        index: VideoIndex = job.index
        targets = job.targets
        plan = plan_decode(index, [t.frames for t in targets], skip_non_reference=self.skip_non_reference)
        destinations = frame_destinations(targets)
        layout = spec.layout if spec is not None else "THWC"
        scale_bias = spec.value_scale_bias() if spec is not None else None
        convert_seconds = 0.0
        started = time.perf_counter()

        def deliver(number: int, frame: av.VideoFrame) -> None:
            nonlocal convert_seconds
            if (frame.width, frame.height) != (index.width, index.height):
                raise CorruptVideoError(index.path, f"frame {number} is {frame.width}x{frame.height}, the stream "
                                                    f"{index.width}x{index.height} (the size changes mid-stream)")
            converting = time.perf_counter()
            if spec is None:
                rgb = frame.to_ndarray(format="rgb24", interpolation="POINT")
                for target, position in destinations[number]:
                    output[targets[target].slot, position] = rgb
                convert_seconds += time.perf_counter() - converting
                return
            y, u, v, bit_depth = yuv420_planes(frame, index.color_range)
            converted = {}
            for target, position in destinations[number]:
                geometry = targets[target].geometry
                if geometry not in converted:
                    converted[geometry] = yuv420_to_rgb_tensor(
                        y, u, v, bit_depth=bit_depth, matrix=index.color_matrix, color_range=index.color_range,
                        geometry=geometry, scale=scale_bias[0], bias=scale_bias[1], dtype=spec.dtype,
                        antialias=spec.antialias,
                    )
                frame_view(output[targets[target].slot], layout, position)[...] = converted[geometry]
            convert_seconds += time.perf_counter() - converting

        demux_seconds = decode_plan(plan, deliver, threads=self.threads, stats=stats)
        stats.add(
            videos=1,
            frames_requested=plan.frames_requested,
            frames_delivered=sum(t.frames.size for t in targets),
            decode_seconds=time.perf_counter() - started - demux_seconds - convert_seconds,
            convert_seconds=convert_seconds,
        )
