"""Choosing a backend for a resolved device: in this process, shared per device, or in worker processes."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from functools import partial

from .._device import Device
from .contract import Backend
from .cpu import CpuBackend

__all__ = ["close_shared_process_backends", "in_process_backend", "make_backend", "shared_process_backend"]

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
                 cpu_decoders: int | str = 0, in_flight: int | None = None) -> Backend:
    """The backend for a resolved ``device``: in this process, or, with ``processes`` > 0, a new
    :class:`~vclip._engine.processes.ProcessBackend` of that many worker processes (``threads``
    decode threads each), each running :func:`in_process_backend` on the same device.

    With ``cpu_decoders`` (a count, or ``"auto"``: :func:`~vclip._engine.scheduler.auto_cpu_decoders`,
    which weighs ``in_flight``, the batches the caller decodes at once)
    the result is a :class:`~vclip._engine.scheduler.PooledBackend`: on the GPU that many PyAV
    decoders whose pictures the CUDA kernel converts join NVDEC as helpers (threads of this process,
    or, with ``processes``, packing processes of their own without a CUDA context,
    :func:`~vclip._engine.scheduler.cpu_decoder_processes`, whose pictures this process uploads and
    converts: in one process their Python work holds the GIL that NVDEC's feeders need); on the CPU
    that many single-threaded PyAV decoders replace the default pool.
    """
    from .scheduler import (
        CPU_DECODERS_PER_PROCESS,
        PACKED_JOB_BYTES,
        DecoderPool,
        PooledBackend,
        cpu_decoder_processes,
        resolve_cpu_decoders,
    )

    count = resolve_cpu_decoders(cpu_decoders, gpu=device.is_cuda, decode_processes=processes, in_flight=in_flight)
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
    from .hybrid import PackedUploadBackend, UploadBackend

    helpers: Backend
    if isinstance(primary, ProcessBackend):
        helpers = PackedUploadBackend(device, cpu_decoder_processes(count, processes), CPU_DECODERS_PER_PROCESS,
                                      skip_non_reference=skip_non_reference)
    else:
        helpers = UploadBackend(device, skip_non_reference=skip_non_reference)
    nvdec_workers = primary.default_workers if processes or not threads else threads
    return PooledBackend([
        DecoderPool("nvdec", primary, nvdec_workers),
        DecoderPool("cpu", helpers, count, helper=True,
                    max_job_bytes=PACKED_JOB_BYTES if isinstance(primary, ProcessBackend) else None),
    ])
