"""Offsets: Spark's Kafka JSON form, offset ranges, and resolving option specs on the driver.

Spark's Kafka source writes offsets as ``{"topic": {"partition": offset}}``; the stream
reader uses that same shape, so checkpoints look the same as with Spark's own source.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import InputPartition

from samsa.errors import ConfigError
from samsa.net.cluster import TopicPartition
from samsa.spark.options import (
    EARLIEST,
    LATEST,
    OffsetSpec,
    SourceOptions,
    Subscription,
)

__all__ = [
    "OffsetRange",
    "OffsetResolver",
    "from_json",
    "split_ranges",
    "to_json",
]

log = logging.getLogger(__name__)


def to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """{TopicPartition: offset} -> Spark's {"topic": {"partition": offset}} (sorted, stable)."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def from_json(data: Mapping[str, Any] | str | None) -> dict[TopicPartition, int]:
    if data is None:
        return {}
    if isinstance(data, str):
        data = json.loads(data)
    assert isinstance(data, Mapping)
    return {TopicPartition(topic, int(p)): int(off)
            for topic, parts in data.items() for p, off in parts.items()}


@dataclass(frozen=True)
class OffsetRange(InputPartition):  # type: ignore[misc]
    """One Spark input partition: offsets [start, end) of one topic-partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def _divide(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """``r`` cut into ``parts`` consecutive ranges whose sizes differ by at most one."""
    step, extra = divmod(r.size, parts)
    out: list[OffsetRange] = []
    start = r.start
    for i in range(parts):
        stop = start + step + (1 if i < extra else 0)
        out.append(OffsetRange(r.topic, r.partition, start, stop))
        start = stop
    return out


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None,
                 max_records: int | None = None) -> list[OffsetRange]:
    """Split the ranges for Spark's maxRecordsPerPartition and minPartitions.

    As Spark's KafkaOffsetRangeCalculator: first every range larger than ``max_records`` is cut
    into equal pieces of at most that many offsets; then, if there are still fewer than
    ``min_partitions``, each piece gets a share of the extra parts in proportion to its size.
    Ranges are never split below one record; empty ones are dropped.
    """
    ranges = [r for r in ranges if r.size > 0]
    if max_records:
        ranges = [piece for r in ranges for piece in _divide(r, -(-r.size // max_records))]
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    return [piece for r in ranges
            for piece in _divide(r, max(1, min(r.size, round(min_partitions * r.size / total))))]


class OffsetResolver:
    """Driver-side metadata: which partitions a subscription covers and where ranges lie.

    Holds one assign-only KafkaConsumer (no group, never commits) for ListOffsets and
    Metadata requests; created lazily so the owner stays picklable.
    """

    def __init__(self, client: Mapping[str, str], group_id: str | None = None) -> None:
        from samsa.consumer.consumer import KafkaConsumer

        self._consumer = KafkaConsumer(consumer_config(client, "spark-samsa-driver", group_id))

    def close(self) -> None:
        self._consumer.close(autocommit=False)

    def partitions(self, subscription: Subscription) -> list[TopicPartition]:
        if subscription.kind == "assign":
            return sorted(subscription.partitions)
        topics = self._consumer.list_topics()
        # A pattern skips internal topics (as exclude.internal.topics); a named topic is read.
        skip_internal = subscription.kind == "subscribePattern"
        out = [TopicPartition(t, p.partition) for t, infos in topics.items()
               if not (skip_internal and t.startswith("__")) and subscription.matches(t) for p in infos]
        return sorted(out)

    def earliest(self, parts: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        parts = list(parts)
        return self._consumer.beginning_offsets(parts) if parts else {}

    def latest(self, parts: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        parts = list(parts)
        return self._consumer.end_offsets(parts) if parts else {}

    def resolve(self, spec: OffsetSpec, parts: list[TopicPartition], opts: SourceOptions,
                is_start: bool) -> dict[TopicPartition, int]:
        """Concrete offsets for ``spec`` over ``parts``."""
        if not parts:
            return {}
        if spec.kind == "earliest":
            return self.earliest(parts)
        if spec.kind == "latest":
            return self.latest(parts)
        if spec.kind in ("offsets", "timestamps") and set(spec.per_partition) != set(parts):
            raise ConfigError(spec.option, (
                "if it names specific partitions it must name all of them (use -2 for earliest, "
                "-1 for latest); given " + ", ".join(sorted(map(str, spec.per_partition)))
                + "; the subscription has " + ", ".join(map(str, parts))))
        if spec.kind == "offsets":
            wanted = dict(spec.per_partition)
            out: dict[TopicPartition, int] = {}
            need_earliest = [tp for tp, o in wanted.items() if o == EARLIEST]
            need_latest = [tp for tp, o in wanted.items() if o == LATEST]
            out.update(self.earliest(need_earliest))
            out.update(self.latest(need_latest))
            for tp, o in wanted.items():
                if o >= 0:
                    out[tp] = o
                elif o not in (EARLIEST, LATEST):
                    raise ConfigError(spec.option, f"offset {o} for {tp} is invalid; use an offset "
                                                   ">= 0, -2 (earliest) or -1 (latest)")
            return out
        stamps = ({tp: spec.timestamp for tp in parts} if spec.kind == "timestamp"
                  else dict(spec.per_partition))
        found = self._consumer.offsets_for_times(stamps)  # type: ignore[arg-type]
        missing = [tp for tp in parts if found.get(tp) is None]
        out = {tp: v.offset for tp, v in found.items() if v is not None}
        if missing:
            if is_start and opts.starting_by_timestamp_strategy == "error":
                raise ConfigError(spec.option, (
                    "no record has a timestamp at or after the one given for "
                    + ", ".join(map(str, missing))
                    + "; set startingOffsetsByTimestampStrategy=latest to start at the end instead"))
            out.update(self.latest(missing))
        return out


def consumer_config(client: Mapping[str, str], client_id: str, group_id: str | None = None
                    ) -> dict[str, Any]:
    """Samsa consumer settings for the source: assign-only, no commits, no offset resets.

    ``group_id`` (from :func:`samsa.spark.options.source_group_ids`) names the consumer as
    Spark's source does; the consumer still reads by assignment and never joins the group.
    With kafka.isolation.level=read_committed, end offsets are last stable offsets and reads
    skip aborted transactions, so a range's offsets may hold fewer records than its size.
    """
    conf: dict[str, Any] = {k: v for k, v in client.items() if k != "group.id"}
    if group_id is not None:
        conf["group.id"] = group_id
    conf.setdefault("client.id", client_id)
    conf.setdefault("max.poll.records", "10000")
    conf["enable.auto.commit"] = "false"
    conf["auto.offset.reset"] = "none"
    return conf
