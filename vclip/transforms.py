"""What turns a decoded frame into a training tensor: resize, crop, flip, normalize, dtype, layout.

One :class:`TransformSpec` describes it; :meth:`TransformSpec.geometry` draws the per-clip random
choices (crop offset, flip) from a seeded generator, so that every frame of a clip gets the same
crop and flip, on CPU and GPU alike.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal

import numpy as np

from ._orientation import UPRIGHT, Orientation
from ._validation import check_choice, check_integer, check_number, check_size, fail, is_integer
from .errors import ArgumentError

__all__ = [
    "TransformSpec", "FrameGeometry", "Orientation", "ORIENTATIONS", "IMAGENET_MEAN", "IMAGENET_STD", "RESIZE_MODES",
    "output_shape",
]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

Layout = Literal["THWC", "TCHW", "CTHW"]
OutputDtype = Literal["uint8", "float16", "float32"]
ResizeMode = Literal["short_side", "squash"]
_LAYOUTS = ("THWC", "TCHW", "CTHW")
_DTYPES = ("uint8", "float16", "float32")
RESIZE_MODES = ("short_side", "squash")
ORIENTATIONS = ("display", "stored")
"""``"display"``: frames come out turned as a player shows them (the stream's display matrix);
``"stored"``: as coded in the file."""
"""How :meth:`TransformSpec.imagenet` fits a frame into a square: ``"short_side"`` resizes the
shorter side and crops (aspect kept), ``"squash"`` resizes both sides (aspect changed)."""


def _size_or_none(name: str, value: Any, meaning_of_int: str) -> int | tuple[int, int] | None:
    """``None``, a positive int, or a ``(height, width)`` tuple of positive ints (NumPy integers accepted)."""
    if value is None:
        return None
    expected = f"a positive integer ({meaning_of_int}), a (height, width) pair of positive integers, or None"
    if is_integer(value):
        if value < 1:
            raise fail(name, value, expected)
        return int(value)
    try:
        return check_size(name, value)
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


@dataclass(frozen=True)
class FrameGeometry:
    """Where each output pixel comes from, for one clip.

    The source frame (``source_width`` x ``source_height``, as stored) is turned by ``orientation``
    and resampled to ``resized_width`` x ``resized_height`` (sizes after the turn); the output is
    the window at (``crop_x``, ``crop_y``) of ``output_width`` x ``output_height`` pixels, mirrored
    left-right when ``flip``.
    """

    source_width: int
    source_height: int
    resized_width: int
    resized_height: int
    crop_x: int
    crop_y: int
    output_width: int
    output_height: int
    flip: bool
    orientation: Orientation = Orientation()

    @property
    def stored_resized_size(self) -> tuple[int, int]:
        """``(width, height)`` of the resized picture before the turn (in the stored orientation)."""
        return self.orientation.displayed_size(self.resized_width, self.resized_height)

    @property
    def native_scale(self) -> bool:
        """The picture is not resampled: the resized size is the source's."""
        return self.stored_resized_size == (self.source_width, self.source_height)


@dataclass(frozen=True)
class TransformSpec:
    """Spatial and value transform applied to every frame of a clip, in one pass.

    The resize either keeps the picture's shape or sets both sides:

    - ``resize=256``: the shorter side becomes 256 and the other follows the aspect ratio
      (1920x1080 becomes 455x256, 1080x1920 becomes 256x455); add ``crop=224`` for a square
      that is not squashed. :meth:`imagenet` does this by default.
    - ``resize=(224, 224)``: exactly this height and width, whatever the source's shape (a 16:9
      frame is squashed into the square).

    Args:
        resize: None (keep the size, or the downscaled size), an int (the shorter side becomes
            this, aspect kept), or ``(height, width)`` (exact size, aspect not kept).
        crop: None, an int (square) or ``(height, width)``, taken after the resize.
        crop_mode: ``"center"`` or ``"random"`` (seeded, one offset per clip).
        flip_probability: Chance that a clip is mirrored left-right (seeded, per clip).
        mean, std: Per-channel normalization in [0, 1] units: ``(x - mean) / std``. Float dtypes only.
        dtype: ``"uint8"`` (0-255), ``"float16"`` or ``"float32"`` (0-1 before normalization).
        layout: Axis order of one clip: ``"THWC"``, ``"TCHW"`` or ``"CTHW"``.
        antialias: Area-average when shrinking (otherwise bilinear, which aliases).
        orientation: ``"display"`` (default): frames are turned and mirrored as the stream's display
            matrix says (phone videos come out upright, as players show them), and resize/crop
            apply to that picture; ``"stored"``: as coded in the file.
        square_pixels: Stretch frames whose pixels are not square (sample aspect ratio other than
            1:1, as in anamorphic DVD or HDV video) to the shape a player shows, before the resize:
            wider when the ratio is above 1, taller below (never shrunk).

    Raises:
        ArgumentError: (a ``ValueError`` and a ``TypeError``) A bad size, probability, choice,
            normalization with uint8; the message echoes the value and names what is allowed.
    """

    resize: int | tuple[int, int] | None = None
    crop: int | tuple[int, int] | None = None
    crop_mode: Literal["center", "random"] = "center"
    flip_probability: float = 0.0
    mean: tuple[float, float, float] | None = None
    std: tuple[float, float, float] | None = None
    dtype: OutputDtype = "uint8"
    layout: Layout = "THWC"
    antialias: bool = True
    orientation: Literal["display", "stored"] = "display"
    square_pixels: bool = False

    def __post_init__(self):
        set_field = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731 (frozen)
        set_field("resize", _size_or_none("resize", self.resize, "the shorter side, aspect kept"))
        set_field("crop", _size_or_none("crop", self.crop, "a square"))
        check_choice("crop_mode", self.crop_mode, ("center", "random"))
        set_field("flip_probability", check_number("flip_probability", self.flip_probability, minimum=0, maximum=1))
        check_choice("dtype", self.dtype, _DTYPES)
        check_choice("layout", self.layout, _LAYOUTS)
        if not isinstance(self.antialias, (bool, np.bool_)):
            raise fail("antialias", self.antialias, "True or False")
        set_field("antialias", bool(self.antialias))
        check_choice("orientation", self.orientation, ORIENTATIONS)
        if not isinstance(self.square_pixels, (bool, np.bool_)):
            raise fail("square_pixels", self.square_pixels, "True or False")
        set_field("square_pixels", bool(self.square_pixels))
        if (self.mean is None) != (self.std is None):
            given, missing = ("mean", "std") if self.std is None else ("std", "mean")
            raise fail(missing, None, f"three numbers (R, G, B) when {given} is given: mean and std go together")
        if self.mean is not None:
            set_field("mean", _three_numbers("mean", self.mean))
            set_field("std", _three_numbers("std", self.std, positive=True))
            if self.dtype == "uint8":
                raise fail("dtype", self.dtype, "'float16' or 'float32' when mean and std normalize the values")

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
                (e.g. ``flip_probability=0.0``).

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

    def resized_size(self, width: int, height: int) -> tuple[int, int]:
        """``(width, height)`` after the resize step for a ``width`` x ``height`` frame."""
        if self.resize is None:
            return width, height
        if isinstance(self.resize, int):
            short = self.resize
            if width <= height:
                return short, max(1, math.floor(height * short / width + 0.5))
            return max(1, math.floor(width * short / height + 0.5)), short
        return self.resize[1], self.resize[0]

    def output_size(self, width: int, height: int) -> tuple[int, int]:
        """``(width, height)`` of the output for a ``width`` x ``height`` frame."""
        if self.crop is None:
            return self.resized_size(width, height)
        crop_height, crop_width = (self.crop, self.crop) if isinstance(self.crop, int) else self.crop
        return crop_width, crop_height

    def geometry(
        self,
        source_width: int,
        source_height: int,
        rng: np.random.Generator | None = None,
        *,
        base_size: tuple[int, int] | None = None,
        orientation: Orientation = UPRIGHT,
        sample_aspect_ratio: Fraction = Fraction(1),
    ) -> FrameGeometry:
        """Draw one clip's crop offset and flip.

        Args:
            source_width, source_height: Decoded frame size (as stored).
            rng: Generator for random crops and flips (needed only when they are random).
            base_size: Size the frame has before ``resize`` (the downscaled size, as stored),
                default: the source.
            orientation: The stream's display orientation, applied unless ``self.orientation`` is
                ``"stored"``.
            sample_aspect_ratio: Width of a stored pixel over its height (used by ``square_pixels``).

        Raises:
            ValueError: The crop is larger than the resized frame.
        """
        base_width, base_height = base_size or (source_width, source_height)
        if self.square_pixels and sample_aspect_ratio > 1:
            base_width = max(1, math.floor(base_width * sample_aspect_ratio + Fraction(1, 2)))
        elif self.square_pixels and 0 < sample_aspect_ratio < 1:
            base_height = max(1, math.floor(base_height / sample_aspect_ratio + Fraction(1, 2)))
        if self.orientation == "stored":
            orientation = Orientation()
        base_width, base_height = orientation.displayed_size(base_width, base_height)
        resized_width, resized_height = self.resized_size(base_width, base_height)
        output_width, output_height = self.output_size(base_width, base_height)
        if output_width > resized_width or output_height > resized_height:
            raise ValueError(
                f"crop {output_height}x{output_width} (HxW) is larger than the resized frame "
                f"{resized_height}x{resized_width}"
            )
        random_flip = 0.0 < self.flip_probability < 1.0
        if rng is None and (self.crop_mode == "random" or random_flip):
            raise ValueError("random crops and flips need a seeded generator (rng)")
        if self.crop_mode == "random":
            assert rng is not None
            crop_x = int(rng.integers(0, resized_width - output_width + 1))
            crop_y = int(rng.integers(0, resized_height - output_height + 1))
        else:
            crop_x = (resized_width - output_width) // 2
            crop_y = (resized_height - output_height) // 2
        flip = self.flip_probability >= 1.0
        if random_flip:
            assert rng is not None
            flip = bool(rng.random() < self.flip_probability)
        return FrameGeometry(
            source_width, source_height, resized_width, resized_height,
            crop_x, crop_y, output_width, output_height, flip, orientation,
        )

    def value_scale_bias(self) -> tuple[np.ndarray, np.ndarray]:
        """Per-channel ``scale, bias`` with ``out = rgb01 * scale + bias`` (float32 [3] each)."""
        if self.dtype == "uint8":
            return np.full(3, 255.0, np.float32), np.zeros(3, np.float32)
        if self.mean is None:
            return np.ones(3, np.float32), np.zeros(3, np.float32)
        std = np.asarray(self.std, np.float64)
        return (1.0 / std).astype(np.float32), (-np.asarray(self.mean, np.float64) / std).astype(np.float32)


def output_shape(layout: str, frames: int, height: int, width: int, channels: int = 3) -> tuple[int, ...]:
    """Shape of one clip in ``layout``."""
    return {
        "THWC": (frames, height, width, channels),
        "TCHW": (frames, channels, height, width),
        "CTHW": (channels, frames, height, width),
    }[layout]
