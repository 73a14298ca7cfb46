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

from collections.abc import Iterator

from samsa.broker.internal_topic import InternalTopic
from samsa.broker.log import LogManager
from samsa.records import RecordBatchBuilder

TRANSACTION_STATE_TOPIC = "__transaction_state"


class TransactionStore:
    def __init__(self, logs: LogManager, *, num_partitions: int = 50,
                 segment_bytes: int = 104_857_600) -> None:
        self.topic = InternalTopic(logs, TRANSACTION_STATE_TOPIC, num_partitions=num_partitions,
                                   configs={"cleanup.policy": "compact",
                                            "compression.type": "none",
                                            "segment.bytes": str(segment_bytes)})
        self.logs = logs
        self.num_partitions = self.topic.num_partitions

    def partition_for(self, transactional_id: str) -> int:
        return self.topic.partition_for(transactional_id)

    def append(self, transactional_id: str, key: bytes, value: bytes | None) -> None:
        """Write one record; raises KafkaError if it could not be written."""
        self.topic.ensure_created()
        builder = RecordBatchBuilder(batch_size_limit=1 << 62)
        builder.append(None, key, value)
        plog = self.topic.log(self.partition_for(transactional_id))
        plog.append_as_leader(builder.build(), leader_epoch=0)

    def load(self) -> Iterator[tuple[bytes, bytes | None]]:
        """Every record (key, value-or-None) from the log start to the end, in log order per
        partition (an id's records are all in one partition, so their order is kept)."""
        if not self.topic.exists():
            return
        for partition in range(self.num_partitions):
            for batch, position in self.topic.read_batches(partition):
                if batch.is_control:
                    continue
                for record in batch:
                    if record.offset >= position and record.key is not None:
                        yield record.key, record.value
