"""What a fresh machine pays before its first result: CuPy's kernel cache empty against warm.

Each step runs in a fresh Python process (as a new container or cluster job starts), with
``CUPY_CACHE_DIR`` pointed at an empty folder ("cold") and then, in another fresh process, at the
folder the cold run filled ("warm"):

- **loader**: a ``ClipLoader(device="cuda", batch_size=8)`` with its defaults (decode processes,
  CPU decoders and depth chosen for the machine) over a few 640x360 videos, the train transform
  (224x224 ImageNet float32), from construction to the first batch (each process compiles what it
  launches unless the cache already holds it, or another process is compiling it);
- **loader, threads only**: the same with ``decode_processes=0``;
- **shots**: one ``find_shot_boundaries(device="cuda")`` of a 640x360 video.

The differences cold minus warm are what the kernels cost to build.

    python benchmarks/cold_start.py [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from common import save_results

from vclip.synthetic import make_scene_video, make_video

CHILD = r"""
import json, sys, time
started = time.perf_counter()
import vclip
kind, paths = sys.argv[1], json.loads(sys.argv[2])
if kind.startswith("loader"):
    loader = vclip.ClipLoader([(path, 0) for path in paths], vclip.strided(16, 2), batch_size=8, device="cuda",
                              transform=vclip.TransformSpec.imagenet(224), seed=0,
                              **({"decode_processes": 0} if kind == "loader_threads" else {}))
    batch = next(iter(loader))
    batch.data.sum().item()
    loader.close()
else:
    from vclip.keyframes import find_shot_boundaries
    find_shot_boundaries(paths[0], device="cuda")
print(json.dumps({"seconds": time.perf_counter() - started}))
"""


def run_child(kind: str, paths: list[str], cache: Path) -> float:
    environment = {**os.environ, "CUPY_CACHE_DIR": str(cache)}
    done = subprocess.run([sys.executable, "-c", CHILD, kind, json.dumps(paths)], env=environment,
                          capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{kind}: {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])["seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None, help="folder for cold_start.json (default: $OUT or results/)")
    arguments = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="vclip-cold-"))
    videos = [make_video(folder / f"v{i}.mp4", num_frames=120, width=640, height=360, keyframe_interval=60, seed=i)
              for i in range(4)]
    shots = make_scene_video(folder / "shots.mp4", "cuts", seed=0, width=640, height=360).path
    results = {}
    for kind, paths in (("loader", videos), ("loader_threads", videos), ("shots", [shots])):
        cache = Path(tempfile.mkdtemp(prefix=f"cupy-{kind}-"))
        cold = run_child(kind, paths, cache)
        warm = run_child(kind, paths, cache)
        results[kind] = {"cold_seconds": cold, "warm_seconds": warm, "cold_minus_warm_seconds": cold - warm}
        print(f"{kind:>17}: cold {cold:6.2f} s, warm {warm:6.2f} s, difference {cold - warm:6.2f} s", flush=True)
    print(f"saved {save_results('cold_start', {'steps': results}, arguments.out)}")


if __name__ == "__main__":
    main()
