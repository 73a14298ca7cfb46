"""InternalTopic: a coordinator's own topic (``__consumer_offsets``, ``__transaction_state``).

Both coordinators keep their state as records in a compacted topic of their own, written
through the LogManager and read back at start-up: each key (a group id, a transactional id)
lives in one partition, ``Utils.abs(key.hashCode()) % partitions`` as in Kafka's
GroupMetadataManager / TransactionStateManager ``partitionFor``, so its records keep their
order.  The topic is created on first use (as Kafka's are); an existing one keeps its
partition count, since keys must stay where they were written.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any

from samsa.broker.log import Log, LogManager
from samsa.errors import KafkaError, TopicAlreadyExistsError
from samsa.records import iter_batches

__all__ = ["InternalTopic", "java_string_hash", "partition_for"]

log = logging.getLogger(__name__)

_READ_CHUNK = 8 << 20


def java_string_hash(text: str) -> int:
    """Java's String.hashCode (over UTF-16 code units, 32-bit wrap-around)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(key: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(key.hashCode()) % partitions`` (abs(MIN_VALUE) is 0)."""
    h = java_string_hash(key)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


class InternalTopic:
    """``name`` with ``num_partitions`` partitions and ``configs``, created on first use."""

    def __init__(self, logs: LogManager, name: str, *, num_partitions: int,
                 configs: Mapping[str, str]) -> None:
        self.logs = logs
        self.name = name
        existing = logs.topic(name)
        self.num_partitions = existing.partitions if existing is not None else num_partitions
        self.configs = dict(configs)

    def partition_for(self, key: str) -> int:
        return partition_for(key, self.num_partitions)

    def exists(self) -> bool:
        return self.logs.topic(self.name) is not None

    def ensure_created(self) -> None:
        if self.exists():
            return
        try:
            self.logs.create_topic(self.name, self.num_partitions, self.configs)
            log.info("created %s with %d partitions", self.name, self.num_partitions)
        except TopicAlreadyExistsError:
            pass

    def log(self, partition: int) -> Log:
        return self.logs.get_log(self.name, partition)

    def read_batches(self, partition: int) -> Iterator[tuple[Any, int]]:
        """Every batch from the log start to the high watermark, in log order, each with the
        offset the read asked for: a batch may start before it (a read begins at the batch
        holding that offset), and its records below it were handed out already."""
        plog = self.log(partition)
        position = plog.log_start_offset
        end = plog.high_watermark
        while position < end:
            raw: Any = plog.read(position, _READ_CHUNK, min_one_message=True).records
            chunk = raw.read() if hasattr(raw, "read") else bytes(raw)
            if not chunk:
                break
            advanced = position
            for batch in iter_batches(chunk):
                yield batch, position
                advanced = max(advanced, batch.next_offset)
            if advanced == position:
                raise KafkaError(f"{self.name}-{partition}: no complete batch at offset "
                                 f"{position}; the log is damaged")
            position = advanced
