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

from samsa.broker.log import Log, LogManager
from samsa.errors import CorruptRecordError, KafkaError, TopicAlreadyExistsError
from samsa.records import RecordBatchBuilder, iter_batches
from samsa.records.control import ControlRecordType

log = logging.getLogger(__name__)

GROUP_METADATA_TOPIC = "__consumer_offsets"
_READ_CHUNK = 8 << 20
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


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (over UTF-16 code units, 32-bit wrap-around)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode()) % partitions`` (abs(MIN_VALUE) is 0)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


class GroupStore:
    def __init__(self, logs: LogManager, *, num_partitions: int = 50,
                 segment_bytes: int = 104_857_600,
                 on_append: Callable[[str, int], object] | None = None) -> None:
        self.logs = logs
        existing = logs.topic(GROUP_METADATA_TOPIC)
        # An existing topic keeps its partition count: groups must stay where they were written.
        self.num_partitions = existing.partitions if existing is not None else num_partitions
        self.segment_bytes = segment_bytes
        self.on_append = on_append

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def _ensure_topic(self) -> None:
        if self.logs.topic(GROUP_METADATA_TOPIC) is not None:
            return
        try:
            self.logs.create_topic(GROUP_METADATA_TOPIC, self.num_partitions, {
                "cleanup.policy": "compact",
                "segment.bytes": str(self.segment_bytes),
                "max.message.bytes": str(_MAX_MESSAGE_BYTES),
            })
            log.info("created %s with %d partitions", GROUP_METADATA_TOPIC, self.num_partitions)
        except TopicAlreadyExistsError:
            pass

    def append(self, group_id: str, records: Sequence[KeyValue], *, producer_id: int = -1,
               producer_epoch: int = -1) -> int:
        """Write ``records`` (key, value-or-None) as one batch; returns the first record's
        offset.  With a producer id the batch is the transaction's (pending until its
        marker).  Raises KafkaError on failure (InvalidProducerEpochError for a fenced
        producer)."""
        if not records:
            return -1
        self._ensure_topic()
        partition = self.partition_for(group_id)
        return self._append(partition, records, producer_id, producer_epoch)

    def _append(self, partition: int, records: Sequence[KeyValue], producer_id: int = -1,
                producer_epoch: int = -1) -> int:
        plog = self.logs.get_log(GROUP_METADATA_TOPIC, partition)
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
        self._ensure_topic()
        plog = self.logs.get_log(GROUP_METADATA_TOPIC, partition)
        result = plog.append_control_marker(
            producer_id=producer_id, producer_epoch=producer_epoch, commit=commit,
            coordinator_epoch=coordinator_epoch, leader_epoch=0)
        if self.on_append is not None:
            self.on_append(GROUP_METADATA_TOPIC, partition)
        return result.base_offset

    def load(self) -> Iterator[StoredRecord | StoredMarker]:
        """Every record and transaction marker from the log start to the end, in log order
        per partition."""
        if self.logs.topic(GROUP_METADATA_TOPIC) is None:
            return
        for partition in range(self.num_partitions):
            yield from self._read_partition(partition)

    def _read_partition(self, partition: int) -> Iterator[StoredRecord | StoredMarker]:
        plog = self.logs.get_log(GROUP_METADATA_TOPIC, partition)
        position = plog.log_start_offset
        end = plog.high_watermark
        while position < end:
            data = plog.read(position, _READ_CHUNK, min_one_message=True)
            raw: Any = data.records
            chunk = raw.read() if hasattr(raw, "read") else bytes(raw)
            if not chunk:
                break
            advanced = position
            for batch in iter_batches(chunk):
                if batch.is_control:
                    marker = _marker_of(batch) if batch.base_offset >= position else None
                    if marker is not None and batch.producer_id >= 0:
                        yield StoredMarker(partition, batch.base_offset, batch.producer_id,
                                           marker == ControlRecordType.COMMIT)
                    advanced = max(advanced, batch.next_offset)
                    continue
                # Coordinator writes only: every transactional batch is a TxnOffsetCommit's.
                producer_id = batch.producer_id if batch.is_transactional else -1
                for record in batch:
                    if record.offset < position or record.key is None:
                        continue
                    yield StoredRecord(partition, record.offset, producer_id, record.key,
                                       record.value)
                advanced = max(advanced, batch.next_offset)
            if advanced == position:
                raise KafkaError(f"{GROUP_METADATA_TOPIC}-{partition}: no complete batch at "
                                 f"offset {position}; the log is damaged")
            position = advanced


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
