"""NVDEC's own API (``libnvcuvid``, part of the NVIDIA driver) through ctypes: its parser and
decoder, and the CUDA driver calls they need.

A ctypes call leaves the interpreter lock for as long as the driver works: parsing a packet,
decoding a picture and waiting for it to be mapped happen without the lock, and other threads of
the process run meanwhile. The parser's callbacks take the lock back for the few Python lines they
run. Structure layouts follow NVIDIA's Video Codec SDK headers (``nvcuvid.h``, ``cuviddec.h``) for
64-bit Linux.
"""

from __future__ import annotations

import ctypes
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    byref,
    c_char_p,
    c_int,
    c_longlong,
    c_short,
    c_ubyte,
    c_uint,
    c_ulong,
    c_ulonglong,
    c_void_p,
)
from functools import lru_cache

__all__ = [
    "CODECS", "CuvidStructures", "DecodeCreateInfo", "ParserDisplayInfo", "ParserParams", "ProcParams",
    "SourceDataPacket", "VideoFormat", "cuvid_library", "cuvid_unavailable_reason",
]

# cudaVideoCodec values of the codecs vclip hands to NVDEC.
CODECS = {"mpeg4": 2, "h264": 4, "hevc": 8, "vp9": 10, "av1": 11}

SURFACE_NV12, SURFACE_P016 = 0, 1  # cudaVideoSurfaceFormat
DEINTERLACE_WEAVE, DEINTERLACE_ADAPTIVE = 0, 2  # cudaVideoDeinterlaceMode
CREATE_PREFER_CUVID = 0x04  # cudaVideoCreateFlags: the dedicated video engines
PACKET_END_OF_STREAM, PACKET_TIMESTAMP, PACKET_END_OF_PICTURE = 0x01, 0x02, 0x08  # CUvideopacketflags


class _Rect(Structure):
    _fields_ = [("left", c_int), ("top", c_int), ("right", c_int), ("bottom", c_int)]


class _ShortRect(Structure):
    _fields_ = [("left", c_short), ("top", c_short), ("right", c_short), ("bottom", c_short)]


class VideoFormat(Structure):
    """CUVIDEOFORMAT: what the parser found in a sequence header."""

    _fields_ = [
        ("codec", c_int),
        ("frame_rate_numerator", c_uint),
        ("frame_rate_denominator", c_uint),
        ("progressive_sequence", c_ubyte),
        ("bit_depth_luma_minus8", c_ubyte),
        ("bit_depth_chroma_minus8", c_ubyte),
        ("min_num_decode_surfaces", c_ubyte),
        ("coded_width", c_uint),
        ("coded_height", c_uint),
        ("display_area", _Rect),
        ("chroma_format", c_int),
        ("bitrate", c_uint),
        ("display_aspect_ratio", c_int * 2),
        ("video_signal_description", c_ubyte * 4),
        ("seqhdr_data_length", c_uint),
    ]


class SourceDataPacket(Structure):
    """CUVIDSOURCEDATAPACKET: bytes handed to the parser."""

    _fields_ = [("flags", c_ulong), ("payload_size", c_ulong), ("payload", c_void_p), ("timestamp", c_longlong)]


class ParserDisplayInfo(Structure):
    """CUVIDPARSERDISPINFO: a picture ready to be shown."""

    _fields_ = [
        ("picture_index", c_int),
        ("progressive_frame", c_int),
        ("top_field_first", c_int),
        ("repeat_first_field", c_int),
        ("timestamp", c_longlong),
    ]


SequenceCallback = CFUNCTYPE(c_int, c_void_p, POINTER(VideoFormat))
DecodeCallback = CFUNCTYPE(c_int, c_void_p, c_void_p)  # the picture parameters go to the decoder as they are
DisplayCallback = CFUNCTYPE(c_int, c_void_p, POINTER(ParserDisplayInfo))


class ParserParams(Structure):
    """CUVIDPARSERPARAMS."""

    _fields_ = [
        ("CodecType", c_int),
        ("ulMaxNumDecodeSurfaces", c_uint),
        ("ulClockRate", c_uint),
        ("ulErrorThreshold", c_uint),
        ("ulMaxDisplayDelay", c_uint),
        ("bitfields", c_uint),  # bAnnexb, bMemoryOptimize: both 0
        ("uReserved1", c_uint * 4),
        ("pUserData", c_void_p),
        ("pfnSequenceCallback", SequenceCallback),
        ("pfnDecodePicture", DecodeCallback),
        ("pfnDisplayPicture", DisplayCallback),
        ("pfnGetOperatingPoint", c_void_p),
        ("pfnGetSEIMsg", c_void_p),
        ("pvReserved2", c_void_p * 5),
        ("pExtVideoInfo", c_void_p),
    ]


class DecodeCreateInfo(Structure):
    """CUVIDDECODECREATEINFO."""

    _fields_ = [
        ("ulWidth", c_ulong),
        ("ulHeight", c_ulong),
        ("ulNumDecodeSurfaces", c_ulong),
        ("CodecType", c_int),
        ("ChromaFormat", c_int),
        ("ulCreationFlags", c_ulong),
        ("bitDepthMinus8", c_ulong),
        ("ulIntraDecodeOnly", c_ulong),
        ("ulMaxWidth", c_ulong),
        ("ulMaxHeight", c_ulong),
        ("Reserved1", c_ulong),
        ("display_area", _ShortRect),
        ("OutputFormat", c_int),
        ("DeinterlaceMode", c_int),
        ("ulTargetWidth", c_ulong),
        ("ulTargetHeight", c_ulong),
        ("ulNumOutputSurfaces", c_ulong),
        ("vidLock", c_void_p),
        ("target_rect", _ShortRect),
        ("enableHistogram", c_ulong),
        ("Reserved2", c_ulong * 4),
    ]


class ProcParams(Structure):
    """CUVIDPROCPARAMS: how a decoded picture is mapped."""

    _fields_ = [
        ("progressive_frame", c_int),
        ("second_field", c_int),
        ("top_field_first", c_int),
        ("unpaired_field", c_int),
        ("reserved_flags", c_uint),
        ("reserved_zero", c_uint),
        ("raw_input_dptr", c_ulonglong),
        ("raw_input_pitch", c_uint),
        ("raw_input_format", c_uint),
        ("raw_output_dptr", c_ulonglong),
        ("raw_output_pitch", c_uint),
        ("Reserved1", c_uint),
        ("output_stream", c_void_p),
        ("Reserved", c_uint * 46),
        ("histogram_dptr", c_void_p),
        ("Reserved2", c_void_p * 1),
    ]


class CuvidStructures:
    """NVDEC's structures, by their names in the Video Codec SDK's headers."""

    CUVIDEOFORMAT = VideoFormat
    CUVIDSOURCEDATAPACKET = SourceDataPacket
    CUVIDPARSERDISPINFO = ParserDisplayInfo
    CUVIDPARSERPARAMS = ParserParams
    CUVIDDECODECREATEINFO = DecodeCreateInfo
    CUVIDPROCPARAMS = ProcParams


class _CuvidError(RuntimeError):
    """A call into NVDEC's API failed; ``code`` is its CUresult."""

    def __init__(self, call: str, code: int, name: str):
        super().__init__(f"{call} failed: {name} ({code})")
        self.code = code


class CuvidLibrary:
    """The driver's ``libnvcuvid`` and ``libcuda`` with their signatures; each call checked."""

    def __init__(self):
        self.cuvid = ctypes.CDLL("libnvcuvid.so.1")
        self.cuda = ctypes.CDLL("libcuda.so.1")
        signatures = {
            "cuvidCreateVideoParser": (POINTER(c_void_p), POINTER(ParserParams)),
            "cuvidParseVideoData": (c_void_p, POINTER(SourceDataPacket)),
            "cuvidDestroyVideoParser": (c_void_p,),
            "cuvidCreateDecoder": (POINTER(c_void_p), POINTER(DecodeCreateInfo)),
            "cuvidDestroyDecoder": (c_void_p,),
            "cuvidDecodePicture": (c_void_p, c_void_p),
            "cuvidMapVideoFrame64": (c_void_p, c_int, POINTER(c_ulonglong), POINTER(c_uint), POINTER(ProcParams)),
            "cuvidUnmapVideoFrame64": (c_void_p, c_ulonglong),
            "cuvidCtxLockCreate": (POINTER(c_void_p), c_void_p),
            "cuvidCtxLockDestroy": (c_void_p,),
        }
        for name, arguments in signatures.items():
            function = getattr(self.cuvid, name)
            function.argtypes, function.restype = arguments, c_int
        self.cuda.cuCtxGetCurrent.argtypes, self.cuda.cuCtxGetCurrent.restype = (POINTER(c_void_p),), c_int
        self.cuda.cuGetErrorName.argtypes, self.cuda.cuGetErrorName.restype = (c_int, POINTER(c_char_p)), c_int
        # Bound once: the parser's callbacks run them for every picture.
        self.parse = self.cuvid.cuvidParseVideoData
        self.decode_picture = self.cuvid.cuvidDecodePicture
        self.map_frame = self.cuvid.cuvidMapVideoFrame64
        self.unmap_frame = self.cuvid.cuvidUnmapVideoFrame64

    def error_name(self, code: int) -> str:
        name = c_char_p()
        if self.cuda.cuGetErrorName(code, byref(name)) != 0 or not name.value:
            return "unknown error"
        return name.value.decode()

    def check(self, call: str, code: int) -> None:
        if code != 0:
            raise _CuvidError(call, code, self.error_name(code))

    def current_context(self) -> int:
        context = c_void_p()
        self.check("cuCtxGetCurrent", self.cuda.cuCtxGetCurrent(byref(context)))
        if not context.value:
            raise _CuvidError("cuCtxGetCurrent", 201, "CUDA_ERROR_INVALID_CONTEXT")
        return context.value


@lru_cache(maxsize=1)
def _load() -> tuple[CuvidLibrary | None, str | None]:
    try:
        return CuvidLibrary(), None
    except (OSError, AttributeError) as error:
        return None, f"NVDEC's API cannot be loaded ({error})"


def cuvid_library() -> CuvidLibrary:
    """The loaded library; raises :class:`OSError` where the driver has none."""
    library, reason = _load()
    if library is None:
        raise OSError(reason)
    return library


def cuvid_unavailable_reason() -> str | None:
    """Why NVDEC's own API cannot be used in this process (no driver library), or None."""
    return _load()[1]
