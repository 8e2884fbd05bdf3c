"""Audio with clips: synthetic videos whose audio tells the time (vclip.synthetic.audio_signal, a tone
whose pitch steps every 1/30 s) prove that a clip's audio starts at its first frame's pts to within
one sample, for AAC in MP4, Opus in WebM and PCM in Matroska, with audio that starts before or after
the video, variable frame rates and irregular interleaving; the real NASA file is checked against
FFmpeg's own decode of its AAC tracks; the index, its caches, the span rules and the arguments."""

from __future__ import annotations

import os
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest
from audio_timing import RATE, measured_lag
from conftest import SHARED_VIDEOS

import vclip
from vclip._audio.decode import span_samples
from vclip._index.caches import DiskCache
from vclip.synthetic import audio_signal, make_video

FRAMES = 60

# name: (file, make_video options), 64x48 videos of 60 frames at 30 fps
AV_VIDEOS = {
    "aac_mp4": ("aac.mp4", dict(audio_codec="aac")),
    "aac_mp4_late": ("aac_late.mp4", dict(audio_codec="aac", audio_sample_rate=44100, audio_offset_seconds=0.3)),
    "aac_mp4_early": ("aac_early.mp4", dict(audio_codec="aac", audio_offset_seconds=-0.4)),
    "opus_webm": ("opus.webm", dict(audio_codec="libopus", codec="libvpx")),
    "opus_webm_late": ("opus_late.webm", dict(audio_codec="libopus", codec="libvpx", audio_offset_seconds=0.25)),
    "opus_webm_early": ("opus_early.webm", dict(audio_codec="libopus", codec="libvpx", audio_offset_seconds=-0.3)),
    "pcm_mkv": ("pcm.mkv", dict(audio_codec="pcm_s16le", audio_sample_rate=44100)),
    "pcm_mkv_late": ("pcm_late.mkv", dict(audio_codec="pcm_s16le", audio_sample_rate=44100, audio_offset_seconds=0.2)),
    "pcm_mkv_early": ("pcm_early.mkv", dict(audio_codec="pcm_s16le", audio_sample_rate=22050,
                                             audio_offset_seconds=-0.3, audio_channels=1)),
    "aac_vfr": ("aac_vfr.mp4", dict(audio_codec="aac", time_base=Fraction(1, 1000),
                                     frame_pts=[i * 33 + (i % 3) * 9 + (i // 20) * 40 for i in range(FRAMES)])),
    "aac_chunked": ("aac_chunked.mp4", dict(audio_codec="aac", audio_chunk_seconds=0.7)),
}


@pytest.fixture(scope="module")
def av_videos(tmp_path_factory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("av")
    return {name: make_video(folder / file, num_frames=FRAMES, width=64, height=48, keyframe_interval=15, **options)
            for name, (file, options) in AV_VIDEOS.items()}


def signal_delay(path: str, name: str) -> float:
    """Seconds by which the file shows the signal later than make_video was asked to: 0, except for
    Opus in Matroska starting after the video, where FFmpeg's muxer stores the first block at the
    start rounded to a millisecond plus the pre-skip (6.5 ms) rounded to one, up to 1 ms late; the
    reference there is where FFmpeg itself shows the first sample."""
    offset = AV_VIDEOS[name][1].get("audio_offset_seconds", 0.0)
    if not (name.startswith("opus") and offset > 0):
        return 0.0
    with av.open(path) as container:
        stream = container.streams.audio[0]
        frame = next(container.decode(stream))
    return float(frame.pts * stream.time_base) - vclip.index_video(path).start_seconds - offset


def test_the_lag_measure_finds_a_known_shift():
    """The measure is what the alignment tests rest on: it must see a shift of 3 samples or 0.5."""
    for shift in (3.0, -0.5, 0.0):
        samples = audio_signal(0.4 + (np.arange(4000) + shift) / RATE)
        lag, correlation = measured_lag(samples, 0.4)
        assert abs(lag - shift) <= 0.05 and correlation > 0.999, (shift, lag)
    assert measured_lag(audio_signal(0.4 + 1 / 30 + np.arange(4000) / RATE), 0.4)[1] < 0.9  # a frame off


@pytest.mark.parametrize("name", list(AV_VIDEOS))
def test_clip_audio_starts_at_the_first_frame_to_one_sample(av_videos, name):
    path = av_videos[name]
    decoder = vclip.VideoDecoder(path, device="cpu")
    index = decoder.index
    sampler = vclip.strided(8, 2, starts="even", clips_per_video=5)
    clips = decoder.get_clips(sampler, audio=vclip.AudioSpec(sample_rate=RATE))
    audio = clips.audio
    assert audio is not None and audio.has_audio and audio.stream_index == 1
    assert audio.data.shape[:2] == (5, 1) and audio.data.dtype == np.float32
    delay = signal_delay(path, name)
    start = max(AV_VIDEOS[name][1].get("audio_offset_seconds", 0.0), 0.0) + delay
    for number, frames in enumerate(clips.frame_indices):
        t0 = float(index.pts_seconds[frames[0]])
        last = frames[-1]
        end = float(index.pts_seconds[last + 1]) if last + 1 < index.num_frames else index.end_seconds
        assert audio.start_seconds[number] == t0
        assert audio.lengths[number] == span_samples(end - t0, RATE)
        samples = audio.data[number, 0, :audio.lengths[number]].astype(np.float64)
        times = t0 - index.start_seconds + np.arange(samples.size) / RATE
        before = times < start - 0.005  # the signal starts at `start` (a few ms of codec ramp-up)
        if before.any():
            assert np.abs(samples[before & (times < start - 0.03)]).max(initial=0) < 0.02  # silence
        usable = times > start + 0.01
        assert usable.sum() > 1000, (name, number)
        lag, correlation = measured_lag(samples, t0 - index.start_seconds - delay, where=usable)
        assert abs(lag) <= 1.0 and correlation > 0.98, (name, number, lag, correlation)


def test_codecs_whose_packets_do_not_say_their_length_are_placed_to_the_millisecond(tmp_path):
    """FLAC in Matroska: packets placed by their millisecond timestamps, samples laid end to end."""
    path = make_video(tmp_path / "flac.mkv", num_frames=FRAMES, width=64, height=48, audio_codec="flac",
                      audio_sample_rate=44100)
    index = vclip.index_audio(path)
    assert not index.exact_grid and index.time_base == Fraction(1, 1000)
    decoder = vclip.VideoDecoder(path, device="cpu")
    clips = decoder.get_clips(vclip.strided(8, 2, starts="even", clips_per_video=4), audio=vclip.AudioSpec())
    for number, frames in enumerate(clips.frame_indices):
        t0 = float(decoder.index.pts_seconds[frames[0]])
        samples = clips.audio.data[number, 0, :clips.audio.lengths[number]]
        lag, correlation = measured_lag(samples, t0, where=t0 + np.arange(samples.size) / RATE > 0.01)
        assert abs(lag) <= 0.0005 * RATE + 1 and correlation > 0.99, (number, lag, correlation)  # no gaps, no overlaps


def test_the_index_places_packets_on_the_sample_grid(av_videos):
    # Matroska counts in milliseconds: the grid counts samples (PCM from sizes, Opus from its TOC byte)
    for name, per_packet in (("pcm_mkv", None), ("opus_webm", 960)):
        index = vclip.index_audio(av_videos[name])
        assert index.time_base == Fraction(1, 1000) and index.exact_grid
        counts = index.packet_samples if per_packet is None else np.full(index.num_packets, per_packet)
        np.testing.assert_array_equal(np.diff(index.packet_start), counts[:-1])
    opus = vclip.index_audio(av_videos["opus_webm"])
    assert opus.packet_skip_start[0] == 312 and opus.origin_seconds == Fraction(-13, 2000)  # pre-skip 6.5 ms
    assert opus.start_seconds == 0.0 and opus.packets_addressable  # Matroska blocks read at their data
    aac = vclip.index_audio(av_videos["aac_mp4"])
    assert aac.packet_is_discard[0] and aac.time_base == Fraction(1, 48000)  # the encoder's priming, cut
    assert aac.start_seconds == 0.0 and aac.packets_addressable
    early = vclip.index_audio(av_videos["aac_mp4_early"])
    assert early.start_seconds == 0.0 and vclip.index_video(av_videos["aac_mp4_early"]).start_seconds == 0.4


def test_decoded_samples_equal_ffmpegs_where_nothing_is_resampled(av_videos):
    """At the stream's own rate and layout the samples are FFmpeg's decode of the whole stream, from
    a decoder started a few packets before the span: PCM exactly, AAC and Opus within 1e-3 (a shift
    of one sample differs by 0.05 here; AAC's noise substitution draws random values a decoder
    started mid-stream cannot share)."""
    for name, tolerance in (("aac_mp4", 1e-3), ("opus_webm", 1e-3), ("pcm_mkv", 0.0)):
        path = av_videos[name]
        index = vclip.index_audio(path)
        with av.open(path) as container:
            frames = list(container.decode(audio=0))
        reference = np.concatenate([frame.to_ndarray() for frame in frames], axis=1).astype(np.float32)
        if not frames[0].format.is_planar:
            reference = reference.reshape(-1, index.channels).T
        if reference.dtype.kind != "f" or np.abs(reference).max() > 2:
            reference = reference / 32768.0
        first = float(frames[0].pts * frames[0].time_base)  # exact here: the stream shows its first sample at 0
        decoder = vclip.VideoDecoder(path, device="cpu")
        spec = vclip.AudioSpec(sample_rate=index.sample_rate, channels=2)
        for start in (0.0, 0.5, 1.2345):
            got = decoder.get_audio(start, start + 0.4, audio=spec).data[0]
            at = round((start - first) * index.sample_rate)
            np.testing.assert_allclose(got, reference[:, at:at + got.shape[1]], rtol=0, atol=tolerance,
                                       err_msg=f"{name} {start}")


@pytest.mark.skipif(not (SHARED_VIDEOS / "nasa_13013.mp4").exists(), reason="shared videos not available")
def test_nasa_audio_against_ffmpeg():
    path = str(SHARED_VIDEOS / "nasa_13013.mp4")
    reference = {}
    for number in (1, 4):
        with av.open(path) as container:
            reference[number] = np.concatenate([f.to_ndarray() for f in container.decode(container.streams[number])],
                                               axis=1)
    assert vclip.index_audio(path).stream_index == 1  # the first audio stream by default
    index = vclip.index_audio(path, stream_index=4)
    assert (index.codec, index.sample_rate, index.channels) == ("aac", 16000, 2)
    assert index.start_seconds == 0.0 and index.num_samples == reference[4].shape[1]
    decoder = vclip.VideoDecoder(path, device="cpu")  # video stream 0: 25 fps
    clips = decoder.get_clips(vclip.contiguous(10, starts="even", clips_per_video=4),
                              audio=vclip.AudioSpec(sample_rate=16000, channels=2, stream_index=4))
    for number, frames in enumerate(clips.frame_indices):
        t0 = float(decoder.index.pts_seconds[frames[0]])
        at = round(t0 * 16000)
        assert clips.audio.lengths[number] == 6400  # 10 frames of 40 ms
        np.testing.assert_allclose(clips.audio.data[number], reference[4][:, at:at + 6400], rtol=0, atol=1e-3)
    # stream 1 is 8 kHz: resampled to 16 kHz it lines up with FFmpeg's own decode, resampled
    resampler = av.AudioResampler(format="fltp", layout="mono", rate=16000)
    frame = av.AudioFrame.from_ndarray(np.ascontiguousarray(reference[1]), format="fltp", layout="stereo")
    frame.sample_rate = 8000
    whole = np.concatenate([f.to_ndarray() for f in resampler.resample(frame) + resampler.resample(None)], axis=1)[0]
    audio = decoder.get_clips(vclip.contiguous(25, starts="even", clips_per_video=3), audio=vclip.AudioSpec()).audio
    for number, start in enumerate(audio.start_seconds):
        at = round(start * 16000)
        got = audio.data[number, 0]
        shifts = range(-3, 4)
        errors = [np.abs(got[10:-10] - whole[at + k + 10:at + k + got.size - 10]).mean() for k in shifts]
        assert shifts[int(np.argmin(errors))] == 0 and min(errors) < 0.01, errors


def test_each_frames_own_span(av_videos):
    decoder = vclip.VideoDecoder(av_videos["aac_vfr"], device="cpu")
    index = decoder.index
    spec = vclip.AudioSpec(span="frame", channels=2, dtype="int16")
    clips = decoder.get_clips(vclip.contiguous(6, starts="even", clips_per_video=2), audio=spec)
    audio = clips.audio
    assert audio.data.shape[:3] == (2, 6, 2) and audio.data.dtype == np.int16
    durations = np.diff(np.append(index.pts_seconds, index.end_seconds))
    for number, frames in enumerate(clips.frame_indices):
        np.testing.assert_array_equal(audio.start_seconds[number], index.pts_seconds[frames])
        np.testing.assert_array_equal(audio.lengths[number], [span_samples(d, RATE) for d in durations[frames]])
        assert audio.data.shape[-1] == audio.lengths.max()
        for position, frame in enumerate(frames):
            length = audio.lengths[number, position]
            samples = audio.data[number, position, 0, :length] / 32768.0
            assert not audio.data[number, position, :, length:].any()  # padding
            lag, correlation = measured_lag(samples, float(index.pts_seconds[frame] - index.start_seconds))
            assert abs(lag) <= 1.0 and correlation > 0.97, (frame, lag, correlation)
    clip_audio = decoder.get_clips(vclip.contiguous(6, starts="even", clips_per_video=2),
                                   audio=vclip.AudioSpec(channels=2, dtype="int16")).audio
    float_audio = decoder.get_clips(vclip.contiguous(6, starts="even", clips_per_video=2),
                                    audio=vclip.AudioSpec(channels=2)).audio
    np.testing.assert_array_equal(clip_audio.data,
                                  np.clip(np.rint(float_audio.data * 32768), -32768, 32767).astype(np.int16))


def test_padded_positions_and_segments_have_no_audio_past_them(av_videos):
    decoder = vclip.VideoDecoder(av_videos["pcm_mkv"], device="cpu")
    index = decoder.index
    clips = decoder.get_clips(vclip.contiguous(80, end_policy="repeat_last"), audio=vclip.AudioSpec())
    assert clips.padded.sum() == 20
    assert clips.audio.lengths[0] == span_samples(index.end_seconds - index.start_seconds, RATE)
    frames = decoder.get_clips(vclip.contiguous(80, end_policy="repeat_last"), audio=vclip.AudioSpec(span="frame"))
    lengths, padded = frames.audio.lengths[0], frames.padded[0]
    assert (lengths[padded] == 0).all() and (lengths[~padded] > 0).all()
    segment = (0.5, 1.0)  # the clips end at the segment's end, not at the last frame's end
    inside = decoder.get_clips(vclip.contiguous(30, end_policy="repeat_last"), segment=segment, audio=vclip.AudioSpec())
    assert inside.audio.start_seconds[0] == index.pts_seconds[inside.frame_indices[0, 0]]
    assert inside.audio.start_seconds[0] + inside.audio.lengths[0] / RATE <= 1.0 + 1 / RATE


def test_clips_in_seconds_take_their_target_times(av_videos):
    decoder = vclip.VideoDecoder(av_videos["aac_mp4"], device="cpu")
    sampler = vclip.contiguous(fps=8, duration=0.75, starts="random", clips_per_video=3)
    clips = decoder.get_clips(sampler, seed=4, audio=vclip.AudioSpec())
    drawn = sampler.sample_with_padding(decoder.index, seed=4)
    for number, clip in enumerate(drawn):
        assert clips.audio.start_seconds[number] == clip.target_seconds[0]  # not the pts of the frame shown
        assert clips.audio.lengths[number] == 12000  # 6 positions of 1/8 s
        lag, correlation = measured_lag(clips.audio.data[number, 0].astype(np.float64), clip.target_seconds[0])
        assert abs(lag) <= 1.0 and correlation > 0.98


def test_videos_without_audio_give_silence_or_refuse(videos):
    decoder = vclip.VideoDecoder(videos["h264"], device="cpu")
    clips = decoder.get_clips(vclip.contiguous(4), audio=vclip.AudioSpec())
    assert not clips.audio.has_audio and clips.audio.stream_index is None and not clips.audio.data.any()
    assert clips.audio.lengths[0] == span_samples(4 / 30, RATE)
    assert vclip.index_audio(videos["h264"]) is None
    with pytest.raises(vclip.NoAudioError, match="has no audio stream"):
        decoder.get_clips(vclip.contiguous(4), audio=vclip.AudioSpec(missing="error"))
    with pytest.raises(vclip.NoAudioError, match=r"stream 0 is not an audio stream \(streams: #0 video\)"):
        vclip.index_audio(videos["h264"], stream_index=0)


def test_audio_indexes_are_cached_beside_video_indexes(av_videos, tmp_path):
    path = av_videos["aac_mp4"]
    vclip.clear_index_cache()
    first = vclip.index_audio(path, cache_dir=tmp_path)
    assert vclip.index_audio(path) is first  # memory
    video = vclip.index_video(path, cache_dir=tmp_path)
    names = sorted(os.listdir(tmp_path))
    assert len(names) == 2 and DiskCache.entry_name((os.path.realpath(path), None)) in names  # the video's, as ever
    vclip.clear_index_cache()
    again = vclip.index_audio(path, cache_dir=tmp_path)  # from disk
    assert again is not first and again.num_packets == first.num_packets
    np.testing.assert_array_equal(again.packet_start, first.packet_start)
    assert again.origin_seconds == first.origin_seconds and again.extradata == first.extradata
    assert vclip.index_video(path, cache_dir=tmp_path).num_frames == video.num_frames


def test_bytes_and_file_objects_read_the_same_audio(av_videos):
    path = av_videos["opus_webm"]
    expected = vclip.VideoDecoder(path, device="cpu").get_audio(0.2, 0.9).data
    data = Path(path).read_bytes()
    np.testing.assert_array_equal(vclip.VideoDecoder(data, device="cpu").get_audio(0.2, 0.9).data, expected)
    with open(path, "rb") as file:
        np.testing.assert_array_equal(vclip.VideoDecoder(file, device="cpu").get_audio(0.2, 0.9).data, expected)


def test_the_audio_of_a_url_reads_only_its_packets(tmp_path):
    from range_server import range_server

    path = make_video(tmp_path / "long.mp4", num_frames=300, width=64, height=48, audio_codec="pcm_s16le",
                      audio_sample_rate=48000)  # PCM: large audio packets, 96 kB a second
    expected = vclip.VideoDecoder(path, device="cpu").get_audio(4.0, 4.5).data
    with range_server(tmp_path) as server:
        decoder = vclip.VideoDecoder(server.url("long.mp4"), device="cpu")
        vclip.index_audio(server.url("long.mp4"))
        server.reset_counts()
        got = decoder.get_audio(4.0, 4.5).data
        assert 0 < server.bytes_sent < 0.2 * os.path.getsize(path), server.bytes_sent
    np.testing.assert_array_equal(got, expected)


def test_audio_spec_checks_its_arguments():
    assert vclip.AudioSpec() == vclip.AudioSpec(16000, 1, "float32", "clip", None, "silence")
    for options, message in (
        (dict(sample_rate=0), r"sample_rate \(0\) must be an integer in \[1000, 768000\]"),
        (dict(channels=6), r"channels \(6\) must be 1 \(mono\) or 2 \(stereo\)"),
        (dict(dtype="float64"), r"dtype \('float64'\) must be one of 'float32', 'int16'"),
        (dict(span="video"), r"span \('video'\) must be one of 'clip', 'frame'"),
        (dict(missing="skip"), r"missing \('skip'\) must be one of 'silence', 'error'"),
        (dict(stream_index=-1), r"stream_index \(-1\) must be an integer >= 0, or None"),
    ):
        with pytest.raises(vclip.ArgumentError, match=message):
            vclip.AudioSpec(**options)


def test_get_clips_and_get_audio_check_their_arguments(av_videos):
    decoder = vclip.VideoDecoder(av_videos["aac_mp4"], device="cpu")
    with pytest.raises(vclip.ArgumentError, match=r"audio \(16000\) must be an AudioSpec or None"):
        decoder.get_clips(vclip.contiguous(4), audio=16000)
    with pytest.raises(vclip.ArgumentError, match=r"end_seconds \(1.0\) must be a number > start_seconds \(1.5\)"):
        decoder.get_audio(1.5, 1.0)
    audio = decoder.get_audio(-0.5, 0.25)  # before the stream: silence, the length as asked
    assert audio.lengths[0] == 12000 and not audio.data[0, 0, :7000].any() and audio.data[0, 0, 9000:].any()
