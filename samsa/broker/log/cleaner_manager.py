"""The log cleaner's threads and bookkeeping (Kafka's LogCleaner, LogCleanerManager, LogToClean).

``log.cleaner.threads`` threads each loop: pick the filthiest compacted log (the highest dirty
ratio above its ``min.cleanable.dirty.ratio``, or any cleanable log whose dirty segments are
older than ``max.compaction.lag.ms``), clean it (cleaner.py), record the offset reached in
``cleaner-offset-checkpoint``; sleep ``log.cleaner.backoff.ms`` when nothing needed cleaning.

The dirty section of a log starts at its checkpointed offset (the log start if there is none,
or if it is out of the log's range) and its cleanable part ends at the first uncleanable
offset: the least of the last stable offset (an open transaction is never cleaned), the active
segment's base (never cleaned), and, with ``min.compaction.lag.ms``, the first segment holding
a record younger than the lag.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from samsa.broker.log.checkpoint import read_offset_checkpoint, write_offset_checkpoint
from samsa.broker.log.cleaner import (
    Cleaner,
    CleanerStats,
    CleaningAbortedError,
    Throttler,
    crash_point,
)
from samsa.broker.log.log import Log

__all__ = ["CLEANER_OFFSET_CHECKPOINT", "LogCleaner", "LogToClean", "log_to_clean"]

log = logging.getLogger(__name__)

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
_INT32_MAX = 0x7FFFFFFF

LogKey = tuple[str, int]


@dataclass(frozen=True, slots=True)
class LogToClean:
    """A compacted log's sections, in bytes and offsets (Kafka's LogToClean)."""

    key: LogKey
    log: Log
    first_dirty: int
    first_uncleanable: int
    clean_bytes: int
    cleanable_bytes: int
    max_compaction_delay_ms: int

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0

    @property
    def eligible(self) -> bool:
        """LogCleanerManager.grabFilthiestCompactedLog's test (strictly above the ratio)."""
        if self.max_compaction_delay_ms > 0 and self.cleanable_bytes > 0:
            return True
        return self.ratio > self.log.config.min_cleanable_ratio


def is_compacted(plog: Log) -> bool:
    return "compact" in plog.config.cleanup_policy.split(",")


def log_to_clean(key: LogKey, plog: Log, checkpoint: int | None, now_ms: int) -> LogToClean:
    """Where the dirty section of ``plog`` starts and its cleanable part ends
    (LogCleanerManager.cleanableOffsets, calculateCleanableBytes, maxCompactionDelay)."""
    segments = plog.segments_snapshot()
    start, end = plog.log_start_offset, plog.log_end_offset
    first_dirty = start if checkpoint is None or not start <= checkpoint <= end else checkpoint
    active = segments[-1]
    config = plog.config
    bound = min(plog.last_stable_offset, active.base_offset)
    dirty_inactive = [s for i, s in enumerate(segments[:-1])
                      if segments[i + 1].base_offset > first_dirty]
    if config.min_compaction_lag_ms > 0:
        for segment in dirty_inactive:
            if segment.largest_timestamp() > now_ms - config.min_compaction_lag_ms:
                bound = min(bound, segment.base_offset)
                break
    first_uncleanable = max(bound, first_dirty)
    delay = 0
    if config.max_compaction_lag_ms < (1 << 63) - 1:
        earliest = min((t for t in (s.first_batch_timestamp for s in dirty_inactive) if t > 0),
                       default=None)
        if earliest is not None:
            delay = max(0, now_ms - config.max_compaction_lag_ms - earliest)
    # Bytes: the uncleanable offset rounded down to its segment's base.
    clean_bytes = cleanable_bytes = 0
    for i, segment in enumerate(segments):
        next_base = segments[i + 1].base_offset if i + 1 < len(segments) else None
        if segment.base_offset >= first_uncleanable:
            break
        if next_base is not None and next_base <= first_dirty:
            clean_bytes += segment.size
        elif next_base is not None and next_base <= first_uncleanable:
            cleanable_bytes += segment.size
        else:
            # Holds the uncleanable offset: counted in neither (rounded down to its base).
            if segment.base_offset < first_dirty:
                clean_bytes += segment.size
            break
    return LogToClean(key, plog, first_dirty, first_uncleanable, clean_bytes, cleanable_bytes,
                      delay)


class LogCleaner:
    """The cleaner threads of one data directory and the ``cleaner-offset-checkpoint`` file."""

    def __init__(self, data_dir: Path, config: Mapping[str, Any],
                 logs: Callable[[], Mapping[LogKey, Log]]) -> None:
        self.data_dir = data_dir
        self._logs = logs
        self.enabled = bool(config["log.cleaner.enable"])
        self.num_threads = int(config["log.cleaner.threads"]) if self.enabled else 0
        self.backoff_s = int(config["log.cleaner.backoff.ms"]) / 1000
        threads = max(self.num_threads, 1)
        self.map_memory = min(int(config["log.cleaner.dedupe.buffer.size"]) // threads, _INT32_MAX)
        self.load_factor = float(config["log.cleaner.io.buffer.load.factor"])
        self.io_buffer_size = int(config["log.cleaner.io.buffer.size"]) // threads // 2
        self.max_message_bytes = int(config["message.max.bytes"])
        self.throttler = Throttler(float(config["log.cleaner.io.max.bytes.per.second"]))
        self._path = data_dir / CLEANER_OFFSET_CHECKPOINT
        self._checkpoints: dict[LogKey, int] = read_offset_checkpoint(self._path)
        self._lock = threading.Lock()
        self._in_progress: set[LogKey] = set()
        self._uncleanable: set[LogKey] = set()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.rounds = 0  # completed cleanings, for tests and metrics
        if self.enabled:
            self.new_cleaner()  # a map too small is refused now, not in a thread later

    def new_cleaner(self) -> Cleaner:
        return Cleaner(map_memory=self.map_memory, load_factor=self.load_factor,
                       io_buffer_size=self.io_buffer_size,
                       max_io_buffer_size=self.max_message_bytes, throttler=self.throttler,
                       check_aborted=self._aborted)

    def _aborted(self, plog: Log) -> bool:
        return self._stop.is_set() or plog.closed

    # -- threads -------------------------------------------------------------------------------

    def start(self) -> None:
        with self._lock:
            if self._threads or not self.num_threads:
                return
            for n in range(self.num_threads):
                thread = threading.Thread(target=self._run, name=f"samsa-log-cleaner-thread-{n}",
                                          daemon=True)
                self._threads.append(thread)
                thread.start()

    def _run(self) -> None:
        cleaner = self.new_cleaner()
        while not self._stop.is_set():
            try:
                cleaned = self.clean_filthiest(cleaner)
            except Exception:  # keep the thread alive; the log was marked uncleanable
                log.exception("log cleaner round failed")
                cleaned = False
            if not cleaned:
                self._stop.wait(self.backoff_s)

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self._threads = []

    # -- choosing and cleaning -------------------------------------------------------------------

    def dirtiness(self, key: LogKey, plog: Log, now_ms: int | None = None) -> LogToClean:
        with self._lock:
            checkpoint = self._checkpoints.get(key)
        return log_to_clean(key, plog, checkpoint, _now_ms() if now_ms is None else now_ms)

    def grab_filthiest(self, now_ms: int) -> LogToClean | None:
        """The eligible compacted log with the highest dirty ratio, marked in progress."""
        logs = self._logs()
        with self._lock:
            candidates = []
            for key, plog in logs.items():
                if (key in self._in_progress or key in self._uncleanable or plog.closed
                        or not is_compacted(plog)):
                    continue
                found = log_to_clean(key, plog, self._checkpoints.get(key), now_ms)
                if found.total_bytes and found.eligible:
                    candidates.append(found)
            if not candidates:
                return None
            best = max(candidates, key=lambda c: c.ratio)
            self._in_progress.add(best.key)
            return best

    def clean_filthiest(self, cleaner: Cleaner, now_ms: int | None = None) -> bool:
        """One round on the filthiest log, if any; True if one was cleaned."""
        now = _now_ms() if now_ms is None else now_ms
        target = self.grab_filthiest(now)
        if target is None:
            return False
        try:
            return self._clean(cleaner, target, now)
        finally:
            with self._lock:
                self._in_progress.discard(target.key)

    def _clean(self, cleaner: Cleaner, target: LogToClean, now_ms: int) -> bool:
        plog = target.log
        name = f"{plog.topic}-{plog.partition}"
        before = plog.size_bytes
        try:
            end, stats = cleaner.clean(plog, target.first_dirty, target.first_uncleanable, now_ms)
        except CleaningAbortedError as exc:
            log.info("cleaning of %s stopped: %s", name, exc)
            return False
        except Exception:
            with self._lock:
                self._uncleanable.add(target.key)
            log.exception("cleaning of %s failed; it is marked uncleanable until the broker "
                          "restarts", name)
            return False
        self._report(name, target, end, stats, before, plog.size_bytes)
        with self._lock:
            self._checkpoints[target.key] = end
            self.rounds += 1
        crash_point("checkpoint")
        self.write_checkpoint()
        return True

    def _report(self, name: str, target: LogToClean, end: int, stats: CleanerStats,
                before: int, after: int) -> None:
        seconds = max(stats.seconds, 1e-9)
        log.info(
            "cleaned %s: offsets %d..%d (dirty ratio %.2f), log %.2f MB -> %.2f MB, "
            "%d of %d records kept, %.2f MB read, %.2f MB written, in %.3f s (%.2f MB/s, "
            "%.0f records/s)",
            name, target.first_dirty, end, target.ratio, before / 1e6, after / 1e6,
            stats.records_kept, stats.records_read, stats.bytes_read / 1e6,
            stats.bytes_written / 1e6, seconds, stats.bytes_read / 1e6 / seconds,
            stats.records_read / seconds)

    def write_checkpoint(self) -> None:
        """Rewrite ``cleaner-offset-checkpoint`` with the logs that still exist."""
        logs = self._logs()
        with self._lock:
            self._checkpoints = {k: v for k, v in self._checkpoints.items() if k in logs}
            entries = dict(self._checkpoints)
        write_offset_checkpoint(self._path, entries)

    def checkpoint_of(self, key: LogKey) -> int | None:
        with self._lock:
            return self._checkpoints.get(key)

    def forget(self, key: LogKey) -> None:
        """A log was deleted: drop its checkpoint and uncleanable mark."""
        with self._lock:
            self._checkpoints.pop(key, None)
            self._uncleanable.discard(key)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
