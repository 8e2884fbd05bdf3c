"""The loader's audio helper processes: a loader's audio is decoded in them (the script needs no main
guard), a helper that dies is replaced and its clip decoded again, a clip that kills helpers twice is
its video's error, videos held in memory are decoded in the loader's own process, and no helper
outlives its loader."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import require_extra, worker_pids

import vclip
from vclip._audio.spans import ClipSpans
from vclip._bytes.sources import hold_video, is_shareable, slice_name
from vclip._loader.audio_processes import HELPER_DEATHS_PER_CLIP, AudioHelpers, AudioRequest
from vclip.synthetic import make_video

torch = require_extra("torch")

SPEC = vclip.AudioSpec(sample_rate=16000)


def helper_pids() -> list[int]:
    return worker_pids("vclip._loader.audio_processes:serve_helper")


pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux's /proc")


@pytest.fixture(scope="module")
def long_video(tmp_path_factory) -> str:
    """20 s of video with AAC audio: a request for all of it keeps a helper busy for a while."""
    return make_video(tmp_path_factory.mktemp("audio_helpers") / "long.mp4", num_frames=600, width=64, height=48,
                      audio_codec="aac", seed=5)


def request_of(path: str, start: float, end: float) -> AudioRequest:
    span = ClipSpans(np.array([start]), np.array([end]), start, end)
    return AudioRequest(path, span, SPEC, 1, round((end - start) * SPEC.sample_rate), None)


def expected(path: str, start: float, end: float) -> np.ndarray:
    return vclip.VideoDecoder(path, device="cpu").get_audio(start, end, audio=SPEC).data[0]


def decode(helpers: AudioHelpers, request: AudioRequest) -> tuple[np.ndarray, np.ndarray, bool]:
    output = np.zeros((1, 1, request.samples), np.float32)
    lengths, has_audio = helpers.decode(request, output)
    return output[0], lengths, has_audio


def kill_helpers(times: int, stop: threading.Event, spare: set[int]) -> list[int]:
    """Kill the audio helpers of this process but ``spare`` (other loaders') as they appear,
    ``times`` of them in all."""
    killed: list[int] = []
    while len(killed) < times and not stop.is_set():
        for pid in helper_pids():
            if pid not in killed and pid not in spare and len(killed) < times:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        time.sleep(0.005)
    return killed


def test_a_loaders_audio_is_decoded_in_helpers_that_close_with_it(tmp_path):
    paths = [make_video(tmp_path / f"v{k}.mp4", num_frames=45, width=64, height=48, audio_codec="aac", seed=k)
             for k in range(3)]
    loader = vclip.ClipLoader([(p, k) for k, p in enumerate(paths)], vclip.strided(6, 2), batch_size=3,
                              device="cpu", audio=SPEC)
    others = set(helper_pids())  # left by other tests' loaders, not closed
    batches = iter(loader)
    batch = next(batches)
    assert set(helper_pids()) - others, "no audio helper process runs beside the loader"
    for k in range(3):
        path = paths[int(batch.video_ids[k])]
        index = vclip.index_video(path)
        frames = batch.frame_indices[k].numpy()
        end = float(index.pts_seconds[frames[-1] + 1])
        wanted = expected(path, float(index.pts_seconds[frames[0]]), end)
        np.testing.assert_allclose(batch.audio[k, :, :int(batch.audio_lengths[k])].numpy(), wanted, atol=1e-6)
    list(batches)
    loader.close()
    assert not set(helper_pids()) - others


def test_a_script_without_a_main_guard_gets_its_audio(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import vclip
        from vclip.synthetic import make_video

        paths = [make_video(f"v{k}.mp4", num_frames=45, width=64, height=48, audio_codec="aac", seed=k)
                 for k in range(2)]
        loader = vclip.ClipLoader([(p, k) for k, p in enumerate(paths)], vclip.strided(6, 2), batch_size=2,
                                  device="cpu", audio=vclip.AudioSpec(sample_rate=16000))
        for batch in loader:
            assert batch.has_audio.all() and float(batch.audio.abs().max()) > 0.01
        print("audio of", len(loader), "batches")
    """))
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "audio of 1 batches"


def test_a_helper_killed_while_decoding_is_replaced_and_the_clip_decoded_again(long_video):
    others = set(helper_pids())
    helpers = AudioHelpers(1)
    try:
        decode(helpers, request_of(long_video, 0.0, 0.5))  # started and warm
        stop = threading.Event()
        killer = threading.Thread(target=kill_helpers, args=(1, stop, others))
        killer.start()
        samples, lengths, has_audio = decode(helpers, request_of(long_video, 0.0, 19.0))
        stop.set()
        killer.join()
        np.testing.assert_allclose(samples, expected(long_video, 0.0, 19.0), atol=1e-6)
        assert has_audio and int(lengths) == 19 * SPEC.sample_rate
        assert len(set(helper_pids()) - others) == 1
    finally:
        helpers.close()


def test_a_clip_that_kills_its_helpers_is_its_videos_error(long_video):
    helpers = AudioHelpers(1)
    stop = threading.Event()
    killer = threading.Thread(target=kill_helpers, args=(HELPER_DEATHS_PER_CLIP, stop, set(helper_pids())))
    try:
        decode(helpers, request_of(long_video, 0.0, 0.5))
        killer.start()
        with pytest.raises(vclip.CorruptVideoError, match=f"killed the audio process {HELPER_DEATHS_PER_CLIP} times"
                           ) as raised:
            decode(helpers, request_of(long_video, 0.0, 19.0))
        assert raised.value.path == long_video
        stop.set()
        killer.join()
        samples, _, _ = decode(helpers, request_of(long_video, 1.0, 1.5))  # the next clip gets a live helper
        np.testing.assert_allclose(samples, expected(long_video, 1.0, 1.5), atol=1e-6)
    finally:
        stop.set()
        helpers.close()


def test_a_helpers_video_error_reaches_the_caller(tmp_path):
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(b"not a video at all" * 100)
    helpers = AudioHelpers(1)
    try:
        with pytest.raises(vclip.VideoError) as raised:
            decode(helpers, request_of(str(broken), 0.0, 0.5))
        assert raised.value.path == str(broken)
    finally:
        helpers.close()


def test_videos_held_in_memory_are_decoded_in_the_loaders_process(tmp_path):
    path = make_video(tmp_path / "v.mp4", num_frames=45, width=64, height=48, audio_codec="aac", seed=1)
    name, holder = hold_video(Path(path).read_bytes())
    assert not is_shareable(name) and not is_shareable(slice_name(name, "a.mp4", 0, 10))
    assert is_shareable(path) and is_shareable(slice_name(path, "a.mp4", 0, 10))
    assert is_shareable("https://example.com/a.mp4")
    datasets = require_extra("datasets")
    dataset = datasets.Dataset.from_dict({"video": [Path(path).read_bytes()], "label": [0]})
    loader = vclip.ClipLoader(vclip.HuggingFaceSource(dataset, video_column="video", label_column="label"),
                              vclip.strided(6, 2), batch_size=1, device="cpu", audio=SPEC, shuffle=False)
    others = set(helper_pids())
    from_bytes = [batch.audio.clone() for batch in loader]
    assert not set(helper_pids()) - others  # nothing was sent to a helper
    loader.close()
    loader = vclip.ClipLoader([(path, 0)], vclip.strided(6, 2), batch_size=1, device="cpu", audio=SPEC, shuffle=False)
    from_path = [batch.audio.clone() for batch in loader]
    loader.close()
    assert len(from_bytes) == len(from_path) > 0
    for a, b in zip(from_bytes, from_path):
        torch.testing.assert_close(a, b)
    del holder
