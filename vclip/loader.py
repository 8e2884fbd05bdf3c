"""ClipLoader: batches of labelled clips for training loops, decoded ahead of the loop.

For each batch the loader draws its clips (every random choice seeded per clip), groups them into
one decode job per video, and has the decode workers (NVDEC on the GPU, PyAV on the CPU) write
them straight into a pooled output buffer, which torch sees through DLPack without a copy.
Several batches are built at once on background threads while the training loop works.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from typing import Iterator, Literal

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from ._backends import JobRunner, make_backend
from ._device import Device, resolve_device
from ._dataset import VideoSource, load_videos
from ._epoch import ClipRef, EvenShards, epoch_clip_refs, replacement_order, shard_videos
from ._handoff import BufferRing, make_handoff
from ._loader_stats import LoaderCounters, epoch_summary
from ._pipeline import ClipTarget, VideoJob, resolve_transform
from .errors import VideoError
from .index import VideoIndex, index_video
from .memory import LoaderMemoryEstimate, estimate_loader_memory, format_bytes, parse_bytes
from .sampling import ClipSampler, _at_least, _one_of
from .transforms import FrameGeometry, TransformSpec

__all__ = ["ClipLoader", "ClipBatch"]

logger = logging.getLogger("vclip")

OnError = Literal["skip", "raise"]


@dataclass(frozen=True, eq=False)
class ClipBatch:
    """One batch of clips, with where every clip came from.

    Attributes:
        clips: ``[B, T, C, H, W]`` for layout ``"TCHW"`` (``[B, T, H, W, C]`` for ``"THWC"``,
            ``[B, C, T, H, W]`` for ``"CTHW"``; RGB uint8 ``[B, T, H, W, 3]`` without a
            transform), dtype of the transform, on the loader's device. It is a view of one of
            the loader's pooled buffers (no copy): valid until the next batch is drawn; ``clone()``
            it to keep it longer.
        labels: int64 ``[B]``, on the loader's device.
        video_ids: int64 ``[B]`` (CPU): each clip's video, a position in ``loader.videos``.
        frame_indices: int64 ``[B, T]`` (CPU): the frame numbers of each clip.
        pts_seconds: float64 ``[B, T]`` (CPU): the presentation times of those frames.
        skipped_videos: Videos that could not be read and whose clips in this batch were
            replaced by clips of other videos (paths, sorted).
        epoch: The epoch the batch belongs to.
        batch_number: Position of the batch in its epoch, from 0.
    """

    clips: torch.Tensor
    labels: torch.Tensor
    video_ids: torch.Tensor
    frame_indices: torch.Tensor
    pts_seconds: torch.Tensor
    skipped_videos: tuple[str, ...]
    epoch: int
    batch_number: int

    def __len__(self) -> int:
        return int(self.clips.shape[0])

    def __repr__(self) -> str:
        return (
            f"ClipBatch(clips=[{', '.join(map(str, self.clips.shape))}] {str(self.clips.dtype).removeprefix('torch.')} "
            f"{self.clips.device}, labels=[{self.labels.shape[0]}], frame_indices={list(self.frame_indices.shape)}, "
            f"epoch={self.epoch}, batch_number={self.batch_number}, skipped_videos={len(self.skipped_videos)})"
        )


@dataclass(frozen=True)
class _VideoFacts:
    """What the loader keeps about a usable video (not its index, which may be large)."""

    width: int
    height: int
    bit_depth: int
    clip_count: int
    output_size: tuple[int, int]
    clip_shape: tuple[int, ...]


@dataclass(frozen=True, eq=False)
class _Clip:
    ref: ClipRef
    index: VideoIndex
    frames: np.ndarray
    geometry: FrameGeometry


@dataclass(frozen=True, eq=False)
class _Built:
    """A batch written into buffer ``slot`` (the writes may still be in flight: ``events``)."""

    number: int
    slot: int
    labels: np.ndarray
    video_ids: np.ndarray
    frame_indices: np.ndarray
    pts_seconds: np.ndarray
    skipped_videos: tuple[str, ...]
    events: list
    finished: float


class _Run:
    """One pass over an epoch: its batches of clips, and the batches being built."""

    def __init__(self, epoch: int, shard: np.ndarray, batches: list[list[ClipRef]], start_stats: dict):
        self.epoch = epoch
        self.shard = shard
        self.batches = batches
        self.start_stats = start_stats
        self.started = time.perf_counter()
        self.pending: deque[Future] = deque()
        self.submitted = 0
        self.superseded = False

    def finish(self) -> None:
        """Wait until no batch of this run is being built."""
        wait(list(self.pending))


def _frames_per_clip(sampler: ClipSampler) -> int:
    if sampler.mode == "indexed":
        return len(sampler.frame_indices)
    if sampler.mode == "keyframe":
        if sampler.max_frames is None:
            raise ValueError(
                "keyframe sampling without max_frames gives clips of different lengths, which cannot share a batch; "
                "use vclip.keyframe(max_frames=N)"
            )
        return sampler.max_frames
    return sampler.sequence_length


def _clip_plan(sampler: ClipSampler, clips_per_video: int | None) -> tuple[ClipSampler, int | None]:
    """The sampler that draws one clip (clip ``c`` is ``sample(...)[c % n]``), and the clips per
    video and epoch (None: from each video's length, for ``starts="step"``)."""
    if clips_per_video is not None:
        _at_least("clips_per_video", clips_per_video, 1)
    if sampler.mode in ("keyframe", "indexed"):
        return sampler, clips_per_video or 1
    if sampler.starts == "step":
        if clips_per_video is not None:
            raise ValueError(
                f"clips_per_video ({clips_per_video}) cannot be combined with starts='step', "
                "where every video gives each clip that fits"
            )
        return sampler, None
    count = sampler.clips_per_video if clips_per_video is None else clips_per_video
    # Random starts: one independent draw per clip. Even starts: the c-th of `count` positions.
    return replace(sampler, clips_per_video=1 if sampler.starts == "random" else count), count


def _process_shard(shard_id: int | None, num_shards: int | None) -> tuple[int, int]:
    if shard_id is None and num_shards is None:
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            return torch.distributed.get_rank(), torch.distributed.get_world_size()
        return 0, 1
    if shard_id is None or num_shards is None:
        raise ValueError(f"shard_id ({shard_id!r}) and num_shards ({num_shards!r}) must be given together")
    _at_least("num_shards", num_shards, 1)
    _at_least("shard_id", shard_id, 0)
    if shard_id >= num_shards:
        raise ValueError(f"shard_id ({shard_id}) must be < num_shards ({num_shards})")
    return int(shard_id), int(num_shards)


class ClipLoader(IterableDataset):
    """Batches of labelled clips drawn from many videos, for training loops.

    Iterate over it (``for batch in loader``) or wrap it: ``DataLoader(loader, batch_size=None)``.
    Each pass yields the batches (:class:`ClipBatch`) of one epoch; call :meth:`set_epoch` before
    each pass to draw new clips (as with ``DistributedSampler``). All videos are indexed once, at
    construction, in parallel (pass ``cache_dir`` to keep the indexes across runs).

    Buffers: the loader pools ``prefetch_queue_depth + 2`` output buffers (the batches queued
    ahead, the one being built, the one the training loop holds) and reuses them in turn, so a
    batch's tensors stay valid until the next batch is drawn (``clone()`` to keep them longer).
    On the GPU the consumer's current CUDA stream waits for a batch's writes before the batch is
    handed over, and a buffer is refilled only after the work queued on the consumer's stream
    before it drew the next batch is done.

    Args:
        videos: (path, label) pairs; a text/CSV file with one ``path label`` (or ``path,label``)
            per line; or a root folder with one subfolder per class, labelled in sorted name order
            (``class_names`` lists them).
        sampler: Which frames make a clip: any of the six modes. The loader's ``seed`` drives its
            random choices (the sampler's own ``seed`` is not used).
        transform: Resize, crop (center or random), flip probability, normalization, dtype and
            layout. None: RGB uint8 ``[T, H, W, 3]`` at the (downscaled) source size.
        batch_size: Clips per batch (default 8).
        clips_per_video: Clips of each video per epoch. Default: the sampler's ``clips_per_video``
            for random and even starts; 1 for keyframe and indexed clips (more gives the same
            frames with their own crop and flip). Not allowed with ``starts="step"``, where each
            video gives every clip that fits.
        shuffle: Visit videos and clips in a new seeded order each epoch (default False).
        seed: Seed (>= 0) of every random choice. A clip's start, jitter, crop and flip are drawn
            from ``(seed, epoch, video id, clip number)``: batches are the same for a seed and
            epoch on CPU and GPU, whatever the thread timing.
        drop_last: Leave out a last batch smaller than ``batch_size``.
        device: ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"auto"`` (default: the GPU when usable).
            A GPU request that cannot be served decodes on the CPU with one FallbackWarning.
        num_threads: Decode threads, each with its own NVDEC decoder on the GPU; 0 (default): 12
            on the GPU, ``min(8, CPU cores)`` on the CPU. With ``decode_processes``: threads per
            process (0: 4 on the GPU, 2 on the CPU).
        decode_processes: Worker processes that decode, writing straight into the loader's
            buffers (CUDA IPC on the GPU, shared memory on the CPU). 0 (default): decode threads
            in this process. One process's threads share one GIL, which caps small videos: on an
            H200, 640x360 clips came about 1.4x faster with 4 processes of 4 threads (see
            benchmarks/README.md). Each process holds its own CUDA context (about 500 MiB,
            counted in :attr:`memory_estimate`) and starts in a couple of seconds. Processes are
            started with "spawn": a script must create the loader under
            ``if __name__ == "__main__":``; not available inside DataLoader workers.
        prefetch_queue_depth: Batches queued ahead of the one the training loop holds (default
            2); with the one being built, ``prefetch_queue_depth + 1`` batches are decoded at once.
        shard_id, num_shards: This process's shard of the videos. Default: rank and world size of
            ``torch.distributed`` when it is initialised, otherwise the whole dataset. Inside
            DataLoader workers each worker takes its own part of the shard.
        even_shards: How every shard gets the same number of clips (hence of batches):
            ``"pad"`` (default) repeats clips of the shard's own videos (with fresh random draws)
            up to the largest shard, ``"drop"`` cuts every shard to the smallest.
        on_error: ``"skip"`` (default): a video that cannot be read (missing, empty, truncated,
            not a video, undecodable, shorter than one clip) is reported once in a warning on the
            ``"vclip"`` logger, named in :attr:`ClipBatch.skipped_videos` and :meth:`stats`, and
            each of its clips is replaced by a clip of another video of the shard (seeded), so
            epochs keep their length. ``"raise"``: its VideoError is raised.
        memory_budget: Bytes (an int or a string such as ``"8GiB"``) the loader may take.
        augmentation_factor: Memory the training step's augmentations add per batch, as a
            fraction of the batch (the memory formula's term; only counted in the estimate).
        cache_dir: Folder for an on-disk cache of video indexes (see :func:`vclip.index_video`).
        verbose: Also print the one-line summary of each epoch to stderr (it is always logged
            at INFO level on the ``"vclip"`` logger).

    Attributes:
        videos: The dataset (``LabeledVideo(path, label)`` each), in input order.
        class_names: Class names for folder input, else None.
        device: ``"cpu"`` or ``"cuda:N"``, where clips are decoded and delivered.
        decode_workers: Decode threads, in all processes (NVDEC decoders on the GPU).
        clip_shape: Shape of one clip.
        memory_estimate: The peak memory the loader plans for (:class:`vclip.LoaderMemoryEstimate`).

    Raises:
        ValueError: Bad options (the message repeats the value and says what is allowed); no
            usable video; ``memory_budget`` smaller than the estimate (the message names the
            largest batch size that fits).
        TypeError: ``sampler`` or ``transform`` of the wrong type, non-integer counts.
        VideoError: ``on_error="raise"`` and a video cannot be used.
    """

    def __init__(
        self,
        videos: VideoSource,
        sampler: ClipSampler,
        *,
        transform: TransformSpec | None = None,
        batch_size: int = 8,
        clips_per_video: int | None = None,
        shuffle: bool = False,
        seed: int = 0,
        drop_last: bool = False,
        device: str = "auto",
        num_threads: int = 0,
        decode_processes: int = 0,
        prefetch_queue_depth: int = 2,
        shard_id: int | None = None,
        num_shards: int | None = None,
        even_shards: EvenShards = "pad",
        on_error: OnError = "skip",
        memory_budget: int | str | None = None,
        augmentation_factor: float = 0.0,
        cache_dir: str | None = None,
        verbose: bool = False,
    ):
        super().__init__()
        if not isinstance(sampler, ClipSampler):
            raise TypeError(f"sampler ({sampler!r}) must be a ClipSampler, e.g. vclip.strided(16, 2)")
        if transform is not None and not isinstance(transform, TransformSpec):
            raise TypeError(f"transform ({transform!r}) must be a TransformSpec or None")
        for name, value, minimum in (("batch_size", batch_size, 1), ("seed", seed, 0), ("num_threads", num_threads, 0),
                                     ("decode_processes", decode_processes, 0), ("prefetch_queue_depth", prefetch_queue_depth, 1)):
            _at_least(name, value, minimum)
        _one_of("even_shards", even_shards, ("pad", "drop"))
        _one_of("on_error", on_error, ("skip", "raise"))
        budget = parse_bytes(memory_budget) if memory_budget is not None else None
        self.sampler = sampler
        self.transform = transform
        self.batch_size = batch_size
        self.shuffle = bool(shuffle)
        self.seed = seed
        self.drop_last = bool(drop_last)
        self.num_threads = num_threads
        self.decode_processes = decode_processes
        self.prefetch_queue_depth = prefetch_queue_depth
        self.even_shards = even_shards
        self.on_error = on_error
        self.augmentation_factor = augmentation_factor
        self.cache_dir = cache_dir
        self.verbose = bool(verbose)
        self.frames_per_clip = _frames_per_clip(sampler)
        self._clip_sampler, self._clips_per_video = _clip_plan(sampler, clips_per_video)
        self._conversion = resolve_transform(transform, sampler.scaling_factor)
        self.videos, self.class_names = load_videos(videos)
        self.shard_id, self.num_shards = _process_shard(shard_id, num_shards)
        if self.num_shards > len(self.videos):
            raise ValueError(f"num_shards ({self.num_shards}) must be <= the number of videos ({len(self.videos)})")
        self._epoch = 0
        self._unusable: dict[int, str] = {}
        self._reset_process_state()
        self._device: Device = resolve_device(device).device
        self.device: str = str(self._device)
        self._start_runtime()
        self.decode_workers: int = self._runner.num_workers
        try:
            self._finish_setup(budget, memory_budget)
        except BaseException:
            self.close()  # worker threads and processes must not outlive a loader that failed
            raise

    def _finish_setup(self, budget: int | None, memory_budget: int | str | None) -> None:
        self._facts = self._scan()
        usable = [facts for facts in self._facts if isinstance(facts, _VideoFacts)]
        self.clip_shape: tuple[int, ...] = usable[0].clip_shape
        self._clip_counts = np.array([
            facts.clip_count if isinstance(facts, _VideoFacts) else self._clips_per_video or 0 for facts in self._facts
        ])
        self.memory_estimate: LoaderMemoryEstimate = self._plan_memory(usable)
        if budget is not None:
            self._check_budget(memory_budget, budget)

    # -- setup --------------------------------------------------------------------------------
    def _reset_process_state(self) -> None:
        """Counters and locks of this process; the decode runtime starts on first use."""
        self._runner: JobRunner | None = None
        self._counters = LoaderCounters()
        self._lock = threading.Lock()
        self._active: _Run | None = None
        self._held: int | None = None
        self._memory_baseline: dict[str, int] = {}
        self._runtime_pid: int | None = None

    def _start_runtime(self) -> None:
        """Decode workers, batch builders and the buffer ring of this process."""
        backend = make_backend(self._device, processes=self.decode_processes, threads=self.num_threads)
        # With worker processes the threads here only wait for them: one per decode thread there.
        self._runner = JobRunner(backend, 0 if self.decode_processes else self.num_threads, dedicated_threads=True)
        self._handoff = make_handoff(backend.device)
        self._builders = ThreadPoolExecutor(self.prefetch_queue_depth + 1, thread_name_prefix="vclip-batch")
        self._ring = BufferRing(self.prefetch_queue_depth + 2, self._allocate_buffer, self._handoff)
        self._memory_baseline = self._handoff.memory_sample()
        self._runtime_pid = os.getpid()

    def _allocate_buffer(self):
        return self._runner.backend.empty((self.batch_size,) + self.clip_shape, self._conversion.dtype)

    _PROCESS_STATE = ("_runner", "_handoff", "_builders", "_ring", "_counters", "_lock", "_active", "_held",
                      "_memory_baseline", "_runtime_pid")

    def __getstate__(self) -> dict:  # DataLoader workers get the dataset, not threads or GPU state
        return {name: value for name, value in self.__dict__.items() if name not in self._PROCESS_STATE}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._reset_process_state()

    def _inspect(self, path: str) -> _VideoFacts | VideoError:
        """Index one video and check that its clips can be drawn (worker thread)."""
        try:
            index = index_video(path, cache_dir=self.cache_dir)
        except VideoError as error:
            return error
        try:
            clips = self._clip_sampler.sample(index, seed=0)
            if not clips:
                raise ValueError(
                    f"no clip of {self.sampler.span} frames fits in its {index.num_frames} frames "
                    f"(end_policy={self.sampler.end_policy!r})"
                )
            if clips[0].size != self.frames_per_clip:
                raise ValueError(f"has {clips[0].size} keyframes, fewer than max_frames={self.frames_per_clip}")
            geometry = self._conversion.geometry(index.width, index.height, np.random.default_rng(0))
        except (ValueError, IndexError) as error:
            return VideoError(path, str(error).removeprefix(f"{path}: "))
        return _VideoFacts(
            width=index.width, height=index.height, bit_depth=index.bit_depth,
            clip_count=len(clips) if self._clips_per_video is None else self._clips_per_video,
            output_size=(geometry.output_width, geometry.output_height),
            clip_shape=self._conversion.clip_shape(self.frames_per_clip, geometry),
        )

    def _scan(self) -> list[_VideoFacts | VideoError]:
        started = time.perf_counter()
        with ThreadPoolExecutor(self.decode_workers, thread_name_prefix="vclip-index") as pool:
            facts = list(pool.map(self._inspect, [video.path for video in self.videos]))
        self._counters.add(index_seconds=time.perf_counter() - started)
        batch_shape = next((f.clip_shape for f in facts if isinstance(f, _VideoFacts)), None)
        for number, (video, entry) in enumerate(zip(self.videos, facts)):
            if isinstance(entry, _VideoFacts) and entry.clip_shape != batch_shape:
                facts[number] = entry = VideoError(
                    video.path, f"its clips come out {list(entry.clip_shape)} but the batch holds {list(batch_shape)}; "
                    "set TransformSpec(resize=(height, width)) or a crop so that every video fits",
                )
            if isinstance(entry, VideoError):
                if self.on_error == "raise":
                    raise entry
                self._mark_unusable(number, entry)
        if batch_shape is None:
            first = next(entry for entry in facts if isinstance(entry, VideoError))
            raise ValueError(f"none of the {len(self.videos)} videos can be used; the first: {first}")
        return facts

    def _plan_memory(self, usable: list[_VideoFacts]) -> LoaderMemoryEstimate:
        largest = max(usable, key=lambda f: f.width * f.height * (1 if f.bit_depth <= 8 else 2))
        return estimate_loader_memory(
            width=usable[0].output_size[0], height=usable[0].output_size[1], batch_size=self.batch_size,
            sequence_length=self.frames_per_clip, dtype=self._conversion.dtype,
            augmentation_factor=self.augmentation_factor, buffers=self._ring.count,
            decoders=self.decode_workers, video_width=largest.width, video_height=largest.height,
            video_bit_depth=largest.bit_depth, on_gpu=self.device != "cpu", processes=self.decode_processes,
        )

    def _check_budget(self, memory_budget: int | str, budget: int) -> None:
        if self.memory_estimate.total <= budget:
            return
        fits = self.memory_estimate.largest_batch_size(budget)
        advice = (
            f"the largest batch_size that fits is {fits}" if fits else
            f"not even batch_size=1 fits: the parts that do not grow with the batch take "
            f"{format_bytes(self.memory_estimate.fixed_bytes)}"
        )
        raise ValueError(
            f"memory_budget ({memory_budget!r}, {format_bytes(budget)}) is too small for batch_size={self.batch_size}: "
            f"the loader needs {self.memory_estimate}; {advice}"
        )

    # -- epochs -------------------------------------------------------------------------------
    @property
    def epoch(self) -> int:
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Draw the next pass's clips (order, starts, crops, flips) for ``epoch`` (>= 0)."""
        _at_least("epoch", epoch, 0)
        self._epoch = int(epoch)

    def _shard(self) -> tuple[int, int]:
        worker = get_worker_info()
        if worker is None:
            return self.shard_id, self.num_shards
        return self.shard_id * worker.num_workers + worker.id, self.num_shards * worker.num_workers

    def _plan(self, epoch: int) -> tuple[np.ndarray, list[list[ClipRef]]]:
        shard_id, num_shards = self._shard()
        refs = epoch_clip_refs(
            self._clip_counts, seed=self.seed, epoch=epoch, shuffle=self.shuffle, shard_id=shard_id,
            num_shards=num_shards, even_shards=self.even_shards,
        )
        batches = [refs[start:start + self.batch_size] for start in range(0, len(refs), self.batch_size)]
        if self.drop_last and batches and len(batches[-1]) < self.batch_size:
            batches.pop()
        shard = shard_videos(len(self.videos), seed=self.seed, epoch=epoch, shuffle=self.shuffle, shard_id=shard_id,
                             num_shards=num_shards)
        return shard, batches

    def __len__(self) -> int:
        """Batches per epoch on this shard (the same on every shard)."""
        return len(self._plan(self._epoch)[1])

    def __iter__(self) -> Iterator[ClipBatch]:
        return self._iterate(self._epoch)

    def _iterate(self, epoch: int) -> Iterator[ClipBatch]:
        run = self._begin(epoch)
        try:
            for number in range(len(run.batches)):
                self._release_held()
                self._submit(run, last=number + self.prefetch_queue_depth + 1)
                waiting = time.perf_counter()
                built = run.pending[0].result()
                run.pending.popleft()
                handed = time.perf_counter()
                self._counters.add(
                    batches=1, clips=built.labels.size, consumer_wait_seconds=handed - waiting,
                    queue_seconds=max(0.0, waiting - built.finished),
                )
                yield self._hand_over(run, built)
                if run.superseded:
                    raise RuntimeError(
                        "a newer pass over this ClipLoader ended this one: a loader serves one pass at a time"
                    )
            self._release_held()
        finally:
            run.finish()
            if self._active is run:
                self._active = None
                self._counters.add(active_seconds=time.perf_counter() - run.started)
        summary = epoch_summary(epoch, run.start_stats, self.stats())
        logger.info(summary)
        if self.verbose:
            print(summary, file=sys.stderr)

    def _begin(self, epoch: int) -> _Run:
        if self._runtime_pid != os.getpid():  # first pass here, or a forked DataLoader worker
            self._reset_process_state()
            self._start_runtime()
        if get_worker_info() is not None and self.device != "cpu":
            raise RuntimeError(
                f"a ClipLoader on {self.device} cannot run inside DataLoader worker processes; "
                "use DataLoader(loader, batch_size=None) with num_workers=0 (the loader has its own threads)"
            )
        previous = self._active
        if previous is not None:
            previous.superseded = True
            previous.finish()
            self._counters.add(active_seconds=time.perf_counter() - previous.started)
        shard, batches = self._plan(epoch)
        self._active = _Run(epoch, shard, batches, self.stats())
        return self._active

    def _submit(self, run: _Run, *, last: int) -> None:
        """Start building batches up to number ``last``."""
        while run.submitted <= min(last, len(run.batches) - 1):
            run.pending.append(self._builders.submit(self._build, run, run.submitted, self._ring.next_slot()))
            run.submitted += 1

    def _release_held(self) -> None:
        """The consumer moved past the batch it held: its buffer may be refilled once the work
        the consumer queued on it is done."""
        if self._held is not None:
            event = self._handoff.release_event()
            self._ring.set_waits(self._held, [event] if event is not None else [])
            self._held = None

    def _hand_over(self, run: _Run, built: _Built) -> ClipBatch:
        self._handoff.consumer_waits(built.events)
        self._held = built.slot
        clips = self._ring.tensor(built.slot)
        return ClipBatch(
            clips=clips if built.labels.size == self.batch_size else clips[: built.labels.size],
            labels=self._handoff.labels(built.labels),
            video_ids=torch.from_numpy(built.video_ids),
            frame_indices=torch.from_numpy(built.frame_indices),
            pts_seconds=torch.from_numpy(built.pts_seconds),
            skipped_videos=built.skipped_videos,
            epoch=run.epoch,
            batch_number=built.number,
        )

    # -- building a batch (builder threads) -----------------------------------------------------
    def _build(self, run: _Run, number: int, slot: int) -> _Built:
        started = time.perf_counter()
        output, _ = self._ring.prepare(slot)
        sampling = time.perf_counter()
        candidates = [self._candidates(run, ref) for ref in run.batches[number]]
        clips = [next(candidate) for candidate in candidates]
        self._counters.add(sample_seconds=time.perf_counter() - sampling)
        todo = list(range(len(clips)))
        events: list = []
        try:
            while todo:
                videos, jobs = self._jobs(clips, todo)
                result = self._runner.run(jobs, self._conversion, output, self._counters)
                events.extend(result.completions)
                failed = [(video, job, error) for video, job, error in zip(videos, jobs, result.errors) if error]
                if not failed:
                    break
                self._handoff.synchronize()  # a failed job may have left writes in flight
                if self.on_error == "raise":
                    raise failed[0][2]
                todo = []
                for video, job, error in failed:
                    self._mark_unusable(video, error)
                    todo.extend(target.slot for target in job.targets)
                for position in todo:
                    clips[position] = next(candidates[position])
        finally:
            self._ring.set_waits(slot, events)
        replaced = [clip.ref.replaces for clip in clips if clip.ref.replaces >= 0]
        self._counters.add(skipped_clips=len(replaced), build_seconds=time.perf_counter() - started)
        self._counters.record_memory(self._memory_sample())
        return _Built(
            number=number,
            slot=slot,
            labels=np.array([self.videos[clip.ref.video].label for clip in clips], dtype=np.int64),
            video_ids=np.array([clip.ref.video for clip in clips], dtype=np.int64),
            frame_indices=np.stack([clip.frames for clip in clips]),
            pts_seconds=np.stack([clip.index.pts_seconds[clip.frames] for clip in clips]),
            skipped_videos=tuple(sorted({self.videos[video].path for video in replaced})),
            events=events,
            finished=time.perf_counter(),
        )

    @staticmethod
    def _jobs(clips: list[_Clip], positions: list[int]) -> tuple[list[int], list[VideoJob]]:
        """One job per video for the clips at ``positions`` (slot = position in the batch)."""
        targets: dict[int, list[ClipTarget]] = {}
        for position in positions:
            clip = clips[position]
            targets.setdefault(clip.ref.video, []).append(ClipTarget(clip.frames, clip.geometry, position))
        videos = list(targets)
        first = {clip.ref.video: clip for clip in reversed(clips)}
        return videos, [VideoJob(first[video].index, tuple(targets[video])) for video in videos]

    def _candidates(self, run: _Run, ref: ClipRef) -> Iterator[_Clip]:
        """The clip ``ref``, then, while they fail, its replacements from the shard (seeded order)."""
        clip = self._clip(run.epoch, ref)
        if clip is not None:
            yield clip
        for video in replacement_order(self.seed, run.epoch, ref, run.shard):
            if video != ref.video:
                clip = self._clip(run.epoch, ref._replace(video=int(video), replaces=ref.video))
                if clip is not None:
                    yield clip
        raise RuntimeError(
            f"no usable video is left in this shard to replace {self.videos[ref.video].path}: "
            f"{len(self._unusable)} of the {len(self.videos)} videos failed (see loader.stats()['skipped'])"
        )

    def _clip(self, epoch: int, ref: ClipRef) -> _Clip | None:
        """The frames and geometry of clip ``ref``; None when its video cannot be used."""
        if ref.video in self._unusable:
            return None
        try:
            index = index_video(self.videos[ref.video].path, cache_dir=self.cache_dir)
        except VideoError as error:
            if self.on_error == "raise":
                raise
            self._mark_unusable(ref.video, error)
            return None
        rng = ref.rng(self.seed, epoch)
        clips = self._clip_sampler.sample(index, seed=rng)
        geometry = self._conversion.geometry(index.width, index.height, rng)
        return _Clip(ref, index, clips[ref.clip % len(clips)], geometry)

    def _mark_unusable(self, video: int, error: BaseException) -> None:
        problem = error.problem if isinstance(error, VideoError) else str(error)
        with self._lock:
            if video in self._unusable:
                return
            self._unusable[video] = problem
        logger.warning("vclip: skipping %s: %s; its clips are replaced by clips of other videos",
                       self.videos[video].path, problem)

    # -- monitoring ---------------------------------------------------------------------------
    def _memory_sample(self) -> dict[str, int]:
        return {"buffers_bytes": self._ring.allocated_bytes, **self._handoff.memory_sample()}

    def stats(self) -> dict:
        """What the loader has done since it was created, to tell whether it holds training back.

        Returns:
            A dict: ``device``; ``epoch``; ``batches`` and ``clips`` delivered; ``seconds`` per
            stage (``index``, ``sample`` (drawing clips), ``demux``, ``decode``, ``convert``
            (host conversion; GPU kernels run asynchronously on the decode streams), summed over
            worker threads; ``build`` batch assembly wall time summed over batches; ``queue``
            ready batches waiting for the consumer; ``consumer_wait`` the training loop blocked
            on the next batch; ``active`` wall time of the passes); ``frames`` (``decoded``
            pictures, ``delivered`` clip frames, ``decoded_per_delivered``); ``decode_workers``,
            ``nvdec_decoders`` and ``decode_workers_busy`` (busy share of the workers' time);
            ``fallback_videos``; ``skipped`` (``clips`` replaced, ``videos``: path -> problem);
            ``memory``: ``estimate_bytes`` and its parts, ``in_use_bytes`` and ``peak_bytes``
            (the loader's own: on the GPU the device's used memory above what it was when the
            loader was created, so without the CUDA context; on the CPU its buffers), and on
            the GPU ``device_used_bytes``, CuPy pool and torch allocator figures, each with a
            ``peak_`` twin.
        """
        counters = self._counters.snapshot()
        with self._lock:
            unusable = {self.videos[video].path: problem for video, problem in self._unusable.items()}
        active = counters["active_seconds"] + (time.perf_counter() - self._active.started if self._active else 0.0)
        working = counters["demux_seconds"] + counters["decode_seconds"] + counters["convert_seconds"]
        workers = self.decode_workers
        return {
            "device": self.device,
            "epoch": self._epoch,
            "batches": counters["batches"],
            "clips": counters["clips"],
            "seconds": {
                "index": counters["index_seconds"],
                "sample": counters["sample_seconds"],
                "demux": counters["demux_seconds"],
                "decode": counters["decode_seconds"],
                "convert": counters["convert_seconds"],
                "build": counters["build_seconds"],
                "queue": counters["queue_seconds"],
                "consumer_wait": counters["consumer_wait_seconds"],
                "active": active,
            },
            "frames": {
                "decoded": counters["packets_sent"],
                "delivered": counters["frames_delivered"],
                "decoded_per_delivered": counters["packets_sent"] / max(counters["frames_delivered"], 1),
            },
            "decode_workers": workers,
            "nvdec_decoders": workers if self.device != "cpu" else 0,
            "decode_workers_busy": min(1.0, working / (active * workers)) if active > 0 else 0.0,
            "fallback_videos": counters["fallback_videos"],
            "skipped": {"clips": counters["skipped_clips"], "videos": unusable},
            "memory": self._memory_report(counters["memory_now"], counters["memory_peak"]),
        }

    def _memory_report(self, now: dict, peak: dict) -> dict:
        estimate = self.memory_estimate
        own = "device_used_bytes" if self.device != "cpu" else "buffers_bytes"
        base = self._memory_baseline.get(own, 0)
        report = {
            "estimate_bytes": estimate.total,
            "estimate": {name: getattr(estimate, name) for name in (
                "output_buffers", "buffers", "decode_surfaces", "decoders", "workspace", "cuda_context")},
            "in_use_bytes": max(0, now.get(own, base) - base),
            "peak_bytes": max(0, peak.get(own, base) - base),
        }
        if self.device != "cpu":
            report.update(now)
            report.update({f"peak_{name}": value for name, value in peak.items()})
        return report

    def close(self) -> None:
        """Stop building batches and shut the worker threads down."""
        if self._runner is None:
            return
        if self._active is not None:
            self._active.superseded = True
            self._active.finish()
            self._active = None
        self._builders.shutdown(wait=True)
        self._runner.close()
        self._runner.backend.close()
        self._runner = None

    def __repr__(self) -> str:
        return (
            f"ClipLoader(videos={len(self.videos)}, usable={len(self.videos) - len(self._unusable)}, "
            f"clip_shape={list(self.clip_shape)}, batch_size={self.batch_size}, device={self.device!r}, "
            f"shard={self.shard_id}/{self.num_shards}, epoch={self._epoch})"
        )
