"""Shot-boundary detection: vclip's scene method against PySceneDetect, per kind of transition.

Labelled set (:func:`vclip.synthetic.make_scene_video`, generated here): for each class, ``--seeds``
videos of 6 shots at 192x108, 25 fps, H.264 (seeds from ``--first-seed``, 100 by default: the
detector's thresholds were set on seeds 0-11, so these are held out):

- ``cuts``: hard cuts, shots of 8-60 frames, a third of them cuts to another view of the same place
  (same colours, new layout);
- ``dissolves``: cross-dissolves of 10-30 frames with both shots moving;
- ``fades``: fade to black (6-20 frames), 0-8 black frames, fade from black (6-20 frames), some with
  a cut to or from black instead of one of the fades;
- ``motion``: cuts between shots in fast motion (fast pans, shaky camera, fast zooms, a large object
  crossing the frame), with motion blur: what counts here is the false boundaries;
- ``flashes``: cuts between shots lit by 1-3 flashes each (1-3 overexposed frames): the same.

A boundary is found when a detection lies within 2 frames of a cut, or within the span of a gradual
transition (its first blended or dimmed frame to the first frame of the new shot alone); each
detection matches one boundary at most, and the rest are false. Precision and recall per class.

Detectors: ``vclip.keyframes.find_shot_boundaries`` (default settings, ``--device``; one more for
each ``--decode-processes`` count above 0, after timing the first video, which starts them), and
PySceneDetect's ``ContentDetector`` and ``AdaptiveDetector`` with their defaults (OpenCV backend,
its automatic downscaling), on the CPU. Speed: frames per second of the whole job per file (open,
decode, detect), the median of ``--repeats`` runs, on the labelled set, on a 1280x720 video of 4
shots and on a long 1280x720 video (``--long-frames``, a keyframe every 250 frames); and
over whole folders (the labelled set; ``--copies`` copies of the 720p video) with several videos at
once: vclip with ``--jobs`` videos at once as ``vclip keyframes --workers`` runs them (threads on the
GPU, processes on the CPU), PySceneDetect one file at a time (its command line) and in a pool of one
process per core.

    python benchmarks/scenes.py [--device cpu|cuda] [--out DIR] [--videos DIR] [--seeds 6]
                                [--classes hard_motion,motion] [--accuracy-only]

PySceneDetect is not a dependency of vclip: ``pip install scenedetect opencv-python-headless``
(or the ``bench`` extra); without it only vclip is measured.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from functools import partial
from pathlib import Path

from common import environment, save_results

import vclip
from vclip.keyframes import find_shot_boundaries
from vclip.synthetic import SCENE_VIDEO_CLASSES, SceneVideo, make_scene_video, make_video

CUT_TOLERANCE = 2  # frames either side of a cut
SPEED_SIZE = (1280, 720)


def detect_vclip(path: str, device: str, decode_processes: int = 0) -> list[int]:
    return [boundary.frame for boundary in find_shot_boundaries(path, device=device,
                                                                 decode_processes=decode_processes)]


def detect_pyscenedetect(path: str, detector_name: str) -> list[int]:
    from scenedetect import AdaptiveDetector, ContentDetector, SceneManager, open_video

    video = open_video(path)
    manager = SceneManager()
    manager.add_detector(ContentDetector() if detector_name == "content" else AdaptiveDetector())
    manager.detect_scenes(video)
    starts = [scene[0] for scene in manager.get_scene_list()]
    return [start.frame_num if hasattr(start, "frame_num") else start.get_frames() for start in starts][1:]


def detectors(device: str, decode_processes: list[int]) -> dict:
    """Name -> detect(path) (picklable, for the process pools of :func:`folder_throughput`)."""
    ways = {f"vclip_{device}" + (f"_{count}_processes" if count else ""):
            partial(detect_vclip, device=device, decode_processes=count) for count in decode_processes}
    try:
        import scenedetect  # noqa: F401
    except ImportError:
        return ways
    ways["pyscenedetect_content"] = partial(detect_pyscenedetect, detector_name="content")
    ways["pyscenedetect_adaptive"] = partial(detect_pyscenedetect, detector_name="adaptive")
    return ways


def _scenedetect_version() -> str | None:
    try:
        import scenedetect
    except ImportError:
        return None
    return scenedetect.__version__


def make_labelled_set(folder: Path, seeds: range,
                      kinds: tuple[str, ...] | list[str] = SCENE_VIDEO_CLASSES) -> dict[str, list[SceneVideo]]:
    return {
        kind: [make_scene_video(folder / f"{kind}_{seed}.mp4", kind, seed=seed) for seed in seeds]
        for kind in kinds
    }


def timed(run_once, repeats: int) -> tuple[object, float]:
    """The result of the last run and the median seconds of ``repeats`` runs (after one warm-up,
    which starts vclip's decode processes)."""
    result = run_once()
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        result = run_once()
        seconds.append(time.perf_counter() - started)
    return result, statistics.median(seconds)


def measure(videos: dict[str, list[SceneVideo]], ways: dict, repeats: int) -> dict:
    results = {}
    for name, detect in ways.items():
        per_class, frames, seconds = {}, 0, 0.0
        for kind, group in videos.items():
            counts = {"true": 0, "missed": 0, "false": 0}
            detections = []
            for video in group:
                found, spent = timed(lambda detect=detect, path=video.path: detect(path), repeats)
                frames += video.num_frames
                seconds += spent
                for key, value in video.score(found, cut_tolerance=CUT_TOLERANCE).items():
                    counts[key] += value
                detections.append(found)
            found_total = counts["true"] + counts["false"]
            counts["precision"] = counts["true"] / found_total if found_total else 1.0
            counts["recall"] = counts["true"] / (counts["true"] + counts["missed"])
            counts["detections"] = detections
            per_class[kind] = counts
        results[name] = {"classes": per_class, "frames_per_second": frames / seconds}
    return results


def speed_on_large_video(folder: Path, ways: dict, repeats: int) -> dict:
    width, height = SPEED_SIZE
    video = make_scene_video(
        folder / f"speed_{width}x{height}.mp4", "dissolves", width=width, height=height, num_shots=4, seed=7
    )
    rates = {}
    for name, detect in ways.items():
        _, seconds = timed(lambda detect=detect: detect(video.path), repeats)
        rates[name] = video.num_frames / seconds
    return {"video": {"width": width, "height": height, "frames": video.num_frames}, "frames_per_second": rates}


def speed_on_long_video(folder: Path, ways: dict, repeats: int, frames: int) -> dict:
    """Frames/s on one long 720p video (a keyframe every 10 s at 25 fps, as web videos): long enough
    for vclip's decoding in chunks on several NVDEC sessions (the 4-shot video is one chunk)."""
    width, height = SPEED_SIZE
    path = str(folder / f"long_{width}x{height}_{frames}.mp4")
    if not Path(path).exists():
        make_video(path, num_frames=frames, width=width, height=height, fps=25, keyframe_interval=250)
    rates = {}
    for name, detect in ways.items():
        _, seconds = timed(lambda detect=detect: detect(path), repeats)
        rates[name] = frames / seconds
    return {"video": {"width": width, "height": height, "frames": frames, "keyframe_interval": 250},
            "frames_per_second": rates}


def folder_throughput(paths: list[str], frames: int, ways: dict, jobs: list[int], repeats: int) -> dict:
    """Frames/s over a whole folder with ``jobs`` videos at once: vclip as ``vclip keyframes
    --workers`` runs them (threads on the GPU, sharing the NVDEC sessions; processes on the CPU),
    PySceneDetect one file after another (what its command line does) and in a pool of processes,
    one per core. The median of ``repeats`` passes after a warm-up pass."""
    rates: dict = {}
    for name, detect in ways.items():
        threads = name.startswith("vclip_cuda")
        counts = jobs if name.startswith("vclip") else sorted({1, os.cpu_count() or 1})
        for count in counts:
            pool = (
                ThreadPoolExecutor(count)
                if threads
                else ProcessPoolExecutor(count, mp_context=multiprocessing.get_context("spawn"))
            )
            with pool:
                _, seconds = timed(lambda pool=pool, detect=detect: list(pool.map(detect, paths)), repeats)
            rates[f"{name} x{count} {'threads' if threads else 'processes'}"] = frames / seconds
    return {"videos": len(paths), "frames": frames, "frames_per_second": rates}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", help="vclip's decoder device: cpu or cuda (default cpu)")
    parser.add_argument("--out", help="folder for scenes.json (default: $OUT or benchmarks/results/)")
    parser.add_argument("--videos", help="folder to keep the generated videos in (default: a temporary folder)")
    parser.add_argument("--seeds", type=int, default=6, help="videos per class (default 6)")
    parser.add_argument("--first-seed", type=int, default=100, help="seed of the first video of each class")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per video (default 3)")
    parser.add_argument("--jobs", default="1,4,8", help="vclip's videos at once in the folder runs (default 1,4,8)")
    parser.add_argument(
        "--copies", type=int, default=16, help="copies of the 720p video in its folder run (default 16)"
    )
    parser.add_argument("--decode-processes", default="0",
                        help="vclip's decode_processes, one detector each (default 0; e.g. 0,4 on the GPU)")
    parser.add_argument("--long-frames", type=int, default=3000, help="frames of the long 720p video (default 3000)")
    parser.add_argument("--classes", default=",".join(SCENE_VIDEO_CLASSES),
                        help="classes of the labelled set (default: all)")
    parser.add_argument("--accuracy-only", action="store_true",
                        help="precision and recall only: one timed run per video, no 720p, long-video or folder runs")
    args = parser.parse_args()
    kinds = args.classes.split(",")
    unknown = sorted(set(kinds) - set(SCENE_VIDEO_CLASSES))
    if unknown:
        parser.error(f"unknown classes {unknown}: the classes are {', '.join(SCENE_VIDEO_CLASSES)}")
    repeats = 1 if args.accuracy_only else args.repeats
    out = args.out or os.environ.get("OUT") or Path(__file__).resolve().parent / "results"
    ways = detectors(args.device, [int(count) for count in args.decode_processes.split(",")])
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(args.videos or scratch)
        folder.mkdir(parents=True, exist_ok=True)
        videos = make_labelled_set(folder, range(args.first_seed, args.first_seed + args.seeds), kinds)
        first_video = videos[kinds[0]][0].path
        start_seconds = {}  # a first video with decode processes starts them
        for name, detect in ways.items():
            if name.endswith("_processes"):
                started = time.perf_counter()
                detect(first_video)
                start_seconds[name] = time.perf_counter() - started
        results = {
            "decode_processes_first_video_seconds": start_seconds,
            "labelled_set": {
                kind: [
                    {
                        "path": Path(v.path).name,
                        "frames": v.num_frames,
                        "events": [(e.kind, e.start, e.end) for e in v.events],
                    }
                    for v in group
                ]
                for kind, group in videos.items()
            },
            "cut_tolerance_frames": CUT_TOLERANCE,
            "device": args.device,
            "scenedetect": _scenedetect_version(),
            "vclip_device": vclip.VideoDecoder(first_video, device=args.device).device,
            "detectors": measure(videos, ways, repeats),
        }
        if args.accuracy_only:
            print_table(results, kinds)
            print(f"saved {save_results('scenes', results, out)}")
            return
        results["speed_large_video"] = speed_on_large_video(folder, ways, args.repeats)
        results["speed_long_video"] = speed_on_long_video(folder, ways, args.repeats, args.long_frames)
        save_results("scenes", results, out)  # kept if the folder runs below are cut short
        jobs = [int(count) for count in args.jobs.split(",")]
        labelled = [video for group in videos.values() for video in group]
        large = folder / f"speed_{SPEED_SIZE[0]}x{SPEED_SIZE[1]}.mp4"
        copies = []
        for number in range(args.copies):  # hard links: the same bytes under other names
            copy = folder / f"copy_{number:02d}_{large.name}"
            if not copy.exists():
                os.link(large, copy)
            copies.append(str(copy))
        large_frames = results["speed_large_video"]["video"]["frames"]
        results["folders"] = {
            "labelled_set": folder_throughput(
                [v.path for v in labelled], sum(v.num_frames for v in labelled), ways, jobs, args.repeats
            ),
            "720p_copies": folder_throughput(copies, large_frames * len(copies), ways, jobs, args.repeats),
        }
        for name, folder_result in results["folders"].items():
            print(name, {way: round(rate) for way, rate in folder_result["frames_per_second"].items()})
    print_table(results, kinds)
    print(f"saved {save_results('scenes', results, out)}")
    print(f"machine: {environment().get('gpu') or 'no GPU'}")


def print_table(results: dict, kinds: list[str]) -> None:
    """Precision and recall per class and detector, with the speeds that were measured."""
    speeds = [(title, results[key]["frames_per_second"]) for title, key in
              (("720p f/s", "speed_large_video"), ("long f/s", "speed_long_video")) if key in results]
    print(f"{'detector':<24}" + "".join(f"{kind:>18}" for kind in kinds) + f"{'frames/s':>10}"
          + "".join(f"{title:>10}" for title, _ in speeds))
    print(f"{'':<24}" + "".join(f"{'precision recall':>18}" for _ in kinds))
    for name, measured in results["detectors"].items():
        cells = "".join(f"{c['precision']:>10.2f}{c['recall']:>8.2f}" for c in measured["classes"].values())
        print(f"{name:<24}{cells}{measured['frames_per_second']:>10.0f}"
              + "".join(f"{rates[name]:>10.0f}" for _, rates in speeds))


if __name__ == "__main__":
    main()
