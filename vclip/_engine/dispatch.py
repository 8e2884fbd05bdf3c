"""Running the video jobs of a batch on worker threads, one backend call per video, and what a
run returns (:class:`DispatchResult`, also what :class:`~vclip._engine.scheduler.SharedQueueDispatcher` returns)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..errors import VideoError
from .contract import Backend, Completion
from .pipeline import Conversion, DecodeStats, VideoRequest

__all__ = ["ThreadDispatcher", "DispatchResult"]


@dataclass
class DispatchResult:
    """Per-job errors (None where the job succeeded), and what the asynchronous work of the jobs signals."""

    errors: list[BaseException | None]
    completions: list[Completion] = field(default_factory=list)


class ThreadDispatcher:
    """Runs the video jobs of a batch on a pool of worker threads, one backend call per video.

    One job, or one worker, runs on the calling thread, unless ``dedicated_threads``: then every
    job runs on the runner's own threads, so that no more than ``num_workers`` decode at once
    and per-thread decoders (NVDEC) number ``num_workers``, whichever threads call :meth:`run`.
    """

    def __init__(self, backend: Backend, num_workers: int = 0, *, dedicated_threads: bool = False):
        self.backend = backend
        self.num_workers = num_workers or backend.default_workers
        self.dedicated_threads = dedicated_threads
        pooled = self.num_workers > 1 or dedicated_threads
        self._executor = ThreadPoolExecutor(self.num_workers, thread_name_prefix="vclip-decode") if pooled else None

    def run(self, jobs: list[VideoRequest], conversion: Conversion, output: Any, stats: DecodeStats) -> DispatchResult:
        """Decode every job into ``output``; bad videos are returned as errors per job, not raised."""

        def one(job: VideoRequest) -> tuple[VideoError | None, Completion | None]:
            try:
                return None, self.backend.decode_video(job, conversion, output, stats)
            except VideoError as error:  # reported per video; the caller applies its error policy
                return error, None

        if self._executor is None or (len(jobs) == 1 and not self.dedicated_threads):
            outcomes = [one(job) for job in jobs]
        else:
            outcomes = list(self._executor.map(one, jobs))
        return DispatchResult([error for error, _ in outcomes], [done for _, done in outcomes if done is not None])

    def close(self) -> None:
        """Stop the threads (the backend belongs to the caller, who closes it)."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
