"""Audio headers out of the ordinary: a damaged one claiming 2,147,483,647 Hz or 255 channels is the
file's CorruptVideoError (it was a 8 GiB allocation, or an IndexError), and real audio of 8 channels
(7.1) mixes down as FFmpeg mixes it (it was an IndexError from every 8-channel stream)."""

from __future__ import annotations

import struct
from pathlib import Path

import av
import numpy as np
import pytest

import vclip
from vclip.synthetic import make_video

RATE = 44100


@pytest.fixture(scope="module")
def pcm_mkv(tmp_path_factory) -> Path:
    """A Matroska video with 16-bit PCM stereo audio at 44.1 kHz."""
    folder = tmp_path_factory.mktemp("headers")
    return Path(make_video(folder / "pcm.mkv", num_frames=30, width=64, height=48, audio_codec="pcm_s16le",
                           audio_sample_rate=RATE))


def patched(source: Path, target: Path, old: bytes, new: bytes) -> str:
    data = source.read_bytes()
    assert data.count(old) == 1, old
    target.write_bytes(data.replace(old, new))
    return str(target)


@pytest.mark.parametrize(("old", "new", "claim"), [
    (b"\xb5\x88" + struct.pack(">d", RATE), b"\xb5\x88" + struct.pack(">d", 2_147_483_647), "2147483647 Hz"),
    (b"\x9f\x81\x02", b"\x9f\x81\xff", "255 channels"),  # Matroska's Channels element
])
def test_an_absurd_audio_header_is_the_files_corrupt_video_error(pcm_mkv, tmp_path, old, new, claim):
    path = patched(pcm_mkv, tmp_path / "damaged.mkv", old, new)
    with pytest.raises(vclip.CorruptVideoError, match=rf"damaged.mkv: audio stream #1 claims .*{claim}.*damaged "):
        vclip.index_audio(path)
    decoder = vclip.VideoDecoder(path, device="cpu")
    with pytest.raises(vclip.CorruptVideoError, match=claim):
        decoder.get_audio(0.0, 0.5)
    assert decoder.get_frames([0, 1]).data.shape[0] == 2  # the video itself is fine


def seven_one(source: Path, target: Path) -> str:
    """``source`` with its audio as 7.1: every channel the stereo track's left channel."""
    with av.open(str(source)) as inp, av.open(str(target), "w", format="matroska") as out:
        video = out.add_stream_from_template(inp.streams.video[0])
        audio = out.add_stream("pcm_s16le", rate=RATE, layout="7.1")
        for packet in inp.demux(inp.streams.video[0]):
            if packet.dts is not None:
                packet.stream = video
                out.mux(packet)
        inp.seek(0)  # the demux above read the whole file
        for frame in inp.decode(audio=0):
            left = frame.to_ndarray().reshape(-1, 2)[:, 0]
            surround = av.AudioFrame.from_ndarray(np.repeat(left[:, None], 8, axis=1).reshape(1, -1), format="s16",
                                                  layout="7.1")
            surround.sample_rate, surround.pts = RATE, frame.pts
            surround.time_base = frame.time_base
            out.mux(audio.encode(surround))
        out.mux(audio.encode(None))
    return str(target)


def test_seven_one_audio_mixes_down_as_ffmpeg_mixes_it(pcm_mkv, tmp_path):
    path = seven_one(pcm_mkv, tmp_path / "surround.mkv")
    index = vclip.index_audio(path)
    assert index.channels == 8  # Matroska stores the count, not the layout: FFmpeg mixes it as 7.1
    with av.open(path) as container:
        decoded = [frame for frame in container.decode(audio=0)]
    first = float(decoded[0].pts * decoded[0].time_base)
    resampler = av.AudioResampler(format="fltp", layout="stereo", rate=RATE)
    mixed = [resampler.resample(frame) for frame in decoded] + [resampler.resample(None)]
    reference = np.concatenate([out.to_ndarray() for frames in mixed for out in frames], axis=1)
    got = vclip.VideoDecoder(path, device="cpu").get_audio(
        0.3, 0.7, audio=vclip.AudioSpec(sample_rate=RATE, channels=2)).data[0]
    at = round((0.3 - first) * RATE)
    assert np.abs(got).max() > 0.1
    np.testing.assert_allclose(got, reference[:, at:at + got.shape[1]], rtol=0, atol=1e-5)
