"""Storage errors on the write path: the KafkaStorageError a client gets, logged once.

Kafka turns an IOException on a log directory into KAFKA_STORAGE_ERROR for the partitions in it
(LogDirFailureChannel) and takes the directory offline.  This node has one directory and keeps
serving what it can instead: each failed write answers KAFKA_STORAGE_ERROR, and a write that
succeeds afterwards (space freed, descriptors returned) ends the failure.  The operator sees
one ERROR line per failure episode with the path and the cause, not one per request, and an
INFO line when writes succeed again.
"""

from __future__ import annotations

import errno
import logging
import os
import threading

from samsa.errors import KafkaStorageError

__all__ = ["EPISODES", "FailureEpisodes", "storage_error"]

log = logging.getLogger("samsa.broker.log")

_OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE)


def storage_error(action: str, path: str | os.PathLike[str], exc: OSError) -> KafkaStorageError:
    """KAFKA_STORAGE_ERROR saying what failed, on which file, why, and what to do."""
    if exc.errno in _OUT_OF_DESCRIPTORS:
        hint = ("the broker is out of file descriptors; raise its RLIMIT_NOFILE (ulimit -n) or "
                "lower samsa.log.open.files.max")
    else:
        hint = "check the disk of the data dir"
    cause = exc if exc.filename is None else f"[Errno {exc.errno}] {exc.strerror}"
    return KafkaStorageError(f"{action} {path} failed: {cause}; {hint}")


class FailureEpisodes:
    """Failures by key (a partition, "topic creation", "checkpoint"): the first failure of an
    episode is logged at ERROR, repeats at DEBUG, the first success after it at INFO."""

    def __init__(self) -> None:
        # Open episodes: key -> last failure.  Read it, never write it: a hot write path
        # checks ``if EPISODES.failing`` before calling succeeded().
        self.failing: dict[str, str] = {}
        self._lock = threading.Lock()

    def failed(self, key: str, error: KafkaStorageError) -> None:
        with self._lock:
            first = key not in self.failing
            self.failing[key] = str(error.detail)
        if first:
            log.error("%s: %s (answering KAFKA_STORAGE_ERROR until a write succeeds)",
                      key, error.detail)
        else:
            log.debug("%s: still failing: %s", key, error.detail)

    def succeeded(self, key: str) -> None:
        if not self.failing:
            return
        with self._lock:
            detail = self.failing.pop(key, None)
        if detail is not None:
            log.info("%s: writes succeed again (last failure: %s)", key, detail)

    def __contains__(self, key: str) -> bool:
        return key in self.failing


# One for the process: keys name a partition directory or a data directory, so brokers sharing
# a process (tests) do not mix their episodes.
EPISODES = FailureEpisodes()
