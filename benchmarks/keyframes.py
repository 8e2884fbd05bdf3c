"""Keyframe extraction: ``vclip keyframes --method codec`` against decoding every frame.

Video: design.md's recipe at 1920x1080, H.264, 300 frames at 30 fps, a keyframe every 60 frames
(5 keyframes), 2 B-frames. On the CPU, and on the GPU when NVDEC is usable, medians of 5 runs after
a warm-up, with the video's index cached (as it is after the first look at a file):

- ``codec``: ``vclip.keyframes.extract_keyframes(path, method="codec")``, what the command runs
  per file: a new decoder, then only the 5 keyframe packets decoded, RGB frames out.
- ``codec_reused_decoder``: ``VideoDecoder.get_frames(keyframe_indices)`` on a decoder made once.
- ``every_frame``: ``VideoDecoder.get_frames(all 300)``: every frame decoded and converted to RGB,
  as a tool that reads all frames and keeps the keyframes does.
- CPU only, for reference: ``pyav_decode_every_frame`` (PyAV decodes every frame, converts only
  the keyframes: the least work when every frame is decoded) and ``pyav_skip_nonkey`` (PyAV with
  ``skip_frame="NONKEY"``, FFmpeg's ``-skip_frame nokey``).

Every path is checked first: the barcodes of its frames must be the keyframe numbers.
Target: ``codec`` at least 20x faster than ``every_frame``.

Also recorded: the keyframes' share of the stream's bytes and of a single-threaded decode of every
packet. Decoding only the keyframes cannot be faster than ``1 / share`` times a decode of every
frame: with this recipe's noise textures the I-frames are big, which caps the CPU speedup.

    python benchmarks/keyframes.py [--out DIR] [--videos DIR]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import av
import numpy as np
from common import median_rate, save_results

import vclip
from vclip._device import gpu_unavailable_reason
from vclip._outputs.images import to_numpy
from vclip.keyframes import extract_keyframes
from vclip.synthetic import make_video, read_barcode

TARGET_SPEEDUP = 20.0
NUM_FRAMES, KEYFRAME_INTERVAL = 300, 60


def make_benchmark_video(folder: Path) -> str:
    path = folder / "keyframes_1080p.mp4"
    if not path.exists():
        make_video(
            path,
            num_frames=NUM_FRAMES,
            width=1920,
            height=1080,
            fps=30,
            keyframe_interval=KEYFRAME_INTERVAL,
            b_frames=2,
            crf=23,
            preset="veryfast",
        )
    return str(path)


def pyav_decode_every_frame(path: str) -> list[np.ndarray]:
    with av.open(path) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        return [frame.to_ndarray(format="rgb24") for frame in container.decode(stream) if frame.key_frame]


def pyav_skip_nonkey(path: str) -> list[np.ndarray]:
    with av.open(path) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        stream.codec_context.skip_frame = "NONKEY"
        return [frame.to_ndarray(format="rgb24") for frame in container.decode(stream)]


def keyframe_shares(path: str) -> dict:
    """The keyframes' share of the stream's bytes and of the time a one-thread decoder spends on all packets."""
    index = vclip.index_video(path)
    key_seconds = all_seconds = 0.0
    with av.open(path) as container:
        stream = container.streams[index.stream_index]
        stream.codec_context.thread_count = 1
        for packet in container.demux(stream):
            started = time.perf_counter()
            stream.codec_context.decode(packet)
            spent = time.perf_counter() - started
            all_seconds += spent
            key_seconds += spent if packet.is_keyframe else 0.0
    return {
        "keyframe_share_of_bytes": float(index.packet_size[index.packet_is_keyframe].sum() / index.packet_size.sum()),
        "keyframe_share_of_decode_time": key_seconds / all_seconds,
        "decode_only_speedup_ceiling": all_seconds / key_seconds,
    }


def measure(path: str, device: str) -> dict:
    """Seconds per call of each way to get the keyframes on ``device``, after checking each one."""
    index = vclip.index_video(path)
    keyframes = index.keyframe_indices.tolist()
    decoder = vclip.VideoDecoder(path, device=device)
    every_frame = np.arange(index.num_frames)
    ways = {
        "codec": lambda: to_numpy(extract_keyframes(path, method="codec", device=device).frames),
        "codec_reused_decoder": lambda: to_numpy(decoder.get_frames(keyframes).data),
        "every_frame": lambda: to_numpy(decoder.get_frames(every_frame).data)[keyframes],
    }
    if device == "cpu":
        ways["pyav_decode_every_frame"] = lambda: pyav_decode_every_frame(path)
        ways["pyav_skip_nonkey"] = lambda: pyav_skip_nonkey(path)
    results = {}
    for name, run_once in ways.items():
        found = [read_barcode(frame) for frame in run_once()]
        if found != keyframes:
            raise AssertionError(f"{name} on {device}: frames {found}, keyframes are {keyframes}")
        results[name] = median_rate(run_once, units_per_run=len(keyframes))
    packets_before = decoder.stats.packets_sent
    decoder.get_frames(keyframes)
    results["codec_packets_decoded"] = decoder.stats.packets_sent - packets_before
    every_frame_seconds = results["every_frame"]["median_seconds"]
    results["speedup_vs_every_frame"] = {
        name: every_frame_seconds / results[name]["median_seconds"] for name in ways if name != "every_frame"
    }
    results["target_met"] = results["speedup_vs_every_frame"]["codec"] >= TARGET_SPEEDUP
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="folder for keyframes.json (default: $OUT or results/)")
    parser.add_argument("--videos", help="folder to keep the benchmark video in (default: a temporary folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(args.videos or scratch)
        folder.mkdir(parents=True, exist_ok=True)
        path = make_benchmark_video(folder)
        index = vclip.index_video(path)
        results = {
            "video": {
                "width": index.width,
                "height": index.height,
                "frames": index.num_frames,
                "keyframes": index.keyframe_indices.tolist(),
                "packets": index.num_packets,
                "bytes": Path(path).stat().st_size,
            },
            "target_speedup": TARGET_SPEEDUP,
            **keyframe_shares(path),
            "cpu": measure(path, "cpu"),
        }
        reason = gpu_unavailable_reason()
        results["gpu"] = measure(path, "cuda") if reason is None else {"skipped": reason}
    for device in ("cpu", "gpu"):
        if "skipped" in results[device]:
            print(f"{device}: skipped ({results[device]['skipped']})")
            continue
        print(f"{device}:")
        for name, speedup in results[device]["speedup_vs_every_frame"].items():
            seconds = results[device][name]["median_seconds"]
            print(f"  {name:<24} {seconds * 1e3:9.1f} ms  {speedup:6.1f}x faster than every_frame")
        print(f"  {'every_frame':<24} {results[device]['every_frame']['median_seconds'] * 1e3:9.1f} ms")
        print(f"  target {TARGET_SPEEDUP:g}x: {'met' if results[device]['target_met'] else 'NOT met'}")
    print(
        f"keyframes: {results['keyframe_share_of_bytes']:.0%} of the bytes, "
        f"{results['keyframe_share_of_decode_time']:.0%} of one-thread decode time "
        f"(a keyframes-only decode can be at most {results['decode_only_speedup_ceiling']:.1f}x faster)"
    )
    print(f"saved {save_results('keyframes', results, args.out)}")


if __name__ == "__main__":
    main()
