"""Damaged files (issue 25): a native decoder crash on one video never ends the process, and what a
damaged file still holds is decoded exactly.

Crash tests run their decoding in a child Python, so that the suite survives the crash they guard
against: the child's exit status is the verdict.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import av
import numpy as np
from helpers import child_environment, ffmpeg_rgb24

import vclip
from vclip.synthetic import make_video


def _damaged_vp9(folder) -> str:
    """A 96x64 VP9 WebM (40 frames, a keyframe every 10) whose last keyframe has a damaged sync code
    (one bit flipped, as the audit's fuzzer did). FFmpeg's VP9 decoder with frame threads crashed
    (SIGSEGV) on it when its codec context had decoded and been flushed before (frames 0 and 39 asked
    at once); a fresh context reports invalid data."""
    path = make_video(folder / "vp9.webm", num_frames=40, width=96, height=64, codec="libvpx-vp9",
                      keyframe_interval=10, b_frames=0, encoder_options={"deadline": "realtime"})
    index = vclip.index_video(path)
    assert index.is_keyframe[30] and index.codec == "vp9"
    data = bytearray(open(path, "rb").read())
    start = int(index.packet_pos[index.frame_packet[30]])  # the Matroska block; the frame follows its header
    sync = data.find(b"\x49\x83\x42", start, start + 16)  # a keyframe's sync code, after its first byte
    assert sync > start
    data[sync + 2] ^= 0x40
    damaged = folder / "damaged_vp9.webm"
    damaged.write_bytes(data)
    return str(damaged)


def _run_child(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=child_environment(), timeout=300)


def test_damaged_vp9_keyframe_after_a_flush_is_an_error_not_a_crash(tmp_path):
    path = _damaged_vp9(tmp_path)
    good = make_video(tmp_path / "good.mp4", num_frames=40, width=96, height=64, keyframe_interval=10)
    child = _run_child(f"""
        import warnings

        import numpy as np

        import vclip
        from vclip._engine import ClipTarget, CpuBackend, DecodeStats, VideoJob, resolve_transform
        from vclip.synthetic import read_barcode

        path = {path!r}
        decoder = vclip.VideoDecoder(path, device="cpu")
        print("prefix", [read_barcode(f) for f in decoder.get_frames([0, 15, 25]).data])
        try:
            decoder.get_frames([0, 39])
        except vclip.CorruptVideoError as error:
            print("decoder:", type(error).__name__)
        # four frame threads whatever the machine's cores (FFmpeg's auto count is cores + 1)
        index = vclip.index_video(path)
        conversion = resolve_transform(None)
        geometry = conversion.index_geometry(index)
        backend = CpuBackend(threads=4)
        for frames in ([0], [0, 39], [5, 15, 35]):
            targets = (ClipTarget(np.array(frames), geometry, 0),)
            output = backend.empty((1,) + conversion.clip_shape(len(frames), geometry), "uint8")
            try:
                backend.decode_job(VideoJob(index, targets), conversion, output, DecodeStats())
                print("backend ok", frames)
            except vclip.CorruptVideoError as error:
                print("backend:", frames, type(error).__name__)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loader = vclip.ClipLoader([({good!r}, 0), (path, 1)], vclip.indexed([0, 39]), device="cpu",
                                      batch_size=2, num_threads=2, on_error="skip")
            for batch in loader:
                print("loader", batch.labels.tolist(), batch.skipped_videos == (path,))
    """)
    assert child.returncode == 0, f"the child died ({child.returncode}): {child.stderr[-2000:]}"
    lines = child.stdout.splitlines()
    assert lines[:2] == ["prefix [0, 15, 25]", "decoder: CorruptVideoError"]
    assert lines[2:5] == [
        "backend ok [0]", "backend: [0, 39] CorruptVideoError", "backend: [5, 15, 35] CorruptVideoError",
    ]
    assert lines[5:] == ["loader [0, 0] True"]


def test_later_segments_keep_the_container_colour_tags(tmp_path):
    """A segment after the first decodes on a codec context of its own: it gets the container's
    parameters like the first. MPEG-4 Part 2 has no range flag of its own; Matroska says full range,
    and FFmpeg's rgb24 of frame 7 (second GOP) follows it."""
    path = str(tmp_path / "full_range_mpeg4.mkv")
    with av.open(path, "w") as container:
        stream = container.add_stream("mpeg4", rate=30)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        stream.codec_context.color_range, stream.codec_context.gop_size = 2, 5
        for i in range(10):
            frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), 25 * i, np.uint8), format="rgb24")
            frame = frame.reformat(format="yuv420p")
            frame.pts, frame.color_range = i, 2
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    reference = ffmpeg_rgb24(path)
    frames = vclip.VideoDecoder(path, device="cpu").get_frames([0, 7, 8])
    for got, number in zip(frames.data, [0, 7, 8]):
        assert np.array_equal(got, reference[number]), f"frame {number}"

