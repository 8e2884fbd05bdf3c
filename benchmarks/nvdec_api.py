"""The two ways into NVDEC side by side: how fast decode threads of one process go with each.

Each API (``VCLIP_NVDEC_API=driver``: NVDEC's own API through ctypes; ``pynvvideocodec``:
PyNvVideoCodec's ``Decode``) runs in a fresh process. For each thread count, every frame of every
video of a set is decoded through vclip's NVDEC backend and the fused kernel into 64x64 thumbnails
(whole files, as benchmarks/train.py's ``raw_nvdec``): frames/s and the CPU cores the process used.
The two APIs' outputs of the first pass are compared frame for frame (they feed the same kernel
with NVDEC's pictures). What either leaves of the interpreter lock to a training loop in the same
process is what benchmarks/e2e.py measures (its ``vclip-pynvvideocodec`` tool).

    python benchmarks/nvdec_api.py --out results/ [--sets 360p,1080p] [--threads 1,4,8,12,16]

Results in ``<out>/nvdec_api.json``: ``sets.<set>.<api>.threads.<n>`` with ``frames_per_second``
and ``cpu_cores_used``.
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import time

import numpy as np
from common import environment, in_fresh_process, make_video_set, save_results

APIS = ("driver", "pynvvideocodec")
THUMBNAIL = 64


def measure(api: str, paths: list[str], thread_counts: list[int], repeats: int, hang_seconds: float) -> dict:
    """In a fresh process: frames/s and the lock left, per thread count, for ``api``; and the
    outputs of one pass (for the comparison between APIs)."""
    os.environ["VCLIP_NVDEC_API"] = api
    faulthandler.dump_traceback_later(hang_seconds, exit=True)  # a hang shows where, then ends the run
    import vclip
    from vclip._device import resolve_device
    from vclip._engine import (
        ClipTarget,
        DecodeStats,
        ThreadDispatcher,
        VideoRequest,
        make_backend,
        nvdec_api,
        resolve_transform,
    )

    spec = vclip.TransformSpec(resize=(THUMBNAIL, THUMBNAIL))
    conversion = resolve_transform(spec)
    indexes = [vclip.index_video(p) for p in paths]
    jobs = [VideoRequest(i, (ClipTarget(np.arange(i.num_frames), spec.geometry(i.width, i.height), slot),))
            for slot, i in enumerate(indexes)]
    frames = sum(i.num_frames for i in indexes)
    rows = {}
    outputs = None
    for threads in thread_counts:
        backend = make_backend(resolve_device("cuda").device, threads=threads)
        runner = ThreadDispatcher(backend, num_workers=threads)
        output = backend.empty((len(jobs), max(i.num_frames for i in indexes), THUMBNAIL, THUMBNAIL, 3), "uint8")

        def once(runner=runner, output=output):
            result = runner.run(jobs, conversion, output, DecodeStats())
            assert not any(result.errors), result.errors
            for completion in result.completions:
                completion.synchronize()

        print(f"{api} {threads} threads: first pass", flush=True)
        once()  # decoders made, kernels compiled
        if outputs is None:
            outputs = output.get()
        rates, cores = [], []
        for _ in range(repeats):
            started, cpu_started = time.perf_counter(), time.process_time()
            once()
            seconds = time.perf_counter() - started
            rates.append(frames / seconds)
            cores.append((time.process_time() - cpu_started) / seconds)
        rows[str(threads)] = {"frames_per_second": float(np.median(rates)), "cpu_cores_used": float(np.median(cores)),
                              "frames_per_second_runs": rates}
        print(f"{api} {threads} threads: {rows[str(threads)]['frames_per_second']:.0f} frames/s, "
              f"{rows[str(threads)]['cpu_cores_used']:.1f} cores", flush=True)
        runner.close()
    return {"api": nvdec_api(), "frames": frames, "videos": len(paths), "threads": rows, "outputs": outputs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None)
    parser.add_argument("--videos", default="/tmp/vclip-nvdec-api-videos")
    parser.add_argument("--sets", default="360p")
    parser.add_argument("--threads", default="1,4,8,12,16")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--hang-seconds", type=float, default=600, help="a measurement longer than this is a hang")
    parser.add_argument("--count", type=int, default=None, help="the first COUNT videos of each set")
    args = parser.parse_args()
    thread_counts = [int(n) for n in args.threads.split(",")]
    results: dict = {"environment": environment(), "thumbnail": THUMBNAIL, "sets": {}}
    for name in args.sets.split(","):
        paths = make_video_set(os.path.join(args.videos, name), name, count=args.count)
        rows = {api: in_fresh_process(measure, api, paths, thread_counts, args.repeats, args.hang_seconds)
                for api in APIS}
        first, second = (rows[api].pop("outputs") for api in APIS)
        rows["outputs_equal"] = bool(np.array_equal(first, second))
        rows["outputs_max_difference"] = int(np.abs(first.astype(np.int16) - second.astype(np.int16)).max())
        print(f"{name}: outputs equal {rows['outputs_equal']} (max difference {rows['outputs_max_difference']})")
        results["sets"][name] = rows
        save_results("nvdec_api", results, args.out)
    print(f"saved {save_results('nvdec_api', results, args.out)}")


if __name__ == "__main__":
    main()
