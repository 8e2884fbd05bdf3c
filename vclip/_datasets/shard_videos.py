"""The videos a shard writer stores: each listed file opened as a video first (only videos go into
shards, which is what one publishes), its member extension, and its bytes: as they are, or, for an
MP4 whose ``moov`` atom follows its data, remuxed (no re-encode) with ``movflags=faststart`` so
that a reader finds its index in the first bytes."""

from __future__ import annotations

import errno
import os
import struct
from typing import BinaryIO

import av

from .._bytes.sources import (
    DEMUX_ERRORS,
    demux_failure,
    is_local,
    open_binary,
    open_container,
    open_reader,
    split_slice_name,
)
from ..errors import CorruptVideoError, NotAVideoError, UnreadableVideoError, VideoError, os_reason

__all__ = ["StoredVideo", "checked_video", "member_extension", "needs_faststart", "stored_video"]

_MP4_LIKE = ("mp4", "mov", "m4v")
_TOP_LEVEL_SCAN = 64  # boxes looked at for moov and mdat
_HEAD_BYTES = 1 << 16  # the first bytes, where a faststart MP4 has its moov
_NOT_VIDEO_FORMATS = ("image2", "tty", "bin", "xbin", "adf", "idf")  # FFmpeg's readers of pictures and text
_PACKETS_PROBED = 256  # packets looked at for a first video packet
_EXTENSION_OF_FORMAT = {"mov": "mp4", "matroska": "mkv", "mpegts": "ts"}  # FFmpeg's first format name -> extension
FULL_DISK = frozenset({errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)})
"""errno values of a write that did not fit (a full disk, a file-size limit, a quota)."""


def needs_faststart(head: bytes) -> bool:
    """Whether an MP4 whose first bytes are ``head`` has its ``mdat`` before its ``moov`` (read from
    the top-level boxes; a file whose ``moov`` is not reached within ``head`` needs it too)."""
    position = 0
    for _ in range(_TOP_LEVEL_SCAN):
        if position + 8 > len(head):
            return True
        size, kind = struct.unpack(">I4s", head[position:position + 8])
        if kind == b"moov":
            return False
        if kind == b"mdat":
            return True
        if size == 1 and position + 16 <= len(head):
            size = struct.unpack(">Q", head[position + 8:position + 16])[0]
        if size < 8:
            return True
        position += size
    return True


def checked_video(name: str) -> str:
    """The member extension of ``name`` once it has been opened as a video: a container FFmpeg
    reads that is not a still image or text, with a video stream and a packet of it.

    Raises:
        VideoError: Anything else (a key, a JSON file, a picture...), naming the file and why.
    """
    with open_container(name, probe_pictures=False) as container:
        found = container.format.name
        if found in _NOT_VIDEO_FORMATS or found.endswith("_pipe"):
            raise NotAVideoError(name, f"is a still image or text (FFmpeg reads it as {found}), not a video")
        if not container.streams.video:
            raise NotAVideoError(name, "has no video stream")
        stream = container.streams.video[0]
        try:
            packets = container.demux()
            for _, packet in zip(range(_PACKETS_PROBED), packets):
                if packet.stream.index == stream.index and packet.size:
                    break
            else:
                raise NotAVideoError(name, f"has no packet of its video stream in its first {_PACKETS_PROBED}")
        except DEMUX_ERRORS as error:
            raise CorruptVideoError(name, f"cannot be read as a video ({demux_failure(error)})") from None
    return member_extension(name, found)


def member_extension(name: str, found_format: str) -> str:
    """The member extension of a video: its name's, else (bytes) its container's as FFmpeg found it."""
    parts = split_slice_name(name)
    base = parts[1] if parts is not None else name.rstrip("/").rsplit("/", 1)[-1]
    if "." in base and not base.startswith("<"):
        return base.rsplit(".", 1)[-1].lower()
    first = found_format.split(",")[0]
    return _EXTENSION_OF_FORMAT.get(first, first)


class StoredVideo:
    """The bytes of a video as a shard stores them: ``size`` bytes read by :meth:`open`, from the
    video itself or from its faststart remux; ``remuxed`` says which."""

    def __init__(self, name: str, size: int, remuxed_to: str | None = None):
        self.name, self.size, self._remuxed_to = name, size, remuxed_to

    @property
    def remuxed(self) -> bool:
        return self._remuxed_to is not None

    @property
    def source(self) -> str:
        """The name the bytes are read from: the video's, or its remux's."""
        return self._remuxed_to or self.name

    def open(self) -> BinaryIO:
        """A binary file of the bytes; its reads fail as a VideoError of the video (never as an
        OSError, which is the shard's: a write that failed)."""
        try:
            file = open_binary(self.source)
        except OSError as error:
            if isinstance(error, VideoError):
                raise
            raise UnreadableVideoError(self.name, f"cannot be read ({os_reason(error)})") from None
        return _VideoFile(file, self.name)  # type: ignore[return-value]


class _VideoFile:
    """A video's binary file whose read errors are the video's."""

    def __init__(self, file: BinaryIO, name: str):
        self._file, self._name = file, name

    def read(self, length: int = -1) -> bytes:
        try:
            return self._file.read(length)
        except OSError as error:
            if isinstance(error, VideoError):
                raise
            raise UnreadableVideoError(self._name, f"cannot be read ({os_reason(error)})") from None

    def close(self) -> None:
        self._file.close()


def stored_video(name: str, extension: str, scratch: str) -> StoredVideo:
    """The video to store; an MP4 whose ``moov`` follows its data is remuxed into ``scratch``.

    Raises:
        VideoError: It cannot be read, is empty, or cannot be remuxed.
        OSError: The remux could not be written (a full disk).
    """
    if is_local(name):
        try:
            size = os.path.getsize(name)
            with open(name, "rb") as file:
                head = file.read(_HEAD_BYTES)
        except OSError as error:
            raise UnreadableVideoError(name, f"cannot be read ({os_reason(error)})") from None
    else:
        reader = open_reader(name)
        size = reader.size()
        head = reader.read_ranges([(0, min(size, _HEAD_BYTES))])[0]
    if size == 0:
        raise CorruptVideoError(name, "file is empty (0 bytes)")
    if extension not in _MP4_LIKE or not needs_faststart(head):
        return StoredVideo(name, size)
    _remux_faststart(name, scratch)
    return StoredVideo(name, os.path.getsize(scratch), scratch)


def _remux_faststart(name: str, out: str) -> None:
    """Copy every stream's packets of ``name`` into an MP4 at ``out`` whose ``moov`` comes first."""
    source = open_container(name)
    try:
        with av.open(out, "w", format="mp4", options={"movflags": "faststart"}) as target:
            streams = {}
            for stream in source.streams:
                if stream.type in ("video", "audio", "subtitle"):
                    streams[stream.index] = target.add_stream_from_template(stream)
            for packet in source.demux(*[source.streams[index] for index in streams]):
                if packet.dts is None and packet.size == 0:
                    continue  # the flush packet a demuxer ends with
                packet.stream = streams[packet.stream.index]
                target.mux(packet)
    except av.error.FFmpegError as error:
        if isinstance(error, OSError) and error.errno in FULL_DISK:  # the disk's problem, not the video's
            raise OSError(error.errno, f"remuxing {name} to a faststart MP4 failed ({os_reason(error)})") from None
        raise NotAVideoError(name, f"could not be rewritten as a faststart MP4 ({os_reason(error)})") from None
    finally:
        source.close()
