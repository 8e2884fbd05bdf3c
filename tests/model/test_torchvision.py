"""torchvision compatibility (issue 23): a ``torchvision.transforms.v2`` pipeline translated into the
fused spec from the transforms' public attributes, and vclip's pixels against
``torchvision.transforms.v2.functional``.

The translation runs twice: on plain objects that carry torchvision's attributes (everywhere) and
on torchvision's own transforms (where torchvision imports: the GPU machine; on the CPU machines
its wheel does not load beside the CPU build of torch). The pixel comparisons need torchvision;
those of the CUDA kernel also a GPU.

Tolerances against torchvision (float32 pictures in [0, 1]): resized_crop with antialias, mean
absolute difference <= 2e-4 and 99.9th percentile <= 1e-2 (vclip resamples the YUV planes and
clamps RGB after, torchvision resamples the clamped RGB: pixels next to saturated colours differ);
the colour functions in the drawn order, <= 1e-4 absolute (float32 arithmetic).
"""

from __future__ import annotations

import enum
import types

import numpy as np
import pytest
from helpers import require_extra

import vclip
from vclip.transforms import ColorAdjustment, TransformSpec

torch = require_extra("torch")


# -- plain objects with torchvision v2's public attributes --------------------------------------------
class InterpolationMode(enum.Enum):
    NEAREST = "nearest"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"


def _hw(size):
    return (size, size) if isinstance(size, int) else tuple(size)


class Compose:
    def __init__(self, transforms):
        self.transforms = transforms


class Resize:
    def __init__(self, size, interpolation=InterpolationMode.BILINEAR, max_size=None, antialias=True):
        self.size = [size] if isinstance(size, int) else list(size)
        self.interpolation, self.max_size, self.antialias = interpolation, max_size, antialias


class RandomResizedCrop:  # named as torchvision's: vclip's is vclip.RandomResizedCrop here
    def __init__(self, size, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3), interpolation=InterpolationMode.BILINEAR,
                 antialias=True):
        self.size, self.scale, self.ratio = _hw(size), scale, ratio
        self.interpolation, self.antialias = interpolation, antialias


class RandomCrop:
    def __init__(self, size, padding=None, pad_if_needed=False):
        self.size, self.padding, self.pad_if_needed = _hw(size), padding, pad_if_needed


class CenterCrop:
    def __init__(self, size):
        self.size = _hw(size)


class RandomHorizontalFlip:
    def __init__(self, p=0.5):
        self.p = p


class ColorJitter:  # vclip's is vclip.ColorJitter here
    def __init__(self, brightness=None, contrast=None, saturation=None, hue=None):
        self.brightness, self.contrast, self.saturation, self.hue = brightness, contrast, saturation, hue


class RandomGrayscale:
    def __init__(self, p=0.1):
        self.p = p


class ToDtype:
    def __init__(self, dtype, scale=False):
        self.dtype, self.scale = dtype, scale


class Normalize:
    def __init__(self, mean, std, inplace=False):
        self.mean, self.std, self.inplace = list(mean), list(std), inplace


class RandomRotation:
    def __init__(self, degrees):
        self.degrees = degrees


class ConvertImageDtype:  # torchvision's older name of ToDtype(dtype, scale=True)
    def __init__(self, dtype):
        self.dtype = dtype


PLAIN = types.SimpleNamespace(**{cls.__name__: cls for cls in (
    InterpolationMode, Compose, Resize, RandomResizedCrop, RandomCrop, CenterCrop, RandomHorizontalFlip, ColorJitter,
    RandomGrayscale, ToDtype, Normalize, RandomRotation, ConvertImageDtype,
)})


# -- torchvision's video classification presets (references/video_classification/presets.py), step for step
class ConvertBCHWtoCBHW:
    """The reference scripts' last step: a [T, C, H, W] clip as [C, T, H, W]."""

    def __call__(self, clip):
        return clip.permute(1, 0, 2, 3)


KINETICS_MEAN, KINETICS_STD = (0.43216, 0.394666, 0.37645), (0.22803, 0.22145, 0.216989)


class VideoClassificationPresetTrain:
    def __init__(self, v2, *, crop_size, resize_size, mean=KINETICS_MEAN, std=KINETICS_STD, hflip_prob=0.5):
        steps = [v2.ConvertImageDtype(torch.float32), v2.Resize(resize_size, antialias=False)]
        if hflip_prob > 0:
            steps.append(v2.RandomHorizontalFlip(hflip_prob))
        steps.extend([v2.Normalize(mean=mean, std=std), v2.RandomCrop(crop_size), ConvertBCHWtoCBHW()])
        self.transforms = v2.Compose(steps)


class VideoClassificationPresetEval:
    def __init__(self, v2, *, crop_size, resize_size, mean=KINETICS_MEAN, std=KINETICS_STD):
        self.transforms = v2.Compose([v2.ConvertImageDtype(torch.float32), v2.Resize(resize_size, antialias=False),
                                      v2.Normalize(mean=mean, std=std), v2.CenterCrop(crop_size),
                                      ConvertBCHWtoCBHW()])


@pytest.fixture(params=["plain", "torchvision"])
def v2(request):
    """``torchvision.transforms.v2`` or the plain objects standing in for it."""
    if request.param == "plain":
        return PLAIN
    transforms = require_extra("torchvision.transforms.v2")
    names = [name for name in vars(PLAIN) if name != "InterpolationMode"]
    return types.SimpleNamespace(**{name: getattr(transforms, name) for name in names},
                                 InterpolationMode=require_extra("torchvision.transforms").InterpolationMode)


def videomae_pipeline(v2):
    return v2.Compose([
        v2.RandomResizedCrop(224, scale=(0.25, 1.0), antialias=True),
        v2.RandomHorizontalFlip(0.5),
        v2.ColorJitter(brightness=(0.6, 1.4), contrast=(0.6, 1.4), saturation=(0.6, 1.4), hue=(-0.1, 0.1)),
        v2.RandomGrayscale(0.2),
        v2.ToDtype(torch.float32, scale=True),
        v2.Normalize(vclip.IMAGENET_MEAN, vclip.IMAGENET_STD),
    ])


def test_a_training_pipeline_translates_into_one_fused_spec(v2):
    spec = TransformSpec.from_torchvision(videomae_pipeline(v2))
    assert spec == TransformSpec(
        crop=vclip.RandomResizedCrop(224, scale=(0.25, 1.0)), flip_probability=0.5,
        color_jitter=vclip.ColorJitter(0.4, 0.4, 0.4, 0.1), grayscale_probability=0.2, interpolation="bilinear",
        mean=vclip.IMAGENET_MEAN, std=vclip.IMAGENET_STD, dtype="float32", layout="TCHW",
    )


def test_an_evaluation_pipeline_translates_with_its_resize_and_centre_crop(v2):
    pipeline = v2.Compose([v2.Resize(256), v2.CenterCrop(224), v2.ToDtype(torch.bfloat16, scale=True)])
    spec = TransformSpec.from_torchvision(pipeline, layout="CTHW")
    assert spec == TransformSpec(resize=256, crop=(224, 224), interpolation="bilinear", dtype="bfloat16",
                                 layout="CTHW")
    squash = TransformSpec.from_torchvision([v2.Resize((112, 160), antialias=False), v2.RandomCrop(96)])
    assert (squash.resize, squash.crop, squash.crop_mode, squash.antialias) == ((112, 160), (96, 96), "random", False)
    assert TransformSpec.from_torchvision(v2.RandomHorizontalFlip(1.0)).flip_probability == 1.0


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda v2: [v2.RandomRotation(10)], r"RandomRotation \(position 0 of the pipeline\) cannot be fused.*vclip "
                                             r"fuses Resize, RandomResizedCrop"),
        (lambda v2: [v2.RandomCrop(64, padding=4)], r"RandomCrop \(position 0.*it pads the picture"),
        (lambda v2: [v2.ColorJitter(brightness=(0.5, 1.5)), v2.RandomResizedCrop(64)],
         r"RandomResizedCrop \(position 1.*follows ColorJitter at position 0.*resampling does not commute with "
         r"ColorJitter"),
        (lambda v2: [v2.ColorJitter(brightness=(0.5, 1.5)), v2.Resize(64)],
         r"Resize \(position 1.*resampling does not"),
        (lambda v2: [v2.ColorJitter(contrast=(0.5, 1.5)), v2.CenterCrop(64)],
         r"CenterCrop \(position 1.*contrast blends each picture with its mean, and a crop changes that mean"),
        (lambda v2: [v2.ToDtype(torch.float32, scale=True), v2.Normalize((0.5,) * 3, (0.2,) * 3),
                     v2.ColorJitter(brightness=(0.5, 1.5))],
         r"ColorJitter \(position 2.*follows Normalize at position 1.*not on normalized values"),
        (lambda v2: [v2.ToDtype(torch.float32, scale=True), v2.Normalize((0.5,) * 3, (0.2,) * 3),
                     v2.RandomGrayscale(0.5)], r"RandomGrayscale \(position 2.*not on normalized values"),
        (lambda v2: [v2.RandomHorizontalFlip(), v2.ToDtype(torch.float32, scale=True), ConvertBCHWtoCBHW(),
                     v2.Normalize((0.5,) * 3, (0.2,) * 3)],
         r"ConvertBCHWtoCBHW \(position 2.*must be the last step"),
        (lambda v2: [v2.RandomGrayscale(0.2), v2.ColorJitter(contrast=(0.5, 1.5))],
         r"ColorJitter \(position 1.*ColorJitter before RandomGrayscale"),
        (lambda v2: [v2.Normalize((0.5,) * 3, (0.2,) * 3)], r"Normalize \(position 0.*needs a float tensor"),
        (lambda v2: [v2.Resize(64, interpolation=v2.InterpolationMode.BICUBIC)],
         r"Resize \(position 0.*resamples with bicubic interpolation.*InterpolationMode.BILINEAR"),
        (lambda v2: [v2.ToDtype(torch.float32)], r"ToDtype \(position 0.*scale=False keeps 0-255 values"),
        (lambda v2: [v2.ToDtype(torch.int32, scale=True)], r"ToDtype \(position 0.*not torch.int32"),
        (lambda v2: [v2.CenterCrop(64), v2.RandomCrop(32)], r"RandomCrop \(position 1.*follows a crop at position 0"),
        (lambda v2: [v2.CenterCrop(64), v2.Resize(32)], r"Resize \(position 1.*follows CenterCrop at position 0.*"
                                                        r"vclip resizes first"),
        (lambda v2: [v2.Resize(64, max_size=80)], r"Resize \(position 0.*max_size caps the longer side"),
        (lambda v2: [v2.Resize(64, antialias=False), v2.RandomResizedCrop(32)], r"its antialias differs"),
        (lambda v2: [v2.ToDtype(torch.uint8, scale=True), v2.Normalize((0.5,) * 3, (0.2,) * 3)],
         r"Normalize \(position 1.*put ToDtype\(torch.float32, scale=True\) before it"),
    ],
)
def test_what_cannot_be_fused_is_refused_naming_the_transform(v2, build, message):
    with pytest.raises(vclip.ArgumentError, match=message):
        TransformSpec.from_torchvision(v2.Compose(build(v2)))


def _canonical(v2, *, jitter=None):
    """Pipelines of steps in vclip's order, and the same steps in orders that mean the same."""
    return {
        "flip and crop after Normalize": (
            [v2.Resize(128), v2.RandomHorizontalFlip(0.5), v2.ToDtype(torch.float32, scale=True),
             v2.Normalize(vclip.IMAGENET_MEAN, vclip.IMAGENET_STD), v2.RandomCrop(112)],
            [v2.Resize(128), v2.RandomCrop(112), v2.RandomHorizontalFlip(0.5), v2.ToDtype(torch.float32, scale=True),
             v2.Normalize(vclip.IMAGENET_MEAN, vclip.IMAGENET_STD)]),
        "flip after the colour jitter": (
            [v2.RandomResizedCrop(112), jitter or v2.ColorJitter(0.4, 0.4, 0.4, 0.1), v2.RandomHorizontalFlip(0.5)],
            [v2.RandomResizedCrop(112), v2.RandomHorizontalFlip(0.5), jitter or v2.ColorJitter(0.4, 0.4, 0.4, 0.1)]),
        "resize and crop after Normalize": (
            [v2.ToDtype(torch.float32, scale=True), v2.Normalize((0.5,) * 3, (0.2,) * 3), v2.Resize(64),
             v2.CenterCrop(56)],
            [v2.Resize(64), v2.CenterCrop(56), v2.ToDtype(torch.float32, scale=True),
             v2.Normalize((0.5,) * 3, (0.2,) * 3)]),
        "a crop after a jitter without contrast and after grayscale": (
            [v2.Resize(64), jitter or v2.ColorJitter(brightness=(0.5, 1.5)), v2.RandomGrayscale(0.2),
             v2.RandomCrop(48)],
            [v2.Resize(64), v2.RandomCrop(48), jitter or v2.ColorJitter(brightness=(0.5, 1.5)),
             v2.RandomGrayscale(0.2)]),
        "resampling after grayscale": (
            [v2.RandomGrayscale(0.2), v2.RandomResizedCrop(48)], [v2.RandomResizedCrop(48), v2.RandomGrayscale(0.2)]),
    }


def test_steps_that_commute_are_taken_in_any_order_that_means_the_same(v2):
    """A flip commutes with everything, a crop with every per-pixel step but a contrast change,
    resampling with the linear per-pixel steps (grayscale, ToDtype, Normalize): such orders were
    refused, and now give the spec of vclip's own order."""
    for what, (given, canonical) in _canonical(v2).items():
        assert TransformSpec.from_torchvision(v2.Compose(given)) == TransformSpec.from_torchvision(
            v2.Compose(canonical)), what


def test_torchvision_video_classification_presets_translate(v2):
    """The Kinetics recipe of torchvision's reference scripts: ConvertImageDtype, Resize((128, 171),
    antialias=False), RandomHorizontalFlip, Normalize, RandomCrop, ConvertBCHWtoCBHW (CTHW clips)."""
    train = VideoClassificationPresetTrain(v2, crop_size=(112, 112), resize_size=(128, 171))
    expected = TransformSpec(resize=(128, 171), crop=(112, 112), crop_mode="random", flip_probability=0.5,
                             antialias=False, interpolation="bilinear", dtype="float32", mean=KINETICS_MEAN,
                             std=KINETICS_STD, layout="CTHW")
    assert TransformSpec.from_torchvision(train) == TransformSpec.from_torchvision(train.transforms) == expected
    evaluation = VideoClassificationPresetEval(v2, crop_size=(112, 112), resize_size=(128, 171))
    assert TransformSpec.from_torchvision(evaluation) == TransformSpec(**{
        **vars(expected), "crop_mode": "center", "flip_probability": 0.0})
    assert vclip.transforms.as_transform_spec(train) == expected  # what get_clips and ClipLoader take
    with pytest.raises(vclip.ArgumentError, match=r"ConvertBCHWtoCBHW \(position 5.*turns TCHW clips into CTHW, and "
                                                  r"layout='THWC' was asked for"):
        TransformSpec.from_torchvision(train, layout="THWC")


def test_torchvision_gives_the_same_pixels_in_the_orders_vclip_takes():
    """The commutations vclip relies on, checked on torchvision itself (deterministic steps: flips
    that always flip, centre crops, fixed colour factors), and a contrast change that does not
    commute with a crop."""
    require_extra("torchvision.transforms.v2")
    from torchvision.transforms import v2 as tv

    clip = torch.rand(2, 3, 128, 160, generator=torch.Generator().manual_seed(3))
    fixed = tv.ColorJitter(brightness=(1.3, 1.3), saturation=(0.6, 0.6))
    deterministic = {"RandomHorizontalFlip": lambda p=0.5: tv.RandomHorizontalFlip(1.0), "RandomCrop": tv.CenterCrop,
                     "RandomResizedCrop": tv.CenterCrop, "RandomGrayscale": lambda p=0.1: tv.Grayscale(3)}
    steps = _canonical(types.SimpleNamespace(**{**vars(tv), **deterministic}), jitter=fixed)

    def applied(pipeline):  # ColorJitter draws the order of its factors: the same draw for both orders of steps
        torch.manual_seed(0)
        return tv.Compose(pipeline)(clip)

    for what, (given, canonical) in steps.items():
        torch.testing.assert_close(applied(given), applied(canonical), atol=1e-5, rtol=0, msg=what)
    contrast = tv.ColorJitter(contrast=(1.5, 1.5))
    assert not torch.allclose(tv.Compose([contrast, tv.CenterCrop(40)])(clip),
                              tv.Compose([tv.CenterCrop(40), contrast])(clip), atol=1e-3)


def test_decoder_and_loader_take_a_pipeline_as_their_transform(videos, v2):
    pipeline = v2.Compose([v2.Resize(64), v2.RandomCrop(48), v2.RandomHorizontalFlip(0.5),
                           v2.ToDtype(torch.float32, scale=True)])
    spec = TransformSpec.from_torchvision(pipeline)
    decoder = vclip.VideoDecoder(videos["h264"])
    through_pipeline = decoder.get_clips(vclip.strided(2, 2, clips_per_video=2), transform=pipeline, seed=4)
    through_spec = decoder.get_clips(vclip.strided(2, 2, clips_per_video=2), transform=spec, seed=4)
    assert through_pipeline.data.shape == (2, 2, 3, 48, 48) and np.array_equal(through_pipeline.data, through_spec.data)
    loader = vclip.ClipLoader([(videos["h264"], 0)], vclip.strided(2, 2), transform=pipeline, device="cpu",
                              batch_size=1, num_threads=1)
    try:
        assert loader.transform == spec and tuple(next(iter(loader)).data.shape) == (1, 2, 3, 48, 48)
    finally:
        loader.close()
    with pytest.raises(vclip.ArgumentError, match=r"RandomRotation \(position 0 of the pipeline\)"):
        decoder.get_frames([0], transform=v2.Compose([v2.RandomRotation(3)]))


# -- pixels against torchvision.transforms.v2.functional ----------------------------------------------------
def native_and_augmented(path, spec, device, seed):
    """vclip's unresampled float frames, the augmented clip and its record."""
    decoder = vclip.VideoDecoder(path, device=device)
    frames = list(range(0, 12, 3))
    native = decoder.get_frames(frames, transform=TransformSpec(dtype="float32", layout="TCHW"))
    augmented = decoder.get_frames(frames, transform=spec, seed=seed)
    return torch.as_tensor(np.asarray(_host(native.data))), augmented, _host(augmented.data)


def _host(array):
    return array.get() if hasattr(array, "get") else np.asarray(array)


def assert_resampled_like_torchvision(result: np.ndarray, expected: np.ndarray) -> None:
    error = np.abs(result - expected)
    assert error.mean() <= 2e-4 and np.percentile(error, 99.9) <= 1e-2, (error.mean(), np.percentile(error, 99.9))


def color_like_torchvision(functional, frames, record, row: int):
    """torchvision's colour functions in the recorded order, then its grayscale (float tensors)."""
    brightness, contrast, saturation, hue = record.color_factors[row]
    adjust = {0: lambda x: functional.adjust_brightness(x, brightness),
              1: lambda x: functional.adjust_contrast(x, contrast),
              2: lambda x: functional.adjust_saturation(x, saturation),
              3: lambda x: functional.adjust_hue(x, hue)}
    for k in record.color_orders[row]:
        frames = adjust[int(k)](frames)
    if record.grayscale[row]:
        frames = functional.rgb_to_grayscale(frames, num_output_channels=3)
    return frames


def _check_against_torchvision(videos, device):
    functional = require_extra("torchvision.transforms.v2.functional")
    crop_only = TransformSpec(crop=vclip.RandomResizedCrop(56, scale=(0.1, 1.0)), flip_probability=0.5,
                              interpolation="bilinear", dtype="float32", layout="TCHW")
    coloured = TransformSpec(**{**vars(crop_only), "color_jitter": vclip.ColorJitter(0.4, 0.4, 0.4, 0.1),
                                "grayscale_probability": 0.5})
    for seed in range(6):
        native, clip, data = native_and_augmented(videos["h264"], crop_only, device, seed)
        x, y, w, h = (int(v) for v in clip.augmentations.crop_boxes[0])
        expected = functional.resized_crop(native, y, x, h, w, [56, 56], antialias=True)
        if clip.augmentations.flipped[0]:
            expected = functional.horizontal_flip(expected)
        assert_resampled_like_torchvision(data, expected.numpy())
        _, jittered, jittered_data = native_and_augmented(videos["h264"], coloured, device, seed)
        assert np.array_equal(jittered.augmentations.crop_boxes, clip.augmentations.crop_boxes)  # colour drawn after
        expected_colour = color_like_torchvision(functional, torch.as_tensor(data), jittered.augmentations, 0)
        np.testing.assert_allclose(jittered_data, expected_colour.numpy(), atol=1e-4)


def test_twin_matches_torchvision_functional(videos):
    _check_against_torchvision(videos, "cpu")


@pytest.mark.gpu
def test_kernel_matches_torchvision_functional(videos):
    _check_against_torchvision(videos, "cuda")


def test_colour_formulas_match_torchvision_on_random_pictures():
    functional = require_extra("torchvision.transforms.v2.functional")
    from vclip._engine import adjust_colors

    rng = np.random.default_rng(12)
    pictures = rng.random((3, 3, 24, 32), dtype=np.float32)
    for order in ((0, 1, 2, 3), (3, 2, 1, 0), (1, 3, 0, 2)):
        color = ColorAdjustment(1.3, 0.7, 1.6, -0.23, order=order, grayscale=True)
        record = types.SimpleNamespace(color_factors=[color.factors], color_orders=[order], grayscale=[True])
        expected = color_like_torchvision(functional, torch.from_numpy(pictures), record, 0).numpy()
        result = np.stack([adjust_colors(p.transpose(1, 2, 0).astype(np.float64), color).transpose(2, 0, 1)
                           for p in pictures])
        np.testing.assert_allclose(result, expected, atol=1e-5)
