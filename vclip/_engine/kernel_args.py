"""Arguments of ``kernels/nv12_transform.cu`` as NumPy structured values (no GPU needed).

The dtypes mirror the C structs ``TransformParams`` and ``FrameJob`` field by field (``align=True``
gives C layout), so the same bytes feed CuPy on the GPU and the host-compiled kernel in CI.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..transforms import FrameGeometry, TransformSpec
from .reference import color_coefficients

PARAMS_DTYPE = np.dtype(
    {
        "names": [
            "output_width", "output_height", "antialias", "pixels_per_thread", "stride_c", "stride_y", "stride_x",
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
            "luma", "chroma", "output", "luma_pitch", "chroma_pitch", "source_width", "source_height",
            "resized_width", "resized_height", "crop_x", "crop_y", "flip", "bit_shift",
            "transpose", "mirror_x", "mirror_y", "color",
        ],
        "formats": [np.uint64] * 3 + [np.int32] * 13 + [(np.float32, 8)],
    },
    align=True,
)
OUTPUT_KINDS = {"uint8": 0, "float16": 1, "float32": 2}


BLOCK = (32, 8, 1)


def pixels_per_thread(geometry: FrameGeometry) -> int:
    """4 at native scale without a transpose (the vectorized path of the kernel), else 1."""
    return 4 if geometry.native_scale and not geometry.orientation.transpose else 1


def transform_params(
    spec: TransformSpec, geometry: FrameGeometry, strides: tuple[int, int, int]
) -> np.void:
    """``TransformParams`` for frames of this geometry (output size, native or resampling path)."""
    params = np.zeros((), PARAMS_DTYPE)
    params["output_width"], params["output_height"] = geometry.output_width, geometry.output_height
    params["antialias"] = int(spec.antialias)
    params["pixels_per_thread"] = pixels_per_thread(geometry)
    params["stride_c"], params["stride_y"], params["stride_x"] = strides
    params["scale"], params["bias"] = spec.value_scale_bias()
    return params[()]  # type: ignore[return-value]  # numpy stubs: () on a 0-d structured array gives np.void


def launch_grid(params: np.void) -> tuple[int, int, int]:
    """Blocks for one frame's launch (``BLOCK`` threads each)."""
    columns = BLOCK[0] * int(params["pixels_per_thread"])
    return (
        (int(params["output_width"]) + columns - 1) // columns,
        (int(params["output_height"]) + BLOCK[1] - 1) // BLOCK[1],
        1,
    )


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
) -> None:
    """Fill one ``FrameJob``. ``stored_bits`` is 8 for NV12 and 16 for P016 (MSB-aligned samples)."""
    job["luma"], job["chroma"], job["output"] = luma, chroma, output
    job["luma_pitch"], job["chroma_pitch"] = luma_pitch, chroma_pitch
    job["source_width"], job["source_height"] = geometry.source_width, geometry.source_height
    job["resized_width"], job["resized_height"] = geometry.stored_resized_size
    job["crop_x"], job["crop_y"], job["flip"] = geometry.crop_x, geometry.crop_y, int(geometry.flip)
    orientation = geometry.orientation
    job["transpose"], job["mirror_x"] = orientation.transpose, orientation.mirror_x
    job["mirror_y"] = orientation.mirror_y
    job["bit_shift"] = stored_bits - bit_depth
    job["color"] = color_coefficients(matrix, color_range, bit_depth)


def kernel_source_path(name: str = "nv12_transform.cu") -> Path:
    """A CUDA source of ``kernels/``: inside the installed wheel, else in the source checkout."""
    package = Path(__file__).resolve().parents[1]  # vclip/
    for folder in (package / "kernels", package.parent / "kernels"):
        if (folder / name).is_file():
            return folder / name
    raise FileNotFoundError(f"kernel source {name} is neither in vclip/kernels nor in the checkout's kernels/")
