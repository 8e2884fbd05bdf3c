"""The random draws of the training augmentations, as pure functions of sizes and a generator.

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

import numpy as np

__all__ = ["resized_crop_window", "multi_scale_window", "jitter_factors", "RESIZED_CROP_TRIES"]

RESIZED_CROP_TRIES = 10
"""Windows a random resized crop tries before it falls back to a centre crop (torchvision's count)."""

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
        crop_width, crop_height = width, round(width / min(ratio))
    elif picture_ratio > max(ratio):
        crop_width, crop_height = round(height * max(ratio)), height
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
