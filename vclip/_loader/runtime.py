"""A ClipLoader's runtime in one process: the decode workers, the threads that build batches
ahead of the training loop, the ring of output buffers, the hand-over of each batch, and the
pacing that moves decoders and batches in flight to follow the training loop.

One pass over an epoch runs at a time (:class:`Pass`): while the training loop holds batch n,
batches n+1 .. n+depth+1 are being built; a batch is handed over once built, its buffer reused
once the consumer has moved past it (see :mod:`vclip._loader.handoff`) and no longer references it.
Once every batch of a pass is submitted, and the training loop has come back for a second pass, the
first batches of the passes expected next (the next epochs, on the same shard) are built while the
training loop drains this one, as many as keep the batches in flight at the depth (several passes
when epochs are shorter than that), so an epoch boundary does not empty the pipeline. A pass built
ahead is used if it comes, and dropped otherwise; its batches submitted before a video turned out
bad in an earlier epoch are built again when it starts, leaving that video out as a fresh start would.
"""

from __future__ import annotations

import atexit
import os
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

import numpy as np
import torch

from .._device import Device, current_cuda_index
from .._engine.backends import PROCESS_POOL
from .._engine.gpu_busy import GpuBusy
from .._engine.pipeline import Conversion, DecodeStats, VideoRequest
from .._engine.processes import ProcessBackend
from .._engine.scheduler import DecoderKindStats, DecoderPool, PooledBackend, SharedQueueDispatcher
from ..memory import RING_BUFFERS_BEYOND_DEPTH, LoaderMemoryEstimate
from .audio import AudioBuffers
from .batches import BatchBuilder, BuiltBatch
from .handoff import BufferRing, make_handoff
from .pacing import PACING, Pacer, PacingChange, PacingRules, Resource
from .settings import RuntimeSettings
from .source import as_video_error
from .stats import LoaderCounters, own_bytes

__all__ = ["LoaderRuntime", "Pass"]


class _GuardedBackend:
    """The backend, with any exception of one video's decode turned into a VideoError naming the
    file, so that the error policy applies to it (the job runner passes on only VideoErrors)."""

    def __init__(self, backend):
        self.backend = backend

    def __getattr__(self, name: str):
        return getattr(self.backend, name)

    def decode_video(self, job: VideoRequest, conversion: Conversion, output, stats: DecodeStats):
        try:
            return self.backend.decode_video(job, conversion, output, stats)
        except Exception as error:
            video_error = as_video_error(job.index.path, error, "decoding")
            if video_error is error:
                raise
            raise video_error from error


class Pass:
    """One pass over an epoch from batch ``first``: its batches and those being built."""

    def __init__(self, epoch: int, shard: np.ndarray, batches: list, first: int, start_stats):
        self.epoch = epoch
        self.shard = shard
        self.batches = batches
        self.first = first
        self.delivered = first  # batches of the epoch delivered so far, counting those of earlier runs
        self.start_stats = start_stats
        self.started = time.perf_counter()
        self.pending: deque[Future] = deque()
        self.submitted = first
        self.superseded = False
        self.slots: dict[int, int] = {}  # the buffer of each batch submitted
        self.left_out: dict[int, int] = {}  # videos left out of the epoch when each batch was submitted

    def matches(self, epoch: int, shard: np.ndarray, first: int) -> bool:
        return self.epoch == epoch and self.first == first and np.array_equal(self.shard, shard)

    def finish(self, _wait=wait) -> None:
        """Wait until no batch of this pass is being built. (``wait`` is bound here: a pass abandoned
        by its consumer may be finished while the interpreter exits, its modules already cleared.)"""
        _wait(list(self.pending))


_live: weakref.WeakSet[LoaderRuntime] = weakref.WeakSet()


@atexit.register
def _close_live_runtimes() -> None:
    """At interpreter exit, close the runtimes whose loaders nobody closed (a training loop that
    stopped mid-epoch): their passes end while every module is still there."""
    for runtime in list(_live):
        runtime.close()


class LoaderRuntime:
    """Decode workers, batch builders, buffer ring, hand-over and pacing of one process.

    Args:
        backend: The decoder backend (see :func:`vclip._engine.backends.make_backend`).
        device: The loader's resolved device.
        builder: Builds each batch.
        allocate: Makes one output batch buffer with the backend.
        settings: Decode threads, CPU decoders and batches in flight, and which the user set.
        next_pass: ``epoch -> (shard, batches)`` of this process's next pass over ``epoch``, for
            the batches built ahead across an epoch boundary; None: none built ahead.
        rules: The pacing's numbers.
    """

    def __init__(self, backend, device: Device, builder: BatchBuilder, allocate: Callable[[Any], Any],
                 settings: RuntimeSettings, *, next_pass: Callable[[int], tuple[np.ndarray, list]] | None = None,
                 rules: PacingRules = PACING):
        self.backend = backend
        pooled = backend if isinstance(backend, PooledBackend) else PooledBackend(
            [DecoderPool("nvdec" if device.is_cuda else "cpu", backend, settings.threads)])
        self._primary = next(pool.kind for pool in pooled.pools if not pool.helper)
        self._helper = next((pool.kind for pool in pooled.pools if pool.helper), None)
        remote = next((pool for pool in pooled.pools if pool.kind == PROCESS_POOL), None)
        self._processes: ProcessBackend | None = None
        self._working_processes = 0  # decode processes taking jobs
        if remote is not None and settings.paced_processes and isinstance(remote.backend, ProcessBackend):
            self._processes = remote.backend
        workers = {pool.kind: pool.workers for pool in pooled.pools}
        threads = min(settings.threads, workers[self._primary])
        start_threads = threads if settings.threads_set else min(threads, max(rules.start_threads, 1))
        helpers = workers.get(self._helper, 0) if self._helper else 0
        start_helpers = helpers if settings.cpu_decoders_set else 0
        active = {self._primary: start_threads, PROCESS_POOL: 0,
                  **({self._helper: start_helpers} if self._helper else {})}
        self.dispatcher: SharedQueueDispatcher = pooled.dispatcher(wrap=_GuardedBackend, active=active)
        self.builder = builder
        self.counters = LoaderCounters()
        try:
            self.handoff = make_handoff(device)
            self.memory_baseline = self.handoff.memory_sample()
        except BaseException:
            self.dispatcher.close()  # its threads may have started; the backend is the caller's to close
            raise
        self.builders = ThreadPoolExecutor(settings.max_depth + 1, thread_name_prefix="vclip-batch")
        self.ring = BufferRing(settings.max_depth + RING_BUFFERS_BEYOND_DEPTH, lambda: allocate(backend), self.handoff)
        self._device = device
        self._next_pass = next_pass
        self.pid = os.getpid()
        _live.add(self)
        self.active: Pass | None = None
        self.ahead: deque[Pass] = deque()  # the first batches of the passes expected next, in order
        self.passes = 0
        self._last_epoch: int | None = None
        self._epoch_step = 1  # the next pass is expected over epoch + this (0: the loop repeats its epoch)
        self.closed = False
        self._held: int | None = None
        self._handed_at: float | None = None
        self.pacer = Pacer(
            threads=Resource("decode_threads", start_threads, min(rules.min_threads, threads), threads,
                             settings.threads_set),
            processes=Resource("decode_processes", 0, 0, settings.paced_processes if self._processes else 0, False),
            cpu_decoders=Resource("cpu_decoders", start_helpers, 0, helpers, settings.cpu_decoders_set),
            depth=Resource("prefetch_queue_depth", settings.depth, min(rules.min_depth, settings.depth),
                           settings.max_depth, settings.depth_set),
            apply=self._apply, busy=self._busy, ready=self._ready_processes, rules=rules,
            gpu_busy=GpuBusy(current_cuda_index() if device.index is None else device.index)
            if self._processes is not None else None)

    # -- pacing -------------------------------------------------------------------------------------
    def _apply(self, setting: str, value: int) -> None:
        """Let ``value`` decoders of ``setting`` work (the depth is read where batches are submitted)."""
        if setting == "decode_processes" and self._processes is not None:
            self._processes.add_processes(value)  # started once; a pass that needs fewer leaves them idle
            self._ready_processes()
        elif setting == "decode_threads":
            self.dispatcher.set_active(self._primary, value)
        elif setting == "cpu_decoders" and self._helper is not None:
            self.dispatcher.set_active(self._helper, value)

    def limit(self, counts: dict[str, int]) -> None:
        """Keep each setting of ``counts`` at most its count (what a memory budget leaves), also where
        the pacing does not move it; called before the first pass."""
        for setting, most in counts.items():
            self.pacer.limit(setting, most)

    def _ready_processes(self) -> int:
        """How many decode processes are ready; those the pacing asked for take jobs once ready
        (a job sent to a process still starting would wait there for seconds)."""
        if self._processes is None:
            return 0
        ready = self._processes.ready_processes()
        working = min(ready, self.pacer.value("decode_processes"))
        if working != self._working_processes:
            self._working_processes = working
            self.dispatcher.set_active(PROCESS_POOL, working * self._processes.threads)
        return ready

    @property
    def depth(self) -> int:
        """Batches queued ahead of the one the consumer holds, as the pacing left them."""
        return self.pacer.value("prefetch_queue_depth")

    def _busy(self) -> dict[str, tuple[float, float]]:
        kinds = self.dispatcher.kind_stats()
        names = {self._primary: "decode_threads", PROCESS_POOL: "decode_processes", self._helper: "cpu_decoders"}
        return {names[kind]: (use.busy_seconds, use.active_seconds) for kind, use in kinds.items() if kind in names}

    def working_memory(self, estimate: LoaderMemoryEstimate, processes: int) -> int:
        """The loader's own planned bytes (``estimate`` plans for the most of everything) for what it
        has allocated so far: what the pacing gave back stays allocated (decode processes started,
        the ring's buffers, the staging of CPU decoders that worked), so the plan is taken for the
        most of each that has worked; ``processes``: the decode processes when they are not paced."""
        if self._processes is not None:
            processes = self._processes.processes
        return estimate.working(processes=processes, buffers=self.ring.allocated,
                                cpu_decoders=self.pacer.most("cpu_decoders"))

    @property
    def pacing_changes(self) -> list[PacingChange]:
        return list(self.pacer.changes)

    def use_audio(self, shape: tuple[int, ...]) -> None:
        """Give every batch audio of ``shape`` (the builder decodes it), in buffers of the ring's slots."""
        if self.builder.audio is not None:
            self.ring.audio = AudioBuffers(self.ring.count, shape, self.builder.audio.spec.dtype,
                                           pinned=self._device.is_cuda)

    @property
    def audio(self) -> AudioBuffers | None:
        """The audio buffers of the ring's slots (see :meth:`use_audio`), or None."""
        return self.ring.audio

    @property
    def decode_workers(self) -> int:
        """Decode threads of the default kind the loader may run, in this process and in the decode
        processes its pacing may start (each with an NVDEC decoder on the GPU; the pacing decides
        how many work); CPU decoders beside NVDEC are counted in :meth:`decoder_kinds`."""
        paced = self.pacer.resources["decode_processes"].maximum * (self._processes.threads if self._processes else 0)
        return self.pacer.resources["decode_threads"].maximum + paced

    def decoder_kinds(self) -> dict[str, DecoderKindStats]:
        """What each kind of decoder did."""
        return self.dispatcher.kind_stats()

    # -- passes -------------------------------------------------------------------------------------
    def begin(self, epoch: int, shard: np.ndarray, batches: list, first: int, start_stats) -> Pass:
        """A new pass (ending the one in progress); the batches built ahead for it are taken over."""
        self.end_active()
        self.passes += 1
        if self.passes == 1:
            self.pacer.begin()  # the decoders' busy share counts from the first batch asked for, not from indexing
        if self._last_epoch is not None:
            self._epoch_step = 0 if epoch == self._last_epoch else 1
        self._last_epoch = epoch
        ahead = self.ahead.popleft() if self.ahead else None
        if ahead is not None and ahead.matches(epoch, shard, first) and len(ahead.batches) == len(batches):
            self._rebuild_stale(ahead)
            ahead.start_stats, ahead.started = start_stats, time.perf_counter()
            self.active = ahead
        else:
            for run in ([ahead] if ahead is not None else []) + list(self.ahead):
                self._drop(run)
            self.ahead.clear()
            self.active = Pass(epoch, shard, batches, first, start_stats)
        return self.active

    def _rebuild_stale(self, run: Pass) -> None:
        """Build again, into the same buffers, the batches of ``run`` (built ahead) submitted before a
        video turned out bad in an earlier epoch: a fresh start would have left that video out."""
        left_out = self.builder.bad.excluded_count(run.epoch)
        stale = [number for number in range(run.first, run.submitted) if run.left_out[number] != left_out]
        wait([run.pending[number - run.first] for number in stale])  # (a pass built ahead starts undelivered)
        for number in stale:
            run.left_out[number] = left_out
            run.pending[number - run.first] = self.builders.submit(self._build, run, number, run.slots[number])

    def end_active(self) -> None:
        previous, self.active = self.active, None
        if previous is not None:
            previous.superseded = True
            previous.finish()
            self.counters.add(active_seconds=time.perf_counter() - previous.started)

    def _drop(self, run: Pass) -> None:
        """Batches built ahead for a pass that did not come: their buffers are free again."""
        run.superseded = True
        run.finish()
        for future in run.pending:
            _, slot, events, _ = future.result() if future.exception() is None else (None, None, [], 0.0)
            if slot is not None:
                self.ring.set_waits(slot, events)
        run.pending.clear()

    def deliver(self, run: Pass) -> Iterator[tuple[BuiltBatch, torch.Tensor, torch.Tensor, tuple | None]]:
        """``(batch, data, labels, audio)`` of every remaining batch of ``run``, handed over in order;
        ``audio``: ``(samples, lengths, has_audio)`` tensors on the loader's device, or None."""
        try:
            for number in range(run.first, len(run.batches)):
                self._release_held()
                self._submit(run, last=number + self.depth + 1)
                waiting = time.perf_counter()
                built, slot, events, finished = run.pending[0].result()
                run.pending.popleft()
                handed = time.perf_counter()
                ready = sum(1 for queued in (run, *self.ahead) for future in queued.pending if future.done())
                self._build_ahead(run)
                self.counters.add(batches=1, clips=built.labels.size, consumer_wait_seconds=handed - waiting,
                                  queue_seconds=max(0.0, waiting - finished), skipped_clips=built.skipped_clips)
                self._ready_processes()  # a decode process that became ready (or a replaced one) takes jobs
                if self._handed_at is not None:
                    self.pacer.observe(handed - waiting, handed - self._handed_at, ready)
                self._handed_at = handed
                self.handoff.consumer_waits(events)
                self._held = slot
                count = built.labels.size
                data = self.ring.tensor(slot, count)
                run.delivered = number + 1
                audio = None
                if self.audio is not None and built.audio_lengths is not None and built.has_audio is not None:
                    device = torch.device("cuda", int(self._device.index or 0)) if self._device.is_cuda else None
                    audio = (self.audio.hand_over(slot, count, device), self.handoff.labels(built.audio_lengths),
                             self.handoff.labels(built.has_audio))
                yield built, data, self.handoff.labels(built.labels), audio
                del data, audio
                if run.superseded:
                    raise RuntimeError(
                        "a newer pass over this ClipLoader ended this one: a loader serves one pass at a time"
                    )
            self._release_held()
        finally:
            run.finish()
            if self.active is run and not self.closed:
                self.active = None
                self.counters.add(active_seconds=time.perf_counter() - run.started)

    def _submit(self, run: Pass, *, last: int) -> None:
        """Start building batches up to number ``last``."""
        while run.submitted <= min(last, len(run.batches) - 1):
            slot = self.ring.next_slot(self.pacer.most("prefetch_queue_depth") + RING_BUFFERS_BEYOND_DEPTH)
            run.slots[run.submitted] = slot
            run.left_out[run.submitted] = self.builder.bad.excluded_count(run.epoch)
            run.pending.append(self.builders.submit(self._build, run, run.submitted, slot))
            run.submitted += 1

    def _build_ahead(self, run: Pass) -> None:
        """Once every batch of ``run`` is submitted, build the first batches of the passes expected
        next, as many as keep the batches in flight at the depth."""
        if self._next_pass is None or self.passes < 2 or run.superseded:
            return  # (from the second pass on: a loader read once, a list of its batches, builds nothing more)
        last = self.ahead[-1] if self.ahead else run
        while last is not run or run.submitted == len(run.batches):
            room = self.depth + 1 - sum(len(queued.pending) for queued in (run, *self.ahead))
            if room <= 0:
                return
            if last.submitted < len(last.batches):
                self._submit(last, last=last.submitted + room - 1)
                continue
            epoch = last.epoch + self._epoch_step
            shard, batches = self._next_pass(epoch)
            if not batches:
                return
            last = Pass(epoch, shard, batches, 0, None)
            self.ahead.append(last)

    def _build(self, run: Pass, number: int, slot: int) -> tuple[BuiltBatch, int, list, float]:
        """Batch ``number`` of ``run`` built into buffer ``slot`` (builder thread)."""
        started = time.perf_counter()
        output = self.ring.prepare(slot)
        events: list = []
        try:
            built = self.builder.build(self.dispatcher, self.counters, self.handoff.synchronize, run.epoch, run.shard,
                                       run.batches[number], number, output, events,
                                       audio_output=self.audio.array(slot) if self.audio is not None else None)
        finally:
            self.ring.set_waits(slot, events)
        self.counters.add(build_seconds=time.perf_counter() - started)
        sample = self.memory_sample()
        self.counters.record_memory(sample, own_bytes(sample, self._device))
        return built, slot, events, time.perf_counter()

    def _release_held(self) -> None:
        """The consumer moved past the batch it held: its buffer may be refilled once the work
        the consumer queued on it is done (and no one holds the batch any longer)."""
        if self._held is not None:
            event = self.handoff.release_event()
            self.ring.set_waits(self._held, [event] if event is not None else [])
            self._held = None

    def memory_sample(self) -> dict[str, int]:
        return {"buffers_bytes": self.ring.allocated_bytes, **self.handoff.memory_sample()}

    def close(self) -> None:
        """Stop building batches and shut the worker threads (and processes) down."""
        if self.closed:
            return
        self.closed = True
        for run in (self.active, *self.ahead):
            if run is not None:
                run.superseded = True
                run.finish()
        self.active = None
        self.ahead.clear()
        self.builders.shutdown(wait=True)
        if self.builder.audio is not None:
            self.builder.audio.close()
        self.dispatcher.close()
        self.backend.close()
