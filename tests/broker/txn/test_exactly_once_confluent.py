"""Issue 15's proof with confluent-kafka against a ``samsa broker`` process: a
consume-transform-produce loop over 100,000 records (a read_committed group member without
auto-commit, a transactional producer, send_offsets_to_transaction with the consumer's
positions and group metadata), every fifth transaction aborted and its records processed again
from the group's committed offsets.  A read_committed reader of the output sees each input's
output exactly once and nothing of the aborted transactions; the group ends committed at the
end of the input."""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from tests.broker.conftest import BrokerProcess
from tests.broker.txn.exactly_once import (
    BROKER_CONFIG,
    TIMEOUT,
    check_group_at_end,
    check_output,
    create_topics,
    fill,
    transformed,
)

RECORDS = 100_000
BATCH = 2_000
IN, OUT, GROUP = "ck-in", "ck-out", "ck-group"


def rewind_to_committed(consumer: Consumer) -> None:
    """Seek every assigned partition back to the group's committed offset (the start when none
    is committed yet), as an application does after aborting."""
    for tp in consumer.committed(consumer.assignment(), timeout=TIMEOUT):
        assert tp.error is None, tp.error
        offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
        consumer.seek(TopicPartition(tp.topic, tp.partition, offset))


def test_consume_transform_produce_100k_with_aborts(
        broker_process: Callable[..., BrokerProcess]) -> None:
    servers = broker_process(BROKER_CONFIG).start().bootstrap_servers
    create_topics(servers, IN, OUT)
    fill(servers, IN, RECORDS)
    consumer = Consumer({"bootstrap.servers": servers, "group.id": GROUP,
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    producer = Producer({"bootstrap.servers": servers, "transactional.id": "ck-ctp",
                         "linger.ms": 5})
    committed: list[int] = []
    aborted: list[int] = []
    done = 0
    try:
        consumer.subscribe([IN])
        producer.init_transactions(TIMEOUT)
        transaction = 0
        while done < RECORDS:
            msgs = consumer.consume(BATCH, timeout=TIMEOUT)
            assert msgs, f"the input stopped after {done} of {RECORDS} records"
            for m in msgs:
                assert m.error() is None, m.error()
            transaction += 1
            producer.begin_transaction()
            for m in msgs:
                producer.produce(OUT, transformed(m.value(), transaction),
                                 partition=m.partition())
            positions = [tp for tp in consumer.position(consumer.assignment()) if tp.offset >= 0]
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(),
                                                 TIMEOUT)
            if transaction % 5 == 3:
                producer.abort_transaction(TIMEOUT)
                aborted.append(transaction)
                rewind_to_committed(consumer)
            else:
                producer.commit_transaction(TIMEOUT)
                committed.append(transaction)
                done += len(msgs)
    finally:
        consumer.close()
    assert len(aborted) >= 5, "too few aborted transactions to prove anything"
    assert done == RECORDS  # nothing read twice after the rewinds
    check_output(servers, OUT, RECORDS, committed)
    check_group_at_end(servers, GROUP, IN)
