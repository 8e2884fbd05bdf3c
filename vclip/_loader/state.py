"""A ClipLoader's resumable state: where an epoch stopped, small and JSON-able.

Every batch is a function of (seed, epoch, batch number, the videos found bad in earlier epochs),
so a loader that knows the epoch, the batches already delivered and the bad videos found so far
(with their epochs) builds exactly the batches an uninterrupted epoch would have built. A fingerprint of the dataset
and of the options that shape batches makes a state from another dataset or configuration refuse
to load.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._datasets.inputs import LabeledVideo
from ..errors import ArgumentError

__all__ = ["LoaderState", "dataset_fingerprint"]

FORMAT = "vclip.ClipLoader/1"


def dataset_fingerprint(videos: Sequence[LabeledVideo], clip_counts: Sequence[int], options: dict[str, Any]) -> str:
    """A digest of the videos (path, label, segment, clips per epoch) and of ``options`` (plain values)."""
    digest = hashlib.blake2b(json.dumps(options, sort_keys=True, default=repr).encode(), digest_size=16)
    for video, count in zip(videos, clip_counts):
        window = "" if video.segment is None else f"\0{video.start}\0{video.end}"
        digest.update(f"{video.path}\0{video.label}{window}\0{count}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


@dataclass(frozen=True)
class LoaderState:
    """Where a loader's epoch stands.

    Attributes:
        epoch: The epoch of the pass.
        batches_delivered: Batches of that epoch already delivered (the pass resumes after them).
        seed: The loader's seed.
        shard: ``[shard_id, num_shards]`` of the process.
        bad_videos: ``[video id, epoch found (-1: at construction), problem]`` of the videos
            found bad so far.
        fingerprint: :func:`dataset_fingerprint` of the loader that saved it.
    """

    epoch: int
    batches_delivered: int
    seed: int
    shard: tuple[int, int]
    bad_videos: tuple[tuple[int, int, str], ...]
    fingerprint: str

    def to_dict(self) -> dict[str, Any]:
        values = dataclasses.asdict(self)
        values["shard"] = list(self.shard)
        values["bad_videos"] = [list(entry) for entry in self.bad_videos]
        return {"format": FORMAT, **values}

    @classmethod
    def from_dict(cls, state: Any) -> LoaderState:
        """Read a dict made by :meth:`to_dict` (also after a JSON round trip).

        Raises:
            ArgumentError: Not such a dict.
        """
        if not isinstance(state, dict) or state.get("format") != FORMAT:
            raise ArgumentError(
                f"state ({_short(state)}) must be a dict made by ClipLoader.state_dict() (format {FORMAT!r})"
            )
        try:
            shard_id, num_shards = (int(value) for value in state["shard"])
            return cls(
                epoch=int(state["epoch"]),
                batches_delivered=int(state["batches_delivered"]),
                seed=int(state["seed"]),
                shard=(shard_id, num_shards),
                bad_videos=tuple(
                    (int(video), int(epoch), str(problem)) for video, epoch, problem in state["bad_videos"]
                ),
                fingerprint=str(state["fingerprint"]),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ArgumentError(f"state ({_short(state)}) is damaged: {type(error).__name__}: {error}") from None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."
