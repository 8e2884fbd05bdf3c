"""vclip: sample video clips for deep learning, with NVDEC decoding and fused CUDA kernels.

``import vclip`` needs only NumPy and PyAV; the GPU backend imports PyNvVideoCodec and CuPy
when a CUDA device is asked for, and ``vclip.ClipLoader`` imports torch when first used. Every
function that decodes takes ``device``: ``"auto"`` (the default: NVDEC where usable, else the CPU
with one FallbackWarning), ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.

Frames and clips of one video:
    VideoDecoder (get_frames, get_frames_played_at, get_clips, get_audio) -> Frames
    (data, frame_indices, pts_seconds, padded, augmentations, clip_ids, view_ids, audio)

Audio with the clips, cut by the same times, in ``vclip.audio``:
    AudioSpec (rate, channels, dtype, per clip or per frame, stream, no-audio policy) -> AudioClips;
    index_audio -> AudioIndex

Samplers (which frames make a clip), in ``vclip.sampling``:
    contiguous, strided, jittered, keyframe, indexed, downscaled -> ClipSampler
    (frame numbers, or seconds: fps=, duration=, step_seconds=; segment=(start, end) seconds)

Transforms (resize, crop, flip, colour, normalize, dtype, layout, fused in one pass), in ``vclip.transforms``:
    TransformSpec, TransformSpec.imagenet, TransformSpec.from_torchvision (a torchvision v2 Compose,
    also taken as transform=), FrameGeometry, IMAGENET_MEAN, IMAGENET_STD; augmentations
    RandomResizedCrop, MultiScaleCrop, RandomShortSideScale, ColorJitter, grayscale_probability,
    per_frame, spatial_views (multi-view evaluation); the draws recorded per clip: Augmentations

Training batches (needs torch), in ``vclip.loader``:
    ClipLoader (evaluation=, audio=) -> ClipBatch (data, labels, padded, augmentations, video_ids,
    clip_ids, view_ids, audio, audio_lengths, has_audio); loader.stats() -> LoaderStats;
    LabeledVideo (a row: path, label, segment)

Memory budgeting, in ``vclip.memory``:
    estimate_memory -> MemoryEstimate, largest_batch_size, largest_sequence_length (the formula);
    plan_loader_memory -> LoaderMemoryEstimate (what a ClipLoader needs, .largest_batch_size(budget));
    parse_bytes, format_bytes

Datasets where they live, in ``vclip.webdataset``, ``vclip.huggingface`` and ``vclip.streaming``:
    WebDatasetSource (tar shards on disk, HTTP or S3, read by byte range), write_shards -> ShardWriteResult
    (vclip shard), HuggingFaceSource (a datasets.Dataset), ClipStream -> StreamBatch (shards read as
    streams; needs torch)

Videos at URLs: set_remote_options -> RemoteOptions (timeouts, tries, spill limit for servers without
Range); RemoteReads (what was read per URL, in loader.stats().remote_reads).
Indexes and decode plans: index_video, VideoIndex, clear_index_cache; plan_decode -> DecodePlan of
DecodeSegment (``vclip.index``, ``vclip.plan``).
Jobs over many videos (workers=, ray=, ray_address=): ``vclip.keyframes`` (extract_keyframes,
extract_keyframes_many, find_shot_boundaries, find_shot_boundaries_many), ``vclip.check`` (check_video, check_videos),
``vclip.catalog`` (build_catalog, read_catalog), ``vclip.ray`` (Ray Data datasets of them).
Test videos: ``vclip.synthetic.make_video``.
Errors (``vclip.errors``, the tree there): VideoError and its kinds (VideoNotFoundError,
UnreadableVideoError, NotAVideoError, CorruptVideoError, UnsupportedCodecError, NoAudioError,
NoClipFitsError, NoVideoLeftError), ArgumentError for a bad argument (FrameIndexError, PathNotFoundError,
NotInCatalogError); each also derives from the built-in exception it takes the place of;
FallbackWarning, TruncatedVideoWarning, RemoteReadWarning, CatalogWarning, IndexCacheWarning,
DamagedHeaderWarning.
"""

from __future__ import annotations

import importlib
from typing import Any

from . import (  # noqa: F401
    audio,
    check,
    decoder,
    errors,
    huggingface,
    index,
    keyframes,
    memory,
    plan,
    sampling,
    synthetic,
    transforms,
    webdataset,
)
from ._bytes.remote import RemoteOptions, RemoteReads, set_remote_options
from ._datasets.inputs import LabeledVideo
from ._loader.stats import LoaderStats
from ._version import __version__
from .audio import AudioClips, AudioIndex, AudioSpec, index_audio
from .decoder import Frames, VideoDecoder
from .errors import (
    ArgumentError,
    CatalogWarning,
    CorruptVideoError,
    DamagedHeaderWarning,
    FallbackWarning,
    FrameIndexError,
    IndexCacheWarning,
    NoAudioError,
    NoClipFitsError,
    NotAVideoError,
    NotInCatalogError,
    NoVideoLeftError,
    PathNotFoundError,
    RemoteReadWarning,
    TruncatedVideoWarning,
    UnreadableVideoError,
    UnsupportedCodecError,
    VideoError,
    VideoNotFoundError,
    format_bytes,
    parse_bytes,
)
from .huggingface import HuggingFaceSource
from .index import VideoIndex, clear_index_cache, index_video
from .memory import (
    LoaderMemoryEstimate,
    MemoryEstimate,
    estimate_memory,
    largest_batch_size,
    largest_sequence_length,
    plan_loader_memory,
)
from .plan import DecodePlan, DecodeSegment, plan_decode
from .sampling import (
    ClipSampler,
    contiguous,
    downscaled,
    indexed,
    jittered,
    keyframe,
    strided,
)
from .transforms import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    Augmentations,
    ColorJitter,
    FrameGeometry,
    MultiScaleCrop,
    RandomResizedCrop,
    RandomShortSideScale,
    TransformSpec,
)
from .webdataset import ShardWriteResult, WebDatasetSource, write_shards

for _name in ("AudioIndex", "LabeledVideo", "LoaderStats", "RemoteOptions", "RemoteReads", "ShardWriteResult",
              "format_bytes", "index_audio", "parse_bytes", "set_remote_options"):  # defined in private modules
    globals()[_name].__module__ = __name__
del _name

_DISTRIBUTION = "vclip-nvdec"  # the name on the package index (pip install vclip-nvdec); the import name is vclip

__all__ = [
    "ArgumentError",
    "AudioClips",
    "AudioIndex",
    "AudioSpec",
    "CatalogWarning",
    "Augmentations",
    "ClipBatch",
    "ClipLoader",
    "ClipSampler",
    "ColorJitter",
    "ClipStream",
    "CorruptVideoError",
    "DamagedHeaderWarning",
    "DecodePlan",
    "DecodeSegment",
    "FallbackWarning",
    "HuggingFaceSource",
    "IndexCacheWarning",
    "FrameGeometry",
    "Frames",
    "IMAGENET_MEAN",
    "IMAGENET_STD",
    "LoaderMemoryEstimate",
    "LoaderStats",
    "MemoryEstimate",
    "MultiScaleCrop",
    "NoAudioError",
    "NoClipFitsError",
    "NotAVideoError",
    "NoVideoLeftError",
    "NotInCatalogError",
    "PathNotFoundError",
    "FrameIndexError",
    "RandomResizedCrop",
    "RandomShortSideScale",
    "RemoteOptions",
    "RemoteReadWarning",
    "RemoteReads",
    "ShardWriteResult",
    "StreamBatch",
    "TransformSpec",
    "TruncatedVideoWarning",
    "UnreadableVideoError",
    "UnsupportedCodecError",
    "VideoDecoder",
    "VideoError",
    "VideoIndex",
    "VideoNotFoundError",
    "WebDatasetSource",
    "__version__",
    "clear_index_cache",
    "contiguous",
    "downscaled",
    "estimate_memory",
    "format_bytes",
    "index_audio",
    "index_video",
    "indexed",
    "jittered",
    "LabeledVideo",
    "keyframe",
    "largest_batch_size",
    "largest_sequence_length",
    "parse_bytes",
    "plan_decode",
    "plan_loader_memory",
    "set_remote_options",
    "strided",
    "write_shards",
]

_SUBMODULES = (
    "audio", "check", "decoder", "errors", "huggingface", "index", "keyframes", "memory", "plan", "sampling",
    "synthetic", "transforms", "webdataset",
)
"""Public submodules, imported with the package."""
_LAZY_SUBMODULES = ("loader", "streaming")
"""Public submodules imported on first use: ``loader`` and ``streaming`` need torch. (``vclip.cli``, the command line,
is imported by the ``vclip`` command, or by ``import vclip.cli``.)"""
_LOADER_NAMES = ("ClipLoader", "ClipBatch")
_STREAMING_NAMES = ("ClipStream", "StreamBatch")


def __getattr__(name: str) -> Any:
    """Import the loader (which needs torch) on first use, so ``import vclip`` works without torch."""
    if name in _LOADER_NAMES or name in _STREAMING_NAMES or name in _LAZY_SUBMODULES:
        module_name = "streaming" if name in _STREAMING_NAMES or name == "streaming" else "loader"
        try:
            module = importlib.import_module(f".{module_name}", __name__)
        except ModuleNotFoundError as error:
            if error.name != "torch":
                raise
            raise ModuleNotFoundError(
                f"vclip.{name} needs PyTorch, which is not installed: pip install '{_DISTRIBUTION}[torch]'",
                name="torch",
            ) from error
        return module if name == module_name else getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _torch_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None


def __dir__() -> list[str]:
    """Everything public: ``__all__``, the submodules, and the loader's names (listed when torch is
    installed, so that ``help(vclip)`` works without it; ``dir`` itself never imports torch)."""
    names = set(__all__) | set(_SUBMODULES) | set(_LAZY_SUBMODULES) | {n for n in globals() if n.startswith("__")}
    if not _torch_installed():
        names -= set(_LOADER_NAMES) | set(_STREAMING_NAMES) | set(_LAZY_SUBMODULES)
    return sorted(names)
