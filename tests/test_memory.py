import pytest

import vclip
from vclip.memory import BYTES_PER_ELEMENT


def test_formula_reference_figure():
    estimate = vclip.estimate_memory(width=1920, height=1080, batch_size=32, sequence_length=16)
    assert estimate.bytes == 1920 * 1080 * 3 * 1 * 32 * 16 == 3_185_049_600
    assert estimate.gb == pytest.approx(3.1850496)
    assert estimate.gib == pytest.approx(2.966, abs=1e-3)
    assert str(estimate) == "3,185,049,600 bytes (3.19 GB, 2.97 GiB)"


@pytest.mark.parametrize("dtype", ["uint8", "float16", "float32"])
@pytest.mark.parametrize("augmentation_factor", [0, 0.5, 1, 0.1])
def test_formula_terms(dtype, augmentation_factor):
    estimate = vclip.estimate_memory(
        width=224, height=224, channels=3, dtype=dtype, batch_size=8, sequence_length=16,
        augmentation_factor=augmentation_factor,
    )
    expected = 224 * 224 * 3 * BYTES_PER_ELEMENT[dtype] * 8 * 16 * (1 + augmentation_factor)
    assert estimate.bytes == pytest.approx(expected, abs=1)


def test_largest_batch_and_sequence_fit_exactly():
    options = dict(width=1920, height=1080, sequence_length=16)
    assert vclip.largest_batch_size(3_185_049_600, **options) == 32
    assert vclip.largest_batch_size(3_185_049_599, **options) == 31
    assert vclip.largest_batch_size("8GiB", **options) == 8 * 2**30 // (1920 * 1080 * 3 * 16)
    assert vclip.largest_batch_size(100, **options) == 0
    assert vclip.largest_sequence_length(3_185_049_600, width=1920, height=1080, batch_size=32) == 16
    assert vclip.largest_batch_size("1GB", width=224, height=224, sequence_length=16, dtype="float32",
                                    augmentation_factor=1) == 10**9 // (224 * 224 * 3 * 4 * 16 * 2)


@pytest.mark.parametrize(
    "text, expected",
    [("8GiB", 8 * 2**30), ("1.5 GB", 1_500_000_000), ("512MiB", 512 * 2**20), ("1000", 1000), (4096, 4096), ("2kb", 2000)],
)
def test_parse_bytes(text, expected):
    assert vclip.parse_bytes(text) == expected


@pytest.mark.parametrize("bad", ["8 GiBs", "lots", "-1GB", "", True])
def test_parse_bytes_refuses(bad):
    with pytest.raises(ValueError, match="memory size"):
        vclip.parse_bytes(bad)


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(width=0), r"width \(0\) must be an integer >= 1"),
        (dict(batch_size=-2), r"batch_size \(-2\) must be an integer >= 1"),
        (dict(dtype="int4"), r"dtype \('int4'\) must be one of"),
        (dict(augmentation_factor=-0.5), r"augmentation_factor \(-0.5\) must be a number >= 0"),
    ],
)
def test_estimate_refuses_bad_inputs(options, message):
    inputs = dict(width=64, height=64, batch_size=1, sequence_length=1) | options
    with pytest.raises(ValueError, match=message):
        vclip.estimate_memory(**inputs)
