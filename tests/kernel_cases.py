"""Kernel test cases shared by the host-compiled kernel test (CI) and the GPU test: random 4:2:0
planes, the geometry and transform to apply, and the twin's answer."""

from __future__ import annotations

import numpy as np

from vclip._engine import (
    JOB_DTYPE,
    clip_shape,
    fill_job,
    frame_strides,
    frame_view,
    needs_extended,
    transform_params,
    yuv420_to_rgb_tensor,
)
from vclip.transforms import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    ColorJitter,
    FrameGeometry,
    MultiScaleCrop,
    RandomResizedCrop,
    RandomShortSideScale,
    SampleDraw,
    TransformSpec,
)

NORMALIZED = dict(mean=IMAGENET_MEAN, std=IMAGENET_STD)
JITTER = ColorJitter(0.4, 0.4, 0.4, 0.1)

# (source width, height, bit depth, matrix, range, transform, scaling (resize base) or None)
CASES = {
    "native_uint8": (96, 64, 8, "bt601", "limited", TransformSpec(), None),
    "odd_size_area_downscale": (129, 97, 8, "bt709", "full", TransformSpec(resize=(30, 41)), None),
    "bilinear_upscale_chw_float": (
        40,
        30,
        8,
        "bt601",
        "limited",
        TransformSpec(resize=(61, 83), dtype="float32", layout="TCHW"),
        None,
    ),
    "short_side_crop_flip_norm": (
        160,
        90,
        8,
        "bt709",
        "limited",
        TransformSpec(
            resize=48,
            crop=(40, 40),
            crop_mode="random",
            flip_probability=1.0,
            mean=IMAGENET_MEAN,
            std=IMAGENET_STD,
            dtype="float32",
            layout="CTHW",
        ),
        None,
    ),
    "aliased_downscale_half": (
        120,
        80,
        8,
        "bt601",
        "limited",
        TransformSpec(resize=(31, 45), antialias=False, dtype="float16"),
        None,
    ),
    "p016_10bit_bt2020": (64, 48, 10, "bt2020", "limited", TransformSpec(resize=(20, 28), dtype="float32"), None),
    "p016_10bit_native": (50, 36, 10, "bt601", "limited", TransformSpec(), None),
    "mixed_scale_axes": (200, 40, 8, "bt601", "limited", TransformSpec(resize=(70, 50)), None),
    # downscales by fractional steps of 3 rows or more: the twin sums runs of rows (issue 22)
    "area_downscale_row_runs": (427, 241, 8, "bt601", "limited", TransformSpec(resize=(36, 64)), None),
    "resized_crop_row_runs_10bit": (
        300, 200, 10, "bt709", "full",
        TransformSpec(crop=RandomResizedCrop(24, scale=(0.5, 1.0)), flip_probability=0.5, dtype="float32"), None,
    ),
    "native_crop_flip_planar": (
        100,
        60,
        8,
        "bt709",
        "full",
        TransformSpec(crop=(40, 62), crop_mode="random", flip_probability=1.0, dtype="float32", layout="TCHW"),
        None,
    ),
    "native_half_cthw": (64, 32, 8, "bt601", "limited", TransformSpec(dtype="float16", layout="CTHW"), None),
    "native_float_thwc": (60, 20, 8, "bt709", "limited", TransformSpec(dtype="float32"), None),
    "native_half_thwc_tail": (30, 14, 10, "bt601", "full", TransformSpec(dtype="float16", flip_probability=1.0), None),
    "native_p016_planar_uint8": (48, 20, 10, "bt2020", "full", TransformSpec(layout="TCHW", crop=(20, 45)), None),
    # training augmentations (issue 23): windows resampled into the output, colour adjustments
    "resized_crop_area": (
        120, 90, 8, "bt709", "limited", TransformSpec(crop=RandomResizedCrop(32), flip_probability=0.5), None,
    ),
    "resized_crop_triangle_float": (
        150, 84, 8, "bt709", "limited",
        TransformSpec(crop=RandomResizedCrop((28, 36), scale=(0.3, 1.0)), interpolation="bilinear", dtype="float32",
                      layout="TCHW"),
        None,
    ),
    "resized_crop_upscale_triangle": (
        40, 36, 8, "bt601", "full",
        TransformSpec(crop=RandomResizedCrop(48, scale=(0.2, 0.5)), interpolation="bilinear", dtype="float32"),
        None,
    ),
    "triangle_resize_crop_10bit": (
        96, 64, 10, "bt2020", "limited",
        TransformSpec(resize=40, crop=36, crop_mode="random", interpolation="bilinear", dtype="float32",
                      layout="CTHW"),
        None,
    ),
    "short_side_jitter": (
        100, 70, 8, "bt601", "limited",
        TransformSpec(resize=RandomShortSideScale(40, 60), crop=32, crop_mode="random", flip_probability=0.5,
                      dtype="float16", **NORMALIZED),
        None,
    ),
    "multi_scale_crop": (
        110, 80, 8, "bt709", "full", TransformSpec(resize=48, crop=MultiScaleCrop(32, fixed_offsets=13)), None,
    ),
    "three_views_middle": (
        90, 50, 8, "bt709", "limited", TransformSpec(resize=32, crop=32, spatial_views=3, dtype="float32"), None,
    ),
    "brightness_contrast_uint8": (
        80, 48, 8, "bt601", "limited", TransformSpec(resize=(24, 40), color_jitter=ColorJitter(0.5, 0.5)), None,
    ),
    "saturation_hue_float": (
        72, 40, 8, "bt709", "full",
        TransformSpec(color_jitter=ColorJitter(saturation=(0.0, 2.0), hue=0.5), dtype="float32", layout="TCHW"),
        None,
    ),
    "jitter_grayscale_native_4px": (
        64, 24, 8, "bt601", "full",
        TransformSpec(color_jitter=JITTER, grayscale_probability=0.5, dtype="float32", **NORMALIZED),
        None,
    ),
    "full_recipe_10bit_bfloat16": (
        96, 54, 10, "bt2020", "limited",
        TransformSpec(crop=RandomResizedCrop(40), flip_probability=0.5, color_jitter=JITTER, grayscale_probability=0.2,
                      dtype="bfloat16", layout="TCHW", **NORMALIZED),
        None,
    ),
    "native_bfloat16_thwc": (44, 20, 8, "bt709", "limited", TransformSpec(dtype="bfloat16", **NORMALIZED), None),
    "per_frame_draws": (
        90, 60, 8, "bt709", "limited",
        TransformSpec(crop=RandomResizedCrop(24), flip_probability=0.5, color_jitter=JITTER, per_frame=True,
                      dtype="float32"),
        None,
    ),
}


def draws_of(case, frames: int, seed: int, orientation=None) -> tuple[SampleDraw, ...]:
    """The case's draws (one per spatial view) for a clip of ``frames`` frames."""
    width, height, *_, spec, _ = case
    options = {} if orientation is None else {"orientation": orientation}
    return spec.draw(width, height, np.random.default_rng(seed), frames=frames, **options)


def random_planes(width: int, height: int, bit_depth: int, seed: int):
    rng = np.random.default_rng(seed)
    high = 1 << bit_depth
    chroma = ((height + 1) // 2, (width + 1) // 2)
    return (
        rng.integers(0, high, (height, width)),
        rng.integers(0, high, chroma),
        rng.integers(0, high, chroma),
    )


def pack_semi_planar(y, u, v, bit_depth: int, pad: int = 0):
    """NV12 (8-bit) or P016 (MSB-aligned 16-bit) planes, each row padded by ``pad`` samples."""
    dtype = np.uint8 if bit_depth == 8 else np.uint16
    shift = 0 if bit_depth == 8 else 16 - bit_depth
    luma = np.zeros((y.shape[0], y.shape[1] + pad), dtype)
    luma[:, : y.shape[1]] = y.astype(dtype) << shift
    chroma = np.zeros((u.shape[0], 2 * u.shape[1] + pad), dtype)
    chroma[:, 0 : 2 * u.shape[1] : 2] = u.astype(dtype) << shift
    chroma[:, 1 : 2 * u.shape[1] : 2] = v.astype(dtype) << shift
    return luma, chroma


def _as_draw(draw: SampleDraw | FrameGeometry) -> SampleDraw:
    return draw if isinstance(draw, SampleDraw) else SampleDraw(draw)


def storage_dtype(dtype: str) -> str:
    """The NumPy dtype holding ``dtype`` (bfloat16 as uint16 bit patterns)."""
    return "uint16" if dtype == "bfloat16" else dtype


def twin_clip(planes_per_frame, case, draw: SampleDraw | FrameGeometry):
    """What the kernel must write for a clip of these frames, computed by the NumPy twin."""
    width, height, bit_depth, matrix, color_range, spec, _ = case
    draw = _as_draw(draw)
    scale, bias = spec.value_scale_bias()
    frames = []
    for t, (y, u, v) in enumerate(planes_per_frame):
        geometry, color = draw.at(t)
        frames.append(
            yuv420_to_rgb_tensor(
                y, u, v, bit_depth=bit_depth, matrix=matrix, color_range=color_range, geometry=geometry, scale=scale,
                bias=bias, dtype=spec.dtype, antialias=spec.antialias, interpolation=spec.interpolation, color=color,
            )
        )
    clip = np.empty(
        clip_shape(spec.layout, len(frames), draw.geometry.output_height, draw.geometry.output_width),
        dtype=storage_dtype(spec.dtype),
    )
    for t, frame in enumerate(frames):
        frame_view(clip, spec.layout, t)[...] = frame
    return clip


def kernel_arguments(case, draw, frames: int, output_address: int, planes_addresses, gray_sums_address: int = 0):
    """``(params, job, extended)`` of each frame of a clip of ``frames`` frames written at ``output_address``.

    ``planes_addresses``: per frame ``(luma address, chroma address, luma pitch, chroma pitch)``;
    ``gray_sums_address``: ``frames`` zeroed uint64 for the grayscale sums of frames whose contrast changes.
    """
    width, height, bit_depth, matrix, color_range, spec, _ = case
    draw = _as_draw(draw)
    geometry = draw.geometry
    frame_stride, strides = frame_strides(spec.layout, frames, geometry.output_height, geometry.output_width)
    item = np.dtype(storage_dtype(spec.dtype)).itemsize
    launches = []
    for t, (luma, chroma, luma_pitch, chroma_pitch) in enumerate(planes_addresses):
        frame_geometry, color = draw.at(t)
        job = np.zeros((), JOB_DTYPE)
        fill_job(
            job,
            luma=luma,
            chroma=chroma,
            luma_pitch=luma_pitch,
            chroma_pitch=chroma_pitch,
            output=output_address + t * frame_stride * item,
            geometry=frame_geometry,
            bit_depth=bit_depth,
            stored_bits=8 if bit_depth == 8 else 16,
            matrix=matrix,
            color_range=color_range,
            color=color,
            gray_sum=gray_sums_address + 8 * t if color.needs_mean else 0,
        )
        params = transform_params(spec, frame_geometry, strides)
        launches.append((params, job[()], needs_extended(params, color)))
    return launches


def bfloat16_values(bits: np.ndarray) -> np.ndarray:
    """float32 values of bfloat16 bit patterns."""
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def assert_matches_twin(result: np.ndarray, expected: np.ndarray, dtype: str) -> None:
    """uint8 within 1; float32 within 1e-3 relative (1e-3 absolute near 0); float16 within 2 ulp;
    bfloat16 within 1 ulp (2^-7 relative), 1e-3 absolute near 0 as float32 (both sides round results
    that may differ that much, and bfloat16 keeps tiny values: normalized values near 0 had 4 ulp)."""
    assert result.shape == expected.shape and result.dtype == expected.dtype
    if dtype == "bfloat16":
        result, expected = bfloat16_values(result), bfloat16_values(expected)
    assert np.isfinite(result.astype(np.float64)).all()
    if dtype == "uint8":
        difference = np.abs(result.astype(np.int16) - expected.astype(np.int16))
        assert difference.max() <= 1, f"max difference {difference.max()}"
        assert (difference > 0).mean() < 0.01
    elif dtype == "float32":
        np.testing.assert_allclose(result, expected, rtol=1e-3, atol=1e-3)
    elif dtype == "bfloat16":
        np.testing.assert_allclose(result, expected, rtol=2**-7, atol=1e-3)
    else:
        np.testing.assert_allclose(result.astype(np.float32), expected.astype(np.float32), rtol=2**-9, atol=2**-12)
