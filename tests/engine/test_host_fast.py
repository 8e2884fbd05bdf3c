"""The CPU path's quicker forms (vclip._engine.host_fast) against the kernel twin's definition
(vclip._engine.reference), each on a few hundred random cases from a fixed seed: whole blocks and
runs of rows give the definition's planes up to float64 rounding, and its frames within one code
of uint8 at a rounding tie; the runs' sums are exact; stacked pictures convert as each alone; the
colour step worked out in place is the definition's bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from vclip._engine import host_fast, reference
from vclip.transforms import ColorJitter, Orientation, RandomResizedCrop, TransformSpec

CASES = 300
ORIENTATIONS = [Orientation.from_rotation(degrees, mirror) for degrees in (0, 90, 180, 270) for mirror in (False, True)]
DTYPES = ("uint8", "float32", "float16", "bfloat16")


def random_planes(rng: np.random.Generator, width: int, height: int, bit_depth: int):
    """Y, U, V codes of one 4:2:0 frame, as the CPU decoder gives them (uint8, or uint16 for 10 bits)."""
    dtype = np.uint8 if bit_depth == 8 else np.uint16
    chroma = ((height + 1) // 2, (width + 1) // 2)
    return tuple(rng.integers(0, 1 << bit_depth, size, dtype=dtype) for size in ((height, width), chroma, chroma))


def random_downscale(rng: np.random.Generator, *, whole: bool):
    """``width, height, geometry``: a random area downscale, by whole factors (``whole``) or by any,
    with a crop, flip and display orientation drawn at random."""
    out_width, out_height = (int(n) for n in rng.integers(2, 14, 2))
    if whole:
        width, height = out_width * int(rng.integers(2, 9)), out_height * int(rng.integers(2, 9))
    else:
        width, height = (int(n * rng.uniform(2.0, 9.0)) + 1 for n in (out_width, out_height))
    crop = RandomResizedCrop((out_height, out_width), scale=(0.3, 1.0)) if rng.random() < 0.3 else None
    spec = TransformSpec(resize=None if crop else (out_height, out_width), crop=crop,
                         flip_probability=float(rng.random() < 0.5))
    orientation = ORIENTATIONS[int(rng.integers(len(ORIENTATIONS)))]
    if orientation.transpose and crop is None:  # the resize is of the displayed picture: keep its whole factors
        spec = TransformSpec(resize=(out_width, out_height), flip_probability=spec.flip_probability)
    return width, height, spec.geometry(width, height, rng, orientation=orientation)


def random_color(rng: np.random.Generator):
    """A colour adjustment drawn by a ColorJitter: brightness, contrast, saturation, hue in some order."""
    return TransformSpec(color_jitter=ColorJitter(0.5, 0.5, 0.5, 0.2)).draw(8, 8, rng)[0].color


def plain_planes(planes, width: int, height: int, geometry) -> list[np.ndarray]:
    rows, columns = reference.frame_taps(height, width, geometry, reference.RESAMPLE_AREA)
    return [reference.resample(plane, rows, columns, subsampling) for plane, subsampling in zip(planes, (1, 2, 2))]


def test_whole_blocks_are_the_taps_on_random_cases():
    """A downscale by whole factors, summed in whole blocks (chroma repeated where its blocks split
    samples): the taps' planes up to float64 rounding."""
    rng = np.random.default_rng(11)
    tested = 0
    while tested < CASES:
        width, height, geometry = random_downscale(rng, whole=True)
        blocks = host_fast.frame_blocks(geometry, reference.RESAMPLE_AREA)
        if blocks is None:  # a crop off the whole samples
            continue
        planes = random_planes(rng, width, height, int(rng.choice([8, 10])))
        quicker = [host_fast.block_means(host_fast.block_row_sums(plane, blocks[0], subsampling), *blocks, subsampling)
                   for plane, subsampling in zip(planes, (1, 2, 2))]
        for fast, plain in zip(quicker, plain_planes(planes, width, height, geometry)):
            np.testing.assert_allclose(fast, plain, rtol=1e-13, atol=1e-10)
        tested += 1


def test_runs_of_rows_are_the_taps_on_random_cases():
    """An area downscale by 3 rows or more, its rows summed in runs plus edge rows: the taps'
    planes up to float64 rounding; the sums of the runs are exact."""
    rng = np.random.default_rng(12)
    tested = 0
    while tested < CASES:
        width, height, geometry = random_downscale(rng, whole=False)
        mode = reference.RESAMPLE_AREA
        runs = [host_fast.frame_row_runs(height, width, geometry, mode, subsampling) for subsampling in (1, 2)]
        if runs[0] is None or host_fast.frame_blocks(geometry, mode) is not None:
            continue
        planes = random_planes(rng, width, height, int(rng.choice([8, 10])))
        rows, columns = reference.frame_taps(height, width, geometry, mode)
        for plane, subsampling, plain in zip(planes, (1, 2, 2), plain_planes(planes, width, height, geometry)):
            plane_runs = runs[subsampling - 1]
            if plane_runs is None:  # chroma rows too few to pay
                continue
            vertical = host_fast.sum_row_runs(plane, plane_runs)
            np.testing.assert_allclose(reference.resample_columns(vertical, columns, subsampling), plain,
                                       rtol=1e-13, atol=1e-10)
            exact = np.zeros_like(vertical)  # each run's sum in float64, as whole numbers: no rounding
            for outputs, run in plane_runs.groups:
                exact[outputs] = plane[run].astype(np.float64).sum(axis=1)
            exact *= plane_runs.weight[:, None]
            exact += np.einsum("ok,okw->ow", plane_runs.edge_weight, plane[plane_runs.edge_index].astype(np.float64))
            assert np.array_equal(vertical, exact)
        tested += 1


def test_quicker_frames_are_the_definitions_on_random_cases():
    """Whole frames of random geometries, dtypes and colour changes: float outputs within rounding
    of the definition's, uint8 at most one code apart (at a rounding tie), and seldom."""
    rng = np.random.default_rng(13)
    differing = compared = 0
    for case in range(CASES):
        width, height, geometry = random_downscale(rng, whole=bool(case % 2))
        dtype = DTYPES[case % len(DTYPES)]
        normalized = {} if dtype == "uint8" else dict(mean=(0.4, 0.5, 0.6), std=(0.2, 0.3, 0.25))
        scale, bias = TransformSpec(dtype=dtype, **normalized).value_scale_bias()
        options = dict(bit_depth=10 if case % 3 == 0 else 8, matrix="bt709", color_range="limited",
                       geometry=geometry, scale=scale, bias=bias, dtype=dtype)
        if case % 5 == 0:  # with colour adjustments
            options["color"] = random_color(rng)
        planes = random_planes(rng, width, height, options["bit_depth"])
        quicker = host_fast.yuv420_to_rgb_tensor(*planes, **options)
        plain = reference.yuv420_to_rgb_tensor(*planes, **options)
        assert quicker.shape == plain.shape and quicker.dtype == plain.dtype
        if dtype == "uint8":
            assert np.abs(quicker.astype(int) - plain).max() <= 1
            differing += int(np.count_nonzero(quicker != plain))
            compared += quicker.size
        else:
            values = [reference_values(array, dtype) for array in (quicker, plain)]
            np.testing.assert_allclose(values[0], values[1], rtol=2**-7 if dtype == "bfloat16" else 2e-3, atol=1e-6)
    assert differing <= 1e-3 * compared


def reference_values(array: np.ndarray, dtype: str) -> np.ndarray:
    """float64 values of an output (bfloat16 from its bit patterns)."""
    if dtype == "bfloat16":
        return (array.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return array.astype(np.float64)


@pytest.mark.parametrize("dtype", DTYPES)
def test_stacked_pictures_convert_as_each_alone_on_random_cases(dtype):
    """The batches of the CPU path's BlockConverter: the block means and colour step of stacked
    pictures are those of each picture alone, bit for bit."""
    rng = np.random.default_rng(14)
    for _ in range(CASES // len(DTYPES)):
        width, height, geometry = random_downscale(rng, whole=True)
        blocks = host_fast.frame_blocks(geometry, reference.RESAMPLE_AREA)
        if blocks is None:
            continue
        scale, bias = rng.uniform(0.5, 4.0, 3), rng.uniform(-2.0, 2.0, 3)
        options = dict(bit_depth=8, matrix="bt601", color_range="full", transpose=geometry.orientation.transpose,
                       scale=scale, bias=bias, dtype=dtype)
        pictures = [random_planes(rng, width, height, 8) for _ in range(int(rng.integers(1, 9)))]
        sums = [[host_fast.block_row_sums(plane, blocks[0], subsampling) for plane, subsampling in
                 zip(planes, (1, 2, 2))] for planes in pictures]
        stacked = [host_fast.block_means(np.stack([picture[k] for picture in sums]), *blocks, subsampling)
                   for k, subsampling in enumerate((1, 2, 2))]
        together = host_fast.planes_to_rgb_tensor(stacked, **options)
        for number, picture in enumerate(sums):
            alone = [host_fast.block_means(picture[k], *blocks, subsampling) for k, subsampling in enumerate((1, 2, 2))]
            assert np.array_equal(together[number], host_fast.planes_to_rgb_tensor(alone, **options))


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_colour_step_in_place_is_the_definitions_on_random_cases(dtype):
    """The CPU path's colour step, worked out in place over one plane per channel, against the
    definition's formula, bit for bit: every matrix and range, 8 and 10 bits, transposed or not,
    with colour adjustments, one frame or several stacked."""
    rng = np.random.default_rng(15)
    for case in range(CASES // len(DTYPES)):
        bit_depth = (8, 10)[case % 3 == 0]
        options = dict(bit_depth=bit_depth, matrix=("bt601", "bt709", "bt2020", "smpte240m")[case % 4],
                       color_range=("limited", "full")[case % 2], transpose=bool(case % 5 < 2),
                       scale=rng.uniform(0.5, 300.0, 3), bias=rng.uniform(-2.0, 2.0, 3), dtype=dtype)
        stacked = (int(rng.integers(1, 4)),) if case % 4 == 3 else ()  # several frames: no colour adjustments
        if case % 4 == 1:
            options["color"] = random_color(rng)
        shape = stacked + tuple(int(n) for n in rng.integers(1, 20, 2))
        planes = [rng.uniform(-20.0, (1 << bit_depth) + 20.0, shape) for _ in range(3)]
        got = host_fast.planes_to_rgb_tensor(planes, **options)
        expected = reference.planes_to_rgb_tensor(planes, **options)
        assert got.dtype == expected.dtype and np.array_equal(got, expected)
