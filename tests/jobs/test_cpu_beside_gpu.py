"""CPU decoders beside a GPU job's threads (vclip._jobs.cpu_beside_gpu): one queue, input order, and a
CPU decoder's crash costing only its video. The GPU side here is plain threads running a slow
function, so that the CPU decoders (real fresh processes) get work."""

import os
import signal
import time
from pathlib import Path

import pytest
from helpers import worker_pids

from vclip._device import Device
from vclip._jobs.cpu_beside_gpu import BesideCpuDecoders, auto_cpu_decoders, resolve_cpu_decoders
from vclip._jobs.runner import InThisThread, Processes, Threads
from vclip.errors import ArgumentError, CorruptVideoError

CRASH = "crash"


def square_on_the_gpu(number):
    """The threads' function: slow, so that both threads are busy when the next item comes."""
    time.sleep(0.25)
    return "gpu", number * number, os.getpid()


def square_on_the_cpu(number):
    """The CPU decoders' function; raises a VideoError for ``"video"``, kills its process for ``"crash"``."""
    if number == CRASH:
        os.kill(os.getpid(), signal.SIGSEGV)
    if number == "video":
        raise CorruptVideoError("/videos/bad.mp4", "the stream has no frames to show")
    return "cpu", number * number, os.getpid()


def gpu_threads(workers: int) -> Threads:
    threads = Threads(workers)
    threads.device = Device("cuda", 0)
    return threads


def cpu_decoder_processes() -> set[int]:
    """Pids of this process's children that serve as CPU decoders."""
    return set(worker_pids("vclip._jobs.cpu_beside_gpu:serve_cpu_decoder"))


def test_the_cpu_decoders_take_items_only_while_every_thread_holds_one():
    """Two threads and two CPU decoders: items 0 and 1 go to the threads, 2 and 3 (both threads
    busy) to the CPU decoders, which then take the next whenever they are free; every value in
    input order."""
    runner = BesideCpuDecoders(gpu_threads(2), 2, square_on_the_cpu)
    assert runner.workers == 4 and runner.device == Device("cuda", 0) and not runner.in_this_process
    assert repr(runner) == "BesideCpuDecoders(gpu_workers=2, cpu_decoders=2, device='cuda:0')"
    numbers = list(range(40))
    outcomes = list(runner.run(square_on_the_gpu, numbers))
    assert [o.position for o in outcomes] == numbers and all(o.ok for o in outcomes)
    assert [o.value[1] for o in outcomes] == [n * n for n in numbers]
    sides = [o.value[0] for o in outcomes]
    assert sides[:4] == ["gpu", "gpu", "cpu", "cpu"]
    assert sides.count("cpu") > 2  # free again, they took more
    cpu_pids = {o.value[2] for o in outcomes if o.value[0] == "cpu"}
    assert len(cpu_pids) == 2 and os.getpid() not in cpu_pids
    assert {o.value[2] for o in outcomes if o.value[0] == "gpu"} == {os.getpid()}


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads child processes from /proc")
def test_an_item_that_kills_its_cpu_decoder_fails_alone_and_a_new_decoder_takes_its_place():
    items = [0, 1, CRASH, "video"] + list(range(2, 40))
    outcomes = list(BesideCpuDecoders(gpu_threads(2), 2, square_on_the_cpu).run(square_on_the_gpu, items))
    crashed, error = outcomes[2], outcomes[3].error
    assert crashed.crashed and crashed.exit_code == -signal.SIGSEGV and crashed.value is None
    assert isinstance(error, CorruptVideoError) and error.path == "/videos/bad.mp4"
    others = [o for k, o in enumerate(outcomes) if k not in (2, 3)]
    assert all(o.ok for o in others) and [o.value[1] for o in others] == [n * n for n in range(40)]
    assert any(o.value[0] == "cpu" for o in outcomes[4:])  # two decoders again after the crash
    assert not cpu_decoder_processes()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads child processes from /proc")
def test_a_cpu_decoder_killed_between_items_costs_no_item():
    """The out-of-memory killer takes an idle CPU decoder: the next item it would have had gets a new one."""
    seen, killed = [], set()
    for outcome in BesideCpuDecoders(gpu_threads(1), 1, square_on_the_cpu).run(square_on_the_gpu, range(30),
                                                                               ordered=False):
        seen.append(outcome)
        if outcome.ok and outcome.value[0] == "cpu":  # its decoder is idle until the loop asks for more
            os.kill(outcome.value[2], signal.SIGKILL)
            killed.add(outcome.value[2])
            time.sleep(0.5)
    assert all(o.ok for o in seen) and sorted(o.value[1] for o in seen) == [n * n for n in range(30)]
    assert len(killed) >= 2  # a CPU item after a kill, on a new decoder


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads child processes from /proc")
def test_a_consumer_that_stops_early_stops_the_cpu_decoders():
    outcomes = BesideCpuDecoders(gpu_threads(1), 2, square_on_the_cpu).run(square_on_the_gpu, range(20))
    assert next(outcomes).ok
    assert len(cpu_decoder_processes()) == 2
    started = time.monotonic()
    outcomes.close()
    assert time.monotonic() - started < 20 and not cpu_decoder_processes()


def test_auto_takes_the_cores_beside_two_and_the_videos_beyond_the_threads():
    threads = gpu_threads(8)
    assert auto_cpu_decoders(threads, items=36, cores=16) == 14
    assert auto_cpu_decoders(threads, items=36, decode_processes=4, cores=16) == 10
    assert auto_cpu_decoders(threads, items=12, cores=16) == 4
    assert auto_cpu_decoders(threads, items=8, cores=16) == 0
    assert auto_cpu_decoders(threads, items=36, cores=7) == 0  # the GPU's feeders need them
    assert auto_cpu_decoders(Threads(8), items=36, cores=16) == 0  # threads on the CPU
    assert auto_cpu_decoders(Processes(8), items=36, cores=16) == 0
    assert auto_cpu_decoders(InThisThread(), items=1, cores=16) == 0


def test_a_count_is_taken_as_given_on_a_gpus_threads_only():
    assert resolve_cpu_decoders(3, gpu_threads(8), items=4) == 3
    assert resolve_cpu_decoders(3, Processes(2), items=4) == 0
    assert resolve_cpu_decoders(0, gpu_threads(8), items=40) == 0
    for bad, problem in (("many", r'must be "auto" or a count'), (-1, "must be an integer >= 0"),
                         (2.5, "must be an integer >= 0"), (True, "must be an integer >= 0")):
        with pytest.raises(ArgumentError, match=rf"cpu_decoders \({bad!r}\) {problem}"):
            resolve_cpu_decoders(bad, gpu_threads(8), items=4)
