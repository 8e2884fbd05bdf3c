"""One queue of video jobs for every decoder in the box: NVDEC and CPU decoders side by side.

A :class:`DecoderPool` is one kind of decoder (a backend and a number of worker threads). A
:class:`SharedQueueDispatcher` owns the worker threads of all its pools; every batch's jobs (one video's
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
from .dispatch import DispatchResult
from .pipeline import Conversion, DecodeStats, VideoRequest
from .processes import THREADS_PER_PROCESS

__all__ = ["CPU_DECODERS_PER_PROCESS", "NVDEC_FEEDER_CORES", "PACED_DECODE_PROCESSES", "PACKED_JOB_BYTES",
           "TRAINING_CORES", "paced_decode_processes",
           "Chosen", "DecoderKindStats", "DecoderPool", "PooledBackend", "SharedQueueDispatcher", "auto_cpu_decoders",
           "auto_decode_processes", "cpu_decoder_processes", "decode_processes_paced", "loader_decode_processes",
           "resolve_cpu_decoders", "resolve_decode_processes"]

_SMOOTHING = 0.2
"""Weight of the newest job in a pool's running average of seconds per frame."""


PACED_DECODE_PROCESSES = 3
"""Decode processes (of ``THREADS_PER_PROCESS["cuda"]`` threads each) a GPU loader's pacing may start
beside NVDEC in the loader's process, on machines of 8 cores or more: one process's threads share one
interpreter lock, which caps NVDEC's feeders at small pictures (docs/performance.md)."""

NVDEC_FEEDER_CORES = 2
"""Cores that ``cpu_decoders="auto"`` leaves to the threads feeding NVDEC in the loader's process."""

TRAINING_CORES = 2
"""Cores that ``cpu_decoders="auto"`` leaves to the training loop and the hand-over of batches."""


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
    exactly those threads). On the GPU none: NVDEC decodes on threads of the loader's own process,
    in its one CUDA context (each decode process would hold a context of its own, hundreds of MiB,
    and time-slice the GPU with the training process). On the CPU one per
    ``THREADS_PER_PROCESS["cpu"]`` of the default decode threads (``min(8, cores)``), so that a
    decoder's native crash costs only its video."""
    if daemon:
        return Chosen(0, "auto: a daemon process (a DataLoader worker) may not start processes")
    if num_threads:
        return Chosen(0, f"auto: num_threads={num_threads} is set, and exactly those threads decode")
    if gpu:
        return Chosen(0, "auto: NVDEC decodes on threads of this process, in its one CUDA context")
    cores = usable_cores() if cores is None else cores
    per_process = THREADS_PER_PROCESS["cpu"]
    return Chosen(max(1, min(8, cores) // per_process),
                  f"auto: one per {per_process} of the min(8, {cores} cores) decode threads, so that a "
                  "decoder's crash costs only its video")


def paced_decode_processes(*, gpu: bool, cores: int | None = None, daemon: bool = False) -> Chosen:
    """The decode processes a GPU loader's pacing may start for ``decode_processes="auto"``: none are
    running at first (NVDEC decodes in the loader's own process); :data:`PACED_DECODE_PROCESSES`
    join while the training loop waits with every NVDEC thread of the loader's process busy. None
    on the CPU, in a daemon process, or under 8 cores."""
    if not gpu:
        return Chosen(0, "auto: none beside the CPU decoders")
    if daemon:
        return Chosen(0, "auto: a daemon process (a DataLoader worker) may not start processes")
    cores = usable_cores() if cores is None else cores
    if cores < 8:
        return Chosen(0, f"auto: a GPU and {cores} cores (fewer than 8): the NVDEC feeders and the training loop "
                         "need them")
    return Chosen(PACED_DECODE_PROCESSES, f"auto: none at first (NVDEC in this process's CUDA context); up to "
                                          f"{PACED_DECODE_PROCESSES} while the training loop waits with every NVDEC "
                                          "thread busy")


def resolve_decode_processes(decode_processes: int | str, *, gpu: bool, num_threads: int = 0,
                             daemon: bool = False) -> Chosen:
    """The count ``decode_processes`` asks for: itself, or for ``"auto"`` :func:`auto_decode_processes`."""
    if decode_processes == "auto":
        return auto_decode_processes(gpu=gpu, num_threads=num_threads, daemon=daemon)
    return Chosen(int(decode_processes), "set")


def decode_processes_paced(decode_processes: int | str, *, gpu: bool, num_threads: int = 0) -> bool:
    """Whether a loader's decode processes are paced (started as the training loop needs them, up
    to :func:`paced_decode_processes`): ``"auto"`` on the GPU with no thread count set."""
    return gpu and decode_processes == "auto" and not num_threads


def loader_decode_processes(decode_processes: int | str, *, gpu: bool, num_threads: int = 0,
                            daemon: bool = False) -> Chosen:
    """The most decode processes a loader runs: :func:`paced_decode_processes` where they are paced
    (:func:`decode_processes_paced`), else :func:`resolve_decode_processes`."""
    if decode_processes_paced(decode_processes, gpu=gpu, num_threads=num_threads):
        return paced_decode_processes(gpu=True, daemon=daemon)
    return resolve_decode_processes(decode_processes, gpu=gpu, num_threads=num_threads, daemon=daemon)


def auto_cpu_decoders(*, gpu: bool, decode_processes: int = 0, cores: int | None = None,
                      daemon: bool = False) -> Chosen:
    """The most CPU decoders ``cpu_decoders="auto"`` may use beside NVDEC: the cores left free.

    On the GPU they run in processes of their own that hold no CUDA context (the loader's process
    uploads and converts their pictures); the loader's pacing starts using them only while the
    training loop waits for batches and NVDEC is busy. The NVDEC feeders need
    :data:`NVDEC_FEEDER_CORES` (one more per decode process) and the training loop
    :data:`TRAINING_CORES`; machines with fewer than 8 cores get none. ``cores`` defaults to this
    process's share of the machine (:func:`vclip._machine.cores_per_rank`: the ranks torchrun
    starts on one machine share its cores), and no more start than
    :data:`SHARED_MEMORY_PER_CPU_DECODER` each fits in the free shared memory. None in a ``daemon``
    process (a DataLoader worker may not start processes). On the CPU none: the default decode pool
    already keeps every core busy; ask for a count to use them.
    """
    if not gpu:
        return Chosen(0, "auto: none on the CPU (the decode pool keeps every core busy)")
    if daemon:
        return Chosen(0, "auto: none in a daemon process (a DataLoader worker may not start processes)")
    if cores is None:
        cores = cores_per_rank()  # this process's share of the machine (one of the ranks of a node)
    if cores < 8:
        return Chosen(0, f"auto: none on {cores} cores (fewer than 8)")
    count = max(0, cores - NVDEC_FEEDER_CORES - TRAINING_CORES - decode_processes)
    reason = (f"auto: up to the cores left beside NVDEC's feeders ({NVDEC_FEEDER_CORES}"
              + (f" and {decode_processes} decode processes" if decode_processes else "")
              + f") and {TRAINING_CORES} for training, of {cores}")
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
"""CPU decoders (threads) per packing process: a few per GIL, in processes that hold no CUDA context
(the loader's process uploads and converts their pictures)."""


def resolve_cpu_decoders(cpu_decoders: int | str, *, gpu: bool, decode_processes: int = 0, paced: bool = False,
                         daemon: bool = False) -> Chosen:
    """The count ``cpu_decoders`` asks for: itself, or for ``"auto"`` :func:`auto_cpu_decoders`.
    ``paced``: the ``decode_processes`` are the most the loader's pacing may start, and it gives a CPU
    decoder back for each one it starts (:attr:`vclip._loader.pacing.PacingRules.cpu_decoders_per_process`),
    so the count is that of none running."""
    if cpu_decoders != "auto":
        return Chosen(int(cpu_decoders), "set")
    if not (paced and decode_processes):
        return auto_cpu_decoders(gpu=gpu, decode_processes=decode_processes, daemon=daemon)
    chosen = auto_cpu_decoders(gpu=gpu, daemon=daemon)
    return Chosen(chosen, f"{chosen.reason}; one fewer for each decode process started") if chosen else chosen


def cpu_decoder_processes(cpu_decoders: int) -> int:
    """Processes that hold ``cpu_decoders`` CPU decoders beside NVDEC, :data:`CPU_DECODERS_PER_PROCESS` each."""
    return -(-cpu_decoders // CPU_DECODERS_PER_PROCESS) if cpu_decoders else 0


@dataclass
class DecoderKindStats:
    """What one kind of decoder did.

    Attributes:
        workers: Decode workers of this kind (started).
        active: Workers allowed to take jobs now (the loader's pacing moves it between 0 and ``workers``).
        jobs: Videos decoded (one job: one video's clips of a batch).
        clips: Clips decoded.
        pictures: Pictures decoded (packets sent to the decoder).
        frames: Clip frames delivered.
        busy_seconds: Wall time the workers spent on jobs, summed over workers.
        active_seconds: Wall time the active workers were allowed to work, summed over workers.
    """

    workers: int
    active: int = 0
    jobs: int = 0
    clips: int = 0
    pictures: int = 0
    frames: int = 0
    busy_seconds: float = 0.0
    active_seconds: float = 0.0


@dataclass
class DecoderPool:
    """One kind of decoder: ``workers`` threads decoding with ``backend``.

    Attributes:
        kind: Name in the stats (``"nvdec"``, ``"cpu"``).
        helper: Takes a job only when expected to finish before the primary pools empty the queue.
        max_job_bytes: A helper takes no job whose frames, as NV12/P016 pictures, would take more
            (a packing process's shared buffer); None: any job.
        active: Workers allowed to take jobs (the first ``active`` of them; None: all). The others
            wait, holding no job; :meth:`SharedQueueDispatcher.set_active` changes it.
    """

    kind: str
    backend: Backend
    workers: int
    helper: bool = False
    seconds_per_frame: float | None = None
    max_job_bytes: int | None = None
    active: int | None = None
    stats: DecoderKindStats = field(init=False)
    idle: int = field(init=False, default=0)  # active workers waiting for a job (helpers only)
    active_since: float = field(init=False, default=0.0)

    def __post_init__(self):
        self.active = self.workers if self.active is None else max(0, min(self.active, self.workers))
        self.stats = DecoderKindStats(self.workers, self.active)
        self.active_since = time.perf_counter()


@dataclass(eq=False)
class _Task:
    job: VideoRequest
    conversion: Conversion
    output: Any
    stats: DecodeStats
    future: Future
    frames: int


def _picture_bytes(task: _Task) -> int:
    """Bytes of a task's frames as 4:2:0 pictures (at most: a frame two clips share counts twice)."""
    index = task.job.index
    return task.frames * index.width * index.height * 3 // 2 * (1 if index.bit_depth == 8 else 2)


class SharedQueueDispatcher:
    """Runs the video jobs of every batch on the workers of all ``pools``, from one queue.

    Keeps :class:`~vclip._engine.dispatch.ThreadDispatcher`'s interface (``run``, ``close``,
    ``num_workers``); :meth:`kind_stats` tells what each kind of decoder did.

    Args:
        pools: The decoders; at least one must not be a helper.
        wrap: Applied to each pool's backend before use (the loader's error guard).
    """

    def __init__(self, pools: list[DecoderPool], *, wrap: Callable[[Backend], Backend] | None = None):
        if not any(not pool.helper and pool.workers > 0 and pool.active for pool in pools):
            raise ValueError("a SharedQueueDispatcher needs a primary pool with active workers")
        self.pools = [pool for pool in pools if pool.workers > 0]
        self.num_workers = sum(pool.workers for pool in self.pools)
        self._wrap = wrap or (lambda backend: backend)
        self._queue: deque[_Task] = deque()
        self._queued_frames = 0
        self._primary_running_frames = 0
        self._condition = threading.Condition()
        self._closed = False
        self._threads = [
            threading.Thread(target=self._work, args=(pool, self._wrap(pool.backend), rank), daemon=True,
                             name=f"vclip-decode-{pool.kind}")
            for pool in self.pools for rank in range(pool.workers)
        ]
        for thread in self._threads:
            thread.start()

    def run(self, jobs: list[VideoRequest], conversion: Conversion, output: Any, stats: DecodeStats):
        """Decode every job into ``output``; bad videos are returned as errors per job, not raised."""
        tasks = [_Task(job, conversion, output, stats, Future(), sum(t.frames.size for t in job.targets))
                 for job in jobs]
        with self._condition:
            if self._closed:
                raise RuntimeError("this SharedQueueDispatcher is closed")
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
        return DispatchResult(errors, completions)

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

    def set_active(self, kind: str, count: int) -> int:
        """Let ``count`` workers of the pools of ``kind`` take jobs (at most those started); a
        worker beyond them finishes the job it holds, then waits. Returns the count now active."""
        with self._condition:
            now = time.perf_counter()
            active = 0
            for pool in self.pools:
                if pool.kind == kind:
                    pool.stats.active_seconds += (now - pool.active_since) * (pool.active or 0)
                    pool.active_since = now
                    pool.active = max(0, min(count - active, pool.workers))
                    pool.stats.active = pool.active
                    active += pool.active
            self._condition.notify_all()
            return active

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

    def _work(self, pool: DecoderPool, backend: Backend, rank: int) -> None:
        while True:
            with self._condition:
                waiting = 0  # idle active helpers are counted: primaries leave them jobs
                while not self._closed:
                    usable = rank < (pool.active or 0)
                    counted = 1 if pool.helper and usable else 0
                    pool.idle += counted - waiting
                    waiting = counted
                    if usable and self._may_take(pool):
                        break
                    # Re-checked as the queue, the running work, the measured rates and the active count change.
                    self._condition.wait(timeout=0.05 if self._queue and usable else None)
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
            outcome = (None, backend.decode_video(task.job, task.conversion, task.output, own))
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
            now = time.perf_counter()
            for pool in self.pools:
                total = totals.setdefault(pool.kind, DecoderKindStats(0))
                for name, value in vars(pool.stats).items():
                    setattr(total, name, getattr(total, name) + value)
                total.active_seconds += (now - pool.active_since) * (pool.active or 0)  # the running stretch
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

    Output buffers come from ``allocator`` (default: the first pool's backend); the others write
    into them (NVDEC worker processes' CUDA IPC buffers are ordinary CuPy arrays here).
    :meth:`dispatcher` gives the loader a :class:`SharedQueueDispatcher` over the pools; :meth:`decode_video`
    runs one job through one.
    """

    def __init__(self, pools: list[DecoderPool], *, allocator: Backend | None = None):
        self.pools = pools
        self._allocator = allocator or pools[0].backend
        self.device = pools[0].backend.device
        self.default_workers = sum(pool.workers for pool in pools)
        self._dispatcher: SharedQueueDispatcher | None = None
        self._closed = False
        self._lock = threading.Lock()

    def empty(self, shape: tuple[int, ...], dtype: str) -> Any:
        return self._allocator.empty(shape, dtype)

    def dispatcher(self, wrap: Callable[[Backend], Backend] | None = None,
                   active: dict[str, int] | None = None) -> SharedQueueDispatcher:
        """A dispatcher over fresh copies of the pools (its own workers and counters, rates unmeasured),
        with ``active[kind]`` workers of a kind allowed to take jobs at first (default: all)."""
        active = active or {}
        return SharedQueueDispatcher([replace(pool, seconds_per_frame=None, active=active.get(pool.kind, pool.active))
                                      for pool in self.pools], wrap=wrap)

    def decode_video(self, job: VideoRequest, conversion: Conversion, output: Any,
                     stats: DecodeStats) -> Completion | None:
        with self._lock:
            if self._closed:
                raise RuntimeError("this PooledBackend is closed")
            if self._dispatcher is None:
                self._dispatcher = self.dispatcher()
            dispatcher = self._dispatcher
        result = dispatcher.run([job], conversion, output, stats)
        if result.errors[0] is not None:
            raise result.errors[0]
        return result.completions[0] if result.completions else None

    def close(self) -> None:
        with self._lock:
            dispatcher, self._dispatcher, self._closed = self._dispatcher, None, True
        if dispatcher is not None:
            dispatcher.close()
        closed: set[int] = set()
        for pool in self.pools:
            if id(pool.backend) not in closed:
                closed.add(id(pool.backend))
                pool.backend.close()
