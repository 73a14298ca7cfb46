"""Sparse per-segment indexes: offset -> file position (.index) and timestamp -> offset (.timeindex).

Both use Kafka's on-disk entry formats (OffsetIndex, TimeIndex) so the files look like Kafka's, but they are
plain append files rather than preallocated mmaps: entries live in memory (for binary search) and
reach the file in one open-``pwrite``-close per ``flush``, ``trim``, ``close`` or truncation
rather than one write per entry, so an index holds no descriptor between writes -- a segment is flushed before the recovery point passes it, and every segment after
the recovery point has its indexes rebuilt after a crash, so entries not yet written are never
needed from the file.  Indexes carry no
checksum; ``sanity_check`` catches the damage a crash can do, and the owner rebuilds the index
from the log when it fails (Kafka does the same).

Offsets are stored relative to the segment's base offset, so they must fit in an int32.
"""

from __future__ import annotations

import bisect
import os
import struct
from pathlib import Path

from samsa.errors import KafkaStorageError

__all__ = ["CorruptIndexError", "OffsetIndex", "OffsetPosition", "TimeIndex", "TimestampOffset"]

_OFFSET_ENTRY = struct.Struct(">ii")  # relative offset, physical position
_TIME_ENTRY = struct.Struct(">qi")  # timestamp, relative offset
_INT32_MAX = 0x7FFFFFFF


class CorruptIndexError(KafkaStorageError):
    """An index file failed its sanity check; the segment's indexes must be rebuilt from the log."""


OffsetPosition = tuple[int, int]
"""(absolute offset, file position)"""
TimestampOffset = tuple[int, int]
"""(timestamp, absolute offset)"""


class _IndexFile:
    """An append-only file of fixed-size big-endian entries, mirrored in memory.

    The file is open only while it is read (at load) or written (flush, trim, close,
    truncation), so an idle index holds no descriptor; it is created by its first write.
    """

    entry: struct.Struct

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._keys: list[int] = []
        self._values: list[int] = []
        # The first field of each entry, in memory (never replaced, only changed in place):
        # ``len(index.entries)`` is len(index) without a Python-level __len__ call.
        self.entries = self._keys
        self.load_error: str | None = None
        self._file_size = -1  # bytes in the file as last seen or written; -1: no file
        self._dirty = False  # written since the last fsync
        self._closed = False
        self._load()
        self._written = len(self._keys)  # entries already in the file

    def _load(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        try:
            size = os.fstat(fd).st_size
            data = os.pread(fd, size, 0) if size else b""
        finally:
            os.close(fd)
        self._file_size = size
        if size % self.entry.size:
            # A torn last entry: keep the whole entries and let sanity_check report it.
            self.load_error = f"size {size} is not a multiple of the entry size {self.entry.size}"
        whole = size - size % self.entry.size
        for a, b in self.entry.iter_unpack(memoryview(data)[:whole]):
            self._add(a, b)

    def _add(self, a: int, b: int) -> None:
        raise NotImplementedError

    def _sync_file(self, upto: int | None = None, *, cut: bool = False, fsync: bool = False) -> None:
        """Bring the file in line with memory in one open: write the entries not yet in it (up
        to ``upto`` entries in all), with ``cut`` drop whatever lies past them, with ``fsync``
        make it durable.  Does not open the file when there is nothing to do."""
        if self._closed:
            return
        end = len(self._keys) if upto is None else min(upto, len(self._keys))
        start = self._written
        size = self.entry.size
        pending = end > start
        cutting = cut and self._file_size != end * size
        if not pending and not cutting and not (fsync and self._dirty):
            return
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            if pending:
                pack = self.entry.pack
                data = b"".join([pack(a, b) for a, b in
                                 zip(self._keys[start:end], self._values[start:end])])
                os.pwrite(fd, data, start * size)
                self._written = end
                self._file_size = max(self._file_size, end * size)
                self._dirty = True
            if cutting:
                os.ftruncate(fd, end * size)
                self._file_size = end * size
                self._dirty = True
            if fsync:
                os.fsync(fd)
                self._dirty = False
        finally:
            os.close(fd)

    def __len__(self) -> int:
        return len(self._keys)

    @property
    def size_bytes(self) -> int:
        return len(self._keys) * self.entry.size

    def _truncate_entries(self, count: int) -> None:
        self._sync_file(count, cut=True)
        del self._keys[count:]
        del self._values[count:]
        self._written = min(self._written, count)

    def reset(self) -> None:
        """Drop every entry (before a rebuild)."""
        self.load_error = None
        self._truncate_entries(0)

    def trim(self) -> None:
        """Write pending entries and cut the file to the entries kept in memory (drops a torn
        tail entry)."""
        self._sync_file(cut=True)

    def flush(self) -> None:
        self._sync_file(cut=True, fsync=True)  # cut: also creates a missing file

    def close(self) -> None:
        if not self._closed:
            self.trim()
            self._closed = True

    def abandon(self) -> None:
        """Stop writing the file, leaving pending entries unwritten (as a crash would)."""
        self._closed = True

    def delete(self) -> None:
        self._closed = True
        self.path.unlink(missing_ok=True)

    def _relative(self, offset: int) -> int:
        relative = offset - self.base_offset
        if not 0 <= relative <= _INT32_MAX:
            raise ValueError(
                f"offset {offset} is not representable relative to base offset {self.base_offset}"
            )
        return relative


class OffsetIndex(_IndexFile):
    """``.index``: 8-byte entries (int32 relative offset, int32 position), both increasing."""

    entry = _OFFSET_ENTRY

    def _add(self, a: int, b: int) -> None:
        self._keys.append(a)
        self._values.append(b)

    def append(self, offset: int, position: int) -> None:
        """Add (offset, position); ignored unless both exceed the last entry's."""
        # (The range check inline, and the lists appended here: a segment appends an entry
        # for about every produced batch.)
        relative = offset - self.base_offset
        if not 0 <= relative <= _INT32_MAX:
            self._relative(offset)  # raises
        keys = self._keys
        if keys and (relative <= keys[-1] or position <= self._values[-1]):
            return
        keys.append(relative)
        self._values.append(position)

    def lookup(self, offset: int) -> OffsetPosition:
        """The greatest entry with offset <= ``offset``, else (base offset, 0)."""
        i = bisect.bisect_right(self._keys, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._keys[i], self._values[i]

    def upper_bound_offset(self, position: int) -> int | None:
        """Offset of the first entry at or after file ``position``, or None: an offset past
        every batch that ends by ``position`` (OffsetIndex.fetchUpperBoundOffset)."""
        i = bisect.bisect_left(self._values, position)
        return self.base_offset + self._keys[i] if i < len(self._keys) else None

    @property
    def last_offset(self) -> int:
        """Offset of the last entry, or the base offset when empty."""
        return self.base_offset + (self._keys[-1] if self._keys else 0)

    def truncate_to(self, offset: int) -> None:
        """Remove entries whose offset is >= ``offset``."""
        self._truncate_entries(bisect.bisect_left(self._keys, offset - self.base_offset))

    def sanity_check(self, log_size: int) -> None:
        """Raise CorruptIndexError unless the file is whole, increasing and within the log."""
        if self.load_error:
            raise CorruptIndexError(f"offset index {self.path}: {self.load_error}")
        for i in range(1, len(self._keys)):
            if self._keys[i] <= self._keys[i - 1] or self._values[i] <= self._values[i - 1]:
                raise CorruptIndexError(f"offset index {self.path}: entry {i} is not increasing")
        if self._keys and (self._keys[0] < 0 or self._values[0] < 0 or self._values[-1] >= log_size):
            raise CorruptIndexError(
                f"offset index {self.path}: entries point outside the {log_size}-byte log"
            )


class TimeIndex(_IndexFile):
    """``.timeindex``: 12-byte entries (int64 timestamp, int32 relative offset), both increasing.

    Each entry says: up to and including this offset, no record's timestamp exceeds this one.
    """

    entry = _TIME_ENTRY

    def _add(self, a: int, b: int) -> None:
        self._keys.append(a)  # timestamps
        self._values.append(b)  # relative offsets

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add (timestamp, offset) if the timestamp is larger than the last entry's."""
        relative = offset - self.base_offset  # (as OffsetIndex.append)
        if not 0 <= relative <= _INT32_MAX:
            self._relative(offset)  # raises
        keys = self._keys
        if keys and (timestamp <= keys[-1] or relative < self._values[-1]):
            return
        keys.append(timestamp)
        self._values.append(relative)

    def lookup_before(self, timestamp: int) -> TimestampOffset:
        """The last entry whose timestamp is < ``timestamp``, else (-1, base offset).

        Every record up to that entry's offset is older than ``timestamp``, so a search for the
        first record with timestamp >= ``timestamp`` may start after it.
        """
        i = bisect.bisect_left(self._keys, timestamp) - 1
        if i < 0:
            return -1, self.base_offset
        return self._keys[i], self.base_offset + self._values[i]

    @property
    def last_entry(self) -> TimestampOffset:
        """(timestamp, offset) of the last entry, or (-1, base offset) when empty."""
        if not self._keys:
            return -1, self.base_offset
        return self._keys[-1], self.base_offset + self._values[-1]

    def truncate_to(self, offset: int) -> None:
        """Remove entries whose offset is >= ``offset``."""
        relative = offset - self.base_offset
        count = len(self._values)
        while count and self._values[count - 1] >= relative:
            count -= 1
        self._truncate_entries(count)

    def sanity_check(self, next_offset: int) -> None:
        """Raise CorruptIndexError unless the file is whole, increasing and below ``next_offset``."""
        if self.load_error:
            raise CorruptIndexError(f"time index {self.path}: {self.load_error}")
        for i in range(1, len(self._keys)):
            if self._keys[i] <= self._keys[i - 1] or self._values[i] < self._values[i - 1]:
                raise CorruptIndexError(f"time index {self.path}: entry {i} is not increasing")
        if self._values and (self._values[0] < 0 or self.base_offset + self._values[-1] >= next_offset):
            raise CorruptIndexError(
                f"time index {self.path}: entries point past the log end offset {next_offset}"
            )
