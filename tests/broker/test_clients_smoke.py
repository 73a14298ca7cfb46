"""Real clients against a real Broker: kcat (librdkafka 2.0.2), kafka-python, confluent-kafka.

These peers were not written here, so they catch protocol mistakes our own tests share with our
own code.  Each must be installed; a missing one fails the test (it never skips).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from typing import Any

import pytest

from samsa.broker import Broker


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    return {"num.partitions": 1}


def _kcat(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is not installed (apt-get install kcat)"
    return subprocess.run([kcat, *args], input=stdin, capture_output=True, text=True,
                          timeout=60, check=False)


def test_kcat_metadata_produce_consume(broker: Broker) -> None:
    bs = broker.bootstrap_servers
    listing = _kcat("-b", bs, "-L")
    assert listing.returncode == 0, listing.stderr
    assert f"broker {broker.node_id} at {bs}" in listing.stdout
    # lz4 and idempotence are enabled only if the advertised ranges pass librdkafka 2.0.2's
    # feature checks (Produce v0, FindCoordinator v0, InitProducerId v0).
    produced = _kcat("-b", bs, "-P", "-t", "kcat-topic", "-z", "lz4",
                     "-X", "enable.idempotence=true", stdin="one\ntwo\nthree\n")
    assert produced.returncode == 0, produced.stderr
    consumed = _kcat("-b", bs, "-C", "-t", "kcat-topic", "-o", "beginning", "-e",
                     "-f", "%p:%o %s\n")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == ["0:0 one", "0:1 two", "0:2 three"]


def test_kafka_python_produce_and_assigned_consume(broker: Broker) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic

    bs = broker.bootstrap_servers
    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        admin.create_topics([NewTopic("kp-topic", 2, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bs, compression_type="gzip",
                             enable_idempotence=True)
    for i in range(10):
        producer.send("kp-topic", key=b"k%d" % i, value=b"v%d" % i)
    producer.flush()
    producer.close()
    partitions = [TopicPartition("kp-topic", 0), TopicPartition("kp-topic", 1)]
    consumer = KafkaConsumer(bootstrap_servers=bs, auto_offset_reset="earliest",
                             enable_auto_commit=False)
    try:
        consumer.assign(partitions)
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 10 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(r.value for r in records)
        assert sorted(got) == sorted(b"v%d" % i for i in range(10))
        assert sum(consumer.end_offsets(partitions).values()) == 10
    finally:
        consumer.close()


def test_confluent_kafka_produce_consume_and_admin(broker: Broker) -> None:
    import confluent_kafka as ck
    from confluent_kafka.admin import (
        AdminClient,
        ConfigResource,
        NewPartitions,
        NewTopic,
    )

    bs = broker.bootstrap_servers
    producer = ck.Producer({"bootstrap.servers": bs, "enable.idempotence": True,
                            "compression.type": "zstd"})
    for i in range(5):
        producer.produce("ck-topic", value=b"c%d" % i)
    assert producer.flush(30) == 0
    consumer = ck.Consumer({"bootstrap.servers": bs, "group.id": "unused",
                            "enable.auto.commit": False})
    try:
        consumer.assign([ck.TopicPartition("ck-topic", 0, ck.OFFSET_BEGINNING)])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 5 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            got.append(message.value())
        assert got == [b"c%d" % i for i in range(5)]
        assert consumer.get_watermark_offsets(ck.TopicPartition("ck-topic", 0)) == (0, 5)
    finally:
        consumer.close()

    admin = AdminClient({"bootstrap.servers": bs})
    for future in admin.create_topics([NewTopic("ck-admin", 2, 1)]).values():
        future.result(30)
    [described] = admin.describe_configs([ConfigResource("topic", "ck-admin")]).values()
    assert described.result(30)["retention.ms"].value == "604800000"
    for future in admin.create_partitions([NewPartitions("ck-admin", 4)]).values():
        future.result(30)
    assert len(admin.list_topics(timeout=10).topics["ck-admin"].partitions) == 4
    for future in admin.delete_topics(["ck-admin"]).values():
        future.result(30)
    assert "ck-admin" not in admin.list_topics(timeout=10).topics


def test_aiokafka_idempotent_produce_and_consume(broker: Broker) -> None:
    """aiokafka sends only non-flexible versions (Metadata <= 5, Produce <= 8, Fetch <= 11)."""
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition

    bs = broker.bootstrap_servers

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=bs, enable_idempotence=True,
                                    compression_type="lz4")
        await producer.start()
        try:
            for i in range(5):
                await producer.send_and_wait("aio-topic", b"a%d" % i)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bs, auto_offset_reset="earliest",
                                    enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([TopicPartition("aio-topic", 0)])
            await consumer.seek_to_beginning()
            got: list[bytes] = []
            while len(got) < 5:
                for messages in (await consumer.getmany(timeout_ms=500)).values():
                    got.extend(m.value for m in messages)
            return got
        finally:
            await consumer.stop()

    assert asyncio.run(asyncio.wait_for(run(), 30)) == [b"a%d" % i for i in range(5)]
