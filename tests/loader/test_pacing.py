"""The loader's pacing (vclip/_loader/pacing.py): decoders and batches in flight follow how the
training loop takes batches; counts the user set stay as set; every change is recorded."""

from __future__ import annotations

import pytest
from helpers import require_extra

from vclip._loader.pacing import Pacer, PacingRules, Resource

RULES = PacingRules(window=4, wait_to_grow=0.05, far_behind=0.9, ready_to_shrink=2, busy_to_add_threads=0.75,
                    thread_step=2, cpu_decoder_step=2, start_threads=4, min_threads=2,
                    start_depth=2, min_depth=1, max_depth=4)


class Machine:
    """What a pacer moves, and how busy NVDEC's threads look."""

    def __init__(self, *, threads=(4, 8, False), helpers=(0, 6, False), depth=(2, 4, False), nvdec_busy=0.9,
                 processes=(0, 0, True), ready: int | None = None, gpu: float | None = None, rules=RULES):
        self.applied: list[tuple[str, int]] = []
        self.ready = ready  # decode processes ready; None: each as soon as started
        self.nvdec_busy = nvdec_busy
        self.seconds = 0.0
        self.pacer = Pacer(
            threads=Resource("decode_threads", threads[0], RULES.min_threads, threads[1], threads[2]),
            processes=Resource("decode_processes", processes[0], 0, processes[1], processes[2]),
            cpu_decoders=Resource("cpu_decoders", helpers[0], 0, helpers[1], helpers[2]),
            depth=Resource("prefetch_queue_depth", depth[0], RULES.min_depth, depth[1], depth[2]),
            apply=lambda setting, value: self.applied.append((setting, value)), busy=self.busy,
            ready=None if ready is None else lambda: self.ready, gpu_busy=lambda: self.gpu, rules=rules)
        self.gpu = gpu  # the GPU's busy share NVML gives; None: unknown

    def busy(self) -> dict[str, tuple[float, float]]:
        self.seconds += 1.0  # one second of active time per reading, busy as told
        return {"decode_threads": (self.nvdec_busy * self.seconds, self.seconds),
                "cpu_decoders": (0.5 * self.seconds, self.seconds)}

    def hand_over(self, batches: int, *, waited: float, ready: int) -> None:
        for _ in range(batches):
            self.pacer.observe(waited, 0.1, ready)

    def value(self, setting: str) -> int:
        return self.pacer.value(setting)


def test_a_waiting_training_loop_gets_nvdec_threads_then_cpu_decoders_and_batches_in_flight():
    machine = Machine()
    machine.hand_over(3, waited=0.05, ready=0)
    assert machine.applied == []  # a window is four batches
    machine.hand_over(1, waited=0.05, ready=0)  # waited half the time
    assert machine.applied == [("decode_threads", 6)]
    machine.hand_over(4, waited=0.05, ready=0)
    assert machine.applied[-1] == ("decode_threads", 8)
    machine.hand_over(4, waited=0.05, ready=0)  # NVDEC threads at their limit: CPU decoders, one batch more
    assert machine.applied[-2:] == [("cpu_decoders", 2), ("prefetch_queue_depth", 3)]
    for _ in range(10):
        machine.hand_over(4, waited=0.05, ready=0)
    assert (machine.value("decode_threads"), machine.value("cpu_decoders"), machine.value("prefetch_queue_depth")) == (
        8, 6, 4)  # everything the machine has
    change = machine.pacer.changes[0]
    assert (change.setting, change.old, change.new, change.batch) == ("decode_threads", 4, 6, 4)
    assert change.reason == "the training loop waited 50% of the last 4 batches; its threads 90% busy"


def test_nvdec_waiting_for_work_gets_cpu_decoders_before_more_threads():
    machine = Machine(nvdec_busy=0.4)
    machine.hand_over(4, waited=0.05, ready=0)
    assert machine.applied == [("cpu_decoders", 2), ("prefetch_queue_depth", 3)]


def test_a_loader_ahead_of_the_training_loop_gives_back_cpu_decoders_then_threads_then_depth():
    machine = Machine(threads=(8, 8, False), helpers=(4, 6, False), depth=(3, 4, False))
    machine.hand_over(4, waited=0.0, ready=2)
    assert machine.applied == [("cpu_decoders", 2)]
    machine.hand_over(4, waited=0.0, ready=3)
    machine.hand_over(4, waited=0.0, ready=3)
    assert machine.applied[1:] == [("cpu_decoders", 0), ("decode_threads", 7)]
    for _ in range(10):
        machine.hand_over(4, waited=0.0, ready=3)
    assert (machine.value("decode_threads"), machine.value("cpu_decoders"), machine.value("prefetch_queue_depth")) == (
        2, 0, 1)
    assert all("batches were ready at each of the last 4 hand-overs" in c.reason for c in machine.pacer.changes)
    # what was given back stays allocated: the memory estimate plans for the most each had
    assert (machine.pacer.most("decode_threads"), machine.pacer.most("cpu_decoders"),
            machine.pacer.most("prefetch_queue_depth")) == (8, 4, 3)


def test_the_most_of_each_resource_counts_what_the_pacing_added_then_gave_back():
    machine = Machine(nvdec_busy=0.4)
    machine.hand_over(4, waited=0.05, ready=0)  # CPU decoders 0 -> 2, depth 2 -> 3
    machine.hand_over(4, waited=0.0, ready=3)  # CPU decoders 2 -> 0
    assert machine.value("cpu_decoders") == 0 and machine.pacer.most("cpu_decoders") == 2
    assert machine.pacer.most("prefetch_queue_depth") == 3 and machine.pacer.most("decode_processes") == 0


def test_a_steady_loader_is_left_alone():
    machine = Machine()
    for _ in range(5):
        machine.hand_over(4, waited=0.001, ready=1)  # waits 1%, one batch ready: neither rule holds
    assert machine.applied == [] and machine.pacer.changes == []


def test_counts_the_user_set_stay_as_set():
    machine = Machine(threads=(6, 6, True), helpers=(3, 3, True), depth=(2, 2, True))
    machine.hand_over(8, waited=0.1, ready=0)
    machine.hand_over(8, waited=0.0, ready=4)
    assert machine.applied == [] and machine.pacer.changes == []


@pytest.mark.parametrize("helpers", [(0, 0, False), (0, 6, True)])
def test_without_cpu_decoders_to_add_the_depth_grows(helpers):
    machine = Machine(threads=(8, 8, False), helpers=helpers)
    machine.hand_over(4, waited=0.05, ready=0)
    assert machine.applied == [("prefetch_queue_depth", 3)]


def test_busy_nvdec_threads_at_their_limit_get_decode_processes_before_cpu_decoders():
    """One interpreter lock feeds the threads of the loader's process: once they are all busy the
    pacing starts decode processes beside them, one at a time, then CPU decoders; it gives back in
    reverse."""
    machine = Machine(threads=(8, 8, False), processes=(0, 3, False))
    machine.hand_over(4, waited=0.05, ready=0)
    assert machine.applied == [("decode_processes", 1)]
    assert machine.pacer.changes[0].reason.endswith("(one interpreter lock feeds them)")
    machine.hand_over(4, waited=0.05, ready=0)
    machine.hand_over(4, waited=0.05, ready=0)
    assert machine.applied[1:] == [("decode_processes", 2), ("decode_processes", 3)]
    assert machine.value("decode_threads") == 8  # the processes add to the threads here
    for _ in range(20):
        machine.hand_over(4, waited=0.05, ready=0)
    assert machine.value("decode_processes") == 3 and machine.value("cpu_decoders") == 3  # 6 less one a process
    for _ in range(2):
        machine.hand_over(4, waited=0.0, ready=3)
    assert machine.applied[-2:] == [("cpu_decoders", 1), ("cpu_decoders", 0)]
    machine.hand_over(4, waited=0.0, ready=3)
    assert machine.applied[-1] == ("decode_processes", 2)


def test_each_decode_process_started_takes_the_core_of_a_cpu_decoder():
    """CPU decoders the pacing chose use the cores of the decode processes not started; a process
    started takes its core back (a decoder stops where all were working), one given back returns it.
    CPU decoders the user set stay as set."""
    machine = Machine(threads=(8, 8, False), helpers=(6, 6, False), processes=(0, 3, False))
    machine.hand_over(4, waited=0.05, ready=0)
    assert machine.applied == [("decode_processes", 1), ("cpu_decoders", 5)]
    assert machine.pacer.changes[-1].reason == "decode processes took their cores"
    machine.hand_over(4, waited=0.05, ready=0)
    assert machine.applied[2:] == [("decode_processes", 2), ("cpu_decoders", 4)]
    machine.hand_over(4, waited=0.0, ready=3)  # ahead: CPU decoders first
    assert machine.applied[4:] == [("cpu_decoders", 2)]
    for _ in range(2):
        machine.hand_over(4, waited=0.0, ready=3)
    assert machine.applied[5:] == [("cpu_decoders", 0), ("decode_processes", 1)]
    for _ in range(2):
        machine.hand_over(4, waited=0.05, ready=0)  # waiting again: the process back first, then CPU decoders
    assert machine.applied[7:] == [("decode_processes", 2), ("decode_processes", 3)]
    for _ in range(4):
        machine.hand_over(4, waited=0.05, ready=0)
    assert machine.value("cpu_decoders") == 3
    kept = Machine(threads=(8, 8, False), helpers=(6, 6, True), processes=(0, 3, False))
    kept.hand_over(4, waited=0.05, ready=0)
    assert kept.applied == [("decode_processes", 1)] and kept.value("cpu_decoders") == 6


@pytest.mark.parametrize("gpu", [0.95, 0.9])
def test_a_gpu_without_idle_time_gets_no_decode_processes(gpu):
    """A model that keeps the GPU busy: a decode process's context would take its time slices, so
    the waiting loop gets CPU decoders instead; once the GPU has idle time again, processes."""
    machine = Machine(threads=(8, 8, False), processes=(0, 3, False), gpu=gpu)
    machine.hand_over(4, waited=0.05, ready=0)
    assert machine.applied == [("cpu_decoders", 2), ("prefetch_queue_depth", 3)]
    assert f"the GPU {gpu:.0%} busy: no decode process" in machine.pacer.changes[0].reason
    machine.gpu = 0.6
    machine.hand_over(4, waited=0.05, ready=0)
    assert machine.applied[2:] == [("decode_processes", 1)]
    machine.gpu = None  # NVML cannot tell: as before it was asked
    machine.hand_over(4, waited=0.05, ready=0)
    assert machine.applied[3:] == [("decode_processes", 2)]


def test_idle_nvdec_threads_get_no_decode_processes():
    machine = Machine(threads=(8, 8, False), processes=(0, 3, False), nvdec_busy=0.3)
    machine.hand_over(4, waited=0.05, ready=0)
    assert machine.applied == [("cpu_decoders", 2), ("prefetch_queue_depth", 3)]


def test_far_behind_the_loader_adds_every_thread_then_every_process_at_once():
    machine = Machine(threads=(2, 8, False), processes=(0, 3, False))
    machine.hand_over(4, waited=0.095, ready=0)  # waited 95% of the time
    assert machine.applied == [("decode_threads", 8)]
    machine.hand_over(4, waited=0.095, ready=0)
    assert machine.applied[1:] == [("decode_processes", 3)]


def test_nothing_moves_while_decode_processes_start():
    """A process takes about 2 s to start: the loader's threads keep every job meanwhile, and the
    loop's waiting then says nothing of the processes; once ready, a full window measures them."""
    machine = Machine(threads=(8, 8, False), processes=(0, 3, False), ready=0)
    machine.hand_over(4, waited=0.05, ready=0)
    assert machine.applied == [("decode_processes", 1)]
    machine.hand_over(12, waited=0.09, ready=0)  # waiting, far behind: still nothing while it starts
    assert machine.applied == [("decode_processes", 1)]
    machine.ready = 1
    machine.hand_over(3, waited=0.05, ready=0)
    assert machine.applied == [("decode_processes", 1)]
    machine.hand_over(1, waited=0.05, ready=0)  # the window since it was ready is full
    assert machine.applied[1:] == [("decode_processes", 2)] and machine.value("decode_threads") == 8


def test_decode_processes_that_are_not_ready_in_time_hold_the_pacing_no_longer():
    rules = PacingRules(**{**RULES.__dict__, "process_start_seconds": 0.0})
    machine = Machine(threads=(8, 8, False), processes=(0, 3, False), ready=0, rules=rules)
    machine.hand_over(4, waited=0.05, ready=0)
    machine.hand_over(1, waited=0.05, ready=0)  # not ready in time: the pacing goes on without them
    assert machine.applied == [("decode_processes", 1)]
    machine.hand_over(4, waited=0.05, ready=0)
    assert machine.applied[-1] == ("decode_processes", 2)


@pytest.mark.gpu
def test_nvml_tells_how_busy_the_gpu_was():
    """The reading the pacing holds decode processes by: near 1 after two seconds of matrix
    products, near 0 after the GPU idled for longer than the reading's horizon."""
    import time

    import cupy

    from vclip._engine import GpuBusy

    require_extra("pynvml")
    busy = GpuBusy(cupy.cuda.runtime.getDevice(), horizon_seconds=1.0)
    matrix = cupy.ones((4096, 4096), cupy.float32) / 4096
    end = time.perf_counter() + 2.0
    while time.perf_counter() < end:
        matrix = matrix @ matrix
        cupy.cuda.Device().synchronize()
    share = busy()
    assert share is not None and 0.8 <= share <= 1.0
    time.sleep(2.0)
    idle = busy()
    assert idle is not None and idle <= 0.2
