"""Produce-then-consume round trips through real peers, shared by the SASL and TLS peer tests:
each writes ``values(n)`` to a fresh topic and reads it back with a group (kcat: to the end)."""

from __future__ import annotations

import shutil
import subprocess
import uuid
from typing import Any

N = 20_000


def values(n: int = N) -> list[bytes]:
    return [b"%06d" % i for i in range(n)]


def confluent_round_trip(bootstrap: str, settings: dict[str, Any], n: int = N) -> list[bytes]:
    from confluent_kafka import Consumer, Producer

    topic = f"ck-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **settings})
    for value in values(n):
        producer.produce(topic, value)
        producer.poll(0)
    assert producer.flush(60) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest", **settings})
    consumer.subscribe([topic])
    got: list[bytes] = []
    try:
        for _ in range(600):
            for message in consumer.consume(5000, 1.0):
                assert message.error() is None, message.error()
                got.append(message.value())
            if len(got) >= n:
                break
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got


def kafka_python_round_trip(bootstrap: str, settings: dict[str, Any], n: int = N) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer

    topic = f"kp-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, **settings)
    for value in values(n):
        producer.send(topic, value)
    producer.flush(60)
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"g-{topic}",
                             auto_offset_reset="earliest", consumer_timeout_ms=30_000,
                             **settings)
    got = []
    for message in consumer:  # stops at n, or after 30 s without records
        got.append(message.value)
        if len(got) >= n:
            break
    consumer.close()
    return got


def kcat_round_trip(bootstrap: str, settings: list[str], n: int = N) -> list[bytes]:
    """``settings``: kcat's -X arguments."""
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is not installed (apt-get install kcat)"
    topic = f"kcat-{uuid.uuid4().hex[:8]}"
    produced = subprocess.run([kcat, "-b", bootstrap, "-P", "-t", topic, *settings],
                              input=b"\n".join(values(n)) + b"\n", capture_output=True,
                              timeout=120, check=False)
    assert produced.returncode == 0, produced.stderr.decode()
    consumed = subprocess.run([kcat, "-b", bootstrap, "-C", "-t", topic, "-e",
                               "-o", "beginning", *settings], capture_output=True, timeout=120,
                              check=False)
    assert consumed.returncode == 0, consumed.stderr.decode()
    return consumed.stdout.split()
