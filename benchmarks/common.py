"""Shared by the benchmarks: the video sets of design.md, machine facts, timing and JSON results."""

from __future__ import annotations

import json
import multiprocessing
import os
import platform
import statistics
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

# Runnable from a source checkout as `python benchmarks/<name>.py`.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vclip.synthetic import make_video  # noqa: E402

# design.md, "train" workload: H.264, 300 frames at 30 fps, keyframe every 60, 2 B-frames. x264's
# adaptive B-frame choice put no B-frames at all into this content at 1080p (0 of 60 frames), where
# design.md's set has about 42% non-reference B-frames; B-frames are forced (b-adapt=0), which gives
# about a third non-reference pictures and ~5 MB per 1080p file, the nearest match to that set.
VIDEO_SETS = {"360p": (64, 640, 360), "1080p": (16, 1920, 1080)}


# With audio (benchmarks/loader.py --audio): the same videos with an AAC track, 48 kHz stereo
# (what most MP4s of datasets such as Kinetics carry), of vclip.synthetic.audio_signal.
AUDIO_OPTIONS = {"audio_codec": "aac", "audio_sample_rate": 48000, "audio_channels": 2}


def _make_one(arguments):
    path, width, height, seed, audio = arguments
    if not Path(path).exists():
        make_video(
            path,
            num_frames=300,
            width=width,
            height=height,
            fps=30,
            keyframe_interval=60,
            b_frames=2,
            crf=23,
            preset="veryfast",
            adaptive_b_frames=False,
            seed=seed,
            **(AUDIO_OPTIONS if audio else {}),
        )
    return path


def make_video_set(
    folder: str | os.PathLike, name: str, workers: int | None = None, count: int | None = None, audio: bool = False
) -> list[str]:
    """The benchmark videos of set ``name`` ("360p" or "1080p"), generated once into ``folder``
    (the first ``count`` of them when given); with ``audio``, the same videos with an AAC track
    (:data:`AUDIO_OPTIONS`), in a folder of their own (``<name>_aac``)."""
    full_count, width, height = VIDEO_SETS[name]
    count = min(count or full_count, full_count)
    folder = Path(folder) / (f"{name}_aac" if audio else name)
    folder.mkdir(parents=True, exist_ok=True)
    jobs = [(str(folder / f"video_{i:03d}.mp4"), width, height, i, audio) for i in range(count)]
    # spawn, not fork: the caller may already hold CUDA state, which forked children must not inherit
    with ProcessPoolExecutor(workers or os.cpu_count(), mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(_make_one, jobs))


def _version(module: str) -> str | None:
    try:
        return __import__(module).__version__
    except Exception:
        return None


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as info:
            return next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or None


def environment() -> dict:
    """GPU, driver, CPU model, package versions and commit, for the JSON results."""
    facts = {
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "packages": {
            name: _version(name)
            for name in ("vclip", "numpy", "av", "torch", "cupy", "PyNvVideoCodec", "decord", "cv2", "spdl",
                         "scenedetect")
        },
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    try:
        facts["gpu"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        facts["gpu"] = None
    # VCLIP_COMMIT first: a copy of the checkout on another machine may carry no .git, or a stale one.
    facts["commit"] = os.environ.get("VCLIP_COMMIT")
    if not facts["commit"]:
        try:
            facts["commit"] = subprocess.run(
                ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True, cwd=Path(__file__).parent
            ).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            facts["commit"] = None
    return facts


def median_rate(run_once, units_per_run: float, repeats: int = 5, warmup: int = 1) -> dict:
    """Call ``run_once`` (which must synchronize any GPU work itself) and report units per second."""
    for _ in range(warmup):
        run_once()
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        run_once()
        seconds.append(time.perf_counter() - started)
    middle = statistics.median(seconds)
    return {"median_seconds": middle, "rate": units_per_run / middle, "runs_seconds": seconds}


def save_results(name: str, results: dict, folder: str | os.PathLike | None = None) -> Path:
    """Write ``results`` plus :func:`environment` to ``<folder>/<name>.json`` (default: $OUT or results/)."""
    folder = Path(folder or os.environ.get("OUT") or Path(__file__).resolve().parents[1] / "results")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text(json.dumps({"environment": environment(), **results}, indent=2, default=str))
    return path
