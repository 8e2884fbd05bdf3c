"""A ClipLoader's runtime in one process: the decode workers, the threads that build batches
ahead of the training loop, the ring of output buffers, and the hand-over of each batch.

One pass over an epoch runs at a time (:class:`Pass`): while the training loop holds batch n,
batches n+1 .. n+depth+1 are being built; a batch is handed over once built, its buffer reused
once the consumer has moved past it (see :mod:`vclip._loader.handoff`).
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

import numpy as np
import torch

from .._device import Device
from .._engine.pipeline import Conversion, DecodeStats, VideoJob
from .._engine.runner import JobRunner
from .._engine.scheduler import DecoderKindStats, PooledBackend, SharedQueueRunner
from .audio import AudioBuffers
from .batches import BatchBuilder, BuiltBatch
from .handoff import BufferRing, make_handoff
from .source import as_video_error
from .stats import LoaderCounters

__all__ = ["LoaderRuntime", "Pass"]


class _GuardedBackend:
    """The backend, with any exception of one video's decode turned into a VideoError naming the
    file, so that the error policy applies to it (the job runner passes on only VideoErrors)."""

    def __init__(self, backend):
        self.backend = backend

    def __getattr__(self, name: str):
        return getattr(self.backend, name)

    def decode_job(self, job: VideoJob, conversion: Conversion, output, stats: DecodeStats):
        try:
            return self.backend.decode_job(job, conversion, output, stats)
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

    def finish(self) -> None:
        """Wait until no batch of this pass is being built."""
        wait(list(self.pending))


class LoaderRuntime:
    """Decode workers, batch builders, buffer ring and hand-over of one process.

    Args:
        backend: The decoder backend (see :func:`vclip._engine.backends.make_backend`).
        device: The loader's resolved device.
        builder: Builds each batch.
        allocate: Makes one output batch buffer with the backend.
        num_threads: Decode threads (0: the backend's default); with ``decode_processes`` the
            threads here only wait for the processes.
        decode_processes: Worker processes of the backend (0: none).
        prefetch_queue_depth: Batches built ahead of the one the consumer holds.
    """

    def __init__(self, backend, device: Device, builder: BatchBuilder, allocate: Callable[[Any], Any], *,
                 num_threads: int, decode_processes: int, prefetch_queue_depth: int):
        self.backend = backend
        if isinstance(backend, PooledBackend):
            self.runner: JobRunner | SharedQueueRunner = backend.runner(wrap=_GuardedBackend)
        else:
            self.runner = JobRunner(_GuardedBackend(backend), 0 if decode_processes else num_threads,
                                    dedicated_threads=True)
        self.builder = builder
        self.depth = prefetch_queue_depth
        self.counters = LoaderCounters()
        try:
            self.handoff = make_handoff(device)
            self.memory_baseline = self.handoff.memory_sample()
        except BaseException:
            self.runner.close()  # its threads may have started; the backend is the caller's to close
            raise
        self.builders = ThreadPoolExecutor(prefetch_queue_depth + 1, thread_name_prefix="vclip-batch")
        self.ring = BufferRing(prefetch_queue_depth + 2, lambda: allocate(backend), self.handoff)
        self.audio: AudioBuffers | None = None  # see use_audio
        self._device = device
        self.pid = os.getpid()
        self.active: Pass | None = None
        self.closed = False
        self._held: int | None = None

    def use_audio(self, shape: tuple[int, ...]) -> None:
        """Give every batch audio of ``shape`` (the builder decodes it), in buffers of the ring's slots."""
        if self.builder.audio is not None:
            self.audio = AudioBuffers(self.ring.count, shape, self.builder.audio.spec.dtype,
                                      pinned=self._device.is_cuda)

    @property
    def decode_workers(self) -> int:
        """Decode threads of the default kind (each with an NVDEC decoder on the GPU); CPU decoders
        beside NVDEC are counted in :meth:`decoder_kinds`."""
        if isinstance(self.runner, SharedQueueRunner):
            return self.runner.primary_workers
        return self.runner.num_workers

    def decoder_kinds(self) -> dict[str, DecoderKindStats] | None:
        """What each kind of decoder did, when several pools share the queue (else None)."""
        return self.runner.kind_stats() if isinstance(self.runner, SharedQueueRunner) else None

    def begin(self, epoch: int, shard: np.ndarray, batches: list, first: int, start_stats) -> Pass:
        """A new pass (ending the one in progress)."""
        self.end_active()
        self.active = Pass(epoch, shard, batches, first, start_stats)
        return self.active

    def end_active(self) -> None:
        previous, self.active = self.active, None
        if previous is not None:
            previous.superseded = True
            previous.finish()
            self.counters.add(active_seconds=time.perf_counter() - previous.started)

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
                self.counters.add(batches=1, clips=built.labels.size, consumer_wait_seconds=handed - waiting,
                                  queue_seconds=max(0.0, waiting - finished))
                self.handoff.consumer_waits(events)
                self._held = slot
                data = self.ring.tensor(slot)
                count = built.labels.size
                run.delivered = number + 1
                audio = None
                if self.audio is not None and built.audio_lengths is not None and built.has_audio is not None:
                    device = torch.device("cuda", int(self._device.index or 0)) if self._device.is_cuda else None
                    audio = (self.audio.hand_over(slot, count, device), self.handoff.labels(built.audio_lengths),
                             self.handoff.labels(built.has_audio))
                yield built, data if count == data.shape[0] else data[:count], self.handoff.labels(built.labels), audio
                if run.superseded:
                    raise RuntimeError(
                        "a newer pass over this ClipLoader ended this one: a loader serves one pass at a time"
                    )
            self._release_held()
        finally:
            run.finish()
            if self.active is run:
                self.active = None
                self.counters.add(active_seconds=time.perf_counter() - run.started)

    def _submit(self, run: Pass, *, last: int) -> None:
        """Start building batches up to number ``last``."""
        while run.submitted <= min(last, len(run.batches) - 1):
            run.pending.append(self.builders.submit(self._build, run, run.submitted, self.ring.next_slot()))
            run.submitted += 1

    def _build(self, run: Pass, number: int, slot: int) -> tuple[BuiltBatch, int, list, float]:
        """Batch ``number`` of ``run`` built into buffer ``slot`` (builder thread)."""
        started = time.perf_counter()
        output, _ = self.ring.prepare(slot)
        events: list = []
        try:
            built = self.builder.build(self.runner, self.counters, self.handoff.synchronize, run.epoch, run.shard,
                                       run.batches[number], number, output, events,
                                       audio_output=self.audio.array(slot) if self.audio is not None else None)
        finally:
            self.ring.set_waits(slot, events)
        self.counters.add(build_seconds=time.perf_counter() - started)
        self.counters.record_memory(self.memory_sample())
        return built, slot, events, time.perf_counter()

    def _release_held(self) -> None:
        """The consumer moved past the batch it held: its buffer may be refilled once the work
        the consumer queued on it is done."""
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
        if self.active is not None:
            self.active.superseded = True
            self.active.finish()
            self.active = None
        self.builders.shutdown(wait=True)
        if self.builder.audio is not None:
            self.builder.audio.close()
        self.runner.close()
        self.backend.close()
