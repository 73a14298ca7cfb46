"""LogSegment: one ``.log`` file of record batches plus its ``.index``, ``.timeindex`` and
``.txnindex``.

A segment is not thread-safe; its ``Log`` serialises appends, truncation and deletion.  Reads
of bytes below a position the Log has published (the high watermark) are safe concurrently
with appends, because files only grow while the broker runs.

Disk blocks are reserved ahead of the appends (Linux ``fallocate`` with FALLOC_FL_KEEP_SIZE,
1-8 MiB past the end): a buffered append into blocks already reserved skips ext4's
delayed-allocation bookkeeping per page, a sixth of the write's CPU for 16 KiB appends and
more for 1 MiB ones.  The file's size stays the bytes appended, so readers and recovery see
what they would without it; the blocks past the end are released (``ftruncate`` to the size,
mtime kept) when the segment stops being written (``on_become_inactive``: roll, close, the
cleaner's output) and by ``recover`` after a crash.  Kafka's ``preallocate`` (whole
segment.bytes, by growing the file) is another thing and stays refused (config.py).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from samsa.broker.log.file_slice import FileHandle, FileSlice
from samsa.broker.log.files import TXN_INDEX_SUFFIX, filename_prefix, segment_paths
from samsa.broker.log.handle_cache import HandleCache, shared_cache
from samsa.broker.log.index import CorruptIndexError, OffsetIndex, TimeIndex
from samsa.broker.log.txn_index import TransactionIndex
from samsa.errors import CorruptRecordError
from samsa.records import (
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    read_batch_header,
    validate_batch,
)

__all__ = ["BatchPosition", "LogSegment"]

_INT32_MAX = 0x7FFFFFFF
_SCAN_CHUNK = 64 * 1024
_RECOVER_CHUNK = 1024 * 1024
# Blocks reserved past the end of the appends: four appends' worth, within these bounds.
_PREALLOCATE_MIN = 1024 * 1024
_PREALLOCATE_MAX = 8 * 1024 * 1024
_FALLOC_FL_KEEP_SIZE = 0x01  # linux/falloc.h


def _load_fallocate() -> Any:
    """libc's fallocate(2) (os has only posix_fallocate, which grows the file), or None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fallocate = libc.fallocate64
    except (OSError, AttributeError):
        return None
    fallocate.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
    fallocate.restype = ctypes.c_int
    return fallocate


_fallocate = _load_fallocate()


def _reserve(fd: int, offset: int, length: int) -> bool:
    """Reserve blocks for ``offset``..``offset + length`` without changing the file's size;
    False if that could not be done (the appends then allocate as they go)."""
    global _fallocate
    if _fallocate is None:
        return False
    if _fallocate(fd, _FALLOC_FL_KEEP_SIZE, offset, length) == 0:
        return True
    if ctypes.get_errno() in (errno.EOPNOTSUPP, errno.ENOSYS):
        _fallocate = None  # this file system (or kernel) cannot: stop trying
    return False  # ENOSPC and the like: the append itself will say whether it fits


def _release_past_end(fd: int, size: int) -> None:
    """Free blocks reserved past ``size`` (``ftruncate`` to the same size frees them on
    Linux file systems), keeping the file's mtime: retention reads it for segments without
    timestamps (LogSegment.largest_timestamp)."""
    st = os.fstat(fd)
    if st.st_size != size or st.st_blocks * 512 <= -(-size // st.st_blksize) * st.st_blksize:
        return  # another size (the caller truncates), or no more blocks than the data needs
    os.ftruncate(fd, size)
    os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns))


@dataclass(frozen=True, slots=True)
class BatchPosition:
    """A batch's file position and header."""

    position: int
    header: BatchHeader


class LogSegment:
    """Files ``<20-digit base offset>.log/.index/.timeindex/.txnindex`` in a partition directory.

    The ``.log`` descriptor comes from ``files`` (a bounded cache shared by every segment of a
    broker) on each use, so an idle segment holds none; the index files are opened only to be
    written (see index.py).
    """

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int = 4096,
        max_index_bytes: int = 10 * 1024 * 1024,
        now_ms: int = 0,
        files: HandleCache | None = None,
        suffix: str = "",
        roll_jitter_ms: int = 0,
    ) -> None:
        # ``suffix``: ".cleaned" for a segment the log cleaner is writing (cleaner.py).
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.max_index_entries = max(max_index_bytes // 8, 1)
        self.log_path, index_path, time_index_path = (
            p.with_name(p.name + suffix) for p in segment_paths(directory, base_offset))
        self._files = files if files is not None else shared_cache()
        self._path = str(self.log_path)
        self._closed = False
        handle = self._files.get(self._path, create=True)
        self.size = os.fstat(handle.fd).st_size
        self._indexes_missing = not (index_path.exists() and time_index_path.exists())
        self.offset_index = OffsetIndex(index_path, base_offset)
        self.time_index = TimeIndex(time_index_path, base_offset)
        # Kept up to date by the Log, which knows the producer state (aborted transactions).
        self.txn_index = TransactionIndex(
            directory / (filename_prefix(base_offset) + TXN_INDEX_SUFFIX + suffix), base_offset)
        self.created_ms = now_ms
        # Subtracted from segment.ms when checking an age roll (LogSegment.rollJitterMs).
        self.roll_jitter_ms = roll_jitter_ms
        self._bytes_since_last_index_entry = 0
        self.max_timestamp = NO_TIMESTAMP
        # The last offset of the first batch holding max_timestamp: the "shallow" offset that
        # Kafka's LogSegment keeps and writes to the time index (shallowOffsetOfMaxTimestampSoFar);
        # Log.offset_of_max_timestamp finds the record inside that batch.
        self.offset_of_max_timestamp = base_offset
        self._first_batch_timestamp: int | None = None  # for time-based rolls, loaded lazily
        self.next_offset = base_offset
        self.flushed = self.size == 0
        # The file offset up to which blocks were reserved by this process (_reserve); 0: none.
        self._reserved = 0

    def _handle(self) -> FileHandle:
        """The open ``.log`` (reopened if the cache dropped it); a dead handle once closed.
        Callers keep it in a local while they use its descriptor."""
        if self._closed:
            return FileHandle(-1, self._path)
        handle = self._files.get(self._path)
        if self._closed:
            # Closed or deleted while we opened it (a read racing a topic deletion): its
            # forget() may have run before our handle entered the cache, which would then keep
            # the unlinked file open, and hand it to a new segment at the same path.
            self._files.forget(self._path)
        return handle

    # -- loading ------------------------------------------------------------------------------

    def load(self) -> None:
        """Trust the files (after a clean shutdown): sanity-check the indexes, find the end offset.

        Raises CorruptIndexError if an index is damaged or missing; call ``recover`` then.
        """
        if self._indexes_missing and self.size:
            raise CorruptIndexError(f"index files of {self.log_path} are missing")
        self.offset_index.sanity_check(self.size)
        self.txn_index.sanity_check()
        start = self.offset_index.lookup(self.offset_index.last_offset)[1]
        self.max_timestamp, self.offset_of_max_timestamp = self.time_index.last_entry
        self.next_offset = max(self.offset_index.last_offset, self.base_offset)
        end = start
        for batch in self.iter_batches(start, self.size):
            h = batch.header
            self.next_offset = h.next_offset
            end = batch.position + h.size
            if h.max_timestamp > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = h.max_timestamp, h.last_offset
        if end != self.size:
            raise CorruptRecordError(
                f"{self.log_path}: {self.size - end} bytes after the last whole batch at byte {end}"
            )
        self.time_index.sanity_check(self.next_offset)
        if self.txn_index.last_offset >= self.next_offset:
            raise CorruptIndexError(
                f"transaction index {self.txn_index.path}: an entry ends at offset "
                f"{self.txn_index.last_offset}, past the segment's end {self.next_offset}"
            )
        self.flushed = True

    def recover(self, on_batch: Callable[[BatchHeader], None] | None = None) -> int:
        """Validate every batch (size, magic, CRC, increasing offsets), rebuild both indexes and
        cut the file at the first invalid byte.  ``on_batch`` sees each valid batch in order
        (producer state, leader epochs).  Returns the number of bytes truncated.

        The transaction index is emptied (as Kafka's LogSegment.recover resets it): the Log
        rebuilds it when it replays the segment into the producer state.
        """
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        self._bytes_since_last_index_entry = 0
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = self.base_offset
        self._first_batch_timestamp = None
        self.next_offset = self.base_offset
        handle = self._handle()
        fd = handle.fd
        file_size = os.fstat(fd).st_size
        pos = 0
        buf = b""
        buf_start = 0
        while file_size - pos >= LOG_OVERHEAD:
            if pos + RECORD_BATCH_OVERHEAD > buf_start + len(buf):
                buf = os.pread(fd, min(_RECOVER_CHUNK, file_size - pos), pos)
                buf_start = pos
            off = pos - buf_start
            if len(buf) - off < RECORD_BATCH_OVERHEAD:
                break  # torn header
            size = int.from_bytes(buf[off + 8 : off + 12], "big", signed=True) + LOG_OVERHEAD
            if size < RECORD_BATCH_OVERHEAD or pos + size > file_size:
                break
            if off + size > len(buf):
                buf = os.pread(fd, max(size, min(_RECOVER_CHUNK, file_size - pos)), pos)
                buf_start, off = pos, 0
            try:
                header = validate_batch(buf, off)
            except CorruptRecordError:
                break
            if header.base_offset < self.next_offset or header.last_offset_delta < 0 or (
                header.last_offset - self.base_offset > _INT32_MAX
            ):
                break
            self._index_batch(pos, header)
            self.next_offset = header.next_offset
            if on_batch is not None:
                on_batch(header)
            pos += size
        truncated = file_size - pos
        if truncated:
            os.ftruncate(fd, pos)
        else:
            _release_past_end(fd, pos)  # blocks a crash left reserved (see the module doc)
        self.size = pos
        self._reserved = 0
        self.flushed = False
        return truncated

    # -- writing ------------------------------------------------------------------------------

    def _index_batch(self, position: int, header: BatchHeader) -> None:
        """Index bookkeeping for a batch written at ``position`` (append and recovery)."""
        max_timestamp = header.max_timestamp
        if self._first_batch_timestamp is None and position == 0:
            self._first_batch_timestamp = max_timestamp
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = header.base_offset + header.last_offset_delta
        if self._bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(header.base_offset + header.last_offset_delta, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += header.batch_length + LOG_OVERHEAD

    def _reserve_ahead(self, fd: int, end: int, appending: int) -> None:
        """Reserve blocks up to ``end`` and some appends beyond (the module docstring)."""
        target = end + min(max(4 * appending, _PREALLOCATE_MIN), _PREALLOCATE_MAX)
        start = max(self._reserved, self.size)
        self._reserved = target if _reserve(fd, start, target - start) else end

    def append(self, data: bytes | bytearray | memoryview, headers: list[BatchHeader]) -> None:
        """Write ``data`` (the batches described by ``headers``, offsets already assigned)."""
        handle = self._handle()
        fd = handle.fd
        end = self.size + len(data)
        if end > self._reserved:  # once per MiB or more
            self._reserve_ahead(fd, end, len(data))
        try:
            written = os.pwrite(fd, data, self.size)  # one call, unless the disk writes short
            if written < len(data):
                with memoryview(data) as view:
                    while written < len(view):
                        written += os.pwrite(fd, view[written:], self.size + written)
        except OSError:
            os.ftruncate(fd, self.size)  # leave no partial batch behind (nor reserved blocks)
            self._reserved = 0
            raise
        position = self.size
        for header in headers:
            self._index_batch(position, header)
            position += header.batch_length + LOG_OVERHEAD  # (fields, not the properties)
        self.size = position
        last = headers[-1]
        self.next_offset = last.base_offset + last.last_offset_delta + 1
        self.flushed = False

    def truncate_to(self, offset: int) -> int:
        """Remove batches with base offset >= ``offset``; returns bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        position = found.position
        if found.header.base_offset < offset:
            position += found.header.size
        removed = self.size - position
        if removed <= 0:
            return 0
        handle = self._handle()
        os.ftruncate(handle.fd, position)  # (reserved blocks past it go too)
        self.size = position
        self._reserved = 0
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        # Recompute the in-memory bookkeeping from what remains.
        self._bytes_since_last_index_entry = 0
        self.max_timestamp, self.offset_of_max_timestamp = self.time_index.last_entry
        self.next_offset = self.base_offset
        start = self.offset_index.lookup(self.offset_index.last_offset)[1]
        for batch in self.iter_batches(start, self.size):
            h = batch.header
            self.next_offset = h.next_offset
            if h.max_timestamp > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = h.max_timestamp, h.last_offset
        if position == 0:
            self._first_batch_timestamp = None
        return removed

    def on_become_inactive(self) -> None:
        """At roll (and close): record the final max timestamp in the time index, trim index
        files and free the blocks reserved past the end of the appends."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
        self.offset_index.trim()
        self.time_index.trim()
        if self._reserved > self.size:
            handle = self._handle()
            _release_past_end(handle.fd, self.size)
            self._reserved = 0

    def flush(self) -> None:
        """fsync the log file and the indexes."""
        self.txn_index.flush()  # also written outside appends (rebuilt by a recovery)
        if self.flushed:
            return
        handle = self._handle()
        os.fsync(handle.fd)
        self.offset_index.flush()
        self.time_index.flush()
        self.flushed = True

    # -- reading ------------------------------------------------------------------------------

    def iter_batches(self, start: int, end: int) -> Iterator[BatchPosition]:
        """Headers of the batches between file positions ``start`` and ``end`` (no CRC check)."""
        handle = self._handle()
        fd = handle.fd
        pos = start
        buf = b""
        buf_start = start
        while end - pos >= RECORD_BATCH_OVERHEAD:
            off = pos - buf_start
            if off + RECORD_BATCH_OVERHEAD > len(buf):
                buf = os.pread(fd, min(_SCAN_CHUNK, end - pos), pos)
                buf_start, off = pos, 0
                if len(buf) < RECORD_BATCH_OVERHEAD:
                    return
            header = read_batch_header(buf, off)
            if header.size < RECORD_BATCH_OVERHEAD:
                raise CorruptRecordError(
                    f"{self.log_path}: impossible batch length {header.batch_length} at byte {pos}"
                )
            if pos + header.size > end:
                return
            yield BatchPosition(pos, header)
            pos += header.size

    def translate_offset(self, offset: int, max_position: int | None = None) -> BatchPosition | None:
        """The first batch whose last offset is >= ``offset`` (the batch containing it, or the
        next one), starting before ``max_position``; None if there is none in this segment."""
        end = self.size if max_position is None else min(max_position, self.size)
        start = self.offset_index.lookup(offset)[1]
        for batch in self.iter_batches(start, end):
            if batch.header.last_offset >= offset:
                return batch
        return None

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        max_position: int | None = None,
        min_one_message: bool = False,
    ) -> FileSlice | None:
        """Batches from the one containing ``start_offset``, at most ``max_bytes`` and never past
        ``max_position`` (the high watermark's position).  With ``min_one_message`` the first
        batch is returned whole even when larger than ``max_bytes``.  None if this segment has
        nothing at or after ``start_offset`` below ``max_position``.
        """
        limit = self.size if max_position is None else min(max_position, self.size)
        found = self.translate_offset(start_offset, limit)
        if found is None:
            return None
        wanted = max(max_bytes, found.header.size) if min_one_message else max_bytes
        size = min(limit - found.position, wanted)
        return FileSlice(self._handle(), found.position, max(size, 0))

    def read_bytes(self, position: int, size: int) -> bytes:
        return FileSlice(self._handle(), position, size).read()

    def find_offset_by_timestamp(self, timestamp: int) -> BatchPosition | None:
        """The first batch whose max timestamp is >= ``timestamp``, or None."""
        if self.max_timestamp < timestamp:
            return None
        _, offset = self.time_index.lookup_before(timestamp)
        start = self.offset_index.lookup(offset)[1]
        for batch in self.iter_batches(start, self.size):
            if batch.header.max_timestamp >= timestamp:
                return batch
        return None

    # -- roll / retention ---------------------------------------------------------------------

    @property
    def first_batch_timestamp(self) -> int:
        """Max timestamp of the first batch (-1 if none or empty), as Kafka uses for time rolls."""
        if self._first_batch_timestamp is None:
            first = next(iter(self.iter_batches(0, self.size)), None)
            if first is None:
                return NO_TIMESTAMP
            self._first_batch_timestamp = first.header.max_timestamp
        return self._first_batch_timestamp

    def should_roll(
        self,
        *,
        incoming_bytes: int,
        incoming_max_timestamp: int,
        incoming_last_offset: int,
        now_ms: int,
        segment_bytes: int,
        segment_ms: int,
    ) -> bool:
        """Kafka's roll rule: size, age (incoming max timestamp minus the first batch's, or wall
        clock since creation when the first batch has no timestamp), index full, or an offset
        that no longer fits the int32 relative offsets of the indexes.  The age limit is
        ``segment_ms`` less this segment's ``roll_jitter_ms`` (segment.jitter.ms)."""
        size = self.size
        if size == 0:
            return incoming_last_offset - self.base_offset > _INT32_MAX
        if size > segment_bytes - incoming_bytes:
            return True
        first = self._first_batch_timestamp  # (the property only until it is known)
        if first is None:
            first = self.first_batch_timestamp
        waited = incoming_max_timestamp - first if first >= 0 else now_ms - self.created_ms
        if waited > segment_ms - self.roll_jitter_ms:
            return True
        # (The indexes' entry lists: len() of an index is a Python-level __len__.)
        limit = self.max_index_entries
        if len(self.offset_index.entries) >= limit or len(self.time_index.entries) >= limit:
            return True
        return incoming_last_offset - self.base_offset > _INT32_MAX

    def largest_timestamp(self) -> int:
        """Largest record timestamp, or the file's mtime when no batch has one (retention)."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return int(os.stat(self.log_path).st_mtime * 1000)

    # -- lifecycle ----------------------------------------------------------------------------

    def load_or_recover(self) -> bool:
        """``load`` the segment; on a damaged index rebuild it with ``recover``.  True if rebuilt."""
        try:
            self.load()
            return False
        except (CorruptIndexError, CorruptRecordError):
            self.recover()
            return True

    def close(self) -> None:
        """Write the indexes and drop the segment's descriptor.  Dropped, not closed: a
        FileSlice of it still being sent (a Fetch response) keeps it open until it is done, as
        for delete()."""
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()
        self._closed = True
        self._files.forget(self._path)

    def abandon(self) -> None:
        """Release the descriptor without writing the indexes (a crash, a topic deletion, or
        undoing a create); slices in flight keep it until they are done, as for close()."""
        self.offset_index.abandon()
        self.time_index.abandon()
        self.txn_index.abandon()
        self._closed = True
        self._files.forget(self._path)

    def delete(self) -> None:
        """Unlink the files.  Slices already handed out stay readable until dropped."""
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        self._closed = True
        self._files.forget(self._path)
        self.log_path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path}, base={self.base_offset}, size={self.size})"
