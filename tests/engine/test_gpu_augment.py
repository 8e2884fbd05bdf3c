"""Training augmentations on the GPU (issue 23): the same seed gives the same draws on CPU and GPU
and the same pixels within the kernel's tolerance; multi-view evaluation decodes once on NVDEC; a
resumed GPU epoch yields bit-identical augmented batches. Skipped without a GPU.

Tolerances (kernel_cases.assert_matches_twin, the GPU kernel against the CPU path's NumPy twin on
the same decoded YUV): uint8 within 1 (under 1% of values differing), float32 within 1e-3
relative or absolute, float16 within 2 ulp, bfloat16 within 1 ulp. The draws are equal exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import host
from kernel_cases import assert_matches_twin

import vclip
from vclip.transforms import ColorJitter, MultiScaleCrop, RandomResizedCrop, RandomShortSideScale, TransformSpec

pytestmark = pytest.mark.gpu

JITTER = ColorJitter(0.4, 0.4, 0.4, 0.1)
NORMALIZED = dict(mean=vclip.IMAGENET_MEAN, std=vclip.IMAGENET_STD)
RECORDED = ("crop_boxes", "scales", "flipped", "color_factors", "color_orders", "grayscale")
SPECS = {
    "videomae": TransformSpec(crop=RandomResizedCrop(96, scale=(0.08, 1.0)), flip_probability=0.5, color_jitter=JITTER,
                              grayscale_probability=0.2, interpolation="bilinear", dtype="float32", layout="CTHW",
                              **NORMALIZED),
    "slowfast": TransformSpec(resize=RandomShortSideScale(128, 160), crop=112, crop_mode="random",
                              flip_probability=0.5, dtype="float16", layout="TCHW", **NORMALIZED),
    "tsn_uint8_channels_last": TransformSpec(resize=128, crop=MultiScaleCrop(112), flip_probability=0.5,
                                             color_jitter=JITTER),
    "three_views_bfloat16": TransformSpec(resize=112, crop=112, spatial_views=3, dtype="bfloat16", **NORMALIZED),
    "per_frame": TransformSpec(crop=RandomResizedCrop(64), color_jitter=JITTER, per_frame=True, dtype="float32"),
}


def same_draws(first, second) -> bool:
    return all(np.array_equal(getattr(first, name), getattr(second, name)) for name in RECORDED)


def _check_gpu_against_cpu(path, spec):
    sampler = vclip.strided(4, 3, starts="even", clips_per_video=3)
    gpu = vclip.VideoDecoder(path, device="cuda").get_clips(sampler, transform=spec, seed=6)
    cpu = vclip.VideoDecoder(path, device="cpu").get_clips(sampler, transform=spec, seed=6)
    assert not gpu.fell_back_to_cpu and same_draws(gpu.augmentations, cpu.augmentations)
    assert np.array_equal(gpu.frame_indices, cpu.frame_indices) and np.array_equal(gpu.view_ids, cpu.view_ids)
    assert_matches_twin(host(gpu.data), cpu.data, spec.dtype)


@pytest.mark.parametrize("name", sorted(SPECS))
@pytest.mark.parametrize("video", ["h264", "hevc", "long_gop"])
def test_gpu_clips_have_the_cpu_draws_and_pixels(videos, name, video):
    _check_gpu_against_cpu(videos[video], SPECS[name])


@pytest.mark.parametrize("name", ["videomae", "three_views_bfloat16"])
def test_gpu_clips_of_a_10_bit_video_keep_its_precision_like_the_cpu(shared_videos, name):
    """P016 surfaces through the crops and colour adjustments, against the twin on the 10-bit planes."""
    _check_gpu_against_cpu(shared_videos / "h265_10bits.mp4", SPECS[name])


def test_gpu_views_decode_each_clip_once(videos):
    sampler = vclip.strided(8, 2, starts="even", clips_per_video=4)
    decoder = vclip.VideoDecoder(videos["h264"], device="cuda")
    decoder.get_clips(sampler, transform=TransformSpec(resize=112, crop=112))
    single = decoder.stats.packets_sent
    views = decoder.get_clips(sampler, transform=TransformSpec(resize=112, crop=112, spatial_views=3))
    assert decoder.stats.packets_sent == 2 * single and host(views.data).shape[0] == 12
    assert decoder.stats.frames_delivered == 4 * 8 + 12 * 8


def _gpu_loader(videos, **options):
    paths = [(videos[name], number) for number, name in enumerate(["h264", "hevc", "long_gop"])]
    options = dict(transform=SPECS["videomae"], batch_size=3, shuffle=True, seed=4, device="cuda") | options
    return vclip.ClipLoader(paths, vclip.strided(4, 2, clips_per_video=2), **options)


def _epoch(loader) -> list:
    try:
        return [(batch.data.clone(), batch.augmentations, batch.frame_indices.clone()) for batch in loader]
    finally:
        loader.close()


def test_gpu_loader_matches_the_cpu_loader_and_resumes_bit_for_bit(videos):
    import torch

    gpu = _epoch(_gpu_loader(videos))
    cpu = _epoch(_gpu_loader(videos, device="cpu"))
    assert len(gpu) == len(cpu) == 2
    for (gpu_data, gpu_draws, gpu_frames), (cpu_data, cpu_draws, cpu_frames) in zip(gpu, cpu):
        assert same_draws(gpu_draws, cpu_draws) and torch.equal(gpu_frames, cpu_frames)
        assert_matches_twin(gpu_data.cpu().numpy(), cpu_data.numpy(), "float32")
    first = _gpu_loader(videos)
    iterator = iter(first)
    next(iterator)
    state = first.state_dict()
    iterator.close()
    first.close()
    fresh = _gpu_loader(videos, num_threads=2)
    fresh.load_state_dict(state)
    resumed = _epoch(fresh)
    assert len(resumed) == 1 and same_draws(resumed[0][1], gpu[1][1])
    assert torch.equal(resumed[0][0], gpu[1][0])  # the contrast sums are fixed point: no float-order noise


def test_gpu_evaluation_batches_say_video_clip_and_view(videos):
    loader = _gpu_loader(videos, transform=TransformSpec(resize=112, crop=112, spatial_views=3, dtype="bfloat16",
                                                         **NORMALIZED),
                         shuffle=False, evaluation=True, batch_size=2)
    try:
        batches = list(loader)
        seen = sorted((v, c, w) for b in batches for v, c, w in zip(b.video_ids.tolist(), b.clip_ids.tolist(),
                                                                    b.view_ids.tolist()))
        assert seen == [(v, c, w) for v in range(3) for c in range(2) for w in range(3)]
        assert batches[0].data.dtype.is_floating_point and str(batches[0].data.dtype) == "torch.bfloat16"
        assert loader.memory_estimate.views == 3
    finally:
        loader.close()
