"""Decoding in worker processes (ProcessBackend), on the CPU: the same frames as in-process
decoding, indexes and buffers sent once per worker, bad videos and dead workers reported per video."""

import gc
import os
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from multiprocessing.shared_memory import SharedMemory

import numpy as np
import pytest
from helpers import devices

import vclip
from vclip._device import CPU
from vclip._engine import (
    ClipTarget,
    DecodeStats,
    ProcessBackend,
    RecentKeys,
    ThreadDispatcher,
    VideoRequest,
    in_process_backend,
    resolve_transform,
)
from vclip.synthetic import make_video, read_barcode

SPEC = vclip.TransformSpec(resize=(48, 64), layout="THWC")
CONVERSION = resolve_transform(SPEC)
FRAMES = 5


@pytest.fixture(scope="module")
def clips_videos(tmp_path_factory):
    folder = tmp_path_factory.mktemp("processes")
    return [
        make_video(folder / f"v{i}.mp4", num_frames=40, width=128, height=96, keyframe_interval=12, seed=i)
        for i in range(5)
    ]


@pytest.fixture(scope="module")
def backend():
    backend = cpu_processes(2, 2, indexes_per_worker=2)  # fewer indexes than videos: some are sent again
    yield backend
    backend.close()


def cpu_processes(processes, threads, **options):
    return ProcessBackend(partial(in_process_backend, CPU), CPU, processes, threads, **options)


def jobs_for(paths, first_frame=0):
    jobs = []
    for k, path in enumerate(paths):
        index = path if isinstance(path, vclip.VideoIndex) else vclip.index_video(path)
        geometry = SPEC.geometry(index.width, index.height)
        frames = (first_frame + k + np.arange(FRAMES) * 3) % 40
        jobs.append(
            VideoRequest(
                index,
                (ClipTarget(frames, geometry, 2 * k), ClipTarget(np.sort(frames[::-1] + 1) % 40, geometry, 2 * k + 1)),
            )
        )
    return jobs


def decode(backend, jobs, workers=0):
    runner = ThreadDispatcher(backend, workers)
    output = backend.empty((2 * len(jobs), FRAMES, 48, 64, 3), "uint8")
    stats = DecodeStats()
    result = runner.run(jobs, CONVERSION, output, stats)
    runner.close()
    return output, result.errors, stats


def test_recent_keys_forget_the_least_recently_used():
    keys = RecentKeys(2)
    keys.use("a", 1), keys.use("b", 2)
    assert keys.use("a") == 1  # a is now the most recent
    keys.use("c", 3)
    assert keys.use("b") is None and keys.use("a") == 1 and keys.use("c") == 3


def test_processes_decode_the_same_frames_as_this_process(backend, clips_videos):
    in_process = in_process_backend(CPU)
    for first_frame in (0, 7, 20):  # several rounds: indexes evicted and sent again, buffers reused
        jobs = jobs_for(clips_videos, first_frame)
        expected, errors, _ = decode(in_process, jobs, 1)
        got, errors, stats = decode(backend, jobs)
        assert errors == [None] * len(jobs)
        assert np.array_equal(got, expected)
        for job in jobs:
            for target in job.targets:
                assert [read_barcode(frame) for frame in got[target.slot]] == target.frames.tolist()
        assert stats.videos == len(jobs) and stats.frames_delivered == 2 * FRAMES * len(jobs)


def test_processes_started_later_decode_what_was_asked_of_none(clips_videos):
    """A backend made with no process (the loader's pacing starts them when the training loop needs
    them) takes buffers at once, and its jobs are decoded once processes start."""
    backend = cpu_processes(0, 2)
    try:
        assert backend.default_workers == 0
        jobs = jobs_for(clips_videos)
        output = backend.empty((2 * len(jobs), FRAMES, 48, 64, 3), "uint8")
        assert backend.add_processes(2) == 2 and backend.default_workers == 4
        assert backend.add_processes(1) == 2  # never fewer
        deadline = time.monotonic() + 60
        while backend.ready_processes() < 2 and time.monotonic() < deadline:  # each says when its backend is up
            time.sleep(0.01)
        assert backend.ready_processes() == 2
        expected, _, _ = decode(in_process_backend(CPU), jobs, 1)
        runner = ThreadDispatcher(backend, 4)
        result = runner.run(jobs, CONVERSION, output, DecodeStats())
        runner.close()
        assert result.errors == [None] * len(jobs) and np.array_equal(output, expected)
    finally:
        backend.close()


def test_loader_with_decode_processes_gives_the_same_batches(clips_videos):
    options = dict(
        transform=vclip.TransformSpec(resize=(48, 64), crop=40, crop_mode="random", flip_probability=0.5),
        batch_size=3,
        shuffle=True,
        seed=3,
        device="cpu",
    )
    videos = [(path, k % 2) for k, path in enumerate(clips_videos)]
    sampler = vclip.strided(4, 2, clips_per_video=2)
    reference = [(b.data.clone(), b.frame_indices.clone()) for b in vclip.ClipLoader(videos, sampler, **options)]
    loader = vclip.ClipLoader(videos, sampler, decode_processes=2, **options)
    workers = list(loader._runtime.backend._workers)
    try:
        assert loader.decode_workers == 4 and loader.memory_estimate.cuda_context == 0
        for _ in range(2):  # the second epoch reuses the shared buffers
            batches = [(b.data.clone(), b.frame_indices.clone()) for b in loader]
            assert len(batches) == len(reference)
            for (clips, frames), (expected, expected_frames) in zip(batches, reference):
                assert frames.equal(expected_frames) and clips.equal(expected)
    finally:
        loader.close()
    assert not any(worker.process.is_alive() for worker in workers)


def test_bad_video_error_names_the_file(backend, tmp_path, clips_videos):
    good = open(clips_videos[0], "rb").read()
    truncated = tmp_path / "truncated_after_index.mp4"
    truncated.write_bytes(good)
    index = vclip.index_video(truncated)
    truncated.write_bytes(good[: int(index.packet_pos[3])])  # the index is kept, the packets are gone
    _, errors, _ = decode(backend, jobs_for([index, clips_videos[1]]))
    assert isinstance(errors[0], vclip.VideoError) and str(truncated) in str(errors[0])
    assert errors[1] is None


def test_a_video_whose_worker_is_killed_is_decoded_by_the_next_one(clips_videos, tmp_path):
    """The out-of-memory killer, say: the worker dies once while decoding a good video, which is
    sent again to its replacement and decoded there, not reported."""
    long_video = make_video(tmp_path / "long.mp4", num_frames=240, width=320, height=240, keyframe_interval=240, seed=7)
    index = vclip.index_video(long_video)
    job = VideoRequest(index, (ClipTarget(np.arange(200, 240), SPEC.geometry(index.width, index.height), 0),))
    backend = cpu_processes(1, 1)
    try:
        decode(backend, jobs_for(clips_videos[:1]))  # the worker is up
        dead = backend._workers[0]
        output = backend.empty((1, 40, 48, 64, 3), "uint8")
        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(backend.decode_video, job, CONVERSION, output, DecodeStats())
            # Started (a video killed before it starts is sent again anyway): 240 frames to decode,
            # far longer than the kill takes.
            while not any(p.started_at is not None for p in list(dead.outstanding.values())):
                time.sleep(0.001)
            dead.process.kill()
            pending.result(timeout=60)
        assert backend._workers[0] is not dead and not dead.process.is_alive()
        assert [read_barcode(frame) for frame in output[0]] == list(range(200, 240))
        got, errors, _ = decode(backend, jobs_for(clips_videos[:2]))
        assert errors == [None, None]
        assert [read_barcode(frame) for frame in got[0]] == jobs_for(clips_videos[:1])[0].targets[0].frames.tolist()
    finally:
        backend.close()
    with pytest.raises(RuntimeError, match="closed"):
        decode(backend, jobs_for(clips_videos[:1]))


@pytest.mark.parametrize("device", devices())
def test_a_loader_epoch_loses_no_video_to_a_killed_worker(tmp_path, device):
    """A decode worker killed mid-epoch costs no video: the epoch's batches are those of an epoch
    without decode processes, and no video is skipped (on the GPU the replacement worker opens the
    CUDA IPC buffers anew)."""
    paths = [make_video(tmp_path / f"long{i}.mp4", num_frames=120, width=320, height=240, keyframe_interval=120,
                        seed=i) for i in range(3)]
    options = dict(batch_size=2, device=device, on_error="skip", transform=vclip.TransformSpec(resize=(48, 64)))
    sampler = vclip.contiguous(8, starts="even", clips_per_video=2)
    videos = [(path, k) for k, path in enumerate(paths)]
    reference = [(b.data.clone(), b.frame_indices.clone()) for b in vclip.ClipLoader(videos, sampler, **options)]
    loader = vclip.ClipLoader(videos, sampler, decode_processes=1, num_threads=1, cpu_decoders=0, **options)
    backend = loader._runtime.backend
    killed = []

    def kill_once() -> None:  # while the first video is decoded
        deadline = time.monotonic() + 60
        while not killed and time.monotonic() < deadline:
            worker = backend._workers[0]
            if any(p.started_at is not None for p in list(worker.outstanding.values())):
                worker.process.kill()
                killed.append(worker)
            time.sleep(0.001)

    try:
        killer = threading.Thread(target=kill_once)
        killer.start()
        batches = [(b.data.clone(), b.frame_indices.clone(), b.skipped_videos) for b in loader]
        killer.join()
        assert killed and backend._workers[0] is not killed[0]
        assert len(batches) == len(reference) and loader.stats().skipped.videos == {}
        for (clips, frames, skipped), (expected, expected_frames) in zip(batches, reference):
            assert skipped == () and frames.equal(expected_frames) and clips.equal(expected)
    finally:
        loader.close()


def shared_memory_name(backend, buffer) -> str:
    return backend._registry.handle_of(buffer).handle


def assert_released_by_the_next_call(backend, name: str) -> None:
    """After the buffer's last reference is gone: released by the next ``empty()`` at the latest."""
    gc.collect()
    backend.empty((1,), "uint8")
    with pytest.raises(FileNotFoundError):
        SharedMemory(name=name)


def test_freed_buffers_are_released(backend):
    buffer = backend.empty((4, 8), "uint8")
    name = shared_memory_name(backend, buffer)
    SharedMemory(name=name).close()  # exists while the buffer lives
    del buffer
    assert_released_by_the_next_call(backend, name)


def test_a_buffer_collected_while_the_registry_is_locked_is_released_later(backend):
    """The collector may run a buffer's finalizer in a thread that holds the registry's lock (in
    empty(), or while a request is pickled): the finalizer only queues the buffer, never waits."""
    cycle = [backend.empty((4, 8), "uint8")]
    cycle.append(cycle)  # only the cycle collector frees it
    name = shared_memory_name(backend, cycle[0])
    del cycle
    collected = threading.Event()

    def collect_holding_the_lock():
        with backend._registry.lock:
            gc.collect()
        collected.set()

    threading.Thread(target=collect_holding_the_lock, daemon=True).start()
    assert collected.wait(10), "the finalizer waited for a lock its own thread holds"
    backend.empty((1,), "uint8")  # no collection here: the one in that thread queued the buffer
    with pytest.raises(FileNotFoundError):
        SharedMemory(name=name)


def test_buffers_must_come_from_the_backend(backend, clips_videos):
    with pytest.raises(ValueError, match="must come from its empty"):
        backend.decode_video(
            jobs_for(clips_videos[:1])[0], CONVERSION, np.empty((2, FRAMES, 48, 64, 3), np.uint8), DecodeStats()
        )


class HangsOnStuckVideos:
    """The CPU backend, except that a video named ``stuck*`` never finishes decoding: a hang in a
    decoder, which no real file makes on demand."""

    def __init__(self):
        self.backend = in_process_backend(CPU)
        self.device, self.default_workers = self.backend.device, self.backend.default_workers

    def empty(self, shape, dtype):
        return self.backend.empty(shape, dtype)

    def decode_video(self, job, conversion, output, stats):
        if os.path.basename(job.index.path).startswith("stuck"):
            time.sleep(3600)
        return self.backend.decode_video(job, conversion, output, stats)

    def close(self):
        self.backend.close()


class DiesOnCrashVideos(HangsOnStuckVideos):
    """The CPU backend, except that decoding a video named ``crash*`` kills the worker process."""

    def decode_video(self, job, conversion, output, stats):
        if os.path.basename(job.index.path).startswith("crash"):
            time.sleep(0.2)  # the next request has arrived and waits behind this one
            os._exit(3)
        return self.backend.decode_video(job, conversion, output, stats)


def test_a_video_waiting_behind_one_that_kills_the_worker_is_sent_again(clips_videos, tmp_path):
    """One decode thread: the second video had not started when the worker died, so it is decoded
    by the replacement; the video being decoded is sent again, alone, kills that worker too and is
    reported."""
    crash_video = make_video(tmp_path / "crash.mp4", num_frames=10, width=128, height=96, seed=9)
    crash = VideoRequest(vclip.index_video(crash_video), (ClipTarget(np.arange(5), SPEC.geometry(128, 96), 0),))
    quick = VideoRequest(vclip.index_video(clips_videos[0]), (ClipTarget(np.arange(5), SPEC.geometry(128, 96), 1),))
    backend = ProcessBackend(DiesOnCrashVideos, CPU, 1, 1)
    try:
        output = backend.empty((2, FRAMES, 48, 64, 3), "uint8")
        worker = backend._workers[0]
        with ThreadPoolExecutor(2) as pool:
            crash_result = pool.submit(backend.decode_video, crash, CONVERSION, output, DecodeStats())
            while not worker.outstanding:
                time.sleep(0.001)
            quick_result = pool.submit(backend.decode_video, quick, CONVERSION, output, DecodeStats())
            died = (r"crash.mp4: decoding it killed the decode worker process 2 times \(exit codes 3, 3\), "
                    "the last time with no other video in that worker")
            with pytest.raises(vclip.CorruptVideoError, match=died):
                crash_result.result(timeout=60)
            quick_result.result(timeout=60)
        assert backend._workers[0] is not worker
        assert [read_barcode(frame) for frame in output[1]] == list(range(FRAMES))
    finally:
        backend.close()


class SlowOrDies(DiesOnCrashVideos):
    """As DiesOnCrashVideos; a video named ``slow*`` waits a second before it is decoded."""

    def decode_video(self, job, conversion, output, stats):
        if os.path.basename(job.index.path).startswith("slow"):
            time.sleep(1.0)
        return super().decode_video(job, conversion, output, stats)


def test_a_video_decoded_beside_one_that_kills_the_worker_is_not_blamed(clips_videos, tmp_path):
    """Two decode threads: both videos were being decoded when the worker died. Each goes again to
    a worker of its own; the good one is decoded, the one that kills workers is reported."""
    crash_video = make_video(tmp_path / "crash.mp4", num_frames=10, width=128, height=96, seed=9)
    slow_video = make_video(tmp_path / "slow.mp4", num_frames=10, width=128, height=96, seed=3)
    crash = VideoRequest(vclip.index_video(crash_video), (ClipTarget(np.arange(5), SPEC.geometry(128, 96), 0),))
    slow = VideoRequest(vclip.index_video(slow_video), (ClipTarget(np.arange(5), SPEC.geometry(128, 96), 1),))
    backend = ProcessBackend(SlowOrDies, CPU, 1, 2)
    try:
        output = backend.empty((2, FRAMES, 48, 64, 3), "uint8")
        worker = backend._workers[0]
        with ThreadPoolExecutor(2) as pool:
            slow_result = pool.submit(backend.decode_video, slow, CONVERSION, output, DecodeStats())
            while not any(p.started_at is not None for p in list(worker.outstanding.values())):
                time.sleep(0.001)
            crash_result = pool.submit(backend.decode_video, crash, CONVERSION, output, DecodeStats())
            with pytest.raises(vclip.CorruptVideoError, match=r"crash.mp4: decoding it killed the decode worker "
                                                              r"process 2 times \(exit codes 3, 3\)"):
                crash_result.result(timeout=60)
            slow_result.result(timeout=60)
        assert [read_barcode(frame) for frame in output[1]] == list(range(FRAMES))
    finally:
        backend.close()


def test_a_stuck_video_times_out_and_the_others_are_sent_again(clips_videos, tmp_path):
    stuck_video = make_video(tmp_path / "stuck.mp4", num_frames=10, width=128, height=96, seed=8)
    stuck = VideoRequest(vclip.index_video(stuck_video), (ClipTarget(np.arange(5), SPEC.geometry(128, 96), 0),))
    quick = VideoRequest(vclip.index_video(clips_videos[0]), (ClipTarget(np.arange(5), SPEC.geometry(128, 96), 1),))
    # One thread: the quick job waits in the worker behind the stuck one, so its clock has not started.
    backend = ProcessBackend(HangsOnStuckVideos, CPU, 1, 1, decode_timeout=1.0)
    try:
        output = backend.empty((2, FRAMES, 48, 64, 3), "uint8")
        worker = backend._workers[0]
        with ThreadPoolExecutor(2) as pool:
            stuck_result = pool.submit(backend.decode_video, stuck, CONVERSION, output, DecodeStats())
            while not worker.outstanding:
                time.sleep(0.001)
            quick_result = pool.submit(backend.decode_video, quick, CONVERSION, output, DecodeStats())
            with pytest.raises(vclip.CorruptVideoError, match=r"stuck.mp4: decoding took longer than 1 s"):
                stuck_result.result(timeout=60)
            quick_result.result(timeout=60)  # sent again to the replacement worker, decoded there
        assert backend._workers[0] is not worker and not worker.process.is_alive()
        assert [read_barcode(frame) for frame in output[1]] == list(range(FRAMES))
    finally:
        backend.close()


def test_warnings_of_worker_processes_are_raised_once_each_with_their_class():
    from vclip._jobs.child_process import RaisedWarnings

    raised = RaisedWarnings()
    sent = [("RemoteReadWarning", "server ignores Range"), ("RemoteReadWarning", "server ignores Range"),
            ("NoSuchWarning", "from a newer vclip"), ("DeprecationWarning", "old")]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        raised.show(sent, stacklevel=1)
        raised.show(sent[:1], stacklevel=1)
    assert [(type(w.message), str(w.message)) for w in caught] == [
        (vclip.RemoteReadWarning, "server ignores Range"), (UserWarning, "from a newer vclip"),
        (DeprecationWarning, "old")]
