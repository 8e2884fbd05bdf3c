"""vclip: sample video clips for deep learning, with NVDEC decoding and fused CUDA kernels.

``import vclip`` needs only NumPy and PyAV; the GPU backend imports PyNvVideoCodec and CuPy
when a CUDA device is asked for.
"""

from .decoder import Frames, VideoDecoder
from .errors import (
    CorruptVideoError,
    FallbackWarning,
    NotAVideoError,
    UnsupportedCodecError,
    VideoError,
    VideoNotFoundError,
)
from .index import VideoIndex, clear_index_cache, index_video
from .memory import (
    MemoryEstimate,
    estimate_memory,
    format_bytes,
    largest_batch_size,
    largest_sequence_length,
    parse_bytes,
)
from .plan import DecodePlan, DecodeSegment, plan_decode
from .sampling import ClipSampler, contiguous, downscaled, indexed, jittered, keyframe, strided
from .transforms import IMAGENET_MEAN, IMAGENET_STD, FrameGeometry, TransformSpec

__version__ = "0.1.0"

__all__ = [
    "ClipSampler",
    "CorruptVideoError",
    "DecodePlan",
    "DecodeSegment",
    "FallbackWarning",
    "FrameGeometry",
    "Frames",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "MemoryEstimate",
    "NotAVideoError",
    "TransformSpec",
    "UnsupportedCodecError",
    "VideoDecoder",
    "VideoError",
    "VideoIndex",
    "VideoNotFoundError",
    "clear_index_cache",
    "contiguous",
    "downscaled",
    "estimate_memory",
    "format_bytes",
    "index_video",
    "indexed",
    "jittered",
    "keyframe",
    "largest_batch_size",
    "largest_sequence_length",
    "parse_bytes",
    "plan_decode",
    "strided",
    "__version__",
]
