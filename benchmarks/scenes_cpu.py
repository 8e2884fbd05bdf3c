"""Shot boundaries on the CPU: vclip's scene method against PySceneDetect on the same cores.

``--count`` videos (12 by default) of :func:`vclip.synthetic.make_scene_video` at ``--size``
(640x360 by default; a size whose width is no whole multiple of the analysis width, 64, takes the
twin's general resampling instead of whole blocks: 854x480, 720x480, 480x270), 25 fps,
H.264, 7 shots each (7-20 s; the classes of SCENE_VIDEO_CLASSES in turn, seeds
from 200), generated here. Detectors:
``find_shot_boundaries(path, device="cpu")`` with its defaults, and PySceneDetect's
``ContentDetector`` and ``AdaptiveDetector`` with theirs (OpenCV backend). Speed is frames per
second of the whole job per file (open, index, decode, detect), the median of ``--repeats``
passes after a warm-up pass; within a pass the detectors take turns (in a rotating order), so a
machine whose speed drifts weighs on all of them alike:

- **one video at a time**: the videos one after another in this process;
- **the folder with all cores**: ``--workers`` videos at once (default: one per usable core),
  each detector in a pool of that many spawned processes started before the timing, and
  vclip's own folder job, ``extract_keyframes_many(paths, method="scene", device="cpu",
  workers=N)`` (what ``vclip keyframes --method scene --workers N`` runs: it starts its processes
  in the timed call, and also decodes each shot's keyframe at full size), and
  ``find_shot_boundaries_many(paths, device="cpu", workers=N)``, the boundaries only, likewise.

vclip's in-memory index cache is cleared before each video, so every pass indexes the files anew,
as PySceneDetect opens them anew. Precision and recall of each detector on these videos are saved
with the speeds (a cut found within 2 frames, a gradual transition within its span).

    python benchmarks/scenes_cpu.py [--out DIR] [--videos DIR] [--count 12] [--repeats 3] [--workers N]
                                    [--size 640x360] [--name scenes_cpu]

PySceneDetect is not a dependency of vclip: ``pip install scenedetect opencv-python-headless``
(or the ``bench`` extra).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from common import save_results
from scenes import CUT_TOLERANCE, detect_pyscenedetect

import vclip
from vclip._machine import usable_cores
from vclip.keyframes import extract_keyframes_many, find_shot_boundaries, find_shot_boundaries_many
from vclip.synthetic import SCENE_VIDEO_CLASSES, SceneVideo, make_scene_video

SHOTS = 7
FIRST_SEED = 200


def detect_vclip(path: str) -> list[int]:
    vclip.clear_index_cache()
    return [boundary.frame for boundary in find_shot_boundaries(path, device="cpu")]


def detect_content(path: str) -> list[int]:
    return detect_pyscenedetect(path, "content")


def detect_adaptive(path: str) -> list[int]:
    return detect_pyscenedetect(path, "adaptive")


DETECTORS = {"vclip_cpu": detect_vclip, "pyscenedetect_content": detect_content,
             "pyscenedetect_adaptive": detect_adaptive}


def _make_one(arguments: tuple[str, int, tuple[int, int]]) -> SceneVideo:
    path, number, (width, height) = arguments
    kind = SCENE_VIDEO_CLASSES[number % len(SCENE_VIDEO_CLASSES)]
    return make_scene_video(path, kind, num_shots=SHOTS, width=width, height=height, seed=FIRST_SEED + number)


def make_folder(folder: Path, count: int, size: tuple[int, int]) -> list[SceneVideo]:
    """The benchmark's videos, made in parallel (each is rendered again: its labels come with it)."""
    jobs = [(str(folder / f"{number:02d}_{SCENE_VIDEO_CLASSES[number % len(SCENE_VIDEO_CLASSES)]}_{size[0]}x{size[1]}"
                          ".mp4"), number, size) for number in range(count)]
    with ProcessPoolExecutor(usable_cores(), mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(_make_one, jobs))


def scores(videos: list[SceneVideo], found: list[list[int]]) -> dict:
    counts = {"true": 0, "missed": 0, "false": 0}
    for video, detections in zip(videos, found):
        for key, value in video.score(detections, cut_tolerance=CUT_TOLERANCE).items():
            counts[key] += value
    detected = counts["true"] + counts["false"]
    return {**counts, "precision": counts["true"] / detected if detected else 1.0,
            "recall": counts["true"] / (counts["true"] + counts["missed"]), "detections": found}


def in_turns(runs: dict, repeats: int) -> dict[str, list[float]]:
    """Seconds of each run (name -> callable), ``repeats`` passes after a warm-up, in a rotating order."""
    names = list(runs)
    seconds: dict[str, list[float]] = {name: [] for name in names}
    for number in range(repeats + 1):
        for name in names[number % len(names):] + names[:number % len(names)]:
            started = time.perf_counter()
            runs[name]()
            if number:
                seconds[name].append(time.perf_counter() - started)
    return seconds


def rates(frames: int, seconds: dict[str, list[float]]) -> dict:
    return {name: {"frames_per_second": frames / statistics.median(runs), "seconds": runs}
            for name, runs in seconds.items()}


def vclip_folder_job(job, paths: list[str], workers: int, **options) -> None:
    for found in job(paths, device="cpu", workers=workers, **options):
        if isinstance(found, vclip.VideoError):
            raise found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="folder for scenes_cpu.json (default: $OUT or benchmarks/results/)")
    parser.add_argument("--videos", help="folder to keep the generated videos in (default: a temporary folder)")
    parser.add_argument("--count", type=int, default=12, help="videos (default 12)")
    parser.add_argument("--repeats", type=int, default=3, help="timed passes (default 3)")
    parser.add_argument("--workers", type=int, default=usable_cores(), help="videos at once (default: usable cores)")
    parser.add_argument("--size", default="640x360", help="width x height of the videos (default 640x360)")
    parser.add_argument("--name", default="scenes_cpu", help="name of the JSON file (default scenes_cpu)")
    args = parser.parse_args()
    size = tuple(int(side) for side in args.size.split("x"))
    out = args.out or os.environ.get("OUT") or Path(__file__).resolve().parent / "results"
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(args.videos or scratch)
        folder.mkdir(parents=True, exist_ok=True)
        videos = make_folder(folder, args.count, size)
        paths = [video.path for video in videos]
        frames = sum(video.num_frames for video in videos)
        found: dict[str, list[list[int]]] = {}

        def one_at_a_time(name):
            def run():
                found[name] = [DETECTORS[name](path) for path in paths]
            return run

        single = in_turns({name: one_at_a_time(name) for name in DETECTORS}, args.repeats)
        context = multiprocessing.get_context("spawn")
        pools = {name: ProcessPoolExecutor(args.workers, mp_context=context) for name in DETECTORS}
        try:
            folder_runs = {f"{name} x{args.workers} processes": (lambda pool=pool, detect=DETECTORS[name]:
                                                                  list(pool.map(detect, paths)))
                           for name, pool in pools.items()}
            folder_runs[f"vclip extract_keyframes_many x{args.workers} (processes started in the call)"] = (
                lambda: vclip_folder_job(extract_keyframes_many, paths, args.workers, method="scene"))
            folder_runs[f"vclip find_shot_boundaries_many x{args.workers} (processes started in the call)"] = (
                lambda: vclip_folder_job(find_shot_boundaries_many, paths, args.workers))
            together = in_turns(folder_runs, args.repeats)
        finally:
            for pool in pools.values():
                pool.shutdown()
    results = {
        "videos": {"count": len(videos), "width": size[0], "height": size[1], "fps": 25, "frames": frames,
                   "shots_per_video": SHOTS, "seeds": [FIRST_SEED, FIRST_SEED + len(videos) - 1],
                   "events": [[(e.kind, e.start, e.end) for e in video.events] for video in videos]},
        "cut_tolerance_frames": CUT_TOLERANCE,
        "workers": args.workers,
        "usable_cores": usable_cores(),
        "accuracy": {name: scores(videos, detections) for name, detections in found.items()},
        "one_video_at_a_time": rates(frames, single),
        "folder": rates(frames, together),
    }
    print(f"{len(videos)} videos, {frames} frames at {size[0]}x{size[1]}; frames/s (median of {args.repeats}):")
    for part in ("one_video_at_a_time", "folder"):
        for name, measured in results[part].items():
            print(f"  {part:<20} {name:<72} {measured['frames_per_second']:>7.0f}")
    for name, measured in results["accuracy"].items():
        print(f"  accuracy {name:<24} precision {measured['precision']:.2f} recall {measured['recall']:.2f}")
    print(f"saved {save_results(args.name, results, out)}")


if __name__ == "__main__":
    main()
