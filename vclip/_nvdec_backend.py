"""NVDEC backend: PyNvVideoCodec decoders fed with vclip's own packets, and the fused CUDA kernel.

Packets come from the index (no PyNvVideoCodec demuxer, which picks its own stream), converted to
Annex B and sent segment by segment as the decode plan says; the decoder is flushed after each
segment. Each requested frame's NV12/P016 surface goes through ``kernels/nv12_transform.cu``
straight into its slot of the output batch, on the decoder's own CUDA stream, before the decoder
can reuse the surface. Frames nobody asked for are never converted.

Each worker thread owns a CUDA stream and its decoders (one per codec and bit depth, reused across
files and reconfigured when the size changes), so several NVDEC engines work in parallel.
Videos NVDEC cannot decode go to the CPU backend, with one warning per kind of video.
"""

from __future__ import annotations

import threading
import time
import warnings

import numpy as np

from ._bitstream import AnnexBConverter
from ._cpu_backend import CpuBackend
from ._kernel_args import JOB_DTYPE, fill_job, kernel_source_path, layout_strides, transform_params
from ._packets import read_packets
from ._pipeline import ClipTarget, DecodeStats, VideoJob, clip_shape, frame_destinations
from .errors import CorruptVideoError, FallbackWarning, VideoError
from .index import VideoIndex
from .plan import plan_decode
from .transforms import TransformSpec

_CODEC_NAMES = {"h264": "H264", "hevc": "HEVC"}
_INPUT_TYPES = {1: "unsigned char", 2: "unsigned short"}
_OUTPUT_TYPES = {"uint8": "unsigned char", "float16": "Float16Bits", "float32": "float"}
_BLOCK = (32, 8, 1)
_NATIVE_SPEC = TransformSpec()


class KernelModule:
    """``nv12_transform.cu`` compiled once per device (NVRTC through CuPy), every type pair."""

    _modules: dict[int, "KernelModule"] = {}
    _lock = threading.Lock()

    def __init__(self, device_id: int):
        import cupy

        names = [
            f"{kind}<{source}, {target}>"
            for kind in ("transform_frame", "transform_frames")
            for source in _INPUT_TYPES.values()
            for target in _OUTPUT_TYPES.values()
        ]
        with cupy.cuda.Device(device_id):
            self._module = cupy.RawModule(
                code=kernel_source_path().read_text(), options=("--std=c++17",), name_expressions=names
            )
            self._module.compile()
        self._functions = {name: self._module.get_function(name) for name in names}

    @classmethod
    def for_device(cls, device_id: int) -> "KernelModule":
        with cls._lock:
            if device_id not in cls._modules:
                cls._modules[device_id] = cls(device_id)
            return cls._modules[device_id]

    def function(self, batched: bool, input_bytes: int, dtype: str):
        kind = "transform_frames" if batched else "transform_frame"
        return self._functions[f"{kind}<{_INPUT_TYPES[input_bytes]}, {_OUTPUT_TYPES[dtype]}>"]


def nvdec_unsupported_reason(index: VideoIndex) -> str | None:
    """Why vclip's NVDEC path cannot take this stream, or None."""
    if index.codec not in _CODEC_NAMES:
        return f"NVDEC decoding of {index.codec} is not supported"
    if not index.pixel_format.startswith(("yuv420p", "yuvj420p")):
        return f"pixel format {index.pixel_format} is not 4:2:0"
    if index.codec == "h264" and index.bit_depth > 8:
        return f"{index.bit_depth}-bit H.264 cannot be decoded by NVDEC"
    return None


class _Worker:
    """One thread's CUDA stream and decoders."""

    def __init__(self, device_id: int):
        import cupy

        self.device_id = device_id
        with cupy.cuda.Device(device_id):
            self.stream = cupy.cuda.Stream(non_blocking=True)
        self.decoders: dict[tuple, tuple] = {}

    def decoder(self, index: VideoIndex):
        import PyNvVideoCodec as nvc

        key = (index.codec, index.bit_depth)
        entry = self.decoders.get(key)
        if entry is None or entry[1] < index.width or entry[2] < index.height:
            width = max(index.width, entry[1] if entry else 0)
            height = max(index.height, entry[2] if entry else 0)
            decoder = nvc.CreateDecoder(
                gpuid=self.device_id,
                codec=getattr(nvc.cudaVideoCodec, _CODEC_NAMES[index.codec]),
                cudacontext=0,
                cudastream=self.stream.ptr,
                usedevicememory=True,
                maxwidth=width,
                maxheight=height,
                outputColorType=nvc.OutputColorType.NATIVE,
            )
            entry = self.decoders[key] = (decoder, width, height)
        return entry[0]

    def forget(self, index: VideoIndex) -> None:
        self.decoders.pop((index.codec, index.bit_depth), None)


class NvdecBackend:
    """Decodes with NVDEC on GPU ``device_id``; outputs CuPy arrays."""

    default_workers = 8

    def __init__(self, device_id: int = 0, *, skip_non_reference: bool = True):
        import cupy

        self.device_id = device_id
        self.device = f"cuda:{device_id}"
        self.skip_non_reference = skip_non_reference
        self._cupy = cupy
        self._kernels = KernelModule.for_device(device_id)
        self._local = threading.local()
        self._cpu = CpuBackend(skip_non_reference=skip_non_reference)
        self._unsupported: dict[tuple, str] = {}
        self._warned: set[str] = set()
        self._lock = threading.Lock()

    # -- output buffers ---------------------------------------------------------------------
    def empty(self, shape: tuple[int, ...], dtype: str):
        with self._cupy.cuda.Device(self.device_id):
            return self._cupy.empty(shape, dtype=dtype)

    def _worker(self) -> _Worker:
        worker = getattr(self._local, "worker", None)
        if worker is None:
            worker = self._local.worker = _Worker(self.device_id)
        return worker

    # -- decoding ---------------------------------------------------------------------------
    def decode_job(self, job: VideoJob, spec: TransformSpec | None, output, stats: DecodeStats):
        """Decode ``job`` into ``output``; returns a CUDA event that fires when its frames are written."""
        index = job.index
        reason = nvdec_unsupported_reason(index) or self._unsupported.get(self._kind(index))
        worker = self._worker()
        with self._cupy.cuda.Device(self.device_id), worker.stream:
            if reason is None:
                try:
                    self._decode_on_gpu(worker, job, spec or _NATIVE_SPEC, output, stats)
                except Exception as error:  # NVDEC refused or choked: the CPU decides if the file is bad
                    worker.forget(index)
                    reason = f"NVDEC failed ({type(error).__name__}: {error})"
                    if not isinstance(error, VideoError):
                        with self._lock:
                            self._unsupported.setdefault(self._kind(index), reason)
            if reason is not None:
                self._warn_once(index, reason)
                self._decode_on_cpu(job, spec, output, stats)
                stats.add(fallback_videos=1)
            event = self._cupy.cuda.Event(disable_timing=True)
            event.record(worker.stream)
        return event

    @staticmethod
    def _kind(index: VideoIndex) -> tuple:
        return (index.codec, index.bit_depth, index.width, index.height)

    def _warn_once(self, index: VideoIndex, reason: str) -> None:
        message = f"{index.path}: {reason}; decoding {index.codec} {index.width}x{index.height} on the CPU"
        with self._lock:
            key = f"{self._kind(index)}"
            if key in self._warned:
                return
            self._warned.add(key)
        warnings.warn(message, FallbackWarning, stacklevel=4)

    def _decode_on_cpu(self, job: VideoJob, spec: TransformSpec | None, output, stats: DecodeStats) -> None:
        targets = tuple(ClipTarget(t.frames, t.geometry, k) for k, t in enumerate(job.targets))
        shape = clip_shape(spec, targets[0].frames.size, targets[0].geometry)
        host = np.empty((len(targets),) + shape, dtype=output.dtype)
        self._cpu.decode_job(VideoJob(job.index, targets), spec, host, stats)
        for k, target in enumerate(job.targets):
            output[target.slot].set(host[k], stream=self._cupy.cuda.get_current_stream())

    def _decode_on_gpu(self, worker: _Worker, job: VideoJob, spec: TransformSpec, output, stats: DecodeStats) -> None:
        import PyNvVideoCodec as nvc

        index = job.index
        targets = job.targets
        plan = plan_decode(index, [t.frames for t in targets], skip_non_reference=self.skip_non_reference)
        destinations = frame_destinations(targets)
        frame_of_pts = dict(zip(index.pts.tolist(), range(index.num_frames)))
        geometry = targets[0].geometry
        frames_per_clip = targets[0].frames.size
        frame_stride, strides = layout_strides(spec.layout, frames_per_clip, geometry.output_height, geometry.output_width)
        params = transform_params(spec, geometry.output_width, geometry.output_height, strides)
        grid = ((geometry.output_width + _BLOCK[0] - 1) // _BLOCK[0], (geometry.output_height + _BLOCK[1] - 1) // _BLOCK[1], 1)
        item = output.dtype.itemsize
        clip_bytes = int(np.prod(output.shape[1:])) * item
        stored_bits = 8 if index.bit_depth == 8 else 16
        jobs = []
        for target in targets:
            frame_job = np.zeros((), JOB_DTYPE)
            fill_job(
                frame_job, luma=0, chroma=0, luma_pitch=0, chroma_pitch=0,
                output=output.data.ptr + target.slot * clip_bytes, geometry=target.geometry,
                bit_depth=index.bit_depth, stored_bits=stored_bits, matrix=index.color_matrix,
                color_range=index.color_range,
            )
            jobs.append(frame_job)
        kernel = self._kernels.function(False, stored_bits // 8, spec.dtype)
        decoder = worker.decoder(index)
        converter = AnnexBConverter(index.codec, index.extradata)
        remaining = set(plan.frames.tolist())

        def deliver(frames) -> None:
            for frame in frames:
                number = frame_of_pts.get(frame.timestamp)
                if number not in remaining:
                    continue
                remaining.discard(number)
                luma, chroma = frame.cuda()[:2]
                luma_pitch = luma.__cuda_array_interface__["strides"][0]
                chroma_pitch = chroma.__cuda_array_interface__["strides"][0]
                luma_address, chroma_address = frame.GetPtrToPlane(0), frame.GetPtrToPlane(1)
                for target_number, position in destinations[number]:
                    frame_job = jobs[target_number].copy()
                    frame_job["luma"], frame_job["chroma"] = luma_address, chroma_address
                    frame_job["luma_pitch"], frame_job["chroma_pitch"] = luma_pitch, chroma_pitch
                    frame_job["output"] += position * frame_stride * item
                    kernel(grid, _BLOCK, (params, frame_job))

        for segment in plan.segments:
            started = time.perf_counter()
            payloads = read_packets(index, segment.packets)
            buffers = [
                np.frombuffer(converter.convert(payload, with_parameter_sets=(k == 0)), dtype=np.uint8)
                for k, payload in enumerate(payloads)
            ]
            decoding = time.perf_counter()
            for number, buffer in zip(segment.packets.tolist(), buffers):
                packet = nvc.PacketData()
                packet.bsl_data = buffer.ctypes.data
                packet.bsl = buffer.size
                packet.pts = int(index.packet_pts[number])
                deliver(decoder.Decode(packet))
            deliver(decoder.Decode(nvc.PacketData()))
            stats.add(
                segments=1, packets_sent=segment.packets.size,
                demux_seconds=decoding - started, decode_seconds=time.perf_counter() - decoding,
            )
        if remaining:
            missing = sorted(remaining)
            raise CorruptVideoError(index.path, f"NVDEC did not return frames {missing[:5]} ({len(missing)} missing)")
        stats.add(videos=1, frames_requested=plan.frames_requested, frames_delivered=sum(t.frames.size for t in targets))
