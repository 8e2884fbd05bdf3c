"""Writing WebDataset shards: videos (with their labels) into tar shards of a bounded size, each
video moved to a faststart MP4 where its ``moov`` atom came after its data (so a member is read by
byte range without a trip to the end), a ``wds2idx`` member index beside every shard, and a ``wids``
dataset description of all of them.

Shards are written in the source's order, one sample per video: ``KEY.EXT`` (the video, its own
extension), ``KEY.cls`` (the label as text, when it has one) and ``KEY.json`` (``label``,
``class_name``, ``source``: where the video came from, and ``start``/``end`` for a segment). Keys
count up across shards (``000000000``...). Member headers carry no time or owner, so the same
source gives the same bytes.

Only videos go into shards (:func:`vclip._datasets.shard_videos.checked_video`); anything else is
skipped with its reason, as is a video that fails while it is copied (its sample is taken back
out of the shard). The files are written in a private staging folder and swapped in at the end
(:mod:`vclip._datasets.shard_files`); an output that would replace a file the source reads is
refused before anything is written, and a write that fails (a full disk) leaves nothing behind.
"""

from __future__ import annotations

import json
import os
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from .._bytes.descriptions import DESCRIPTION_NAME
from .._bytes.sources import is_local, split_slice_name
from .._bytes.tar import TarMember, format_member_index
from ..errors import ArgumentError, CorruptVideoError, VideoError, os_reason
from .inputs import LabeledVideo
from .shard_files import ShardFamily, Staging, index_name, synced
from .shard_videos import StoredVideo, checked_video, stored_video

__all__ = ["ShardWriteResult", "SourceVideo", "write_video_shards"]

_COPY_PIECE = 1 << 20  # a video is copied into its shard this much at a time


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
        description: The ``wids`` dataset description (``shardindex.json`` beside the shards);
            empty when no video could be written (then nothing was written or removed).
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


class _TarWriter:
    """One shard being written: PAX tar members appended to ``file``, and taken back out."""

    def __init__(self, file: BinaryIO):
        self.file, self.offset = file, 0

    def add(self, name: str, data: bytes | StoredVideo) -> TarMember:
        """Append a member (``data``: its bytes, or a video to copy) with no time or owner.

        Raises:
            VideoError: The video cannot be read (the shard is then as before after :meth:`take_back`).
            OSError: The shard cannot be written.
        """
        size = len(data) if isinstance(data, bytes) else data.size
        info = tarfile.TarInfo(name)
        info.size, info.mtime, info.mode = size, 0, 0o644
        header = info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
        self.file.write(header)
        start = self.offset + len(header)
        if isinstance(data, bytes):
            self.file.write(data)
        else:
            _copy(data, self.file)
        self.file.write(bytes(-size % tarfile.BLOCKSIZE))
        self.offset = start + size + (-size % tarfile.BLOCKSIZE)
        return TarMember(name, start, size)

    def take_back(self, offset: int) -> None:
        """Cut the shard back to ``offset`` (the start of a sample that could not be written)."""
        self.file.seek(offset)
        self.file.truncate()
        self.offset = offset

    def close(self) -> int:
        """End the archive (two zero blocks, padded to a tar record), sync and close; its size."""
        end = self.offset + 2 * tarfile.BLOCKSIZE
        end += -end % tarfile.RECORDSIZE
        self.file.seek(self.offset)
        self.file.write(bytes(end - self.offset))
        synced(self.file)
        self.file.close()
        return end


def _copy(video: StoredVideo, target: BinaryIO) -> None:
    """Copy ``video.size`` bytes of the video into ``target``, in pieces.

    Raises:
        VideoError: The video cannot be read, or ends early (it changed while it was copied).
    """
    source = video.open()
    try:
        left = video.size
        while left:
            piece = source.read(min(left, _COPY_PIECE))
            if not piece:
                raise CorruptVideoError(video.name, f"ended {left:,} bytes early while it was copied (it changed?)")
            target.write(piece)
            left -= len(piece)
    finally:
        source.close()


def stored_bytes(size: int) -> int:
    """Bytes a member of ``size`` bytes takes in a tar archive: its header and its padded data."""
    return tarfile.BLOCKSIZE + size + (-size % tarfile.BLOCKSIZE)


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
        ArgumentError: ``out`` without a placeholder, or with one in a folder's name; files of the
            shard set already there and not ``overwrite``; an output that would replace a file the
            source reads.
        OSError: The shards cannot be written (a full disk): nothing of the run is left, and the
            files that were there are unchanged (the message says so, or what is missing).
    """
    started = time.perf_counter()
    family = ShardFamily(out)
    existing = family.existing()
    if existing and not overwrite:
        more = f" (and {len(existing) - 1} more files of this shard set)" if len(existing) > 1 else ""
        raise ArgumentError(f"out: {existing[0]} exists{more}; pass overwrite=True (--overwrite) to replace the "
                            "shard set")
    _refuse_overlap(videos, existing)
    try:
        os.makedirs(family.folder, exist_ok=True)
        staging = Staging(family.folder)
    except OSError as error:
        raise OSError(error.errno, f"out: the folder {family.folder} cannot be used ({os_reason(error)})") from None
    try:
        written = _write_staged(videos, staging, family.shard, max_size=max_size, max_count=max_count,
                                class_names=class_names, on_video=on_video)
    except OSError as error:
        staging.close()
        if isinstance(error, VideoError):
            raise
        raise OSError(error.errno, f"writing the shards in {family.folder} failed ({os_reason(error)}); nothing "
                                   "of this run was kept, the files there are unchanged") from None
    except BaseException:
        staging.close()
        raise
    try:
        if sum(written[3]):  # a run that wrote no video replaces nothing
            staging.swap(existing)
    except OSError as error:
        raise OSError(error.errno, f"moving the new shards into {family.folder} failed ({os_reason(error)}); the "
                                   f"shard set there is incomplete: write it again") from None
    finally:
        staging.close()
    shards, indexes, description, counts, skipped, remuxed, size = written
    if not sum(counts):
        description = ""
    return ShardWriteResult(
        shards=tuple(shards), index_files=tuple(indexes), description=description, videos=sum(counts),
        remuxed=remuxed, skipped=tuple(skipped), bytes=size, seconds=time.perf_counter() - started,
    )


def _write_staged(videos: list[SourceVideo], staging: Staging, shard_path: Callable[[int], str], *, max_size: int,
                  max_count: int | None, class_names: tuple[str, ...] | None,
                  on_video: Callable[[], None] | None) -> tuple:
    """Write every shard, index and the description into ``staging``; what was written."""
    shards: list[str] = []
    counts: list[int] = []
    skipped: list[tuple[str, str]] = []
    remuxed = total = 0
    tar: _TarWriter | None = None
    samples: list[list[tuple[str, TarMember]]] = []
    scratch = staging.scratch("faststart.mp4")
    for source in videos:
        name = source.video.path
        try:
            extension = checked_video(name)
            video = stored_video(name, extension, scratch)
        except VideoError as error:
            skipped.append((name, error.problem))
            if on_video:
                on_video()
            continue
        members = _sample_members(source, name)
        sample_bytes = stored_bytes(video.size) + sum(stored_bytes(len(payload)) for _, payload in members)
        if tar is not None and (tar.offset + sample_bytes + tarfile.RECORDSIZE > max_size or
                                (max_count is not None and len(samples) >= max_count)):
            total += _finish(tar, shards[-1], samples, staging)
            counts.append(len(samples))
            tar, samples = None, []
        if tar is None:
            shards.append(shard_path(len(shards)))
            tar = _TarWriter(staging.create(shards[-1]))
        key = f"{sum(counts) + len(samples):09d}"
        start = tar.offset
        try:
            sample = [(extension, tar.add(f"{key}.{extension}", video))]
        except VideoError as error:  # read while copied: the sample is taken back out
            tar.take_back(start)
            skipped.append((name, error.problem))
            if on_video:
                on_video()
            continue
        sample += [(member, tar.add(f"{key}.{member}", payload)) for member, payload in members]
        samples.append(sample)
        remuxed += video.remuxed
        if on_video:
            on_video()
    if tar is not None:
        total += _finish(tar, shards[-1], samples, staging)
        counts.append(len(samples))
    description = os.path.join(os.path.dirname(shard_path(0)), DESCRIPTION_NAME)
    with staging.create(description) as file:
        file.write(_description(shards, counts, class_names, staging).encode())
        synced(file)
    return shards, [index_name(shard) for shard in shards], description, counts, skipped, remuxed, total


def _sample_members(source: SourceVideo, name: str) -> list[tuple[str, bytes]]:
    """The label and JSON members beside a video: ``(extension, data)``. A name whose bytes are not
    UTF-8 (a file system's) is written with them as ``\\xNN``."""
    video = source.video
    facts: dict = {"source": _text(name)}
    if source.has_label:
        facts["label"] = video.label
    if source.class_name is not None:
        facts["class_name"] = _text(source.class_name)
    if video.start is not None:
        facts["start"] = video.start
    if video.end is not None:
        facts["end"] = video.end
    members = [("cls", f"{video.label}".encode())] if source.has_label else []
    return members + [("json", json.dumps(facts, sort_keys=True, ensure_ascii=False).encode())]


def _text(name: str) -> str:
    """``name`` as UTF-8 text: undecodable file-name bytes (surrogate escapes) as ``\\xNN``."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _finish(tar: _TarWriter, shard: str, samples: list[list[tuple[str, TarMember]]], staging: Staging) -> int:
    """End a shard and write its member index beside it; the shard's size."""
    size = tar.close()
    with staging.create(index_name(shard)) as file:
        file.write(format_member_index(samples).encode("utf-8", "surrogateescape"))
        synced(file)
    return size


def _description(shards: list[str], counts: list[int], class_names: tuple[str, ...] | None,
                 staging: Staging) -> str:
    description: dict = {
        "__kind__": "wids-shard-index-v1", "wids_version": 1, "name": Path(shards[0]).stem if shards else "",
        "shardlist": [{"url": os.path.basename(shard), "nsamples": count,
                       "filesize": staging.size_of(shard)} for shard, count in zip(shards, counts)],
    }
    if class_names is not None:
        description["class_names"] = [_text(name) for name in class_names]
    return json.dumps(description, indent=2) + "\n"


def _refuse_overlap(videos: list[SourceVideo], existing: list[str]) -> None:
    """Refuse an output whose files (those there now, which the run replaces or removes) include a
    file the source reads (a video, or the shard that holds it), by file identity, links included.

    Raises:
        ArgumentError: Naming the file.
    """
    replaced = {}
    for path in existing:
        try:
            stat = os.stat(path)
        except OSError:
            continue
        replaced[(stat.st_dev, stat.st_ino)] = path
    if not replaced:
        return
    seen = set()
    for source in videos:
        parts = split_slice_name(source.video.path)
        read = parts[0] if parts is not None else source.video.path
        if read in seen or not is_local(read):
            continue
        seen.add(read)
        try:
            stat = os.stat(read)
        except OSError:
            continue
        target = replaced.get((stat.st_dev, stat.st_ino))
        if target is not None:
            through = "" if os.path.abspath(read) == target else f" (as {read})"
            raise ArgumentError(f"out would replace {target}, which the source reads{through}; write the shards "
                                "elsewhere")
