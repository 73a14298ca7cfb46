"""The pipeline's topics: create them if missing, and read their end offsets.

The pipeline never deletes or truncates a topic (it may be pointed at a real cluster); it notes
each topic's end offsets before writing and reads only from there on.
"""

from __future__ import annotations

import json
from types import TracebackType
from typing import Self

from samsa.admin import AdminClient, NewTopic
from samsa.consumer import KafkaConsumer, TopicPartition
from samsa.errors import TopicAlreadyExistsError


class Topics:
    """Admin and offset look-ups against one cluster; close() when done."""

    def __init__(self, bootstrap_servers: str) -> None:
        self.bootstrap_servers = bootstrap_servers
        self._admin = AdminClient({"bootstrap.servers": bootstrap_servers})
        self._consumer: KafkaConsumer | None = None

    def ensure(self, name: str, partitions: int) -> int:
        """Create ``name`` with ``partitions`` partitions unless it exists; its partition count."""
        try:
            self._admin.create_topics([NewTopic(name, num_partitions=partitions)])
        except TopicAlreadyExistsError:
            pass
        return len(self._admin.describe_topics([name])[name].partitions)  # type: ignore[union-attr]

    def end_offsets(self, topic: str, partitions: int) -> dict[int, int]:
        """{partition: end offset} of ``topic``."""
        if self._consumer is None:
            self._consumer = KafkaConsumer({"bootstrap.servers": self.bootstrap_servers,
                                            "enable.auto.commit": False})
        found = self._consumer.end_offsets([TopicPartition(topic, p) for p in range(partitions)])
        return {tp.partition: off for tp, off in found.items()}

    def first_record(self, topic: str, partition: int, offset: int,
                     timeout: float = 30.0) -> tuple[int, bytes | None] | None:
        """(timestamp ms, value) of the first record at or after ``offset``; None if none."""
        import time

        consumer = KafkaConsumer({"bootstrap.servers": self.bootstrap_servers,
                                  "enable.auto.commit": False})
        try:
            tp = TopicPartition(topic, partition)
            consumer.assign([tp])
            consumer.seek(tp, offset)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                for record in consumer.poll(0.5):
                    return record.timestamp, record.value
            return None
        finally:
            consumer.close()

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
        self._admin.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def offsets_json(topic: str, offsets: dict[int, int]) -> str:
    """Spark's Kafka offsets JSON for startingOffsets/endingOffsets: {"topic": {"0": 42}}."""
    return json.dumps({topic: {str(p): off for p, off in sorted(offsets.items())}})
