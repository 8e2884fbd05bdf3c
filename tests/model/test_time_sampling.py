"""Sampling in seconds: each position of a clip is the frame a player shows at its target time
(pts <= t < next pts), on 24/25/30/60 fps files, a variable-frame-rate one and one whose first
pts is not 0; durations, starts in seconds, jitter and the end policies applied in time."""

import numpy as np
import pytest

import vclip
from vclip.cli import main
from vclip.synthetic import make_video, read_barcode

RATES = (24, 25, 30, 60)


@pytest.fixture(scope="module")
def by_rate(tmp_path_factory) -> dict[int, str]:
    """A 2-second 64x48 video at each rate (keyframe every 20 frames, B-frames)."""
    folder = tmp_path_factory.mktemp("rates")
    return {
        fps: make_video(
            folder / f"fps{fps}.mp4", num_frames=2 * fps, width=64, height=48, fps=fps, keyframe_interval=20
        )
        for fps in RATES
    }


def assert_shown_at_targets(index: vclip.VideoIndex, frames: np.ndarray, targets: np.ndarray) -> None:
    """Each frame is the one shown at its target time: pts <= t < next pts (1 ns slack for
    floating point; any wrong frame is at least 1/60 s away)."""
    pts = index.pts_seconds
    for frame, t in zip(np.asarray(frames).tolist(), np.asarray(targets).tolist()):
        assert pts[frame] <= t + 1e-9, (frame, t)
        if frame + 1 < index.num_frames:
            assert t < pts[frame + 1] + 1e-9, (frame, t)
        else:
            assert t < index.end_seconds + 1e-9


def decoded_barcodes(frames) -> list[list[int]]:
    data = frames.data.get() if hasattr(frames.data, "get") else np.asarray(frames.data)  # CuPy on the GPU
    return [[read_barcode(frame) for frame in clip] for clip in data]


@pytest.mark.parametrize("fps", RATES)
def test_sixteen_frames_at_fifteen_fps_whatever_the_source_rate(by_rate, fps):
    decoder = vclip.VideoDecoder(by_rate[fps], device="cpu")
    sampler = vclip.contiguous(8, fps=15, starts="step", step_seconds=1.0)
    clips = sampler.sample_with_padding(decoder.index)
    # From the first frame (t = 0) every second while a clip of 8/15 s fits in the 2 s video.
    assert [float(clip.target_seconds[0]) for clip in clips] == [0.0, 1.0]
    for clip in clips:
        expected_first = round(clip.target_seconds[0] * fps)
        # Exact arithmetic: at k/15 s a player shows frame floor(k * fps / 15) after the start.
        assert clip.frame_indices.tolist() == [expected_first + k * fps // 15 for k in range(8)]
        assert_shown_at_targets(decoder.index, clip.frame_indices, clip.target_seconds)
        assert not clip.padded.any()
    result = decoder.get_clips(sampler)
    assert decoded_barcodes(result) == result.frame_indices.tolist()
    assert result.frame_indices.tolist() == [clip.frame_indices.tolist() for clip in clips]


@pytest.mark.parametrize("fps", RATES)
def test_random_and_even_starts_in_seconds_select_the_shown_frames(by_rate, fps):
    index = vclip.index_video(by_rate[fps])
    for sampler in (
        vclip.strided(6, 2, fps=12, clips_per_video=5, seed=4),
        vclip.contiguous(10, fps=7.5, starts="even", clips_per_video=4),
    ):
        clips = sampler.sample_with_padding(index)
        assert len(clips) == sampler.clips_per_video
        for clip in clips:
            assert np.allclose(np.diff(clip.target_seconds), sampler.stride / sampler.fps)
            assert index.start_seconds <= clip.target_seconds[0] and clip.target_seconds[-1] < index.end_seconds
            assert_shown_at_targets(index, clip.frame_indices, clip.target_seconds)
    even = vclip.contiguous(10, fps=7.5, starts="even", clips_per_video=4).sample_with_padding(index)
    last_start = index.end_seconds - 10 / 7.5
    assert [clip.target_seconds[0] for clip in even] == pytest.approx(np.linspace(0, last_start, 4))


def test_variable_frame_rate_picks_by_pts(videos):
    decoder = vclip.VideoDecoder(videos["vfr"], device="cpu")
    index = decoder.index
    assert index.is_variable_frame_rate
    sampler = vclip.strided(6, 2, fps=20, clips_per_video=6, seed=1)
    clips = sampler.sample_with_padding(index)
    for clip in clips:
        assert_shown_at_targets(index, clip.frame_indices, clip.target_seconds)
    # Not i * rate: on this file frame numbers and times disagree, and the test sees it.
    by_count = [np.floor(clip.target_seconds * index.average_fps).astype(int).tolist() for clip in clips]
    assert by_count != [clip.frame_indices.tolist() for clip in clips]
    result = decoder.get_clips(sampler)
    assert decoded_barcodes(result) == result.frame_indices.tolist()
    assert np.array_equal(result.pts_seconds, index.pts_seconds[result.frame_indices])


def test_time_starts_at_the_first_frame_not_at_zero(videos):
    index = vclip.index_video(videos["offset"])  # first pts 1.5 s, 25 fps
    (clip, *_) = vclip.contiguous(4, fps=25, starts="step", step_seconds=0.4).sample_with_padding(index)
    assert clip.target_seconds[0] == pytest.approx(1.5)
    assert clip.frame_indices.tolist() == [0, 1, 2, 3]


def test_same_seed_same_clips_and_seeds_differ(by_rate):
    index = vclip.index_video(by_rate[30])
    sampler = vclip.jittered(8, 2, 1, fps=15, clips_per_video=4)
    first = [clip.frame_indices.tolist() for clip in sampler.sample_with_padding(index, seed=3)]
    assert first == [clip.frame_indices.tolist() for clip in sampler.sample_with_padding(index, seed=3)]
    assert first != [clip.frame_indices.tolist() for clip in sampler.sample_with_padding(index, seed=4)]


def test_jitter_moves_each_position_by_whole_target_steps(by_rate):
    index = vclip.index_video(by_rate[60])
    plain = vclip.strided(8, 3, fps=30, clips_per_video=6, seed=5).sample_with_padding(index)
    jittered = vclip.jittered(8, 3, 1, fps=30, clips_per_video=6, seed=5).sample_with_padding(index)
    moved = 0
    for clip in jittered:
        assert np.all(np.diff(clip.frame_indices) >= 0)
        assert_shown_at_targets(index, clip.frame_indices, clip.target_seconds)
        grid_start = clip.target_seconds[0]
        offsets = (clip.target_seconds - grid_start) * 30  # in 1/30 s steps, a multiple of 3 +- 1 each
        assert np.allclose(offsets, np.round(offsets), atol=1e-6)
        moved += int(np.any(np.round(offsets).astype(int) % 3 != 0))
    assert moved and len(plain) == len(jittered)


@pytest.mark.parametrize(
    ("sampler", "length"),
    [
        (vclip.contiguous(duration=1.0, fps=12), 12),  # 12 frames at 12 fps
        (vclip.strided(None, 2, duration=1.0, fps=12), 6),  # every 2nd of them
        (vclip.contiguous(duration=0.4), 10),  # at the source's own 25 fps
        (vclip.contiguous(5, duration=1.0), 5),  # 5 frames spread over 1 s
    ],
)
def test_clips_of_a_duration(by_rate, sampler, length):
    index = vclip.index_video(by_rate[25])
    (clip,) = sampler.sample_with_padding(index, seed=2)
    assert clip.frame_indices.size == length
    assert_shown_at_targets(index, clip.frame_indices, clip.target_seconds)
    covered = clip.target_seconds[-1] - clip.target_seconds[0] + (clip.target_seconds[1] - clip.target_seconds[0])
    assert covered == pytest.approx(sampler.duration)
    if sampler.fps is None and sampler.sequence_length is None:  # source rate: consecutive frames
        assert np.all(np.diff(clip.frame_indices) == 1)


@pytest.mark.parametrize(
    ("policy", "tail"),
    [
        # 1 s at 30 fps, a clip of 2 s at 10 fps: positions 10..19 run past the end at 1.0..1.9 s.
        ("repeat_last", [29] * 10),
        ("wrap", [0, 3, 6, 9, 12, 15, 18, 21, 24, 27]),  # times 0.0..0.9 s again
    ],
)
def test_end_policies_in_time(tmp_path, policy, tail):
    path = make_video(tmp_path / "one_second.mp4", num_frames=30, width=64, height=48, fps=30)
    decoder = vclip.VideoDecoder(path, device="cpu")
    sampler = vclip.contiguous(20, fps=10, end_policy=policy)
    (clip,) = sampler.sample_with_padding(decoder.index, seed=0)
    assert clip.frame_indices.tolist() == [0, 3, 6, 9, 12, 15, 18, 21, 24, 27] + tail
    assert clip.padded.tolist() == [False] * 10 + [True] * 10
    result = decoder.get_clips(sampler, seed=0)
    assert decoded_barcodes(result) == [clip.frame_indices.tolist()]
    assert result.padded.tolist() == [clip.padded.tolist()]


def test_drop_and_error_in_time(tmp_path):
    path = make_video(tmp_path / "one_second.mp4", num_frames=30, width=64, height=48, fps=30)
    index = vclip.index_video(path)
    assert vclip.contiguous(20, fps=10, end_policy="drop").sample_with_padding(index) == []
    empty = vclip.VideoDecoder(path, device="cpu").get_clips(vclip.contiguous(20, fps=10, end_policy="drop"))
    assert empty.data.shape[:2] == (0, 20)
    with pytest.raises(ValueError, match=r"one_second\.mp4: a clip needs 2 s .* lasts 1 s; end_policy='error'"):
        vclip.contiguous(20, fps=10, end_policy="error").sample(index)
    # A clip that just fits (1.0 s at 10 fps) is not padded.
    (clip,) = vclip.contiguous(10, fps=10, end_policy="error").sample_with_padding(index)
    assert clip.frame_indices.tolist() == list(range(0, 30, 3)) and not clip.padded.any()


def test_frame_index_api_is_unchanged(by_rate):
    index = vclip.index_video(by_rate[30])
    sampler = vclip.strided(4, 3, clips_per_video=3, seed=7)
    assert not sampler.in_seconds
    clips = sampler.sample_with_padding(index)
    assert all(clip.target_seconds is None for clip in clips)
    assert [clip.frame_indices.tolist() for clip in clips] == [c.tolist() for c in sampler.sample(60, seed=7)]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: vclip.contiguous(8, fps=0), r"fps \(0\) must be a number > 0"),
        (lambda: vclip.contiguous(8, duration=-1.0), r"duration \(-1.0\) must be a number > 0"),
        (lambda: vclip.contiguous(8, fps=15, starts="step"), r"step_seconds \(None\) must be a number > 0"),
        (lambda: vclip.contiguous(8, fps=15, step_seconds=1.0), r"step_seconds \(1.0\) must be None unless"),
        (lambda: vclip.ClipSampler("keyframe", fps=10.0), r"fps \(10.0\) must be None \(keyframe clips"),
        (lambda: vclip.contiguous(), r"sequence_length \(None\) must be an integer >= 1"),
    ],
)
def test_bad_time_options_are_refused(build, message):
    with pytest.raises(vclip.ArgumentError, match=message):
        build()


def test_seconds_need_an_index():
    with pytest.raises(ValueError, match="needs the video's VideoIndex"):
        vclip.contiguous(8, fps=15).sample(100)


def test_loader_samples_in_seconds_across_rates(by_rate):
    dataset = [(by_rate[fps], number) for number, fps in enumerate(RATES)]
    loader = vclip.ClipLoader(
        dataset, vclip.strided(6, 2, fps=12, clips_per_video=2), batch_size=8, device="cpu", num_threads=2, seed=3
    )
    (batch,) = list(loader)
    assert batch.data.shape[:2] == (8, 6)
    for clip, frames, pts, video in zip(
        batch.data.numpy(), batch.frame_indices.numpy(), batch.pts_seconds.numpy(), batch.video_ids.tolist()
    ):
        assert [read_barcode(frame) for frame in clip] == frames.tolist()
        index = vclip.index_video(loader.videos[video].path)
        # Targets t0 + k/6 with pts[0] <= t0 < pts[0] + 1/fps, each shown frame at most 1/fps before its
        # target: so pts[k] lies within one source frame of pts[0] + k/6.
        grid = pts[0] + np.arange(6) / 6
        assert np.all(np.abs(pts - grid) < 1 / index.average_fps + 1e-9)
    with pytest.raises(vclip.ArgumentError, match="duration=0.5 without fps or sequence_length"):
        vclip.ClipLoader(dataset, vclip.contiguous(duration=0.5), device="cpu")


def test_cli_samples_in_seconds(tmp_path, by_rate, capsys):
    out = tmp_path / "clips.npz"
    status = main(
        [
            "sample",
            by_rate[60],
            "--mode",
            "strided",
            "--stride",
            "1",
            "--fps",
            "15",
            "--duration",
            "0.5",
            "--starts",
            "even",
            "--clips-per-video",
            "2",
            "--out",
            str(out),
        ]
    )
    assert status == 0, capsys.readouterr().err
    saved = np.load(out)
    assert saved["frame_indices"].tolist() == [[0, 4, 8, 12, 16, 20, 24, 28], [88, 92, 96, 100, 104, 108, 112, 116]]
    assert [[read_barcode(frame) for frame in clip] for clip in saved["clips"]] == saved["frame_indices"].tolist()
    status = main(
        [
            "sample",
            by_rate[25],
            "--mode",
            "contiguous",
            "--sequence-length",
            "4",
            "--step-seconds",
            "0.5",
            "--fps",
            "5",
            "--out",
            str(tmp_path / "step.npz"),
        ]
    )
    assert status == 0
    assert np.load(tmp_path / "step.npz")["frame_indices"][:, 0].tolist() == [0, 12, 25]
    assert main(["sample", by_rate[25], "--mode", "keyframe", "--fps", "5", "--out", str(tmp_path / "k.npz")]) == 2
    assert "--fps does not apply to --mode keyframe" in capsys.readouterr().err


@pytest.mark.gpu
def test_gpu_clips_in_seconds_match_the_cpu(videos):
    """NVDEC decodes the frames a time sampler picks (VFR file), the same frames as the CPU."""
    sampler = vclip.strided(6, 2, fps=20, clips_per_video=3, seed=2)
    cpu = vclip.VideoDecoder(videos["vfr"], device="cpu").get_clips(sampler, segment=(0.2, None))
    gpu = vclip.VideoDecoder(videos["vfr"], device="cuda").get_clips(sampler, segment=(0.2, None))
    assert not gpu.fell_back_to_cpu
    assert gpu.frame_indices.tolist() == cpu.frame_indices.tolist()
    assert decoded_barcodes(gpu) == gpu.frame_indices.tolist()
    assert np.all(gpu.pts_seconds >= 0.2)
