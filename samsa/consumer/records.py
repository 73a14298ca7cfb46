"""What poll() returns: ``ConsumerRecord`` tuples grouped in ``ConsumerRecords``.

ConsumerRecord is a NamedTuple built with ``tuple.__new__`` (the cheapest Python object with
named fields); serialized sizes are -1 for a null key/value, as in Java.  Headers are a tuple
of (key, value) pairs: immutable, and a record without headers shares the empty tuple (a list
per record would be one more object for the garbage collector to scan, at a million a second).
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain
from typing import Any, NamedTuple

from samsa.net.cluster import TopicPartition
from samsa.records import TimestampType

__all__ = ["ConsumerRecord", "ConsumerRecords", "OffsetAndMetadata", "OffsetAndTimestamp",
           "RecordParts"]


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: TimestampType
    key: Any
    value: Any
    headers: tuple[tuple[str, bytes | None], ...]
    serialized_key_size: int
    serialized_value_size: int
    leader_epoch: int | None


class OffsetAndMetadata(NamedTuple):
    offset: int
    metadata: str = ""
    leader_epoch: int | None = None


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int
    leader_epoch: int | None = None


class RecordParts:
    """One partition's records of a poll as consecutive parts: lists of records, and spans
    (samsa.consumer.fetcher.RecordSpan) that build theirs when iterated, a chunk at a time."""

    __slots__ = ("count", "parts")

    def __init__(self, parts: list[Any], count: int) -> None:
        self.parts = parts
        self.count = count

    def __len__(self) -> int:
        return self.count

    def chunks(self) -> Iterator[list[ConsumerRecord]]:
        for part in self.parts:
            if type(part) is list:
                yield part
            else:
                yield from part.chunks()

    def as_list(self) -> list[ConsumerRecord]:
        parts = self.parts
        if len(parts) == 1 and type(parts[0]) is list:
            return parts[0]
        return [r for chunk in self.chunks() for r in chunk]


class ConsumerRecords:
    """Records of one poll, by partition; iterating yields them partition by partition.

    Records of v2 batches are built as the iteration reaches them (they were checked when
    polled): records(tp), [tp] and items() give lists."""

    __slots__ = ("_by_partition",)

    def __init__(self, by_partition: dict[TopicPartition, Any] | None = None) -> None:
        self._by_partition: dict[TopicPartition, Any] = by_partition or {}

    def _chunks(self) -> Iterator[list[ConsumerRecord]]:
        for records in self._by_partition.values():
            if type(records) is RecordParts:
                yield from records.chunks()
            else:
                yield records

    def __iter__(self) -> Iterator[ConsumerRecord]:
        return chain.from_iterable(self._chunks())

    def _list(self, tp: TopicPartition) -> list[ConsumerRecord]:
        records = self._by_partition[tp]
        if type(records) is RecordParts:
            records = self._by_partition[tp] = records.as_list()
        return records

    def __len__(self) -> int:
        return sum(len(r) for r in self._by_partition.values())

    def count(self) -> int:
        return len(self)

    def __bool__(self) -> bool:
        return bool(self._by_partition)

    def is_empty(self) -> bool:
        return not self._by_partition

    def partitions(self) -> set[TopicPartition]:
        return set(self._by_partition)

    def records(self, partition: TopicPartition | str) -> list[ConsumerRecord]:
        """Records of one partition; given a topic name, that topic's records."""
        if isinstance(partition, str):
            return [r for tp in list(self._by_partition) if tp.topic == partition
                    for r in self._list(tp)]
        if partition not in self._by_partition:
            return []
        return self._list(partition)

    def items(self) -> Any:
        return {tp: self._list(tp) for tp in list(self._by_partition)}.items()

    def __getitem__(self, partition: TopicPartition) -> list[ConsumerRecord]:
        return self._list(partition)

    def __repr__(self) -> str:
        return f"ConsumerRecords({len(self)} records in {len(self._by_partition)} partitions)"
