"""A ``samsa broker`` subprocess SIGKILLed by the cleaner's test hook (SAMSA_TEST_CLEANER_KILL_AT)
at each step of the swap protocol, then restarted: a confluent-kafka reader sees exactly the
latest value of every key (tombstones included), in offset order, nothing lost that was not
superseded, and no temporary cleaner file is left."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from samsa.broker.log.cleaner import KILL_AT_ENV

TOPIC = "changelog"
KEYS = 60
UPDATES = 2400


def _admin_configs(ratio: str) -> dict[str, str]:
    return {"cleanup.policy": "compact", "segment.bytes": "4096",
            "min.cleanable.dirty.ratio": ratio}


def _produce(bootstrap: str) -> dict[bytes, bytes | None]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 1, "batch.size": 600})
    latest: dict[bytes, bytes | None] = {}
    for i in range(UPDATES):
        key = b"key-%d" % (i % KEYS)
        value = None if i % 7 == 0 else b"value-%d" % i  # some tombstones
        producer.produce(TOPIC, key=key, value=value)
        latest[key] = value
        producer.poll(0)
    assert producer.flush(60) == 0
    return latest


def _read(bootstrap: str) -> list[tuple[int, bytes, bytes | None]]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "crash-reader",
                         "enable.auto.commit": False, "check.crcs": True})
    rows: list[tuple[int, bytes, bytes | None]] = []
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=30)
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        deadline = time.monotonic() + 60
        while (not rows or rows[-1][0] < high - 1) and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                assert msg.error() is None, msg.error()
                rows.append((msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()
    return rows


@pytest.mark.parametrize("point", ["cleaned", "swap", "deleted", "swapped", "checkpoint"])
def test_sigkill_during_cleaning_then_restart(point: str, broker_process: Callable[..., Any],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    monkeypatch.setenv(KILL_AT_ENV, point)
    broker = broker_process({"log.cleaner.backoff.ms": 50}).start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    # Not cleanable until every record is acknowledged (a ratio is never above 1).
    admin.create_topics([NewTopic(TOPIC, 1, 1, config=_admin_configs("1.0"))])[TOPIC].result(30)
    latest = _produce(broker.bootstrap_servers)
    resource = ConfigResource("topic", TOPIC, set_config=_admin_configs("0.01"))
    admin.alter_configs([resource])[resource].result(30)
    broker.proc.wait(120)  # the cleaner's test hook kills it
    assert broker.proc.returncode == -9
    data = broker.data_dir / f"{TOPIC}-0"
    assert list(data.glob("*.cleaned")) or list(data.glob("*.swap")) or point in (
        "swapped", "checkpoint")

    monkeypatch.delenv(KILL_AT_ENV)
    broker.start()
    rows = _read(broker.bootstrap_servers)
    offsets = [offset for offset, _, _ in rows]
    assert offsets == sorted(set(offsets))
    seen = {key: value for _, key, value in rows}
    assert seen == latest
    assert not [p for p in data.iterdir() if p.suffix in (".cleaned", ".swap")]
