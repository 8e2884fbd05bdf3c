"""The command line's audio: ``vclip info`` lists audio streams with their timing against the video,
``vclip sample --audio-sample-rate`` writes each clip's audio (arrays in .npz, WAV files beside PNGs)."""

from __future__ import annotations

import json
import wave

import numpy as np
import pytest
from test_cli import run

import vclip
from vclip.synthetic import make_video


@pytest.fixture(scope="module")
def early(tmp_path_factory) -> str:
    """PCM audio that starts 0.3 s before the first frame."""
    return make_video(tmp_path_factory.mktemp("cli_av") / "early.mkv", num_frames=45, width=64, height=48,
                      audio_codec="pcm_s16le", audio_sample_rate=22050, audio_offset_seconds=-0.3)


def test_info_lists_audio_streams_with_their_start_against_the_video(capsys, early):
    status, out, _ = run(capsys, "info", early)
    assert status == 0
    assert "stream #1   audio     pcm_s16le  22050 Hz, 2 channels, 1.800 s, starts 0.300 s before the video" in out
    status, out, _ = run(capsys, "info", "--json", early)
    audio = json.loads(out)[0]["streams"][1]
    assert audio["start_offset_seconds"] == pytest.approx(-0.3) and audio["duration_seconds"] == pytest.approx(1.8)
    assert (audio["codec"], audio["sample_rate"], audio["channels"]) == ("pcm_s16le", 22050, 2)


def test_info_on_the_nasa_file(capsys, shared_videos):
    status, out, _ = run(capsys, "info", "--json", shared_videos / "nasa_13013.mp4")
    streams = json.loads(out)[0]["streams"]
    for number, rate in ((1, 8000), (4, 16000)):
        assert streams[number]["sample_rate"] == rate and streams[number]["layout"] == "stereo"
        assert streams[number]["duration_seconds"] == pytest.approx(13.056)  # 102 packets of 1024 samples
        assert streams[number]["start_offset_seconds"] == 0.0


def test_sample_writes_the_clips_audio(capsys, early, tmp_path):
    out = tmp_path / "clips.npz"
    status, _, err = run(capsys, "sample", early, "--mode", "strided", "--sequence-length", 4, "--stride", 3,
                         "--clips-per-video", 2, "--starts", "even", "--out", out, "--audio-sample-rate", 16000,
                         "--audio-channels", 2)
    assert status == 0, err
    saved = np.load(out)
    spec = vclip.AudioSpec(channels=2)
    expected = vclip.VideoDecoder(early, device="cpu").get_clips(
        vclip.strided(4, 3, clips_per_video=2, starts="even"), audio=spec).audio
    np.testing.assert_array_equal(saved["audio"], expected.data)
    np.testing.assert_array_equal(saved["audio_lengths"], expected.lengths)
    np.testing.assert_array_equal(saved["audio_start_seconds"], expected.start_seconds)
    assert saved["has_audio"].tolist() == [True, True] and int(saved["audio_sample_rate"]) == 16000
    folder = tmp_path / "png"
    status, _, err = run(capsys, "sample", early, "--mode", "contiguous", "--sequence-length", 3, "--seed", 1,
                         "--out", folder, "--audio-sample-rate", 8000, "--audio-span", "frame")
    assert status == 0, err
    wavs = sorted(path.name for path in folder.glob("*.wav"))
    assert wavs == ["clip000_000.wav", "clip000_001.wav", "clip000_002.wav"]
    with wave.open(str(folder / "clip000_001.wav")) as file:
        # one frame: 33 or 34 ms in Matroska's millisecond timestamps
        assert (file.getframerate(), file.getnchannels()) == (8000, 1) and file.getnframes() in (264, 272)


def test_sample_refuses_audio_options_it_cannot_honour(capsys, early, tmp_path):
    status, _, err = run(capsys, "sample", early, "--mode", "contiguous", "--out", tmp_path / "x.mp4",
                         "--audio-sample-rate", 16000)
    assert status == 2 and "an .mp4 --out takes frames only" in err
    status, _, err = run(capsys, "sample", early, "--mode", "contiguous", "--out", tmp_path / "x.npz",
                         "--audio-channels", 2)
    assert status == 2 and "--audio-channels needs --audio-sample-rate" in err
    status, _, err = run(capsys, "sample", early, "--mode", "contiguous", "--out", tmp_path / "x.npz",
                         "--audio-sample-rate", 10)
    assert status == 2 and "sample_rate (10) must be an integer in [1000, 768000]" in err
