"""ClipLoader on the "train" workload of design.md, against the raw pipeline under it.

Batches of 8 clips, 16 frames at stride 2 from random starts in random videos, resized to 224x224,
ImageNet-normalized float32 [8, 16, 3, 224, 224] (layout TCHW), on the 360p and 1080p sets of
benchmarks/common.py. For each set, in a fresh process:

- the loader: correctness first (the barcodes of the first batch are its frame indices), then
  ``--warmup`` batches, then ``--batches`` timed batches (the GPU synchronized at the end), median
  of ``--repeats`` passes; its memory estimate beside the measured peak;
- the raw pipeline: ``ThreadDispatcher.run`` on exactly the same clips with the same decode workers and
  as many batches in flight, without the loader (no sampling, no buffer ring, no hand-over);
- the ratio loader / raw (target: >= 0.9);
- with ``--catalog``: the loader from a catalog of the set (``vclip.build_catalog``), in another
  fresh process: construction time, clips/s against the file list's, and whether the clips are the same.

Then, in another fresh process, GPU memory over ``--memory-batches`` loader batches on the 360p
set (several epochs), sampled every ``--memory-every`` batches: it must stay flat.

With ``--audio`` it measures audio instead: the same sets with a 48 kHz stereo AAC track, the
loader without audio and with ``AudioSpec(sample_rate=16000, channels=1)`` (each clip's 1.03 s
of 16 kHz mono audio, ``[8, 1, 16534]`` on the device), in fresh processes taking turns
(``--audio-rounds`` each), its first batch checked (barcodes, and the audio is the synthetic
signal at each clip's first frame); the ratio with / without audio (target: >= 0.95).

    python benchmarks/loader.py --out results/ [--device cuda] [--sets 360p,1080p]
    python benchmarks/loader.py --out /tmp/smoke --device cpu --batches 5     # smoke test
    python benchmarks/loader.py --out results/ --audio --no-memory [--processes 4]   # audio's cost
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from common import in_fresh_process, make_video_set, save_results

import vclip
from vclip._device import resolve_device
from vclip._engine import (
    ClipTarget,
    DecodeStats,
    ThreadDispatcher,
    VideoRequest,
    make_backend,
    resolve_transform,
)
from vclip.catalog import build_catalog
from vclip.synthetic import audio_signal, read_barcode

BATCH, LENGTH, STRIDE, SIZE = 8, 16, 2, 224
MEAN = np.array(vclip.IMAGENET_MEAN, np.float32)
STD = np.array(vclip.IMAGENET_STD, np.float32)
SPEC = vclip.TransformSpec.imagenet(SIZE, layout="TCHW", resize_mode="squash")  # design.md's workload
CONVERSION = resolve_transform(SPEC)


def _synchronize(device: str) -> None:
    if device != "cpu":
        import torch

        torch.cuda.synchronize(device)


AUDIO = vclip.AudioSpec(sample_rate=16000, channels=1)


def _make_loader(
    paths: list[str], clips: int, *, device: str, workers: int, depth: int, processes: int, catalog: str | None = None,
    audio: vclip.AudioSpec | None = None,
) -> vclip.ClipLoader:
    """The train workload: random starts in videos visited in a new random order each epoch (the
    videos named by ``paths``, or the same videos' ``catalog``), with ``audio`` when given."""
    return vclip.ClipLoader(
        catalog or [(path, 0) for path in paths],
        vclip.strided(LENGTH, STRIDE),
        transform=SPEC,
        batch_size=BATCH,
        clips_per_video=max(1, math.ceil(clips / len(paths))),
        shuffle=True,
        seed=0,
        drop_last=True,
        device=device,
        num_threads=workers,
        prefetch_queue_depth=depth,
        decode_processes=processes,
        audio=audio,
    )


def _correlation(samples: np.ndarray, start: float, shift: float) -> float:
    """Normalized correlation of ``samples`` with the synthetic signal from ``start`` seconds,
    ``shift`` output samples later."""
    reference = audio_signal(start + (np.arange(samples.size) + shift) / AUDIO.sample_rate)
    return float(samples @ reference / np.sqrt((samples @ samples) * (reference @ reference) + 1e-12))


def _check_audio(batch: vclip.ClipBatch, paths: list[str]) -> None:
    """Each clip's audio is the synthetic signal from its first frame on (normalized correlation
    above 0.95 at that time, and lower one output sample either side)."""
    for row, (video, frames) in enumerate(zip(batch.video_ids.tolist(), batch.frame_indices.tolist())):
        index = vclip.index_video(paths[video])
        samples = batch.audio[row, 0, : int(batch.audio_lengths[row])].cpu().numpy().astype(np.float64)
        start = float(index.pts_seconds[frames[0]] - index.start_seconds)
        here = _correlation(samples, start, 0.0)
        around = max(_correlation(samples, start, -1.0), _correlation(samples, start, 1.0))
        if not (here > 0.95 and here > around):
            raise AssertionError(f"clip {row} of {paths[video]}: its audio is not the signal at frame {frames[0]} "
                                 f"(correlation {here:.3f}, {around:.3f} one sample off)")


def _check(batch: vclip.ClipBatch) -> None:
    """The frames of every clip are the ones the batch names (barcodes)."""
    clips = batch.data.cpu().numpy().transpose(0, 1, 3, 4, 2) * STD + MEAN
    for clip, frames in zip(clips, batch.frame_indices.tolist()):
        found = [read_barcode(np.clip(frame, 0, 1)) for frame in clip]
        if found != frames:
            raise AssertionError(f"the loader returned frames {found}, not {frames}")


def _loader_passes(loader: vclip.ClipLoader, warmup: int, batches: int, repeats: int) -> tuple[list[float], list]:
    """Clips/s of each pass (timed after ``warmup`` batches), and the clips of the first pass."""
    rates, clips = [], []
    for repeat in range(repeats):
        loader.set_epoch(repeat)
        iterator = iter(loader)
        for number in range(warmup + batches):
            if number == warmup:
                _synchronize(loader.device)
                started = time.perf_counter()
            batch = next(iterator)
            if repeat == 0:
                clips.append(list(zip(batch.video_ids.tolist(), batch.frame_indices.tolist())))
        _synchronize(loader.device)
        rates.append(batches * BATCH / (time.perf_counter() - started))
        iterator.close()
    return rates, clips


def _raw_passes(
    paths: list[str],
    clips: list,
    *,
    device: str,
    workers: int,
    processes: int,
    in_flight: int,
    warmup: int,
    repeats: int,
) -> list[float]:
    """Clips/s of ThreadDispatcher.run on the same clips, ``in_flight`` batches at a time."""
    backend = make_backend(resolve_device(device).device, processes=processes, threads=workers)
    runner = ThreadDispatcher(backend, 0 if processes else workers)
    stats = DecodeStats()
    indexes = [vclip.index_video(path) for path in paths]
    geometries = [SPEC.geometry(index.width, index.height) for index in indexes]
    buffers = [backend.empty((BATCH, LENGTH, 3, SIZE, SIZE), "float32") for _ in range(in_flight)]

    def one_batch(number: int) -> None:
        targets: dict[int, list[ClipTarget]] = {}
        for slot, (video, frames) in enumerate(clips[number]):
            targets.setdefault(video, []).append(ClipTarget(np.asarray(frames), geometries[video], slot))
        jobs = [VideoRequest(indexes[video], tuple(found)) for video, found in targets.items()]
        result = runner.run(jobs, CONVERSION, buffers[number % in_flight], stats)
        if any(result.errors):
            raise next(error for error in result.errors if error)
        for completion in result.completions:
            completion.synchronize()

    rates = []
    with ThreadPoolExecutor(in_flight) as pool:
        for _ in range(repeats):
            futures = [pool.submit(one_batch, number) for number in range(len(clips))]
            for number, future in enumerate(futures):
                future.result()
                if number == warmup - 1:
                    started = time.perf_counter()
            rates.append((len(clips) - warmup) * BATCH / (time.perf_counter() - started))
    runner.close()
    backend.close()
    return rates


def _timed_loader(paths: list[str], batches: int, warmup: int, repeats: int, catalog: str | None = None, **options):
    """The train loader (from ``catalog`` when given), checked on its first batch, then timed:
    the loader, its construction seconds, clips/s of each pass and the clips of the first pass."""
    started = time.perf_counter()
    loader = _make_loader(paths, (warmup + batches) * BATCH, catalog=catalog, **options)
    construction = time.perf_counter() - started
    _check(next(iter(loader)))
    rates, clips = _loader_passes(loader, warmup, batches, repeats)
    return loader, construction, rates, clips


def measure_catalog(paths: list[str], catalog: str, *, batches: int, warmup: int, repeats: int, **options) -> dict:
    """The loader from ``catalog`` (run in a fresh process): construction seconds, clips/s and the
    clips of its first pass."""
    loader, construction, rates, clips = _timed_loader(paths, batches, warmup, repeats, catalog, **options)
    loader.close()
    return {
        "construction_seconds": construction,
        "loader_clips_per_second": statistics.median(rates),
        "loader_runs": rates,
        "clips": clips,
    }


def measure_set(
    paths: list[str], *, device: str, batches: int, warmup: int, repeats: int, workers: int, depth: int, processes: int
) -> dict:
    """Loader and raw pipeline on one video set (run in a fresh process)."""
    loader, construction, loader_rates, clips = _timed_loader(
        paths, batches, warmup, repeats, device=device, workers=workers, depth=depth, processes=processes
    )
    stats = loader.stats()
    workers = stats.decode_workers
    loader.close()
    raw_rates = _raw_passes(
        paths,
        clips,
        device=device,
        workers=workers // max(processes, 1),
        processes=processes,
        in_flight=depth + 1,
        warmup=warmup,
        repeats=repeats,
    )
    loader_rate, raw_rate = statistics.median(loader_rates), statistics.median(raw_rates)
    measured = stats.memory.gpu_peak.get("device_used_bytes", stats.memory.peak_bytes)
    return {
        "videos": len(paths),
        "construction_seconds": construction,
        "clips": clips,
        "batches": batches,
        "decode_workers": workers,
        "decode_processes": processes,
        "batches_in_flight": depth + 1,
        "loader_clips_per_second": loader_rate,
        "raw_clips_per_second": raw_rate,
        "loader_over_raw": loader_rate / raw_rate,
        "loader_runs": loader_rates,
        "raw_runs": raw_rates,
        "memory_estimate": str(loader.memory_estimate),
        "memory_estimate_bytes": loader.memory_estimate.total,
        "memory_measured_peak_bytes": measured,
        "memory_estimate_error": (loader.memory_estimate.total - measured) / max(measured, 1),
        "loader_stats": stats.to_dict(),
    }


def measure_audio_pass(paths: list[str], *, audio: bool, batches: int, warmup: int, repeats: int, **options) -> dict:
    """The train loader on ``paths`` (a set with audio) with or without :data:`AUDIO` (run in a
    fresh process): checked on its first batch, then clips/s of each pass."""
    loader = _make_loader(paths, (warmup + batches) * BATCH, audio=AUDIO if audio else None, **options)
    first = next(iter(loader))
    _check(first)
    if audio:
        _check_audio(first, paths)
    rates, _ = _loader_passes(loader, warmup, batches, repeats)
    estimate = loader.memory_estimate
    loader.close()
    return {"runs": rates, "audio_shape": loader.audio_shape, "memory_estimate_bytes": estimate.total,
            "audio_buffers_bytes": estimate.audio_buffers}


def measure_audio(paths: list[str], rounds: int, **options) -> dict:
    """Clips/s without and with audio, ``rounds`` fresh processes each, taking turns."""
    passes: dict[str, list] = {"without": [], "with": []}
    for _ in range(rounds):
        for kind in ("without", "with"):
            passes[kind].append(in_fresh_process(measure_audio_pass, paths, audio=kind == "with", **options))
    without = statistics.median(rate for run in passes["without"] for rate in run["runs"])
    with_audio = statistics.median(rate for run in passes["with"] for rate in run["runs"])
    return {
        "videos": len(paths),
        "audio": repr(AUDIO),
        "audio_shape": passes["with"][0]["audio_shape"],
        "without_audio_clips_per_second": without,
        "with_audio_clips_per_second": with_audio,
        "with_over_without": with_audio / without,
        "target_met": with_audio / without >= 0.95,
        "passes": passes,
    }


def measure_memory(
    paths: list[str], *, device: str, batches: int, every: int, workers: int, depth: int, processes: int
) -> dict:
    """The loader's memory every ``every`` batches over ``batches`` batches of several epochs."""
    per_epoch = max(every, batches // 10)
    loader = _make_loader(paths, per_epoch * BATCH, device=device, workers=workers, depth=depth, processes=processes)
    samples, drawn, epoch = [], 0, 0
    while drawn < batches:
        loader.set_epoch(epoch)
        for _ in loader:
            drawn += 1
            if drawn % every == 0:
                memory = loader.stats().memory
                figures = {"in_use_bytes": memory.in_use_bytes, "peak_bytes": memory.peak_bytes, **memory.gpu}
                samples.append({"batch": drawn, "epoch": epoch, **figures})
            if drawn == batches:
                break
        epoch += 1
    key = "device_used_bytes" if device != "cpu" else "in_use_bytes"
    steady = [sample[key] for sample in samples[1:]] or [samples[0][key]]
    loader.close()
    return {
        "batches": batches,
        "every": every,
        "epochs": epoch,
        "measure": key,
        "growth_bytes": steady[-1] - steady[0],
        "range_bytes": max(steady) - min(steady),
        "flat": max(steady) - min(steady) <= 2 * 2**20,
        "estimate_bytes": loader.memory_estimate.total,
        "samples": samples,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder for loader.json")
    parser.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu (default cuda)")
    parser.add_argument("--sets", default="360p,1080p", help="video sets (default 360p,1080p)")
    parser.add_argument("--videos", default=None, help="folder for the generated videos (default: a temp folder)")
    parser.add_argument("--batches", type=int, default=100, help="timed batches per pass (default 100)")
    parser.add_argument("--warmup", type=int, default=None, help="batches before timing (default 20; 1 on the CPU)")
    parser.add_argument("--repeats", type=int, default=None, help="timed passes (default 3; 1 on the CPU)")
    parser.add_argument("--workers", type=int, default=0, help="decode workers (default: the loader's)")
    parser.add_argument("--depth", type=int, default=2, help="prefetch_queue_depth (default 2)")
    parser.add_argument("--processes", type=int, default=0, help="decode_processes (default 0)")
    parser.add_argument(
        "--memory-batches",
        type=int,
        default=None,
        help="batches of the memory run (default 2000; 4x --batches on the CPU)",
    )
    parser.add_argument("--memory-every", type=int, default=None, help="memory sample interval (default 100)")
    parser.add_argument(
        "--catalog", action="store_true", help="also run the loader from a catalog of each set (vclip index)"
    )
    parser.add_argument("--no-memory", action="store_true", help="skip the memory run")
    parser.add_argument("--audio", action="store_true",
                        help="measure audio's cost instead: the sets with AAC tracks, without and with 16 kHz mono")
    parser.add_argument("--audio-rounds", type=int, default=2,
                        help="with --audio: fresh processes per kind (default 2)")
    arguments = parser.parse_args()
    on_cpu = arguments.device == "cpu"
    warmup = arguments.warmup if arguments.warmup is not None else (1 if on_cpu else 20)
    repeats = arguments.repeats or (1 if on_cpu else 3)
    memory_batches = arguments.memory_batches or (4 * arguments.batches if on_cpu else 2000)
    every = arguments.memory_every or (max(1, memory_batches // 10) if on_cpu else 100)
    folder = arguments.videos or tempfile.mkdtemp(prefix="vclip-loader-videos-")
    common = dict(
        device=arguments.device, workers=arguments.workers, depth=arguments.depth, processes=arguments.processes
    )

    results = {
        "workload": f"{BATCH} clips x {LENGTH} frames, stride {STRIDE}, {SIZE}x{SIZE} float32 TCHW, ImageNet",
        "device": arguments.device,
        "sets": {},
    }
    if arguments.audio:
        results["audio"] = {}
        for name in arguments.sets.split(","):
            paths = make_video_set(folder, name, audio=True)
            result = measure_audio(paths, arguments.audio_rounds, batches=arguments.batches, warmup=warmup,
                                   repeats=repeats, **common)
            results["audio"][name] = result
            print(f"{name}: without audio {result['without_audio_clips_per_second']:.1f} clips/s, with "
                  f"{AUDIO.sample_rate} Hz mono {result['with_audio_clips_per_second']:.1f} clips/s, ratio "
                  f"{result['with_over_without']:.3f} (target 0.95)")
        print(f"saved {save_results('loader_audio', results, arguments.out)}")
        return
    for name in arguments.sets.split(","):
        paths = make_video_set(folder, name)
        result = in_fresh_process(
            measure_set, paths, batches=arguments.batches, warmup=warmup, repeats=repeats, **common
        )
        results["sets"][name] = result
        if arguments.catalog:
            catalog = str(Path(folder) / f"{name}.parquet")
            build_catalog([(path, 0) for path in paths], catalog, incremental=False, progress=False)
            from_catalog = in_fresh_process(
                measure_catalog, paths, catalog, batches=arguments.batches, warmup=warmup, repeats=repeats, **common
            )
            from_catalog["same_clips_as_files"] = from_catalog.pop("clips") == result["clips"]
            from_catalog["over_files"] = from_catalog["loader_clips_per_second"] / result["loader_clips_per_second"]
            result["from_catalog"] = from_catalog
            print(
                f"{name}: from the catalog {from_catalog['loader_clips_per_second']:.1f} clips/s "
                f"({from_catalog['over_files']:.3f}x the file list; "
                f"same clips: {from_catalog['same_clips_as_files']}); construction "
                f"{from_catalog['construction_seconds']:.3f} s against {result['construction_seconds']:.3f} s"
            )
        result.pop("clips")
        print(
            f"{name}: loader {result['loader_clips_per_second']:.1f} clips/s, raw pipeline "
            f"{result['raw_clips_per_second']:.1f} clips/s, ratio {result['loader_over_raw']:.3f}; memory estimate "
            f"{vclip.format_bytes(result['memory_estimate_bytes'])}, measured peak "
            f"{vclip.format_bytes(result['memory_measured_peak_bytes'])} "
            f"({100 * result['memory_estimate_error']:+.1f}%)"
        )
    if arguments.no_memory:
        print(f"saved {save_results('loader', results, arguments.out)}")
        return
    memory_set = "360p" if "360p" in results["sets"] else next(iter(results["sets"]))
    results["memory_flatness"] = in_fresh_process(
        measure_memory, make_video_set(folder, memory_set), batches=memory_batches, every=every, **common
    )
    results["memory_flatness"]["set"] = memory_set
    flatness = results["memory_flatness"]
    print(
        f"memory over {flatness['batches']} batches ({memory_set}): {flatness['measure']} grew "
        f"{flatness['growth_bytes']:,} bytes, range {flatness['range_bytes']:,} bytes, flat={flatness['flat']}"
    )
    print(f"saved {save_results('loader', results, arguments.out)}")


if __name__ == "__main__":
    main()
