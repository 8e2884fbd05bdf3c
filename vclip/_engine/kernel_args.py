"""Arguments of ``kernels/nv12_transform.cu`` as NumPy structured values (no GPU needed).

The dtypes mirror the C structs ``TransformParams`` and ``FrameJob`` field by field (``align=True``
gives C layout), so the same bytes feed CuPy on the GPU and the host-compiled kernel in CI. The
names of the kernels' instantiations (input type, output type, with or without the training
extensions: colour adjustments and the triangle filter) are here too, so that whoever compiles the
module and whoever launches it agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..transforms import NO_COLOR_CHANGE, ColorAdjustment, FrameGeometry, TransformSpec
from .reference import RESAMPLE_TRIANGLE, color_coefficients, resample_mode, source_windows

GRAY_SUM_DTYPE = np.dtype(np.uint64)
"""One frame's grayscale sum (``FrameJob.gray_sum`` points at one): fixed point, 2^24 units per 1.0."""

PARAMS_DTYPE = np.dtype(
    {
        "names": [
            "output_width", "output_height", "filter", "pixels_per_thread", "stride_c", "stride_y", "stride_x",
            "scale", "bias",
        ],
        "formats": [
            np.int32, np.int32, np.int32, np.int32, np.int64, np.int64, np.int64, (np.float32, 3), (np.float32, 3),
        ],
    },
    align=True,
)
JOB_DTYPE = np.dtype(
    {
        "names": [
            "luma", "chroma", "output", "gray_sum", "luma_pitch", "chroma_pitch", "source_width", "source_height",
            "origin_x", "origin_y", "step_x", "step_y", "low_x", "high_x", "low_y", "high_y", "reverse_x", "reverse_y",
            "transpose", "bit_shift", "color_ops", "adjust", "color",
        ],
        "formats": [np.uint64] * 4 + [np.int32] * 4 + [np.float32] * 4 + [np.int32] * 9
        + [(np.float32, 4), (np.float32, 8)],
    },
    align=True,
)
OUTPUT_KINDS = {"uint8": 0, "float16": 1, "float32": 2, "bfloat16": 3}
SURFACE_FORMATS = {1: "nv12", 2: "p016"}
"""The decoded surface by bytes per sample, as the kernels' names say it."""

# FrameJob.color_ops codes, 3 bits each, applied from the lowest bits up.
_OPERATION_CODES = {"brightness": 1, "contrast": 2, "saturation": 3, "hue": 4, "grayscale": 5}

BLOCK = (32, 8, 1)


def kernel_name(input_bytes: int, dtype: str, extended: bool = False) -> str:
    """The kernel for NV12 (1) or P016 (2) input and ``dtype`` output, with the training extensions
    (colour adjustments, triangle filter) when ``extended`` (``vclip_transform_nv12_float32``...)."""
    return f"vclip_transform_{SURFACE_FORMATS[input_bytes]}_{dtype}{'_extended' if extended else ''}"


def gray_sum_kernel_name(input_bytes: int) -> str:
    """The kernel of the frame's grayscale sum before its contrast change, for NV12 (1) or P016 (2) input."""
    return f"vclip_gray_sum_{SURFACE_FORMATS[input_bytes]}"


def kernel_instantiation(name: str) -> str:
    """The line of ``nv12_transform.cu``'s macros that defines kernel ``name`` alone (one of
    :data:`KERNEL_NAMES`): ``VCLIP_TRANSFORM_KERNEL(nv12, float32)``, ``VCLIP_GRAY_SUM_KERNEL(p016)``..."""
    if name.startswith("vclip_gray_sum_"):
        return f"VCLIP_GRAY_SUM_KERNEL({name.removeprefix('vclip_gray_sum_')})"
    source, dtype = name.removeprefix("vclip_transform_").removesuffix("_extended").split("_")
    macro = "VCLIP_EXTENDED_KERNEL" if name.endswith("_extended") else "VCLIP_TRANSFORM_KERNEL"
    return f"{macro}({source}, {dtype})"


KERNEL_NAMES = tuple(
    [kernel_name(size, dtype, extended)
     for size in SURFACE_FORMATS for dtype in OUTPUT_KINDS for extended in (False, True)]
    + [gray_sum_kernel_name(size) for size in SURFACE_FORMATS]
)
"""Every instantiation a module compiles."""


def pixels_per_thread(geometry: FrameGeometry) -> int:
    """4 at native scale without a transpose (the vectorized path of the kernel), else 1."""
    return 4 if geometry.native_scale and not geometry.orientation.transpose else 1


def transform_params(
    spec: TransformSpec, geometry: FrameGeometry, strides: tuple[int, int, int]
) -> np.void:
    """``TransformParams`` for frames of this geometry (output size, native or resampling path)."""
    params = np.zeros((), PARAMS_DTYPE)
    params["output_width"], params["output_height"] = geometry.output_width, geometry.output_height
    params["filter"] = resample_mode(spec.antialias, spec.interpolation)
    params["pixels_per_thread"] = pixels_per_thread(geometry)
    params["stride_c"], params["stride_y"], params["stride_x"] = strides
    params["scale"], params["bias"] = spec.value_scale_bias()
    return params[()]  # type: ignore[return-value]  # numpy stubs: () on a 0-d structured array gives np.void


def launch_grid(params: np.void, pixels_per_thread: int | None = None) -> tuple[int, int, int]:
    """Blocks for one frame's launch (``BLOCK`` threads each), at the params' pixels per thread or
    at ``pixels_per_thread`` (1 for ``gray_sum_frame``)."""
    columns = BLOCK[0] * int(params["pixels_per_thread"] if pixels_per_thread is None else pixels_per_thread)
    return (
        (int(params["output_width"]) + columns - 1) // columns,
        (int(params["output_height"]) + BLOCK[1] - 1) // BLOCK[1],
        1,
    )


def needs_extended(params: np.void, color: ColorAdjustment) -> bool:
    """Whether frames of these params and colour changes need the extended ``transform_frame``
    (colour adjustments, or the triangle filter)."""
    return bool(color.operations) or int(params["filter"]) == RESAMPLE_TRIANGLE


def color_ops(color: ColorAdjustment) -> int:
    """``FrameJob.color_ops`` of ``color``: its changes in order, 3 bits each (0 for none)."""
    code = 0
    for position, operation in enumerate(color.operations):
        code |= _OPERATION_CODES[operation] << (3 * position)
    return code


def fill_job(
    job: np.void | np.ndarray,
    *,
    luma: int,
    chroma: int,
    luma_pitch: int,
    chroma_pitch: int,
    output: int,
    geometry: FrameGeometry,
    bit_depth: int,
    stored_bits: int,
    matrix: str,
    color_range: str,
    color: ColorAdjustment = NO_COLOR_CHANGE,
    gray_sum: int = 0,
) -> None:
    """Fill one ``FrameJob``. ``stored_bits`` is 8 for NV12 and 16 for P016 (MSB-aligned samples);
    ``gray_sum``: the address of a zeroed uint64 for the frame's grayscale sum, needed when
    ``color`` changes the contrast (``color.needs_mean``)."""
    job["luma"], job["chroma"], job["output"], job["gray_sum"] = luma, chroma, output, gray_sum
    job["luma_pitch"], job["chroma_pitch"] = luma_pitch, chroma_pitch
    job["source_width"], job["source_height"] = geometry.source_width, geometry.source_height
    along_x, along_y = source_windows(geometry)
    for axis, window in (("x", along_x), ("y", along_y)):
        job[f"origin_{axis}"], job[f"step_{axis}"] = window.origin, window.step
        job[f"low_{axis}"], job[f"high_{axis}"] = window.low, window.high
    job["reverse_x"], job["reverse_y"] = along_x.reverse, along_y.reverse
    job["transpose"] = geometry.orientation.transpose
    job["bit_shift"] = stored_bits - bit_depth
    job["color_ops"] = color_ops(color)
    job["adjust"] = color.factors
    job["color"] = color_coefficients(matrix, color_range, bit_depth)


@dataclass(frozen=True, eq=False)
class FrameLaunch:
    """What the launches of one frame's draw take, but the addresses (filled per picture).

    Attributes:
        params: ``TransformParams`` (output size, native or resampling path).
        grid: Blocks of ``transform_frame``; ``gray_grid``: of ``gray_sum_frame`` (one pixel a thread).
        job: A 0-d ``JOB_DTYPE`` array, its addresses to be set before each launch.
        extended: Launch the extended ``transform_frame`` (colour adjustments, triangle filter).
        needs_mean: Launch ``gray_sum_frame`` first, into a zeroed uint64 at ``job["gray_sum"]``.
    """

    params: np.void
    grid: tuple[int, int, int]
    gray_grid: tuple[int, int, int]
    job: np.ndarray
    extended: bool
    needs_mean: bool


def frame_launch(
    spec: TransformSpec,
    geometry: FrameGeometry,
    color: ColorAdjustment,
    strides: tuple[int, int, int],
    *,
    bit_depth: int,
    stored_bits: int,
    matrix: str,
    color_range: str,
) -> FrameLaunch:
    """The :class:`FrameLaunch` of frames with this geometry and colour changes."""
    params = transform_params(spec, geometry, strides)
    job = np.zeros((), JOB_DTYPE)
    fill_job(job, luma=0, chroma=0, luma_pitch=0, chroma_pitch=0, output=0, geometry=geometry, bit_depth=bit_depth,
             stored_bits=stored_bits, matrix=matrix, color_range=color_range, color=color)
    return FrameLaunch(params, launch_grid(params), launch_grid(params, 1), job, needs_extended(params, color),
                       color.needs_mean)


def kernel_source_path(name: str = "nv12_transform.cu") -> Path:
    """A CUDA source of ``kernels/``: inside the installed wheel, else in the source checkout."""
    package = Path(__file__).resolve().parents[1]  # vclip/
    for folder in (package / "kernels", package.parent / "kernels"):
        if (folder / name).is_file():
            return folder / name
    raise FileNotFoundError(f"kernel source {name} is neither in vclip/kernels nor in the checkout's kernels/")
