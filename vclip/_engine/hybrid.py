"""CPU decoders feeding the GPU kernel: PyAV decodes, the fused CUDA kernel converts.

The decoding half is the CPU backend's :class:`~vclip._engine.cpu.PyAVDecoder`, executing the same
decode plans. The converting half, :class:`UploadConverter`, lays each decoded 4:2:0 picture out as
NVDEC does (NV12 for 8-bit, P016 with MSB-aligned samples for 10/12-bit: the Y plane, then the
interleaved UV plane, one pitch) while copying it into a pinned host buffer (interleaving U and V
costs nothing extra: it is the copy), uploads it asynchronously into a device staging buffer on the
worker thread's CUDA stream and launches :class:`~vclip._engine.kernel.KernelConverter`'s kernel
with the same arguments. The kernel then reads the same bytes NVDEC would have produced, so a clip
decoded here is byte-identical to the NVDEC one (H.264 and HEVC decoding are exact).

Each worker thread keeps a small ring of staging pairs (pinned host + device); a pair is reused once
the event recorded after its last kernel launch has fired, so packing picture n+1 overlaps the
upload and conversion of picture n.
"""

from __future__ import annotations

import threading
from typing import Any

import av
import numpy as np

from .._device import Device
from .._index_record import VideoIndex
from ..errors import CorruptVideoError
from .contract import Completion, PlanBackend, execute_plan
from .cpu import CpuBackend, PyAVDecoder, decode_then_upload, yuv420_planes
from .kernel import KernelConverter, KernelModule
from .pipeline import Conversion, DecodeStats, VideoJob

__all__ = ["UploadBackend", "UploadConverter", "pack_semi_planar", "semi_planar_shape"]

PITCH_ALIGNMENT = 256
"""Bytes each staged row is padded to (what cudaMallocPitch gives), so the kernel's vector loads
are aligned as on NVDEC surfaces."""

STAGING_DEPTH = 3
"""Staging pairs per worker thread: pictures in flight between packing and the kernel."""


def semi_planar_shape(width: int, height: int, bit_depth: int) -> tuple[tuple[int, int], np.dtype]:
    """Shape ``(rows, pitch in samples)`` and dtype of one NV12/P016 picture: ``height`` luma rows
    then ``ceil(height / 2)`` interleaved chroma rows, every row ``pitch`` samples."""
    dtype = np.dtype(np.uint8 if bit_depth == 8 else "<u2")
    row_bytes = 2 * ((width + 1) // 2) * dtype.itemsize
    pitch_bytes = -(-row_bytes // PITCH_ALIGNMENT) * PITCH_ALIGNMENT
    return (height + (height + 1) // 2, pitch_bytes // dtype.itemsize), dtype


def pack_semi_planar(y: np.ndarray, u: np.ndarray, v: np.ndarray, bit_depth: int, out: np.ndarray) -> None:
    """Write 4:2:0 planes into ``out`` (see :func:`semi_planar_shape`) as NVDEC lays them out: the
    Y plane, then U and V interleaved; 10/12-bit samples shifted to the top of 16 bits (P016)."""
    height, width = y.shape
    chroma_height, chroma_width = u.shape
    luma, chroma = out[:height], out[height:height + chroma_height]
    shift = 0 if bit_depth == 8 else 16 - bit_depth
    if shift:
        np.left_shift(y, shift, out=luma[:, :width])
        np.left_shift(u, shift, out=chroma[:, 0:2 * chroma_width:2])
        np.left_shift(v, shift, out=chroma[:, 1:2 * chroma_width:2])
    else:
        luma[:, :width] = y
        chroma[:, 0:2 * chroma_width:2] = u
        chroma[:, 1:2 * chroma_width:2] = v


class _Staging:
    """One pinned host buffer, its device twin, and the event after the last kernel that read it."""

    def __init__(self, cupy, shape: tuple[int, int], dtype: np.dtype):
        count = shape[0] * shape[1]
        self.nbytes = count * dtype.itemsize
        memory = cupy.cuda.alloc_pinned_memory(self.nbytes)
        self.host = np.frombuffer(memory, dtype, count).reshape(shape)
        self.device = cupy.empty(shape, dtype)
        self.used: Any = None  # the event recorded after the kernels that read ``device``

    def ready_for_reuse(self) -> None:
        if self.used is not None:
            self.used.synchronize()


class _ThreadStaging:
    """A worker thread's CUDA stream and ring of staging buffers (rebuilt when the picture shape changes)."""

    def __init__(self, cupy):
        self.cupy = cupy
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.key: tuple | None = None
        self.ring: list[_Staging] = []
        self.next = 0

    def take(self, shape: tuple[int, int], dtype: np.dtype) -> _Staging:
        if self.key != (shape, dtype.str):
            for staging in self.ring:
                staging.ready_for_reuse()
            self.ring = [_Staging(self.cupy, shape, dtype) for _ in range(STAGING_DEPTH)]
            self.key, self.next = (shape, dtype.str), 0
        staging = self.ring[self.next]
        self.next = (self.next + 1) % len(self.ring)
        staging.ready_for_reuse()
        return staging


class UploadConverter(KernelConverter):
    """PyAV pictures into the output through pinned staging, an upload and the fused kernel."""

    def __init__(self, kernels: KernelModule, staging: _ThreadStaging, job: VideoJob, conversion: Conversion, output):
        super().__init__(kernels, staging.stream, job, conversion, output)
        index = job.index
        self._index = index
        self._staging = staging
        self._shape, self._dtype = semi_planar_shape(index.width, index.height, index.bit_depth)

    def convert(self, picture: av.VideoFrame, destinations: list[tuple[int, int]]) -> None:
        index = self._index
        if (picture.width, picture.height) != (index.width, index.height):
            raise CorruptVideoError(index.path, f"a frame is {picture.width}x{picture.height}, the stream "
                                                f"{index.width}x{index.height} (the size changes mid-stream)")
        y, u, v, bit_depth = yuv420_planes(picture, index.color_range)
        if bit_depth != index.bit_depth:
            raise CorruptVideoError(index.path,
                                    f"a frame has {bit_depth}-bit samples, the stream {index.bit_depth}-bit")
        staging = self._staging.take(self._shape, self._dtype)
        pack_semi_planar(y, u, v, bit_depth, staging.host)
        staging.device.data.copy_from_host_async(staging.host.ctypes.data, staging.nbytes, self._staging.stream)
        pitch = staging.host.strides[0]
        luma = staging.device.data.ptr
        self.launch(luma, luma + index.height * pitch, pitch, destinations)
        staging.used = self._staging.cupy.cuda.Event(disable_timing=True)
        staging.used.record(self._staging.stream)


def upload_unsupported_reason(index: VideoIndex) -> str | None:
    """Why the kernel cannot take this stream's pictures as NV12/P016 (then the CPU converts)."""
    if not index.pixel_format.startswith(("yuv420p", "yuvj420p")):
        return f"pixel format {index.pixel_format} is not 4:2:0"
    if index.bit_depth not in (8, 10, 12):
        return f"{index.bit_depth}-bit samples"
    return None


class UploadBackend(PlanBackend):
    """CPU decoders whose pictures the GPU kernel converts, into CuPy outputs on ``device``.

    One PyAV decoder per job, single-threaded (parallelism comes from running jobs at once, see
    :mod:`vclip._engine.scheduler`). Streams the kernel cannot read (not 4:2:0) are converted by the
    CPU backend and copied to the GPU.
    """

    default_workers = 1

    def __init__(self, device: Device, *, skip_non_reference: bool = True, threads: int = 1):
        import cupy

        super().__init__(skip_non_reference=skip_non_reference)
        self.device = device
        self.device_id = int(device.index or 0)
        self.threads = threads
        self._cupy = cupy
        self._kernels = KernelModule.for_device(self.device_id)
        self._local = threading.local()
        self._cpu = CpuBackend(threads=threads, skip_non_reference=skip_non_reference)

    def empty(self, shape: tuple[int, ...], dtype: str):
        with self._cupy.cuda.Device(self.device_id):
            return self._cupy.empty(shape, dtype=dtype)

    def _staging(self) -> _ThreadStaging:
        staging = getattr(self._local, "staging", None)
        if staging is None:
            with self._cupy.cuda.Device(self.device_id):
                staging = self._local.staging = _ThreadStaging(self._cupy)
        return staging

    def open_job(self, job: VideoJob, conversion: Conversion, output) -> tuple[PyAVDecoder, UploadConverter]:
        converter = UploadConverter(self._kernels, self._staging(), job, conversion, output)
        return PyAVDecoder(job.index, threads=self.threads), converter

    def decode_job(self, job: VideoJob, conversion: Conversion, output, stats: DecodeStats) -> Completion:
        """Decode ``job`` on the CPU into ``output`` on the GPU; returns the event after its last kernel."""
        staging = self._staging()
        with self._cupy.cuda.Device(self.device_id), staging.stream:
            try:
                if upload_unsupported_reason(job.index) is None:
                    decoder, converter = self.open_job(job, conversion, output)
                    execute_plan(self.plan(job), job, decoder, converter, stats)
                    return converter.finish()
                decode_then_upload(self._cpu, job, conversion, output, stats, staging.stream)
            except CorruptVideoError:
                staging.stream.synchronize()  # the clips it could decode are written before the error goes
                raise
            event = self._cupy.cuda.Event(disable_timing=True)
            event.record(staging.stream)
            return event
