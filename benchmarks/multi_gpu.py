"""The train workload on several GPUs: one torchrun process per GPU, each decoding on its own GPU.

For each video set and each GPU count, the driver starts ``torchrun --nproc_per_node N`` on this
script; every rank calls ``torch.cuda.set_device(local_rank)``, builds a ClipLoader with
``device="cuda"`` and ``decode_processes`` worker processes, checks its first batch (barcodes), and
times one epoch. The driver samples every GPU's decoder utilisation and memory through NVML
(benchmarks/common.py's GpuSampler) while the ranks run. It checks that every batch of rank r was
on ``cuda:r``, that the ranks' shards are disjoint and cover the dataset, and that the ranks drew
equal numbers of batches; and reports the aggregate clips/s (all ranks' clips over the slowest
rank's time) against one GPU, and each GPU's memory estimate against its measured peak.

``--two-nodes`` runs the same code path as two "nodes" of one GPU each: two torchrun launches with
``--nnodes 2`` and a c10d rendezvous on localhost, each seeing one GPU, loading from a catalog.

    torchrun is started by the script itself:
    python benchmarks/multi_gpu.py --gpus 1,2 --sets 360p,1080p --out results/ [--two-nodes]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import GpuSampler, make_video_set, save_results

import vclip
from vclip.synthetic import read_barcode

BATCH, LENGTH, STRIDE, SIZE = 8, 16, 2, 224
CLIPS_PER_VIDEO = {"360p": 16, "1080p": 64}  # an epoch of 1,024 clips on either set
WARMUP_BATCHES = 4


# -- one rank ------------------------------------------------------------------------------------
def run_rank(arguments: argparse.Namespace) -> None:
    import numpy as np
    import torch
    import torch.distributed as dist

    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    dist.init_process_group("gloo")  # the loader only needs ranks; batches stay on each rank's GPU
    rank, world = dist.get_rank(), dist.get_world_size()
    source = arguments.catalog or [(path, 0) for path in json.loads(Path(arguments.videos).read_text())]
    loader = vclip.ClipLoader(
        source,
        vclip.strided(LENGTH, STRIDE),
        transform=vclip.TransformSpec.imagenet(SIZE, layout="TCHW", resize_mode="squash"),
        batch_size=BATCH,
        clips_per_video=arguments.clips_per_video,
        shuffle=True,
        seed=0,
        drop_last=True,
        device="cuda",
        decode_processes=arguments.processes,
    )
    expected_device = torch.device("cuda", local_rank)
    devices, video_ids, clips, timed_clips = set(), [], 0, 0
    dist.barrier()
    started = time.perf_counter()
    timed_from = None
    for number, batch in enumerate(loader):
        devices.add(str(batch.data.device))
        video_ids.extend(batch.video_ids.tolist())
        if number == 0:
            mean = np.array(vclip.IMAGENET_MEAN, np.float32)[:, None, None]
            std = np.array(vclip.IMAGENET_STD, np.float32)[:, None, None]
            clip = batch.data[0].cpu().numpy() * std + mean
            found = [read_barcode(np.clip(frame.transpose(1, 2, 0), 0, 1)) for frame in clip]
            if found != batch.frame_indices[0].tolist():
                raise AssertionError(f"rank {rank}: frames {found}, not {batch.frame_indices[0].tolist()}")
        clips += len(batch)
        if number + 1 == WARMUP_BATCHES:
            torch.cuda.synchronize()
            timed_from = time.perf_counter()
        elif number >= WARMUP_BATCHES:
            timed_clips += len(batch)
    torch.cuda.synchronize()
    finished = time.perf_counter()
    stats = loader.stats()
    result = {
        "rank": rank,
        "world_size": world,
        "local_rank": local_rank,
        "device": str(expected_device),
        "batch_devices": sorted(devices),
        "batches": len(loader),
        "clips": clips,
        "videos": sorted(set(int(v) for v in video_ids)),
        "num_videos": len(loader.videos),
        "epoch_seconds": finished - started,
        "timed_clips": timed_clips,
        "timed_seconds": finished - (timed_from or started),
        "memory_estimate_bytes": loader.memory_estimate.total,
        "loader_stats": stats.to_dict(),
        "torch_peak_allocated_bytes": torch.cuda.max_memory_allocated(expected_device),
    }
    loader.close()
    gathered: list = [None] * world
    dist.all_gather_object(gathered, result)
    if rank == 0:
        Path(arguments.result).write_text(json.dumps(gathered))
    dist.destroy_process_group()


# -- the driver ------------------------------------------------------------------------------------
def _gpu_summary(sampler: GpuSampler) -> list[dict]:
    """Each GPU's mean decoder utilisation and its memory peak above what it used before the ranks started."""
    return [
        {
            "gpu": gpu,
            "decoder_utilization_mean_percent": sum(values) / max(1, len(values)),
            "memory_peak_above_idle_bytes": None if peak is None or baseline is None else peak - baseline,
        }
        for gpu, values, peak, baseline in zip(sampler.gpus, sampler.decoder, sampler.peak, sampler.baseline)
    ]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _rank_command(
    arguments: argparse.Namespace, videos: Path, result: Path, clips_per_video: int, catalog: str | None
) -> list[str]:
    command = [
        __file__,
        "--rank",
        "--videos",
        str(videos),
        "--result",
        str(result),
        "--processes",
        str(arguments.processes),
        "--clips-per-video",
        str(clips_per_video),
    ]
    return command + (["--catalog", catalog] if catalog else [])


def _launch(commands: list[tuple[list[str], dict]], timeout: float) -> None:
    processes = [
        subprocess.Popen([sys.executable, "-m", "torch.distributed.run", *c], env={**os.environ, **e})
        for c, e in commands
    ]
    for process in processes:
        if process.wait(timeout=timeout) != 0:
            for other in processes:
                other.kill()
            raise RuntimeError(f"torchrun exited with {process.returncode}")


def _checks(ranks: list[dict]) -> dict:
    num_videos = ranks[0]["num_videos"]
    shards = [set(rank["videos"]) for rank in ranks]
    return {
        "every_batch_on_its_rank_device": all(rank["batch_devices"] == [rank["device"]] for rank in ranks),
        "shards_disjoint": all(not (a & b) for i, a in enumerate(shards) for b in shards[i + 1 :]),
        "shards_cover_dataset": set().union(*shards) == set(range(num_videos)),
        "equal_batches_per_rank": len({rank["batches"] for rank in ranks}) == 1,
    }


def run_configuration(
    arguments, videos: Path, set_name: str, gpus: int, *, two_nodes: bool = False, catalog: str | None = None
) -> dict:
    result = Path(tempfile.mkdtemp()) / "ranks.json"
    clips_per_video = CLIPS_PER_VIDEO[set_name]
    rank = _rank_command(arguments, videos, result, clips_per_video, catalog)
    if two_nodes:
        endpoint = f"localhost:{_free_port()}"
        commands = [
            (
                [
                    "--nnodes",
                    "2",
                    "--node_rank",
                    str(node),
                    "--nproc_per_node",
                    "1",
                    "--rdzv_backend",
                    "c10d",
                    "--rdzv_endpoint",
                    endpoint,
                    "--rdzv_id",
                    "vclip-two-nodes",
                    *rank,
                ],
                {"CUDA_VISIBLE_DEVICES": str(node)},
            )
            for node in range(2)
        ]
    else:
        commands = [
            (
                ["--standalone", "--nproc_per_node", str(gpus), *rank],
                {"CUDA_VISIBLE_DEVICES": ",".join(map(str, range(gpus)))},
            )
        ]
    with GpuSampler(period=0.2, decoder=True) as sampler:  # every GPU of the machine, through NVML
        _launch(commands, timeout=arguments.timeout)
    ranks = json.loads(result.read_text())
    slowest = max(rank["timed_seconds"] for rank in ranks)
    gpus_seen = _gpu_summary(sampler)
    for number, rank in enumerate(ranks):  # each rank's GPU is physical GPU ``number`` in both layouts
        gpus_seen[number]["rank"] = rank["rank"]
        gpus_seen[number]["memory_estimate_bytes"] = rank["memory_estimate_bytes"]
    return {
        "gpus": gpus,
        "two_nodes": two_nodes,
        "catalog": catalog is not None,
        "clips_per_second": sum(rank["timed_clips"] for rank in ranks) / slowest,
        "checks": _checks(ranks),
        "per_gpu": gpus_seen,
        "ranks": [{key: value for key, value in rank.items() if key != "videos"} for rank in ranks],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--videos", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    parser.add_argument("--catalog", help=argparse.SUPPRESS)
    parser.add_argument("--clips-per-video", type=int, default=16, help=argparse.SUPPRESS)
    parser.add_argument("--gpus", default="1,2", help="GPU counts to run (default 1,2)")
    parser.add_argument("--sets", default="360p,1080p")
    parser.add_argument("--processes", type=int, default=4, help="decode processes per rank (default 4)")
    parser.add_argument("--two-nodes", action="store_true", help="also run 2 nodes x 1 GPU from a catalog")
    parser.add_argument("--video-folder", default="/tmp/vclip-bench")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--out", default=None)
    arguments = parser.parse_args()
    if arguments.rank:
        run_rank(arguments)
        return
    results: dict = {
        "workload": {
            "batch": BATCH,
            "sequence_length": LENGTH,
            "stride": STRIDE,
            "size": SIZE,
            "decode_processes_per_rank": arguments.processes,
        },
        "sets": {},
    }
    for set_name in arguments.sets.split(","):
        paths = make_video_set(arguments.video_folder, set_name)
        videos = Path(tempfile.mkdtemp()) / "videos.json"
        videos.write_text(json.dumps(paths))
        runs = [run_configuration(arguments, videos, set_name, int(gpus)) for gpus in arguments.gpus.split(",")]
        if arguments.two_nodes:
            catalog = str(Path(tempfile.mkdtemp()) / f"{set_name}.parquet")
            from vclip.catalog import build_catalog

            build_catalog([(path, 0) for path in paths], catalog)
            runs.append(run_configuration(arguments, videos, set_name, 2, two_nodes=True, catalog=catalog))
        one = next((run["clips_per_second"] for run in runs if run["gpus"] == 1 and not run["two_nodes"]), None)
        for run in runs:
            run["speedup_over_one_gpu"] = run["clips_per_second"] / one if one else None
            print(
                f"{set_name:>6} {run['gpus']} GPU{'s' if run['gpus'] > 1 else ''}"
                f"{' (2 nodes, catalog)' if run['two_nodes'] else ''}: {run['clips_per_second']:8.1f} clips/s "
                f"x{run['speedup_over_one_gpu'] or 0:.2f}  checks {run['checks']}  decoder% "
                f"{[round(g['decoder_utilization_mean_percent']) for g in run['per_gpu']]}",
                flush=True,
            )
        results["sets"][set_name] = runs
        print(f"saved {save_results('multi_gpu', results, arguments.out)}", flush=True)


if __name__ == "__main__":
    main()
