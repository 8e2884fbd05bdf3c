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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._datasets.inputs import LabeledVideo
from ..errors import ArgumentError, check_integer

__all__ = ["LoaderState", "check_resumable", "dataset_fingerprint", "fingerprint_parts"]

_DATASET_PARTS = {  # what each part of the dataset's fingerprint covers, for messages
    "videos": "videos (their paths and order)", "labels": "labels", "segments": "segments",
    "clip_counts": "clips per video (what the sampler finds in each video)",
}

FORMAT = "vclip.ClipLoader/1"


def dataset_fingerprint(videos: Sequence[LabeledVideo], clip_counts: Sequence[int], options: dict[str, Any]) -> str:
    """A digest of the videos (path, label, segment, clips per epoch) and of ``options`` (plain values)."""
    digest = hashlib.blake2b(json.dumps(options, sort_keys=True, default=repr).encode(), digest_size=16)
    for video, count in zip(videos, clip_counts):
        window = "" if video.segment is None else f"\0{video.start}\0{video.end}"
        digest.update(f"{video.path}\0{video.label}{window}\0{count}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def fingerprint_parts(videos: Sequence[LabeledVideo], clip_counts: Sequence[int],
                      options: dict[str, Any]) -> dict[str, str]:
    """A short digest of each part :func:`dataset_fingerprint` covers: each of ``options``, the
    videos' paths, labels, segments and clip counts; a state that does not load names the parts
    that differ."""
    def digest(value: Any) -> str:
        text = json.dumps(value, sort_keys=True, default=repr)
        return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=8).hexdigest()

    return {
        **{name: digest(value) for name, value in options.items()},
        "videos": digest([video.path for video in videos]), "labels": digest([video.label for video in videos]),
        "segments": digest([video.segment for video in videos]), "clip_counts": digest(list(clip_counts)),
    }


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
        parts: :func:`fingerprint_parts` of that loader (empty in states saved before they were kept).
    """

    epoch: int
    batches_delivered: int
    seed: int
    shard: tuple[int, int]
    bad_videos: tuple[tuple[int, int, str], ...]
    fingerprint: str
    parts: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        values = dataclasses.asdict(self)
        values["shard"] = list(self.shard)
        values["parts"] = dict(self.parts)
        values["bad_videos"] = [list(entry) for entry in self.bad_videos]
        return {"format": FORMAT, **values}

    @classmethod
    def from_dict(cls, state: Any) -> LoaderState:
        """Read a dict made by :meth:`to_dict` (also after a JSON round trip).

        Raises:
            ArgumentError: Not such a dict, or one whose counts are not integers in range (a negative
                epoch or batch count, an infinite one, a shard outside its count).
        """
        if not isinstance(state, dict) or state.get("format") != FORMAT:
            raise ArgumentError(
                f"state ({_short(state)}) must be a dict made by ClipLoader.state_dict() (format {FORMAT!r})"
            )
        try:
            shard_id, num_shards = state["shard"]
            num_shards = check_integer("state['shard'][1]", num_shards, minimum=1)
            parts = state.get("parts", {})
            if not isinstance(parts, dict):
                raise TypeError(f"parts is a {type(parts).__name__}, not a dict")
            return cls(
                epoch=check_integer("state['epoch']", state["epoch"], minimum=0),
                batches_delivered=check_integer("state['batches_delivered']", state["batches_delivered"], minimum=0),
                seed=check_integer("state['seed']", state["seed"], minimum=0),
                shard=(check_integer("state['shard'][0]", shard_id, minimum=0, maximum=num_shards - 1), num_shards),
                bad_videos=tuple(
                    (check_integer("a bad video's number", video, minimum=0),
                     check_integer("a bad video's epoch", epoch, minimum=-1), str(problem))
                    for video, epoch, problem in state["bad_videos"]
                ),
                fingerprint=str(state["fingerprint"]),
                parts={str(name): str(digest) for name, digest in parts.items()},
            )
        except (KeyError, TypeError, ValueError) as error:
            if isinstance(error, ArgumentError):
                raise ArgumentError(f"state is damaged: {error}") from None
            raise ArgumentError(f"state ({_short(state)}) is damaged: {type(error).__name__}: {error}") from None


def check_resumable(loaded: LoaderState, *, seed: int, shard: tuple[int, int], fingerprint: str,
                    parts: dict[str, str], num_videos: int, batches_in: Callable[[int], int]) -> None:
    """Refuse ``loaded`` where this loader (its ``seed``, ``shard``, ``fingerprint`` and ``parts``, a
    dataset of ``num_videos``, ``batches_in(epoch)`` batches an epoch) cannot resume it, saying
    what differs.

    Raises:
        ArgumentError: Another seed or shard; another dataset or batch option (named when the state
            kept the parts of its fingerprint); a bad video this dataset lacks; more batches
            delivered than the epoch has.
    """
    if (loaded.seed, loaded.shard) != (seed, shard):
        raise ArgumentError(
            f"state (seed={loaded.seed}, shard {loaded.shard[0]} of {loaded.shard[1]}) was saved by another "
            f"loader than this one (seed={seed}, shard {shard[0]} of {shard[1]}); resume with the same seed and, "
            "per rank, the same shard"
        )
    if loaded.fingerprint != fingerprint:
        names = [*_DATASET_PARTS, *(name for name in {**parts, **loaded.parts} if name not in _DATASET_PARTS)]
        differing = [name for name in names if parts.get(name) != loaded.parts.get(name)]
        if "videos" in differing:  # other videos: their labels, segments and clips differ with them
            differing = [name for name in differing if name == "videos" or name not in _DATASET_PARTS]
        if loaded.parts and differing:
            words = " and ".join(", ".join(_DATASET_PARTS.get(name, name) for name in differing).rsplit(", ", 1))
            raise ArgumentError(f"state was saved by a loader with other {words} than this one (the rest matches); "
                                f"resume with the {words} of the run that saved it")
        raise ArgumentError(
            f"state (fingerprint {loaded.fingerprint}) was saved by a loader over another dataset or with other "
            f"batch options (this one: {fingerprint}); the videos, labels, sampler, transform, batch_size, "
            "clips_per_video, shuffle, drop_last, even_shards, mixed_sizes, max_lead_frames and evaluation must be "
            "those of the run that saved it"
        )
    unknown = [video for video, _, _ in loaded.bad_videos if video >= num_videos]
    if unknown:
        raise ArgumentError(f"state names bad video {unknown[0]}, which this dataset of {num_videos} videos lacks")
    total = batches_in(loaded.epoch)
    if loaded.batches_delivered > total:
        raise ArgumentError(f"state says {loaded.batches_delivered} batches of epoch {loaded.epoch} were delivered, "
                            f"and this loader's epoch {loaded.epoch} has {total}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."
