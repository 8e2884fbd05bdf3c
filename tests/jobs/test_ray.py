"""Offline jobs on a local Ray (2 CPUs) over a few dozen synthetic videos: the same catalog as local
processes, and clips, keyframes and checks equal to what the library gives in this process."""

import json
import os
from pathlib import Path

import numpy as np
import pytest
from helpers import frame_payload, require_extra

ray = require_extra("ray")
require_extra("ray.data")
pq = require_extra("pyarrow.parquet")

import vclip  # noqa: E402
import vclip.ray as vray  # noqa: E402
from vclip.catalog import build_catalog, read_catalog, resolve_sources  # noqa: E402
from vclip.cli import main  # noqa: E402
from vclip.keyframes import extract_keyframes  # noqa: E402
from vclip.synthetic import make_video, read_barcode  # noqa: E402

pytestmark = pytest.mark.slow

CLASSES, PER_CLASS = ("archery", "bowling", "cycling"), 10


@pytest.fixture(scope="module")
def local_ray():
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    yield
    if started:
        ray.shutdown()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("ray") / "videos"
    for label, name in enumerate(CLASSES):
        (root / name).mkdir(parents=True)
        for number in range(PER_CLASS):
            make_video(
                root / name / f"{name}_{number:02d}.mp4",
                num_frames=10 + 2 * number,
                width=32,
                height=32,
                keyframe_interval=6,
                b_frames=2,
                seed=label * PER_CLASS + number,
            )
    (root / "bowling" / "broken.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + b"\x00" * 500)
    return root


def catalog_table(path):
    """The catalog without what differs from run to run (timings, the file's id and date)."""
    return pq.read_table(path).drop_columns(["index_seconds"]).replace_schema_metadata(None)


def test_catalog_built_on_ray_equals_the_local_one(local_ray, dataset, tmp_path, capsys):
    local = build_catalog(dataset, tmp_path / "local.parquet", workers=2, progress=False)
    on_ray = build_catalog(dataset, tmp_path / "ray.parquet", ray=True, workers=5, progress=False)
    assert on_ray.engine == "ray" and on_ray.videos == local.videos == 3 * PER_CLASS + 1
    assert on_ray.workers == 2  # the cluster's actors (one per CPU), not the local workers asked for
    assert on_ray.indexed == local.indexed and on_ray.unusable == local.unusable and len(local.unusable) == 1
    assert catalog_table(tmp_path / "ray.parquet").equals(catalog_table(tmp_path / "local.parquet"))
    assert read_catalog(tmp_path / "ray.parquet").metadata["class_names"] == list(CLASSES)
    # the command line, updating the catalog on Ray: nothing changed, nothing indexed, the same table
    assert main(["index", str(dataset), "--out", str(tmp_path / "ray.parquet"), "--ray", "--json"]) == 3
    report = json.loads(capsys.readouterr().out)
    assert (report["engine"], report["indexed"], report["kept"]) == ("ray", 0, on_ray.videos)
    assert catalog_table(tmp_path / "ray.parquet").equals(catalog_table(tmp_path / "local.parquet"))


def test_clips_as_rows_are_exact_and_match_the_local_decoder(local_ray, dataset):
    sampler = vclip.strided(4, 2, clips_per_video=2)
    rows = vray.read_clips(dataset, sampler, seed=11, device="cpu").take_all()
    assert len(rows) == 2 * 3 * PER_CLASS  # the broken file gives none
    ids = {path: number for number, (path, _) in enumerate(resolve_sources(dataset)[0])}
    for row in rows:
        assert row["clip"].shape == (4, 32, 32, 3) and row["clip"].dtype == np.uint8
        assert [read_barcode(frame) for frame in row["clip"]] == row["frame_indices"].tolist()
        assert row["label"] == CLASSES.index(os.path.basename(os.path.dirname(row["video"])))
        assert row["video_id"] == ids[row["video"]]
    first = sorted(rows, key=lambda r: (r["video_id"], r["clip_index"]))[:2]
    seed = int(np.random.SeedSequence([11, first[0]["video_id"]]).generate_state(1)[0])
    expected = vclip.VideoDecoder(first[0]["video"]).get_clips(sampler, seed=seed)
    for clip_index, row in enumerate(first):
        np.testing.assert_array_equal(row["clip"], expected.data[clip_index])
        np.testing.assert_array_equal(row["pts_seconds"], expected.pts_seconds[clip_index])


def test_keyframes_as_rows_match_extract_keyframes(local_ray, dataset):
    videos = sorted(str(p) for p in (dataset / "archery").glob("*.mp4"))[:4]
    rows = vray.read_keyframes(videos, max_frames=2, device="cpu").take_all()
    by_video: dict[str, list] = {}
    for row in rows:
        by_video.setdefault(row["video"], []).append(row)
    assert sorted(by_video) == videos
    for path, found in by_video.items():
        expected = extract_keyframes(path, max_frames=2, device="cpu")
        found.sort(key=lambda r: r["frame_index"])
        assert [r["frame_index"] for r in found] == expected.frame_indices.tolist()
        for row, image in zip(found, expected.frames):
            np.testing.assert_array_equal(row["image"], image)
            assert read_barcode(row["image"]) == row["frame_index"]


def test_check_rows_are_the_local_check_results(local_ray, dataset, tmp_path):
    """Each row is check_video's result for the file: the broken one unreadable, a file with one
    frame's bytes zeroed corrupt at that frame, the rest ok with every frame counted."""
    from vclip.check import check_video
    from vclip.synthetic import make_video

    damaged = make_video(tmp_path / "damaged.mp4", num_frames=60, width=128, height=96, keyframe_interval=20,
                         b_frames=2)
    start, end = frame_payload(vclip.index_video(damaged), 32)
    data = bytearray(Path(damaged).read_bytes())
    data[start:end] = bytes(end - start)
    Path(damaged).write_bytes(bytes(data))
    built = build_catalog([dataset / "bowling", damaged], tmp_path / "bowling.parquet", workers=1, progress=False)
    rows = vray.check_videos(read_catalog(built.path), device="cpu").take_all()
    assert len(rows) == PER_CLASS + 2
    for row in rows:
        local = check_video(row["path"], device="cpu")
        assert (row["status"], row["ok"], row["num_frames"], list(row["bad_frames"]), list(row["problems"]),
                row["error"] or None, row["device"]) == (local.status, local.ok, local.num_frames,
                                                         list(local.bad_frames), list(local.problems),
                                                         local.error, "cpu")
        if os.path.basename(row["path"]) == "broken.mp4":
            assert row["status"] == "unreadable" and row["error"]
        elif row["path"] == str(damaged):
            assert row["status"] == "corrupt" and 32 in row["bad_frames"]
        else:
            assert row["ok"] and row["num_frames"] == vclip.index_video(row["path"]).num_frames


def test_index_videos_dataset_rows_are_catalog_rows(local_ray, dataset):
    rows = vray.index_videos(dataset / "cycling", workers=1).take_all()
    assert len(rows) == PER_CLASS and all(row["usable"] for row in rows)
    for row in rows:
        index = vclip.index_video(row["path"])
        assert row["num_frames"] == index.num_frames
        np.testing.assert_array_equal(np.asarray(row["pts"]), index.pts)


def test_cli_check_and_keyframes_on_ray_write_what_local_runs_write(local_ray, dataset, tmp_path, capsys):
    """`vclip check --ray` and `vclip keyframes --ray`: one Ray task per video, the same report and
    the same images, manifest entries and statuses as the local run (bad files included)."""
    files = [str(path) for path in sorted(dataset.rglob("*.*"))][:8]
    reports = []
    for ray_option in ([], ["--ray"]):
        status = main(["check", "--json", "--device", "cpu", *ray_option, *files])
        rows = json.loads(capsys.readouterr().out)
        reports.append((status, [{key: value for key, value in row.items() if key != "seconds"} for row in rows]))
    assert reports[0] == reports[1] and len(reports[0][1]) == len(files)
    statuses = []
    for name, ray_option in (("local", []), ("ray", ["--ray"])):
        statuses.append(
            main(
                [
                    "keyframes",
                    *files,
                    "--out",
                    str(tmp_path / name),
                    "--device",
                    "cpu",
                    "--max-frames",
                    "3",
                    "--method",
                    "scene",
                    *ray_option,
                ]
            )
        )
    capsys.readouterr()
    manifests = [json.loads((tmp_path / name / "manifest.json").read_text()) for name in ("local", "ray")]
    assert statuses[0] == statuses[1]
    assert manifests[0]["keyframes"] == manifests[1]["keyframes"] and manifests[0]["errors"] == manifests[1]["errors"]
    for record in manifests[0]["keyframes"]:
        assert (tmp_path / "local" / record["image"]).read_bytes() == (tmp_path / "ray" / record["image"]).read_bytes()


@pytest.mark.gpu
def test_checks_and_keyframes_as_ray_tasks_on_the_gpu(local_ray, dataset, videos):
    """A local Ray sees this machine's GPU: the tasks get a share of it and decode there; the
    keyframes come back as NumPy arrays, the same frames as the GPU gives in this process."""
    from vclip.check import check_videos
    from vclip.keyframes import extract_keyframes_many

    paths = [videos["h264"], videos["hevc"], videos["long_gop"], str(dataset / "bowling" / "broken.mp4")]
    checks = check_videos(paths, device="cuda", ray=True)
    assert [r.status for r in checks] == ["ok", "ok", "ok", "unreadable"]
    assert all(r.device.startswith("cuda") for r in checks[:3])
    results = list(extract_keyframes_many(paths, max_frames=2, device="cuda", ray=True))
    assert isinstance(results[3], vclip.VideoError) and results[3].path == paths[3]
    for path, found in zip(paths, results[:3]):
        expected = extract_keyframes(path, max_frames=2, device="cuda")
        assert found.device.startswith("cuda") and isinstance(found.frames, np.ndarray)
        assert found.frame_indices.tolist() == expected.frame_indices.tolist()
        assert [read_barcode(frame) for frame in found.frames] == found.frame_indices.tolist()
