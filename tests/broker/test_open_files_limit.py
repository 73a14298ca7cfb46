"""Descriptors: the broker raises its soft RLIMIT_NOFILE at start, and with the limit left at
1024 it still holds 10,000 partitions (segment files go through a bounded handle cache)."""

from __future__ import annotations

import logging
import os
import resource
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from samsa.broker import open_files_limit

SOFT_LIMIT = 1024


def _soft_limit_1024() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (SOFT_LIMIT, hard))


def _limits(pid: int) -> tuple[int, int]:
    """The process's (soft, hard) open-files limits, from /proc/<pid>/limits."""
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return int(soft), int(hard)
    raise AssertionError(f"no open-files line in /proc/{pid}/limits")


def _descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_raising_logs_the_limit_it_set(monkeypatch: pytest.MonkeyPatch,
                                       caplog: pytest.LogCaptureFixture) -> None:
    limits = {"now": (1024, 65536)}
    monkeypatch.setattr(open_files_limit.resource, "getrlimit", lambda _: limits["now"])
    monkeypatch.setattr(open_files_limit.resource, "setrlimit",
                        lambda _, value: limits.update(now=value))
    caplog.set_level(logging.INFO, "samsa.broker")
    assert open_files_limit.raise_open_files_limit() == 65536
    assert limits["now"] == (65536, 65536)
    assert "raised from 1024 to the hard limit 65536" in caplog.text
    limits["now"] = (1024, 65536)
    assert open_files_limit.raise_open_files_limit(enabled=False) == 1024
    assert limits["now"] == (1024, 65536)
    assert "samsa.open.files.limit.raise.enable=false" in caplog.text


def test_the_broker_raises_its_soft_descriptor_limit_to_the_hard_one(
        broker_process: Callable[..., Any]) -> None:
    process = broker_process(preexec_fn=_soft_limit_1024).start()
    soft, hard = _limits(process.proc.pid)
    assert hard > SOFT_LIMIT, "this test needs a hard RLIMIT_NOFILE above 1024"
    assert soft == hard
    process.stop()


def test_a_broker_with_10000_partitions_runs_under_a_soft_limit_of_1024(
        broker_process: Callable[..., Any], raw_client: Callable[[int], Any]) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    process = broker_process({"samsa.open.files.limit.raise.enable": "false"},
                             preexec_fn=_soft_limit_1024).start()
    pid = process.proc.pid
    assert _limits(pid)[0] == SOFT_LIMIT
    client = raw_client(process.port)
    topics = [f"wide-{i}" for i in range(5)]
    for topic in topics:  # 5 CreateTopics of 2,000 partitions: 10,000 in all
        assert client.create_topic(topic, 2_000) == 0
    held = _descriptors(pid)
    assert held < SOFT_LIMIT // 2, f"the broker holds {held} descriptors"
    sample = [(topic, p) for topic in topics for p in (0, 777, 1_999)]
    producer = Producer({"bootstrap.servers": process.bootstrap_servers})
    for topic, p in sample:
        producer.produce(topic, value=f"{topic}/{p}".encode(), partition=p)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": process.bootstrap_servers, "group.id": "wide",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for topic, p in sample])
    received: set[str] = set()
    for _ in range(200):
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            received.add(message.value().decode())
        if len(received) == len(sample):
            break
    consumer.close()
    assert received == {f"{topic}/{p}" for topic, p in sample}
    assert _descriptors(pid) < SOFT_LIMIT // 2
    # It also starts again on those 10,000 partitions under the same limit.
    assert process.stop() == 0
    process.start()
    client = raw_client(process.port)
    assert client.list_offset("wide-4", 1_999) == 1
    assert _descriptors(process.proc.pid) < SOFT_LIMIT // 2
    process.stop()
