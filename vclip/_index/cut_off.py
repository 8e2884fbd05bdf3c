"""A cut-off end: what a truncated video file still holds whole, found in the demux pass. A file
with a sample table says where its packets should be; an MPEG-TS file, which has none, is read for
its last packet and the transport packets after it. Frames shown after the first frame the cut lost
are left out (they would leave a gap), with one :class:`~vclip.errors.TruncatedVideoWarning`."""

from __future__ import annotations

import warnings

import av
import numpy as np

from .._bytes.sources import open_binary
from ..errors import CorruptVideoError, TruncatedVideoWarning

WARNING_STACKLEVEL = 5  # a TruncatedVideoWarning names the caller of demux_stream


def _intact_packets(path: str, stream, pos: list, size: list, corrupt: list, file_size: int) -> int:
    """How many packets (decode order) the file holds whole: all of them, or those before the one
    a cut-off end (an interrupted download) cuts or leaves out.

    Raises:
        CorruptVideoError: No packet at all, a damaged packet before the end, or a cut before the
            first keyframe's end.
    """
    if not pos:
        raise CorruptVideoError(path, "stream has no video packets (empty or truncated)")
    listed = [(entry.pos, entry.size) for entry in stream.index_entries]  # the container's sample table
    kept = len(pos)
    for number, (position, length) in enumerate(listed or zip(pos, size)):
        if position is not None and position >= 0 and position + length > file_size:
            kept = min(kept, number)
            break
    if corrupt[-1] and pos[-1] >= 0 and pos[-1] + size[-1] >= file_size:  # the demuxer's cut-off last packet
        kept = min(kept, len(pos) - 1)
    if any(corrupt[:kept]):
        raise CorruptVideoError(path, f"damaged: packet {corrupt.index(True)} of {len(pos)} is incomplete")
    if kept == 0:
        raise CorruptVideoError(path, f"truncated: the file ends at byte {file_size}, inside its first packet")
    return kept


def _first_lost_pts(stream, kept: int, cut_pts: int | None) -> int | None:
    """A bound on the earliest presentation timestamp among the packets the file lost (from
    ``kept`` on, decode order), as a packet is shown no earlier than it is decoded: the cut
    packet's own pts (``cut_pts``, when the demuxer handed over its start) and the decode
    timestamp of the next packet the container's sample table lists; None when unknown."""
    entries = stream.index_entries
    if cut_pts is None:
        return entries[kept].timestamp if kept < len(entries) else None
    following = entries[kept + 1].timestamp if kept + 1 < len(entries) else None
    return cut_pts if following is None else min(cut_pts, following)


def _leave_out_a_cut_off_end(path: str, stream, pts: list, dts: list, discard: list, lists: tuple,
                             last_is_cut: bool, next_is_lost: bool) -> bool:
    """An MPEG-TS file cut off mid-stream (it has no sample table to say so): leave out its cut-off
    last packet (``last_is_cut``), and the frames shown after the first frame the cut lost, which
    would leave a gap; one TruncatedVideoWarning saying what was left out, also when the file ends
    inside a transport packet after the stream's last packet (``next_is_lost``). With B-frames a
    cut loses frames shown before ones already decoded: the frames past a hole among the last
    frames shown (a gap over 1.5 frames, where the stream has none) come after a lost one.
    Returns whether the file is cut off."""
    cut_pts = None
    if last_is_cut:
        cut_pts = pts[-1]
        for values in lists:
            values.pop()
    first_lost = _first_frame_lost_in_a_hole(pts, dts, discard)
    if cut_pts is not None and (first_lost is None or cut_pts < first_lost):
        first_lost = cut_pts
    after = [not gone and stamp is not None and first_lost is not None and stamp >= first_lost
             for gone, stamp in zip(discard, pts)]
    if not last_is_cut and not next_is_lost and not any(after):
        return False
    discard[:] = [gone or later for gone, later in zip(discard, after)]
    if last_is_cut:
        what = (f"ends inside the last packet of video stream #{stream.index} (packet {len(pts)}, decode order); "
                "its frame is left out")
    else:
        what = "ends inside a transport packet: the packets after it are lost"
    if any(after):
        what += f", and the {sum(after)} frames shown after the first lost one"
    warnings.warn(f"{path}: truncated: the file {what}", TruncatedVideoWarning, stacklevel=WARNING_STACKLEVEL + 1)
    return True


_REORDER_WINDOW = 16  # packets a frame may be decoded ahead of those it is shown after (H.264's largest)
_HOLE_GAPS = 1.5  # a gap between shown frames this many times the usual one leaves a frame out


def _first_frame_lost_in_a_hole(pts: list, dts: list, discard: list) -> int | None:
    """The first timestamp of a hole among the last frames shown, those that can have been decoded
    ahead of a frame the cut lost (as many as the stream reorders: seen in the order of the packets,
    or in how much longer some wait between decoding and showing than others); None when the stream
    has no reordering, no hole there, or missing timestamps."""
    kept = [(stamp, decoded) for stamp, decoded, gone in zip(pts, dts, discard) if not gone]
    stamps = [stamp for stamp, _ in kept]
    if len(stamps) < 2 or None in stamps:
        return None
    shown = np.sort(np.asarray(stamps, dtype=np.int64))
    gaps = np.diff(shown)
    decoded = [when for when in dts if when is not None]  # every packet, one frame's time apart
    usual = float(np.median(np.diff(decoded))) if len(decoded) > 1 and None not in dts else float(np.median(gaps))
    if usual <= 0:
        return None
    depth = max(sum(later < stamp for later in stamps[i + 1:i + 1 + _REORDER_WINDOW])
                for i, stamp in enumerate(stamps))
    waits = [stamp - decoded for stamp, decoded in kept if decoded is not None]
    if waits:
        depth = max(depth, round((max(waits) - min(waits)) / usual))
    if depth == 0:
        return None
    tail = max(0, gaps.size - depth - 1)
    hole = np.flatnonzero(gaps[tail:] > _HOLE_GAPS * usual)
    return None if hole.size == 0 else int(shown[tail + hole[0]]) + 1


def _ts_last_packet_is_cut(stream, tail: str | None, group: list[bytes]) -> bool:
    """Whether an MPEG-TS file's last video packet is cut off (FFmpeg hands over the rest, which
    decodes to a concealed frame), given how the file ends after it (``tail``, :func:`_ts_tail`):
    inside a transport packet that continues it, or at a transport packet boundary after one that
    continues it and its picture comes out of a decoder damaged (``group``: the packets from its
    keyframe on), or inside another transport packet and the picture comes out damaged."""
    if tail not in ("boundary", "lost"):  # "lost": its own later transport packets may be among what was lost
        return tail == "inside"
    context = av.CodecContext.create(stream.codec_context.codec, "r")
    context.extradata = stream.codec_context.extradata
    context.thread_type, context.thread_count = "SLICE", 1  # frame threads lose damage flags
    last = len(group) - 1
    try:
        frames = []
        for number, data in enumerate(group):
            packet = av.Packet(len(data))
            packet.update(data)
            packet.pts = number  # the decoder passes it to the packet's picture: B-frames come out late
            frames += [frame for frame in context.decode(packet) if frame.pts == last]
        frames += [frame for frame in context.decode(None) if frame.pts == last]
    except av.error.FFmpegError:
        return True
    return not frames or frames[-1].is_corrupt


def _ts_tail(path: str, file_size: int, pid: int, last_position: int) -> str | None:
    """How an MPEG-TS file ends after the PES packet of stream ``pid`` that starts at
    ``last_position`` (the stream's last packet): ``"inside"`` a transport packet that continues
    it, at a packet ``"boundary"`` after one that continues it, inside one that begins a later
    packet of the stream (FFmpeg drops it) or belongs to another stream (``"lost"``: a whole file
    ends at a transport packet's end, so what followed is lost), or None (it is followed by others)."""
    if last_position < 0:
        return None
    with open_binary(path) as file:
        def byte_at(offset: int) -> int | None:
            file.seek(offset)
            value = file.read(1)
            return value[0] if value else None

        # raw packet size, bytes before the sync byte in each (M2TS's 4-byte timecode)
        for packet_size, lead in ((188, 0), (192, 4), (204, 0)):
            if byte_at(last_position) != 0x47:
                return None
            following = last_position + packet_size
            if following < file_size and byte_at(following) != 0x47:
                continue
            partial = (file_size - (last_position - lead)) % packet_size
            at_boundary = partial == 0
            if 0 < partial <= lead:
                return None
            file.seek(file_size - (packet_size if at_boundary else partial) + lead)
            header = file.read(3)
            if not header or header[0] != 0x47:
                return None
            if len(header) < 3:  # cut inside a transport packet's header
                return "lost"
            tail_pid = ((header[1] & 0x1F) << 8) | header[2]
            if tail_pid != pid:
                return None if at_boundary else "lost"  # cut inside another stream's packet: what followed is lost
            if bool(header[1] & 0x40) and file_size - (packet_size if at_boundary else partial) + lead != last_position:
                return None if at_boundary else "lost"  # a packet begun in the cut-off part: FFmpeg drops it
            return "boundary" if at_boundary else "inside"
    return None
