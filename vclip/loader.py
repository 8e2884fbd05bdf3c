"""ClipLoader: batches of labelled clips for training loops, decoded ahead of the loop.

For each batch the loader draws its clips (every random choice seeded per clip), groups them into
one decode job per video, and has the decode workers (NVDEC on the GPU, PyAV on the CPU) write
them straight into a pooled output buffer, which torch sees through DLPack without a copy.
Several batches are built at once on background threads while the training loop works.

The parts, one job each: :mod:`vclip._loader.source` (the videos and the scan at construction),
:mod:`vclip._loader.clips` (drawing one video's clips), :mod:`vclip._loader.epoch` (the epoch plan:
shards and batches), :mod:`vclip._loader.batches` (building one batch, replacing bad videos),
:mod:`vclip._loader.runtime` and :mod:`vclip._loader.handoff` (threads, buffers, hand-over),
:mod:`vclip._loader.stats` (what it measured) and :mod:`vclip._loader.state` (resuming).
"""

from __future__ import annotations

import copy
import logging
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from ._audio.decode import span_samples
from ._bytes.remote import remote_reads
from ._datasets.inputs import LabeledVideo, VideoSource
from ._device import Device, resolve_device
from ._loader.audio import LoaderAudio
from ._loader.batches import SCAN, BadVideos, BatchBuilder, OnError
from ._loader.clip_batch import ClipBatch
from ._loader.clips import ClipDrawer
from ._loader.epoch import EpochPlan, EvenShards, process_shard
from ._loader.runtime import LoaderRuntime
from ._loader.settings import keep_within_budget, loader_backend, loader_memory_plan, resolve_counts, runtime_settings
from ._loader.source import DatasetSource, MixedSizes, open_source, remote_url, scan
from ._loader.state import LoaderState, check_resumable, dataset_fingerprint, fingerprint_parts
from ._loader.stats import Choice, LoaderCounters, LoaderStats, epoch_summary, make_stats
from .audio import AudioSpec
from .errors import ArgumentError, check_choice, check_count_or_auto, check_integer, fail, parse_bytes
from .memory import LoaderMemoryEstimate
from .sampling import ClipSampler, draw_seed
from .transforms import TransformSpec, as_transform_spec

__all__ = ["ClipLoader", "ClipBatch"]

logger = logging.getLogger("vclip")

ClipBatch.__module__ = __name__  # defined in vclip._loader.clip_batch, public here


class ClipLoader(IterableDataset):
    """Batches of labelled clips drawn from many videos, for training loops.

    Iterate over it (``for batch in loader``) or wrap it: ``DataLoader(loader, batch_size=None)``.
    Each pass yields the batches (:class:`ClipBatch`) of one epoch; call :meth:`set_epoch` before
    each pass to draw new clips (as with ``DistributedSampler``). All videos are indexed once, at
    construction, in parallel (pass ``cache_dir`` to keep the indexes across runs).

    Buffers: the loader pools ``prefetch_queue_depth + 3`` output buffers (the batches queued
    ahead, the one being built, the one the training loop holds, the one it held last) and reuses
    them in turn, with no copy: a batch's tensors are views of a pooled buffer. A buffer is
    refilled only once nothing references the batch it held: a batch kept longer (in a list, for
    logging) keeps its buffer and its pixels, and the loader allocates another
    (``stats().kept_batches`` counts them). On the GPU the consumer's current CUDA stream waits
    for a batch's writes before the batch is handed over, and a buffer is refilled only after the
    work queued on the consumer's stream before it drew the next batch is done. From the second
    pass on, once every batch of an epoch is built, the first batches of the next epoch (the same
    shard) are built while the training loop drains this one, so an epoch boundary does not stall
    the pipeline.

    Resuming: :meth:`state_dict` says where the epoch stands (small, JSON-able);
    :meth:`load_state_dict` in a fresh loader over the same dataset and options makes its next
    pass over that epoch yield exactly the batches an uninterrupted pass would have yielded after
    that point (same clips, frames, augmentations and replacements of bad videos), also per shard.
    torchdata's ``StatefulDataLoader(loader, batch_size=None)`` saves and restores it with its own.

    Args:
        videos: (path, label) pairs, ``(path, label, start_seconds, end_seconds)`` segments or
            ``vclip.LabeledVideo`` rows; a text/CSV file with one ``path label`` (or
            ``path,label``) or ``path start end label`` per line, or a CSV whose header names the
            columns (``path,start,end,label``, any order; UTF-8, UTF-16 or UTF-32), whose labels
            are integers or class names (numbered in sorted name order: :attr:`classes` lists them,
            as torchvision's ``ImageFolder`` does); a root folder
            with one subfolder per class, labelled in sorted name order (:attr:`classes` lists
            them), or a folder of videos without subfolders (label -1: unlabelled); a dataset catalog
            (``vclip index``'s ``.parquet`` file or a ``vclip.catalog.Catalog``: the loader then
            starts without opening any video, and checks each video's fingerprint at its first
            clip); or a dataset source (``videos``, ``class_names``, ``stored_index(number)`` and
            ``index(number)``, see ``vclip._loader.source.DatasetSource``).
        sampler: Which frames make a clip: any of the six modes, in frames or in seconds
            (``fps``, ``duration``). Its own ``seed``, when set, is the loader's ``seed`` (both
            given and different: refused). A row with a segment gets its clips from the
            frames whose pts lie in ``[start, end)``, the end policy padding inside it.
        transform: Resize, crop (center or random), flip probability, normalization, dtype and
            layout, and the training augmentations fused with them (random resized, multi-scale
            and scale-jittered crops, colour jitter, grayscale; evaluation views): see
            :class:`vclip.TransformSpec`. A ``torchvision.transforms.v2.Compose`` of the transforms
            vclip fuses is translated (:meth:`vclip.TransformSpec.from_torchvision`, layout
            ``"TCHW"``). None: RGB uint8 ``[T, H, W, 3]`` at the (downscaled) source size.
        batch_size: Clips per batch (default 8).
        clips_per_video: Clips of each video per epoch. Default: the sampler's ``clips_per_video``
            for random and even starts; 1 for keyframe and indexed clips (more gives the same
            frames with their own crop and flip). Not allowed with ``starts="step"``, where each
            video gives every clip that fits.
        shuffle: Visit videos and clips in a new seeded order each epoch (default False).
        seed: Seed (>= 0) of every random choice; None (default): the sampler's own ``seed``, else
            0. A clip's start, jitter and augmentations (crop window, scale, flip, colour factors
            and their order, grayscale) are drawn from
            ``(seed, epoch, video id, clip number)``: batches are the same for a seed and epoch on
            CPU and GPU, whatever the thread timing, and each batch records its draws
            (:attr:`ClipBatch.augmentations`).
        drop_last: Leave out a last batch smaller than ``batch_size``.
        device: ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"auto"`` (default: the GPU when usable).
            A GPU request that cannot be served decodes on the CPU with one FallbackWarning.
        num_threads: Decode threads, each with its own NVDEC decoder on the GPU. 0 (default):
            up to 8 on the GPU (the loader's pacing decides how many work, see below), ``min(8, CPU
            cores)`` on the CPU. A count set is used as set. With ``decode_processes``: threads per
            process (0: 4 on the GPU, 2 on the CPU).
        decode_processes: Worker processes that decode, writing straight into the loader's
            buffers (CUDA IPC on the GPU, shared memory on the CPU); 0: decode threads in this
            process. ``"auto"`` (default): on the GPU none, so that NVDEC decodes in this
            process's one CUDA context (each decode process holds a context of its own, hundreds
            of MiB, and shares the GPU with the training process by time slices); on the CPU one
            per 2 of the ``min(8, cores)`` default threads, so that a decoder's native crash costs
            only its video; none inside a DataLoader worker or any daemon process, which may not
            start processes, or when ``num_threads`` is set
            (:func:`vclip._engine.scheduler.auto_decode_processes`). The attribute holds the count
            chosen in this process. They are fresh interpreters that import nothing of the
            script's (no main guard needed). Where they pay (small videos, a loader that is the
            limit): ``docs/performance.md``.
        cpu_decoders: PyAV decoders working beside the default ones, from the same job queue. On
            the GPU they decode on the CPU in processes of their own that hold no CUDA context
            (their pictures go through shared host memory; this process uploads them and the same
            CUDA kernel converts them into the same batch); they take the newest video of the
            queue only when they would finish it before NVDEC has done the others. ``"auto"``
            (default): on the GPU up to the cores left beside NVDEC's feeders, 2 for training and
            the decode processes running (none under 8 cores, see
            :func:`vclip._engine.scheduler.auto_cpu_decoders`; torchrun's ranks on one machine share
            its cores; no more than fit 256 MiB each in the free ``/dev/shm``), used by the pacing
            only while the training loop waits; on the CPU none. A count asks for that many, all working. A
            damaged video may decode differently on NVDEC (which conceals some errors) and on the
            CPU, so which decoder took it can change a batch. On the CPU they are single-threaded
            decoders replacing the default pool. ``stats().decoders`` shows what each kind did.
        repeated_augmentation: Samples of each decoded clip, each with its own augmentation draws
            (crop, scale, flip, colour), next to each other with the same ``video_ids`` and
            ``clip_ids``: VideoMAE's and MAE-ST's repeated augmentation, which decodes a ``k``-th of
            the clips for as many samples: a batch of ``batch_size`` clips holds ``batch_size x k``.
        max_lead_frames: Opt-in bound on decode work per clip in long GOPs: a clip starting more
            than this many frames after its keyframe is moved earlier to start this many after it
            (random and even starts only). A clip of a segment never moves before the segment's
            first frame: its lead counts from that frame when the keyframe is earlier. Starts then
            cluster after keyframes: see :func:`vclip.gop.start_distribution` and
            benchmarks/long_gop.py for the change.
            None (default): clips start where the sampler draws them.
        prefetch_queue_depth: Batches queued ahead of the one the training loop holds; with the
            one being built, ``prefetch_queue_depth + 1`` batches are decoded at once. ``"auto"``
            (default): from 2, moved by the pacing up to 6 on the GPU (the attribute holds the
            most, for which the memory is planned), 2 on the CPU.

    Pacing: the loader measures how the training loop takes its batches and moves what it left to
    the machine (``"auto"`` and ``num_threads=0``): while the loop waits for batches it adds NVDEC
    threads, then CPU decoders beside NVDEC, then batches in flight, up to the machine's limit;
    while built batches wait for the loop it gives them back, so that a model that is the limit
    shares its cores and GPU with as little decoding as keeps it fed (see
    :mod:`vclip._loader.pacing`). ``stats().pacing`` lists every change, when and why.
        shard_id, num_shards: This process's shard of the videos. Default: rank and world size of
            ``torch.distributed`` when it is initialised, otherwise the whole dataset. Inside
            DataLoader workers each worker takes its own part of the shard.
        even_shards: How every shard gets the same number of clips (hence of batches):
            ``"pad"`` (default) repeats clips of the shard's own videos (with fresh random draws)
            up to the largest shard, ``"drop"`` cuts every shard to the smallest.
        on_error: ``"skip"`` (default): a video that cannot be used (missing, empty, truncated,
            not a video, undecodable, shorter than one clip), whether found at construction or
            mid-epoch, is reported once in a warning on the ``"vclip"`` logger, named in
            :attr:`ClipBatch.skipped_videos` and :meth:`stats`, and each of its clips is replaced
            by a clip of another video of the shard (seeded), so epochs keep their length and no
            problem of one video raises. A video that fails mid-epoch is left out from the next
            epoch on (within its epoch its other clips are still tried), so batches never depend
            on thread timing. A damaged frame (a decode error, or on the CPU a picture the
            decoder concealed) costs only the clips that need it or a frame decoded from it. When
            no video of the shard is left to replace a failed one, iterating raises
            :class:`vclip.NoVideoLeftError` (also a ``RuntimeError``).
            ``"raise"``: its VideoError is raised (any other error
            of one video comes as a :class:`vclip.CorruptVideoError` naming the file).
        mixed_sizes: What to do when videos give clips of different shapes (different sizes and
            no resize), which cannot share a batch. ``"error"`` (default): raise at construction,
            naming the sizes found (with counts and an example file each) and the resize to pass,
            e.g. ``transform=vclip.TransformSpec(resize=(H, W))``. ``"skip"``: leave out the
            videos whose clips differ from the most common shape (reported like bad videos).
        memory_budget: Bytes (an int or a string such as ``"8GiB"``) the loader may take. Where
            its plan for the most it may run is larger, the counts left to ``"auto"`` are lowered
            until it fits: decode processes, then CPU decoders, then batches in flight (down to 1);
            ``stats().chosen`` says so. Counts the user set stay as set.
        augmentation_factor: Memory the training step's augmentations add per batch, as a
            fraction of the batch (the memory formula's term; only counted in the estimate). 0
            for everything the transform fuses (see :func:`vclip.estimate_memory`); the spatial
            views are counted by the estimate itself (``spatial_views`` samples per clip).
        evaluation: Evaluation mode: every usable video exactly once per epoch over all shards,
            with its clips (e.g. ``vclip.strided(16, 2, starts="even", clips_per_video=10)``)
            and their spatial views (``TransformSpec(spatial_views=3)``): clips in dataset order,
            shards not evened out (a shard may have a batch or two fewer; each video is in one
            shard), the last batch kept, videos found unusable left out instead of replaced (a
            batch may then be smaller). Not with ``shuffle`` or ``drop_last``. Batches say which
            video, clip and view each sample is (``video_ids``, ``clip_ids``, ``view_ids``).
        cache_dir: Folder for an on-disk cache of video indexes (see :func:`vclip.index_video`).
        verbose: Also print the one-line summary of each epoch to stderr (it is always logged
            at INFO level on the ``"vclip"`` logger).
        audio: Each clip's audio too (:class:`vclip.AudioSpec`: rate, channels, dtype, per clip or
            per frame, stream, what a video without audio gives), cut by the clip's own times as
            :meth:`VideoDecoder.get_clips` cuts it, into :attr:`ClipBatch.audio` with
            ``audio_lengths`` and ``has_audio``. It is decoded while the frames are, in up to 4
            helper processes of the loader's own (fresh interpreters, so a script needs no main
            guard for them; bytes and file objects are decoded in this process), reading only
            the audio packets of each clip (indexed once per video, beside the video index); on
            the GPU it is copied from pinned memory on the consumer's stream. A video whose audio
            cannot be decoded (or, with ``missing="error"``, that has none) is a bad video for
            ``on_error``. None (default): no audio.

    Attributes:
        videos: The dataset (``LabeledVideo(path, label)`` each), in input order.
        classes: The class names (label ``i`` is ``classes[i]``, sorted as torchvision's
            ``ImageFolder`` sorts them) for class folders, class-name labels and sources that name
            their classes, else None; ``class_to_idx`` maps each to its label, ``class_names`` is
            the same tuple.
        device: ``"cpu"`` or ``"cuda:N"``, where clips are decoded and delivered (resolved once,
            at construction: ``"cuda"`` and ``"auto"`` mean the process's current CUDA device).
        decode_workers: Decode threads, in all processes (NVDEC decoders on the GPU).
        clip_shape: Shape of one clip.
        audio_shape: Shape of one clip's audio (``(C, S)``, or ``(T, C, S)`` per frame), or None.
        memory_estimate: The peak memory the loader plans for (:class:`vclip.LoaderMemoryEstimate`).

    Raises:
        ArgumentError: (a ValueError and a TypeError) Bad options (the message repeats the value
            and says what is allowed); no usable video; clips of different shapes with
            ``mixed_sizes="error"``; ``memory_budget`` smaller than the least the loader runs
            with (the message names the largest batch size that fits).
        VideoError: ``on_error="raise"`` and a video cannot be used.
    """

    def __init__(
        self,
        videos: VideoSource | DatasetSource,
        sampler: ClipSampler,
        *,
        transform: TransformSpec | None = None,
        batch_size: int = 8,
        clips_per_video: int | None = None,
        shuffle: bool = False,
        seed: int | None = None,
        drop_last: bool = False,
        device: Any = "auto",
        num_threads: int = 0,
        decode_processes: int | str = "auto",
        cpu_decoders: int | str = "auto",
        repeated_augmentation: int = 1,
        max_lead_frames: int | None = None,
        prefetch_queue_depth: int | str = "auto",
        shard_id: int | None = None,
        num_shards: int | None = None,
        even_shards: EvenShards = "pad",
        on_error: OnError = "skip",
        mixed_sizes: MixedSizes = "error",
        memory_budget: int | str | None = None,
        augmentation_factor: float = 0.0,
        cache_dir: str | None = None,
        verbose: bool = False,
        evaluation: bool = False,
        audio: AudioSpec | None = None,
    ):
        super().__init__()
        if not isinstance(sampler, ClipSampler):
            raise fail("sampler", sampler, "a ClipSampler, e.g. vclip.strided(16, 2)")
        transform = as_transform_spec(transform)
        if not isinstance(evaluation, bool):
            raise fail("evaluation", evaluation, "True or False")
        for name, value in (("shuffle", shuffle), ("drop_last", drop_last)):
            if evaluation and value:
                raise fail(name, value, "False with evaluation=True, which visits every clip once, in order")
        self.evaluation = evaluation
        self.sampler = sampler
        self.transform = transform
        self.batch_size = check_integer("batch_size", batch_size, minimum=1)
        self.shuffle = bool(shuffle)
        self.seed = draw_seed(seed, sampler)
        self.drop_last = bool(drop_last)
        self.num_threads = check_integer("num_threads", num_threads, minimum=0)
        decode_processes = check_count_or_auto("decode_processes", decode_processes)
        cpu_decoders = check_count_or_auto("cpu_decoders", cpu_decoders)
        self.cpu_decoders: int | str = cpu_decoders
        prefetch_queue_depth = check_count_or_auto("prefetch_queue_depth", prefetch_queue_depth, minimum=1)
        check_choice("even_shards", even_shards, ("pad", "drop"))
        check_choice("on_error", on_error, ("skip", "raise"))
        check_choice("mixed_sizes", mixed_sizes, ("error", "skip"))
        self.even_shards, self.on_error, self.mixed_sizes = even_shards, on_error, mixed_sizes
        budget = parse_bytes(memory_budget) if memory_budget is not None else None
        self.augmentation_factor = augmentation_factor
        self.verbose = bool(verbose)
        if audio is not None and not isinstance(audio, AudioSpec):
            raise fail("audio", audio, "an AudioSpec or None, e.g. vclip.AudioSpec(sample_rate=16000, channels=1)")
        self.audio = audio
        self.repeated_augmentation = check_integer("repeated_augmentation", repeated_augmentation, minimum=1)
        if evaluation and self.repeated_augmentation > 1:
            raise fail("repeated_augmentation", repeated_augmentation, "1 with evaluation=True (evaluation draws "
                       "nothing at random; spatial_views gives several crops of a clip)")
        self._drawer = ClipDrawer(sampler, transform, clips_per_video, max_lead_frames,
                                  repeats=self.repeated_augmentation)
        self.frames_per_clip = self._drawer.frames_per_clip
        if audio is not None and self._drawer.samples_per_clip > 1:
            raise fail("audio", audio, "None with spatial_views > 1 or repeated_augmentation > 1 (a loader's batches "
                       "of several samples per clip carry no audio; VideoDecoder.get_clips gives each view its clip's "
                       "audio)")
        self._audio = None if audio is None else LoaderAudio(audio, sampler, samples=0,
                                                             positions=self.frames_per_clip, cache_dir=cache_dir)
        self.audio_shape: tuple[int, ...] | None = None
        self._device: Device = resolve_device(device).device  # a GPU request without one warns once
        self._requested = {"decode_processes": decode_processes, "cpu_decoders": cpu_decoders,
                           "prefetch_queue_depth": prefetch_queue_depth}
        self._budget_caps: dict[str, int] = {}  # the most of each count memory_budget leaves (set after the scan)
        self._resolve_counts()
        self._remote_baseline = remote_reads()
        self._source = open_source(videos, cache_dir)
        self._urls = frozenset(filter(None, (remote_url(video.path) for video in self._source.videos)))
        self.shard_id, self.num_shards = process_shard(shard_id, num_shards, len(self._source.videos))
        self._epoch = 0
        self._position = (0, 0)  # (epoch, batches delivered) of the latest pass
        self._resume_pending = False
        self._passes = 0
        self._bad = BadVideos([video.path for video in self._source.videos], replaced=not evaluation)
        self._runtime: LoaderRuntime | None = None
        try:
            runtime = self._runtime_here()
            self.decode_workers: int = runtime.decode_workers
            self._setup(runtime, budget, memory_budget)
        except BaseException:
            self.close()  # worker threads and processes must not outlive a loader that failed
            raise

    def _resolve_counts(self) -> None:
        """The counts left to ``"auto"``, for this process (a DataLoader worker may start no process),
        within what ``memory_budget`` leaves."""
        self.decode_processes, self._cpu_decoders, self.prefetch_queue_depth = resolve_counts(
            self._requested, gpu=self._device.is_cuda, num_threads=self.num_threads, caps=self._budget_caps)

    def _pass_plan(self, epoch: int) -> tuple[np.ndarray, list]:
        """This process's shard and batches of ``epoch`` (also for a pass built ahead across an epoch boundary)."""
        shard = self._shard()
        return self._plan.shard(epoch, *shard), self._plan.batches(epoch, *shard)

    def _setup(self, runtime: LoaderRuntime, budget: int | None, memory_budget: int | str | None) -> None:
        found, seconds = scan(self._source, self._drawer, workers=self.decode_workers, remote=bool(self._urls),
                              mixed_sizes=self.mixed_sizes, raise_errors=self.on_error == "raise")
        runtime.counters.add(index_seconds=seconds)
        for number, error in found.problems.items():
            self._bad.add(number, error.problem, SCAN)
        self.clip_shape: tuple[int, ...] = found.clip_shape
        counts = found.clip_counts
        if self.evaluation:  # videos found unusable give no clips (not clips to replace)
            counts = [0 if number in found.problems else count for number, count in enumerate(counts)]
        if self._audio is not None:
            self._audio.samples = max(span_samples(facts.longest_spans[0 if self._audio.spec.span == "clip" else 1],
                                                   self._audio.spec.sample_rate) for facts in found.usable)
            self.audio_shape = self._audio.batch_shape(1)[1:]
            runtime.use_audio(self._audio.batch_shape(self.batch_size))
        self._plan = EpochPlan(counts, batch_size=self.batch_size, seed=self.seed, shuffle=self.shuffle,
                               drop_last=self.drop_last, even_shards=None if self.evaluation else self.even_shards)
        self.memory_estimate: LoaderMemoryEstimate = loader_memory_plan(self, found.usable)
        if budget is not None:
            self.memory_estimate, self._budget_caps = keep_within_budget(
                self.memory_estimate, budget, memory_budget, self._requested, self.batch_size)
        if self._budget_caps:
            self._resolve_counts()
            runtime.limit(self._budget_caps)
            self.decode_workers = runtime.decode_workers
        options = {
            "sampler": repr(replace(self.sampler, seed=None)), "transform": repr(self.transform),
            "batch_size": self.batch_size, "clips_per_video": self._drawer.clips_per_video, "shuffle": self.shuffle,
            "drop_last": self.drop_last, "even_shards": self.even_shards, "mixed_sizes": self.mixed_sizes,
        }
        if self._drawer.max_lead_frames is not None:  # only when set: states saved without it still load
            options["max_lead_frames"] = self._drawer.max_lead_frames
        if self.repeated_augmentation > 1:
            options["repeated_augmentation"] = self.repeated_augmentation
        if self.evaluation:
            options["evaluation"] = True
        if self.audio is not None:
            options["audio"] = repr(self.audio)
        self._fingerprint = dataset_fingerprint(self._source.videos, found.clip_counts, options)
        self._fingerprint_parts = fingerprint_parts(self._source.videos, found.clip_counts, options)

    # -- the dataset ------------------------------------------------------------------------------
    @property
    def videos(self) -> Sequence[LabeledVideo]:
        """The dataset (``LabeledVideo(path, label)`` each), in input order."""
        return self._source.videos

    @property
    def classes(self) -> tuple[str, ...] | None:
        """The class names, label ``i`` is ``classes[i]`` (torchvision ``ImageFolder``'s name), or
        None where the labels are integers of the user's own."""
        return self._source.class_names

    @property
    def class_to_idx(self) -> dict[str, int] | None:
        """Each class name's label (torchvision ``ImageFolder``'s name), or None without names."""
        names = self._source.class_names
        return None if names is None else {name: label for label, name in enumerate(names)}

    @property
    def class_names(self) -> tuple[str, ...] | None:
        """The same as :attr:`classes`."""
        return self._source.class_names

    @property
    def device(self) -> str:
        """``"cpu"`` or ``"cuda:N"``: where clips are decoded and delivered."""
        return str(self._device)

    # -- epochs -----------------------------------------------------------------------------------
    @property
    def epoch(self) -> int:
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Draw the next pass's clips (order, starts, crops, flips) for ``epoch`` (>= 0).

        After :meth:`load_state_dict`, setting the state's own epoch keeps the resume point;
        another epoch starts from its first batch.
        """
        self._epoch = check_integer("epoch", epoch, minimum=0)
        if self._position[0] != self._epoch:
            self._position, self._resume_pending = (self._epoch, 0), False

    def _shard(self) -> tuple[int, int]:
        worker = get_worker_info()
        if worker is None:
            return self.shard_id, self.num_shards
        return self.shard_id * worker.num_workers + worker.id, self.num_shards * worker.num_workers

    def __len__(self) -> int:
        """Batches per epoch on this shard (the same on every shard)."""
        return len(self._plan.batches(self._epoch, *self._shard()))

    def __iter__(self) -> Iterator[ClipBatch]:
        return self._iterate(self._epoch)

    def _iterate(self, epoch: int) -> Iterator[ClipBatch]:
        if get_worker_info() is not None and self._device.is_cuda:
            raise ArgumentError(
                f"a ClipLoader on {self._device} cannot run inside DataLoader worker processes (a forked worker "
                "cannot use the GPU); use DataLoader(loader, batch_size=None) with num_workers=0: the loader "
                "decodes on its own threads and processes"
            )
        runtime = self._runtime_here()
        first = self._position[1] if self._resume_pending and self._position[0] == epoch else 0
        self._resume_pending = False
        self._passes += 1
        this_pass = self._passes
        run = runtime.begin(epoch, *self._pass_plan(epoch), first, self.stats())
        try:
            bfloat16 = self._drawer.dtype == "bfloat16"  # its buffers hold the bit patterns as uint16
            for built, data, labels, audio in runtime.deliver(run):
                yield ClipBatch(
                    data=data.view(torch.bfloat16) if bfloat16 else data, labels=labels,
                    video_ids=torch.from_numpy(built.video_ids),
                    frame_indices=torch.from_numpy(built.frame_indices),
                    pts_seconds=torch.from_numpy(built.pts_seconds), padded=torch.from_numpy(built.padded),
                    skipped_videos=built.skipped_videos,
                    epoch=epoch, batch_number=built.number, clip_ids=torch.from_numpy(built.clip_ids),
                    view_ids=torch.from_numpy(built.view_ids), augmentations=built.augmentations,
                    **(dict(zip(("audio", "audio_lengths", "has_audio"), audio)) if audio is not None else {}),
                )
        finally:
            if self._passes == this_pass:  # not a pass abandoned earlier and closed only now
                self._position = (epoch, run.delivered)
        summary = epoch_summary(epoch, run.start_stats, self.stats())
        logger.info(summary)
        if self.verbose:
            print(summary, file=sys.stderr)

    # -- resuming ---------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Where this loader's epoch stands, as a small JSON-able dict (torch convention).

        It holds the epoch, the batches of it already delivered, the seed, the shard, the videos
        found bad so far (and in which epoch), and a fingerprint of the dataset and of the options that
        shape batches. Taken while a pass is in progress it counts the batches that pass has
        handed over (those being built ahead are not counted).
        """
        run = self._runtime.active if self._runtime is not None else None
        epoch, delivered = (run.epoch, run.delivered) if run is not None else self._position
        return LoaderState(
            epoch=epoch, batches_delivered=delivered, seed=self.seed, shard=(self.shard_id, self.num_shards),
            bad_videos=tuple(self._bad.entries()), fingerprint=self._fingerprint, parts=self._fingerprint_parts,
        ).to_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from :meth:`state_dict`: the next pass over the state's epoch (now the loader's
        epoch) starts after the batches it had delivered, and the videos it had found bad stay out.

        Raises:
            ArgumentError: ``state`` is not a loader state (counts not integers in range: a
                negative or infinite epoch or batch count), or it was saved by a loader with
                another seed, shard, dataset or batch options (the message names those that
                differ), or it delivered more batches than the epoch has.
        """
        loaded = LoaderState.from_dict(state)
        check_resumable(loaded, seed=self.seed, shard=(self.shard_id, self.num_shards), fingerprint=self._fingerprint,
                        parts=self._fingerprint_parts, num_videos=len(self._source.videos),
                        batches_in=lambda epoch: len(self._plan.batches(epoch, self.shard_id, self.num_shards)))
        for video, epoch, problem in loaded.bad_videos:
            self._bad.add(video, problem, epoch)
        self._epoch = loaded.epoch
        self._position, self._resume_pending = (loaded.epoch, loaded.batches_delivered), True

    # -- the runtime of this process --------------------------------------------------------------
    def _runtime_here(self) -> LoaderRuntime:
        """This process's runtime, started on first use (also in a forked DataLoader worker)."""
        runtime = self._runtime
        if runtime is not None and runtime.pid == os.getpid() and not runtime.closed:
            return runtime
        if runtime is not None and runtime.pid != os.getpid():
            self._bad = copy.copy(self._bad)  # a lock of its own in this process
            self._resolve_counts()  # e.g. a DataLoader worker, which may start no process
        backend = loader_backend(self._device, self._requested, (self.decode_processes, self._cpu_decoders),
                                 num_threads=self.num_threads)
        try:
            builder = BatchBuilder(self._source, self._drawer, self._bad, seed=self.seed, on_error=self.on_error,
                                   replace=not self.evaluation, audio=self._audio)
            counts = (self.decode_processes, self._cpu_decoders, self.prefetch_queue_depth)
            settings = runtime_settings(self._requested, counts, backend, gpu=self._device.is_cuda,
                                        num_threads=self.num_threads)
            self._runtime = LoaderRuntime(
                backend, self._device, builder, self._allocate_buffer, settings,
                next_pass=None if self.evaluation else self._pass_plan,
            )
            if self._audio is not None and self.audio_shape is not None:  # known once the scan has run
                self._runtime.use_audio(self._audio.batch_shape(self.batch_size))
        except BaseException:
            backend.close()  # its worker processes must not outlive a runtime that failed
            raise
        return self._runtime

    def _allocate_buffer(self, backend):
        conversion = self._drawer.conversion
        return backend.empty((self.batch_size * self._drawer.samples_per_clip,) + self.clip_shape,
                             conversion.storage_dtype)

    def __getstate__(self) -> dict:  # DataLoader workers get the dataset, not threads or GPU state
        return {name: value for name, value in self.__dict__.items() if name != "_runtime"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._runtime = None

    def close(self) -> None:
        """Stop building batches and shut the worker threads (and processes) down."""
        if self._runtime is not None:
            self._runtime.close()

    # -- memory and monitoring --------------------------------------------------------------------
    def stats(self) -> LoaderStats:
        """What the loader has done since it was created (in this process), to tell whether it
        holds training back: see :class:`vclip._loader.stats.LoaderStats` (``print`` it for one
        line, ``.summary()`` for a few, ``.to_dict()`` for JSON)."""
        runtime = self._runtime
        running = runtime.active if runtime is not None else None
        paths = self._source.videos
        return make_stats(
            runtime.counters if runtime is not None else LoaderCounters(),
            device=self._device, epoch=self._epoch, decode_workers=self.decode_workers,
            running_seconds=time.perf_counter() - running.started if running is not None else 0.0,
            memory_baseline=runtime.memory_baseline if runtime is not None else {},
            estimate_bytes=runtime.working_memory(self.memory_estimate, int(self.decode_processes))
            if runtime is not None else self.memory_estimate.own_bytes,
            skipped_videos={paths[video].path: problem for video, problem in self._bad.problems().items()},
            decoder_kinds=runtime.decoder_kinds() if runtime is not None else None,
            remote_reads=remote_reads(self._urls, since=self._remote_baseline) if self._urls else {},
            chosen={name: Choice(int(count), count.reason) for name, count in (
                ("decode_processes", self.decode_processes), ("cpu_decoders", self._cpu_decoders),
                ("prefetch_queue_depth", self.prefetch_queue_depth))},
            working={name: runtime.pacer.value(name) for name in ("decode_threads", "decode_processes",
                                                                   "cpu_decoders", "prefetch_queue_depth")}
            if runtime else {},
            pacing=runtime.pacing_changes if runtime is not None else [],
            kept_batches=runtime.ring.replaced if runtime is not None else 0,
        )

    def __repr__(self) -> str:
        return (
            f"ClipLoader(videos={len(self._source.videos)}, usable={len(self._source.videos) - len(self._bad)}, "
            f"clip_shape={list(self.clip_shape)}, batch_size={self.batch_size}, device={self.device!r}, "
            f"shard={self.shard_id}/{self.num_shards}, epoch={self._epoch})"
        )
