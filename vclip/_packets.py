"""Reads the compressed bytes of chosen packets, for any decoder backend.

MP4/Matroska packets are read straight from the file at the offsets the index recorded (one read
per segment, no demuxer). Other containers are demuxed with PyAV after a seek to the segment's
keyframe.
"""

from __future__ import annotations

import os

import numpy as np

from .errors import CorruptVideoError
from .index import VideoIndex, open_container

_MAX_SPAN_BYTES = 256 << 20  # one read per segment up to this; larger spans are read packet by packet


def read_packets(index: VideoIndex, packets: np.ndarray) -> list[bytes]:
    """Bytes of ``packets`` (decode-order numbers, ascending)."""
    if index.packets_addressable:
        return _read_from_file(index, packets)
    return _demux(index, packets)


def _read_from_file(index: VideoIndex, packets: np.ndarray) -> list[bytes]:
    positions = index.packet_pos[packets]
    sizes = index.packet_size[packets]
    first, end = int(positions.min()), int((positions + sizes).max())
    with open(index.path, "rb") as file:
        descriptor = file.fileno()
        if end - first <= _MAX_SPAN_BYTES:
            span = os.pread(descriptor, end - first, first)
            if len(span) != end - first:
                raise CorruptVideoError(index.path, f"file ends at byte {first + len(span)}, packets need {end}")
            view = memoryview(span)
            return [bytes(view[p - first:p - first + s]) for p, s in zip(positions.tolist(), sizes.tolist())]
        return [os.pread(descriptor, s, p) for p, s in zip(positions.tolist(), sizes.tolist())]


def _demux(index: VideoIndex, packets: np.ndarray) -> list[bytes]:
    wanted = {int(p): i for i, p in enumerate(packets)}
    by_pts = {int(pts): number for number, pts in enumerate(index.packet_pts.tolist())}
    found: list[bytes | None] = [None] * len(packets)
    last = int(packets[-1])
    with open_container(index.path) as container:
        stream = container.streams[index.stream_index]
        for seek_pts in (int(index.packet_pts[packets[0]]), None):
            if seek_pts is None:
                container.seek(0, stream=stream, backward=True)
            else:
                container.seek(seek_pts, stream=stream, backward=True, any_frame=False)
            for packet in container.demux(stream):
                if packet.size == 0 or packet.pts is None:
                    continue
                number = by_pts.get(int(packet.pts))
                if number in wanted:
                    found[wanted[number]] = bytes(packet)
                if number is not None and number >= last:
                    break
            if all(data is not None for data in found):
                return found
    missing = [int(packets[i]) for i, data in enumerate(found) if data is None]
    raise CorruptVideoError(index.path, f"packets {missing[:5]} could not be read back")
