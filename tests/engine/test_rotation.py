"""Display orientation and pixel aspect: rotated and mirrored videos come out as a player shows them.

The test videos are one barcode-stamped H.264 stream remuxed with each of the eight display
matrices (PyAV's ``set_display_rotation``). The reference is FFmpeg's own autorotation: the
filters its command line inserts for a display matrix (``transpose``, ``hflip``, ``vflip``),
run through libavfilter on PyAV's decoded frames.
"""

import math
from fractions import Fraction

import av
import numpy as np
import pytest
from helpers import remux

import vclip
from vclip.cli import main
from vclip.index import index_from_record, index_to_record
from vclip.synthetic import make_video, read_barcode
from vclip.transforms import Orientation, TransformSpec

TURNS = [(degrees, mirrored) for degrees in (0, 90, 180, 270) for mirrored in (False, True)]
WIDTH, HEIGHT, FRAMES = 96, 64, 12
GPU_FRAMES = 30


@pytest.fixture(scope="module")
def base_video(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("rotation")
    return make_video(folder / "upright.mp4", num_frames=FRAMES, width=WIDTH, height=HEIGHT, keyframe_interval=6)


def turned_copies(source: str, folder) -> dict[tuple[int, bool], str]:
    """``source`` remuxed with each of the eight display matrices, by (degrees, mirrored)."""
    return {
        (degrees, mirrored): remux(
            source, str(folder / f"turn{degrees}_{int(mirrored)}.mp4"), degrees=degrees, mirrored=mirrored
        )
        for degrees, mirrored in TURNS
    }


@pytest.fixture(scope="module")
def turned(base_video, tmp_path_factory) -> dict[tuple[int, bool], str]:
    return turned_copies(base_video, tmp_path_factory.mktemp("turned"))


@pytest.fixture(scope="module")
def gpu_turned(tmp_path_factory) -> dict[tuple[int, bool], str]:
    """Above NVDEC's minimum size, with B-frames and two GOPs."""
    folder = tmp_path_factory.mktemp("gpu_turned")
    source = make_video(folder / "upright.mp4", num_frames=GPU_FRAMES, width=320, height=240, keyframe_interval=16)
    return turned_copies(source, folder)


def _ffmpeg_autorotate_filters(matrix) -> list[tuple[str, str | None]]:
    """The filters FFmpeg's command line (fftools/ffmpeg_filter.c) inserts for a display matrix."""
    rotation = math.degrees(
        math.atan2(matrix[1] / math.hypot(matrix[1], matrix[4]), matrix[0] / math.hypot(matrix[0], matrix[3]))
    )
    theta = round(rotation)  # get_rotation(): -round(av_display_rotation_get()), which is -rotation
    theta -= 360 * math.floor(theta / 360 + 0.9 / 360)
    if abs(theta - 90) < 1:
        return [("transpose", "cclock_flip" if matrix[3] > 0 else "clock")]
    if abs(theta - 180) < 1:
        return [(name, None) for name, flip in (("hflip", matrix[0] < 0), ("vflip", matrix[4] < 0)) if flip]
    if abs(theta - 270) < 1:
        return [("transpose", "clock_flip" if matrix[3] < 0 else "cclock")]
    return [("vflip", None)] if matrix[4] < 0 else []


def _filtered(frame: av.VideoFrame, filters) -> av.VideoFrame:
    graph = av.filter.Graph()
    source = node = graph.add_buffer(
        width=frame.width, height=frame.height, format=frame.format, time_base=frame.time_base or Fraction(1, 30)
    )
    for name, argument in filters:
        following = graph.add(name, argument) if argument else graph.add(name)
        node.link_to(following)
        node = following
    sink = graph.add("buffersink")
    node.link_to(sink)
    graph.configure()
    source.push(frame)
    return sink.pull()


def ffmpeg_autorotated_rgb24(path: str) -> list[np.ndarray]:
    """Every frame as FFmpeg's rgb24, turned by the filters its command line would insert."""
    with av.open(path) as container:
        frames = list(container.decode(video=0))
    result = []
    for frame in frames:
        # PyAV up to 18 iterates side data entries, later PyAV the types that map to them
        entries = [entry if hasattr(entry, "type") else frame.side_data[entry] for entry in frame.side_data]
        matrices = [bytes(data) for data in entries if data.type.name.endswith("DISPLAYMATRIX")]
        filters = _ffmpeg_autorotate_filters(np.frombuffer(matrices[0], "<i4").tolist()) if matrices else []
        result.append((_filtered(frame, filters) if filters else frame).to_ndarray(format="rgb24"))
    return result


def stored_view(displayed: np.ndarray, orientation: Orientation) -> np.ndarray:
    """Undo ``orientation.apply``: the stored picture of a displayed one."""
    picture = displayed.swapaxes(0, 1) if orientation.transpose else displayed
    if orientation.mirror_y:
        picture = picture[::-1]
    return picture[:, ::-1] if orientation.mirror_x else picture


@pytest.mark.parametrize("degrees, mirrored", TURNS)
def test_orientation_follows_ffmpeg_conventions(degrees, mirrored):
    """Counter-clockwise degrees (``np.rot90``), then a left-right mirror; read back unchanged."""
    orientation = Orientation.from_rotation(degrees, mirrored)
    assert (orientation.rotation, orientation.hflip) == (degrees, mirrored)
    picture = np.arange(12).reshape(3, 4)
    expected = np.rot90(picture, degrees // 90)
    assert np.array_equal(orientation.apply(picture), expected[:, ::-1] if mirrored else expected)


def test_display_matrices_between_right_angles_round_to_the_nearest():
    # 80 degrees counter-clockwise in 16.16 fixed point: cos 0.17, sin 0.98
    cos, sin = round(0.1736 * 65536), round(0.9848 * 65536)
    assert Orientation.from_display_matrix([cos, -sin, 0, sin, cos, 0, 0, 0, 1 << 30]).rotation == 90


@pytest.mark.parametrize("degrees, mirrored", TURNS)
def test_index_records_the_display_matrix(turned, degrees, mirrored):
    index = vclip.index_video(turned[(degrees, mirrored)])
    assert (index.rotation, index.mirrored) == (degrees, mirrored)
    assert index.display_size == ((HEIGHT, WIDTH) if degrees in (90, 270) else (WIDTH, HEIGHT))
    again = index_from_record(index_to_record(index), index.path)
    assert (again.rotation, again.mirrored, again.sample_aspect_ratio) == (degrees, mirrored, 1)


@pytest.mark.parametrize("degrees, mirrored", TURNS)
def test_cpu_frames_equal_ffmpeg_autorotated_rgb24(turned, degrees, mirrored):
    path = turned[(degrees, mirrored)]
    frames = vclip.VideoDecoder(path, device="cpu").get_frames(list(range(FRAMES)))
    assert np.array_equal(frames.data, np.stack(ffmpeg_autorotated_rgb24(path)))
    orientation = Orientation.from_rotation(degrees, mirrored)
    assert [read_barcode(stored_view(frame, orientation)) for frame in frames.data] == list(range(FRAMES))


def test_stored_orientation_returns_the_coded_pictures(turned, base_video):
    stored = TransformSpec(orientation="stored")
    frames = vclip.VideoDecoder(turned[(90, True)], device="cpu").get_frames([0, 5, 11], transform=stored)
    upright = vclip.VideoDecoder(base_video, device="cpu").get_frames([0, 5, 11])
    assert frames.data.shape == (3, HEIGHT, WIDTH, 3)
    assert np.array_equal(frames.data, upright.data)


@pytest.mark.parametrize("degrees, mirrored", [(90, False), (270, True), (180, True)])
def test_resize_and_crop_apply_to_the_displayed_picture(turned, degrees, mirrored):
    """Resizing and cropping the turned picture equals turning the resized and cropped stored one."""
    displayed = TransformSpec(resize=(40, 30), crop=(36, 26), dtype="float32")
    if degrees in (90, 270):
        stored = TransformSpec(resize=(30, 40), crop=(26, 36), dtype="float32", orientation="stored")
    else:
        stored = TransformSpec(resize=(40, 30), crop=(36, 26), dtype="float32", orientation="stored")
    decoder = vclip.VideoDecoder(turned[(degrees, mirrored)], device="cpu")
    got = decoder.get_frames([1, 7], transform=displayed).data
    reference = decoder.get_frames([1, 7], transform=stored).data
    assert got.shape == (2, 36, 26, 3)
    orientation = Orientation.from_rotation(degrees, mirrored)
    for frame, stored_frame in zip(got, reference):
        np.testing.assert_allclose(frame, orientation.apply(stored_frame), atol=1e-5)


def test_short_side_resize_follows_the_displayed_shape(turned):
    """A portrait (turned) landscape video keeps its displayed aspect: the short side is its width."""
    clip = vclip.VideoDecoder(turned[(270, False)], device="cpu").get_clips(
        vclip.contiguous(4), transform=TransformSpec(resize=32), seed=0
    )
    assert clip.data.shape[2:] == (48, 32, 3)  # 64x96 displayed -> 32x48
    frames = clip.data[0]
    orientation = Orientation.from_rotation(270)
    assert [read_barcode(stored_view(frame, orientation)) for frame in frames] == clip.frame_indices[0].tolist()


def test_square_pixels_stretch_to_the_sample_aspect_ratio(base_video, tmp_path):
    path = remux(base_video, str(tmp_path / "anamorphic.mp4"), sample_aspect_ratio=Fraction(4, 3))
    index = vclip.index_video(path)
    assert index.sample_aspect_ratio == Fraction(4, 3) and index.display_size == (128, 64)
    decoder = vclip.VideoDecoder(path, device="cpu")
    square = decoder.get_frames([0, 3], transform=TransformSpec(square_pixels=True)).data
    assert square.shape == (2, HEIGHT, 128, 3)
    assert np.array_equal(square, decoder.get_frames([0, 3], transform=TransformSpec(resize=(HEIGHT, 128))).data)
    assert [read_barcode(frame) for frame in square] == [0, 3]
    assert decoder.get_frames([0], transform=TransformSpec()).data.shape == (1, HEIGHT, WIDTH, 3)  # stored pixels


@pytest.mark.parametrize("ratio", [Fraction(2147483647, 1), Fraction(65, 1), Fraction(1, 17)])
def test_an_absurd_pixel_aspect_is_taken_as_square_pixels_with_a_warning(base_video, tmp_path, ratio):
    """2147483647:1 with square_pixels=True asked NumPy for 36 TiB (a MemoryError); then 65:1 refused
    the whole video, whose frames are fine. 16:1 is the widest kept, either way; beyond, the header is
    damaged and the pixels are taken as square."""
    path = remux(base_video, str(tmp_path / "absurd.mp4"), sample_aspect_ratio=ratio)
    message = rf"absurd.mp4: its pixel aspect ratio {ratio.numerator}:{ratio.denominator} is impossible \(beyond 16:1"
    with pytest.warns(vclip.DamagedHeaderWarning, match=message):
        index = vclip.index_video(path)
    assert index.sample_aspect_ratio == 1 and index.display_size == (WIDTH, HEIGHT)
    square = vclip.VideoDecoder(path, device="cpu").get_frames([0, 3], transform=TransformSpec(square_pixels=True))
    assert square.data.shape == (2, HEIGHT, WIDTH, 3) and [read_barcode(frame) for frame in square.data] == [0, 3]
    widest = remux(base_video, str(tmp_path / "widest.mp4"), sample_aspect_ratio=Fraction(16))
    assert vclip.index_video(widest).display_size == (16 * WIDTH, HEIGHT)


def test_square_pixels_of_a_turned_video_stretch_the_stored_width(base_video, tmp_path):
    """The pixel aspect belongs to the stored picture: a 4:3 one widens the stored 96 columns to 128,
    which the turn makes the displayed height."""
    path = remux(base_video, str(tmp_path / "turned_anamorphic.mp4"), degrees=90, sample_aspect_ratio=Fraction(4, 3))
    index = vclip.index_video(path)
    assert index.display_size == (HEIGHT, 128)
    decoder = vclip.VideoDecoder(path, device="cpu")
    square = decoder.get_frames([2], transform=TransformSpec(square_pixels=True, dtype="float32")).data
    stored = decoder.get_frames(
        [2], transform=TransformSpec(resize=(HEIGHT, 128), dtype="float32", orientation="stored")
    ).data
    assert square.shape == (1, 128, HEIGHT, 3)
    np.testing.assert_allclose(square[0], np.rot90(stored[0]), atol=1e-5)


def test_square_pixels_argument_is_checked():
    with pytest.raises(vclip.ArgumentError, match=r"square_pixels \('yes'\) must be True or False"):
        TransformSpec(square_pixels="yes")
    with pytest.raises(vclip.ArgumentError, match="orientation"):
        TransformSpec(orientation="upright")


def test_info_reports_rotation_and_pixel_aspect(turned, capsys):
    assert main(["info", turned[(270, True)]]) == 0
    output = capsys.readouterr().out
    assert "turned 270 degrees counter-clockwise, mirrored; a player shows 64x96" in output
    assert "pixel aspect 1:1 (square)" in output


def host(array) -> np.ndarray:
    return array.get() if hasattr(array, "get") else np.asarray(array)


@pytest.mark.gpu
@pytest.mark.parametrize("degrees, mirrored", TURNS)
def test_nvdec_turns_frames_as_the_cpu_does(gpu_turned, degrees, mirrored):
    """Native size (rotation inside the kernel's 1-pixel path when transposed, the 4-pixel path
    otherwise) against FFmpeg's autorotated rgb24, and a transformed clip against the CPU twin."""
    from kernel_cases import assert_matches_twin

    path = gpu_turned[(degrees, mirrored)]
    gpu = vclip.VideoDecoder(path, device="cuda").get_frames(list(range(GPU_FRAMES)))
    assert not gpu.fell_back_to_cpu
    data = host(gpu.data)
    orientation = Orientation.from_rotation(degrees, mirrored)
    assert [read_barcode(stored_view(frame, orientation)) for frame in data] == list(range(GPU_FRAMES))
    difference = np.abs(data.astype(np.int16) - np.stack(ffmpeg_autorotated_rgb24(path)).astype(np.int16))
    assert difference.mean() <= 1.5 and np.percentile(difference, 99) <= 4
    spec = TransformSpec(resize=112, crop=(96, 96), crop_mode="random", flip_probability=0.5, dtype="float32")
    sampler = vclip.contiguous(4, clips_per_video=3, seed=1)
    on_gpu = vclip.VideoDecoder(path, device="cuda").get_clips(sampler, transform=spec, seed=3)
    on_cpu = vclip.VideoDecoder(path, device="cpu").get_clips(sampler, transform=spec, seed=3)
    assert_matches_twin(host(on_gpu.data), on_cpu.data, "float32")


@pytest.mark.gpu
def test_nvdec_square_pixels_match_the_cpu_twin(gpu_turned, tmp_path):
    from kernel_cases import assert_matches_twin

    path = remux(
        gpu_turned[(0, False)], str(tmp_path / "anamorphic.mp4"), degrees=270, sample_aspect_ratio=Fraction(16, 11)
    )
    spec = TransformSpec(square_pixels=True)
    gpu = vclip.VideoDecoder(path, device="cuda").get_frames(list(range(0, GPU_FRAMES, 3)), transform=spec)
    cpu = vclip.VideoDecoder(path, device="cpu").get_frames(list(range(0, GPU_FRAMES, 3)), transform=spec)
    assert not gpu.fell_back_to_cpu and cpu.data.shape[1:] == (465, 240, 3)  # 320 * 16/11 = 465.45
    assert_matches_twin(host(gpu.data), cpu.data, "uint8")


def test_loader_tells_a_turned_copy_by_its_displayed_size(base_video, turned):
    """An upright video and its 90-degree copy share their timing but not their clip shape: the
    loader refuses them together without a resize, and resizing both serves each one's frames."""
    videos = [(base_video, 0), (turned[(90, False)], 1)]
    sampler = vclip.contiguous(4, clips_per_video=2)
    with pytest.raises(vclip.ArgumentError) as raised:
        vclip.ClipLoader(videos, sampler, device="cpu", batch_size=2, num_threads=1)
    message = str(raised.value)
    assert "2 sizes" in message and f"{WIDTH}x{HEIGHT}: 1 video" in message and f"{HEIGHT}x{WIDTH}: 1 video" in message
    loader = vclip.ClipLoader(
        videos, sampler, transform=TransformSpec(resize=(64, 64)), device="cpu", batch_size=2, num_threads=1
    )
    assert not loader.stats().skipped.videos
    seen = set()
    for batch in loader:
        assert tuple(batch.data.shape[1:]) == (4, 64, 64, 3) and not batch.skipped_videos
        for clip, frames, video in zip(batch.data.numpy(), batch.frame_indices.tolist(), batch.video_ids.tolist()):
            orientation = Orientation.from_rotation(90 if video else 0)
            assert [read_barcode(stored_view(frame, orientation)) for frame in clip] == frames
            seen.add(video)
    assert seen == {0, 1}
    loader.close()
