"""Decode resources that follow the consumer: the loader's pacing.

A loader runs beside a model that wants the same GPU and cores. The pacing watches how the
training loop takes batches and moves what decodes for it:

- when the training loop waited for its batches in more than :attr:`PacingRules.wait_to_grow` of
  the time of the last :attr:`PacingRules.window` batches, it adds: NVDEC threads in its own
  process while they are busy, then (their interpreter lock being the limit) decode processes of
  their own (which take jobs once they are ready, beside the threads: nothing else moves while
  they start) unless the GPU has no idle time left (:attr:`PacingRules.gpu_busy_to_hold_processes`:
  their contexts would take time slices from the model), then CPU decoders beside NVDEC (with a
  batch more in flight, which they need to take the work NVDEC would reach last), then batches in
  flight; each decode process running takes the core of a CPU decoder the pacing chose
  (:attr:`PacingRules.cpu_decoders_per_process`);
- when every batch of the window found at least :attr:`PacingRules.ready_to_shrink` others built
  and waiting, the loader is ahead: it gives back, CPU decoders first, then decode processes' work
  (the processes stay, idle), then NVDEC threads, then batches in flight, one step at a time.

Only what the user left to the loader (``"auto"``) moves; a count the user set stays as set. Each
change waits a window before the next, so that its effect is measured before another. Every
change is recorded (:class:`PacingChange`) for ``loader.stats()``.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from .._pacing_rules import PACING, PacingRules

__all__ = ["PACING", "PacingChange", "PacingRules", "Pacer", "Resource"]


@dataclass
class Resource:
    """One thing the pacing moves: its value now and the range it may take (``fixed``: set by the user).
    ``most`` is the largest value it has had: what was started for it and given back stays allocated."""

    name: str
    value: int
    minimum: int
    maximum: int
    fixed: bool
    most: int = field(init=False)

    def __post_init__(self) -> None:
        self.most = self.value

    @property
    def can_grow(self) -> bool:
        return not self.fixed and self.value < self.maximum

    @property
    def can_shrink(self) -> bool:
        return not self.fixed and self.value > self.minimum


@dataclass(frozen=True)
class PacingChange:
    """One move of the pacing.

    Attributes:
        seconds: When, in seconds since the loader's runtime started.
        batch: Batches handed over by then.
        setting: ``"decode_threads"`` (decode threads of the default kind in the loader's process:
            NVDEC on the GPU, PyAV on the CPU), ``"decode_processes"``, ``"cpu_decoders"`` or
            ``"prefetch_queue_depth"``.
        old, new: The count before and after.
        reason: What the window showed.
    """

    seconds: float
    batch: int
    setting: str
    old: int
    new: int
    reason: str


class Pacer:
    """Moves the decoders and batches in flight of one loader runtime (see the module's text).

    Args:
        threads: Decode threads of the default kind (NVDEC on the GPU).
        processes: Decode processes beside them (maximum 0 when none may start).
        cpu_decoders: CPU decoders beside NVDEC (a helper pool; maximum 0 when there is none).
        depth: Batches queued ahead of the one the training loop holds.
        apply: Called with ``(setting, new count)`` for each change.
        busy: Returns ``{setting: (busy seconds, active seconds)}`` summed since the start, for
            ``"decode_threads"`` and ``"cpu_decoders"``.
        ready: Returns how many decode processes are ready (started, their CUDA context up);
            None: ready as soon as started.
        gpu_busy: Returns the share of the time the GPU ran kernels lately (see
            :class:`vclip._engine.gpu_busy.GpuBusy`), or None where it cannot tell; None: never known.
        rules: The numbers.
    """

    def __init__(self, *, threads: Resource, cpu_decoders: Resource, depth: Resource, apply, busy,
                 processes: Resource | None = None, ready: Callable[[], int] | None = None,
                 gpu_busy: Callable[[], float | None] | None = None, rules: PacingRules = PACING):
        processes = processes or Resource("decode_processes", 0, 0, 0, True)
        self.resources = {"decode_threads": threads, "decode_processes": processes, "cpu_decoders": cpu_decoders,
                          "prefetch_queue_depth": depth}  # in this order: _grow and _shrink unpack them
        self.rules = rules
        self._apply, self._busy = apply, busy
        self._ready = ready or (lambda: self.resources["decode_processes"].value)
        self._gpu_busy = gpu_busy or (lambda: None)
        self._starting: float | None = None  # when the decode processes not ready yet were started
        self._window: deque[tuple[float, float, int]] = deque(maxlen=rules.window)  # emptied at each change
        self._handed = 0
        self._started = time.perf_counter()
        self._helpers_most = cpu_decoders.maximum  # with no decode process running
        self._busy_mark = busy()
        self.changes: list[PacingChange] = []
        self._lock = threading.Lock()

    def begin(self) -> None:
        """The training loop starts asking for batches: the decoders' busy share counts from now
        (not over the loader's construction, while they had nothing to do)."""
        with self._lock:
            self._busy_mark = self._busy()

    def value(self, setting: str) -> int:
        return self.resources[setting].value

    def most(self, setting: str) -> int:
        """The largest value ``setting`` has had so far."""
        return self.resources[setting].most

    def limit(self, setting: str, most: int) -> None:
        """Let ``setting`` go no higher than ``most`` (what a memory budget leaves), before anything
        was allocated for it: a value above is lowered now, its high-water mark with it."""
        with self._lock:
            resource = self.resources[setting]
            resource.maximum = min(resource.maximum, most)
            if setting == "cpu_decoders":
                self._helpers_most = min(self._helpers_most, most)
            resource.minimum = min(resource.minimum, resource.maximum)
            resource.most = min(resource.most, resource.maximum)
            if resource.value > resource.maximum:
                resource.value = resource.maximum
                self._apply(setting, resource.value)

    def observe(self, waited: float, interval: float, ready: int) -> None:
        """One batch handed over: the training loop ``waited`` for it, ``interval`` seconds passed
        since the previous hand-over, ``ready`` other batches were built and waiting."""
        with self._lock:
            self._handed += 1
            if self._starting is not None and not self._processes_settled(self._starting):
                return
            self._window.append((waited, interval, ready))
            if len(self._window) < self.rules.window:  # a full window since the start or the last change
                return
            total = sum(interval for _, interval, _ in self._window)
            share = sum(waited for waited, _, _ in self._window) / total if total > 0 else 0.0
            least_ready = min(ready for _, _, ready in self._window)
            busy = self._busy_since_mark()
            if share > self.rules.wait_to_grow:
                self._grow(f"the training loop waited {share:.0%} of the last {len(self._window)} batches", busy,
                           share)
            elif least_ready >= self.rules.ready_to_shrink:
                self._shrink(f"at least {least_ready} batches were ready at each of the last {len(self._window)} "
                             "hand-overs")

    def _processes_settled(self, starting: float) -> bool:
        """Whether the decode processes last started are ready (or took too long): then the next
        window measures them at work."""
        if self._ready() < self.resources["decode_processes"].value and \
                time.perf_counter() - starting < self.rules.process_start_seconds:
            return False
        self._starting = None
        self._new_window()
        return True

    def _new_window(self) -> None:
        """Measure afresh from now: an empty window, the decoders' busy time counted from here."""
        self._window.clear()
        self._busy_mark = self._busy()

    def _busy_since_mark(self) -> dict[str, float]:
        now = self._busy()
        shares = {}
        for setting, (busy, active) in now.items():
            busy0, active0 = self._busy_mark.get(setting, (0.0, 0.0))
            shares[setting] = (busy - busy0) / (active - active0) if active > active0 else 0.0
        return shares

    def _grow(self, why: str, busy: dict[str, float], share: float) -> None:
        threads, processes, helpers, depth = self.resources.values()
        nvdec_busy = busy.get("decode_threads", 1.0)
        busy_threads = nvdec_busy >= self.rules.busy_to_add_threads
        far = share >= self.rules.far_behind
        detail = f"; its threads {nvdec_busy:.0%} busy"
        gpu = self._gpu_busy() if processes.can_grow and busy_threads else None  # NVML asked only when it decides
        gpu_full = gpu is not None and gpu >= self.rules.gpu_busy_to_hold_processes
        if gpu_full:
            detail += f"; the GPU {gpu:.0%} busy: no decode process (its context would slow the model)"
        if threads.can_grow and (busy_threads or not (processes.can_grow or helpers.can_grow)):
            self._change(threads, threads.maximum if far else threads.value + self.rules.thread_step, why + detail)
        elif processes.can_grow and busy_threads and not gpu_full:
            started = processes.maximum if far else processes.value + 1
            self._change(processes, started, why + detail + " (one interpreter lock feeds them)")
            self._starting = time.perf_counter()
        elif helpers.can_grow:
            self._change(helpers, helpers.value + self.rules.cpu_decoder_step, why + detail)
            if depth.can_grow:
                self._change(depth, depth.value + 1, why + " (CPU decoders take the batches NVDEC reaches last)")
        elif depth.can_grow:
            self._change(depth, depth.value + 1, why)

    def _shrink(self, why: str) -> None:
        threads, processes, helpers, depth = self.resources.values()
        for resource, step in ((helpers, self.rules.cpu_decoder_step), (processes, 1), (threads, 1), (depth, 1)):
            if resource.can_shrink:
                self._change(resource, resource.value - step, why)
                return

    def _change(self, resource: Resource, value: int, reason: str) -> None:
        value = max(resource.minimum, min(resource.maximum, value))
        if value == resource.value:
            return
        self.changes.append(PacingChange(time.perf_counter() - self._started, self._handed, resource.name,
                                         resource.value, value, reason))
        resource.value = value
        resource.most = max(resource.most, value)
        self._apply(resource.name, value)
        self._new_window()
        if resource is self.resources["decode_processes"]:
            self._share_cores()

    def _share_cores(self) -> None:
        """The CPU decoders the pacing chose keep to the cores the decode processes running leave
        (:attr:`PacingRules.cpu_decoders_per_process` each)."""
        helpers = self.resources["cpu_decoders"]
        if helpers.fixed:
            return
        taken = self.rules.cpu_decoders_per_process * self.resources["decode_processes"].value
        helpers.maximum = max(helpers.minimum, self._helpers_most - taken)
        if helpers.value > helpers.maximum:
            self._change(helpers, helpers.maximum, "decode processes took their cores")
