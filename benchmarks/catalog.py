"""The dataset catalog: loader start over 10,000 small videos, cold and from a catalog; catalog size
per hour of video; ``vclip index`` throughput with every core and with a local Ray.

Set: 10,000 H.264 videos of 32x32, 8 frames at 30 fps, in 10 class folders (100 encoded once,
then copied; the copies are distinct files), generated once into ``--videos``. Each timing runs in
a fresh process, so no in-memory index cache is warm (the OS page cache is: this is the best case
for the cold start; on a network file system cold is far slower, the catalog is not).

- **cold**: ``ClipLoader(folder, contiguous(4), batch_size=8, device="cpu")`` to its first batch:
  the loader indexes every video (a full demux pass each) before the first batch.
- **catalog**: ``read_catalog`` plus every entry's ``VideoIndex`` built from the stored arrays
  (what a loader's scan needs), with a count of the video files opened (must be 0); then
  ``ClipLoader(catalog.parquet, ...)`` to its first batch, counting the video files opened during
  construction (must be 0) and before the first batch (only the clips' own videos).
- **size**: catalog bytes per hour of 30 fps video, for 10-second clips (Kinetics-like) and for
  100-second videos, 160x90, keyframe every 60 frames, 2 B-frames.
- **throughput**: ``build_catalog`` over the 10,000 videos with every core (processes), and on a
  local Ray with as many CPUs (``--ray``), from scratch (``incremental=False``), in videos/s;
  then an incremental re-run that finds nothing changed.

    python benchmarks/catalog.py --out benchmarks/results/ [--videos /tmp/vclip-catalog-bench] [--no-ray]
"""

from __future__ import annotations

import argparse
import builtins
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from common import save_results

import vclip
from vclip.synthetic import make_video

CLASSES, DISTINCT, TOTAL = 10, 100, 10_000
BATCH, LENGTH = 8, 4


def _encode(arguments) -> str:
    path, options = arguments
    if not Path(path).exists():
        make_video(path, **options)
    return path


def _pool_map(function, jobs):
    with ProcessPoolExecutor(os.cpu_count(), mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(function, jobs, chunksize=4))


def make_small_set(folder: Path, total: int = TOTAL) -> Path:
    """``total`` videos of 32x32, 8 frames, in ``CLASSES`` class folders (made once)."""
    root = folder / f"small_{total}"
    done = root / ".complete"
    if done.exists():
        return root
    sources = folder / "small_sources"
    sources.mkdir(parents=True, exist_ok=True)
    originals = _pool_map(
        _encode,
        [
            (
                str(sources / f"source_{i:03d}.mp4"),
                dict(num_frames=8, width=32, height=32, keyframe_interval=4, b_frames=1, seed=i),
            )
            for i in range(DISTINCT)
        ],
    )
    for number in range(total):
        target = root / f"class_{number % CLASSES:02d}" / f"video_{number:05d}.mp4"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(originals[number % DISTINCT], target)
    done.write_text("ok")
    return root


def make_hour_sets(folder: Path) -> dict[str, list[str]]:
    """Ten minutes of 30 fps video each: 60 clips of 10 s, and 6 videos of 100 s."""
    sets = {"10s_clips": (60, 300), "100s_videos": (6, 3000)}
    made = {}
    for name, (count, frames) in sets.items():
        (folder / name).mkdir(parents=True, exist_ok=True)
        made[name] = _pool_map(
            _encode,
            [
                (
                    str(folder / name / f"v{i:03d}.mp4"),
                    dict(num_frames=frames, width=160, height=90, keyframe_interval=60, b_frames=2, seed=i),
                )
                for i in range(count)
            ],
        )
    return made


# -- measurements, each run in a fresh process ------------------------------------------------
class OpenCounter:
    """Counts the distinct files under ``root`` opened (Python's open, os.open, PyAV's av.open)."""

    def __init__(self, root: str):
        import av

        self.root, self.files, self._av = os.path.realpath(root), set(), av
        self._saved = (builtins.open, os.open, av.open)

    @property
    def count(self) -> int:
        return len(self.files)

    def _wrap(self, function):
        def counted(file, *args, **kwargs):
            if isinstance(file, (str, os.PathLike)):
                path = os.path.realpath(os.fspath(file))
                if path.startswith(self.root):
                    self.files.add(path)
            return function(file, *args, **kwargs)

        return counted

    def __enter__(self):
        builtins.open, os.open, self._av.open = (self._wrap(f) for f in self._saved)
        return self

    def __exit__(self, *exc):
        builtins.open, os.open, self._av.open = self._saved


def _first_batch(videos, root: str) -> dict:
    from vclip import loader  # noqa: F401 (torch: imported before the clock starts, cold or not)
    from vclip.synthetic import read_barcode

    started = time.perf_counter()
    with OpenCounter(root) as opens:
        loader = vclip.ClipLoader(videos, vclip.contiguous(LENGTH), batch_size=BATCH, device="cpu", seed=0)
        constructed = time.perf_counter()
        opened_at_construction = opens.count
        batch = next(iter(loader))
        first = time.perf_counter()
    frames = batch.frame_indices.numpy()
    clips = batch.data.numpy()
    exact = all(
        read_barcode(frame) == int(index) for clip, indices in zip(clips, frames) for frame, index in zip(clip, indices)
    )
    loader.close()
    return {
        "construct_seconds": constructed - started,
        "first_batch_seconds": first - started,
        "files_opened_during_construction": opened_at_construction,
        "files_opened_before_first_batch": opens.count,
        "frames_exact": exact,
        "videos": len(loader.videos),
    }


def measure_cold(root: str) -> dict:
    return _first_batch(root, root)


def measure_catalog(catalog_path: str, root: str) -> dict:
    started = time.perf_counter()
    from vclip import catalog as vcatalog  # imports pyarrow

    import_seconds = time.perf_counter() - started
    started = time.perf_counter()
    with OpenCounter(root) as opens:
        catalog = vcatalog.read_catalog(catalog_path)
        read = time.perf_counter()
        sources = list(catalog.sources())
        indexes = [index() for _, _, index in sources]
        built = time.perf_counter()
    result = {
        "import_pyarrow_seconds": import_seconds,
        "read_seconds": read - started,
        "all_indexes_seconds": built - read,
        "read_and_indexes_seconds": built - started,
        "videos": len(indexes),
        "frames": int(sum(index.num_frames for index in indexes)),
        "files_opened": opens.count,
    }
    result["loader_from_catalog"] = _first_batch(catalog_path, root)
    return result


def measure_build(root: str, out: str, mode: str, workers: int) -> dict:
    from vclip.catalog import build_catalog

    if mode == "ray":
        import ray

        started = time.perf_counter()
        ray.init(num_cpus=workers, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
        init_seconds = time.perf_counter() - started
    built = build_catalog(root, out, workers=workers, incremental=False, ray=mode == "ray", progress=False)
    again = build_catalog(root, out, workers=workers, ray=mode == "ray", progress=False)
    result = {
        "mode": mode,
        "workers": workers,
        "videos": built.videos,
        "seconds": built.seconds,
        "videos_per_second": built.videos / built.seconds,
        "unusable": len(built.unusable),
        "incremental_rerun_seconds": again.seconds,
        "incremental_rerun_indexed": len(again.indexed),
        "catalog_bytes": os.path.getsize(out),
    }
    if mode == "ray":
        result["ray_init_seconds"] = init_seconds
    return result


def measure_size(paths: list[str], out: str) -> dict:
    from vclip.catalog import build_catalog, read_catalog

    build_catalog(paths, out, incremental=False, progress=False)
    table = read_catalog(out).to_table(["duration_seconds", "num_frames", "size_bytes"])
    hours = sum(table.column("duration_seconds").to_pylist()) / 3600
    size = os.path.getsize(out)
    return {
        "videos": table.num_rows,
        "frames": sum(table.column("num_frames").to_pylist()),
        "hours": hours,
        "catalog_bytes": size,
        "bytes_per_hour": size / hours,
        "bytes_per_frame": size / (hours * 3600 * 30),
        "video_bytes": sum(table.column("size_bytes").to_pylist()),
    }


def _in_fresh_process(name: str, *args) -> dict:
    """Run ``measure_<name>(*args)`` in a new interpreter; its JSON result."""
    import json

    code = (
        f"import sys, json; sys.path[:0] = {[str(Path(__file__).parent), str(Path(__file__).parents[1])]!r}; "
        f"import catalog as bench; print('RESULT' + json.dumps(bench.measure_{name}(*{list(args)!r})))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    line = next((line for line in done.stdout.splitlines() if line.startswith("RESULT")), None)
    if done.returncode or line is None:
        raise RuntimeError(f"measure_{name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return json.loads(line[len("RESULT") :])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder for catalog.json")
    parser.add_argument(
        "--videos",
        default=os.path.join(tempfile.gettempdir(), "vclip-catalog-bench"),
        help="folder for the generated videos (kept between runs)",
    )
    parser.add_argument("--total", type=int, default=TOTAL, help=f"small videos (default {TOTAL})")
    parser.add_argument("--no-ray", action="store_true", help="skip the local Ray throughput")
    parser.add_argument("--repeats", type=int, default=5, help="fresh-process runs of cold and catalog (median)")
    args = parser.parse_args()
    folder = Path(args.videos)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    started = time.perf_counter()
    root = str(make_small_set(folder, args.total))
    hour_sets = make_hour_sets(folder)
    print(f"videos ready in {time.perf_counter() - started:.1f} s", flush=True)
    work = Path(tempfile.mkdtemp(prefix="vclip-catalog-"))
    results: dict = {
        "set": {"videos": args.total, "width": 32, "height": 32, "frames": 8, "classes": CLASSES},
        "cores": cores,
    }

    results["build_processes"] = _in_fresh_process("build", root, str(work / "small.parquet"), "processes", cores)
    print("build (processes):", results["build_processes"], flush=True)
    if not args.no_ray:
        results["build_ray"] = _in_fresh_process("build", root, str(work / "small_ray.parquet"), "ray", cores)
        print("build (ray):", results["build_ray"], flush=True)
    # Cold and catalog runs alternate, so that a busy machine slows both alike; the speed-up is the
    # median of the per-pair ratios.
    results["cold_runs"], results["catalog_runs"] = [], []
    for _ in range(args.repeats):
        results["cold_runs"].append(_in_fresh_process("cold", root))
        results["catalog_runs"].append(_in_fresh_process("catalog", str(work / "small.parquet"), root))
        print("cold:", results["cold_runs"][-1], "\ncatalog:", results["catalog_runs"][-1], flush=True)
    pairs = list(zip(results["cold_runs"], results["catalog_runs"]))
    results["median_seconds"] = {
        "cold_first_batch": statistics.median(cold["first_batch_seconds"] for cold, _ in pairs),
        "catalog_read_and_all_indexes": statistics.median(c["read_and_indexes_seconds"] for _, c in pairs),
        "loader_first_batch_from_catalog": statistics.median(
            c["loader_from_catalog"]["first_batch_seconds"] for _, c in pairs
        ),
    }
    results["speedup"] = {
        "cold_first_batch_over_catalog_read_and_indexes": statistics.median(
            cold["first_batch_seconds"] / c["read_and_indexes_seconds"] for cold, c in pairs
        ),
        "cold_first_batch_over_loader_from_catalog": statistics.median(
            cold["first_batch_seconds"] / c["loader_from_catalog"]["first_batch_seconds"] for cold, c in pairs
        ),
    }
    results["size"] = {
        name: _in_fresh_process("size", paths, str(work / f"{name}.parquet")) for name, paths in hour_sets.items()
    }
    print("size:", results["size"], flush=True)
    results["benchmark_seconds"] = time.perf_counter() - started
    print("speedup:", results["speedup"])
    print("saved", save_results("catalog", results, args.out))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
