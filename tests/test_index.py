import json
import shutil

import av
import numpy as np
import pytest

import vclip
from vclip.errors import CorruptVideoError, NotAVideoError, VideoNotFoundError


def decoded_pts(path, stream_index=None):
    """pts of every frame PyAV decodes, in presentation order."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0] if stream_index is None else container.streams[stream_index]
        return sorted(frame.pts for frame in container.decode(stream))


@pytest.mark.parametrize("name", ["h264", "hevc", "vfr", "odd", "offset", "long_gop", "h264_10bit"])
def test_frame_count_and_pts_match_full_decode(videos, name):
    index = vclip.index_video(videos[name])
    assert index.pts.tolist() == decoded_pts(videos[name])
    assert index.num_frames == len(index)
    assert np.all(np.diff(index.pts) > 0)
    # decode order is a permutation of the packets
    assert sorted(index.decode_order.tolist()) == list(range(index.num_packets))


def test_stream_facts(videos):
    index = vclip.index_video(videos["h264"])
    assert (index.codec, index.width, index.height, index.bit_depth) == ("h264", 320, 240, 8)
    assert index.pixel_format == "yuv420p"
    assert index.color_matrix == "bt601" and index.color_range == "limited"  # untagged: FFmpeg's default
    assert index.average_fps == pytest.approx(30.0)
    assert index.duration_seconds == pytest.approx(5.0)
    assert index.keyframe_indices.tolist() == [0, 30, 60, 90, 120]
    assert not index.is_variable_frame_rate


def test_b_frames_are_reordered_and_some_are_not_referenced(videos):
    index = vclip.index_video(videos["h264"])
    assert not np.array_equal(index.decode_order, np.arange(index.num_frames))  # B-frames: decode != display order
    assert 0 < (~index.is_reference).sum() < index.num_frames
    assert index.is_reference[index.keyframe_indices].all()
    hevc = vclip.index_video(videos["hevc"])
    assert (~hevc.is_reference).any()


def test_variable_frame_rate_and_first_pts(videos):
    vfr = vclip.index_video(videos["vfr"])
    assert vfr.is_variable_frame_rate
    assert vfr.pts_seconds[:4] == pytest.approx([0.0, 0.042, 0.084, 0.099])
    offset = vclip.index_video(videos["offset"])
    assert offset.start_seconds == pytest.approx(1.5)
    assert offset.frame_at(1.5) == 0
    assert offset.frame_at(1.539) == 0
    assert offset.frame_at(1.54) == 1
    with pytest.raises(ValueError, match="outside the stream"):
        offset.frame_at(1.0)


def test_frame_at_uses_pts_not_fps(videos):
    vfr = vclip.index_video(videos["vfr"])
    for i in range(vfr.num_frames - 1):
        assert vfr.frame_at(vfr.pts_seconds[i]) == i
        assert vfr.frame_at((vfr.pts_seconds[i] + vfr.pts_seconds[i + 1]) / 2) == i
    with pytest.raises(ValueError):
        vfr.frame_at(vfr.end_seconds)


def test_decode_start_is_keyframe_at_or_before(videos):
    index = vclip.index_video(videos["long_gop"])
    for frame in (0, 10, 249, 250, 251, 299):
        packet = index.decode_start_packet(frame)
        assert index.packet_is_keyframe[packet]
        assert packet <= index.frame_packet[frame]
        assert index.packet_pts[packet] <= index.pts[frame]
    assert index.decode_start_packet(260) == index.frame_packet[250]


def test_memory_and_disk_cache(videos, tmp_path):
    first = vclip.index_video(videos["h264"])
    assert vclip.index_video(videos["h264"]) is first
    vclip.clear_index_cache()
    cached = vclip.index_video(videos["h264"], cache_dir=tmp_path)
    assert list(tmp_path.glob("*.npz"))
    vclip.clear_index_cache()
    reloaded = vclip.index_video(videos["h264"], cache_dir=tmp_path)
    assert reloaded is not cached
    assert repr(reloaded) == repr(cached)
    for name in ("pts", "packet_pos", "packet_is_reference", "frame_packet"):
        assert np.array_equal(getattr(reloaded, name), getattr(cached, name))
    assert reloaded.extradata == cached.extradata


def test_repr_shows_facts_not_arrays(videos):
    text = repr(vclip.index_video(videos["h264"]))
    assert "num_frames=150" in text and "320x240" in text and "[" not in text


# -- real videos, not made here -------------------------------------------------------------------
@pytest.mark.parametrize("stream_index", [0, 3])
def test_nasa_streams_match_ffprobe(shared_videos, stream_index):
    path = shared_videos / "nasa_13013.mp4"
    frames = json.loads((shared_videos / f"nasa_13013.mp4.stream{stream_index}.all_frames_info.json").read_text())
    index = vclip.index_video(path, stream_index=stream_index)
    assert index.stream_index == stream_index
    assert index.num_frames == len(frames) == {0: 325, 3: 390}[stream_index]
    assert (index.width, index.height) == {0: (320, 180), 3: (480, 270)}[stream_index]
    expected = np.array([float(f["pts_time"]) for f in frames])
    assert np.allclose(index.pts_seconds, expected, atol=1e-6)
    assert index.duration_seconds == pytest.approx(expected[-1] + float(frames[-1]["duration_time"]) - expected[0], abs=1e-6)


def test_nasa_default_and_non_video_stream(shared_videos):
    path = shared_videos / "nasa_13013.mp4"
    assert vclip.index_video(path).stream_index == 0
    with pytest.raises(NotAVideoError, match=r"stream 1 is not a video stream; video streams: 0, 3"):
        vclip.index_video(path, stream_index=1)


@pytest.mark.parametrize(
    "name, codec, size, frames, bits, color",
    [
        ("h265_video.mp4", "hevc", (128, 128), 10, 8, None),
        ("bt709_full_range.mp4", "h264", (1280, 720), 30, 8, ("bt709", "full")),
        ("h264_10bits.mp4", "h264", (200, 200), 30, 10, None),
        ("h265_10bits.mp4", "hevc", (200, 200), 30, 10, None),
        ("av1_video.mkv", "av1", (640, 360), None, 8, None),
    ],
)
def test_real_video_facts(shared_videos, name, codec, size, frames, bits, color):
    path = shared_videos / name
    index = vclip.index_video(path)
    assert (index.codec, (index.width, index.height), index.bit_depth) == (codec, size, bits)
    assert index.pts.tolist() == decoded_pts(path)
    if frames is not None:
        assert index.num_frames == frames
    if color is not None:
        assert (index.color_matrix, index.color_range) == color


# -- bad input ------------------------------------------------------------------------------------
def test_missing_file(tmp_path):
    path = tmp_path / "nope.mp4"
    with pytest.raises(VideoNotFoundError, match="nope.mp4: file does not exist"):
        vclip.index_video(path)


def test_text_file_renamed_mp4(tmp_path):
    path = tmp_path / "notes.mp4"
    path.write_text("these are not frames\n" * 50)
    with pytest.raises(NotAVideoError, match=r"notes\.mp4: not a video container FFmpeg can read"):
        vclip.index_video(path)


def test_empty_file(tmp_path):
    path = tmp_path / "empty.mp4"
    path.write_bytes(b"")
    with pytest.raises(CorruptVideoError, match=r"empty\.mp4: file is empty"):
        vclip.index_video(path)


def test_truncated_file(videos, tmp_path):
    data = open(videos["h264"], "rb").read()
    path = tmp_path / "truncated.mp4"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises((CorruptVideoError, NotAVideoError), match=r"truncated\.mp4: "):
        vclip.index_video(path)


def test_truncated_faststart_file_names_the_cut(tmp_path):
    """moov before mdat: the demuxer still lists every packet, the index sees they run past the end."""
    source = tmp_path / "full.mp4"
    with av.open(str(source), "w", options={"movflags": "faststart"}) as container:
        stream = container.add_stream("libx264", rate=30, options={"preset": "ultrafast"})
        stream.width, stream.height, stream.pix_fmt = 64, 64, "yuv420p"
        for i in range(30):
            frame = av.VideoFrame.from_ndarray(np.full((64, 64, 3), i * 8, np.uint8), format="rgb24")
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    data = source.read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: int(len(data) * 0.7)])
    with pytest.raises(CorruptVideoError, match=r"cut\.mp4: truncated: packet \d+ of 30 ends at byte"):
        vclip.index_video(cut)


def test_audio_only_file(tmp_path):
    path = tmp_path / "tone.m4a"
    with av.open(str(path), "w") as container:
        stream = container.add_stream("aac", rate=16000)
        samples = (np.sin(np.arange(16000) / 10) * 0.3).astype(np.float32)[None]
        frame = av.AudioFrame.from_ndarray(samples, format="flt", layout="mono")
        frame.sample_rate = 16000
        container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    with pytest.raises(NotAVideoError, match=r"tone\.m4a: has no video stream \(streams: #0 audio\)"):
        vclip.index_video(path)


def test_directory_is_not_a_video(tmp_path):
    with pytest.raises(NotAVideoError, match="not a regular file"):
        vclip.index_video(tmp_path)


def test_frame_index_checks(videos):
    index = vclip.index_video(videos["h264"])
    assert index.check_frame_indices([0, -1, 5]).tolist() == [0, 149, 5]
    with pytest.raises(IndexError, match=r"frame index 150 is out of range \[0, 149\] \(150 frames\)"):
        index.check_frame_indices([1, 150])
    with pytest.raises(ValueError, match="list of frame indices is empty"):
        index.check_frame_indices([])


def test_moved_file_reindexes(videos, tmp_path):
    copy = tmp_path / "copy.mp4"
    shutil.copy(videos["h264"], copy)
    assert vclip.index_video(copy).path == str(copy)
