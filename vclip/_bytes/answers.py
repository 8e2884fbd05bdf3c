"""A server's answer to one read, taken with a cap: its status and length are looked at before its
body is, and the body is read in pieces, never past what the request can rightly bring back.

- A partial answer (HTTP 206) brings the range asked for: a longer one is refused before its body
  is read, a shorter one is a truncated body (tried again).
- A whole-file answer (HTTP 200 to a range request: the server ignores ``Range``) must be as long
  as the file; it is streamed into an anonymous local file (the spill), never held in memory, and
  refused before its body is read when the file is larger than the spill limit (unless the range
  asked for is the whole file).

HTTP(S) is read through the aiohttp client of fsspec's HTTP filesystem and S3 through s3fs's
client (their configuration, credentials and vclip's timeouts apply); other protocols through their
fsspec driver's ``cat_file``, whose answer arrives whole before it is checked. File metadata over
HTTP is one HEAD request per try (a GET, body unread, only where HEAD is refused or tells no size):
a server that accepts requests and never answers fails a try after one ``read_timeout``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

from ..errors import UnreadableVideoError, format_bytes
from .remote_failures import _TruncatedBody
from .remote_reads import count_read

__all__ = ["Answer", "http_info", "read_span", "serves_http", "spill_file", "too_large_to_spill"]

_PIECE_BYTES = 1 << 20  # a body is read (and a whole file spilled) this much at a time


@dataclass(frozen=True)
class Answer:
    """What a read brought back: ``data``, the range asked for, or ``whole``, the whole file in an
    anonymous local file (positioned anywhere). ``ranges_ignored``: the server answered the range
    request with the whole file (so every read of it sends the whole file)."""

    data: bytes | None = None
    whole: BinaryIO | None = None
    ranges_ignored: bool = False


@dataclass(frozen=True)
class _Request:
    url: str  # for counts and errors
    start: int
    end: int
    file_size: int
    whole_limit: int

    @property
    def length(self) -> int:
        return self.end - self.start

    @property
    def is_whole_file(self) -> bool:
        return self.start == 0 and self.end == self.file_size


def read_span(fs: Any, path: str, url: str, start: int, end: int, *, file_size: int, whole_limit: int) -> Answer:
    """The bytes ``[start, end)`` of ``path`` on the filesystem ``fs`` (``url`` names it), read with
    a cap (see the module docstring).

    Raises:
        UnreadableVideoError: An answer longer than asked and not the whole file, or the whole file
            when it is larger than ``whole_limit`` bytes.
        _TruncatedBody: An answer shorter than asked (a transient failure).
        Exception: The driver's own errors (diagnosed by :mod:`vclip._bytes.remote_failures`).
    """
    request = _Request(url, start, end, file_size, whole_limit)
    if serves_http(fs):
        from fsspec.asyn import sync

        return sync(fs.loop, _http_span, fs, path, request)
    if _protocols(fs) & {"s3", "s3a"} and hasattr(fs, "_call_s3") and hasattr(fs, "split_path"):
        from fsspec.asyn import sync

        return sync(fs.loop, _s3_span, fs, path, request)
    data = fs.cat_file(path, start=start, end=end)
    count_read(url, bytes_read=len(data))
    if len(data) <= request.length:
        return _range_answer(data, request)
    _check_whole_length(len(data), request)
    return _whole_answer_of(data, request)


def _protocols(fs: Any) -> set[str]:
    """The protocols fsspec's filesystem ``fs`` serves (its ``protocol``: a name or a tuple of them)."""
    protocol = getattr(fs, "protocol", ())
    return set(protocol) if isinstance(protocol, (tuple, list)) else {protocol}


# -- HTTP -----------------------------------------------------------------------------------------
def serves_http(fs: Any) -> bool:
    """Whether ``fs`` is fsspec's HTTP filesystem (read through its aiohttp session here)."""
    return bool(_protocols(fs) & {"http", "https"}) and hasattr(fs, "set_session")


def _http_arguments(fs: Any) -> tuple[dict, dict]:
    """The keyword arguments of fsspec's HTTP requests, and their headers (copies)."""
    arguments = dict(getattr(fs, "kwargs", {}) or {})
    headers = dict(arguments.pop("headers", None) or {})
    headers["Accept-Encoding"] = "identity"  # lengths are the file's bytes, not a compressed form's
    return arguments, headers


def _encoded(fs: Any, path: str) -> str:
    return fs.encode_url(path) if hasattr(fs, "encode_url") else path


async def _http_span(fs: Any, path: str, request: _Request) -> Answer:
    arguments, headers = _http_arguments(fs)
    headers["Range"] = f"bytes={request.start}-{request.end - 1}"
    session = await fs.set_session()
    async with session.get(_encoded(fs, path), headers=headers, **arguments) as response:
        response.raise_for_status()
        return await _answer(response.status == 206, response.content_length, response.content.read, request)


def http_info(fs: Any, path: str) -> dict:
    """Size, ETag and last-modified time of ``path`` from the server of fsspec's HTTP filesystem
    ``fs``: one HEAD request (a GET whose body is not read only when HEAD is refused with a status
    or tells no size; a timeout or refused connection is not tried again here)."""
    from fsspec.asyn import sync

    return sync(fs.loop, _http_info, fs, path)


async def _http_info(fs: Any, path: str) -> dict:
    import aiohttp

    arguments, headers = _http_arguments(fs)
    arguments.setdefault("allow_redirects", True)
    session = await fs.set_session()
    url = _encoded(fs, path)
    try:
        info = await _headers_info(session.head(url, headers=headers, **arguments), path)
    except aiohttp.ClientResponseError as error:
        if isinstance(error, aiohttp.TooManyRedirects) or error.status == 404:
            raise
        info = {}  # a server (or a signed URL) that refuses HEAD: ask with GET
    if info.get("size") is None:
        info = await _headers_info(session.get(url, headers=headers, **arguments), path)
    return info


async def _headers_info(request: Any, path: str) -> dict:
    async with request as response:
        response.raise_for_status()
        found: dict = {"name": path, "type": "file", "size": None}
        encoding = response.headers.get("Content-Encoding", "identity")
        if "Content-Length" in response.headers and encoding in ("identity", ""):
            found["size"] = int(response.headers["Content-Length"])
        elif "/" in response.headers.get("Content-Range", ""):
            total = response.headers["Content-Range"].rsplit("/", 1)[1]
            found["size"] = int(total) if total.isdigit() else None
        for field in ("ETag", "Last-Modified", "Content-MD5"):
            if response.headers.get(field):
                found[field] = response.headers[field]
        return found


# -- S3 -------------------------------------------------------------------------------------------
async def _s3_span(fs: Any, path: str, request: _Request) -> Answer:
    bucket, key, version = fs.split_path(path)
    extra = {"VersionId": version} if version else {}
    response = await fs._call_s3("get_object", Bucket=bucket, Key=key,
                                 Range=f"bytes={request.start}-{request.end - 1}", **extra)
    body = response["Body"]
    try:
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        partial = status == 206 or bool(response.get("ContentRange"))
        return await _answer(partial, response.get("ContentLength"), body.read, request)
    finally:
        body.close()


# -- judging an answer ----------------------------------------------------------------------------
async def _answer(partial: bool, declared: int | None, read: Callable[[int], Awaitable[bytes]],
                  request: _Request) -> Answer:
    """The answer whose body ``read`` gives, judged by whether it is ``partial`` (206) and its
    ``declared`` length, before its body is read."""
    if partial or (declared is not None and declared == request.length and not request.is_whole_file):
        if declared is not None and declared != request.length:
            raise _neither(declared, request)
        return _range_answer(await _read_capped(read, request.length + 1, request.url), request)
    _check_whole_length(declared, request)
    if request.file_size > request.whole_limit:
        if not request.is_whole_file:
            raise _too_large_to_spill(request)
        data = await _read_capped(read, request.length + 1, request.url)
        return Answer(data=_range_answer(data, request).data, ranges_ignored=True)
    spill = tempfile.TemporaryFile(prefix="vclip-spill-")
    try:
        written = 0
        while written <= request.file_size:
            piece = await read(_PIECE_BYTES)
            if not piece:
                break
            count_read(request.url, bytes_read=len(piece))
            spill.write(piece)
            written += len(piece)
        if written != request.file_size:
            if written > request.file_size:
                raise _neither(written, request)
            raise _TruncatedBody(f"{written} of {request.file_size} bytes of the whole file")
        spill.flush()
    except BaseException:
        spill.close()
        raise
    return Answer(whole=spill, ranges_ignored=True)


async def _read_capped(read: Callable[[int], Awaitable[bytes]], cap: int, url: str) -> bytes:
    """At most ``cap`` bytes of a body, read in pieces (counted as they arrive)."""
    pieces, total = [], 0
    while total < cap:
        piece = await read(min(_PIECE_BYTES, cap - total))
        if not piece:
            break
        count_read(url, bytes_read=len(piece))
        pieces.append(piece)
        total += len(piece)
    return b"".join(pieces)


def _range_answer(data: bytes, request: _Request) -> Answer:
    if len(data) > request.length:
        raise _neither(len(data), request)
    if len(data) < request.length and request.end <= request.file_size:
        raise _TruncatedBody(f"{len(data)} of {request.length} bytes")
    return Answer(data=data)


def _check_whole_length(length: int | None, request: _Request) -> None:
    if length is not None and length != request.file_size:
        raise _neither(length, request)


def _whole_answer_of(data: bytes, request: _Request) -> Answer:
    """A whole file that arrived in memory (a driver's ``cat_file``), as a spill like the others."""
    if request.file_size > request.whole_limit:
        raise _too_large_to_spill(request)
    return Answer(whole=spill_file(data), ranges_ignored=True)


def spill_file(data: bytes) -> BinaryIO:
    """An anonymous local file holding ``data``."""
    spill = tempfile.TemporaryFile(prefix="vclip-spill-")
    try:
        spill.write(data)
        spill.flush()
    except BaseException:
        spill.close()
        raise
    return spill


def _neither(length: int, request: _Request) -> UnreadableVideoError:
    return UnreadableVideoError(request.url, f"the server answered a range request for {request.length:,} bytes "
                                             f"with {length:,}: neither the range nor the whole file "
                                             f"({request.file_size:,} bytes)")


def _too_large_to_spill(request: _Request) -> UnreadableVideoError:
    return too_large_to_spill(request.url, request.file_size, request.whole_limit)


def too_large_to_spill(url: str, size: int, limit: int) -> UnreadableVideoError:
    """The error for a file from a server that ignores ``Range``, larger than the spill limit."""
    return UnreadableVideoError(
        url, f"the server ignores Range requests, so every read sends the whole file ({format_bytes(size)}), more "
             f"than the spill limit ({format_bytes(limit)}): raise it with vclip.set_remote_options(spill_limit=...) "
             "or serve the file with Range support")
