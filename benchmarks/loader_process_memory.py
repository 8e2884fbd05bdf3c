"""GPU memory of each process of a GPU loader (nvidia-smi's per-process figures), at 640x360 and
1080p, with the defaults (decode processes, CPU decoders, depth), 3 decode processes and none:
where the whole device's memory goes (its total is read at the same moments), and what
``loader.stats().memory`` says of the loader's own (its peak against its estimate).

Eight videos of each set, the train workload of ``train.py``; after 10, 20 and 30 batches the
per-process memory is read. All loaders run in this one process, one after the other, so its own
figure grows with what the loaders before it left in torch's and CuPy's caches; the decode
processes are fresh for each loader.

    python benchmarks/loader_process_memory.py   (on a GPU machine; results/loader_process_memory.json)
"""

from __future__ import annotations

import os
import subprocess

import train
from common import make_video_set, save_results


def nvidia_smi(query: str) -> list[list[int]]:
    text = subprocess.run(["nvidia-smi", query, "--format=csv,noheader,nounits"], capture_output=True, text=True).stdout
    return [[int(field) for field in line.split(",")] for line in text.strip().splitlines() if line]


def process_memory_mib() -> dict[str, int]:
    """Used GPU memory of each compute process by pid, and of the whole device ("device"), in MiB
    (nvidia-smi)."""
    used = {str(pid): mib for pid, mib in nvidia_smi("--query-compute-apps=pid,used_memory")}
    return {**used, "device": nvidia_smi("--query-gpu=memory.used")[0][0]}


def main() -> None:
    report: dict = {"loader_process": os.getpid(), "device_mib_before": process_memory_mib()["device"], "loaders": {}}
    for name in ("360p", "1080p"):
        paths = make_video_set("/tmp/vclip-mem", name, count=8)
        for options in ({}, {"decode_processes": 3}, {"decode_processes": 0}):
            loader = train.default_loader(paths, 40, "cuda", **options)
            batches = iter(loader)
            seen = []
            for number in range(30):
                next(batches)
                if number in (10, 20, 29):
                    seen.append(process_memory_mib())
            stats = loader.stats()
            memory = stats.memory  # the loader's own, measured, and its plan for what it allocated
            report["loaders"][f"{name} {options}"] = {
                "options": options, "process_memory_mib": seen, "memory_estimate": str(loader.memory_estimate),
                "stats_memory": {"estimate_bytes": memory.estimate_bytes, "in_use_bytes": memory.in_use_bytes,
                                 "peak_bytes": memory.peak_bytes},
                "working": stats.working}
            batches.close()
            loader.close()
            print(name, options, seen[-1], f"loader's own: peak {memory.peak_bytes / 2**30:.2f} GiB, estimate"
                  f" {memory.estimate_bytes / 2**30:.2f} GiB", flush=True)
    print(save_results("loader_process_memory", report))


if __name__ == "__main__":
    main()
