"""How vclip reads videos at URLs (:class:`RemoteOptions`): timeouts, tries and the spill limit,
kept in environment variables so that decode processes started later use them too, and the fsspec
storage options that give each driver vclip's timeouts."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

from ..errors import ArgumentError, check_integer, check_number, parse_bytes

__all__ = ["RemoteOptions", "remote_options", "set_remote_options", "storage_options"]


@dataclass(frozen=True)
class RemoteOptions:
    """How vclip reads videos at URLs.

    Attributes:
        connect_timeout: Seconds to wait for a connection to the server (default 10).
        read_timeout: Seconds to wait for the next data of an answer (default 30): a server that
            accepts a request and never answers fails the try after this long.
        attempts: Tries per request before a transient failure is reported (default 4).
        spill_limit: Bytes of local spill files, all URLs of the process together, for servers
            that ignore ``Range`` (default 2 GiB); a file larger than this from such a server is
            reported as unreadable.
    """

    connect_timeout: float = 10.0
    read_timeout: float = 30.0
    attempts: int = 4
    spill_limit: int = 2 << 30


_ENVIRONMENT = {
    "connect_timeout": "VCLIP_REMOTE_CONNECT_TIMEOUT",
    "read_timeout": "VCLIP_REMOTE_READ_TIMEOUT",
    "attempts": "VCLIP_REMOTE_ATTEMPTS",
    "spill_limit": "VCLIP_REMOTE_SPILL_LIMIT",
}
_options_lock = threading.Lock()
_options_cache: tuple[tuple[str | None, ...], RemoteOptions] | None = None


def _checked_option(name: str, value) -> float | int:
    if name == "attempts":
        return check_integer(name, value, minimum=1)
    if name == "spill_limit":
        return parse_bytes(value, name=name)
    return check_number(name, value, minimum=0, minimum_inclusive=False)


def remote_options() -> RemoteOptions:
    """The options in force (from the environment variables :func:`set_remote_options` sets).

    Raises:
        ArgumentError: One of the variables holds a value the option does not allow.
    """
    global _options_cache
    values = tuple(os.environ.get(variable) for variable in _ENVIRONMENT.values())
    with _options_lock:
        if _options_cache is not None and _options_cache[0] == values:
            return _options_cache[1]
    chosen: dict[str, Any] = {}
    for (name, variable), text in zip(_ENVIRONMENT.items(), values):
        if text is None:
            continue
        value: str | float = text
        try:
            value = {"attempts": int, "spill_limit": str}.get(name, float)(text)
        except ValueError:
            pass  # refused below, with the text as it is
        try:
            chosen[name] = _checked_option(name, value)
        except ArgumentError as error:
            raise ArgumentError(f"environment variable {variable}: {error}") from None
    options = RemoteOptions(**chosen)
    with _options_lock:
        _options_cache = (values, options)
    return options


def set_remote_options(*, connect_timeout: float | None = None, read_timeout: float | None = None,
                       attempts: int | None = None, spill_limit: int | str | None = None) -> RemoteOptions:
    """Set how videos at URLs are read, for this process and the decode processes it starts
    later (the values go to environment variables ``VCLIP_REMOTE_CONNECT_TIMEOUT``,
    ``VCLIP_REMOTE_READ_TIMEOUT``, ``VCLIP_REMOTE_ATTEMPTS`` and ``VCLIP_REMOTE_SPILL_LIMIT``,
    which may also be set before Python starts). Options left None keep their value.

    Args:
        connect_timeout: Seconds to wait for a connection (> 0; default 10).
        read_timeout: Seconds to wait for the next data of an answer (> 0; default 30).
        attempts: Tries per request (>= 1; default 4).
        spill_limit: Bytes of local spill files for servers that ignore ``Range``: an integer
            or a string with a unit (``"8GiB"``; default 2 GiB).

    Returns:
        The options now in force. Fetch timeouts apply from the next request on.

    Raises:
        ArgumentError: A value out of range.
    """
    given = {"connect_timeout": connect_timeout, "read_timeout": read_timeout, "attempts": attempts,
             "spill_limit": spill_limit}
    checked = {name: _checked_option(name, value) for name, value in given.items() if value is not None}
    for name, value in checked.items():
        os.environ[_ENVIRONMENT[name]] = repr(value) if isinstance(value, float) else str(value)
    return remote_options()


def storage_options(protocol: str, options: RemoteOptions) -> dict:
    """fsspec storage options that give the protocol's driver vclip's timeouts (what fsspec's own
    configuration sets for them is kept: it wins)."""
    import fsspec.config

    if protocol in ("http", "https"):
        import aiohttp

        client = {**fsspec.config.conf.get("http", {}).get("client_kwargs", {}),
                  **fsspec.config.conf.get("https", {}).get("client_kwargs", {})}  # as fsspec merges them
        client.setdefault("timeout", aiohttp.ClientTimeout(
            total=None, sock_connect=options.connect_timeout, sock_read=options.read_timeout))
        return {"client_kwargs": client}
    if protocol in ("s3", "s3a"):
        config = dict(fsspec.config.conf.get(protocol, {}).get("config_kwargs", {}))
        config.setdefault("connect_timeout", options.connect_timeout)
        config.setdefault("read_timeout", options.read_timeout)
        return {"config_kwargs": config}
    return {}



def _after_fork() -> None:  # a lock held by another thread at fork would never be released in the child
    global _options_lock
    _options_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)
