"""The CPU path end to end: exact frames (barcodes), FFmpeg-identical pixels, every sampling mode."""

import numpy as np
import pytest
from helpers import barcodes, ffmpeg_rgb24, require_extra
from kernel_cases import random_planes

import vclip
from vclip._engine import cpu, host_fast, reference
from vclip.sampling import scaled_size
from vclip.transforms import Orientation, RandomResizedCrop, TransformSpec

SYNTHETIC = ["h264", "hevc", "vfr", "odd", "offset", "long_gop", "h264_10bit"]


@pytest.mark.parametrize("name", SYNTHETIC)
def test_every_frame_is_ffmpeg_rgb24_bit_for_bit(videos, name):
    decoder = vclip.VideoDecoder(videos[name], device="cpu")
    frames = decoder.get_frames(list(range(len(decoder))))
    reference = ffmpeg_rgb24(videos[name])
    assert frames.data.shape == (len(reference),) + reference[0].shape
    assert all(np.array_equal(a, b) for a, b in zip(frames.data, reference))
    assert barcodes(frames.data) == list(range(len(decoder)))


@pytest.mark.parametrize("name", SYNTHETIC)
def test_indexed_frames_in_order_with_duplicates(videos, name):
    decoder = vclip.VideoDecoder(videos[name], device="cpu")
    n = len(decoder)
    wanted = [n - 1, 3, 3, 0, n // 2, -2]
    frames = decoder.get_frames(wanted)
    expected = [n - 1, 3, 3, 0, n // 2, n - 2]
    assert barcodes(frames.data) == expected
    assert frames.frame_indices.tolist() == expected
    assert np.allclose(frames.pts_seconds, decoder.index.pts_seconds[expected])


@pytest.mark.parametrize("name", SYNTHETIC)
@pytest.mark.parametrize(
    "sampler",
    [
        vclip.contiguous(6, clips_per_video=2, seed=1),
        vclip.strided(5, 3, starts="even", clips_per_video=3),
        vclip.jittered(5, 3, 1, clips_per_video=2, seed=4),
        vclip.keyframe(),
        vclip.indexed([4, 1, 1, 9]),
        vclip.downscaled(vclip.strided(4, 2, seed=9), 0.5),
        vclip.downscaled(vclip.keyframe(2), 0.75),
    ],
    ids=["contiguous", "strided", "jittered", "keyframe", "indexed", "downscaled-strided", "downscaled-keyframe"],
)
def test_every_mode_yields_exactly_the_sampled_frames(videos, name, sampler):
    decoder = vclip.VideoDecoder(videos[name], device="cpu")
    clips = decoder.get_clips(sampler, seed=2)
    expected = sampler.sample(decoder.index, seed=2)
    assert clips.frame_indices.tolist() == [c.tolist() for c in expected]
    width, height = sampler.output_size(decoder.index.width, decoder.index.height)
    assert clips.data.shape == (len(expected), expected[0].size, height, width, 3)
    for clip, wanted in zip(clips.data, expected):
        assert barcodes(clip) == wanted.tolist()


def test_each_gop_is_decoded_once(videos):
    decoder = vclip.VideoDecoder(videos["long_gop"], skip_non_reference=False, device="cpu")
    decoder.get_frames([260, 10, 270, 20, 265])
    plan = vclip.plan_decode(decoder.index, [[260, 10, 270, 20, 265]], skip_non_reference=False)
    assert (
        decoder.stats.packets_sent
        == plan.packets_sent
        == (decoder.index.frame_packet[20] + 1)
        + (decoder.index.frame_packet[270] - decoder.index.frame_packet[250] + 1)
    )
    assert decoder.stats.segments == 2


def test_skipping_non_reference_pictures_keeps_frames_exact(videos):
    lean = vclip.VideoDecoder(videos["long_gop"], device="cpu")
    full = vclip.VideoDecoder(videos["long_gop"], skip_non_reference=False, device="cpu")
    wanted = list(range(100, 160, 2))
    a, b = lean.get_frames(wanted), full.get_frames(wanted)
    assert np.array_equal(a.data, b.data)
    assert barcodes(a.data) == wanted
    assert lean.stats.packets_sent < full.stats.packets_sent


def test_frames_by_time(videos):
    decoder = vclip.VideoDecoder(videos["vfr"], device="cpu")
    times = decoder.index.pts_seconds[[0, 5, 17]] + 0.001
    frames = decoder.get_frames_played_at(times)
    assert barcodes(frames.data) == [0, 5, 17]
    offset = vclip.VideoDecoder(videos["offset"], device="cpu")
    assert barcodes(offset.get_frames_played_at(1.5 + 0.04 * 7).data) == [7]
    with pytest.raises(ValueError, match="outside the stream"):
        offset.get_frames_played_at(0.5)


def test_out_of_range_and_empty_requests(videos):
    decoder = vclip.VideoDecoder(videos["h264"], device="cpu")
    with pytest.raises(IndexError, match=r"h264_bframes\.mp4: frame index 150 is out of range"):
        decoder.get_frames([0, 150])
    with pytest.raises(ValueError, match="list of frame indices is empty"):
        decoder.get_frames([])
    with pytest.raises(ValueError, match=r"scaling_factor \(0\) must be a number in \(0, 1\]"):
        decoder.get_frames([1], scaling_factor=0)
    odd = vclip.VideoDecoder(videos["odd"], device="cpu")
    none = odd.get_clips(vclip.strided(5, 10, end_policy="drop"))  # 41 frames > 30
    assert none.data.shape == (0, 5, 97, 129, 3) and none.frame_indices.shape == (0, 5)


def test_torchcodec_habits_index_slice_iterate_metadata_and_close(videos, monkeypatch):
    """``decoder[i]`` (negative counts from the end), slices (what get_frames returns), iteration
    over every frame (a long group of pictures in pieces), ``metadata``, ``close()`` and ``with``."""
    path = videos["long_gop"]  # 300 frames, a keyframe every 250
    with vclip.VideoDecoder(path, device="cpu") as decoder:
        assert decoder.metadata is decoder.index and decoder.metadata.num_frames == len(decoder) == 300
        frame = decoder[7]
        assert frame.data.shape == (decoder.index.height, decoder.index.width, 3) and int(frame.frame_indices) == 7
        assert barcodes([frame.data, decoder[-1].data]) == [7, 299]
        assert frame.pts_seconds == decoder.index.pts_seconds[7]
        assert np.array_equal(decoder[np.int64(3)].data, decoder.get_frames([3]).data[0])
        assert barcodes(decoder[10:16]) == list(range(10, 16))
        assert decoder[::-100].frame_indices.tolist() == [299, 199, 99]
        empty = decoder[400:]
        assert empty.data.shape == (0, decoder.index.height, decoder.index.width, 3) and empty.frame_indices.size == 0
        with pytest.raises(IndexError, match="frame index 300 is out of range"):
            decoder[300]
        with pytest.raises(vclip.ArgumentError, match=r"key \('7'\) must be a frame number"):
            decoder["7"]
        monkeypatch.setattr(vclip.decoder, "ITERATION_CHUNK_BYTES", 64 * decoder.index.width * decoder.index.height * 3)
        frames = list(decoder)
        assert [int(f.frame_indices) for f in frames] == list(range(300))
        assert barcodes(f.data for f in frames) == list(range(300))
    with pytest.raises(vclip.ArgumentError, match="long_gop.mp4: this VideoDecoder is closed"):
        decoder.get_frames([0])
    with pytest.raises(vclip.ArgumentError, match="is closed"):
        next(iter(decoder))
    decoder.close()  # idempotent


def test_same_seed_same_clips(videos):
    decoder = vclip.VideoDecoder(videos["h264"], device="cpu")
    spec = TransformSpec(resize=64, crop=48, crop_mode="random", flip_probability=0.5)
    a = decoder.get_clips(vclip.jittered(4, 5, 2, clips_per_video=3), transform=spec, seed=11)
    b = decoder.get_clips(vclip.jittered(4, 5, 2, clips_per_video=3), transform=spec, seed=11)
    c = decoder.get_clips(vclip.jittered(4, 5, 2, clips_per_video=3), transform=spec, seed=12)
    assert np.array_equal(a.data, b.data) and np.array_equal(a.frame_indices, b.frame_indices)
    assert not np.array_equal(a.frame_indices, c.frame_indices)


@pytest.mark.parametrize(
    "layout, shape", [("THWC", (4, 56, 72, 3)), ("TCHW", (4, 3, 56, 72)), ("CTHW", (3, 4, 56, 72))]
)
@pytest.mark.parametrize("dtype", ["uint8", "float16", "float32"])
def test_transform_layouts_and_dtypes(videos, layout, shape, dtype):
    decoder = vclip.VideoDecoder(videos["h264"], device="cpu")
    spec = TransformSpec(resize=(56, 72), layout=layout, dtype=dtype)
    clips = decoder.get_clips(vclip.contiguous(4, starts="even"), transform=spec)
    assert clips.data.shape == (1,) + shape and clips.data.dtype == dtype
    channel_last = {
        "THWC": clips.data[0],
        "TCHW": clips.data[0].transpose(0, 2, 3, 1),
        "CTHW": clips.data[0].transpose(1, 2, 3, 0),
    }[layout]
    assert barcodes(channel_last) == clips.frame_indices[0].tolist()
    if dtype != "uint8":
        assert 0.0 <= channel_last.min() and channel_last.max() <= 1.0


def test_downscale_is_an_area_average_of_ffmpeg_rgb(videos):
    decoder = vclip.VideoDecoder(videos["h264"], device="cpu")
    small = decoder.get_frames([10], scaling_factor=0.25).data[0]
    full = decoder.get_frames([10]).data[0].astype(np.float64)
    box_average = full.reshape(60, 4, 80, 4, 3).mean(axis=(1, 3))
    assert small.shape == (60, 80, 3)
    difference = np.abs(small - box_average)
    assert difference.mean() < 1.5 and np.percentile(difference, 99) <= 4.0  # conversion rounding only
    aliased = decoder.get_frames([10], transform=TransformSpec(resize=(60, 80), antialias=False)).data[0]
    assert np.abs(aliased - box_average).mean() > 1.5 * difference.mean()  # bilinear sampling aliases


def test_normalization_matches_formula(videos):
    decoder = vclip.VideoDecoder(videos["h264"], device="cpu")
    plain = decoder.get_frames([3], transform=TransformSpec(dtype="float32")).data[0]
    spec = TransformSpec(dtype="float32", mean=vclip.IMAGENET_MEAN, std=vclip.IMAGENET_STD)
    normalized = decoder.get_frames([3], transform=spec).data[0]
    expected = (plain - np.array(vclip.IMAGENET_MEAN)) / np.array(vclip.IMAGENET_STD)
    assert np.allclose(normalized, expected, atol=1e-5)
    exact = decoder.get_frames([3]).data[0] / 255.0
    assert np.abs(plain - exact).mean() < 1.5 / 255  # the twin's conversion is within rounding of FFmpeg's


def test_real_videos_bit_for_bit(shared_videos):
    for name, stream_index in [
        ("nasa_13013.mp4", 0),
        ("nasa_13013.mp4", 3),
        ("bt709_full_range.mp4", None),
        ("h265_10bits.mp4", None),
        ("h264_10bits.mp4", None),
        ("av1_video.mkv", None),
    ]:
        path = shared_videos / name
        decoder = vclip.VideoDecoder(path, stream_index=stream_index, device="cpu")
        reference = ffmpeg_rgb24(path, stream_index)
        picks = sorted({0, 1, len(reference) // 3, len(reference) - 1})
        frames = decoder.get_frames(picks)
        for got, number in zip(frames.data, picks):
            assert np.array_equal(got, reference[number]), f"{name} frame {number}"


def test_fell_back_flag_when_gpu_requested_without_one(videos, monkeypatch):
    import vclip._device as device_module

    monkeypatch.setattr(device_module, "gpu_unavailable_reason", lambda: "no CUDA device")
    with pytest.warns(vclip.FallbackWarning, match="device='cuda' requested but no CUDA device; decoding on the CPU"):
        decoder = vclip.VideoDecoder(videos["h264"], device="cuda")
    frames = decoder.get_frames([1])
    assert frames.fell_back_to_cpu and frames.device == "cpu"
    assert barcodes(frames.data) == [1]
    with pytest.raises(ValueError, match=r"device \('tpu'\) must be 'cpu', 'cuda', 'cuda:N' or 'auto'"):
        vclip.VideoDecoder(videos["h264"], device="tpu")


def test_frames_repr_and_torch(videos):
    frames = vclip.VideoDecoder(videos["h264"], device="cpu").get_frames([0, 1])
    assert repr(frames).startswith("Frames(data=numpy[2, 240, 320, 3] uint8")
    torch = require_extra("torch")
    tensor = frames.torch()
    assert isinstance(tensor, torch.Tensor) and tensor.data_ptr() == frames.data.ctypes.data


@pytest.mark.parametrize("width, height, scaling_factor", [(640, 360, 0.1), (192, 108, 1 / 3), (130, 98, 0.5)])
@pytest.mark.parametrize("orientation", [Orientation(), Orientation(transpose=True, mirror_x=True),
                                         Orientation(mirror_y=True)])
@pytest.mark.parametrize("dtype", ["uint8", "float32"])
def test_whole_factor_downscale_weighs_samples_as_the_taps_do(width, height, scaling_factor, orientation, dtype):
    """A downscale by a whole factor sums whole blocks (chroma repeated when its blocks split
    samples) instead of applying the taps: the same weights, exact sums."""
    spec = TransformSpec(dtype=dtype)
    geometry = spec.geometry(width, height, base_size=scaled_size(width, height, scaling_factor),
                             orientation=orientation)
    assert host_fast.frame_blocks(geometry, reference.RESAMPLE_AREA) is not None
    planes = [plane.astype(np.uint8) for plane in random_planes(width, height, 8, seed=3)]
    assert_converted_as_with_every_tap(planes, 8, geometry, spec)


@pytest.mark.parametrize("width, height, base_size, crop, bit_depth", [
    (854, 480, (64, 36), None, 8), (480, 270, (64, 36), None, 8), (721, 483, (50, 41), None, 10),
    (300, 200, None, RandomResizedCrop(24, scale=(0.5, 1.0)), 8),
])
@pytest.mark.parametrize("orientation", [Orientation(), Orientation(transpose=True, mirror_x=True),
                                         Orientation(mirror_y=True)])
@pytest.mark.parametrize("dtype", ["uint8", "float32"])
def test_fractional_downscale_sums_runs_of_rows_weighed_as_the_taps_do(width, height, base_size, crop, bit_depth,
                                                                       orientation, dtype):
    """A downscale by 3 rows or more that no whole factor serves sums each output row's run of
    equally weighed rows exactly, then adds its edge rows: the taps' weights, summed otherwise."""
    spec = TransformSpec(crop=crop, flip_probability=0.5, dtype=dtype)
    geometry = spec.geometry(width, height, np.random.default_rng(5), base_size=base_size, orientation=orientation)
    assert host_fast.frame_blocks(geometry, reference.RESAMPLE_AREA) is None
    assert host_fast.frame_row_runs(height, width, geometry, reference.RESAMPLE_AREA, 2) is not None
    planes = random_planes(width, height, bit_depth, seed=4)
    if bit_depth == 8:
        planes = tuple(plane.astype(np.uint8) for plane in planes)
    assert_converted_as_with_every_tap(planes, bit_depth, geometry, spec)


def assert_converted_as_with_every_tap(planes, bit_depth: int, geometry, spec: TransformSpec) -> None:
    """The CPU path's conversion of ``planes`` in its quicker form (vclip._engine.host_fast) against
    the twin's definition, which applies every tap."""
    scale, bias = spec.value_scale_bias()
    options = dict(bit_depth=bit_depth, matrix="bt709", color_range="limited", geometry=geometry, scale=scale,
                   bias=bias, dtype=spec.dtype)
    quicker = host_fast.yuv420_to_rgb_tensor(*planes, **options)
    taps = reference.yuv420_to_rgb_tensor(*planes, **options)
    assert quicker.shape == taps.shape
    if spec.dtype == "uint8":  # apart from rounding ties, where the exact sums and the taps' may round apart
        assert np.abs(quicker.astype(int) - taps).max() <= 1 and np.mean(quicker != taps) < 1e-3
    else:
        assert np.allclose(quicker, taps, rtol=0, atol=1e-6)


def test_rows_sum_in_runs_only_where_the_runs_pay():
    """Runs of rows where the step is 3 rows or more of the plane; every tap gathered below that
    (a 360-row picture to 224) and for other resampling."""
    def runs(height: int, output_height: int, subsampling: int, interpolation: str = "area"):
        spec = TransformSpec(resize=(output_height, 64), interpolation=interpolation)
        geometry = spec.geometry(640, height)
        mode = reference.resample_mode(spec.antialias, spec.interpolation)
        return host_fast.frame_row_runs(height, 640, geometry, mode, subsampling)

    assert runs(480, 36, 1) is not None and runs(480, 36, 2) is not None
    assert runs(360, 224, 1) is None
    assert runs(480, 36, 1, interpolation="bilinear") is None
    found, geometry = runs(480, 36, 2), TransformSpec(resize=(36, 64)).geometry(640, 480)
    weights = np.zeros((36, 240))  # each output row's weight on each chroma row, from the runs
    for outputs, rows in found.groups:
        np.add.at(weights, (outputs[:, None], rows), found.weight[outputs, None])
    np.add.at(weights, (np.arange(36)[:, None], found.edge_index), found.edge_weight)
    taps = np.zeros((36, 240))
    (index, weight), _ = reference.frame_taps(480, 640, geometry, reference.RESAMPLE_AREA)
    np.add.at(taps, (np.arange(36)[:, None], index // 2), weight)
    assert np.allclose(weights, taps, rtol=0, atol=1e-15)


@pytest.mark.parametrize("layout", ["THWC", "TCHW"])
def test_batched_block_conversion_writes_what_the_per_picture_twin_writes(videos, monkeypatch, layout):
    """BlockConverter (a whole-factor downscale to a small picture, batches of pictures) against
    HostConverter, bit for bit: frames asked twice, clips sharing frames, more pictures than one
    batch. Larger pictures convert one at a time."""
    decoder = vclip.VideoDecoder(videos["h264"], device="cpu")
    used = []
    block_converter = cpu.BlockConverter.of
    monkeypatch.setattr(cpu.BlockConverter, "of", classmethod(
        lambda cls, *args: used.append(block_converter(*args)) or used[-1]))
    frames = [0, 3, 3, 17, 40, 41, 149, *range(60, 80)]
    spec = TransformSpec(resize=(48, 64), layout=layout)

    def decode():
        return (decoder.get_frames(frames, scaling_factor=0.2).data,
                decoder.get_clips(vclip.contiguous(50, starts="step", step=40), transform=spec).data)

    batched = decode()
    assert used and all(converter is not None for converter in used)
    used.clear()
    decoder.get_frames(frames, scaling_factor=0.5)  # 160x120: more than a batch's pictures
    assert used == [None]
    monkeypatch.setattr(cpu.BlockConverter, "of", classmethod(lambda cls, *args: None))
    for mine, per_picture in zip(batched, decode()):
        assert np.array_equal(mine, per_picture)
