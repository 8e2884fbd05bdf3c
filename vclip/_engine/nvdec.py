"""NVDEC backend: PyNvVideoCodec decoders fed with vclip's own packets; the fused CUDA kernel
(:mod:`vclip._engine.kernel`) converts their surfaces.

Packets come from the index (no PyNvVideoCodec demuxer, which picks its own stream), converted to
what NVDEC's parser reads (Annex B for H.264/HEVC, stream headers before MPEG-4 segments, VP9 and
AV1 as they are) and sent segment by segment as the decode plan says; the decoder is flushed after
each segment. Each requested frame's NV12/P016 surface goes through ``kernels/nv12_transform.cu``
straight into its slot of the output batch, on the decoder's own CUDA stream, before the decoder
can reuse the surface. Frames nobody asked for are never converted.

Two ways into NVDEC, the same pictures out of both (bit for bit, tests/engine/test_nvdec_apis.py):

- PyNvVideoCodec's decoder, one ``Decode`` call per packet (the default);
- NVDEC's own API in the driver (``libnvcuvid``) through ctypes (:mod:`vclip._engine.nvdec_driver`),
  with ``VCLIP_NVDEC_API=driver``: the parser and the engine work without the interpreter lock and
  each mapped surface goes straight to the kernel. It decodes as fast (13,157 against 13,855
  pictures/s from 8 threads at 640x360 on an H100) but fed a training loop in the same process
  12-20% slower (more hand-overs of the interpreter lock per picture), so it is not the default
  (docs/notes/decode-processes.md).

Each worker thread owns a CUDA stream and a few decoders keyed by codec, bit depth and size, reused
across files (creating one costs 50-100 ms), so several NVDEC engines work in parallel. Pictures
nobody asked for are decoded as references, never mapped or copied out.
Which videos NVDEC takes is the GPU's answer to a capability query (codec, bit depth, size);
videos NVDEC cannot decode go to the CPU backend, with one warning per kind of video.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

import numpy as np

from .._device import Device
from .._index.bitstream import nvdec_packet_converter
from .._index.record import VideoIndex
from ..errors import (
    ArgumentError,
    CorruptVideoError,
    FallbackWarning,
    UnreadableVideoError,
    VideoNotFoundError,
    fail,
)
from .contract import (
    Completion,
    PacketRun,
    PictureDecoder,
    PlanBackend,
    execute_plan,
)
from .cpu import CpuBackend, decode_then_upload
from .cuvid import VideoFormat, cuvid_library, cuvid_unavailable_reason
from .kernel import KernelConverter, KernelModule
from .nvdec_driver import DriverDecoder, DriverPictureDecoder, format_key
from .pipeline import Conversion, DecodeStats, VideoRequest

# FFmpeg codec name: PyNvVideoCodec's cudaVideoCodec member, for the codecs whose packets vclip can
# hand to NVDEC. Whether this GPU decodes one (at this bit depth and size) is its capability
# query's answer: on an H200, VP9 and MPEG-4 Part 2 decode, AV1 does not.
_CODEC_NAMES = {"h264": "H264", "hevc": "HEVC", "vp9": "VP9", "mpeg4": "MPEG4", "av1": "AV1"}
_EIGHT_BIT_ONLY = {"h264": "H.264", "mpeg4": "MPEG-4 Part 2"}  # NVDEC has no high-bit-depth profile of these


def nvdec_unsupported_reason(index: VideoIndex) -> str | None:
    """Why vclip's NVDEC path cannot take this stream whatever the GPU, or None."""
    if index.codec not in _CODEC_NAMES:
        return f"NVDEC decoding of {index.codec} is not supported"
    if not index.pixel_format.startswith(("yuv420p", "yuvj420p")):
        return f"pixel format {index.pixel_format} is not 4:2:0"
    if index.codec in _EIGHT_BIT_ONLY and index.bit_depth > 8:
        return f"{index.bit_depth}-bit {_EIGHT_BIT_ONLY[index.codec]} cannot be decoded by NVDEC"
    return None


def capability_refusal(codec: str, bit_depth: int, width: int, height: int, caps: dict) -> str | None:
    """Why NVDEC, as its capability query answered (``caps``: PyNvVideoCodec's ``GetDecoderCaps``
    for this codec and bit depth), cannot decode a ``width`` x ``height`` stream, or None.

    An empty answer (the query is not available) refuses nothing: decoding itself will tell.
    """
    if not caps:
        return None
    if not caps.get("supported", 1) or not caps.get("num_decoder_engines", 1) or not caps.get("width_max", 1):
        return f"NVDEC on this GPU cannot decode {bit_depth}-bit {codec}"
    low = (caps.get("width_min", 0), caps.get("height_min", 0))
    high = (caps.get("width_max", 1 << 30), caps.get("height_max", 1 << 30))
    if width < low[0] or height < low[1]:
        return f"{width}x{height} is below NVDEC's minimum {low[0]}x{low[1]}"
    if width > high[0] or height > high[1]:
        return f"{width}x{height} is above NVDEC's maximum {high[0]}x{high[1]}"
    return None


NVDEC_APIS = ("pynvvideocodec", "driver")
"""The ways into NVDEC: PyNvVideoCodec's decoder (the default) or the driver's own API; the
environment variable ``VCLIP_NVDEC_API`` picks one for every backend of the process and its
decode processes."""


def nvdec_api() -> str:
    """The way into NVDEC this process takes: ``VCLIP_NVDEC_API`` if set, else PyNvVideoCodec.

    Raises:
        ArgumentError: ``VCLIP_NVDEC_API`` names no API, or names the driver's where its library
            does not load.
    """
    chosen = os.environ.get("VCLIP_NVDEC_API", "").strip().lower() or "pynvvideocodec"
    if chosen not in NVDEC_APIS:
        raise fail("VCLIP_NVDEC_API", chosen, f"one of {', '.join(NVDEC_APIS)}")
    if chosen == "driver" and cuvid_unavailable_reason() is not None:
        raise ArgumentError(f"VCLIP_NVDEC_API=driver: {cuvid_unavailable_reason()}")
    return chosen


DECODERS_PER_THREAD = 4
"""NVDEC decoders a decode thread keeps (one per codec, bit depth and size, the least recently used
dropped): a dataset of mixed sizes holds up to this many per thread."""


class _Worker:
    """One thread's CUDA stream and its decoders, a few per thread, keyed by codec, bit depth and size."""

    max_decoders = DECODERS_PER_THREAD

    def __init__(self, device_id: int):
        import cupy

        self.device_id = device_id
        with cupy.cuda.Device(device_id):
            self.stream = cupy.cuda.Stream(non_blocking=True)
        self.decoders: OrderedDict[tuple, object] = OrderedDict()
        self.driver_decoders: OrderedDict[tuple, DriverDecoder] = OrderedDict()
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

    def driver_decoder(self, video_format: VideoFormat) -> DriverDecoder:
        """The decoder (through the driver's API) for streams of ``video_format``, made on first use."""
        key = format_key(video_format)
        decoder = self.driver_decoders.get(key)
        if decoder is not None and decoder.surfaces >= video_format.min_num_decode_surfaces:
            self.driver_decoders.move_to_end(key)
            return decoder
        if decoder is not None:
            self.driver_decoders.pop(key).destroy()
        while len(self.driver_decoders) >= self.max_decoders:
            self.driver_decoders.popitem(last=False)[1].destroy()
        decoder = self.driver_decoders[key] = DriverDecoder(cuvid_library(), video_format, self.stream)
        self.created += 1
        return decoder

    def __del__(self):  # the thread ended: its decoders go with it
        for decoder in self.driver_decoders.values():
            try:
                decoder.destroy()
            except Exception:  # noqa: BLE001, S110 (at exit the driver may be gone first)
                pass

    def forget(self, index: VideoIndex, decoder: object = None) -> None:
        """Drop the decoder a failed job used (a broken file may have left it in a bad state)."""
        self.decoders.pop(self._key(index), None)
        if isinstance(decoder, DriverPictureDecoder) and decoder.driver_decoder is not None:
            used = decoder.driver_decoder
            self.driver_decoders = OrderedDict((key, kept) for key, kept in self.driver_decoders.items()
                                               if kept is not used)
            used.destroy()


class NvdecDecoder(PictureDecoder):
    """One job's packets through a worker's NVDEC decoder; pictures are PyNvVideoCodec frames
    (NV12/P016 surfaces on the GPU), valid until the next ``Decode`` call."""

    def __init__(self, index: VideoIndex, decoder):
        import PyNvVideoCodec as nvc

        self._nvc = nvc
        self._decoder = decoder
        self._converter = nvdec_packet_converter(index.codec, index.extradata)

    def send(self, packets: PacketRun) -> Iterable[tuple[int, Any]]:
        convert = self._converter.convert
        chunks = [convert(p, with_parameter_sets=(k == 0)) for k, p in enumerate(packets.payloads)]
        stream = np.frombuffer(b"".join(chunks), dtype=np.uint8)  # one buffer for the whole segment
        address = stream.ctypes.data
        decode, packet_type = self._decoder.Decode, self._nvc.PacketData
        for chunk, pts, discardable in zip(chunks, packets.pts, packets.discardable):
            packet = packet_type()
            packet.bsl_data, packet.bsl, packet.pts, packet.discardable = address, len(chunk), pts, discardable
            address += len(chunk)
            for frame in decode(packet):
                yield frame.timestamp, frame

    def flush(self) -> Iterable[tuple[int, Any]]:
        for frame in self._decoder.Decode(self._nvc.PacketData()):
            yield frame.timestamp, frame


class NvdecBackend(PlanBackend):
    """Decodes with NVDEC on one GPU; outputs CuPy arrays. Shared per device within a process
    (see :func:`~vclip._engine.backends.make_backend`), so :meth:`close` releases nothing."""

    default_workers = 8
    """Decode threads of one process: on an H100 (7 engines, 16 cores) 8 threads decoded 640x360
    H.264 faster than 12 (the threads share one interpreter lock: more only add contention), and
    1080p as fast (docs/performance.md)."""

    def __init__(self, device: Device, *, skip_non_reference: bool = True, api: str | None = None):
        import cupy

        super().__init__(skip_non_reference=skip_non_reference)
        self.device = device
        self.device_id = int(device.index or 0)
        self._cupy = cupy
        self._kernels = KernelModule.for_device(self.device_id)
        self._local = threading.local()
        self._cpu = CpuBackend(skip_non_reference=skip_non_reference)
        self._caps: dict[tuple, dict] = {}
        self._failed: dict[tuple, str] = {}
        self._warned: set[tuple] = set()
        self._lock = threading.Lock()
        self.api = api or nvdec_api()
        """The way into NVDEC (:data:`NVDEC_APIS`)."""

    def empty(self, shape: tuple[int, ...], dtype: str):
        with self._cupy.cuda.Device(self.device_id):
            return self._cupy.empty(shape, dtype=dtype)

    def _worker(self) -> _Worker:
        worker = getattr(self._local, "worker", None)
        if worker is None:
            worker = self._local.worker = _Worker(self.device_id)
        return worker

    def open_job(self, job: VideoRequest, conversion: Conversion,
                 output) -> tuple[NvdecDecoder | DriverPictureDecoder, KernelConverter]:
        worker = self._worker()
        decoder: NvdecDecoder | DriverPictureDecoder
        if self.api == "driver":
            decoder = DriverPictureDecoder(cuvid_library(), job.index, worker.driver_decoder)
        else:
            decoder = NvdecDecoder(job.index, worker.decoder(job.index))
        return decoder, KernelConverter(self._kernels, worker.stream, job, conversion, output)

    def decode_video(self, job: VideoRequest, conversion: Conversion, output, stats: DecodeStats) -> Completion:
        """Decode ``job`` into ``output``; returns a CUDA event that fires when its frames are written.

        A video NVDEC fails on is tried once more on a new decoder (a decoder an earlier broken
        file left in a bad state is not reused); a video NVDEC cannot take, or fails on twice, is
        decoded on the CPU (one warning per kind of video); the CPU then decides whether the file
        itself is bad.
        """
        index = job.index
        reason = self.unsupported_reason(index) or self._failed.get((index.path, index.stream_index))
        worker = self._worker()
        with self._cupy.cuda.Device(self.device_id), worker.stream:
            for attempt in range(2 if reason is None else 0):  # the second on a new decoder
                decoder = None
                try:
                    decoder, converter = self.open_job(job, conversion, output)
                    execute_plan(self.plan(job), job, decoder, converter, stats)
                    return converter.finish()
                except (VideoNotFoundError, UnreadableVideoError):
                    raise  # the file, not NVDEC: neither retried nor remembered as an NVDEC failure
                except Exception as error:
                    worker.forget(index, decoder)  # a decoder a broken file left in a bad state is not reused
                    if attempt == 0:
                        continue
                    cause = error.__cause__ if error.__cause__ is not None else error
                    reason = f"NVDEC failed ({type(cause).__name__}: {cause})"
                    with self._lock:
                        self._failed[(index.path, index.stream_index)] = reason
            assert reason is not None  # both attempts failed, or NVDEC cannot take the stream
            self._warn_once(index, reason)
            try:
                self._decode_on_cpu(job, conversion, output, stats)
            except CorruptVideoError:
                worker.stream.synchronize()  # the clips it could decode are written before the error goes
                raise
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
        return capability_refusal(index.codec, index.bit_depth, index.width, index.height, caps)

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

    def _decode_on_cpu(self, job: VideoRequest, conversion: Conversion, output, stats: DecodeStats) -> None:
        decode_then_upload(self._cpu, job, conversion, output, stats, self._cupy.cuda.get_current_stream())
