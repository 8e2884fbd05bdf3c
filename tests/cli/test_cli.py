"""The command line, every command on the CPU through ``vclip.cli.main`` (and one real process)."""

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import av
import numpy as np
import pytest
from helpers import barcodes, child_environment, devices, require_extra
from PIL import Image

import vclip
from vclip.cli import main
from vclip.memory import _loader_memory_from_parts
from vclip.synthetic import make_shots_video, read_barcode

REFERENCE = ["--width", "1920", "--height", "1080", "--batch-size", "32", "--sequence-length", "16"]


def run(capsys, *argv):
    """Exit status, stdout and stderr of ``vclip ARGV``."""
    status = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def run_process(*argv, prelude="", **environment):
    """``vclip ARGV`` in a new Python process whose stdout and stderr are pipes, not terminals,
    after the Python statements of ``prelude``, with ``environment`` added."""
    script = f"import sys\n{prelude}\nfrom vclip.cli import main\nsys.exit(main(sys.argv[1:]))"
    environment = child_environment(**environment)
    return subprocess.run(
        [sys.executable, "-c", script, *map(str, argv)], capture_output=True, text=True, env=environment, timeout=120
    )


def decoded_frames(path):
    with av.open(str(path)) as container:
        return [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory, videos):
    folder = tmp_path_factory.mktemp("bad")
    (folder / "notes.mp4").write_text("these are not frames\n" * 50)
    data = Path(videos["h264"]).read_bytes()
    (folder / "truncated.mp4").write_bytes(data[: len(data) // 2])
    return {
        "missing": str(folder / "missing.mp4"),
        "text": str(folder / "notes.mp4"),
        "truncated": str(folder / "truncated.mp4"),
    }


# -- info ------------------------------------------------------------------------------------------
def test_info_table(capsys, videos):
    status, out, err = run(capsys, "info", videos["h264"])
    assert status == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == videos["h264"]
    assert "  stream #0   video     h264       320x240, 30.000 fps  <- described below" in lines
    assert "  frames       150" in lines
    assert "  keyframes    5 at frames 0, 30, 60, 90, 120" in lines
    assert "  size         320x240" in lines
    assert "  codec        h264, yuv420p, 8-bit" in lines
    assert "  frame rate   30.000 fps, constant" in lines
    assert "  duration     5.000 s, first frame at 0.000 s" in lines
    assert "  colour       bt601, limited range" in lines
    status, out, _ = run(capsys, "info", videos["vfr"])  # Matroska: no frame count in the header
    assert status == 0 and "  frames       40" in out.splitlines()


def test_info_json_matches_the_index(capsys, videos):
    names = ["h264", "vfr", "offset", "h264_10bit"]
    status, out, _ = run(capsys, "info", "--json", *(videos[n] for n in names))
    assert status == 0
    reports = json.loads(out)
    assert [r["file"] for r in reports] == [videos[n] for n in names]
    for name, report in zip(names, reports):
        index = vclip.index_video(videos[name])
        video = report["video"]
        assert video["num_frames"] == index.num_frames
        assert video["keyframe_indices"] == index.keyframe_indices.tolist()
        assert video["keyframe_count"] == len(index.keyframe_indices)
        assert video["keyframe_pts_seconds"] == index.pts_seconds[index.keyframe_indices].tolist()
        assert report["streams"] == [
            {
                "index": 0,
                "type": "video",
                "codec": index.codec,
                "width": index.width,
                "height": index.height,
                "average_fps": pytest.approx(index.average_fps),
            }
        ]
    assert [r["video"]["variable_frame_rate"] for r in reports] == [False, True, False, False]
    assert reports[2]["video"]["start_seconds"] == pytest.approx(1.5)
    assert reports[3]["video"]["bit_depth"] == 10
    assert reports[0]["video"]["keyframe_indices"] == [0, 30, 60, 90, 120]


def test_info_lists_every_stream_and_picks_one(capsys, shared_videos):
    path = shared_videos / "nasa_13013.mp4"
    status, out, _ = run(capsys, "info", "--json", "--stream-index", 3, path)
    report = json.loads(out)[0]
    assert status == 0
    assert [s["type"] for s in report["streams"]] == ["video", "audio", "subtitle", "video", "audio", "subtitle"]
    assert (report["video"]["stream_index"], report["video"]["width"], report["video"]["num_frames"]) == (3, 480, 390)
    status, _, err = run(capsys, "info", "--stream-index", 1, path)
    assert status == 1
    assert "nasa_13013.mp4: stream 1 is not a video stream; video streams: 0, 3" in err


def test_info_reports_bad_files_and_goes_on(capsys, videos, bad_files):
    status, out, err = run(capsys, "info", "--json", bad_files["missing"], videos["hevc"], bad_files["text"])
    assert status == 3
    reports = json.loads(out)
    assert reports[0] == {"file": bad_files["missing"], "error": "file does not exist"}
    assert reports[1]["video"]["codec"] == "hevc"
    assert reports[2]["error"].startswith("not a video container FFmpeg can read")
    assert f"vclip info: skipped {bad_files['missing']}: file does not exist" in err
    assert f"vclip info: skipped {bad_files['text']}: not a video container" in err
    status, out, err = run(capsys, "info", bad_files["missing"])
    assert (status, out) == (1, "")


def test_python_dash_m_vclip_info(videos):
    environment = child_environment()
    completed = subprocess.run(
        [sys.executable, "-m", "vclip", "info", "--json", videos["long_gop"]],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    video = json.loads(completed.stdout)[0]["video"]
    assert (video["num_frames"], video["keyframe_indices"]) == (300, [0, 250])


# -- sample ----------------------------------------------------------------------------------------
MODES = {
    "contiguous": (
        ["--sequence-length", 6, "--clips-per-video", 2, "--seed", 1],
        vclip.contiguous(6, clips_per_video=2),
    ),
    "strided": (
        ["--sequence-length", 5, "--stride", 3, "--starts", "even", "--clips-per-video", 3],
        vclip.strided(5, 3, starts="even", clips_per_video=3),
    ),
    "keyframe": (["--max-frames", 3], vclip.keyframe(3)),
    "indexed": (["--frame-indices", "149,3,3,0,-2"], vclip.indexed([149, 3, 3, 0, -2])),
    "jittered": (
        ["--sequence-length", 5, "--stride", 3, "--jitter", 1, "--seed", 4],
        vclip.jittered(5, 3, 1, clips_per_video=1),
    ),
    "downscaled": (["--sequence-length", 4, "--stride", 2, "--seed", 9], vclip.downscaled(vclip.strided(4, 2), 0.5)),
}


@pytest.mark.parametrize("mode", list(MODES))
def test_sample_every_mode_to_npz(capsys, videos, tmp_path, mode):
    options, sampler = MODES[mode]
    out = tmp_path / "clips.npz"
    status, stdout, err = run(
        capsys, "sample", videos["h264"], "--mode", mode, "--out", out, "--device", "cpu", *options
    )
    assert status == 0, err
    seed = next((int(options[i + 1]) for i, o in enumerate(options) if o == "--seed"), None)
    expected = [c.tolist() for c in sampler.sample(vclip.index_video(videos["h264"]), seed=seed)]
    with np.load(out) as stored:
        clips, frame_indices = stored["clips"], stored["frame_indices"]
        assert (str(stored["mode"]), str(stored["source"])) == (mode, videos["h264"])
        assert stored["pts_seconds"].shape == frame_indices.shape
    assert frame_indices.tolist() == expected
    height, width = (120, 160) if mode == "downscaled" else (240, 320)
    assert clips.shape == (len(expected), len(expected[0]), height, width, 3) and clips.dtype == np.uint8
    assert [barcodes(clip) for clip in clips] == expected
    assert f"clip 0: frames {', '.join(map(str, expected[0]))}" in stdout


def test_sample_indexed_with_duplicates_and_negative_indices(capsys, videos, tmp_path):
    run(
        capsys,
        "sample",
        videos["h264"],
        "--mode",
        "indexed",
        "--frame-indices",
        "149,3,3,0,-2",
        "--out",
        tmp_path / "c.npz",
    )
    with np.load(tmp_path / "c.npz") as stored:
        assert stored["frame_indices"].tolist() == [[149, 3, 3, 0, 148]]
        assert barcodes(stored["clips"][0]) == [149, 3, 3, 0, 148]


def test_sample_scaling_factor_combines_with_any_mode(capsys, videos, tmp_path):
    status, _, _ = run(
        capsys, "sample", videos["h264"], "--mode", "keyframe", "--scaling-factor", 0.25, "--out", tmp_path / "k.npz"
    )
    with np.load(tmp_path / "k.npz") as stored:
        assert status == 0 and stored["clips"].shape == (1, 5, 60, 80, 3)
        assert barcodes(stored["clips"][0]) == [0, 30, 60, 90, 120]


def test_sample_resize_and_crop(capsys, videos, tmp_path):
    status, _, _ = run(
        capsys,
        "sample",
        videos["h264"],
        "--mode",
        "strided",
        "--seed",
        0,
        "--resize",
        120,
        "--crop",
        "64,96",
        "--out",
        tmp_path / "r.npz",
    )
    with np.load(tmp_path / "r.npz") as stored:
        assert status == 0 and stored["clips"].shape == (1, 16, 64, 96, 3)


def test_sample_to_png_folder(capsys, videos, tmp_path):
    out = tmp_path / "frames"
    status, stdout, _ = run(
        capsys,
        "sample",
        videos["hevc"],
        "--mode",
        "strided",
        "--sequence-length",
        4,
        "--stride",
        5,
        "--starts",
        "even",
        "--clips-per-video",
        2,
        "--out",
        out,
    )
    assert status == 0
    expected = [
        c.tolist()
        for c in vclip.strided(4, 5, starts="even", clips_per_video=2).sample(vclip.index_video(videos["hevc"]))
    ]
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        f"clip{c:03d}_{t:03d}_frame{f:06d}.png" for c, clip in enumerate(expected) for t, f in enumerate(clip)
    ]
    for name in names:
        (frame,) = decoded_frames(out / name)
        assert read_barcode(frame) == int(name[-10:-4])
    assert f"-> {out}{os.sep}" in stdout


def test_sample_to_png_shows_progress_while_it_writes(capsys, videos, tmp_path):
    """The video's bar showed 100% once decoded and the PNGs were then written without a word: a
    bar counts the images as they are written, and the video is done after its last one."""
    status, _, err = run(capsys, "sample", videos["h264"], "--mode", "strided", "--clips-per-video", 2,
                         "--sequence-length", 8, "--device", "cpu", "--progress", "--out", tmp_path / "frames")
    assert status == 0 and len(list((tmp_path / "frames").glob("*.png"))) == 16
    updates = [line.strip() for line in re.split(r"[\r\n]", err) if line.strip()]
    written = [number for number, line in enumerate(updates) if re.search(r"writing: .*\b\d+/16\b", line)]
    assert written  # tqdm redraws at most every 0.1 s: the bar, and the counts it had time for
    done = [number for number, line in enumerate(updates) if re.search(r"\b1/1 .*video", line)]
    assert done and min(done) > written[-1], updates


def test_sample_to_mp4_for_a_quick_look(capsys, videos, tmp_path):
    out = tmp_path / "look.mp4"
    status, _, _ = run(
        capsys,
        "sample",
        videos["odd"],
        "--mode",
        "contiguous",
        "--sequence-length",
        5,
        "--clips-per-video",
        2,
        "--seed",
        3,
        "--out",
        out,
    )
    assert status == 0
    expected = [c.tolist() for c in vclip.contiguous(5, clips_per_video=2).sample(30, seed=3)]
    frames = decoded_frames(out)
    assert len(frames) == 10 and frames[0].shape == (98, 130, 3)  # 129x97 padded to even for yuv420p
    assert barcodes(frame[:97, :129] for frame in frames) == expected[0] + expected[1]


def test_sample_to_torch_file(capsys, videos, tmp_path):
    torch = require_extra("torch")
    out = tmp_path / "clips.pt"
    status, _, _ = run(
        capsys, "sample", videos["h264"], "--mode", "indexed", "--frame-indices", "7,70,140", "--out", out
    )
    assert status == 0
    stored = torch.load(out)
    assert stored["clips"].shape == (1, 3, 240, 320, 3) and stored["clips"].dtype == torch.uint8
    assert stored["frame_indices"].tolist() == [[7, 70, 140]]
    assert barcodes(stored["clips"][0].numpy()) == [7, 70, 140]
    assert (stored["mode"], stored["source"]) == ("indexed", videos["h264"])


def test_sample_to_torch_file_without_torch(capsys, videos, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    status, _, err = run(capsys, "sample", videos["h264"], "--mode", "keyframe", "--out", tmp_path / "c.pt")
    assert status == 2
    assert "vclip sample: error: writing .pt needs PyTorch, which is not installed" in err
    assert not (tmp_path / "c.pt").exists()


def test_sample_bad_file(capsys, bad_files, tmp_path):
    status, _, err = run(capsys, "sample", bad_files["truncated"], "--mode", "keyframe", "--out", tmp_path / "c.npz")
    assert status == 1
    assert err.startswith(f"vclip sample: skipped {bad_files['truncated']}: ")
    assert not (tmp_path / "c.npz").exists()


# -- bad arguments ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["sample", "{v}", "--mode", "strided", "--stride", "0", "--out", "c.npz"],
            "stride (0) must be an integer >= 1",
        ),
        (
            ["sample", "{v}", "--mode", "jittered", "--jitter", "-1", "--out", "c.npz"],
            "jitter (-1) must be an integer >= 0",
        ),
        (
            ["sample", "{v}", "--mode", "contiguous", "--sequence-length", "0", "--out", "c.npz"],
            "sequence_length (0) must be an integer >= 1",
        ),
        (
            ["sample", "{v}", "--mode", "strided", "--scaling-factor", "0", "--out", "c.npz"],
            "scaling_factor (0.0) must be a number in (0, 1]",
        ),
        (
            ["sample", "{v}", "--mode", "strided", "--scaling-factor", "1.5", "--out", "c.npz"],
            "scaling_factor (1.5) must be a number in (0, 1]",
        ),
        (["sample", "{v}", "--mode", "indexed", "--out", "c.npz"], "--mode indexed needs --frame-indices"),
        (
            ["sample", "{v}", "--mode", "indexed", "--frame-indices", "3,150", "--out", "c.npz"],
            "frame index 150 is out of range [0, 149] (150 frames)",
        ),
        (
            ["sample", "{v}", "--mode", "indexed", "--frame-indices", "1,a", "--out", "c.npz"],
            "argument --frame-indices: '1,a' is not a comma-separated list of integers",
        ),
        (
            ["sample", "{v}", "--mode", "contiguous", "--stride", "2", "--out", "c.npz"],
            "--stride does not apply to --mode contiguous (it applies to: strided, downscaled, jittered)",
        ),
        (
            ["sample", "{v}", "--mode", "keyframe", "--sequence-length", "4", "--out", "c.npz"],
            "--sequence-length does not apply to --mode keyframe",
        ),
        (["sample", "{v}", "--mode", "slowmo", "--out", "c.npz"], "argument --mode: invalid choice: 'slowmo'"),
        (
            ["sample", "{v}", "--mode", "strided", "--out", "c.avi"],
            "--out ('c.avi') must end in .npz, .pt, .mp4, or name a folder (end it in '/' or leave out the suffix)",
        ),
        (["sample", "{v}", "--mode", "strided", "--out", "e.jpg"], "--out ('e.jpg') must end in .npz, .pt, .mp4"),
        (
            ["sample", "{v}", "--mode", "strided", "--out", "missing/c.npz"],
            "--out ('missing/c.npz'): its folder 'missing' does not exist",
        ),
        (
            ["sample", "{v}", "{v}", "--mode", "strided", "--out", "c.mp4"],
            "--out ('c.mp4') takes the clips of one video; for 2 videos name a folder and pass --format mp4",
        ),
        (
            ["sample", "{v}", "--mode", "strided", "--out", "c.npz", "--format", "pt"],
            "--format pt does not match --out ('c.npz')",
        ),
        (["sample", "{v}", "--mode", "strided"], "the following arguments are required: --out"),
        (
            ["sample", "{v}", "--mode", "strided", "--out", "c.npz", "--device", "gpu"],
            "argument --device: 'gpu' must be 'cpu', 'cuda', 'cuda:N' or 'auto'",
        ),
        (
            ["sample", "{v}", "--mode", "strided", "--out", "c.npz", "--resize", "big"],
            "argument --resize: 'big' must be a number of pixels",
        ),
        (["keyframes", "{v}", "--out", "k", "--max-frames", "0"], "max_frames (0) must be an integer >= 1"),
        (["keyframes", "{v}", "--out", "k", "--method", "shots"], "argument --method: invalid choice: 'shots'"),
        (["keyframes", "{v}", "--out", "k", "--scene-threshold", "0.5"], "scene_threshold (0.5) must be a number > 1"),
        (["keyframes", "{v}", "--out", "k", "--thumbnail-width", "8"], "thumbnail_width (8) must be an integer >= 16"),
        (
            ["budget", "--width", "0", "--height", "1080", "--batch-size", "32", "--sequence-length", "16"],
            "width (0) must be an integer >= 1",
        ),
        (
            ["budget", *REFERENCE, "--budget", "8 gigs"],
            "--budget ('8 gigs') must be a number of bytes >= 0 or a number with a unit",
        ),
        (["budget", *REFERENCE, "--dtype", "int4"], "argument --dtype: invalid choice: 'int4'"),
        (["budget", *REFERENCE, "--augmentation-factor", "-1"], "augmentation_factor (-1.0) must be a number >= 0"),
        (["budget", *REFERENCE, "--scaling-factor", "2"], "scaling_factor (2.0) must be a number in (0, 1]"),
        (
            ["budget", *REFERENCE, "--chart", "chart.gif"],
            "--chart ('chart.gif') must end in .png, .jpg, .jpeg, .svg, .pdf",
        ),
        (["budget", "--width", "1920"], "the following arguments are required: --height, --seq"),
        (
            ["budget", "--width", "1920", "--height", "1080", "--sequence-length", "16"],
            "--batch-size is needed, unless --budget asks for the largest batch that fits",
        ),
        (["budget", *REFERENCE, "--prefetch-queue-depth", "0"], "--prefetch-queue-depth (0) must be an integer >= 1"),
        (["budget", *REFERENCE, "--cpu-decoders", "many"], "--cpu-decoders ('many') must be an integer >= 0"),
        (["check", "{v}", "--workers", "0"], "workers (0) must be an integer >= 1"),
        (["budget", *REFERENCE, "--budget", "8"],
         "--budget 8 has no unit, so it reads as 8 bytes; name the unit (e.g. --budget 8GiB or 8GB)"),
        (["sample", "{v}", "--mode", "contiguous", "--start-seconds", "5", "--end-seconds", "3", "--out", "c.npz"],
         "--start-seconds (5) must come before --end-seconds (3)"),
        (["transcode", "{v}"], "argument COMMAND: invalid choice: 'transcode'"),
        ([], "the following arguments are required: COMMAND"),
    ],
)
def test_bad_arguments_exit_2_with_a_clear_message(capsys, videos, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    status, out, err = run(capsys, *(a.format(v=videos["h264"]) for a in argv))
    assert status == 2
    assert message in err
    assert out == "" and sorted(os.listdir(tmp_path)) == []  # refused before any work


def test_help_and_version_exit_0(capsys):
    status, out, _ = run(capsys, "--version")
    assert (status, out.strip()) == (0, f"vclip {vclip.__version__}")
    status, out, _ = run(capsys, "keyframes", "--help")
    assert status == 0 and "--method {codec,scene}" in out


# -- keyframes -------------------------------------------------------------------------------------
def test_keyframes_codec_images_and_manifest(capsys, videos, tmp_path):
    out = tmp_path / "keys"
    status, stdout, err = run(
        capsys, "keyframes", videos["h264"], videos["hevc"], "--out", out, "--format", "png", "--device", "cpu"
    )
    assert status == 0 and err == ""
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["method"] == "codec" and manifest["errors"] == []
    for name, video in zip(["h264", "hevc"], manifest["videos"]):
        keyframes = vclip.index_video(videos[name]).keyframe_indices.tolist()
        records = [r for r in manifest["keyframes"] if r["file"] == videos[name]]
        assert [r["frame_index"] for r in records] == keyframes
        assert video["keyframes"] == video["packets_decoded"] == len(keyframes)  # only keyframe packets decoded
        for record in records:
            assert record["method"] == "codec"
            assert record["pts_seconds"] == pytest.approx(record["frame_index"] / 30)
            (frame,) = decoded_frames(out / record["image"])
            assert read_barcode(frame) == record["frame_index"]
        assert (out / video["contact_sheet"]).is_file()
    assert f"{videos['h264']}: 5 codec keyframes (frames 0, 30, 60, 90, 120)" in stdout
    assert "2 of 2 videos, 7 images" in stdout


def test_keyframes_manifest_says_how_each_shot_begins(capsys, tmp_path):
    """Each scene keyframe's record names the transition that starts its shot (a fade here: its
    kind and first frame, as find_shot_boundaries reports them); the first shot has none."""
    from vclip.keyframes import find_shot_boundaries
    from vclip.synthetic import make_scene_video

    video = make_scene_video(tmp_path / "fades.mp4", "fades", num_shots=3, seed=0).path
    status, _, _ = run(capsys, "keyframes", video, "--method", "scene", "--device", "cpu", "--out", tmp_path / "k")
    records = json.loads((tmp_path / "k" / "manifest.json").read_text())["keyframes"]
    boundaries = find_shot_boundaries(video, device="cpu")
    assert status == 0 and [b.kind for b in boundaries] == ["fade", "fade"]
    assert [(r["frame_index"], r["transition"], r["transition_start"]) for r in records] == [(0, None, None)] + [
        (b.frame, b.kind, b.start) for b in boundaries]


def test_keyframes_scene_finds_the_cuts(capsys, tmp_path):
    video = make_shots_video(tmp_path / "shots.mp4", shot_lengths=(30, 36, 24), width=160, height=120)
    status, _, _ = run(capsys, "keyframes", video, "--method", "scene", "--out", tmp_path / "scenes")
    manifest = json.loads((tmp_path / "scenes" / "manifest.json").read_text())
    assert status == 0
    assert [r["frame_index"] for r in manifest["keyframes"]] == [0, 30, 66]
    images = [decoded_frames(tmp_path / "scenes" / r["image"])[0] for r in manifest["keyframes"]]
    assert barcodes(images) == [0, 30, 66]
    assert sorted(os.listdir(tmp_path / "scenes" / "shots")) == [
        "contact_sheet.jpg",
        "frame_000000.jpg",
        "frame_000030.jpg",
        "frame_000066.jpg",
    ]


@pytest.mark.parametrize("count, expected", [(2, [0, 120]), (3, [0, 60, 120])])
def test_keyframes_max_spreads_evenly(capsys, videos, tmp_path, count, expected):
    run(capsys, "keyframes", videos["h264"], "--max-frames", count, "--out", tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert [r["frame_index"] for r in manifest["keyframes"]] == expected
    assert manifest["videos"][0]["packets_decoded"] == count


def test_keyframes_reports_bad_files_and_goes_on(capsys, videos, bad_files, tmp_path):
    files = [bad_files["missing"], videos["h264"], bad_files["text"], bad_files["truncated"], videos["long_gop"]]
    status, stdout, err = run(capsys, "keyframes", *files, "--out", tmp_path)
    assert status == 3
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert [v["file"] for v in manifest["videos"]] == [videos["h264"], videos["long_gop"]]
    assert [e["file"] for e in manifest["errors"]] == [bad_files["missing"], bad_files["text"], bad_files["truncated"]]
    assert manifest["errors"][0]["problem"] == "file does not exist"
    skipped = [line for line in err.splitlines() if line.startswith("vclip keyframes: skipped ")]
    assert [line.split(": ")[1].removeprefix("skipped ") for line in skipped] == [
        bad_files["missing"],
        bad_files["text"],
        bad_files["truncated"],
    ]
    assert "2 of 5 videos, 7 images" in stdout


def test_keyframes_workers_give_the_same_outputs_in_input_order(capsys, videos, bad_files, tmp_path):
    files = [videos["h264"], bad_files["text"], videos["long_gop"], videos["hevc"], bad_files["truncated"]]
    outputs = {}
    for workers in (1, 3):
        out = tmp_path / f"workers_{workers}"
        status, stdout, err = run(capsys, "keyframes", *files, "--workers", workers, "--out", out)
        manifest = json.loads((out / "manifest.json").read_text())
        for video in manifest["videos"]:
            del video["seconds"]
        outputs[workers] = (status, manifest, stdout.replace(str(out), "OUT"))
        assert err.count("vclip keyframes: skipped") == 2
    assert outputs[3] == outputs[1]
    assert [v["file"] for v in outputs[3][1]["videos"]] == [videos["h264"], videos["long_gop"], videos["hevc"]]
    status, _, err = run(capsys, "keyframes", videos["h264"], "--workers", 0, "--out", tmp_path / "none")
    assert status == 2 and "workers" in err and "0" in err


@pytest.mark.parametrize("device", devices())
def test_keyframes_scene_with_decode_processes(capsys, videos, bad_files, tmp_path, device, shared_decode_processes):
    """On the GPU the videos' chunks go to decode processes, with the same outputs and the same skip
    of a bad file; on the CPU the option is refused before anything is written (--workers runs processes)."""
    files = [videos["h264"], bad_files["truncated"], videos["long_gop"]]
    common = ("keyframes", *files, "--method", "scene", "--device", device)
    if device == "cpu":
        status, _, err = run(capsys, *common, "--decode-processes", 2, "--out", tmp_path / "refused")
        assert status == 2 and "--decode-processes" in err and not (tmp_path / "refused").exists()
        return
    manifests = {}
    for count in (0, 2):
        out = tmp_path / str(count)
        status, _, err = run(capsys, *common, "--decode-processes", count, "--out", out)
        assert status == 3 and err.count("vclip keyframes: skipped") == 1
        records = json.loads((out / "manifest.json").read_text())["keyframes"]
        manifests[count] = [(record["file"], record["frame_index"]) for record in records]
    assert manifests[2] == manifests[0] and len(manifests[0]) == 2  # frame 0 of each (no cut in these videos)


def test_keyframes_nothing_readable_exits_1(capsys, bad_files, tmp_path):
    status, _, err = run(capsys, "keyframes", bad_files["missing"], bad_files["text"], "--out", tmp_path)
    assert status == 1 and err.count("skipped") == 2
    assert json.loads((tmp_path / "manifest.json").read_text())["keyframes"] == []


def test_keyframes_same_name_in_two_folders(capsys, videos, tmp_path):
    copy = tmp_path / "copy" / Path(videos["odd"]).name
    copy.parent.mkdir()
    copy.write_bytes(Path(videos["odd"]).read_bytes())
    run(capsys, "keyframes", videos["odd"], copy, "--out", tmp_path / "keys")
    folders = [v["folder"] for v in json.loads((tmp_path / "keys" / "manifest.json").read_text())["videos"]]
    assert len(set(folders)) == 2 and all(re.fullmatch(r"odd_size-[0-9a-f]{8}", f) for f in folders)
    run(capsys, "keyframes", copy, videos["odd"], "--out", tmp_path / "again")  # the name follows the file
    again = [v["folder"] for v in json.loads((tmp_path / "again" / "manifest.json").read_text())["videos"]]
    assert again == folders[::-1]
    keyframes = vclip.index_video(videos["odd"]).keyframe_indices.tolist()
    for folder in folders:
        assert sorted(os.listdir(tmp_path / "keys" / folder)) == ["contact_sheet.jpg"] + [
            f"frame_{k:06d}.jpg" for k in keyframes
        ]


def test_keyframes_thumbnail_width(capsys, videos, tmp_path):
    status, _, _ = run(
        capsys, "keyframes", videos["h264"], "--thumbnail-width", 80, "--format", "png", "--out", tmp_path
    )
    (video,) = json.loads((tmp_path / "manifest.json").read_text())["videos"]
    (sheet,) = decoded_frames(tmp_path / video["contact_sheet"])
    assert status == 0 and 5 * 80 < sheet.shape[1] < 5 * 80 + 40  # five 80x60 thumbnails in a row
    assert 60 < sheet.shape[0] < 60 + 40


def test_keyframes_of_another_video_stream(capsys, shared_videos, tmp_path):
    """nasa_13013.mp4: stream 0 is 320x180, stream 3 is 480x270 with its own keyframes."""
    video = shared_videos / "nasa_13013.mp4"
    status, _, _ = run(capsys, "keyframes", video, "--stream-index", 3, "--format", "png", "--out", tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert status == 0
    expected = vclip.index_video(video, stream_index=3).keyframe_indices.tolist()
    assert [r["frame_index"] for r in manifest["keyframes"]] == expected
    assert decoded_frames(tmp_path / manifest["keyframes"][0]["image"])[0].shape == (270, 480, 3)
    status, _, err = run(capsys, "keyframes", video, "--stream-index", 1, "--out", tmp_path / "audio")
    assert status == 1 and "stream 1 is not a video stream; video streams: 0, 3" in err


# -- progress --------------------------------------------------------------------------------------
class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_bars_on_a_terminal_and_not_with_no_progress(videos, tmp_path, monkeypatch):
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["keyframes", videos["hevc"], videos["odd"], "--out", str(tmp_path / "a"), "--workers", "1"]) == 0
    drawn = terminal.getvalue()
    assert "0/2 [" in drawn and "2/2 [" in drawn and "video/s" in drawn  # the bar over files
    assert "frame/s" in drawn  # a bar within each file
    quiet = Terminal()
    monkeypatch.setattr(sys, "stderr", quiet)
    assert main(["keyframes", videos["hevc"], "--out", str(tmp_path / "b"), "--no-progress"]) == 0
    assert quiet.getvalue() == ""


def test_progress_is_off_when_stderr_is_not_a_terminal(capsys, videos, tmp_path):
    status, out, err = run(capsys, "info", "--json", videos["hevc"], videos["odd"])
    assert (status, err) == (0, "") and len(json.loads(out)) == 2


def test_forced_progress_advances_within_one_file(videos, tmp_path):
    """A scene scan moves its bar frame by frame (here GOP by GOP: chunks cut small), on stderr."""
    completed = run_process(
        "keyframes",
        videos["h264"],
        "--method",
        "scene",
        "--progress",
        "--out",
        tmp_path,
        prelude="import vclip._scenes.signals; vclip._scenes.signals.CHUNK_FRAMES = 7",
        TQDM_MININTERVAL="0",
    )
    assert completed.returncode == 0, completed.stderr
    frames_done = {int(done) for done in re.findall(r"(\d+)/150 \[", completed.stderr)}
    assert {0, 150} < frames_done and len(frames_done) >= 4
    assert "1/1 [" in completed.stderr
    assert completed.stdout.splitlines() == [
        f"{videos['h264']}: 1 scene keyframe (frames 0) -> {tmp_path / 'h264_bframes'}{os.sep}",
        f"1 of 1 videos, 1 image; manifest: {tmp_path / 'manifest.json'}",
    ]


def test_forced_progress_keeps_json_on_stdout(videos, bad_files):
    files = [videos["h264"], bad_files["text"], videos["odd"]]
    completed = run_process("info", "--json", "--progress", *files, TQDM_MININTERVAL="0")
    assert completed.returncode == 3
    assert [report["file"] for report in json.loads(completed.stdout)] == files
    assert "3/3 [" in completed.stderr and "file/s" in completed.stderr
    skipped = f"\nvclip info: skipped {bad_files['text']}: not a video container"  # on a line of its own
    assert skipped in completed.stderr


# -- budget ----------------------------------------------------------------------------------------
def test_budget_reference_figure(capsys):
    status, out, _ = run(capsys, "budget", *REFERENCE)
    assert status == 0
    assert "1920 x 1080 x 3 x 1 x 32 x 16 x (1 + 0) = 3,185,049,600 bytes (3.19 GB, 2.97 GiB)" in out
    rows = {line[:44].strip(): line[44:].split() for line in out.splitlines() if line.startswith("  ")}
    assert rows["dtype uint8 (this)"] == ["3,185,049,600", "3.19", "2.97", "1.00x"]
    assert rows["dtype float16"] == ["6,370,099,200", "6.37", "5.93", "2.00x"]
    assert rows["dtype float32"] == ["12,740,198,400", "12.74", "11.87", "4.00x"]
    assert rows["scaling factor 0.5 (960x540)"] == ["796,262,400", "0.80", "0.74", "0.25x"]
    assert rows["NV12 surfaces (uint8, 1.5 bytes/pixel)"] == ["1,592,524,800", "1.59", "1.48", "0.50x"]
    assert "budget" not in out


def test_options_are_named_after_the_python_arguments_and_old_names_still_work(capsys, videos, tmp_path):
    """One spelling per idea: --batch-size, --sequence-length, --augmentation-factor, --max-frames,
    --stream-index as in Python; the old names give the same result and say they are old."""
    new = ["--width", 640, "--height", 360, "--batch-size", 8, "--sequence-length", 16, "--augmentation-factor", 1]
    old = ["--width", 640, "--height", 360, "--batch", 8, "--seq", 16, "--aug", 1]
    (status, by_new, warned), (status_old, by_old, warned_old) = (run(capsys, "budget", *argv) for argv in (new, old))
    assert status == status_old == 0 and by_new == by_old and warned == ""
    renamed = (("--batch", "--batch-size"), ("--seq", "--sequence-length"), ("--aug", "--augmentation-factor"))
    assert warned_old.splitlines() == [f"vclip: warning: {name} is the old name of {new_name}; it still works"
                                       for name, new_name in renamed]
    for option in ("--max-frames", "--max"):
        status, _, err = run(capsys, "keyframes", videos["h264"], option, 2, "--stream-index", 0, "--device", "cpu",
                             "--out", tmp_path / option)
        assert status == 0 and len(list((tmp_path / option).rglob("frame_*.jpg"))) == 2
        assert ("old name of --max-frames" in err) == (option == "--max")
    status, out, err = run(capsys, "info", "--json", "--stream", 0, videos["h264"])
    assert status == 0 and json.loads(out)[0]["video"]["stream_index"] == 0
    assert "--stream is the old name of --stream-index" in err
    status, out, _ = run(capsys, "budget", "--help")
    words = " ".join(out.split())
    assert "--batch-size B, --batch B" in words and "(old name: --batch)" in words


def test_sizes_are_height_first_as_in_python(capsys, videos, tmp_path):
    """--resize 48,64 is resize=(48, 64): 48 high, 64 wide; the old width-first 64x48 still means
    the same, with a warning, and never the transposed size."""
    outputs = {}
    for size in ("48,64", "64x48"):
        out = tmp_path / f"{size.replace(',', '_')}.npz"
        status, _, err = run(capsys, "sample", videos["h264"], "--mode", "indexed", "--frame-indices", "0,5",
                             "--resize", size, "--device", "cpu", "--out", out)
        with np.load(out) as stored:
            outputs[size] = stored["clips"]
        assert status == 0 and ("old spelling" in err) == (size == "64x48")
    assert outputs["48,64"].shape == (1, 2, 48, 64, 3) and np.array_equal(outputs["48,64"], outputs["64x48"])
    decoder = vclip.VideoDecoder(videos["h264"], device="cpu")
    assert np.array_equal(outputs["48,64"][0], decoder.get_frames([0, 5], transform=vclip.TransformSpec(
        resize=(48, 64))).data)
    status, _, err = run(capsys, "sample", videos["h264"], "--mode", "strided", "--resize", "48x", "--out",
                         tmp_path / "x.npz")
    assert status == 2 and "HEIGHT,WIDTH (e.g. 240,320" in err


def test_budget_json_and_what_fits(capsys):
    status, out, _ = run(capsys, "budget", *REFERENCE, "--budget", "8GiB", "--json")
    report = json.loads(out)
    assert status == 0
    assert (report["bytes"], report["gb"], report["gib"]) == (3_185_049_600, 3.1850496, 3_185_049_600 / 2**30)
    assert report["budget_bytes"] == 8 * 2**30 and report["fits"] is True
    assert report["largest_batch_size"] == 8 * 2**30 // (1920 * 1080 * 3 * 16) == 86
    assert report["largest_sequence_length"] == 8 * 2**30 // (1920 * 1080 * 3 * 32) == 43
    variants = {v["choice"]: v["bytes"] for v in report["variants"]}
    assert variants["dtype float32"] == 4 * 3_185_049_600
    assert variants["scaling factor 0.25 (480x270)"] == 480 * 270 * 3 * 32 * 16


def test_budget_with_augmentation_scaling_and_float16(capsys):
    status, out, _ = run(
        capsys,
        "budget",
        *REFERENCE,
        "--dtype",
        "float16",
        "--augmentation-factor",
        "0.5",
        "--scaling-factor",
        "0.5",
        "--budget",
        "1GB",
        "--json",
    )
    report = json.loads(out)
    assert (report["width"], report["height"]) == (960, 540)
    assert report["bytes"] == 960 * 540 * 3 * 2 * 32 * 16 * 3 // 2 == 2_388_787_200
    assert report["fits"] is False
    assert report["largest_batch_size"] == 10**9 // (960 * 540 * 3 * 2 * 16 * 3 // 2) == 13
    assert report["largest_sequence_length"] == 10**9 // (960 * 540 * 3 * 2 * 32 * 3 // 2) == 6
    assert {v["choice"]: v["bytes"] for v in report["variants"]}["no augmentation copies"] == 1_592_524_800
    status, out, _ = run(capsys, "budget", *REFERENCE, "--dtype", "bfloat16", "--json")
    assert status == 0 and json.loads(out)["bytes"] == 1920 * 1080 * 3 * 2 * 32 * 16


def test_budget_chart(capsys, tmp_path):
    chart = tmp_path / "chart.png"
    status, out, _ = run(capsys, "budget", *REFERENCE, "--budget", "8GiB", "--chart", chart)
    assert status == 0 and f"chart: {chart}" in out
    image = Image.open(chart)
    assert image.format == "PNG" and image.size == (800, 420)
    pixels = np.asarray(image.convert("RGB")).astype(int)
    for colour in ((31, 119, 180), (214, 39, 40)):  # the formula's line, the budget's line
        assert (np.abs(pixels - colour).max(axis=-1) <= 12).sum() > 400
    status, out, _ = run(capsys, "budget", *REFERENCE, "--chart", tmp_path / "chart.svg", "--json")
    assert status == 0 and json.loads(out)["chart"] == str(tmp_path / "chart.svg")
    assert (tmp_path / "chart.svg").read_text().lstrip().startswith("<?xml")


def test_index_without_pyarrow_names_the_extra(videos, tmp_path):
    """pyarrow missing (its import raises ModuleNotFoundError, as where it is not installed): ``vclip
    index`` exits 2 naming the extra that installs it, before any video is read."""
    prelude = "\n".join([
        "import importlib.abc",
        "class NoPyarrow(importlib.abc.MetaPathFinder):",
        "    def find_spec(self, name, path, target=None):",
        "        if name.split('.')[0] == 'pyarrow':",
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)",
        "sys.meta_path.insert(0, NoPyarrow())",
    ])
    completed = run_process("index", videos["h264"], "--out", tmp_path / "catalog.parquet", prelude=prelude)
    assert completed.returncode == 2, completed.stderr
    assert completed.stderr == "vclip index: error: vclip.catalog needs pyarrow: pip install 'vclip-nvdec[catalog]'\n"
    assert not (tmp_path / "catalog.parquet").exists()


def test_budget_chart_without_matplotlib_names_the_extra(tmp_path):
    """matplotlib blocked: Python raises ImportError with the pip hint, the command exits 2 with it."""
    hint = "the memory chart needs matplotlib, which is not installed: pip install 'vclip-nvdec[chart]'"
    prelude = "\n".join(
        [
            "sys.modules['matplotlib'] = None",
            "from vclip._outputs.images import ChartSeries, memory_chart",
            "try:",
            "    memory_chart('unused.png', [1], [ChartSeries('formula', [1])], title='t')",
            "except ImportError as error:",
            "    print(f'ImportError: {error}')",
        ]
    )
    chart = tmp_path / "chart.png"
    completed = run_process("budget", *REFERENCE, "--chart", chart, prelude=prelude)
    assert (completed.returncode, completed.stdout) == (2, f"ImportError: {hint}\n")
    assert completed.stderr == f"vclip budget: error: --chart: {hint}\n"
    assert not chart.exists()


# -- demo ------------------------------------------------------------------------------------------
def test_demo(capsys, tmp_path):
    status, out, err = run(capsys, "demo", "--out", tmp_path / "demo", "--device", "cpu")
    assert status == 0, err
    for mode in ("contiguous", "strided", "keyframe", "indexed", "jittered", "downscaled"):
        assert any(line.strip().startswith(mode) and line.endswith("barcodes match") for line in out.splitlines())
    assert "keyframes of shots.mp4 (200 frames, cuts at 45, 97, a dissolve over 150-164, a keyframe every 60):" in out
    assert "codec  frames 0, 60, 120, 180: the stream's keyframes, 4 packets decoded of 200" in out
    (differ,) = [line for line in out.splitlines() if "they differ because" in line]
    assert differ.startswith("  codec keyframes: 0, 60, 120, 180; scene boundaries: 0, 45, 97, 1")
    dissolve = differ.split("(the dissolve found at ")[1].split(",")[0]
    first, last = map(int, dissolve.split("-"))
    assert 150 <= first < last <= 165 and f"scene boundaries: 0, 45, 97, {last} (the dissolve" in differ
    assert f"found at {dissolve}, within the 150-164 it was made over)" in differ
    assert "3,185,049,600 bytes (3.19 GB, 2.97 GiB)" in out
    assert "all frames correct" in out
    (sheet,) = decoded_frames(tmp_path / "demo" / "clips.png")
    assert sheet.shape[0] > 6 * 96  # one row per mode
    manifest = json.loads((tmp_path / "demo" / "keyframes" / "manifest.json").read_text())
    assert [(r["method"], r["frame_index"]) for r in manifest["keyframes"]] == [
        ("codec", 0),
        ("codec", 60),
        ("codec", 120),
        ("codec", 180),
        ("scene", 0),
        ("scene", 45),
        ("scene", 97),
        ("scene", last),
    ]
    assert all((tmp_path / "demo" / "keyframes" / m / "contact_sheet.jpg").is_file() for m in ("codec", "scene"))


# -- GPU -------------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_sample_on_the_gpu(capsys, videos, tmp_path):
    status, out, _ = run(
        capsys,
        "sample",
        videos["h264"],
        "--mode",
        "indexed",
        "--frame-indices",
        "5,90,3",
        "--device",
        "cuda",
        "--out",
        tmp_path / "c.npz",
    )
    assert status == 0 and "on cuda:0" in out
    with np.load(tmp_path / "c.npz") as stored:
        assert barcodes(stored["clips"][0]) == [5, 90, 3]


# -- outputs you can trust -------------------------------------------------------------------------
def manifest_of(folder):
    return json.loads((Path(folder) / "manifest.json").read_text())


def all_files(folder):
    return sorted(os.path.relpath(p, folder) for p in Path(folder).rglob("*") if p.is_file())


def test_keyframes_names_never_escape_out_or_hit_the_manifest(capsys, videos, tmp_path):
    source = Path(videos["hevc"]).read_bytes()
    inputs = tmp_path / "in"
    inputs.mkdir()
    names = ["manifest.json.mp4", "...mp4", "..mp4", "a b&c.mp4"]
    for name in names:
        (inputs / name).write_bytes(source)
    out = tmp_path / "work" / "out"
    status, stdout, err = run(capsys, "keyframes", *(inputs / n for n in names), "--out", out)
    assert status == 0, err
    manifest = manifest_of(out)
    folders = [v["folder"] for v in manifest["videos"]]
    assert [v["file"] for v in manifest["videos"]] == [str(inputs / n) for n in names]
    assert len(set(folders)) == 4 and "manifest.json" not in folders
    assert all(os.sep not in f and not f.startswith(".") for f in folders)
    assert sorted(os.listdir(tmp_path / "work")) == ["out"]  # nothing beside --out
    keyframes = len(vclip.index_video(videos["hevc"]).keyframe_indices)
    assert len(manifest["keyframes"]) == 4 * keyframes
    assert all((out / r["image"]).is_file() for r in manifest["keyframes"])


def test_keyframes_out_is_checked_before_decoding(capsys, videos, tmp_path):
    (tmp_path / "file").write_text("mine")
    status, _, err = run(capsys, "keyframes", videos["h264"], "--out", tmp_path / "file")
    assert status == 2 and "is an existing file, not a folder" in err
    status, _, err = run(capsys, "keyframes", videos["h264"], "--out", tmp_path / "file" / "below")
    assert status == 2 and "is a file, not a folder" in err
    assert os.listdir(tmp_path) == ["file"] and (tmp_path / "file").read_text() == "mine"


def test_keyframes_rerun_refuses_or_replaces_only_its_own_outputs(capsys, videos, tmp_path):
    out = tmp_path / "keys"
    assert run(capsys, "keyframes", videos["h264"], videos["hevc"], "--out", out)[0] == 0
    first = all_files(out)
    (out / "notes.txt").write_text("mine")
    status, _, err = run(capsys, "keyframes", videos["h264"], "--out", out, "--max-frames", 2)
    assert status == 2 and "holds an earlier run (manifest.json); pass --overwrite" in err
    assert all_files(out) == sorted(first + ["notes.txt"])
    status, _, err = run(capsys, "keyframes", videos["h264"], "--out", out, "--overwrite", "--workers", 0)
    assert status == 2 and "workers (0) must be" in err
    assert all_files(out) == sorted(first + ["notes.txt"])  # refused before the earlier run was removed
    status, _, _ = run(capsys, "keyframes", videos["h264"], "--out", out, "--max-frames", 2, "--overwrite")
    assert status == 0
    assert all_files(out) == [
        "h264_bframes/contact_sheet.jpg",
        "h264_bframes/frame_000000.jpg",
        "h264_bframes/frame_000120.jpg",
        "manifest.json",
        "notes.txt",
    ]
    assert [r["frame_index"] for r in manifest_of(out)["keyframes"]] == [0, 120]


def test_keyframes_manifest_is_written_when_writing_images_fails(capsys, videos, tmp_path, monkeypatch):
    import vclip._scenes.keyframes as keyframes_result

    real_write_image = keyframes_result.write_image

    def disk_full_for_hevc(path, image):  # the file system refuses one video's images
        if "hevc" in str(Path(path).relative_to(tmp_path)):
            raise OSError(28, "No space left on device")
        return real_write_image(path, image)

    monkeypatch.setattr(keyframes_result, "write_image", disk_full_for_hevc)
    status, stdout, err = run(capsys, "keyframes", videos["hevc"], videos["h264"], "--out", tmp_path)
    assert status == 3
    manifest = manifest_of(tmp_path)
    assert [v["file"] for v in manifest["videos"]] == [videos["h264"]]
    assert manifest["errors"][0]["file"] == videos["hevc"]
    problem = f"writing its images into {tmp_path / 'hevc'} failed (No space left on device); none was kept"
    assert manifest["errors"][0]["problem"] == problem
    assert f"vclip keyframes: error: {videos['hevc']}: {problem}" in err and not (tmp_path / "hevc").exists()
    assert "1 of 2 videos" in stdout


def test_names_that_are_not_utf8_print_on_a_strict_terminal(videos, tmp_path):
    folder = os.fsencode(tmp_path)
    strange = os.path.join(folder, b"caf\xe9.mp4")  # Latin-1 bytes
    with open(strange, "wb") as file:
        file.write(Path(videos["hevc"]).read_bytes())
    environment = child_environment(PYTHONIOENCODING="utf-8:strict")
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "vclip",
            "keyframes",
            strange,
            os.path.join(folder, b"gone\xff.mp4"),
            "--out",
            os.path.join(folder, b"out"),
        ],
        capture_output=True,
        env=environment,
        timeout=120,
    )
    assert completed.returncode == 3, completed.stderr
    assert b"caf\\xe9.mp4: 2 codec keyframes" in completed.stdout
    assert b"skipped " + folder + b"/gone\\xff.mp4: file does not exist" in completed.stderr
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["videos"][0]["file"] == os.fsdecode(strange)
    assert manifest["videos"][0]["folder"] == "caf_"


# -- sample over many videos -----------------------------------------------------------------------
def test_sample_many_videos_into_one_npz(capsys, videos, bad_files, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "one.mp4").write_bytes(Path(videos["h264"]).read_bytes())
    listing = tmp_path / "list.txt"
    listing.write_text(f"{videos['long_gop']}\n{bad_files['missing']}\n")
    out = tmp_path / "all.npz"
    status, stdout, err = run(
        capsys,
        "sample",
        folder,
        listing,
        "--mode",
        "strided",
        "--sequence-length",
        4,
        "--stride",
        3,
        "--starts",
        "even",
        "--clips-per-video",
        2,
        "--resize",
        "64,96",
        "--out",
        out,
        "--device",
        "cpu",
    )
    assert status == 3
    assert f"vclip sample: skipped {bad_files['missing']}: file does not exist" in err
    assert f"2 of 3 videos, 4 clips -> {out}" in stdout
    with np.load(out) as stored:
        assert stored["paths"].tolist() == [str(folder / "one.mp4"), videos["long_gop"]]
        assert stored["video_ids"].tolist() == [0, 0, 1, 1]
        assert stored["clips"].shape == (4, 4, 64, 96, 3) and not stored["padded"].any()
        sampler = vclip.strided(4, 3, starts="even", clips_per_video=2)
        expected = [
            c.tolist() for name in ("h264", "long_gop") for c in sampler.sample(vclip.index_video(videos[name]))
        ]
        assert stored["frame_indices"].tolist() == expected
        assert [barcodes(clip) for clip in stored["clips"]] == expected


def test_sample_workers_give_the_same_outputs_in_input_order(capsys, videos, bad_files, tmp_path):
    """Two worker processes: the same clips, messages and skips as one video after another."""
    files = [videos["h264"], bad_files["missing"], videos["long_gop"], videos["odd"], bad_files["text"]]
    outputs = []
    for workers in (1, 2):
        out = tmp_path / f"workers_{workers}.npz"
        status, stdout, err = run(capsys, "sample", *files, "--mode", "strided", "--sequence-length", 3, "--resize",
                                  "64x48", "--seed", 7, "--clips-per-video", 2, "--workers", workers, "--out", out)
        with np.load(out) as stored:
            arrays = {name: stored[name].tolist() for name in ("clips", "frame_indices", "video_ids", "paths")}
        outputs.append((status, stdout.replace(str(out), "OUT"), err, arrays))
    assert outputs[1] == outputs[0]
    status, stdout, err, arrays = outputs[0]
    assert status == 3 and err.count("vclip sample: skipped") == 2
    assert arrays["paths"] == [videos["h264"], videos["long_gop"], videos["odd"]]
    assert arrays["video_ids"] == [0, 0, 1, 1, 2, 2]
    status, _, err = run(capsys, "sample", videos["h264"], "--mode", "keyframe", "--workers", 0,
                         "--out", tmp_path / "none.npz")
    assert status == 2 and "workers (0) must be an integer >= 1" in err and not (tmp_path / "none.npz").exists()


def test_sample_many_videos_one_output_each(capsys, videos, tmp_path):
    copy = tmp_path / "copy" / Path(videos["odd"]).name
    copy.parent.mkdir()
    copy.write_bytes(Path(videos["odd"]).read_bytes())
    out = tmp_path / "out"
    argv = ["sample", videos["odd"], copy, videos["hevc"], "--mode", "keyframe", "--out", out, "--format", "npz"]
    status, stdout, _ = run(capsys, *argv)
    assert status == 0
    names = sorted(os.listdir(out))
    assert len(names) == 3 and "hevc.npz" in names and all(n.startswith("odd_size-") for n in names if n != "hevc.npz")
    with np.load(out / "hevc.npz") as stored:
        keyframes = vclip.index_video(videos["hevc"]).keyframe_indices.tolist()
        assert stored["frame_indices"].tolist() == [keyframes] and barcodes(stored["clips"][0]) == keyframes
    status, _, err = run(capsys, *argv)
    assert status == 2 and "3 of the outputs already exist" in err and "--overwrite" in err
    assert run(capsys, *argv, "--overwrite")[0] == 0 and sorted(os.listdir(out)) == names
    status, _, _ = run(
        capsys,
        "sample",
        videos["odd"],
        videos["hevc"],
        "--mode",
        "indexed",
        "--frame-indices",
        "3",
        "--out",
        tmp_path / "png",
    )
    assert status == 0
    assert sorted(os.listdir(tmp_path / "png")) == ["hevc", "odd_size"]
    assert os.listdir(tmp_path / "png" / "hevc") == ["clip000_000_frame000003.png"]


def test_sample_png_rerun_never_mixes_old_and_new_files(capsys, videos, tmp_path):
    out = tmp_path / "frames"
    assert run(capsys, "sample", videos["h264"], "--mode", "indexed", "--frame-indices", "1,2,3", "--out", out)[0] == 0
    (out / "mine.txt").write_text("kept")
    status, _, err = run(capsys, "sample", videos["h264"], "--mode", "indexed", "--frame-indices", "9", "--out", out)
    assert status == 2 and "already holds 3 clip PNGs of an earlier run; pass --overwrite" in err
    assert (
        run(capsys, "sample", videos["h264"], "--mode", "indexed", "--frame-indices", "9", "--out", out, "--overwrite")[
            0
        ]
        == 0
    )
    assert sorted(os.listdir(out)) == ["clip000_000_frame000009.png", "mine.txt"]


def test_sample_out_forms(capsys, videos, tmp_path):
    status, stdout, _ = run(
        capsys,
        "sample",
        videos["h264"],
        "--mode",
        "indexed",
        "--frame-indices",
        "4",
        "--out",
        f"{tmp_path / 'e.jpg'}{os.sep}",
    )
    assert status == 0 and os.listdir(tmp_path / "e.jpg") == ["clip000_000_frame000004.png"]
    status, _, err = run(
        capsys, "sample", videos["h264"], "--mode", "indexed", "--frame-indices", "4", "--out", tmp_path / "f.jpg"
    )
    assert status == 2 and "must end in .npz, .pt, .mp4, or name a folder" in err


# -- what the end policy did -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def short_video(tmp_path_factory):
    return make_video_file(tmp_path_factory.mktemp("short") / "short.mp4", num_frames=6)


def make_video_file(path, num_frames):
    from vclip.synthetic import make_video

    return make_video(path, num_frames=num_frames, width=96, height=64, keyframe_interval=30)


@pytest.mark.parametrize("policy, frames", [("repeat_last", [0, 2, 4, 5, 5]), ("wrap", [0, 2, 4, 0, 2])])
def test_sample_says_which_clips_were_padded(capsys, short_video, tmp_path, policy, frames):
    status, stdout, _ = run(
        capsys,
        "sample",
        short_video,
        "--mode",
        "strided",
        "--sequence-length",
        5,
        "--stride",
        2,
        "--end-policy",
        policy,
        "--out",
        tmp_path / "c.npz",
    )
    assert status == 0
    assert (
        f"clip 0: frames {', '.join(map(str, frames))} (2 of 5 frames padded by end policy {policy}: "
        "the video has 6 frames, a clip spans 9)"
    ) in stdout
    with np.load(tmp_path / "c.npz") as stored:
        assert stored["frame_indices"].tolist() == [frames]
        assert stored["padded"].tolist() == [[False, False, False, True, True]]
        assert barcodes(stored["clips"][0]) == frames


def test_sample_drop_that_drops_everything_is_reported(capsys, short_video, videos, tmp_path):
    argv = ["--mode", "contiguous", "--sequence-length", 8, "--end-policy", "drop", "--starts", "even"]
    status, stdout, err = run(capsys, "sample", short_video, videos["hevc"], *argv, "--out", tmp_path / "c.npz")
    assert status == 3
    assert (
        f"vclip sample: skipped {short_video}: no clip fits (a clip spans 8 frames, the video has 6; "
        "--end-policy drop drops them all)"
    ) in err
    with np.load(tmp_path / "c.npz") as stored:
        assert stored["paths"].tolist() == [videos["hevc"]] and stored["clips"].shape[:2] == (1, 8)
    status, _, _ = run(capsys, "sample", short_video, *argv, "--out", tmp_path / "d.npz")
    assert status == 1 and not (tmp_path / "d.npz").exists()


# -- budget: the formula and the loader ------------------------------------------------------------
@pytest.fixture
def two_cores(monkeypatch):
    """A machine of 2 cores, as CI's: the GPU loader's pacing may start no decode process and no CPU
    decoder there, so the plans below do not depend on the machine running the tests."""
    from vclip._engine import scheduler

    monkeypatch.setattr(scheduler, "usable_cores", lambda: 2)
    monkeypatch.setattr(scheduler, "cores_per_rank", lambda: 2)


def test_budget_takes_the_source_videos_size_and_ends_with_one_bottom_line(capsys, videos):
    """1080p videos resized to 224: NVDEC surfaces are the video's size, so the loader needs what
    plan_loader_memory says for that source; the last line gives one answer."""
    out224 = ["--width", 224, "--height", 224, "--sequence-length", 16, "--dtype", "float32", "--device", "cuda"]
    status, out, _ = run(capsys, "budget", *out224, "--batch-size", 8, "--video-width", 1920, "--video-height", 1080,
                         "--json")
    report = json.loads(out)
    planned = vclip.plan_loader_memory(width=224, height=224, batch_size=8, sequence_length=16, dtype="float32",
                                       device="cuda", video_width=1920, video_height=1080)
    assert status == 0 and report["loader"]["bytes"] == planned.total
    assert (report["loader"]["video_width"], report["loader"]["video_height"]) == (1920, 1080)
    assert report["bottom_line"] == (f"a ClipLoader of batch_size=8 from 1920x1080 videos needs "
                                     f"{vclip.format_bytes(planned.total)}")
    status, out, _ = run(capsys, "budget", *out224, "--budget", "24GiB", "--video", videos["h264"])
    least = dict(prefetch_queue_depth=1, decode_processes=0, cpu_decoders=0)  # what memory_budget may lower to
    largest = vclip.plan_loader_memory(width=224, height=224, batch_size=1, sequence_length=16, dtype="float32",
                                       device="cuda", video_width=320, video_height=240,
                                       **least).largest_batch_size("24GiB")
    formula = vclip.largest_batch_size("24GiB", width=224, height=224, sequence_length=16, dtype="float32")
    assert status == 0 and out.splitlines()[-1] == (
        f"bottom line: batch_size={largest:,} is the largest a ClipLoader from 320x240 videos fits in 24GiB (the "
        f"formula alone allows {formula:,}: it counts one batch and nothing else)")
    status, out, _ = run(capsys, "budget", *out224, "--batch-size", 4096, "--budget", "24GiB")
    assert out.splitlines()[-1].startswith("bottom line: batch_size=4096 does not fit in 24GiB with a ClipLoader "
                                           "from 224x224 videos; the largest that fits is batch_size=")
    status, _, err = run(capsys, "budget", *out224, "--batch-size", 8, "--video-width", 1920)
    assert status == 2 and "--video-width and --video-height go together" in err
    status, _, err = run(capsys, "budget", *out224, "--batch-size", 8, "--video", "/no/such.mp4")
    assert status == 2 and "--video: /no/such.mp4: file does not exist" in err


@pytest.mark.parametrize(
    "options, settings, staging",
    [
        # 8 NVDEC threads, up to 4 batches queued: 7 buffers
        (["--device", "cuda"], dict(buffers=7, decoders=8, processes=0, on_gpu=True), 0),
        (["--device", "cuda", "--prefetch-queue-depth", "3", "--decode-processes", "4"],
         dict(buffers=6, decoders=16, processes=4, on_gpu=True), 0),
        # CPU decoders in packing processes beside them, with no CUDA context, 4 NV12 pictures staged each
        (["--device", "cuda", "--decode-processes", "2", "--cpu-decoders", "4"],
         dict(buffers=7, decoders=8, processes=2, on_gpu=True), 4 * 4 * 1080 * 1280),
        (["--num-threads", "6", "--device", "cpu"], dict(buffers=5, decoders=6, processes=0, on_gpu=False), 0),
    ],
)
def test_budget_loader_figure_is_the_loaders(capsys, two_cores, options, settings, staging):
    argv = ["--width", "1280", "--height", "720", "--sequence-length", "16", "--dtype", "float16", "--budget", "24GiB",
            "--json"]
    status, out, _ = run(capsys, "budget", *argv, "--batch-size", 32, *options)
    report = json.loads(out)
    assert status == 0
    expected = _loader_memory_from_parts(
        width=1280,
        height=720,
        batch_size=32,
        sequence_length=16,
        dtype="float16",
        video_width=1280,
        video_height=720,
        **settings,
    )
    loader = report["loader"]
    assert loader["bytes"] == expected.total + staging and loader["decoders"] == expected.decoders
    assert loader["staging"] == staging
    assert (loader["output_buffers"], loader["decode_surfaces"], loader["cuda_context"]) == (
        expected.output_buffers,
        expected.decode_surfaces,
        expected.cuda_context,
    )
    largest = loader["largest_batch_size"]  # with the least a loader with memory_budget runs with
    if "--prefetch-queue-depth" not in options:
        settings = {**settings, "buffers": 1 + 3}

    def fits(batch: int) -> bool:
        estimate = _loader_memory_from_parts(
            width=1280,
            height=720,
            batch_size=batch,
            sequence_length=16,
            dtype="float16",
            video_width=1280,
            video_height=720,
            **settings,
        )
        return estimate.total + staging <= 24 * 2**30

    assert fits(largest) and not fits(largest + 1)
    assert report["largest_batch_size"] == 24 * 2**30 // (1280 * 720 * 3 * 2 * 16) == 291  # the formula, unchanged
    assert largest < 291


def test_budget_says_what_memory_budget_lowers(capsys, two_cores):
    """A budget between the least and the most a loader runs with: it fits once memory_budget lowers
    the batches queued (left to the loader), as a ClipLoader with that memory_budget does."""
    argv = ["--width", "224", "--height", "224", "--sequence-length", "16", "--dtype", "float32", "--batch-size", "32",
            "--device", "cuda", "--video-width", "1920", "--video-height", "1080"]
    plan = vclip.plan_loader_memory(width=224, height=224, batch_size=32, sequence_length=16, dtype="float32",
                                    device="cuda", video_width=1920, video_height=1080)
    budget = plan.total - plan.batch.bytes  # one buffer fewer: 3 batches queued instead of 4
    status, out, _ = run(capsys, "budget", *argv, "--budget", str(budget), "--json")
    loader = json.loads(out)["loader"]
    assert status == 0 and loader["fits"] and loader["lowered"] == {"prefetch_queue_depth": 3}
    assert loader["bytes"] == plan.total and loader["bytes_within_budget"] == budget
    status, out, _ = run(capsys, "budget", *argv, "--budget", str(budget))
    assert "fits in" in out.splitlines()[-1] and "once memory_budget lowers prefetch_queue_depth 3" in out
    status, out, _ = run(capsys, "budget", *argv, "--budget", str(budget), "--prefetch-queue-depth", "4", "--json")
    assert json.loads(out)["loader"]["fits"] is False  # a depth set is not lowered


@pytest.mark.parametrize("argv", [("keyframes", "--out", "OUT", "--stream-index", "-1"),
                                  ("check", "--stream-index", "x"), ("sample", "--out", "OUT", "--seed", "-1")])
def test_a_negative_stream_or_seed_is_a_bad_argument_not_a_bad_file(capsys, videos, tmp_path, argv):
    """Refused once, with exit status 2, before any file (they were reported per file as internal errors)."""
    argv = [str(tmp_path / "out") if arg == "OUT" else arg for arg in argv]
    status, out, err = run(capsys, argv[0], videos["h264"], videos["hevc"], *argv[1:])
    assert status == 2 and "must be an integer >= 0" in err and "internal error" not in err + out
    assert not (tmp_path / "out").exists()


def test_budget_plans_where_auto_decodes(capsys):
    """The default device is auto, as the loader's: the plan of the device auto resolves to here."""
    from vclip._device import resolve_device

    here = "cuda" if resolve_device("auto").device.is_cuda else "cpu"
    reports = {}
    for device in ("auto", here):
        status, out, _ = run(capsys, "budget", *REFERENCE, "--budget", "24GiB", "--json", "--device", device)
        assert status == 0
        reports[device] = json.loads(out)
    assert reports["auto"]["loader"].pop("device") == "auto" and reports[here]["loader"].pop("device") == here
    assert reports["auto"] == reports[here] and reports["auto"]["loader"]["on_gpu"] == (here == "cuda")
    status, out, _ = run(capsys, "budget", *REFERENCE)
    assert ("no usable GPU here: --device cuda plans for one" in out) == (here == "cpu")


def test_budget_without_batch_answers_the_largest_batch(capsys, two_cores):
    status, out, _ = run(
        capsys, "budget", "--width", "1280", "--height", "720", "--sequence-length", "16", "--dtype", "float16",
        "--budget", "24GiB", "--device", "cuda",
    )
    assert status == 0
    assert "one clip (no --batch-size)" in out
    assert "largest batch size at 16 frames                        291" in out
    loader_line = next(line for line in out.splitlines() if "largest batch size the loader fits" in line)
    expected = _loader_memory_from_parts(
        width=1280, height=720, batch_size=1, sequence_length=16, dtype="float16", video_width=1280, video_height=720,
        buffers=1 + 3, decoders=8,  # 1 batch queued: the least a loader with memory_budget runs with
    )
    assert loader_line.endswith(f"largest batch size the loader fits: {expected.largest_batch_size('24GiB'):,}")
    assert "largest sequence length" not in out
    status, out, _ = run(capsys, "budget", "--width", "1280", "--height", "720", "--sequence-length", "16", "--dtype",
                         "float16", "--budget", "24GiB", "--json", "--device", "cuda")
    report = json.loads(out)  # no figure of the batch of one clip the text leaves out either
    assert report["batch_size"] is None and report["largest_sequence_length"] is None
    assert report["loader"]["fits"] is None and report["largest_batch_size"] == 291


def test_a_title_that_is_not_utf8_does_not_stop_any_command(capsys, videos, tmp_path):
    """A title that is not UTF-8 made PyAV raise UnicodeDecodeError (issue 10, D3): the metadata is
    read with replacement characters, and every command does the file like any other."""
    import av

    path = tmp_path / "title.mkv"
    with av.open(str(path), "w") as container:
        container.metadata["title"] = "TITLEMARK"
        stream = container.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = 64, 64, "yuv420p"
        for value in range(3):
            frame = av.VideoFrame.from_ndarray(np.full((64, 64, 3), value * 60, np.uint8), format="rgb24")
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    path.write_bytes(path.read_bytes().replace(b"TITLEMARK", b"TITL\xff\xfeARK"))
    files = [videos["hevc"], path, videos["odd"]]
    status, out, err = run(capsys, "info", "--json", *files)
    assert status == 0 and [r["file"] for r in json.loads(out)] == list(map(str, files))
    status, out, err = run(capsys, "keyframes", *files, "--out", tmp_path / "keys")
    assert status == 0 and [v["file"] for v in manifest_of(tmp_path / "keys")["videos"]] == list(map(str, files))
    status, out, err = run(capsys, "check", "--json", "--device", "cpu", "--workers", 1, *files)
    assert status == 0 and [r["status"] for r in json.loads(out)] == ["ok", "ok", "ok"]


def test_native_output_goes_to_stderr_while_a_command_runs(tmp_path):
    """What a native library writes on file descriptor 1 (PyNvVideoCodec's "Decode Error occurred
    for picture N") must not mix into stdout, where --json goes."""
    code = (
        "import os, sys\n"
        "from vclip.cli import _native_output_to_stderr\n"
        "with _native_output_to_stderr():\n"
        "    os.write(1, b'Decode Error occurred for picture 3\\n')\n"
        "    print('{\"json\": true}')\n"
        "print('after')\n"
        "os.write(1, b'native after\\n')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=child_environment()
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == '{"json": true}\nafter\nnative after\n'
    assert "Decode Error occurred for picture 3" in result.stderr


def test_list_files_are_read_as_the_loader_reads_them(videos, tmp_path):
    """A header naming the columns, labelled lines with or without times, and plain paths: the
    videos the loader would take (the header and the labels are not files)."""
    from vclip.cli._common import expand_inputs

    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a b.mp4").write_bytes(Path(videos["h264"]).read_bytes())
    with_header = tmp_path / "segments.csv"
    with_header.write_text(f"path,label,start,end\n{videos['h264']},0,0.0,1.0\n\"sub/a b.mp4\",1,0.5,2.0\n")
    assert expand_inputs([str(with_header)]) == [videos["h264"], str(tmp_path / "sub" / "a b.mp4")]
    plain = tmp_path / "plain.txt"
    plain.write_text(f"# videos\npath\n{videos['h264']} 0.0 1.0 3\n{videos['hevc']},2\nsub/a b.mp4\n{videos['odd']}\n")
    assert expand_inputs([str(plain)]) == [videos["h264"], videos["hevc"], str(tmp_path / "sub" / "a b.mp4"),
                                            videos["odd"]]
