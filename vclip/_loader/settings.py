"""The counts a ClipLoader leaves to the machine (``"auto"``), resolved for the process it runs in;
what its runtime starts with (which counts the user set, used as set, and which the pacing moves);
what a memory budget leaves of them, and the refusal of a budget too small for the least."""

from __future__ import annotations

import multiprocessing
from dataclasses import dataclass
from typing import Any

from .._device import Device
from .._engine.backends import make_backend, make_paced_backend
from .._engine.scheduler import (
    Chosen,
    PooledBackend,
    decode_processes_paced,
    loader_decode_processes,
    resolve_cpu_decoders,
)
from ..audio import audio_samples
from ..errors import ArgumentError, format_bytes
from ..memory import LoaderMemoryEstimate, fit_to_budget, left_to_loader, plan_loader_memory
from .pacing import PACING

__all__ = ["RuntimeSettings", "budget_refusal", "keep_within_budget", "loader_backend", "loader_memory_plan", "paced",
           "planned_processes", "resolve_counts", "runtime_settings", "within_budget"]


@dataclass(frozen=True)
class RuntimeSettings:
    """What a runtime runs with; a count marked ``*_set`` was given by the user and is not paced.

    Attributes:
        threads: Decode threads of the default kind that may work (NVDEC on the GPU).
        threads_set: ``threads`` was set by the user (or decodes on the CPU, where every thread works).
        paced_processes: Decode processes the pacing may start beside NVDEC in this process (0: none).
        cpu_decoders_set: The CPU decoders beside NVDEC were set by the user: all of them work (else
            the pacing uses 0 to all of them).
        depth: Batches queued ahead at the start.
        max_depth: The most batches queued ahead (the ring holds up to ``max_depth + 3`` buffers).
        depth_set: The depth is not paced (set by the user, or on the CPU).
    """

    threads: int
    threads_set: bool
    paced_processes: int
    cpu_decoders_set: bool
    depth: int
    max_depth: int
    depth_set: bool


def resolve_counts(requested: dict[str, int | str], *, gpu: bool, num_threads: int,
                   caps: dict[str, int] | None = None) -> tuple[Chosen, Chosen, Chosen]:
    """``(decode_processes, cpu_decoders, prefetch_queue_depth)`` for this process from what the
    loader was asked (``requested``, by argument name), each at most its count in ``caps`` (what a
    memory budget leaves); a daemon process (a DataLoader worker) may start no process. On the GPU
    ``"auto"`` decode processes are the most the pacing may start
    (:func:`~vclip._engine.scheduler.paced_decode_processes`, none at first); the depth is the most
    batches in flight (the pacing starts lower on the GPU)."""
    counts = _resolve_counts(requested, gpu=gpu, num_threads=num_threads)
    caps = caps or {}
    names = ("decode_processes", "cpu_decoders", "prefetch_queue_depth")
    processes, cpu_decoders, depth = (within_budget(count, caps.get(name)) for name, count in zip(names, counts))
    return processes, cpu_decoders, depth


def _resolve_counts(requested: dict[str, int | str], *, gpu: bool, num_threads: int) -> tuple[Chosen, Chosen, Chosen]:
    daemon = multiprocessing.current_process().daemon
    processes = loader_decode_processes(requested["decode_processes"], gpu=gpu, num_threads=num_threads, daemon=daemon)
    cpu_decoders = resolve_cpu_decoders(requested["cpu_decoders"], gpu=gpu, decode_processes=processes,
                                        paced=paced(requested, gpu=gpu, num_threads=num_threads), daemon=daemon)
    depth = requested["prefetch_queue_depth"]
    if depth != "auto":
        return processes, cpu_decoders, Chosen(int(depth), "set")
    if gpu:
        return processes, cpu_decoders, Chosen(PACING.max_depth, f"auto: from {PACING.start_depth}, paced up to "
                                                                 f"{PACING.max_depth} while the training loop waits")
    return processes, cpu_decoders, Chosen(PACING.start_depth, f"auto: {PACING.start_depth}")


def runtime_settings(requested: dict[str, int | str], counts: tuple[Chosen, Chosen, Chosen], backend, *,
                     gpu: bool, num_threads: int) -> RuntimeSettings:
    """The runtime's settings for a loader with these requests and resolved ``counts``, over ``backend``."""
    processes, _, depth = counts
    threads = num_threads or backend.default_workers
    if isinstance(backend, PooledBackend):
        threads = next(pool.workers for pool in backend.pools if not pool.helper)
    paced_depth = gpu and requested["prefetch_queue_depth"] == "auto"
    return RuntimeSettings(
        threads=threads, threads_set=bool(num_threads) or not gpu,
        paced_processes=int(processes) if paced(requested, gpu=gpu, num_threads=num_threads) else 0,
        cpu_decoders_set=requested["cpu_decoders"] != "auto",
        depth=min(PACING.start_depth, int(depth)) if paced_depth else int(depth),
        max_depth=int(depth), depth_set=not paced_depth,
    )


def keep_within_budget(estimate: LoaderMemoryEstimate, budget: int, memory_budget: int | str | None,
                       requested: dict[str, int | str], batch_size: int) -> tuple[LoaderMemoryEstimate, dict[str, int]]:
    """The plan a loader planned as ``estimate`` keeps to within ``budget`` bytes (``memory_budget``
    as given), and the most of each count left to it (``"auto"`` in ``requested``) that leaves.

    Raises:
        ArgumentError: Even the least the loader runs with does not fit (naming the largest batch that does).
    """
    if estimate.total <= budget:
        return estimate, {}
    plan, caps = fit_to_budget(estimate, budget, left_to_loader(requested))
    if plan.total > budget:
        raise ArgumentError(budget_refusal(plan, memory_budget, budget, batch_size))
    return plan, caps


def within_budget(count: Chosen, most: int | None) -> Chosen:
    """``count``, or ``most`` when a memory budget leaves less, saying so."""
    if most is None or count <= most:
        return count
    return Chosen(most, f"{count.reason}; at most {most} within memory_budget")


def budget_refusal(estimate: LoaderMemoryEstimate, memory_budget: int | str | None, budget: int,
                   batch_size: int) -> str:
    """Why ``memory_budget`` (``budget`` bytes) cannot hold a loader that needs ``estimate``, and the
    largest batch that fits."""
    fits = estimate.largest_batch_size(budget)
    advice = (
        f"the largest batch_size that fits is {fits}" if fits else
        f"not even batch_size=1 fits: the parts that do not grow with the batch take "
        f"{format_bytes(estimate.fixed_bytes)}"
    )
    return (
        f"memory_budget ({memory_budget!r}, {format_bytes(budget)}) is too small for batch_size={batch_size}: "
        f"the loader needs {estimate}; {advice}"
    )


def paced(requested: dict[str, int | str], *, gpu: bool, num_threads: int) -> bool:
    """Whether a loader's decode processes are paced (started as the training loop needs them):
    ``"auto"`` on the GPU with no thread count set."""
    return decode_processes_paced(requested["decode_processes"], gpu=gpu, num_threads=num_threads)


def loader_backend(device: Device, requested: dict[str, int | str], counts: tuple[Chosen, Chosen], *,
                   num_threads: int):
    """The backend of a loader with these requests and resolved ``(decode_processes, cpu_decoders)``:
    paced on the GPU (NVDEC in this process first, decode processes started as the training loop
    needs them), else the processes and threads asked for."""
    processes, cpu_decoders = counts
    if processes and paced(requested, gpu=device.is_cuda, num_threads=num_threads):
        return make_paced_backend(device, processes=int(processes), cpu_decoders=int(cpu_decoders))
    return make_backend(device, processes=int(processes), threads=num_threads, cpu_decoders=int(cpu_decoders))


def planned_processes(requested: dict[str, int | str], processes: Chosen, *, gpu: bool, num_threads: int) -> int | str:
    """What the memory plan takes for ``decode_processes``: ``"auto"`` where they are paced (the plan
    then counts NVDEC threads here beside the processes), else the count resolved."""
    return "auto" if paced(requested, gpu=gpu, num_threads=num_threads) and processes else processes


def loader_memory_plan(loader: Any, usable: list) -> LoaderMemoryEstimate:
    """The memory plan of a ClipLoader (``loader``, after its scan) over its ``usable`` videos'
    facts (:class:`~vclip._loader.clips.VideoFacts`): the most it may hold, its pacing included."""
    largest = max(usable, key=lambda f: f.width * f.height * (1 if f.bit_depth <= 8 else 2))
    drawer, gpu = loader._drawer, loader._device.is_cuda
    return plan_loader_memory(
        width=usable[0].output_size[0], height=usable[0].output_size[1], batch_size=loader.batch_size,
        sequence_length=loader.frames_per_clip, dtype=drawer.dtype, views=drawer.samples_per_clip,
        augmentation_factor=loader.augmentation_factor, prefetch_queue_depth=loader.prefetch_queue_depth,
        num_threads=loader.num_threads, device=loader._device,
        decode_processes=planned_processes(loader._requested, loader.decode_processes, gpu=gpu,
                                           num_threads=loader.num_threads),
        video_width=largest.width, video_height=largest.height, video_bit_depth=largest.bit_depth,
        cpu_decoders=loader._cpu_decoders,
        video_kinds=len({(facts.codec, facts.bit_depth, facts.width, facts.height) for facts in usable}),
        audio=loader.audio,
        audio_samples=(0 if loader._audio is None else
                       audio_samples(loader._audio.spec, max(f.longest_spans[0] for f in usable),
                                     max(f.longest_spans[1] for f in usable), loader.frames_per_clip)),
    )
