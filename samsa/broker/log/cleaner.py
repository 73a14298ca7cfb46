"""The log cleaner's algorithm: one round of compaction of one log (Kafka's Cleaner.doClean,
buildOffsetMap, groupSegmentsBySize, cleanSegments).

A round, given the log's first dirty and first uncleanable offsets:

1. Build the key -> last offset map of the dirty section ``[first dirty, first uncleanable)``,
   skipping aborted transactions' batches.  When the map fills (``log.cleaner.dedupe.buffer
   .size`` per thread, load factor 0.9) building stops at once, and the round cleans only up
   to the last offset put: ``end = latest_offset + 1`` (records past it are copied unchanged;
   the next round goes on from ``end``).
2. Group the segments below ``end`` (the clean section too: it is recopied every round) so
   that each group fits one segment (``segment.bytes``, ``segment.index.bytes``, int32
   relative offsets).
3. Write each group through the filter (cleaner_filter.py) into ``<base>.log.cleaned`` with
   fresh indexes, fsync it, give it the last source segment's mtime, and swap it in
   (Log.replace_segments, cleaned_segments.py).

The source segments are read without the log's lock: only the active segment changes while
the broker runs, and the swap checks, under the lock, that the sources are still the log's.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from samsa.broker.log.cleaned_segments import CLEANED_SUFFIX, SEGMENT_SUFFIXES
from samsa.broker.log.cleaner_filter import FilterContext, TxnTracker, control_type_of, filter_batch
from samsa.broker.log.files import filename_prefix
from samsa.broker.log.log import Log
from samsa.broker.log.offset_map import OffsetMap, key_hash
from samsa.broker.log.segment import LogSegment
from samsa.broker.log.txn_index import AbortedTxn
from samsa.errors import CorruptRecordError
from samsa.records import (
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    RecordBatch,
    read_batch_header,
)

__all__ = ["Cleaner", "CleanerStats", "CleaningAbortedError", "Throttler", "group_segments"]

log = logging.getLogger(__name__)

_INT32_MAX = 0x7FFFFFFF
# Test-only: name a step of the swap protocol ("cleaned", "swap", "deleted", "swapped",
# "checkpoint") and the cleaner SIGKILLs its own process when it gets there, so that crash
# tests can restart a broker killed at that point.  Never set it in production.
KILL_AT_ENV = "SAMSA_TEST_CLEANER_KILL_AT"


def crash_point(name: str) -> None:
    """Test hook: SIGKILL this process if KILL_AT_ENV names ``name``."""
    if os.environ.get(KILL_AT_ENV) == name:
        log.warning("%s=%s: killing the process (test hook)", KILL_AT_ENV, name)
        os.kill(os.getpid(), signal.SIGKILL)


class CleaningAbortedError(Exception):
    """The round was abandoned (the log was closed, deleted or changed under it)."""


@dataclass(slots=True)
class CleanerStats:
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    map_records: int = 0
    start_s: float = field(default_factory=time.monotonic)
    end_s: float = 0.0

    @property
    def seconds(self) -> float:
        return (self.end_s or time.monotonic()) - self.start_s


class Throttler:
    """``log.cleaner.io.max.bytes.per.second``: one budget for every cleaner thread's reads and
    writes (Kafka's Throttler); sleeps when the cleaners ran ahead of it."""

    def __init__(self, bytes_per_second: float) -> None:
        self.rate = bytes_per_second
        self._lock = threading.Lock()
        self._start = time.monotonic()
        self._bytes = 0.0

    def maybe_throttle(self, count: int) -> None:
        if self.rate == float("inf") or self.rate <= 0:
            return
        with self._lock:
            self._bytes += count
            now = time.monotonic()
            elapsed = now - self._start
            ahead = self._bytes / self.rate - elapsed
            if elapsed > 1.0 and ahead <= 0:
                self._start, self._bytes = now, 0.0  # a fresh window
                return
        if ahead > 0:
            time.sleep(ahead)


def group_segments(segments: list[LogSegment], max_size: int, max_index_size: int,
                   first_uncleanable: int) -> list[list[LogSegment]]:
    """Consecutive groups, each small enough for one segment (Cleaner.groupSegmentsBySize)."""
    groups = []
    rest = list(segments)
    while rest:
        group = [rest.pop(0)]
        log_size = group[0].size
        index_size = len(group[0].offset_index) * 8
        time_size = len(group[0].time_index) * 12
        while rest:
            nxt = rest[0]
            last = rest[1].base_offset - 1 if len(rest) > 1 else first_uncleanable - 1
            if (log_size + nxt.size > max_size
                    or index_size + len(nxt.offset_index) * 8 > max_index_size
                    or time_size + len(nxt.time_index) * 12 > max_index_size
                    or (nxt.size > 0 and last - group[0].base_offset > _INT32_MAX)):
                break
            group.append(rest.pop(0))
            log_size += nxt.size
            index_size += len(nxt.offset_index) * 8
            time_size += len(nxt.time_index) * 12
        groups.append(group)
    return groups


class Cleaner:
    """One cleaner thread's map and buffers; ``clean`` runs a round on a log."""

    def __init__(self, *, map_memory: int, load_factor: float = 0.9, io_buffer_size: int,
                 max_io_buffer_size: int, throttler: Throttler | None = None,
                 check_aborted: Callable[[Log], bool] | None = None) -> None:
        self.offset_map = OffsetMap(map_memory, load_factor)
        # Read buffer: half of this thread's share of log.cleaner.io.buffer.size (the other
        # half is Kafka's write buffer: here a cleaned batch is written as it is made).
        self.io_buffer_size = max(io_buffer_size, RECORD_BATCH_OVERHEAD)
        self.max_io_buffer_size = max(max_io_buffer_size, self.io_buffer_size)
        self.throttler = throttler or Throttler(float("inf"))
        self._check_aborted = check_aborted or (lambda _log: False)

    # -- reading -----------------------------------------------------------------------------

    def _batches(self, plog: Log, segment: LogSegment, stats: CleanerStats | None = None
                 ) -> Iterator[tuple[BatchHeader, memoryview]]:
        """The segment's batches, read a buffer at a time; a batch larger than the buffer is
        read alone (Kafka grows its buffers up to max.message.bytes)."""
        size = segment.size
        position = 0
        while position < size:
            if self._check_aborted(plog):
                raise CleaningAbortedError(f"cleaning of {plog.topic}-{plog.partition} was aborted")
            want = min(self.io_buffer_size, size - position)
            try:
                chunk = segment.read_bytes(position, want)
            except OSError as exc:
                raise CleaningAbortedError(f"{segment.log_path} is gone ({exc})") from exc
            if len(chunk) < RECORD_BATCH_OVERHEAD:
                raise CleaningAbortedError(f"{segment.log_path} was cut short at byte {position}")
            self.throttler.maybe_throttle(len(chunk))
            view = memoryview(chunk)
            offset = 0
            while len(chunk) - offset >= RECORD_BATCH_OVERHEAD:
                header = read_batch_header(chunk, offset)
                batch_size = header.batch_length + LOG_OVERHEAD
                if batch_size < RECORD_BATCH_OVERHEAD or position + offset + batch_size > size:
                    raise CorruptRecordError(
                        f"{segment.log_path}: impossible batch at byte {position + offset}")
                if offset + batch_size > len(chunk):
                    break
                yield header, view[offset:offset + batch_size]
                offset += batch_size
            if offset == 0:  # one batch larger than the buffer
                if batch_size > self.max_io_buffer_size:
                    raise CorruptRecordError(
                        f"{segment.log_path}: batch of {batch_size} bytes at byte {position} is "
                        f"larger than the cleaner may read ({self.max_io_buffer_size}: "
                        "max.message.bytes); raise max.message.bytes")
                whole = segment.read_bytes(position, batch_size)
                self.throttler.maybe_throttle(len(whole))
                yield header, memoryview(whole)
                offset = batch_size
            if stats is not None:
                stats.bytes_read += offset
            position += offset

    # -- the round ---------------------------------------------------------------------------

    def clean(self, plog: Log, first_dirty: int, first_uncleanable: int,
              now_ms: int) -> tuple[int, CleanerStats]:
        """Clean ``plog`` from ``first_dirty`` up to at most ``first_uncleanable``; returns
        the offset cleaning reached (the next first dirty offset) and the statistics.
        Raises CleaningAbortedError when the log changed or closed under it."""
        stats = CleanerStats()
        offset_map = self.offset_map
        self.max_io_buffer_size = max(self.io_buffer_size, plog.config.max_message_bytes)
        try:
            end = self._build_offset_map(plog, first_dirty, first_uncleanable, stats)
            segments = [s for s in plog.segments_snapshot()[:-1] if s.base_offset < end]
            config = plog.config
            groups = group_segments(segments, config.segment_bytes, config.segment_index_bytes,
                                    first_uncleanable)
            tracker = TxnTracker()
            ctx = FilterContext(offset_map, tracker, now_ms, config.delete_retention_ms,
                                plog.last_records_of_producers(), first_uncleanable)
            for group in groups:
                self._clean_group(plog, group, ctx, stats)
            stats.records_read, stats.records_kept = ctx.records_read, ctx.records_kept
        finally:
            offset_map.release()
        stats.end_s = time.monotonic()
        return end, stats

    def _build_offset_map(self, plog: Log, start: int, upper: int, stats: CleanerStats) -> int:
        offset_map = self.offset_map
        offset_map.clear()
        tracker = TxnTracker()
        tracker.add_aborted(plog.aborted_transactions(start, upper))
        segments = plog.segments_snapshot()
        for i, segment in enumerate(segments[:-1]):
            next_base = segments[i + 1].base_offset
            if next_base <= start:
                continue
            if segment.base_offset >= upper:
                break
            full = False
            for header, data in self._batches(plog, segment):
                if header.base_offset >= upper:
                    break
                if header.is_control:
                    tracker.on_control_batch(header, control_type_of(RecordBatch(data, 0, header)))
                elif not tracker.on_data_batch(header) and header.records_count:
                    for record in RecordBatch(data, 0, header):
                        if record.key is None or record.offset < start:
                            continue
                        if offset_map.full:
                            full = True
                            break
                        offset_map.put_hash(key_hash(record.key), record.offset)
                        stats.map_records += 1
                if full:
                    break
                if header.last_offset >= start:
                    offset_map.latest_offset = header.last_offset
            if full:
                break
            offset_map.latest_offset = min(next_base, upper) - 1  # covers offset gaps
        return max(offset_map.latest_offset + 1, start)

    def _clean_group(self, plog: Log, group: list[LogSegment], ctx: FilterContext,
                     stats: CleanerStats) -> None:
        base = group[0].base_offset
        for suffix in SEGMENT_SUFFIXES:  # stale files of an earlier failed round
            (plog.dir / (filename_prefix(base) + suffix + CLEANED_SUFFIX)).unlink(missing_ok=True)
        cleaned = LogSegment(plog.dir, base, index_interval_bytes=plog.config.index_interval_bytes,
                             max_index_bytes=plog.config.segment_index_bytes,
                             files=plog.handle_cache, suffix=CLEANED_SUFFIX)
        index: list[AbortedTxn] = []
        ctx.tracker.cleaned_index = index
        # Samsa keeps (empty if need be) the last batch of each group, so that the cleaned
        # segment reaches the end of the segments it replaces: recovery deletes the old ones
        # by that range (cleaned_segments.py).
        ctx.keep_last_offset = group[-1].next_offset - 1
        try:
            for i, segment in enumerate(group):
                upper = group[i + 1].base_offset if i + 1 < len(group) else segment.next_offset
                ctx.tracker.add_aborted(plog.aborted_transactions(segment.base_offset, upper))
                for header, data in self._batches(plog, segment, stats):
                    out = filter_batch(data, header, ctx)
                    for txn in index:  # the ABORT marker this batch kept, if it is one
                        cleaned.txn_index.append(txn)
                    index.clear()
                    if out is None:
                        continue
                    out_header = read_batch_header(out, 0)
                    cleaned.append(out, [out_header])
                    stats.bytes_written += len(out)
                    self.throttler.maybe_throttle(len(out))
            cleaned.on_become_inactive()
            cleaned.flush()
            cleaned.close()
            mtime = os.stat(group[-1].log_path).st_mtime
            os.utime(cleaned.log_path, (mtime, mtime))
        except BaseException:
            cleaned.delete()
            raise
        crash_point("cleaned")
        log.debug("swapping in cleaned segment %d of %s-%d for %d segment(s)", base, plog.topic,
                 plog.partition, len(group))
        if not plog.replace_segments(cleaned, group, crash_point):
            raise CleaningAbortedError(
                f"the segments of {plog.topic}-{plog.partition} changed during cleaning")
