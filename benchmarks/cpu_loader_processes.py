"""The CPU loader's default decode processes against threads: one whole training script, timed
from outside, so that the processes' start counts.

Eight 640x360 H.264 videos of 300 frames (keyframe every 60), 8 epochs of 8 clips of 16 frames at
stride 2, ImageNet 224 float32, ``device="cpu"``; ``decode_processes`` from the command line
(``auto``, or a count: 0 for threads only). Time both settings in turn, several times each, and
compare the medians of their wall times, for example with hyperfine:

    hyperfine --warmup 1 --runs 5 "python benchmarks/cpu_loader_processes.py auto" \\
        "python benchmarks/cpu_loader_processes.py 0"

The script prints its own seconds too (the process's start excluded).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import vclip
from vclip.synthetic import make_video

VIDEOS = Path("/tmp/vclip-cpu-loader-videos")


def main() -> None:
    setting = sys.argv[1] if len(sys.argv) > 1 else "auto"
    VIDEOS.mkdir(parents=True, exist_ok=True)
    paths = []
    for number in range(8):
        path = VIDEOS / f"v{number}.mp4"
        if not path.exists():
            make_video(path, num_frames=300, width=640, height=360, keyframe_interval=60, seed=number)
        paths.append(str(path))
    started = time.perf_counter()
    loader = vclip.ClipLoader([(path, 0) for path in paths], vclip.strided(16, 2), batch_size=8, device="cpu",
                              transform=vclip.TransformSpec.imagenet(224), seed=0,
                              decode_processes=setting if setting == "auto" else int(setting))
    clips = 0
    try:
        for epoch in range(8):
            loader.set_epoch(epoch)
            clips += sum(batch.data.shape[0] for batch in loader)
    finally:
        loader.close()
    seconds = time.perf_counter() - started
    print(f"decode_processes={loader.decode_processes}: {clips} clips in {seconds:.2f} s "
          f"({clips / seconds:.1f} clips/s)")


if __name__ == "__main__":
    main()
