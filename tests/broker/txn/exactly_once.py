"""Shared parts of the consume-transform-produce proofs (test_exactly_once_*.py): filling the
input topic, the output's read-back with confluent-kafka's read_committed consumer, and the
input group's committed offsets.

Each loop writes ``b"<input value>:<transaction number>"`` for every input record, so the
read-back can tell which transaction wrote a copy: a record of an aborted transaction, or a
second copy of an input, shows up by name."""

from __future__ import annotations

import time
from collections.abc import Iterable

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

TIMEOUT = 30.0
PARTITIONS = 3
# Settings of the broker process: no rebalance delay, small internal topics.
BROKER_CONFIG = {"group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 4,
                 "transaction.state.log.num.partitions": 4, "num.partitions": PARTITIONS}


def create_topics(servers: str, *names: str) -> None:
    admin = AdminClient({"bootstrap.servers": servers})
    for future in admin.create_topics([NewTopic(n, PARTITIONS) for n in names]).values():
        future.result(TIMEOUT)


def fill(servers: str, topic: str, count: int) -> None:
    """``count`` plain records ``b"0"``..``b"<count-1>"``, spread round-robin over the
    partitions."""
    producer = Producer({"bootstrap.servers": servers, "linger.ms": 20,
                         "batch.num.messages": 10_000})
    for i in range(count):
        producer.produce(topic, value=b"%d" % i, partition=i % PARTITIONS)
        if i % 50_000 == 0:
            producer.poll(0)
    assert producer.flush(TIMEOUT) == 0, "the input was not all written"


def transformed(value: bytes, transaction: int) -> bytes:
    return b"%s:%d" % (value, transaction)


def read_output(servers: str, topic: str, wanted: int) -> list[tuple[int, int]]:
    """(input number, transaction number) of every record confluent-kafka's read_committed
    consumer reads from ``topic``: until ``wanted`` arrived, then one more second to show that
    nothing else comes."""
    consumer = Consumer({"bootstrap.servers": servers, "group.id": f"check-{topic}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100})
    got: list[tuple[int, int]] = []
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 60
        settle: float | None = None
        while time.monotonic() < deadline and (settle is None or time.monotonic() < settle):
            for msg in consumer.consume(10_000, 0.2):
                assert msg.error() is None, msg.error()
                number, transaction = msg.value().split(b":")
                got.append((int(number), int(transaction)))
            if len(got) >= wanted and settle is None:
                settle = time.monotonic() + 1.0
    finally:
        consumer.close()
    return got


def check_output(servers: str, topic: str, count: int, committed: Iterable[int]) -> None:
    """Each input's output exactly once, and only from committed transactions."""
    got = read_output(servers, topic, count)
    committed_set = set(committed)
    aborted = sorted({t for _, t in got if t not in committed_set})
    assert not aborted, f"records of aborted transactions {aborted[:10]} were delivered"
    numbers = sorted(n for n, _ in got)
    assert len(numbers) == count, f"{len(numbers)} outputs for {count} inputs"
    assert numbers == list(range(count)), "some inputs are missing or repeated in the output"


def check_group_at_end(servers: str, group: str, topic: str) -> None:
    """The group's committed offsets (read as a read_committed member reads them) are the end
    of every input partition."""
    consumer = Consumer({"bootstrap.servers": servers, "group.id": group,
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        committed = consumer.committed(tps, timeout=TIMEOUT)
        ends = [consumer.get_watermark_offsets(tp, timeout=TIMEOUT)[1] for tp in tps]
        assert [tp.error for tp in committed] == [None] * PARTITIONS, committed
        assert [tp.offset for tp in committed] == ends
    finally:
        consumer.close()
