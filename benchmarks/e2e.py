"""Training real torchvision video models with each loader feeding them: samples/s end to end.

The loaders of benchmarks/train.py are timed alone; a user runs one beside a model that wants the same
GPU and cores. Here each tool feeds a torchvision video model trained with bf16 autocast and
channels-last 3D memory (SGD with momentum, cross-entropy on 400 classes), batches of 32 clips of 16
frames at stride 2, the Kinetics recipe: the shorter side resized to 8/7 of the crop, a random square
crop, a left-right flip half of the time, ImageNet normalization, float32 ``[B, C, T, H, W]`` on the GPU.
Every tool reads the same 64 H.264 videos of 640x360 (benchmarks/common.py, set ``360p``: 300 frames, a
keyframe every 60, 2 B-frames; ``--set`` another set of common.py, e.g. ``1080p``), and each (model, tool)
runs in a fresh process, one after the other.

    python benchmarks/e2e.py --out results/ [--runs r3d_18@112,r3d_18@224,mvit_v2_s@224] [--set 360p]
        [--tools model_alone,vclip-default,vclip-baseline,vclip-short-epochs,vclip-one-clip-long-epochs,
                 vclip-repeated-2,spdl,decord-dataloader]
        [--baseline PATH] [--steps 40] [--warmup 40] [--tools-for RUN=TOOL/TOOL ...]

Tools:

- ``model_alone``: one random batch kept on the GPU, the model's own rate (the ceiling).
- ``vclip-default``: ``vclip.ClipLoader`` as a user writes it: the videos with labels,
  ``vclip.strided(16, 2)``, the recipe as ``TransformSpec.imagenet(crop, train=True, short_side=...,
  layout="CTHW")``, ``batch_size=32, shuffle=True, device="cuda"``, 16 clips per video (32 batches an
  epoch), everything else its default.
- ``vclip-baseline``: the same script run against another checkout of vclip (``--baseline``, a folder
  holding its ``vclip/`` and ``kernels/``), to compare releases in one run.
- ``vclip-short-epochs``: the defaults with one clip per video, so an epoch is two batches and a new
  epoch starts every second step (what an epoch boundary costs, against the next tool).
- ``vclip-one-clip-long-epochs``: the same clips in long epochs: one clip per video, the list of
  videos given 16 times (32 batches an epoch). Its clips decode as those of ``vclip-short-epochs``;
  those of ``vclip-default`` do not (16 clips of a video overlap, and clips of one video in a batch
  share their frames: 2.71 frames decoded per frame delivered against 2.84 on the 640x360 set).
- ``vclip-repeated-2``: the defaults with ``repeated_augmentation=2`` (two augmented samples of each
  decoded clip).
- ``vclip-pynvvideocodec``: the defaults with NVDEC reached through PyNvVideoCodec's decoder
  (``VCLIP_NVDEC_API=pynvvideocodec``) instead of the driver's own API; options may follow as for
  ``vclip:`` (``vclip-pynvvideocodec:decode_processes=0``).
- ``spdl``: SPDL 0.8: each clip's time window demuxed and decoded by NVDEC with its hardware scaler to the
  short side, cropped, flipped and normalized with torch on the GPU; 8 threads, 4 batches ahead.
- ``vclip:NAME=VALUE+...``: the defaults with these ``ClipLoader`` options (e.g.
  ``vclip:decode_processes=0+cpu_decoders=0``), to place a setting beside the defaults.
- ``decord-dataloader``: a ``torch.utils.data.DataLoader`` of 12 workers over a map-style dataset that
  decodes each clip with decord and resizes and crops it with OpenCV on the CPU; pinned memory; flip and
  normalization on the GPU.

The loop waits for the GPU every 10 steps (it reads its loss), as a training loop that logs does.
Each row: samples/s over ``--steps`` timed steps after ``--warmup`` (and its share of
``model_alone``), step time p50/p95 (between the starts of consecutive steps), the share of the time
the step waited for its batch, SM and NVDEC utilisation (NVML, sampled every 50 ms during the timed
steps), the device memory in use during the timed steps above
what ``model_alone`` used (all processes: the loader's own buffers, decoders and contexts), the CPU
cores the training process and its children used, and for vclip what ``loader.stats()`` says it chose.
Results in ``<out>/e2e.json``: ``runs.<model>@<size>.tools.<tool>.samples_per_second`` and the rest.
Needs a CUDA GPU, torchvision, and for the comparison tools SPDL and decord.
"""

from __future__ import annotations

import argparse
import os
import queue
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from common import in_fresh_process, make_video_set, nvml, save_results, tool_options, tree_cpu_seconds

BATCH = 32
LENGTH = 16
STRIDE = 2
CLASSES = 400
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
SAMPLE_PERIOD = 0.05
SYNC_EVERY = 10  # steps between waits for the GPU (a loop that logs its loss every 10 steps)
DEFAULT_RUNS = "r3d_18@112,r3d_18@224,mvit_v2_s@224"
DEFAULT_TOOLS = ("model_alone,vclip-default,vclip-baseline,vclip-short-epochs,vclip-one-clip-long-epochs,"
                 "vclip-repeated-2,spdl,decord-dataloader")
ONLY_WHERE_LOADER_BOUND = {"vclip-short-epochs", "vclip-one-clip-long-epochs", "vclip-repeated-2"}  # smallest crop only
LONG_EPOCH_REPEATS = 16  # vclip-one-clip-long-epochs: the videos listed this many times




# -- the batch sources, one per tool (in the training process) ------------------------------------------
def vclip_source(paths, labels, crop, *, clips_per_video=16, **options):
    import vclip

    spec = vclip.TransformSpec.imagenet(crop, train=True, short_side=round(crop * 8 / 7), layout="CTHW")
    batch_size = BATCH // options.get("repeated_augmentation", 1)  # samples per batch: BATCH whatever the repeats
    loader = vclip.ClipLoader(list(zip(paths, labels)), vclip.strided(LENGTH, STRIDE), transform=spec,
                              batch_size=batch_size, shuffle=True, seed=0, device="cuda",
                              clips_per_video=clips_per_video, **options)

    def batches():
        epoch = 0
        while True:
            loader.set_epoch(epoch)
            for batch in loader:
                yield batch.data, batch.labels
            epoch += 1

    return batches(), loader


def _crop_flip_normalize(torch, frames_tchw_uint8, crop, rng):
    """[T, 3, h, w] uint8 on the GPU -> [3, T, crop, crop] float32: a random crop, a flip half of the time."""
    _, _, height, width = frames_tchw_uint8.shape
    y, x = int(rng.integers(0, height - crop + 1)), int(rng.integers(0, width - crop + 1))
    clip = frames_tchw_uint8[:, :, y:y + crop, x:x + crop].float().div_(255)
    if rng.random() < 0.5:
        clip = clip.flip(-1)
    mean = torch.tensor(MEAN, device=clip.device).view(1, 3, 1, 1)
    std = torch.tensor(STD, device=clip.device).view(1, 3, 1, 1)
    return clip.sub_(mean).div_(std).transpose(0, 1)


def spdl_source(paths, labels, crop, threads=8, ahead=4):
    import spdl.io
    import torch

    import vclip

    indexes = [vclip.index_video(path) for path in paths]
    short = round(crop * 8 / 7)
    span = (LENGTH - 1) * STRIDE + 1
    local = threading.local()

    def clip(number: int, seed: int):
        rng = np.random.default_rng(seed)
        index = indexes[number]
        start = int(rng.integers(0, index.num_frames - span + 1))
        begin = float(index.pts_seconds[start])
        end = float(index.pts_seconds[start + span - 1]) + 0.5 / index.average_fps
        if not hasattr(local, "stream"):
            local.stream = torch.cuda.Stream()
        with torch.cuda.stream(local.stream):
            packets = spdl.io.demux_video(paths[number], timestamp=(begin, end))
            width = round(index.width * short / index.height) // 2 * 2
            buffer = spdl.io.decode_packets_nvdec(packets, device_config=spdl.io.cuda_config(device_index=0),
                                                  scale_width=width, scale_height=short)
            frames = spdl.io.to_torch(buffer)[::STRIDE][:LENGTH]  # [T, 3, short, width] uint8
            out = _crop_flip_normalize(torch, frames, crop, rng)
            local.stream.synchronize()
        return out

    pool = ThreadPoolExecutor(threads)
    ready: queue.Queue = queue.Queue(ahead)
    stop = threading.Event()

    def produce():
        rng = np.random.default_rng(0)
        while not stop.is_set():
            numbers = rng.integers(0, len(paths), BATCH)
            futures = [pool.submit(clip, int(n), int(rng.integers(2**31))) for n in numbers]
            data = torch.stack([f.result() for f in futures])
            ready.put((data, torch.as_tensor([labels[n] for n in numbers], device="cuda")))

    threading.Thread(target=produce, daemon=True).start()

    def batches():
        while True:
            yield ready.get()

    return batches(), None


class DecordClips:
    """A map-style dataset: item ``i`` is a random clip of video ``i % len(paths)``, decoded by decord and
    resized (short side) and cropped by OpenCV, as uint8 ``[T, crop, crop, 3]``."""

    def __init__(self, paths, labels, crop, length):
        self.paths, self.labels, self.crop, self.length = paths, labels, crop, length

    def __len__(self):
        return self.length

    def __getitem__(self, item):
        import cv2
        import decord

        rng = np.random.default_rng(item)
        number = item % len(self.paths)
        reader = decord.VideoReader(self.paths[number], ctx=decord.cpu(0), num_threads=1)
        span = (LENGTH - 1) * STRIDE + 1
        start = int(rng.integers(0, len(reader) - span + 1))
        frames = reader.get_batch(list(range(start, start + span, STRIDE))).asnumpy()
        height, width = frames.shape[1:3]
        short = round(self.crop * 8 / 7)
        size = (round(width * short / height), short)
        frames = np.stack([cv2.resize(frame, size, interpolation=cv2.INTER_AREA) for frame in frames])
        y, x = int(rng.integers(0, short - self.crop + 1)), int(rng.integers(0, size[0] - self.crop + 1))
        return frames[:, y:y + self.crop, x:x + self.crop], self.labels[number]


def decord_source(paths, labels, crop, workers=12):
    import torch

    dataset = DecordClips(paths, labels, crop, length=10**7)
    loader = torch.utils.data.DataLoader(dataset, batch_size=BATCH, shuffle=True, num_workers=workers,
                                         pin_memory=True, persistent_workers=True, prefetch_factor=4)
    mean = torch.tensor(MEAN, device="cuda").view(1, 3, 1, 1, 1)
    std = torch.tensor(STD, device="cuda").view(1, 3, 1, 1, 1)
    flips = np.random.default_rng(1)

    def batches():
        for frames, batch_labels in loader:
            data = frames.cuda(non_blocking=True).permute(0, 4, 1, 2, 3).float().div_(255)  # [B, 3, T, H, W]
            flip = torch.as_tensor(flips.random(BATCH) < 0.5, device="cuda")
            data = torch.where(flip.view(-1, 1, 1, 1, 1), data.flip(-1), data)
            yield data.sub_(mean).div_(std), batch_labels.cuda(non_blocking=True)

    return batches(), None


# -- one (model, tool) in the training process ------------------------------------------------------------
def train(tool: str, model_name: str, crop: int, paths: list[str], steps: int, warmup: int,
          baseline: str | None) -> dict:
    if tool == "vclip-baseline":  # this checkout's vclip was imported with common.py: forget it
        for name in [name for name in sys.modules if name == "vclip" or name.startswith("vclip.")]:
            del sys.modules[name]
        sys.path.insert(0, baseline)
    import torch
    import torchvision

    torch.backends.cudnn.benchmark = True
    labels = [number % CLASSES for number in range(len(paths))]
    model = getattr(torchvision.models.video, model_name)(num_classes=CLASSES).cuda()
    model = model.to(memory_format=torch.channels_last_3d)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    loader = None
    built = time.perf_counter()
    if tool == "model_alone":
        data = torch.randn(BATCH, 3, LENGTH, crop, crop, device="cuda")
        targets = torch.randint(0, CLASSES, (BATCH,), device="cuda")

        def kept():
            while True:
                yield data, targets

        source = kept()
    elif tool.startswith("vclip"):
        options = tool_options(tool)
        if tool in ("vclip-short-epochs", "vclip-one-clip-long-epochs"):
            options["clips_per_video"] = 1
        if tool == "vclip-one-clip-long-epochs":
            paths, labels = paths * LONG_EPOCH_REPEATS, labels * LONG_EPOCH_REPEATS
        if tool == "vclip-repeated-2":
            options["repeated_augmentation"] = 2
        if tool.partition(":")[0] == "vclip-pynvvideocodec":
            os.environ["VCLIP_NVDEC_API"] = "pynvvideocodec"  # this fresh process only
        source, loader = vclip_source(paths, labels, crop, **options)
    elif tool == "spdl":
        source, loader = spdl_source(paths, labels, crop)
    elif tool == "decord-dataloader":
        source, loader = decord_source(paths, labels, crop)
    else:
        raise SystemExit(f"unknown tool {tool}")

    waits, starts = [], []
    first_batch_seconds = None
    cpu_start = wall_start = window_start = None
    for step in range(warmup + steps):
        if step == warmup:
            torch.cuda.synchronize()
            cpu_start, wall_start, window_start = tree_cpu_seconds(os.getpid()), time.perf_counter(), time.time()
        started = time.perf_counter()
        if step >= warmup:
            starts.append(started)
        data, targets = next(source)
        got = time.perf_counter()
        if first_batch_seconds is None:
            first_batch_seconds = got - built
        data = data.contiguous(memory_format=torch.channels_last_3d)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(data), targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if (step + 1) % SYNC_EVERY == 0:
            float(loss)  # the loop reads its loss now and then, which waits for the GPU
        if step >= warmup:
            waits.append(got - started)
    torch.cuda.synchronize()
    wall = time.perf_counter() - wall_start
    step_seconds = list(np.diff(starts + [time.perf_counter()]))
    row = {
        "samples_per_second": BATCH * steps / wall,
        "step_seconds_p50": statistics.median(step_seconds),
        "step_seconds_p95": float(np.percentile(step_seconds, 95)),
        "wait_share": sum(waits) / wall,
        "cpu_cores_used": (tree_cpu_seconds(os.getpid()) - cpu_start) / wall,
        "first_batch_seconds": first_batch_seconds,
        "window": [window_start, time.time()],
        "loss": float(loss.detach()),
    }
    if loader is not None and hasattr(loader, "stats"):
        stats = loader.stats()
        row["loader_stats"] = stats.to_dict() if hasattr(stats, "to_dict") else str(stats)
        row["loader_stats_line"] = str(stats)
        row["memory_estimate_bytes"] = int(loader.memory_estimate.total)
    if loader is not None and hasattr(loader, "close"):
        loader.close()
    return row


class Sampler:
    """NVML samples of GPU 0 (SM and NVDEC utilisation, used memory), timestamped, in a background thread."""

    def __init__(self):
        self.nvml = nvml()
        self.samples: list[tuple[float, int | None, int | None, int | None]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.wait(SAMPLE_PERIOD):
            sample = (self.nvml.sm_utilization(), self.nvml.decoder_utilization(), self.nvml.memory_used())
            if None not in sample:  # NVML could answer every question
                self.samples.append((time.time(), *sample))

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *_):
        self._stop.set()
        self._thread.join()

    def within(self, window) -> dict:
        inside = [s for s in self.samples if window[0] <= s[0] <= window[1]]
        if not inside:
            return {"sm_utilization": None, "nvdec_utilization": None, "memory_used_bytes": None}
        return {
            "sm_utilization": statistics.mean(s[1] for s in inside),
            "nvdec_utilization": statistics.mean(s[2] for s in inside),
            "memory_used_bytes": max(s[3] for s in inside),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None)
    parser.add_argument("--videos", default="/tmp/vclip-e2e-videos")
    parser.add_argument("--set", default="360p", help="the video set of benchmarks/common.py every tool reads")
    parser.add_argument("--runs", default=DEFAULT_RUNS)
    parser.add_argument("--tools", default=DEFAULT_TOOLS)
    parser.add_argument("--baseline", default=None, help="a folder with another checkout's vclip/ and kernels/")
    parser.add_argument("--tools-for", action="append", default=[], metavar="RUN=TOOL/TOOL",
                        help="the tools of one run instead of --tools, e.g. mvit_v2_s@224=model_alone/vclip-default")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=40, help="steps first, untimed: the pacing settles")
    args = parser.parse_args()
    paths = make_video_set(args.videos, args.set)
    tools = [tool for tool in args.tools.split(",") if tool != "vclip-baseline" or args.baseline]
    chosen = dict(item.split("=", 1) for item in args.tools_for)
    runs = args.runs.split(",")
    smallest = min(int(run.split("@")[1]) for run in runs)
    results: dict = {"batch_size": BATCH, "sequence_length": LENGTH, "stride": STRIDE, "videos": args.set,
                     "baseline": args.baseline, "runs": {}}
    with Sampler() as sampler:
        for run in runs:
            model_name, size = run.split("@")
            crop = int(size)
            rows: dict = {}
            results["runs"][run] = {"model": model_name, "crop": crop, "tools": rows}
            for tool in (chosen[run].split("/") if run in chosen else tools):
                if tool in ONLY_WHERE_LOADER_BOUND and crop != smallest:
                    continue
                try:
                    row = in_fresh_process(train, tool, model_name, crop, paths, args.steps, args.warmup,
                                           str(Path(args.baseline).resolve()) if args.baseline else None)
                except Exception as error:  # one tool failing leaves the others' figures
                    rows[tool] = {"error": f"{type(error).__name__}: {error}"}
                    print(f"{run} {tool}: {rows[tool]['error']}", flush=True)
                    continue
                row.update(sampler.within(row["window"]))
                rows[tool] = row
                alone = rows.get("model_alone", {})
                if alone.get("samples_per_second"):
                    row["share_of_model_alone"] = row["samples_per_second"] / alone["samples_per_second"]
                    if row.get("memory_used_bytes") and alone.get("memory_used_bytes"):
                        row["memory_above_model_alone_bytes"] = row["memory_used_bytes"] - alone["memory_used_bytes"]
                print(f"{run} {tool}: {row['samples_per_second']:.0f} samples/s"
                      f" ({row.get('share_of_model_alone', 1):.2f} of the model alone), wait {row['wait_share']:.0%},"
                      f" SM {row['sm_utilization']}, NVDEC {row['nvdec_utilization']},"
                      f" +{(row.get('memory_above_model_alone_bytes') or 0) / 2**30:.2f} GiB,"
                      f" {row['cpu_cores_used']:.1f} cores, first batch {row['first_batch_seconds']:.2f} s"
                      + (f"\n    {row['loader_stats_line']}" if "loader_stats_line" in row else ""), flush=True)
                save_results("e2e", results, args.out)
    print(f"saved {save_results('e2e', results, args.out)}")


if __name__ == "__main__":
    main()
