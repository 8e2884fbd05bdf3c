"""What turns a decoded frame into a training tensor: resize, crop, flip, normalize, dtype, layout.

One :class:`TransformSpec` describes it; :meth:`TransformSpec.geometry` draws the per-clip random
choices (crop offset, flip) from a seeded generator, so that every frame of a clip gets the same
crop and flip, on CPU and GPU alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = ["TransformSpec", "FrameGeometry", "IMAGENET_MEAN", "IMAGENET_STD", "output_shape"]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

Layout = Literal["THWC", "TCHW", "CTHW"]
OutputDtype = Literal["uint8", "float16", "float32"]
_LAYOUTS = ("THWC", "TCHW", "CTHW")
_DTYPES = ("uint8", "float16", "float32")


def _pair(name: str, value) -> tuple[int, int] | None:
    """``None``, an int, or ``(height, width)`` of positive ints."""
    if value is None:
        return None
    pair = (value, value) if isinstance(value, (int, np.integer)) else tuple(value)
    if len(pair) != 2 or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 1 for v in pair):
        raise ValueError(f"{name} ({value!r}) must be a positive int or a (height, width) pair of positive ints")
    return int(pair[0]), int(pair[1])


@dataclass(frozen=True)
class FrameGeometry:
    """Where each output pixel comes from, for one clip.

    The source frame (``source_width`` x ``source_height``) is resampled to
    ``resized_width`` x ``resized_height``; the output is the window at (``crop_x``, ``crop_y``)
    of ``output_width`` x ``output_height`` pixels, mirrored left-right when ``flip``.
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

    @property
    def is_identity(self) -> bool:
        return (
            self.resized_width == self.source_width == self.output_width
            and self.resized_height == self.source_height == self.output_height
            and not self.flip
        )


@dataclass(frozen=True)
class TransformSpec:
    """Spatial and value transform applied to every frame of a clip, in one pass.

    Args:
        resize: None (keep the size, or the downscaled size), an int (the shorter side becomes
            this, aspect kept), or ``(height, width)``.
        crop: None, an int (square) or ``(height, width)``, taken after the resize.
        crop_mode: ``"center"`` or ``"random"`` (seeded, one offset per clip).
        flip_probability: Chance that a clip is mirrored left-right (seeded, per clip).
        mean, std: Per-channel normalization in [0, 1] units: ``(x - mean) / std``. Float dtypes only.
        dtype: ``"uint8"`` (0-255), ``"float16"`` or ``"float32"`` (0-1 before normalization).
        layout: Axis order of one clip: ``"THWC"``, ``"TCHW"`` or ``"CTHW"``.
        antialias: Area-average when shrinking (otherwise bilinear, which aliases).

    Raises:
        ValueError: Bad sizes, probabilities, normalization with uint8, unknown dtype or layout.
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

    def __post_init__(self):
        if not (self.resize is None or isinstance(self.resize, (int, np.integer))):
            _pair("resize", self.resize)
        elif isinstance(self.resize, (int, np.integer)) and (isinstance(self.resize, bool) or self.resize < 1):
            raise ValueError(f"resize ({self.resize!r}) must be a positive int or a (height, width) pair")
        _pair("crop", self.crop)
        if self.crop_mode not in ("center", "random"):
            raise ValueError(f"crop_mode ({self.crop_mode!r}) must be one of 'center', 'random'")
        if not 0.0 <= float(self.flip_probability) <= 1.0:
            raise ValueError(f"flip_probability ({self.flip_probability}) must be in [0, 1]")
        if self.dtype not in _DTYPES:
            raise ValueError(f"dtype ({self.dtype!r}) must be one of {', '.join(map(repr, _DTYPES))}")
        if self.layout not in _LAYOUTS:
            raise ValueError(f"layout ({self.layout!r}) must be one of {', '.join(map(repr, _LAYOUTS))}")
        if (self.mean is None) != (self.std is None):
            raise ValueError("mean and std must be given together")
        if self.mean is not None:
            if self.dtype == "uint8":
                raise ValueError("normalization (mean/std) needs dtype 'float16' or 'float32', not 'uint8'")
            if len(self.mean) != 3 or len(self.std) != 3:
                raise ValueError(f"mean ({self.mean}) and std ({self.std}) must have 3 values (R, G, B)")
            if any(s <= 0 for s in self.std):
                raise ValueError(f"std ({self.std}) must be > 0")

    @classmethod
    def imagenet(cls, size: int = 224, *, dtype: OutputDtype = "float32", layout: Layout = "TCHW", **options):
        """Resize to ``size`` x ``size`` and normalize with the ImageNet mean and std."""
        return cls(resize=(size, size), mean=IMAGENET_MEAN, std=IMAGENET_STD, dtype=dtype, layout=layout, **options)

    def resized_size(self, width: int, height: int) -> tuple[int, int]:
        """``(width, height)`` after the resize step for a ``width`` x ``height`` frame."""
        if self.resize is None:
            return width, height
        if isinstance(self.resize, (int, np.integer)):
            short = int(self.resize)
            if width <= height:
                return short, max(1, math.floor(height * short / width + 0.5))
            return max(1, math.floor(width * short / height + 0.5)), short
        return self.resize[1], self.resize[0]

    def output_size(self, width: int, height: int) -> tuple[int, int]:
        """``(width, height)`` of the output for a ``width`` x ``height`` frame."""
        crop = _pair("crop", self.crop)
        return (crop[1], crop[0]) if crop else self.resized_size(width, height)

    def geometry(
        self,
        source_width: int,
        source_height: int,
        rng: np.random.Generator | None = None,
        *,
        base_size: tuple[int, int] | None = None,
    ) -> FrameGeometry:
        """Draw one clip's crop offset and flip.

        Args:
            source_width, source_height: Decoded frame size.
            rng: Generator for random crops and flips (needed only when they are random).
            base_size: Size the frame has before ``resize`` (the downscaled size), default: the source.

        Raises:
            ValueError: The crop is larger than the resized frame.
        """
        base_width, base_height = base_size or (source_width, source_height)
        resized_width, resized_height = self.resized_size(base_width, base_height)
        output_width, output_height = self.output_size(base_width, base_height)
        if output_width > resized_width or output_height > resized_height:
            raise ValueError(
                f"crop {output_height}x{output_width} (HxW) is larger than the resized frame "
                f"{resized_height}x{resized_width}"
            )
        needs_rng = self.crop_mode == "random" or 0.0 < self.flip_probability < 1.0
        if needs_rng and rng is None:
            raise ValueError("random crops and flips need a seeded generator (rng)")
        if self.crop_mode == "random":
            crop_x = int(rng.integers(0, resized_width - output_width + 1))
            crop_y = int(rng.integers(0, resized_height - output_height + 1))
        else:
            crop_x = (resized_width - output_width) // 2
            crop_y = (resized_height - output_height) // 2
        flip = self.flip_probability >= 1.0 or (0.0 < self.flip_probability and bool(rng.random() < self.flip_probability))
        return FrameGeometry(
            source_width, source_height, resized_width, resized_height,
            crop_x, crop_y, output_width, output_height, flip,
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
