"""Pictures a person looks at: PNG and JPEG files and captioned contact sheets (Pillow), quick-look
MP4s (PyAV), and the memory chart of ``vclip budget --chart`` (matplotlib, the ``chart`` extra).

Every image here is RGB uint8 ``[height, width, 3]`` on the host. Pillow and matplotlib are
imported where they are used, so importing this module costs neither.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

import av
import numpy as np

from ..errors import ArgumentError
from .files import written_whole

if TYPE_CHECKING:
    from PIL import ImageFont

__all__ = [
    "IMAGE_FORMATS",
    "CHART_FORMATS",
    "ChartSeries",
    "to_numpy",
    "write_image",
    "write_video",
    "contact_sheet",
    "columns_for",
    "memory_chart",
]

IMAGE_FORMATS = ("png", "jpg")
CHART_FORMATS = (".png", ".jpg", ".jpeg", ".svg", ".pdf")
_JPEG_QUALITY = 95  # high enough that the synthetic videos' barcodes survive
_BACKGROUND = (24, 24, 24)
_INK = (235, 235, 235)
_SHEET_WIDTH = 1920  # contact sheets are laid out to about this many pixels across
_CHART_EXTRA_HINT = "pip install 'vclip-nvdec[chart]'"


def to_numpy(array) -> np.ndarray:
    """A NumPy array of ``array`` (NumPy, or CuPy copied from the GPU)."""
    return array if isinstance(array, np.ndarray) else array.get()


def _check_rgb(image) -> np.ndarray:
    image = np.asarray(image)
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        raise ArgumentError(f"image must be RGB uint8 [height, width, 3], not {image.dtype} {list(image.shape)}")
    return np.ascontiguousarray(image)


def write_image(path: str | os.PathLike, image: np.ndarray) -> str:
    """Write ``image`` as PNG (lossless) or JPEG (quality 95), chosen by the extension (.png, .jpg, .jpeg).

    Raises:
        ArgumentError: (a ValueError) Another extension; the image is not RGB uint8.
        OSError: The file could not be written whole (nothing is left at ``path`` then).
    """
    from PIL import Image

    path = os.fspath(path)
    extension = os.path.splitext(path)[1].lower()
    if extension not in (".png", ".jpg", ".jpeg"):
        raise ArgumentError(f"image file ({path!r}) must end in .png, .jpg or .jpeg")
    picture = Image.fromarray(_check_rgb(image))
    encoded = io.BytesIO()
    if extension == ".png":
        picture.save(encoded, format="PNG")
    else:
        picture.save(encoded, format="JPEG", quality=_JPEG_QUALITY)
    # Written by Python, not by Pillow: Pillow's encoder takes a short write (the disk full, the file
    # size limit reached) for a whole one and leaves a cut-off image; Python's raises.
    with written_whole(path) as temporary, open(temporary, "wb") as file:
        file.write(encoded.getbuffer())
    return path


def write_video(path: str | os.PathLike, frames: Iterable[np.ndarray], *, fps: float = 30.0, crf: int = 18) -> str:
    """Encode RGB uint8 frames to H.264 (libx264, yuv420p) for a quick look.

    Odd widths or heights are padded by one repeated edge pixel, as yuv420p needs even sizes.
    """
    path = os.fspath(path)
    rate = Fraction(fps).limit_denominator(1001) if fps > 0 else Fraction(30)
    with written_whole(path) as temporary, av.open(temporary, "w") as container:
        stream = None
        for image in frames:
            image = _check_rgb(image)
            height, width = image.shape[:2]
            image = np.pad(image, ((0, height % 2), (0, width % 2), (0, 0)), mode="edge")
            if stream is None:
                stream = container.add_stream("libx264", rate=rate, options={"crf": str(crf), "preset": "veryfast"})
                stream.width, stream.height, stream.pix_fmt = image.shape[1], image.shape[0], "yuv420p"
            container.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
        if stream is None:
            raise ArgumentError(f"{path}: no frames to write")
        container.mux(stream.encode(None))
    return path


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    """Pillow's bundled font at ``size`` pixels (its fixed bitmap font where FreeType is missing)."""
    from PIL import ImageFont

    return ImageFont.load_default(size=size)


def columns_for(tile_width: int, count: int, *, gap: int = 4) -> int:
    """How many tiles of ``tile_width`` fit a sheet about 1920 pixels across (1 to ``count``)."""
    return max(1, min(count, (_SHEET_WIDTH - gap) // (tile_width + gap)))


def contact_sheet(
    rows: Sequence[Sequence[np.ndarray]],
    *,
    tile_width: int | None = None,
    tile_height: int | None = None,
    row_labels: Sequence[str] | None = None,
    tile_labels: Sequence[Sequence[str]] | None = None,
    gap: int = 4,
    font_size: int = 14,
) -> np.ndarray:
    """Tile images into one picture, one line per row, with captions drawn by Pillow.

    Each tile is resized (area average) to ``tile_width`` or ``tile_height`` pixels, the other
    side following its aspect ratio; never enlarged past its own size. With neither, tiles keep
    their size. Tiles of a row are top-aligned; a row is as tall as its tallest tile.

    Args:
        rows: Rows of RGB uint8 images (any sizes).
        tile_width: Width of every tile in pixels.
        tile_height: Height of every tile in pixels (when ``tile_width`` is None).
        row_labels: One caption per row, drawn at its left.
        tile_labels: One caption per tile, drawn under it.
        gap: Pixels between tiles and around the sheet.
        font_size: Caption height in pixels.

    Returns:
        The sheet, RGB uint8 ``[height, width, 3]``.
    """
    from PIL import Image, ImageDraw

    font = _font(font_size)
    measure = ImageDraw.Draw(Image.new("RGB", (1, 1)))

    def text_width(text: str) -> int:
        return math.ceil(measure.textlength(text, font=font))

    tiles = [[_thumbnail(Image.fromarray(_check_rgb(image)), tile_width, tile_height) for image in row]
             for row in rows]
    label_column = max(map(text_width, row_labels), default=0) + 3 * gap if row_labels else 0
    caption_height = font_size + gap if tile_labels else 0
    row_heights = [max((tile.height for tile in row), default=0) + caption_height + gap for row in tiles]
    width = gap + label_column + max((sum(tile.width + gap for tile in row) for row in tiles), default=0)
    sheet = Image.new("RGB", (width, gap + sum(row_heights)), _BACKGROUND)
    draw = ImageDraw.Draw(sheet)
    top = gap
    for row_number, (row, row_height) in enumerate(zip(tiles, row_heights)):
        if row_labels:
            draw.text((gap, top + (row_height - gap - caption_height) // 2), row_labels[row_number], fill=_INK,
                      font=font, anchor="lm")
        left = gap + label_column
        for tile_number, tile in enumerate(row):
            sheet.paste(tile, (left, top))
            if tile_labels:
                draw.text((left, top + tile.height + gap // 2), tile_labels[row_number][tile_number], fill=_INK,
                          font=font)
            left += tile.width + gap
        top += row_height
    return np.asarray(sheet)


def _thumbnail(image, width: int | None, height: int | None):
    """``image`` (a Pillow image) at ``width`` or else ``height`` pixels, aspect kept, never enlarged."""
    from PIL import Image

    if width is not None and width < image.width:
        size = (width, max(1, round(image.height * width / image.width)))
    elif width is None and height is not None and height < image.height:
        size = (max(1, round(image.width * height / image.height)), height)
    else:
        return image
    return image.resize(size, Image.Resampling.BOX)


@dataclass(frozen=True)
class ChartSeries:
    """One line of :func:`memory_chart`.

    Attributes:
        label: The legend entry (e.g. ``"formula"``, ``"loader (prefetch 2, 8 decoders)"``).
        bytes: Memory at each batch size of the chart.
        largest_batch: The largest batch size that fits the budget, marked on the line (None: no mark).
    """

    label: str
    bytes: Sequence[float]
    largest_batch: int | None = None


def memory_chart(
    path: str | os.PathLike,
    batch_sizes: Sequence[int],
    series: Sequence[ChartSeries],
    *,
    title: str,
    budget: int | None = None,
    batch_size: int | None = None,
    size: tuple[int, int] = (800, 420),
) -> str:
    """Draw memory (GiB) against batch size, one line per series, and write it to ``path``.

    The budget is a horizontal line; ``batch_size`` (the configuration asked about) a vertical
    one; each series' ``largest_batch`` a labelled point on its line.

    Args:
        path: Output file; its extension picks the format (.png, .jpg, .jpeg, .svg, .pdf).
        batch_sizes: The x values, ascending.
        series: The lines; each has one value per batch size.
        title: Drawn above the plot.
        budget: Bytes available, or None for no budget line.
        batch_size: The batch size asked about, or None.
        size: ``(width, height)`` of a PNG or JPEG in pixels.

    Raises:
        ImportError: matplotlib is not installed (the message names the ``chart`` extra).
        ArgumentError: (a ValueError) Unknown extension; a series without one value per batch size.
    """
    path = os.fspath(path)
    if os.path.splitext(path)[1].lower() not in CHART_FORMATS:
        raise ArgumentError(f"chart file ({path!r}) must end in {', '.join(CHART_FORMATS)}")
    for line in series:
        if len(line.bytes) != len(batch_sizes):
            raise ArgumentError(f"series {line.label!r} has {len(line.bytes)} values for {len(batch_sizes)} "
                                "batch sizes")
    try:
        from matplotlib.figure import Figure
    except ImportError as error:
        raise ImportError(f"the memory chart needs matplotlib, which is not installed: {_CHART_EXTRA_HINT}") from error

    dpi = 100
    figure = Figure(figsize=(size[0] / dpi, size[1] / dpi), dpi=dpi, layout="constrained")
    axes = figure.subplots()
    gib = float(2**30)
    for line in series:
        values = np.asarray(line.bytes, dtype=np.float64) / gib
        (drawn,) = axes.plot(batch_sizes, values, label=line.label)
        if line.largest_batch is not None and line.largest_batch > 0:
            y = float(np.interp(line.largest_batch, batch_sizes, values))
            axes.plot([line.largest_batch], [y], "o", color=drawn.get_color(), markersize=8)
            axes.annotate(f"largest batch {line.largest_batch}", (line.largest_batch, y), xytext=(6, -14),
                          textcoords="offset points", color=drawn.get_color())
    if budget is not None:
        axes.axhline(budget / gib, color="tab:red", linestyle="--", label=f"budget {budget / gib:.3g} GiB")
    if batch_size is not None:
        axes.axvline(batch_size, color="0.4", linestyle=":", label=f"batch size {batch_size}")
    axes.set_title(title)
    axes.set_xlabel("batch size (clips)")
    axes.set_ylabel("memory (GiB)")
    axes.set_xlim(0, max(batch_sizes) * 1.02)
    axes.set_ylim(bottom=0)
    axes.grid(True, alpha=0.3)
    axes.legend(loc="upper left")
    figure.savefig(path)
    return path
