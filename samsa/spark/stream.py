"""Streaming reader: Spark's Kafka JSON offsets, admission control, Trigger.AvailableNow.

All driver-side calls of a query run in one long-lived Python process, so the reader keeps a
metadata consumer there (created lazily, never pickled to executors), and the time of the last
micro-batch for minOffsetsPerTrigger / maxTriggerDelay.

Read limits: PySpark's ReadLimit has no composite form and its ReadMinRows carries no delay,
so this reader does what Spark's KafkaMicroBatchStream does with its composite limit inside
latestOffset(): while fewer than minOffsetsPerTrigger new offsets are available and less than
maxTriggerDelay has passed since the last micro-batch it answers the start offsets (Spark then
runs no batch), otherwise it caps the batch at maxOffsetsPerTrigger.  Trigger.AvailableNow
never waits: it reads everything there was when the query started (Spark passes
ReadAllAvailable for a ReadMinRows default, and the wait would end such a query early).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from samsa.net.cluster import TopicPartition
from samsa.spark.errors import DataLossError
from samsa.spark.fetch import read_range
from samsa.spark.offsets import (
    OffsetRange,
    OffsetResolver,
    from_json,
    split_ranges,
    to_json,
)
from samsa.spark.options import SourceOptions, source_group_ids

__all__ = ["SamsaStreamReader", "rate_limit"]

log = logging.getLogger(__name__)

Offsets = dict[str, dict[str, int]]


def rate_limit(start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
               limit: int) -> dict[TopicPartition, int]:
    """Admit at most about ``limit`` records, shared across partitions in proportion to lag.

    As Spark's Kafka source: a partition's share is rounded down, or up when it is below one
    record, so a partition with little lag still makes progress.
    """
    lags = {tp: max(0, end - start.get(tp, end)) for tp, end in latest.items()}
    total = sum(lags.values())
    if total <= limit:
        return dict(latest)
    out: dict[TopicPartition, int] = {}
    for tp, end in latest.items():
        begin = start.get(tp, end)
        share = limit * lags[tp] / total
        step = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(end, begin + step)
    return out


class SamsaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc]
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._resolver: OffsetResolver | None = None
        self._latest: dict[TopicPartition, int] | None = None
        self._available_now: dict[TopicPartition, int] | None = None
        self.driver_group_id, self.executor_group_id = source_group_ids(options)
        # minOffsetsPerTrigger / maxTriggerDelay: when the last micro-batch was admitted (ms on
        # ``clock``); none yet lets the first one through at once, as KafkaMicroBatchStream does.
        self.clock: Callable[[], float] = time.monotonic
        self._last_trigger_ms = -math.inf

    def __getstate__(self) -> dict[str, Any]:
        # Executors get a copy; the driver's metadata consumer stays on the driver.
        state = dict(self.__dict__)
        state["_resolver"] = None
        return state

    @property
    def resolver(self) -> OffsetResolver:
        if self._resolver is None:
            self._resolver = OffsetResolver(self.options.client, self.driver_group_id)
        return self._resolver

    def _with_new_partitions(self, known: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        """``known`` plus partitions that appeared since, starting at their earliest offset."""
        parts = self.resolver.partitions(self.options.subscription)
        new = [tp for tp in parts if tp not in known]
        out = dict(known)
        if new:
            log.info("new partitions %s; reading them from the earliest offset", ", ".join(map(str, new)))
            out.update(self.resolver.earliest(new))
        return out

    # -- planning -------------------------------------------------------------------------------

    def initialOffset(self) -> Offsets:
        opts = self.options
        parts = self.resolver.partitions(opts.subscription)
        return to_json(self.resolver.resolve(opts.starting, parts, opts, is_start=True))

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.options.max_offsets_per_trigger
        if n:
            return ReadMaxRows(n)  # minOffsetsPerTrigger, if set, is applied in latestOffset()
        m = self.options.min_offsets_per_trigger
        return ReadMinRows(m) if m else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        parts = self.resolver.partitions(self.options.subscription)
        self._available_now = self.resolver.latest(parts)

    def latestOffset(self, start: Offsets | None = None, limit: ReadLimit | None = None) -> Offsets:
        begin = self._with_new_partitions(from_json(start))
        if self._available_now is not None:
            latest = {tp: self._available_now.get(tp, begin[tp]) for tp in begin}
        else:
            latest = self.resolver.latest(begin)
        for tp, end in list(latest.items()):
            if end < begin[tp]:
                if not self.options.read_committed:
                    self._lost(tp, begin[tp], f"the log now ends at {end} (topic recreated or truncated)")
                # else: a last stable offset held back by a transaction still open (the start
                # came from a read_uncommitted run); the range waits for it.
                latest[tp] = begin[tp]
        self._latest = latest
        if self._delay_batch(begin, latest, limit):
            return start if start is not None else to_json(begin)
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(begin, latest, limit.max_rows)
        return to_json(latest)

    def _delay_batch(self, begin: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int],
                     limit: ReadLimit | None) -> bool:
        """Whether to skip this trigger (KafkaMicroBatchStream.delayBatch): fewer than
        minOffsetsPerTrigger new offsets and maxTriggerDelay not yet passed since the last
        micro-batch."""
        wanted = self.options.min_offsets_per_trigger
        if wanted is None or self._available_now is not None or isinstance(limit, ReadAllAvailable):
            return False
        now_ms = self.clock() * 1000.0
        if now_ms - self._last_trigger_ms >= self.options.max_trigger_delay_ms:
            self._last_trigger_ms = now_ms
            return False
        available = sum(max(0, end - begin.get(tp, end)) for tp, end in latest.items())
        if available < wanted:
            log.debug("delaying the micro-batch: %d new offsets, minOffsetsPerTrigger=%d",
                      available, wanted)
            return True
        self._last_trigger_ms = now_ms
        return False

    def reportLatestOffset(self) -> Offsets | None:
        return None if self._latest is None else to_json(self._latest)

    def partitions(self, start: Offsets, end: Offsets) -> list[InputPartition]:
        begin, stop = from_json(start), from_json(end)
        new = [tp for tp in stop if tp not in begin]
        if new:
            begin.update(self.resolver.earliest(new))
        for tp in begin:
            if tp not in stop:
                self._lost(tp, begin[tp], "the partition is gone (topic deleted?)")
        ranges = [OffsetRange(tp.topic, tp.partition, begin[tp], off)
                  for tp, off in sorted(stop.items()) if begin[tp] < off]
        return list(split_ranges(ranges, self.options.min_partitions,
                                 self.options.max_records_per_partition))

    def _lost(self, tp: TopicPartition, offset: int, why: str) -> None:
        what = f"{tp} at offset {offset}: {why}"
        if self.options.fail_on_data_loss:
            raise DataLossError(f"{what}. Some data may have been lost. If you want the query to go "
                                "on past lost data, set the source option failOnDataLoss to false.")
        log.warning("%s; skipping because failOnDataLoss=false", what)

    # -- executors ------------------------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, OffsetRange)
        opts = self.options
        yield from read_range(partition, opts.client, opts.include_headers, opts.fail_on_data_loss,
                              opts.poll_timeout_ms, self.executor_group_id)

    def commit(self, end: Offsets) -> None:
        pass  # progress lives in Spark's checkpoint; the source never commits to Kafka

    def stop(self) -> None:
        if self._resolver is not None:
            self._resolver.close()
            self._resolver = None
