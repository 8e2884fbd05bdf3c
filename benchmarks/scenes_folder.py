"""Shot detection over folders, as a person who summarizes many videos runs it: vclip's command
against PySceneDetect's adaptive detector in a pool of one process per core.

Folders (generated here, :func:`vclip.synthetic.make_scene_video`, every class of transition in turn):

- ``360p``: 36 videos of 640x360 at 25 fps, H.264, 8-14 shots each (about 10-20 s);
- ``720p``: 16 videos of 1280x720 at 25 fps, 6 shots each;
- ``360p_x4``: the 36 videos of ``360p``, each copied 4 times under other names (144 files, 83,404
  frames): a longer run, where the start of the processes weighs less.

Per folder, each in a fresh process as a user's command starts:

- ``vclip keyframes --method scene`` with its defaults (``--out`` in a scratch folder): **cold**,
  CuPy's kernel cache empty (a fresh container), then **warm**, the cache the cold run filled;
- ``extract_keyframes_many(paths, method="scene", device="cuda")``, the API of the command without
  the images written: **warm**, with its defaults (threads of this process), then with
  ``decode_processes=4``, then with 4 threads (``workers=4``, against the default 8), each with the
  time of its first result;
- ``find_shot_boundaries_many(paths, device="cuda")``, the boundaries only (what PySceneDetect
  gives: no frame decoded at full size), **warm**, with its defaults, then with CPU decoders beside
  the GPU's threads (``cpu_decoders="auto"``, then 6), and with 4 threads;
- PySceneDetect (``AdaptiveDetector``, OpenCV backend, defaults), a spawn pool of one process per
  core over the files, pool start included.

Rates are frames/s of the whole run (wall time, from the process's start). ``found`` holds each API
run's frames found per video, and ``runs_differ`` the videos where they differ from the first run's.

    python benchmarks/scenes_folder.py [--out DIR] [--sets 360p,720p,360p_x4] [--runs vclip_cli,...]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from common import save_results

from vclip.synthetic import SCENE_VIDEO_CLASSES, make_scene_video

SETS = {  # name: (videos, width, height, shots of video k)
    "360p": (36, 640, 360, lambda k: 8 + k % 7),
    "720p": (16, 1280, 720, lambda k: 6),
}
COPIED_SETS = {"360p_x4": ("360p", 4)}  # name: (the set copied, copies of each video)

API_CHILD = r"""
import json, sys, time
started = time.perf_counter()
from vclip import keyframes
paths, function, options = json.loads(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
found, first = {}, None
for path, result in zip(paths, getattr(keyframes, function)(paths, device="cuda", **options)):
    first = time.perf_counter() - started if first is None else first
    found[path] = ([0] + [boundary.frame for boundary in result] if isinstance(result, list)
                   else result.frame_indices.tolist())
print(json.dumps({"seconds": time.perf_counter() - started, "first_result_seconds": first, "found": found}))
"""
API_RUNS = {"vclip_api_warm": ("extract_keyframes_many", {"method": "scene"}),
            "vclip_api_warm_4_processes": ("extract_keyframes_many", {"method": "scene", "decode_processes": 4}),
            "vclip_api_warm_4_workers": ("extract_keyframes_many", {"method": "scene", "workers": 4}),
            "vclip_boundaries_warm": ("find_shot_boundaries_many", {}),
            "vclip_boundaries_warm_4_workers": ("find_shot_boundaries_many", {"workers": 4}),
            "vclip_boundaries_warm_auto_cpu_decoders": ("find_shot_boundaries_many", {"cpu_decoders": "auto"}),
            "vclip_boundaries_warm_6_cpu_decoders": ("find_shot_boundaries_many", {"cpu_decoders": 6})}
"""Runs of the API: extract_keyframes_many's defaults, then 4 decode processes, then 4 threads (not 8);
find_shot_boundaries_many's defaults, then 4 threads, then CPU decoders beside the GPU's threads ("auto", 6)."""
RUNS = ("vclip_cli", *API_RUNS, "pyscenedetect")

PYSCENEDETECT_CHILD = r"""
import json, multiprocessing, os, sys, time
started = time.perf_counter()
from concurrent.futures import ProcessPoolExecutor
sys.path.insert(0, sys.argv[2])
from scenes import detect_pyscenedetect
from functools import partial
paths = json.loads(sys.argv[1])
if __name__ == "__main__":
    with ProcessPoolExecutor(os.cpu_count(), mp_context=multiprocessing.get_context("spawn")) as pool:
        found = list(pool.map(partial(detect_pyscenedetect, detector_name="adaptive"), paths))
    print(json.dumps({"seconds": time.perf_counter() - started, "found": dict(zip(paths, found))}))
"""


def _make(arguments) -> dict:
    path, kind, shots, width, height, seed = arguments
    video = make_scene_video(path, kind, num_shots=shots, width=width, height=height, seed=seed)
    return {"path": video.path, "frames": video.num_frames, "kind": kind,
            "boundaries": [(event.kind, event.start, event.end) for event in video.boundaries]}


def make_folder(folder: Path, name: str) -> list[dict]:
    count, width, height, shots = SETS[name]
    folder.mkdir(parents=True, exist_ok=True)
    kinds = list(SCENE_VIDEO_CLASSES)
    jobs = [(str(folder / f"{name}_{k:02d}.mp4"), kinds[k % len(kinds)], shots(k), width, height, 200 + k)
            for k in range(count)]
    with ProcessPoolExecutor(os.cpu_count()) as pool:
        return list(pool.map(_make, jobs))


def copy_folder(videos: list[dict], folder: Path, copies: int) -> list[dict]:
    """Each of ``videos`` copied ``copies`` times into ``folder`` under names of its own (a file,
    not a link: nothing cached about one copy serves another)."""
    folder.mkdir(parents=True, exist_ok=True)
    copied = []
    for copy in range(copies):
        for video in videos:
            path = folder / f"{Path(video['path']).stem}_copy{copy}.mp4"
            shutil.copyfile(video["path"], path)
            copied.append({**video, "path": str(path)})
    return copied


def run_child(command: list[str], environment: dict) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=900, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{command[:4]}: {done.stderr[-3000:]}")
    return seconds, done.stdout


def measure_folder(name: str, videos: list[dict], scratch: Path, runs: list[str]) -> dict:
    width, height = SETS[COPIED_SETS[name][0] if name in COPIED_SETS else name][1:3]
    paths = [video["path"] for video in videos]
    frames = sum(video["frames"] for video in videos)
    cache = Path(tempfile.mkdtemp(prefix="cupy-", dir=scratch))
    environment = {**os.environ, "CUPY_CACHE_DIR": str(cache)}
    seconds: dict[str, float] = {}
    for run in ("cold", "warm") if "vclip_cli" in runs else ():
        out = scratch / f"keyframes-{name}-{run}"
        spent, _ = run_child([sys.executable, "-m", "vclip", "keyframes", "--method", "scene", "--device", "cuda",
                              "--no-progress", "--out", str(out), *paths], environment)
        seconds[f"vclip_cli_{run}"] = spent
        manifest = json.loads((out / "manifest.json").read_text())
        if manifest["errors"] or len(manifest["videos"]) != len(paths):
            raise RuntimeError(f"vclip keyframes failed: {manifest['errors'][:3]}")
    first_result: dict[str, float] = {}
    found: dict[str, dict] = {}
    for run, (function, options) in API_RUNS.items():
        if run not in runs:
            continue
        if "vclip_cli_warm" not in seconds and not first_result:  # fill the kernel cache: every API run is warm
            run_child([sys.executable, "-c", API_CHILD, json.dumps(paths[:1]), function, json.dumps(options)],
                      environment)
        spent, printed = run_child([sys.executable, "-c", API_CHILD, json.dumps(paths), function,
                                    json.dumps(options)], environment)
        seconds[run] = spent
        reported = json.loads(printed.strip().splitlines()[-1])
        first_result[run] = reported["first_result_seconds"]
        found[run] = reported["found"]
    try:
        if "pyscenedetect" not in runs:
            raise ImportError
        import scenedetect  # noqa: F401
    except ImportError:
        found_pyscenedetect = None
    else:
        spent, printed = run_child([sys.executable, "-c", PYSCENEDETECT_CHILD, json.dumps(paths),
                                    str(Path(__file__).resolve().parent)], dict(os.environ))
        seconds[f"pyscenedetect_adaptive_x{os.cpu_count()}_processes"] = spent
        found_pyscenedetect = json.loads(printed.strip().splitlines()[-1])["found"]
    rates = {tool: frames / spent for tool, spent in seconds.items()}
    first_run = next(iter(found.values()), {})
    result = {"videos": len(paths), "frames": frames, "width": width, "height": height,
              "seconds": seconds, "frames_per_second": rates,
              "cold_minus_warm_seconds": (seconds["vclip_cli_cold"] - seconds["vclip_cli_warm"]
                                          if "vclip_cli_cold" in seconds else None),
              "first_result_seconds": first_result,
              "found": {**found, "pyscenedetect_adaptive": found_pyscenedetect},
              "runs_differ": {run: [path for path in paths if run_found[path] != first_run[path]]
                              for run, run_found in found.items()}}
    pyscenedetect = next((rate for tool, rate in rates.items() if tool.startswith("pyscenedetect")), None)
    if pyscenedetect:
        result["vclip_over_pyscenedetect"] = {tool: rate / pyscenedetect for tool, rate in rates.items()
                                              if tool.startswith("vclip")}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None, help="folder for scenes_folder.json (default: $OUT or results/)")
    parser.add_argument("--sets", default=",".join(SETS),
                        help=f"folders to measure, of {', '.join([*SETS, *COPIED_SETS])} (default {','.join(SETS)})")
    parser.add_argument("--runs", default=",".join(RUNS), help=f"what to run (default {','.join(RUNS)})")
    arguments = parser.parse_args()
    runs, sets = arguments.runs.split(","), arguments.sets.split(",")
    if set(runs) - set(RUNS):
        parser.error(f"unknown runs {sorted(set(runs) - set(RUNS))}; choose from {', '.join(RUNS)}")
    if set(sets) - set(SETS) - set(COPIED_SETS):
        parser.error(f"unknown sets {sorted(set(sets) - set(SETS) - set(COPIED_SETS))}")
    results: dict[str, dict] = {}
    made: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="vclip-scenes-folder-") as scratch:
        for name in sets:
            base, copies = COPIED_SETS.get(name, (name, 1))
            if base not in made:
                made[base] = make_folder(Path(scratch) / base, base)
            videos = made[base] if copies == 1 else copy_folder(made[base], Path(scratch) / name, copies)
            results[name] = measure_folder(name, videos, Path(scratch), runs)
            results[name]["labels"] = {Path(video["path"]).name: video for video in videos}
            print(name, json.dumps({tool: round(rate) for tool, rate in results[name]["frames_per_second"].items()}),
                  flush=True)
            saved = save_results("scenes_folder", {"sets": results}, arguments.out)  # kept if a later set fails
    print(f"saved {saved}")


if __name__ == "__main__":
    main()
