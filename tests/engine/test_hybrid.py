"""CPU decoders beside NVDEC (issue 14): the NV12/P016 staging layout the kernel reads, one job
queue for every decoder pool, and the loader's ``cpu_decoders``. The byte-identity of CPU-decoded
and NVDEC-decoded clips is checked on the GPU (tests marked gpu)."""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path

import av
import numpy as np
import pytest
from kernel_cases import assert_matches_twin
from kernel_cases import pack_semi_planar as reference_pack
from test_kernel_host import host_library, host_transform  # noqa: F401 (fixtures)

import vclip
from vclip._device import CPU
from vclip._engine import (
    BLOCK,
    JOB_DTYPE,
    OUTPUT_KINDS,
    PARAMS_DTYPE,
    ClipTarget,
    CpuBackend,
    DecoderPool,
    DecodeStats,
    PackingBackend,
    PooledBackend,
    ProcessBackend,
    SharedQueueDispatcher,
    VideoRequest,
    auto_cpu_decoders,
    auto_decode_processes,
    fill_job,
    frame_strides,
    launch_grid,
    pack_semi_planar,
    packed_frames,
    resolve_cpu_decoders,
    resolve_transform,
    semi_planar_shape,
    transform_params,
    yuv420_planes,
)
from vclip.synthetic import read_barcode


def decoded_frames(path: str, count: int) -> list[av.VideoFrame]:
    with av.open(path) as container:
        frames = []
        for frame in container.decode(video=0):
            frames.append(frame)
            if len(frames) == count:
                return frames
    return frames


@pytest.mark.parametrize("name", ["h264", "h264_10bit", "odd"])
def test_staging_layout_is_nvdec_layout(videos, name):
    """Y rows, then interleaved UV rows, one 256-byte-aligned pitch; 10-bit samples MSB-aligned (P016)."""
    index = vclip.index_video(videos[name])
    frame = decoded_frames(videos[name], 1)[0]
    y, u, v, bit_depth = yuv420_planes(frame, index.color_range)
    shape, dtype = semi_planar_shape(index.width, index.height, index.bit_depth)
    assert shape[0] == index.height + (index.height + 1) // 2
    assert (shape[1] * dtype.itemsize) % 256 == 0 and shape[1] >= 2 * u.shape[1]
    staged = np.full(shape, 0xAB, dtype)
    pack_semi_planar(y, u, v, bit_depth, staged)
    luma, chroma = reference_pack(y, u, v, bit_depth)
    np.testing.assert_array_equal(staged[: index.height, : luma.shape[1]], luma)
    np.testing.assert_array_equal(staged[index.height :, : chroma.shape[1]], chroma)


@pytest.mark.parametrize(
    "name, spec",
    [
        ("h264", vclip.TransformSpec()),
        ("h264", vclip.TransformSpec.imagenet(112, layout="TCHW")),
        ("h264_10bit", vclip.TransformSpec(resize=(64, 96), dtype="float32")),
    ],
)
def test_staged_pictures_through_the_kernel_match_the_cpu_path(host_transform, videos, name, spec):  # noqa: F811
    """PyAV pictures packed as the hybrid backend stages them, converted by the kernel (compiled for
    the host), equal the CPU backend's clip of the same frames within the kernel's tolerance."""
    path = videos[name]
    index = vclip.index_video(path)
    frames = np.arange(0, 8, 2)
    geometry = spec.geometry(index.width, index.height)
    conversion = resolve_transform(spec)
    shape = conversion.clip_shape(frames.size, geometry)

    expected = np.empty((1,) + shape, spec.dtype)
    request = VideoRequest(index, (ClipTarget(frames, geometry, 0),))
    CpuBackend().decode_video(request, conversion, expected, DecodeStats())

    stage_shape, stage_dtype = semi_planar_shape(index.width, index.height, index.bit_depth)
    pictures = decoded_frames(path, int(frames[-1]) + 1)
    staged = [np.zeros(stage_shape, stage_dtype) for _ in frames]
    output = np.full(shape, 77 if spec.dtype == "uint8" else np.nan, spec.dtype)
    frame_stride, strides = frame_strides(spec.layout, frames.size, geometry.output_height, geometry.output_width)
    params = np.array(transform_params(spec, geometry, strides), dtype=PARAMS_DTYPE)
    jobs = np.zeros(frames.size, JOB_DTYPE)
    for t, number in enumerate(frames.tolist()):
        y, u, v, bit_depth = yuv420_planes(pictures[number], index.color_range)
        pack_semi_planar(y, u, v, bit_depth, staged[t])
        pitch = staged[t].strides[0]
        luma = staged[t].ctypes.data
        fill_job(
            jobs[t],
            luma=luma,
            chroma=luma + index.height * pitch,
            luma_pitch=pitch,
            chroma_pitch=pitch,
            output=output.ctypes.data + t * frame_stride * output.itemsize,
            geometry=geometry,
            bit_depth=index.bit_depth,
            stored_bits=8 if index.bit_depth == 8 else 16,
            matrix=index.color_matrix,
            color_range=index.color_range,
        )
    assert launch_grid(params[()])[2] == 1 and BLOCK[2] == 1
    host_transform(stage_dtype.itemsize, OUTPUT_KINDS[spec.dtype], params.ctypes.data, jobs.ctypes.data, frames.size)
    assert_matches_twin(output, expected[0], spec.dtype)


@pytest.mark.parametrize("name", ["h264", "h264_10bit", "odd"])
def test_a_packing_process_packs_each_wanted_frame_once_in_order_as_nvdec_lays_it_out(videos, name):
    """Beside decode processes the CPU decoders run in packing processes without CUDA: picture k
    of the shared buffer is the k-th frame the job wants, ascending, each once, laid out as the
    kernel reads NVDEC's surfaces; the buffer's bytes after the last picture are left alone."""
    path = videos[name]
    index = vclip.index_video(path)
    geometry = vclip.TransformSpec().geometry(index.width, index.height)
    job = VideoRequest(index, (ClipTarget(np.array([1, 5, 9]), geometry, 0),
                               ClipTarget(np.array([3, 5, 12]), geometry, 1)))
    assert packed_frames(job) == [1, 3, 5, 9, 12]
    shape, dtype = semi_planar_shape(index.width, index.height, index.bit_depth)
    nbytes = shape[0] * shape[1] * dtype.itemsize
    packers = ProcessBackend(PackingBackend, CPU, 1, 2)
    try:
        buffer = packers.empty((5 * nbytes + 64,), "uint8")
        buffer[:] = 0xAB
        stats = DecodeStats()
        assert packers.decode_video(job, resolve_transform(vclip.TransformSpec()), buffer, stats) is None
        packed = buffer.copy()
    finally:
        packers.close()
    assert stats.videos == 1 and stats.frames_requested == 5
    assert (packed[5 * nbytes:] == 0xAB).all()
    pictures = decoded_frames(path, 13)
    for k, frame in enumerate(packed_frames(job)):
        picture = packed[k * nbytes:(k + 1) * nbytes].view(dtype).reshape(shape)
        y, u, v, bit_depth = yuv420_planes(pictures[frame], index.color_range)
        luma, chroma = reference_pack(y, u, v, bit_depth)
        np.testing.assert_array_equal(picture[: index.height, : luma.shape[1]], luma)
        np.testing.assert_array_equal(picture[index.height :, : chroma.shape[1]], chroma)
        if bit_depth == 8:
            assert read_barcode(np.repeat(picture[: index.height, : index.width, None], 3, axis=-1)) == frame


# -- the shared queue -------------------------------------------------------------------------------
def clip_jobs(paths: list[str], frames_per_clip: int = 4) -> tuple[list[VideoRequest], np.ndarray, list]:
    """One job of two clips per video (native size, uint8), their output and expected frame numbers."""
    spec = vclip.TransformSpec()
    jobs, expected = [], []
    for number, path in enumerate(paths):
        index = vclip.index_video(path)
        geometry = spec.geometry(index.width, index.height)
        targets = []
        for k in range(2):
            frames = np.arange(frames_per_clip) * 2 + 3 * k + number
            targets.append(ClipTarget(frames, geometry, 2 * number + k))
            expected.append(frames.tolist())
        jobs.append(VideoRequest(index, tuple(targets)))
    first = jobs[0].index
    output = np.zeros((2 * len(paths), frames_per_clip, first.height, first.width, 3), np.uint8)
    return jobs, output, expected


@pytest.fixture(scope="module")
def same_size_videos(tmp_path_factory) -> list[str]:
    folder = tmp_path_factory.mktemp("hybrid")
    return [
        vclip.synthetic.make_video(
            folder / f"v{i}.mp4", num_frames=24, width=96, height=64, keyframe_interval=8, seed=i
        )
        for i in range(8)
    ]


def test_every_pool_takes_jobs_from_one_queue(same_size_videos):
    jobs, output, expected = clip_jobs(same_size_videos)
    pools = [DecoderPool("a", CpuBackend(threads=1), 1), DecoderPool("b", CpuBackend(threads=1), 2)]
    runner = SharedQueueDispatcher(pools)
    stats = DecodeStats()
    try:
        result = runner.run(jobs, resolve_transform(None), output, stats)
        kinds = runner.kind_stats()
    finally:
        runner.close()
    assert result.errors == [None] * len(jobs)
    assert [[read_barcode(frame) for frame in clip] for clip in output] == expected
    assert sum(use.jobs for use in kinds.values()) == len(jobs)
    assert sum(use.clips for use in kinds.values()) == 2 * len(jobs)
    assert sum(use.pictures for use in kinds.values()) == stats.packets_sent > 0
    assert kinds["a"].workers == 1 and kinds["b"].workers == 2
    assert all(use.jobs > 0 and use.busy_seconds > 0 for use in kinds.values())


@pytest.mark.parametrize("helper_seconds_per_frame, takes", [(1e3, False), (1e-9, True)])
def test_a_helper_takes_a_job_only_when_it_would_finish_first(same_size_videos, helper_seconds_per_frame, takes):
    """A helper as slow as 1000 s per frame never takes a job (the primary would do all the others
    first); a helper faster than the primary takes some."""
    jobs, output, expected = clip_jobs(same_size_videos)
    primary = DecoderPool("primary", CpuBackend(threads=1), 1, seconds_per_frame=0.01)
    helper = DecoderPool("helper", CpuBackend(threads=1), 1, helper=True, seconds_per_frame=helper_seconds_per_frame)
    runner = SharedQueueDispatcher([primary, helper])
    try:
        result = runner.run(jobs, resolve_transform(None), output, DecodeStats())
        kinds = runner.kind_stats()
    finally:
        runner.close()
    assert result.errors == [None] * len(jobs)
    assert [[read_barcode(frame) for frame in clip] for clip in output] == expected
    assert (kinds["helper"].jobs > 0) is takes
    assert kinds["primary"].jobs + kinds["helper"].jobs == len(jobs)


def test_a_helper_takes_no_job_larger_than_its_packing_buffer(same_size_videos):
    """A helper as fast as can be takes no job whose pictures exceed ``max_job_bytes`` (the shared
    buffer of a packing process); the pooled backend's runners keep the bound."""
    jobs, output, expected = clip_jobs(same_size_videos)
    index = jobs[0].index
    job_bytes = 8 * index.width * index.height * 3 // 2  # two clips of 4 frames, 8-bit 4:2:0
    for bound, takes in ((job_bytes - 1, False), (job_bytes, True)):
        pooled = PooledBackend([
            DecoderPool("primary", CpuBackend(threads=1), 1, seconds_per_frame=0.01),
            DecoderPool("helper", CpuBackend(threads=1), 1, helper=True, seconds_per_frame=1e-9, max_job_bytes=bound),
        ])
        runner = pooled.dispatcher()
        try:
            output[:] = 0
            result = runner.run(jobs, resolve_transform(None), output, DecodeStats())
            kinds = runner.kind_stats()
        finally:
            runner.close()
            pooled.close()
        assert result.errors == [None] * len(jobs)
        assert [[read_barcode(frame) for frame in clip] for clip in output] == expected
        assert (kinds["helper"].jobs > 0) is takes


class SlowBackend:
    """The CPU backend, taking ``seconds`` longer per job: a busy NVDEC engine, whose workers hold
    their jobs while the queue behind them is empty."""

    def __init__(self, seconds: float):
        self.backend, self.seconds = CpuBackend(threads=1), seconds
        self.device, self.default_workers = self.backend.device, 1

    def empty(self, shape, dtype):
        return self.backend.empty(shape, dtype)

    def decode_video(self, job, conversion, output, stats):
        time.sleep(self.seconds)
        return self.backend.decode_video(job, conversion, output, stats)

    def close(self):
        self.backend.close()


@pytest.mark.parametrize("primary_workers, helper_seconds_per_frame", [(4, 0.2), (8, 0.11)])
def test_a_helper_counts_the_jobs_the_primaries_are_decoding(same_size_videos, primary_workers,
                                                             helper_seconds_per_frame):
    """Four primary workers busy and one job queued: the queue alone holds no other work, but the
    primaries' running jobs will keep them busy for a while, so a helper takes the queued job; also
    when idle primary workers could take it (more NVDEC threads than engines: they would wait).
    The helper is too slow for the first four jobs (3 jobs ahead of the newest, not 4)."""
    jobs, output, expected = clip_jobs(same_size_videos[:5])
    assert all(sum(target.frames.size for target in job.targets) == 8 for job in jobs)
    primary = DecoderPool("primary", SlowBackend(2.0), primary_workers, seconds_per_frame=2.0 / 8)
    helper = DecoderPool("helper", CpuBackend(threads=1), 1, helper=True, seconds_per_frame=helper_seconds_per_frame)
    runner = SharedQueueDispatcher([primary, helper])
    conversion = resolve_transform(None)
    try:
        first = threading.Thread(target=runner.run, args=(jobs[:4], conversion, output, DecodeStats()))
        first.start()
        time.sleep(0.5)  # the four primary workers hold the first four jobs
        result = runner.run(jobs[4:], conversion, output, DecodeStats())
        assert runner.kind_stats()["helper"].jobs == 1  # taken while the primaries were still busy
        first.join()
    finally:
        runner.close()
    assert result.errors == [None]
    assert [[read_barcode(frame) for frame in clip] for clip in output] == expected


def test_bad_videos_are_errors_per_job(same_size_videos, tmp_path):
    garbage = tmp_path / "garbage.mp4"
    jobs, output, _ = clip_jobs(same_size_videos[:2])
    data = bytearray(Path(same_size_videos[1]).read_bytes())
    index = jobs[1].index
    for packet in range(1, index.num_packets):
        start, size = int(index.packet_pos[packet]), int(index.packet_size[packet])
        data[start + 4 : start + size] = bytes(size - 4)
    garbage.write_bytes(data)
    broken = VideoRequest(vclip.index_video(str(garbage)), jobs[1].targets)
    pool = DecoderPool("cpu", CpuBackend(threads=1), 2, seconds_per_frame=0.5)
    runner = SharedQueueDispatcher([pool])
    try:
        alone = runner.run([broken], resolve_transform(None), output, DecodeStats())
        assert pool.seconds_per_frame == 0.5  # a failed job says nothing of the decoder's speed
        result = runner.run([jobs[0], broken], resolve_transform(None), output, DecodeStats())
    finally:
        runner.close()
    assert isinstance(alone.errors[0], vclip.errors.VideoError)
    assert result.errors[0] is None and pool.seconds_per_frame != 0.5
    assert isinstance(result.errors[1], vclip.errors.VideoError) and str(garbage) in str(result.errors[1])


def test_a_runner_needs_a_primary_pool():
    with pytest.raises(ValueError, match="primary pool"):
        SharedQueueDispatcher([DecoderPool("cpu", CpuBackend(), 2, helper=True)])


@pytest.fixture
def shared_memory(monkeypatch):
    """Set the free shared memory the CPU decoders' auto count sees (default: plenty)."""
    from vclip._engine import scheduler

    def set_free(free: int | None) -> None:
        monkeypatch.setattr(scheduler, "shared_memory_free", lambda: free)

    set_free(64 * 2**30)
    return set_free


def test_auto_cpu_decoders_leaves_cores_to_nvdec_feeders_and_the_consumer(shared_memory):
    """The cores left beside NVDEC's feeders (and any decode processes) and 2 for training, on 8 cores or more."""
    assert auto_cpu_decoders(gpu=True, cores=16) == 16 - 2 - 2
    assert auto_cpu_decoders(gpu=True, decode_processes=4, cores=16) == 16 - 2 - 2 - 4
    assert auto_cpu_decoders(gpu=True, cores=16).reason == (
        "auto: up to the cores left beside NVDEC's feeders (2) and 2 for training, of 16")
    assert auto_cpu_decoders(gpu=True, decode_processes=4, cores=16).reason == (
        "auto: up to the cores left beside NVDEC's feeders (2 and 4 decode processes) and 2 for training, of 16")
    assert auto_cpu_decoders(gpu=True, cores=4) == 0
    assert auto_cpu_decoders(gpu=False, cores=16) == 0
    assert auto_cpu_decoders(gpu=True, cores=16, daemon=True) == 0  # a DataLoader worker starts no process
    assert resolve_cpu_decoders(3, gpu=True) == 3  # a count is taken as it is
    shared_memory(64 * 2**20)  # a Docker container's default /dev/shm: room for none
    assert auto_cpu_decoders(gpu=True, cores=16) == 0
    shared_memory(1 * 2**30)
    assert auto_cpu_decoders(gpu=True, cores=16) == 4
    assert auto_cpu_decoders(gpu=True, cores=16).reason == (
        "auto: up to the cores left beside NVDEC's feeders (2) and 2 for training, of 16, cut from 12 to 4: "
        "/dev/shm has 1,024 MiB free (256 MiB each for their pictures)")
    shared_memory(None)  # no /dev/shm to read: the cores decide
    assert auto_cpu_decoders(gpu=True, cores=16) == 12
    assert resolve_cpu_decoders(3, gpu=True) == 3  # a count is taken whatever the shared memory


def test_the_counts_left_to_the_machine_for_a_loader(monkeypatch, shared_memory):
    """On a GPU machine of 16 cores: up to 3 decode processes (none at first), up to 12 CPU decoders
    (one fewer for each process started; with 3 processes set, 9), up to 4 batches queued (the
    pacing starts at 2); counts given are taken as given; on the CPU a depth of 2."""
    from vclip._engine import scheduler
    from vclip._loader.pacing import PACING
    from vclip._loader.settings import resolve_counts

    monkeypatch.setattr(scheduler, "cores_per_rank", lambda: 16)
    monkeypatch.setattr(scheduler, "usable_cores", lambda: 16)
    auto = {"decode_processes": "auto", "cpu_decoders": "auto", "prefetch_queue_depth": "auto"}
    processes, cpu_decoders, depth = resolve_counts(auto, gpu=True, num_threads=0)
    assert (processes, cpu_decoders, depth) == (3, 12, PACING.max_depth) == (3, 12, 4)  # 16 - 2 - 2 cores
    assert cpu_decoders.reason == ("auto: up to the cores left beside NVDEC's feeders (2) and 2 for training, "
                                   "of 16; one fewer for each decode process started")
    set_processes = resolve_counts({**auto, "decode_processes": 3}, gpu=True, num_threads=0)
    assert set_processes[1] == 9  # 16 - 2 - 2 - 3: processes set all run
    assert processes.reason == ("auto: none at first (NVDEC in this process's CUDA context); up to 3 while the "
                                "training loop waits with every NVDEC thread busy")
    assert depth.reason == "auto: from 2, paced up to 4 while the training loop waits"
    assert resolve_counts(auto, gpu=True, num_threads=4)[0] == 0  # exactly the threads asked for
    given = {"decode_processes": 2, "cpu_decoders": 3, "prefetch_queue_depth": 4}
    assert resolve_counts(given, gpu=True, num_threads=0) == (2, 3, 4)
    assert [count.reason for count in resolve_counts(given, gpu=True, num_threads=0)] == ["set"] * 3
    assert resolve_counts(auto, gpu=False, num_threads=0)[1:] == (0, 2)
    monkeypatch.setattr(scheduler, "cores_per_rank", lambda: 4)
    assert resolve_counts(auto, gpu=True, num_threads=0)[1] == 0


def test_the_ranks_of_one_machine_share_its_cores_for_cpu_decoders(monkeypatch, shared_memory):
    """torchrun's 8 ranks on a 128-core machine get 16 cores each (12 CPU decoders at most, not 124
    each); a rank already bound to its own cores keeps its affinity mask."""
    from vclip import _machine
    from vclip._engine import scheduler

    monkeypatch.setattr(_machine, "usable_cores", lambda: 128)
    monkeypatch.setattr(_machine.os, "cpu_count", lambda: 128)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert _machine.local_ranks() == 1 and _machine.cores_per_rank() == 128
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")
    assert _machine.local_ranks() == 8 and _machine.cores_per_rank() == 16
    assert scheduler.auto_cpu_decoders(gpu=True) == 12
    monkeypatch.setattr(_machine, "usable_cores", lambda: 12)  # numactl or a launcher bound the rank
    assert _machine.cores_per_rank() == 12
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "not a number")
    assert _machine.local_ranks() == 1


def test_auto_decode_processes_are_none_on_a_gpu_one_per_two_cpu_threads():
    """On the GPU NVDEC decodes in the loader's process (one CUDA context); on the CPU crash-isolated
    decoder processes, one per 2 of the min(8, cores) default threads."""
    assert auto_decode_processes(gpu=True, cores=16) == 0
    assert auto_decode_processes(gpu=True, cores=4) == 0
    assert [auto_decode_processes(gpu=False, cores=cores) for cores in (1, 2, 3, 4, 16)] == [1, 1, 1, 2, 4]
    assert auto_decode_processes(gpu=False, cores=16, daemon=True) == 0
    assert auto_decode_processes(gpu=True, cores=16, daemon=True) == 0  # a DataLoader worker starts none
    assert auto_decode_processes(gpu=False, cores=16, num_threads=3) == 0  # exactly the threads asked for
    assert auto_decode_processes(gpu=True, cores=16).reason == (
        "auto: NVDEC decodes on threads of this process, in its one CUDA context")
    assert auto_decode_processes(gpu=True, cores=16, daemon=True).reason == (
        "auto: a daemon process (a DataLoader worker) may not start processes")


def test_the_memory_plan_counts_the_auto_decode_processes_of_this_machine(monkeypatch):
    import vclip._engine.scheduler as scheduler

    shape = dict(width=224, height=224, batch_size=8, sequence_length=16, device="cuda", cpu_decoders=0)
    monkeypatch.setattr(scheduler, "usable_cores", lambda: 16)
    paced = vclip.plan_loader_memory(**shape)  # NVDEC threads here and the 3 decode processes the pacing may start
    assert paced.processes == 3 and paced.decoders == 8 + 3 * 4
    assert paced.cuda_context == 4 * vclip.memory.CUDA_CONTEXT_BYTES
    assert paced.working(processes=0, buffers=paced.buffers, cpu_decoders=0) == vclip.plan_loader_memory(
        **shape, num_threads=8).own_bytes  # with no process started: the plan of 8 threads here
    monkeypatch.setattr(scheduler, "usable_cores", lambda: 2)
    assert vclip.plan_loader_memory(**shape) == vclip.plan_loader_memory(**shape, decode_processes=0)
    assert vclip.plan_loader_memory(**shape, decode_processes=4).cuda_context > vclip.plan_loader_memory(
        **shape).cuda_context
    with pytest.raises(vclip.ArgumentError, match="decode_processes"):
        vclip.plan_loader_memory(**shape, decode_processes="many")


# -- the loader -------------------------------------------------------------------------------------
def loader_epoch(paths, **options) -> tuple[list[np.ndarray], vclip.ClipLoader]:
    loader = vclip.ClipLoader(
        [(path, 0) for path in paths],
        vclip.strided(4, 2, clips_per_video=2),
        device="cpu",
        batch_size=4,
        seed=3,
        **options,
    )
    return [batch.data.numpy().copy() for batch in loader], loader


def test_loader_cpu_decoders_same_batches_and_stats_per_kind(same_size_videos):
    default, plain = loader_epoch(same_size_videos, cpu_decoders=0)
    pooled, loader = loader_epoch(same_size_videos, cpu_decoders=3)
    assert len(default) == len(pooled) == 4
    for left, right in zip(default, pooled):
        np.testing.assert_array_equal(left, right)
    stats, before = loader.stats(), plain.stats()
    assert set(stats.decoders) == {"cpu"} and stats.decoders["cpu"].workers == 3
    assert stats.decoders["cpu"].clips == stats.clips == 16
    assert stats.decoders["cpu"].pictures == stats.frames.decoded > 0
    assert 0 < stats.decoders["cpu"].busy <= 1
    assert before.decoders["cpu"].clips == 16 and stats.nvdec_decoders == 0
    assert "3 decode workers (0 NVDEC)" in stats.summary()
    assert loader.decode_workers == 3
    loader.close()
    plain.close()


def test_loader_cpu_decoders_run_on_their_own_threads(same_size_videos, monkeypatch):
    threads, decode_video = set(), CpuBackend.decode_video
    monkeypatch.setattr(CpuBackend, "decode_video",
                        lambda *a: threads.add(threading.current_thread()) or decode_video(*a))
    loader_epoch(same_size_videos, cpu_decoders=2)[1].close()
    assert 1 <= len(threads) <= 2 and all(t.name == "vclip-decode-cpu" for t in threads)


@pytest.mark.parametrize("value", [-1, 1.5, "many"])
def test_cpu_decoders_is_checked(same_size_videos, value):
    with pytest.raises(ValueError, match=r'cpu_decoders .* must be "auto" or an integer >= 0'):
        vclip.ClipLoader(
            [(path, 0) for path in same_size_videos], vclip.strided(4, 2), device="cpu", cpu_decoders=value
        )


# -- on the GPU (run by the lead on the H200) -------------------------------------------------------
def gpu_process_ids() -> set[int]:
    """The processes holding a CUDA context on any GPU, by nvidia-smi."""
    listed = subprocess.run(["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"],
                            capture_output=True, text=True, check=True).stdout
    return {int(line) for line in listed.split()}


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["h264", "hevc"])
@pytest.mark.parametrize("spec", [vclip.TransformSpec(), vclip.TransformSpec.imagenet(112, layout="TCHW")])
def test_cpu_decoded_clips_are_byte_identical_to_nvdec(videos, name, spec):
    import cupy

    from vclip._device import resolve_device
    from vclip._engine import PackedUploadBackend, UploadBackend, in_process_backend

    device = resolve_device("cuda").device
    index = vclip.index_video(videos[name])
    geometry = spec.geometry(index.width, index.height)
    conversion = resolve_transform(spec)
    targets = (
        ClipTarget(np.arange(0, 16, 2), geometry, 0),
        ClipTarget(np.array([1, 5, 9, 29, 31, 40, 41, 59]), geometry, 1),
    )
    job = VideoRequest(index, targets)
    outputs = []
    packed = PackedUploadBackend(device, 1, 2)  # in a packing process, uploaded and converted here
    for backend in (in_process_backend(device), UploadBackend(device), packed):
        output = backend.empty((2,) + conversion.clip_shape(8, geometry), spec.dtype)
        output.fill(0)
        backend.decode_video(job, conversion, output, DecodeStats()).synchronize()
        outputs.append(cupy.asnumpy(output))
    packed.close()
    np.testing.assert_array_equal(outputs[0], outputs[1])
    np.testing.assert_array_equal(outputs[0], outputs[2])


@pytest.mark.gpu
def test_packed_upload_backend_converts_a_stream_that_is_not_420_as_the_cpu_does(tmp_path):
    """A 4:4:4 stream cannot be packed as NV12: the CPU converts it in the loader's process and the
    clip is copied to the GPU, equal to the CPU backend's."""
    import cupy

    from vclip._device import resolve_device
    from vclip._engine import PackedUploadBackend

    path = vclip.synthetic.make_video(tmp_path / "yuv444.mp4", num_frames=20, width=96, height=64,
                                      pixel_format="yuv444p")
    index = vclip.index_video(path)
    spec = vclip.TransformSpec()
    geometry = spec.geometry(index.width, index.height)
    conversion = resolve_transform(spec)
    frames = np.array([0, 3, 7, 19])
    job = VideoRequest(index, (ClipTarget(frames, geometry, 0),))
    expected = np.empty((1,) + conversion.clip_shape(frames.size, geometry), spec.dtype)
    CpuBackend().decode_video(job, conversion, expected, DecodeStats())
    packed = PackedUploadBackend(resolve_device("cuda").device, 1, 1)
    try:
        output = packed.empty(expected.shape, spec.dtype)
        output.fill(0)
        packed.decode_video(job, conversion, output, DecodeStats()).synchronize()
    finally:
        packed.close()
    assert [read_barcode(frame) for frame in expected[0]] == frames.tolist()
    np.testing.assert_array_equal(cupy.asnumpy(output), expected)


@pytest.mark.gpu
@pytest.mark.parametrize("processes", [0, 2])
def test_gpu_loader_with_cpu_decoders_matches_nvdec_alone(videos, processes):
    """The CPU decoders run in packing processes of their own (no CUDA context), whose pictures the
    loader's process converts into the output buffers (with decode processes: theirs)."""
    from vclip._engine import PackedUploadBackend

    paths = [(videos["h264"], 0)] * 4
    epochs = []
    for count in (0, 4):
        loader = vclip.ClipLoader(
            paths,
            vclip.strided(8, 2, clips_per_video=3),
            device="cuda",
            batch_size=6,
            seed=1,
            cpu_decoders=count,
            decode_processes=processes,
            prefetch_queue_depth=4,
        )
        epochs.append([batch.data.cpu().numpy().copy() for batch in loader])
        stats = loader.stats()
        if count:
            assert set(stats.decoders) == {"nvdec", "cpu"} and stats.decoders["cpu"].workers == 4
            assert stats.decoders["nvdec"].clips + stats.decoders["cpu"].clips == stats.clips
            helpers = loader._runtime.backend.pools[1].backend
            assert isinstance(helpers, PackedUploadBackend)
            assert helpers.processes == 2 and helpers.threads == 2
            on_gpu = gpu_process_ids()  # NVDEC's decode processes hold a CUDA context, packers none
            if processes:
                assert {w.process.pid for w in loader._runtime.backend.pools[0].backend._workers} <= on_gpu
            assert not {w.process.pid for w in helpers._packers._workers} & on_gpu
        loader.close()
    for left, right in zip(*epochs):
        np.testing.assert_array_equal(left, right)


# -- long GOPs ----------------------------------------------------------------------------------------
def test_bound_lead_moves_late_starts_to_the_first_frames_of_their_gop(videos):
    from vclip.gop import bound_lead, lead_frames

    index = vclip.index_video(videos["long_gop"])  # keyframes at 0 and 250
    assert index.keyframe_indices.tolist() == [0, 250]
    clip = np.arange(100, 116, 2)
    np.testing.assert_array_equal(bound_lead(index, clip, 30), clip - 93)  # lead 100 -> 100 mod 31 = 7
    np.testing.assert_array_equal(bound_lead(index, clip, 100), clip)
    np.testing.assert_array_equal(bound_lead(index, np.arange(260, 276, 2), 5), np.arange(254, 270, 2))
    assert lead_frames(index, 260) == 10 and lead_frames(index, 0) == 0


def test_start_distribution_of_uniform_and_bounded_starts(videos):
    from vclip.gop import bound_lead, start_distribution

    index = vclip.index_video(videos["long_gop"])
    possible = np.arange(0, 250)
    uniform = start_distribution([(index, s) for s in possible], [(index, possible)] * possible.size)
    assert uniform.total_variation < 1e-9 and uniform.mean_lead[0] == pytest.approx(uniform.mean_lead[1])
    bounded = start_distribution(
        [(index, int(bound_lead(index, np.array([s]), 24)[0])) for s in possible], [(index, possible)] * possible.size
    )
    assert bounded.observed[0] == 1.0 and bounded.total_variation == pytest.approx(0.9)
    assert bounded.mean_lead[0] < 13 and "total variation 0.900" in str(bounded)


def test_loader_max_lead_frames_bounds_decode_work(videos):
    from vclip.gop import lead_frames

    index = vclip.index_video(videos["long_gop"])
    results = {}
    for bound in (None, 20):
        loader = vclip.ClipLoader(
            [(videos["long_gop"], 0)],
            vclip.strided(4, 2, clips_per_video=12),
            device="cpu",
            batch_size=4,
            seed=2,
            max_lead_frames=bound,
            cpu_decoders=0,
        )
        starts = []
        for batch in loader:
            for clip, frames in zip(batch.data.numpy(), batch.frame_indices.tolist()):
                assert [read_barcode(frame) for frame in clip] == frames
                starts.append(frames[0])
        results[bound] = (starts, loader.stats().frames.decoded_per_delivered)
        loader.close()
    assert (
        max(lead_frames(index, s) for s in results[20][0]) <= 20 < max(lead_frames(index, s) for s in results[None][0])
    )
    assert results[20][1] < results[None][1]


def test_max_lead_frames_needs_moveable_starts(videos):
    with pytest.raises(ValueError, match="max_lead_frames .* needs random or even starts"):
        vclip.ClipLoader(
            [(videos["long_gop"], 0)], vclip.strided(4, 2, starts="step", step=4), device="cpu", max_lead_frames=8
        )
    with pytest.raises(ValueError, match=r"max_lead_frames \(-1\) must be"):
        vclip.ClipLoader([(videos["long_gop"], 0)], vclip.strided(4, 2), device="cpu", max_lead_frames=-1)


def test_bound_lead_never_moves_a_clip_before_first_frame(videos):
    from vclip.gop import bound_lead

    index = vclip.index_video(videos["long_gop"])  # keyframes at 0 and 250
    clip = np.arange(100, 116, 2)
    np.testing.assert_array_equal(bound_lead(index, clip, 4, first_frame=60), clip - 40)  # lead 40 -> 0
    np.testing.assert_array_equal(bound_lead(index, clip + 3, 4, first_frame=60), clip - 37)  # lead 43 -> 3
    np.testing.assert_array_equal(bound_lead(index, clip, 4, first_frame=100), clip)
    np.testing.assert_array_equal(bound_lead(index, clip + 160, 4, first_frame=100), clip + 150)  # from keyframe 250


@pytest.mark.parametrize(
    "sampler", [vclip.strided(4, 2, clips_per_video=12), vclip.contiguous(4, fps=10, clips_per_video=12)]
)
def test_max_lead_frames_keeps_clips_inside_their_segment(videos, sampler):
    """The only keyframe before the segment [2 s, 4 s) is frame 0: clips start at most 4 frames
    after the segment's first frame, never before it."""
    path = videos["long_gop"]
    assert vclip.index_video(path).keyframe_indices.tolist() == [0, 250]
    loader = vclip.ClipLoader([vclip.LabeledVideo(path, 5, 2.0, 4.0)], sampler, device="cpu", batch_size=4, seed=1,
                              max_lead_frames=4, cpu_decoders=0)
    starts = set()
    for batch in loader:
        assert batch.labels.tolist() == [5] * len(batch)
        for clip, frames, pts in zip(batch.data.numpy(), batch.frame_indices.tolist(), batch.pts_seconds.numpy()):
            assert np.all(pts >= 2.0 - 1e-9) and np.all(pts < 4.0), pts
            assert [read_barcode(frame) for frame in clip] == frames
            starts.add(frames[0])
    assert starts and starts <= set(range(60, 65))
    loader.close()
