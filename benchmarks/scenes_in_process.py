"""Where a folder's shot detection spends its time on the GPU, all in one process: the first
``find_shot_boundaries_many`` over the ``360p`` folder of ``scenes_folder.py`` (indexes built,
decoders created), the same call again, then with 4, 16 and 36 threads, then the decoding alone
(``VideoDecoder.get_frames`` of each whole video at 64 pixels across, 8 and 16 threads, no analysis).
The import of CuPy (with its CUDA context) and of vclip are timed first.

The gap between the first and the second call is what a fresh process pays beyond its imports;
the decoding alone is the most one interpreter feeds NVDEC, whatever the analysis costs.

    python benchmarks/scenes_in_process.py [--out DIR] [--set 360p]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import numpy as np

ANALYSIS_WIDTH = 64  # find_shot_boundaries_many's default


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None, help="folder for scenes_in_process.json (default: $OUT or results/)")
    parser.add_argument("--set", default="360p", help="a folder of scenes_folder.py (default 360p)")
    arguments = parser.parse_args()
    seconds: dict[str, float] = {}
    started = time.perf_counter()
    import cupy

    cupy.zeros(1)
    seconds["import_cupy_and_cuda_context"] = time.perf_counter() - started
    started = time.perf_counter()
    from vclip import VideoDecoder
    from vclip.keyframes import find_shot_boundaries_many

    seconds["import_vclip"] = time.perf_counter() - started
    from common import save_results  # after the timed imports: these import vclip too
    from scenes_folder import make_folder
    with tempfile.TemporaryDirectory(prefix="vclip-scenes-in-process-") as scratch:
        videos = make_folder(Path(scratch) / arguments.set, arguments.set)
        paths = [video["path"] for video in videos]
        frames = sum(video["frames"] for video in videos)

        def timed(name: str, run) -> None:
            began = time.perf_counter()
            run()
            seconds[name] = time.perf_counter() - began

        def boundaries(**options) -> None:
            for path, found in zip(paths, find_shot_boundaries_many(paths, device="cuda", **options)):
                if isinstance(found, Exception):
                    raise RuntimeError(f"{path}: {found}")

        def decode(path: str) -> None:
            decoder = VideoDecoder(path, device="cuda")
            index = decoder.index
            decoder.get_frames(np.arange(index.num_frames), scaling_factor=ANALYSIS_WIDTH / index.width)
            cupy.cuda.get_current_stream().synchronize()

        def decode_only(threads: int) -> None:
            with ThreadPoolExecutor(threads) as pool:
                list(pool.map(decode, paths))

        timed("boundaries_first_call", boundaries)
        timed("boundaries_second_call", boundaries)
        for workers in (4, 16, 36):
            timed(f"boundaries_{workers}_threads", partial(boundaries, workers=workers))
        for threads in (8, 16):
            timed(f"decode_only_{threads}_threads", partial(decode_only, threads))
    rates = {name: frames / spent for name, spent in seconds.items() if not name.startswith("import")}
    results = {"set": arguments.set, "videos": len(paths), "frames": frames, "seconds": seconds,
               "frames_per_second": rates}
    print({name: round(rate) for name, rate in rates.items()})
    print(f"saved {save_results('scenes_in_process', results, arguments.out)}")


if __name__ == "__main__":
    main()
