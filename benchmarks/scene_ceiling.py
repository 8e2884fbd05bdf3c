"""How close the scene method on the GPU comes to what NVDEC can decode, with and without decode processes.

- **NVDEC's ceiling at 720p**: every frame of ``--copies`` copies of a 249-frame 1280x720 H.264 video
  (one keyframe interval each, as the scene method's chunks) decoded to 64x64 thumbnails through
  vclip's backend (``train.raw_nvdec``): 8 threads in this process, then 2, 4 and 7 decode processes.
- **One long video**: ``find_shot_boundaries`` on the GPU over a 1280x720 video of ``--long-frames``
  frames (a keyframe every 250) with ``decode_processes`` 0 and 4, against PySceneDetect's
  ``ContentDetector`` on the same file (when installed).
- **A folder**: the copies twice over, ``--jobs`` videos at once in threads (as ``vclip keyframes
  --workers`` runs them on the GPU), with ``decode_processes`` 0 and 4.

Rates are frames/s, the median of ``--repeats`` runs after a warm-up (which starts the decode processes).

    python benchmarks/scene_ceiling.py [--copies 16] [--long-frames 3000] [--jobs 8,16] [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

from common import save_results
from scenes import SPEED_SIZE, detect_pyscenedetect, detect_vclip, timed
from train import raw_nvdec

from vclip.synthetic import make_scene_video, make_video

PROCESS_COUNTS = (0, 4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=16, help="copies of the 249-frame 720p video (default 16)")
    parser.add_argument("--long-frames", type=int, default=3000, help="frames of the long 720p video (default 3000)")
    parser.add_argument("--jobs", default="8,16", help="videos at once in the folder runs (default 8,16)")
    parser.add_argument("--repeats", type=int, default=2, help="timed runs (default 2)")
    parser.add_argument("--out", help="folder for scene_ceiling.json (default: $OUT or benchmarks/results/)")
    args = parser.parse_args()
    width, height = SPEED_SIZE
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        short = make_scene_video(folder / "short.mp4", "dissolves", width=width, height=height, num_shots=4, seed=7)
        copies = []
        for number in range(args.copies):
            copy = folder / f"copy_{number:02d}.mp4"
            os.link(short.path, copy)
            copies.append(str(copy))
        long_path = str(folder / "long.mp4")
        make_video(long_path, num_frames=args.long_frames, width=width, height=height, fps=25, keyframe_interval=250)

        ceiling = {}
        for processes, threads in ((0, 8), (2, 4), (4, 4), (7, 2)):
            where = f"{processes} processes" if processes else "this process"
            ceiling[f"{where} x {threads} threads"] = raw_nvdec(copies, threads, processes)["frames_per_second"]
        print("NVDEC ceiling", {name: round(rate) for name, rate in ceiling.items()}, flush=True)

        ways = {f"vclip, decode_processes={count}": partial(detect_vclip, device="cuda", decode_processes=count)
                for count in PROCESS_COUNTS}
        long_video = {name: args.long_frames / timed(partial(detect, long_path), args.repeats)[1]
                      for name, detect in ways.items()}
        try:
            long_video["PySceneDetect content"] = args.long_frames / timed(
                partial(detect_pyscenedetect, long_path, "content"), args.repeats)[1]
        except ImportError:
            pass
        print("long video", {name: round(rate) for name, rate in long_video.items()}, flush=True)

        videos = copies * 2
        folder_rates = {}
        for name, detect in ways.items():
            for jobs in (int(count) for count in args.jobs.split(",")):
                with ThreadPoolExecutor(jobs) as pool:
                    _, seconds = timed(lambda pool=pool, detect=detect: list(pool.map(detect, videos)), args.repeats)
                folder_rates[f"{name}, {jobs} at once"] = len(videos) * short.num_frames / seconds
        print("folder", {name: round(rate) for name, rate in folder_rates.items()}, flush=True)
        results = {
            "videos": {"short": {"width": width, "height": height, "frames": short.num_frames, "copies": args.copies},
                       "long": {"width": width, "height": height, "frames": args.long_frames,
                                "keyframe_interval": 250}},
            "nvdec_ceiling_frames_per_second": ceiling,
            "long_video_frames_per_second": long_video,
            "folder_frames_per_second": folder_rates,
        }
    print(f"saved {save_results('scene_ceiling', results, args.out)}")


if __name__ == "__main__":
    main()
