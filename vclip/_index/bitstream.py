"""Bitstream helpers: reference flags from picture headers, and packets in the form NVDEC's parser reads.

H.264/HEVC: NAL unit headers and the decoder configuration record; MP4 (length-prefixed) packets
become Annex B. MPEG-4 Part 2: VOP headers (B-VOPs are never references); the stream headers
(VOS/VOL) of MP4 files live in the extradata and go before the first packet of a segment. VP9 and
AV1 packets go to NVDEC as they are (its parser splits VP9 superframes itself). Slice data is
never touched.

VP9 frames that refresh no reference slot (``refresh_frame_flags == 0``) are still not skippable in
general: the next frame may predict its motion vectors from the previously decoded frame
(``use_prev_frame_mvs``), whatever its reference flags, so every VP9 packet counts as a reference.
"""

from __future__ import annotations

_START_CODE = b"\x00\x00\x00\x01"
_H264_SLICE_TYPES = (1, 5)  # non-IDR slice, IDR slice
_HEVC_NON_REFERENCE_TYPES = frozenset(range(0, 16, 2))  # TRAIL_N, TSA_N, STSA_N, RADL_N, RASL_N, RSV_VCL_N1x
_MPEG4_VOP_START = b"\x00\x00\x01\xb6"
_MPEG4_B_VOP = 2  # vop_coding_type: 0 I, 1 P, 2 B, 3 S (sprite)


def nal_length_size(codec: str, extradata: bytes) -> int | None:
    """Bytes in each NAL length prefix for MP4-style streams, or None for Annex B streams."""
    if not extradata or extradata[0] != 1:
        return None
    if codec == "h264" and len(extradata) >= 7:
        return (extradata[4] & 3) + 1
    if codec == "hevc" and len(extradata) >= 23:
        return (extradata[21] & 3) + 1
    return None


def _split_length_prefixed(data: bytes, length_size: int) -> list[bytes]:
    nals = []
    position, end = 0, len(data)
    while position + length_size <= end:
        size = int.from_bytes(data[position:position + length_size], "big")
        position += length_size
        if size == 0 or position + size > end:
            break
        nals.append(data[position:position + size])
        position += size
    return nals


def _split_annexb(data: bytes) -> list[bytes]:
    nals = []
    starts = []
    position = data.find(b"\x00\x00\x01")
    while position >= 0:
        starts.append(position + 3)
        position = data.find(b"\x00\x00\x01", position + 3)
    for i, start in enumerate(starts):
        stop = starts[i + 1] - 3 if i + 1 < len(starts) else len(data)
        nal = data[start:stop].rstrip(b"\x00") if i + 1 < len(starts) else data[start:stop]
        if nal:
            nals.append(nal)
    return nals


def split_nal_units(data: bytes, length_size: int | None) -> list[bytes]:
    """NAL units of one packet (length-prefixed when ``length_size`` is set, else Annex B)."""
    return _split_length_prefixed(data, length_size) if length_size else _split_annexb(data)


def is_reference_packet(codec: str, data: bytes, length_size: int | None) -> bool:
    """Whether other pictures may reference this packet's picture.

    H.264: ``nal_ref_idc != 0`` on the first slice. HEVC: anything but a sub-layer non-reference
    picture. MPEG-4 Part 2: any VOP but a B-VOP (a packet may pack several VOPs). Other codecs, or
    packets with no slice or VOP found, count as reference (safe default).
    """
    if codec == "mpeg4":
        return _mpeg4_has_reference_vop(data)
    if codec not in ("h264", "hevc"):
        return True
    for nal in split_nal_units(data, length_size):
        if codec == "h264":
            if (nal[0] & 0x1F) in _H264_SLICE_TYPES:
                return (nal[0] >> 5) & 3 != 0
        else:
            nal_type = (nal[0] >> 1) & 0x3F
            if nal_type < 32:
                return nal_type not in _HEVC_NON_REFERENCE_TYPES
    return True


_H264_IDR, _H264_SEI, _H264_RECOVERY_POINT = 5, 6, 6
_H264_INTRA_SLICE_TYPES = frozenset((2, 4, 7, 9))  # I, SI (and their "all slices alike" forms)
_HEVC_RANDOM_ACCESS_TYPES = frozenset(range(16, 24))  # BLA, IDR, CRA, reserved IRAP


def is_random_access_packet(codec: str, data: bytes, length_size: int | None) -> bool | None:
    """Whether a decoder can start at this packet, as its picture headers say (None: cannot tell).

    H.264: an IDR slice, a recovery point SEI, or an intra first slice. HEVC: an IRAP picture
    (BLA, IDR, CRA). Other codecs, or packets with no slice found: None.
    """
    if codec not in ("h264", "hevc"):
        return None
    for nal in split_nal_units(data, length_size):
        if codec == "h264":
            nal_type = nal[0] & 0x1F
            if nal_type == _H264_IDR or (nal_type == _H264_SEI and len(nal) > 1 and nal[1] == _H264_RECOVERY_POINT):
                return True
            if nal_type in _H264_SLICE_TYPES:
                slice_type = _h264_slice_type(nal)
                return None if slice_type is None else slice_type in _H264_INTRA_SLICE_TYPES
        else:
            nal_type = (nal[0] >> 1) & 0x3F
            if nal_type < 32:
                return nal_type in _HEVC_RANDOM_ACCESS_TYPES
    return None


def _h264_slice_type(nal: bytes) -> int | None:
    """``slice_type`` of an H.264 slice NAL unit: its header's second Exp-Golomb number (after
    ``first_mb_in_slice``), read past emulation prevention bytes; None when it is cut short."""
    payload = nal[1:24].replace(b"\x00\x00\x03", b"\x00\x00")
    bits = "".join(f"{byte:08b}" for byte in payload)
    position, values = 0, []
    for _ in range(2):
        zeros = bits.find("1", position) - position
        if zeros < 0 or position + 2 * zeros + 1 > len(bits):
            return None
        values.append(int(bits[position + zeros:position + 2 * zeros + 1], 2) - 1)
        position += 2 * zeros + 1
    return values[1]


def _mpeg4_has_reference_vop(data: bytes) -> bool:
    found_vop = False
    position = data.find(_MPEG4_VOP_START)
    while 0 <= position < len(data) - 4:
        found_vop = True
        if data[position + 4] >> 6 != _MPEG4_B_VOP:
            return True
        position = data.find(_MPEG4_VOP_START, position + 4)
    return not found_vop


def _has_mpeg4_stream_headers(data: bytes) -> bool:
    """Whether an MPEG-4 Part 2 packet starts with its own VOS or VOL header (as AVI files carry them)."""
    head = data[:4]  # start codes: 00-1F VO, 20-2F VOL, B0 VOS, B5 visual object
    return len(head) == 4 and head[:3] == b"\x00\x00\x01" and (head[3] <= 0x2F or head[3] in (0xB0, 0xB5))


def parameter_sets(codec: str, extradata: bytes) -> list[bytes]:
    """SPS/PPS (and VPS for HEVC) from an avcC/hvcC decoder configuration record."""
    if nal_length_size(codec, extradata) is None:
        return []
    sets = []
    if codec == "h264":
        position = 5
        for count_mask in (0x1F, 0xFF):  # SPS count is 5 bits, PPS count a byte
            count = extradata[position] & count_mask
            position += 1
            for _ in range(count):
                size = int.from_bytes(extradata[position:position + 2], "big")
                sets.append(extradata[position + 2:position + 2 + size])
                position += 2 + size
    else:
        arrays = extradata[22]
        position = 23
        for _ in range(arrays):
            count = int.from_bytes(extradata[position + 1:position + 3], "big")
            position += 3
            for _ in range(count):
                size = int.from_bytes(extradata[position:position + 2], "big")
                sets.append(extradata[position + 2:position + 2 + size])
                position += 2 + size
    return sets


class AnnexBConverter:
    """Turns a stream's packets into Annex B, the form NVDEC's parser reads.

    ``convert(data, with_parameter_sets=True)`` is used on the first packet of every decode
    segment so that the decoder always sees SPS/PPS before the keyframe.
    """

    def __init__(self, codec: str, extradata: bytes):
        self.length_size = nal_length_size(codec, extradata)
        self._header = b"".join(_START_CODE + nal for nal in parameter_sets(codec, extradata))

    def convert(self, data: bytes, with_parameter_sets: bool = False) -> bytes:
        body = data
        if self.length_size:
            body = b"".join(_START_CODE + nal for nal in _split_length_prefixed(data, self.length_size))
        return self._header + body if with_parameter_sets else body


class Mpeg4HeaderInserter:
    """MPEG-4 Part 2 packets for NVDEC: the extradata's stream headers (VOS, VO, VOL: the picture
    size and coding tools) go before the first packet of every decode segment that lacks its own,
    as MP4 files keep them only in the extradata."""

    def __init__(self, extradata: bytes):
        self._header = extradata if _has_mpeg4_stream_headers(extradata) else b""

    def convert(self, data: bytes, with_parameter_sets: bool = False) -> bytes:
        if with_parameter_sets and self._header and not _has_mpeg4_stream_headers(data):
            return self._header + data
        return data


class PassThrough:
    """Packets NVDEC's parser reads as the container holds them (VP9, AV1)."""

    def convert(self, data: bytes, with_parameter_sets: bool = False) -> bytes:
        return data


def nvdec_packet_converter(codec: str, extradata: bytes) -> AnnexBConverter | Mpeg4HeaderInserter | PassThrough:
    """The converter of ``codec``'s packets into what NVDEC reads: ``convert(data, with_parameter_sets)``
    with ``with_parameter_sets=True`` on the first packet of each decode segment."""
    if codec in ("h264", "hevc"):
        return AnnexBConverter(codec, extradata)
    if codec == "mpeg4":
        return Mpeg4HeaderInserter(extradata)
    return PassThrough()
