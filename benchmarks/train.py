"""The "train" workload of design.md, vclip side by side with the tools users would pick instead.

Batches of 8 clips, 16 frames at stride 2 from a random start in a random video, resized to
224x224, ImageNet-normalized float32 [8, 16, 3, 224, 224] on the GPU. Every tool gets the same
clips. Each tool is checked first (the barcodes of the frames it returns must be the requested
frame numbers), then warmed up, then timed over whole batches with the GPU synchronized.

    python benchmarks/train.py --out results/ [--sets 360p,1080p] [--tools vclip,pyav,decord,pynvc,spdl]

Also measured: decoded frames per delivered frame (with and without skipping non-reference
pictures), raw NVDEC frames/s through vclip's backend, the decode capacity (whole-file pictures/s)
of NVDEC alone, of the CPU decoders alone and of both from one queue (the ceiling of the hybrid
configurations), CPU cores used by each timed configuration, and the fused kernel's bytes/s
against a device-to-device copy.

vclip configurations sweep ``--workers``, ``--processes``, ``--in-flight`` and ``--cpu-decoders``
(PyAV decoders beside NVDEC whose pictures the same kernel converts; "auto": as the loader's, the
cores left free beside decode processes with at least 16 batches in flight, else none).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from common import make_video_set, median_rate, save_results

import vclip
from vclip._device import resolve_device
from vclip._engine import (
    ClipTarget,
    DecoderPool,
    DecodeStats,
    JobRunner,
    PooledBackend,
    VideoJob,
    resolve_transform,
)
from vclip.synthetic import read_barcode

BATCH, LENGTH, STRIDE, SIZE = 8, 16, 2, 224
MEAN = np.array(vclip.IMAGENET_MEAN, np.float32)
STD = np.array(vclip.IMAGENET_STD, np.float32)


def make_batches(paths: list[str], count: int, seed: int = 0) -> list[list[tuple[str, np.ndarray]]]:
    """``count`` batches of (video, frame indices); 300-frame videos, so starts in [0, 300 - 31]."""
    rng = np.random.default_rng(seed)
    span = (LENGTH - 1) * STRIDE + 1
    return [
        [
            (paths[rng.integers(len(paths))], rng.integers(0, 300 - span + 1) + np.arange(LENGTH) * STRIDE)
            for _ in range(BATCH)
        ]
        for _ in range(count)
    ]


def unnormalized_barcodes(clip_tchw) -> list[int]:
    """Frame numbers read from a normalized [T, 3, H, W] clip (torch or CuPy)."""
    array = clip_tchw.cpu().numpy() if hasattr(clip_tchw, "cpu") else getattr(clip_tchw, "get", lambda: clip_tchw)()
    rgb = array.transpose(0, 2, 3, 1) * STD + MEAN
    return [read_barcode(np.clip(frame, 0, 1)) for frame in rgb]


# -- tools ---------------------------------------------------------------------------------------
def cpu_seconds() -> float:
    """CPU time (user + system) of this process and its live children (decode worker processes)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in [os.getpid()] + [child.pid for child in multiprocessing.active_children()]:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


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

        backend = make_backend(
            resolve_device(device).device,
            skip_non_reference=skip_non_reference,
            processes=processes,
            threads=workers,
            cpu_decoders=cpu_decoders,
            in_flight=in_flight,
        )
        self.backend = backend
        self.runner = (
            backend.runner()
            if isinstance(backend, PooledBackend)
            else JobRunner(backend, num_workers=0 if processes else workers)
        )
        self.spec = vclip.TransformSpec.imagenet(SIZE, layout="TCHW", resize_mode="squash")  # design.md's workload
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
            [VideoJob(vclip.index_video(p), tuple(t)) for p, t in jobs.items()], self.conversion, output, self.stats
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


def check(tool, batch) -> list[str]:
    """Barcode check of the first batch: which clips came back with the wrong frames."""
    clips = tool.first_clips(batch)
    wrong = []
    for k, (path, frames) in enumerate(batch):
        got = unnormalized_barcodes(clips[k])
        if got != frames.tolist():
            wrong.append(f"{os.path.basename(path)}: wanted {frames.tolist()}, got {got}")
    return wrong


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
        VideoJob(i, (ClipTarget(np.arange(i.num_frames), spec.geometry(i.width, i.height), slot),))
        for slot, i in enumerate(index)
    ]
    return resolve_transform(spec), index, jobs


def raw_nvdec(paths, workers: int, processes: int = 0) -> dict:
    """Whole-file NVDEC decode through vclip's backend: every frame decoded, mapped to a 64x64 thumbnail;
    with ``processes``, in that many worker processes of ``workers`` threads."""
    from vclip._engine import make_backend

    backend = make_backend(resolve_device("cuda").device, processes=processes, threads=workers)
    runner = JobRunner(backend, num_workers=0 if processes else workers)
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
    from vclip._engine import CpuBackend, SharedQueueRunner, make_backend

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
        runner = SharedQueueRunner(pools)  # all primary: each decoder takes the next whole file

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=None, help="folder for train.json (default: $OUT or results/)")
    parser.add_argument("--videos", default="/tmp/vclip-bench", help="where the generated video sets go")
    parser.add_argument("--sets", default="360p,1080p")
    parser.add_argument("--tools", default="vclip,spdl,pynvc,pyav,decord")
    parser.add_argument(
        "--batches", type=int, default=0, help="timed batches per tool (default: 100 at 360p, 16 at 1080p)"
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
        help="also measure decode work, raw NVDEC and kernel bandwidth",
    )
    arguments = parser.parse_args()

    set_names = arguments.sets.split(",")
    video_sets = {name: make_video_set(arguments.videos, name) for name in set_names}  # before any CUDA work
    results = {"workload": {"batch": BATCH, "sequence_length": LENGTH, "stride": STRIDE, "size": SIZE}, "sets": {}}
    worker_counts = [int(w) for w in arguments.workers.split(",")]
    in_flight_counts = [int(n) for n in arguments.in_flight.split(",")]
    process_counts = [int(n) for n in arguments.processes.split(",")]
    cpu_decoder_counts = [n if n == "auto" else int(n) for n in arguments.cpu_decoders.split(",")]
    warmup = 5
    for set_name in set_names:
        paths = video_sets[set_name]
        for path in paths:
            vclip.index_video(path)
        count = arguments.batches or (100 if set_name == "360p" else 16)
        batches = make_batches(paths, count + warmup, seed=1)
        table = {}
        settings = {}  # vclip label -> (workers, in flight, processes, cpu decoders)
        entry = results["sets"][set_name] = {"tools": table}
        for tool_name in arguments.tools.split(","):
            configurations = (
                [
                    (w, n, p, c)
                    for c in cpu_decoder_counts
                    for p in process_counts
                    for w in worker_counts
                    for n in in_flight_counts
                ]
                if tool_name == "vclip"
                else [None]
            )
            for configuration in configurations:
                label = (
                    tool_name
                    if configuration is None
                    else (
                        "vclip[{}workers={},in_flight={}{}]".format(
                            f"processes={configuration[2]}," if configuration[2] else "",
                            *configuration[:2],
                            f",cpu_decoders={configuration[3]}" if configuration[3] else "",
                        )
                    )
                )
                if configuration:
                    settings[label] = configuration
                tool = None
                try:
                    tool = VclipTool(*configuration) if configuration else TOOLS[tool_name]()
                    wrong = check(tool, batches[0])
                    row = measure(tool, batches, warmup)
                    row["wrong_clips"] = wrong
                    if configuration:
                        row["decode_stats"] = tool.stats.as_dict()
                        row["decoders"] = tool.decoders()
                except Exception as error:  # a missing or broken tool is reported, not fatal
                    row = {"error": f"{type(error).__name__}: {error}"}
                finally:
                    if isinstance(tool, VclipTool):
                        tool.close()
                table[label] = row
                print(
                    f"{set_name:>6} {label:>32}: "
                    + (f"{row['clips_per_second']:8.1f} clips/s" if "clips_per_second" in row else row["error"])
                    + (f"  WRONG {row['wrong_clips'][:2]}" if row.get("wrong_clips") else ""),
                    flush=True,
                )
                save_results("train", results, arguments.out)
        if arguments.extras:
            entry["decode_work"] = decode_work(paths, batches)
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
                f"{set_name:>6} extras: {entry['decode_work']} raw NVDEC {entry['raw_nvdec']['frames_per_second']:.0f} "
                f"frames/s (processes: {entry.get('raw_nvdec_processes', {}).get('frames_per_second')}), "
                f"skip speedup {entry.get('skip_speedup')}",
                flush=True,
            )
            for key in ("decode_capacity", "decode_capacity_processes"):
                if key in entry:
                    print(
                        f"{set_name:>6} {key.replace('_', ' ')} (pictures/s): "
                        + ", ".join(
                            f"{name} {row['pictures_per_second']:.0f} ({row['cpu_cores_used']:.1f} cores)"
                            for name, row in entry[key].items()
                        ),
                        flush=True,
                    )
        save_results("train", results, arguments.out)
    if arguments.extras:
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
