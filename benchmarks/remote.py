"""Videos read over the network: bytes per clip over HTTP, and train clips/s from S3 against local files.

1. Bytes per clip: one long H.264 video (``--duration`` seconds at ``--size``, 30 fps, keyframe every
   ``--keyframe-interval``, 2 B-frames) served by a local HTTP server that honours Range requests
   (tests/range_server.py) and counts the bytes it sends. It is indexed once over HTTP (one pass over
   the file), then ``--clips`` clips of 16 frames at stride 2 from random starts are decoded one by one;
   per clip: bytes served, requests, and the bytes of the packets its decode plan needs. Every clip's
   barcodes are checked.
2. Clips/s: the train workload of benchmarks/loader.py (batches of 8 clips, 16 frames at stride 2,
   224x224 ImageNet-normalized) on ``--s3-videos`` videos of the ``--set`` set, from a local
   S3-compatible server (moto) through s3fs, against the same files on local disk, in ``--repeats``
   alternated passes (medians); same clips (checked: frame indices and pixels of the first batch).

``--parts http`` or ``--parts s3`` measures one of them (results in remote_http.json / remote_s3.json).

    python benchmarks/remote.py --out results/ --device cpu                                   # CPU, small
    python benchmarks/remote.py --out results/ --device cuda --size 1920x1080 --duration 600 --set 1080p
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import make_video_set, save_results

import vclip
from vclip._outputs.images import to_numpy
from vclip.synthetic import BARCODE_BITS, make_video, read_barcode

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from range_server import range_server, s3_server

LENGTH, STRIDE, BATCH, SIZE = 16, 2, 8, 224
SPEC = vclip.TransformSpec.imagenet(SIZE, layout="TCHW")


def _long_video(folder: Path, width: int, height: int, seconds: int, keyframe_interval: int) -> Path:
    path = folder / f"long_{width}x{height}_{seconds}s_gop{keyframe_interval}.mp4"
    if not path.exists():
        make_video(
            path,
            num_frames=30 * seconds,
            width=width,
            height=height,
            fps=30,
            keyframe_interval=keyframe_interval,
            b_frames=2,
            adaptive_b_frames=False,
            preset="veryfast",
        )
    return path


def bytes_per_clip(video: Path, clips: int, device: str) -> dict:
    """Index the video over HTTP, then decode ``clips`` random clips one at a time, counting bytes."""
    size = video.stat().st_size
    with range_server(video.parent) as server:
        url = server.url(video.name)
        started = time.perf_counter()
        decoder = vclip.VideoDecoder(url, device=device)
        index_seconds = time.perf_counter() - started
        index_bytes = server.bytes_sent
        index = decoder.index
        rng = np.random.default_rng(0)
        per_clip = []
        for start in rng.integers(0, index.num_frames - (LENGTH - 1) * STRIDE, clips).tolist():
            frames = list(range(start, start + LENGTH * STRIDE, STRIDE))
            server.reset_counts()
            began = time.perf_counter()
            data = to_numpy(decoder.get_frames(frames).data)
            seconds = time.perf_counter() - began
            found = [read_barcode(frame) for frame in data]
            if found != [frame % 2**BARCODE_BITS for frame in frames]:  # the barcode counts modulo 4096
                raise AssertionError(f"clip from {start}: frames {found}, not {frames}")
            first = index.decode_start_packet(start)
            last = int(index.frame_packet[frames].max())
            per_clip.append(
                {
                    "start": start,
                    "bytes": server.bytes_sent,
                    "requests": len(server.requests),
                    "packet_bytes_from_keyframe": int(index.packet_size[first : last + 1].sum()),
                    "seconds": seconds,
                }
            )
    sent = [clip["bytes"] for clip in per_clip]
    return {
        "file": video.name,
        "file_bytes": size,
        "frames": index.num_frames,
        "width": index.width,
        "height": index.height,
        "keyframes": int(index.keyframe_indices.size),
        "index_pass": {"bytes": index_bytes, "fraction_of_file": index_bytes / size, "seconds": index_seconds},
        "clip": {"frames": LENGTH, "stride": STRIDE, "count": clips},
        "bytes_per_clip": {
            "median": statistics.median(sent),
            "mean": statistics.fmean(sent),
            "max": max(sent),
            "median_fraction_of_file": statistics.median(sent) / size,
        },
        "requests_per_clip_median": statistics.median(c["requests"] for c in per_clip),
        "seconds_per_clip_median": statistics.median(c["seconds"] for c in per_clip),
        "per_clip": per_clip,
    }


def _loader(videos: list[str], device: str, batches: int, processes: int) -> vclip.ClipLoader:
    return vclip.ClipLoader(
        [(video, 0) for video in videos],
        vclip.strided(LENGTH, STRIDE),
        transform=SPEC,
        batch_size=BATCH,
        clips_per_video=max(1, -(-batches * BATCH // len(videos))),
        shuffle=True,
        seed=0,
        drop_last=True,
        device=device,
        decode_processes=processes,
    )


def _clips_per_second(loader: vclip.ClipLoader, batches: int, warmup: int, device: str) -> tuple[float, object]:
    iterator = iter(loader)
    first = next(iterator)
    first = (first.frame_indices.clone(), first.data.cpu().clone())
    for _ in range(warmup - 1):
        next(iterator)
    started = time.perf_counter()
    for _ in range(batches):
        batch = next(iterator)
    if device != "cpu":
        import torch

        torch.cuda.synchronize()
    del batch
    return batches * BATCH / (time.perf_counter() - started), first


def s3_against_local(
    folder: Path, video_set: str, count: int, device: str, batches: int, warmup: int, processes: int, repeats: int
) -> dict:
    """Train-workload clips/s from a local S3-compatible server and from local files (median of
    ``repeats`` alternated passes each)."""
    import boto3

    paths = make_video_set(folder, video_set, count=count)
    for name, value in (
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
    ):
        os.environ[name] = value
    with s3_server() as endpoint:
        os.environ["FSSPEC_S3_ENDPOINT_URL"] = endpoint  # decode processes read fsspec's config from here
        import fsspec

        fsspec.config.conf["s3"] = {"endpoint_url": endpoint}
        client = boto3.client("s3", endpoint_url=endpoint)
        client.create_bucket(Bucket="videos")
        for path in paths:
            client.upload_file(path, "videos", Path(path).name)
        urls = [f"s3://videos/{Path(path).name}" for path in paths]
        total = batches + warmup
        rates: dict[str, list[float]] = {"s3": [], "local": []}
        firsts = {}
        for _ in range(repeats):  # alternated, so that a busy moment of the machine hits both
            for name, videos in (("s3", urls), ("local", paths)):
                rate, firsts[name] = _clips_per_second(
                    _loader(videos, device, total, processes), batches, warmup, device
                )
                rates[name].append(rate)
    if firsts["s3"][0].tolist() != firsts["local"][0].tolist() or not np.allclose(firsts["s3"][1], firsts["local"][1]):
        raise AssertionError("the S3 loader's first batch differs from the local one")
    remote_rate, local_rate = statistics.median(rates["s3"]), statistics.median(rates["local"])
    return {
        "set": video_set,
        "videos": len(paths),
        "batches": batches,
        "warmup_batches": warmup,
        "batch": [BATCH, LENGTH, 3, SIZE, SIZE],
        "decode_processes": processes,
        "repeats": repeats,
        "runs_clips_per_second": rates,
        "clips_per_second": {"s3": remote_rate, "local": local_rate, "s3_over_local": remote_rate / local_rate},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder for remote.json")
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    parser.add_argument("--size", default="640x360", help="long video's WIDTHxHEIGHT (default 640x360)")
    parser.add_argument("--duration", type=int, default=120, help="long video's seconds (default 120)")
    parser.add_argument("--keyframe-interval", type=int, default=60, help="frames between keyframes (default 60)")
    parser.add_argument("--clips", type=int, default=50, help="clips decoded over HTTP (default 50)")
    parser.add_argument("--set", default="360p", help="video set for the S3 run: 360p or 1080p (default 360p)")
    parser.add_argument("--s3-videos", type=int, default=8, help="videos of the set used (default 8)")
    parser.add_argument("--batches", type=int, default=10, help="timed batches (default 10)")
    parser.add_argument("--warmup", type=int, default=2, help="batches before timing (default 2)")
    parser.add_argument("--repeats", type=int, default=3, help="alternated S3/local passes (default 3)")
    parser.add_argument("--processes", type=int, default=0, help="decode_processes (default 0)")
    parser.add_argument("--videos", default=None, help="folder for the generated videos (default: a temp folder)")
    parser.add_argument("--parts", default="http,s3", help="what to measure: http, s3 or both (default http,s3)")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    if not parts or parts - {"http", "s3"}:
        parser.error(f"--parts takes http, s3 or http,s3, not {args.parts!r}")
    width, height = map(int, args.size.lower().split("x"))
    folder = Path(args.videos or tempfile.mkdtemp(prefix="vclip-remote-"))
    folder.mkdir(parents=True, exist_ok=True)
    results: dict = {"device": args.device}
    if "http" in parts:
        http = bytes_per_clip(
            _long_video(folder, width, height, args.duration, args.keyframe_interval), args.clips, args.device
        )
        print(
            f"HTTP: {http['file_bytes'] / 1e6:.1f} MB file, index pass {http['index_pass']['bytes'] / 1e6:.1f} MB; "
            f"per clip median {http['bytes_per_clip']['median'] / 1e3:.0f} kB "
            f"({100 * http['bytes_per_clip']['median_fraction_of_file']:.2f}% of the file), "
            f"{http['requests_per_clip_median']} requests"
        )
        results["http_bytes_per_clip"] = http
    if "s3" in parts:
        s3 = s3_against_local(
            folder, args.set, args.s3_videos, args.device, args.batches, args.warmup, args.processes, args.repeats
        )
        rates = s3["clips_per_second"]
        print(f"S3 {rates['s3']:.1f} clips/s, local {rates['local']:.1f} clips/s ({rates['s3_over_local']:.2f}x)")
        results["s3_against_local"] = s3
    name = "remote" if parts == {"http", "s3"} else f"remote_{args.parts}"
    print(save_results(name, results, args.out))


if __name__ == "__main__":
    main()
