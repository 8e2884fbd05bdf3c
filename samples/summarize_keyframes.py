"""Summarize videos with keyframes: images, a contact sheet per video and a manifest.

    python samples/summarize_keyframes.py                  # makes a small two-shot video first
    python samples/summarize_keyframes.py a.mp4 b.mkv ...  # your videos
    python samples/summarize_keyframes.py --method scene --max 8 --out summaries/ videos/*.mp4

The same job as ``vclip keyframes``, written against the Python API. ``--method codec`` gives
the stream's keyframes and decodes nothing else; ``--method scene`` gives the first frame of
every shot. Files that cannot be read are reported and skipped.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import av
import numpy as np

import vclip
from vclip.keyframes import KEYFRAME_METHODS, extract_keyframes
from vclip.synthetic import make_video


def make_two_shot_video(folder: Path) -> str:
    """Two synthetic videos with different textures joined into one file: a hard cut at frame 60."""
    parts = [make_video(folder / f"part_{seed}.mp4", num_frames=60, seed=seed) for seed in (1, 2)]
    frames = np.concatenate([vclip.VideoDecoder(part).get_frames(range(60)).data for part in parts])
    path = folder / "two_shots.mp4"
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=30, options={"crf": "18", "g": "30"})
        stream.width, stream.height, stream.pix_fmt = frames.shape[2], frames.shape[1], "yuv420p"
        for frame in frames:
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
        container.mux(stream.encode(None))
    return str(path)


def summarize(paths: list[str], out: Path, *, method: str, max_frames: int | None) -> dict:
    """Keyframes of every video into ``out/<video name>/``, and the manifest as a dict."""
    manifest = {"method": method, "keyframes": [], "errors": []}
    for path in paths:
        try:
            keyframes = extract_keyframes(path, method=method, max_frames=max_frames, device="auto")
        except vclip.VideoError as error:  # names the file and the problem; the others go on
            print(f"skipped {error}", file=sys.stderr)
            manifest["errors"].append({"file": path, "problem": error.problem})
            continue
        manifest["keyframes"] += keyframes.save(out / Path(path).stem, image_format="jpg")
        print(
            f"{path}: frames {keyframes.frame_indices.tolist()} at "
            f"{[round(t, 2) for t in keyframes.pts_seconds.tolist()]} s, {keyframes.packets_decoded} packets decoded"
        )
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return manifest


def main() -> None:
    parser = argparse.ArgumentParser(description="Summarize videos with keyframes.")
    parser.add_argument("videos", nargs="*", help="video files (default: a two-shot synthetic video)")
    parser.add_argument("--method", choices=KEYFRAME_METHODS, help="codec or scene (default: both, one folder each)")
    parser.add_argument("--max", type=int, help="at most this many per video, evenly spread")
    parser.add_argument("--out", default="keyframe-summaries", help="output folder (default keyframe-summaries)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        paths = args.videos or [make_two_shot_video(Path(scratch))]
        for method in [args.method] if args.method else KEYFRAME_METHODS:
            out = Path(args.out) / method
            out.mkdir(parents=True, exist_ok=True)
            manifest = summarize(paths, out, method=method, max_frames=args.max)
            print(f"{method}: {len(manifest['keyframes'])} images, contact sheets and manifest in {out}/\n")


if __name__ == "__main__":
    main()
