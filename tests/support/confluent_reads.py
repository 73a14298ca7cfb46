"""What confluent-kafka's consumer reads back from a topic, for tests that check another
client's or a pipeline's writes with an independent reader."""

from __future__ import annotations

import time


def read_raw(bootstrap: str, topic: str, wanted: int, *, committed: bool = True,
             partitions: int = 2, timeout_s: float = 60.0) -> list[bytes]:
    """Every value in ``topic`` as confluent-kafka's consumer reads it from the beginning
    (read_committed unless ``committed`` is false): polls until ``wanted`` arrived, then one
    more second to show that nothing else comes (or until ``timeout_s``)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}",
                         "isolation.level": "read_committed" if committed else "read_uncommitted",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    values: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + timeout_s
        settle: float | None = None
        while time.monotonic() < deadline and (settle is None or time.monotonic() < settle):
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
            if len(values) >= wanted and settle is None:
                settle = time.monotonic() + 1.0
    finally:
        consumer.close()
    return values


def read_values(bootstrap: str, topic: str, wanted: int, *, committed: bool = True,
                partitions: int = 2, timeout_s: float = 60.0) -> list[str]:
    """:func:`read_raw`, the values decoded as UTF-8."""
    return [v.decode() for v in read_raw(bootstrap, topic, wanted, committed=committed,
                                         partitions=partitions, timeout_s=timeout_s)]
