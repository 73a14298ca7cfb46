"""ListOffsets v0: ``OldStyleOffsets``, offsets "before" a time by segment file times.

Kafka 3.9 (``KafkaApis.handleListOffsetRequestV0``, ``UnifiedLog.legacyFetchOffsetsBefore``,
``Partition.legacyFetchOffsetsForTimestamp``): the candidates are each segment's base offset
(at least the log start offset) paired with its file's last-modified time, plus (log end offset,
now) when the active segment holds data.  -1 (latest) starts at the last candidate, -2
(earliest) at the first, any other time at the last candidate modified at or before it; up to
``MaxNumOffsets`` offsets are taken going backwards, newest first.  For consumers, offsets above
the high watermark are dropped and the high watermark is put first.  Other negative times are
UNSUPPORTED_VERSION.
"""

from __future__ import annotations

import os
import time

from samsa.broker.log import Log

__all__ = ["CONSUMER_REPLICA_ID", "legacy_offsets_before"]

LATEST, EARLIEST = -1, -2
CONSUMER_REPLICA_ID = -1


def _mtime_ms(path: str | os.PathLike[str]) -> int:
    try:
        return os.stat(path).st_mtime_ns // 1_000_000
    except OSError:
        return 0  # deleted under us (retention): as old as can be


def legacy_offsets_before(log: Log, timestamp: int, max_num_offsets: int,
                          from_consumer: bool) -> list[int]:
    """The OldStyleOffsets of one partition (``timestamp`` >= -2)."""
    segments = list(log.segments)  # a snapshot: retention may change the list meanwhile
    start_offset, end_offset = log.log_start_offset, log.log_end_offset
    candidates = [(max(s.base_offset, start_offset), _mtime_ms(s.log_path)) for s in segments]
    if segments and segments[-1].size > 0:
        candidates.append((end_offset, time.time_ns() // 1_000_000))
    if timestamp == LATEST:
        start = len(candidates) - 1
    elif timestamp == EARLIEST:
        start = 0
    else:
        start = len(candidates) - 1
        while start >= 0 and candidates[start][1] > timestamp:
            start -= 1
    count = max(0, min(max_num_offsets, start + 1))
    offsets = sorted((candidates[start - j][0] for j in range(count)), reverse=True)
    if from_consumer:
        hw = log.high_watermark
        if any(o > hw for o in offsets):
            offsets = [hw] + [o for o in offsets if o <= hw]
    return offsets
