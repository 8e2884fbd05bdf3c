"""Failures of remote reads: what went wrong with a request (from the driver's error and the errors
it was raised from), the :class:`~vclip.errors.VideoError` that says so, and tries again with
exponential backoff for transient ones (refused or reset connections, timeouts, truncated bodies,
HTTP 5xx, 408 and 429, waiting as long as ``Retry-After`` asks, up to a minute)."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

from ..errors import UnreadableVideoError, VideoError, VideoNotFoundError
from .remote_options import RemoteOptions, remote_options
from .remote_reads import count_read

__all__ = ["remote_error", "with_retries"]

_BACKOFF_SECONDS = 0.1  # waits of 0.1, 0.2, 0.4 s... (+ jitter) between tries
_LONGEST_RETRY_AFTER_SECONDS = 60.0


class _TruncatedBody(Exception):
    """An answer shorter than the range asked, inside the file."""


_TRUNCATED = {"ClientPayloadError", "ContentLengthError", "TransferEncodingError", "IncompleteReadError",
              "ResponseStreamingError", "_TruncatedBody"}
_CONNECT_TIMEOUTS = {"ConnectionTimeoutError", "ConnectTimeoutError"}
_READ_TIMEOUTS = {"SocketTimeoutError", "ReadTimeoutError"}
_TIMEOUTS = {"ServerTimeoutError", "FSTimeoutError", "TimeoutError"} | _CONNECT_TIMEOUTS | _READ_TIMEOUTS
_CONNECTION = {"ClientConnectorError", "ClientConnectionError", "ClientOSError", "ServerDisconnectedError",
               "EndpointConnectionError", "ConnectionClosedError", "ConnectionError"}
_TRANSIENT_STATUS = {408, 425, 429}


@dataclass(frozen=True)
class _Failure:
    """What went wrong with a request, from the error and the errors it was raised from."""

    kind: str  # "status", "truncated", "timeout", "connection", "redirects", "not found", "denied", "other"
    error: BaseException
    status: int | None = None
    retry_after: float | None = None

    @property
    def transient(self) -> bool:
        if self.kind == "status":
            return self.status is not None and (self.status >= 500 or self.status in _TRANSIENT_STATUS)
        return self.kind in ("truncated", "timeout", "connection")


def _chain(error: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and not any(current is seen for seen in chain):
        chain.append(current)
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    return chain


def _retry_after(error: BaseException) -> float | None:
    headers = getattr(error, "headers", None)
    value = headers.get("Retry-After") if headers is not None else None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


def _diagnose(error: BaseException) -> _Failure:
    """Drivers wrap errors (fsspec's HTTP ``info`` raises a FileNotFoundError from a refused
    connection): the innermost specific cause decides."""
    chain = _chain(error)
    for at, cause in enumerate(chain):
        names = {kind.__name__ for kind in type(cause).__mro__}
        if "TooManyRedirects" in names:
            return _Failure("redirects", cause)
        if names & _TRUNCATED:
            return _Failure("truncated", cause)
        if names & _TIMEOUTS:  # fsspec's FSTimeoutError wraps the driver's, which says which timeout
            specific = next((inner for inner in chain[at:] if {kind.__name__ for kind in type(inner).__mro__}
                             & (_CONNECT_TIMEOUTS | _READ_TIMEOUTS)), cause)
            return _Failure("timeout", specific)
        status = getattr(cause, "status", None)
        if isinstance(status, int) and not isinstance(status, bool):
            return _Failure("status", cause, status, _retry_after(cause))
        if names & _CONNECTION:
            return _Failure("connection", cause)
    if isinstance(error, PermissionError):
        return _Failure("denied", error)
    if isinstance(error, FileNotFoundError):
        return _Failure("not found", error)
    return _Failure("other", error)


def _reason(error: BaseException) -> str:
    return getattr(error, "strerror", None) or str(error) or type(error).__name__


def _problem(failure: _Failure, options: RemoteOptions) -> str:
    error, status = failure.error, failure.status
    names = {kind.__name__ for kind in type(error).__mro__}
    if failure.kind == "redirects":
        return "too many redirects (a redirect loop?)"
    if failure.kind == "truncated":
        return f"the server ended an answer early (a truncated body: {_reason(error)})"
    if failure.kind == "timeout":
        if names & _CONNECT_TIMEOUTS:
            return f"timed out connecting to the server (connect_timeout {options.connect_timeout:g} s)"
        if names & _READ_TIMEOUTS:
            return f"timed out waiting for the server's answer (read_timeout {options.read_timeout:g} s)"
        return f"timed out ({_reason(error)})"
    if failure.kind == "connection":
        return f"cannot connect to the server ({_reason(error)})"
    if failure.kind == "status":
        if status == 429 or (status is not None and status >= 500):
            return f"the server answered HTTP {status}"
        return f"the server answered HTTP {status} ({_reason(error)})"
    return f"cannot be read ({type(error).__name__}: {_reason(error)})"


def remote_error(url: str, error: BaseException, options: RemoteOptions | None = None) -> VideoError:
    """The :class:`VideoError` for a failure of a remote read of ``url``."""
    if isinstance(error, VideoError):
        return error
    failure = _diagnose(error)
    if failure.kind == "denied" or failure.status in (401, 403):
        because = f"HTTP {failure.status}" if failure.status else _reason(error)
        return UnreadableVideoError(url, f"access denied ({because})")
    if failure.kind == "not found" or failure.status in (404, 410):
        because = f"; HTTP {failure.status}" if failure.status else ""  # memory://, file://... have no status
        return VideoNotFoundError(url, f"not found (no such object{because})")
    return UnreadableVideoError(url, _problem(failure, options or remote_options()))


def with_retries(url: str, request, options: RemoteOptions):
    """``request()``, tried ``options.attempts`` times on transient failures; counted; any failure
    as a VideoError naming ``url``."""
    for attempt in range(1, options.attempts + 1):
        count_read(url, requests=1, retries=int(attempt > 1))
        try:
            return request()
        except Exception as error:  # noqa: BLE001  fsspec drivers raise their own types (aiohttp, botocore)
            if isinstance(error, VideoError):
                raise
            failure = _diagnose(error)
            if not failure.transient or attempt == options.attempts:
                problem = remote_error(url, error, options)
                if failure.transient:
                    problem = UnreadableVideoError(url, f"{problem.problem}, still failing after "
                                                        f"{options.attempts} tries")
                raise problem from None
        wait = _BACKOFF_SECONDS * 2 ** (attempt - 1) * (1 + random.random() / 2)
        if failure.retry_after is not None:
            wait = max(wait, min(failure.retry_after, _LONGEST_RETRY_AFTER_SECONDS))
        time.sleep(wait)

