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
    transform_params,
    yuv420_to_rgb_tensor,
)
from vclip.transforms import IMAGENET_MEAN, IMAGENET_STD, TransformSpec

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
}


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


def twin_clip(planes_per_frame, case, geometry):
    """What the kernel must write for a clip of these frames, computed by the NumPy twin."""
    width, height, bit_depth, matrix, color_range, spec, _ = case
    scale, bias = spec.value_scale_bias()
    frames = [
        yuv420_to_rgb_tensor(
            y,
            u,
            v,
            bit_depth=bit_depth,
            matrix=matrix,
            color_range=color_range,
            geometry=geometry,
            scale=scale,
            bias=bias,
            dtype=spec.dtype,
            antialias=spec.antialias,
        )
        for y, u, v in planes_per_frame
    ]
    clip = np.empty(
        clip_shape(spec.layout, len(frames), geometry.output_height, geometry.output_width), dtype=spec.dtype
    )
    for t, frame in enumerate(frames):
        frame_view(clip, spec.layout, t)[...] = frame
    return clip


def kernel_arguments(case, geometry, frames: int, output_address: int, planes_addresses):
    """``(params, jobs)`` for a clip of ``frames`` frames written at ``output_address``.

    ``planes_addresses``: per frame ``(luma address, chroma address, luma pitch, chroma pitch)``.
    """
    width, height, bit_depth, matrix, color_range, spec, _ = case
    frame_stride, strides = frame_strides(spec.layout, frames, geometry.output_height, geometry.output_width)
    params = transform_params(spec, geometry, strides)
    item = np.dtype(spec.dtype).itemsize
    jobs = np.zeros(frames, JOB_DTYPE)
    for t, (luma, chroma, luma_pitch, chroma_pitch) in enumerate(planes_addresses):
        fill_job(
            jobs[t],
            luma=luma,
            chroma=chroma,
            luma_pitch=luma_pitch,
            chroma_pitch=chroma_pitch,
            output=output_address + t * frame_stride * item,
            geometry=geometry,
            bit_depth=bit_depth,
            stored_bits=8 if bit_depth == 8 else 16,
            matrix=matrix,
            color_range=color_range,
        )
    return params, jobs


def assert_matches_twin(result: np.ndarray, expected: np.ndarray, dtype: str) -> None:
    """uint8 within 1; float32 within 1e-3 relative (1e-3 absolute near 0); float16 within 2 ulp."""
    assert result.shape == expected.shape and result.dtype == expected.dtype
    assert np.isfinite(result.astype(np.float64)).all()
    if dtype == "uint8":
        difference = np.abs(result.astype(np.int16) - expected.astype(np.int16))
        assert difference.max() <= 1, f"max difference {difference.max()}"
        assert (difference > 0).mean() < 0.01
    elif dtype == "float32":
        np.testing.assert_allclose(result, expected, rtol=1e-3, atol=1e-3)
    else:
        np.testing.assert_allclose(result.astype(np.float32), expected.astype(np.float32), rtol=2**-9, atol=2**-12)
