"""GPU memory budgeting: the formula, the largest batch or clip length that fits, byte parsing,
and the planner of a ClipLoader's peak (the formula plus what it leaves out).

    bytes = width x height x channels x bytes_per_element x batch_size x sequence_length x (1 + augmentation_factor)
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction

__all__ = [
    "MemoryEstimate",
    "estimate_memory",
    "largest_batch_size",
    "largest_sequence_length",
    "parse_bytes",
    "format_bytes",
    "BYTES_PER_ELEMENT",
    "LoaderMemoryEstimate",
    "estimate_loader_memory",
    "NVDEC_DECODE_SURFACES",
    "NVDEC_OUTPUT_SURFACES",
    "NVDEC_BYTES_PER_PIXEL",
    "LOADER_WORKSPACE_BYTES",
    "CUDA_CONTEXT_BYTES",
]

BYTES_PER_ELEMENT = {"uint8": 1, "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}
_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}


def parse_bytes(value: int | float | str) -> int:
    """Bytes from ``8589934592``, ``"8GiB"``, ``"1.5 GB"``, ``"512MiB"`` (decimal and binary units).

    Raises:
        ValueError: Unknown unit, negative or malformed value.
    """
    if isinstance(value, bool):
        raise ValueError(f"memory size ({value!r}) must be a number of bytes or a string like '8GiB'")
    if isinstance(value, (int, float)):
        number, unit = Fraction(str(value)), ""
    else:
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", str(value))
        if not match or match.group(2).lower() not in _UNITS:
            raise ValueError(
                f"memory size ({value!r}) must be bytes or a number with a unit: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB"
            )
        number, unit = Fraction(match.group(1)), match.group(2).lower()
    if number < 0:
        raise ValueError(f"memory size ({value!r}) must be >= 0")
    return math.floor(number * _UNITS[unit])


def format_bytes(count: int) -> str:
    """``"3,185,049,600 bytes (3.19 GB, 2.97 GiB)"``."""
    return f"{count:,} bytes ({count / 1e9:.2f} GB, {count / 2**30:.2f} GiB)"


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


def _positive(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} ({value!r}) must be an integer >= 1")
    return value


def _element_bytes(dtype: str | int) -> int:
    if isinstance(dtype, int) and not isinstance(dtype, bool):
        return _positive("bytes_per_element", dtype)
    if dtype not in BYTES_PER_ELEMENT:
        raise ValueError(f"dtype ({dtype!r}) must be one of {', '.join(BYTES_PER_ELEMENT)} or a byte count")
    return BYTES_PER_ELEMENT[dtype]


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

    Args:
        dtype: ``"uint8"``, ``"float16"``, ``"bfloat16"``, ``"float32"``, ``"float64"`` or bytes per element.

    Raises:
        ValueError: A size or count below 1, a negative augmentation factor, an unknown dtype.
    """
    for name, value in (("width", width), ("height", height), ("channels", channels),
                        ("batch_size", batch_size), ("sequence_length", sequence_length)):
        _positive(name, value)
    element = _element_bytes(dtype)
    if isinstance(augmentation_factor, bool) or not isinstance(augmentation_factor, (int, float)) or augmentation_factor < 0:
        raise ValueError(f"augmentation_factor ({augmentation_factor!r}) must be a number >= 0")
    exact = width * height * channels * element * batch_size * sequence_length * (1 + Fraction(str(augmentation_factor)))
    return MemoryEstimate(width, height, channels, element, batch_size, sequence_length,
                          float(augmentation_factor), math.ceil(exact))


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
    return math.floor(parse_bytes(budget) / per_clip)


def largest_sequence_length(budget: int | str, *, width: int, height: int, batch_size: int, **options) -> int:
    """The largest clip length whose formula bytes fit ``budget`` (0 when not even one frame fits)."""
    per_frame = _exact_bytes(width=width, height=height, batch_size=batch_size, sequence_length=1, **options)
    return math.floor(parse_bytes(budget) / per_frame)


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


@dataclass(frozen=True)
class LoaderMemoryEstimate:
    """Peak GPU memory of a ClipLoader, part by part (bytes; on the CPU, host bytes of the buffers).

    Attributes:
        batch: One output batch by the formula (:class:`MemoryEstimate`).
        buffers: Output buffers in the loader's pool (``prefetch_queue_depth + 2``).
        output_buffers: ``batch.bytes x buffers``.
        decoders: NVDEC decoders (one per decode worker; 0 on the CPU).
        decode_surfaces: Surfaces of all decoders, at the largest video size:
            ``decoders x (NVDEC_DECODE_SURFACES + NVDEC_OUTPUT_SURFACES) x NVDEC_BYTES_PER_PIXEL x W x H``.
        workspace: :data:`LOADER_WORKSPACE_BYTES` per process on the GPU, 0 on the CPU.
        cuda_context: :data:`CUDA_CONTEXT_BYTES` per process (the loader's and each decode
            worker process's) on the GPU, 0 on the CPU.
        total: The sum of the parts.
    """

    batch: MemoryEstimate
    buffers: int
    output_buffers: int
    decoders: int
    decode_surfaces: int
    workspace: int
    cuda_context: int
    total: int

    @property
    def fixed_bytes(self) -> int:
        """The part that does not grow with the batch size."""
        return self.decode_surfaces + self.workspace + self.cuda_context

    def largest_batch_size(self, budget: int | str) -> int:
        """The largest batch size whose total fits ``budget`` (0 when not even one clip fits)."""
        per_buffer = (parse_bytes(budget) - self.fixed_bytes) // self.buffers
        if per_buffer <= 0:
            return 0
        batch = self.batch
        return largest_batch_size(
            per_buffer, width=batch.width, height=batch.height, sequence_length=batch.sequence_length,
            channels=batch.channels, dtype=batch.bytes_per_element, augmentation_factor=batch.augmentation_factor,
        )

    def __str__(self) -> str:
        return (
            f"{format_bytes(self.total)}: {self.buffers} output buffers {self.output_buffers:,}, "
            f"{self.decoders} decoders' surfaces {self.decode_surfaces:,}, workspace {self.workspace:,}, "
            f"CUDA context {self.cuda_context:,}"
        )


def estimate_loader_memory(
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
    """Peak memory of a ClipLoader: the formula for each pooled output buffer, plus decode surfaces,
    workspace and CUDA context.

    Args:
        width, height, batch_size, sequence_length, channels, dtype, augmentation_factor: One
            output batch, as :func:`estimate_memory` (``width``/``height`` of the output clips).
        buffers: Output buffers in the pool (``prefetch_queue_depth + 2``).
        decoders: NVDEC decoders (the loader's ``num_threads``).
        video_width, video_height, video_bit_depth: The largest decoded video (surface size).
        on_gpu: False for the CPU path: only the output buffers count (host memory).
        processes: Decode worker processes; each adds a CUDA context and a workspace.

    Raises:
        ValueError: As :func:`estimate_memory`; ``buffers`` below 1, ``decoders`` or video sizes below 0.
    """
    batch = estimate_memory(width=width, height=height, batch_size=batch_size, sequence_length=sequence_length,
                            channels=channels, dtype=dtype, augmentation_factor=augmentation_factor)
    _positive("buffers", buffers)
    for name, value in (("decoders", decoders), ("video_width", video_width), ("video_height", video_height),
                        ("processes", processes)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} ({value!r}) must be an integer >= 0")
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
