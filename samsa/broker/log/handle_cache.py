"""HandleCache: a bounded LRU of open segment ``.log`` descriptors.

Kafka keeps every segment's files open for the segment's lifetime (three descriptors a segment,
mmaps for the indexes), which is why its docs ask for a large RLIMIT_NOFILE.  Here a partition
at rest holds no descriptor: a segment asks the cache for its file when it appends or reads,
the cache opens it on a miss and drops the least recently used handle once it holds
``capacity``.  Dropping is not closing: a FileHandle closes when its last user is gone, so a
FileSlice being sent, or an append running on another thread, keeps its descriptor valid (and
its number unreused) after eviction.  Descriptors in use are therefore ``capacity`` plus the
handles in flight.
"""

from __future__ import annotations

import errno
import logging
import os
import resource
import threading
from collections import OrderedDict

from samsa.broker.log.file_slice import FileHandle

__all__ = ["DEFAULT_CAPACITY_SHARE", "MIN_CAPACITY", "HandleCache", "auto_capacity", "shared_cache"]

log = logging.getLogger(__name__)

# The auto-sized cache takes this share of the soft RLIMIT_NOFILE, leaving the rest to client
# connections, transient files (checkpoints, index writes, snapshots) and the interpreter.
DEFAULT_CAPACITY_SHARE = 4
MIN_CAPACITY = 16


def auto_capacity() -> int:
    """A quarter of the soft descriptor limit, at least MIN_CAPACITY (256 under the usual 1024)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    return max(MIN_CAPACITY, soft // DEFAULT_CAPACITY_SHARE)


class HandleCache:
    """Open ``.log`` descriptors keyed by path, at most ``capacity`` of them kept."""

    def __init__(self, capacity: int | None = None) -> None:
        self.capacity = auto_capacity() if capacity is None or capacity <= 0 else capacity
        self._open: OrderedDict[str, FileHandle] = OrderedDict()
        self._lock = threading.Lock()
        self.opens = 0  # files opened (misses), for tests and metrics

    def __len__(self) -> int:
        return len(self._open)

    def get(self, path: str, *, create: bool = False) -> FileHandle:
        """The open handle of ``path`` (opened now on a miss).  Keep the returned handle in a
        local while using its ``fd``: the handle, not the cache, keeps the descriptor open.

        ``create`` makes a missing file (a new segment); otherwise a missing file is an
        OSError (FileNotFoundError), as it would be for a file held open and then unlinked.
        """
        # A hit takes no lock (every append asks): get and move_to_end are each atomic, and a
        # handle evicted in between stays usable, as one evicted right after the return would.
        handle = self._open.get(path)
        if handle is not None:
            try:
                self._open.move_to_end(path)
            except KeyError:
                pass  # evicted meanwhile
            return handle
        flags = os.O_RDWR | os.O_CLOEXEC | (os.O_CREAT if create else 0)
        try:
            fd = os.open(path, flags, 0o644)
        except OSError as exc:
            if exc.errno not in (errno.EMFILE, errno.ENFILE):
                raise
            # Out of descriptors: give back half of what the cache holds and try once more.
            self._shrink(len(self._open) // 2)
            fd = os.open(path, flags, 0o644)
        handle = FileHandle(fd, path)
        with self._lock:
            self.opens += 1
            current = self._open.get(path)
            if current is not None:  # another thread opened it meanwhile: use one handle
                self._open.move_to_end(path)
                handle = current
            else:
                self._open[path] = handle
                while len(self._open) > self.capacity:
                    self._open.popitem(last=False)
        return handle

    def _shrink(self, keep: int) -> None:
        with self._lock:
            while len(self._open) > keep:
                self._open.popitem(last=False)

    def forget(self, path: str) -> None:
        """Drop ``path``'s handle without closing it (slices in flight keep reading it)."""
        with self._lock:
            self._open.pop(path, None)


_shared: HandleCache | None = None
_shared_lock = threading.Lock()


def shared_cache() -> HandleCache:
    """The process's cache for segments opened without one (tests, tools, standalone Logs)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = HandleCache()
        return _shared
