"""The clips of one epoch on one shard, and the seeds of every random choice.

Every random choice comes from ``numpy.random.SeedSequence(seed, spawn_key=(purpose, epoch, ...))``,
so it depends on the seed, the epoch and what it is about (a video, a clip), never on the order in
which threads happen to run.

Sharding: the videos are put in one order per epoch (a seeded permutation when shuffling), and
shard ``r`` of ``n`` takes every n-th video from position ``r``: shards are disjoint and cover the
dataset. Shards then hold the same number of clips: ``even_shards="pad"`` repeats clips of the
shard's own videos (fresh random draws) up to the largest shard, ``"drop"`` cuts every shard to the
smallest; for evaluation (``even_shards=None``) each shard keeps exactly its own clips, so every
clip of the dataset is in exactly one shard, once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, NamedTuple

import numpy as np

from ..errors import ArgumentError, check_integer, fail

__all__ = ["ClipRef", "EpochPlan", "seeded_rng", "shard_videos", "epoch_clip_refs", "replacement_order",
           "process_shard"]

EvenShards = Literal["pad", "drop"]

# Purposes of the seeds, so that no two kinds of choice share a random stream.
_VIDEO_ORDER, _CLIP_ORDER, _CLIP, _REPLACEMENT = range(4)


def seeded_rng(seed: int, *key: int) -> np.random.Generator:
    """A generator that depends only on ``seed`` and ``key``."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=tuple(int(k) for k in key)))


class ClipRef(NamedTuple):
    """One clip of an epoch: clip ``clip`` of video ``video``.

    ``repeat`` counts padding repeats (0 for the first pass); ``replaces`` is the video this clip
    stands in for after that video failed (-1 for none).
    """

    video: int
    clip: int
    repeat: int = 0
    replaces: int = -1

    def rng(self, seed: int, epoch: int) -> np.random.Generator:
        """The generator of this clip's start, jitter, crop and flip."""
        return seeded_rng(seed, _CLIP, epoch, self.video, self.clip, self.repeat, self.replaces + 1)


def _video_order(num_videos: int, seed: int, epoch: int, shuffle: bool) -> np.ndarray:
    return seeded_rng(seed, _VIDEO_ORDER, epoch).permutation(num_videos) if shuffle else np.arange(num_videos)


def shard_videos(
    num_videos: int, *, seed: int, epoch: int, shuffle: bool, shard_id: int, num_shards: int
) -> np.ndarray:
    """Video ids of shard ``shard_id`` of ``num_shards`` in ``epoch`` (int64)."""
    return _video_order(num_videos, seed, epoch, shuffle)[shard_id::num_shards]


def epoch_clip_refs(
    clip_counts: Sequence[int] | np.ndarray,
    *,
    seed: int,
    epoch: int,
    shuffle: bool,
    shard_id: int,
    num_shards: int,
    even_shards: EvenShards | None,
) -> list[ClipRef]:
    """The clips of shard ``shard_id`` in ``epoch``, in delivery order; every shard gets as many
    (with ``even_shards=None``: its own, whatever the other shards hold).

    Args:
        clip_counts: Clips of each video per epoch.

    Raises:
        ArgumentError: (a ValueError) ``even_shards="pad"`` and a shard has no clips to repeat.
    """
    counts = np.asarray(clip_counts, dtype=np.int64)
    order = _video_order(counts.size, seed, epoch, shuffle)
    refs = [ClipRef(int(video), clip) for video in order[shard_id::num_shards] for clip in range(counts[video])]
    totals = [int(counts[order[r::num_shards]].sum()) for r in range(num_shards)]
    target = len(refs) if even_shards is None else max(totals) if even_shards == "pad" else min(totals)
    if shuffle:
        refs = [refs[i] for i in seeded_rng(seed, _CLIP_ORDER, epoch, shard_id, num_shards).permutation(len(refs))]
    if target > len(refs):
        if not refs:
            raise ArgumentError(
                f"shard {shard_id} of {num_shards} has no clips to pad with in epoch {epoch} "
                f"({counts.size} videos); use fewer shards or even_shards='drop'"
            )
        refs += [refs[i % len(refs)]._replace(repeat=1 + i // len(refs)) for i in range(target - len(refs))]
    return refs[:target]


def replacement_order(seed: int, epoch: int, failed: ClipRef, candidates: np.ndarray) -> np.ndarray:
    """The videos to try, in order, in place of the clip ``failed`` (a seeded permutation of ``candidates``)."""
    return seeded_rng(seed, _REPLACEMENT, epoch, *failed[:3], failed.replaces + 1).permutation(candidates)


class EpochPlan:
    """The batches of every epoch on every shard, from the clips of each video per epoch.

    Args:
        clip_counts: Clips of each video per epoch.
        batch_size, seed, shuffle, drop_last, even_shards: As the loader's arguments (``even_shards``
            None for evaluation: no shard is evened out).
    """

    def __init__(self, clip_counts: Sequence[int], *, batch_size: int, seed: int, shuffle: bool, drop_last: bool,
                 even_shards: EvenShards | None):
        self.clip_counts = np.asarray(clip_counts, dtype=np.int64)
        self.batch_size = batch_size
        self.seed = seed
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.even_shards = even_shards

    def batches(self, epoch: int, shard_id: int, num_shards: int) -> list[list[ClipRef]]:
        """The clips of each batch of shard ``shard_id`` in ``epoch``, in delivery order."""
        refs = epoch_clip_refs(self.clip_counts, seed=self.seed, epoch=epoch, shuffle=self.shuffle,
                               shard_id=shard_id, num_shards=num_shards, even_shards=self.even_shards)
        batches = [refs[start:start + self.batch_size] for start in range(0, len(refs), self.batch_size)]
        if self.drop_last and batches and len(batches[-1]) < self.batch_size:
            batches.pop()
        return batches

    def shard(self, epoch: int, shard_id: int, num_shards: int) -> np.ndarray:
        """The videos of shard ``shard_id`` in ``epoch`` (where replacements for failed videos come from)."""
        return shard_videos(self.clip_counts.size, seed=self.seed, epoch=epoch, shuffle=self.shuffle,
                            shard_id=shard_id, num_shards=num_shards)


def process_shard(shard_id: int | None, num_shards: int | None, num_videos: int) -> tuple[int, int]:
    """This process's ``(shard_id, num_shards)``: as given, else rank and world size of an
    initialised ``torch.distributed``, else ``(0, 1)``.

    Raises:
        ArgumentError: Only one of the two given, or values out of range.
    """
    if shard_id is None and num_shards is None:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            shard_id, num_shards = dist.get_rank(), dist.get_world_size()
        else:
            return 0, 1
    elif shard_id is None or num_shards is None:
        raise ArgumentError(f"shard_id ({shard_id!r}) and num_shards ({num_shards!r}) must be given together")
    num_shards = check_integer("num_shards", num_shards, minimum=1)
    if num_shards > num_videos:
        raise fail("num_shards", num_shards, f"<= the number of videos ({num_videos})")
    shard_id = check_integer("shard_id", shard_id, minimum=0)
    if shard_id >= num_shards:
        raise fail("shard_id", shard_id, f"< num_shards ({num_shards})")
    return shard_id, num_shards
