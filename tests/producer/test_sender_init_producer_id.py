"""The idempotent producer's InitProducerId against librdkafka's mock cluster: errors the
broker answers it with (Java's TransactionManager.InitProducerIdHandler and Sender.runOnce).

* Retriable (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS): asked
  again after retry.backoff.ms; records wait for the producer id and are then delivered.
* CLUSTER_AUTHORIZATION_FAILED: every record waiting for the id fails with that error
  (Sender.shouldHandleAuthorizationError -> maybeAbortBatches); the producer then goes back to
  having no id (transitionToUninitialized), so a later send asks again and, once the
  broker allows it, is delivered.
* Any other error (here INVALID_REQUEST) is fatal (TransactionManager.fatalError): waiting
  records fail with it, later sends raise it, and InitProducerId is not asked again.

A MockClock that moves only when the test says so decides when the Sender may ask again: the
records are queued before the answer that fails them can be asked for, whatever the machine's
speed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from samsa import KafkaProducer
from samsa.errors import (
    ClusterAuthorizationFailedError,
    InvalidRequestError,
    KafkaTimeoutError,
    UnsupportedVersionError,
)
from samsa.net.clock import MockClock
from samsa.producer.future import RecordFuture
from tests.support.mock_cluster import MockCluster

from .test_producer_mock import FAST

INIT_PRODUCER_ID = 22
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
CLUSTER_AUTHORIZATION_FAILED = 31
INVALID_REQUEST = 42
BACKOFF_MS = 100


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    with MockCluster(1, topics={"t": 1}) as mock:
        mock.start_request_tracking()
        yield mock


def _producer(cluster: MockCluster, clock: MockClock) -> KafkaProducer:
    config: dict[str, object] = {
        "bootstrap.servers": cluster.bootstrap_servers, **FAST, "linger.ms": 0,
        "retry.backoff.ms": BACKOFF_MS, "retry.backoff.max.ms": BACKOFF_MS,
    }
    return KafkaProducer(config, clock=clock)


def _advance_until_done(clock: MockClock, futures: list[RecordFuture]) -> None:
    """Move the clock one backoff at a time (the Sender may then ask InitProducerId once more)
    until every future is complete."""
    deadline = time.monotonic() + 30
    while not all(f.done() for f in futures):
        assert time.monotonic() < deadline, "records still pending"
        clock.advance(BACKOFF_MS)
        try:  # the Sender's poll waits at most retry.backoff.ms of real time
            futures[-1].exception(timeout=BACKOFF_MS / 1000)
        except KafkaTimeoutError:
            pass


def _send_three(cluster: MockCluster) -> tuple[list[int], dict[str, Any]]:
    """Three records to partition 0 on a frozen clock moved one backoff at a time: their offsets
    and the producer's metrics."""
    clock = MockClock(now_ms=5_000)
    producer = _producer(cluster, clock)
    try:
        futures = [producer.send("t", b"%d" % i, partition=0) for i in range(3)]
        _advance_until_done(clock, futures)
        offsets = [f.get(timeout=0).offset for f in futures]
        metrics = producer.metrics()
    finally:
        producer.close(0)  # close's own timeout runs on the frozen clock
    return offsets, metrics


@pytest.mark.parametrize("code", [COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS])
def test_retriable_init_producer_id_errors_are_asked_again(cluster: MockCluster, code: int) -> None:
    cluster.push_request_errors(INIT_PRODUCER_ID, [code, code])
    offsets, metrics = _send_three(cluster)
    assert offsets == [0, 1, 2]
    assert metrics["producer-id"] >= 0
    assert len(cluster.requests(INIT_PRODUCER_ID)) == 3


def test_cluster_authorization_failure_fails_the_waiting_records_then_the_producer_recovers(
        cluster: MockCluster) -> None:
    # First answer retriable, so that the records are queued before the second one is asked.
    cluster.push_request_errors(INIT_PRODUCER_ID, [COORDINATOR_LOAD_IN_PROGRESS, CLUSTER_AUTHORIZATION_FAILED])
    clock = MockClock(now_ms=5_000)
    producer = _producer(cluster, clock)
    try:
        waiting = [producer.send("t", b"w%d" % i, partition=0) for i in range(3)]
        _advance_until_done(clock, waiting)
        for future in waiting:
            with pytest.raises(ClusterAuthorizationFailedError):
                future.get(timeout=0)
        later = producer.send("t", b"later", partition=0)
        _advance_until_done(clock, [later])
        metadata = later.get(timeout=0)
        metrics = producer.metrics()
    finally:
        producer.close(0)
    assert metadata.offset == 0  # none of the failed records was written
    assert metrics["producer-id"] >= 0
    assert len(cluster.requests(INIT_PRODUCER_ID)) == 3


def test_an_unexpected_init_producer_id_error_is_fatal(cluster: MockCluster) -> None:
    cluster.push_request_errors(INIT_PRODUCER_ID, [COORDINATOR_LOAD_IN_PROGRESS, INVALID_REQUEST])
    clock = MockClock(now_ms=5_000)
    producer = _producer(cluster, clock)
    try:
        waiting = [producer.send("t", b"w%d" % i, partition=0) for i in range(3)]
        _advance_until_done(clock, waiting)
        for future in waiting:
            with pytest.raises(InvalidRequestError):
                future.get(timeout=0)
        with pytest.raises(InvalidRequestError, match="create a new producer"):
            producer.send("t", b"later", partition=0)
        with pytest.raises(InvalidRequestError, match="create a new producer"):
            producer.send_many("t", [b"later"], partitions=[0])
        clock.advance(10 * BACKOFF_MS)
        producer.flush(5)
    finally:
        producer.close(0)
    assert len(cluster.requests(INIT_PRODUCER_ID)) == 2


def test_a_broker_without_init_producer_id_fails_the_records_with_what_to_change(cluster: MockCluster) -> None:
    # The versions come from the broker's ApiVersions answer: an idempotent producer must not
    # send InitProducerId to a broker that does not list it, nor produce without sequences.
    cluster.set_api_version(INIT_PRODUCER_ID, -1, -1)
    clock = MockClock(now_ms=5_000)
    producer = _producer(cluster, clock)
    try:
        future = producer.send("t", b"x", partition=0)
        _advance_until_done(clock, [future])
        with pytest.raises(UnsupportedVersionError, match=(
                r"does not support InitProducerId, which the idempotent producer needs; "
                r"set enable\.idempotence=false to produce to it\b")):
            future.get(timeout=0)
    finally:
        producer.close(0)
    assert cluster.requests(INIT_PRODUCER_ID) == []


def test_init_producer_id_uses_a_version_the_broker_lists(cluster: MockCluster) -> None:
    # A broker that knows InitProducerId v0 only (Kafka 0.11-1.1) is asked with v0, which it
    # answers; the mock refuses a version outside what it listed.
    cluster.set_api_version(INIT_PRODUCER_ID, 0, 0)
    offsets, _metrics = _send_three(cluster)
    assert offsets == [0, 1, 2]
    assert len(cluster.requests(INIT_PRODUCER_ID)) == 1
