import dataclasses
import json
import shutil
import struct
import warnings

import av
import numpy as np
import pytest
from helpers import barcodes

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
    assert index.duration_seconds == pytest.approx(
        expected[-1] + float(frames[-1]["duration_time"]) - expected[0], abs=1e-6
    )


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


# -- issue 10: every failure a VideoError naming the file (D1-D5, D14), caches you can trust (D10-D12) --
import builtins  # noqa: E402
import os  # noqa: E402

import vclip._index.caches as index_cache_module  # noqa: E402
import vclip._index.demux as demux_module  # noqa: E402
import vclip._index.lookup as cached_index_module  # noqa: E402
import vclip.cli  # noqa: E402
import vclip.index as index_module  # noqa: E402
from vclip._bytes.sources import open_container  # noqa: E402
from vclip._index.record import ARRAY_DTYPES  # noqa: E402
from vclip.errors import IndexCacheWarning, TruncatedVideoWarning, UnreadableVideoError  # noqa: E402
from vclip.synthetic import render_frame  # noqa: E402
from vclip.synthetic._barcoded import _texture as synthetic_texture  # noqa: E402

TINY = dict(num_frames=20, width=64, height=48, keyframe_interval=10)


def tiny(path, **options):
    return vclip.synthetic.make_video(path, **{**TINY, **options})


def patched(source, target, patch) -> str:
    data = bytearray(open(source, "rb").read())
    patch(data)
    open(target, "wb").write(bytes(data))
    return str(target)


@pytest.fixture
def clean_cache():
    vclip.clear_index_cache()
    yield
    vclip.clear_index_cache()


def test_symlink_loop_is_unreadable(tmp_path):
    loop = tmp_path / "loop.mp4"
    loop.symlink_to(loop)
    with pytest.raises(UnreadableVideoError, match=r"loop\.mp4: too many levels of symbolic links"):
        vclip.index_video(loop)
    good = tiny(tmp_path / "good.mp4")
    assert vclip.cli.main(["info", good, str(loop), good]) == vclip.cli.EXIT_PARTIAL  # reported, the rest described


def test_name_too_long_is_unreadable(tmp_path):
    with pytest.raises(UnreadableVideoError, match="file name too long"):
        vclip.index_video(tmp_path / ("x" * 300 + ".mp4"))


def test_file_used_as_folder_is_not_found(tmp_path):
    path = tiny(tmp_path / "a.mp4")
    with pytest.raises(VideoNotFoundError, match="a folder in its path is a file"):
        vclip.index_video(os.path.join(path, "b.mp4"))


def test_stat_permission_denied_is_unreadable_not_corrupt(tmp_path, monkeypatch):
    """An unreadable parent folder: os.stat fails with EACCES (simulated: tests may run as root)."""
    path = str(tmp_path / "locked" / "a.mp4")
    real_stat = os.stat

    def stat(target, *args, **kwargs):
        if os.fspath(target) == path:
            raise PermissionError(13, "Permission denied", path)
        return real_stat(target, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    with pytest.raises(UnreadableVideoError, match=r"a\.mp4: permission denied"):
        vclip.index_video(path)


def test_unreadable_file_is_permission_denied(tmp_path, monkeypatch, clean_cache):
    """chmod 000 (simulated for root): reading fails; the error says permission, not corrupt."""
    path = tiny(tmp_path / "secret.mp4")
    real_open = builtins.open

    def guarded_open(target, *args, **kwargs):
        if os.fspath(target) == path:
            raise PermissionError(13, "Permission denied", path)
        return real_open(target, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", guarded_open)
    with pytest.raises(UnreadableVideoError, match=r"secret\.mp4: permission denied"):
        vclip.index_video(path)

    # FFmpeg's own refusal to open is diagnosed the same way
    def refuse(*args, **kwargs):
        raise av.error.PermissionError(13, "Permission denied")

    monkeypatch.setattr(av, "open", refuse)
    with pytest.raises(UnreadableVideoError, match="permission denied"):
        open_container(path)
    monkeypatch.setattr(builtins, "open", real_open)  # the file is readable: FFmpeg's EACCES is about the data
    with pytest.raises(CorruptVideoError, match="secret.mp4: FFmpeg could not open it"):
        open_container(path)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root reads any file")
def test_chmod_000_is_permission_denied(tmp_path):
    path = tiny(tmp_path / "locked.mp4")
    os.chmod(path, 0)
    try:
        with pytest.raises(UnreadableVideoError, match="permission denied"):
            vclip.index_video(path)
    finally:
        os.chmod(path, 0o600)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to become another user")
def test_real_permission_denied_as_another_user(tmp_path, clean_cache):
    """As root, a forked child that becomes 'nobody' meets real EACCES: on the file and on its folder."""
    readable = tiny(tmp_path / "open.mp4")
    vclip.index_video(readable)  # every import done before the fork
    locked = tmp_path / "locked"
    locked.mkdir()
    inside = shutil.copy(readable, locked / "inside.mp4")
    closed = shutil.copy(readable, tmp_path / "closed.mp4")
    os.chmod(closed, 0)
    os.chmod(locked, 0o700)
    os.chmod(tmp_path, 0o755)
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        try:
            os.setgid(65534)
            os.setuid(65534)
            lines = []
            for path in (closed, inside):
                try:
                    vclip.index_video(path)
                    lines.append("indexed")
                except Exception as error:
                    lines.append(f"{type(error).__name__}: {error}")
            os.write(write_end, "\n".join(lines).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        lines = pipe.read().splitlines()
    os.waitpid(child, 0)
    assert len(lines) == 2, lines
    for line, path in zip(lines, (closed, inside)):
        assert line.startswith(f"UnreadableVideoError: {path}: permission denied"), line


def test_stream_without_codec_parameters(tmp_path):
    """D2: a vmhd box whose size byte is 0x8C swallows the sample description."""

    def patch(data):
        at = data.find(b"vmhd")
        data[at - 1] = 0x8C

    path = patched(tiny(tmp_path / "good.mp4"), tmp_path / "vmhd.mp4", patch)
    with pytest.raises(CorruptVideoError, match=r"vmhd\.mp4: video stream #0 has no codec parameters"):
        vclip.index_video(path)


def test_invalid_utf8_metadata_is_read(tmp_path):
    """D3: metadata that is not UTF-8 does not stop indexing or decoding."""
    source = tmp_path / "titled.mkv"
    with av.open(str(source), "w") as container:
        container.metadata["title"] = "QQQQQQQQ"
        stream = container.add_stream("libx264", rate=10)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        stream.metadata["handler_name"] = "WWWWWWWW"
        for i in range(5):
            container.mux(
                stream.encode(av.VideoFrame.from_ndarray(np.full((48, 64, 3), 40 * i, np.uint8), format="rgb24"))
            )
        container.mux(stream.encode(None))
    data = source.read_bytes().replace(b"QQQQQQQQ", b"\xff\xfe\xc3QQQQQ").replace(b"WWWWWWWW", b"\xff\xfeWWWWWW")
    path = tmp_path / "latin.mkv"
    path.write_bytes(data)
    assert vclip.index_video(path).num_frames == 5
    assert vclip.VideoDecoder(path, device="cpu").get_frames([0, 4]).data.shape == (2, 48, 64, 3)
    assert vclip.cli.main(["info", str(path)]) == 0


def test_avi_seek_refused_falls_back_to_reading_from_the_start(tmp_path):
    """D4: an idx1 entry 0 of size 0x7FFFFFFF makes FFmpeg's seek fail with EPERM."""

    def patch(data):
        at = data.find(b"idx1")
        struct.pack_into("<I", data, at + 8 + 12, 0x7FFFFFFF)

    path = patched(tiny(tmp_path / "good.avi", codec="mpeg4"), tmp_path / "idx1.avi", patch)
    decoder = vclip.VideoDecoder(path, device="cpu")
    for frame in range(decoder.index.num_frames):
        assert barcodes(decoder.get_frames([frame])) == [frame]


def test_demux_failure_is_corrupt_video_error(tmp_path, monkeypatch):
    """D4: any FFmpeg error while reading packets back names the file."""
    from vclip._index.packets import read_packets

    path = tiny(tmp_path / "good.avi", codec="mpeg4")
    index = vclip.index_video(path)

    def refuse(self, *args, **kwargs):
        raise av.error.PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(av.container.InputContainer, "seek", refuse)
    monkeypatch.setattr(av.container.InputContainer, "demux", refuse)
    with pytest.raises(CorruptVideoError, match=r"good\.avi: packets \[5\] could not be read back \(Operation not"):
        read_packets(index, np.array([5]))


def test_file_gone_after_indexing(tmp_path, clean_cache):
    path = tiny(tmp_path / "gone.mp4")
    decoder = vclip.VideoDecoder(path, device="cpu")
    os.unlink(path)
    with pytest.raises(VideoNotFoundError, match=r"gone\.mp4: file does not exist"):
        decoder.get_frames([3])


def test_zero_frames_refused_everywhere(tmp_path, clean_cache):
    """D5: an edit list that starts after the last frame leaves nothing to show."""

    def patch(data):
        at = data.find(b"elst")
        struct.pack_into(">i", data, at + 16, 1_000_000)  # media_time of entry 0

    path = patched(tiny(tmp_path / "good.mp4"), tmp_path / "nothing.mp4", patch)
    with pytest.raises(CorruptVideoError, match=r"nothing\.mp4: no decodable frames"):
        vclip.index_video(path)
    with pytest.raises(CorruptVideoError, match="no decodable frames"):
        vclip.VideoDecoder(path, device="cpu")
    assert vclip.cli.main(["info", path]) == 1
    assert (
        vclip.cli.main(
            [
                "sample",
                path,
                "--mode",
                "indexed",
                "--frame-indices",
                "-1",
                "--out",
                str(tmp_path / "out.npz"),
                "--device",
                "cpu",
            ]
        )
        == 1
    )


def _negative_timestamp_mkv(path, b_frames: int, first_pts: int) -> str:
    texture = synthetic_texture(128, 96, np.random.default_rng(0))
    with av.open(str(path), "w", container_options={"avoid_negative_ts": "disabled"}) as container:
        stream = container.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        stream.options = {"bf": str(b_frames), "g": "10", "preset": "veryfast"}
        for i in range(20):
            frame = av.VideoFrame.from_ndarray(render_frame(i, texture, 64, 48, 20), format="rgb24")
            frame.pts = first_pts + i
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return str(path)


@pytest.mark.parametrize("b_frames", [0, 2])
def test_negative_timestamps_in_matroska(tmp_path, b_frames, clean_cache):
    """D14: Matroska cannot store negative timestamps; FFmpeg hands those packets over without any."""
    path = _negative_timestamp_mkv(tmp_path / f"negative{b_frames}.mkv", b_frames, first_pts=-5)
    with av.open(path) as container:
        assert sum(p.pts is None for p in container.demux(video=0) if p.size) == 5  # the premise
    index = vclip.index_video(path)
    assert index.num_frames == 20
    assert np.all(np.diff(index.pts) > 0) and index.pts[5] == 0
    decoder = vclip.VideoDecoder(path, device="cpu")
    assert barcodes(decoder.get_frames(list(range(20)))) == list(range(20))
    for frames in ([3], [7, 2, 11], [19, 0], [4, 5, 6]):
        assert barcodes(decoder.get_frames(frames)) == frames
    clips = decoder.get_clips(vclip.contiguous(4, starts="even", clips_per_video=3))
    assert [barcodes(vclip.Frames(c, None, None, "cpu")) for c in clips.data] == clips.frame_indices.tolist()


def test_truncated_mpeg_ts_leaves_out_the_cut_frame(tmp_path, clean_cache):
    """A TS file cut inside the last video packet: that frame would come out concealed."""
    source = tiny(tmp_path / "full.ts")
    data = open(source, "rb").read()
    cut = tmp_path / "cut.ts"
    cut.write_bytes(data[:-100])  # inside the last transport packet, which continues the last PES
    with pytest.warns(TruncatedVideoWarning, match=r"cut\.ts: truncated: .* its frame is left out"):
        index = vclip.index_video(cut)
    assert index.num_frames == 19
    assert barcodes(vclip.VideoDecoder(cut, device="cpu").get_frames(list(range(19)))) == list(range(19))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        vclip.clear_index_cache()
        assert vclip.index_video(source).num_frames == 20  # a whole file: no warning


# -- FFmpeg's decoding probe ----------------------------------------------------------------------
def _fields_with_and_without_the_decoding_probe(path, stream_index=None):
    size = os.path.getsize(path)
    return tuple(demux_module._demux_stream(str(path), stream_index, size, probe_pictures=probe)
                 for probe in (False, True))


def _assert_same_fields(index, expected):
    assert isinstance(index, vclip.VideoIndex) and isinstance(expected, vclip.VideoIndex)
    for name in (field.name for field in dataclasses.fields(expected)):
        value, found = getattr(expected, name), getattr(index, name)
        same = np.array_equal(found, value) and found.dtype == value.dtype if isinstance(value, np.ndarray) else (
            found == value and type(found) is type(value))
        assert same, (name, found, value)


@pytest.mark.parametrize("name", ["h264", "hevc", "vfr", "odd", "offset", "long_gop", "h264_10bit"])
def test_mp4_and_matroska_are_indexed_without_ffmpegs_decoding_probe(videos, name):
    """A local MP4 or Matroska file is read without the stream probe that decodes pictures (for
    H.264 most of the index's time): its first picture gives the same facts."""
    fast, probed = _fields_with_and_without_the_decoding_probe(videos[name])
    assert fast is not None
    _assert_same_fields(fast, probed)


@pytest.mark.parametrize("name, stream_index", [("nasa_13013.mp4", 0), ("nasa_13013.mp4", 3), ("h265_video.mp4", 0),
                                                ("bt709_full_range.mp4", 0), ("h264_10bits.mp4", 0),
                                                ("h265_10bits.mp4", 0), ("av1_video.mkv", 0)])
def test_real_videos_are_indexed_without_ffmpegs_decoding_probe(shared_videos, name, stream_index):
    """Colours, pixel formats and pixel aspect ratios from the first picture are the probe's on
    videos made elsewhere (BT.709 full range among them)."""
    fast, probed = _fields_with_and_without_the_decoding_probe(shared_videos / name, stream_index)
    assert fast is not None
    _assert_same_fields(fast, probed)


def test_what_needs_the_decoding_probe_is_read_with_it(tmp_path, clean_cache):
    """An MPEG-TS file (streams may appear as the probe reads on) and a Matroska file whose packets
    lack timestamps (placing them needs the reordering depth the probe guesses) are read with it."""
    transport = tiny(tmp_path / "a.ts")
    assert _fields_with_and_without_the_decoding_probe(transport)[0] is None
    assert vclip.index_video(transport).num_frames == 20
    untimed = _negative_timestamp_mkv(tmp_path / "negative.mkv", 2, first_pts=-5)
    assert _fields_with_and_without_the_decoding_probe(untimed)[0] is None


# -- caches ---------------------------------------------------------------------------------------
def _same_size_pair(tmp_path):
    """Two valid videos of the same byte size (the smaller padded with an mp4 'free' box)."""
    first = tiny(tmp_path / "first.mp4", seed=1)
    second = tiny(tmp_path / "second.mp4", num_frames=24, seed=2)
    sizes = [os.path.getsize(first), os.path.getsize(second)]
    target = max(sizes) + 8
    for path, size in zip((first, second), sizes):
        with open(path, "ab") as file:
            file.write(struct.pack(">I4s", target - size, b"free") + b"\0" * (target - size - 8))
    assert os.path.getsize(first) == os.path.getsize(second)
    return first, second


@pytest.mark.parametrize("how", ["cp -p", "rsync -t"])
def test_same_size_same_mtime_replacement_is_reindexed(tmp_path, how, clean_cache):
    """D11: neither cache serves the old index for a file replaced with equal size and mtime."""
    first, second = _same_size_pair(tmp_path)
    path = tmp_path / "video.mp4"
    shutil.copyfile(first, path)
    stamp = (1_600_000_000_000_000_000, 1_600_000_000_000_000_000)
    os.utime(path, ns=stamp)
    cache = tmp_path / "cache"
    assert vclip.index_video(path, cache_dir=cache).num_frames == 20
    if how == "cp -p":  # in place: same inode
        with open(path, "r+b") as file:
            file.write(open(second, "rb").read())
    else:  # a new file renamed over the old one
        shutil.copyfile(second, tmp_path / "incoming")
        os.replace(tmp_path / "incoming", path)
    os.utime(path, ns=stamp)
    assert vclip.index_video(path, cache_dir=cache).num_frames == 24  # memory cache
    vclip.clear_index_cache()
    assert vclip.index_video(path, cache_dir=cache).num_frames == 24  # disk cache
    assert barcodes(vclip.VideoDecoder(path, cache_dir=cache, device="cpu").get_frames([0, 23])) == [0, 23]


def test_settled_memory_entry_is_served_without_reading(tmp_path, monkeypatch, clean_cache):
    path = tiny(tmp_path / "a.mp4")
    monkeypatch.setattr(cached_index_module, "_SETTLE_NS", -(10**18))  # as if the file were long unchanged
    reads = []
    real = cached_index_module.content_fingerprint
    monkeypatch.setattr(cached_index_module, "content_fingerprint", lambda *a: reads.append(a) or real(*a))
    first = vclip.index_video(path)
    assert vclip.index_video(path) is first and len(reads) == 1
    os.chmod(path, 0o640)  # a new ctime, same size and mtime: re-checked by content, still the same index
    assert vclip.index_video(path) is first and len(reads) == 2
    assert vclip.index_video(path) is first and len(reads) == 2
    os.utime(path, ns=(0, 0))  # a new mtime: indexed again
    assert vclip.index_video(path) is not first


def test_recently_changed_file_is_checked_by_content(tmp_path, monkeypatch, clean_cache):
    """Coarse file clocks could hide a change in the same tick: a young entry is always re-read."""
    path = tiny(tmp_path / "a.mp4")
    reads = []
    real = cached_index_module.content_fingerprint
    monkeypatch.setattr(cached_index_module, "content_fingerprint", lambda *a: reads.append(a) or real(*a))
    first = vclip.index_video(path)
    assert vclip.index_video(path) is first and len(reads) == 2


def test_memory_cache_is_bounded_in_bytes(tmp_path, clean_cache):
    """D12: the bound is on the arrays' bytes, not on the number of entries."""
    paths = [tiny(tmp_path / f"v{i}.mp4", seed=i) for i in range(5)]
    one = index_module._index_nbytes(vclip.index_video(paths[0]))
    previous = index_module.set_index_cache_limit(3 * one + one // 2)
    try:
        for path in paths:
            vclip.index_video(path)
        info = index_module.index_cache_info()
        assert info["entries"] == 3 and info["bytes"] <= info["limit_bytes"]
        index_module.set_index_cache_limit("1KiB")  # smaller than any index: nothing is kept
        assert index_module.index_cache_info()["entries"] == 0
        vclip.index_video(paths[0])
        assert index_module.index_cache_info()["entries"] == 0
    finally:
        index_module.set_index_cache_limit(previous)
    assert previous == 256 << 20


@pytest.mark.parametrize("settled", [True, False])
def test_a_cached_index_names_the_path_asked_for(tmp_path, monkeypatch, settled, clean_cache):
    """The memory cache is keyed by the real path; the index it serves still names the path given
    (a relative name from another working folder, a symlink), so decoding opens that name."""
    if settled:  # served without reading the file; else after comparing its fingerprint
        monkeypatch.setattr(cached_index_module, "_SETTLE_NS", -(10**18))
    path = tiny(tmp_path / "a.mp4")
    link = tmp_path / "link.mp4"
    link.symlink_to(path)
    monkeypatch.chdir(tmp_path)
    first = vclip.index_video("a.mp4")
    assert first.path == "a.mp4"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    for name in (path, str(link)):
        index = vclip.index_video(name)
        assert index.path == name and index.pts is first.pts  # the cached arrays, not indexed again
        assert index.decode_start_packet(15) == first.decode_start_packet(15)
        assert barcodes(vclip.VideoDecoder(name, device="cpu").get_frames([0, 15, 19])) == [0, 15, 19]
    assert index_module.index_cache_info()["entries"] == 1


def test_disk_cache_folder_is_private_and_files_atomic(tmp_path, clean_cache):
    path = tiny(tmp_path / "a.mp4")
    cache = tmp_path / "cache"
    vclip.index_video(path, cache_dir=cache)
    assert cache.stat().st_mode & 0o777 == 0o700
    entries = list(cache.iterdir())
    assert len(entries) == 1 and entries[0].suffix == ".npz"  # no temporary file left
    assert entries[0].stat().st_mode & 0o777 == 0o600


def test_disk_cache_folder_writable_by_others_is_not_used(tmp_path, clean_cache):
    path = tiny(tmp_path / "a.mp4")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    index_cache_module._warned_folders.clear()
    with pytest.warns(IndexCacheWarning, match="can be written by other users"):
        assert vclip.index_video(path, cache_dir=shared).num_frames == 20
    assert list(shared.iterdir()) == []


def _entry(cache):
    (entry,) = [p for p in cache.iterdir() if p.suffix == ".npz"]
    return entry


def _rewrite_entry(entry, change):
    with np.load(entry) as stored:
        record = {name: stored[name] for name in stored.files}
    change(record)
    with open(entry, "wb") as file:
        np.savez(file, **record)


def _reversed_frames(record):
    for name in ("pts", "frame_packet"):
        record[name] = record[name][::-1].copy()


def _unknown_fact(record):
    facts = json.loads(str(record["facts"]))
    facts["surprise"] = 1
    record["facts"] = np.asarray(json.dumps(facts))


@pytest.mark.parametrize(
    "damage",
    [
        "truncated",
        "not a zip",
        "planted reversed frames",
        "unknown fact",
        "old version",
        "other fingerprint",
        "missing field",
        "symlink to elsewhere",
        "array of objects",
    ],
)
def test_bad_disk_entries_are_rebuilt_not_raised_nor_trusted(tmp_path, damage, clean_cache):
    """D10: only an entry that validates in every way is used; anything else is rebuilt."""
    path = tiny(tmp_path / "a.mp4")
    cache = tmp_path / "cache"
    truth = vclip.index_video(path, cache_dir=cache)
    entry = _entry(cache)
    elsewhere = tmp_path / "elsewhere.npz"
    if damage == "truncated":
        entry.write_bytes(entry.read_bytes()[:300])
    elif damage == "not a zip":
        entry.write_bytes(b"hello")
    elif damage == "planted reversed frames":
        _rewrite_entry(entry, _reversed_frames)
    elif damage == "unknown fact":
        _rewrite_entry(entry, _unknown_fact)
    elif damage == "old version":
        _rewrite_entry(entry, lambda record: record.update(format_version=np.asarray(1)))
    elif damage == "other fingerprint":
        _rewrite_entry(entry, lambda record: record.update(fingerprint=np.asarray("x")))
    elif damage == "missing field":
        _rewrite_entry(entry, lambda record: record.pop("packet_frame"))
    elif damage == "symlink to elsewhere":
        shutil.copyfile(entry, elsewhere)
        entry.unlink()
        entry.symlink_to(elsewhere)
    elif damage == "array of objects":
        with open(entry, "wb") as file:
            np.savez(file, pts=np.array([object()], dtype=object))
    vclip.clear_index_cache()
    rebuilt = vclip.index_video(path, cache_dir=cache)
    assert rebuilt is not truth and np.array_equal(rebuilt.pts, truth.pts)
    assert np.array_equal(rebuilt.frame_packet, truth.frame_packet)
    assert barcodes(vclip.VideoDecoder(path, cache_dir=cache, device="cpu").get_frames([0, 1, 2])) == [0, 1, 2]
    assert not _entry(cache).is_symlink()  # rewritten in place of whatever was there
    if damage == "symlink to elsewhere":
        assert elsewhere.exists()
    vclip.clear_index_cache()
    reloaded = vclip.index_video(path, cache_dir=cache)  # the rewritten entry is good
    assert np.array_equal(reloaded.pts, truth.pts)


def test_index_record_round_trip_and_checks(videos):
    index = vclip.index_video(videos["h264"])
    record = index_module.index_to_record(index)
    again = index_module.index_from_record(record, index.path)
    assert repr(again) == repr(index) and again.extradata == index.extradata
    for name in ARRAY_DTYPES:
        assert np.array_equal(getattr(again, name), getattr(index, name))
    index_module.check_index(index)
    broken = dict(record, packet_frame=np.zeros_like(record["packet_frame"]))
    with pytest.raises(ValueError, match="packet_frame"):
        index_module.index_from_record(broken, index.path)
