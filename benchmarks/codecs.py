"""Codecs on NVDEC against the CPU: H.264, HEVC, VP9 (WebM) and MPEG-4 Part 2 (AVI), one run.

Per codec, ``--videos`` barcode-stamped videos of ``--frames`` frames at ``--size``, 30 fps, a
keyframe every 60 frames (VP9 encoded with libvpx's realtime settings so the set is made in seconds;
the decoder does the same work per picture). Each device decodes the same clips:

- frames: the barcodes of frames 0, 37, 150 and the last, raw RGB, must be those numbers on both
  devices (and which decoder ran is recorded: ``fell_back_to_cpu`` must be false on the GPU);
- whole video: every frame of one video through ``VideoDecoder.get_frames`` with the train
  transform (median of ``--repeats``), pictures/s;
- train: the train workload of benchmarks/loader.py (batches of 8 clips, 16 frames at stride 2,
  224x224 ImageNet-normalized, TCHW) over the set, clips/s after ``--warmup`` batches, and the
  loader's ``fallback_videos`` (videos it had to decode on the CPU).

    python benchmarks/codecs.py --out results/ [--device cuda] [--codecs h264,hevc,vp9,mpeg4]
"""

from __future__ import annotations

import argparse
import multiprocessing
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from common import median_rate, save_results

import vclip
from vclip._outputs.images import to_numpy
from vclip.synthetic import make_video, read_barcode

LENGTH, STRIDE, BATCH, SIZE = 16, 2, 8, 224
SPEC = vclip.TransformSpec.imagenet(SIZE, layout="TCHW")
# codec name -> (encoder, file extension, encoder options)
CODECS = {
    "h264": ("libx264", "mp4", {}),
    "hevc": ("libx265", "mp4", {}),
    "vp9": ("libvpx-vp9", "webm", {"deadline": "realtime", "cpu-used": "8", "row-mt": "1"}),
    "mpeg4": ("mpeg4", "avi", {"qscale": "4"}),
}


def _encode(arguments) -> str:
    path, codec, width, height, frames, seed = arguments
    encoder, _, options = CODECS[codec]
    make_video(
        path,
        num_frames=frames,
        width=width,
        height=height,
        fps=30,
        codec=encoder,
        keyframe_interval=60,
        b_frames=0 if codec == "vp9" else 2,
        seed=seed,
        encoder_options=options,
    )
    return path


def make_codec_set(folder: Path, codec: str, count: int, width: int, height: int, frames: int) -> list[str]:
    extension = CODECS[codec][1]
    jobs = [(str(folder / f"{codec}_{i:02d}.{extension}"), codec, width, height, frames, i) for i in range(count)]
    with ProcessPoolExecutor(mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(_encode, jobs))


def _synchronize(device: str) -> None:
    if device != "cpu":
        import torch

        torch.cuda.synchronize()


def check_frames(video: str, device: str) -> dict:
    decoder = vclip.VideoDecoder(video, device=device)
    wanted = [0, 37, 150, len(decoder) - 1]
    found = [read_barcode(frame) for frame in to_numpy(decoder.get_frames(wanted).data)]
    if found != wanted:
        raise AssertionError(f"{video} on {device}: frames {found}, not {wanted}")
    return {"frames": wanted, "device": decoder.device, "fell_back_to_cpu": decoder.fell_back_to_cpu}


def whole_video(video: str, device: str, repeats: int) -> dict:
    decoder = vclip.VideoDecoder(video, device=device)
    every = np.arange(len(decoder))

    def once() -> None:
        decoder.get_frames(every, transform=SPEC)
        _synchronize(device)

    return median_rate(once, len(decoder), repeats=repeats)


def train(videos: list[str], device: str, batches: int, warmup: int) -> dict:
    loader = vclip.ClipLoader(
        [(video, 0) for video in videos],
        vclip.strided(LENGTH, STRIDE),
        transform=SPEC,
        batch_size=BATCH,
        clips_per_video=-(-(batches + warmup) * BATCH // len(videos)),
        shuffle=True,
        seed=0,
        drop_last=True,
        device=device,
    )
    iterator = iter(loader)
    for _ in range(warmup):
        next(iterator)
    started = time.perf_counter()
    for _ in range(batches):
        next(iterator)
    _synchronize(device)
    seconds = time.perf_counter() - started
    stats = loader.stats()
    return {
        "clips_per_second": batches * BATCH / seconds,
        "decoded_per_delivered": stats.frames.decoded_per_delivered,
        "fallback_videos": stats.fallback_videos,
        "decode_workers": stats.decode_workers,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder for codecs.json")
    parser.add_argument("--device", default="cuda", help="the GPU to compare with the CPU (default cuda)")
    parser.add_argument("--codecs", default="h264,hevc,vp9,mpeg4", help="codecs (default h264,hevc,vp9,mpeg4)")
    parser.add_argument("--size", default="1920x1080", help="WIDTHxHEIGHT (default 1920x1080)")
    parser.add_argument("--videos", type=int, default=8, help="videos per codec (default 8)")
    parser.add_argument("--frames", type=int, default=300, help="frames per video (default 300)")
    parser.add_argument("--batches", type=int, default=30, help="timed train batches (default 30)")
    parser.add_argument("--warmup", type=int, default=5, help="train batches before timing (default 5)")
    parser.add_argument("--repeats", type=int, default=3, help="whole-video passes (default 3)")
    arguments = parser.parse_args()
    width, height = (int(value) for value in arguments.size.split("x"))
    results: dict = {"size": [width, height], "frames_per_video": arguments.frames, "codecs": {}}
    with tempfile.TemporaryDirectory() as folder:
        for codec in arguments.codecs.split(","):
            started = time.perf_counter()
            videos = make_codec_set(Path(folder), codec, arguments.videos, width, height, arguments.frames)
            entry: dict = {"encode_seconds": time.perf_counter() - started, "videos": len(videos)}
            for device in (arguments.device, "cpu"):
                entry[device] = {
                    "check": check_frames(videos[0], device),
                    "whole_video": whole_video(videos[0], device, arguments.repeats),
                    "train": train(videos, device, arguments.batches, arguments.warmup),
                }
                print(codec, device, entry[device]["whole_video"]["rate"], entry[device]["train"], flush=True)
            gpu, cpu = entry[arguments.device], entry["cpu"]
            entry["gpu_over_cpu"] = {
                "whole_video": gpu["whole_video"]["rate"] / cpu["whole_video"]["rate"],
                "train": gpu["train"]["clips_per_second"] / cpu["train"]["clips_per_second"],
            }
            results["codecs"][codec] = entry
    print("saved", save_results("codecs", results, arguments.out))


if __name__ == "__main__":
    main()
