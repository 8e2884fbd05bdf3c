"""A ClipLoader's audio: each batch's clips decoded beside their frames, in helper processes
(:mod:`vclip._loader.audio_processes`, off the loader's interpreter lock), into a pooled host
buffer (pinned when the loader runs on the GPU), and handed over with the batch.

The audio of a clip is decoded while its frames are; a video whose audio cannot be read fails its
clips like one whose frames cannot (replaced, or raised, as ``on_error`` says). Videos only this
process can read (bytes, file objects) have their audio decoded on its own threads. A batch's audio
buffer goes with its frame buffer's slot, so it is written again only when the frames' buffer is:
after the consumer has moved past the batch (on the GPU, after the work it queued on its stream,
which includes the copy of the audio to the device).
"""

from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import torch

from .._audio.spans import clip_spans
from .._bytes.sources import is_shareable
from .._machine import usable_cores
from ..audio import AudioSpec, empty_audio
from ..sampling import ClipSampler
from .audio_processes import AudioHelpers, AudioRequest, decode_clip_audio
from .handoff import storage_uses, views_alive

__all__ = ["LoaderAudio", "BatchAudio", "AudioBuffers", "AUDIO_PROCESSES"]

AUDIO_PROCESSES = max(1, min(4, usable_cores() // 4))
"""Helper processes that decode a loader's audio (one clip takes about 2 ms of one core)."""


class LoaderAudio:
    """The audio settings of a loader and the helpers that decode it (their own per process).

    Args:
        spec: What audio each clip gets.
        sampler: The loader's sampler (the seconds between positions, for clips in seconds).
        samples: ``S``, samples of one span in a batch (the longest any clip of the dataset has).
        positions: Positions per clip (``T``).
        cache_dir: Folder of the on-disk index cache (audio indexes sit beside the video indexes).
    """

    def __init__(self, spec: AudioSpec, sampler: ClipSampler, *, samples: int, positions: int,
                 cache_dir: str | os.PathLike | None):
        self.spec = spec
        self.sampler = sampler
        self.samples = samples
        self.positions = positions
        self.cache_dir = None if cache_dir is None else os.fspath(cache_dir)
        self._pool: ThreadPoolExecutor | None = None  # one thread per helper, waiting for its answers
        self._helpers: AudioHelpers | None = None

    def batch_shape(self, batch_size: int) -> tuple[int, ...]:
        return empty_audio(self.spec, batch_size, self.positions, 0).shape[:-1] + (self.samples,)

    def batch(self, output: np.ndarray) -> BatchAudio:
        """The audio of one batch, written into ``output`` (``batch_shape``)."""
        if self._pool is None:
            self._helpers = AudioHelpers(AUDIO_PROCESSES)
            self._pool = ThreadPoolExecutor(AUDIO_PROCESSES, thread_name_prefix="vclip-audio")
        assert self._helpers is not None
        return BatchAudio(self, self._pool, self._helpers, output)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self._helpers is not None:
            self._helpers.close()
            self._helpers = None

    def __getstate__(self) -> dict:  # DataLoader workers start their own helpers
        return {**self.__dict__, "_pool": None, "_helpers": None}


class BatchAudio:
    """The audio of the clips of one batch: started per round of decode jobs, its errors merged
    into the jobs' errors. ``lengths`` and ``has_audio`` hold what the clips got."""

    def __init__(self, audio: LoaderAudio, pool: ThreadPoolExecutor, helpers: AudioHelpers, output: np.ndarray):
        self._audio = audio
        self._pool = pool
        self._helpers = helpers
        self.output = output
        clips = output.shape[0]
        self.lengths = np.zeros((clips,) if audio.spec.span == "clip" else (clips, audio.positions), dtype=np.int64)
        self.has_audio = np.zeros(clips, dtype=bool)

    def start(self, clips: list, positions: list[int]) -> dict[int, Future]:
        """Decode the audio of ``clips[p]`` for each ``p`` of ``positions`` (``_Clip`` values of the
        batch builder), in the helpers."""
        return {position: self._pool.submit(self._decode, clips[position], position) for position in positions}

    def _decode(self, clip, position: int) -> None:
        audio = self._audio
        request = AudioRequest(clip.index.path, clip_spans(clip.index, clip.drawn, audio.sampler, clip.segment),
                               audio.spec, audio.positions, audio.samples, audio.cache_dir)
        output = self.output[position:position + 1]
        if is_shareable(request.path):
            lengths, has_audio = self._helpers.decode(request, output)
        else:  # held in this process's memory: decoded here
            _, lengths, has_audio = decode_clip_audio(request, output)
        self.lengths[position] = lengths
        self.has_audio[position] = has_audio

    def errors(self, pending: dict[int, Future], jobs: list, errors: list) -> list:
        """``errors`` (one per job) with each job whose frames decoded but some clip's audio did not
        failing with that clip's error."""
        merged = list(errors)
        for number, job in enumerate(jobs):
            for target in job.targets:
                failure = pending[target.slot].exception()  # a VideoError (see decode_clip_audio)
                if failure is not None and merged[number] is None:
                    merged[number] = failure
        return merged


class AudioBuffers:
    """One host audio buffer per slot of the loader's ring (pinned for a GPU loader), made on first use."""

    def __init__(self, count: int, shape: tuple[int, ...], dtype: str, pinned: bool):
        self._shape, self._dtype, self._pinned = shape, getattr(torch, dtype), pinned
        self._tensors: list[torch.Tensor | None] = [None] * count
        self._uses: list[int | None] = [None] * count

    def array(self, slot: int) -> np.ndarray:
        tensor = self._tensors[slot]
        if tensor is None:
            tensor = self._tensors[slot] = torch.zeros(self._shape, dtype=self._dtype, pin_memory=self._pinned)
            self._uses[slot] = storage_uses(tensor)
        return tensor.numpy()

    def kept(self, slot: int) -> bool:
        """Whether a batch handed over from ``slot`` still holds a view of its audio (CPU batches only)."""
        return views_alive(self._tensors[slot], self._uses[slot])

    def forget(self, slot: int) -> None:
        """Leave ``slot``'s buffer to the batch that keeps it; the next use makes a new one."""
        self._tensors[slot] = None

    def hand_over(self, slot: int, count: int, device: torch.device | None) -> torch.Tensor:
        """The audio of the batch in ``slot`` (its first ``count`` clips) for the consumer: on the
        CPU a view of the buffer; on the GPU a copy, queued on the consumer's current stream."""
        tensor = self._tensors[slot]
        assert tensor is not None  # written before the batch was handed over
        tensor = tensor[:count]
        return tensor if device is None else tensor.to(device, non_blocking=True)

    @property
    def allocated_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self._tensors if t is not None)
