"""NVDEC through the driver's own API (:mod:`vclip._engine.cuvid`): a decoder per stream format,
kept by a worker thread, and the picture decoder of one job that feeds it through NVDEC's parser.

Each packet goes to the parser in one ctypes call, which leaves the interpreter lock while the
parser and the engine work; the parser calls back into Python (taking the lock) to start a
picture's decode and to say a picture is ready. A ready picture that some clip wants is mapped
(the wait for the engine is again without the lock) and handed to the kernel as it lies in the
decoder's output surface, and unmapped once the kernel has run (that wait, too, leaves the lock).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from ctypes import byref, c_uint, c_ulonglong, c_void_p

import numpy as np

from .._index.bitstream import nvdec_packet_converter
from .._index.record import VideoIndex
from .contract import PacketRun, PictureDecoder
from .cuvid import (
    CODECS,
    CREATE_PREFER_CUVID,
    DEINTERLACE_ADAPTIVE,
    DEINTERLACE_WEAVE,
    PACKET_END_OF_PICTURE,
    PACKET_END_OF_STREAM,
    PACKET_TIMESTAMP,
    SURFACE_NV12,
    SURFACE_P016,
    CuvidLibrary,
    DecodeCallback,
    DecodeCreateInfo,
    DisplayCallback,
    ParserDisplayInfo,
    ParserParams,
    ProcParams,
    SequenceCallback,
    SourceDataPacket,
    VideoFormat,
    _CuvidError,
    _ShortRect,
)
from .kernel import Surface

__all__ = ["DISPLAY_DELAY", "DriverDecoder", "DriverPictureDecoder", "format_key"]

DISPLAY_DELAY = 2
"""Pictures NVDEC's parser holds before it shows one: the engine decodes the next ones while a thread
waits for the earlier one to be mapped (NVIDIA recommends 2 to 4)."""

DECODE_SURFACE_MARGIN = 4
"""Decode surfaces beyond the stream's own minimum (its reference pictures), for the pictures the
parser holds back (:data:`DISPLAY_DELAY`) and those in flight."""

MAX_DECODE_SURFACES = 32
"""NVDEC's limit on a decoder's decode surfaces."""

OUTPUT_SURFACES = 2
"""Output surfaces of a decoder (one is mapped at a time)."""

_PARSED_FORMATS = {"h264", "hevc"}  # one packet is one picture: the parser may decode it at once


class DriverDecoder:
    """One NVDEC decoder made through the driver's API for one stream format, on one thread's CUDA
    stream, with the output surfaces it has mapped."""

    def __init__(self, library: CuvidLibrary, video_format: VideoFormat, stream):
        self._library = library
        self._stream = stream
        area = video_format.display_area
        self.width, self.height = area.right - area.left, area.bottom - area.top
        self.rows = self.height + (self.height & 1)  # NV12/P016 planes have an even number of rows
        self.surfaces = min(MAX_DECODE_SURFACES, video_format.min_num_decode_surfaces + DECODE_SURFACE_MARGIN)
        lock = c_void_p()
        library.check("cuvidCtxLockCreate",
                      library.cuvid.cuvidCtxLockCreate(byref(lock), c_void_p(library.current_context())))
        self._context_lock = lock
        high_depth = video_format.bit_depth_luma_minus8 > 0
        info = DecodeCreateInfo(
            ulWidth=video_format.coded_width, ulHeight=video_format.coded_height,
            ulNumDecodeSurfaces=self.surfaces, CodecType=video_format.codec,
            ChromaFormat=video_format.chroma_format, ulCreationFlags=CREATE_PREFER_CUVID,
            bitDepthMinus8=video_format.bit_depth_luma_minus8,
            ulMaxWidth=video_format.coded_width, ulMaxHeight=video_format.coded_height,
            # An odd width or height takes one more column or row of the coded picture, so that
            # the even output surface holds the shown area one to one, never scaled.
            display_area=_ShortRect(area.left, area.top, area.left + self.width + (self.width & 1),
                                    area.top + self.rows),
            OutputFormat=SURFACE_P016 if high_depth else SURFACE_NV12,
            DeinterlaceMode=DEINTERLACE_WEAVE if video_format.progressive_sequence else DEINTERLACE_ADAPTIVE,
            ulTargetWidth=self.width + (self.width & 1), ulTargetHeight=self.rows,
            ulNumOutputSurfaces=OUTPUT_SURFACES, vidLock=lock,
        )
        handle = c_void_p()
        try:
            library.check("cuvidCreateDecoder", library.cuvid.cuvidCreateDecoder(byref(handle), byref(info)))
        except _CuvidError:
            library.cuvid.cuvidCtxLockDestroy(lock)
            raise
        self.handle: c_void_p | None = handle
        self._mapped: int | None = None  # the address of the mapped picture
        self._procedure = ProcParams(output_stream=stream.ptr)
        self._address, self._pitch = c_ulonglong(), c_uint()

    def map(self, shown: ParserDisplayInfo) -> Surface:
        """Map a decoded picture (waits, without the interpreter lock, until NVDEC has decoded it)."""
        procedure = self._procedure
        procedure.progressive_frame = shown.progressive_frame
        procedure.top_field_first = shown.top_field_first
        procedure.unpaired_field = int(shown.repeat_first_field < 0)
        library = self._library
        library.check("cuvidMapVideoFrame64", library.map_frame(
            self.handle, shown.picture_index, byref(self._address), byref(self._pitch), byref(procedure)))
        address, pitch = self._address.value, self._pitch.value
        self._mapped = address
        return Surface(address, address + pitch * self.rows, pitch)

    def unmap(self) -> None:
        """Unmap the mapped picture once the kernels that read it have run (the wait leaves the
        interpreter lock): the parser reuses its decode surface as soon as it goes on."""
        if self._mapped is None:
            return
        address, self._mapped = self._mapped, None
        self._stream.synchronize()
        self._library.check("cuvidUnmapVideoFrame64", self._library.unmap_frame(self.handle, address))

    def destroy(self) -> None:
        """Unmap what is mapped and free the decoder."""
        if self.handle is None:
            return
        try:
            self.unmap()
        finally:
            self._library.cuvid.cuvidDestroyDecoder(self.handle)
            self._library.cuvid.cuvidCtxLockDestroy(self._context_lock)
            self.handle = None


def format_key(video_format: VideoFormat) -> tuple:
    """What a decoder must match to decode a stream of ``video_format``."""
    area = video_format.display_area
    return (video_format.codec, video_format.coded_width, video_format.coded_height, video_format.chroma_format,
            video_format.bit_depth_luma_minus8, video_format.progressive_sequence,
            area.left, area.top, area.right, area.bottom)


class DriverPictureDecoder(PictureDecoder):
    """One job's packets through NVDEC's parser into a worker's :class:`DriverDecoder`; pictures are
    :class:`Surface` objects, valid until the next one is asked for.

    ``decoder_for(video_format)`` gives the worker's decoder for a format (made on first use). A new
    parser starts each segment: it begins at a keyframe with a fresh picture buffer.
    """

    def __init__(self, library: CuvidLibrary, index: VideoIndex, decoder_for):
        self._library = library
        self._index = index
        self._decoder_for = decoder_for
        self._converter = nvdec_packet_converter(index.codec, index.extradata)
        self._decoder: DriverDecoder | None = None
        self._parser: c_void_p | None = None
        self._shown: deque[ParserDisplayInfo] = deque()
        self._wanted: frozenset[int] = frozenset()
        self._error: BaseException | None = None
        self._packet = SourceDataPacket()
        self._flags = PACKET_TIMESTAMP | (PACKET_END_OF_PICTURE if index.codec in _PARSED_FORMATS else 0)
        # The callbacks are kept alive as long as the parser that calls them.
        self._callbacks = (SequenceCallback(self._on_sequence), DecodeCallback(self._on_decode),
                           DisplayCallback(self._on_display))

    # The parser's callbacks: they run inside cuvidParseVideoData, on this thread. An exception
    # cannot cross the C code, so it is kept and raised once the parser returns.
    def _on_sequence(self, _user, video_format_pointer) -> int:
        try:
            video_format = video_format_pointer.contents
            decoder = self._decoder_for(video_format)
            index = self._index
            if (decoder.width, decoder.height) != (index.width, index.height):
                raise RuntimeError(f"NVDEC shows {decoder.width}x{decoder.height} pictures where the index says "
                                   f"{index.width}x{index.height}")
            self._decoder = decoder
            return decoder.surfaces
        except BaseException as error:  # noqa: BLE001 (raised once the parser returns)
            self._error = self._error or error
            return 0

    def _on_decode(self, _user, picture_parameters) -> int:
        decoder = self._decoder
        if decoder is None or self._error is not None:
            return 0
        code = self._library.decode_picture(decoder.handle, picture_parameters)
        if code != 0:
            self._error = _CuvidError("cuvidDecodePicture", code, self._library.error_name(code))
            return 0
        return 1

    def _on_display(self, _user, shown_pointer) -> int:
        if shown_pointer:
            shown = shown_pointer.contents
            if shown.timestamp in self._wanted:
                self._shown.append(ParserDisplayInfo.from_buffer_copy(shown))
        return 1

    def _open_parser(self) -> c_void_p:
        if self._parser is None:
            sequence, decode, display = self._callbacks
            parameters = ParserParams(
                CodecType=CODECS[self._index.codec], ulMaxNumDecodeSurfaces=MAX_DECODE_SURFACES,
                ulMaxDisplayDelay=DISPLAY_DELAY, pfnSequenceCallback=sequence, pfnDecodePicture=decode,
                pfnDisplayPicture=display,
            )
            parser = c_void_p()
            self._library.check("cuvidCreateVideoParser",
                                self._library.cuvid.cuvidCreateVideoParser(byref(parser), byref(parameters)))
            self._parser = parser
        return self._parser

    def _close_parser(self) -> None:
        if self._parser is not None:
            self._library.cuvid.cuvidDestroyVideoParser(self._parser)
            self._parser = None
        self._shown.clear()

    def _parse(self, packet: SourceDataPacket) -> Iterator[tuple[int, Surface]]:
        code = self._library.parse(self._open_parser(), byref(packet))
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        self._library.check("cuvidParseVideoData", code)
        shown = self._shown
        while shown:
            picture = shown.popleft()
            decoder = self._decoder
            assert decoder is not None  # a picture is shown only after a sequence header
            surface = decoder.map(picture)
            try:
                yield picture.timestamp, surface  # the executor converts it before asking for the next
            finally:
                decoder.unmap()

    def send(self, packets: PacketRun) -> Iterable[tuple[int, Surface]]:
        convert = self._converter.convert
        chunks = [convert(p, with_parameter_sets=(k == 0)) for k, p in enumerate(packets.payloads)]
        stream = np.frombuffer(b"".join(chunks), dtype=np.uint8)  # one buffer for the whole segment
        address = stream.ctypes.data
        self._wanted = frozenset(pts for pts, discardable in zip(packets.pts, packets.discardable) if not discardable)
        packet = self._packet
        packet.flags = self._flags
        for chunk, pts in zip(chunks, packets.pts):
            packet.payload, packet.payload_size, packet.timestamp = address, len(chunk), pts
            address += len(chunk)
            yield from self._parse(packet)

    def flush(self) -> Iterable[tuple[int, Surface]]:
        try:
            yield from self._parse(SourceDataPacket(flags=PACKET_END_OF_STREAM))
        finally:
            self._close_parser()  # the next segment starts on a fresh parser

    def recover(self) -> bool:
        self._close_parser()
        self._error = None
        return True

    @property
    def driver_decoder(self) -> DriverDecoder | None:
        """The worker's decoder this job's stream went to (None before its first sequence header)."""
        return self._decoder

    def close(self) -> None:
        self._close_parser()

