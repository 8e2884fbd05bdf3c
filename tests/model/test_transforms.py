"""TransformSpec: argument checks, and training presets that keep the picture's shape (resize the
shorter side, then crop) on 16:9, 4:3 and portrait videos, on the CPU (NumPy twin) and the GPU."""

import numpy as np
import pytest
from helpers import require_extra

import vclip
from vclip._engine import RESAMPLE_AREA, AxisWindow, window_taps
from vclip.synthetic import BARCODE_BITS, make_video

MEAN, STD = np.array(vclip.IMAGENET_MEAN), np.array(vclip.IMAGENET_STD)
SHAPES = {"16:9": (320, 180), "4:3": (320, 240), "portrait": (180, 320)}


# -- geometry ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "width, height, resized, crop",
    [
        (1920, 1080, (398, 224), (87, 0)),  # 16:9: 1920 * 224 / 1080 = 398.2
        (640, 480, (299, 224), (37, 0)),  # 4:3: 298.7
        (1080, 1920, (224, 398), (0, 87)),  # portrait 9:16
        (224, 224, (224, 224), (0, 0)),  # square: nothing to crop
    ],
)
def test_imagenet_keeps_the_aspect_ratio_and_crops_the_center(width, height, resized, crop):
    geometry = vclip.TransformSpec.imagenet(224).geometry(width, height)
    assert (geometry.resized_width, geometry.resized_height) == resized
    assert (geometry.crop_x, geometry.crop_y) == crop
    assert (geometry.output_width, geometry.output_height, geometry.flip) == (224, 224, False)
    # the resized frame has the source's shape (to rounding), so nothing is squashed
    assert abs(resized[0] / resized[1] - width / height) < 1 / 224


def test_imagenet_training_crops_at_random_and_flips_half_the_clips():
    spec = vclip.TransformSpec.imagenet(224, train=True)
    assert (spec.resize, spec.crop, spec.crop_mode, spec.flip_probability) == (224, 224, "random", 0.5)
    rng = np.random.default_rng(0)
    drawn = [spec.geometry(1920, 1080, rng) for _ in range(400)]
    assert {g.crop_y for g in drawn} == {0} and {(g.resized_width, g.resized_height) for g in drawn} == {(398, 224)}
    crop_x = [g.crop_x for g in drawn]
    assert min(crop_x) >= 0 and max(crop_x) <= 398 - 224 and len(set(crop_x)) > 100
    assert 0.4 < np.mean([g.flip for g in drawn]) < 0.6
    again = [spec.geometry(1920, 1080, np.random.default_rng(0)) for _ in range(1)]
    assert again[0] == drawn[0]  # seeded
    portrait = spec.geometry(1080, 1920, np.random.default_rng(1))
    assert portrait.crop_x == 0 and 0 <= portrait.crop_y <= 174


def test_imagenet_short_side_squash_and_overrides():
    larger = vclip.TransformSpec.imagenet(224, short_side=256).geometry(1920, 1080)
    assert (larger.resized_width, larger.resized_height, larger.crop_x, larger.crop_y) == (455, 256, 115, 16)
    squash = vclip.TransformSpec.imagenet(224, resize_mode="squash")
    assert squash.resize == (224, 224) and squash.crop is None
    geometry = squash.geometry(1920, 1080)
    assert (geometry.resized_width, geometry.resized_height, geometry.crop_x, geometry.crop_y) == (224, 224, 0, 0)
    assert vclip.TransformSpec.imagenet(224, resize_mode="squash", train=True).flip_probability == 0.5
    spec = vclip.TransformSpec.imagenet(112, train=True, flip_probability=0.0, dtype="float16", layout="CTHW")
    assert (spec.flip_probability, spec.dtype, spec.layout, spec.mean) == (0.0, "float16", "CTHW", vclip.IMAGENET_MEAN)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: vclip.TransformSpec.imagenet(224, short_side=200), r"short_side \(200\) must be an integer >= 224"),
        (
            lambda: vclip.TransformSpec.imagenet(224, resize_mode="squash", short_side=256),
            r"short_side \(256\) must be None",
        ),
        (
            lambda: vclip.TransformSpec.imagenet(224, resize_mode="stretch"),
            r"resize_mode \('stretch'\) must be one of 'short_side', 'squash'",
        ),
        (lambda: vclip.TransformSpec.imagenet(0), r"size \(0\) must be an integer >= 1"),
        (lambda: vclip.TransformSpec.imagenet(224, train="yes"), r"train \('yes'\) must be True or False"),
    ],
)
def test_imagenet_refuses_bad_options(make, message):
    with pytest.raises(vclip.ArgumentError, match=message):
        make()


# -- argument checks ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "options, message",
    [
        (
            dict(resize=1.5),
            r"resize \(1.5\) must be a positive integer \(the shorter side, aspect kept\), a \(height, width\) pair",
        ),
        (dict(resize=0), r"resize \(0\) must be a positive integer"),
        (dict(resize=(224, 0)), r"resize \(\(224, 0\)\) must be a positive integer"),
        (dict(resize="224"), r"resize \('224'\) must be a positive integer"),
        (dict(crop=(1, 2, 3)), r"crop \(\(1, 2, 3\)\) must be a positive integer \(a square\)"),
        (dict(crop=True), r"crop \(True\) must be a positive integer"),
        (dict(crop_mode="corner"), r"crop_mode \('corner'\) must be one of 'center', 'random'"),
        (dict(flip_probability=1.5), r"flip_probability \(1.5\) must be a number in \[0, 1\]"),
        (dict(flip_probability="half"), r"flip_probability \('half'\) must be a number in \[0, 1\]"),
        (dict(dtype="int8"), r"dtype \('int8'\) must be one of 'uint8', 'float16', 'float32', 'bfloat16'"),
        (dict(layout="HWC"), r"layout \('HWC'\) must be one of 'THWC', 'TCHW', 'CTHW'"),
        (dict(antialias="yes"), r"antialias \('yes'\) must be True or False"),
        (dict(mean=(0.5, 0.5, 0.5), dtype="float32"), r"std \(None\) must be three numbers"),
        (dict(mean=(0.5, 0.5), std=(1, 1, 1), dtype="float32"), r"mean \(\(0.5, 0.5\)\) must be three numbers"),
        (dict(mean=(0, 0, 0), std=(1, 0, 1), dtype="float32"), r"std \(\(1, 0, 1\)\) must be three positive numbers"),
        (
            dict(mean=(0, 0, 0), std=(1, 1, 1)),
            r"dtype \('uint8'\) must be 'float16' or 'float32' \(or 'bfloat16'\) when mean and std",
        ),
    ],
)
def test_bad_transform_arguments_name_the_value_and_the_form(options, message):
    for error in (ValueError, TypeError):
        with pytest.raises(error, match=message):
            vclip.TransformSpec(**options)


def test_numpy_sizes_are_accepted_and_normalised():
    spec = vclip.TransformSpec(resize=np.int64(256), crop=[np.int32(224), 200], flip_probability=np.float32(0.5))
    assert spec == vclip.TransformSpec(resize=256, crop=(224, 200), flip_probability=0.5)
    assert (
        type(spec.resize) is int
        and spec.crop == (224, 200)
        and hash(spec) == hash(vclip.TransformSpec(resize=256, crop=(224, 200), flip_probability=0.5))
    )
    assert spec.output_size(1920, 1080) == (200, 224)


# -- the pixels land where the geometry says, on both paths -------------------------------------------
@pytest.fixture(scope="module")
def shaped_videos(tmp_path_factory):
    folder = tmp_path_factory.mktemp("shapes")
    return {
        name: make_video(folder / f"{name.replace(':', 'x')}.mp4", num_frames=8, width=w, height=h, keyframe_interval=4)
        for name, (w, h) in SHAPES.items()
    }


def _expected_crop(rgb: np.ndarray, resized: tuple[int, int], crop: tuple[int, int], size: int) -> np.ndarray:
    """The RGB frame resized to ``resized`` (area average) and cropped at ``crop``: what the output must show."""
    height, width = rgb.shape[:2]
    rows = window_taps(AxisWindow(crop[1] * height / resized[1], height / resized[1], size, False, 0, height),
                       RESAMPLE_AREA)
    columns = window_taps(AxisWindow(crop[0] * width / resized[0], width / resized[0], size, False, 0, width),
                          RESAMPLE_AREA)
    vertical = np.einsum("ok,okwc->owc", rows[1], rgb.astype(np.float64)[rows[0]])
    return np.einsum("pk,opkc->opc", columns[1], vertical[:, columns[0]])


def _rgb255(clip_tchw) -> np.ndarray:
    """Frames of an ImageNet-normalized TCHW clip as 0-255 RGB, channel last."""
    clip = clip_tchw.get() if hasattr(clip_tchw, "get") else np.asarray(clip_tchw)
    return (clip.transpose(0, 2, 3, 1) * STD + MEAN) * 255.0


def _check_preset_output(videos, device, shape):
    width, height = SHAPES[shape]
    size = 96
    reference = vclip.VideoDecoder(videos[shape], device="cpu").get_frames([5]).data[0]  # FFmpeg rgb24
    decoder = vclip.VideoDecoder(videos[shape], device=device)
    scale = size / min(width, height)
    resized = (int(np.floor(width * scale + 0.5)), int(np.floor(height * scale + 0.5)))
    center = ((resized[0] - size) // 2, (resized[1] - size) // 2)
    kept = _rgb255(decoder.get_frames([5], transform=vclip.TransformSpec.imagenet(size)).data)[0]
    assert kept.shape == (size, size, 3)
    expected = _expected_crop(reference, resized, center, size)
    assert np.abs(kept - expected).mean() < 2.0  # chroma rounding only
    squash = vclip.TransformSpec.imagenet(size, resize_mode="squash")
    squashed = _rgb255(decoder.get_frames([5], transform=squash).data)[0]
    assert np.abs(squashed - _expected_crop(reference, (size, size), (0, 0), size)).mean() < 2.0
    if width != height:
        assert np.abs(squashed - expected).mean() > 10.0  # squashing is visibly another picture
    if width > height:  # the barcode band survives a center crop of a landscape frame: its cells land in place
        band = kept[: int(0.6 * np.ceil(height / 8) * scale)].mean(axis=(0, 2))
        cell_width = width / BARCODE_BITS
        for column in range(size):
            source_x = (center[0] + column + 0.5) * width / resized[0] - 0.5
            cell = int(source_x // cell_width)
            if min(source_x - cell * cell_width, (cell + 1) * cell_width - source_x) < 4:
                continue  # near a cell edge
            bit = (5 >> (BARCODE_BITS - 1 - cell)) & 1
            assert (band[column] > 125) == bool(bit), (column, cell)
    return decoder


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_presets_keep_the_picture_on_the_cpu(shaped_videos, shape):
    _check_preset_output(shaped_videos, "cpu", shape)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_presets_keep_the_picture_on_the_gpu(shaped_videos, shape):
    decoder = _check_preset_output(shaped_videos, "cuda", shape)
    assert decoder.device.startswith("cuda")


def test_one_loader_takes_landscape_and_portrait_videos(shaped_videos):
    require_extra("torch")
    videos = [(shaped_videos[name], number) for number, name in enumerate(sorted(SHAPES))]
    loader = vclip.ClipLoader(
        videos,
        vclip.strided(2, 2),
        transform=vclip.TransformSpec.imagenet(64, train=True),
        batch_size=3,
        device="cpu",
        num_threads=1,
    )
    try:
        (batch,) = list(loader)
        clips = batch.clips if hasattr(batch, "clips") else batch.data
        assert tuple(clips.shape) == (3, 2, 3, 64, 64) and not batch.skipped_videos
    finally:
        loader.close()
