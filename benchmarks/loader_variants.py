"""The default GPU loader against variants of its decode processes, threads and prefetch depth:
clips/s and the whole device's GPU memory, each variant in a fresh process, in two rounds (the
second in reverse order), on the train workload of ``train.py`` (its ``vclip-default`` row with
options added).

    python benchmarks/loader_variants.py        (on a GPU machine; results/loader_variants.json)

What made ``decode_processes="auto"`` 3 on the GPU (issue 22): on an H200, 3 processes of 4
threads were as fast as 4 at 640x360 and 1080p, with about 1 GiB less of the device.
"""

from __future__ import annotations

import train
from common import GpuSampler, in_fresh_process, make_video_set, save_results

VARIANTS = {
    "default": {},
    "dp4_t3": {"decode_processes": 4, "num_threads": 3},
    "dp3_t4": {"decode_processes": 3, "num_threads": 4},
    "dp4_t3_q4": {"decode_processes": 4, "num_threads": 3, "prefetch_queue_depth": 4},
}
SETS = (("1080p", 16), ("360p", 100))  # (video set, timed batches)


def run(paths: list[str], batches: int, options: dict) -> dict:
    """train.py's vclip-default row with ``options`` given to the loader (in a fresh process)."""
    row = train.measure_default(paths, batches, 5, "cuda", **options)
    keep = ("clips_per_second", "construction_seconds", "chosen", "memory_estimate_bytes", "wrong_clips")
    return {key: row[key] for key in keep}


def main() -> None:
    report: dict = {"variants": VARIANTS, "sets": {}}
    for set_name, batches in SETS:
        paths = make_video_set("/tmp/vclip-bench", set_name)
        rows = report["sets"].setdefault(set_name, {})
        for repeat in range(2):
            for name in VARIANTS if repeat == 0 else reversed(VARIANTS):
                memory = GpuSampler([0], period=0.02)
                try:
                    with memory:
                        row = in_fresh_process(run, paths, batches, VARIANTS[name])
                    row.update(train.memory_figures(memory))
                except Exception as error:  # a variant that fails is reported, not fatal
                    row = {"error": repr(error)}
                rows.setdefault(name, []).append(row)
                print(set_name, name, row.get("clips_per_second"), row.get("gpu_memory_above_baseline_bytes"),
                      flush=True)
    print(save_results("loader_variants", report))


if __name__ == "__main__":
    main()
