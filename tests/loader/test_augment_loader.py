"""The loader with training augmentations and in evaluation mode (issue 23): each batch records its
samples' draws, a resumed epoch yields exactly the same augmented batches, multi-view evaluation
covers every video once over all shards with its clips and views, and the memory plan counts the
views."""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import require_extra

import vclip
from vclip.synthetic import make_video

torch = require_extra("torch")

RECIPE = vclip.TransformSpec(
    crop=vclip.RandomResizedCrop(48, scale=(0.2, 1.0)), flip_probability=0.5,
    color_jitter=vclip.ColorJitter(0.4, 0.4, 0.4, 0.1), grayscale_probability=0.2, interpolation="bilinear",
    mean=vclip.IMAGENET_MEAN, std=vclip.IMAGENET_STD, dtype="float32", layout="CTHW",
)
RECORDED = ("crop_boxes", "scales", "flipped", "color_factors", "color_orders", "grayscale")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> list[tuple[str, int]]:
    """Five 128x96 videos of 36 frames (two of them portrait), labels 0..4."""
    folder = tmp_path_factory.mktemp("augment_loader")
    return [
        (make_video(folder / f"video_{i}.mp4", num_frames=36, width=96 if i in (1, 3) else 128,
                    height=128 if i in (1, 3) else 96, keyframe_interval=12, seed=i), i)
        for i in range(5)
    ]


@pytest.fixture(scope="module")
def garbled(tmp_path_factory) -> str:
    """A video that indexes fine and fails when its pictures are decoded."""
    path = make_video(tmp_path_factory.mktemp("garbled") / "garbled.mkv", num_frames=36, width=128, height=96,
                      keyframe_interval=12, seed=7)
    index = vclip.index_video(path)
    data = bytearray(open(path, "rb").read())
    rng = np.random.default_rng(1)
    for packet in range(index.num_packets):
        start, size = int(index.packet_pos[packet]), int(index.packet_size[packet])
        data[start + 4 : start + size] = rng.integers(0, 256, size - 4, np.uint8).tobytes()
    open(path, "wb").write(data)
    vclip.clear_index_cache()
    return path


def make_loader(videos, sampler=None, **options) -> vclip.ClipLoader:
    options = {"device": "cpu", "batch_size": 3, "num_threads": 2} | options
    return vclip.ClipLoader(videos, sampler or vclip.strided(3, 2, clips_per_video=2), **options)


def epoch(loader) -> list[dict]:
    try:
        return [
            {"data": batch.data.clone(), "video_ids": batch.video_ids.tolist(), "clip_ids": batch.clip_ids.tolist(),
             "view_ids": batch.view_ids.tolist(), "labels": batch.labels.tolist(),
             "frame_indices": batch.frame_indices.tolist(), "skipped": batch.skipped_videos,
             **{name: getattr(batch.augmentations, name).copy() for name in RECORDED}}
            for batch in loader
        ]
    finally:
        loader.close()


def same(first: list[dict], second: list[dict]) -> bool:
    return len(first) == len(second) and all(
        torch.equal(a["data"], b["data"]) and all(np.array_equal(a[k], b[k]) for k in RECORDED)
        and a["frame_indices"] == b["frame_indices"] for a, b in zip(first, second)
    )


# -- training ----------------------------------------------------------------------------------------
def test_batches_record_each_clip_draw_seeded_by_the_loader(dataset):
    batches = epoch(make_loader(dataset, transform=RECIPE, shuffle=True, seed=5))
    assert len(batches) == 4 and tuple(batches[0]["data"].shape) == (3, 3, 3, 48, 48)
    rows = sum(len(b["video_ids"]) for b in batches)
    boxes = np.concatenate([b["crop_boxes"] for b in batches])
    assert rows == 10 and boxes.shape == (10, 4) and len({tuple(box) for box in boxes}) == 10
    assert all(b["view_ids"] == [0] * len(b["video_ids"]) for b in batches)
    clips = sorted((v, c) for b in batches for v, c in zip(b["video_ids"], b["clip_ids"]))
    assert clips == [(video, clip) for video in range(5) for clip in range(2)]
    again = epoch(make_loader(dataset, transform=RECIPE, shuffle=True, seed=5, num_threads=1))
    assert same(batches, again)  # whatever the thread timing
    other = epoch(make_loader(dataset, transform=RECIPE, shuffle=True, seed=6))
    assert not np.array_equal(np.concatenate([b["color_factors"] for b in other]),
                              np.concatenate([b["color_factors"] for b in batches]))


@pytest.mark.parametrize("stop", [1, 3])
def test_a_resumed_epoch_yields_exactly_the_same_augmented_batches(dataset, stop):
    whole = make_loader(dataset, transform=RECIPE, shuffle=True, seed=2)
    whole.set_epoch(1)
    expected = epoch(whole)
    first = make_loader(dataset, transform=RECIPE, shuffle=True, seed=2)
    first.set_epoch(1)
    iterator = iter(first)
    for _ in range(stop):
        next(iterator)
    state = json.loads(json.dumps(first.state_dict()))
    iterator.close()
    first.close()
    fresh = make_loader(dataset, transform=RECIPE, shuffle=True, seed=2, num_threads=1)
    fresh.load_state_dict(state)
    assert same(epoch(fresh), expected[stop:])
    plain = make_loader(dataset, transform=vclip.TransformSpec(resize=48, crop=48), shuffle=True, seed=2)
    try:
        with pytest.raises(vclip.ArgumentError, match="with other transform than this one"):  # part of the state
            plain.load_state_dict(state)
    finally:
        plain.close()


def test_bfloat16_batches(dataset):
    spec = vclip.TransformSpec.imagenet(32, train=True, dtype="bfloat16")
    (batch, *_) = epoch(make_loader(dataset, transform=spec, seed=1))
    reference, *_ = epoch(make_loader(dataset, transform=vclip.TransformSpec.imagenet(32, train=True), seed=1))
    assert batch["data"].dtype == torch.bfloat16 and batch["data"].shape == reference["data"].shape
    torch.testing.assert_close(batch["data"].float(), reference["data"], rtol=2**-8, atol=1e-6)


# -- evaluation ---------------------------------------------------------------------------------------------
EVALUATION = vclip.TransformSpec(resize=32, crop=32, spatial_views=3, dtype="float32")
TEN_CLIPS = vclip.strided(3, 2, starts="even", clips_per_video=4)


@pytest.mark.parametrize("num_shards", [1, 2, 3])
def test_evaluation_covers_every_video_once_with_its_clips_and_views(dataset, num_shards):
    samples, videos_of_shard = [], []
    for shard_id in range(num_shards):
        batches = epoch(make_loader(dataset, TEN_CLIPS, transform=EVALUATION, evaluation=True, batch_size=3,
                                    shard_id=shard_id, num_shards=num_shards))
        for batch in batches:
            assert batch["view_ids"] == [0, 1, 2] * (len(batch["video_ids"]) // 3)
            assert tuple(batch["data"].shape[1:]) == (3, 32, 32, 3) and len(batch["video_ids"]) <= 9
            for row in range(0, len(batch["video_ids"]), 3):  # a clip's views: one clip, three crops
                assert len({(batch["video_ids"][row + k], batch["clip_ids"][row + k]) for k in range(3)}) == 1
                assert batch["frame_indices"][row] == batch["frame_indices"][row + 2]
                assert len({tuple(batch["crop_boxes"][row + k]) for k in range(3)}) == 3
            samples += list(zip(batch["video_ids"], batch["clip_ids"], batch["view_ids"], batch["labels"]))
        videos_of_shard.append({video for batch in batches for video in batch["video_ids"]})
    assert sorted(samples) == [(v, c, w, v) for v in range(5) for c in range(4) for w in range(3)]  # each once
    assert sum(len(videos) for videos in videos_of_shard) == 5  # every video on exactly one shard


def test_evaluation_clips_are_the_decoders_even_clips(dataset):
    path = dataset[1][0]  # portrait: the views go top to bottom
    batches = epoch(make_loader(dataset[1:2], TEN_CLIPS, transform=EVALUATION, evaluation=True, batch_size=4))
    clips = vclip.VideoDecoder(path).get_clips(TEN_CLIPS, transform=EVALUATION)
    data = torch.cat([b["data"] for b in batches]).numpy()
    assert np.array_equal(data, clips.data) and clips.view_ids.tolist() == [0, 1, 2] * 4
    assert [r for b in batches for r in b["frame_indices"]] == clips.frame_indices.tolist()
    assert {box[1] for box in clips.augmentations.crop_boxes[:3].tolist()} != {0.0}  # moved along y


def test_evaluation_leaves_unusable_videos_out_instead_of_replacing_them(dataset, garbled, caplog):
    videos = dataset[:2] + [(garbled, 9), ("/nonexistent/missing.mp4", 8)] + dataset[2:3]
    batches = epoch(make_loader(videos, TEN_CLIPS, transform=EVALUATION, evaluation=True, batch_size=2))
    seen = [(v, c, w) for b in batches for v, c, w in zip(b["video_ids"], b["clip_ids"], b["view_ids"])]
    assert sorted(seen) == [(v, c, w) for v in (0, 1, 4) for c in range(4) for w in range(3)]
    assert any(garbled in b["skipped"] for b in batches)  # found mid-epoch: its clips left their batch
    assert sum(len(b["video_ids"]) for b in batches) == 36 and "left out (evaluation)" in caplog.text
    for name, value in (("shuffle", True), ("drop_last", True)):
        with pytest.raises(vclip.ArgumentError, match=rf"{name} \(True\) must be False with evaluation=True"):
            make_loader(dataset, TEN_CLIPS, evaluation=True, **{name: value})


def test_the_memory_plan_counts_the_views(dataset):
    loader = make_loader(dataset, TEN_CLIPS, transform=EVALUATION, evaluation=True, batch_size=4)
    try:
        estimate = loader.memory_estimate
        assert estimate.views == 3 and estimate.batch.batch_size == 12
        assert estimate.batch.bytes == 12 * 3 * 32 * 32 * 3 * 4
        budget = estimate.total
        assert estimate.largest_batch_size(budget) == 4  # in clips: 12 samples fit
    finally:
        loader.close()
    single = vclip.plan_loader_memory(width=32, height=32, batch_size=4, sequence_length=3, dtype="float32",
                                      device="cpu")
    assert single.batch.bytes * 3 == estimate.batch.bytes and single.views == 1
    with pytest.raises(vclip.ArgumentError, match=r"views \(0\) must be an integer >= 1"):
        vclip.plan_loader_memory(width=32, height=32, batch_size=4, sequence_length=3, views=0)
