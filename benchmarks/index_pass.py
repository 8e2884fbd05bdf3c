"""The index pass (one demux pass per video, :func:`vclip.index_video`) with and without FFmpeg's
decoding probe, on the train sets of ``common.VIDEO_SETS``.

Every video is indexed before its first clip: by a loader's scan (unless a catalog has the
indexes), by ``vclip index``, and by shot detection, where on the GPU the pass runs under one
interpreter lock beside the decoding. Opening a file, FFmpeg's stream probe decodes several
H.264 pictures to guess how far frames are reordered; the index decodes the first picture itself,
which gives the same facts, so local MP4 and Matroska files are opened without that probe
(``vclip._index.demux``). Per set, milliseconds per video (median over ``--repeats`` passes over
``--count`` videos, one thread, no index cache): ``with_probe`` opened with FFmpeg's decoding
probe, ``now`` as ``index_video`` opens them; and videos/s of the whole pass on one thread and on one per core.

    python benchmarks/index_pass.py [--videos DIR] [--count 8] [--repeats 5] [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

from common import VIDEO_SETS, make_video_set, save_results

from vclip._index import demux as _demux


def _pass_seconds(paths: list[str], probe_pictures: bool | None, threads: int = 1) -> float:
    """Seconds to index ``paths`` (``probe_pictures`` None: as ``index_video`` does now)."""
    def index(path: str) -> None:
        size = os.path.getsize(path)
        if probe_pictures is None:
            _demux.demux_stream(path, None, size)
        else:
            _demux._demux_stream(path, None, size, probe_pictures=probe_pictures)

    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(index, paths))
    return time.perf_counter() - started


def _median(run, repeats: int) -> float:
    run()  # warm-up: the files in the page cache
    return statistics.median(run() for _ in range(repeats))


def _figures(paths: list[str], repeats: int, cores: int) -> dict:
    per_video = {label: 1e3 * _median(lambda probe=probe: _pass_seconds(paths, probe), repeats) / len(paths)
                 for label, probe in (("with_probe", True), ("now", None))}
    rates = {f"{threads}_threads": len(paths) / _median(lambda threads=threads: _pass_seconds(paths, None, threads),
                                                          repeats)
             for threads in sorted({1, cores})}
    return {"ms_per_video": per_video, "speedup": per_video["with_probe"] / per_video["now"],
            "videos_per_second": rates}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--videos", default="/tmp/vclip-bench-videos", help="folder of the generated sets")
    parser.add_argument("--count", type=int, default=8, help="videos per set (default 8)")
    parser.add_argument("--repeats", type=int, default=5, help="timed passes (default 5)")
    parser.add_argument("--sets", default=",".join(VIDEO_SETS), help="sets of common.VIDEO_SETS (default: all)")
    parser.add_argument("--out", help="folder for index_pass.json (default: $OUT or benchmarks/results/)")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    results: dict = {"count": args.count, "repeats": args.repeats, "cores": cores, "sets": {}}
    for name in args.sets.split(","):
        figures = results["sets"][name] = _figures(make_video_set(args.videos, name, count=args.count), args.repeats,
                                                   cores)
        per_video = figures["ms_per_video"]
        print(f"{name}: {per_video['with_probe']:.1f} ms -> {per_video['now']:.1f} ms per video "
              f"({figures['speedup']:.2f}x); videos/s "
              + ", ".join(f"{key} {value:.0f}" for key, value in figures["videos_per_second"].items()))
    print(f"saved {save_results('index_pass', results, args.out)}")


if __name__ == "__main__":
    main()
