"""Damaged files (issue 25): a native decoder crash on one video never ends the process, and what a
damaged file still holds is decoded exactly.

Crash tests run their decoding in a child Python, so that the suite survives the crash they guard
against: the child's exit status is the verdict.
"""

from __future__ import annotations

import struct
import subprocess
import sys
import textwrap
import warnings

import av
import fuzzing
import numpy as np
import pytest
from helpers import barcodes, child_environment, ffmpeg_rgb24, zero_second_half

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
        from vclip._engine import ClipTarget, CpuBackend, DecodeStats, VideoRequest, resolve_transform
        from vclip.synthetic import read_barcode

        path = {path!r}
        decoder = vclip.VideoDecoder(path, device="cpu")
        print("prefix", [read_barcode(f) for f in decoder.get_frames([0, 15, 25]).data])
        try:
            decoder.get_frames([0, 39])
        except vclip.CorruptVideoError as error:
            print("decoder:", type(error).__name__)
        # four frame threads whatever the machine's cores (FFmpeg's auto count is cores + 1); frame
        # threads are used only where concealed pictures are accepted
        index = vclip.index_video(path)
        conversion = resolve_transform(None)
        geometry = conversion.index_geometry(index)
        backend = CpuBackend(threads=4, accept_concealed=True)
        for frames in ([0], [0, 39], [5, 15, 35]):
            targets = (ClipTarget(np.array(frames), geometry, 0),)
            output = backend.empty((1,) + conversion.clip_shape(len(frames), geometry), "uint8")
            try:
                backend.decode_video(VideoRequest(index, targets), conversion, output, DecodeStats())
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



# -- truncated and damaged files (issue 25, item 6) -------------------------------------------------
def _faststart(source: str, target) -> str:
    """``source`` remuxed with its moov before the media data, as web downloads have it."""
    with av.open(source) as reader, av.open(str(target), "w", options={"movflags": "faststart"}) as writer:
        stream = reader.streams.video[0]
        copy = writer.add_stream_from_template(stream)
        for packet in reader.demux(stream):
            if packet.dts is not None:
                packet.stream = copy
                writer.mux(packet)
    return str(target)


def test_a_cut_off_mp4_with_its_moov_first_indexes_its_intact_prefix(tmp_path):
    """The usual interrupted web download: the sample table lists 120 frames, the file holds about
    half. The frames before the first lost one (presentation order) are indexed, with a warning,
    and decode exactly; a packet cut in two and the frames shown after a lost one are left out."""
    full = _faststart(make_video(tmp_path / "full.mp4", num_frames=120, width=128, height=96,
                                 keyframe_interval=30, b_frames=2), tmp_path / "fast.mp4")
    data = open(full, "rb").read()
    complete = vclip.index_video(full)
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: int(len(data) * 0.55)])
    with pytest.warns(vclip.TruncatedVideoWarning, match=r"cut.mp4: truncated: the file ends at byte \d+, inside "
                                                         r"packet (\d+) of 120; its first (\d+) frames are indexed"):
        index = vclip.index_video(cut)
    lost = int(np.flatnonzero(complete.packet_pos + complete.packet_size > cut.stat().st_size)[0])
    intact = int(np.count_nonzero(complete.pts < complete.packet_pts[lost:].min()))  # frames before the first lost
    # the lost packets' pts are bounded by their decode timestamps (PyAV shows no composition
    # offsets of the sample table): up to the two B-frames of reordering are left out too
    assert intact - 2 <= index.num_frames <= intact and index.num_frames > 50
    np.testing.assert_array_equal(index.pts, complete.pts[: index.num_frames])
    frames = list(range(index.num_frames))
    assert barcodes(vclip.VideoDecoder(cut, device="cpu").get_frames(frames)) == frames
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loader = vclip.ClipLoader([(str(cut), 0)], vclip.contiguous(8, clips_per_video=3), device="cpu",
                                  batch_size=3)
        batch = next(iter(loader))
    assert not batch.skipped_videos and all(barcodes(clip) == list(clip_frames) for clip, clip_frames
                                            in zip(batch.data, batch.frame_indices.tolist()))
    stub = tmp_path / "stub.mp4"
    stub.write_bytes(data[: int(complete.packet_pos[0]) + 10])
    with pytest.raises(vclip.CorruptVideoError, match=r"stub.mp4: truncated: the file ends at byte \d+, inside its "
                                                      r"first packet"):
        vclip.index_video(stub)


def test_a_transport_stream_cut_on_a_packet_boundary_leaves_out_the_cut_frame(tmp_path):
    """Cut at a multiple of 188 bytes, inside the last picture: FFmpeg hands over what is left and
    the decoder conceals it as a copy of frame 18; it is left out, with a warning."""
    source = make_video(tmp_path / "full.ts", num_frames=20, width=64, height=48, keyframe_interval=10)
    data = open(source, "rb").read()
    cut = tmp_path / "cut.ts"
    cut.write_bytes(data[:-188])
    with pytest.warns(vclip.TruncatedVideoWarning, match=r"cut.ts: truncated: the file ends inside the last packet"):
        index = vclip.index_video(cut)
    assert index.num_frames == 19
    assert barcodes(vclip.VideoDecoder(cut, device="cpu").get_frames(list(range(19)))) == list(range(19))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a whole file, ending on the same kind of packet: no warning
        vclip.clear_index_cache()
        assert vclip.index_video(source).num_frames == 20


def _mpeg2_crc(data: bytes) -> int:
    """The CRC-32 that ends an MPEG-TS table section (polynomial 0x04C11DB7, no reflection)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte << 24
        for _ in range(8):
            crc = ((crc << 1) ^ 0x04C11DB7 if crc & 0x80000000 else crc << 1) & 0xFFFFFFFF
    return crc


def _with_registration_tag(data: bytes, tag: bytes) -> bytes:
    """``data`` (a transport stream of one program) with a registration descriptor of ``tag`` on its
    H.264 stream (type 0x1B): FFmpeg's demuxer takes the descriptor's four bytes as the codec tag."""
    packets = [bytearray(data[at:at + 188]) for at in range(0, len(data), 188)]

    def section_of(packet):  # a packet that starts a section: where the section starts in it
        return 4 + 1 + packet[4]

    pat = next(packet for packet in packets if packet[1] & 0x40 and (packet[1] & 0x1F, packet[2]) == (0, 0))
    at = section_of(pat)
    pmt_pid = ((pat[at + 10] & 0x1F) << 8) | pat[at + 11]
    patched = 0
    for packet in packets:
        if not packet[1] & 0x40 or ((packet[1] & 0x1F) << 8) | packet[2] != pmt_pid:
            continue
        at = section_of(packet)
        body = packet[at:at + 3 + (((packet[at + 1] & 0x0F) << 8) | packet[at + 2]) - 4]  # without its CRC
        entry = 12 + (((body[10] & 0x0F) << 8) | body[11])
        while entry < len(body):
            info = ((body[entry + 3] & 0x0F) << 8) | body[entry + 4]
            if body[entry] == 0x1B:
                body[entry + 5:entry + 5] = bytes([0x05, len(tag)]) + tag
                info += 2 + len(tag)
                body[entry + 3:entry + 5] = bytes([(body[entry + 3] & 0xF0) | info >> 8, info & 0xFF])
                patched += 1
            entry += 5 + info
        length = len(body) - 3 + 4
        body[1:3] = bytes([(body[1] & 0xF0) | length >> 8, length & 0xFF])
        section = body + _mpeg2_crc(bytes(body)).to_bytes(4, "big")
        assert at + len(section) <= 188
        packet[at:at + len(section)] = section
    assert patched
    return b"".join(packets)


def test_a_codec_tag_that_is_not_text_still_decodes_every_frame(tmp_path):
    """A registration descriptor of four non-ASCII bytes makes the stream's codec tag unreadable
    as text to PyAV; the CPU decoder raised a bare ``UnicodeDecodeError`` (a fuzzed file found it)."""
    source = make_video(tmp_path / "plain.ts", num_frames=30, width=64, height=48, keyframe_interval=10)
    tagged = tmp_path / "tagged.ts"
    tagged.write_bytes(_with_registration_tag(open(source, "rb").read(), b"\xff\xfe\x80\x81"))
    with av.open(str(tagged)) as container, pytest.raises(UnicodeDecodeError):
        _ = container.streams.video[0].codec_context.codec_tag  # the case is real: PyAV cannot read it
    frames = [0, 9, 10, 11, 29, 3]
    assert barcodes(vclip.VideoDecoder(tagged, device="cpu").get_frames(frames)) == frames
    # with concealment accepted the decoder runs frame threads: every segment gets a fresh context made like the first
    assert barcodes(vclip.VideoDecoder(tagged, device="cpu", accept_concealed=True).get_frames(frames)) == frames


def test_an_avi_remnant_of_one_whole_packet_indexes_that_frame(tmp_path):
    """An AVI cut right after its first packet: the demuxer's table lists the next packet, whose
    decode time bounds when lost frames are shown; the kept frame, shown at that very time, was
    taken for one shown after a lost one and refused with a wrong reason ("an edit list or
    composition offsets leave no frame to show")."""
    source = make_video(tmp_path / "full.avi", num_frames=10, width=64, height=48, keyframe_interval=5)
    with av.open(source) as container:
        first = next(packet for packet in container.demux(video=0) if packet.size)
    remnant = tmp_path / "remnant.avi"
    remnant.write_bytes(open(source, "rb").read()[:first.pos + first.size + 8])  # the next chunk's header too
    with pytest.warns(vclip.TruncatedVideoWarning, match=r"remnant.avi: truncated: the file ends at byte \d+, inside "
                                                         r"packet 1 of 2; its first 1 frames are indexed"):
        index = vclip.index_video(remnant)
    assert index.num_frames == 1
    assert barcodes(vclip.VideoDecoder(remnant, device="cpu").get_frames([0])) == [0]


def test_a_damaged_sync_sample_table_keeps_random_access_exact(tmp_path):
    """An HEVC MP4 whose first stss entry is 0: FFmpeg then calls a picture that is not an IRAP a
    keyframe, and decoding from it gave no frames 4-9. Keyframes the bitstream denies are not used."""
    path = make_video(tmp_path / "hevc.mp4", num_frames=10, width=64, height=48, codec="libx265", keyframe_interval=5)
    data = bytearray(open(path, "rb").read())
    (offset,) = [offset for offset, _, box in fuzzing.mp4_boxes(bytes(data)) if box == b"stss"]
    assert struct.unpack_from(">II", data, offset + 12)[0] == 2  # two sync samples; the first becomes 0
    struct.pack_into(">I", data, offset + 16, 0)
    damaged = tmp_path / "stss0.mp4"
    damaged.write_bytes(data)
    with av.open(str(damaged)) as container:  # the premise: FFmpeg's keyframes are not the IRAPs
        flagged = [packet.is_keyframe for packet in container.demux(video=0) if packet.size]
    assert flagged != [packet_is_key for packet_is_key in vclip.index_video(path).packet_is_keyframe.tolist()]
    decoder = vclip.VideoDecoder(damaged, device="cpu")
    for frame in range(10):
        assert barcodes(decoder.get_frames([frame])) == [frame]


def _video_with_a_damaged_frame(folder, frame: int = 25) -> str:
    """60 frames, a keyframe every 20, no B-frames: ``frame``'s NAL units are random bytes (its
    decoder refuses it), so frames from it to the end of its group of pictures cannot be decoded."""
    path = make_video(folder / "gops.mp4", num_frames=60, width=96, height=64, keyframe_interval=20, b_frames=0)
    index = vclip.index_video(path)
    data = bytearray(open(path, "rb").read())
    packet = int(index.frame_packet[frame])
    start, size = int(index.packet_pos[packet]), int(index.packet_size[packet])
    data[start + 4:start + size] = np.random.default_rng(3).integers(0, 256, size - 4, np.uint8).tobytes()
    damaged = folder / "damaged_frame.mp4"
    damaged.write_bytes(data)
    return str(damaged)


@pytest.mark.parametrize("threads", [1, 4])
def test_a_damaged_frame_is_named_and_costs_only_the_frames_decoded_from_it(tmp_path, threads):
    """The error names frame 25 (not the range asked for) and carries the frames lost: 25-39, up
    to the next keyframe; the frames of the other groups of pictures are decoded and written.
    With frame threads the decoder reports the damage packets later: the same frames are lost."""
    from vclip._engine import ClipTarget, CpuBackend, DecodeStats, VideoRequest, resolve_transform

    path = _video_with_a_damaged_frame(tmp_path)
    index = vclip.index_video(path)
    conversion = resolve_transform(None)
    geometry = conversion.index_geometry(index)
    clips = [np.arange(10, 18), np.arange(22, 30), np.arange(36, 44), np.arange(50, 58)]
    output = np.zeros((len(clips), 8, 64, 96, 3), np.uint8)
    job = VideoRequest(index, tuple(ClipTarget(frames, geometry, slot) for slot, frames in enumerate(clips)))
    with pytest.raises(vclip.CorruptVideoError, match=r"damaged_frame.mp4: frame 25 cannot be decoded \(Invalid "
                                                      r"data found when processing input\): frames \[25, 26, 27, 28, "
                                                      r"29\]\.\.\. \(9 of the frames asked for\)") as caught:
        CpuBackend(threads=threads, accept_concealed=threads > 1).decode_video(job, conversion, output, DecodeStats())
    assert caught.value.frames == (25, 26, 27, 28, 29, 36, 37, 38, 39)
    for slot in (0, 3):  # the clips that need none of them
        assert barcodes(output[slot]) == clips[slot].tolist()
    decoder = vclip.VideoDecoder(path, device="cpu")
    assert barcodes(decoder.get_frames([18, 19, 41, 59])) == [18, 19, 41, 59]


def test_a_damaged_frame_keeps_the_downscaled_frames_converted_in_batches(tmp_path):
    """A whole-factor downscale converts pictures in batches (BlockConverter): those it still
    holds when the frames are found lost are written too, so the clips that avoid them are kept."""
    from vclip._engine import ClipTarget, CpuBackend, DecodeStats, VideoRequest, resolve_transform

    path = _video_with_a_damaged_frame(tmp_path)
    index = vclip.index_video(path)
    conversion = resolve_transform(None, 0.5)
    geometry = conversion.index_geometry(index)
    clips = [np.arange(10, 18), np.arange(22, 30), np.arange(50, 58)]
    output = np.zeros((len(clips), 8, 32, 48, 3), np.uint8)
    job = VideoRequest(index, tuple(ClipTarget(frames, geometry, slot) for slot, frames in enumerate(clips)))
    with pytest.raises(vclip.CorruptVideoError, match="frame 25 cannot be decoded"):
        CpuBackend(threads=1).decode_video(job, conversion, output, DecodeStats())
    decoder = vclip.VideoDecoder(path, device="cpu")
    for slot in (0, 2):  # the last clip's pictures were still held when the error was raised
        assert np.array_equal(output[slot], decoder.get_frames(clips[slot], scaling_factor=0.5).data)


def test_the_loader_replaces_only_the_clips_that_need_a_damaged_frame(tmp_path):
    """The video stays in use, epoch after epoch: its clips outside frames 25-39 come from it,
    exactly; the others are replaced (seeded, the same on a second run); it is reported once."""
    damaged = _video_with_a_damaged_frame(tmp_path)
    good = make_video(tmp_path / "good.mp4", num_frames=60, width=96, height=64, keyframe_interval=20, seed=4)
    options = dict(device="cpu", batch_size=4, num_threads=2, seed=1)
    sampler = vclip.contiguous(6, starts="even", clips_per_video=6)
    intact = vclip.ClipLoader([(str(tmp_path / "gops.mp4"), 0), (good, 1)], sampler, **options)
    starts = sorted(clip[0] for b in intact for video, clip in zip(b.video_ids.tolist(), b.frame_indices.tolist())
                    if video == 0)
    avoiding = [start for start in starts if start + 5 < 25 or start > 39]
    assert len(starts) == 6 and 2 <= len(avoiding) < 6
    runs = []
    for _ in range(2):
        loader = vclip.ClipLoader([(damaged, 0), (good, 1)], sampler, **options)
        epochs = []
        for epoch in range(2):
            loader.set_epoch(epoch)
            epochs.append([(b.video_ids.tolist(), b.frame_indices.tolist(), barcodes_of(b), b.skipped_videos)
                           for b in loader])
        runs.append(epochs)
        problems = loader.stats().skipped.videos
    assert runs[0] == runs[1]
    for batches in runs[0]:
        from_damaged = [frames for ids, frames_list, _, _ in batches for video, frames in zip(ids, frames_list)
                        if video == 0]
        assert sorted(clip[0] for clip in from_damaged) == avoiding  # its clips that avoid 25-39
        assert all(found == frames for _, frames_list, found_list, _ in batches
                   for frames, found in zip(frames_list, found_list))
        from_good = [video for ids, *_ in batches for video in ids if video == 1]
        assert len(from_good) == 6 + 6 - len(avoiding)  # its own clips, and the replacements
        assert set().union(*(skipped for *_, skipped in batches)) == {damaged}
    assert list(problems) == [damaged] and "frame 25 cannot be decoded" in problems[damaged]


def barcodes_of(batch) -> list[list[int]]:
    return [barcodes(clip) for clip in batch.data.numpy()]


@pytest.mark.gpu
def test_the_gpu_loader_keeps_the_clips_that_avoid_a_damaged_frame(tmp_path):
    """On the GPU the video stays in use too: NVDEC fails (or conceals) at frame 25, the CPU then
    decides, and the clips it could decode are written before its error reaches the loader."""
    damaged = _video_with_a_damaged_frame(tmp_path)
    good = make_video(tmp_path / "good.mp4", num_frames=60, width=96, height=64, keyframe_interval=20, seed=4)
    sampler = vclip.contiguous(6, starts="even", clips_per_video=6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NVDEC's failure falls back to the CPU with a warning
        loader = vclip.ClipLoader([(damaged, 0), (good, 1)], sampler, device="cuda", batch_size=4, seed=1)
        batches = [(b.video_ids.tolist(), b.frame_indices.tolist(), barcodes_of_gpu(b)) for b in loader]
    kept = [(frames, found) for ids, frames_list, found_list in batches
            for video, frames, found in zip(ids, frames_list, found_list) if video == 0]
    avoiding = [(frames, found) for frames, found in kept if frames[-1] < 25 or frames[0] > 39]
    assert len(avoiding) >= 2 and all(frames == found for frames, found in avoiding)
    # The video is kept, its problem named once: on the GPU, NVDEC's CPU fallback names the frames lost
    # (25 first) where the CPU decoder alone names the damaged frame.
    problem = loader.stats().skipped.videos.get(damaged, "")
    assert not problem or "cannot be decoded" in problem or "[25," in problem


def barcodes_of_gpu(batch) -> list[list[int]]:
    return [barcodes(clip) for clip in batch.data.cpu().numpy()]


# -- damage the decoder concealed (issue 47, item 2) ------------------------------------------------
def _video_with_a_concealed_keyframe(folder) -> tuple[str, str]:
    """90 frames of 96x64, keyframes at 0, 30 and 60, two B-frames, and its copy whose keyframe 30
    lost the second half of its bytes: FFmpeg decodes that copy without an error, conceals the lost
    slices, flags picture 30 corrupt, and decodes frames 31-59 from it."""
    good = make_video(folder / "good.mp4", num_frames=90, width=96, height=64, keyframe_interval=30)
    damaged = zero_second_half(good, folder / "concealed.mp4", 30)
    with av.open(damaged) as container:  # the premise: no decode error, one flagged picture
        flagged = [frame.pts for frame in container.decode(video=0) if frame.is_corrupt]
    assert flagged == [int(vclip.index_video(good).pts[30])]
    return good, damaged


def test_a_concealed_frame_and_the_frames_decoded_from_it_are_lost(tmp_path):
    """Frames 30-59 came out garbled with no word before: now asking for any of them raises a
    CorruptVideoError naming frame 30 and carrying the frames lost; the other groups are exact,
    and ``accept_concealed=True`` gives FFmpeg's concealed pictures."""
    good, damaged = _video_with_a_concealed_keyframe(tmp_path)
    decoder = vclip.VideoDecoder(damaged, device="cpu")
    with pytest.raises(vclip.CorruptVideoError, match=r"concealed.mp4: frame 30 cannot be decoded \(damaged; the "
                                                      r"decoder concealed it\): frames \[33, 58\]") as caught:
        decoder.get_clips(vclip.indexed([20, 33, 58, 75]))
    assert caught.value.frames == (33, 58)
    with pytest.raises(vclip.CorruptVideoError) as caught:
        decoder.get_frames([30])
    assert caught.value.frames == (30,)
    assert barcodes(decoder.get_frames([0, 29, 60, 89])) == [0, 29, 60, 89]
    accepted = vclip.VideoDecoder(damaged, device="cpu", accept_concealed=True).get_frames([30, 45])
    intact = vclip.VideoDecoder(good, device="cpu").get_frames([30, 45])
    assert accepted.data.shape == intact.data.shape and not np.array_equal(accepted.data, intact.data)
    with pytest.raises(vclip.ArgumentError, match=r"decode_processes \(2\) must be 0 with accept_concealed=True"):
        vclip.VideoDecoder(damaged, device="cpu", accept_concealed=True, decode_processes=2)


@pytest.mark.parametrize("decode_processes", [0, 1])
def test_the_loader_replaces_or_raises_for_clips_needing_concealed_frames(tmp_path, decode_processes):
    """With ``on_error="skip"`` the clips that need frames 30-59 are replaced by clips of the good
    video and the damaged video is reported; with ``"raise"`` its CorruptVideoError comes out."""
    good, damaged = _video_with_a_concealed_keyframe(tmp_path)
    videos = [(damaged, 0), (good, 1)]
    loader = vclip.ClipLoader(videos, vclip.indexed([40, 44]), device="cpu", batch_size=2,
                              decode_processes=decode_processes)
    (batch,) = list(loader)
    assert batch.labels.tolist() == [1, 1] and batch.skipped_videos == (damaged,)
    assert [barcodes(clip) for clip in batch.data] == [[40, 44], [40, 44]]
    assert list(loader.stats().skipped.videos) == [damaged]
    loader.close()
    raising = vclip.ClipLoader(videos, vclip.indexed([40, 44]), device="cpu", batch_size=2, on_error="raise",
                               decode_processes=decode_processes)
    with pytest.raises(vclip.CorruptVideoError, match="frame 30 cannot be decoded") as caught:
        list(raising)
    assert caught.value.frames == (40, 44)
    raising.close()
