"""Streaming WebDataset shards: which shards a rank reads in an epoch, each shard read once from
start to end (one sequential stream, never a request per member), and a shuffle buffer over the
samples read.

The shard order of an epoch is one seeded permutation of all shards, the same on every rank;
rank ``r`` of ``n`` reads every ``n``-th shard of it from position ``r``. The buffer holds up to
``buffer_size`` samples: once full, each new sample takes the place of one drawn at random (seeded),
which is handed on; at the end of the stream the rest come out in random order. A sample is
therefore at most ``buffer_size`` places from where its shard put it, relative to the samples
around it: the shuffle is as good as the buffer is large.
"""

from __future__ import annotations

import io
import logging
import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from .._bytes.shards import split_key
from .._bytes.sources import open_binary
from .._bytes.tar import TarStream
from ..errors import VideoError, video_error_from_os_error

__all__ = ["StreamedSample", "epoch_shards", "read_samples", "shuffled"]

logger = logging.getLogger("vclip")

T = TypeVar("T")
_READ_BUFFER = 1 << 20


@dataclass(frozen=True)
class StreamedSample:
    """One sample read from a stream: every member's data by extension, one of them the video."""

    shard: str
    key: str
    video_extension: str
    members: dict[str, bytes]

    @property
    def video(self) -> bytes:
        return self.members[self.video_extension]


def epoch_shards(shards: Sequence[str], *, seed: int, epoch: int, shard_id: int, num_shards: int,
                 shuffle: bool = True) -> list[str]:
    """The shards rank ``shard_id`` of ``num_shards`` reads in ``epoch``, in order."""
    order = list(shards)
    if shuffle:
        random.Random(f"vclip-stream/{seed}/{epoch}").shuffle(order)
    return order[shard_id::num_shards]


def read_samples(shard: str, video_extensions: Sequence[str]) -> Iterator[StreamedSample]:
    """The samples of ``shard`` with a video member, read in one sequential pass (members are
    grouped by key as WebDataset groups them; samples without a video member are left out).

    A shard cut off (or damaged after its first member) gives its samples before the damage, with a
    warning on the ``"vclip"`` logger; a sample whose member is cut is left out.

    Raises:
        VideoError: The shard cannot be read, is compressed, damaged from its start or not a tar archive.
    """
    key: str | None = None
    members: dict[str, bytes] = {}
    try:
        with open_binary(shard) as raw:
            stream = raw if not isinstance(raw, io.RawIOBase) else io.BufferedReader(raw, _READ_BUFFER)
            walk = TarStream(stream, shard)
            for member, data in walk:
                split = split_key(member.name)
                if split is None:
                    continue
                if split[0] != key:
                    if key is not None:
                        yield from _sample(shard, key, members, video_extensions)
                    key, members = split[0], {}
                members.setdefault(split[1].lower(), data)
    except OSError as error:
        if isinstance(error, VideoError):
            raise
        raise video_error_from_os_error(shard, error) from None
    cut = split_key(walk.cut_member) if walk.cut_member is not None else None
    left_out = cut[0] if cut is not None else None
    if key is not None and key != left_out:
        yield from _sample(shard, key, members, video_extensions)
    if walk.problem is not None:
        logger.warning("vclip: shard %s is incomplete: %s; the samples before that were read%s", shard, walk.problem,
                       f" (sample {left_out!r} is left out)" if left_out else "")


def _sample(shard: str, key: str, members: dict[str, bytes], video_extensions: Sequence[str]) -> Iterator[
        StreamedSample]:
    chosen = next((extension for extension in video_extensions if extension in members), None)
    if chosen is not None:
        yield StreamedSample(shard, key, chosen, members)


def shuffled(items: Iterable[T], buffer_size: int, rng: random.Random) -> Iterator[T]:
    """``items`` through a shuffle buffer of ``buffer_size`` (1: in order)."""
    buffer: list[T] = []
    for item in items:
        if len(buffer) < buffer_size:
            buffer.append(item)
            continue
        place = rng.randrange(buffer_size)
        yield buffer[place]
        buffer[place] = item
    rng.shuffle(buffer)
    yield from buffer
