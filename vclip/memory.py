"""GPU memory budgeting: the formula, the largest batch or clip length that fits, and the planner
of a ClipLoader's peak (the formula plus what it leaves out).

    bytes = width x height x channels x bytes_per_element x batch_size x sequence_length x (1 + augmentation_factor)

Two answers to "how large a batch fits in this budget":

- :func:`largest_batch_size`: by the formula alone (one batch of clips, nothing else).
- ``plan_loader_memory(...).largest_batch_size(budget)``: what a :class:`~vclip.ClipLoader` with
  these settings (its own argument names) can take: it also holds ``prefetch_queue_depth + 3``
  pooled batches, the decode surfaces of every NVDEC decoder, a workspace and a CUDA context per
  process. The loader checks ``memory_budget`` with the same plan, so both give the same number.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from ._engine.cpu import DEFAULT_WORKERS as CPU_DEFAULT_THREADS
from ._engine.hybrid import UPLOAD_PICTURES, semi_planar_shape
from ._engine.nvdec import DECODERS_PER_THREAD, NvdecBackend
from ._engine.processes import THREADS_PER_PROCESS
from ._engine.scheduler import decode_processes_paced, loader_decode_processes
from ._pacing_rules import PACING
from .errors import check_count_or_auto, check_integer, check_number, fail, format_bytes, is_integer, parse_bytes

__all__ = [
    "MemoryEstimate",
    "estimate_memory",
    "largest_batch_size",
    "largest_sequence_length",
    "BYTES_PER_ELEMENT",
    "LoaderMemoryEstimate",
    "plan_loader_memory",
    "NVDEC_DECODE_SURFACES",
    "NVDEC_OUTPUT_SURFACES",
    "NVDEC_BYTES_PER_PIXEL",
    "LOADER_WORKSPACE_BYTES",
    "CUDA_CONTEXT_BYTES",
    "STAGING_PICTURES",
    "NVDEC_DEFAULT_THREADS",
    "PROCESS_DEFAULT_THREADS",
]

BYTES_PER_ELEMENT = {"uint8": 1, "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}
@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes of one batch by the formula, with the inputs that gave it."""

    width: int
    height: int
    channels: int
    bytes_per_element: int
    batch_size: int
    sequence_length: int
    augmentation_factor: float
    bytes: int

    @property
    def gb(self) -> float:
        return self.bytes / 1e9

    @property
    def gib(self) -> float:
        return self.bytes / 2**30

    def __str__(self) -> str:
        return format_bytes(self.bytes)


def _element_bytes(dtype: str | int) -> int:
    if isinstance(dtype, str) and dtype in BYTES_PER_ELEMENT:
        return BYTES_PER_ELEMENT[dtype]
    if not isinstance(dtype, str) and is_integer(dtype) and dtype >= 1:
        return int(dtype)
    names = ", ".join(map(repr, BYTES_PER_ELEMENT))
    raise fail("dtype", dtype, f"one of {names} or a number of bytes per element >= 1")


def estimate_memory(
    *,
    width: int,
    height: int,
    batch_size: int,
    sequence_length: int,
    channels: int = 3,
    dtype: str | int = "uint8",
    augmentation_factor: float = 0.0,
) -> MemoryEstimate:
    """Bytes by the formula ``W x H x C x bytes x batch x sequence_length x (1 + augmentation_factor)``.

    ``augmentation_factor`` is taken as written in decimal (0.1 means one tenth exactly); the result
    is rounded up to whole bytes. 1920x1080 RGB uint8, batch 32, 16 frames: 3,185,049,600 bytes.

    ``augmentation_factor``, the memory augmentations add as a fraction of the batch, per augmentation:

    - 0 for everything a :class:`~vclip.TransformSpec` fuses into the pass from the decoded picture
      to the batch: resize, crop, :class:`~vclip.RandomResizedCrop`, :class:`~vclip.MultiScaleCrop`,
      :class:`~vclip.RandomShortSideScale`, flip, :class:`~vclip.ColorJitter` (contrast's per-frame
      mean is one float per frame), grayscale, normalization, dtype and layout: no intermediate
      picture exists.
    - spatial views (``spatial_views=3``) multiply the batch itself: count them in ``batch_size``
      (``batch_size x views``), as :func:`plan_loader_memory` does with ``views=``.
    - augmentations run afterwards on the batch (Kornia, torchvision v2 on the CUDA tensor, mixup,
      cutmix): about 1 for each full-size tensor they hold at once beside the batch (an
      out-of-place op makes one; a chain of ``k`` out-of-place ops whose intermediates are freed
      as it goes holds about 1 to 2), in the batch's dtype or the dtype they compute in.

    Args:
        dtype: ``"uint8"``, ``"float16"``, ``"bfloat16"``, ``"float32"``, ``"float64"`` or bytes per element.

    Raises:
        ArgumentError: (a ValueError) A size or count that is not an integer >= 1 (NumPy
            integers are fine), a negative augmentation factor, an unknown dtype.
    """
    width, height, channels, batch_size, sequence_length = (
        check_integer(name, value, minimum=1) for name, value in (
            ("width", width), ("height", height), ("channels", channels),
            ("batch_size", batch_size), ("sequence_length", sequence_length),
        )
    )
    element = _element_bytes(dtype)
    augmentation = check_number("augmentation_factor", augmentation_factor, minimum=0)
    exact = width * height * channels * element * batch_size * sequence_length * (1 + Fraction(str(augmentation)))
    return MemoryEstimate(width, height, channels, element, batch_size, sequence_length, augmentation, math.ceil(exact))


def _exact_bytes(**inputs) -> Fraction:
    estimate = estimate_memory(**inputs)
    return estimate.width * estimate.height * estimate.channels * estimate.bytes_per_element * estimate.batch_size * (
        estimate.sequence_length * (1 + Fraction(str(estimate.augmentation_factor)))
    )


def largest_batch_size(budget: int | str, *, width: int, height: int, sequence_length: int, **options) -> int:
    """The largest batch size whose formula bytes fit ``budget`` (0 when not even one clip fits).

    Options as :func:`estimate_memory` (``channels``, ``dtype``, ``augmentation_factor``).
    """
    per_clip = _exact_bytes(width=width, height=height, batch_size=1, sequence_length=sequence_length, **options)
    return math.floor(parse_bytes(budget, name="budget") / per_clip)


def largest_sequence_length(budget: int | str, *, width: int, height: int, batch_size: int, **options) -> int:
    """The largest clip length whose formula bytes fit ``budget`` (0 when not even one frame fits)."""
    per_frame = _exact_bytes(width=width, height=height, batch_size=batch_size, sequence_length=1, **options)
    return math.floor(parse_bytes(budget, name="budget") / per_frame)


# What the formula leaves out. Starting values, to be calibrated against the measured peak on the GPU.
NVDEC_DECODE_SURFACES = 20
"""Decode surfaces one NVDEC decoder holds (reference pictures plus its decode queue)."""
NVDEC_OUTPUT_SURFACES = 4
"""Output (mapped) surfaces one NVDEC decoder holds."""
NVDEC_BYTES_PER_PIXEL = {8: 1.5, 16: 3.0}
"""Bytes per pixel of one surface by stored sample bits: NV12 (8-bit) and P016 (10/12-bit), 4:2:0."""
LOADER_WORKSPACE_BYTES = 64 * 2**20
"""Kernel module, CUDA streams and events of the decode workers, CuPy pool slack."""
CUDA_CONTEXT_BYTES = 500 * 2**20
"""The CUDA context of the process (shared by CuPy and torch)."""
STAGING_PICTURES = UPLOAD_PICTURES
"""Pictures each CPU decoder beside NVDEC stages in device memory (the pictures of one video's
request, packed, uploaded at once)."""
RING_BUFFERS_BEYOND_DEPTH = 3
"""Output buffers a loader's pool holds beyond ``prefetch_queue_depth``: the batch being built, the
one the training loop holds, and the one it held last (still referenced from its loop when the
next batches are submitted)."""


NVDEC_DEFAULT_THREADS = NvdecBackend.default_workers
"""Decode threads (hence NVDEC decoders) of a GPU loader decoding in its own process, when
``num_threads=0``: the NVDEC backend's default."""
PROCESS_DEFAULT_THREADS = THREADS_PER_PROCESS
"""Decode threads per decode process when ``num_threads=0``, on the GPU and on the CPU."""


@dataclass(frozen=True)
class LoaderMemoryEstimate:
    """Peak GPU memory of a ClipLoader, part by part (bytes; on the CPU, host bytes of the buffers).

    Attributes:
        batch: One output batch by the formula (:class:`MemoryEstimate`); its ``batch_size``
            counts samples (clips times ``views``).
        buffers: Output buffers in the loader's pool (``prefetch_queue_depth + 3``).
        output_buffers: ``batch.bytes x buffers``.
        decoders: NVDEC decoders (one per decode thread in all processes, times the kinds of
            video each keeps a decoder for; 0 on the CPU).
        decode_surfaces: Surfaces of all decoders, at the largest video size:
            ``decoders x (NVDEC_DECODE_SURFACES + NVDEC_OUTPUT_SURFACES) x NVDEC_BYTES_PER_PIXEL x W x H``.
        workspace: :data:`LOADER_WORKSPACE_BYTES` per process on the GPU, 0 on the CPU.
        cuda_context: :data:`CUDA_CONTEXT_BYTES` per process (the loader's and each decode
            worker process's) on the GPU, 0 on the CPU.
        staging: The device pictures CPU decoders on the GPU stage (:data:`STAGING_PICTURES` each
            at the largest video size, as NVDEC lays them out).
        total: The sum of the parts.
        views: Samples per clip (a transform's ``spatial_views``): a batch of ``batch_size``
            clips holds ``batch_size x views`` samples.
        audio_buffers: The audio of ``buffers`` batches (with ``audio``): the pooled host
            buffers, pinned on the GPU, where the copies the training loop holds take as much at most.
        audio_bytes_per_clip: The audio of one clip in a batch.
        processes: Decode processes (each with a CUDA context and a workspace on the GPU).
        process_decoders: NVDEC decoders in those processes (counted in ``decoders``).
        cpu_decoders: CPU decoders beside NVDEC (their ``staging``).
    """

    batch: MemoryEstimate
    buffers: int
    output_buffers: int
    decoders: int
    decode_surfaces: int
    workspace: int
    cuda_context: int
    total: int
    views: int = 1
    audio_buffers: int = 0
    audio_bytes_per_clip: int = 0
    staging: int = 0
    processes: int = 0
    process_decoders: int = 0
    cpu_decoders: int = 0

    def limited(self, *, processes: int, buffers: int, cpu_decoders: int) -> LoaderMemoryEstimate:
        """This plan for at most ``processes`` decode processes, ``buffers`` output buffers and
        ``cpu_decoders`` CPU decoders (a plan is for the most of each)."""
        processes, buffers = min(processes, self.processes), max(1, min(buffers, self.buffers))
        cpu_decoders = min(cpu_decoders, self.cpu_decoders)
        idle = self.processes - processes
        process_decoders = self.process_decoders * processes // self.processes if self.processes else 0
        decoders = self.decoders - (self.process_decoders - process_decoders)
        decode_surfaces = self.decode_surfaces * decoders // self.decoders if self.decoders else 0
        workspace = self.workspace - idle * LOADER_WORKSPACE_BYTES if self.workspace else 0
        cuda_context = self.cuda_context - idle * CUDA_CONTEXT_BYTES if self.cuda_context else 0
        output_buffers = self.output_buffers // self.buffers * buffers
        audio_buffers = self.audio_buffers // self.buffers * buffers
        staging = self.staging * cpu_decoders // self.cpu_decoders if self.cpu_decoders else 0
        return replace(self, buffers=buffers, output_buffers=output_buffers, decoders=decoders,
                       decode_surfaces=decode_surfaces, workspace=workspace, cuda_context=cuda_context,
                       audio_buffers=audio_buffers, staging=staging, processes=processes,
                       process_decoders=process_decoders, cpu_decoders=cpu_decoders,
                       total=output_buffers + decode_surfaces + workspace + cuda_context + audio_buffers + staging)

    def working(self, *, processes: int, buffers: int, cpu_decoders: int) -> int:
        """:attr:`own_bytes` of the loader with only ``processes`` decode processes, ``buffers`` output
        buffers and ``cpu_decoders`` CPU decoders at work (what its pacing left running): the plan
        is for the most of each."""
        return self.limited(processes=processes, buffers=buffers, cpu_decoders=cpu_decoders).own_bytes

    @property
    def own_bytes(self) -> int:
        """What the loader itself adds on the GPU: the total less the CUDA context of the process it
        runs in (the training process's, there anyway); decode processes' contexts stay counted."""
        return self.total - min(self.cuda_context, CUDA_CONTEXT_BYTES)

    @property
    def fixed_bytes(self) -> int:
        """The part that does not grow with the batch size."""
        return self.decode_surfaces + self.workspace + self.cuda_context + self.staging

    def largest_batch_size(self, budget: int | str) -> int:
        """The largest batch size (in clips, each of ``views`` samples) whose total fits ``budget``
        (0 when not even one clip fits)."""
        per_buffer = (parse_bytes(budget, name="budget") - self.fixed_bytes) // self.buffers
        if per_buffer <= 0:
            return 0
        batch = self.batch
        options: dict[str, Any] = dict(width=batch.width, height=batch.height, sequence_length=batch.sequence_length,
                                       channels=batch.channels, dtype=batch.bytes_per_element,
                                       augmentation_factor=batch.augmentation_factor)
        per_sample = _exact_bytes(batch_size=1, **options) + self.audio_bytes_per_clip
        return math.floor(per_buffer / per_sample) // self.views

    def __str__(self) -> str:
        return (
            f"{format_bytes(self.total)}: {self.buffers} output buffers {self.output_buffers:,}, "
            f"{self.decoders} decoders' surfaces {self.decode_surfaces:,}, workspace {self.workspace:,}, "
            f"CUDA context {self.cuda_context:,}"
            + (f", CPU decoders' staging {self.staging:,}" if self.staging else "")
            + (f", audio {self.audio_buffers:,}" if self.audio_buffers else "")
        )


BUDGET_ORDER = ("decode_processes", "cpu_decoders", "prefetch_queue_depth")
"""The counts a memory budget lowers, in turn, where the user left them to the loader: decode
processes first (each holds a CUDA context of its own), then CPU decoders (their staging), then
batches in flight (an output buffer each), down to the least the loader runs with."""


def fit_to_budget(estimate: LoaderMemoryEstimate, budget: int, left_to_loader: set[str]) -> tuple[
        LoaderMemoryEstimate, dict[str, int]]:
    """The plan of the most a loader planned as ``estimate`` may run within ``budget`` bytes, and
    the counts lowered for it (by setting name): those of ``left_to_loader``, in :data:`BUDGET_ORDER`,
    each only while lowering it lowers the plan. The plan is over ``budget`` when even the least is."""
    counts = {"decode_processes": estimate.processes, "cpu_decoders": estimate.cpu_decoders,
              "prefetch_queue_depth": estimate.buffers - RING_BUFFERS_BEYOND_DEPTH}
    least = {"decode_processes": 0, "cpu_decoders": 0, "prefetch_queue_depth": PACING.min_depth}

    def plan() -> LoaderMemoryEstimate:
        return estimate.limited(processes=counts["decode_processes"], cpu_decoders=counts["cpu_decoders"],
                                buffers=counts["prefetch_queue_depth"] + RING_BUFFERS_BEYOND_DEPTH)

    current, lowered = plan(), {}
    for setting in (setting for setting in BUDGET_ORDER if setting in left_to_loader):
        while counts[setting] > least[setting] and current.total > budget:
            counts[setting] -= 1
            fewer = plan()
            if fewer.total >= current.total:  # it holds nothing here (decode processes on the CPU)
                counts[setting] += 1
                break
            current, lowered[setting] = fewer, counts[setting]
    return current, lowered


def left_to_loader(requested: Mapping[str, Any]) -> set[str]:
    """The counts of :data:`BUDGET_ORDER` that ``requested`` (by argument name) leaves to the loader (``"auto"``)."""
    return {setting for setting in BUDGET_ORDER if requested[setting] == "auto"}


def _plans_for_gpu(device: Any) -> bool:
    """Whether a loader on ``device`` decodes on the GPU. ``"cuda"``/``"cuda:N"`` plan for a GPU
    whether or not this machine has one; ``"auto"`` is resolved here (GPU when NVDEC is usable)."""
    from ._device import parse_device, resolve_device

    request = parse_device(device)
    if request.is_auto:
        return resolve_device("auto").device.is_cuda
    return request.names_cuda


def _decode_processes(decode_processes: int | str, gpu: bool, num_threads: int) -> int:
    """The most decode processes a loader with ``decode_processes`` runs (``"auto"`` resolved for
    this machine: on the GPU the processes its pacing may start beside NVDEC in its own process)."""
    return loader_decode_processes(check_count_or_auto("decode_processes", decode_processes), gpu=gpu,
                                   num_threads=num_threads)


def _decode_workers(*, gpu: bool, num_threads: int, processes: int, paced: bool) -> int:
    """:func:`loader_decode_workers` of a loader whose device, decode processes and pacing are resolved."""
    if paced:  # NVDEC threads here, and the decode processes the pacing may start
        return NVDEC_DEFAULT_THREADS + processes * PROCESS_DEFAULT_THREADS["cuda"]
    if processes:
        return processes * (num_threads or PROCESS_DEFAULT_THREADS["cuda" if gpu else "cpu"])
    return num_threads or (NVDEC_DEFAULT_THREADS if gpu else CPU_DEFAULT_THREADS)


def loader_decode_workers(*, device: Any = "auto", num_threads: int = 0, decode_processes: int | str = "auto") -> int:
    """Decode threads of a ClipLoader with these settings, in all its processes (its ``decode_workers``).

    Each one holds an NVDEC decoder on the GPU. ``num_threads=0`` takes the defaults:
    :data:`NVDEC_DEFAULT_THREADS` in the loader's process on the GPU (``min(8, CPUs)`` on the
    CPU), :data:`PROCESS_DEFAULT_THREADS` per decode process.

    Raises:
        ArgumentError: A count below 0, an unknown device.
    """
    num_threads = check_integer("num_threads", num_threads, minimum=0)
    gpu = _plans_for_gpu(device)
    paced = decode_processes_paced(decode_processes, gpu=gpu, num_threads=num_threads)
    processes = _decode_processes(decode_processes, gpu, num_threads)
    return _decode_workers(gpu=gpu, num_threads=num_threads, processes=processes, paced=paced)


def plan_loader_memory(
    *,
    width: int,
    height: int,
    batch_size: int,
    sequence_length: int,
    channels: int = 3,
    dtype: str | int = "uint8",
    augmentation_factor: float = 0.0,
    prefetch_queue_depth: int | str = "auto",
    num_threads: int = 0,
    decode_processes: int | str = "auto",
    device: Any = "auto",
    video_width: int | None = None,
    video_height: int | None = None,
    video_bit_depth: int = 8,
    cpu_decoders: int | str = "auto",
    video_kinds: int = 1,
    views: int = 1,
    audio: Any = None,
    audio_samples: int = 0,
) -> LoaderMemoryEstimate:
    """Peak memory of a ClipLoader with these settings (its ``memory_estimate``), in the loader's own terms.

    Args:
        width, height, batch_size, sequence_length, channels, dtype, augmentation_factor: One
            output batch, as :func:`estimate_memory` (``width``/``height`` of the output clips).
        views: Samples per clip, the transform's ``spatial_views`` (3 for 3-crop evaluation):
            each output batch holds ``batch_size x views`` clips' worth of samples.
        prefetch_queue_depth, num_threads, decode_processes, device: As :class:`~vclip.ClipLoader`
            (defaults too). ``device="cuda"`` plans for a GPU even on a machine without one.
        video_width, video_height, video_bit_depth: The largest video the loader decodes (its
            decode surfaces); default: the output size, as when clips are not resized.
        cpu_decoders: As :class:`~vclip.ClipLoader`: on the GPU each stages pictures in device
            memory (``staging``); they run in processes of their own, which hold no CUDA context.
        video_kinds: Distinct codec, bit depth and size combinations among the videos: each
            decode thread keeps an NVDEC decoder for each, up to :data:`DECODERS_PER_THREAD`
            (counted at the largest video's size).
        audio: The loader's :class:`~vclip.AudioSpec` (channels and dtype), or None (no audio).
        audio_samples: Samples of one channel of one clip's audio: ``S``, or ``T x S`` per frame
            (``S = ceil(seconds x sample_rate)`` of the longest span; the loader works it out from
            its videos). 16 kHz mono float32 over 1.03 s (16 frames at stride 2, 30 fps): 66,136
            bytes a clip.

    Raises:
        ArgumentError: As :func:`estimate_memory`; a count below its minimum; an unknown device.
    """
    from ._engine.scheduler import resolve_cpu_decoders

    video_kinds = check_integer("video_kinds", video_kinds, minimum=1)
    views = check_integer("views", views, minimum=1)
    prefetch_queue_depth = check_count_or_auto("prefetch_queue_depth", prefetch_queue_depth, minimum=1)
    on_gpu = _plans_for_gpu(device)
    num_threads = check_integer("num_threads", num_threads, minimum=0)
    processes = _decode_processes(decode_processes, on_gpu, num_threads)
    paced = decode_processes_paced(decode_processes, gpu=on_gpu, num_threads=num_threads)
    cpu_decoders = check_count_or_auto("cpu_decoders", cpu_decoders)
    count = resolve_cpu_decoders(cpu_decoders, gpu=on_gpu, decode_processes=processes, paced=paced)
    if prefetch_queue_depth == "auto":
        depth = PACING.max_depth if on_gpu else PACING.start_depth
    else:
        depth = int(prefetch_queue_depth)
    batch_size = check_integer("batch_size", batch_size, minimum=1)
    audio_samples = check_integer("audio_samples", audio_samples, minimum=0)
    audio_per_clip = audio.channels * audio.itemsize * audio_samples if audio is not None else 0
    parts = _loader_memory_from_parts(
        width=width, height=height, batch_size=batch_size * views, sequence_length=sequence_length, channels=channels,
        dtype=dtype, augmentation_factor=augmentation_factor, buffers=depth + RING_BUFFERS_BEYOND_DEPTH,
        decoders=_decode_workers(gpu=on_gpu, num_threads=num_threads, processes=processes, paced=paced)
        * min(video_kinds, DECODERS_PER_THREAD),
        video_width=width if video_width is None else video_width,
        video_height=height if video_height is None else video_height,
        video_bit_depth=video_bit_depth, on_gpu=on_gpu, processes=processes,
    )
    staging = 0
    if on_gpu and count:
        (rows, samples), sample = semi_planar_shape(width if video_width is None else video_width,
                                                    height if video_height is None else video_height, video_bit_depth)
        staging = count * STAGING_PICTURES * rows * samples * sample.itemsize
    audio_buffers = audio_per_clip * parts.batch.batch_size * parts.buffers  # every sample (clip or view) has its audio
    return replace(parts, views=views, audio_buffers=audio_buffers, audio_bytes_per_clip=audio_per_clip,
                   staging=staging, total=parts.total + audio_buffers + staging, processes=processes,
                   cpu_decoders=int(count) if on_gpu else 0,
                   process_decoders=processes * (num_threads or PROCESS_DEFAULT_THREADS["cuda"])
                   * min(video_kinds, DECODERS_PER_THREAD) if on_gpu else 0)


def _loader_memory_from_parts(
    *,
    width: int,
    height: int,
    batch_size: int,
    sequence_length: int,
    channels: int = 3,
    dtype: str | int = "uint8",
    augmentation_factor: float = 0.0,
    buffers: int = 4,
    decoders: int = 8,
    video_width: int = 0,
    video_height: int = 0,
    video_bit_depth: int = 8,
    on_gpu: bool = True,
    processes: int = 0,
) -> LoaderMemoryEstimate:
    """Peak memory of a ClipLoader from its parts' counts (what :func:`plan_loader_memory` works out
    from the loader's settings): the formula for each pooled output buffer, plus decode surfaces,
    workspace and CUDA context.

    Args:
        width, height, batch_size, sequence_length, channels, dtype, augmentation_factor: One
            output batch, as :func:`estimate_memory` (``width``/``height`` of the output clips).
        buffers: Output buffers in the pool (``prefetch_queue_depth + 3``).
        decoders: NVDEC decoders (the loader's ``decode_workers``).
        video_width, video_height, video_bit_depth: The largest decoded video (surface size).
        on_gpu: False for the CPU path: only the output buffers count (host memory).
        processes: Decode worker processes; each adds a CUDA context and a workspace.

    Raises:
        ArgumentError: As :func:`estimate_memory`; ``buffers`` below 1, ``decoders``,
            ``processes`` or video sizes below 0.
    """
    batch = estimate_memory(width=width, height=height, batch_size=batch_size, sequence_length=sequence_length,
                            channels=channels, dtype=dtype, augmentation_factor=augmentation_factor)
    buffers = check_integer("buffers", buffers, minimum=1)
    decoders, video_width, video_height, processes = (
        check_integer(name, value, minimum=0) for name, value in (
            ("decoders", decoders), ("video_width", video_width), ("video_height", video_height),
            ("processes", processes),
        )
    )
    video_bit_depth = check_integer("video_bit_depth", video_bit_depth, minimum=1)
    decoders = decoders if on_gpu else 0
    surface_bytes = NVDEC_BYTES_PER_PIXEL[8 if video_bit_depth <= 8 else 16] * video_width * video_height
    decode_surfaces = math.ceil(decoders * (NVDEC_DECODE_SURFACES + NVDEC_OUTPUT_SURFACES) * surface_bytes)
    workspace = LOADER_WORKSPACE_BYTES * (1 + processes) if on_gpu else 0
    cuda_context = CUDA_CONTEXT_BYTES * (1 + processes) if on_gpu else 0
    output_buffers = batch.bytes * buffers
    return LoaderMemoryEstimate(
        batch=batch, buffers=buffers, output_buffers=output_buffers, decoders=decoders,
        decode_surfaces=decode_surfaces, workspace=workspace, cuda_context=cuda_context,
        total=output_buffers + decode_surfaces + workspace + cuda_context,
    )
