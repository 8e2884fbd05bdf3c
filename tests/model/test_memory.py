import numpy as np
import pytest
from helpers import require_extra

import vclip
from vclip.memory import (
    BYTES_PER_ELEMENT,
    CUDA_CONTEXT_BYTES,
    LOADER_WORKSPACE_BYTES,
    NVDEC_DEFAULT_THREADS,
    PROCESS_DEFAULT_THREADS,
    STAGING_PICTURES,
    loader_decode_workers,
)


def test_formula_reference_figure():
    estimate = vclip.estimate_memory(width=1920, height=1080, batch_size=32, sequence_length=16)
    assert estimate.bytes == 1920 * 1080 * 3 * 1 * 32 * 16 == 3_185_049_600
    assert estimate.gb == pytest.approx(3.1850496)
    assert estimate.gib == pytest.approx(2.966, abs=1e-3)
    assert str(estimate) == "3,185,049,600 bytes (3.19 GB, 2.97 GiB)"


@pytest.mark.parametrize("count, text", [
    (0, "0 bytes"), (990, "990 bytes"), (1_000, "1,000 bytes (1.00 KB, 0.98 KiB)"),
    (4_194_304, "4,194,304 bytes (4.19 MB, 4.00 MiB)"), (999_999_999, "999,999,999 bytes (1.00 GB, 0.93 GiB)"),
    (3_185_049_600, "3,185,049,600 bytes (3.19 GB, 2.97 GiB)"),
    (5 * 10**12, "5,000,000,000,000 bytes (5.00 TB, 4.55 TiB)"),
])
def test_format_bytes_speaks_in_the_unit_the_count_reaches(count, text):
    """Under 5 MB it printed "0.00 GB": the units now follow the size."""
    assert vclip.format_bytes(count) == text


@pytest.mark.parametrize("dtype", ["uint8", "float16", "float32"])
@pytest.mark.parametrize("augmentation_factor", [0, 0.5, 1, 0.1])
def test_formula_terms(dtype, augmentation_factor):
    estimate = vclip.estimate_memory(
        width=224,
        height=224,
        channels=3,
        dtype=dtype,
        batch_size=8,
        sequence_length=16,
        augmentation_factor=augmentation_factor,
    )
    expected = 224 * 224 * 3 * BYTES_PER_ELEMENT[dtype] * 8 * 16 * (1 + augmentation_factor)
    assert estimate.bytes == pytest.approx(expected, abs=1)


def test_largest_batch_and_sequence_fit_exactly():
    options = dict(width=1920, height=1080, sequence_length=16)
    assert vclip.largest_batch_size(3_185_049_600, **options) == 32
    assert vclip.largest_batch_size(3_185_049_599, **options) == 31
    assert vclip.largest_batch_size("8GiB", **options) == 8 * 2**30 // (1920 * 1080 * 3 * 16)
    assert vclip.largest_batch_size(100, **options) == 0
    assert vclip.largest_sequence_length(3_185_049_600, width=1920, height=1080, batch_size=32) == 16
    assert vclip.largest_batch_size(
        "1GB", width=224, height=224, sequence_length=16, dtype="float32", augmentation_factor=1
    ) == 10**9 // (224 * 224 * 3 * 4 * 16 * 2)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("8GiB", 8 * 2**30),
        ("1.5 GB", 1_500_000_000),
        ("512MiB", 512 * 2**20),
        ("1000", 1000),
        (4096, 4096),
        ("2kb", 2000),
    ],
)
def test_parse_bytes(text, expected):
    assert vclip.parse_bytes(text) == expected


@pytest.mark.parametrize("bad", ["8 GiBs", "lots", "-1GB", "", True])
def test_parse_bytes_refuses(bad):
    with pytest.raises(ValueError, match="memory size"):
        vclip.parse_bytes(bad)


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(width=0), r"width \(0\) must be an integer >= 1"),
        (dict(batch_size=-2), r"batch_size \(-2\) must be an integer >= 1"),
        (dict(dtype="int4"), r"dtype \('int4'\) must be one of"),
        (dict(augmentation_factor=-0.5), r"augmentation_factor \(-0.5\) must be a number >= 0"),
    ],
)
def test_estimate_refuses_bad_inputs(options, message):
    inputs = dict(width=64, height=64, batch_size=1, sequence_length=1) | options
    with pytest.raises(ValueError, match=message):
        vclip.estimate_memory(**inputs)


@pytest.mark.parametrize(
    "options, message",
    [
        (dict(width=1.5), r"width \(1.5\) must be an integer >= 1"),
        (dict(height=True), r"height \(True\) must be an integer >= 1"),
        (dict(sequence_length="16"), r"sequence_length \('16'\) must be an integer >= 1"),
        (dict(augmentation_factor="0.5"), r"augmentation_factor \('0.5'\) must be a number >= 0"),
        (dict(dtype=0), r"dtype \(0\) must be one of 'uint8', .* or a number of bytes per element >= 1"),
    ],
)
def test_wrong_types_are_argument_errors(options, message):
    inputs = dict(width=64, height=64, batch_size=1, sequence_length=1) | options
    for error in (ValueError, TypeError, vclip.ArgumentError):
        with pytest.raises(error, match=message):
            vclip.estimate_memory(**inputs)


def test_numpy_numbers_are_accepted():
    """Sizes often come from arrays (``frames.shape``): NumPy integers are integers."""
    estimate = vclip.estimate_memory(
        width=np.int64(1920),
        height=np.int32(1080),
        batch_size=np.uint16(32),
        sequence_length=np.int64(16),
        augmentation_factor=np.float32(0.5),
    )
    assert estimate.bytes == 3_185_049_600 * 3 // 2 and type(estimate.width) is int
    assert vclip.parse_bytes(np.int64(4096)) == 4096
    assert (
        vclip.largest_batch_size(
            np.int64(3_185_049_600), width=np.int64(1920), height=1080, sequence_length=np.int8(16)
        )
        == 32
    )


# -- the loader's answer -----------------------------------------------------------------------------
ISSUE_EXAMPLE = dict(width=1280, height=720, sequence_length=16, dtype="float16")  # issue 15: 291 by the formula


def test_formula_and_loader_answers_for_the_issue_example():
    assert vclip.largest_batch_size("24GiB", **ISSUE_EXAMPLE) == 291  # the formula, unchanged
    # The CPU loader holds prefetch_queue_depth + 3 = 5 batches of host memory: 291 // 5.
    assert vclip.plan_loader_memory(batch_size=1, device="cpu", **ISSUE_EXAMPLE).largest_batch_size("24GiB") == 58
    # On the GPU the pacing may queue up to 4 batches ahead: 7 buffers; 8 NVDEC threads
    gpu = vclip.plan_loader_memory(batch_size=1, device="cuda", cpu_decoders=0, **ISSUE_EXAMPLE)
    assert gpu.buffers == 7 and gpu.decoders == NVDEC_DEFAULT_THREADS == 8
    assert gpu.cuda_context == CUDA_CONTEXT_BYTES and gpu.workspace == LOADER_WORKSPACE_BYTES
    assert gpu.own_bytes == gpu.total - CUDA_CONTEXT_BYTES  # the training process's context is not the loader's
    budget = 24 * 2**30
    fits = gpu.largest_batch_size(budget)
    assert fits == (budget - gpu.fixed_bytes) // 7 // (1280 * 720 * 3 * 2 * 16) == 40
    assert vclip.plan_loader_memory(batch_size=fits, device="cuda", cpu_decoders=0, **ISSUE_EXAMPLE).total <= budget
    assert vclip.plan_loader_memory(batch_size=fits + 1, device="cuda", cpu_decoders=0, **ISSUE_EXAMPLE).total > budget
    processes = vclip.plan_loader_memory(batch_size=1, device="cuda", decode_processes=4, prefetch_queue_depth=1,
                                         cpu_decoders=0, **ISSUE_EXAMPLE)
    assert processes.buffers == 4 and processes.decoders == 4 * PROCESS_DEFAULT_THREADS["cuda"]
    assert processes.cuda_context == 5 * CUDA_CONTEXT_BYTES
    assert processes.own_bytes == processes.total - CUDA_CONTEXT_BYTES  # the decode processes' contexts count
    # CPU decoders run in packing processes without a CUDA context; each stages 4 pictures on the
    # device as NVDEC lays them out (1280x720 NV12: 1,080 rows of 1,280 bytes)
    helpers = vclip.plan_loader_memory(
        batch_size=1, device="cuda", decode_processes=4, prefetch_queue_depth=1, cpu_decoders=5, **ISSUE_EXAMPLE
    )
    assert helpers.cuda_context == 5 * CUDA_CONTEXT_BYTES and helpers.decoders == processes.decoders
    assert helpers.staging == 5 * STAGING_PICTURES * 1080 * 1280 == 5 * 4 * 1080 * 1280
    assert helpers.total == processes.total + helpers.staging
    assert helpers.fixed_bytes == processes.fixed_bytes + helpers.staging
    threads = vclip.plan_loader_memory(batch_size=1, device="cuda", cpu_decoders=5, **ISSUE_EXAMPLE)  # one context
    assert threads.cuda_context == CUDA_CONTEXT_BYTES
    assert threads.staging == helpers.staging
    assert "CPU decoders' staging 27,648,000" in str(helpers)


def test_loader_plan_defaults_and_checks():
    assert loader_decode_workers(device="cuda") == NVDEC_DEFAULT_THREADS
    assert loader_decode_workers(device="cuda:1", num_threads=5, decode_processes=3) == 15
    assert loader_decode_workers(device="cpu", decode_processes=2) == 2 * PROCESS_DEFAULT_THREADS["cpu"]
    plan = vclip.plan_loader_memory(
        width=224, height=224, batch_size=8, sequence_length=16, video_width=1920, video_height=1080,
        video_bit_depth=10, device="cuda",
    )
    assert plan.decode_surfaces == NVDEC_DEFAULT_THREADS * 24 * 3 * 1920 * 1080  # P016 surfaces at the video size
    with pytest.raises(vclip.ArgumentError, match=r"prefetch_queue_depth \(0\) must be \"auto\" or an integer >= 1"):
        vclip.plan_loader_memory(width=8, height=8, batch_size=1, sequence_length=1, prefetch_queue_depth=0)
    with pytest.raises(vclip.ArgumentError, match=r"device \('tpu'\) must be 'cpu', 'cuda', 'cuda:N' or 'auto'"):
        vclip.plan_loader_memory(batch_size=1, width=8, height=8, sequence_length=1, device="tpu")


_PLAN = dict(width=224, height=224, batch_size=8, sequence_length=16, dtype="float32", device="cuda",
             video_width=1920, video_height=1080, decode_processes=2, cpu_decoders=4, prefetch_queue_depth=4)


def test_a_plan_limited_to_fewer_processes_buffers_and_cpu_decoders():
    plan = vclip.plan_loader_memory(**_PLAN)
    assert plan.limited(processes=plan.processes, buffers=plan.buffers, cpu_decoders=plan.cpu_decoders) == plan
    fewer = plan.limited(processes=1, buffers=4, cpu_decoders=1)
    assert (fewer.processes, fewer.buffers, fewer.cpu_decoders) == (1, 4, 1)
    assert fewer.cuda_context == plan.cuda_context - CUDA_CONTEXT_BYTES
    assert fewer.workspace == plan.workspace - LOADER_WORKSPACE_BYTES
    assert fewer.process_decoders == plan.process_decoders // 2
    assert fewer.decoders == plan.decoders - plan.process_decoders // 2
    assert fewer.decode_surfaces == plan.decode_surfaces * fewer.decoders // plan.decoders
    assert fewer.output_buffers == 4 * plan.batch.bytes and fewer.staging == plan.staging // 4
    assert fewer.total == (fewer.output_buffers + fewer.decode_surfaces + fewer.workspace + fewer.cuda_context
                           + fewer.staging)
    assert plan.working(processes=1, buffers=4, cpu_decoders=1) == fewer.own_bytes
    assert plan.limited(processes=5, buffers=0, cpu_decoders=9).buffers == 1  # within the plan, one buffer at least


def test_a_budget_lowers_processes_then_cpu_decoders_then_depth():
    from vclip.memory import BUDGET_ORDER, fit_to_budget

    plan = vclip.plan_loader_memory(**_PLAN)
    everything = set(BUDGET_ORDER)
    without_processes = plan.limited(processes=0, buffers=plan.buffers, cpu_decoders=4)
    fitted, lowered = fit_to_budget(plan, without_processes.total, everything)
    assert lowered == {"decode_processes": 0} and fitted == without_processes
    fitted, lowered = fit_to_budget(plan, plan.limited(processes=0, buffers=plan.buffers, cpu_decoders=0).total - 1,
                                    everything)
    assert lowered == {"decode_processes": 0, "cpu_decoders": 0, "prefetch_queue_depth": 3}
    assert fitted == plan.limited(processes=0, buffers=6, cpu_decoders=0)
    fitted, lowered = fit_to_budget(plan, without_processes.total, {"prefetch_queue_depth"})
    assert lowered == {"prefetch_queue_depth": 1} and fitted.total > without_processes.total  # not enough: refused
    assert fit_to_budget(plan, plan.total, everything) == (plan, {})
    host = vclip.plan_loader_memory(**{**_PLAN, "device": "cpu"})  # processes hold no host buffers of the plan
    fitted, lowered = fit_to_budget(host, host.total - 1, everything)
    assert lowered == {"prefetch_queue_depth": 3} and fitted.buffers == host.buffers - 1


def test_each_thread_keeps_a_decoder_per_kind_of_video_up_to_four():
    from vclip._engine import DECODERS_PER_THREAD

    options = dict(width=224, height=224, batch_size=8, sequence_length=16, video_width=1920, video_height=1080,
                   device="cuda", num_threads=3)
    one = vclip.plan_loader_memory(**options)
    assert one.decoders == 3 and one.decode_surfaces == 3 * 24 * 1.5 * 1920 * 1080
    two = vclip.plan_loader_memory(**options, video_kinds=2)
    assert two.decoders == 6 and two.decode_surfaces == 2 * one.decode_surfaces
    many = vclip.plan_loader_memory(**options, video_kinds=9)
    assert DECODERS_PER_THREAD == 4 and many.decode_surfaces == 4 * one.decode_surfaces
    assert many.total - one.total == 3 * one.decode_surfaces


def test_nvdec_default_threads_match_the_backend():
    from vclip._engine import NvdecBackend

    assert NvdecBackend.default_workers == NVDEC_DEFAULT_THREADS


@pytest.fixture(scope="module")
def small_video(tmp_path_factory):
    from vclip.synthetic import make_video

    return make_video(tmp_path_factory.mktemp("memory") / "v.mp4", num_frames=20, width=160, height=96)


LOADER_SETTINGS = [
    dict(prefetch_queue_depth=2),
    dict(prefetch_queue_depth=5, num_threads=3),
    dict(prefetch_queue_depth=1, num_threads=1),
]


def _loader_and_plan(video, device, settings, budget=None):
    torch = require_extra("torch")  # noqa: F841
    transform = vclip.TransformSpec(resize=(48, 80), dtype="float16")
    loader = vclip.ClipLoader(
        [(video, 0)],
        vclip.strided(4, 2),
        transform=transform,
        batch_size=3,
        device=device,
        augmentation_factor=0.25,
        memory_budget=budget,
        **settings,
    )
    try:
        options = dict(
            width=80,
            height=48,
            sequence_length=4,
            dtype="float16",
            augmentation_factor=0.25,
            device=loader.device,
            video_width=160,
            video_height=96,
            **settings,
        )
        return loader.memory_estimate, loader.decode_workers, options
    finally:
        loader.close()


@pytest.mark.parametrize("settings", LOADER_SETTINGS)
def test_loader_and_plan_agree_on_the_cpu(small_video, settings):
    estimate, decode_workers, options = _loader_and_plan(small_video, "cpu", settings)
    assert estimate == vclip.plan_loader_memory(batch_size=3, **options)
    assert decode_workers == loader_decode_workers(device="cpu", num_threads=settings.get("num_threads", 0))
    budget = estimate.total * 3
    one_clip = vclip.plan_loader_memory(batch_size=1, **options)
    assert estimate.largest_batch_size(budget) == one_clip.largest_batch_size(budget) == 9


def test_a_refused_budget_names_the_planned_batch(small_video):
    options = dict(
        width=80,
        height=48,
        sequence_length=4,
        dtype="float16",
        augmentation_factor=0.25,
        device="cpu",
        video_width=160,
        video_height=96,
        prefetch_queue_depth=2,
    )
    budget = vclip.plan_loader_memory(batch_size=2, **options).total  # room for 2, the loader asks for 3
    with pytest.raises(ValueError, match="the largest batch_size that fits is 2"):
        _loader_and_plan(small_video, "cpu", dict(prefetch_queue_depth=2), budget=budget)
    assert vclip.plan_loader_memory(batch_size=1, **options).largest_batch_size(budget) == 2


WITH_PROCESSES = dict(decode_processes=2, num_threads=2, prefetch_queue_depth=3)


@pytest.mark.gpu
@pytest.mark.parametrize("settings", [*LOADER_SETTINGS, WITH_PROCESSES])
def test_loader_and_plan_agree_on_the_gpu(small_video, settings):
    estimate, decode_workers, options = _loader_and_plan(small_video, "cuda", settings)
    assert estimate == vclip.plan_loader_memory(batch_size=3, **options)
    assert decode_workers == loader_decode_workers(
        device="cuda", num_threads=settings.get("num_threads", 0),
        decode_processes=settings.get("decode_processes", "auto"),
    )
    budget = estimate.total + 5 * estimate.batch.bytes * estimate.buffers  # room for 5 more batches of 3 per buffer
    one_clip = vclip.plan_loader_memory(batch_size=1, **options)
    assert estimate.largest_batch_size(budget) == one_clip.largest_batch_size(budget) == 3 + 5 * 3


@pytest.mark.gpu
def test_a_loader_over_videos_of_two_sizes_plans_two_decoders_per_thread(small_video, tmp_path):
    from vclip.synthetic import make_video

    other = make_video(tmp_path / "other.mp4", num_frames=20, width=128, height=96)
    loader = vclip.ClipLoader([(small_video, 0), (other, 1)], vclip.strided(4, 2), batch_size=2, device="cuda",
                              num_threads=3, transform=vclip.TransformSpec(resize=(48, 80)))
    try:
        estimate = loader.memory_estimate
    finally:
        loader.close()
    assert estimate == vclip.plan_loader_memory(width=80, height=48, batch_size=2, sequence_length=4, device="cuda",
                                                num_threads=3, video_width=160, video_height=96, video_kinds=2)
    assert estimate.decoders == 6


@pytest.mark.gpu
def test_a_budget_keeps_a_gpu_loader_to_one_cuda_context(small_video):
    """A budget without room for the decode processes the pacing may start: the loader runs with
    none (one CUDA context), within its plan, and says why."""

    def loader(**options) -> vclip.ClipLoader:
        return vclip.ClipLoader([(small_video, 0), (small_video, 1)], vclip.strided(4, 2, clips_per_video=3),
                                batch_size=3, device="cuda", transform=vclip.TransformSpec(resize=(48, 80)), **options)

    free = loader()
    plan = free.memory_estimate
    free.close()
    if not plan.processes:
        pytest.skip("the pacing of this machine starts no decode process (fewer than 8 cores)")
    budget = plan.limited(processes=0, buffers=plan.buffers, cpu_decoders=plan.cpu_decoders).total
    kept = loader(memory_budget=budget)
    try:
        assert kept.decode_processes == 0 and kept.memory_estimate.processes == 0
        assert kept.memory_estimate.total <= budget
        assert kept.stats().chosen["decode_processes"].reason.endswith("at most 0 within memory_budget")
        frames = [batch.frame_indices.tolist() for batch in kept]
        assert len(frames) == 2
        stats = kept.stats()
        assert stats.working["decode_processes"] == 0 and stats.memory.peak_bytes <= kept.memory_estimate.total
    finally:
        kept.close()
