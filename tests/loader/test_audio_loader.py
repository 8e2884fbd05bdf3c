"""ClipLoader with audio: each batch's [B, C, S] audio is the audio VideoDecoder gives for the same
clips, aligned to the first frame, padded to the dataset's longest span with audio_lengths; videos
without audio, the no-audio policy and bad videos; time-based sampling and segments; resume; the
memory planner; the same batches on the GPU."""

from __future__ import annotations

import os

import numpy as np
import pytest
from audio_timing import RATE, measured_lag
from helpers import require_extra

import vclip
from vclip._audio.decode import span_samples
from vclip.synthetic import make_video

torch = require_extra("torch")

CLIP = dict(sequence_length=6, stride=2)  # 11 frames


@pytest.fixture(scope="module")
def audio_videos(tmp_path_factory) -> dict[str, str]:
    """30 fps AAC, 25 fps Opus in Matroska (longer spans), 30 fps PCM starting 0.2 s late, and no audio."""
    folder = tmp_path_factory.mktemp("loader_av")
    return {
        "aac30": make_video(folder / "aac30.mp4", num_frames=45, width=64, height=48, audio_codec="aac", seed=1),
        "opus25": make_video(folder / "opus25.mkv", num_frames=40, fps=25, width=64, height=48,
                             audio_codec="libopus", seed=2),
        "pcm30": make_video(folder / "pcm30.mkv", num_frames=45, width=64, height=48, audio_codec="pcm_s16le",
                            audio_sample_rate=22050, audio_offset_seconds=0.2, seed=3),
        "silent": make_video(folder / "silent.mp4", num_frames=45, width=64, height=48, seed=4),
    }


def loader_of(videos, **options) -> vclip.ClipLoader:
    options = {"batch_size": 4, "device": "cpu", "shuffle": True, "seed": 3, "audio": vclip.AudioSpec(),
               "sampler": vclip.strided(**CLIP), **options}
    return vclip.ClipLoader([(path, number) for number, path in enumerate(videos)], **options)


def epoch_of(loader: vclip.ClipLoader) -> list:
    try:
        return [(batch.frame_indices.clone(), batch.video_ids.clone(), batch.audio.clone(),
                 batch.audio_lengths.clone(), batch.has_audio.clone()) for batch in loader]
    finally:
        loader.close()


def expected_audio(path: str, frames: np.ndarray, spec: vclip.AudioSpec) -> np.ndarray:
    decoder = vclip.VideoDecoder(path, device="cpu")
    index = decoder.index
    last = int(frames[-1])
    end = float(index.pts_seconds[last + 1]) if last + 1 < index.num_frames else index.end_seconds
    return decoder.get_audio(float(index.pts_seconds[frames[0]]), end, audio=spec).data[0]


def test_batches_carry_each_clips_audio_padded_to_the_longest_span(audio_videos):
    videos = [audio_videos[name] for name in ("aac30", "opus25", "pcm30", "silent")]
    loader = loader_of(videos, clips_per_video=2)
    longest = span_samples(11 / 25, RATE)  # 11 frames at 25 fps
    assert loader.audio_shape == (1, longest)
    seen_silent = False
    for batch in loader:
        assert batch.audio.shape == (len(batch), 1, longest) and batch.audio.dtype == torch.float32
        for row in range(len(batch)):
            path = videos[int(batch.video_ids[row])]
            frames = batch.frame_indices[row].numpy()
            length = int(batch.audio_lengths[row])
            expected = expected_audio(path, frames, vclip.AudioSpec())  # what VideoDecoder gives for the clip
            fps = 25 if "25" in os.path.basename(path) else 30
            assert length == expected.shape[1] and abs(length - 11 / fps * RATE) <= 16
            assert not batch.audio[row, :, length:].any()  # padding
            if path.endswith("silent.mp4"):
                seen_silent = True
                assert not batch.has_audio[row] and not batch.audio[row].any()
                continue
            assert batch.has_audio[row]
            np.testing.assert_array_equal(batch.audio[row, :, :length].numpy(), expected)
            if path.endswith("aac30.mp4"):  # and it is the audio at the clip's first frame
                index = vclip.index_video(path)
                lag, correlation = measured_lag(batch.audio[row, 0, :length].numpy().astype(np.float64),
                                                float(index.pts_seconds[frames[0]]))
                assert abs(lag) <= 1.0 and correlation > 0.98
    assert seen_silent
    loader.close()


def test_each_frames_span_in_batches(audio_videos):
    videos = [audio_videos["aac30"], audio_videos["opus25"]]
    loader = loader_of(videos, audio=vclip.AudioSpec(span="frame", channels=2, dtype="int16"), shuffle=False)
    assert loader.audio_shape == (6, 2, span_samples(1 / 25, RATE))
    batch = next(iter(loader))
    assert batch.audio.shape == (2, 6, 2, 640) and batch.audio.dtype == torch.int16
    assert batch.audio_lengths.shape == (2, 6)
    assert batch.audio_lengths[0].tolist() == [span_samples(1 / 30, RATE)] * 6
    assert batch.audio_lengths[1].tolist() == [640] * 6
    loader.close()


def test_the_no_audio_policy_makes_silent_videos_bad_videos(audio_videos):
    videos = [audio_videos["aac30"], audio_videos["silent"]]
    strict = vclip.AudioSpec(missing="error")
    loader = loader_of(videos, audio=strict, shuffle=False, batch_size=2)
    batch = next(iter(loader))
    assert batch.skipped_videos == (audio_videos["silent"],)
    assert batch.video_ids.tolist() == [0, 0] and batch.has_audio.all()
    loader.close()
    with pytest.raises(vclip.NoAudioError, match="silent.mp4: has no audio stream"):
        next(iter(loader_of(videos, audio=strict, shuffle=False, batch_size=2, on_error="raise")))


@pytest.mark.slow
def test_clips_in_seconds_and_segments_cut_audio_by_the_same_times(audio_videos):
    path = audio_videos["aac30"]
    sampler = vclip.contiguous(fps=10, duration=0.5)
    loader = vclip.ClipLoader([vclip.LabeledVideo(path, 0, 0.3, 1.2)], sampler, batch_size=1, device="cpu",
                              audio=vclip.AudioSpec(), clips_per_video=3)
    assert loader.audio_shape == (1, 8000)
    for batch in loader:
        assert int(batch.audio_lengths[0]) == 8000  # 5 positions of 0.1 s
        times = batch.pts_seconds[0].numpy()
        assert 0.3 - 1e-9 <= times[0] and times[-1] < 1.2
        lag, _ = measured_lag(batch.audio[0, 0].numpy().astype(np.float64), float(times[0]), search=1700)
        # the audio starts at the clip's first target time: within one frame (1/30 s) after its frame's pts
        assert 0 <= lag < RATE / 30 + 1
    loader.close()


def test_a_resumed_epoch_gives_the_same_audio(audio_videos):
    videos = [audio_videos[name] for name in ("aac30", "opus25", "pcm30")] * 2
    expected = epoch_of(loader_of(videos, batch_size=2))
    first = loader_of(videos, batch_size=2)
    iterator = iter(first)
    next(iterator), next(iterator)
    state = first.state_dict()
    first.close()
    fresh = loader_of(videos, batch_size=2)
    fresh.load_state_dict(state)
    for got, want in zip(epoch_of(fresh), expected[2:], strict=True):
        for a, b in zip(got, want):
            assert torch.equal(a, b)
    other = loader_of(videos, batch_size=2, audio=vclip.AudioSpec(sample_rate=8000))
    with pytest.raises(vclip.ArgumentError, match="saved by a loader with other audio than this one"):
        other.load_state_dict(state)
    other.close()


def test_the_memory_plan_counts_the_audio_buffers(audio_videos):
    loader = loader_of([audio_videos["aac30"]], batch_size=4, prefetch_queue_depth=2)
    estimate = loader.memory_estimate
    per_clip = 4 * span_samples(11 / 30, RATE)  # float32 mono
    assert estimate.audio_bytes_per_clip == per_clip
    assert estimate.audio_buffers == per_clip * 4 * 5  # 4 clips a batch, 5 buffers (depth 2)
    without = loader_of([audio_videos["aac30"]], batch_size=4, prefetch_queue_depth=2, audio=None).memory_estimate
    assert estimate.total == without.total + estimate.audio_buffers
    plan = vclip.plan_loader_memory(width=64, height=48, batch_size=4, sequence_length=6, device="cpu",
                                    audio=vclip.AudioSpec(), audio_samples=span_samples(11 / 30, RATE))
    assert plan.total == estimate.total and plan.largest_batch_size(plan.total) == 4
    assert plan.largest_batch_size(plan.total - 1) == 3 and without.largest_batch_size(without.total) == 4
    loader.close()


@pytest.mark.gpu
def test_gpu_batches_carry_the_cpus_audio(audio_videos):
    videos = [audio_videos[name] for name in ("aac30", "opus25", "pcm30", "silent")]
    expected = epoch_of(loader_of(videos))
    loader = loader_of(videos, device="cuda", num_threads=2)
    try:
        batches = list(loader)
        for batch, (frames, video_ids, audio, lengths, has_audio) in zip(batches, expected, strict=True):
            assert batch.audio.device.type == "cuda" and batch.audio_lengths.device.type == "cuda"
            assert torch.equal(batch.frame_indices, frames) and torch.equal(batch.video_ids, video_ids)
            assert torch.equal(batch.audio.cpu(), audio) and torch.equal(batch.audio_lengths.cpu(), lengths)
            assert torch.equal(batch.has_audio.cpu(), has_audio)
    finally:
        loader.close()
