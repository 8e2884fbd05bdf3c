"""Training augmentations fused into the kernel: what they cost on the train workload,
and what multi-view evaluation costs against single views.

Train: the workload of design.md through ``vclip.ClipLoader`` (batches of 8 clips, 16 frames at
stride 2 from random starts, 224x224, ImageNet-normalized float32 TCHW) on the 360p and 1080p sets
of benchmarks/common.py, with three transforms:

- ``center_crop``: ``TransformSpec.imagenet(224)``, the shorter side resized to 224 and the centre
  cropped (the plain recipe);
- ``augmented``: ``RandomResizedCrop(224, scale=(0.08, 1))``, flip 0.5, ``ColorJitter(0.4, 0.4,
  0.4, 0.1)``, grayscale 0.2, the same normalization (area averaging);
- ``augmented_bilinear``: the same with ``interpolation="bilinear"`` (torchvision's antialiased
  bilinear, more taps per pixel).

Correctness first: the first batch of each on the GPU has the CPU loader's draws exactly and its
pixels within the kernel's tolerance (1e-3). Then the configurations are timed pass after pass in
turn (``--repeats`` passes each, ``--warmup`` batches untimed at the start of each), GPU
synchronized; median clips/s per configuration and the ratio to ``center_crop`` (target: the
augmented workload at most 3% slower, a ratio >= 0.97).

Kernel: frames/s of the fused kernel alone for each train transform on 1080p pictures.

Evaluation: one ``evaluation=True`` pass over the set with ``--clips`` evenly spaced clips (10) of
16 frames at stride 2 per video, the shorter side resized to 256, against 3 crops of 256 along the
longer side (``spatial_views=3``) and against the centre crop only; median seconds per pass and the
ratio (target: 3 views at most 1.2x the time of 1), and the decoded pictures of each (the same: a
clip is decoded once whatever its views).

    python benchmarks/augment.py --out results/ [--sets 360p,1080p] [--processes 0] [--repeats 3]
    python benchmarks/augment.py --out /tmp/smoke --device cpu --sets 360p --batches 2 --repeats 1 --clips 2  # smoke
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
from common import make_video_set, save_results

import vclip

BATCH, LENGTH, STRIDE, SIZE = 8, 16, 2, 224
NORMALIZED = dict(mean=vclip.IMAGENET_MEAN, std=vclip.IMAGENET_STD, dtype="float32", layout="TCHW")
AUGMENTED = dict(crop=vclip.RandomResizedCrop(SIZE, scale=(0.08, 1.0)), flip_probability=0.5,
                 color_jitter=vclip.ColorJitter(0.4, 0.4, 0.4, 0.1), grayscale_probability=0.2, **NORMALIZED)
TRAIN = {
    "center_crop": vclip.TransformSpec.imagenet(SIZE),
    "augmented": vclip.TransformSpec(**AUGMENTED),
    "augmented_bilinear": vclip.TransformSpec(**AUGMENTED, interpolation="bilinear"),
}
EVALUATION = {
    "single_view": vclip.TransformSpec(resize=256, crop=256, **NORMALIZED),
    "three_views": vclip.TransformSpec(resize=256, crop=256, spatial_views=3, **NORMALIZED),
}
RECORDED = ("crop_boxes", "scales", "flipped", "color_factors", "color_orders", "grayscale")


def _synchronize(device: str) -> None:
    if device != "cpu":
        import torch

        torch.cuda.synchronize(device)


def train_loader(paths, spec, batches: int, arguments, *, device: str, workers: int, processes: int):
    """The train workload: random starts in videos visited in a new random order each epoch."""
    return vclip.ClipLoader(
        [(path, 0) for path in paths], vclip.strided(LENGTH, STRIDE), transform=spec, batch_size=BATCH,
        clips_per_video=max(1, -(-batches * BATCH // len(paths))), shuffle=True, seed=0, drop_last=True,
        device=device, num_threads=workers, decode_processes=processes, prefetch_queue_depth=arguments.depth,
    )


def check_against_cpu(paths, spec, arguments) -> dict:
    """The first batch on the device against the CPU loader's: the same draws, pixels within 1e-3."""
    first = {}
    for device, workers, processes in ((arguments.device, arguments.workers, arguments.processes),
                                       ("cpu", os.cpu_count() or 1, 0)):
        loader = train_loader(paths, spec, 1, arguments, device=device, workers=workers, processes=processes)
        batch = next(iter(loader))
        first[device] = (batch.data.cpu().numpy(), batch.augmentations, batch.frame_indices.numpy())
        loader.close()
    (data, draws, frames), (cpu_data, cpu_draws, cpu_frames) = first[arguments.device], first["cpu"]
    same_draws = np.array_equal(frames, cpu_frames) and all(
        np.array_equal(getattr(draws, name), getattr(cpu_draws, name)) for name in RECORDED)
    difference = float(np.abs(data - cpu_data).max())
    return {"same_draws_as_cpu": bool(same_draws), "max_difference_from_cpu": difference,
            "correct": bool(same_draws and np.allclose(data, cpu_data, rtol=1e-3, atol=1e-3))}


def timed_pass(loader: vclip.ClipLoader, epoch: int, warmup: int, batches: int) -> float:
    """Clips/s of batches ``warmup .. warmup + batches`` of one pass."""
    loader.set_epoch(epoch)
    iterator = iter(loader)
    for number in range(warmup + batches):
        if number == warmup:
            _synchronize(loader.device)
            started = time.perf_counter()
        next(iterator)
    _synchronize(loader.device)
    rate = batches * BATCH / (time.perf_counter() - started)
    iterator.close()
    return rate


def measure_train(paths, arguments, batches: int) -> dict:
    loaders = {
        name: train_loader(paths, spec, arguments.warmup + batches, arguments, device=arguments.device,
                           workers=arguments.workers, processes=arguments.processes)
        for name, spec in TRAIN.items()
    }
    rates: dict[str, list[float]] = {name: [] for name in TRAIN}
    try:
        for repeat in range(arguments.repeats):  # in turn, so that drift of the machine hits every configuration
            for name, loader in loaders.items():
                rates[name].append(timed_pass(loader, repeat, arguments.warmup, batches))
                print(f"  train {name:>20}: {rates[name][-1]:8.1f} clips/s", flush=True)
        stats = {name: loader.stats().to_dict() for name, loader in loaders.items()}
    finally:
        for loader in loaders.values():
            loader.close()
    medians = {name: statistics.median(values) for name, values in rates.items()}
    return {
        "batches": batches,
        "configurations": {
            name: {"transform": repr(TRAIN[name]), "clips_per_second": medians[name], "passes": rates[name],
                   "ratio_to_center_crop": medians[name] / medians["center_crop"], "stats": stats[name]}
            for name in TRAIN
        },
    }


def measure_evaluation(paths, arguments) -> dict:
    sampler = vclip.strided(LENGTH, STRIDE, starts="even", clips_per_video=arguments.clips)
    results = {}
    seconds: dict[str, list[float]] = {name: [] for name in EVALUATION}
    loaders = {
        name: vclip.ClipLoader([(path, number) for number, path in enumerate(paths)], sampler, transform=spec,
                               batch_size=BATCH, evaluation=True, device=arguments.device,
                               num_threads=arguments.workers, decode_processes=arguments.processes,
                               prefetch_queue_depth=arguments.depth)
        for name, spec in EVALUATION.items()
    }
    samples = {}
    try:
        for name, loader in loaders.items():  # warm-up pass (decoders, kernels, buffers)
            samples[name] = sum(len(batch) for batch in loader)
        pictures_before = {name: loader.stats().to_dict() for name, loader in loaders.items()}
        for _ in range(arguments.repeats):
            for name, loader in loaders.items():
                _synchronize(loader.device)
                started = time.perf_counter()
                for _batch in loader:
                    pass
                _synchronize(loader.device)
                seconds[name].append(time.perf_counter() - started)
                print(f"  evaluation {name:>12}: {seconds[name][-1]:.3f} s per pass", flush=True)
        after = {name: loader.stats().to_dict() for name, loader in loaders.items()}
    finally:
        for loader in loaders.values():
            loader.close()
    for name in EVALUATION:
        results[name] = {"transform": repr(EVALUATION[name]), "seconds_per_pass": statistics.median(seconds[name]),
                         "passes": seconds[name], "samples_per_pass": samples[name],
                         "stats_after_warmup": pictures_before[name], "stats": after[name]}
    single, three = (results[name]["seconds_per_pass"] for name in ("single_view", "three_views"))
    results["views_time_ratio"] = three / single
    results["clips_per_video"] = arguments.clips
    return results


def kernel_throughput(frames: int = 64) -> dict:
    """Frames/s of the fused kernel alone for each train transform, on random 1920x1080 NV12
    pictures, each frame with a draw of its own, launched one frame at a time as the backends do
    (two launches with a contrast change: the grayscale sum first)."""
    import cupy

    from vclip._engine import BLOCK, GRAY_SUM_DTYPE, KernelModule, frame_launch, frame_strides

    width, height = 1920, 1080
    source = cupy.random.randint(0, 256, (frames, height * 3 // 2, width), dtype=cupy.uint8)
    module = KernelModule.for_device(0)
    kernels = {extended: module.function(1, "float32", extended) for extended in (False, True)}
    gray_sum = module.gray_sum_function(1)
    rng = np.random.default_rng(0)
    results = {}
    for name, spec in TRAIN.items():
        output = cupy.empty((frames, 3, SIZE, SIZE), dtype="float32")
        sums = cupy.zeros(frames, GRAY_SUM_DTYPE)
        frame_stride, strides = frame_strides("TCHW", frames, SIZE, SIZE)
        launches = []
        for t in range(frames):
            (draw,) = spec.draw(width, height, rng)
            launch = frame_launch(spec, draw.geometry, draw.color, strides, bit_depth=8, stored_bits=8,
                                  matrix="bt709", color_range="limited")
            job, luma = launch.job, source[t].data.ptr
            job["luma"], job["chroma"] = luma, luma + width * height
            job["luma_pitch"] = job["chroma_pitch"] = width
            job["output"] = output.data.ptr + t * frame_stride * output.itemsize
            job["gray_sum"] = sums.data.ptr + t * GRAY_SUM_DTYPE.itemsize if launch.needs_mean else 0
            launches.append(launch)

        def launch_all(launches=launches, sums=sums):
            sums.fill(0)
            for launch in launches:
                if launch.needs_mean:
                    gray_sum(launch.gray_grid, BLOCK, (launch.params, launch.job[()]))
                kernels[launch.extended](launch.grid, BLOCK, (launch.params, launch.job[()]))

        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        launch_all()
        times = []
        for _ in range(20):
            start.record()
            launch_all()
            stop.record()
            stop.synchronize()
            times.append(cupy.cuda.get_elapsed_time(start, stop) / 1e3)
        seconds = float(np.median(times))
        results[name] = {"seconds": seconds, "frames_per_second": frames / seconds,
                         "contrast_frames": sum(launch.needs_mean for launch in launches)}
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=None, help="folder for augment.json (default: $OUT or results/)")
    parser.add_argument("--videos", default="/tmp/vclip-bench", help="where the generated video sets go")
    parser.add_argument("--sets", default="360p,1080p")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--batches", type=int, default=0,
                        help="timed batches per pass (default: 100 at 360p, 40 at 1080p)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3, help="timed passes per configuration, taken in turn")
    parser.add_argument("--workers", type=int, default=0, help="decode threads (0: the loader's default)")
    parser.add_argument("--processes", type=int, default=0, help="decode processes (0: threads only)")
    parser.add_argument("--depth", type=int, default=2, help="prefetch_queue_depth")
    parser.add_argument("--clips", type=int, default=10, help="evenly spaced clips per video in evaluation")
    parser.add_argument("--no-check", dest="check", action="store_false", help="skip the comparison with the CPU")
    parser.add_argument("--no-kernel", dest="kernel", action="store_false",
                        help="skip the kernel-only frames/s of each train transform (GPU)")
    arguments = parser.parse_args()

    set_names = arguments.sets.split(",")
    video_sets = {name: make_video_set(arguments.videos, name) for name in set_names}  # before any CUDA work
    results: dict = {"workload": {"batch": BATCH, "sequence_length": LENGTH, "stride": STRIDE, "size": SIZE},
                     "settings": vars(arguments), "sets": {}}
    for set_name in set_names:
        paths = video_sets[set_name]
        for path in paths:
            vclip.index_video(path)
        batches = arguments.batches or (100 if set_name == "360p" else 40)
        entry = results["sets"][set_name] = {}
        if arguments.check:
            entry["checks"] = {name: check_against_cpu(paths, spec, arguments) for name, spec in TRAIN.items()}
            print(f"{set_name}: checks {entry['checks']}", flush=True)
        entry["train"] = measure_train(paths, arguments, batches)
        save_results("augment", results, arguments.out)
        entry["evaluation"] = measure_evaluation(paths, arguments)
        train = entry["train"]["configurations"]
        print(f"{set_name}: augmented/center_crop {train['augmented']['ratio_to_center_crop']:.3f}, "
              f"bilinear {train['augmented_bilinear']['ratio_to_center_crop']:.3f}; 3 views/1 view "
              f"{entry['evaluation']['views_time_ratio']:.3f}", flush=True)
        save_results("augment", results, arguments.out)
    if arguments.kernel and arguments.device != "cpu":
        results["kernel_1080p"] = kernel_throughput()
        rates = {name: round(row["frames_per_second"]) for name, row in results["kernel_1080p"].items()}
        print("kernel frames/s:", rates)
    print("saved", save_results("augment", results, arguments.out))


if __name__ == "__main__":
    main()
