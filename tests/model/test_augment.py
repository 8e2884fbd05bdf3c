"""Training augmentations of the fused transform (issue 23): the random draws (torchvision's random
resized crop with its fallback, scale jitter, TSN's multi-scale crop, ColorJitter's order and
ranges, grayscale, evaluation views), the NumPy twin against torch's antialiased bilinear
resampling and the colour formulas, and the draws through the decoder (recorded, shared by the
frames of a clip, one decode for every view). The kernel against the twin is in
test_kernel_host.py; against torchvision, on the GPU machine, in test_gpu_augment.py."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import require_extra

import vclip
from vclip._engine import adjust_colors, bfloat16_bits, yuv420_to_rgb_tensor
from vclip._transforms.augment import RESIZED_CROP_TRIES
from vclip.transforms import (
    GRAY_WEIGHTS,
    NO_COLOR_CHANGE,
    Augmentations,
    ColorAdjustment,
    ColorJitter,
    FrameGeometry,
    MultiScaleCrop,
    Orientation,
    RandomResizedCrop,
    RandomShortSideScale,
    SampleDraw,
    TransformSpec,
)


# -- random resized crop -------------------------------------------------------------------------------
@pytest.mark.parametrize("width, height", [(1920, 1080), (1080, 1920), (320, 240)])
def test_resized_crop_windows_have_the_drawn_area_and_shape_and_fit(width, height):
    crop = RandomResizedCrop(224, scale=(0.25, 0.8), ratio=(3 / 4, 4 / 3))
    rng = np.random.default_rng(0)
    windows = [crop.window(width, height, rng) for _ in range(500)]
    for x, y, w, h in windows:
        assert 0 <= x and x + w <= width and 0 <= y and y + h <= height
        # rounding each side moves area and ratio by at most a pixel's worth
        assert 0.25 - 2 * (w + h) / (width * height) <= w * h / (width * height) <= 0.8 + 2 * (w + h) / (width * height)
        assert 3 / 4 * (1 - 2 / min(w, h)) <= w / h <= 4 / 3 * (1 + 2 / min(w, h))
    assert len({(x, y) for x, y, _, _ in windows}) > 400  # placed at random
    assert windows == [crop.window(width, height, np.random.default_rng(0)) for _ in range(1)] + windows[1:]


@pytest.mark.parametrize(
    "width, height, expected",
    [
        (1920, 1080, (240, 0, 1440, 1080)),  # wider than 4/3: full height at 4/3
        (1080, 1920, (0, 240, 1080, 1440)),  # taller than 3/4: full width at 3/4
        (640, 560, (0, 0, 640, 560)),  # an allowed ratio: the whole picture
    ],
)
def test_resized_crop_falls_back_to_a_centre_crop_after_ten_tries(width, height, expected):
    crop = RandomResizedCrop(64, scale=(1.5, 2.0))  # no window of 1.5x the area fits
    rng = np.random.default_rng(3)
    assert crop.window(width, height, rng) == expected
    reference = np.random.default_rng(3)
    for _ in range(RESIZED_CROP_TRIES):  # exactly ten tries were drawn: an area and a log-ratio each
        reference.uniform(1.5, 2.0), reference.uniform(math.log(3 / 4), math.log(4 / 3))
    assert rng.random() == reference.random()


def test_resized_crop_is_cut_before_it_is_resized():
    spec = TransformSpec(crop=RandomResizedCrop((20, 30), scale=(0.3, 0.6)))
    geometry = spec.geometry(160, 90, np.random.default_rng(1))
    assert geometry.crop_before_resize and (geometry.resized_width, geometry.resized_height) == (160, 90)
    assert (geometry.output_width, geometry.output_height) == (30, 20)
    x, y, w, h = geometry.crop_box
    assert (x, y, w, h) == (geometry.crop_x, geometry.crop_y, geometry.crop_width, geometry.crop_height)
    assert geometry.scale == (30 / w, 20 / h) and not geometry.native_scale


# -- scale jitter and multi-scale crop ------------------------------------------------------------------
def test_short_side_jitter_draws_every_size_of_the_range_then_crops_inside():
    spec = TransformSpec(resize=RandomShortSideScale(256, 320), crop=224, crop_mode="random")
    rng = np.random.default_rng(2)
    drawn = [spec.geometry(1920, 1080, rng) for _ in range(2000)]
    shorts = {g.resized_height for g in drawn}
    assert shorts == set(range(256, 321))  # both ends included
    for g in drawn[:200]:
        assert g.resized_width == math.floor(1920 * g.resized_height / 1080 + 0.5)
        assert g.crop_x + 224 <= g.resized_width and g.crop_y + 224 <= g.resized_height
        assert g.scale == pytest.approx((g.resized_width / 1920, g.resized_height / 1080))
    with pytest.raises(vclip.ArgumentError, match=r"add a crop"):
        TransformSpec(resize=RandomShortSideScale(256, 320))
    with pytest.raises(vclip.ArgumentError, match=r"min_size is at least the crop's larger side \(224\)"):
        TransformSpec(resize=RandomShortSideScale(200, 320), crop=224)
    with pytest.raises(vclip.ArgumentError, match=r"max_size \(100\) must be an integer >= min_size \(200\)"):
        RandomShortSideScale(200, 100)


def test_multi_scale_crop_takes_tsn_sides_at_fixed_offsets():
    crop = MultiScaleCrop(224)
    width, height = 340, 256  # TSN's frames
    sides = [int(256 * s) for s in (1.0, 0.875, 0.75, 0.66)]  # 256, 224, 192, 168
    allowed = {sides[i] for i in range(4)} | {224}
    rng = np.random.default_rng(4)
    windows = [crop.window(width, height, rng) for _ in range(3000)]
    pairs = {(w, h) for _, _, w, h in windows}
    positions = {sides.index(s) for pair in pairs for s in pair}
    assert {w for w, _ in pairs} <= allowed and positions == {0, 1, 2, 3}
    assert all(abs(sides.index(w) - sides.index(h)) <= 1 for w, h in pairs)  # max_scale_gap 1
    assert (256, 168) not in pairs and (224, 224) in pairs
    for x, y, w, h in windows:
        step_x, step_y = (width - w) // 4, (height - h) // 4
        assert (x, y) in {(0, 0), (4 * step_x, 0), (0, 4 * step_y), (4 * step_x, 4 * step_y), (2 * step_x, 2 * step_y)}
    grid = {(x, y, w, h) for x, y, w, h in (MultiScaleCrop(224, fixed_offsets=13).window(width, height, rng)
                                          for _ in range(3000))}
    assert len({(x, y) for x, y, w, h in grid if (w, h) == (224, 224)}) == 13
    assert {x for x, y, w, h in grid if (w, h) == (224, 224)} == {0, 29, 58, 87, 116}  # quarters of 340 - 224
    free = [MultiScaleCrop(224, fixed_offsets=None).window(width, height, rng) for _ in range(500)]
    assert len({(x, y) for x, y, _, _ in free}) > 100
    near = MultiScaleCrop((190, 200), scales=(0.75,)).window(width, height, rng)  # 192 is within 2 of 190
    assert near[2:] == (192, 190)


# -- colour jitter ---------------------------------------------------------------------------------------
def test_color_jitter_reads_its_arguments_as_torchvision_does():
    jitter = ColorJitter(0.4, 0.4, 0.4, 0.1)
    assert jitter.ranges == ((0.6, 1.4), (0.6, 1.4), (0.6, 1.4), (-0.1, 0.1))
    assert ColorJitter(brightness=2).brightness == (0.0, 3.0)  # never below 0
    assert ColorJitter(contrast=(0.5, 0.9), hue=(0.0, 0.3)).ranges == (None, (0.5, 0.9), None, (0.0, 0.3))
    assert ColorJitter().ranges == (None, None, None, None) and ColorJitter(saturation=(1, 1)).saturation is None
    for options, message in [
        (dict(brightness=-0.1), r"brightness \(-0.1\) must be a number >= 0"),
        (dict(hue=0.6), r"hue \(0.6\) must be a number in \[0, 0.5\]"),
        (dict(hue=(-0.6, 0.1)), r"hue \(\(-0.6, 0.1\)\) must be a \(min, max\) pair of numbers in \[-0.5, 0.5\]"),
        (dict(contrast=(1.2, 0.8)), r"contrast \(\(1.2, 0.8\)\) must be a \(min, max\) pair of numbers >= 0"),
        (dict(saturation="lots"), r"saturation \('lots'\) must be a \(min, max\) pair"),
    ]:
        with pytest.raises(vclip.ArgumentError, match=message):
            ColorJitter(**options)


def test_color_draws_follow_torchvision_order_and_ranges():
    spec = TransformSpec(color_jitter=ColorJitter(0.4, (0.5, 0.6), hue=0.1), grayscale_probability=0.25)
    rng = np.random.default_rng(5)
    drawn = [spec.color(rng) for _ in range(4000)]
    orders = {c.order for c in drawn}
    assert len(orders) == 24 and all(sorted(order) == [0, 1, 2, 3] for order in orders)  # every permutation
    assert all(0.6 <= c.brightness <= 1.4 and 0.5 <= c.contrast <= 0.6 and -0.1 <= c.hue <= 0.1 for c in drawn)
    assert {c.saturation for c in drawn} == {1.0}  # not jittered
    assert 0.22 < np.mean([c.grayscale for c in drawn]) < 0.28
    first = drawn[0]
    operations = [name for k in first.order for name in [("brightness", "contrast", "saturation", "hue")[k]]
                  if name != "saturation"]
    assert first.operations == tuple(operations) + (("grayscale",) if first.grayscale else ())
    assert TransformSpec(grayscale_probability=1.0).color() == ColorAdjustment(grayscale=True)
    with pytest.raises(ValueError, match="need a seeded generator"):
        spec.color()


def test_crops_and_flips_draw_as_before_and_colour_after_them():
    """A spec of the first release draws its crop offsets and flip exactly as it did; colour
    draws follow them from the same generator."""
    plain = TransformSpec(resize=64, crop=48, crop_mode="random", flip_probability=0.5)
    coloured = TransformSpec(resize=64, crop=48, crop_mode="random", flip_probability=0.5,
                             color_jitter=ColorJitter(0.4, 0.4, 0.4, 0.1))
    rng = np.random.default_rng(11)
    expected_x, expected_y = int(rng.integers(0, 113 - 48 + 1)), int(rng.integers(0, 64 - 48 + 1))
    expected_flip = bool(rng.random() < 0.5)
    geometry = plain.geometry(200, 113, np.random.default_rng(11))  # 200x113 -> 113x64
    assert (geometry.resized_width, geometry.resized_height) == (113, 64)
    assert (geometry.crop_x, geometry.crop_y, geometry.flip) == (expected_x, expected_y, expected_flip)
    (draw,) = coloured.draw(200, 113, np.random.default_rng(11))
    assert draw.geometry == geometry and draw.color.operations
    assert repr(plain).count("=") == 11 and "color_jitter" not in repr(plain)  # the loader's fingerprint is unchanged


# -- views and per-frame draws -------------------------------------------------------------------------
@pytest.mark.parametrize("width, height, axis", [(640, 360, "x"), (360, 640, "y")])
def test_three_views_cover_the_longer_side(width, height, axis):
    spec = TransformSpec(resize=256, crop=256, spatial_views=3)
    draws = spec.draw(width, height)
    assert len(draws) == 3
    offsets = [(d.geometry.crop_x, d.geometry.crop_y) for d in draws]
    free = 455 - 256
    expected = [(0, 0), (free // 2, 0), (free, 0)]
    assert offsets == (expected if axis == "x" else [(y, x) for x, y in expected])
    assert TransformSpec(resize=256, crop=256).draw(width, height)[0].geometry == draws[1].geometry  # the centre
    for options in (dict(crop=256, crop_mode="random"), dict(crop=RandomResizedCrop(224)), dict(resize=256)):
        with pytest.raises(vclip.ArgumentError, match=r"spatial_views \(3\) must be 1 unless crop is a fixed size"):
            TransformSpec(spatial_views=3, **options)
    with pytest.raises(vclip.ArgumentError, match=r"spatial_views \(2\) must be one of 1, 3"):
        TransformSpec(crop=8, spatial_views=2)


def test_per_frame_draws_give_each_frame_its_own_and_per_clip_draws_share_one():
    options = dict(crop=RandomResizedCrop(32), flip_probability=0.5, color_jitter=ColorJitter(0.4, 0.4, 0.4, 0.1))
    (clip,) = TransformSpec(**options).draw(160, 120, np.random.default_rng(0), frames=6)
    assert clip.frames is None and {clip.at(t) for t in range(6)} == {(clip.geometry, clip.color)}
    (frames,) = TransformSpec(per_frame=True, **options).draw(160, 120, np.random.default_rng(0), frames=6)
    assert len(frames.frames) == 6 and len({g.crop_box for g, _ in frames.frames}) == 6
    assert frames.at(0) == (frames.geometry, frames.color) and frames.at(0) == (clip.geometry, clip.color)
    record = Augmentations.from_draws([frames, frames], per_frame=True)
    assert record.crop_boxes.shape == (2, 6, 4) and record.color_orders.shape == (2, 6, 4)
    assert record.flipped.shape == (2, 6) and record.crop_boxes[1, 3].tolist() == list(frames.at(3)[0].crop_box)


def test_window_crops_refuse_a_crop_mode_and_geometry_refuses_a_missing_generator():
    with pytest.raises(vclip.ArgumentError, match=r"crop_mode \('random'\) must be 'center' \(the default\) with "
                                                  r"crop=RandomResizedCrop"):
        TransformSpec(crop=RandomResizedCrop(224), crop_mode="random")
    with pytest.raises(vclip.ArgumentError, match=r"crop \('big'\) must be a positive integer \(a square\), a "
                                                  r"\(height, width\) pair of positive integers, "
                                                  r"a vclip.RandomResizedCrop"):
        TransformSpec(crop="big")
    with pytest.raises(vclip.ArgumentError, match=r"scale \(\(0.5, 0.1\)\) must be a \(min, max\) pair"):
        RandomResizedCrop(224, scale=(0.5, 0.1))
    with pytest.raises(vclip.ArgumentError, match=r"fixed_offsets \(7\) must be one of 5, 13, None"):
        MultiScaleCrop(224, fixed_offsets=7)
    with pytest.raises(vclip.ArgumentError, match=r"interpolation \('cubic'\) must be one of 'area', 'bilinear'"):
        TransformSpec(interpolation="cubic")
    with pytest.raises(ValueError, match="need a seeded generator"):
        TransformSpec(crop=RandomResizedCrop(8)).geometry(64, 64)


@pytest.mark.parametrize(("make", "message"), [
    (lambda: RandomResizedCrop(224, scale=(1e306, 1e307)), r"scale \(\(1e\+306, 1e\+307\)\) must be .* in \(0, 100\]"),
    (lambda: RandomResizedCrop(224, ratio=(1e306, 1e307)), r"ratio .* must be .* in \[1/16384, 16384\]"),
    (lambda: RandomResizedCrop(224, ratio=(1e-307, 1e-306)), r"ratio .* must be .* in \[1/16384, 16384\]"),
    (lambda: RandomResizedCrop((200_000, 300_000)), r"size \(\(200000, 300000\)\) must be .* each at most 16384"),
    (lambda: MultiScaleCrop(100_000), r"size \(100000\) must be .* each at most 16384"),
    (lambda: RandomShortSideScale(256, 10**9), r"max_size \(1000000000\) must be an integer in \[1, 16384\]"),
    (lambda: TransformSpec(resize=(480_000, 640_000)), r"resize \(\(480000, 640000\)\) must be .* at most 16384"),
    (lambda: TransformSpec(resize=10**7), r"resize \(10000000\) must be .* at most 16384"),
    (lambda: TransformSpec(crop=20_000), r"crop \(20000\) must be .* at most 16384"),
    (lambda: TransformSpec(mean=(0.5,) * 3, std=(1e-300, 1, 1), dtype="float32"),
     r"std \(\(1e-300, 1.0, 1.0\)\) must be .* within float32's range"),
    (lambda: TransformSpec(mean=(1e300, 0, 0), std=(1, 1, 1), dtype="float32"), r"std .* within float32's range"),
    (lambda: TransformSpec(mean=(0.5,) * 3, std=(1e-5,) * 3, dtype="float16"), r"std .* within float16's range"),
    (lambda: ColorJitter(brightness=(1e39, 1e39)), r"brightness .* must be a factor at most 3.403e\+38"),
])
def test_values_that_would_fail_when_drawn_or_decoded_are_refused_at_construction(make, message):
    """Values the first checks let through used to fail later: an OverflowError at draw time (a
    scale or ratio whose area is infinite), all-NaN output (a std of 1e-300), NumPy's MemoryError
    (an output side of 640000), NaN pixels on the GPU (a jitter factor infinite in float32)."""
    with pytest.raises(vclip.ArgumentError, match=message):
        make()


def test_crops_at_the_bounds_draw_windows_inside_the_picture():
    rng = np.random.default_rng(0)
    for crop in (RandomResizedCrop(8, scale=(100, 100)), RandomResizedCrop(8, ratio=(16384, 16384)),
                 RandomResizedCrop(8, ratio=(1 / 16384, 1 / 16384)), RandomResizedCrop(8, scale=(1e-300, 1e-300))):
        for _ in range(20):
            x, y, width, height = crop.window(40, 30, rng)
            assert 1 <= width and 1 <= height and x + width <= 40 and y + height <= 30, (crop, x, y, width, height)
    assert TransformSpec(resize=16384, crop=(16384, 16)).crop == (16384, 16)
    assert TransformSpec(mean=(0.5,) * 3, std=(1.5 / 65504,) * 3, dtype="float16").std[0] == 1.5 / 65504


def test_normalization_at_the_float16_limit_stays_finite(tmp_path):
    from vclip.synthetic import make_video

    video = make_video(tmp_path / "v.mp4", num_frames=4, width=64, height=48)
    spec = TransformSpec(resize=(48, 64), mean=(0.5,) * 3, std=(1.5 / 65000,) * 3, dtype="float16")
    clips = vclip.VideoDecoder(video, device="cpu").get_clips(vclip.contiguous(2), transform=spec)
    values = np.asarray(clips.data, np.float64)
    assert np.isfinite(values).all() and np.abs(values).max() > 1000


# -- the twin's resampling against torch's antialiased bilinear ------------------------------------------
def gray_planes(luma: np.ndarray):
    """Full-range 8-bit planes whose chroma is neutral: RGB = Y / 255 in every channel, unclamped."""
    chroma = np.full(((luma.shape[0] + 1) // 2, (luma.shape[1] + 1) // 2), 128)
    return luma, chroma, chroma


def twin_float(planes, geometry: FrameGeometry, color: ColorAdjustment = NO_COLOR_CHANGE,
               interpolation: str = "bilinear", bit_depth: int = 8) -> np.ndarray:
    return yuv420_to_rgb_tensor(*planes, bit_depth=bit_depth, matrix="bt601", color_range="full", geometry=geometry,
                                scale=np.ones(3), bias=np.zeros(3), dtype="float64", interpolation=interpolation,
                                color=color)


@pytest.mark.parametrize(
    "spec",
    [
        TransformSpec(crop=RandomResizedCrop((37, 50), scale=(0.2, 1.0)), interpolation="bilinear"),  # shrink
        TransformSpec(crop=RandomResizedCrop(90, scale=(0.05, 0.1)), interpolation="bilinear"),  # enlarge
        TransformSpec(crop=RandomResizedCrop((20, 140), ratio=(3, 5)), interpolation="bilinear"),  # one axis each
        TransformSpec(resize=(45, 70), interpolation="bilinear"),
    ],
    ids=["shrink", "enlarge", "mixed", "resize"],
)
def test_bilinear_interpolation_is_torch_antialiased_bilinear_of_the_crop(spec):
    """torchvision's resized_crop on a float tensor: the window cut out, then
    interpolate(mode="bilinear", antialias=True); the twin reads no pixel outside the window."""
    torch = require_extra("torch")
    luma = np.random.default_rng(6).integers(0, 256, (96, 160))
    planes = gray_planes(luma)
    for seed in range(4):
        geometry = spec.geometry(160, 96, np.random.default_rng(seed))
        x, y, w, h = (int(v) for v in geometry.crop_box)
        window = torch.from_numpy(luma[y:y + h, x:x + w] / 255.0)[None, None]
        expected = torch.nn.functional.interpolate(window, size=(geometry.output_height, geometry.output_width),
                                                   mode="bilinear", antialias=True, align_corners=False)[0, 0].numpy()
        result = twin_float(planes, geometry)
        np.testing.assert_allclose(result[..., 0], expected, atol=1e-6)
        np.testing.assert_allclose(result[..., 0], result[..., 2], atol=1e-12)


@pytest.mark.parametrize("degrees", [0, 90, 180, 270])
@pytest.mark.parametrize("mirror", [False, True])
def test_the_window_is_cut_from_the_displayed_picture(degrees, mirror):
    """A turned or mirrored stream: the window and the flip apply to the picture as displayed."""
    torch = require_extra("torch")
    orientation = Orientation.from_rotation(degrees, mirror)
    luma = np.random.default_rng(13).integers(0, 256, (48, 80))
    spec = TransformSpec(crop=RandomResizedCrop((18, 26), scale=(0.2, 0.7)), flip_probability=0.5,
                         interpolation="bilinear")
    displayed = orientation.apply(luma)
    for seed in range(3):
        geometry = spec.geometry(80, 48, np.random.default_rng(seed), orientation=orientation)
        x, y, w, h = (int(v) for v in geometry.crop_box)
        window = torch.from_numpy(np.ascontiguousarray(displayed[y:y + h, x:x + w]) / 255.0)[None, None]
        expected = torch.nn.functional.interpolate(window, size=(18, 26), mode="bilinear", antialias=True)[0, 0].numpy()
        if geometry.flip:
            expected = expected[:, ::-1]
        np.testing.assert_allclose(twin_float(gray_planes(luma), geometry)[..., 1], expected, atol=1e-6)


def test_resize_then_crop_resizes_the_whole_picture_first():
    torch = require_extra("torch")
    luma = np.random.default_rng(7).integers(0, 256, (90, 160))
    geometry = TransformSpec(resize=40, crop=32, interpolation="bilinear").geometry(160, 90)
    resized = torch.nn.functional.interpolate(torch.from_numpy(luma / 255.0)[None, None], size=(40, 71),
                                              mode="bilinear", antialias=True)[0, 0].numpy()
    x, y = geometry.crop_x, geometry.crop_y
    np.testing.assert_allclose(twin_float(gray_planes(luma), geometry)[..., 1], resized[y:y + 32, x:x + 32], atol=1e-6)


# -- the twin's colour adjustments ------------------------------------------------------------------------
def gray(rgb):
    return rgb @ np.array(GRAY_WEIGHTS)


def test_brightness_contrast_saturation_grayscale_are_torchvision_formulas_in_the_drawn_order():
    rgb = np.random.default_rng(8).random((12, 20, 3))
    clamp = lambda values: np.clip(values, 0, 1)  # noqa: E731
    brightness = clamp(rgb * 1.3)
    assert np.allclose(adjust_colors(rgb, ColorAdjustment(brightness=1.3)), brightness)
    contrast = clamp(0.6 * rgb + 0.4 * gray(rgb).mean())
    assert np.allclose(adjust_colors(rgb, ColorAdjustment(contrast=0.6)), contrast)
    saturation = clamp(1.7 * rgb - 0.7 * gray(rgb)[..., None])
    assert np.allclose(adjust_colors(rgb, ColorAdjustment(saturation=1.7)), saturation)
    assert np.allclose(adjust_colors(rgb, ColorAdjustment(grayscale=True)), gray(rgb)[..., None].repeat(3, -1))
    # brightness then contrast: the mean is that of the brighter picture; the other order differs
    first = adjust_colors(rgb, ColorAdjustment(brightness=1.3, contrast=0.6, order=(0, 1, 2, 3)))
    assert np.allclose(first, clamp(0.6 * brightness + 0.4 * gray(brightness).mean()))
    second = adjust_colors(rgb, ColorAdjustment(brightness=1.3, contrast=0.6, order=(1, 0, 2, 3)))
    assert np.allclose(second, clamp(contrast * 1.3)) and not np.allclose(first, second)
    then_gray = adjust_colors(rgb, ColorAdjustment(saturation=1.7, grayscale=True))
    assert np.allclose(then_gray, gray(saturation)[..., None].repeat(3, -1))  # grayscale comes last


def test_hue_turns_around_the_colour_circle_keeping_saturation_and_value():
    primaries = np.array([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.5, 0.0], [0.3, 0.3, 0.3]]])
    turned = adjust_colors(primaries, ColorAdjustment(hue=1 / 3))
    assert np.allclose(turned, [[[0, 1, 0], [0, 0, 1], [1, 0, 0], [0, 1, 0.5], [0.3, 0.3, 0.3]]])
    backwards = adjust_colors(primaries, ColorAdjustment(hue=-1 / 3))
    assert np.allclose(backwards, [[[0, 0, 1], [1, 0, 0], [0, 1, 0], [0.5, 0, 1], [0.3, 0.3, 0.3]]])
    rgb = np.random.default_rng(9).random((8, 8, 3))
    twice = adjust_colors(adjust_colors(rgb, ColorAdjustment(hue=0.15)), ColorAdjustment(hue=0.2))
    assert np.allclose(twice, adjust_colors(rgb, ColorAdjustment(hue=0.35)))
    assert np.allclose(adjust_colors(rgb, ColorAdjustment(hue=0.5 - 1.0)), adjust_colors(rgb, ColorAdjustment(hue=0.5)))
    result = adjust_colors(rgb, ColorAdjustment(hue=0.27))
    assert np.allclose(result.max(-1), rgb.max(-1)) and np.allclose(result.min(-1), rgb.min(-1))


def test_ten_bit_sources_keep_their_precision_through_the_adjustments():
    luma = np.tile(np.arange(1024), (4, 1))  # every 10-bit level
    chroma = np.full((2, 512), 512)
    geometry = TransformSpec().geometry(1024, 4)
    result = twin_float((luma, chroma, chroma), geometry, ColorAdjustment(brightness=0.9, contrast=0.8),
                        interpolation="area", bit_depth=10)
    assert len(np.unique(np.round(result[..., 0], 9))) == 1024  # no level merged: no 8-bit step inside
    brightened = luma[0] / 1023 * 0.9
    assert np.allclose(result[0, :, 0], 0.8 * brightened + 0.2 * sum(GRAY_WEIGHTS) * brightened.mean())


def test_bfloat16_bits_round_to_nearest_even_as_torch():
    torch = require_extra("torch")
    values = np.concatenate([np.random.default_rng(10).normal(0, 3, 5000), [1 + 2**-8, 1 + 3 * 2**-8, -0.0, 0.0]])
    expected = torch.from_numpy(values.astype(np.float32)).to(torch.bfloat16).view(torch.int16).numpy()
    np.testing.assert_array_equal(bfloat16_bits(values).view(np.int16), expected)


# -- through the decoder ---------------------------------------------------------------------------------
RECIPE = TransformSpec(crop=RandomResizedCrop(64, scale=(0.2, 1.0)), flip_probability=0.5,
                       color_jitter=ColorJitter(0.4, 0.4, 0.4, 0.1), grayscale_probability=0.3,
                       interpolation="bilinear", dtype="float32", layout="TCHW")


def test_get_clips_records_each_clip_draw_and_the_pixels_come_from_its_box(videos):
    """The recorded box, flip and colour factors reproduce the clip: torch's antialiased bilinear
    of that box of the decoded frame (FFmpeg's RGB), mirrored, then the colour formulas."""
    torch = require_extra("torch")
    decoder = vclip.VideoDecoder(videos["h264"])
    clips = decoder.get_clips(vclip.strided(3, 4, clips_per_video=5, starts="even"), transform=RECIPE, seed=3)
    record = clips.augmentations
    assert clips.data.shape == (5, 3, 3, 64, 64) and len(record) == 5
    assert clips.clip_ids.tolist() == [0, 1, 2, 3, 4] and clips.view_ids.tolist() == [0] * 5
    assert len({tuple(box) for box in record.crop_boxes}) == 5 and record.color_factors.shape == (5, 4)
    for number in range(5):
        x, y, w, h = (int(v) for v in record.crop_boxes[number])
        native = decoder.get_frames(clips.frame_indices[number]).data / 255.0  # [T, H, W, 3]
        window = torch.from_numpy(native[:, y:y + h, x:x + w].transpose(0, 3, 1, 2).copy())
        expected = torch.nn.functional.interpolate(window, size=(64, 64), mode="bilinear", antialias=True).numpy()
        if record.flipped[number]:
            expected = expected[..., ::-1]
        b, c, s, hue = record.color_factors[number]
        color = ColorAdjustment(b, c, s, hue, order=tuple(record.color_orders[number]),
                                grayscale=bool(record.grayscale[number]))
        expected = np.stack([adjust_colors(frame.transpose(1, 2, 0), color).transpose(2, 0, 1) for frame in expected])
        error = np.abs(clips.data[number] - expected)
        assert error.mean() < 2.5 / 255, (number, error.mean())  # FFmpeg's rgb24 rounds; vclip converts in float


def test_frames_of_a_clip_share_one_draw_unless_drawn_per_frame(videos):
    decoder = vclip.VideoDecoder(videos["h264"])
    same = decoder.get_clips(vclip.indexed([7, 7, 7]), transform=RECIPE, seed=1).data[0]
    assert np.array_equal(same[0], same[1]) and np.array_equal(same[0], same[2])
    per_frame = TransformSpec(**{**vars(RECIPE), "per_frame": True})
    varied = decoder.get_clips(vclip.indexed([7, 7, 7]), transform=per_frame, seed=1)
    assert not np.array_equal(varied.data[0][0], varied.data[0][1])
    assert varied.augmentations.crop_boxes.shape == (1, 3, 4)
    assert np.array_equal(varied.data[0][0], same[0])  # the first frame's draw is the clip's


def test_same_seed_same_draws_and_pixels_another_seed_others(videos):
    decoder = vclip.VideoDecoder(videos["hevc"])
    sampler = vclip.strided(2, 3, clips_per_video=3)
    first, again = (decoder.get_clips(sampler, transform=RECIPE, seed=9) for _ in range(2))
    other = decoder.get_clips(sampler, transform=RECIPE, seed=10)
    assert np.array_equal(first.data, again.data)
    for name in ("crop_boxes", "scales", "flipped", "color_factors", "color_orders", "grayscale"):
        assert np.array_equal(getattr(first.augmentations, name), getattr(again.augmentations, name))
    assert not np.array_equal(first.augmentations.crop_boxes, other.augmentations.crop_boxes)


def test_three_views_decode_each_clip_once_and_crop_the_resized_frame(videos):
    decoder = vclip.VideoDecoder(videos["h264"])  # 320x240: resized to 43x32, views at x = 0, 5, 11
    sampler = vclip.strided(4, 2, starts="even", clips_per_video=2)
    views = decoder.get_clips(sampler, transform=TransformSpec(resize=32, crop=32, spatial_views=3, dtype="float32"))
    work_of_views = decoder.stats.packets_sent
    whole = decoder.get_clips(sampler, transform=TransformSpec(resize=32, dtype="float32"))
    assert decoder.stats.packets_sent == 2 * work_of_views  # the views' clips decoded once, as the plain clips
    assert views.data.shape == (6, 4, 32, 32, 3) and whole.data.shape == (2, 4, 32, 43, 3)
    assert views.clip_ids.tolist() == [0, 0, 0, 1, 1, 1] and views.view_ids.tolist() == [0, 1, 2, 0, 1, 2]
    assert np.array_equal(views.frame_indices[::3], whole.frame_indices)
    assert np.array_equal(views.frame_indices[1::3], whole.frame_indices) and views.padded.shape == (6, 4)
    for row in range(6):
        x = (0, 5, 11)[row % 3]
        np.testing.assert_array_equal(views.data[row], whole.data[row // 3][:, :, x:x + 32])
        assert views.augmentations.crop_boxes[row][0] == pytest.approx(x * 320 / 43)
    with pytest.raises(vclip.ArgumentError, match=r"spatial_views=1 in get_frames"):
        decoder.get_frames([0], transform=TransformSpec(resize=32, crop=32, spatial_views=3))


def test_bfloat16_clips_hold_bit_patterns_and_torch_sees_bfloat16(videos):
    torch = require_extra("torch")
    decoder = vclip.VideoDecoder(videos["h264"])
    spec = TransformSpec.imagenet(48, dtype="bfloat16")
    clips = decoder.get_clips(vclip.strided(2, 2, clips_per_video=1), transform=spec, seed=0)
    reference = decoder.get_clips(vclip.strided(2, 2, clips_per_video=1), transform=TransformSpec.imagenet(48), seed=0)
    assert clips.data.dtype == np.uint16 and clips.dtype == "bfloat16"
    tensor = clips.torch()
    assert tensor.dtype == torch.bfloat16 and tuple(tensor.shape) == reference.data.shape
    np.testing.assert_allclose(tensor.float().numpy(), reference.data, rtol=2**-8, atol=1e-6)


def test_sample_draw_records_one_row_per_sample():
    spec = TransformSpec(resize=64, crop=48, crop_mode="random", flip_probability=0.5, spatial_views=1)
    draws = [draw for seed in range(4) for draw in spec.draw(128, 96, np.random.default_rng(seed))]
    record = Augmentations.from_draws(draws)
    assert len(record) == 4 and record.crop_boxes.shape == (4, 4) and record.scales.shape == (4, 2)
    np.testing.assert_allclose(record.scales, [[85 / 128, 64 / 96]] * 4)  # 128x96 -> 85x64, any window
    np.testing.assert_allclose(record.crop_boxes[:, 2:], [[48 * 128 / 85, 48 * 96 / 64]] * 4)
    empty = Augmentations.from_draws([], per_frame=True, frames=5)
    assert empty.crop_boxes.shape == (0, 5, 4) and len(empty) == 0 and "samples=0" in repr(empty)
    assert isinstance(draws[0], SampleDraw)


# -- vclip sample ------------------------------------------------------------------------------------------
def test_vclip_sample_writes_three_views_of_even_clips(capsys, videos, tmp_path):
    from vclip.cli import main

    out = tmp_path / "eval.npz"
    argv = ["sample", videos["h264"], videos["hevc"], "--mode", "strided", "--sequence-length", "4", "--starts",
            "even", "--clips-per-video", "2", "--resize", "64", "--crop", "64", "--spatial-views", "3", "--out",
            str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "clip 1 view 2: frames" in printed
    with np.load(out) as stored:
        assert stored["clips"].shape == (12, 4, 64, 64, 3)
        assert stored["video_ids"].tolist() == [0] * 6 + [1] * 6
        assert stored["clip_ids"].tolist() == [0, 0, 0, 1, 1, 1] * 2 and stored["view_ids"].tolist() == [0, 1, 2] * 4
        expected = vclip.VideoDecoder(videos["hevc"]).get_clips(
            vclip.strided(4, 2, starts="even", clips_per_video=2), transform=TransformSpec(resize=64, crop=64,
                                                                                          spatial_views=3))
        assert np.array_equal(stored["clips"][6:], expected.data)
    assert main(["sample", videos["h264"], "--mode", "strided", "--spatial-views", "3", "--out",
                 str(tmp_path / "y.npz")]) != 0
    assert "spatial_views (3) must be 1 unless crop is a fixed size" in capsys.readouterr().err
