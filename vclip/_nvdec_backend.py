"""NVDEC backend: PyNvVideoCodec decoders fed with vclip's own packets, and the fused CUDA kernel.

Packets come from the index (no PyNvVideoCodec demuxer, which picks its own stream), converted to
Annex B and sent segment by segment as the decode plan says; the decoder is flushed after each
segment. Each requested frame's NV12/P016 surface goes through ``kernels/nv12_transform.cu``
straight into its slot of the output batch, on the decoder's own CUDA stream, before the decoder
can reuse the surface. Frames nobody asked for are never converted.

Each worker thread owns a CUDA stream and a few decoders keyed by codec, bit depth and size, reused
across files (creating one costs 50-100 ms), so several NVDEC engines work in parallel. Packets
whose frame nobody asked for go to the decoder marked discardable: decoded as references, never
mapped or copied out.
Videos NVDEC cannot decode go to the CPU backend, with one warning per kind of video.
"""

from __future__ import annotations

import threading
import time
import warnings
from collections import OrderedDict

import numpy as np

from ._bitstream import AnnexBConverter
from ._cpu_backend import CpuBackend
from ._kernel_args import BLOCK, JOB_DTYPE, fill_job, kernel_source_path, launch_grid, layout_strides, transform_params
from ._packets import read_packets
from ._pipeline import ClipTarget, DecodeStats, VideoJob, clip_shape, frame_destinations, video_lookups
from .errors import CorruptVideoError, FallbackWarning
from .index import VideoIndex
from .plan import plan_decode
from .transforms import TransformSpec

_CODEC_NAMES = {"h264": "H264", "hevc": "HEVC"}
_INPUT_TYPES = {1: "unsigned char", 2: "unsigned short"}
_OUTPUT_TYPES = {"uint8": "unsigned char", "float16": "Float16Bits", "float32": "float"}
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
    """One thread's CUDA stream and its decoders, a few per thread, keyed by codec, bit depth and size."""

    max_decoders = 4

    def __init__(self, device_id: int):
        import cupy

        self.device_id = device_id
        with cupy.cuda.Device(device_id):
            self.stream = cupy.cuda.Stream(non_blocking=True)
        self.decoders: OrderedDict[tuple, object] = OrderedDict()
        self.created = 0

    @staticmethod
    def _key(index: VideoIndex) -> tuple:
        return (index.codec, index.bit_depth, index.width, index.height)

    def decoder(self, index: VideoIndex):
        import PyNvVideoCodec as nvc

        key = self._key(index)
        if key in self.decoders:
            self.decoders.move_to_end(key)
            return self.decoders[key]
        while len(self.decoders) >= self.max_decoders:
            self.decoders.popitem(last=False)
        self.decoders[key] = nvc.CreateDecoder(
            gpuid=self.device_id,
            codec=getattr(nvc.cudaVideoCodec, _CODEC_NAMES[index.codec]),
            cudacontext=0,
            cudastream=self.stream.ptr,
            usedevicememory=True,
            maxwidth=index.width,
            maxheight=index.height,
            outputColorType=nvc.OutputColorType.NATIVE,
        )
        self.created += 1
        return self.decoders[key]

    def forget(self, index: VideoIndex) -> None:
        self.decoders.pop(self._key(index), None)


class NvdecBackend:
    """Decodes with NVDEC on GPU ``device_id``; outputs CuPy arrays."""

    # Decode threads per backend: on an H200 (7 engines, 16 cores) 12-16 fed the engines best;
    # more only added contention for the GIL (benchmarks/README.md).
    default_workers = 12

    def __init__(self, device_id: int = 0, *, skip_non_reference: bool = True):
        import cupy

        self.device_id = device_id
        self.device = f"cuda:{device_id}"
        self.skip_non_reference = skip_non_reference
        self._cupy = cupy
        self._kernels = KernelModule.for_device(device_id)
        self._local = threading.local()
        self._cpu = CpuBackend(skip_non_reference=skip_non_reference)
        self._caps: dict[tuple, dict] = {}
        self._failed: dict[tuple, str] = {}
        self._warned: set[tuple] = set()
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
        reason = self.unsupported_reason(index) or self._failed.get((index.path, index.stream_index))
        worker = self._worker()
        with self._cupy.cuda.Device(self.device_id), worker.stream:
            if reason is None:
                try:
                    self._decode_on_gpu(worker, job, spec or _NATIVE_SPEC, output, stats)
                except Exception as error:  # NVDEC choked on this file: the CPU decides whether it is bad
                    worker.forget(index)
                    reason = f"NVDEC failed ({type(error).__name__}: {error})"
                    with self._lock:
                        self._failed[(index.path, index.stream_index)] = reason
            if reason is not None:
                self._warn_once(index, reason)
                self._decode_on_cpu(job, spec, output, stats)
                stats.add(fallback_videos=1)
            event = self._cupy.cuda.Event(disable_timing=True)
            event.record(worker.stream)
        return event

    def unsupported_reason(self, index: VideoIndex) -> str | None:
        """Why NVDEC on this GPU cannot decode the stream (codec, bit depth, size), or None."""
        reason = nvdec_unsupported_reason(index)
        if reason is not None:
            return reason
        caps = self._capabilities(index.codec, index.bit_depth)
        if not caps:
            return None
        if not caps.get("supported", 1) or not caps.get("num_decoder_engines", 1) or not caps.get("width_max", 1):
            return f"NVDEC on this GPU cannot decode {index.bit_depth}-bit {index.codec}"
        low = (caps.get("width_min", 0), caps.get("height_min", 0))
        high = (caps.get("width_max", 1 << 30), caps.get("height_max", 1 << 30))
        if index.width < low[0] or index.height < low[1]:
            return f"{index.width}x{index.height} is below NVDEC's minimum {low[0]}x{low[1]}"
        if index.width > high[0] or index.height > high[1]:
            return f"{index.width}x{index.height} is above NVDEC's maximum {high[0]}x{high[1]}"
        return None

    def _capabilities(self, codec: str, bit_depth: int) -> dict:
        key = (codec, bit_depth)
        with self._lock:
            if key not in self._caps:
                import PyNvVideoCodec as nvc

                try:
                    caps = nvc.GetDecoderCaps(
                        gpuid=self.device_id, codec=getattr(nvc.cudaVideoCodec, _CODEC_NAMES[codec]), bitdepth=bit_depth
                    )
                    self._caps[key] = dict(caps)
                except Exception:  # no caps query: decoding itself will tell
                    self._caps[key] = {}
            return self._caps[key]

    def _warn_once(self, index: VideoIndex, reason: str) -> None:
        key = (index.codec, index.bit_depth, index.width, index.height, reason.split(" (")[0])
        with self._lock:
            if key in self._warned:
                return
            self._warned.add(key)
        message = f"{index.path}: {reason}; decoding {index.codec} {index.width}x{index.height} on the CPU"
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
        video = video_lookups(index)
        converter = AnnexBConverter(index.codec, index.extradata)
        targets = job.targets
        plan = plan_decode(index, [t.frames for t in targets], skip_non_reference=self.skip_non_reference)
        destinations = frame_destinations(targets)
        geometry = targets[0].geometry
        frame_stride, strides = layout_strides(spec.layout, targets[0].frames.size, geometry.output_height, geometry.output_width)
        params = transform_params(spec, geometry, strides)
        grid = launch_grid(params)
        item = output.dtype.itemsize
        clip_bytes = int(np.prod(output.shape[1:])) * item
        stored_bits = 8 if index.bit_depth == 8 else 16
        clip_addresses = [output.data.ptr + target.slot * clip_bytes for target in targets]
        jobs = []
        for target in targets:
            frame_job = np.zeros((), JOB_DTYPE)
            fill_job(
                frame_job, luma=0, chroma=0, luma_pitch=0, chroma_pitch=0, output=0, geometry=target.geometry,
                bit_depth=index.bit_depth, stored_bits=stored_bits, matrix=index.color_matrix,
                color_range=index.color_range,
            )
            jobs.append(frame_job)
        kernel = self._kernels.function(False, stored_bits // 8, spec.dtype)
        decoder = worker.decoder(index)
        wanted = frozenset(plan.frames.tolist())
        remaining = set(wanted)
        minimum_pitch = index.width * stored_bits // 8

        def deliver(frames) -> None:
            for frame in frames:
                number = video.frame_of_pts.get(frame.timestamp)
                if number not in remaining:
                    continue
                remaining.discard(number)
                luma, chroma = frame.GetPtrToPlane(0), frame.GetPtrToPlane(1)
                # PyNvVideoCodec's surfaces hold the UV plane right after the Y plane; its array
                # interface reports strides in samples, not bytes, so take the pitch from the planes.
                pitch = (chroma - luma) // index.height
                if pitch < minimum_pitch:
                    raise RuntimeError(f"unexpected NVDEC surface layout (pitch {pitch} < {minimum_pitch})")
                for target_number, position in destinations[number]:
                    frame_job = jobs[target_number]
                    frame_job["luma"], frame_job["chroma"] = luma, chroma
                    frame_job["luma_pitch"] = frame_job["chroma_pitch"] = pitch
                    frame_job["output"] = clip_addresses[target_number] + position * frame_stride * item
                    kernel(grid, BLOCK, (params, frame_job[()]))

        for segment in plan.segments:
            started = time.perf_counter()
            payloads = read_packets(index, segment.packets)
            chunks = [converter.convert(payload, with_parameter_sets=(k == 0)) for k, payload in enumerate(payloads)]
            stream = np.frombuffer(b"".join(chunks), dtype=np.uint8)  # one buffer for the whole segment
            address = stream.ctypes.data
            decoding = time.perf_counter()
            for number, chunk in zip(segment.packets.tolist(), chunks):
                packet = nvc.PacketData()
                packet.bsl_data = address
                packet.bsl = len(chunk)
                packet.pts = video.packet_pts[number]
                packet.discardable = video.packet_frame[number] not in wanted
                address += len(chunk)
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

