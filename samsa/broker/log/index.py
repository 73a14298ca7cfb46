"""Sparse per-segment indexes: offset -> file position (.index) and timestamp -> offset (.timeindex).

Both use Kafka's on-disk entry formats (OffsetIndex, TimeIndex) so the files look like Kafka's, but they are
plain append files rather than preallocated mmaps: entries live in memory (for binary search) and
reach the file in one ``pwrite`` per ``flush``, ``trim``, ``close`` or truncation rather than one
per entry -- a segment is flushed before the recovery point passes it, and every segment after
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
    """An append-only file of fixed-size big-endian entries, mirrored in memory."""

    entry: struct.Struct

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self._keys: list[int] = []
        self._values: list[int] = []
        self.load_error: str | None = None
        self._load()
        self._written = len(self._keys)  # entries already in the file

    def _load(self) -> None:
        size = os.fstat(self._fd).st_size
        data = os.pread(self._fd, size, 0) if size else b""
        if size % self.entry.size:
            # A torn last entry: keep the whole entries and let sanity_check report it.
            self.load_error = f"size {size} is not a multiple of the entry size {self.entry.size}"
        whole = size - size % self.entry.size
        for a, b in self.entry.iter_unpack(memoryview(data)[:whole]):
            self._add(a, b)

    def _add(self, a: int, b: int) -> None:
        raise NotImplementedError

    def _write_pending(self, upto: int | None = None) -> None:
        """Write the entries not yet in the file (up to ``upto`` entries in all)."""
        end = len(self._keys) if upto is None else min(upto, len(self._keys))
        start = self._written
        if end <= start or self._fd < 0:
            return
        pack = self.entry.pack
        data = b"".join([pack(a, b) for a, b in zip(self._keys[start:end], self._values[start:end])])
        os.pwrite(self._fd, data, start * self.entry.size)
        self._written = end

    def __len__(self) -> int:
        return len(self._keys)

    @property
    def size_bytes(self) -> int:
        return len(self._keys) * self.entry.size

    def _truncate_entries(self, count: int) -> None:
        self._write_pending(count)
        del self._keys[count:]
        del self._values[count:]
        self._written = min(self._written, count)
        os.ftruncate(self._fd, count * self.entry.size)

    def reset(self) -> None:
        """Drop every entry (before a rebuild)."""
        self.load_error = None
        self._truncate_entries(0)

    def trim(self) -> None:
        """Write pending entries and cut the file to the entries kept in memory (drops a torn
        tail entry)."""
        self._write_pending()
        os.ftruncate(self._fd, self.size_bytes)

    def flush(self) -> None:
        self._write_pending()
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            self.trim()
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
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
        relative = self._relative(offset)
        if self._keys and (relative <= self._keys[-1] or position <= self._values[-1]):
            return
        self._add(relative, position)

    def lookup(self, offset: int) -> OffsetPosition:
        """The greatest entry with offset <= ``offset``, else (base offset, 0)."""
        i = bisect.bisect_right(self._keys, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._keys[i], self._values[i]

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
        relative = self._relative(offset)
        if self._keys and (timestamp <= self._keys[-1] or relative < self._values[-1]):
            return
        self._add(timestamp, relative)

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
