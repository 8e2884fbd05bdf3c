"""Keyframe extraction: codec keyframes decode only their own packets, scene cuts are found where
the shots change, --max spreads evenly, and saved images hold exactly the frames found."""

import json

import av
import numpy as np
import pytest
from helpers import barcodes, devices

import vclip
import vclip._scenes.signals as scene_signals_module
import vclip.keyframes as keyframes_module
from vclip._device import CPU, Device, gpu_unavailable_reason, resolve_device
from vclip.gop import keyframe_chunks
from vclip.keyframes import extract_keyframes
from vclip.synthetic import make_shots_video, read_barcode

SHOT_LENGTHS = (40, 35, 25)  # shots start at frames 0, 40, 75


@pytest.fixture(scope="module")
def shots_video(tmp_path_factory):
    path = tmp_path_factory.mktemp("shots") / "shots.mp4"
    return make_shots_video(path, shot_lengths=SHOT_LENGTHS, width=192, height=144)


def decoded_image(path):
    with av.open(str(path)) as container:
        return next(container.decode(video=0)).to_ndarray(format="rgb24")


def ink(region, background):
    """How many pixels of ``region`` differ from the ``background`` colour."""
    return int((region != background).any(axis=-1).sum())


@pytest.mark.parametrize("name", ["h264", "hevc", "long_gop", "odd", "offset"])
def test_codec_method_is_the_index_keyframes_and_decodes_only_their_packets(videos, name):
    index = vclip.index_video(videos[name])
    result = extract_keyframes(videos[name], method="codec", device="cpu")
    assert result.frame_indices.tolist() == index.keyframe_indices.tolist()
    assert result.packets_decoded == len(index.keyframe_indices) < index.num_packets
    assert barcodes(result.frames) == index.keyframe_indices.tolist()
    assert result.pts_seconds.tolist() == index.pts_seconds[index.keyframe_indices].tolist()
    assert result.frames.shape == (len(index.keyframe_indices), index.height, index.width, 3)


def test_codec_keyframes_of_the_h264_fixture(videos):
    result = extract_keyframes(videos["h264"], device="cpu")
    assert result.frame_indices.tolist() == [0, 30, 60, 90, 120]
    assert result.method == "codec" and result.device == "cpu" and not result.fell_back_to_cpu
    assert "frame_indices=[0, 30, 60, 90, 120]" in repr(result) and "numpy[5, 240, 320, 3]" in repr(result)


@pytest.mark.parametrize(
    "max_frames, expected",
    [
        (1, [0]),
        (2, [0, 120]),
        (3, [0, 60, 120]),
        (4, [0, 30, 90, 120]),
        (5, [0, 30, 60, 90, 120]),
        (50, [0, 30, 60, 90, 120]),
    ],
)
def test_max_frames_spreads_evenly_like_the_keyframe_sampler(videos, max_frames, expected):
    result = extract_keyframes(videos["h264"], max_frames=max_frames, device="cpu")
    assert result.frame_indices.tolist() == expected
    assert result.packets_decoded == len(expected)
    assert expected == vclip.keyframe(max_frames).sample(vclip.index_video(videos["h264"]))[0].tolist()


def test_scene_method_finds_every_cut_and_nothing_else(shots_video):
    result = extract_keyframes(shots_video, method="scene", device="cpu")
    assert result.frame_indices.tolist() == [0, 40, 75]
    assert barcodes(result.frames) == [0, 40, 75]
    assert result.packets_decoded >= sum(SHOT_LENGTHS)  # every frame was looked at


def test_scene_cuts_are_not_where_the_codec_put_keyframes(videos):
    """A panning synthetic video without cuts: the codec has keyframes every 30 frames, scenes only frame 0."""
    assert extract_keyframes(videos["h264"], method="scene", device="cpu").frame_indices.tolist() == [0]
    assert extract_keyframes(videos["long_gop"], method="scene", device="cpu").frame_indices.tolist() == [0]


def test_scene_method_with_max_frames_and_scaling(shots_video):
    result = extract_keyframes(shots_video, method="scene", max_frames=2, scaling_factor=0.5, device="cpu")
    assert result.frame_indices.tolist() == [0, 75]
    assert result.frames.shape == (2, 72, 96, 3)
    assert barcodes(result.frames) == [0, 75]


def test_scene_signal_is_the_same_in_chunks(shots_video, monkeypatch):
    """The features and gap distances carried across decode chunks equal one pass over the video."""
    decoder = vclip.VideoDecoder(shots_video)
    whole = scene_signals_module.scene_signals(decoder, 64)
    monkeypatch.setattr(scene_signals_module, "CHUNK_FRAMES", 7)
    chunks = keyframe_chunks(decoder.index, 7)
    assert len(chunks) > 1 and all(decoder.index.is_keyframe[start] for start, _ in chunks)
    chunked = scene_signals_module.scene_signals(decoder, 64)
    for name in ("H", "B"):
        assert np.allclose(chunked.distances[name], whole.distances[name], equal_nan=True, atol=1e-6)
    assert np.allclose(chunked.luma_mean, whole.luma_mean) and np.array_equal(chunked.dark_share, whole.dark_share)
    assert np.array_equal(chunked.thumbnails, whole.thumbnails)
    cut_changes = whole.distances["H"][1]
    assert np.isnan(cut_changes[0]) and sorted(np.argsort(np.nan_to_num(cut_changes))[-2:].tolist()) == [40, 75]


def test_scene_method_on_real_footage(shared_videos):
    """nasa_13013.mp4 stream 0 dissolves to a new shot from frame 127 (the old shot shows faintly
    until about frame 150) and cuts at frame 202; stream 3 holds the same shots at 30000/1001 fps
    instead of 25: the dissolve from frame 152 to about 180, the cut at 240."""
    result = extract_keyframes(shared_videos / "nasa_13013.mp4", method="scene", device="cpu")
    dissolve_end, cut = result.frame_indices.tolist()[1:]
    assert result.frame_indices[0] == 0 and 127 < dissolve_end <= 150 and cut == 202
    stream3 = vclip.keyframes.find_shot_boundaries(shared_videos / "nasa_13013.mp4", stream_index=3, device="cpu")
    assert [b.kind for b in stream3] == ["dissolve", "cut"]
    assert 152 <= stream3[0].start < stream3[0].frame <= 180 and stream3[1].frame == 240


def test_save_writes_images_contact_sheet_and_records(shots_video, tmp_path):
    result = extract_keyframes(shots_video, method="scene", device="cpu")
    records = result.save(tmp_path / "out", image_format="png")
    assert [r["frame_index"] for r in records] == [0, 40, 75]
    assert all(r["method"] == "scene" and r["file"] == shots_video for r in records)
    assert [r["pts_seconds"] for r in records] == pytest.approx([0.0, 40 / 30, 75 / 30])
    for record, frame in zip(records, result.frames):
        assert np.array_equal(decoded_image(record["image"]), frame)  # PNG is lossless
    sheet = decoded_image(tmp_path / "out" / "contact_sheet.png")
    assert sheet.shape[0] > 96 and sheet.shape[1] > 3 * 96
    json.dumps(records)  # plain Python types, ready for a manifest


def test_save_as_jpeg_keeps_the_barcodes(videos, tmp_path):
    records = extract_keyframes(videos["h264"], max_frames=2, device="cpu").save(tmp_path, image_format="jpg")
    assert [read_barcode(decoded_image(r["image"])) for r in records] == [0, 120]
    assert (tmp_path / "contact_sheet.jpg").read_bytes()[:2] == b"\xff\xd8"


def test_contact_sheet_thumbnails_follow_thumbnail_width(videos, tmp_path):
    """Five 320x240 keyframes in a row: the sheet grows by five tile widths and one tile height."""
    keyframes = extract_keyframes(videos["h264"], device="cpu")
    sheets = {}
    for width in (64, 160):
        keyframes.save(tmp_path / str(width), image_format="png", thumbnail_width=width)
        sheets[width] = decoded_image(tmp_path / str(width) / "contact_sheet.png")
    assert sheets[160].shape[1] - sheets[64].shape[1] == 5 * (160 - 64)
    assert sheets[160].shape[0] - sheets[64].shape[0] == 120 - 48  # 240 * width / 320
    assert 5 * 64 < sheets[64].shape[1] < 5 * 64 + 40  # the tiles and small gaps


def test_contact_sheet_thumbnails_never_enlarge_frames(shots_video, tmp_path):
    scene = extract_keyframes(shots_video, method="scene", device="cpu")
    scene.save(tmp_path, image_format="png", thumbnail_width=1000)
    small = decoded_image(tmp_path / "contact_sheet.png")
    scene.save(tmp_path, image_format="png", thumbnail_width=192)
    assert np.array_equal(decoded_image(tmp_path / "contact_sheet.png"), small)  # 192 is the frames' width


def test_contact_sheet_captions_are_drawn(videos, tmp_path):
    """Under each tile, the frame number and time in Pillow's font: ink on the background, a
    different picture for each caption."""
    three = extract_keyframes(videos["h264"], max_frames=3, device="cpu")
    three.save(tmp_path, image_format="png", thumbnail_width=96)
    sheet = decoded_image(tmp_path / "contact_sheet.png")
    background = sheet[0, 0]
    tile_bottom = 4 + 72  # the gap, then 96x72 tiles
    captions = [sheet[tile_bottom:, left : left + 96] for left in (4, 4 + 100, 4 + 200)]  # "0: 0.00s", "60: 2.00s", ...
    assert all(ink(caption, background) > 40 for caption in captions)
    assert not np.array_equal(captions[0], captions[1]) and not np.array_equal(captions[1], captions[2])
    assert ink(sheet[:, 100:104], background) == 0  # the gap between the first two tiles and captions


def test_chunks_on_the_session_threads_give_the_signal_of_one_pass(videos, monkeypatch):
    """The GPU's path (chunks decoded on the session threads, taken in order) run with CPU frames:
    the same tables as one pass; a failure in the caller cancels the chunks not started."""
    from vclip._thread_pools import SharedThreadPool

    decoder = vclip.VideoDecoder(videos["h264"])  # 150 frames, a keyframe every 30
    whole = scene_signals_module.scene_signals(decoder, 64)
    monkeypatch.setattr(scene_signals_module, "MIN_CHUNK_FRAMES", 7)
    chunked = scene_signals_module.scene_signals(decoder, 64, sessions=8)
    for name in ("H", "B"):
        assert np.array_equal(chunked.distances[name], whole.distances[name], equal_nan=True)
    assert np.array_equal(chunked.luma_mean, whole.luma_mean)
    assert np.array_equal(chunked.thumbnails, whole.thumbnails)

    decoded = []
    get_frames = decoder.get_frames
    monkeypatch.setattr(decoder, "get_frames", lambda frames, **options: decoded.append(frames[0]) or
                        get_frames(frames, **options))
    sessions = SharedThreadPool(1, "test-scene-decode")  # one session, two chunks ahead
    monkeypatch.setattr(scene_signals_module, "_pools", {1: sessions})

    def stop(done, total):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        scene_signals_module.scene_signals(decoder, 64, on_progress=stop, sessions=1)
    sessions.get().shutdown(wait=True)  # every chunk still queued would run now
    assert len(decoded) < 5 and decoded == sorted(decoded)  # 5 chunks; the ones not started were cancelled


@pytest.mark.gpu
def test_gpu_chunks_decoded_at_once_give_the_signal_of_one_pass(videos, monkeypatch):
    """On the GPU the chunks are decoded by several NVDEC sessions at once; the tables are those of
    one chunk decoded by one session."""
    decoder = vclip.VideoDecoder(videos["h264"], device="cuda")
    monkeypatch.setattr(scene_signals_module, "MIN_CHUNK_FRAMES", 1024)
    whole = scene_signals_module.scene_signals(decoder, 64, sessions=8)
    monkeypatch.setattr(scene_signals_module, "MIN_CHUNK_FRAMES", 7)
    assert len(keyframe_chunks(decoder.index, 10)) == 5  # 150 frames / (2 x 8 sessions); GOP 30
    chunked = scene_signals_module.scene_signals(decoder, 64, sessions=8)
    for name in ("H", "B"):
        assert np.allclose(chunked.distances[name], whole.distances[name], equal_nan=True, atol=1e-6)
    assert np.allclose(chunked.luma_mean, whole.luma_mean) and np.array_equal(chunked.dark_share, whole.dark_share)
    assert np.array_equal(chunked.thumbnails, whole.thumbnails)


def test_save_refuses_tiny_thumbnails(videos, tmp_path):
    with pytest.raises(ValueError, match=r"thumbnail_width \(8\) must be an integer >= 16"):
        extract_keyframes(videos["h264"], max_frames=1, device="cpu").save(tmp_path, thumbnail_width=8)


def test_scene_progress_advances_within_the_file(videos, monkeypatch):
    """on_progress follows the frames analysed, chunk by chunk, from 0 to the frame count."""
    monkeypatch.setattr(scene_signals_module, "CHUNK_FRAMES", 7)  # a chunk per 30-frame GOP of the 150 frames
    calls = []
    extract_keyframes(videos["h264"], method="scene", device="cpu",
                      on_progress=lambda done, total: calls.append((done, total)))
    done = [d for d, _ in calls]
    assert calls[0] == (0, 150) and calls[-1] == (150, 150) and {total for _, total in calls} == {150}
    assert len(calls) >= 4 and done == sorted(set(done))  # advanced more than once, never back


def test_codec_progress_counts_the_keyframes_decoded(videos):
    calls = []
    extract_keyframes(videos["h264"], max_frames=3, device="cpu",
                      on_progress=lambda done, total: calls.append((done, total)))
    assert calls == [(0, 3), (3, 3)]


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(method="shots"), r"method \('shots'\) must be one of 'codec', 'scene'"),
        (dict(max_frames=0), r"max_frames \(0\) must be an integer >= 1"),
        (dict(scene_threshold=1), r"scene_threshold \(1\) must be a number > 1"),
        (dict(scaling_factor=1.5), r"scaling_factor \(1.5\) must be a number in \(0, 1\]"),
        (dict(analysis_width=0), r"analysis_width \(0\) must be an integer >= 1"),
    ],
)
def test_bad_options_are_refused_before_decoding(videos, options, message):
    with pytest.raises(ValueError, match=message):
        extract_keyframes(videos["h264"], **options)


def test_a_stream_that_flags_no_keyframe(videos, tmp_path, monkeypatch):
    monkeypatch.setattr(vclip.VideoIndex, "keyframe_indices", property(lambda index: np.empty(0, np.int64)))
    result = extract_keyframes(videos["h264"], scaling_factor=0.5, device="cpu")
    assert len(result) == 0 and result.frames.shape == (0, 120, 160, 3) and result.packets_decoded == 0
    assert result.save(tmp_path) == [] and list(tmp_path.iterdir()) == []


def test_save_refuses_unknown_image_formats(videos, tmp_path):
    with pytest.raises(ValueError, match=r"image_format \('gif'\) must be one of 'png', 'jpg'"):
        extract_keyframes(videos["h264"], max_frames=1, device="cpu").save(tmp_path / "out", image_format="gif")
    assert not (tmp_path / "out").exists()


def test_bad_file_names_the_file(tmp_path):
    with pytest.raises(vclip.VideoNotFoundError, match="nope.mp4: file does not exist"):
        extract_keyframes(tmp_path / "nope.mp4")


@pytest.mark.gpu
@pytest.mark.parametrize("method", ["codec", "scene"])
def test_gpu_finds_the_same_keyframes(shots_video, method):
    cpu = extract_keyframes(shots_video, method=method, device="cpu")
    gpu = extract_keyframes(shots_video, method=method, device="cuda")
    assert gpu.device.startswith("cuda") and not gpu.fell_back_to_cpu
    assert gpu.frame_indices.tolist() == cpu.frame_indices.tolist()
    assert barcodes(gpu.frames.get()) == cpu.frame_indices.tolist()


@pytest.mark.gpu
def test_gpu_scene_progress_and_contact_sheet(shots_video, tmp_path):
    calls = []
    result = extract_keyframes(
        shots_video, method="scene", device="cuda", on_progress=lambda done, total: calls.append((done, total))
    )
    assert calls[0] == (0, sum(SHOT_LENGTHS)) and calls[-1] == (sum(SHOT_LENGTHS), sum(SHOT_LENGTHS))
    result.save(tmp_path / "gpu", image_format="png", thumbnail_width=96)
    cpu = extract_keyframes(shots_video, method="scene", device="cpu")
    cpu.save(tmp_path / "cpu", image_format="png", thumbnail_width=96)
    gpu_sheet, cpu_sheet = (decoded_image(tmp_path / name / "contact_sheet.png") for name in ("gpu", "cpu"))
    assert gpu_sheet.shape == cpu_sheet.shape


@pytest.mark.parametrize("device", devices())
def test_decode_processes_give_the_signal_of_one_pass(videos, monkeypatch, device, shared_decode_processes):
    """Chunks decoded by the threads of two worker processes (shared by every decoder asking for
    two): the tables of one pass in this process, and the same shot boundaries."""
    in_process = vclip.VideoDecoder(videos["h264"], device=device)
    whole = scene_signals_module.scene_signals(in_process, 64)
    decoder = vclip.VideoDecoder(videos["h264"], device=device, decode_processes=2)
    assert decoder._dispatcher.backend is vclip.VideoDecoder(videos["long_gop"], device=device,
                                                             decode_processes=2)._dispatcher.backend
    sessions = keyframes_module._sessions(resolve_device(device).device, 2, 1)
    assert sessions == 2 * (4 if device == "cuda" else 2)
    monkeypatch.setattr(scene_signals_module, "MIN_CHUNK_FRAMES", 7)
    chunked = scene_signals_module.scene_signals(decoder, 64, sessions=sessions)
    assert len(keyframe_chunks(decoder.index, 7)) == 5  # 150 frames, a keyframe every 30
    for name in ("H", "B"):
        assert np.allclose(chunked.distances[name], whole.distances[name], equal_nan=True, atol=1e-6)
    assert np.allclose(chunked.luma_mean, whole.luma_mean) and np.array_equal(chunked.dark_share, whole.dark_share)
    assert np.array_equal(chunked.thumbnails, whole.thumbnails)
    assert (keyframes_module.find_shot_boundaries(videos["h264"], device=device, decode_processes=2)
            == keyframes_module.find_shot_boundaries(videos["h264"], device=device))


def test_decode_processes_must_be_a_count(videos):
    with pytest.raises(vclip.ArgumentError, match="decode_processes"):
        vclip.VideoDecoder(videos["h264"], decode_processes=-1)


# -- many videos -----------------------------------------------------------------------------------
def test_many_videos_give_each_videos_keyframes_in_order(videos, tmp_path):
    """In worker processes and one by one: each video's keyframes as extract_keyframes gives them,
    a bad file's VideoError in its place, and each result seen once as it is ready."""
    (tmp_path / "notes.mp4").write_text("not a video\n" * 40)
    paths = [videos["h264"], tmp_path / "missing.mp4", videos["hevc"], tmp_path / "notes.mp4", videos["odd"]]
    for workers in (2, 1):
        seen = []
        results = list(keyframes_module.extract_keyframes_many(paths, method="scene", max_frames=3, device="cpu",
                                                                workers=workers, on_result=seen.append))
        assert len(results) == len(paths) and len(seen) == len(paths)
        missing, text = results[1], results[3]
        assert isinstance(missing, vclip.VideoNotFoundError) and missing.path == str(tmp_path / "missing.mp4")
        assert isinstance(text, vclip.NotAVideoError) and text.path == str(tmp_path / "notes.mp4")
        for path, found in zip([paths[0], paths[2], paths[4]], [results[0], results[2], results[4]]):
            expected = extract_keyframes(path, method="scene", max_frames=3, device="cpu")
            assert found.path == path and found.frame_indices.tolist() == expected.frame_indices.tolist()
            assert np.array_equal(found.frames, expected.frames) and not found.fell_back_to_cpu
        assert {id(result) for result in seen} == {id(result) for result in results}


def test_many_videos_a_video_that_crashes_its_worker_is_its_own_error(videos, monkeypatch):
    monkeypatch.setattr(keyframes_module, "_extract_one", crash_or_extract)  # what the spawned workers run
    paths = [videos["h264"], "/crash/me.mp4", videos["hevc"], videos["odd"]]
    results = list(keyframes_module.extract_keyframes_many(paths, device="cpu", workers=2))
    crashed = results[1]
    assert isinstance(crashed, vclip.CorruptVideoError) and crashed.path == "/crash/me.mp4"
    assert crashed.problem == "its worker process crashed (exit code -11, SIGSEGV); the file may be damaged"
    for path, found in zip([paths[0], paths[2], paths[3]], [results[0], results[2], results[3]]):
        assert found.frame_indices.tolist() == vclip.index_video(path).keyframe_indices.tolist()


def crash_or_extract(options, to_host, on_progress, path):
    """The job of extract_keyframes_many, but a worker given /crash/... dies of a segmentation fault."""
    import os
    import signal

    if path.startswith("/crash/"):
        os.kill(os.getpid(), signal.SIGSEGV)
    return EXTRACT_ONE(options, to_host, on_progress, path)


EXTRACT_ONE = keyframes_module._extract_one


def test_many_videos_options_are_checked_before_any_video(videos):
    """Refused at the call, not when the results are first taken; on_progress only one by one."""
    with pytest.raises(vclip.ArgumentError, match=r"method \('shots'\) must be one of 'codec', 'scene'"):
        keyframes_module.extract_keyframes_many(["nope.mp4"], method="shots")
    with pytest.raises(vclip.ArgumentError, match=r"workers \(0\) must be an integer >= 1"):
        keyframes_module.extract_keyframes_many(["nope.mp4"], workers=0)
    with pytest.raises(vclip.ArgumentError, match="on_progress follows videos read one after another"):
        keyframes_module.extract_keyframes_many([videos["h264"]] * 2, device="cpu", workers=2,
                                                on_progress=lambda path, done, total: None)
    calls = []
    results = keyframes_module.extract_keyframes_many(
        [videos["h264"], videos["hevc"]], max_frames=2, device="cpu", workers=1,
        on_progress=lambda path, done, total: calls.append((path, done, total)))
    assert not calls  # nothing is read before the results are taken
    assert [len(found) for found in results] == [2, 2]
    assert calls == [(videos["h264"], 0, 2), (videos["h264"], 2, 2), (videos["hevc"], 0, 2), (videos["hevc"], 2, 2)]


def test_many_videos_a_gpu_request_without_a_gpu_is_flagged(videos):
    if gpu_unavailable_reason() is None:
        pytest.skip("a GPU is usable here: nothing falls back")
    with pytest.warns(vclip.FallbackWarning):
        results = list(keyframes_module.extract_keyframes_many([videos["h264"], videos["hevc"]], device="cuda"))
    assert all(found.fell_back_to_cpu and found.device == "cpu" for found in results)


def test_one_video_a_gpu_request_without_a_gpu_warns_once_and_is_flagged(videos, shots_video):
    """The request is resolved once, at the public function: one warning each, the result flagged."""
    if gpu_unavailable_reason() is None:
        pytest.skip("a GPU is usable here: nothing falls back")
    with pytest.warns(vclip.FallbackWarning) as caught:
        found = extract_keyframes(videos["h264"], max_frames=2, device="cuda")
    assert len(caught) == 1 and found.fell_back_to_cpu and found.device == "cpu"
    with pytest.warns(vclip.FallbackWarning) as caught:
        boundaries = keyframes_module.find_shot_boundaries(shots_video, device="cuda")
    assert len(caught) == 1 and [boundary.frame for boundary in boundaries] == [40, 75]


def test_a_job_over_many_videos_hands_each_video_a_device(monkeypatch):
    seen = []

    def recording(path, **options):
        seen.append(options["device"])
        return []

    monkeypatch.setattr(keyframes_module, "_boundaries_of", recording)
    assert list(keyframes_module.find_shot_boundaries_many(["a.mp4", "b.mp4"], device="cpu", workers=1)) == [[], []]
    assert seen == [CPU, CPU] and all(isinstance(device, Device) for device in seen)


def test_the_scene_methods_chunks_at_once_follow_the_device():
    """NVDEC sessions on a GPU, FFmpeg decoders on the CPU, or every thread of the decode processes."""
    gpu = Device("cuda", 0)
    assert keyframes_module._sessions(gpu, 0, 2) == keyframes_module._GPU_SESSIONS
    assert keyframes_module._sessions(CPU, 0, 2) == 2
    threads = keyframes_module.THREADS_PER_PROCESS  # the engine's, per decode process
    assert keyframes_module._sessions(gpu, 3, 2) == 3 * threads["cuda"]
    assert keyframes_module._sessions(CPU, 3, 2) == 3 * threads["cpu"]


@pytest.mark.parametrize("cores, workers, sessions", [(2, 2, 1), (2, 1, 2), (1, 1, 1), (16, 4, 2), (16, 12, 1)])
def test_many_videos_on_the_cpu_take_no_more_decoders_than_cores(monkeypatch, cores, workers, sessions):
    """The scene method's FFmpeg decoders per video when worker processes read several videos at
    once: two, or one where the videos at once already fill the cores (or the machine has one)."""
    monkeypatch.setattr(keyframes_module, "usable_cores", lambda: cores)
    assert keyframes_module._cpu_sessions(workers) == sessions
    assert keyframes_module._cpu_sessions() == min(2, cores)


@pytest.mark.gpu
@pytest.mark.parametrize("decode_processes", [0, 4])
def test_many_videos_on_the_gpu_are_the_videos_one_by_one(videos, shots_video, shared_decode_processes,
                                                          decode_processes):
    """Threads on the GPU, the scene method's chunks decoded by threads of this process (the
    default) or by decode processes: the keyframes of each video as extract_keyframes gives them
    there, frames on the GPU."""
    paths = [shots_video, videos["h264"], videos["hevc"]]
    results = list(keyframes_module.extract_keyframes_many(paths, method="scene", device="cuda", workers=2,
                                                            decode_processes=decode_processes))
    for path, found in zip(paths, results):
        expected = extract_keyframes(path, method="scene", device="cuda")
        assert found.device.startswith("cuda") and not found.fell_back_to_cpu
        assert found.frame_indices.tolist() == expected.frame_indices.tolist()
        assert barcodes(found.frames.get()) == found.frame_indices.tolist()
    assert results[0].frame_indices.tolist() == [0, 40, 75]


# -- shot boundaries of many videos ----------------------------------------------------------------
def test_shot_boundaries_of_many_videos_are_each_videos_in_order(videos, shots_video, tmp_path):
    """In worker processes and one by one: each video's boundaries as find_shot_boundaries gives
    them, a bad file's VideoError in its place, each result seen once as it is ready."""
    (tmp_path / "notes.mp4").write_text("not a video\n" * 40)
    paths = [shots_video, tmp_path / "missing.mp4", videos["h264"], tmp_path / "notes.mp4"]
    for workers in (2, 1):
        seen = []
        results = list(keyframes_module.find_shot_boundaries_many(paths, device="cpu", workers=workers,
                                                                   on_result=seen.append))
        assert [boundary.frame for boundary in results[0]] == [40, 75]
        assert results[2] == keyframes_module.find_shot_boundaries(videos["h264"], device="cpu")
        assert isinstance(results[1], vclip.VideoNotFoundError) and results[1].path == str(tmp_path / "missing.mp4")
        assert isinstance(results[3], vclip.NotAVideoError) and results[3].path == str(tmp_path / "notes.mp4")
        assert {id(result) for result in seen} == {id(result) for result in results}


def test_shot_boundaries_of_many_videos_check_options_before_any_video():
    with pytest.raises(vclip.ArgumentError, match=r"scene_threshold \(1\) must be"):
        keyframes_module.find_shot_boundaries_many(["nope.mp4"], scene_threshold=1)
    with pytest.raises(vclip.ArgumentError, match=r"decode_processes \(-1\) must be an integer >= 0"):
        keyframes_module.find_shot_boundaries_many(["nope.mp4"], decode_processes=-1)
    with pytest.raises(vclip.ArgumentError, match=r"cpu_decoders \('many'\) must be \"auto\" or a count"):
        keyframes_module.find_shot_boundaries_many(["nope.mp4"], cpu_decoders="many")
    with pytest.raises(vclip.ArgumentError, match=r"cpu_decoders \(-1\) must be an integer >= 0"):
        keyframes_module.find_shot_boundaries_many(["nope.mp4"], cpu_decoders=-1)


@pytest.mark.gpu
@pytest.mark.parametrize("cpu_decoders", [0, 2])
def test_shot_boundaries_of_many_videos_on_the_gpu_are_the_cpus(videos, shots_video, cpu_decoders):
    """Threads on the GPU find the boundaries the CPU finds, video by video, with CPU decoders
    beside them too (they take the videos beyond the two threads' first)."""
    paths = [shots_video, videos["h264"], videos["hevc"], shots_video, videos["h264"], videos["hevc"]]
    results = list(keyframes_module.find_shot_boundaries_many(paths, device="cuda", workers=2,
                                                              cpu_decoders=cpu_decoders))
    assert results == [keyframes_module.find_shot_boundaries(path, device="cpu") for path in paths]
    assert [boundary.frame for boundary in results[0]] == [40, 75]
