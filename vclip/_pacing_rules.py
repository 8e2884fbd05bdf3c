"""The numbers the loader's pacing follows (:mod:`vclip._loader.pacing` moves the decoders by them).

They stand apart from the pacing so that memory planning (:func:`vclip.plan_loader_memory`) can
read the depth the pacing reaches without importing the loader.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PACING", "PacingRules"]


@dataclass(frozen=True)
class PacingRules:
    """The numbers of the loader's pacing.

    Attributes:
        window: Batches a decision looks back over (and waits for after a change).
        wait_to_grow: Share of the window's time the training loop waited for batches above which
            the loader adds decoders.
        far_behind: Share of the window's time waited above which the loader adds at once every
            NVDEC thread of its process it may, or every decode process once those are busy (a
            fresh loader beside a fast model: the ramp takes a few windows, not a few dozen).
        ready_to_shrink: Built batches waiting at every hand-over of the window from which the
            loader is ahead and gives decoders back.
        busy_to_add_threads: Share of their time NVDEC's active workers were busy above which
            another NVDEC thread can still help (below it, NVDEC waits for work: CPU decoders help).
        gpu_busy_to_hold_processes: Share of the time the GPU ran kernels (NVML, over the last
            2 s: :class:`vclip._engine.gpu_busy.GpuBusy`) from which no decode process is started:
            the GPU has no idle time left, and a process's CUDA context would take its time slices
            from the model's (with one context, r3d_18 at 224x224 on an H100 kept the GPU 97% busy;
            at 112x112, where the loader is the limit, 56%).
        cpu_decoders_per_process: CPU decoders the pacing gives back for each decode process it
            starts, when it chose both counts: a process's feeder takes a core, and until a process
            starts the CPU decoders may use it (r3d_18 at 224x224 on an H100, where the model is the
            limit, ran at 0.95 of its own rate with 12 CPU decoders and no process, 0.69 when the 9
            left beside 3 processes fell short and the processes started).
        thread_step: NVDEC threads added or removed at a time.
        cpu_decoder_step: CPU decoders added or removed at a time.
        start_threads: NVDEC threads working at the start (when the user set no count): all of
            them, for the first batches, which the training loop always waits for; the pacing
            gives back those a loader ahead does not need.
        min_threads: The fewest NVDEC threads the pacing leaves working.
        start_depth: Batches queued ahead at the start (when the user set no depth).
        min_depth: The fewest batches queued ahead the pacing leaves.
        max_depth: The most batches queued ahead the pacing goes to (``prefetch_queue_depth="auto"``
            on the GPU: the loader's ring holds up to this many plus three output buffers).
    """

    window: int = 4
    wait_to_grow: float = 0.02
    far_behind: float = 0.25
    ready_to_shrink: int = 2
    busy_to_add_threads: float = 0.75
    gpu_busy_to_hold_processes: float = 0.9
    cpu_decoders_per_process: int = 1
    thread_step: int = 2
    cpu_decoder_step: int = 2
    start_threads: int = 8
    min_threads: int = 2
    start_depth: int = 2
    min_depth: int = 1
    max_depth: int = 4
    process_start_seconds: float = 20.0


PACING = PacingRules()
"""The rules every loader paces itself by."""
