"""Choosing a decoder backend for a device string, and running video jobs on worker threads."""

from __future__ import annotations

import os
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from ._cpu_backend import CpuBackend
from ._pipeline import DecodeStats, VideoJob
from .errors import FallbackWarning, VideoError
from .transforms import TransformSpec

__all__ = ["resolve_device", "make_backend", "gpu_unavailable_reason", "JobRunner"]


def gpu_unavailable_reason() -> str | None:
    """Why NVDEC decoding cannot run here, or None when it can."""
    try:
        import cupy
        import PyNvVideoCodec  # noqa: F401
    except Exception as error:  # ImportError, or the driver libraries failing to load
        return f"PyNvVideoCodec/CuPy not usable ({type(error).__name__}: {error})"
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "no CUDA device"
    except Exception as error:
        return f"no CUDA device ({error})"
    return None


def resolve_device(device: str) -> tuple[str, str | None]:
    """``("cpu" | "cuda:N", reason)``: the device to use, and why a GPU request fell back (or None).

    Raises:
        ValueError: ``device`` is not "cpu", "cuda", "cuda:N" or "auto".
    """
    text = str(device).strip().lower()
    if text == "cpu":
        return "cpu", None
    if text == "auto":
        return ("cpu", None) if gpu_unavailable_reason() else ("cuda:0", None)
    if text == "cuda" or (text.startswith("cuda:") and text[5:].isdigit()):
        reason = gpu_unavailable_reason()
        return ("cpu", reason) if reason else (text if ":" in text else "cuda:0", None)
    raise ValueError(f"device ({device!r}) must be 'cpu', 'cuda', 'cuda:N' or 'auto'")


_gpu_backends: dict[tuple, object] = {}
_gpu_backends_lock = threading.Lock()


def make_backend(device: str, *, skip_non_reference: bool = True, processes: int = 0, threads: int = 0):
    """The backend for ``device`` and whether a GPU request fell back to the CPU (one warning).

    GPU backends are shared per device within the process, so NVDEC decoders (kept per thread)
    are reused by every decoder and loader instead of being created again (50-100 ms each).
    With ``processes`` > 0, a new :class:`ProcessBackend` (``threads`` each) that the caller closes.
    """
    resolved, reason = resolve_device(device)
    if reason:
        warnings.warn(f"device={device!r} requested but {reason}; decoding on the CPU", FallbackWarning, stacklevel=3)
    if processes:
        from ._process_backend import ProcessBackend

        return ProcessBackend(resolved, processes, threads, skip_non_reference=skip_non_reference), bool(reason)
    if resolved == "cpu":
        return CpuBackend(skip_non_reference=skip_non_reference), bool(reason)
    from ._nvdec_backend import NvdecBackend

    key = (int(resolved.split(":")[1]), skip_non_reference)
    with _gpu_backends_lock:
        if key not in _gpu_backends:
            _gpu_backends[key] = NvdecBackend(key[0], skip_non_reference=skip_non_reference)
        return _gpu_backends[key], False


@dataclass
class JobsResult:
    """Per-job errors (None where the job succeeded), and what the GPU work of the jobs signals."""

    errors: list[BaseException | None]
    events: list = field(default_factory=list)


class JobRunner:
    """Runs the video jobs of a batch on a pool of worker threads, one backend call per video.

    One job, or one worker, runs on the calling thread, unless ``dedicated_threads``: then every
    job runs on the runner's own threads, so that no more than ``num_workers`` decode at once
    and per-thread decoders (NVDEC) number ``num_workers``, whichever threads call :meth:`run`.
    """

    def __init__(self, backend, num_workers: int = 0, *, dedicated_threads: bool = False):
        self.backend = backend
        self.num_workers = num_workers or getattr(backend, "default_workers", min(8, os.cpu_count() or 1))
        self.dedicated_threads = dedicated_threads
        pooled = self.num_workers > 1 or dedicated_threads
        self._executor = ThreadPoolExecutor(self.num_workers, thread_name_prefix="vclip-decode") if pooled else None

    def run(self, jobs: list[VideoJob], spec: TransformSpec | None, output, stats: DecodeStats) -> JobsResult:
        """Decode every job into ``output``; bad videos are returned as errors per job, not raised."""

        def one(job: VideoJob):
            try:
                return None, self.backend.decode_job(job, spec, output, stats)
            except VideoError as error:  # reported per video; the caller applies its error policy
                return error, None

        if self._executor is None or (len(jobs) == 1 and not self.dedicated_threads):
            outcomes = [one(job) for job in jobs]
        else:
            outcomes = list(self._executor.map(one, jobs))
        return JobsResult([error for error, _ in outcomes], [event for _, event in outcomes if event is not None])

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
