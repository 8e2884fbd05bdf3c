"""What this machine offers the process: the CPU cores it may run on, and its shared memory.

One count for every default that depends on the cores (decode threads on the CPU, worker
processes of jobs over many videos, CPU decoders beside NVDEC), so that they agree with each other
and with a CPU affinity mask or a container's CPU set (``os.cpu_count`` ignores both)."""

from __future__ import annotations

import os
import shutil

__all__ = ["cores_per_rank", "local_ranks", "shared_memory_free", "usable_cores"]

SHARED_MEMORY_FOLDER = "/dev/shm"
"""Where POSIX shared memory (Python's ``SharedMemory``) lives on Linux: a tmpfs, 64 MiB by default
in a Docker container."""


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask on Linux, else all the machine's), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def local_ranks() -> int:
    """Processes of one distributed job on this machine, as torchrun says (``LOCAL_WORLD_SIZE``), else 1."""
    try:
        return max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        return 1


def cores_per_rank() -> int:
    """This process's share of the cores: :func:`usable_cores` divided among the machine's ranks
    (:func:`local_ranks`), unless this process is already bound to fewer cores than the machine has
    (then its affinity mask is its share), at least 1."""
    cores, ranks = usable_cores(), local_ranks()
    if ranks > 1 and cores >= (os.cpu_count() or cores):
        return max(1, cores // ranks)
    return cores


def shared_memory_free() -> int | None:
    """Bytes free in :data:`SHARED_MEMORY_FOLDER`, or None where there is no such folder."""
    try:
        return shutil.disk_usage(SHARED_MEMORY_FOLDER).free
    except OSError:
        return None
