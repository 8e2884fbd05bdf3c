"""Choosing a backend for a resolved device: in this process, shared per device, or in worker processes."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from functools import partial

from .._device import Device
from .contract import Backend
from .cpu import CpuBackend

__all__ = ["close_shared_process_backends", "in_process_backend", "make_backend", "make_paced_backend",
           "shared_process_backend"]

_gpu_backends: dict[tuple[int, bool], Backend] = {}
_shared_backends_lock = threading.Lock()


def in_process_backend(device: Device, *, skip_non_reference: bool = True) -> Backend:
    """The backend that decodes in this process on ``device``.

    NVDEC backends are shared per device within the process, so NVDEC decoders (kept per thread)
    are reused by every decoder and loader instead of being created again (50-100 ms each).
    """
    if not device.is_cuda:
        return CpuBackend(skip_non_reference=skip_non_reference)
    from .nvdec import NvdecBackend

    key = (int(device.index or 0), skip_non_reference)
    with _shared_backends_lock:
        if key not in _gpu_backends:
            _gpu_backends[key] = NvdecBackend(device, skip_non_reference=skip_non_reference)
        return _gpu_backends[key]


_process_backends: dict[tuple[Device, int, bool], Backend] = {}
os.register_at_fork(after_in_child=_process_backends.clear)  # a forked child cannot use its parent's workers


def shared_process_backend(device: Device, processes: int, *, skip_non_reference: bool = True) -> Backend:
    """``processes`` worker processes decoding on ``device`` (the default threads each), started on
    first use and shared by every caller of this process asking for the same count; they stop at exit.

    Starting them takes seconds (a Python and a CUDA context each), so they are kept for the next video.
    """
    key = (device, processes, skip_non_reference)
    with _shared_backends_lock:
        if key not in _process_backends:
            _process_backends[key] = make_backend(device, skip_non_reference=skip_non_reference, processes=processes)
        return _process_backends[key]


def close_shared_process_backends() -> None:
    """Stop the worker processes of :func:`shared_process_backend` (they would otherwise serve this
    process until it exits); the next caller starts new ones."""
    with _shared_backends_lock:
        backends = list(_process_backends.values())
        _process_backends.clear()
    for backend in backends:
        backend.close()


def make_backend(device: Device, *, skip_non_reference: bool = True, processes: int = 0, threads: int = 0,
                 cpu_decoders: int = 0) -> Backend:
    """The backend for a resolved ``device``: in this process, or, with ``processes`` > 0, a new
    :class:`~vclip._engine.processes.ProcessBackend` of that many worker processes (``threads``
    decode threads each), each running :func:`in_process_backend` on the same device.

    With ``cpu_decoders`` the result is a :class:`~vclip._engine.scheduler.PooledBackend`: on the GPU
    that many PyAV decoders join NVDEC as helpers, from the same queue, in packing processes of their
    own that hold no CUDA context (:class:`~vclip._engine.hybrid.PackedUploadBackend`: this process
    uploads their pictures and the same CUDA kernel converts them); on the CPU that many
    single-threaded PyAV decoders replace the default pool.
    """
    from .scheduler import (
        CPU_DECODERS_PER_PROCESS,
        PACKED_JOB_BYTES,
        DecoderPool,
        PooledBackend,
        cpu_decoder_processes,
    )

    count = int(cpu_decoders)
    if not device.is_cuda and count:
        return PooledBackend([DecoderPool("cpu", CpuBackend(threads=1, skip_non_reference=skip_non_reference),
                                          count)])
    from .processes import ProcessBackend

    primary: Backend
    if not processes:
        primary = in_process_backend(device, skip_non_reference=skip_non_reference)
    else:
        factory: Callable[[], Backend] = partial(in_process_backend, device, skip_non_reference=skip_non_reference)
        primary = ProcessBackend(factory, device, processes, threads)
    if not count:
        return primary
    from .hybrid import PackedUploadBackend

    helpers = PackedUploadBackend(device, cpu_decoder_processes(count), CPU_DECODERS_PER_PROCESS,
                                  skip_non_reference=skip_non_reference)
    nvdec_workers = primary.default_workers if processes or not threads else threads
    return PooledBackend([
        DecoderPool("nvdec", primary, nvdec_workers),
        DecoderPool("cpu", helpers, count, helper=True, max_job_bytes=PACKED_JOB_BYTES),
    ])


PROCESS_POOL = "nvdec-processes"
"""The kind of the decode processes' pool beside NVDEC in this process (see :func:`make_paced_backend`)."""


def make_paced_backend(device: Device, *, processes: int, threads_per_process: int = 0, cpu_decoders: int = 0,
                       skip_non_reference: bool = True) -> Backend:
    """A GPU loader's backend whose decoders its pacing starts as the training loop needs them:
    NVDEC on threads of this process (in its one CUDA context), up to ``processes`` decode
    processes (none started yet: :meth:`~vclip._engine.processes.ProcessBackend.add_processes`
    starts them, pool :data:`PROCESS_POOL`), and ``cpu_decoders`` CPU decoders in packing
    processes. Output buffers come from the decode processes' registry, so that whichever decoder
    takes a job can write into them."""
    from .processes import ProcessBackend
    from .scheduler import CPU_DECODERS_PER_PROCESS, PACKED_JOB_BYTES, DecoderPool, PooledBackend, cpu_decoder_processes

    here = in_process_backend(device, skip_non_reference=skip_non_reference)
    factory: Callable[[], Backend] = partial(in_process_backend, device, skip_non_reference=skip_non_reference)
    remote = ProcessBackend(factory, device, 0, threads_per_process)
    pools = [DecoderPool("nvdec", here, here.default_workers),
             DecoderPool(PROCESS_POOL, remote, processes * remote.threads, active=0)]
    if cpu_decoders:
        from .hybrid import PackedUploadBackend

        helpers = PackedUploadBackend(device, cpu_decoder_processes(cpu_decoders), CPU_DECODERS_PER_PROCESS,
                                      skip_non_reference=skip_non_reference)
        pools.append(DecoderPool("cpu", helpers, cpu_decoders, helper=True, max_job_bytes=PACKED_JOB_BYTES))
    return PooledBackend(pools, allocator=remote)
