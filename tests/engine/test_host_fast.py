"""The CPU path's quicker forms (vclip._engine.host_fast) against the kernel twin's definition
(vclip._engine.reference), each on a few hundred random cases from a fixed seed: whole blocks and
runs of rows give the definition's planes up to float64 rounding, and its frames within one code
of uint8 at a rounding tie; the runs' sums are exact; stacked pictures convert as each alone; the
colour step worked out in place is the definition's bit for bit. The one helper for sums over
short axes gives NumPy's sums bit for bit, and so do the scene features that use it."""

from __future__ import annotations

import numpy as np
import pytest

from vclip._engine import host_fast, reference
from vclip._scenes import features, shots
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


def test_sums_of_neighbours_are_numpys_sums_on_random_cases():
    """The one helper for sums over short axes: NumPy's sum of each group, bit for bit, for the
    integers and the whole multiples of 1/16 (float32, as block means are) it adds."""
    rng = np.random.default_rng(16)
    kinds = [(np.uint8, np.uint16), (np.int16, None), (np.uint16, np.int64), (np.float32, None), (np.float64, None)]
    for case in range(CASES):
        ndim = int(rng.integers(1, 5))
        axis, size = int(rng.integers(-ndim, ndim)), int(rng.integers(1, 9))
        shape = [int(n) for n in rng.integers(1, 6, ndim)]
        shape[axis] *= size
        kind, total = kinds[case % len(kinds)]
        values = rng.integers(0, 256, shape).astype(kind)
        if kind == np.float32:
            values /= np.float32(16)
        got = host_fast.sum_neighbours(values, size, axis, total)
        grouped = values.reshape(*shape[:axis % ndim], shape[axis] // size, size, *shape[axis % ndim + 1:])
        expected = grouped.sum(axis=axis % ndim + 1, dtype=total if total is not None else kind)
        assert got.dtype == expected.dtype and np.array_equal(got, expected)


def test_scene_features_are_their_definitions_on_random_cases():
    """The scene twin's features, block layouts and thumbnails (sums by the helper) against their
    definitions, bit for bit: the histogram from each pixel's bin, block means and luma from integer
    sums, the block distance from NumPy's sum over the channels."""
    rng = np.random.default_rng(17)
    for _ in range(CASES // 3):
        n, height, width = int(rng.integers(1, 4)), int(rng.integers(3, 41)), int(rng.integers(5, 72))
        frames = rng.integers(0, 256, (n, height, width, 3), dtype=np.uint8)
        frames[:, : height // 3] //= 10  # dark pixels too
        found = features.frame_features(frames)
        pixels = height * width
        codes = frames.astype(np.int64) >> 6
        bins = (codes[..., 0] * 16 + codes[..., 1] * 4 + codes[..., 2]).reshape(n, -1)
        counts = np.stack([np.bincount(row, minlength=features.BINS) for row in bins])
        assert np.array_equal(found["H"], counts.astype(np.float32) / np.float32(pixels))
        rows, columns, block_h, block_w = features.block_grid(height, width)
        cropped = frames[:, :rows * block_h, :columns * block_w].astype(np.int64)
        block_sums = cropped.reshape(n, rows, block_h, columns, block_w, 3).sum(axis=(2, 4)).reshape(n, -1, 3)
        assert np.array_equal(found["B"], block_sums.astype(np.float32) / np.float32(block_h * block_w))
        luma = frames.astype(np.int64) @ np.array([299, 587, 114])
        assert np.array_equal(found["mean"], (luma.reshape(n, -1).sum(axis=1) / (1000.0 * pixels)).astype(np.float32))
        dark = np.count_nonzero(luma.reshape(n, -1) < features.DARK_LUMA * 1000, axis=1)
        assert np.array_equal(found["dark"], dark.astype(np.float32) / np.float32(pixels))
        sums = frames[:, :height // 2 * 2, :width // 2 * 2].astype(np.int64)
        sums = sums.reshape(n, height // 2, 2, width // 2, 2, 3).sum(axis=(2, 4))
        assert np.array_equal(features.thumbnails(frames), ((sums + 2) >> 2).astype(np.uint8))
        tables = features.gap_distances(found, None)
        for gap in range(1, n):
            change = np.abs(found["B"][gap:] - found["B"][:-gap]).sum(axis=-1)
            middle = np.sort(change, axis=1)[:, change.shape[1] // 2] / np.float32(765)
            assert np.array_equal(tables["B"][gap, gap:], middle)


def test_the_moved_share_is_its_definition_on_random_cases():
    """The dissolve test's matching of thumbnail blocks (sums by the helper): for each move of the
    old thumbnail within reach, each block's sum of absolute RGB differences, added up plainly."""
    rng = np.random.default_rng(18)
    rules = shots.DEFAULT_RULES.dissolves
    size, reach = rules.moved_block, rules.moved_reach
    for _ in range(CASES // 6):
        height, width = int(rng.integers(4, 24)), int(rng.integers(4, 40))
        old, new = (rng.integers(0, 256, (height, width, 3), dtype=np.uint8) for _ in range(2))
        rows, columns = height // size * size, width // size * size
        padded = np.pad(old[:rows, :columns].astype(np.int64), ((reach, reach), (reach, reach), (0, 0)), mode="edge")
        best = typical = None
        for dy in range(2 * reach + 1):
            for dx in range(2 * reach + 1):
                difference = np.abs(padded[dy:dy + rows, dx:dx + columns] - new[:rows, :columns]).sum(axis=-1)
                blocks = difference.reshape(rows // size, size, columns // size, size).sum(axis=(1, 3))
                best = blocks if best is None else np.minimum(best, blocks)
                if (dy, dx) == (reach, reach):
                    typical = float(np.median(blocks))
        expected = float(np.median(best)) / typical if typical else 1.0
        assert shots._moved_share(old, new) == expected
