"""CPU backend: PyAV (FFmpeg) decoding, NumPy conversion.

Without a transform, frames are FFmpeg's own rgb24 conversion with nearest chroma, bit for bit
(turned as the display matrix says, as FFmpeg's autorotation does):
for 8-bit 4:2:0 that is what FFmpeg always does; for 10-bit it asks FFmpeg's scaler for point
sampling, as its default would blend neighbouring chroma samples where 8-bit and the CUDA kernel
do not. With a transform, the NumPy twin of the CUDA kernel runs on the decoded 4:2:0 planes, so
CPU and GPU agree within rounding.

A picture FFmpeg flags as corrupt (it concealed damage: missing slices filled from neighbours or
from the previous picture) is damage, as a decode error is: the decoder raises
:class:`_ConcealedPicture`, and :func:`~vclip._engine.contract.execute_plan` loses that frame and
every frame decoded after it up to the next keyframe. ``accept_concealed=True`` delivers such
pictures as FFmpeg made them.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import av
import numpy as np
from av.container import InputContainer

from .._bytes.sources import is_local, open_container
from .._device import CPU
from .._index.record import VideoIndex
from .._machine import usable_cores
from ..errors import CorruptVideoError
from ..transforms import FrameGeometry
from .contract import PacketRun, PictureConverter, PictureDecoder, PlanBackend, execute_plan
from .host_fast import Blocks, block_means, block_row_sums, frame_blocks, planes_to_rgb_tensor, yuv420_to_rgb_tensor
from .layout import frame_view
from .pipeline import ClipTarget, Conversion, DecodeStats, VideoRequest, needs_any
from .reference import resample_mode

_NATIVE_420 = {"yuv420p": 8, "yuvj420p": 8, "yuv420p10le": 10, "yuv420p12le": 12}
_BLOCK_BATCH = 8  # pictures whose block sums BlockConverter finishes at once (more fall out of cache)
_BLOCK_BATCH_MAX_PIXELS = 64 * 64  # BlockConverter's largest output picture: larger ones convert quicker alone


def _video_context(context: av.CodecContext, index: VideoIndex) -> av.VideoCodecContext:
    if not isinstance(context, av.VideoCodecContext):  # an index is always of a video stream
        raise CorruptVideoError(index.path, f"stream {index.stream_index} is not a video stream")
    return context


DEFAULT_WORKERS = min(8, usable_cores())
"""Decode threads of the CPU backend when none are asked for."""

# What FFmpeg's demuxer sets on a decoder beyond the bitstream: a context made for a later segment
# gets these from the first one (avcodec_parameters_to_context's fields, as PyAV exposes them).
_CONTEXT_PARAMETERS = (
    "extradata", "width", "height", "codec_tag", "pix_fmt", "bits_per_coded_sample", "sample_aspect_ratio",
    "color_range", "colorspace", "color_primaries", "color_trc", "framerate", "field_order",
)


def _context_parameters(context: av.VideoCodecContext) -> dict[str, object]:
    """The :data:`_CONTEXT_PARAMETERS` of ``context`` that PyAV can read. A codec tag that is not
    ASCII (an MPEG-TS registration descriptor may set any four bytes) is left out: PyAV cannot
    read it as text, and the decoders vclip opens do not need it."""
    parameters = {}
    for name in _CONTEXT_PARAMETERS:
        try:
            parameters[name] = getattr(context, name)
        except UnicodeDecodeError:
            continue
    return parameters


class _ConcealedPicture(Exception):
    """FFmpeg delivered a picture it flagged as corrupt: it concealed damage in it (a decoder error
    to :func:`~vclip._engine.contract.execute_plan`, which names the frame and the frames lost)."""

    strerror = "damaged; the decoder concealed it"

    def __init__(self, pts: int | None):
        super().__init__(f"the picture at pts {pts} is damaged; the decoder concealed it")
        self.pts = pts


class PyAVDecoder(PictureDecoder):
    """FFmpeg's decoder for one video stream, fed the plan's packets; pictures are ``av.VideoFrame``.

    With frame threads (``threads`` other than 1) every segment after the first gets a codec context
    of its own, made like the first: FFmpeg's frame-threaded decoders are not safe to reuse after a
    flush, and a damaged keyframe arriving at a flushed VP9 context crashed the process (SIGSEGV in
    libavcodec; issue 25). A new context costs about 0.2 ms; a segment decodes a GOP. After a
    segment that failed, the next one gets a new context too, whatever the threads.

    A picture FFmpeg flags as corrupt raises :class:`_ConcealedPicture` unless ``accept_concealed``.
    Damage is then looked for with one decode thread whatever ``threads`` says: FFmpeg's frame
    threads drop the damage flags and decode errors of the pictures still in flight when a segment
    is flushed (the last few of every segment, up to one per thread: measured with H.264 at 2 to 8
    threads), so a damaged last picture would come out unflagged.
    """

    def __init__(self, index: VideoIndex, *, threads: int = 0, accept_concealed: bool = False):
        if is_local(index.path) or not index.packets_addressable:
            self._container: InputContainer | None = open_container(index.path)
            try:
                self._context = _video_context(self._container.streams[index.stream_index].codec_context, index)
            except BaseException:
                self._container.close()
                raise
        else:  # a remote or in-memory MP4/Matroska: the index has what the decoder needs, read no header
            self._container = None
            self._context = _video_context(av.CodecContext.create(index.codec, "r"), index)
            self._context.extradata = index.extradata or None
            self._context.width, self._context.height = index.width, index.height
        self._index = index
        self._threads = threads if accept_concealed else 1
        self._accept_concealed = accept_concealed
        self._parameters = _context_parameters(self._context)
        self._stale = False  # the context must not decode the next segment: a new one will
        _set_threads(self._context, self._threads)

    def send(self, packets: PacketRun) -> Iterable[tuple[int | None, av.VideoFrame]]:
        if self._stale:
            self._context = self._fresh_context(self._threads)
            self._stale = False
        decode = self._context.decode
        for payload, pts in zip(packets.payloads, packets.pts):
            for frame in decode(_packet(payload, pts)):
                yield self._checked(frame)

    def flush(self) -> Iterable[tuple[int | None, av.VideoFrame]]:
        try:
            for frame in self._context.decode(None):
                yield self._checked(frame)
        finally:
            self._context.flush_buffers()
            self._stale = self._stale or self._threads != 1

    def recover(self) -> bool:
        self._stale = True  # whatever state the failure left it in
        return True

    def _checked(self, frame: av.VideoFrame) -> tuple[int | None, av.VideoFrame]:
        if frame.is_corrupt and not self._accept_concealed:
            raise _ConcealedPicture(frame.pts)
        return frame.pts, frame

    def damaged_packet(self, packets: PacketRun) -> int | None:
        """The first packet a single-threaded decoder refuses, or whose picture it flags as
        concealed (frame threads report an error some packets after the one that caused it)."""
        context = self._fresh_context(1)
        position_of_pts = {pts: position for position, pts in enumerate(packets.pts)}

        def concealed(frames: Iterable[av.VideoFrame], position: int) -> int | None:
            """The packet of the first picture of ``frames`` flagged as concealed (at most ``position``,
            the packet sent last), or None."""
            for frame in frames:
                if frame.is_corrupt and not self._accept_concealed:
                    own = position if frame.pts is None else position_of_pts.get(frame.pts, position)
                    return min(position, own)
            return None

        for position, (payload, pts) in enumerate(zip(packets.payloads, packets.pts)):
            try:
                damaged = concealed(context.decode(_packet(payload, pts)), position)
            except av.error.FFmpegError:
                return position
            if damaged is not None:
                return damaged
        try:
            return concealed(context.decode(None), len(packets.pts) - 1)
        except av.error.FFmpegError:
            return None

    def _fresh_context(self, threads: int) -> av.VideoCodecContext:
        context = _video_context(av.CodecContext.create(self._context.codec, "r"), self._index)
        for name, value in self._parameters.items():
            if value is not None:
                setattr(context, name, value)
        _set_threads(context, threads)
        return context

    def close(self) -> None:
        if self._container is not None:
            self._container.close()


def _packet(payload: bytes, pts: int) -> av.Packet:
    packet = av.Packet(len(payload))  # FFmpeg's own allocation: zeroed padding after the data
    packet.update(payload)
    packet.pts = pts
    return packet


def _set_threads(context: av.VideoCodecContext, threads: int) -> None:
    context.thread_count = threads
    context.thread_type = "AUTO" if threads != 1 else "SLICE"


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
        # numpy's stubs take no buffer-protocol object before Python 3.12; a plane is one.
        codes = np.frombuffer(plane, dtype)  # type: ignore[call-overload]
        planes.append(codes.reshape(plane.height, row)[:, : plane.width])
    return planes[0], planes[1], planes[2], bit_depth


class HostConverter(PictureConverter):
    """``av.VideoFrame`` into NumPy clips: FFmpeg's rgb24 when native, else the kernel's NumPy twin."""

    def __init__(self, job: VideoRequest, conversion: Conversion, output: np.ndarray):
        self._index = job.index
        self._targets: tuple[ClipTarget, ...] = job.targets
        self._conversion = conversion
        self._output = output
        self._scale, self._bias = conversion.spec.value_scale_bias()

    def convert(self, picture: av.VideoFrame, destinations: list[tuple[int, int]]) -> None:
        index = self._index
        _check_size(picture, index)
        output, targets, layout = self._output, self._targets, self._conversion.layout
        if self._conversion.native_rgb24:
            rgb = picture.to_ndarray(format="rgb24", interpolation="POINT")
            for target, position in destinations:
                output[targets[target].slot, position] = targets[target].geometry.orientation.apply(rgb)
            return
        spec = self._conversion.spec
        y, u, v, bit_depth = yuv420_planes(picture, index.color_range)
        converted: dict[Any, np.ndarray] = {}  # one conversion per distinct draw (several clips may share one)
        for target, position in destinations:
            draw = targets[target].draw_at(position)
            if draw not in converted:
                geometry, color = draw
                converted[draw] = yuv420_to_rgb_tensor(
                    y, u, v, bit_depth=bit_depth, matrix=index.color_matrix, color_range=index.color_range,
                    geometry=geometry, scale=self._scale, bias=self._bias, dtype=spec.dtype, antialias=spec.antialias,
                    interpolation=spec.interpolation, color=color,
                )
            frame_view(output[targets[target].slot], layout, position)[...] = converted[draw]


class BlockConverter(PictureConverter):
    """``av.VideoFrame`` into NumPy clips for a plain downscale by a whole factor (every clip one
    geometry, :func:`~vclip._engine.host_fast.frame_blocks`, no colour change): the values of
    :class:`HostConverter`, bit for bit, with most of the twin's work done for
    :data:`_BLOCK_BATCH` pictures at once (each picture's rows are summed while it is valid)."""

    def __init__(self, job: VideoRequest, conversion: Conversion, output: np.ndarray, geometry: FrameGeometry,
                 blocks: tuple[Blocks, Blocks]):
        self._index = job.index
        self._slots = [target.slot for target in job.targets]
        self._conversion = conversion
        self._output = output
        self._blocks = blocks
        self._transpose = geometry.orientation.transpose
        self._scale, self._bias = conversion.spec.value_scale_bias()
        self._pending: list[tuple[list[np.ndarray], list[tuple[int, int]]]] = []  # row sums, destinations
        self._bit_depth = 0  # of the pending pictures

    @classmethod
    def of(cls, job: VideoRequest, conversion: Conversion, output: np.ndarray) -> BlockConverter | None:
        """The converter of ``job`` when every frame of its clips has one draw that it takes (a small
        picture: :data:`_BLOCK_BATCH_MAX_PIXELS`), else None."""
        draws = {draw for target in job.targets for draw in target.frame_draws or [(target.geometry, target.color)]}
        if conversion.native_rgb24 or len(draws) != 1:
            return None
        geometry, color = draws.pop()
        if geometry.output_width * geometry.output_height > _BLOCK_BATCH_MAX_PIXELS:
            return None
        blocks = frame_blocks(geometry, resample_mode(conversion.spec.antialias, conversion.spec.interpolation))
        if blocks is None or color.operations:
            return None
        return cls(job, conversion, output, geometry, blocks)

    def convert(self, picture: av.VideoFrame, destinations: list[tuple[int, int]]) -> None:
        _check_size(picture, self._index)
        y, u, v, bit_depth = yuv420_planes(picture, self._index.color_range)
        if bit_depth != self._bit_depth:
            self.finish()
            self._bit_depth = bit_depth
        rows = self._blocks[0]
        sums = [block_row_sums(plane, rows, subsampling) for plane, subsampling in ((y, 1), (u, 2), (v, 2))]
        self._pending.append((sums, destinations))
        if len(self._pending) == _BLOCK_BATCH:
            self.finish()

    def finish(self) -> None:
        """Convert and write the pictures still pending (also after frames were lost)."""
        if not self._pending:
            return
        index, spec = self._index, self._conversion.spec
        planes = [block_means(np.stack([sums[k] for sums, _ in self._pending]), *self._blocks, subsampling)
                  for k, subsampling in enumerate((1, 2, 2))]
        frames = planes_to_rgb_tensor(planes, bit_depth=self._bit_depth, matrix=index.color_matrix,
                                      color_range=index.color_range, transpose=self._transpose, scale=self._scale,
                                      bias=self._bias, dtype=spec.dtype)
        for frame, (_, destinations) in zip(frames, self._pending):
            for target, position in destinations:
                frame_view(self._output[self._slots[target]], self._conversion.layout, position)[...] = frame
        self._pending.clear()


def _check_size(picture: av.VideoFrame, index: VideoIndex) -> None:
    if (picture.width, picture.height) != (index.width, index.height):
        raise CorruptVideoError(index.path, f"a frame is {picture.width}x{picture.height}, the stream "
                                            f"{index.width}x{index.height} (the size changes mid-stream)")


class CpuBackend(PlanBackend):
    """Decodes with PyAV on the CPU; outputs NumPy arrays.

    ``threads``: FFmpeg's threads per decoder (0: its choice), used with ``accept_concealed``
    only; damage is looked for with one thread a decoder (see :class:`PyAVDecoder`).
    """

    device = CPU

    def __init__(self, *, threads: int = 0, skip_non_reference: bool = True, accept_concealed: bool = False):
        super().__init__(skip_non_reference=skip_non_reference)
        self.threads = threads
        self.accept_concealed = accept_concealed
        self.default_workers = DEFAULT_WORKERS

    def empty(self, shape: tuple[int, ...], dtype: str) -> np.ndarray:
        return np.empty(shape, dtype=dtype)

    def open_job(self, job: VideoRequest, conversion: Conversion,
                 output: np.ndarray) -> tuple[PyAVDecoder, HostConverter | BlockConverter]:
        converter = BlockConverter.of(job, conversion, output) or HostConverter(job, conversion, output)
        return PyAVDecoder(job.index, threads=self.threads, accept_concealed=self.accept_concealed), converter

    def decode_video(self, job: VideoRequest, conversion: Conversion, output: np.ndarray, stats: DecodeStats) -> None:
        decoder, converter = self.open_job(job, conversion, output)
        try:
            execute_plan(self.plan(job), job, decoder, converter, stats)
        finally:  # also when frames were lost: the clips that do not need them are kept
            started = time.perf_counter()
            converter.finish()
            stats.add(convert_seconds=time.perf_counter() - started)


def decode_then_upload(cpu: CpuBackend, job: VideoRequest, conversion: Conversion, output: Any, stats: DecodeStats,
                       stream: Any) -> None:
    """Decode and convert ``job`` on the CPU, then copy its clips into ``output`` on the GPU (a CuPy
    array) on ``stream``: for videos the GPU path cannot take."""
    targets = tuple(replace(t, slot=k) for k, t in enumerate(job.targets))
    shape = conversion.clip_shape(targets[0].frames.size, targets[0].geometry)
    host = np.empty((len(targets),) + shape, dtype=output.dtype)
    try:
        cpu.decode_video(VideoRequest(job.index, targets), conversion, host, stats)
    except CorruptVideoError as error:  # the clips that do not need the lost frames were decoded
        if error.frames is not None:
            for k, target in enumerate(job.targets):
                if not needs_any(target, error.frames):
                    output[target.slot].set(host[k], stream=stream)
        raise
    for k, target in enumerate(job.targets):
        output[target.slot].set(host[k], stream=stream)
