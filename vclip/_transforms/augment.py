"""The training augmentations: the random parts of a transform as values (random resized crop,
short-side scale jitter, multi-scale crop, colour jitter), the colour change one clip gets, the
record of what was drawn for each sample (:class:`Augmentations`), and the draws themselves, as
pure functions of sizes and a generator. :mod:`vclip.transforms` makes them public.

Each function takes a seeded ``numpy.random.Generator`` and consumes it in a fixed order, so that
the same seed gives the same windows and factors on the CPU and the GPU, and in a resumed epoch.
The semantics are those of the published recipes: torchvision's ``RandomResizedCrop`` window
(ten tries, then a centre crop at the nearest allowed aspect ratio), the multi-scale crop of
TSN/TSM (crop sides from scales of the shorter side, fixed or random offsets), and the order and
factors of torchvision's ``ColorJitter``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._index.orientation import Orientation
from ..errors import (
    check_choice,
    check_integer,
    check_range,
    check_size,
    fail,
    is_finite_number,
)

__all__ = [
    "RandomResizedCrop", "RandomShortSideScale", "MultiScaleCrop", "ColorJitter", "ColorAdjustment", "NO_COLOR_CHANGE",
    "Augmentations", "NO_CHANGE_FACTORS", "resized_crop_window", "multi_scale_window", "jitter_factors",
    "RESIZED_CROP_TRIES", "LARGEST_OUTPUT_SIDE", "LARGEST_AREA_FRACTION", "LARGEST_ASPECT_RATIO", "check_output_size",
]

RESIZED_CROP_TRIES = 10
"""Windows a random resized crop tries before it falls back to a centre crop (torchvision's count)."""
LARGEST_OUTPUT_SIDE = 16384
"""The largest side a transform makes (a resize, a crop, a random crop's output, a scale jitter's
shorter side): twice NVDEC's largest picture side. One 16384 x 16384 RGB float32 frame is already
3 GiB; a larger side is a mistake, refused before any memory is asked for."""
LARGEST_AREA_FRACTION = 100.0
"""The largest ``scale`` of a :class:`RandomResizedCrop`: a window over 1x the picture's area never
fits (the crop then falls back to the centre crop, as torchvision's does); a far larger one is a mistake."""
LARGEST_ASPECT_RATIO = 16384.0
"""The largest ``ratio`` (width / height) of a :class:`RandomResizedCrop`, and its inverse the smallest:
a picture of 16384 x 1 pixels."""
_LARGEST_JITTER_FACTOR = float(np.finfo(np.float32).max)  # the kernels compute in float32

Window = tuple[int, int, int, int]  # x, y, width, height


def resized_crop_window(
    width: int, height: int, scale: tuple[float, float], ratio: tuple[float, float], rng: np.random.Generator
) -> Window:
    """A random window of a ``width`` x ``height`` picture whose area is a fraction in ``scale`` of
    the picture's and whose aspect ratio (width / height) is in ``ratio``, drawn log-uniformly.

    Up to :data:`RESIZED_CROP_TRIES` windows are drawn; the first that fits the picture is placed
    uniformly at random. When none fits, the window is the centred crop of the whole picture at
    the aspect ratio of ``ratio`` nearest to the picture's. Sides are rounded half to even.
    """
    area = width * height
    log_low, log_high = math.log(ratio[0]), math.log(ratio[1])
    for _ in range(RESIZED_CROP_TRIES):
        target_area = area * rng.uniform(scale[0], scale[1])
        aspect = math.exp(rng.uniform(log_low, log_high))
        crop_width = round(math.sqrt(target_area * aspect))
        crop_height = round(math.sqrt(target_area / aspect))
        if 0 < crop_width <= width and 0 < crop_height <= height:
            y = int(rng.integers(0, height - crop_height + 1))
            x = int(rng.integers(0, width - crop_width + 1))
            return x, y, crop_width, crop_height
    picture_ratio = width / height
    if picture_ratio < min(ratio):
        crop_width, crop_height = width, max(1, round(width / min(ratio)))
    elif picture_ratio > max(ratio):
        crop_width, crop_height = max(1, round(height * max(ratio))), height
    else:
        crop_width, crop_height = width, height
    return (width - crop_width) // 2, (height - crop_height) // 2, crop_width, crop_height


def _fixed_offsets(free_x: int, free_y: int, count: int) -> list[tuple[int, int]]:
    """The corners and the centre (5), or those and 8 more points of a 4 x 4 grid (13)."""
    step_x, step_y = free_x // 4, free_y // 4
    grid = [(0, 0), (4, 0), (0, 4), (4, 4), (2, 2)]
    if count == 13:
        grid += [(0, 2), (4, 2), (2, 4), (2, 0), (1, 1), (3, 1), (1, 3), (3, 3)]
    return [(step_x * i, step_y * j) for i, j in grid]


def multi_scale_window(
    width: int,
    height: int,
    output_size: tuple[int, int],
    scales: Sequence[float],
    max_scale_gap: int,
    fixed_offsets: int | None,
    rng: np.random.Generator,
) -> Window:
    """A TSN/TSM multi-scale crop window of a ``width`` x ``height`` picture.

    The candidate sides are ``int(min(width, height) * s)`` for each of ``scales``; the window's
    width and height are a random pair of them whose positions in ``scales`` differ by at most
    ``max_scale_gap`` (a side within 2 pixels of the output's ``(width, height)`` becomes the
    output's). Its offset is one of ``fixed_offsets`` (5 or 13) fixed points, or anywhere (None).
    """
    base = min(width, height)
    sides = [int(base * s) for s in scales]
    pairs = [(sides[j], sides[i]) for i in range(len(sides)) for j in range(len(sides)) if abs(i - j) <= max_scale_gap]
    crop_width, crop_height = pairs[int(rng.integers(len(pairs)))]
    output_width, output_height = output_size
    crop_width = min(output_width if abs(crop_width - output_width) < 3 else crop_width, width)
    crop_height = min(output_height if abs(crop_height - output_height) < 3 else crop_height, height)
    if fixed_offsets is None:
        x = int(rng.integers(0, width - crop_width + 1))
        y = int(rng.integers(0, height - crop_height + 1))
    else:
        offsets = _fixed_offsets(width - crop_width, height - crop_height, fixed_offsets)
        x, y = offsets[int(rng.integers(len(offsets)))]
    return x, y, crop_width, crop_height


def jitter_factors(
    ranges: Sequence[tuple[float, float] | None], rng: np.random.Generator
) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """The order and factors of a colour jitter: a random permutation of the four adjustments
    (brightness, contrast, saturation, hue), then a uniform factor from each range that is not
    None, in that order (the identity ``1, 1, 1, 0`` for those that are)."""
    order = tuple(int(k) for k in rng.permutation(4))
    identity = (1.0, 1.0, 1.0, 0.0)
    factors = tuple(
        identity[k] if bounds is None else float(rng.uniform(bounds[0], bounds[1])) for k, bounds in enumerate(ranges)
    )
    return order, factors


def check_output_size(name: str, value: Any) -> tuple[int, int]:
    """``(height, width)`` from a positive integer (a square) or a pair, each side at most
    :data:`LARGEST_OUTPUT_SIDE`."""
    size = check_size(name, value)
    if max(size) > LARGEST_OUTPUT_SIDE:
        raise fail(name, value, f"a positive integer or a (height, width) pair of positive integers, each at most "
                                f"{LARGEST_OUTPUT_SIDE}")
    return size


def _bounded_range(name: str, value: Any, largest: float, *, inverse_below: bool = False) -> tuple[float, float]:
    """A ``(min, max)`` pair with ``0 < min <= max <= largest`` (and ``min >= 1 / largest`` with ``inverse_below``)."""
    bounds = check_range(name, value, positive=True)
    if bounds[1] > largest or (inverse_below and bounds[0] < 1 / largest):
        where = f"in [1/{largest:g}, {largest:g}]" if inverse_below else f"in (0, {largest:g}]"
        raise fail(name, value, f"a (min, max) pair of numbers {where} with min <= max")
    return bounds


# -- the random parts of a transform, as values -------------------------------------------------------------------
@dataclass(frozen=True)
class RandomResizedCrop:
    """A random window of random area and shape, resized to ``size``: torchvision's ``RandomResizedCrop``.

    Pass it as ``TransformSpec(crop=...)``. For each clip (each frame with ``per_frame``) a window
    is drawn whose area is a fraction of the picture's drawn uniformly from ``scale`` and whose
    aspect ratio (width / height) is drawn log-uniformly from ``ratio``; of up to 10 such windows
    the first that fits the picture is taken, at a uniformly random place. When none fits, the
    window is the centred crop of the whole picture at the ratio in ``ratio`` nearest to the
    picture's (the picture itself when its ratio is allowed). The picture is the decoded frame as
    displayed (after the sampler's downscale and ``square_pixels``; after ``resize`` if one is
    given); the window is resampled straight into the output in the same pass, reading no pixel
    outside it (as torchvision's crop-then-resize does).

    Recipes: VideoMAE and MViT train with ``RandomResizedCrop(224, scale=(0.08, 1.0))`` or
    ``scale=(0.25, 1.0)``, ``ratio=(3/4, 4/3)``.

    Args:
        size: Side of the square output, or ``(height, width)``, each at most 16384.
        scale: ``(min, max)`` fraction of the picture's area, ``0 < min <= max <= 100`` (above 1
            no window fits). Default (0.08, 1.0).
        ratio: ``(min, max)`` aspect ratio (width / height), within ``[1/16384, 16384]``,
            ``min <= max``. Default (3/4, 4/3).

    Raises:
        ArgumentError: A size that is not a positive integer or pair, or too large; a range that is
            not ``(min, max)`` with ``0 < min <= max`` within its bounds.
    """

    size: tuple[int, int]
    scale: tuple[float, float] = (0.08, 1.0)
    ratio: tuple[float, float] = (3 / 4, 4 / 3)

    def __post_init__(self):
        object.__setattr__(self, "size", check_output_size("size", self.size))
        object.__setattr__(self, "scale", _bounded_range("scale", self.scale, LARGEST_AREA_FRACTION))
        object.__setattr__(self, "ratio", _bounded_range("ratio", self.ratio, LARGEST_ASPECT_RATIO, inverse_below=True))

    def window(self, width: int, height: int, rng: np.random.Generator) -> tuple[int, int, int, int]:
        """``(x, y, width, height)`` of one random window of a ``width`` x ``height`` picture."""
        return resized_crop_window(width, height, self.scale, self.ratio, rng)


@dataclass(frozen=True)
class RandomShortSideScale:
    """Scale jitter: the shorter side becomes a random whole number of pixels in ``[min_size, max_size]``.

    Pass it as ``TransformSpec(resize=...)`` with a fixed-size ``crop`` (usually
    ``crop_mode="random"``): SlowFast and X3D train with ``RandomShortSideScale(256, 320)`` and a
    random 224 crop. The size is drawn uniformly among the integers of the range (PyTorchVideo's
    ``RandomShortSideScale``); the longer side follows the aspect ratio, rounded to the nearest pixel.

    Args:
        min_size, max_size: Bounds of the shorter side, ``1 <= min_size <= max_size <= 16384``.

    Raises:
        ArgumentError: Bounds that are not integers with ``1 <= min_size <= max_size <= 16384``.
    """

    min_size: int
    max_size: int

    def __post_init__(self):
        low = check_integer("min_size", self.min_size, minimum=1, maximum=LARGEST_OUTPUT_SIDE)
        high = check_integer("max_size", self.max_size, minimum=1, maximum=LARGEST_OUTPUT_SIDE)
        if high < low:
            raise fail("max_size", self.max_size, f"an integer >= min_size ({low})")
        object.__setattr__(self, "min_size", low)
        object.__setattr__(self, "max_size", high)

    def short_side(self, rng: np.random.Generator) -> int:
        """One draw of the shorter side."""
        return int(rng.integers(self.min_size, self.max_size + 1))


@dataclass(frozen=True)
class MultiScaleCrop:
    """TSN/TSM's multi-scale crop: a window whose sides are scales of the shorter side, resized to ``size``.

    Pass it as ``TransformSpec(crop=...)``, usually after ``resize=256``. The candidate sides are
    ``int(short * s)`` for ``s`` in ``scales`` (``short``: the picture's shorter side); the window's
    width and height are a random pair of them whose positions in ``scales`` differ by at most
    ``max_scale_gap``, a side within 2 pixels of the output's becoming the output's. The window sits
    at one of ``fixed_offsets`` fixed places (5: the corners and the centre; 13: those and 8 more of
    a 4 x 4 grid), drawn uniformly, or anywhere (``fixed_offsets=None``). As torchvision's
    crop-then-resize, no pixel outside the window is read.

    Args:
        size: Side of the square output, or ``(height, width)``, each at most 16384.
        scales: Fractions of the shorter side, each in (0, 1]. Default (1, 0.875, 0.75, 0.66).
        max_scale_gap: Largest difference between the positions in ``scales`` of the width and
            the height (default 1: nearly square windows).
        fixed_offsets: 5 (default, TSN's and MMAction2's), 13, or None (random offsets).

    Raises:
        ArgumentError: A bad size, scale, gap or offset count.
    """

    size: tuple[int, int]
    scales: tuple[float, ...] = (1.0, 0.875, 0.75, 0.66)
    max_scale_gap: int = 1
    fixed_offsets: int | None = 5

    def __post_init__(self):
        object.__setattr__(self, "size", check_output_size("size", self.size))
        expected = "a non-empty sequence of numbers in (0, 1]"
        try:
            scales = tuple(self.scales)
        except TypeError:
            raise fail("scales", self.scales, expected) from None
        if not scales or not all(is_finite_number(s) and 0 < float(s) <= 1 for s in scales):
            raise fail("scales", self.scales, expected)
        object.__setattr__(self, "scales", tuple(float(s) for s in scales))
        object.__setattr__(self, "max_scale_gap", check_integer("max_scale_gap", self.max_scale_gap, minimum=0))
        if self.fixed_offsets is not None:
            check_choice("fixed_offsets", self.fixed_offsets, (5, 13, None))
            object.__setattr__(self, "fixed_offsets", int(self.fixed_offsets))

    def window(self, width: int, height: int, rng: np.random.Generator) -> tuple[int, int, int, int]:
        """``(x, y, width, height)`` of one window of a ``width`` x ``height`` picture."""
        output_height, output_width = self.size
        return multi_scale_window(width, height, (output_width, output_height), self.scales, self.max_scale_gap,
                                  self.fixed_offsets, rng)


def _jitter_range(name: str, value: Any, *, hue: bool = False) -> tuple[float, float] | None:
    """torchvision's reading of a ColorJitter argument: ``x`` means ``[max(0, 1 - x), 1 + x]``
    (``[-x, x]`` for hue); a pair is taken as it is; the identity range means no change (None)."""
    if value is None:
        return None
    if is_finite_number(value):
        number = float(value)
        if number < 0 or (hue and number > 0.5):
            raise fail(name, value, "a number in [0, 0.5] or a (min, max) pair in [-0.5, 0.5]" if hue else
                       "a number >= 0 or a (min, max) pair of numbers >= 0")
        bounds = (-number, number) if hue else (max(0.0, 1.0 - number), 1.0 + number)
    else:
        bounds = check_range(name, value, low=-0.5, high=0.5) if hue else check_range(name, value, low=0.0)
    if bounds[1] > _LARGEST_JITTER_FACTOR:  # an infinite factor would make 0 * inf = NaN pixels
        raise fail(name, value, f"a factor at most {_LARGEST_JITTER_FACTOR:.4g} (float32's largest)")
    identity = 0.0 if hue else 1.0
    return None if bounds == (identity, identity) else bounds


@dataclass(frozen=True)
class ColorJitter:
    """Random brightness, contrast, saturation and hue changes: torchvision's ``ColorJitter``.

    Pass it as ``TransformSpec(color_jitter=...)``. Per clip (per frame with ``per_frame``) the four
    adjustments are applied in a random order, each with a factor drawn uniformly from its range,
    to the RGB picture in [0, 1] after the resize and crop and before normalization (as torchvision
    on a float tensor; 10-bit sources keep their precision until the output dtype):

    - brightness ``b``: ``clamp(x * b, 0, 1)``;
    - contrast ``c``: ``clamp(c * x + (1 - c) * m, 0, 1)``, ``m`` the mean grayscale of the frame
      (each frame's own mean, over the output picture, as it is at that point);
    - saturation ``s``: ``clamp(s * x + (1 - s) * gray(x), 0, 1)``;
    - hue ``h``: the hue turned by ``h`` of a full turn (HSV).

    ``gray`` weighs R, G, B by :data:`GRAY_WEIGHTS`.

    Args:
        brightness, contrast, saturation: ``x`` for the range ``[max(0, 1 - x), 1 + x]``, or a
            ``(min, max)`` pair of numbers >= 0. Default 0: no change.
        hue: ``x`` in [0, 0.5] for the range ``[-x, x]``, or a ``(min, max)`` pair in [-0.5, 0.5].
            Default 0: no change.

    Attributes:
        brightness, contrast, saturation, hue: The ranges, ``(min, max)``, or None when the
            adjustment never changes the picture.

    Raises:
        ArgumentError: A negative amount, a hue outside [-0.5, 0.5], a pair with min > max.
    """

    brightness: Any = None
    contrast: Any = None
    saturation: Any = None
    hue: Any = None

    def __post_init__(self):
        for name in ("brightness", "contrast", "saturation"):
            object.__setattr__(self, name, _jitter_range(name, getattr(self, name)))
        object.__setattr__(self, "hue", _jitter_range("hue", self.hue, hue=True))

    @property
    def ranges(self) -> tuple[tuple[float, float] | None, ...]:
        """The four ranges, in torchvision's order (brightness, contrast, saturation, hue)."""
        return (self.brightness, self.contrast, self.saturation, self.hue)

    def draw(self, rng: np.random.Generator) -> tuple[tuple[int, ...], tuple[float, ...]]:
        """One draw: the order of the four adjustments (a permutation of 0-3, torchvision's
        ``fn_idx``) and their factors ``(brightness, contrast, saturation, hue)``."""
        return jitter_factors(self.ranges, rng)


_ADJUSTMENTS = ("brightness", "contrast", "saturation", "hue")
NO_CHANGE_FACTORS = (1.0, 1.0, 1.0, 0.0)
"""Brightness, contrast, saturation and hue that change nothing."""


@dataclass(frozen=True)
class ColorAdjustment:
    """The colour changes drawn for one sample: the factors of :class:`ColorJitter`, the order in
    which they apply, and whether the picture then turns gray. The default changes nothing.

    Attributes:
        brightness, contrast, saturation: Factors (1: no change).
        hue: Fraction of a full turn of the hue, in [-0.5, 0.5] (0: no change).
        order: The four adjustments in the order applied (0 brightness, 1 contrast, 2 saturation,
            3 hue).
        grayscale: The picture becomes ``gray(x)`` in all three channels after the adjustments.
    """

    brightness: float = 1.0
    contrast: float = 1.0
    saturation: float = 1.0
    hue: float = 0.0
    order: tuple[int, ...] = (0, 1, 2, 3)
    grayscale: bool = False

    @property
    def factors(self) -> tuple[float, float, float, float]:
        return (self.brightness, self.contrast, self.saturation, self.hue)

    @property
    def operations(self) -> tuple[str, ...]:
        """The changes in the order they apply, leaving out those that change nothing
        (``"brightness"``, ``"contrast"``, ``"saturation"``, ``"hue"``, then ``"grayscale"``)."""
        factors = self.factors
        changes = tuple(_ADJUSTMENTS[k] for k in self.order if factors[k] != NO_CHANGE_FACTORS[k])
        return changes + (("grayscale",) if self.grayscale else ())

    @property
    def needs_mean(self) -> bool:
        """Whether a contrast change needs the frame's mean grayscale."""
        return "contrast" in self.operations


NO_COLOR_CHANGE = ColorAdjustment()
"""The colour adjustment that changes nothing."""


@dataclass(frozen=True, eq=False)
class Augmentations:
    """What was drawn for each sample of a result or batch: one row per sample (a clip, or one
    spatial view of a clip), ``[N, T, ...]`` instead of ``[N, ...]`` with per-frame draws.

    Attributes:
        crop_boxes: float64 ``[N, 4]``, ``(x, y, width, height)``: the part of the input picture
            (the frame as displayed, after the sampler's downscale and before any resize, in its
            pixels) that the output shows, before the flip.
        scales: float64 ``[N, 2]``: output pixels per input pixel, along x and y.
        flipped: bool ``[N]``: mirrored left-right.
        color_factors: float64 ``[N, 4]``: brightness, contrast, saturation and hue factors
            (``1, 1, 1, 0`` where unchanged).
        color_orders: int8 ``[N, 4]``: the order in which the four applied (0 brightness,
            1 contrast, 2 saturation, 3 hue).
        grayscale: bool ``[N]``: turned gray after the colour adjustments.
    """

    crop_boxes: np.ndarray
    scales: np.ndarray
    flipped: np.ndarray
    color_factors: np.ndarray
    color_orders: np.ndarray
    grayscale: np.ndarray

    @classmethod
    def from_draws(cls, draws: Sequence[Any], *, per_frame: bool = False, frames: int = 1) -> Augmentations:
        """The record of ``draws`` (one per sample); ``per_frame``: one row per frame of each
        sample (``frames`` frames, the row length when there is no sample)."""
        length = len(draws[0].frames or ()) if per_frame and draws else frames
        pairs = [pair for draw in draws
                 for pair in ((draw.frames or ()) if per_frame else ((draw.geometry, draw.color),))]
        lead: tuple[int, ...] = (len(draws), length) if per_frame else (len(draws),)

        def column(values, dtype, *width: int) -> np.ndarray:
            return np.asarray(values, dtype).reshape(lead + width)

        return cls(
            crop_boxes=column([g.crop_box for g, _ in pairs], np.float64, 4),
            scales=column([g.scale for g, _ in pairs], np.float64, 2),
            flipped=column([g.flip for g, _ in pairs], bool),
            color_factors=column([c.factors for _, c in pairs], np.float64, 4),
            color_orders=column([c.order for _, c in pairs], np.int8, 4),
            grayscale=column([c.grayscale for _, c in pairs], bool),
        )

    def __len__(self) -> int:
        return int(self.flipped.shape[0])

    def __repr__(self) -> str:
        return f"Augmentations(samples={len(self)}, crop_boxes={list(self.crop_boxes.shape)})"


@dataclass(frozen=True)
class FrameGeometry:
    """Where each output pixel comes from, for one clip (or one frame, with per-frame draws).

    The source frame (``source_width`` x ``source_height``, as stored) is turned by ``orientation``
    and resampled to ``resized_width`` x ``resized_height`` (sizes after the turn); the window at
    (``crop_x``, ``crop_y``) of ``crop_width`` x ``crop_height`` pixels of that picture becomes the
    ``output_width`` x ``output_height`` output, mirrored left-right when ``flip``. The window is
    the output's size for a plain crop; a random resized or multi-scale crop resamples it to the
    output (``crop_before_resize``: it is cut before it is resampled, so no pixel outside it is
    read, as in torchvision's crop-then-resize; otherwise the whole picture is resized and the
    window cut from it). All of it happens in one pass from the source.

    ``input_width`` x ``input_height`` is the picture the transform starts from: the frame as
    displayed, after the sampler's downscale and ``square_pixels``, before ``resize`` (default: the
    displayed source size). ``crop_width``, ``crop_height`` default to the output size.
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
    crop_width: int = 0
    crop_height: int = 0
    input_width: int = 0
    input_height: int = 0
    crop_before_resize: bool = False

    def __post_init__(self):
        if not self.crop_width or not self.crop_height:
            object.__setattr__(self, "crop_width", self.crop_width or self.output_width)
            object.__setattr__(self, "crop_height", self.crop_height or self.output_height)
        if not self.input_width or not self.input_height:
            width, height = self.orientation.displayed_size(self.source_width, self.source_height)
            object.__setattr__(self, "input_width", self.input_width or width)
            object.__setattr__(self, "input_height", self.input_height or height)

    @property
    def stored_resized_size(self) -> tuple[int, int]:
        """``(width, height)`` of the resized picture before the turn (in the stored orientation)."""
        return self.orientation.displayed_size(self.resized_width, self.resized_height)

    @property
    def native_scale(self) -> bool:
        """The picture is not resampled: the resized size is the source's and the window the output's."""
        return (self.stored_resized_size == (self.source_width, self.source_height)
                and (self.crop_width, self.crop_height) == (self.output_width, self.output_height))

    @property
    def crop_box(self) -> tuple[float, float, float, float]:
        """``(x, y, width, height)`` of the part of the input picture that the output shows (before the flip)."""
        scale_x, scale_y = self.input_width / self.resized_width, self.input_height / self.resized_height
        return (self.crop_x * scale_x, self.crop_y * scale_y, self.crop_width * scale_x, self.crop_height * scale_y)

    @property
    def scale(self) -> tuple[float, float]:
        """Output pixels per input pixel, along x and y."""
        _, _, width, height = self.crop_box
        return self.output_width / width, self.output_height / height


@dataclass(frozen=True)
class SampleDraw:
    """What was drawn for one sample (a clip, or one spatial view of it).

    Attributes:
        geometry, color: The sample's geometry and colour changes (with per-frame draws: its first frame's).
        frames: With per-frame draws, ``(geometry, color)`` of each frame of the clip; None when
            every frame shares the sample's.
    """

    geometry: FrameGeometry
    color: ColorAdjustment = ColorAdjustment()
    frames: tuple[tuple[FrameGeometry, ColorAdjustment], ...] | None = None

    def at(self, position: int) -> tuple[FrameGeometry, ColorAdjustment]:
        """The geometry and colour changes of frame ``position`` of the clip."""
        if self.frames is None:
            return self.geometry, self.color
        return self.frames[position]
