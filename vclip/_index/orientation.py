"""How a stored picture becomes the displayed one (the stream's display matrix: a turn by a multiple
of 90 degrees and a mirror). Read by the demux pass, kept in the index, applied by the transforms
and the kernel; public as :class:`vclip.transforms.Orientation`."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Orientation", "UPRIGHT"]


@dataclass(frozen=True)
class Orientation:
    """How a stored picture becomes the displayed one: a turn by a multiple of 90 degrees and/or a mirror.

    Read as a map from displayed to stored pixels: the displayed pixel (x, y) shows the stored pixel
    (sx, sy) with ``(u, v) = (y, x)`` when ``transpose``, else ``(x, y)``; ``sx = W - 1 - u`` when
    ``mirror_x``, else ``u``; ``sy = H - 1 - v`` when ``mirror_y``, else ``v`` (stored size W x H).
    """

    transpose: bool = False
    mirror_x: bool = False
    mirror_y: bool = False

    @classmethod
    def from_display_matrix(cls, matrix) -> Orientation:
        """The orientation of an FFmpeg display matrix (9 values, ``AV_PKT_DATA_DISPLAYMATRIX``).

        The matrix maps stored to displayed coordinates, ``x' = a*x + c*y``, ``y' = b*x + d*y`` with
        ``a, b, c, d = matrix[0], matrix[1], matrix[3], matrix[4]``; angles between right angles
        are rounded to the nearest one.
        """
        a, b, c, d = (float(matrix[k]) for k in (0, 1, 3, 4))
        if abs(a) + abs(d) >= abs(b) + abs(c):
            return cls(False, a < 0, d < 0)
        return cls(True, b < 0, c < 0)

    @classmethod
    def from_rotation(cls, degrees: int, hflip: bool = False) -> Orientation:
        """Turn counter-clockwise by ``degrees`` (a multiple of 90), then mirror left-right if ``hflip``
        (FFmpeg's and PyAV's convention: ``VideoFrame.rotation``, ``set_display_rotation``)."""
        turns = (int(degrees) // 90) % 4
        cos, sin = ((1, 0), (0, 1), (-1, 0), (0, -1))[turns]
        a, b, c, d = cos, -sin, sin, cos  # av_display_rotation_set(-degrees)
        if hflip:
            a, c = -a, -c
        return cls.from_display_matrix((a, b, 0, c, d, 0, 0, 0, 1))

    def _matrix(self) -> tuple[int, int, int, int]:
        """``a, b, c, d`` of the display matrix (unit entries)."""
        sign_x, sign_y = (-1 if self.mirror_x else 1), (-1 if self.mirror_y else 1)
        return (0, sign_x, sign_y, 0) if self.transpose else (sign_x, 0, 0, sign_y)

    @property
    def hflip(self) -> bool:
        """Whether the orientation mirrors the picture (after turning it by :attr:`rotation`)."""
        a, b, c, d = self._matrix()
        return a * d - b * c < 0

    @property
    def rotation(self) -> int:
        """Counter-clockwise turn in degrees (0, 90, 180 or 270), before the mirror of :attr:`hflip`."""
        a, b, c, _ = self._matrix()
        if self.hflip:
            a, c = -a, -c
        return round(-math.degrees(math.atan2(b, a))) % 360

    def displayed_size(self, width: int, height: int) -> tuple[int, int]:
        """``(width, height)`` of the displayed picture for a stored ``width`` x ``height`` one."""
        return (height, width) if self.transpose else (width, height)

    def apply(self, picture: np.ndarray) -> np.ndarray:
        """The displayed view of a stored ``[H, W, ...]`` picture (a NumPy view, no copy)."""
        if self.mirror_x:
            picture = picture[:, ::-1]
        if self.mirror_y:
            picture = picture[::-1]
        return picture.swapaxes(0, 1) if self.transpose else picture


UPRIGHT = Orientation()
"""The picture as stored: no turn, no mirror."""
