"""alocals3's S3-compatible server on localhost, for the remote-source tests and benchmarks/shards.py.

Unlike moto's server, which reads the whole object for every range request, alocals3 (a static
Rust executable inside the ``alocals3`` wheel on PyPI, 0.11.2; wheels for Python 3.12 and later)
seeks to the range asked for and reads only that: it shows what a range read of a large object costs.

Its objects live at ``/s3/{bucket}/{key}``: S3 clients take ``http://127.0.0.1:PORT/s3`` as the
endpoint, with path-style addressing. Its answer to a PUT is not the one boto3 expects, so objects
are seeded here by plain HTTP PUTs (authentication is off; any credentials are accepted).
"""

from __future__ import annotations

import http.client
import importlib.util
import os
import shutil
import socket
import stat
import subprocess
import time
import urllib.parse
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ALOCALS3_VARIABLE = "VCLIP_ALOCALS3"
"""Where alocals3's server is when the package is not installed: its ``alocals3-server`` executable,
or an alocals3 wheel (the executable is unpacked from it), e.g. one fetched for another Python with
``pip download alocals3==0.11.2 --no-deps --only-binary=:all: --python-version 3.12 --platform
manylinux_2_28_x86_64 -d wheels/``."""

_MEMBER = "alocals3/bin/alocals3-server"  # the executable inside the wheel
_START_SECONDS = 20.0
_STOP_SECONDS = 5.0


def alocals3_executable(where: str | os.PathLike | None = None, folder: str | os.PathLike | None = None) -> str | None:
    """The ``alocals3-server`` executable: ``where`` (default ``$VCLIP_ALOCALS3``), the executable
    itself or a wheel whose executable is unpacked into ``folder`` (default: beside the wheel);
    else the installed ``alocals3`` package's; None when there is none."""
    where = where or os.environ.get(ALOCALS3_VARIABLE)
    if where:
        path = Path(where)
        if path.suffix != ".whl":
            return str(path)
        target = Path(folder or path.parent) / f"{path.stem}-server"
        if not target.exists():
            with zipfile.ZipFile(path) as wheel, wheel.open(_MEMBER) as member, open(target, "wb") as out:
                shutil.copyfileobj(member, out)
            target.chmod(target.stat().st_mode | stat.S_IXUSR)
        return str(target)
    spec = importlib.util.find_spec("alocals3")  # found without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    installed = Path(next(iter(spec.submodule_search_locations))) / "bin" / "alocals3-server"
    return str(installed) if installed.exists() else None


class Alocals3:
    """A running alocals3 server: its ``endpoint`` for S3 clients and ``pid``."""

    def __init__(self, process: subprocess.Popen, port: int):
        self.process = process
        self.pid = process.pid
        self.port = port
        self.endpoint = f"http://127.0.0.1:{port}/s3"

    def fsspec_options(self) -> dict:
        """fsspec's ``s3`` options for this server (path-style addressing; any credentials)."""
        return {"endpoint_url": self.endpoint, "key": "testing", "secret": "testing",
                "config_kwargs": {"s3": {"addressing_style": "path"}}}

    def create_bucket(self, bucket: str) -> None:
        self._request("PUT", f"/s3/{urllib.parse.quote(bucket)}", expect=(200, 201, 409))

    def put(self, bucket: str, key: str, file: str | os.PathLike) -> None:
        """Upload ``file`` as object ``key`` (a plain PUT whose body streams from the file)."""
        with open(file, "rb") as body:
            self._request("PUT", f"/s3/{urllib.parse.quote(bucket)}/{urllib.parse.quote(key)}", body=body,
                          headers={"Content-Length": str(os.fstat(body.fileno()).st_size)}, expect=(200, 201))

    def get_range(self, bucket: str, key: str, start: int, length: int) -> bytes:
        """Bytes ``[start, start + length)`` of object ``key`` (a plain GET with ``Range``)."""
        return self._request("GET", f"/s3/{urllib.parse.quote(bucket)}/{urllib.parse.quote(key)}", expect=(206,),
                             headers={"Range": f"bytes={start}-{start + length - 1}"})

    def bytes_read(self) -> int:
        """Bytes the server process has read so far (files, its database: ``rchar`` of /proc/PID/io)."""
        for line in Path(f"/proc/{self.pid}/io").read_text().splitlines():
            if line.startswith("rchar:"):
                return int(line.split()[1])
        raise RuntimeError(f"/proc/{self.pid}/io has no rchar")

    def _request(self, method: str, path: str, *, body=None, headers: dict | None = None,
                 expect: tuple[int, ...] = (200,)) -> bytes:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            connection.request(method, path, body=body, headers=headers or {})
            answer = connection.getresponse()
            data = answer.read()
        finally:
            connection.close()
        if answer.status not in expect:
            raise RuntimeError(f"alocals3: {method} {path} answered {answer.status}: {data[:200]!r}")
        return data


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def alocals3_server(executable: str, folder: str | os.PathLike) -> Iterator[Alocals3]:
    """alocals3's server on a free 127.0.0.1 port, its database and objects in ``folder``; stopped
    (and waited for) on the way out.

    Raises:
        RuntimeError: It did not start (its stderr says why).
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    log = open(folder / "server.log", "wb")
    process = subprocess.Popen(
        [executable, "--host", "127.0.0.1", "--port", str(port), "--database-url", f"sqlite:///{folder.resolve()}/meta.db",
         "--storage-root", str(folder / "objects"), "--log-level", "warn", "--disable-gc", "--min-free-bytes", "0",
         "--lifecycle-interval-secs", "0"],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    try:
        server = Alocals3(process, port)
        deadline = time.monotonic() + _START_SECONDS
        while True:
            try:
                server._request("GET", "/healthz")
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    said = (folder / "server.log").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"alocals3's server did not start: {said}") from None
                time.sleep(0.05)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
