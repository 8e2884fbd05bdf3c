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

Beside decode processes the CPU decoders run in processes of their own, which need no CUDA
context (about 500 MiB of device memory each): :class:`PackingBackend` decodes there and packs every
wanted picture the same way into a shared host buffer, and :class:`PackedUploadBackend`, in the
loader's process, uploads that buffer and launches the same kernel on it.
"""

from __future__ import annotations

import threading
from functools import partial
from typing import Any

import av
import numpy as np

from .._device import CPU, Device
from .._index.record import VideoIndex
from ..errors import CorruptVideoError
from .contract import Completion, PictureConverter, PlanBackend, execute_plan
from .cpu import CpuBackend, PyAVDecoder, decode_then_upload, yuv420_planes
from .kernel import KernelConverter, KernelModule
from .pipeline import Conversion, DecodeStats, VideoRequest, frame_destinations

__all__ = ["PackedUploadBackend", "PackingBackend", "UploadBackend", "UploadConverter", "pack_semi_planar",
           "packed_frames", "semi_planar_shape"]

PITCH_ALIGNMENT = 256
"""Bytes each staged row is padded to (what cudaMallocPitch gives), so the kernel's vector loads
are aligned as on NVDEC surfaces."""

STAGING_DEPTH = 3
"""Staging pairs per worker thread: pictures in flight between packing and the kernel."""

UPLOAD_PICTURES = 4
"""Pictures of a packed job uploaded at once: the device staging of each CPU decoder beside decode
processes (a job with more pictures is uploaded and converted in turns of this many)."""


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


def pack_picture(picture: av.VideoFrame, index: VideoIndex, out: np.ndarray) -> None:
    """Pack a decoded picture of ``index``'s stream into ``out`` as NVDEC lays it out (NV12/P016)."""
    if (picture.width, picture.height) != (index.width, index.height):
        raise CorruptVideoError(index.path, f"a frame is {picture.width}x{picture.height}, the stream "
                                            f"{index.width}x{index.height} (the size changes mid-stream)")
    y, u, v, bit_depth = yuv420_planes(picture, index.color_range)
    if bit_depth != index.bit_depth:
        raise CorruptVideoError(index.path, f"a frame has {bit_depth}-bit samples, the stream {index.bit_depth}-bit")
    pack_semi_planar(y, u, v, bit_depth, out)


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

    def __init__(self, kernels: KernelModule, staging: _ThreadStaging, job: VideoRequest, conversion: Conversion,
                 output):
        super().__init__(kernels, staging.stream, job, conversion, output)
        index = job.index
        self._index = index
        self._staging = staging
        self._shape, self._dtype = semi_planar_shape(index.width, index.height, index.bit_depth)

    def convert(self, picture: av.VideoFrame, destinations: list[tuple[int, int]]) -> None:
        index = self._index
        staging = self._staging.take(self._shape, self._dtype)
        pack_picture(picture, index, staging.host)
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

    def open_job(self, job: VideoRequest, conversion: Conversion, output) -> tuple[PyAVDecoder, UploadConverter]:
        converter = UploadConverter(self._kernels, self._staging(), job, conversion, output)
        return PyAVDecoder(job.index, threads=self.threads), converter

    def decode_video(self, job: VideoRequest, conversion: Conversion, output, stats: DecodeStats) -> Completion:
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


# -- CPU decoders in processes without a CUDA context ---------------------------------------------------
def packed_frames(job: VideoRequest) -> list[int]:
    """The frames ``job`` wants, ascending: picture k of its packed buffer is the k-th (the layout
    both sides of a packing process agree on, each picture :func:`semi_planar_shape`)."""
    return sorted(frame_destinations(job.targets))


class _PackConverter(PictureConverter):
    """Each picture into its place in the packed buffer (its frame found from its first destination)."""

    def __init__(self, job: VideoRequest, buffer: np.ndarray):
        index = self._index = job.index
        self._targets = job.targets
        frames = packed_frames(job)
        shape, dtype = semi_planar_shape(index.width, index.height, index.bit_depth)
        nbytes = len(frames) * shape[0] * shape[1] * dtype.itemsize
        self._pictures = buffer[:nbytes].view(dtype).reshape((len(frames), *shape))
        self._place = {frame: k for k, frame in enumerate(frames)}

    def convert(self, picture: av.VideoFrame, destinations: list[tuple[int, int]]) -> None:
        target, position = destinations[0]
        frame = int(self._targets[target].frames[position])
        pack_picture(picture, self._index, self._pictures[self._place[frame]])


class PackingBackend(PlanBackend):
    """The CPU decoder of a packing process (no CUDA): PyAV decodes each job, single-threaded, and
    every wanted picture is packed as NVDEC lays it out into a flat shared byte buffer
    (:func:`packed_frames`). Only 4:2:0 streams come here (:func:`upload_unsupported_reason`)."""

    device = CPU
    default_workers = 1

    def empty(self, shape: tuple[int, ...], dtype: str) -> np.ndarray:
        return np.empty(shape, dtype)

    def open_job(self, job: VideoRequest, conversion: Conversion,
                 output: np.ndarray) -> tuple[PyAVDecoder, _PackConverter]:
        return PyAVDecoder(job.index, threads=1), _PackConverter(job, output)


class _Upload:
    """A worker thread's packed host buffer (shared with the packing processes, pinned here when
    CUDA can register it), its device staging of :data:`UPLOAD_PICTURES` pictures and its stream."""

    def __init__(self, cupy, packers):
        self._cupy, self._packers = cupy, packers
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.host: np.ndarray | None = None
        self.device: Any = None
        self._pinned = False
        self._uploaded: Any = None  # the event after the last copy out of ``host``

    def take(self, nbytes: int, picture: int) -> np.ndarray:
        """The host buffer, at least ``nbytes``, free to be written (its last upload has finished),
        and a device staging of :data:`UPLOAD_PICTURES` pictures of ``picture`` bytes."""
        if self._uploaded is not None:
            self._uploaded.synchronize()
        if self.host is None or self.host.size < nbytes:
            self.release()
            self.host = self._packers.empty((nbytes + nbytes // 2,), "uint8")
            try:
                self._cupy.cuda.runtime.hostRegister(self.host.ctypes.data, self.host.size, 0)
                self._pinned = True
            except self._cupy.cuda.runtime.CUDARuntimeError:  # copies from pageable memory then
                self._pinned = False
        if self.device is None or self.device.size < UPLOAD_PICTURES * picture:
            self.device = self._cupy.empty(UPLOAD_PICTURES * picture, np.uint8)
        return self.host

    def uploaded(self) -> None:
        self._uploaded = self._cupy.cuda.Event(disable_timing=True)
        self._uploaded.record(self.stream)

    def release(self) -> None:
        """Give the host buffer back (to the packing processes' registry, unregistered)."""
        self.stream.synchronize()
        if self.host is not None and self._pinned:
            self._cupy.cuda.runtime.hostUnregister(self.host.ctypes.data)
        self.host, self._pinned, self._uploaded = None, False, None


class PackedUploadBackend:
    """CPU decoders in ``processes`` packing processes of ``threads`` decoders each, which hold no
    CUDA context; here each job's packed pictures are uploaded on the worker thread's stream and
    the fused kernel converts them into ``output`` on ``device``, as :class:`UploadBackend` does.
    Streams the kernel cannot read (not 4:2:0) go to an :class:`UploadBackend` here, which
    converts them on the CPU, then copies them. Keeps the :class:`~vclip._engine.contract.Backend` contract."""

    def __init__(self, device: Device, processes: int, threads: int, *, skip_non_reference: bool = True):
        import cupy

        from .processes import ProcessBackend

        self.device = device
        self.device_id = int(device.index or 0)
        self._cupy = cupy
        self._packers = ProcessBackend(partial(PackingBackend, skip_non_reference=skip_non_reference), CPU,
                                       processes, threads)
        self.processes, self.threads = processes, threads
        self.default_workers = self._packers.default_workers
        self._kernels = KernelModule.for_device(self.device_id)
        self._unpacked = UploadBackend(device, skip_non_reference=skip_non_reference)
        self._local = threading.local()
        self._uploads: list[_Upload] = []
        self._lock = threading.Lock()

    def empty(self, shape: tuple[int, ...], dtype: str):
        return self._unpacked.empty(shape, dtype)

    def _upload(self) -> _Upload:
        upload = getattr(self._local, "upload", None)
        if upload is None:
            with self._cupy.cuda.Device(self.device_id):
                upload = self._local.upload = _Upload(self._cupy, self._packers)
            with self._lock:
                self._uploads.append(upload)
        return upload

    def decode_video(self, job: VideoRequest, conversion: Conversion, output, stats: DecodeStats) -> Completion:
        """Decode ``job`` in a packing process, then upload and convert it into ``output``; returns
        the event after its last kernel."""
        if upload_unsupported_reason(job.index) is not None:
            return self._unpacked.decode_video(job, conversion, output, stats)
        upload = self._upload()
        with self._cupy.cuda.Device(self.device_id), upload.stream:
            self._convert_packed(job, conversion, output, stats, upload)
            event = self._cupy.cuda.Event(disable_timing=True)
            event.record(upload.stream)
            return event

    def _convert_packed(self, job: VideoRequest, conversion: Conversion, output, stats: DecodeStats,
                        upload: _Upload) -> None:
        index = job.index
        frames = packed_frames(job)
        (rows, samples), dtype = semi_planar_shape(index.width, index.height, index.bit_depth)
        pitch = samples * dtype.itemsize
        nbytes = rows * pitch  # of one picture
        host = upload.take(len(frames) * nbytes, nbytes)
        lost: frozenset[int] = frozenset()
        failure: CorruptVideoError | None = None
        try:
            self._packers.decode_video(job, conversion, host, stats)
        except CorruptVideoError as error:  # the clips that do not need the lost frames were packed
            if error.frames is None:
                raise
            lost, failure = frozenset(error.frames), error
        destinations = frame_destinations(job.targets)
        converter = KernelConverter(self._kernels, upload.stream, job, conversion, output)
        staging = upload.device.data.ptr
        for first in range(0, len(frames), UPLOAD_PICTURES):
            turn = frames[first:first + UPLOAD_PICTURES]
            upload.device.data.copy_from_host_async(host.ctypes.data + first * nbytes, len(turn) * nbytes,
                                                    upload.stream)
            for k, frame in enumerate(turn):
                if frame not in lost:
                    luma = staging + k * nbytes
                    converter.launch(luma, luma + index.height * pitch, pitch, destinations[frame])
        upload.uploaded()
        if failure is not None:
            upload.stream.synchronize()  # the clips it could decode are written before the error goes
            raise failure

    def close(self) -> None:
        """Stop the packing processes and give their buffers back. Idempotent."""
        with self._lock:
            uploads, self._uploads = self._uploads, []
        for upload in uploads:
            upload.release()
        self._packers.close()
