"""One queue of video jobs for every decoder in the box: NVDEC and CPU decoders side by side.

A :class:`DecoderPool` is one kind of decoder (a backend and a number of worker threads). A
:class:`SharedQueueRunner` owns the worker threads of all its pools; every batch's jobs (one video's
clips each) go into one FIFO queue, and each worker takes the next job when it is free, so all
decoders stay busy while there is work.

No batch waits on a slow decoder at its end: primary pools (NVDEC) take the oldest job, from the
head of the queue; pools marked ``helper`` (CPU decoders beside NVDEC) take the newest, from its
tail, and only when they are expected to finish it before the primary pools would have done every
other job they have ahead, i.e. when ``helper seconds per frame x frames of the job`` is at most
``(other queued frames + frames the primaries are decoding now) x primary seconds per frame /
primary workers``. The batch a helper works for is then one that NVDEC would reach last anyway.
While idle helpers would take the newest job, primary workers leave one job per idle helper in
the queue (re-checked every 50 ms): there are more NVDEC workers than engines, and an idle one
taking a job would only wait for an engine. Seconds per frame are running averages per pool, of
the jobs that succeeded (before the primaries are measured, helpers take work only while the queue
holds more jobs than the primary pools have workers; until a helper pool is measured, each of its
idle workers takes a job). With little work ahead, at the end of an epoch
or with few batches in flight, every job goes to NVDEC. Without helpers (CPU-only machines: all
pools are primary) every worker takes the next job.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any

from .._machine import cores_per_rank, shared_memory_free, usable_cores
from ..errors import VideoError
from .contract import Backend, Completion
from .pipeline import Conversion, DecodeStats, VideoJob
from .processes import THREADS_PER_PROCESS
from .runner import JobsResult

__all__ = ["AUTO_DECODE_PROCESSES", "AUTO_MIN_IN_FLIGHT", "AUTO_PREFETCH_QUEUE_DEPTH", "CPU_DECODERS_PER_PROCESS",
           "PACKED_JOB_BYTES",
           "Chosen", "DecoderKindStats", "DecoderPool", "PooledBackend", "SharedQueueRunner", "auto_cpu_decoders",
           "auto_decode_processes", "cpu_decoder_processes", "resolve_cpu_decoders", "resolve_decode_processes",
           "resolve_decoders_and_depth"]

_SMOOTHING = 0.2
"""Weight of the newest job in a pool's running average of seconds per frame."""


AUTO_PREFETCH_QUEUE_DEPTH = {"cpu_decoders": 6, "none": 2}
"""``prefetch_queue_depth="auto"``: 6 where CPU decoders work beside NVDEC, else 2. A CPU decoder
takes the newest job only when it would finish it before NVDEC has done the others, so it needs
batches in flight: on an H200 (benchmarks/README.md, 11 CPU decoders beside 3 decode processes) the
train workload came 1.35x (1080p) and 1.52x (640x360) faster with depth 6 than with the default 2
and no CPU decoders, as fast as with depth 8 or 15, for 4 more output buffers."""

AUTO_MIN_IN_FLIGHT = AUTO_PREFETCH_QUEUE_DEPTH["cpu_decoders"] + 1
"""Batches decoded at once from which ``cpu_decoders="auto"`` starts CPU decoders (with decode
processes): with little work queued a CPU decode is the last job of its batch (with 3 batches in
flight they cost 16% at 640x360)."""


AUTO_DECODE_PROCESSES = 3
"""Decode processes of ``decode_processes="auto"`` on the GPU, on machines of 8 cores or more. One
process's threads share one interpreter lock, which caps small videos: on an H200, 640x360 clips
came 1.48x faster with 4 processes of 4 threads than with 12 threads. Each process holds a CUDA
context (556 MiB by nvidia-smi at 640x360, 768 MiB with its 1080p decoders; about 1 GiB of the
whole device's memory in all), and 3 processes of 4 threads were as fast as 4 on the train workload
at 640x360 and 1080p, with 1 GiB less (benchmarks/README.md)."""


class Chosen(int):
    """A count the loader chose (an ``int``) and, in ``reason``, why: what ``loader.stats().chosen``
    reports for each setting left to the machine."""

    reason: str

    def __new__(cls, value: int, reason: str) -> Chosen:
        chosen = super().__new__(cls, value)
        chosen.reason = reason
        return chosen

    def __reduce__(self) -> tuple[type[Chosen], tuple[int, str]]:  # pickled with the loader (spawned workers)
        return Chosen, (int(self), self.reason)


def auto_decode_processes(*, gpu: bool, num_threads: int = 0, cores: int | None = None,
                          daemon: bool = False) -> Chosen:
    """Decode processes for ``decode_processes="auto"``: none in a ``daemon`` process (a DataLoader
    worker), which may not start processes, or when ``num_threads`` is set (the loader decodes on
    exactly those threads). Else on the GPU :data:`AUTO_DECODE_PROCESSES` with 8 cores or more (none
    on smaller machines); on the CPU one per ``THREADS_PER_PROCESS["cpu"]`` of the default decode
    threads (``min(8, cores)``), so that a decoder's native crash costs only its video, as many
    decoders as threads would give, at about the same speed (benchmarks/README.md)."""
    if daemon:
        return Chosen(0, "auto: a daemon process (a DataLoader worker) may not start processes")
    if num_threads:
        return Chosen(0, f"auto: num_threads={num_threads} is set, and exactly those threads decode")
    cores = usable_cores() if cores is None else cores
    if not gpu:
        per_process = THREADS_PER_PROCESS["cpu"]
        return Chosen(max(1, min(8, cores) // per_process),
                      f"auto: one per {per_process} of the min(8, {cores} cores) decode threads, so that a "
                      "decoder's crash costs only its video")
    if cores >= 8:
        return Chosen(AUTO_DECODE_PROCESSES, f"auto: a GPU and {cores} cores (8 or more): processes feed NVDEC "
                                             "past one interpreter lock")
    return Chosen(0, f"auto: a GPU and {cores} cores (fewer than 8): the NVDEC feeders and the training loop "
                     "need them")


def resolve_decode_processes(decode_processes: int | str, *, gpu: bool, num_threads: int = 0,
                             daemon: bool = False) -> Chosen:
    """The count ``decode_processes`` asks for: itself, or for ``"auto"`` :func:`auto_decode_processes`."""
    if decode_processes == "auto":
        return auto_decode_processes(gpu=gpu, num_threads=num_threads, daemon=daemon)
    return Chosen(int(decode_processes), "set")


def auto_cpu_decoders(*, gpu: bool, decode_processes: int = 0, cores: int | None = None,
                      in_flight: int | None = None) -> Chosen:
    """CPU decoders for ``cpu_decoders="auto"``: the cores left free beside NVDEC.

    On the GPU the NVDEC feeders need about one core per decode process, and the training loop and
    batch hand-over two more; machines with fewer than 8 cores get none. ``cores`` defaults to this
    process's share of the machine (:func:`vclip._machine.cores_per_rank`: the ranks torchrun starts
    on one machine share its cores), and no more start than :data:`SHARED_MEMORY_PER_CPU_DECODER`
    each fits in the free shared memory. Only beside decode
    processes (as threads of the loader's process their Python work holds the GIL that NVDEC's
    feeders need: at 640x360 they cost 15%) and, when ``in_flight`` (batches decoded at once) is
    given, with at least :data:`AUTO_MIN_IN_FLIGHT`. On the CPU none: the default decode pool
    already keeps every core busy, and single-threaded decoders from the shared queue measured no
    faster on 2 cores (benchmarks/README.md); ask for a count to use them.
    """
    if not gpu:
        return Chosen(0, "auto: none on the CPU (the decode pool keeps every core busy)")
    if not decode_processes:
        return Chosen(0, "auto: none without decode processes (as threads here they would slow NVDEC's feeders)")
    if in_flight is not None and in_flight < AUTO_MIN_IN_FLIGHT:
        return Chosen(0, f"auto: none with {in_flight} batches in flight (they pay off from {AUTO_MIN_IN_FLIGHT}: "
                         f"prefetch_queue_depth={AUTO_MIN_IN_FLIGHT - 1})")
    if cores is None:
        cores = cores_per_rank()  # this process's share of the machine (one of the ranks of a node)
    if cores < 8:
        return Chosen(0, f"auto: none on {cores} cores (fewer than 8)")
    count = max(0, cores - decode_processes - 2)
    reason = f"auto: the cores left beside {decode_processes} decode processes and 2 for training, of {cores}"
    free = shared_memory_free()
    if free is not None and free // SHARED_MEMORY_PER_CPU_DECODER < count:
        fit = free // SHARED_MEMORY_PER_CPU_DECODER
        return Chosen(fit, f"{reason}, cut from {count} to {fit}: /dev/shm has {free // 2**20:,} MiB free "
                           f"({SHARED_MEMORY_PER_CPU_DECODER // 2**20} MiB each for their pictures)")
    return Chosen(count, reason)


SHARED_MEMORY_PER_CPU_DECODER = 256 * 2**20
"""Shared memory (``/dev/shm``) that ``cpu_decoders="auto"`` sets aside for each CPU decoder beside
decode processes: the packed pictures of its jobs, which take at most two thirds of it (a
packing buffer grows by half again: :data:`PACKED_JOB_BYTES`); larger jobs go to NVDEC. Where less
is free (a container's 64 MiB default) it starts fewer."""

PACKED_JOB_BYTES = SHARED_MEMORY_PER_CPU_DECODER * 2 // 3
"""The largest job a CPU decoder beside decode processes takes, in 4:2:0 picture bytes: 57 frames
of 1080p, so one to three 16-frame clips of a video but not ten of an evaluation pass."""

CPU_DECODERS_PER_PROCESS = 2
"""CPU decoders (threads) per process when they run in processes of their own (beside NVDEC decode
processes): a few per GIL, in packing processes that hold no CUDA context (the loader's process
uploads and converts their pictures)."""


def resolve_cpu_decoders(cpu_decoders: int | str, *, gpu: bool, decode_processes: int = 0,
                         in_flight: int | None = None) -> Chosen:
    """The count ``cpu_decoders`` asks for: itself, or for ``"auto"`` :func:`auto_cpu_decoders`."""
    if cpu_decoders == "auto":
        return auto_cpu_decoders(gpu=gpu, decode_processes=decode_processes, in_flight=in_flight)
    return Chosen(int(cpu_decoders), "set")


def resolve_decoders_and_depth(cpu_decoders: int | str, prefetch_queue_depth: int | str, *, gpu: bool,
                               decode_processes: int = 0) -> tuple[Chosen, Chosen]:
    """The CPU decoders and the prefetch depth a loader asks for, each itself when a count. A depth
    given decides whether ``cpu_decoders="auto"`` starts any (:func:`auto_cpu_decoders`); ``"auto"``
    depth is :data:`AUTO_PREFETCH_QUEUE_DEPTH`, deeper where CPU decoders work on the GPU."""
    depth_given = prefetch_queue_depth != "auto"
    count = resolve_cpu_decoders(cpu_decoders, gpu=gpu, decode_processes=decode_processes,
                                 in_flight=int(prefetch_queue_depth) + 1 if depth_given else None)
    if depth_given:
        return count, Chosen(int(prefetch_queue_depth), "set")
    if gpu and count:
        depth = AUTO_PREFETCH_QUEUE_DEPTH["cpu_decoders"]
        return count, Chosen(depth, f"auto: {depth} for {int(count)} CPU decoders beside NVDEC (they take the "
                                    "jobs NVDEC would reach last, so they need batches in flight)")
    depth = AUTO_PREFETCH_QUEUE_DEPTH["none"]
    return count, Chosen(depth, f"auto: {depth} (no CPU decoders beside NVDEC)" if gpu else f"auto: {depth}")


def cpu_decoder_processes(cpu_decoders: int, decode_processes: int) -> int:
    """Processes that hold ``cpu_decoders`` CPU decoders beside NVDEC: none without decode processes
    (they are threads of the loader's process then), else :data:`CPU_DECODERS_PER_PROCESS` each."""
    if not decode_processes or not cpu_decoders:
        return 0
    return -(-cpu_decoders // CPU_DECODERS_PER_PROCESS)


@dataclass
class DecoderKindStats:
    """What one kind of decoder did.

    Attributes:
        workers: Decode workers of this kind.
        jobs: Videos decoded (one job: one video's clips of a batch).
        clips: Clips decoded.
        pictures: Pictures decoded (packets sent to the decoder).
        frames: Clip frames delivered.
        busy_seconds: Wall time the workers spent on jobs, summed over workers.
    """

    workers: int
    jobs: int = 0
    clips: int = 0
    pictures: int = 0
    frames: int = 0
    busy_seconds: float = 0.0


@dataclass
class DecoderPool:
    """One kind of decoder: ``workers`` threads decoding with ``backend``.

    Attributes:
        kind: Name in the stats (``"nvdec"``, ``"cpu"``).
        helper: Takes a job only when expected to finish before the primary pools empty the queue.
        max_job_bytes: A helper takes no job whose frames, as NV12/P016 pictures, would take more
            (a packing process's shared buffer); None: any job.
    """

    kind: str
    backend: Backend
    workers: int
    helper: bool = False
    seconds_per_frame: float | None = None
    max_job_bytes: int | None = None
    stats: DecoderKindStats = field(init=False)
    idle: int = field(init=False, default=0)  # workers waiting for a job (helpers only)

    def __post_init__(self):
        self.stats = DecoderKindStats(self.workers)


@dataclass(eq=False)
class _Task:
    job: VideoJob
    conversion: Conversion
    output: Any
    stats: DecodeStats
    future: Future
    frames: int


def _picture_bytes(task: _Task) -> int:
    """Bytes of a task's frames as 4:2:0 pictures (at most: a frame two clips share counts twice)."""
    index = task.job.index
    return task.frames * index.width * index.height * 3 // 2 * (1 if index.bit_depth == 8 else 2)


class SharedQueueRunner:
    """Runs the video jobs of every batch on the workers of all ``pools``, from one queue.

    Keeps :class:`~vclip._engine.runner.JobRunner`'s interface (``run``, ``close``,
    ``num_workers``); :meth:`kind_stats` tells what each kind of decoder did.

    Args:
        pools: The decoders; at least one must not be a helper.
        wrap: Applied to each pool's backend before use (the loader's error guard).
    """

    def __init__(self, pools: list[DecoderPool], *, wrap: Callable[[Backend], Backend] | None = None):
        if not any(not pool.helper and pool.workers > 0 for pool in pools):
            raise ValueError("a SharedQueueRunner needs a primary pool with workers")
        self.pools = [pool for pool in pools if pool.workers > 0]
        self.num_workers = sum(pool.workers for pool in self.pools)
        self.primary_workers = sum(pool.workers for pool in self.pools if not pool.helper)
        self._wrap = wrap or (lambda backend: backend)
        self._queue: deque[_Task] = deque()
        self._queued_frames = 0
        self._primary_running_frames = 0
        self._condition = threading.Condition()
        self._closed = False
        self._threads = [
            threading.Thread(target=self._work, args=(pool, self._wrap(pool.backend)), daemon=True,
                             name=f"vclip-decode-{pool.kind}")
            for pool in self.pools for _ in range(pool.workers)
        ]
        for thread in self._threads:
            thread.start()

    def run(self, jobs: list[VideoJob], conversion: Conversion, output: Any, stats: DecodeStats):
        """Decode every job into ``output``; bad videos are returned as errors per job, not raised."""
        tasks = [_Task(job, conversion, output, stats, Future(), sum(t.frames.size for t in job.targets))
                 for job in jobs]
        with self._condition:
            if self._closed:
                raise RuntimeError("this SharedQueueRunner is closed")
            self._queue.extend(tasks)
            self._queued_frames += sum(task.frames for task in tasks)
            self._condition.notify_all()
        errors: list[BaseException | None] = []
        completions: list[Completion] = []
        for task in tasks:
            error, completion = task.future.result()
            errors.append(error)
            if completion is not None:
                completions.append(completion)
        return JobsResult(errors, completions)

    def _may_take(self, pool: DecoderPool) -> bool:
        """Whether a worker of ``pool`` should take a job from the queue now. Primary workers leave
        the newest jobs to the idle helpers that would take them: with many NVDEC workers a batch's
        jobs are otherwise all gone to NVDEC threads that then wait for an engine."""
        if not self._queue:
            return False
        if pool.helper:
            return self._helper_accepts(pool)
        reserved = sum(helper.idle for helper in self.pools if helper.idle and self._helper_accepts(helper))
        return len(self._queue) > reserved

    def _helper_accepts(self, pool: DecoderPool) -> bool:
        """Whether a helper would finish the newest queued job before the primaries would reach it
        (and the job is not too large for it)."""
        if pool.max_job_bytes is not None and _picture_bytes(self._queue[-1]) > pool.max_job_bytes:
            return False
        primaries = [p for p in self.pools if not p.helper]
        primary_workers = sum(p.workers for p in primaries)
        measured = [p.seconds_per_frame for p in primaries if p.seconds_per_frame is not None]
        if not measured:
            return len(self._queue) > primary_workers  # the primaries not measured yet: only when the queue is long
        if pool.seconds_per_frame is None:
            return True  # one job measures this helper
        newest = self._queue[-1].frames
        # The primaries' work ahead: the other queued jobs and the ones they are decoding now (with
        # many NVDEC workers the queue itself stays short while the engines are saturated).
        ahead = self._queued_frames - newest + self._primary_running_frames
        return pool.seconds_per_frame * newest <= ahead * min(measured) / primary_workers

    def _work(self, pool: DecoderPool, backend: Backend) -> None:
        while True:
            with self._condition:
                waiting = 1 if pool.helper else 0  # idle helpers are counted: primaries leave them jobs
                pool.idle += waiting
                while not self._closed and not self._may_take(pool):
                    # Re-checked as the queue, the running work and the measured rates change.
                    self._condition.wait(timeout=0.05 if self._queue else None)
                pool.idle -= waiting
                if self._closed:
                    return
                task = self._queue.pop() if pool.helper else self._queue.popleft()
                self._queued_frames -= task.frames
                if not pool.helper:
                    self._primary_running_frames += task.frames
            self._execute(pool, backend, task)

    def _execute(self, pool: DecoderPool, backend: Backend, task: _Task) -> None:
        own = DecodeStats()
        started = time.perf_counter()
        bug: BaseException | None = None
        outcome: tuple[VideoError | None, Completion | None] = (None, None)
        try:
            outcome = (None, backend.decode_job(task.job, task.conversion, task.output, own))
        except VideoError as error:  # reported per video; the caller applies its error policy
            outcome = (error, None)
        except BaseException as error:  # noqa: BLE001 (a bug: raised in the caller's thread, never lost)
            bug = error
        seconds = time.perf_counter() - started
        task.stats.add(**own.as_dict())
        with self._condition:
            if not pool.helper:
                self._primary_running_frames -= task.frames
            if bug is None and outcome[0] is None:  # a failed job says nothing of the decoder's speed
                rate = seconds / max(task.frames, 1)
                previous = pool.seconds_per_frame
                pool.seconds_per_frame = rate if previous is None else previous + _SMOOTHING * (rate - previous)
            kind = pool.stats
            kind.jobs += 1
            kind.clips += len(task.job.targets)
            kind.pictures += own.packets_sent
            kind.frames += own.frames_delivered
            kind.busy_seconds += seconds
        if bug is not None:
            task.future.set_exception(bug)
        else:
            task.future.set_result(outcome)

    def kind_stats(self) -> dict[str, DecoderKindStats]:
        """A copy of each kind's counters (pools of the same kind summed)."""
        with self._condition:
            totals: dict[str, DecoderKindStats] = {}
            for pool in self.pools:
                total = totals.setdefault(pool.kind, DecoderKindStats(0))
                for name, value in vars(pool.stats).items():
                    setattr(total, name, getattr(total, name) + value)
            return totals

    def close(self) -> None:
        """Stop the worker threads after the jobs they hold (the backends belong to the caller).
        Jobs still queued fail with an error."""
        with self._condition:
            if self._closed:
                return
            self._closed = True
            left, self._queue = list(self._queue), deque()
            self._condition.notify_all()
        for task in left:
            task.future.set_exception(RuntimeError(f"{task.job.index.path}: the decoder was closed before this video"))
        for thread in self._threads:
            thread.join()


class PooledBackend:
    """Several decoder pools behind the :class:`~vclip._engine.contract.Backend` contract.

    Output buffers come from the first pool's backend (the others write into them: NVDEC worker
    processes' CUDA IPC buffers are ordinary CuPy arrays here). :meth:`runner` gives the loader a
    :class:`SharedQueueRunner` over the pools; :meth:`decode_job` runs one job through one.
    """

    def __init__(self, pools: list[DecoderPool]):
        self.pools = pools
        self.device = pools[0].backend.device
        self.default_workers = sum(pool.workers for pool in pools)
        self._runner: SharedQueueRunner | None = None
        self._closed = False
        self._lock = threading.Lock()

    def empty(self, shape: tuple[int, ...], dtype: str) -> Any:
        return self.pools[0].backend.empty(shape, dtype)

    def runner(self, wrap: Callable[[Backend], Backend] | None = None) -> SharedQueueRunner:
        """A runner over fresh copies of the pools (its own workers and counters, rates unmeasured)."""
        return SharedQueueRunner([replace(pool, seconds_per_frame=None) for pool in self.pools], wrap=wrap)

    def decode_job(self, job: VideoJob, conversion: Conversion, output: Any, stats: DecodeStats) -> Completion | None:
        with self._lock:
            if self._closed:
                raise RuntimeError("this PooledBackend is closed")
            if self._runner is None:
                self._runner = self.runner()
            runner = self._runner
        result = runner.run([job], conversion, output, stats)
        if result.errors[0] is not None:
            raise result.errors[0]
        return result.completions[0] if result.completions else None

    def close(self) -> None:
        with self._lock:
            runner, self._runner, self._closed = self._runner, None, True
        if runner is not None:
            runner.close()
        closed: set[int] = set()
        for pool in self.pools:
            if id(pool.backend) not in closed:
                closed.add(id(pool.backend))
                pool.backend.close()
