"""What this machine offers the process: the CPU cores it may run on.

One count for every default that depends on the cores (decode threads on the CPU, worker
processes of jobs over many videos, CPU decoders beside NVDEC), so that they agree with each other
and with a CPU affinity mask or a container's CPU set (``os.cpu_count`` ignores both)."""

from __future__ import annotations

import os

__all__ = ["usable_cores"]


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask on Linux, else all the machine's), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)
