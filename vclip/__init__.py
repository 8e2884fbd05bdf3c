"""vclip: sample video clips for deep learning, with NVDEC decoding and fused CUDA kernels.

``import vclip`` needs only NumPy and PyAV; the GPU backend imports PyNvVideoCodec and CuPy
when a CUDA device is asked for, and ``vclip.ClipLoader`` imports torch when first used.
"""

from .decoder import Frames, VideoDecoder
from .errors import (
    CorruptVideoError,
    FallbackWarning,
    NotAVideoError,
    UnreadableVideoError,
    UnsupportedCodecError,
    VideoError,
    VideoNotFoundError,
)
from .index import VideoIndex, clear_index_cache, index_video
from .memory import (
    LoaderMemoryEstimate,
    MemoryEstimate,
    estimate_loader_memory,
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
    "ClipBatch",
    "ClipLoader",
    "ClipSampler",
    "CorruptVideoError",
    "DecodePlan",
    "DecodeSegment",
    "FallbackWarning",
    "FrameGeometry",
    "Frames",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "LoaderMemoryEstimate",
    "MemoryEstimate",
    "NotAVideoError",
    "TransformSpec",
    "UnreadableVideoError",
    "UnsupportedCodecError",
    "VideoDecoder",
    "VideoError",
    "VideoIndex",
    "VideoNotFoundError",
    "clear_index_cache",
    "contiguous",
    "downscaled",
    "estimate_loader_memory",
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


def __getattr__(name: str):
    """Import the loader (which needs torch) on first use, so ``import vclip`` works without torch."""
    if name in ("ClipLoader", "ClipBatch"):
        from . import loader

        return getattr(loader, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
