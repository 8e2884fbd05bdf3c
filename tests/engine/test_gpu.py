"""GPU path on real hardware: NVDEC frames, the fused kernel, fallbacks. Skipped without a GPU.

Tolerances: at native size, NVDEC + kernel RGB against FFmpeg rgb24 has mean absolute error <= 1.5
and 99th percentile <= 4 (FFmpeg's fixed-point conversion differs by rounding). The kernel against
its NumPy twin: within 1 on uint8, 1e-3 relative on float32.
"""

import warnings

import numpy as np
import pytest
from helpers import barcodes, ffmpeg_rgb24, host, require_extra, rgb_error
from kernel_cases import (
    CASES,
    assert_matches_twin,
    draws_of,
    kernel_arguments,
    pack_semi_planar,
    random_planes,
    twin_clip,
)

import vclip
import vclip.synthetic
from vclip.synthetic import read_barcode
from vclip.transforms import TransformSpec

pytestmark = pytest.mark.gpu


SAMPLERS = {
    "contiguous": vclip.contiguous(8, clips_per_video=3, seed=1),
    "strided": vclip.strided(6, 3, starts="even", clips_per_video=2),
    "keyframe": vclip.keyframe(),
    "indexed": vclip.indexed([9, 2, 2, -1, 0]),
    "jittered": vclip.jittered(6, 4, 2, clips_per_video=2, seed=5),
    "downscaled": vclip.downscaled(vclip.strided(5, 2, seed=3), 0.5),
}


@pytest.mark.parametrize("name", ["h264", "hevc", "vfr", "offset", "long_gop"])
@pytest.mark.parametrize("mode", sorted(SAMPLERS))
def test_nvdec_returns_exactly_the_frames_the_cpu_returns(videos, name, mode):
    sampler = SAMPLERS[mode]
    gpu = vclip.VideoDecoder(videos[name], device="cuda").get_clips(sampler, seed=4)
    cpu = vclip.VideoDecoder(videos[name], device="cpu").get_clips(sampler, seed=4)
    assert gpu.device == "cuda:0" and not gpu.fell_back_to_cpu
    assert np.array_equal(gpu.frame_indices, cpu.frame_indices)
    assert host(gpu.data).shape == cpu.data.shape
    for gpu_clip, wanted in zip(host(gpu.data), cpu.frame_indices):
        assert barcodes(gpu_clip) == wanted.tolist()
    mean, p99 = rgb_error(gpu.data, cpu.data)
    assert mean <= 1.5 and p99 <= 4, (mean, p99)


@pytest.mark.parametrize(
    "name, stream_index", [("nasa_13013.mp4", 0), ("nasa_13013.mp4", 3), ("bt709_full_range.mp4", None)]
)
def test_native_rgb_against_ffmpeg_on_real_videos(shared_videos, name, stream_index):
    path = shared_videos / name
    reference = ffmpeg_rgb24(path, stream_index)
    decoder = vclip.VideoDecoder(path, stream_index=stream_index, device="cuda")
    frames = decoder.get_frames(list(range(len(reference))))
    assert not frames.fell_back_to_cpu
    mean, p99 = rgb_error(frames.data, np.stack(reference))
    assert mean <= 1.5 and p99 <= 4, (name, mean, p99)


def test_10_bit_hevc_against_ffmpeg_rgb24(shared_videos):
    """P016 surfaces through the kernel against FFmpeg's rgb24 (nearest chroma, as its 8-bit path;
    see helpers.py), and against FFmpeg's decoded planes through the twin."""
    path = shared_videos / "h265_10bits.mp4"
    native = TransformSpec()
    gpu = vclip.VideoDecoder(path, device="cuda").get_frames(list(range(30)), transform=native)
    assert not gpu.fell_back_to_cpu
    mean, p99 = rgb_error(gpu.data, np.stack(ffmpeg_rgb24(path)))
    assert mean <= 1.5 and p99 <= 4, (mean, p99)
    cpu = vclip.VideoDecoder(path, device="cpu").get_frames(list(range(30)), transform=native)
    assert_matches_twin(host(gpu.data), cpu.data, "uint8")


@pytest.mark.parametrize("name", ["h264", "hevc", "long_gop"])
def test_native_rgb_against_ffmpeg_on_synthetic_videos(videos, name):
    reference = np.stack(ffmpeg_rgb24(videos[name]))
    frames = vclip.VideoDecoder(videos[name], device="cuda").get_frames(list(range(len(reference))))
    mean, p99 = rgb_error(frames.data, reference)
    assert mean <= 1.5 and p99 <= 4, (mean, p99)
    assert barcodes(frames.data) == list(range(len(reference)))


@pytest.mark.parametrize("layout", ["TCHW", "CTHW", "THWC"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "uint8"])
def test_transformed_clips_match_cpu_twin(videos, layout, dtype):
    """NVDEC decodes the same YUV as FFmpeg, so GPU kernel and CPU twin agree to kernel precision."""
    options = dict(mean=vclip.IMAGENET_MEAN, std=vclip.IMAGENET_STD) if dtype != "uint8" else {}
    spec = TransformSpec(
        resize=112, crop=(96, 96), crop_mode="random", flip_probability=0.5, dtype=dtype, layout=layout, **options
    )
    sampler = vclip.jittered(6, 3, 1, clips_per_video=4, seed=2)
    gpu = vclip.VideoDecoder(videos["h264"], device="cuda").get_clips(sampler, transform=spec, seed=8)
    cpu = vclip.VideoDecoder(videos["h264"], device="cpu").get_clips(sampler, transform=spec, seed=8)
    assert np.array_equal(gpu.frame_indices, cpu.frame_indices)
    assert_matches_twin(host(gpu.data), cpu.data, dtype)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("frames", [1, 4])
def test_kernel_matches_numpy_twin(name, frames):
    """Every kernel case (resize, crops, random resized and multi-scale windows, colour adjustments
    with the contrast pre-pass, bfloat16), one launch per frame as the backends launch it."""
    import cupy

    from vclip._engine import BLOCK, KernelModule, launch_grid

    case = CASES[name]
    width, height, bit_depth, *_, spec, _ = case
    planes = [random_planes(width, height, bit_depth, seed=100 + t) for t in range(frames)]
    packed = [[cupy.asarray(p) for p in pack_semi_planar(y, u, v, bit_depth, pad=13)] for y, u, v in planes]
    module = KernelModule.for_device(0)
    input_bytes = 1 if bit_depth == 8 else 2
    for draw in draws_of(case, frames, seed=7):  # each spatial view
        expected = twin_clip(planes, case, draw)
        poison = 77 if spec.dtype == "uint8" else 0x7FC0 if spec.dtype == "bfloat16" else np.nan
        output = cupy.full(expected.shape, poison, dtype=expected.dtype)
        gray_sums = cupy.zeros(frames, np.uint64)
        addresses = [(luma.data.ptr, chroma.data.ptr, luma.strides[0], chroma.strides[0]) for luma, chroma in packed]
        for params, job, extended in kernel_arguments(case, draw, frames, output.data.ptr, addresses,
                                                      gray_sums.data.ptr):
            if job["gray_sum"]:
                module.gray_sum_function(input_bytes)(launch_grid(params, 1), BLOCK, (params, job))
            module.function(input_bytes, spec.dtype, extended)(launch_grid(params), BLOCK, (params, job))
        cupy.cuda.runtime.deviceSynchronize()
        assert_matches_twin(output.get(), expected, spec.dtype)


@pytest.mark.parametrize(
    "name, why",
    [
        ("av1_video.mkv", "av1"),
        ("h264_10bits.mp4", "10-bit H.264"),
        ("h265_video.mp4", "128x128 HEVC, below NVDEC's minimum size"),
    ],
)
def test_streams_nvdec_cannot_decode_fall_back_visibly(shared_videos, name, why):
    path = shared_videos / name
    reference = ffmpeg_rgb24(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        decoder = vclip.VideoDecoder(path, device="cuda")
        first = decoder.get_frames([0, 1])
        second = decoder.get_frames(list(range(len(reference))))
    fallbacks = [w for w in caught if issubclass(w.category, vclip.FallbackWarning)]
    assert len(fallbacks) == 1, [str(w.message) for w in caught]
    assert name in str(fallbacks[0].message) and "on the CPU" in str(fallbacks[0].message)
    assert first.fell_back_to_cpu and second.fell_back_to_cpu and second.device == "cuda:0"
    assert np.array_equal(host(second.data), np.stack(reference))  # CPU decode, FFmpeg's own rgb24


def test_decoders_are_reused_across_files(shared_videos, videos, tmp_path):
    from vclip._device import Device
    from vclip._engine import (
        ClipTarget,
        DecodeStats,
        NvdecBackend,
        ThreadDispatcher,
        VideoRequest,
        resolve_transform,
    )

    backend = NvdecBackend(Device("cuda", 0))
    runner = ThreadDispatcher(backend, num_workers=1)
    second_h264 = vclip.synthetic.make_video(tmp_path / "other.mp4", num_frames=30, width=320, height=240, seed=3)
    order = [
        (shared_videos / "nasa_13013.mp4", 3),
        (shared_videos / "nasa_13013.mp4", 0),
        (videos["h264"], None),
        (second_h264, None),
        (shared_videos / "nasa_13013.mp4", 3),
        (videos["h264"], None),
    ]
    for path, stream_index in order:
        index = vclip.index_video(path, stream_index=stream_index)
        geometry = TransformSpec().geometry(index.width, index.height)
        output = backend.empty((1, 3, index.height, index.width, 3), "uint8")
        result = runner.run(
            [VideoRequest(index, (ClipTarget(np.array([0, 5, 9]), geometry, 0),))],
            resolve_transform(None),
            output,
            DecodeStats(),
        )
        assert result.errors == [None]
        result.completions[0].synchronize()
        reference = ffmpeg_rgb24(path, stream_index)
        mean, p99 = rgb_error(output[0], np.stack([reference[i] for i in (0, 5, 9)]))
        assert mean <= 1.5 and p99 <= 4, (path, stream_index, mean, p99)
    assert backend._worker().created == 3  # one decoder per (codec, size): 480x270, 320x180, 320x240


def test_skipping_non_reference_pictures_on_nvdec(videos):
    lean = vclip.VideoDecoder(videos["long_gop"], device="cuda")
    full = vclip.VideoDecoder(videos["long_gop"], device="cuda", skip_non_reference=False)
    wanted = list(range(100, 160, 2))
    a, b = lean.get_frames(wanted), full.get_frames(wanted)
    assert np.array_equal(host(a.data), host(b.data))
    assert barcodes(a.data) == wanted
    assert lean.stats.packets_sent < full.stats.packets_sent


def test_torch_tensor_shares_gpu_memory(videos):
    torch = require_extra("torch")
    frames = vclip.VideoDecoder(videos["h264"], device="cuda").get_frames([1, 2])
    tensor = frames.torch()
    assert tensor.is_cuda and tensor.data_ptr() == frames.data.data.ptr
    assert tensor.shape == (2, 240, 320, 3) and tensor.dtype == torch.uint8


def test_decode_processes_write_the_same_clips_as_threads(shared_videos, videos):
    """Worker processes decode into the parent's buffers over CUDA IPC: bit for bit what threads
    write; a stream NVDEC cannot take falls back in the worker, and the parent warns once."""
    from vclip._device import Device
    from vclip._engine import (
        ClipTarget,
        DecodeStats,
        ThreadDispatcher,
        VideoRequest,
        make_backend,
        resolve_transform,
    )

    spec = vclip.TransformSpec.imagenet(112, resize_mode="squash", layout="TCHW")
    paths = [videos["h264"], videos["hevc"], videos["long_gop"], shared_videos / "av1_video.mkv"]
    jobs = []
    for number, path in enumerate(paths):
        index = vclip.index_video(path)
        geometry = spec.geometry(index.width, index.height)
        starts = (number, index.num_frames // 2)
        jobs.append(
            VideoRequest(
                index,
                tuple(
                    ClipTarget(np.arange(start, start + 8), geometry, 2 * number + k) for k, start in enumerate(starts)
                ),
            )
        )
    outputs, fallbacks = [], []
    for processes in (0, 2):
        backend = make_backend(Device("cuda", 0), processes=processes, threads=2)
        runner = ThreadDispatcher(backend, 2 if not processes else 0)
        output = backend.empty((2 * len(jobs), 8, 3, 112, 112), "float32")
        stats = DecodeStats()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(2):  # again: indexes and buffer handles are already in the workers
                result = runner.run(jobs, resolve_transform(spec), output, stats)
                assert result.errors == [None] * len(jobs)
                for completion in result.completions:
                    completion.synchronize()
        fallbacks.append([str(w.message) for w in caught if issubclass(w.category, vclip.FallbackWarning)])
        assert stats.fallback_videos == 2 and stats.videos == 2 * len(jobs)
        outputs.append(host(output))
        runner.close()
        backend.close()
    assert np.array_equal(outputs[0], outputs[1])
    assert (
        len(fallbacks[1]) == 1 and "av1_video.mkv" in fallbacks[1][0]
    )  # once in the parent, however many workers fell back
    for job in jobs[:3]:  # the synthetic videos, which carry barcodes
        for target in job.targets:
            rgb = outputs[1][target.slot].transpose(0, 2, 3, 1) * np.array(vclip.IMAGENET_STD) + vclip.IMAGENET_MEAN
            assert [read_barcode(np.clip(frame, 0, 1)) for frame in rgb] == target.frames.tolist()
