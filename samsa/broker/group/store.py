"""Durable group state: ``__consumer_offsets``, an internal topic written through the LogManager.

Each group lives in one partition, ``abs(java_hash(group_id)) % partitions`` as in Kafka, so
its records keep their order.  Every write is one record batch appended before the caller
answers its client: a commit of several partitions lands whole or not at all, and once
``append`` returns it survives a crash of the process (the bytes are in the file; the
topic's flush settings decide when they are fsynced, as for any topic).

The topic is created on the first write (Kafka creates it on first use too), with
``offsets.topic.num.partitions`` partitions and ``cleanup.policy=compact``.  Nothing compacts
it in the background; instead ``rewrite`` replaces a partition's history by a snapshot of the
live state (appended, then everything before it is deleted), which the coordinator does at
start-up when the history has grown well beyond the live state.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from samsa.broker.log import LogManager
from samsa.errors import KafkaError, TopicAlreadyExistsError
from samsa.records import RecordBatchBuilder, iter_batches

log = logging.getLogger(__name__)

GROUP_METADATA_TOPIC = "__consumer_offsets"
_READ_CHUNK = 8 << 20
# Group metadata records hold every member's subscription and assignment: let them be large.
_MAX_MESSAGE_BYTES = 100 << 20

KeyValue = tuple[bytes, bytes | None]


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

    def append(self, group_id: str, records: Sequence[KeyValue]) -> None:
        """Write ``records`` (key, value-or-None) as one batch; raises KafkaError on failure."""
        if not records:
            return
        self._ensure_topic()
        partition = self.partition_for(group_id)
        self._append(partition, records)

    def _append(self, partition: int, records: Sequence[KeyValue]) -> int:
        builder = RecordBatchBuilder(batch_size_limit=1 << 62)
        for key, value in records:
            builder.append(None, key, value)
        plog = self.logs.get_log(GROUP_METADATA_TOPIC, partition)
        result = plog.append_as_leader(builder.build(), leader_epoch=0)
        if self.on_append is not None:
            self.on_append(GROUP_METADATA_TOPIC, partition)
        return result.base_offset

    def load(self) -> Iterator[tuple[int, bytes, bytes | None]]:
        """Every record (partition, key, value) from the log start to the end, in log order
        per partition."""
        if self.logs.topic(GROUP_METADATA_TOPIC) is None:
            return
        for partition in range(self.num_partitions):
            yield from self._read_partition(partition)

    def _read_partition(self, partition: int) -> Iterator[tuple[int, bytes, bytes | None]]:
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
                    advanced = max(advanced, batch.next_offset)
                    continue
                for record in batch:
                    if record.offset < position or record.key is None:
                        continue
                    yield partition, record.key, record.value
                advanced = max(advanced, batch.next_offset)
            if advanced == position:
                raise KafkaError(f"{GROUP_METADATA_TOPIC}-{partition}: no complete batch at "
                                 f"offset {position}; the log is damaged")
            position = advanced

    def rewrite(self, partition: int, records: Sequence[KeyValue]) -> None:
        """Replace the partition's history by ``records`` (the live state): append them, then
        drop everything before.  A crash in between leaves both copies, which replay the same."""
        plog = self.logs.get_log(GROUP_METADATA_TOPIC, partition)
        start = plog.log_end_offset
        if records:
            self._append(partition, records)
        plog.delete_records_before(start)
