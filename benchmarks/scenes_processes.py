"""Shot detection over a folder on the GPU split over several processes: would more interpreters
(each with its own CUDA context and NVDEC sessions) feed NVDEC faster than one?

Over a folder of ``scenes_folder.py`` (largest videos first, each process taking every N-th),
each vclip run starts N fresh processes at once and is timed until the last one ends:

- ``boundaries_<N>x<T>``: ``find_shot_boundaries_many(share, device="cuda", workers=T)`` in each
  of N processes (each child's own seconds and first result are kept);
- ``decode_<N>x<T>``: ``VideoDecoder.get_frames`` of every frame of each video at 64 pixels
  across in T threads, no analysis: the most those processes feed NVDEC;
- ``pyscenedetect`` (run first): PySceneDetect's adaptive detector in a spawn pool of one process
  per core.

During each run the NVDEC utilisation (NVML, every 0.2 s, through ``common.GpuSampler``) and the
share of the machine's CPU time that was busy (``/proc/stat``) are sampled. Last, ``timeline``: one
fresh process over the folder, with the time at which its imports, CUDA context and each result
came, then the same call again in that process (the rate once everything is started).

    python benchmarks/scenes_processes.py [--out DIR] [--set 360p]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import GpuSampler, save_results
from scenes_folder import PYSCENEDETECT_CHILD, make_folder

BOUNDARIES_CHILD = r"""
import json, sys, time
started = time.perf_counter()
marks = {}
def mark(name):
    marks[name] = time.perf_counter() - started
import cupy
mark("import_cupy")
cupy.zeros(1)
mark("cuda_context")
from vclip import keyframes
mark("import_vclip")
paths, workers, again = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "again"
found = {}
for path, result in zip(paths, keyframes.find_shot_boundaries_many(paths, device="cuda", workers=workers)):
    found[path] = [0] + [boundary.frame for boundary in result]
    mark(f"result_{len(found)}")
marks["seconds"] = time.perf_counter() - started
if again:
    began = time.perf_counter()
    list(keyframes.find_shot_boundaries_many(paths, device="cuda", workers=workers))
    marks["second_call_seconds"] = time.perf_counter() - began
print(json.dumps({"marks": marks, "found": found}))
"""

DECODE_CHILD = r"""
import json, sys, time
started = time.perf_counter()
from concurrent.futures import ThreadPoolExecutor
import numpy as np
from vclip import VideoDecoder
paths, workers = json.loads(sys.argv[1]), int(sys.argv[2])
def decode(path):
    decoder = VideoDecoder(path, device="cuda")
    decoder.get_frames(np.arange(decoder.index.num_frames), scaling_factor=64 / decoder.index.width)
with ThreadPoolExecutor(workers) as pool:
    list(pool.map(decode, paths))
print(json.dumps({"marks": {"seconds": time.perf_counter() - started}, "found": {}}))
"""

RUNS = [("boundaries", 1, 8), ("boundaries", 2, 8), ("boundaries", 4, 4), ("decode", 1, 8), ("decode", 4, 4)]


def measured(run, *args, **options):
    """``run(*args, **options)``'s value, and NVDEC's utilisation (:class:`common.GpuSampler`, every 0.2 s) and the
    machine's busy CPU share while it ran."""
    cpu_at_start = _cpu_times()
    with GpuSampler([0], period=0.2, decoder=True) as gpu:
        value = run(*args, **options)
    total, idle = (end - start for end, start in zip(_cpu_times(), cpu_at_start))
    samples = gpu.decoder[0]
    return value, {"cpu_busy_share": 1 - idle / max(total, 1),
                   "nvdec_utilization_mean": sum(samples) / max(len(samples), 1),
                   "nvdec_utilization_max": max(samples, default=0)}


def _cpu_times() -> tuple[int, int]:
    """All and idle (idle + iowait) jiffies of the machine since boot."""
    with open("/proc/stat") as stat:
        fields = [int(field) for field in stat.readline().split()[1:]]
    return sum(fields), fields[3] + fields[4]


def run_processes(child: str, paths: list[str], processes: int, threads: int, environment: dict,
                  again: bool = False) -> tuple[float, list[dict]]:
    """Start ``processes`` children at once, each over every ``processes``-th path; wall seconds until
    the last one ends and what each printed (``again``: the boundaries child calls a second time)."""
    started = time.perf_counter()
    children = [subprocess.Popen([sys.executable, "-c", child, json.dumps(paths[k::processes]), str(threads),
                                  "again" if again else "once"],
                                 env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for k in range(processes)]
    printed = []
    for process in children:
        out, err = process.communicate(timeout=600)
        if process.returncode != 0:
            raise RuntimeError(err[-3000:])
        printed.append(json.loads(out.strip().splitlines()[-1]))
    return time.perf_counter() - started, printed


def _compare(results: dict, found: dict[str, dict], paths: list[str]) -> None:
    """Each run's speed over PySceneDetect's, and the videos where a run's boundaries differ from the first's."""
    pyscenedetect = results["runs"]["pyscenedetect"]["frames_per_second"]
    results["over_pyscenedetect"] = {name: run["frames_per_second"] / pyscenedetect
                                     for name, run in results["runs"].items()}
    first = next(iter(found.values()))
    results["runs_differ"] = {name: [path for path in paths if run[path] != first[path]]
                              for name, run in found.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None, help="folder for scenes_processes.json (default: $OUT or results/)")
    parser.add_argument("--set", default="360p", help="a folder of scenes_folder.py (default 360p)")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vclip-scenes-processes-") as scratch:
        videos = sorted(make_folder(Path(scratch) / arguments.set, arguments.set), key=lambda video: -video["frames"])
        paths = [video["path"] for video in videos]
        frames = sum(video["frames"] for video in videos)
        environment = {**os.environ, "CUPY_CACHE_DIR": str(Path(scratch) / "kernel-cache")}
        run_processes(BOUNDARIES_CHILD, paths[:1], 1, 1, environment)  # fill the kernel cache
        results: dict = {"set": arguments.set, "videos": len(paths), "frames": frames, "runs": {}}
        began = time.perf_counter()  # first: the runs below are compared with it as they come
        _, use = measured(subprocess.run, [sys.executable, "-c", PYSCENEDETECT_CHILD, json.dumps(paths),
                                           str(Path(__file__).resolve().parent)], capture_output=True, text=True,
                          check=True)
        seconds = time.perf_counter() - began
        results["runs"]["pyscenedetect"] = {"seconds": seconds, "frames_per_second": frames / seconds, **use}
        found: dict[str, dict] = {}
        for kind, processes, threads in RUNS:
            child = BOUNDARIES_CHILD if kind == "boundaries" else DECODE_CHILD
            (seconds, printed), use = measured(run_processes, child, paths, processes, threads, environment)
            name = f"{kind}_{processes}x{threads}"
            results["runs"][name] = {"seconds": seconds, "frames_per_second": frames / seconds,
                                     "children": [output["marks"] for output in printed], **use}
            if kind == "boundaries":
                found[name] = {path: boundaries for output in printed for path, boundaries in output["found"].items()}
            _compare(results, found, paths)
            print(name, json.dumps({key: value for key, value in results["runs"][name].items() if key != "children"}),
                  flush=True)
            save_results("scenes_processes", results, arguments.out)  # kept if a later run fails
        seconds, printed = run_processes(BOUNDARIES_CHILD, paths, 1, 8, environment, again=True)
        results["timeline"] = {"seconds": seconds, "marks": printed[0]["marks"]}
        print(json.dumps(results["over_pyscenedetect"]), json.dumps(results["timeline"]), flush=True)
        print(f"saved {save_results('scenes_processes', results, arguments.out)}")


if __name__ == "__main__":
    main()
