"""The command line's paths and outputs: an input that cannot even be stat'ed is that file's error, an
``--out`` that cannot be written is refused before any decoding, a write that fails (a full disk, a
file-size limit) is reported per file and leaves no cut-off file behind; ``sample`` draws each
video's own starts under one ``--seed`` and fills one .npz with the most common clip shape."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import child_environment, require_extra
from PIL import Image
from test_cli import run

from vclip.synthetic import make_video

LONG_NAME = "x" * 300 + ".mp4"  # over the 255 bytes a file name may have
LONG_PATH = "/".join(["y" * 200] * 25)  # over PATH_MAX (4096)


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("outputs")
    return {
        "a": make_video(folder / "a.mp4", num_frames=24, width=64, height=48, seed=1),
        "b": make_video(folder / "b.mp4", num_frames=24, width=64, height=48, seed=2),
        "c": make_video(folder / "c.mp4", num_frames=24, width=64, height=48, seed=3),
        "portrait": make_video(folder / "portrait.mp4", num_frames=24, width=48, height=64, seed=4),
        "big": make_video(folder / "big.mp4", num_frames=24, width=640, height=480, keyframe_interval=4, seed=5),
    }


def leftovers(folder: Path) -> list[str]:
    """Temporary files of writes that did not finish."""
    return [os.fspath(path) for path in folder.rglob("*") if ".partial" in path.name]


@pytest.mark.parametrize("command", [
    ["check", "--device", "cpu"],
    ["sample", "--mode", "contiguous", "--sequence-length", "4", "--out", "{tmp}/clips/"],
    ["keyframes", "--out", "{tmp}/keyframes"],
    ["index", "--out", "{tmp}/catalog.parquet"],
])
def test_an_input_that_cannot_be_statted_is_its_own_error(capsys, small, tmp_path, command):
    if command[0] == "index":
        require_extra("pyarrow")
    argv = [part.format(tmp=tmp_path) for part in command]
    status, out, err = run(capsys, *argv[:1], LONG_NAME, small["a"], *argv[1:])
    assert status == 3, err  # some files failed, the others were done
    assert "Traceback" not in err
    assert "too long" in (out + err).split("x" * 300, 1)[1].lower(), out + err  # the file, then its problem


@pytest.mark.parametrize("command, out", [
    (["sample", "--mode", "keyframe"], "dangling.npz"),
    (["sample", "--mode", "keyframe"], "dangling"),
    (["keyframes"], "dangling"),
    (["index"], "dangling.parquet"),
])
def test_an_out_that_is_a_link_to_nothing_is_refused_before_decoding(capsys, small, tmp_path, command, out):
    if command[0] == "index":
        require_extra("pyarrow")
    (tmp_path / out).symlink_to(tmp_path / "gone" / out)
    status, _, err = run(capsys, *command, small["a"], small["b"], "--out", tmp_path / out)
    assert status == 2
    assert f"is a symbolic link to {str(tmp_path / 'gone' / out)!r}, which does not exist" in err
    assert not (tmp_path / "gone").exists()


@pytest.mark.parametrize("command, out", [
    (["sample", "--mode", "keyframe"], LONG_PATH + ".npz"),
    (["sample", "--mode", "keyframe"], LONG_PATH),
    (["keyframes"], LONG_PATH),
    (["index"], LONG_PATH + ".parquet"),
    (["sample", "--mode", "keyframe"], LONG_NAME[:-4] + ".npz"),
])
def test_an_out_the_system_refuses_is_refused_before_decoding(capsys, small, tmp_path, command, out):
    if command[0] == "index":
        require_extra("pyarrow")
    status, _, err = run(capsys, *command, small["a"], "--out", tmp_path / out)
    assert status == 2 and "Traceback" not in err
    assert "cannot be used: File name too long" in err


def test_index_out_below_a_file_is_refused(capsys, small, tmp_path):
    require_extra("pyarrow")
    status, _, err = run(capsys, "index", small["a"], "--out", Path(small["a"]) / "catalog.parquet")
    assert status == 2
    assert f"{small['a']!r} is a file, not a folder" in err


def test_index_without_pyarrow_exits_2_like_every_missing_extra(small, tmp_path):
    script = "import sys\nsys.modules['pyarrow'] = None\nfrom vclip.cli import main\nsys.exit(main(sys.argv[1:]))"
    done = subprocess.run([sys.executable, "-c", script, "index", small["a"], "--out", str(tmp_path / "c.parquet")],
                          capture_output=True, text=True, env=child_environment(), timeout=120)
    assert done.returncode == 2, done.stderr
    assert "vclip index: error:" in done.stderr and "pyarrow" in done.stderr and "Traceback" not in done.stderr


def limited(*argv, file_size: int) -> subprocess.CompletedProcess:
    """``vclip ARGV`` in a child that may write no file larger than ``file_size`` bytes: its writes
    past that fail as on a full disk (EFBIG; the signal that would kill it is ignored)."""
    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))

    script = "import sys\nfrom vclip.cli import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.run([sys.executable, "-c", script, *map(str, argv)], capture_output=True, text=True,
                          env=child_environment(), timeout=120, preexec_fn=limit)


def test_keyframe_images_that_do_not_fit_fail_that_video_and_leave_no_cut_off_file(small, tmp_path):
    out = tmp_path / "keyframes"
    done = limited("keyframes", small["a"], small["big"], "--out", out, file_size=16_000)
    assert done.returncode == 3, done.stderr  # some files failed
    assert (f"vclip keyframes: error: {small['big']}: writing its images into {out / 'big'} failed (File too large); "
            "none was kept") in done.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert [video["file"] for video in manifest["videos"]] == [small["a"]]
    assert [error["file"] for error in manifest["errors"]] == [small["big"]]
    assert not leftovers(out) and not (out / "big").exists()
    for image in out.rglob("*.jpg"):  # every image left is whole
        Image.open(image).load()


@pytest.mark.parametrize("share", [0.9, 0.5])
def test_a_keyframe_image_cut_by_the_size_limit_is_never_kept_or_listed(tmp_path, share):
    """Pillow's encoder took a short write for a whole one: a JPEG whose last write crossed the limit
    (at 0.9 of its size: one write of 64 KiB, then a short one) was kept cut off, listed in the
    manifest, and the command exited 0."""
    video = make_video(tmp_path / "one.mp4", num_frames=8, width=640, height=480, keyframe_interval=60, seed=5)
    whole = tmp_path / "whole"
    assert subprocess.run([sys.executable, "-m", "vclip", "keyframes", video, "--out", str(whole)],
                          capture_output=True, env=child_environment(), timeout=120).returncode == 0
    size = (whole / "one" / "frame_000000.jpg").stat().st_size
    assert size > 65536 and (whole / "one" / "contact_sheet.jpg").stat().st_size < share * size
    out = tmp_path / "keyframes"
    done = limited("keyframes", video, "--out", out, file_size=int(share * size))
    assert done.returncode == 1, done.stderr  # its only video failed
    assert f"vclip keyframes: error: {video}: writing its images into {out / 'one'} failed (File too large)" \
        in done.stderr and "Traceback" not in done.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["keyframes"] == [] and manifest["videos"] == []
    assert [error["file"] for error in manifest["errors"]] == [video]
    assert sorted(path.name for path in out.rglob("*")) == ["manifest.json"]


def test_a_manifest_that_does_not_fit_is_reported_and_never_left_empty(small, tmp_path):
    out = tmp_path / "keyframes"
    done = limited("keyframes", *[small["a"]] * 40, "--out", out, file_size=8_000)  # images ~4 kB, manifest ~14 kB
    assert done.returncode == 1, done.stderr
    assert f"vclip keyframes: error: writing {out / 'manifest.json'} failed (File too large)" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (out / "manifest.json").exists() and not leftovers(out)
    assert len(list(out.rglob("frame_000000.jpg"))) == 40


def test_an_npz_that_does_not_fit_keeps_the_earlier_one(small, tmp_path):
    out = tmp_path / "clips.npz"
    np.savez(out, clips=np.zeros(3))
    done = limited("sample", small["big"], "--mode", "contiguous", "--sequence-length", "8", "--out", out,
                   file_size=100_000)
    assert done.returncode == 1, done.stderr
    assert f"vclip sample: error: writing {out} failed" in done.stderr and "Traceback" not in done.stderr
    assert np.load(out)["clips"].shape == (3,)  # not replaced by a cut-off file
    assert not leftovers(tmp_path)


def test_pngs_that_do_not_fit_fail_that_video_and_leave_no_cut_off_file(small, tmp_path):
    out = tmp_path / "clips"
    done = limited("sample", small["big"], small["a"], "--mode", "contiguous", "--sequence-length", "4",
                   "--out", out, "--format", "png", file_size=50_000)
    assert done.returncode == 3, done.stderr
    assert f"vclip sample: skipped {small['big']}: failed (OSError: [Errno 27] File too large)" in done.stderr
    assert len(list((out / "a").glob("*.png"))) == 4 and not leftovers(out)
    for image in out.rglob("*.png"):
        Image.open(image).load()


def test_one_seed_gives_each_video_its_own_starts_and_the_same_ones_again(capsys, small, tmp_path):
    def starts(out):
        status, _, err = run(capsys, "sample", small["a"], small["b"], small["c"], "--mode", "contiguous",
                             "--sequence-length", "4", "--clips-per-video", "3", "--seed", "7", "--out", out)
        assert status == 0, err
        stored = np.load(out)
        return [tuple(stored["frame_indices"][stored["video_ids"] == video, 0]) for video in range(3)]

    first = starts(tmp_path / "one.npz")
    assert len(set(first)) == 3, first  # three videos of 24 frames: three draws, not one repeated
    assert starts(tmp_path / "two.npz") == first


def test_one_npz_holds_the_most_common_clip_shape(capsys, small, tmp_path):
    out = tmp_path / "clips.npz"
    status, out_text, err = run(capsys, "sample", small["portrait"], small["a"], small["b"], small["c"],
                                "--mode", "keyframe", "--out", out)
    assert status == 3, err
    assert (f"vclip sample: skipped {small['portrait']}: its clips come out [1, 64, 48, 3] but 3 of the videos' "
            "come out [1, 48, 64, 3]") in err
    stored = np.load(out)
    assert list(stored["paths"]) == [small["a"], small["b"], small["c"]]
    assert stored["clips"].shape == (3, 1, 48, 64, 3)
    assert "3 of 4 videos, 3 clips" in out_text


def test_a_reader_that_stops_early_ends_the_command_quietly(small):
    script = "import sys\nfrom vclip.cli import main\nsys.exit(main(sys.argv[1:]))"
    process = subprocess.Popen([sys.executable, "-c", script, "info", small["a"], small["b"]], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=child_environment(), text=True)
    process.stdout.close()  # as `vclip info ... | head -0` does, before anything is written
    err = process.stderr.read()
    assert process.wait(timeout=60) == 1
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
