"""Durable coordinator state: ``__transaction_state``, written through the LogManager.

Each transactional id lives in one partition, ``abs(java_hash(id)) % partitions`` as in
Kafka's TransactionStateManager.partitionFor.  Every transition is one single-record batch
(uncompressed, no producer id), appended before the client is answered: once ``append``
returns, the bytes are in the file and survive a crash of the process; the topic's flush
settings decide when they are fsynced, as for any topic (Kafka writes with acks=-1).

The topic is created on first use with ``transaction.state.log.num.partitions`` partitions,
``cleanup.policy=compact`` and ``transaction.state.log.segment.bytes``; an existing topic
keeps its partition count (ids must stay where they were written).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from samsa.broker.group.store import partition_for
from samsa.broker.log import LogManager
from samsa.errors import KafkaError, TopicAlreadyExistsError
from samsa.records import RecordBatchBuilder, iter_batches

log = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC = "__transaction_state"
_READ_CHUNK = 8 << 20


class TransactionStore:
    def __init__(self, logs: LogManager, *, num_partitions: int = 50,
                 segment_bytes: int = 104_857_600) -> None:
        self.logs = logs
        existing = logs.topic(TRANSACTION_STATE_TOPIC)
        self.num_partitions = existing.partitions if existing is not None else num_partitions
        self.segment_bytes = segment_bytes

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def _ensure_topic(self) -> None:
        if self.logs.topic(TRANSACTION_STATE_TOPIC) is not None:
            return
        try:
            self.logs.create_topic(TRANSACTION_STATE_TOPIC, self.num_partitions, {
                "cleanup.policy": "compact",
                "compression.type": "none",
                "segment.bytes": str(self.segment_bytes),
            })
            log.info("created %s with %d partitions", TRANSACTION_STATE_TOPIC,
                     self.num_partitions)
        except TopicAlreadyExistsError:
            pass

    def append(self, transactional_id: str, key: bytes, value: bytes | None) -> None:
        """Write one record; raises KafkaError if it could not be written."""
        self._ensure_topic()
        builder = RecordBatchBuilder(batch_size_limit=1 << 62)
        builder.append(None, key, value)
        plog = self.logs.get_log(TRANSACTION_STATE_TOPIC, self.partition_for(transactional_id))
        plog.append_as_leader(builder.build(), leader_epoch=0)

    def load(self) -> Iterator[tuple[bytes, bytes | None]]:
        """Every record (key, value-or-None) from the log start to the end, in log order per
        partition (an id's records are all in one partition, so their order is kept)."""
        if self.logs.topic(TRANSACTION_STATE_TOPIC) is None:
            return
        for partition in range(self.num_partitions):
            yield from self._read_partition(partition)

    def _read_partition(self, partition: int) -> Iterator[tuple[bytes, bytes | None]]:
        plog = self.logs.get_log(TRANSACTION_STATE_TOPIC, partition)
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
                if not batch.is_control:
                    for record in batch:
                        if record.offset >= position and record.key is not None:
                            yield record.key, record.value
                advanced = max(advanced, batch.next_offset)
            if advanced == position:
                raise KafkaError(f"{TRANSACTION_STATE_TOPIC}-{partition}: no complete batch at "
                                 f"offset {position}; the log is damaged")
            position = advanced
