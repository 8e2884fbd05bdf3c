"""Mutation fuzzing (issue 10, item 7): every mutant of the synthetic videos either decodes into
correctly shaped output or raises a VideoError naming the file, through the API, the CLI and a
loader epoch; never another exception, a hang or a wrong shape. See tests/fuzzing.py, which also
runs on its own (``python tests/fuzzing.py --device cuda``) for NVDEC."""

from __future__ import annotations

import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import av
import fuzzing
import numpy as np
import pytest
from helpers import child_environment

import vclip

FUZZ_COUNT = int(os.environ.get("VCLIP_FUZZ_COUNT", "1000"))


class _Report:
    """Prints the fuzz summaries in pytest's terminal summary."""

    def __init__(self):
        self.sections: list[tuple[str, str]] = []

    def pytest_terminal_summary(self, terminalreporter):
        for title, text in self.sections:
            terminalreporter.write_sep("-", title)
            terminalreporter.write_line(text)


@pytest.fixture(scope="module")
def fuzz_report(request) -> _Report:
    manager = request.config.pluginmanager
    report = manager.get_plugin("vclip-fuzz-report")
    if report is None:
        report = _Report()
        manager.register(report, "vclip-fuzz-report")
    return report


def test_mutants_are_deterministic_and_varied(tmp_path):
    seeds = fuzzing.make_seeds(tmp_path)
    first = list(fuzzing.mutants(seeds, 80, seed=7))
    again = list(fuzzing.mutants(seeds, 80, seed=7))
    assert [m.data for m in first] == [m.data for m in again]
    assert [m.data for m in fuzzing.mutants(seeds, 3, seed=7, start=40)] == [m.data for m in first[40:43]]
    assert {m.mutation for m in first} == set(fuzzing.MUTATIONS)
    assert {m.seed_name for m in first} == set(fuzzing.SEEDS)
    originals = {name: open(path, "rb").read() for name, path in seeds.items()}
    assert all(m.data != originals[m.seed_name] for m in first)
    # the structure-aware mutations really find boxes, chunks and elements
    details = " ".join(m.detail for m in first if m.mutation in ("absurd_size", "absurd_count"))
    assert " size " in details and "count" in details and "element" in details


def test_every_pristine_seed_passes_the_checks(tmp_path):
    """The checks hold for the seeds themselves: the turned one's frames are 48x64, as shown."""
    seeds = fuzzing.make_seeds(tmp_path)
    assert vclip.index_video(seeds["turned_mp4"]).rotation == 90
    for name, path in seeds.items():
        fuzzing.check_api(path)
        if name in fuzzing._GOOD_ON_CPU:
            fuzzing.check_good(path, "cpu")


@pytest.mark.slow
def test_fuzz_api_and_cli(tmp_path, fuzz_report):
    summary = fuzzing.run_campaign(tmp_path, count=FUZZ_COUNT, device="cpu", cli_every=8, timeout=60.0)
    fuzz_report.sections.append(("vclip fuzz: API and CLI", summary.report()))
    assert not summary.failures, summary.report()
    assert summary.cases == FUZZ_COUNT and summary.good_checks == FUZZ_COUNT // 50
    assert summary.cli_cases == len(range(0, FUZZ_COUNT, 8))
    ok = summary.outcomes["ok"]
    assert 0.1 * FUZZ_COUNT < ok < 0.9 * FUZZ_COUNT  # the mutants neither all pass nor all fail


@pytest.mark.slow
def test_fuzz_vp9_in_a_child_process(tmp_path, fuzz_report):
    """Mutants of the VP9 seed, where FFmpeg's frame-threaded decoder crashed the process (SIGSEGV,
    the 302nd mutant of this campaign before the fix), in a child Python: a crash fails this test
    and names the mutant instead of ending the test run."""
    child = subprocess.run(
        [sys.executable, fuzzing.__file__, "--count", "600", "--seeds", "vp9_webm", "--cli-every", "0",
         "--out", str(tmp_path)],
        capture_output=True, text=True, env=child_environment(), timeout=600,
    )
    fuzz_report.sections.append(("vclip fuzz: VP9 in a child process", child.stdout.strip()[-3000:]))
    if child.returncode < 0:
        running = sorted((tmp_path / "mutants").iterdir())[-1]  # mutants that passed are deleted
        pytest.fail(f"the fuzzer died of signal {-child.returncode} on {running.name}")
    assert child.returncode == 0, child.stdout[-3000:] + child.stderr[-2000:]
    assert "600 mutants" in child.stdout and ", 0 failures" in child.stdout


@pytest.mark.slow
def test_fuzz_loader_epoch_skips_bad_videos(tmp_path, fuzz_report):
    seeds = fuzzing.make_seeds(tmp_path / "seeds")
    paths = [seeds["h264_mp4"], seeds["h264_mkv"]]
    for mutant in fuzzing.mutants(seeds, 30, seed=11, start=5000):
        path = tmp_path / mutant.name
        path.write_bytes(mutant.data)
        paths.append(str(path))
    result = fuzzing.loader_epoch(paths, timeout=180.0)
    fuzz_report.sections.append(
        (
            "vclip fuzz: loader epoch",
            f"{len(paths)} videos ({len(paths) - 2} mutants): {result['batches']} batches, {result['clips']} clips, "
            f"{len(result['skipped'])} videos skipped",
        )
    )
    assert result["batches"] >= 1 and result["clips"] >= 4
    assert result["skipped"] <= set(paths) and seeds["h264_mp4"] not in result["skipped"]


# -- what the fuzzer found, kept as plain regressions ----------------------------------------------
def test_picture_size_changing_mid_stream_is_corrupt_video_error(tmp_path):
    """Bit flips in an in-band SPS gave 96x48 frames in a 64x48 stream: a ValueError on the copy.
    Here a second encoder's 96x48 packets follow a 64x48 encoder's in one MPEG-TS stream."""
    path = tmp_path / "joined.ts"
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        stream.codec_context.time_base = Fraction(1, 30)
        stream.options = {"bf": "0", "g": "10"}
        wider = av.CodecContext.create("libx264", "w")
        wider.width, wider.height, wider.pix_fmt = 96, 48, "yuv420p"
        wider.time_base, wider.options = Fraction(1, 30), {"bf": "0", "g": "10"}
        for i in range(20):
            frame = av.VideoFrame.from_ndarray(np.full((48, 64 if i < 10 else 96, 3), 10 * i, np.uint8), format="rgb24")
            frame.pts = i
            if i == 10:
                container.mux(stream.encode(None))
            for packet in (stream if i < 10 else wider).encode(frame):
                packet.stream = stream
                container.mux(packet)
        for packet in wider.encode(None):
            packet.stream = stream
            container.mux(packet)
    decoder = vclip.VideoDecoder(path, device="cpu")
    assert (decoder.index.width, decoder.index.num_frames) == (64, 20)
    assert decoder.get_frames([0, 9]).data.shape == (2, 48, 64, 3)
    with pytest.raises(vclip.CorruptVideoError, match=r"joined\.ts: a frame is 96x48, the stream 64x48"):
        decoder.get_frames([12])


def _h264_ts(path: Path, streams: int, frames: int, **options: str) -> bytes:
    """An MPEG-TS file of ``streams`` 64x48 H.264 streams of ``frames`` frames each (its bytes)."""
    with av.open(str(path), "w", format="mpegts", options=options) as container:
        added = []
        for _ in range(streams):
            stream = container.add_stream("libx264", rate=30)
            stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
            stream.options = {"bf": "0", "g": "10"}
            added.append(stream)
        for i in range(frames):
            for stream in added:
                frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), 4 * i, np.uint8), format="rgb24")
                frame.pts = i
                container.mux(stream.encode(frame))
        for stream in added:
            container.mux(stream.encode(None))
    return path.read_bytes()


def test_a_stream_appearing_mid_file_is_corrupt_video_error(tmp_path):
    """Damage that makes a new stream appear after 60 video packets (the fuzzer found it in an
    MPEG-TS file: PyAV raised a bare IndexError from its demuxer). Here a second program, of two
    streams, follows a file of one: FFmpeg has read the header by then, and finds its streams as
    their packets come."""
    first = _h264_ts(tmp_path / "first.ts", 1, 60)
    second = _h264_ts(tmp_path / "second.ts", 2, 10, mpegts_service_id="2", mpegts_pmt_start_pid="0x1100",
                      mpegts_start_pid="0x0300")
    path = tmp_path / "joined.ts"
    path.write_bytes(first + second)
    with pytest.raises(vclip.CorruptVideoError, match=r"joined\.ts: demuxing failed after 60 packets \(a packet of "
                                                      r"a stream that appears in the middle of the file\)"):
        vclip.index_video(path)
