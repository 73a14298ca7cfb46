"""Issue 15's consume-transform-produce proof with the other transactional producers against a
``samsa broker`` process: kafka-python's, aiokafka's, and samsa's own (with samsa's consumer
and its group_metadata()).  Each reads the input as a read_committed group member without
auto-commit, writes every record transformed in a transaction with the consumer's positions
(send_offsets_to_transaction), aborts every fourth transaction and processes its records again
from the group's committed offsets.  The output, read with confluent-kafka's read_committed
consumer, holds each input's output exactly once and nothing of an aborted transaction; the
group ends committed at the end of the input."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

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

RECORDS = 5_000
BATCH = 250


def is_aborted(transaction: int) -> bool:
    return transaction % 4 == 2


@pytest.fixture
def servers(broker_process: Callable[..., BrokerProcess]) -> str:
    servers = broker_process(BROKER_CONFIG).start().bootstrap_servers
    create_topics(servers, "in", "out")
    fill(servers, "in", RECORDS)
    return servers


def test_kafka_python_consume_transform_produce(servers: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.structs import OffsetAndMetadata

    consumer = KafkaConsumer("in", bootstrap_servers=servers, group_id="kp-group",
                             isolation_level="read_committed", enable_auto_commit=False,
                             auto_offset_reset="earliest")
    producer = KafkaProducer(bootstrap_servers=servers, transactional_id="kp-ctp", linger_ms=5)
    committed: list[int] = []
    done, transaction = 0, 0
    deadline = time.monotonic() + 120
    try:
        producer.init_transactions()
        while done < RECORDS:
            assert time.monotonic() < deadline, f"stuck after {done} of {RECORDS} records"
            polled = consumer.poll(timeout_ms=1000, max_records=BATCH)
            msgs = [m for records in polled.values() for m in records]
            if not msgs:
                continue
            transaction += 1
            producer.begin_transaction()
            for m in msgs:
                producer.send("out", transformed(m.value, transaction), partition=m.partition)
            offsets = {tp: OffsetAndMetadata(consumer.position(tp), "", -1)
                       for tp in consumer.assignment()}
            producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
            if is_aborted(transaction):
                producer.abort_transaction()
                for tp in consumer.assignment():
                    offset = consumer.committed(tp)
                    if offset is None:
                        consumer.seek_to_beginning(tp)
                    else:
                        consumer.seek(tp, offset)
            else:
                producer.commit_transaction()
                committed.append(transaction)
                done += len(msgs)
    finally:
        consumer.close()
        producer.close(timeout=5)
    assert done == RECORDS and transaction - len(committed) >= 3
    check_output(servers, "out", RECORDS, committed)
    check_group_at_end(servers, "kp-group", "in")


def test_aiokafka_consume_transform_produce(servers: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    committed: list[int] = []

    async def run() -> int:
        consumer = AIOKafkaConsumer("in", bootstrap_servers=servers, group_id="aio-group",
                                    isolation_level="read_committed", enable_auto_commit=False,
                                    auto_offset_reset="earliest")
        producer = AIOKafkaProducer(bootstrap_servers=servers, transactional_id="aio-ctp",
                                    linger_ms=5)
        await consumer.start()
        await producer.start()
        done, transaction = 0, 0
        deadline = time.monotonic() + 120
        try:
            while done < RECORDS:
                assert time.monotonic() < deadline, f"stuck after {done} of {RECORDS} records"
                polled = await consumer.getmany(timeout_ms=1000, max_records=BATCH)
                msgs = [m for records in polled.values() for m in records]
                if not msgs:
                    continue
                transaction += 1
                await producer.begin_transaction()
                for m in msgs:
                    await producer.send("out", transformed(m.value, transaction),
                                        partition=m.partition)
                offsets = {tp: await consumer.position(tp) for tp in consumer.assignment()}
                await producer.send_offsets_to_transaction(offsets, "aio-group")
                if is_aborted(transaction):
                    await producer.abort_transaction()
                    for tp in consumer.assignment():
                        offset = await consumer.committed(tp)
                        if offset is None:
                            await consumer.seek_to_beginning(tp)
                        else:
                            consumer.seek(tp, offset)
                else:
                    await producer.commit_transaction()
                    committed.append(transaction)
                    done += len(msgs)
        finally:
            await consumer.stop()
            await producer.stop()
        assert transaction - len(committed) >= 3
        return done

    assert asyncio.run(run()) == RECORDS
    check_output(servers, "out", RECORDS, committed)
    check_group_at_end(servers, "aio-group", "in")


def test_samsa_consume_transform_produce(servers: str) -> None:
    from samsa import KafkaConsumer, KafkaProducer
    from samsa.consumer import TopicPartition

    consumer = KafkaConsumer({"bootstrap.servers": servers, "group.id": "samsa-group",
                              "isolation.level": "read_committed", "enable.auto.commit": False,
                              "auto.offset.reset": "earliest", "max.poll.records": BATCH})
    producer = KafkaProducer({"bootstrap.servers": servers, "transactional.id": "samsa-ctp",
                              "linger.ms": 5})
    committed: list[int] = []
    done, transaction = 0, 0
    deadline = time.monotonic() + 120
    try:
        consumer.subscribe(["in"])
        producer.init_transactions(TIMEOUT)
        while done < RECORDS:
            assert time.monotonic() < deadline, f"stuck after {done} of {RECORDS} records"
            msgs = list(consumer.poll(1.0))
            if not msgs:
                continue
            transaction += 1
            producer.begin_transaction()
            for m in msgs:
                producer.send("out", transformed(m.value, transaction), partition=m.partition)
            offsets = {tp: consumer.position(tp, TIMEOUT) for tp in consumer.assignment()}
            producer.send_offsets_to_transaction(offsets, consumer.group_metadata(), TIMEOUT)
            if is_aborted(transaction):
                producer.abort_transaction(TIMEOUT)
                for tp, meta in consumer.committed(consumer.assignment(), TIMEOUT).items():
                    if meta is None:
                        consumer.seek_to_beginning([TopicPartition(*tp)])
                    else:
                        consumer.seek(tp, meta.offset)
            else:
                producer.commit_transaction(TIMEOUT)
                committed.append(transaction)
                done += len(msgs)
    finally:
        consumer.close()
        producer.close(5)
    assert done == RECORDS and transaction - len(committed) >= 3
    check_output(servers, "out", RECORDS, committed)
    check_group_at_end(servers, "samsa-group", "in")
