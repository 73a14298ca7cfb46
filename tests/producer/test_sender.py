"""The Sender's response handling against librdkafka's mock cluster: retries, expiry,
idempotence epoch bumps, splits, fatal errors.

Errors are pushed with ``push_request_errors``: the mock answers with them before appending
anything, so a retried batch is never a duplicate and exactly-once checks stay valid.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from samsa import KafkaProducer
from samsa.errors import (
    InvalidRecordError,
    KafkaTimeoutError,
    TopicAuthorizationFailedError,
)
from tests.support.mock_cluster import MockCluster

from .test_producer_mock import (
    DEADLINE_S,
    FAST,
    check_exactly_once_in_order,
    make_records,
    read_back,
    send_all,
)

PRODUCE = 0
INIT_PRODUCER_ID = 22
NOT_LEADER_OR_FOLLOWER = 6
MESSAGE_TOO_LARGE = 10
COORDINATOR_NOT_AVAILABLE = 15
TOPIC_AUTHORIZATION_FAILED = 29
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
DUPLICATE_SEQUENCE_NUMBER = 46
UNKNOWN_PRODUCER_ID = 59
INVALID_RECORD = 87


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    with MockCluster(3, topics={"t": 4}) as mock:
        yield mock


def producer_for(cluster: MockCluster, **extra: object) -> KafkaProducer:
    config: dict[str, object] = {"bootstrap.servers": cluster.bootstrap_servers, **FAST}
    config.update({k.replace("_", "."): v for k, v in extra.items()})
    return KafkaProducer(config)


def warm(producer: KafkaProducer) -> None:
    """Metadata, connections and producer id in place before errors are pushed."""
    producer.send("t", b"warm-up", partition=0).get(timeout=DEADLINE_S)


@pytest.mark.parametrize("code", [OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID])
def test_sequence_errors_bump_the_epoch_and_deliver_everything_once(cluster: MockCluster, code: int) -> None:
    records = make_records(2000)
    with producer_for(cluster) as producer:
        warm(producer)
        before = producer.metrics()
        id_before = (before["producer-id"], before["producer-epoch"])
        cluster.start_request_tracking()
        cluster.push_request_errors(PRODUCE, [code])
        errors = send_all(producer, "t", records)
        producer.flush(DEADLINE_S)
        metrics = producer.metrics()
        init_requests = cluster.requests(INIT_PRODUCER_ID)
    assert not errors, errors[:3]
    # As Java's idempotent producer (bumpIdempotentEpochAndResetIdIfNeeded): the same id with
    # the next epoch, bumped locally without an InitProducerId request.
    after = (metrics["producer-id"], metrics["producer-epoch"])
    assert after == (id_before[0], id_before[1] + 1)
    assert metrics["producer-epoch-bump-total"] == 1
    assert init_requests == []
    got = read_back(cluster.bootstrap_servers, "t", 4, len(records) + 1)
    got[0] = [kv for kv in got[0] if kv[1] != b"warm-up"]
    check_exactly_once_in_order(got, records, 4)


def test_duplicate_sequence_counts_as_success(cluster: MockCluster) -> None:
    with producer_for(cluster) as producer:
        warm(producer)
        cluster.push_request_errors(PRODUCE, [DUPLICATE_SEQUENCE_NUMBER])
        metadata = producer.send("t", b"dup", partition=1).get(timeout=DEADLINE_S)
    assert metadata.partition == 1


def test_retriable_errors_are_retried_with_backoff(cluster: MockCluster) -> None:
    with producer_for(cluster) as producer:
        warm(producer)
        cluster.push_request_errors(PRODUCE, [NOT_LEADER_OR_FOLLOWER] * 4)
        metadata = producer.send("t", b"retried", partition=2).get(timeout=DEADLINE_S)
        metrics = producer.metrics()
    assert metadata.offset == 0
    assert metrics["record-retry-total"] == 4


def test_retries_stop_at_delivery_timeout_with_a_clear_error(cluster: MockCluster) -> None:
    with producer_for(cluster, delivery_timeout_ms=400, request_timeout_ms=300, linger_ms=0) as producer:
        warm(producer)
        cluster.push_request_errors(PRODUCE, [NOT_LEADER_OR_FOLLOWER] * 100_000)
        future = producer.send("t", b"late", partition=3)
        with pytest.raises(KafkaTimeoutError) as info:
            future.get(timeout=DEADLINE_S)
        cluster.clear_request_errors(PRODUCE)
        # The producer keeps working after the failure (sequences stay consistent).
        assert producer.send("t", b"next", partition=3).get(timeout=DEADLINE_S).offset >= 0
    text = str(info.value)
    assert "t-3" in text and "delivery.timeout.ms=400" in text and "retried" in text


def test_queued_batches_expire_when_no_broker_answers(cluster: MockCluster) -> None:
    with producer_for(cluster, delivery_timeout_ms=300, request_timeout_ms=250, linger_ms=0) as producer:
        warm(producer)
        for broker in (1, 2, 3):
            cluster.broker_down(broker)
        futures = [producer.send("t", b"%d" % i, partition=1) for i in range(10)]
        for future in futures:
            with pytest.raises(KafkaTimeoutError) as info:
                future.get(timeout=DEADLINE_S)
        text = str(info.value)
        assert "t-1" in text and "delivery.timeout.ms=300" in text and "reachable" in text
        for broker in (1, 2, 3):
            cluster.broker_up(broker)
        producer.close(0)


def test_in_flight_batch_expires_at_delivery_timeout_when_the_broker_never_answers(cluster: MockCluster) -> None:
    # Java's Sender.getExpiredInflightBatches (KIP-91): delivery.timeout.ms bounds a batch
    # whose request is sent and unanswered too, not only batches still queued.  The first
    # attempt is answered late with a retriable error, so the retry goes out so late that its
    # request.timeout.ms ends after delivery.timeout.ms: only in-flight expiry fails the batch
    # with the delivery-timeout error; without it the retry's request timeout would.  Nothing
    # else is due at the delivery deadline, so this also checks that the Sender wakes for it.
    cluster.set_partition_leader("t", 0, 1)
    with producer_for(cluster, delivery_timeout_ms=1500, request_timeout_ms=1000, linger_ms=0) as producer:
        warm(producer)
        cluster.broker_push_request_error_rtts(1, PRODUCE, [(NOT_LEADER_OR_FOLLOWER, 900), (0, 30_000)])
        future = producer.send("t", b"unanswered", partition=0)
        with pytest.raises(KafkaTimeoutError) as info:
            future.get(timeout=DEADLINE_S)
        producer.flush(DEADLINE_S)  # nothing left unresolved (the request itself is abandoned)
        metrics = producer.metrics()
        producer.close(0)
    text = str(info.value)
    assert "t-0" in text and "delivery.timeout.ms=1500" in text
    assert "the request was sent but the broker has not answered" in text
    assert info.value.timeout_ms == 1500
    assert metrics["record-retry-total"] == 1
    assert metrics["record-error-total"] == 1


def test_non_retriable_errors_fail_the_batch_only(cluster: MockCluster) -> None:
    with producer_for(cluster) as producer:
        warm(producer)
        cluster.push_request_errors(PRODUCE, [INVALID_RECORD])
        with pytest.raises(InvalidRecordError):
            producer.send("t", b"bad", partition=0).get(timeout=DEADLINE_S)
        # Next batch on the same partition: the failed batch's sequence was given back.
        md = producer.send("t", b"good", partition=0).get(timeout=DEADLINE_S)
        metrics = producer.metrics()
    assert md.offset == 1  # warm-up at 0, the failed record was never written
    assert metrics["record-error-total"] == 1
    assert metrics["producer-epoch-bump-total"] == 0


def test_topic_authorization_failure_reaches_the_callback(cluster: MockCluster) -> None:
    with producer_for(cluster) as producer:
        warm(producer)
        cluster.push_request_errors(PRODUCE, [TOPIC_AUTHORIZATION_FAILED])
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send("t", b"x", partition=2).get(timeout=DEADLINE_S)


def test_message_too_large_splits_the_batch_and_retries(cluster: MockCluster) -> None:
    records = make_records(400, keyed_every=10**9, pad=50)
    with producer_for(cluster, linger_ms=200, batch_size=64 * 1024) as producer:
        warm(producer)
        cluster.push_request_errors(PRODUCE, [MESSAGE_TOO_LARGE])
        futures = [producer.send("t", v, key=k, partition=1) for k, v in records]
        offsets = [f.get(timeout=DEADLINE_S).offset for f in futures]
        metrics = producer.metrics()
    assert metrics["batch-split-total"] == 1
    assert offsets == list(range(offsets[0], offsets[0] + len(records)))
    got = read_back(cluster.bootstrap_servers, "t", 4, len(records) + 1)
    values = [v for _, v in got[1]]
    assert values == [v for _, v in records]


def test_init_producer_id_errors_are_retried(cluster: MockCluster) -> None:
    cluster.start_request_tracking()
    cluster.push_request_errors(INIT_PRODUCER_ID, [COORDINATOR_NOT_AVAILABLE, COORDINATOR_NOT_AVAILABLE])
    with producer_for(cluster) as producer:
        md = producer.send("t", b"after retries", partition=0).get(timeout=DEADLINE_S)
        assert producer.metrics()["producer-id"] >= 0
    assert md.offset == 0
    assert len(cluster.requests(INIT_PRODUCER_ID)) == 3


def test_max_in_flight_one_without_idempotence_keeps_order_through_retries(cluster: MockCluster) -> None:
    records = make_records(3000)
    with producer_for(cluster, enable_idempotence=False, acks="1",
                      max_in_flight_requests_per_connection=1, batch_size=2048) as producer:
        warm(producer)
        cluster.push_request_errors(PRODUCE, [NOT_LEADER_OR_FOLLOWER, 0, NOT_LEADER_OR_FOLLOWER, 0, 0,
                                              NOT_LEADER_OR_FOLLOWER])
        errors = send_all(producer, "t", records)
        producer.flush(DEADLINE_S)
        assert "producer-id" not in producer.metrics()
    assert not errors
    got = read_back(cluster.bootstrap_servers, "t", 4, len(records) + 1)
    got[0] = [kv for kv in got[0] if kv[1] != b"warm-up"]
    check_exactly_once_in_order(got, records, 4)
