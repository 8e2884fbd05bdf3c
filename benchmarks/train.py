"""The "train" workload of design.md, vclip side by side with the tools users would pick instead.

Batches of 8 clips, 16 frames at stride 2 from a random start in a random video, resized to
224x224, ImageNet-normalized float32 [8, 16, 3, 224, 224] on the GPU. Every tool but vclip-default
(whose loader draws its own) gets the same clips. Each tool is checked first (the barcodes of the
frames it returns must be the requested frame numbers), then warmed up, then timed over whole
batches with the GPU synchronized.

    python benchmarks/train.py --out results/ [--sets 360p,1080p,720p-h264-gop250,720p-hevc-gop250]
        [--tools vclip-default,vclip,spdl,pynvc,pyav,decord]
    python benchmarks/train.py --settle 12 ...   (vclip-default timed once its pacing has settled)
    python benchmarks/train.py --device cpu --sets 360p --tools vclip-default,vclip --batches 2 --out /tmp/smoke
        (a smoke test of the vclip rows on a machine without a GPU: the other tools and the extras need CUDA)

Tools, in this order in each set:

- ``vclip-default``: ``vclip.ClipLoader`` as a new user writes it, in a fresh process: the videos,
  ``vclip.strided(16, 2)``, ``TransformSpec.imagenet(224, layout="TCHW", resize_mode="squash")``,
  ``device="cuda"``, ``batch_size=8`` (and ``shuffle=True`` with enough ``clips_per_video`` for one
  epoch to hold every batch: the workload's random clips of random videos), everything else its
  default. Its first batch is checked by the barcodes of the frames it names, then 5 warmup
  batches and the batches its queue decoded ahead (``prefetch_queue_depth + 1``, so that the timed
  window runs at the rate the decoders keep up), then the timed ones; the row keeps what the
  loader chose (``loader.stats()``, its decode workers, processes, CPU decoders and prefetch
  depth) and its memory estimate
  (``loader.memory_estimate``) beside the measured peak: ``memory_measured_over_estimate`` is the
  NVML peak above the baseline over the estimate (the fresh process's CUDA context included in
  both). It draws its own clips (the loader's seeded sampler), not the other tools' list.
- ``vclip-default:KEY=VALUE+...``: the same loader with these options set (``decode_processes=3``,
  ``cpu_decoders=11``, ...), the rest left to it.
- ``vclip``: vclip's engine under the loader (``ThreadDispatcher`` on the NVDEC backend and fused kernel)
  on the given clips, swept over ``--workers``, ``--processes``, ``--in-flight`` and
  ``--cpu-decoders`` (PyAV decoders beside NVDEC whose pictures the same kernel converts; "auto":
  as the loader's, the cores left free beside decode processes with at least 16 batches in
  flight, else none; a configuration where "auto" gives a count swept anyway is not run twice,
  ``same_configurations`` says which).
- ``spdl``, ``pynvc`` (PyNvVideoCodec SimpleDecoder), ``pyav`` and ``decord`` (both with OpenCV's
  resize): hand-written loaders, a pool of threads with one clip each, batches stacked by torch.

GPU memory of every tool: the whole device's used memory of GPU 0 (every process, as nvidia-smi
counts it, nothing subtracted) sampled through NVML every 20 ms by a background thread from the
tool's construction to its close (benchmarks/common.py, GpuSampler): ``gpu_memory_bytes`` is the
peak, ``gpu_memory_baseline_bytes`` what the device used before the tool started,
``gpu_memory_above_baseline_bytes`` the difference. The tools other than vclip-default run in this
process one after the other, so a baseline holds the CUDA context and what the tools before kept
(vclip's NVDEC decoders are shared per process; torch's and CuPy's caches are emptied between
tools). Without NVML (no driver library, no pynvml) the figures are None.

Video sets (benchmarks/common.py, VIDEO_SETS; generated once into ``--videos``): ``360p`` (64
videos) and ``1080p`` (16), H.264 of 300 frames with a keyframe every 60; ``720p-h264-gop250`` and
``720p-hevc-gop250``, 16 videos of 500 frames at 1280x720 with a keyframe every 250 (the long-GOP
web-video case of benchmarks/long_gop.py), in H.264 and in HEVC. Timed batches per tool: 100 at
360p, 16 on the other sets (``--batches`` sets one count for all).

Also measured: the CPU cores used by each timed configuration; decoded frames per delivered frame
(vclip's decode plans with and without skipping non-reference pictures, on any machine); and with
``--extras``, on a GPU: raw NVDEC frames/s through vclip's backend, the decode capacity (whole-file
pictures/s) of NVDEC alone, of the CPU decoders alone and of both from one queue (the ceiling of
the hybrid configurations), the best vclip configuration again without skipping, and the fused
kernel's bytes/s against a device-to-device copy.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from common import (
    GpuSampler,
    in_fresh_process,
    make_video_set,
    median_rate,
    nvml,
    save_results,
    tool_options,
    tree_cpu_seconds,
)

import vclip
from vclip._device import resolve_device
from vclip._engine import (
    ClipTarget,
    DecoderPool,
    DecodeStats,
    PooledBackend,
    ThreadDispatcher,
    VideoRequest,
    resolve_cpu_decoders,
    resolve_transform,
)
from vclip._loader.pacing import PACING
from vclip.synthetic import read_barcode

BATCH, LENGTH, STRIDE, SIZE = 8, 16, 2, 224
MEAN = np.array(vclip.IMAGENET_MEAN, np.float32)
STD = np.array(vclip.IMAGENET_STD, np.float32)
SPEC = vclip.TransformSpec.imagenet(SIZE, layout="TCHW", resize_mode="squash")  # design.md's workload
DEFAULT_TOOL = "vclip-default"
MEMORY_PERIOD = 0.02  # seconds between two NVML samples of the GPU's used memory
SETTLE_LIMIT = 400  # the most batches --settle waits for the pacing to settle
# --settle also waits this long after the pacing's last change: a decode process it started takes
# about 2 s to be ready, and a count that changed takes some batches to show in the rate
SETTLE_QUIET_SECONDS = 4.0


def make_batches(paths: list[str], count: int, seed: int = 0) -> list[list[tuple[str, np.ndarray]]]:
    """``count`` batches of (video, frame indices): a random video, a random start in [0, frames - 31]
    of that video (a 300-frame video: [0, 269])."""
    rng = np.random.default_rng(seed)
    span = (LENGTH - 1) * STRIDE + 1
    frames = {path: vclip.index_video(path).num_frames for path in paths}
    batches = []
    for _ in range(count):
        batch = []
        for _ in range(BATCH):
            path = paths[rng.integers(len(paths))]
            batch.append((path, rng.integers(0, frames[path] - span + 1) + np.arange(LENGTH) * STRIDE))
        batches.append(batch)
    return batches


def unnormalized_barcodes(clip_tchw) -> list[int]:
    """Frame numbers read from a normalized [T, 3, H, W] clip (torch or CuPy)."""
    array = clip_tchw.cpu().numpy() if hasattr(clip_tchw, "cpu") else getattr(clip_tchw, "get", lambda: clip_tchw)()
    rgb = array.transpose(0, 2, 3, 1) * STD + MEAN
    return [read_barcode(np.clip(frame, 0, 1)) for frame in rgb]


# -- tools ---------------------------------------------------------------------------------------
def cpu_seconds() -> float:
    """CPU time (user + system) of this process and every process it started that is alive now
    (decode worker processes, audio helpers, DataLoader workers)."""
    return tree_cpu_seconds(os.getpid())


class VclipTool:
    """vclip's NVDEC backend and fused kernel, several batches in flight; with ``processes``,
    decoded in that many worker processes of ``workers`` threads each; with ``cpu_decoders``, that
    many PyAV decoders beside NVDEC take jobs from the same queue (their pictures go through the
    same kernel)."""

    name = "vclip"

    def __init__(
        self,
        workers: int,
        in_flight: int = 3,
        processes: int = 0,
        cpu_decoders: int | str = 0,
        *,
        skip_non_reference: bool = True,
        device: str = "cuda",
    ):
        from vclip._engine import make_backend

        resolved = resolve_device(device).device
        backend = make_backend(
            resolved,
            skip_non_reference=skip_non_reference,
            processes=processes,
            threads=workers,
            cpu_decoders=int(resolve_cpu_decoders(cpu_decoders, gpu=resolved.is_cuda, decode_processes=processes)),
        )
        self.backend = backend
        self.runner = (
            backend.dispatcher()
            if isinstance(backend, PooledBackend)
            else ThreadDispatcher(backend, num_workers=0 if processes else workers)
        )
        self.spec = SPEC
        self.conversion = resolve_transform(self.spec)
        self.stats = DecodeStats()
        self.in_flight = in_flight
        self.buffers = [backend.empty((BATCH, LENGTH, 3, SIZE, SIZE), "float32") for _ in range(in_flight)]
        self.pool = ThreadPoolExecutor(in_flight)

    def _batch(self, batch, output):
        jobs: dict[str, list[ClipTarget]] = {}
        for slot, (path, frames) in enumerate(batch):
            index = vclip.index_video(path)
            geometry = self.spec.geometry(index.width, index.height)
            jobs.setdefault(path, []).append(ClipTarget(frames, geometry, slot))
        result = self.runner.run(
            [VideoRequest(vclip.index_video(p), tuple(t)) for p, t in jobs.items()], self.conversion, output, self.stats
        )
        assert not any(result.errors), result.errors
        for completion in result.completions:
            completion.synchronize()
        return output

    def run(self, batches) -> list:
        futures = [
            self.pool.submit(self._batch, batch, self.buffers[i % self.in_flight]) for i, batch in enumerate(batches)
        ]
        return [future.result() for future in futures]

    def first_clips(self, batch):
        return self._batch(batch, self.buffers[0])

    def decoders(self) -> dict:
        """Jobs, clips, pictures and busy seconds per decoder kind (hybrid configurations)."""
        kinds = getattr(self.runner, "kind_stats", None)
        return {kind: vars(use) for kind, use in kinds().items()} if kinds else {}

    def close(self) -> None:
        self.runner.close()
        self.backend.close()


def _imagenet_normalize(torch, rgb_tchw):
    """In place: [T, 3, H, W] float in [0, 1] on the GPU -> ImageNet-normalized."""
    mean = torch.tensor(MEAN, device="cuda").view(1, 3, 1, 1)
    std = torch.tensor(STD, device="cuda").view(1, 3, 1, 1)
    return rgb_tchw.sub_(mean).div_(std)


def _normalize_on_gpu(torch, frames_uint8_thwc):
    """[T, H, W, 3] uint8 (host or GPU) -> [T, 3, H, W] float32 normalized, on the GPU."""
    tensor = torch.as_tensor(frames_uint8_thwc).cuda(non_blocking=True).permute(0, 3, 1, 2).float().div_(255)
    return _imagenet_normalize(torch, tensor)


class ClipPoolTool:
    """A pool of threads, one clip each; batches assembled with torch.stack on the GPU."""

    threads = 16

    def __init__(self):
        import torch

        self.torch = torch
        self.pool = ThreadPoolExecutor(self.threads)
        self.local = threading.local()

    def run(self, batches) -> list:
        futures = [[self.pool.submit(self.clip, path, frames) for path, frames in batch] for batch in batches]
        out = [self.torch.stack([f.result() for f in batch]) for batch in futures]
        self.torch.cuda.synchronize()
        return out

    def first_clips(self, batch):
        return self.run([batch])[0]

    def close(self) -> None:
        """Stop the threads (what each kept, such as a PyNvVideoCodec decoder, goes with it)."""
        self.pool.shutdown(wait=True)
        self.local = threading.local()


class PyavTool(ClipPoolTool):
    """PyAV decoding (seek to the keyframe, decode forward), OpenCV resize, 16 threads."""

    name = "pyav+opencv"

    def clip(self, path, frames):
        import av
        import cv2

        wanted = set(frames.tolist())
        index = vclip.index_video(path)  # pts -> frame number, as a hand-written loader would keep
        number_of = dict(zip(index.pts.tolist(), range(index.num_frames)))
        out = {}
        with av.open(path) as container:
            stream = container.streams.video[0]
            stream.codec_context.thread_count = 1
            container.seek(int(index.pts[frames[0]]), stream=stream, backward=True, any_frame=False)
            for frame in container.decode(stream):
                number = number_of.get(frame.pts, -1)
                if number in wanted:
                    out[number] = cv2.resize(
                        frame.to_ndarray(format="rgb24"), (SIZE, SIZE), interpolation=cv2.INTER_AREA
                    )
                if number >= frames[-1]:
                    break
        return _normalize_on_gpu(self.torch, np.stack([out[f] for f in frames.tolist()]))


class DecordTool(ClipPoolTool):
    """decord on the CPU (one reader per video per thread), OpenCV resize, 16 threads."""

    name = "decord+opencv"

    def clip(self, path, frames):
        import cv2
        import decord

        readers = self.local.__dict__.setdefault("readers", {})
        if path not in readers:
            readers[path] = decord.VideoReader(path, ctx=decord.cpu(0), num_threads=1)
        batch = readers[path].get_batch(frames.tolist()).asnumpy()
        return _normalize_on_gpu(
            self.torch, np.stack([cv2.resize(f, (SIZE, SIZE), interpolation=cv2.INTER_AREA) for f in batch])
        )


class PynvcTool(ClipPoolTool):
    """PyNvVideoCodec SimpleDecoder, one per thread reused via reconfigure_decoder, torch resize."""

    name = "pynvvideocodec"
    threads = 8

    def clip(self, path, frames):
        import PyNvVideoCodec as nvc

        torch = self.torch
        decoder = getattr(self.local, "decoder", None)
        if decoder is None:
            decoder = self.local.decoder = nvc.SimpleDecoder(
                path, gpu_id=0, use_device_memory=True, output_color_type=nvc.OutputColorType.RGBP
            )
            self.local.path = path
        elif self.local.path != path:
            decoder.reconfigure_decoder(path)
            self.local.path = path
        decoded = decoder.get_batch_frames_by_index(frames.tolist())
        rgb = torch.stack([torch.from_dlpack(f) for f in decoded]).float().div_(255)
        rgb = torch.nn.functional.interpolate(
            rgb, size=(SIZE, SIZE), mode="bilinear", antialias=True, align_corners=False
        )
        return _imagenet_normalize(torch, rgb)


class SpdlTool(ClipPoolTool):
    """SPDL: demux the clip's time window, NVDEC with its hardware scaler to 224x224, 8 threads."""

    name = "spdl"
    threads = 8

    def clip(self, path, frames):
        import spdl.io

        torch = self.torch
        index = vclip.index_video(path)
        start = float(index.pts_seconds[frames[0]])
        end = float(index.pts_seconds[frames[-1]]) + 0.5 / index.average_fps
        packets = spdl.io.demux_video(path, timestamp=(start, end))
        buffer = spdl.io.decode_packets_nvdec(
            packets, device_config=spdl.io.cuda_config(device_index=0), scale_width=SIZE, scale_height=SIZE
        )
        decoded = spdl.io.to_torch(buffer)  # [N, 3, 224, 224] uint8, frames start..end
        return _imagenet_normalize(torch, decoded[::STRIDE][:LENGTH].float().div_(255))


TOOLS = {"vclip": VclipTool, "pyav": PyavTool, "decord": DecordTool, "pynvc": PynvcTool, "spdl": SpdlTool}


def wrong_clips(clips, wanted: list[tuple[str, list[int]]]) -> list[str]:
    """Barcode check of a batch of normalized clips: which came back without the (video, frames) wanted."""
    wrong = []
    for k, (path, frames) in enumerate(wanted):
        got = unnormalized_barcodes(clips[k])
        if got != frames:
            wrong.append(f"{os.path.basename(path)}: wanted {frames}, got {got}")
    return wrong


def check(tool, batch) -> list[str]:
    """Barcode check of the first batch: which clips came back with the wrong frames."""
    return wrong_clips(tool.first_clips(batch), [(path, frames.tolist()) for path, frames in batch])


def measure(tool, batches, warmup: int) -> dict:
    tool.run(batches[:warmup])
    started, cpu_started = time.perf_counter(), cpu_seconds()
    tool.run(batches[warmup:])
    seconds = time.perf_counter() - started
    clips = (len(batches) - warmup) * BATCH
    return {
        "clips_per_second": clips / seconds,
        "seconds": seconds,
        "clips": clips,
        "cpu_cores_used": (cpu_seconds() - cpu_started) / seconds,
    }


# -- vclip-default: the loader as a new user writes it --------------------------------------------------
def default_loader(paths: list[str], clips_per_video: int, device: str, **options) -> vclip.ClipLoader:
    """``vclip.ClipLoader`` as a new user writes it: the workload and ``device``, every other option
    (decode threads, processes, CPU decoders, prefetch depth) left to the loader, but for
    ``options`` (loader_variants.py's variants).

    The workload is the set's videos, 16 frames at stride 2, the ImageNet transform and 8 clips a
    batch; ``shuffle`` and ``clips_per_video`` (one epoch holds every batch measured) are part of it,
    not tuning: the set's few videos stand in for a dataset of many, visited in random order as the
    other tools draw them (without ``shuffle`` a batch would hold consecutive clips of one video).
    """
    return vclip.ClipLoader(
        [(path, 0) for path in paths],
        vclip.strided(LENGTH, STRIDE),
        transform=SPEC,
        device=device,
        batch_size=BATCH,
        shuffle=True,
        clips_per_video=clips_per_video,
        **options,
    )


def synchronize(device: str) -> None:
    if device != "cpu":
        import torch

        torch.cuda.synchronize()


def measure_default(paths: list[str], batches: int, warmup: int, device: str, settle: int = 0, **options) -> dict:
    """The vclip-default row, in a fresh process (see :func:`in_fresh_process`): the loader built,
    its first batch checked (barcodes), ``warmup`` batches and the batches it decoded ahead (its
    queue), with ``settle`` (> 0) more until the loader's pacing made no change for ``settle``
    batches in a row and :data:`SETTLE_QUIET_SECONDS` (at most :data:`SETTLE_LIMIT` batches), then
    ``batches`` timed batches with the GPU synchronized at both ends; what the loader chose
    (``loader.stats()``) and its memory estimate."""
    depth = options.get("prefetch_queue_depth", "auto")
    deepest = PACING.max_depth if depth == "auto" else depth
    untimed = 1 + warmup + deepest + 1 + (SETTLE_LIMIT if settle else 0)  # the checked batch too
    clips_per_video = math.ceil((untimed + batches) * BATCH / len(paths))
    started = time.perf_counter()
    loader = default_loader(paths, clips_per_video, device, **options)
    construction = time.perf_counter() - started
    iterator = None
    try:
        iterator = iter(loader)
        first = next(iterator)
        wanted = [
            (paths[video], frames) for video, frames in zip(first.video_ids.tolist(), first.frame_indices.tolist())
        ]
        wrong = wrong_clips(first.data, wanted)
        # the batches decoded ahead too: timing starts at the rate the decoders keep up
        for _ in range(warmup + loader.prefetch_queue_depth + 1):
            next(iterator)
        settled, settle_started = 0, time.perf_counter()
        if settle:
            changes, quiet, changed = len(loader.stats().pacing), 0, time.perf_counter()
            while settled < SETTLE_LIMIT and (quiet < settle or time.perf_counter() - changed < SETTLE_QUIET_SECONDS):
                next(iterator)
                settled += 1
                now = len(loader.stats().pacing)
                if now != changes:
                    quiet, changes, changed = 0, now, time.perf_counter()
                else:
                    quiet += 1
        settle_seconds = time.perf_counter() - settle_started
        synchronize(loader.device)
        started, cpu_started = time.perf_counter(), cpu_seconds()
        for _ in range(batches):
            next(iterator)
        synchronize(loader.device)
        seconds = time.perf_counter() - started
        cores = (cpu_seconds() - cpu_started) / seconds
        stats = loader.stats()
    finally:
        if iterator is not None:
            iterator.close()
        loader.close()
    estimate = loader.memory_estimate
    return {
        "clips_per_second": batches * BATCH / seconds,
        "seconds": seconds,
        "clips": batches * BATCH,
        "cpu_cores_used": cores,
        "wrong_clips": wrong,
        "construction_seconds": construction,
        "settle_batches": settled,
        "settle_seconds": settle_seconds,
        "loader": {
            "sampler": repr(loader.sampler),
            "transform": repr(loader.transform),
            "batch_size": loader.batch_size,
            "shuffle": loader.shuffle,
            "clips_per_video": clips_per_video,
            "device": loader.device,
        },
        "chosen": {
            "decode_workers": loader.decode_workers,
            "decode_processes": loader.decode_processes,
            "cpu_decoders": loader.cpu_decoders,
            "prefetch_queue_depth": loader.prefetch_queue_depth,
        },
        "loader_stats": stats.to_dict(),
        "memory_estimate": str(estimate),
        "memory_estimate_bytes": estimate.total,
    }


def release_cached_memory() -> None:
    """Hand what a closed tool left in this process's device memory caches (torch's, CuPy's) back to
    the device, so that the next tool's baseline does not hold it. vclip's NVDEC decoders stay: they
    are shared per process by design (in_process_backend), as is the CUDA context."""
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        cupy.get_default_memory_pool().free_all_blocks()


def vclip_configurations(workers, in_flight, processes, cpu_decoders, *, gpu: bool) -> tuple[list, dict]:
    """The swept (workers, in flight, processes, CPU decoders) of the vclip tool, and the
    configurations left out because ``"auto"`` gives a count swept anyway there (the label of each,
    to the label of the configuration it equals)."""
    swept, same = [], {}
    for c in cpu_decoders:
        for p in processes:
            for w in workers:
                for n in in_flight:
                    count = resolve_cpu_decoders(c, gpu=gpu, decode_processes=p)
                    if c == "auto" and count in cpu_decoders:
                        same[vclip_label((w, n, p, c))] = vclip_label((w, n, p, count))
                    else:
                        swept.append((w, n, p, c))
    return swept, same


def vclip_label(configuration) -> str:
    workers, in_flight, processes, cpu_decoders = configuration
    return "vclip[{}workers={},in_flight={}{}]".format(
        f"processes={processes}," if processes else "",
        workers,
        in_flight,
        f",cpu_decoders={cpu_decoders}" if cpu_decoders else "",
    )


# -- vclip-only measurements ---------------------------------------------------------------------
def decode_work(paths, batches) -> dict:
    """Decoded pictures per delivered frame, with and without skipping non-reference pictures."""
    out = {}
    for skip in (True, False):
        index_of = {p: vclip.index_video(p) for p in {p for b in batches for p, _ in b}}
        sent = delivered = 0
        for batch in batches:
            by_video: dict[str, list] = {}
            for path, frames in batch:
                by_video.setdefault(path, []).append(frames)
            for path, clips in by_video.items():
                sent += vclip.plan_decode(index_of[path], clips, skip_non_reference=skip).packets_sent
                delivered += sum(c.size for c in clips)
        out["skip_non_reference" if skip else "decode_all"] = {
            "decoded_per_clip": sent / (len(batches) * BATCH),
            "decoded_per_delivered_frame": sent / delivered,
        }
    return out


def whole_file_jobs(paths) -> tuple:
    """The conversion, indexes and jobs of the whole-file measurements: every frame of each video
    to a 64x64 thumbnail, one video a slot."""
    spec = vclip.TransformSpec(resize=(64, 64))
    index = [vclip.index_video(p) for p in paths]
    jobs = [
        VideoRequest(i, (ClipTarget(np.arange(i.num_frames), spec.geometry(i.width, i.height), slot),))
        for slot, i in enumerate(index)
    ]
    return resolve_transform(spec), index, jobs


def raw_nvdec(paths, workers: int, processes: int = 0) -> dict:
    """Whole-file NVDEC decode through vclip's backend: every frame decoded, mapped to a 64x64 thumbnail;
    with ``processes``, in that many worker processes of ``workers`` threads."""
    from vclip._engine import make_backend

    backend = make_backend(resolve_device("cuda").device, processes=processes, threads=workers)
    runner = ThreadDispatcher(backend, num_workers=0 if processes else workers)
    conversion, index, jobs = whole_file_jobs(paths)
    output = backend.empty((len(jobs), max(i.num_frames for i in index), 64, 64, 3), "uint8")

    def once():
        result = runner.run(jobs, conversion, output, DecodeStats())
        assert not any(result.errors), result.errors
        for completion in result.completions:
            completion.synchronize()

    rate = median_rate(once, sum(i.num_frames for i in index), repeats=3)
    runner.close()
    backend.close()
    return {"frames_per_second": rate["rate"], "workers": workers, "processes": processes, "videos": len(jobs)}


def decode_capacity(paths, nvdec_workers: int, cpu_decoders: int, device: str = "cuda", processes: int = 0) -> dict:
    """Whole-file decode rate (pictures/s, every frame to a 64x64 thumbnail through the kernel) of
    NVDEC alone, of ``cpu_decoders`` CPU decoders alone and of both taking jobs from one queue:
    the ceiling of the hybrid configurations (on a CPU ``device``: the CPU decoders only). With
    ``processes``, NVDEC decodes in that many processes of ``nvdec_workers`` threads and the CPU
    decoders in processes of their own, as the loader runs them."""
    from vclip._engine import CpuBackend, SharedQueueDispatcher, make_backend

    resolved = resolve_device(device).device
    conversion, index, jobs = whole_file_jobs(paths)
    pictures = sum(i.num_frames for i in index)
    if resolved.is_cuda:
        backend = make_backend(resolved, processes=processes, threads=nvdec_workers, cpu_decoders=cpu_decoders)
        nvdec, cpu = (DecoderPool(pool.kind, pool.backend, pool.workers) for pool in backend.pools)  # all primary
        setups = {"nvdec": [nvdec], "cpu": [cpu], "both": [nvdec, cpu]}
    else:
        backend = CpuBackend(threads=1)
        setups = {"cpu": [DecoderPool("cpu", backend, cpu_decoders)]}
    output = backend.empty((len(jobs), max(i.num_frames for i in index), 64, 64, 3), "uint8")
    results = {}
    for name, pools in setups.items():
        if not pools[-1].workers:
            continue
        runner = SharedQueueDispatcher(pools)  # all primary: each decoder takes the next whole file

        def once(runner=runner):
            result = runner.run(jobs, conversion, output, DecodeStats())
            assert not any(result.errors), result.errors
            for completion in result.completions:
                completion.synchronize()

        started, cpu_started = time.perf_counter(), cpu_seconds()
        rate = median_rate(once, pictures, repeats=3)
        cores = (cpu_seconds() - cpu_started) / (time.perf_counter() - started)
        results[name] = {
            "pictures_per_second": rate["rate"],
            "workers": {p.kind: p.workers for p in pools},
            "processes": processes,
            "cpu_cores_used": cores,
        }
        runner.close()
    backend.close()
    return results


def kernel_bandwidth() -> dict:
    """The fused kernel on 64 random 1080p NV12 frames, one launch per frame as the backend launches it,
    against a device copy."""
    import cupy

    from vclip._engine import (
        BLOCK,
        JOB_DTYPE,
        KernelModule,
        fill_job,
        frame_strides,
        launch_grid,
        transform_params,
    )

    frames, width, height = 64, 1920, 1080
    source = cupy.random.randint(0, 256, (frames, height * 3 // 2, width), dtype=cupy.uint8)
    module = KernelModule.for_device(0)

    def time_it(function, repeats=20):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        function()
        times = []
        for _ in range(repeats):
            start.record()
            function()
            stop.record()
            stop.synchronize()
            times.append(cupy.cuda.get_elapsed_time(start, stop) / 1e3)
        return float(np.median(times))

    def measure_copy_rate() -> float:
        source_bytes = cupy.empty(2 << 30, cupy.uint8)
        target_bytes = cupy.empty_like(source_bytes)
        seconds = time_it(lambda: target_bytes.__setitem__(Ellipsis, source_bytes))
        return 2 * source_bytes.nbytes / seconds

    copy_rate = measure_copy_rate()
    results = {"copy_bytes_per_second": copy_rate}
    cases = {
        "native_uint8_thwc": vclip.TransformSpec(),
        "native_float32_tchw": vclip.TransformSpec(dtype="float32", layout="TCHW"),
        "train_224_float32": vclip.TransformSpec.imagenet(SIZE, layout="TCHW", resize_mode="squash"),
    }
    for name, spec in cases.items():
        geometry = spec.geometry(width, height)
        out_w, out_h = geometry.output_width, geometry.output_height
        output = cupy.empty((frames, 3, out_h, out_w), dtype=spec.dtype)
        frame_stride, strides = frame_strides(spec.layout, frames, out_h, out_w)
        params = transform_params(spec, geometry, strides)
        jobs = np.zeros(frames, JOB_DTYPE)
        for t in range(frames):
            luma = source[t].data.ptr
            fill_job(
                jobs[t],
                luma=luma,
                chroma=luma + width * height,
                luma_pitch=width,
                chroma_pitch=width,
                output=output.data.ptr + t * frame_stride * output.itemsize,
                geometry=geometry,
                bit_depth=8,
                stored_bits=8,
                matrix="bt709",
                color_range="limited",
            )
        kernel = module.function(1, spec.dtype)
        grid = launch_grid(params)

        def launch_all(kernel=kernel, grid=grid, params=params, jobs=jobs):
            for job in jobs:
                kernel(grid, BLOCK, (params, job))

        seconds = time_it(launch_all)
        moved = source.nbytes + output.nbytes
        results[name] = {
            "seconds": seconds,
            "bytes_per_second": moved / seconds,
            "fraction_of_copy": moved / seconds / copy_rate,
            "frames_per_second": frames / seconds,
        }
    return results


def memory_figures(memory: GpuSampler) -> dict:
    """GPU 0's whole-device used memory at its peak while a tool ran and before it started (bytes,
    as nvidia-smi counts them: every process, nothing subtracted), and the difference."""
    peak, baseline = memory.peak[0], memory.baseline[0]
    return {
        "gpu_memory_bytes": peak,
        "gpu_memory_baseline_bytes": baseline,
        "gpu_memory_above_baseline_bytes": None if peak is None or baseline is None else peak - baseline,
    }


def _gib(value: int | None) -> str:
    return "?" if value is None else f"{value / 2**30:.2f}"


def _ratio(value: float | None) -> str:
    return "?" if value is None else f"{value:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=None, help="folder for train.json (default: $OUT or results/)")
    parser.add_argument("--videos", default="/tmp/vclip-bench", help="where the generated video sets go")
    parser.add_argument("--sets", default="360p,1080p", help="video sets of benchmarks/common.py (VIDEO_SETS)")
    parser.add_argument(
        "--tools",
        default=f"{DEFAULT_TOOL},vclip,spdl,pynvc,pyav,decord",
        help=f"tools to measure ({DEFAULT_TOOL} always first in each set)",
    )
    parser.add_argument(
        "--batches", type=int, default=0, help="timed batches per tool (default: 100 at 360p, 16 on the other sets)"
    )
    parser.add_argument(
        "--settle", type=int, default=0,
        help="vclip-default: time only once its pacing made no change for this many batches and "
        f"{SETTLE_QUIET_SECONDS:g} s (0: after the warmup)",
    )
    parser.add_argument("--workers", default="12", help="vclip decode threads (per process); several (8,16) are swept")
    parser.add_argument(
        "--processes", default="0", help="vclip decode processes (0: threads only); several (0,4) are swept"
    )
    parser.add_argument("--in-flight", default="3", help="vclip batches in flight; several (2,4) are swept")
    parser.add_argument(
        "--cpu-decoders",
        default="0,auto,4,8",
        help="PyAV decoders beside NVDEC (0: NVDEC only, auto: the cores left free); several are swept",
    )
    parser.add_argument(
        "--extras",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also measure raw NVDEC, the decode capacity, vclip without skipping and kernel bandwidth (GPU)",
    )
    parser.add_argument(
        "--device",
        default="cuda",
        help="where vclip decodes (default cuda; cpu: a smoke test of the vclip rows, the other tools and "
        "the extras need CUDA)",
    )
    arguments = parser.parse_args()

    set_names = arguments.sets.split(",")
    video_sets = {name: make_video_set(arguments.videos, name) for name in set_names}  # before any CUDA work
    on_gpu = resolve_device(arguments.device).device.is_cuda
    results: dict = {
        "workload": {"batch": BATCH, "sequence_length": LENGTH, "stride": STRIDE, "size": SIZE},
        "device": arguments.device,
        "gpu_memory": {"reader": "pynvml" if nvml().available else None, "gpu": 0, "period_seconds": MEMORY_PERIOD},
        "sets": {},
    }
    worker_counts = [int(w) for w in arguments.workers.split(",")]
    in_flight_counts = [int(n) for n in arguments.in_flight.split(",")]
    process_counts = [int(n) for n in arguments.processes.split(",")]
    cpu_decoder_counts = [n if n == "auto" else int(n) for n in arguments.cpu_decoders.split(",")]
    configurations, same_configurations = vclip_configurations(
        worker_counts, in_flight_counts, process_counts, cpu_decoder_counts, gpu=on_gpu
    )
    # vclip-default first (issue 22): what a new user gets leads each set, measured before the other tools run
    tool_names = sorted(arguments.tools.split(","), key=lambda name: name.partition(":")[0] != DEFAULT_TOOL)
    warmup = 5
    for set_name in set_names:
        paths = video_sets[set_name]
        for path in paths:
            vclip.index_video(path)
        count = arguments.batches or (100 if set_name == "360p" else 16)
        batches = make_batches(paths, count + warmup, seed=1)
        table: dict[str, dict] = {}
        settings = {}  # vclip label -> (workers, in flight, processes, cpu decoders)
        entry: dict = {"videos": len(paths), "timed_batches": count, "tools": table}
        results["sets"][set_name] = entry
        if "vclip" in tool_names and same_configurations:
            entry["same_configurations"] = same_configurations  # not run: "auto" gives a count swept anyway
        for tool_name in tool_names:
            for configuration in configurations if tool_name == "vclip" else [None]:
                label = tool_name if configuration is None else vclip_label(configuration)
                if configuration:
                    settings[label] = configuration
                memory = GpuSampler([0], period=MEMORY_PERIOD)  # GPU 0, from the tool's construction to its close
                try:
                    with memory:
                        if tool_name.partition(":")[0] == DEFAULT_TOOL:
                            row = in_fresh_process(
                                measure_default,
                                paths,
                                count,
                                warmup,
                                arguments.device,
                                arguments.settle,
                                **tool_options(tool_name),
                            )
                        else:
                            tool = (
                                VclipTool(*configuration, device=arguments.device)
                                if configuration
                                else TOOLS[tool_name]()
                            )
                            try:
                                wrong = check(tool, batches[0])
                                row = measure(tool, batches, warmup)
                                row["wrong_clips"] = wrong
                                if configuration:
                                    row["decode_stats"] = tool.stats.as_dict()
                                    row["decoders"] = tool.decoders()
                            finally:
                                tool.close()
                except Exception as error:  # a missing or broken tool is reported, not fatal
                    row = {"error": f"{type(error).__name__}: {error}"}
                tool = None  # its buffers go before the caches are emptied
                release_cached_memory()
                row.update(memory_figures(memory))
                if "memory_estimate_bytes" in row:  # vclip-default: the loader's estimate against the measure
                    above = row["gpu_memory_above_baseline_bytes"]
                    row["memory_measured_over_estimate"] = (
                        None if above is None else above / row["memory_estimate_bytes"]
                    )
                table[label] = row
                print(
                    f"{set_name:>16} {label:>44}: "
                    + (f"{row['clips_per_second']:8.1f} clips/s" if "clips_per_second" in row else row["error"])
                    + f"  GPU {_gib(row['gpu_memory_bytes'])} GiB (+{_gib(row['gpu_memory_above_baseline_bytes'])})"
                    + (
                        f", estimate {_gib(row['memory_estimate_bytes'])} GiB"
                        f" (measured/estimate {_ratio(row['memory_measured_over_estimate'])})"
                        if "memory_estimate_bytes" in row
                        else ""
                    )
                    + (f"  WRONG {row['wrong_clips'][:2]}" if row.get("wrong_clips") else ""),
                    flush=True,
                )
                save_results("train", results, arguments.out)
        entry["decode_work"] = decode_work(paths, batches)  # vclip's decode plans: no decoding, on any machine
        print(f"{set_name:>16} decode work: {entry['decode_work']}", flush=True)
        if arguments.extras and on_gpu:
            entry["raw_nvdec"] = raw_nvdec(paths[:16], max(worker_counts))
            if max(process_counts):
                entry["raw_nvdec_processes"] = raw_nvdec(paths[:16], min(worker_counts), max(process_counts))
            from vclip._engine import auto_cpu_decoders

            free_cores = auto_cpu_decoders(gpu=True, decode_processes=max(process_counts) or 2)
            cpu_count = max([c for c in cpu_decoder_counts if c != "auto"] + [free_cores, 1])
            entry["decode_capacity"] = decode_capacity(paths[:16], max(worker_counts), cpu_count)
            helpers = auto_cpu_decoders(gpu=True, decode_processes=max(process_counts))
            if max(process_counts) and helpers:  # no CPU decoders on a machine under 8 cores
                entry["decode_capacity_processes"] = decode_capacity(
                    paths[:16], min(worker_counts), helpers, processes=max(process_counts)
                )
            timed = {label: row for label, row in table.items() if label in settings and "clips_per_second" in row}
            if timed:
                best = max(timed, key=lambda label: timed[label]["clips_per_second"])
                tool = VclipTool(*settings[best], skip_non_reference=False)
                full = measure(tool, batches, warmup)
                tool.close()
                entry["vclip_without_skipping"] = {"configuration": best, **full}
                entry["skip_speedup"] = timed[best]["clips_per_second"] / full["clips_per_second"]
            print(
                f"{set_name:>16} extras: raw NVDEC {entry['raw_nvdec']['frames_per_second']:.0f} "
                f"frames/s (processes: {entry.get('raw_nvdec_processes', {}).get('frames_per_second')}), "
                f"skip speedup {entry.get('skip_speedup')}",
                flush=True,
            )
            for key in ("decode_capacity", "decode_capacity_processes"):
                if key in entry:
                    print(
                        f"{set_name:>16} {key.replace('_', ' ')} (pictures/s): "
                        + ", ".join(
                            f"{name} {row['pictures_per_second']:.0f} ({row['cpu_cores_used']:.1f} cores)"
                            for name, row in entry[key].items()
                        ),
                        flush=True,
                    )
        save_results("train", results, arguments.out)
    if arguments.extras and on_gpu:
        results["kernel"] = kernel_bandwidth()
        print(
            "kernel:",
            {
                k: (v if not isinstance(v, dict) else round(v["fraction_of_copy"], 3))
                for k, v in results["kernel"].items()
            },
        )
    print("saved", save_results("train", results, arguments.out))


if __name__ == "__main__":
    main()
