"""Pictures for people: PNG/JPEG files and contact sheets through Pillow, the memory chart through
matplotlib (files Pillow opens, lines where the numbers say)."""

import numpy as np
import pytest
from PIL import Image

from vclip._outputs.images import (
    ChartSeries,
    columns_for,
    contact_sheet,
    memory_chart,
    write_image,
)

TAB_BLUE, TAB_ORANGE, TAB_RED = (31, 119, 180), (255, 127, 14), (214, 39, 40)  # matplotlib's first colours


def solid(width, height, colour):
    return np.full((height, width, 3), colour, dtype=np.uint8)


def has_colour(image, colour, tolerance=12):
    return bool((np.abs(image.astype(int) - colour).max(axis=-1) <= tolerance).any())


def test_png_is_lossless_and_jpeg_is_close(tmp_path):
    image = np.random.default_rng(0).integers(0, 256, (48, 64, 3), dtype=np.uint8)
    image[:, :32] = (200, 30, 90)
    assert np.array_equal(np.asarray(Image.open(write_image(tmp_path / "a.png", image))), image)
    jpeg = Image.open(write_image(tmp_path / "a.jpeg", image))
    assert jpeg.format == "JPEG" and jpeg.size == (64, 48)
    assert np.abs(np.asarray(jpeg)[8:40, 4:24].astype(int) - (200, 30, 90)).max() <= 8  # the flat half


def test_write_image_refuses_other_formats_and_non_rgb(tmp_path):
    with pytest.raises(ValueError, match=r"image file \('.*a.gif'\) must end in .png, .jpg or .jpeg"):
        write_image(tmp_path / "a.gif", solid(4, 4, 0))
    with pytest.raises(ValueError, match=r"image must be RGB uint8 \[height, width, 3\], not float32 \[4, 4\]"):
        write_image(tmp_path / "a.png", np.zeros((4, 4), np.float32))


def test_contact_sheet_of_1080p_frames_at_the_default_thumbnail_width():
    """Twelve 1080p frames: five 320x180 thumbnails across, three rows, each tile its own colour."""
    colours = [(20 * i, 255 - 20 * i, 100) for i in range(12)]
    frames = [solid(1920, 1080, colour) for colour in colours]
    columns = columns_for(320, len(frames))
    assert columns == 5 and columns_for(320, 3) == 3 and columns_for(4000, 3) == 1
    rows = [frames[i : i + columns] for i in range(0, len(frames), columns)]
    sheet = contact_sheet(rows, tile_width=320)
    assert sheet.shape == (4 + 3 * (180 + 4), 4 + 5 * (320 + 4), 3)
    for number, colour in enumerate(colours):
        top, left = 4 + (number // 5) * 184, 4 + (number % 5) * 324
        assert (sheet[top : top + 180, left : left + 320] == colour).all()


def test_contact_sheet_row_labels_sit_left_of_the_tiles():
    rows = [[solid(40, 30, (255, 0, 0))], [solid(40, 30, (0, 0, 255))]]
    plain = contact_sheet(rows)
    labelled = contact_sheet(rows, row_labels=["first row", "second"])
    background = plain[0, 0]
    label_column = labelled.shape[1] - plain.shape[1]
    assert label_column > 30 and labelled.shape[0] == plain.shape[0]
    assert np.array_equal(labelled[:, label_column:], plain)  # the tiles moved right, unchanged
    assert (labelled[:, :label_column] != background).any(axis=-1).sum() > 40  # the captions' ink


def test_memory_chart_draws_every_series_and_the_budget(tmp_path):
    batches = [1, 8, 16, 24, 32]
    formula = ChartSeries("formula", [b * 2**28 for b in batches], largest_batch=30)
    loader = ChartSeries("loader", [b * 2**29 + 2**30 for b in batches], largest_batch=13)
    path = memory_chart(
        tmp_path / "chart.png",
        batches,
        [formula, loader],
        title="two series",
        budget=8 * 2**30,
        batch_size=16,
        size=(640, 360),
    )
    image = Image.open(path)
    assert image.format == "PNG" and image.size == (640, 360)
    pixels = np.asarray(image.convert("RGB"))
    assert has_colour(pixels, TAB_BLUE) and has_colour(pixels, TAB_ORANGE)
    red = (np.abs(pixels.astype(int) - TAB_RED).max(axis=-1) <= 12).sum(axis=1)
    assert (red > 640 // 4).sum() in (1, 2)  # the budget: one dashed line across the plot
    assert memory_chart(tmp_path / "chart.svg", batches, [formula], title="svg").endswith(".svg")
    assert (tmp_path / "chart.svg").read_text().lstrip().startswith("<?xml")


def test_memory_chart_refuses_mismatched_series_and_unknown_formats(tmp_path):
    with pytest.raises(ValueError, match=r"series 'formula' has 2 values for 3 batch sizes"):
        memory_chart(tmp_path / "c.png", [1, 2, 3], [ChartSeries("formula", [1, 2])], title="t")
    with pytest.raises(ValueError, match=r"chart file \('.*c.gif'\) must end in .png, .jpg, .jpeg, .svg, .pdf"):
        memory_chart(tmp_path / "c.gif", [1], [ChartSeries("formula", [1])], title="t")
