"""Durable group state: ``__consumer_offsets``, an internal topic written through the LogManager.

Each group lives in one partition, ``abs(java_hash(group_id)) % partitions`` as in Kafka, so
its records keep their order.  Every write is one record batch appended before the caller
answers its client: a commit of several partitions lands whole or not at all, and once
``append`` returns it survives a crash of the process (the bytes are in the file; the
topic's flush settings decide when they are fsynced, as for any topic).

Transactional offset commits (TxnOffsetCommit) are batches carrying the producer id and epoch,
pending until the transaction coordinator's COMMIT/ABORT marker, which ``append_marker`` writes;
``load`` hands back records and markers in log order so that the replay can tell them apart.

The topic is created on the first write (Kafka creates it on first use too), with
``offsets.topic.num.partitions`` partitions and ``cleanup.policy=compact``: the broker's log
cleaner keeps the last record of each key and drops tombstones after ``delete.retention.ms``,
so the replay at start-up reads little more than the live state.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from samsa.broker.internal_topic import InternalTopic, java_string_hash, partition_for
from samsa.broker.log import Log, LogManager
from samsa.errors import CorruptRecordError
from samsa.records import RecordBatchBuilder
from samsa.records.control import ControlRecordType

__all__ = ["GROUP_METADATA_TOPIC", "GroupStore", "StoredMarker", "StoredRecord",
           "java_string_hash", "partition_for"]

log = logging.getLogger(__name__)

GROUP_METADATA_TOPIC = "__consumer_offsets"
# Group metadata records hold every member's subscription and assignment: let them be large.
_MAX_MESSAGE_BYTES = 100 << 20

KeyValue = tuple[bytes, bytes | None]
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """A record read back: ``producer_id`` >= 0 when a transaction wrote it."""

    partition: int
    offset: int
    producer_id: int
    key: bytes
    value: bytes | None


@dataclass(frozen=True, slots=True)
class StoredMarker:
    """A transaction's COMMIT/ABORT marker read back."""

    partition: int
    offset: int
    producer_id: int
    commit: bool


class GroupStore:
    def __init__(self, logs: LogManager, *, num_partitions: int = 50,
                 segment_bytes: int = 104_857_600,
                 on_append: Callable[[str, int], object] | None = None) -> None:
        self.topic = InternalTopic(logs, GROUP_METADATA_TOPIC, num_partitions=num_partitions,
                                   configs={"cleanup.policy": "compact",
                                            "segment.bytes": str(segment_bytes),
                                            "max.message.bytes": str(_MAX_MESSAGE_BYTES)})
        self.logs = logs
        self.num_partitions = self.topic.num_partitions
        self.on_append = on_append

    def partition_for(self, group_id: str) -> int:
        return self.topic.partition_for(group_id)

    def append(self, group_id: str, records: Sequence[KeyValue], *, producer_id: int = -1,
               producer_epoch: int = -1) -> int:
        """Write ``records`` (key, value-or-None) as one batch; returns the first record's
        offset.  With a producer id the batch is the transaction's (pending until its
        marker).  Raises KafkaError on failure (InvalidProducerEpochError for a fenced
        producer)."""
        if not records:
            return -1
        self.topic.ensure_created()
        partition = self.partition_for(group_id)
        return self._append(partition, records, producer_id, producer_epoch)

    def _append(self, partition: int, records: Sequence[KeyValue], producer_id: int = -1,
                producer_epoch: int = -1) -> int:
        plog = self.topic.log(partition)
        if producer_id >= 0:
            builder = RecordBatchBuilder(
                batch_size_limit=1 << 62, producer_id=producer_id, producer_epoch=producer_epoch,
                base_sequence=_next_sequence(plog, producer_id, producer_epoch),
                is_transactional=True)
        else:
            builder = RecordBatchBuilder(batch_size_limit=1 << 62)
        for key, value in records:
            builder.append(None, key, value)
        result = plog.append_as_leader(builder.build(), leader_epoch=0)
        if self.on_append is not None:
            self.on_append(GROUP_METADATA_TOPIC, partition)
        return result.base_offset

    def append_marker(self, partition: int, producer_id: int, producer_epoch: int, commit: bool,
                      coordinator_epoch: int) -> int:
        """Write a transaction's COMMIT/ABORT marker into the partition; returns its offset."""
        self.topic.ensure_created()
        plog = self.topic.log(partition)
        result = plog.append_control_marker(
            producer_id=producer_id, producer_epoch=producer_epoch, commit=commit,
            coordinator_epoch=coordinator_epoch, leader_epoch=0)
        if self.on_append is not None:
            self.on_append(GROUP_METADATA_TOPIC, partition)
        return result.base_offset

    def load(self) -> Iterator[StoredRecord | StoredMarker]:
        """Every record and transaction marker from the log start to the end, in log order
        per partition."""
        if not self.topic.exists():
            return
        for partition in range(self.num_partitions):
            yield from self._read_partition(partition)

    def _read_partition(self, partition: int) -> Iterator[StoredRecord | StoredMarker]:
        for batch, position in self.topic.read_batches(partition):
            if batch.is_control:
                marker = _marker_of(batch) if batch.base_offset >= position else None
                if marker is not None and batch.producer_id >= 0:
                    yield StoredMarker(partition, batch.base_offset, batch.producer_id,
                                       marker == ControlRecordType.COMMIT)
                continue
            # Coordinator writes only: every transactional batch is a TxnOffsetCommit's.
            producer_id = batch.producer_id if batch.is_transactional else -1
            for record in batch:
                if record.offset >= position and record.key is not None:
                    yield StoredRecord(partition, record.offset, producer_id, record.key,
                                       record.value)


def _marker_of(batch: Any) -> int | None:
    """The control type of a COMMIT/ABORT batch, None for anything else (or unreadable)."""
    try:
        marker = batch.control_marker()
    except (CorruptRecordError, ValueError):
        log.warning("skipping an unreadable control batch at offset %d", batch.base_offset)
        return None
    if marker is None or marker.type not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
        return None
    return int(marker.type)


def _next_sequence(plog: Log, producer_id: int, producer_epoch: int) -> int:
    """The base sequence of the coordinator's next batch for this producer.  Kafka's
    coordinator writes its transactional batches with sequence 0 and its log checks no
    sequence for them (AppendOrigin.COORDINATOR, ProducerAppendInfo); this log checks every
    batch with a producer id as a client's, so the batches continue the producer's sequence
    on the partition instead (the caller holds the coordinator's lock: nobody else writes
    transactional batches here)."""
    entry = plog.producer_state.producers.get(producer_id)
    if entry is None or entry.epoch != producer_epoch:
        return 0
    last = entry.last_seq
    return 0 if last < 0 or last == _INT32_MAX else last + 1
