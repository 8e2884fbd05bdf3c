"""Pictures a person looks at, with no dependency beyond NumPy and PyAV: PNG and JPEG files,
quick-look MP4s, contact sheets, labels in a tiny bitmap font, and bar charts.

Every image here is RGB uint8 ``[height, width, 3]`` on the host.
"""

from __future__ import annotations

import os
from fractions import Fraction
from typing import Iterable, Sequence

import av
import numpy as np

__all__ = [
    "IMAGE_FORMATS",
    "to_numpy",
    "encode_image",
    "write_image",
    "write_video",
    "resize_image",
    "draw_text",
    "text_width",
    "contact_sheet",
    "bar_chart",
]

IMAGE_FORMATS = ("png", "jpg")
_JPEG_QUANTIZER = 3  # FFmpeg's -q:v for MJPEG: 2 (best) to 31 (worst)
_BACKGROUND = (24, 24, 24)
_INK = (235, 235, 235)

# 3x5 bitmap glyphs, rows top to bottom; text is drawn upper-case.
_GLYPHS = {
    "0": "111101101101111", "1": "010110010010111", "2": "111001111100111", "3": "111001111001111",
    "4": "101101111001001", "5": "111100111001111", "6": "111100111101111", "7": "111001001010010",
    "8": "111101111101111", "9": "111101111001111", "A": "010101111101101", "B": "110101110101110",
    "C": "011100100100011", "D": "110101101101110", "E": "111100110100111", "F": "111100110100100",
    "G": "011100101101011", "H": "101101111101101", "I": "111010010010111", "J": "001001001101010",
    "K": "101101110101101", "L": "100100100100111", "M": "101111111101101", "N": "110101101101101",
    "O": "010101101101010", "P": "110101110100100", "Q": "010101101110011", "R": "110101110101101",
    "S": "011100010001110", "T": "111010010010010", "U": "101101101101111", "V": "101101101101010",
    "W": "101101111111101", "X": "101101010101101", "Y": "101101010010010", "Z": "111001010100111",
    " ": "000000000000000", ".": "000000000000010", ",": "000000000010100", "-": "000000111000000",
    ":": "000010000010000", "/": "001001010100100", "(": "001010010010001", ")": "100010010010100",
    "=": "000111000111000", "_": "000000000000111", "#": "101111101111101", "%": "101001010100101",
    "+": "000010111010000", "?": "111001011000010",
}


def to_numpy(array) -> np.ndarray:
    """A NumPy array of ``array`` (NumPy, or CuPy copied from the GPU)."""
    return array if isinstance(array, np.ndarray) else array.get()


def _rgb_frame(image: np.ndarray) -> av.VideoFrame:
    image = np.asarray(image)
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"image must be RGB uint8 [height, width, 3], not {image.dtype} {list(image.shape)}")
    return av.VideoFrame.from_ndarray(np.ascontiguousarray(image), format="rgb24")


def encode_image(image: np.ndarray, image_format: str = "png") -> bytes:
    """The bytes of a PNG (lossless) or JPEG file of an RGB uint8 image.

    Raises:
        ValueError: ``image_format`` is not ``"png"`` or ``"jpg"``; the image is not RGB uint8.
    """
    if image_format not in IMAGE_FORMATS:
        raise ValueError(f"image format ({image_format!r}) must be one of {', '.join(map(repr, IMAGE_FORMATS))}")
    frame = _rgb_frame(image)
    codec, pixel_format = ("png", "rgb24") if image_format == "png" else ("mjpeg", "yuvj420p")
    context = av.CodecContext.create(codec, "w")
    context.width, context.height, context.pix_fmt = frame.width, frame.height, pixel_format
    context.time_base = Fraction(1, 1)
    if codec == "mjpeg":
        context.qmin = context.qmax = _JPEG_QUANTIZER
        frame = frame.reformat(format=pixel_format)
    return b"".join(bytes(packet) for packet in context.encode(frame) + context.encode(None))


def write_image(path: str | os.PathLike, image: np.ndarray) -> str:
    """Write ``image`` as PNG or JPEG, chosen by the file's extension (.png, .jpg, .jpeg)."""
    path = os.fspath(path)
    extension = os.path.splitext(path)[1].lower().lstrip(".")
    image_format = "jpg" if extension == "jpeg" else extension
    data = encode_image(image, image_format)
    with open(path, "wb") as file:
        file.write(data)
    return path


def write_video(path: str | os.PathLike, frames: Iterable[np.ndarray], *, fps: float = 30.0, crf: int = 18) -> str:
    """Encode RGB uint8 frames to H.264 (libx264, yuv420p) for a quick look.

    Odd widths or heights are padded by one repeated edge pixel, as yuv420p needs even sizes.
    """
    path = os.fspath(path)
    rate = Fraction(fps).limit_denominator(1001) if fps > 0 else Fraction(30)
    with av.open(path, "w") as container:
        stream = None
        for image in frames:
            image = np.asarray(image)
            height, width = image.shape[:2]
            image = np.pad(image, ((0, height % 2), (0, width % 2), (0, 0)), mode="edge")
            if stream is None:
                stream = container.add_stream("libx264", rate=rate, options={"crf": str(crf), "preset": "veryfast"})
                stream.width, stream.height, stream.pix_fmt = image.shape[1], image.shape[0], "yuv420p"
            container.mux(stream.encode(_rgb_frame(image)))
        if stream is None:
            raise ValueError(f"{path}: no frames to write")
        container.mux(stream.encode(None))
    return path


def resize_image(image: np.ndarray, width: int, height: int) -> np.ndarray:
    """``image`` at ``width`` x ``height`` (area average when shrinking, FFmpeg's swscale)."""
    if image.shape[1] == width and image.shape[0] == height:
        return image
    return _rgb_frame(image).reformat(width=width, height=height, interpolation="AREA").to_ndarray(format="rgb24")


def text_width(text: str, scale: int = 2) -> int:
    """Pixels ``text`` takes across in :func:`draw_text`."""
    return max(len(text) * 4 * scale - scale, 0)


def draw_text(image: np.ndarray, text: str, x: int, y: int, *, scale: int = 2,
              color: Sequence[int] = _INK) -> None:
    """Draw ``text`` (upper-cased) into ``image`` in place; its top left corner at (x, y), 5*scale tall."""
    for number, character in enumerate(text.upper()):
        bits = _GLYPHS.get(character, _GLYPHS["?"])
        glyph = np.array([bit == "1" for bit in bits], dtype=bool).reshape(5, 3)
        glyph = glyph.repeat(scale, axis=0).repeat(scale, axis=1)
        left = x + number * 4 * scale
        window = image[y:y + glyph.shape[0], left:left + glyph.shape[1]]
        window[glyph[: window.shape[0], : window.shape[1]]] = color


def contact_sheet(
    rows: Sequence[Sequence[np.ndarray]],
    *,
    row_labels: Sequence[str] | None = None,
    tile_labels: Sequence[Sequence[str]] | None = None,
    tile_height: int = 96,
    gap: int = 4,
    scale: int = 2,
) -> np.ndarray:
    """Tile images into one picture: one line per row, every tile ``tile_height`` tall (aspect kept).

    Args:
        rows: Rows of RGB uint8 images (any sizes).
        row_labels: One caption per row, drawn at its left.
        tile_labels: One caption per tile, drawn under it.
        tile_height: Height of every tile in pixels.
        gap: Pixels between tiles and around the sheet.
        scale: Pixel size of the caption font.
    """
    text_height = 5 * scale
    label_column = max((text_width(label, scale) for label in row_labels), default=0) + gap if row_labels else 0
    caption_height = text_height + gap if tile_labels else 0
    tiles = [
        [resize_image(image, max(1, round(image.shape[1] * tile_height / image.shape[0])), tile_height)
         for image in row]
        for row in rows
    ]
    row_widths = [sum(tile.shape[1] + gap for tile in row) for row in tiles]
    width = gap + label_column + max(row_widths, default=0)
    row_height = tile_height + caption_height + gap
    sheet = np.empty((gap + row_height * len(tiles), width, 3), dtype=np.uint8)
    sheet[...] = _BACKGROUND
    for row_number, row in enumerate(tiles):
        top = gap + row_number * row_height
        if row_labels:
            draw_text(sheet, row_labels[row_number], gap, top + (tile_height - text_height) // 2, scale=scale)
        left = gap + label_column
        for tile_number, tile in enumerate(row):
            sheet[top:top + tile_height, left:left + tile.shape[1]] = tile
            if tile_labels:
                draw_text(sheet, tile_labels[row_number][tile_number], left, top + tile_height + gap // 2, scale=scale)
            left += tile.shape[1] + gap
    return sheet


def _round_step(span: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten at or above ``span`` (axis tick spacing)."""
    power = 10.0 ** np.floor(np.log10(span)) if span > 0 else 1.0
    return next(step * power for step in (1.0, 2.0, 5.0, 10.0) if step * power >= span)


def bar_chart(
    values: Sequence[float],
    bar_labels: Sequence[str],
    *,
    title: str,
    value_unit: float = 1.0,
    value_unit_name: str = "",
    limit: float | None = None,
    highlight: int | None = None,
    width: int = 800,
    height: int = 420,
    scale: int = 2,
) -> np.ndarray:
    """A bar chart image: bars at or under ``limit`` green, above it red, a yellow line at ``limit``.

    Args:
        values: Bar heights.
        bar_labels: A caption under each bar (drawn where there is room).
        title: Drawn across the top.
        value_unit, value_unit_name: Axis ticks show ``value / value_unit`` followed by the name.
        limit: A horizontal line (the budget); None for none.
        highlight: Index of a bar to draw in blue (the current choice).
    """
    text_height = 5 * scale
    top, bottom, left, right = 3 * text_height, 3 * text_height, 12 * 4 * scale, 2 * scale * 4
    image = np.empty((height, width, 3), dtype=np.uint8)
    image[...] = _BACKGROUND
    draw_text(image, title, left, text_height, scale=scale)
    plot_height, plot_width = height - top - bottom, width - left - right
    peak = max(max(values, default=0.0), limit or 0.0) * 1.05 or 1.0

    def y_of(value: float) -> int:
        return top + plot_height - round(plot_height * value / peak)

    for tick in np.arange(0.0, peak, _round_step(peak / value_unit / 5) * value_unit):
        y = y_of(tick)
        image[y, left - scale:left + plot_width] = (70, 70, 70)
        label = f"{tick / value_unit:.3g}{value_unit_name}"
        draw_text(image, label, left - 2 * scale - text_width(label, scale), y - text_height // 2, scale=scale)
    slot = plot_width / max(len(values), 1)
    label_every = max(1, int(np.ceil((text_width("0000", scale) + 2 * scale) / slot)))
    for number, value in enumerate(values):
        x0, x1 = left + round(number * slot + slot * 0.15), left + round((number + 1) * slot - slot * 0.15)
        over = limit is not None and value > limit
        color = (70, 130, 230) if number == highlight else ((220, 70, 60) if over else (80, 190, 90))
        image[y_of(value):top + plot_height, x0:max(x1, x0 + 1)] = color
        if number % label_every == 0:
            draw_text(image, bar_labels[number], x0, top + plot_height + scale * 2, scale=scale)
    image[top:top + plot_height + 1, left - 1] = _INK
    image[top + plot_height, left:left + plot_width] = _INK
    if limit is not None:
        line = y_of(limit)
        image[max(line - scale // 2, top):line + (scale + 1) // 2, left:left + plot_width] = (240, 200, 40)
    return image
