"""CPU-only: the train workload (benchmarks/train.py) decoded on the CPU by the default path
(``cpu_decoders=0``: decode threads with FFmpeg's own threading) and by the shared-queue scheduler
(``cpu_decoders=N``: N single-threaded PyAV decoders), same clips, NumPy conversion.

    python benchmarks/cpu_decoders.py --videos FOLDER_OF_MP4 [--batches 12] [--counts 0,2,3,4]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from common import save_results
from train import VclipTool, check, make_batches, measure

import vclip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--videos", required=True, help="folder of 300-frame videos (e.g. a train.py set)")
    parser.add_argument("--batches", type=int, default=12)
    parser.add_argument("--counts", default="0,2,3,4", help="cpu_decoders values (0: the default CPU path)")
    parser.add_argument("--out", default=None)
    arguments = parser.parse_args()
    paths = sorted(str(p) for p in Path(arguments.videos).glob("*.mp4"))
    for path in paths:
        vclip.index_video(path)
    warmup = 2
    batches = make_batches(paths, arguments.batches + warmup, seed=1)
    results: dict[str, list] = {}
    for count in (int(n) for n in arguments.counts.split(",")):
        tool = VclipTool(0, in_flight=3, cpu_decoders=count, device="cpu")
        try:
            wrong = check(tool, batches[0])
            row = measure(tool, batches, warmup) | {
                "wrong_clips": wrong,
                "decoders": tool.decoders(),
                "decode_stats": tool.stats.as_dict(),
            }
        finally:
            tool.close()
        row["cpu_seconds_per_clip"] = row["cpu_cores_used"] * row["seconds"] / row["clips"]
        results.setdefault(f"cpu_decoders={count}", []).append(row)  # repeated counts: one row per run
        print(
            f"cpu_decoders={count}: {row['clips_per_second']:.2f} clips/s, {row['cpu_cores_used']:.2f} cores, "
            f"{row['cpu_seconds_per_clip']:.3f} CPU s per clip" + (f"  WRONG {wrong[:2]}" if wrong else ""),
            flush=True,
        )
    print("saved", save_results("cpu_decoders", {"videos": arguments.videos, "results": results}, arguments.out))


if __name__ == "__main__":
    main()
