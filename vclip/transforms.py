"""What turns a decoded frame into a training tensor: resize, crop, flip, colour, normalize, dtype, layout.

One :class:`TransformSpec` describes it, with the training augmentations of published video recipes
as its parts: :class:`RandomResizedCrop` and :class:`MultiScaleCrop` (crop windows resized into the
output), :class:`RandomShortSideScale` (scale jitter), :class:`ColorJitter` and a grayscale
probability (colour), and spatial views for evaluation. :meth:`TransformSpec.draw` draws each
sample's random choices (a :class:`SampleDraw`: a :class:`FrameGeometry` and a
:class:`ColorAdjustment`) from a seeded generator, once per clip (or per frame), so that every frame
of a clip gets the same crop, flip and colour, on CPU and GPU alike; :class:`Augmentations` records
them as arrays, one row per sample. Everything runs in the one pass from the decoded picture to the
output tensor (``kernels/nv12_transform.cu`` and its NumPy twin).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, fields
from fractions import Fraction
from typing import Any, Literal

import numpy as np

from ._index.orientation import UPRIGHT, Orientation
from ._transforms.augment import (
    LARGEST_OUTPUT_SIDE,
    NO_CHANGE_FACTORS,
    NO_COLOR_CHANGE,
    Augmentations,
    ColorAdjustment,
    ColorJitter,
    FrameGeometry,
    MultiScaleCrop,
    RandomResizedCrop,
    RandomShortSideScale,
    SampleDraw,
    check_output_size,
)
from .errors import (
    ArgumentError,
    check_choice,
    check_flag,
    check_integer,
    check_number,
    fail,
    is_integer,
)

__all__ = [
    "TransformSpec", "FrameGeometry", "Orientation", "ORIENTATIONS", "IMAGENET_MEAN", "IMAGENET_STD", "RESIZE_MODES",
    "output_shape", "RandomResizedCrop", "RandomShortSideScale", "MultiScaleCrop", "ColorJitter", "ColorAdjustment",
    "SampleDraw", "Augmentations", "INTERPOLATIONS", "GRAY_WEIGHTS", "NO_COLOR_CHANGE", "as_transform_spec",
]

for _class in (RandomResizedCrop, RandomShortSideScale, MultiScaleCrop, ColorJitter, ColorAdjustment, Augmentations,
               Orientation, FrameGeometry, SampleDraw):  # defined in private modules, public here
    _class.__module__ = __name__
del _class

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
GRAY_WEIGHTS = (0.2989, 0.587, 0.114)
"""Weights of R, G and B in the grayscale of the colour adjustments (torchvision's ``rgb_to_grayscale``)."""

Layout = Literal["THWC", "TCHW", "CTHW"]
OutputDtype = Literal["uint8", "float16", "float32", "bfloat16"]
ResizeMode = Literal["short_side", "squash"]
Interpolation = Literal["area", "bilinear"]
_LAYOUTS = ("THWC", "TCHW", "CTHW")
_DTYPES = ("uint8", "float16", "float32", "bfloat16")
RESIZE_MODES = ("short_side", "squash")
INTERPOLATIONS = ("area", "bilinear")
"""How a picture is resampled when it shrinks (with ``antialias``): ``"area"`` averages the source
pixels under each output pixel; ``"bilinear"`` is torchvision's antialiased bilinear (a triangle
filter as wide as the scale, PIL's and ``torch.nn.functional.interpolate(antialias=True)``'s).
Both are bilinear when the picture grows, or without ``antialias``."""
ORIENTATIONS = ("display", "stored")
"""``"display"``: frames come out turned as a player shows them (the stream's display matrix);
``"stored"``: as coded in the file."""
"""How :meth:`TransformSpec.imagenet` fits a frame into a square: ``"short_side"`` resizes the
shorter side and crops (aspect kept), ``"squash"`` resizes both sides (aspect changed)."""


def _size_or_none(name: str, value: Any, meaning_of_int: str, others: str = "") -> int | tuple[int, int] | None:
    """``None``, a positive int, or a ``(height, width)`` tuple of positive ints (NumPy integers accepted)."""
    if value is None:
        return None
    expected = (f"a positive integer ({meaning_of_int}), a (height, width) pair of positive integers, "
                f"{others + ', ' if others else ''}or None; sides at most {LARGEST_OUTPUT_SIDE}")
    if is_integer(value):
        if not 1 <= value <= LARGEST_OUTPUT_SIDE:
            raise fail(name, value, expected)
        return int(value)
    try:
        return check_output_size(name, value)
    except ArgumentError:
        raise fail(name, value, expected) from None


def _three_numbers(name: str, value: Any, *, positive: bool = False) -> tuple[float, float, float]:
    expected = f"three {'positive ' if positive else ''}numbers (R, G, B)"
    try:
        numbers_ = tuple(value)
    except TypeError:
        raise fail(name, value, expected) from None
    valid = len(numbers_) == 3 and all(
        isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(float(v))
        and (not positive or float(v) > 0)
        for v in numbers_
    )
    if not valid:
        raise fail(name, value, expected)
    return tuple(float(v) for v in numbers_)  # type: ignore[return-value]


@dataclass(frozen=True, repr=False)
class TransformSpec:
    """Spatial, colour and value transform applied to every frame of a clip, in one pass.

    The resize either keeps the picture's shape or sets both sides:

    - ``resize=256``: the shorter side becomes 256 and the other follows the aspect ratio
      (1920x1080 becomes 455x256, 1080x1920 becomes 256x455); add ``crop=224`` for a square
      that is not squashed. :meth:`imagenet` does this by default.
    - ``resize=(224, 224)``: exactly this height and width, whatever the source's shape (a 16:9
      frame is squashed into the square).

    The training augmentations of published recipes are parts of the spec, drawn per clip (every
    frame of a clip gets the same draw; ``per_frame=True`` draws each frame on its own) from the
    seeded generator of the clip, and recorded (:class:`Augmentations`):

    - SlowFast, X3D: ``resize=RandomShortSideScale(256, 320), crop=224, crop_mode="random",
      flip_probability=0.5``;
    - VideoMAE, MViT: ``crop=RandomResizedCrop(224, scale=(0.08, 1.0)), flip_probability=0.5``
      (``interpolation="bilinear"`` resamples as torchvision does);
    - TSN, TSM: ``resize=256, crop=MultiScaleCrop(224), flip_probability=0.5``;
    - colour: ``color_jitter=ColorJitter(0.4, 0.4, 0.4, 0.1), grayscale_probability=0.2``;
    - evaluation with 3 crops: ``resize=256, crop=256, spatial_views=3`` (SlowFast's test crops;
      ``resize=224, crop=224`` for 224-pixel models), with ``ClipLoader(evaluation=True)``;
    - your own augmentations afterwards (Kornia, torchvision v2 on the CUDA tensor): ``dtype="uint8"``
      without ``mean``/``std`` gives the raw 0-255 pixels, ``layout="THWC"`` channels last,
      ``"TCHW"`` the channels-first shape torchvision takes.

    All of them run in the same pass from the decoded picture to the output as the resize and
    crop, so they cost about nothing next to decoding (``augmentation_factor`` 0 in
    :func:`vclip.estimate_memory`); only ``spatial_views`` multiplies the output.

    Args:
        resize: None (keep the size, or the downscaled size), an int (the shorter side becomes
            this, aspect kept), ``(height, width)`` (exact size, aspect not kept), or a
            :class:`RandomShortSideScale` (a random shorter side per clip; needs a fixed-size crop).
        crop: None, an int (square) or ``(height, width)``, taken after the resize (where
            ``crop_mode`` says); or a :class:`RandomResizedCrop` or :class:`MultiScaleCrop`: a
            random window resampled to its ``size``. Sides of a resize or crop are at most 16384.
        crop_mode: ``"center"`` or ``"random"`` (seeded, one offset per clip), for a fixed-size crop.
        flip_probability: Chance that a clip is mirrored left-right (seeded, per clip).
        color_jitter: Random brightness, contrast, saturation and hue (:class:`ColorJitter`), or None.
        grayscale_probability: Chance that a clip becomes gray (after the colour jitter), as
            torchvision's ``RandomGrayscale``.
        spatial_views: 1, or 3 for evaluation: each clip comes out 3 times, cropped at the start,
            the centre and the end of the longer side of the resized picture (left, centre, right
            of a landscape frame; top, centre, bottom of a portrait one), the other side centred.
            Needs a fixed-size crop with ``crop_mode="center"``. The clip is decoded once.
        per_frame: Draw the random choices (crop, scale, flip, colour) for each frame instead of
            once per clip.
        mean, std: Per-channel normalization in [0, 1] units: ``(x - mean) / std``. Float dtypes
            only; the values must stay finite in the dtype (float16: at most 65504).
        dtype: ``"uint8"`` (0-255), ``"float16"``, ``"float32"`` or ``"bfloat16"`` (0-1 before
            normalization). NumPy and CuPy have no bfloat16: its values come as their uint16 bit
            patterns in NumPy/CuPy results (``Frames.torch()`` and ``ClipBatch.data`` are bfloat16).
        layout: Axis order of one clip: ``"THWC"`` (channels last), ``"TCHW"`` or ``"CTHW"``.
        antialias: Filter when shrinking (see ``interpolation``); otherwise bilinear, which aliases.
        interpolation: ``"area"`` (default: area average when shrinking) or ``"bilinear"``
            (torchvision's antialiased bilinear, for matching torchvision's ``resized_crop``).
        orientation: ``"display"`` (default): frames are turned and mirrored as the stream's display
            matrix says (phone videos come out upright, as players show them), and resize/crop
            apply to that picture; ``"stored"``: as coded in the file.
        square_pixels: Stretch frames whose pixels are not square (sample aspect ratio other than
            1:1, as in anamorphic DVD or HDV video) to the shape a player shows, before the resize:
            wider when the ratio is above 1, taller below (never shrunk).

    Raises:
        ArgumentError: (a ``ValueError`` and a ``TypeError``) A bad size, probability, choice,
            normalization with uint8 or one whose values overflow the dtype, a combination that
            cannot be drawn (e.g. a random short side without a fixed-size crop); the message
            echoes the value and names what is allowed.
    """

    resize: int | tuple[int, int] | RandomShortSideScale | None = None
    crop: int | tuple[int, int] | RandomResizedCrop | MultiScaleCrop | None = None
    crop_mode: Literal["center", "random"] = "center"
    flip_probability: float = 0.0
    mean: tuple[float, float, float] | None = None
    std: tuple[float, float, float] | None = None
    dtype: OutputDtype = "uint8"
    layout: Layout = "THWC"
    antialias: bool = True
    orientation: Literal["display", "stored"] = "display"
    square_pixels: bool = False
    color_jitter: ColorJitter | None = None
    grayscale_probability: float = 0.0
    spatial_views: int = 1
    per_frame: bool = False
    interpolation: Interpolation = "area"

    def __post_init__(self):
        set_field = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731 (frozen)
        if not isinstance(self.resize, RandomShortSideScale):
            set_field("resize", _size_or_none("resize", self.resize, "the shorter side, aspect kept",
                                              "a vclip.RandomShortSideScale"))
        if not isinstance(self.crop, (RandomResizedCrop, MultiScaleCrop)):
            set_field("crop", _size_or_none("crop", self.crop, "a square",
                                            "a vclip.RandomResizedCrop, a vclip.MultiScaleCrop"))
        check_choice("crop_mode", self.crop_mode, ("center", "random"))
        set_field("flip_probability", check_number("flip_probability", self.flip_probability, minimum=0, maximum=1))
        check_choice("dtype", self.dtype, _DTYPES)
        check_choice("layout", self.layout, _LAYOUTS)
        set_field("antialias", check_flag("antialias", self.antialias))
        check_choice("orientation", self.orientation, ORIENTATIONS)
        set_field("square_pixels", check_flag("square_pixels", self.square_pixels))
        if self.color_jitter is not None and not isinstance(self.color_jitter, ColorJitter):
            raise fail("color_jitter", self.color_jitter, "a vclip.ColorJitter or None")
        set_field("grayscale_probability",
                  check_number("grayscale_probability", self.grayscale_probability, minimum=0, maximum=1))
        set_field("spatial_views", check_choice("spatial_views", self.spatial_views, (1, 3)))
        set_field("per_frame", check_flag("per_frame", self.per_frame))
        check_choice("interpolation", self.interpolation, INTERPOLATIONS)
        if (self.mean is None) != (self.std is None):
            given, missing = ("mean", "std") if self.std is None else ("std", "mean")
            raise fail(missing, None, f"three numbers (R, G, B) when {given} is given: mean and std go together")
        if self.mean is not None:
            set_field("mean", _three_numbers("mean", self.mean))
            set_field("std", _three_numbers("std", self.std, positive=True))
            if self.dtype == "uint8":
                raise fail("dtype", self.dtype, "'float16' or 'float32' (or 'bfloat16') when mean and std normalize "
                                                "the values")
            self._check_normalized_range()
        self._check_combination()

    def __repr__(self) -> str:
        # The fields of the first spec always, later ones only where set: the repr is part of a
        # ClipLoader's resume fingerprint, which must not change for a spec that uses none of them.
        shown = [f for f in fields(self) if f.name not in _LATER_FIELDS or getattr(self, f.name) != f.default]
        return f"TransformSpec({', '.join(f'{f.name}={getattr(self, f.name)!r}' for f in shown)})"

    def _check_normalized_range(self) -> None:
        """``(x - mean) / std`` for x in [0, 1] must stay finite in the output dtype (and in float32,
        where the kernels compute it): a tiny std would give infinities and NaN."""
        assert self.mean is not None and self.std is not None  # checked by the caller
        largest = _LARGEST_VALUE[self.dtype]
        extreme = (1.0 + max(abs(m) for m in self.mean)) / min(self.std)
        if not extreme <= largest:
            raise fail("std", self.std, f"three positive numbers (R, G, B) that keep (x - mean) / std within "
                                        f"{self.dtype}'s range (|value| <= {largest:.4g}); with mean={self.mean} "
                                        f"values reach {extreme:.4g}")

    def _check_combination(self) -> None:
        window_crop = isinstance(self.crop, (RandomResizedCrop, MultiScaleCrop))
        if window_crop and self.crop_mode != "center":
            raise fail("crop_mode", self.crop_mode,
                       f"'center' (the default) with crop={type(self.crop).__name__}(...), which draws its own window")
        if isinstance(self.resize, RandomShortSideScale):
            if self.crop is None:
                raise ArgumentError(f"resize={self.resize} gives each clip another size, and the clips of a batch "
                                    "share one shape: add a crop (e.g. crop=224, crop_mode='random')")
            if isinstance(self.crop, (int, tuple)):
                height, width = (self.crop, self.crop) if isinstance(self.crop, int) else self.crop
                if self.resize.min_size < max(height, width):
                    raise fail("resize", self.resize, f"a RandomShortSideScale whose min_size is at least the crop's "
                                                      f"larger side ({max(height, width)})")
        if self.spatial_views > 1 and (self.crop is None or window_crop or self.crop_mode != "center"):
            raise fail("spatial_views", self.spatial_views, "1 unless crop is a fixed size (an int or (height, width)) "
                                                            "with crop_mode='center': the views are placed crops")

    @classmethod
    def imagenet(
        cls,
        size: int = 224,
        *,
        train: bool = False,
        resize_mode: ResizeMode = "short_side",
        short_side: int | None = None,
        dtype: OutputDtype = "float32",
        layout: Layout = "TCHW",
        **options,
    ) -> TransformSpec:
        """The usual video recipe: ``size`` x ``size`` clips normalized with the ImageNet mean and std.

        With ``resize_mode="short_side"`` (default) the picture keeps its shape: the shorter side is
        resized to ``short_side`` (default ``size``), then a ``size`` x ``size`` window is cropped:
        in the center for evaluation, at a random place (seeded, per clip) with a left-right flip
        half of the time for training (``train=True``). ``resize_mode="squash"`` resizes both sides
        to ``size`` (a 16:9 frame is squashed into the square) and crops nothing; training adds
        only the flip.

        Args:
            size: Side of the square output.
            train: Random crop and flip (training) instead of center crop (evaluation).
            resize_mode: ``"short_side"`` or ``"squash"`` (see above).
            short_side: The shorter side after the resize, at least ``size`` (``"short_side"`` only),
                e.g. 256 with ``size=224``: crop 224 out of a frame whose shorter side is 256.
            dtype, layout: As the class. ``options``: any other field, overriding the recipe's
                (e.g. ``flip_probability=0.0``, ``spatial_views=3``).

        Raises:
            ArgumentError: ``size`` or ``short_side`` not a positive integer, ``short_side`` below
                ``size`` or given with ``"squash"``, an unknown ``resize_mode``.
        """
        size = check_integer("size", size, minimum=1)
        check_choice("resize_mode", resize_mode, RESIZE_MODES)
        if not isinstance(train, (bool, np.bool_)):
            raise fail("train", train, "True or False")
        if resize_mode == "squash":
            if short_side is not None:
                raise fail("short_side", short_side, "None with resize_mode='squash' (both sides become size)")
            recipe: dict[str, Any] = {"resize": (size, size)}
        else:
            short = size if short_side is None else check_integer("short_side", short_side, minimum=size)
            recipe = {"resize": short, "crop": size, "crop_mode": "random" if train else "center"}
        recipe.update(flip_probability=0.5 if train else 0.0, mean=IMAGENET_MEAN, std=IMAGENET_STD,
                      dtype=dtype, layout=layout)
        return cls(**{**recipe, **options})

    @classmethod
    def from_torchvision(cls, transforms: Any, *, layout: Layout = "TCHW") -> TransformSpec:
        """The fused spec of a ``torchvision.transforms.v2.Compose`` (or a list of its transforms).

        Read from the transforms' public attributes (torchvision need not be importable):
        ``Resize``, ``RandomResizedCrop``, ``RandomCrop``, ``CenterCrop``,
        ``RandomHorizontalFlip``, ``ColorJitter``, ``RandomGrayscale``, ``ToDtype`` (or
        ``ConvertImageDtype``) and ``Normalize`` (at most one resize and one crop), in any order
        that means the same as vclip's (resize, crop, flip, colour jitter, grayscale, dtype,
        normalize): a flip may come anywhere, a crop after per-pixel steps but a contrast change,
        a resize or resized crop after grayscale, ``ToDtype`` and ``Normalize``; ``ColorJitter``
        comes before ``RandomGrayscale``, both before ``Normalize``, and ``ToDtype`` before
        ``Normalize``. torchvision's video classification presets translate (the preset object
        or its ``transforms``; their last step, ``ConvertBCHWtoCBHW``, gives layout ``"CTHW"``).
        Resampling must be bilinear (the spec gets ``interpolation="bilinear"``, as torchvision's).
        vclip applies the colour changes in float, as torchvision does on float tensors (on uint8
        tensors torchvision rounds after each), and resamples once from the decoded picture (a
        ``Resize`` followed by a random resized crop is one resampling, not two).

        Args:
            transforms: A ``Compose`` (its ``transforms``), a preset holding one, a sequence of
                transforms, or one transform.
            layout: Axis order of a clip; default ``"TCHW"``, the shape of torchvision's video tensors.

        Raises:
            ArgumentError: A transform that cannot be fused (named, with the reason), or one in an
                order vclip cannot reproduce.
        """
        from ._transforms.torchvision import spec_fields

        try:
            return cls(**spec_fields(transforms, layout=layout))
        except ArgumentError as error:
            raise ArgumentError(f"the torchvision pipeline translates to a spec vclip refuses: {error}") from None

    # -- sizes ------------------------------------------------------------------------------------
    def resized_size(self, width: int, height: int) -> tuple[int, int]:
        """``(width, height)`` after the resize step for a ``width`` x ``height`` frame.

        Raises:
            ArgumentError: (a ValueError) The resize is random (:class:`RandomShortSideScale`): each
                clip draws its size.
        """
        if isinstance(self.resize, RandomShortSideScale):
            raise ArgumentError(f"resize={self.resize} draws a size per clip; see TransformSpec.geometry")
        return _resized_size(width, height, self.resize)

    def output_size(self, width: int, height: int) -> tuple[int, int]:
        """``(width, height)`` of the output for a ``width`` x ``height`` frame."""
        if self.crop is None:
            return self.resized_size(width, height)
        if isinstance(self.crop, (RandomResizedCrop, MultiScaleCrop)):
            crop_height, crop_width = self.crop.size
        else:
            crop_height, crop_width = (self.crop, self.crop) if isinstance(self.crop, int) else self.crop
        return crop_width, crop_height

    @property
    def is_random(self) -> bool:
        """Whether any choice is drawn (and needs a seeded generator)."""
        window_crop = isinstance(self.crop, (RandomResizedCrop, MultiScaleCrop))
        return (self.crop_mode == "random" or 0.0 < self.flip_probability < 1.0 or window_crop
                or isinstance(self.resize, RandomShortSideScale)
                or self.color_jitter is not None or 0.0 < self.grayscale_probability < 1.0)

    # -- draws ------------------------------------------------------------------------------------
    def geometry(
        self,
        source_width: int,
        source_height: int,
        rng: np.random.Generator | None = None,
        *,
        base_size: tuple[int, int] | None = None,
        orientation: Orientation = UPRIGHT,
        sample_aspect_ratio: Fraction = Fraction(1),
        view: int = 0,
    ) -> FrameGeometry:
        """Draw one clip's geometry: its resize (scale jitter), crop window and flip.

        The generator is used in this order: the shorter side (:class:`RandomShortSideScale`),
        the window (random crop offset x then y, or the random resized or multi-scale window),
        the flip.

        Args:
            source_width, source_height: Decoded frame size (as stored).
            rng: Generator for the random choices (needed only when there are some).
            base_size: Size the frame has before ``resize`` (the downscaled size, as stored),
                default: the source.
            orientation: The stream's display orientation, applied unless ``self.orientation`` is
                ``"stored"``.
            sample_aspect_ratio: Width of a stored pixel over its height (used by ``square_pixels``).
            view: Which of the ``spatial_views`` (0 for the first, or the only one).

        Raises:
            ArgumentError: (a ValueError) The crop is larger than the resized frame; random choices
                without ``rng``.
        """
        base_width, base_height = base_size or (source_width, source_height)
        if self.square_pixels and sample_aspect_ratio > 1:
            base_width = max(1, math.floor(base_width * sample_aspect_ratio + Fraction(1, 2)))
        elif self.square_pixels and 0 < sample_aspect_ratio < 1:
            base_height = max(1, math.floor(base_height / sample_aspect_ratio + Fraction(1, 2)))
        if self.orientation == "stored":
            orientation = Orientation()
        input_width, input_height = orientation.displayed_size(base_width, base_height)
        if rng is None and self.is_random:
            raise ArgumentError("random crops and flips need a seeded generator (rng)")
        if isinstance(self.resize, RandomShortSideScale):
            assert rng is not None
            resized_width, resized_height = _resized_size(input_width, input_height, self.resize.short_side(rng))
        else:
            resized_width, resized_height = _resized_size(input_width, input_height, self.resize)
        output_width, output_height = self.output_size(input_width, input_height) if self.crop is not None else (
            resized_width, resized_height)
        crop = self.crop
        if isinstance(crop, (RandomResizedCrop, MultiScaleCrop)):
            assert rng is not None
            crop_x, crop_y, crop_width, crop_height = crop.window(resized_width, resized_height, rng)
        else:
            if output_width > resized_width or output_height > resized_height:
                raise ArgumentError(
                    f"crop {output_height}x{output_width} (HxW) is larger than the resized frame "
                    f"{resized_height}x{resized_width}"
                )
            crop_width, crop_height = output_width, output_height
            free_x, free_y = resized_width - output_width, resized_height - output_height
            if self.crop_mode == "random":
                assert rng is not None
                crop_x = int(rng.integers(0, free_x + 1))
                crop_y = int(rng.integers(0, free_y + 1))
            elif self.spatial_views > 1:
                place = (0, 1, 2)[check_integer("view", view, minimum=0, maximum=2)]
                crop_x, crop_y = free_x // 2, free_y // 2
                if resized_width >= resized_height:
                    crop_x = (0, free_x // 2, free_x)[place]
                else:
                    crop_y = (0, free_y // 2, free_y)[place]
            else:
                crop_x, crop_y = free_x // 2, free_y // 2
        flip = self.flip_probability >= 1.0
        if 0.0 < self.flip_probability < 1.0:
            assert rng is not None
            flip = bool(rng.random() < self.flip_probability)
        return FrameGeometry(
            source_width, source_height, resized_width, resized_height,
            crop_x, crop_y, output_width, output_height, flip, orientation,
            crop_width=crop_width, crop_height=crop_height, input_width=input_width, input_height=input_height,
            crop_before_resize=isinstance(crop, (RandomResizedCrop, MultiScaleCrop)),
        )

    def color(self, rng: np.random.Generator | None = None) -> ColorAdjustment:
        """Draw one clip's colour changes: the jitter's order and factors, then whether it turns gray.

        Raises:
            ArgumentError: Random choices without ``rng``.
        """
        jitter, probability = self.color_jitter, self.grayscale_probability
        if jitter is None and probability in (0.0, 1.0):
            return ColorAdjustment(grayscale=probability == 1.0)
        if rng is None:
            raise ArgumentError("colour jitter and random grayscale need a seeded generator (rng)")
        order, factors = jitter.draw(rng) if jitter is not None else ((0, 1, 2, 3), NO_CHANGE_FACTORS)
        grayscale = probability >= 1.0 or (probability > 0.0 and bool(rng.random() < probability))
        brightness, contrast, saturation, hue = factors
        return ColorAdjustment(brightness, contrast, saturation, hue, order=order, grayscale=grayscale)

    def draw(
        self,
        source_width: int,
        source_height: int,
        rng: np.random.Generator | None = None,
        *,
        frames: int = 1,
        base_size: tuple[int, int] | None = None,
        orientation: Orientation = UPRIGHT,
        sample_aspect_ratio: Fraction = Fraction(1),
    ) -> tuple[SampleDraw, ...]:
        """Draw everything one clip of ``frames`` frames gets: one :class:`SampleDraw` per spatial view.

        Per view, the geometry (:meth:`geometry`) then the colour changes (:meth:`color`); with
        ``per_frame``, those of each frame in turn. Arguments as :meth:`geometry`.
        """
        frames = check_integer("frames", frames, minimum=1)
        options: dict[str, Any] = dict(base_size=base_size, orientation=orientation,
                                       sample_aspect_ratio=sample_aspect_ratio)
        samples = []
        for view in range(self.spatial_views):
            if self.per_frame:
                each = tuple((self.geometry(source_width, source_height, rng, view=view, **options), self.color(rng))
                             for _ in range(frames))
                samples.append(SampleDraw(each[0][0], each[0][1], each))
            else:
                geometry = self.geometry(source_width, source_height, rng, view=view, **options)
                samples.append(SampleDraw(geometry, self.color(rng)))
        return tuple(samples)

    def value_scale_bias(self) -> tuple[np.ndarray, np.ndarray]:
        """Per-channel ``scale, bias`` with ``out = rgb01 * scale + bias`` (float32 [3] each)."""
        if self.dtype == "uint8":
            return np.full(3, 255.0, np.float32), np.zeros(3, np.float32)
        if self.mean is None:
            return np.ones(3, np.float32), np.zeros(3, np.float32)
        std = np.asarray(self.std, np.float64)
        return (1.0 / std).astype(np.float32), (-np.asarray(self.mean, np.float64) / std).astype(np.float32)


_LARGEST_VALUE = {"float16": 65504.0, "bfloat16": 3.3895e38, "float32": float(np.finfo(np.float32).max)}
"""The largest finite value of each float output dtype (bfloat16's rounded down)."""

_LATER_FIELDS = ("color_jitter", "grayscale_probability", "spatial_views", "per_frame", "interpolation")


def _resized_size(width: int, height: int, resize: int | tuple[int, int] | None) -> tuple[int, int]:
    """``(width, height)`` after ``resize`` (None, a shorter side, or ``(height, width)``)."""
    if resize is None:
        return width, height
    if isinstance(resize, int):
        if width <= height:
            return resize, max(1, math.floor(height * resize / width + 0.5))
        return max(1, math.floor(width * resize / height + 0.5)), resize
    return resize[1], resize[0]


def as_transform_spec(value: Any, name: str = "transform") -> TransformSpec | None:
    """``value`` as a :class:`TransformSpec`: itself, None, or the fused spec of a torchvision v2
    transform or ``Compose`` (see :meth:`TransformSpec.from_torchvision`).

    Raises:
        ArgumentError: Anything else, or a torchvision pipeline that cannot be fused.
    """
    if value is None or isinstance(value, TransformSpec):
        return value
    from ._transforms.torchvision import looks_like_torchvision

    if looks_like_torchvision(value):
        return TransformSpec.from_torchvision(value)
    raise fail(name, value, "a TransformSpec or None (or a torchvision.transforms.v2.Compose of transforms vclip "
                            "fuses), e.g. vclip.TransformSpec.imagenet(224)")


def output_shape(layout: str, frames: int, height: int, width: int, channels: int = 3) -> tuple[int, ...]:
    """Shape of one clip in ``layout``."""
    return {
        "THWC": (frames, height, width, channels),
        "TCHW": (frames, channels, height, width),
        "CTHW": (channels, frames, height, width),
    }[layout]
