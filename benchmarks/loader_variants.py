"""The default GPU loader against variants of its decode processes, threads, prefetch depth and CPU
decoders: clips/s and the whole device's GPU memory, each variant in a fresh process, in two rounds
(the second in reverse order), on the train workload of ``train.py`` (its ``vclip-default`` row
with options added).

    python benchmarks/loader_variants.py [--variants default,dp4_q15] [--sets 1080p,360p] [--name loader_variants]
        (on a GPU machine; results/<name>.json)

The variants are named in ``VARIANTS``: ``dp3_t4`` is 3 decode processes of 4 threads, ``q6_cpu11``
a queue of 6 batches with 11 CPU decoders, ``q15_cpu0`` a queue of 15 without CPU decoders. The
queue-depth sweep that docs/notes/cpu-decoders-beside-nvdec.md cites:

    python benchmarks/loader_variants.py --variants default,q4_cpu11,q6_cpu11,q8_cpu11 --sets 1080p \\
        --name loader_queue_depth
"""

from __future__ import annotations

import argparse

import train
from common import GpuSampler, in_fresh_process, make_video_set, save_results

VARIANTS = {
    "default": {},
    "dp4_t3": {"decode_processes": 4, "num_threads": 3},
    "dp3_t4": {"decode_processes": 3, "num_threads": 4},
    "dp3_t3": {"decode_processes": 3, "num_threads": 3},
    "dp3_t5": {"decode_processes": 3, "num_threads": 5},
    "dp4": {"decode_processes": 4},
    "dp4_t3_q4": {"decode_processes": 4, "num_threads": 3, "prefetch_queue_depth": 4},
    "q15": {"prefetch_queue_depth": 15},
    "q15_cpu0": {"prefetch_queue_depth": 15, "cpu_decoders": 0},
    "dp4_q15": {"decode_processes": 4, "prefetch_queue_depth": 15},
    "dp4_q15_cpu0": {"decode_processes": 4, "prefetch_queue_depth": 15, "cpu_decoders": 0},
    "q4_cpu11": {"prefetch_queue_depth": 4, "cpu_decoders": 11},
    "q6_cpu11": {"prefetch_queue_depth": 6, "cpu_decoders": 11},
    "q8_cpu11": {"prefetch_queue_depth": 8, "cpu_decoders": 11},
}
BATCHES = {"1080p": 64, "360p": 200, "720p-h264-gop250": 64, "720p-hevc-gop250": 64}
"""Timed batches per video set: several times the deepest queue, whose batches decoded ahead would
otherwise count for much of the timed window."""


def run(paths: list[str], batches: int, options: dict) -> dict:
    """train.py's vclip-default row with ``options`` given to the loader (in a fresh process)."""
    row = train.measure_default(paths, batches, 5, "cuda", **options)
    keep = ("clips_per_second", "construction_seconds", "chosen", "memory_estimate_bytes", "wrong_clips")
    clips_by_decoder = {kind: use["clips"] for kind, use in row["loader_stats"]["decoders"].items()}
    return {**{key: row[key] for key in keep}, "decoders": clips_by_decoder}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default="default,dp4_t3,dp3_t4,dp4_t3_q4", help="names of VARIANTS")
    parser.add_argument("--sets", default="1080p,360p", help="video sets of benchmarks/common.py")
    parser.add_argument("--name", default="loader_variants", help="results/<name>.json")
    args = parser.parse_args()
    variants = {name: VARIANTS[name] for name in args.variants.split(",")}
    report: dict = {"variants": variants, "sets": {}}
    for set_name in args.sets.split(","):
        paths = make_video_set("/tmp/vclip-bench", set_name)
        rows = report["sets"].setdefault(set_name, {})
        for repeat in range(2):
            for name in variants if repeat == 0 else reversed(variants):
                memory = GpuSampler([0], period=0.02)
                try:
                    with memory:
                        row = in_fresh_process(run, paths, BATCHES[set_name], variants[name])
                    row.update(train.memory_figures(memory))
                except Exception as error:  # a variant that fails is reported, not fatal
                    row = {"error": repr(error)}
                rows.setdefault(name, []).append(row)
                print(set_name, name, row.get("clips_per_second"), row.get("gpu_memory_above_baseline_bytes"),
                      row.get("decoders"), flush=True)
    print(save_results(args.name, report))


if __name__ == "__main__":
    main()
