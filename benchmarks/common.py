"""Shared by the benchmarks: the video sets of design.md, machine facts, GPU figures through NVML, timing and
JSON results."""

from __future__ import annotations

import json
import multiprocessing
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

# Runnable from a source checkout as `python benchmarks/<name>.py`.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vclip.synthetic import make_video  # noqa: E402


@dataclass(frozen=True)
class VideoSet:
    """A benchmark video set: ``count`` videos of ``frames`` frames at 30 fps, ``width`` x ``height``,
    encoded by ``codec`` with a keyframe every ``keyframe_interval`` frames and 2 B-frames."""

    count: int
    width: int
    height: int
    frames: int = 300
    codec: str = "libx264"
    keyframe_interval: int = 60


# design.md, "train" workload: H.264, 300 frames at 30 fps, keyframe every 60, 2 B-frames. x264's
# adaptive B-frame choice put no B-frames at all into this content at 1080p (0 of 60 frames), where
# design.md's set has about 42% non-reference B-frames; B-frames are forced (b-adapt=0), which gives
# about a third non-reference pictures and ~5 MB per 1080p file, the nearest match to that set.
# The long-GOP sets are the web-video case (a keyframe every 250 frames, as
# benchmarks/long_gop.py makes it) at 1280x720, in H.264 and in HEVC (x265 places its B-frames
# itself: make_video's b-adapt=0 is an x264 option); 500 frames give each video two whole GOPs.
VIDEO_SETS = {
    "360p": VideoSet(64, 640, 360),
    "1080p": VideoSet(16, 1920, 1080),
    "720p-h264-gop250": VideoSet(16, 1280, 720, frames=500, keyframe_interval=250),
    "720p-hevc-gop250": VideoSet(16, 1280, 720, frames=500, codec="libx265", keyframe_interval=250),
}


# With audio (benchmarks/loader.py --audio): the same videos with an AAC track, 48 kHz stereo
# (what most MP4s of datasets such as Kinetics carry), of vclip.synthetic.audio_signal.
AUDIO_OPTIONS = {"audio_codec": "aac", "audio_sample_rate": 48000, "audio_channels": 2}


def _make_one(arguments):
    path, spec, seed, audio = arguments
    if not Path(path).exists():
        make_video(
            path,
            num_frames=spec.frames,
            width=spec.width,
            height=spec.height,
            fps=30,
            codec=spec.codec,
            keyframe_interval=spec.keyframe_interval,
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
    """The benchmark videos of set ``name`` (a key of :data:`VIDEO_SETS`: "360p", "1080p",
    "720p-h264-gop250", "720p-hevc-gop250"), generated once into ``folder`` (the first ``count`` of
    them when given); with ``audio``, the same videos with an AAC track (:data:`AUDIO_OPTIONS`), in
    a folder of their own (``<name>_aac``)."""
    if name not in VIDEO_SETS:
        raise ValueError(f"video set {name!r} is not one of {', '.join(VIDEO_SETS)}")
    spec = VIDEO_SETS[name]
    count = min(count or spec.count, spec.count)
    folder = Path(folder) / (f"{name}_aac" if audio else name)
    folder.mkdir(parents=True, exist_ok=True)
    jobs = [(str(folder / f"video_{i:03d}.mp4"), spec, i, audio) for i in range(count)]
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


# -- GPU figures through NVML -------------------------------------------------------------------------
class Nvml:
    """What NVML says of the GPUs, through ``pynvml`` (nvidia-ml-py, which CUDA builds of torch
    bring); without it, or without a driver, nothing: ``available`` False and every figure None, so
    a machine without a GPU runs the benchmarks' CPU paths.

    GPUs are numbered as NVML (and nvidia-smi) numbers them, whatever ``CUDA_VISIBLE_DEVICES`` says.
    """

    def __init__(self) -> None:
        self._pynvml = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._pynvml = pynvml
        except Exception:  # not installed, or no driver under it
            pass

    @property
    def available(self) -> bool:
        return self._pynvml is not None

    def _ask(self, question, gpu: int | None = None):
        """``question(pynvml, handle of gpu)`` (or ``question(pynvml)``), None where NVML cannot answer."""
        if self._pynvml is None:
            return None
        try:
            if gpu is None:
                return question(self._pynvml)
            return question(self._pynvml, self._pynvml.nvmlDeviceGetHandleByIndex(gpu))
        except self._pynvml.NVMLError:
            return None

    def device_count(self) -> int:
        """GPUs NVML sees (0 without NVML)."""
        return self._ask(lambda nv: int(nv.nvmlDeviceGetCount())) or 0

    def memory_used(self, gpu: int = 0) -> int | None:
        """Used memory of the whole device ``gpu`` in bytes (every process's, as nvidia-smi counts
        it), or None."""
        return self._ask(lambda nv, handle: int(nv.nvmlDeviceGetMemoryInfo(handle).used), gpu)

    def sm_utilization(self, gpu: int = 0) -> int | None:
        """Share of NVML's last sampling period in which a kernel ran on ``gpu``, in percent, or None."""
        return self._ask(lambda nv, handle: int(nv.nvmlDeviceGetUtilizationRates(handle).gpu), gpu)

    def decoder_utilization(self, gpu: int = 0) -> int | None:
        """NVDEC utilisation of ``gpu`` over NVML's last sampling period, in percent, or None."""
        return self._ask(lambda nv, handle: int(nv.nvmlDeviceGetDecoderUtilization(handle)[0]), gpu)


_nvml: Nvml | None = None
_nvml_lock = threading.Lock()


def nvml() -> Nvml:
    """This process's :class:`Nvml`, initialised on first use."""
    global _nvml
    with _nvml_lock:
        if _nvml is None:
            _nvml = Nvml()
        return _nvml


class GpuSampler:
    """GPU figures sampled through NVML by a background thread, from ``__enter__`` to ``__exit__``:
    each GPU's used memory (the whole device, every process, as nvidia-smi shows it: nothing
    subtracted) before and at its peak, and with ``decoder`` the NVDEC utilisation samples. Without
    NVML every figure is None and no thread runs.

    Attributes:
        gpus: The GPUs sampled (NVML numbers; default: all).
        baseline: Used bytes of each GPU at ``__enter__``.
        peak: The largest used bytes of each GPU seen from ``__enter__`` to ``__exit__`` (both included).
        decoder: NVDEC utilisation samples of each GPU, in percent (with ``decoder``).
    """

    def __init__(self, gpus: list[int] | None = None, *, period: float = 0.02, decoder: bool = False):
        self._nvml = nvml()
        self.gpus = list(range(self._nvml.device_count())) if gpus is None else list(gpus)
        self.period = period
        self._sample_decoder = decoder
        self.baseline: list[int | None] = [None] * len(self.gpus)
        self.peak: list[int | None] = [None] * len(self.gpus)
        self.decoder: list[list[int]] = [[] for _ in self.gpus]
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self, decoder: bool) -> None:
        for number, gpu in enumerate(self.gpus):
            used = self._nvml.memory_used(gpu)
            if used is not None:
                peak = self.peak[number]
                self.peak[number] = used if peak is None else max(peak, used)
            if decoder:
                utilization = self._nvml.decoder_utilization(gpu)
                if utilization is not None:
                    self.decoder[number].append(utilization)

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self._sample(self._sample_decoder)

    def __enter__(self) -> GpuSampler:
        self.baseline = [self._nvml.memory_used(gpu) for gpu in self.gpus]
        self.peak = list(self.baseline)
        if self._nvml.available and self.gpus:
            self._thread = threading.Thread(target=self._run, name="gpu-sampler", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *_) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._sample(decoder=False)


def tool_options(tool: str) -> dict[str, object]:
    """The options of a tool named ``NAME:KEY=VALUE+KEY=VALUE`` (integers where they parse)."""
    options: dict[str, object] = {}
    for item in tool.partition(":")[2].split("+"):
        if item:
            key, _, text = item.partition("=")
            try:
                options[key] = int(text)
            except ValueError:
                options[key] = text
    return options


def in_fresh_process(function, *args, **options):
    """``function(*args, **options)`` in a new (spawned) process: the CUDA context and all the memory
    of what it runs are its own, not those of this process (which holds what ran before)."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(function, *args, **options).result()


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


def tree_cpu_seconds(root: int) -> float:
    """CPU time (user + system) of process ``root`` and all its descendants alive now, from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    parents, times = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        times[int(entry)] = (int(fields[11]) + int(fields[12])) / tick
    total, family = 0.0, {root}
    changed = True
    while changed:
        changed = False
        for pid, parent in parents.items():
            if parent in family and pid not in family:
                family.add(pid)
                changed = True
    for pid in family:
        total += times.get(pid, 0.0)
    return total
