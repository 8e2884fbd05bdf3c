"""Indexing many videos for a catalog: one row of facts and arrays per video, in worker processes.

A job names a video and, when an earlier catalog holds it, the fingerprint stored there; the
worker returns the video's catalog row, or only ``unchanged`` when the file still has that
fingerprint. The jobs run on any runner of :mod:`vclip._jobs.runner` (processes, Ray, this thread). No
file's problem stops the others: a bad video becomes a row that says why, and a file that crashes
its worker process (FFmpeg can) is listed as unusable too.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass

from .._bytes.fingerprint import content_fingerprint
from .._bytes.sources import is_local, open_reader, source_fingerprint
from .._jobs.runner import Outcome, Runner
from ..errors import VideoError, VideoNotFoundError
from ..index import VideoIndex, index_video

__all__ = ["IndexItem", "index_facts", "index_row", "index_rows", "unusable_row"]

_MOST_JOBS_PER_TASK = 16  # jobs sent to a worker at once: fewer round trips, every worker still busy


@dataclass(frozen=True)
class IndexItem:
    """Index the video at ``path`` (``position`` orders the catalog); ``known_fingerprint``: the
    fingerprint an earlier catalog stored for it, to skip indexing when the file still has it."""

    position: int
    path: str
    stream_index: int | None = None
    known_fingerprint: str | None = None


def unusable_row(job: IndexItem, error_type: str, problem: str, seconds: float = 0.0, stat=None,
                 fingerprint: str | None = None) -> dict:
    """The row of a video that cannot be used. With its ``fingerprint`` a later run keeps the row
    while the file is unchanged; without (an unreadable file, a crash) the video is tried again."""
    return {
        "position": job.position, "path": job.path, "usable": False, "error": problem, "error_type": error_type,
        "size_bytes": stat.st_size if stat else None, "mtime_ns": stat.st_mtime_ns if stat else None,
        "fingerprint": fingerprint, "index_seconds": seconds,
    }


def index_row(job: IndexItem) -> dict:
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
            else:  # a URL, or a member of a shard: its source's fingerprint (vclip._bytes.sources)
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


def index_rows(
    jobs: list[IndexItem],
    runner: Runner,
    *,
    on_row: Callable[[dict], None] | None = None,
    function: Callable[[IndexItem], dict] = index_row,
) -> Iterator[dict]:
    """The rows of every job, as ``runner`` completes them (in no particular order).

    ``function`` makes one job's row (default :func:`index_row`; it must pickle for processes and
    Ray). A video that crashes its worker process gets an unusable row that says so, without a
    fingerprint (so a later run tries it again). ``on_row`` is called with each row as it comes.
    """
    chunk_size = max(1, min(_MOST_JOBS_PER_TASK, len(jobs) // (4 * runner.workers)))
    with closing(runner.run(function, jobs, ordered=False, chunk_size=chunk_size)) as outcomes:
        yield from _rows_of(outcomes, jobs, on_row)


def _rows_of(outcomes: Iterator[Outcome[dict]], jobs: list[IndexItem], on_row) -> Iterator[dict]:
    for outcome in outcomes:
        job = jobs[outcome.position]
        if outcome.value is not None:
            row = outcome.value
        elif outcome.crashed:
            row = unusable_row(job, "CorruptVideoError", outcome.crash_problem())
        else:  # not a bad video (index_row reports those): a row that did not come back
            row = unusable_row(job, type(outcome.error).__name__, str(outcome.error) or repr(outcome.error))
        if on_row is not None:
            on_row(row)
        yield row
