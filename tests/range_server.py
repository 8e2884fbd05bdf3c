"""Real servers on localhost for the remote-source tests and benchmark: an HTTP file server that
honours ``Range`` requests and counts what it sends, and moto's S3-compatible server."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

_RANGE = re.compile(r"bytes=(\d+)-(\d*)$")
LIE_BYTES = 800 << 20  # what /lying/ and /endless/ send at most


class RangeServer(ThreadingHTTPServer):
    """Serves the files of ``root`` (GET/HEAD, single byte ranges, ETag and Last-Modified).

    Attributes:
        bytes_sent: Body bytes sent so far (all requests).
        requests: ``(method, path, Range header or None, status)`` of every request.

    Misbehaviour by path prefix: ``/flaky/`` answers 503 to the first GET of each distinct range,
    ``/busy/`` 429 with ``Retry-After: 1`` to the first GET of each range, ``/secret/`` 403,
    ``/down/`` always 503; ``/hang/`` accepts the request and never answers; ``/whole/`` ignores
    ``Range`` (200 and the whole file); ``/cut/`` sends half of each body, then closes the
    connection, and ``/cut-once/`` does so to the first GET of each range only; ``/loop/``
    redirects to itself; ``/lying/`` answers every GET with 200 and a body of :data:`LIE_BYTES`
    (declared), ``/endless/`` with 200 and a body without a length that never ends (both stream
    zeros until the client hangs up; HEAD tells the true size).
    """

    daemon_threads = True
    request_queue_size = 128  # concurrent range requests (label members, coalesced spans) overflowed the default 5

    def __init__(self, root: str | os.PathLike):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.root = Path(root)
        self.bytes_sent = 0
        self.requests: list[tuple[str, str, str | None, int]] = []
        self._failed_once: set[tuple[str, str | None]] = set()
        self.lock = threading.Lock()
        self._etags: dict[tuple[str, int, int], str] = {}
        self.stopping = threading.Event()  # set at shutdown: requests under /hang/ end

    def etag(self, file: Path, stat: os.stat_result) -> str:
        """The MD5 of ``file``'s content, computed once per size and modification time."""
        key = (str(file), stat.st_size, stat.st_mtime_ns)
        with self.lock:
            known = self._etags.get(key)
        if known is None:
            known = hashlib.md5(file.read_bytes()).hexdigest()
            with self.lock:
                self._etags[key] = known
        return known

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/{name}"

    def reset_counts(self) -> None:
        with self.lock:
            self.bytes_sent = 0
            self.requests.clear()


class _Handler(BaseHTTPRequestHandler):
    server: RangeServer

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def do_GET(self) -> None:
        self._serve(body=True)

    def _record(self, status: int, sent: int = 0) -> None:
        with self.server.lock:
            self.server.bytes_sent += sent
            self.server.requests.append((self.command, self.path, self.headers.get("Range"), status))

    def _serve(self, body: bool) -> None:
        name = self.path.lstrip("/")
        wanted = self.headers.get("Range")
        prefix, _, rest = name.partition("/")
        if prefix == "secret":
            return self._status(403)
        if prefix == "down":
            return self._status(503)
        if prefix == "hang":
            self._record(0)
            self.server.stopping.wait()
            return None
        if prefix == "loop":
            return self._status(302, Location=self.path)
        if prefix in ("lying", "endless") and body:
            return self._flood(declared=prefix == "lying")
        if prefix in ("flaky", "busy", "cut-once") and body:
            with self.server.lock:
                first = (name, wanted) not in self.server._failed_once
                self.server._failed_once.add((name, wanted))
            if first and prefix == "flaky":
                return self._status(503)
            if first and prefix == "busy":
                return self._status(429, **{"Retry-After": "1"})
            cut = first
        else:
            cut = prefix == "cut"
        if prefix in ("flaky", "busy", "cut-once", "cut", "whole", "lying", "endless"):
            name = rest
        file = self.server.root / name
        if not file.is_file():
            return self._status(404)
        stat = file.stat()
        size = stat.st_size
        start, end, status = 0, size, 200
        match = _RANGE.match(wanted or "")
        if match and prefix != "whole":
            start = int(match.group(1))
            end = min(size, int(match.group(2)) + 1 if match.group(2) else size)
            if start >= size:
                return self._status(416)
            status = 206
        sent = (end - start) // 2 if cut and body else end - start
        self._record(status, sent if body else 0)  # before replying: the client may go on at once
        self.send_response(status)
        self.send_header("Content-Length", str(end - start))
        if prefix != "whole":
            self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", f'"{self.server.etag(file, stat)}"')
        self.send_header("Last-Modified", formatdate(stat.st_mtime, usegmt=True))
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
        self.end_headers()
        if body:
            with open(file, "rb") as handle:
                handle.seek(start)
                self.wfile.write(handle.read(sent))
            if sent < end - start:
                self.close_connection = True
        return None

    def _flood(self, declared: bool) -> None:
        """200 and zeros until the client hangs up (:data:`LIE_BYTES` of them at most)."""
        self.send_response(200)
        if declared:
            self.send_header("Content-Length", str(LIE_BYTES))
        self.end_headers()
        piece, sent = bytes(1 << 20), 0
        try:
            while sent < LIE_BYTES:
                self.wfile.write(piece)
                sent += len(piece)
        except OSError:  # the client hung up
            pass
        finally:
            self._record(200, sent)
            self.close_connection = True

    def _status(self, status: int, **headers: str) -> None:
        self._record(status)
        self.send_response(status)
        self.send_header("Content-Length", "0")
        for header, value in headers.items():
            self.send_header(header, value)
        self.end_headers()


@contextmanager
def range_server(root: str | os.PathLike) -> Iterator[RangeServer]:
    """A :class:`RangeServer` of ``root`` running on a free localhost port."""
    server = RangeServer(root)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stopping.set()
        server.shutdown()
        server.server_close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def s3_server() -> Iterator[str]:
    """moto's S3-compatible server on a free localhost port; yields its endpoint URL.

    Credentials are fake (``testing``); set them in the environment before creating clients.
    """
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@contextmanager
def s3_bucket(bucket: str, files: dict[str, Path]) -> Iterator[str]:
    """moto's S3 server with ``bucket`` holding ``files`` (object key: local file), the fake
    credentials in the environment and fsspec's ``s3`` options pointed at it; yields the endpoint.
    moto, s3fs and boto3 come with the test extra (the GPU machine has none of them)."""
    from helpers import require_extra

    for module in ("moto", "s3fs", "boto3"):
        require_extra(module)
    import boto3
    import fsspec
    import pytest

    with pytest.MonkeyPatch.context() as patch:
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            patch.setenv(name, "testing")
        patch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        with s3_server() as endpoint:
            client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
            client.create_bucket(Bucket=bucket)
            for key, file in files.items():
                client.upload_file(str(file), bucket, key)
            patch.setitem(fsspec.config.conf, "s3", {"endpoint_url": endpoint, "key": "testing", "secret": "testing"})
            yield endpoint
