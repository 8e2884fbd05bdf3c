"""Indexing many videos for a catalog: one row of facts and arrays per video, in worker processes.

A job names a video and, when an earlier catalog holds it, the fingerprint stored there; the
worker returns the video's catalog row, or only ``unchanged`` when the file still has that
fingerprint. No file's problem stops the others: a bad video becomes a row that says why, and a
file that crashes its worker process (FFmpeg can) is found by running the unfinished jobs again,
one per task, and in the end alone, and is then listed as unusable too.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

from ._fingerprint import content_fingerprint
from ._sources import is_local, open_reader, source_fingerprint
from .errors import VideoError, VideoNotFoundError
from .index import VideoIndex, index_video

__all__ = ["IndexJob", "index_row", "index_rows", "run_jobs"]

_CRASH_PROBLEM = "the indexing process crashed on it (exit code {code}); the file may be damaged"


@dataclass(frozen=True)
class IndexJob:
    """Index the video at ``path`` (``position`` orders the catalog); ``known_fingerprint``: the
    fingerprint an earlier catalog stored for it, to skip indexing when the file still has it."""

    position: int
    path: str
    stream_index: int | None = None
    known_fingerprint: str | None = None


def unusable_row(job: IndexJob, error_type: str, problem: str, seconds: float = 0.0, stat=None,
                 fingerprint: str | None = None) -> dict:
    """The row of a video that cannot be used. With its ``fingerprint`` a later run keeps the row
    while the file is unchanged; without (an unreadable file, a crash) the video is tried again."""
    return {
        "position": job.position, "path": job.path, "usable": False, "error": problem, "error_type": error_type,
        "size_bytes": stat.st_size if stat else None, "mtime_ns": stat.st_mtime_ns if stat else None,
        "fingerprint": fingerprint, "index_seconds": seconds,
    }


def index_row(job: IndexJob) -> dict:
    """The catalog row of one video, ``{"position", "unchanged": True}`` when it still has its known
    fingerprint, or an unusable row (``usable`` False, ``error``, ``error_type``). Never raises
    for a bad file."""
    started = time.perf_counter()
    stat = fingerprint = None
    size = None
    try:
        try:
            if is_local(job.path):
                stat = os.stat(job.path)
                # The fingerprint before the index: a file that changes while it is indexed no longer
                # matches its row. A replacement with the same size and mtime (cp -p, rsync -t)
                # changes the hash of sampled bytes.
                fingerprint = content_fingerprint(job.path, stat) if os.path.isfile(job.path) else None
                size = stat.st_size
            else:  # a URL, or a member of a shard: its source's fingerprint (vclip._sources)
                fingerprint = source_fingerprint(job.path)
                size = open_reader(job.path).size()
        except FileNotFoundError:
            raise VideoNotFoundError(job.path, "file does not exist") from None
        if job.known_fingerprint and fingerprint == job.known_fingerprint:
            return {"position": job.position, "unchanged": True}
        index = index_video(job.path, stream_index=job.stream_index)
    except VideoError as error:  # FFmpeg's verdict on these bytes: kept while the file is unchanged
        return unusable_row(job, type(error).__name__, error.problem, time.perf_counter() - started, stat,
                            fingerprint)
    except Exception as error:  # an unreadable file (OSError), or a surprise: one bad row, tried again next run
        return unusable_row(job, type(error).__name__, str(error) or repr(error), time.perf_counter() - started, stat)
    return {
        "position": job.position, "path": job.path, "usable": True, "error": None, "error_type": None,
        "size_bytes": size, "mtime_ns": stat.st_mtime_ns if stat else None, "fingerprint": fingerprint,
        **index_facts(index), **index.to_arrays(), "index_seconds": time.perf_counter() - started,
    }


def index_facts(index: VideoIndex) -> dict:
    """What ``vclip info`` shows that is not a stored field of the index."""
    return {
        "num_frames": index.num_frames, "num_packets": index.num_packets,
        "keyframe_count": int(index.keyframe_indices.size), "start_seconds": index.start_seconds,
        "duration_seconds": index.duration_seconds, "variable_frame_rate": index.is_variable_frame_rate,
    }


def index_rows(jobs: list[IndexJob]) -> list[dict]:
    """:func:`index_row` of each job (one task of a worker process)."""
    return [index_row(job) for job in jobs]


def run_jobs(
    jobs: list[IndexJob],
    workers: int,
    *,
    on_rows: Callable[[int], None] | None = None,
    function: Callable[[list[IndexJob]], list[dict]] = index_rows,
) -> Iterator[dict]:
    """Rows of every job, in no particular order, from ``workers`` spawned processes (inline when 1).

    ``on_rows(n)`` is called as rows arrive (for a progress bar). ``function`` maps a task (a list
    of jobs) to its rows; it must be importable by the worker processes.
    """
    if workers <= 1 or len(jobs) <= 1:
        for job in jobs:
            rows = function([job])
            if on_rows:
                on_rows(len(rows))
            yield from rows
        return
    tasks = deque(_chunks(jobs, max(1, min(16, len(jobs) // (4 * workers)))))
    strikes: dict[int, int] = {}
    alone: list[IndexJob] = []
    while tasks:
        unfinished, exit_code = yield from _run_pool(tasks, workers, on_rows, function)
        for task in unfinished:  # in flight when a worker died: run again one by one, then alone
            for job in task:
                strikes[job.position] = strikes.get(job.position, 0) + 1
                if strikes[job.position] >= 2:
                    alone.append(job)
                else:
                    tasks.append([job])
    tasks = deque([job] for job in alone)  # one at a time in one process: a crash names its file
    while tasks:
        unfinished, exit_code = yield from _run_pool(tasks, 1, on_rows, function, in_flight_limit=1)
        for task in unfinished:
            if on_rows:
                on_rows(1)
            yield unusable_row(task[0], "CorruptVideoError", _CRASH_PROBLEM.format(code=exit_code))


def _chunks(jobs: list[IndexJob], size: int) -> list[list[IndexJob]]:
    return [jobs[start:start + size] for start in range(0, len(jobs), size)]


def _run_pool(tasks: deque, workers: int, on_rows, function, in_flight_limit: int | None = None):
    """Run ``tasks`` on one pool, taking them from the deque; yields rows. When a worker dies (the
    pool breaks), returns the tasks that were in flight and the dead worker's exit code, and leaves
    the tasks not yet submitted in ``tasks``."""
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
    try:
        pool.submit(_ready).result()
    except BrokenProcessPool:
        pool.shutdown(wait=True, cancel_futures=True)
        raise RuntimeError(
            "the indexing processes could not start (they are spawned: a script that indexes videos must "
            "do so under `if __name__ == \"__main__\":`); or pass workers=1 to index in this process") from None
    in_flight: dict = {}
    unfinished: list[list[IndexJob]] = []
    exit_code = None
    try:
        while tasks or in_flight:
            while tasks and len(in_flight) < (in_flight_limit or 2 * workers):
                task = tasks.popleft()
                in_flight[pool.submit(function, task)] = task
            done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
            broken = False
            for future in done:
                task = in_flight.pop(future)
                try:
                    rows = future.result()
                except BrokenProcessPool:
                    broken = True
                    unfinished.append(task)
                    continue
                if on_rows:
                    on_rows(len(rows))
                yield from rows
            if broken:
                exit_code = _dead_worker_exit_code(pool)
                for future, task in in_flight.items():
                    if future.done() and future.exception() is None:
                        rows = future.result()
                        if on_rows:
                            on_rows(len(rows))
                        yield from rows
                    else:
                        unfinished.append(task)
                in_flight.clear()
                break  # the tasks not yet submitted stay in ``tasks``
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return unfinished, exit_code


def _ready() -> bool:
    return True


def _dead_worker_exit_code(pool: ProcessPoolExecutor):
    processes = getattr(pool, "_processes", None) or {}
    codes = [process.exitcode for process in processes.values() if process.exitcode not in (None, 0)]
    return codes[0] if codes else "unknown"
