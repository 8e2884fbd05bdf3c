"""Long GOPs: decode work per delivered frame with and without ``max_lead_frames``, and how the
bound moves clip starts within their GOPs (against uniform starts). CPU decoding, ClipLoader.

    python benchmarks/long_gop.py [--videos FOLDER] [--bounds none,60,30,15] [--epochs 2]

Without ``--videos``, a set is generated: 6 H.264 320x180 videos of 750 frames, keyframe every
250 frames, 2 B-frames (the long groups of pictures of web video).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from common import save_results

import vclip
from vclip.gop import start_distribution
from vclip.synthetic import make_video

LENGTH, STRIDE = 16, 2


def long_gop_set(folder: Path) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(6):
        path = folder / f"video_{i:03d}.mp4"
        if not path.exists():
            make_video(
                path,
                num_frames=750,
                width=320,
                height=180,
                keyframe_interval=250,
                b_frames=2,
                adaptive_b_frames=False,
                seed=100 + i,
            )
        paths.append(str(path))
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--videos", default="/tmp/vclip-bench/long_gop")
    parser.add_argument("--bounds", default="none,60,30,15")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--out", default=None)
    arguments = parser.parse_args()
    paths = long_gop_set(Path(arguments.videos))
    indexes = {path: vclip.index_video(path) for path in paths}
    span = (LENGTH - 1) * STRIDE + 1
    results = {}
    for bound in arguments.bounds.split(","):
        max_lead = None if bound == "none" else int(bound)
        loader = vclip.ClipLoader(
            [(path, 0) for path in paths],
            vclip.strided(LENGTH, STRIDE, clips_per_video=8),
            device="cpu",
            batch_size=8,
            shuffle=True,
            seed=0,
            max_lead_frames=max_lead,
            transform=vclip.TransformSpec(resize=(112, 112)),
        )
        starts = []
        started = time.perf_counter()
        for epoch in range(arguments.epochs):
            loader.set_epoch(epoch)
            for batch in loader:
                starts += [
                    (paths[video], frames[0])
                    for video, frames in zip(batch.video_ids.tolist(), batch.frame_indices.tolist())
                ]
        seconds = time.perf_counter() - started
        stats = loader.stats()
        loader.close()
        distribution = start_distribution(
            [(indexes[path], start) for path, start in starts],
            [(indexes[path], range(indexes[path].num_frames - span + 1)) for path, _ in starts],
        )
        results[bound] = {
            "decoded_per_delivered_frame": stats.frames.decoded_per_delivered,
            "clips_per_second": len(starts) / seconds,
            "clips": len(starts),
            "start_total_variation": distribution.total_variation,
            "mean_lead": distribution.mean_lead,
            "observed": distribution.observed.tolist(),
            "uniform": distribution.uniform.tolist(),
        }
        print(
            f"max_lead_frames={bound}: {stats.frames.decoded_per_delivered:.2f} decoded per delivered frame, "
            f"{len(starts) / seconds:.1f} clips/s\n{distribution}",
            flush=True,
        )
    print("saved", save_results("long_gop", {"videos": arguments.videos, "results": results}, arguments.out))


if __name__ == "__main__":
    main()
