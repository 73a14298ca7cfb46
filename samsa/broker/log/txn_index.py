"""``.txnindex``: a segment's aborted transactions (Kafka's TransactionIndex and AbortedTxn).

One entry per transaction aborted by an ABORT marker written in the segment, in marker order:
34 bytes, big-endian, ``int16 version (0) · int64 producer id · int64 first offset · int64
last offset (the marker's) · int64 last stable offset`` (the LSO once the transaction ended).
Last offsets strictly increase.  A read_committed fetch collects the entries that overlap the
fetched range (``collect``) so that consumers can drop the aborted records.

Entries are few (one per aborted transaction), so they live in memory for fetches; each
append is written to the file at once (no descriptor is held between writes) and reaches the
disk at the segment's flush.  The file is created by its first entry, as Kafka's.  Loading
checks the file (``load_error``): a torn tail, an unknown version, entries out of order or
outside the segment mean the owner must ``reset`` it and rebuild it from the log.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from samsa.broker.log.index import CorruptIndexError

__all__ = ["ABORTED_TXN_SIZE", "AbortedTxn", "TransactionIndex"]

_ENTRY = struct.Struct(">hqqqq")
ABORTED_TXN_SIZE = _ENTRY.size  # 34
_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """An aborted transaction: its producer, first and last (marker) offset, and the LSO then."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def pack(self) -> bytes:
        return _ENTRY.pack(_VERSION, self.producer_id, self.first_offset, self.last_offset,
                           self.last_stable_offset)


class TransactionIndex:
    """The ``<base offset>.txnindex`` file of one segment."""

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.entries: list[AbortedTxn] = []
        self.load_error: str | None = None
        self._dirty = False  # written since the last fsync
        self._stale = False  # a write failed: the file lags the entries until rewritten
        self._closed = False
        self._load()

    def _load(self) -> None:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        whole = len(data) - len(data) % ABORTED_TXN_SIZE
        last = -1
        for i, (version, pid, first, last_offset, lso) in enumerate(_ENTRY.iter_unpack(data[:whole])):
            if version != _VERSION:
                self.load_error = f"entry {i} has version {version}; only {_VERSION} is known"
            elif last_offset < self.base_offset or first > last_offset:
                self.load_error = (f"entry {i} (offsets {first}-{last_offset}) does not end in "
                                   f"the segment starting at {self.base_offset}")
            elif last_offset <= last:
                self.load_error = f"entry {i}: last offset {last_offset} does not increase"
            if self.load_error:
                break  # keep only what precedes the damage; never serve it
            self.entries.append(AbortedTxn(pid, first, last_offset, lso))
            last = last_offset
        if whole != len(data) and not self.load_error:
            self.load_error = (f"size {len(data)} is not a multiple of the entry size "
                               f"{ABORTED_TXN_SIZE} (a torn last entry)")

    def sanity_check(self) -> None:
        """Raise CorruptIndexError if loading found the file damaged."""
        if self.load_error:
            raise CorruptIndexError(f"transaction index {self.path}: {self.load_error}")

    @property
    def last_offset(self) -> int:
        """Last offset of the last entry, -1 when empty."""
        return self.entries[-1].last_offset if self.entries else -1

    def append(self, txn: AbortedTxn) -> None:
        """Add an aborted transaction whose marker is at ``txn.last_offset`` (the newest)."""
        if txn.last_offset <= self.last_offset:
            raise ValueError(
                f"transaction index {self.path}: last offset {txn.last_offset} is not greater "
                f"than the last entry's {self.last_offset}"
            )
        # In memory first: fetches must skip the aborted records even if the write fails
        # (then the next flush rewrites the file).
        self.entries.append(txn)
        if self._closed:
            return
        if self._stale:
            self._write(self._packed(), 0)
        else:
            self._write(txn.pack(), (len(self.entries) - 1) * ABORTED_TXN_SIZE)

    def _packed(self) -> bytes:
        return b"".join(txn.pack() for txn in self.entries)

    def _write(self, data: bytes, position: int) -> None:
        self._stale = True  # until the write is through
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            os.pwrite(fd, data, position)
            os.ftruncate(fd, position + len(data))  # a torn tail past it is dropped
            self._dirty = True
            self._stale = False
        finally:
            os.close(fd)

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping [fetch_offset, upper_bound), and whether the search is complete:
        an entry whose LSO is at or past ``upper_bound`` ends it, since every later aborted
        transaction began at or after that LSO (TransactionIndex.collectAbortedTxns)."""
        found = []
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound:
                return found, True
        return found, False

    def truncate_to(self, offset: int) -> None:
        """Remove the entries whose last offset is >= ``offset``."""
        keep = len(self.entries)
        while keep and self.entries[keep - 1].last_offset >= offset:
            keep -= 1
        if keep == len(self.entries):
            return
        del self.entries[keep:]
        if not self._closed:
            self._cut(keep * ABORTED_TXN_SIZE)

    def reset(self) -> None:
        """Drop every entry (before a rebuild from the log)."""
        self.entries.clear()
        self.load_error = None
        if not self._closed and (self._stale or self.path.exists()):
            self._cut(0)

    def _cut(self, size: int) -> None:
        if self._stale:
            self._write(self._packed(), 0)  # also cuts the file to the entries kept
            return
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            os.ftruncate(fd, size)
            self._dirty = True
        finally:
            os.close(fd)

    def flush(self) -> None:
        if self._closed:
            return
        if self._stale:
            self._write(self._packed(), 0)
        if not self._dirty:
            return
        fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self._dirty = False

    def close(self) -> None:
        if self._stale and not self._closed:
            self._write(self._packed(), 0)
        self._closed = True

    def abandon(self) -> None:
        self._closed = True

    def delete(self) -> None:
        self._closed = True
        self.path.unlink(missing_ok=True)
