"""Reads the compressed bytes of chosen packets, for any decoder backend and for the audio of clips.

MP4/Matroska packets are read straight from the file at the offsets the index recorded (one read
per segment, no demuxer). Other containers are demuxed with PyAV after a seek to the segment's
keyframe, or from the start of the file when that seek fails or misses packets. For a URL or an
in-memory video, the packets' byte ranges are read through :mod:`vclip._bytes.sources` (nearby ranges
coalesced, remote requests concurrent and retried), so a clip transfers only what its plan needs.

Every failure is a :class:`~vclip.errors.VideoError` naming the file: a file that went missing or
became unreadable since it was indexed, a seek or read FFmpeg refuses, packets that are not there.
"""

from __future__ import annotations

import os
from typing import Protocol

import numpy as np

from .._bytes.sources import DEMUX_ERRORS, demux_failure, is_local, open_container, read_ranges
from ..errors import CorruptVideoError, video_error_from_os_error

_MAX_SPAN_BYTES = 256 << 20  # one read per segment up to this; larger spans are read packet by packet


class PacketTable(Protocol):
    """Where a stream's packets are: a :class:`~vclip.VideoIndex` or an :class:`~vclip.AudioIndex`."""

    @property
    def path(self) -> str: ...
    @property
    def stream_index(self) -> int: ...
    @property
    def packets_addressable(self) -> bool: ...
    @property
    def packet_pts(self) -> np.ndarray: ...
    @property
    def packet_pos(self) -> np.ndarray: ...
    @property
    def packet_size(self) -> np.ndarray: ...


def read_packets(index: PacketTable, packets: np.ndarray) -> list[bytes]:
    """Bytes of ``packets`` (decode-order numbers, ascending).

    Raises:
        VideoError: The packets cannot be read back (see the module docstring).
    """
    if index.packets_addressable:
        return _read_from_file(index, packets)
    return _demux(index, packets)


def _read_from_file(index: PacketTable, packets: np.ndarray) -> list[bytes]:
    positions = index.packet_pos[packets]
    sizes = index.packet_size[packets]
    if not is_local(index.path):
        return read_ranges(index.path, list(zip(positions.tolist(), sizes.tolist())))
    first, end = int(positions.min()), int((positions + sizes).max())
    try:
        with open(index.path, "rb") as file:
            descriptor = file.fileno()
            if end - first <= _MAX_SPAN_BYTES:
                span = os.pread(descriptor, end - first, first)
                if len(span) != end - first:
                    raise CorruptVideoError(index.path, f"file ends at byte {first + len(span)}, packets need {end}")
                view = memoryview(span)
                return [bytes(view[p - first:p - first + s]) for p, s in zip(positions.tolist(), sizes.tolist())]
            data = [os.pread(descriptor, s, p) for p, s in zip(positions.tolist(), sizes.tolist())]
    except OSError as error:
        raise video_error_from_os_error(index.path, error) from None
    short = [int(n) for n, s, d in zip(packets.tolist(), sizes.tolist(), data) if len(d) != s]
    if short:
        raise CorruptVideoError(index.path, f"file ends inside packet {short[0]} (it was changed after indexing?)")
    return data


def _demux(index: PacketTable, packets: np.ndarray) -> list[bytes]:
    """Demux ``packets``: after a seek to the first one's keyframe, then from the start of the file.

    Demuxed packets are recognised by byte position when the index has a distinct one for every
    packet (timestamps may be missing or rebuilt), else by pts.
    """
    wanted = {int(p): i for i, p in enumerate(packets)}
    positions = index.packet_pos
    by_position = bool(positions.size) and positions.min() >= 0 and np.unique(positions).size == positions.size
    if by_position:
        number_of = dict(zip(positions.tolist(), range(positions.size)))
    else:
        number_of = dict(zip(index.packet_pts.tolist(), range(index.packet_pts.size)))
    found: list[bytes | None] = [None] * len(packets)
    last = int(packets[-1])
    failure = None
    for seek_pts in (int(index.packet_pts[packets[0]]), None):
        try:
            with open_container(index.path) as container:
                stream = container.streams[index.stream_index]
                if seek_pts is not None:
                    container.seek(seek_pts, stream=stream, backward=True, any_frame=False)
                for packet in container.demux(stream):
                    if packet.size == 0:
                        continue
                    value = packet.pos if by_position else packet.pts
                    number = number_of.get(value) if value is not None else None
                    if number in wanted:
                        found[wanted[number]] = bytes(packet)
                    if number is not None and number >= last:
                        break
        except DEMUX_ERRORS as error:  # a seek or read FFmpeg refuses: try from the start
            failure = demux_failure(error)
        complete = [data for data in found if data is not None]
        if len(complete) == len(found):
            return complete
    missing = [int(packets[i]) for i, data in enumerate(found) if data is None]
    because = f" ({failure})" if failure else ""
    raise CorruptVideoError(index.path, f"packets {missing[:5]} could not be read back{because}")
