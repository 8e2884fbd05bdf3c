"""A video's scene signals: every frame decoded at the analysis width, chunk by chunk (on several
threads shared by the process where asked), and the features and gap distances of the scene method
computed where the frames are (NumPy on the host, CUDA on the GPU); the tables come back to the host."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from .._index.record import VideoIndex
from .._outputs.images import to_numpy
from .._thread_pools import SharedThreadPool, submitted_ahead
from ..gop import keyframe_chunks
from . import features, features_cuda
from .features import SceneSignals

CHUNK_FRAMES = 1024
"""Frames analysed per decode call (chunks start at keyframes) and per float block."""
MIN_CHUNK_FRAMES = 64
"""The shortest chunk cut for parallel decoding."""

class FrameSource(Protocol):
    """What the analysis reads frames from (a :class:`vclip.VideoDecoder`)."""

    @property
    def index(self) -> VideoIndex: ...

    def get_frames(self, indices: Any, *, scaling_factor: float) -> Any: ...


_pools: dict[int, SharedThreadPool] = {}
"""Threads submitting chunks, per count: shared by every video analysed in the process (kept alive,
so their NVDEC decoders are reused; the threads of ``extract_keyframes_many`` share them too)."""
_pools_lock = threading.Lock()


def session_pool(sessions: int):
    with _pools_lock:
        if sessions not in _pools:  # made once: each pool registers a fork handler
            _pools[sessions] = SharedThreadPool(sessions, "vclip-scene-decode")
        return _pools[sessions].get()


def scene_signals(decoder: FrameSource, analysis_width: int,
                   on_progress: Callable[[int, int], None] | None = None, sessions: int = 0) -> SceneSignals:
    """Decode every frame at ``analysis_width`` pixels across (on the decoder's device, chunk by
    chunk; with ``sessions``, that many chunks at once on threads shared by the process) and compute
    the features and gap distances there; the tables come back to the host.
    ``on_progress(stop, num_frames)`` follows each chunk."""
    index = decoder.index
    scaling_factor = min(1.0, analysis_width / index.width)
    chunk_frames = CHUNK_FRAMES
    if sessions:  # enough chunks for every session, twice over
        chunk_frames = min(CHUNK_FRAMES, max(MIN_CHUNK_FRAMES, -(-index.num_frames // (2 * sessions))))
    chunks = keyframe_chunks(index, chunk_frames)

    def features_of(chunk: tuple[int, int]) -> list[dict]:
        frames = decoder.get_frames(np.arange(*chunk), scaling_factor=scaling_factor).data
        if isinstance(frames, np.ndarray):  # in blocks: float32 copies of bounded size
            blocks = (frames[first:first + CHUNK_FRAMES] for first in range(0, frames.shape[0], CHUNK_FRAMES))
            return [{**features.frame_features(block), "thumbnails": features.thumbnails(block)} for block in blocks]
        found = features_cuda.frame_features(frames, synchronize=True)  # ready for the caller's stream
        return [{**found, "thumbnails": features.thumbnails(to_numpy(frames))}]

    parts: dict[str, list] = {"H": [], "B": [], "mean": [], "dark": [], "thumbnails": []}
    previous = None
    ahead = submitted_ahead(session_pool(sessions), features_of, chunks, 2 * sessions) if sessions else None
    chunk_features = (future.result() for future in ahead) if ahead else (features_of(chunk) for chunk in chunks)
    try:
        for (_, stop), blocks in zip(chunks, chunk_features):
            for block in blocks:
                on_device = features if isinstance(block["H"], np.ndarray) else features_cuda
                tables = on_device.gap_distances(block, previous)
                for name in ("H", "B"):
                    parts[name].append(to_numpy(tables[name]))
                parts["mean"].append(to_numpy(block["mean"]))
                parts["dark"].append(to_numpy(block["dark"]))
                parts["thumbnails"].append(block["thumbnails"])
                previous = on_device.recent_features(previous, block)
            if on_progress is not None:
                on_progress(stop, index.num_frames)
    finally:
        if ahead is not None:
            ahead.close()  # after a failure: the chunks not started are cancelled
    return SceneSignals(
        distances={name: np.concatenate(parts[name], axis=1) for name in ("H", "B")},
        luma_mean=np.concatenate(parts["mean"]).astype(np.float32),
        dark_share=np.concatenate(parts["dark"]).astype(np.float32),
        thumbnails=np.concatenate(parts["thumbnails"]),
    )
