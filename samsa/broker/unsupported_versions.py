"""Logging requests of API versions this broker does not serve: once per client and version.

Kafka closes the connection on such a request (ApiVersions excepted) and a client that does not
negotiate versions reconnects and sends the same request again, every few hundred milliseconds,
for as long as it runs.  A warning per request would bury everything else in the broker's log,
so the first request of each (client host, client id, API key, version) is logged as a warning
and the repeats at debug level.
"""

from __future__ import annotations

import logging
import threading

__all__ = ["log_unsupported_version"]

_MAX_REMEMBERED = 10_000  # clients choose their ids: keep the memory bounded
_seen: set[tuple[str, str | None, int, int]] = set()
_lock = threading.Lock()


def _first_time(key: tuple[str, str | None, int, int]) -> bool:
    with _lock:
        if key in _seen:
            return False
        if len(_seen) >= _MAX_REMEMBERED:
            _seen.clear()
        _seen.add(key)
        return True


def log_unsupported_version(logger: logging.Logger, client_host: str, client_id: str | None,
                            api_key: int, version: int, connection_id: str) -> None:
    """Log that a connection is closed for an unsupported API key or version."""
    first = _first_time((client_host, client_id, api_key, version))
    logger.log(logging.WARNING if first else logging.DEBUG,
               "closing connection %s (client %r from %s): API key %d version %d is not "
               "supported%s", connection_id, client_id, client_host, api_key, version,
               "" if not first else " (repeats from this client are logged at debug level)")
