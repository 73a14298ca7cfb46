"""What poll() returns: ``ConsumerRecord`` tuples grouped in ``ConsumerRecords``.

ConsumerRecord is a NamedTuple built with ``tuple.__new__`` (the cheapest Python object with
named fields); serialized sizes are -1 for a null key/value, as in Java.  Headers are a tuple
of (key, value) pairs: immutable, and a record without headers shares the empty tuple (a list
per record would be one more object for the garbage collector to scan, at a million a second).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

from samsa.net.cluster import TopicPartition
from samsa.records import TimestampType

__all__ = ["ConsumerRecord", "ConsumerRecords", "OffsetAndMetadata", "OffsetAndTimestamp"]


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


class ConsumerRecords:
    """Records of one poll, by partition; iterating yields them partition by partition."""

    __slots__ = ("_by_partition",)

    def __init__(self, by_partition: dict[TopicPartition, list[ConsumerRecord]] | None = None) -> None:
        self._by_partition = by_partition or {}

    def __iter__(self) -> Iterator[ConsumerRecord]:
        for records in self._by_partition.values():
            yield from records

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
            return [r for tp, recs in self._by_partition.items() if tp.topic == partition
                    for r in recs]
        return self._by_partition.get(partition, [])

    def items(self) -> Any:
        return self._by_partition.items()

    def __getitem__(self, partition: TopicPartition) -> list[ConsumerRecord]:
        return self._by_partition[partition]

    def __repr__(self) -> str:
        return f"ConsumerRecords({len(self)} records in {len(self._by_partition)} partitions)"
