"""What a ClipLoader measures while it runs (:class:`LoaderCounters`), the typed report that
:meth:`ClipLoader.stats` returns (:class:`LoaderStats`), and the one-line summary of an epoch."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from .._bytes.remote import RemoteReads
from .._device import Device
from .._engine.pipeline import DecodeStats
from .._engine.scheduler import DecoderKindStats
from ..errors import format_bytes
from .pacing import PacingChange

__all__ = ["Choice", "LoaderCounters", "LoaderStats", "StageSeconds", "FrameCounts", "SkippedVideos",
           "LoaderMemory", "DecoderUse", "make_stats", "epoch_summary", "own_bytes"]


@dataclass
class LoaderCounters(DecodeStats):
    """The decode counters plus the loader's own, summed since the loader was created; thread-safe ``add``.

    The seconds are those of :class:`StageSeconds`.
    """

    batches: int = 0
    clips: int = 0
    skipped_clips: int = 0
    index_seconds: float = 0.0
    sample_seconds: float = 0.0
    build_seconds: float = 0.0
    queue_seconds: float = 0.0
    consumer_wait_seconds: float = 0.0
    active_seconds: float = 0.0
    memory_now: dict = field(default_factory=dict)
    memory_peak: dict = field(default_factory=dict)
    memory_own_peak: int = 0

    def snapshot(self) -> dict:
        """All counters at one instant (``as_dict`` with copies of the memory figures)."""
        with self._lock:
            values = self.as_dict()
            values["memory_now"], values["memory_peak"] = dict(self.memory_now), dict(self.memory_peak)
            return values

    def record_memory(self, sample: dict[str, int], own: int) -> None:
        """Keep the latest memory figures, the peak of each, and the peak of the loader's own (``own``)."""
        with self._lock:
            self.memory_now = dict(sample)
            for name, value in sample.items():
                self.memory_peak[name] = max(value, self.memory_peak.get(name, 0))
            self.memory_own_peak = max(self.memory_own_peak, own)


@dataclass(frozen=True)
class StageSeconds:
    """Seconds spent per stage since the loader was created.

    ``index``, ``sample``, ``demux``, ``decode`` and ``convert`` are summed over worker threads
    (``convert``: the host conversion; GPU kernels run asynchronously on the decode streams);
    ``build`` is the wall time of batch assembly, summed over batches.

    Attributes:
        index: Indexing videos (at construction, and re-indexing evicted ones).
        sample: Drawing clips and planning decode jobs.
        demux: Reading packets.
        decode: Decoding them.
        convert: Turning decoded frames into the output on the host.
        build: Building batches, from the wait for a free buffer to the last write.
        queue: Ready batches waiting for the training loop.
        consumer_wait: The training loop blocked on the next batch (the figure to watch).
        active: Wall time of the passes over epochs.
    """

    index: float
    sample: float
    demux: float
    decode: float
    convert: float
    build: float
    queue: float
    consumer_wait: float
    active: float


@dataclass(frozen=True)
class FrameCounts:
    """Frames decoded (pictures sent to the decoder) and delivered (clip frames in batches)."""

    decoded: int
    delivered: int

    @property
    def decoded_per_delivered(self) -> float:
        """Decode work per delivered frame (1.0: nothing decoded in vain)."""
        return self.decoded / max(self.delivered, 1)


@dataclass(frozen=True)
class SkippedVideos:
    """Videos that could not be used (``on_error="skip"``).

    Attributes:
        clips: Clips replaced by clips of other videos.
        videos: Path -> the problem, for every video left out.
    """

    clips: int
    videos: dict[str, str]


@dataclass(frozen=True)
class LoaderMemory:
    """The loader's memory, in bytes.

    Attributes:
        estimate_bytes: What the loader's plan (``loader.memory_estimate``) gives for its own memory
            (without the CUDA context of the process it runs in, which the training process holds)
            with what it has allocated so far: the decode processes started, the ring's buffers and
            the most CPU decoders at work (what the pacing gave back stays allocated); at most
            ``loader.memory_estimate.own_bytes``.
        in_use_bytes: The loader's own now: on the GPU the device's used memory above what it was
            when the loader's runtime started, less what torch's allocator took meanwhile (the
            model's tensors, activations and optimizer), so its buffers, decoders and staging;
            on the CPU the loader's buffers.
        peak_bytes: The largest ``in_use_bytes`` seen.
        gpu: On the GPU: ``device_used_bytes`` (all processes), CuPy's pool
            (``cupy_pool_used_bytes``, ``cupy_pool_total_bytes``), ``torch_allocated_bytes`` and
            ``torch_reserved_bytes``; empty on the CPU.
        gpu_peak: The largest value seen of each figure of ``gpu``.
    """

    estimate_bytes: int
    in_use_bytes: int
    peak_bytes: int
    gpu: dict[str, int]
    gpu_peak: dict[str, int]


@dataclass(frozen=True)
class DecoderUse:
    """What one kind of decoder did (``"nvdec"``, ``"cpu"``).

    Attributes:
        workers: Decode workers of this kind (started).
        clips: Clips it decoded.
        pictures: Pictures it decoded.
        busy: Share of the time its workers were allowed to work (see ``active``) that they spent
            on jobs, in [0, 1].
        active: Workers allowed to work now (the pacing moves it).
    """

    workers: int
    clips: int
    pictures: int
    busy: float
    active: int = 0


@dataclass(frozen=True)
class Choice:
    """A setting the loader chose for the machine (``"auto"``), or was given (reason ``"set"``)."""

    value: int
    reason: str


@dataclass(frozen=True)
class LoaderStats:
    """What a ClipLoader has done since it was created, to tell whether it holds training back.

    ``print(stats)`` gives one short line, :meth:`summary` a few readable lines, :meth:`to_dict`
    plain values for JSON.

    Attributes:
        device: Where clips are decoded and delivered (``"cpu"``, ``"cuda:N"``).
        epoch: The loader's current epoch.
        batches: Batches delivered.
        clips: Clips delivered.
        seconds: Time per stage (:class:`StageSeconds`).
        frames: Frames decoded and delivered (:class:`FrameCounts`).
        decode_workers: Decode threads, in all processes, CPU decoders beside NVDEC included.
        nvdec_decoders: NVDEC decoders (one per decode worker on the GPU, 0 on the CPU).
        decode_workers_busy: Share of the decode workers' time spent demuxing, decoding or
            converting, in [0, 1].
        fallback_videos: Videos decoded on the CPU although the loader runs on the GPU.
        decoders: Per kind of decoder (``"nvdec"``, ``"cpu"``): workers, clips, pictures and
            how busy they were (:class:`DecoderUse`); CPU decoders beside NVDEC are ``"cpu"``.
        skipped: Videos left out and clips replaced (:class:`SkippedVideos`).
        memory: Estimated and measured memory (:class:`LoaderMemory`).
        remote_reads: URL -> what was read from it (:class:`vclip.RemoteReads`: requests,
            retries, bytes) since the loader was created, by this process and its decode
            processes; only the loader's videos at URLs that were read.
        chosen: ``"decode_processes"``, ``"cpu_decoders"`` and ``"prefetch_queue_depth"``: the
            count started (for the depth: the most batches in flight) and why (:class:`Choice`).
        working: ``"decode_threads"``, ``"cpu_decoders"``, ``"prefetch_queue_depth"``: how many
            work now, as the pacing left them.
        pacing: Every move of the pacing, in order (:class:`vclip._loader.pacing.PacingChange`:
            when, what, from, to, why).
        kept_batches: Batches the training loop kept past the next hand-overs (in a list, for
            logging): each kept its buffer, and the loader allocated a new one.
    """

    device: str
    epoch: int
    batches: int
    clips: int
    seconds: StageSeconds
    frames: FrameCounts
    decode_workers: int
    nvdec_decoders: int
    decode_workers_busy: float
    fallback_videos: int
    skipped: SkippedVideos
    memory: LoaderMemory
    decoders: dict[str, DecoderUse] = field(default_factory=dict)
    remote_reads: dict[str, RemoteReads] = field(default_factory=dict)
    chosen: dict[str, Choice] = field(default_factory=dict)
    working: dict[str, int] = field(default_factory=dict)
    pacing: list[PacingChange] = field(default_factory=list)
    kept_batches: int = 0

    def to_dict(self) -> dict:
        """Plain nested dicts, lists and numbers (JSON-ready); ``frames`` includes ``decoded_per_delivered``."""
        values = dataclasses.asdict(self)
        values["frames"]["decoded_per_delivered"] = self.frames.decoded_per_delivered
        return values

    def __repr__(self) -> str:
        active, waited = self.seconds.active, self.seconds.consumer_wait
        return (
            f"LoaderStats({self.device}, since the start (now epoch {self.epoch}): {self.batches} batches, "
            f"{self.clips} clips in {active:.2f} s; waited {waited:.2f} s ({_percent(waited, active)}); "
            f"decode workers {100 * self.decode_workers_busy:.0f}% busy; {len(self.skipped.videos)} videos skipped; "
            f"loader memory peak {_short_bytes(self.memory.peak_bytes)} of {_short_bytes(self.memory.estimate_bytes)}"
            " estimated)"
        )

    def summary(self) -> str:
        """A few lines for people: throughput, where the time went, frames, skipped videos, memory."""
        s = self.seconds
        lines = [
            f"vclip loader on {self.device}, epoch {self.epoch}: {self.batches} batches, {self.clips} clips in "
            f"{s.active:.2f} s ({self.clips / max(s.active, 1e-9):.1f} clips/s)",
            f"  training loop waited {s.consumer_wait:.2f} s for batches ({_percent(s.consumer_wait, s.active)}); "
            f"ready batches waited {s.queue:.2f} s for it",
            f"  {self.decode_workers} decode workers ({self.nvdec_decoders} NVDEC), "
            f"{100 * self.decode_workers_busy:.0f}% busy: demux {s.demux:.2f} s, decode {s.decode:.2f} s, "
            f"convert {s.convert:.2f} s; index {s.index:.2f} s, sample {s.sample:.2f} s, build {s.build:.2f} s",
            f"  frames: {self.frames.decoded} decoded for {self.frames.delivered} delivered "
            f"({self.frames.decoded_per_delivered:.2f} per delivered); "
            f"{self.fallback_videos} videos fell back to the CPU",
            f"  skipped: {len(self.skipped.videos)} videos, {self.skipped.clips} clips replaced",
            f"  memory: in use {format_bytes(self.memory.in_use_bytes)}, peak {format_bytes(self.memory.peak_bytes)}, "
            f"estimate {format_bytes(self.memory.estimate_bytes)}",
        ]
        if len(self.decoders) > 1:  # several kinds side by side: what each did
            lines.insert(3, "  decoders: " + ", ".join(
                f"{kind} {use.workers} workers {100 * use.busy:.0f}% busy, {use.clips} clips, {use.pictures} pictures"
                for kind, use in self.decoders.items()))
        lines += [f"    {path}: {problem}" for path, problem in sorted(self.skipped.videos.items())]
        lines += [f"  {name} {choice.value}: {choice.reason}" for name, choice in self.chosen.items()]
        lines += [f"  pacing at {change.seconds:.1f} s (batch {change.batch}): {change.setting} {change.old} -> "
                  f"{change.new}: {change.reason}" for change in self.pacing]
        if self.kept_batches:
            lines.append(f"  {self.kept_batches} batches were kept past the next hand-overs (each kept its buffer)")
        if self.remote_reads:
            reads = self.remote_reads.values()
            read = format_bytes(sum(r.bytes_read for r in reads))
            lines.append(f"  remote: {read} in {sum(r.requests for r in reads)} requests "
                         f"({sum(r.retries for r in reads)} retries) from {len(self.remote_reads)} URLs")
        return "\n".join(lines)


_GPU_FIGURES = ("device_used_bytes", "cupy_pool_used_bytes", "cupy_pool_total_bytes", "torch_allocated_bytes",
                "torch_reserved_bytes")


def own_bytes(sample: dict[str, int], device: Device) -> int:
    """The loader's share of a memory sample: on the GPU what the device uses beyond torch's
    allocator (the model), on the CPU its buffers."""
    if device.is_cuda:
        return sample.get("device_used_bytes", 0) - sample.get("torch_reserved_bytes", 0)
    return sample.get("buffers_bytes", 0)


def make_stats(counters: LoaderCounters, *, device: Device, epoch: int, decode_workers: int, running_seconds: float,
               memory_baseline: dict[str, int], estimate_bytes: int, skipped_videos: dict[str, str],
               decoder_kinds: dict[str, DecoderKindStats] | None = None,
               remote_reads: dict[str, RemoteReads] | None = None,
               chosen: dict[str, Choice] | None = None, working: dict[str, int] | None = None,
               pacing: list[PacingChange] | None = None, kept_batches: int = 0) -> LoaderStats:
    """The loader's stats from its counters.

    Args:
        running_seconds: Wall time of the pass in progress so far (0 when none).
        memory_baseline: The memory figures when the loader's runtime started (the loader's own
            memory is what it uses above them).
        decoder_kinds: What each decoder pool did, when several share the queue; else the one
            kind of ``device`` is reported from the counters.
        remote_reads: What was read per URL (see :attr:`LoaderStats.remote_reads`).
        chosen: The settings the loader chose, and why (see :attr:`LoaderStats.chosen`).
        working, pacing, kept_batches: See :class:`LoaderStats`.
    """
    values = counters.snapshot()
    active = values["active_seconds"] + running_seconds
    base = own_bytes(memory_baseline, device)
    now, peak = values["memory_now"], values["memory_peak"]
    if decoder_kinds is None:
        work_seconds = values["demux_seconds"] + values["decode_seconds"] + values["convert_seconds"]
        busy = min(1.0, work_seconds / (active * decode_workers)) if active > 0 else 0.0
        kind = "nvdec" if device.is_cuda else "cpu"
        decoders = {kind: DecoderUse(decode_workers, values["clips"], values["packets_sent"], busy, decode_workers)}
    else:
        decode_workers = sum(use.workers for use in decoder_kinds.values())
        allowed = sum(use.active_seconds for use in decoder_kinds.values())
        busy = min(1.0, sum(use.busy_seconds for use in decoder_kinds.values()) / allowed) if allowed > 0 else 0.0
        decoders = {
            kind: DecoderUse(use.workers, use.clips, use.pictures,
                             min(1.0, use.busy_seconds / use.active_seconds) if use.active_seconds > 0 else 0.0,
                             use.active)
            for kind, use in decoder_kinds.items()
        }
    return LoaderStats(
        device=str(device),
        epoch=epoch,
        batches=values["batches"],
        clips=values["clips"],
        seconds=StageSeconds(
            index=values["index_seconds"], sample=values["sample_seconds"], demux=values["demux_seconds"],
            decode=values["decode_seconds"], convert=values["convert_seconds"], build=values["build_seconds"],
            queue=values["queue_seconds"], consumer_wait=values["consumer_wait_seconds"], active=active,
        ),
        frames=FrameCounts(decoded=values["packets_sent"], delivered=values["frames_delivered"]),
        decode_workers=decode_workers,
        nvdec_decoders=decoders["nvdec"].workers if "nvdec" in decoders else 0,
        decode_workers_busy=busy,
        fallback_videos=values["fallback_videos"],
        skipped=SkippedVideos(clips=values["skipped_clips"], videos=skipped_videos),
        memory=LoaderMemory(
            estimate_bytes=estimate_bytes,
            in_use_bytes=max(0, own_bytes(now, device) - base) if now else 0,
            peak_bytes=max(0, values["memory_own_peak"] - base) if now else 0,
            gpu={name: now[name] for name in _GPU_FIGURES if name in now},
            gpu_peak={name: peak[name] for name in _GPU_FIGURES if name in peak},
        ),
        decoders=decoders,
        remote_reads=dict(remote_reads or {}),
        chosen=dict(chosen or {}),
        working=dict(working or {}),
        pacing=list(pacing or []),
        kept_batches=kept_batches,
    )


def _short_bytes(count: int) -> str:
    """Bytes in one short figure for the one-line repr (:func:`vclip.format_bytes` gives every unit)."""
    return f"{count / 2**30:.2f} GiB" if count >= 2**30 else f"{count / 2**20:.1f} MiB"


def _percent(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%" if whole > 0 else "0%"


def epoch_summary(epoch: int, start: LoaderStats, end: LoaderStats) -> str:
    """One line about an epoch from the loader's stats taken at its start and its end."""
    seconds = end.seconds.active - start.seconds.active
    clips = end.clips - start.clips
    waited = end.seconds.consumer_wait - start.seconds.consumer_wait
    decoded = end.frames.decoded - start.frames.decoded
    delivered = end.frames.delivered - start.frames.delivered
    skipped = end.skipped.clips - start.skipped.clips
    return (
        f"vclip loader epoch {epoch}: {end.batches - start.batches} batches, {clips} clips in {seconds:.2f} s "
        f"({clips / max(seconds, 1e-9):.1f} clips/s); waited {waited:.2f} s for batches "
        f"({_percent(waited, seconds)}); {decoded / max(delivered, 1):.2f} decoded frames per delivered "
        f"frame; {skipped} clips replaced ({len(end.skipped.videos)} bad videos); "
        f"memory peak {format_bytes(end.memory.peak_bytes)}, estimate {format_bytes(end.memory.estimate_bytes)}"
    )
