"""The job runner over many items: this thread, threads, spawned processes and a local Ray give the
same outcomes in input order; one item's exception or crash is that item's alone; Ctrl-C and a
consumer that stops early leave no worker process behind."""

import os
import signal
import threading
import time
from pathlib import Path

import pytest
from helpers import require_extra, worker_pids

from vclip._device import CPU, Device, gpu_unavailable_reason, resolve_device
from vclip._jobs.pools import _ProcessPool, _WorkerDied
from vclip._jobs.runner import (
    InThisThread,
    Outcome,
    Processes,
    RayTasks,
    Threads,
    choose_runner,
)
from vclip._machine import usable_cores
from vclip.errors import CorruptVideoError, FallbackWarning, VideoError

CRASH = "crash"


def square_slowly(number):
    """``number ** 2`` after a pause that makes later items finish first; raises for the strings
    ``"video"`` (a VideoError), ``"bug"`` (a KeyError) and ``"odd"`` (an exception that cannot be
    pickled back); kills its process for ``"crash"`` as a segmentation fault in FFmpeg would."""
    if number == CRASH:
        os.kill(os.getpid(), signal.SIGSEGV)
    if number == "video":
        raise CorruptVideoError("/videos/bad.mp4", "the stream has no frames to show")
    if number == "bug":
        raise KeyError("no such column")
    if number == "odd":
        raise Unpicklable("a", "b")
    time.sleep(0.05 * (number % 4 == 0))
    return number * number


class Unpicklable(Exception):
    def __init__(self, first, second):  # rebuilt from one argument, pickle's copy fails
        super().__init__(f"{first} {second}")


def sleep_in_worker(seconds):
    time.sleep(seconds)
    return os.getpid()


RUNNERS = [
    pytest.param(lambda: InThisThread(), id="this-thread"),
    pytest.param(lambda: Threads(3), id="threads"),
    pytest.param(lambda: Processes(2), id="processes"),
]


@pytest.mark.parametrize("make_runner", RUNNERS)
def test_every_runner_gives_every_value_in_input_order(make_runner):
    runner = make_runner()
    numbers = list(range(13))
    completed = []
    outcomes = list(runner.run(square_slowly, numbers, on_outcome=completed.append))
    assert [o.position for o in outcomes] == numbers and [o.value for o in outcomes] == [n * n for n in numbers]
    assert all(o.ok and o.error is None for o in outcomes)
    assert sorted(o.position for o in completed) == numbers  # each seen once as it completed
    unordered = list(runner.run(square_slowly, numbers, ordered=False, chunk_size=3))
    assert sorted((o.position, o.value) for o in unordered) == [(n, n * n) for n in numbers]


@pytest.mark.parametrize("make_runner", RUNNERS)
def test_an_items_exception_is_its_own_outcome(make_runner):
    items = [1, "video", 2, "bug", 3, "odd", 4]
    outcomes = list(make_runner().run(square_slowly, items, chunk_size=2))
    assert [o.value for o in outcomes] == [1, None, 4, None, 9, None, 16]
    video, bug, odd = outcomes[1].error, outcomes[3].error, outcomes[5].error
    assert isinstance(video, CorruptVideoError) and (video.path, video.problem) == (
        "/videos/bad.mp4", "the stream has no frames to show")
    assert isinstance(bug, KeyError) and "no such column" in str(bug)
    if isinstance(make_runner(), Processes):  # it could not come back as it was: named instead
        assert type(odd) is RuntimeError and str(odd) == "Unpicklable: a b"
    else:
        assert isinstance(odd, Unpicklable)
    assert not any(o.crashed for o in outcomes)


@pytest.mark.parametrize("workers, chunk_size", [(2, 1), (2, 3), (1, 1)])
def test_an_item_that_kills_its_worker_process_fails_alone(workers, chunk_size):
    """The pool breaks for every task in flight; those items run again, and the one that kills a
    worker by itself is the only one reported, with the signal (one worker too, as ``vclip
    sample`` runs several files on the CPU)."""
    items = list(range(6)) + [CRASH] + list(range(6, 12))
    outcomes = list(Processes(workers).run(square_slowly, items, chunk_size=chunk_size))
    assert [o.position for o in outcomes] == list(range(len(items)))
    crashed = outcomes[6]
    assert crashed.crashed and not crashed.ok and crashed.value is None and crashed.error is None
    assert crashed.exit_code == -signal.SIGSEGV
    assert crashed.crash_problem() == "its worker process crashed (exit code -11, SIGSEGV); the file may be damaged"
    assert [o.value for o in outcomes if o is not crashed] == [n * n for n in range(12)]


def test_in_order_a_slow_item_holds_back_a_bounded_number(tmp_path):
    """The first item is slow: the others finish, but no more than ``ahead`` are taken before it
    is handed out."""
    taken = []

    def items():
        for number in range(40):
            taken.append(number)
            yield number

    handed_out = []
    for outcome in Threads(4).run(slow_first, items(), ahead=6):
        handed_out.append(outcome.position)
        assert len(taken) - len(handed_out) < 6
    assert handed_out == list(range(40))


def slow_first(number):
    time.sleep(0.5 if number == 0 else 0.01)
    return number


def spawned_workers() -> set[int]:
    """Pids of this process's children that run a spawned multiprocessing worker."""
    return set(worker_pids("spawn_main"))


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads child processes from /proc")
def test_ctrl_c_stops_the_worker_processes_and_is_raised():
    """SIGINT while four items sleep a minute in two processes: KeyboardInterrupt comes back at
    once, and no worker process is left."""
    assert not spawned_workers()
    seen: set[int] = set()

    def interrupt():
        deadline = time.monotonic() + 30
        while len(seen) < 2 and time.monotonic() < deadline:  # both workers started
            seen.update(spawned_workers())
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    started = time.monotonic()
    interrupter = threading.Thread(target=interrupt)
    interrupter.start()
    with pytest.raises(KeyboardInterrupt):
        list(Processes(2).run(sleep_in_worker, [60] * 4))
    interrupter.join()
    assert len(seen) == 2 and time.monotonic() - started < 30
    assert not spawned_workers() and not any(Path(f"/proc/{pid}").exists() for pid in seen)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads child processes from /proc")
def test_a_consumer_that_stops_early_stops_the_worker_processes():
    outcomes = Processes(2).run(sleep_in_worker, [0.01, 60, 60, 60])
    first = next(outcomes)
    assert first.ok and first.value in spawned_workers()
    started = time.monotonic()
    outcomes.close()
    assert time.monotonic() - started < 20 and not spawned_workers()


def test_ctrl_c_on_threads_cancels_what_is_queued():
    """KeyboardInterrupt in the caller (here from the first outcome's callback): the items not
    started never run, those running finish, and it is raised."""
    started = []

    def work(number):
        started.append(number)
        time.sleep(0.05)
        return number

    def interrupt(outcome):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        list(Threads(2).run(work, range(50), on_outcome=interrupt))
    time.sleep(0.2)
    assert 1 <= len(started) <= 6  # two running, two tasks per worker taken ahead


def test_choose_runner_picks_by_device_and_count():
    """Threads on a GPU, processes on the CPU (a GPU request falls back with one warning), never
    more workers than items, this thread for one."""
    if gpu_unavailable_reason() is None:
        on_gpu = choose_runner("cuda", items=8, gpu_workers=4)
        assert isinstance(on_gpu, Threads) and on_gpu.workers == 4
        assert on_gpu.device == resolve_device("cuda").device and on_gpu.device.index is not None
    else:
        with pytest.warns(FallbackWarning, match="device='cuda' requested but"):
            on_gpu = choose_runner("cuda", items=8, gpu_workers=4)
        assert not isinstance(on_gpu, Threads) and on_gpu.device == CPU and on_gpu.fell_back_to_cpu
    processes = choose_runner("cpu", workers=3, items=10, gpu_workers=4)
    assert isinstance(processes, Processes) and processes.workers == 3 and processes.device == CPU
    assert not processes.fell_back_to_cpu
    assert repr(processes) == "Processes(workers=3, device='cpu')"
    given = choose_runner(CPU, workers=2, items=10)  # a Device is a request too
    assert isinstance(given, Processes) and given.device == CPU and isinstance(given.device, Device)
    assert choose_runner("cpu", items=10, gpu_workers=4).workers == min(usable_cores(), 10)
    assert isinstance(choose_runner("cpu", workers=3, items=1, gpu_workers=4), InThisThread)
    assert isinstance(choose_runner("cpu", workers=1, items=10, gpu_workers=4), InThisThread)
    isolated = choose_runner("cpu", workers=1, items=10, isolate=True)  # vclip sample's one at a time
    assert isinstance(isolated, Processes) and isolated.workers == 1
    assert isinstance(choose_runner("cpu", workers=1, items=1, isolate=True), InThisThread)
    with pytest.raises(ValueError, match=r"workers \(0\) must be an integer >= 1"):
        choose_runner("cpu", workers=0, items=2, gpu_workers=4)
    with pytest.raises(ValueError, match=r"ray \('localhost:6379'\) must be True or False"):
        choose_runner("cpu", items=2, gpu_workers=4, ray="localhost:6379")


def test_an_outcome_says_what_happened():
    assert Outcome(0, 4).ok and not Outcome(1, error=VideoError("a.mp4", "bad")).ok
    unknown = Outcome(2, crashed=True)
    assert not unknown.ok and "exit code unknown" in unknown.crash_problem()
    assert "exit code 3)" in Outcome(3, crashed=True, exit_code=3).crash_problem()


# -- Ray ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def local_ray():
    ray = require_extra("ray")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    yield ray
    if started:
        ray.shutdown()


@pytest.mark.slow
def test_ray_tasks_give_the_same_outcomes_and_a_crash_is_the_tasks_own(local_ray):
    """Functions defined here travel by value (cloudpickle). Ray runs a task in a worker of its
    own, so a task that kills its worker fails alone, also inside a task of several items."""

    def work(item):
        if item == CRASH:
            os.kill(os.getpid(), signal.SIGSEGV)
        if item == "video":
            raise CorruptVideoError("/videos/bad.mp4", "the stream has no frames to show")
        return item * 10

    runner = RayTasks(workers=5)
    assert runner.workers == 2 and runner.device == CPU and not runner.in_this_process  # the cluster's CPUs
    items = [0, 1, "video", 2, 3, 4, 5, 6]
    outcomes = list(runner.run(work, items, chunk_size=3))
    assert [o.position for o in outcomes] == list(range(len(items)))
    assert [o.value for o in outcomes] == [0, 10, None, 20, 30, 40, 50, 60]
    assert isinstance(outcomes[2].error, CorruptVideoError) and outcomes[2].error.path == "/videos/bad.mp4"
    crashing = list(runner.run(work, [1, CRASH, 2, 3], chunk_size=2))
    assert [o.value for o in crashing] == [10, None, 20, 30]
    assert crashing[1].crashed and "crashed" in crashing[1].crash_problem()
    assert isinstance(choose_runner("auto", items=4, gpu_workers=4, ray=True), RayTasks)


def test_a_process_pool_starts_all_its_workers_at_once():
    """Every worker is spawned when the pool opens, not when a task finds none idle (the second
    worker of a 2-core folder job then started 0.3 s late)."""
    pool = _ProcessPool(square_slowly, 3)
    try:
        assert len(pool.executor._processes) == 3
        assert [pool.results(pool.submit([(k, k)])) for k in range(2)] == [[(0, True, 0)], [(1, True, 1)]]
    finally:
        pool.close((), abandon=False)


def test_a_task_sent_to_a_pool_broken_meanwhile_fails_as_a_dead_worker():
    """A worker may die between the pool's wait and the next submit (the pool is then broken):
    that task is one more cut short by the death, run again like the others, not an error of the run."""
    pool = _ProcessPool(square_slowly, 1)
    try:
        crashed = pool.submit([(0, CRASH)])
        with pytest.raises(_WorkerDied):
            pool.results(crashed)
        late = pool.submit([(1, 2)])
        with pytest.raises(_WorkerDied):
            pool.results(late)
    finally:
        pool.close((), abandon=True)
