"""vclip.check and ``vclip check``: every frame decoded, damage found where it was made."""

import json
import os
import signal
from pathlib import Path

import numpy as np
import pytest
from helpers import frame_payload, zero_second_half

import vclip
import vclip.check
from vclip._device import CPU, Device
from vclip.check import check_video, check_videos
from vclip.cli import main
from vclip.synthetic import make_video

DAMAGED_FRAME = 32  # a frame in the second group of pictures (keyframes at 0, 20, 40)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """A good video, its copies damaged in one frame's bytes (zeroed, bit-flipped), truncated, a text
    file and a missing file."""
    folder = tmp_path_factory.mktemp("check")
    good = make_video(folder / "good.mp4", num_frames=60, width=128, height=96, keyframe_interval=20, b_frames=2)
    data = Path(good).read_bytes()
    start, end = frame_payload(vclip.index_video(good), DAMAGED_FRAME)
    zeroed = bytearray(data)
    zeroed[start:end] = bytes(end - start)
    flipped = bytearray(data)
    flipped[start:end:5] = bytes(b ^ 0x55 for b in flipped[start:end:5])
    (folder / "zeroed.mp4").write_bytes(zeroed)
    (folder / "flipped.mp4").write_bytes(flipped)
    (folder / "truncated.mp4").write_bytes(data[: len(data) // 2])
    (folder / "notes.mp4").write_text("not a video\n" * 40)
    return {
        "good": good,
        "zeroed": str(folder / "zeroed.mp4"),
        "flipped": str(folder / "flipped.mp4"),
        "truncated": str(folder / "truncated.mp4"),
        "text": str(folder / "notes.mp4"),
        "missing": str(folder / "missing.mp4"),
        "folder": folder,
    }


def test_a_good_video_is_ok(dataset):
    result = check_video(dataset["good"], device="cpu")
    assert (result.status, result.num_frames, result.bad_frames, result.problems) == ("ok", 60, (), ())
    assert result.ok and result.device == "cpu" and result.error is None


@pytest.mark.parametrize("name", ["zeroed", "flipped"])
def test_damage_is_found_in_the_frame_it_was_made(dataset, name):
    result = check_video(dataset[name], device="cpu")  # NVDEC may conceal it
    assert result.status == "corrupt" and result.num_frames == 60
    assert DAMAGED_FRAME in result.bad_frames
    assert all(20 <= frame < 40 for frame in result.bad_frames)  # the other groups of pictures decode cleanly
    assert any(("decode error" in p or "concealed" in p) and str(DAMAGED_FRAME) in p for p in result.problems)


def test_every_frame_decoded_from_a_concealed_picture_is_listed(tmp_path):
    """FFmpeg flags only the damaged keyframe 30; frames 31-59 are decoded from it (up to keyframe
    60) and carry its damage: all are listed, the other groups of pictures are clean."""
    good = make_video(tmp_path / "good.mp4", num_frames=90, width=96, height=64, keyframe_interval=30)
    result = check_video(zero_second_half(good, tmp_path / "concealed.mp4", 30), device="cpu")
    assert result.status == "corrupt" and result.bad_frames == tuple(range(30, 60))
    assert result.problems == ("frame 30: damaged, concealed by the decoder",
                               "frames 31-59: decoded from damaged frame 30")


@pytest.mark.parametrize(
    "name, problem",
    [
        ("truncated", "not a video container"),  # the mp4's index (moov) is at the end, cut off
        ("text", "not a video container FFmpeg can read"),
        ("missing", "file does not exist"),
    ],
)
def test_unreadable_files_say_why(dataset, name, problem):
    result = check_video(dataset[name], device="cpu")
    assert (result.status, result.num_frames, result.bad_frames) == ("unreadable", 0, ())
    assert problem in result.error


def test_a_cut_off_matroska_file_is_reported(tmp_path):
    path = make_video(tmp_path / "full.mkv", num_frames=40, width=96, height=64, keyframe_interval=10)
    data = Path(path).read_bytes()
    (tmp_path / "cut.mkv").write_bytes(data[: len(data) * 3 // 5])
    assert check_video(path, device="cpu").status == "ok"
    result = check_video(tmp_path / "cut.mkv", device="cpu")
    assert result.status == "corrupt" and 0 < result.num_frames < 40 and result.bad_frames == ()
    index = vclip.index_video(tmp_path / "cut.mkv")  # times in milliseconds: 20 frames cover 0.666 s, not 20/30
    covered = index.end_seconds - index.start_seconds
    assert index.num_frames == result.num_frames and abs(covered - result.num_frames / 30) < 0.001
    assert result.problems == (
        f"the container says the stream lasts 1.333 s, its frames cover {covered:.3f} s: about "
        f"{40 - result.num_frames} frames after the last one are missing (truncated?)",
    )


def test_check_videos_in_parallel_keeps_the_order(dataset):
    names = ["zeroed", "good", "missing", "flipped"]
    seen = []
    results = check_videos([dataset[n] for n in names], device="cpu", workers=2, on_result=seen.append)
    assert [r.path for r in results] == [dataset[n] for n in names]
    assert [r.status for r in results] == ["corrupt", "ok", "unreadable", "corrupt"]
    assert sorted(r.path for r in seen) == sorted(r.path for r in results)
    assert results[0].bad_frames == check_video(dataset["zeroed"], device="cpu").bad_frames


def test_check_videos_hands_each_video_a_device(dataset, monkeypatch):
    """The job resolves the request once; each video's check gets the Device, not a string."""
    seen = []

    def recording(path, **options):
        seen.append(options["device"])
        return check_video(path, **options)

    monkeypatch.setattr(vclip.check, "check_video", recording)
    results = check_videos([dataset["good"], dataset["zeroed"]], device="cpu", workers=1)  # in this thread
    assert seen == [CPU, CPU] and all(isinstance(device, Device) for device in seen)
    assert [r.device for r in results] == ["cpu", "cpu"]


def test_a_file_that_crashes_its_worker_is_the_only_one_affected(dataset, monkeypatch):
    """A file that kills its worker process (as FFmpeg crashing on damaged bytes would) is
    unreadable with the signal named; the files in flight beside it are checked again and keep
    their own results."""
    monkeypatch.setattr(vclip.check, "check_video", crash_or_check)  # what the spawned workers run
    names = ["good", "zeroed", "crash", "missing", "flipped", "good"]
    paths = [str(dataset["folder"] / "crash.mp4") if n == "crash" else dataset[n] for n in names]
    results = check_videos(paths, device="cpu", workers=2)
    assert [r.path for r in results] == paths
    assert [r.status for r in results] == ["ok", "corrupt", "unreadable", "unreadable", "corrupt", "ok"]
    assert results[2].error == "its worker process crashed (exit code -11, SIGSEGV); the file may be damaged"
    assert results[3].error == "file does not exist" and DAMAGED_FRAME in results[1].bad_frames


def crash_or_check(path, **options):
    """check_video, but a worker given crash.mp4 dies of a segmentation fault."""
    if os.path.basename(path) == "crash.mp4":
        os.kill(os.getpid(), signal.SIGSEGV)
    return check_video(path, **options)


def test_cli_check_table_json_and_exit_status(capsys, dataset, tmp_path):
    files = [dataset[n] for n in ("good", "zeroed", "text", "missing")]
    status = main(["check", *files, "--device", "cpu", "--workers", "1"])
    out, err = capsys.readouterr()
    assert status == 3
    lines = out.splitlines()
    assert lines[0].split() == ["status", "frames", "bad", "seconds", "file"]
    assert lines[1].split()[:3] == ["ok", "60", "0"] and lines[1].endswith(dataset["good"])
    assert lines[2].split()[0] == "corrupt" and lines[2].endswith(dataset["zeroed"])
    assert f"frame {DAMAGED_FRAME}: decode error" in lines[3]
    assert lines[-1] == "1 ok, 1 with bad frames, 2 unreadable of 4 videos"
    assert lines[-3].split()[0] == "unreadable" and lines[-3].endswith(dataset["missing"])
    assert lines[-2].strip() == "file does not exist"
    assert err == ""  # stderr is no terminal here: no progress bar, and the table says it all

    assert main(["check", *files, "--device", "cpu", "--json", "--workers", "1"]) == 3
    reports = json.loads(capsys.readouterr().out)
    assert [r["status"] for r in reports] == ["ok", "corrupt", "unreadable", "unreadable"]
    assert DAMAGED_FRAME in reports[1]["bad_frames"] and reports[3]["error"] == "file does not exist"

    assert main(["check", dataset["good"], "--device", "cpu"]) == 0
    assert main(["check", dataset["text"], dataset["missing"], "--device", "cpu", "--workers", "1"]) == 1
    capsys.readouterr()


def test_cli_check_takes_folders_and_list_files(capsys, dataset, tmp_path):
    listing = tmp_path / "videos.txt"
    relative = os.path.relpath(dataset["good"], tmp_path)
    listing.write_text(f"# my dataset\n{relative},3\n\n{dataset['zeroed']} 1\n")
    assert main(["check", str(listing), "--json", "--device", "cpu", "--workers", "1"]) == 3
    reports = json.loads(capsys.readouterr().out)
    assert [Path(r["file"]).resolve() for r in reports] == [
        Path(dataset["good"]).resolve(),
        Path(dataset["zeroed"]).resolve(),
    ]
    assert main(["check", str(dataset["folder"]), "--json", "--device", "cpu", "--workers", "1"]) == 3
    reports = json.loads(capsys.readouterr().out)
    assert [Path(r["file"]).name for r in reports] == sorted(
        ["flipped.mp4", "good.mp4", "notes.mp4", "truncated.mp4", "zeroed.mp4"]
    )
    assert [r["status"] for r in reports] == ["corrupt", "ok", "unreadable", "unreadable", "corrupt"]


def test_frame_ranges_are_compact(dataset):
    from vclip.check import _frame_ranges

    assert _frame_ranges([4]) == "frame 4"
    assert _frame_ranges([3, 4, 5, 9]) == "frames 3-5, 9"
    assert _frame_ranges(list(np.arange(0, 40, 2))).endswith("... (20 frames)")


@pytest.mark.gpu
def test_check_on_the_gpu(dataset):
    good, zeroed = check_videos([dataset["good"], dataset["zeroed"]], device="cuda")
    assert good.status == "ok" and good.device.startswith("cuda") and good.num_frames == 60
    assert zeroed.status in ("ok", "corrupt")  # NVDEC may conceal the damage; the CPU check finds it
    if zeroed.status == "corrupt":
        assert all(20 <= frame < 40 for frame in zeroed.bad_frames)
