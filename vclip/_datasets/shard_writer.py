"""Writing WebDataset shards: videos (with their labels) into tar shards of a bounded size, each
video moved to a faststart MP4 where its ``moov`` atom came after its data (so a member is read by
byte range without a trip to the end), a ``wds2idx`` member index beside every shard, and a ``wids``
dataset description of all of them.

Only videos go into shards (:func:`vclip._datasets.shard_videos.checked_video`): anything else is
skipped with its reason. Shards are written in the source's order, one sample per video: ``KEY.EXT`` (the video, its own
extension), ``KEY.cls`` (the label as text, when it has one) and ``KEY.json`` (``label``,
``class_name``, ``source``: where the video came from, and ``start``/``end`` for a segment). Keys
count up across shards (``000000000``...). Member headers carry no time or owner, so the same
source gives the same bytes.
"""

from __future__ import annotations

import io
import json
import os
import re
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .._bytes.shards import DESCRIPTION_NAME
from .._bytes.sources import open_binary
from .._bytes.tar import TarMember, format_member_index
from .._outputs.files import written_whole
from ..errors import ArgumentError, VideoError
from .inputs import LabeledVideo
from .shard_videos import checked_video, stored_video

__all__ = ["ShardWriteResult", "SourceVideo", "shard_path_pattern", "write_video_shards"]

_PLACEHOLDER = re.compile(r"\{(0+)\}|%0?(\d*)d")


@dataclass(frozen=True)
class SourceVideo:
    """A video to write: its name (any path, URL or slice name), label (None: none) and class name."""

    video: LabeledVideo
    has_label: bool
    class_name: str | None


@dataclass(frozen=True)
class ShardWriteResult:
    """What :func:`vclip.webdataset.write_shards` wrote.

    Attributes:
        shards: The shard files, in order.
        index_files: The ``wds2idx`` member index of each shard.
        description: The ``wids`` dataset description (``shardindex.json`` beside the shards).
        videos: Videos written.
        remuxed: Videos rewritten as faststart MP4s (their ``moov`` came after their data).
        skipped: ``(video, problem)`` of each video that could not be written.
        bytes: Total size of the shards.
        seconds: Wall time.
    """

    shards: tuple[str, ...]
    index_files: tuple[str, ...]
    description: str
    videos: int
    remuxed: int
    skipped: tuple[tuple[str, str], ...]
    bytes: int
    seconds: float


def shard_path_pattern(out: str | os.PathLike) -> Callable[[int], str]:
    """The shard file of number ``n`` for ``out`` (``"out/shard-{000000}.tar"``: zero-padded to the
    width of the braces; ``%06d`` works too).

    Raises:
        ArgumentError: ``out`` has no such placeholder, or more than one.
    """
    text = os.fspath(out)
    found = list(_PLACEHOLDER.finditer(text))
    if len(found) != 1:
        raise ArgumentError(f"out ({text!r}) must hold one shard-number placeholder, e.g. "
                            "'out/shard-{000000}.tar' (or %06d)")
    match = found[0]
    width = len(match.group(1)) if match.group(1) else int(match.group(2) or 0)
    return lambda number: text[:match.start()] + f"{number:0{width}d}" + text[match.end():]


def _stored_bytes(size: int) -> int:
    """Bytes a member of ``size`` bytes takes in a tar archive: its header and its padded data."""
    return tarfile.BLOCKSIZE + size + (-size % tarfile.BLOCKSIZE)


def _add_member(tar: tarfile.TarFile, name: str, data: bytes | str, size: int) -> TarMember:
    """Add one member (``data``: its bytes, or the name of a video to copy) with no time or owner (the
    same input gives the same bytes); returns where its data lies."""
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = size, 0, 0o644
    if isinstance(data, bytes):
        tar.addfile(info, io.BytesIO(data))
    else:
        with open_binary(data) as file:
            tar.addfile(info, file)
    offset = tar.offset - size - (-size % tarfile.BLOCKSIZE)
    return TarMember(name, offset, size)


def write_video_shards(
    videos: list[SourceVideo],
    out: str | os.PathLike,
    *,
    max_size: int,
    max_count: int | None,
    class_names: tuple[str, ...] | None,
    overwrite: bool,
    on_video: Callable[[], None] | None = None,
) -> ShardWriteResult:
    """Write ``videos`` into shards named by ``out`` (see :func:`vclip.webdataset.write_shards`).

    Raises:
        ArgumentError: ``out`` without a placeholder; shards or an index already there and not
            ``overwrite``.
        OSError: A shard cannot be written.
    """
    started = time.perf_counter()
    shard_path = shard_path_pattern(out)
    folder = Path(shard_path(0)).parent
    if not overwrite:
        for existing in (shard_path(0), str(folder / DESCRIPTION_NAME)):
            if os.path.exists(existing):
                raise ArgumentError(f"out: {existing} exists; pass overwrite=True (--overwrite) to replace the shards")
    folder.mkdir(parents=True, exist_ok=True)
    shards: list[str] = []
    indexes: list[str] = []
    counts: list[int] = []
    skipped: list[tuple[str, str]] = []
    remuxed = 0
    tar: tarfile.TarFile | None = None
    samples: list[list[tuple[str, TarMember]]] = []
    key = 0
    with tempfile.TemporaryDirectory(prefix="vclip-shard-") as scratch_folder:
        scratch = os.path.join(scratch_folder, "faststart.mp4")
        try:
            for source in videos:
                name = source.video.path
                try:
                    extension = checked_video(name)
                    video = stored_video(name, extension, scratch)
                    data, size, was_remuxed = video.source, video.size, video.remuxed
                except VideoError as error:
                    skipped.append((name, error.problem))
                    if on_video:
                        on_video()
                    continue
                members = _sample_members(source, name)
                sample_bytes = _stored_bytes(size) + sum(_stored_bytes(len(payload)) for _, payload in members)
                if tar is not None and (tar.offset + sample_bytes + tarfile.RECORDSIZE > max_size or
                                        (max_count is not None and len(samples) >= max_count)):
                    _finish(tar, shards[-1], samples, indexes)
                    counts.append(len(samples))
                    tar, samples = None, []
                if tar is None:
                    shards.append(shard_path(len(shards)))
                    tar = tarfile.open(shards[-1] + ".partial", "w", format=tarfile.PAX_FORMAT)
                sample = [(extension, _add_member(tar, f"{key:09d}.{extension}", data, size))]
                sample += [(extension, _add_member(tar, f"{key:09d}.{extension}", payload, len(payload)))
                           for extension, payload in members]
                samples.append(sample)
                remuxed += was_remuxed
                key += 1
                if on_video:
                    on_video()
            if tar is not None:
                _finish(tar, shards[-1], samples, indexes)
                counts.append(len(samples))
                tar = None
        finally:
            if tar is not None:
                tar.close()
                os.unlink(shards[-1] + ".partial")
    description = str(folder / DESCRIPTION_NAME)
    _write_description(description, shards, counts, class_names)
    return ShardWriteResult(
        shards=tuple(shards), index_files=tuple(indexes), description=description, videos=key, remuxed=remuxed,
        skipped=tuple(skipped), bytes=sum(os.path.getsize(shard) for shard in shards),
        seconds=time.perf_counter() - started,
    )


def _sample_members(source: SourceVideo, name: str) -> list[tuple[str, bytes]]:
    """The label and JSON members beside a video: ``(extension, data)``."""
    video = source.video
    facts: dict = {"source": name}
    if source.has_label:
        facts["label"] = video.label
    if source.class_name is not None:
        facts["class_name"] = source.class_name
    if video.start is not None:
        facts["start"] = video.start
    if video.end is not None:
        facts["end"] = video.end
    members = [("cls", f"{video.label}".encode())] if source.has_label else []
    return members + [("json", json.dumps(facts, sort_keys=True, ensure_ascii=False).encode())]


def _finish(tar: tarfile.TarFile, shard: str, samples: list[list[tuple[str, TarMember]]], indexes: list[str]) -> None:
    """Close a shard under its final name and write its member index beside it."""
    tar.close()
    os.replace(shard + ".partial", shard)
    index = shard[:-4] + ".idx" if shard.lower().endswith(".tar") else shard + ".idx"
    with written_whole(index) as temporary:
        Path(temporary).write_text(format_member_index(samples))
    indexes.append(index)


def _write_description(path: str, shards: list[str], counts: list[int], class_names: tuple[str, ...] | None) -> None:
    folder = os.path.dirname(path)
    description: dict = {
        "__kind__": "wids-shard-index-v1", "wids_version": 1, "name": Path(shards[0]).stem if shards else "",
        "shardlist": [{"url": os.path.relpath(shard, folder), "nsamples": count, "filesize": os.path.getsize(shard)}
                      for shard, count in zip(shards, counts)],
    }
    if class_names is not None:
        description["class_names"] = list(class_names)
    Path(path).write_text(json.dumps(description, indent=2) + "\n")
