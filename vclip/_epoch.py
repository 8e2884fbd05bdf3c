"""The clips of one epoch on one shard, and the seeds of every random choice.

Every random choice comes from ``numpy.random.SeedSequence(seed, spawn_key=(purpose, epoch, ...))``,
so it depends on the seed, the epoch and what it is about (a video, a clip), never on the order in
which threads happen to run.

Sharding: the videos are put in one order per epoch (a seeded permutation when shuffling), and
shard ``r`` of ``n`` takes every n-th video from position ``r``: shards are disjoint and cover the
dataset. Shards then hold the same number of clips: ``even_shards="pad"`` repeats clips of the
shard's own videos (fresh random draws) up to the largest shard, ``"drop"`` cuts every shard to the
smallest.
"""

from __future__ import annotations

from typing import Literal, NamedTuple, Sequence

import numpy as np

__all__ = ["ClipRef", "seeded_rng", "shard_videos", "epoch_clip_refs", "replacement_order"]

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
    even_shards: EvenShards,
) -> list[ClipRef]:
    """The clips of shard ``shard_id`` in ``epoch``, in delivery order; every shard gets as many.

    Args:
        clip_counts: Clips of each video per epoch.

    Raises:
        ValueError: ``even_shards="pad"`` and a shard has no clips to repeat.
    """
    counts = np.asarray(clip_counts, dtype=np.int64)
    order = _video_order(counts.size, seed, epoch, shuffle)
    totals = [int(counts[order[r::num_shards]].sum()) for r in range(num_shards)]
    target = max(totals) if even_shards == "pad" else min(totals)
    refs = [ClipRef(int(video), clip) for video in order[shard_id::num_shards] for clip in range(counts[video])]
    if shuffle:
        refs = [refs[i] for i in seeded_rng(seed, _CLIP_ORDER, epoch, shard_id, num_shards).permutation(len(refs))]
    if target > len(refs):
        if not refs:
            raise ValueError(
                f"shard {shard_id} of {num_shards} has no clips to pad with in epoch {epoch} "
                f"({counts.size} videos); use fewer shards or even_shards='drop'"
            )
        refs += [refs[i % len(refs)]._replace(repeat=1 + i // len(refs)) for i in range(target - len(refs))]
    return refs[:target]


def replacement_order(seed: int, epoch: int, failed: ClipRef, candidates: np.ndarray) -> np.ndarray:
    """The videos to try, in order, in place of the clip ``failed`` (a seeded permutation of ``candidates``)."""
    return seeded_rng(seed, _REPLACEMENT, epoch, *failed[:3], failed.replaces + 1).permutation(candidates)
