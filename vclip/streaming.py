"""ClipStream: batches of clips from WebDataset shards read as streams, for datasets of very many
small videos, where a request per clip (random access, :class:`~vclip.ClipLoader`) costs more
than the bytes it fetches.

Each epoch, every rank reads its own shards (a seeded permutation of all shards, split across
ranks and DataLoader workers) from start to end, passes the samples through a shuffle buffer of
``shuffle_buffer`` videos (:mod:`vclip._datasets.shard_stream`), and draws each video's clips with the
sampler as it leaves the buffer, seeded by ``(seed, epoch, shard file name, key)``; decode threads work on
several videos at once, and batches keep the buffer's order whatever the thread timing. The same
seed and epoch give the same batches.

What it trades (see also :mod:`vclip.webdataset`): no index is built ahead (nothing is read at
construction but the shard list), each shard is one sequential read, but the shuffle is bounded by
the buffer (neighbouring videos of a shard stay near each other), every byte of every video is
transferred, an epoch's length is known only at its end (and can differ between ranks by up to a
shard's worth of videos), and a run resumes at an epoch's start, not mid-epoch.
"""

from __future__ import annotations

import logging
import os
import posixpath
import random
import zlib
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from ._bytes.shards import DEFAULT_VIDEO_EXTENSIONS, LabelRule, shard_names
from ._datasets.shard_stream import StreamedSample, epoch_shards, read_samples, shuffled
from ._device import Device, resolve_device
from ._loader.epoch import process_shard
from ._machine import usable_cores
from .decoder import Frames, VideoDecoder
from .errors import ArgumentError, VideoError, check_choice, check_integer, fail
from .sampling import ClipSampler, draw_seed
from .transforms import TransformSpec

__all__ = ["ClipStream", "StreamBatch"]

logger = logging.getLogger("vclip")


@dataclass(frozen=True, eq=False)
class StreamBatch:
    """One batch of a :class:`ClipStream`.

    Attributes:
        data: The clips, ``[B, ...one clip...]`` as :class:`~vclip.ClipBatch` lays them out, on the
            stream's device (a tensor of its own: kept as long as wanted).
        labels: int64 ``[B]`` (-1 where a sample has no label), on the stream's device.
        keys: Each clip's video as ``"SHARD#KEY"``.
        frame_indices: int64 ``[B, T]`` (CPU). pts_seconds: float64 ``[B, T]`` (CPU).
        epoch: The epoch. batch_number: Position of the batch in the epoch on this rank, from 0.
    """

    data: torch.Tensor
    labels: torch.Tensor
    keys: tuple[str, ...]
    frame_indices: torch.Tensor
    pts_seconds: torch.Tensor
    epoch: int
    batch_number: int

    def __len__(self) -> int:
        return int(self.data.shape[0])

    def __repr__(self) -> str:
        dtype = str(self.data.dtype).removeprefix("torch.")
        return (f"StreamBatch(data=[{', '.join(map(str, self.data.shape))}] {dtype} {self.data.device}, "
                f"epoch={self.epoch}, batch_number={self.batch_number})")


class ClipStream(IterableDataset):
    """Batches of clips from WebDataset shards read as streams (see the module docstring).

    Args:
        shards: As :class:`~vclip.webdataset.WebDatasetSource` takes them (paths, URLs, brace
            patterns, a list, a wids description).
        sampler: Which frames make a clip, and how many clips a video gives (its ``clips_per_video``
            for random and even starts).
        transform: As :class:`~vclip.ClipLoader`'s (None: RGB uint8 at the source size; videos of
            different sizes then cannot share a batch: pass a resize).
        batch_size: Clips per batch (default 8).
        shuffle_buffer: Videos held to shuffle (default 64; 1 reads in shard order).
        shuffle: Shuffle the shard order each epoch (default True; the buffer shuffles anyway).
        seed: Seed (>= 0) of the shard order, the buffer and every clip's draws; None (default):
            the sampler's own ``seed``, else 0 (both given and different: refused).
        drop_last: Leave out a last batch smaller than ``batch_size``.
        device: ``"auto"`` (default), ``"cpu"``, ``"cuda"``, ``"cuda:N"``.
        num_threads: Videos decoded at once (default: ``min(8, CPU cores)``).
        video_extensions: Extensions of video members, in order of preference.
        label: Where a sample's label is (as :class:`~vclip.webdataset.WebDatasetSource`'s; ``"auto"``:
            the ``.cls`` member when a sample has one, else -1). Class names must be in
            ``class_names``.
        class_names: Names that string labels stand for (label ``i`` is ``class_names[i]``; default:
            the wids description's ``class_names``, as ``vclip shard`` writes it).
        shard_id, num_shards: This process's part (default: ``torch.distributed`` rank and world
            size when initialised, else all); DataLoader workers split it further. Every part needs
            a shard at least.
        on_error: ``"skip"`` (default): a sample whose video cannot be decoded or whose label cannot
            be read is left out, with a warning on the ``"vclip"`` logger naming it; ``"raise"``:
            its VideoError (or ArgumentError, for a label) is raised. A shard that cannot be read
            raises either way; one cut off gives its whole samples, with a warning.

    Raises:
        ArgumentError: Bad options; fewer shards than parts.
    """

    def __init__(
        self,
        shards: str | os.PathLike | Sequence[str | os.PathLike],
        sampler: ClipSampler,
        *,
        transform: TransformSpec | None = None,
        batch_size: int = 8,
        shuffle_buffer: int = 64,
        shuffle: bool = True,
        seed: int | None = None,
        drop_last: bool = False,
        device: Any = "auto",
        num_threads: int = 0,
        video_extensions: Sequence[str] = DEFAULT_VIDEO_EXTENSIONS,
        label: str | None = "auto",
        class_names: Sequence[str] | None = None,
        shard_id: int | None = None,
        num_shards: int | None = None,
        on_error: str = "skip",
    ):
        super().__init__()
        if not isinstance(sampler, ClipSampler):
            raise fail("sampler", sampler, "a ClipSampler, e.g. vclip.strided(16, 2)")
        if transform is not None and not isinstance(transform, TransformSpec):
            raise fail("transform", transform, "a TransformSpec or None")
        self.sampler, self.transform = sampler, transform
        self.batch_size = check_integer("batch_size", batch_size, minimum=1)
        self.shuffle_buffer = check_integer("shuffle_buffer", shuffle_buffer, minimum=1)
        self.shuffle, self.drop_last = bool(shuffle), bool(drop_last)
        self.seed = draw_seed(seed, sampler)
        self.num_threads = check_integer("num_threads", num_threads, minimum=0) or min(8, usable_cores())
        check_choice("on_error", on_error, ("skip", "raise"))
        self.on_error = on_error
        self.video_extensions = tuple(extension.lower().lstrip(".") for extension in video_extensions)
        self.label_rule = None if label is None else LabelRule("cls") if label == "auto" else LabelRule.parse(label)
        self._label_required = label is not None and label != "auto"
        names, description = shard_names(shards)
        if class_names is None and isinstance(description, dict) and isinstance(description.get("class_names"), list):
            class_names = description["class_names"]
        self.class_names = tuple(class_names) if class_names is not None else None
        self.shards: tuple[str, ...] = tuple(names)
        self.shard_id, self.num_shards = process_shard(shard_id, num_shards, len(self.shards))
        self._device: Device = resolve_device(device).device
        self.epoch = 0

    @property
    def device(self) -> str:
        """``"cpu"`` or ``"cuda:N"``: where clips are decoded and delivered."""
        return str(self._device)

    def set_epoch(self, epoch: int) -> None:
        """Read the next pass's shards and draw its clips for ``epoch`` (>= 0)."""
        self.epoch = check_integer("epoch", epoch, minimum=0)

    def __repr__(self) -> str:
        return (f"ClipStream({len(self.shards)} shards, batch_size={self.batch_size}, "
                f"shuffle_buffer={self.shuffle_buffer}, device={self.device!r}, "
                f"part={self.shard_id}/{self.num_shards}, epoch={self.epoch})")

    def _part(self) -> tuple[int, int]:
        worker = get_worker_info()
        if worker is None:
            return self.shard_id, self.num_shards
        return self.shard_id * worker.num_workers + worker.id, self.num_shards * worker.num_workers

    def shards_of_epoch(self, epoch: int | None = None) -> list[str]:
        """The shards this process reads in ``epoch`` (default: the current one), in order."""
        part, parts = self._part()
        if parts > len(self.shards):
            raise ArgumentError(f"{parts} parts (ranks x DataLoader workers) read {len(self.shards)} shards: "
                                "every part needs a shard at least; write more, smaller shards")
        return epoch_shards(self.shards, seed=self.seed, epoch=self.epoch if epoch is None else epoch,
                            shard_id=part, num_shards=parts, shuffle=self.shuffle)

    def __iter__(self) -> Iterator[StreamBatch]:
        epoch = self.epoch
        part, _ = self._part()
        samples = (sample for shard in self.shards_of_epoch(epoch)
                   for sample in read_samples(shard, self.video_extensions))
        buffered = shuffled(samples, self.shuffle_buffer, random.Random(f"vclip-buffer/{self.seed}/{epoch}/{part}"))
        pending: list[tuple[str, int, Frames]] = []
        number = 0
        with ThreadPoolExecutor(self.num_threads, thread_name_prefix="vclip-stream") as pool:
            ahead: deque[Future] = deque()
            for sample in buffered:
                ahead.append(pool.submit(self._clips, sample, epoch))
                while len(ahead) > 2 * self.num_threads:
                    pending += self._done(ahead.popleft())
                    while sum(len(frames.frame_indices) for _, _, frames in pending) >= self.batch_size:
                        yield self._batch(pending, epoch, number)
                        number += 1
            while ahead:
                pending += self._done(ahead.popleft())
                while sum(len(frames.frame_indices) for _, _, frames in pending) >= self.batch_size:
                    yield self._batch(pending, epoch, number)
                    number += 1
        if pending and not self.drop_last:
            yield self._batch(pending, epoch, number)

    def _clips(self, sample: StreamedSample, epoch: int) -> tuple[str, int, Frames] | None:
        """One video's clips (decode thread); None for a video that cannot be used under ``"skip"``."""
        where = f"{sample.shard}#{sample.key}"
        # Seeded by the shard's file name, not where it lies: a copy elsewhere gives the same clips.
        named = f"{self.seed}/{epoch}/{posixpath.basename(sample.shard)}#{sample.key}"
        seed = zlib.crc32(named.encode("utf-8", "surrogateescape"))
        try:
            label = self._label(sample, where)
            decoder = VideoDecoder(sample.video, device=self._device)
            frames = decoder.get_clips(self.sampler, transform=self.transform, seed=seed)
        except (VideoError, ValueError) as error:
            if self.on_error == "raise":
                raise
            logger.warning("ClipStream left out %s: %s", where, error)
            return None
        return where, label, frames

    def _label(self, sample: StreamedSample, where: str) -> int:
        """The sample's label (-1 without one).

        Raises:
            ArgumentError: A label member that is missing (when asked for), malformed, or a class
                name not in ``class_names`` (naming the sample).
        """
        if self.label_rule is None:
            return -1
        payload = sample.members.get(self.label_rule.extension)
        if payload is None:
            if self._label_required:
                raise ArgumentError(f"{where} has no .{self.label_rule.extension} label member")
            return -1
        try:
            value = self.label_rule.value(payload, where)
        except ValueError as error:
            raise ArgumentError(str(error)) from None
        if isinstance(value, int):
            return value
        if self.class_names is None or value not in self.class_names:
            raise ArgumentError(f"{where}: label {value[:60]!r} is a class name; pass class_names= that holds it")
        return self.class_names.index(value)

    @staticmethod
    def _done(future: Future) -> list[tuple[str, int, Frames]]:
        result = future.result()
        return [] if result is None or not len(result[2].frame_indices) else [result]

    def _batch(self, pending: list[tuple[str, int, Frames]], epoch: int, number: int) -> StreamBatch:
        """The next batch from the clips in ``pending`` (taken out of it)."""
        taken: list[tuple[str, int, Frames, slice]] = []
        count = 0
        while pending and count < self.batch_size:
            where, label, frames = pending[0]
            room = self.batch_size - count
            clips = len(frames.frame_indices)
            taken.append((where, label, frames, slice(0, min(room, clips))))
            if clips > room:
                pending[0] = (where, label, _rest(frames, room))
            else:
                pending.pop(0)
            count += min(room, clips)
        data = torch.cat([frames.torch()[part] for _, _, frames, part in taken])
        keys = tuple(where for where, _, frames, part in taken for _ in range(part.stop))
        labels = torch.tensor([label for _, label, _, part in taken for _ in range(part.stop)], dtype=torch.int64)
        indices = np.concatenate([frames.frame_indices[part] for _, _, frames, part in taken])
        pts = np.concatenate([frames.pts_seconds[part] for _, _, frames, part in taken])
        return StreamBatch(data=data, labels=labels.to(data.device), keys=keys, frame_indices=torch.from_numpy(indices),
                           pts_seconds=torch.from_numpy(pts), epoch=epoch, batch_number=number)


def _rest(frames: Frames, start: int) -> Frames:
    """The clips of ``frames`` from ``start`` on."""
    return Frames(frames.data[start:], frames.frame_indices[start:], frames.pts_seconds[start:], frames.device,
                  frames.fell_back_to_cpu, frames.padded[start:])
