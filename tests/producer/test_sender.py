"""The Sender's response handling against librdkafka's mock cluster: retries, expiry,
idempotence epoch bumps, splits, fatal errors.

Errors are pushed with ``push_request_errors``: the mock answers with them before appending
anything, so a retried batch is never a duplicate and exactly-once checks stay valid.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from types import SimpleNamespace

import pytest

from samsa import KafkaProducer
from samsa.errors import (
    InvalidRecordError,
    KafkaTimeoutError,
    MessageTooLargeError,
    NetworkError,
    NotLeaderOrFollowerError,
    ProducerClosedError,
    TopicAuthorizationFailedError,
    UnsupportedVersionError,
)
from samsa.net.clock import MockClock
from samsa.net.cluster import Cluster, ClusterView, Node, PartitionInfo
from samsa.net.request import ClientRequest
from samsa.producer.accumulator import RecordAccumulator
from samsa.producer.batch import ProducerBatch, TopicPartition
from samsa.producer.buffer_pool import BufferPool
from samsa.producer.future import RecordFuture
from samsa.producer.metrics import ProducerMetrics
from samsa.producer.sender import Sender
from samsa.protocol import InitProducerIdRequest, ProduceResponse
from samsa.records.builder import RecordBatchBuilder
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


# --- unit tests: the Sender alone, against fakes and a MockClock --------------------------
#
# Each test drives run_once() by hand: what the accumulator hands out, what the "broker"
# answers and when, are all set by the test (Java's SenderTest does the same with MockClient
# and MockTime).

LEADER = Node(1, "broker-1.example", 9092)
TP0 = TopicPartition("t", 0)


def _cluster(leader: Node | None = LEADER) -> Cluster:
    return Cluster([LEADER], [PartitionInfo("t", 0, leader), PartitionInfo("t", 1, LEADER)])


class _Client:
    """NetworkClient stand-in: every node is ready; requests are kept for the test to answer."""

    def __init__(self) -> None:
        self.sent: list[ClientRequest] = []
        self.least_loaded_asked: list[int] = []
        self.least_loaded: Node | None = None
        self.authentication_failures = 0
        self.last_authentication_error: BaseException | None = None

    def ready(self, node: Node, now: int) -> bool:
        return True

    def connection_delay(self, node: Node, now: int) -> int:
        return 0

    def send(self, request: ClientRequest, now: int) -> None:
        self.sent.append(request)

    def poll(self, timeout: int, now: int) -> None:
        pass

    def in_flight_request_count(self) -> int:
        return 0

    def least_loaded_node(self, now: int) -> Node | None:
        self.least_loaded_asked.append(now)
        return self.least_loaded  # None: no broker known, InitProducerId backs off

    def pick_version(self, node: Node, api_key: int, low: int, high: int) -> int:
        return high

    def wakeup(self) -> None:
        pass

    def close(self) -> None:
        pass


class _Metadata:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def fetch(self) -> Cluster:
        return self.cluster

    def add(self, topic: str, now: int) -> None:
        pass

    def request_update(self) -> None:
        pass


class _Accumulator:
    """Hands out ``to_drain`` / ``expired`` once; records what the Sender gives back."""

    def __init__(self) -> None:
        self.to_drain: list[ProducerBatch] = []
        self.expired: list[ProducerBatch] = []
        self.deallocated: list[ProducerBatch] = []
        self.woken = 0  # memory waiters woken (deallocate, wake_memory_waiter)
        self.reenqueued: list[ProducerBatch] = []
        self.aborted: list[BaseException] = []
        self.unmuted: list[TopicPartition] = []
        self.split: list[ProducerBatch] = []

    def ready(self, view: object, now: int) -> SimpleNamespace:
        return SimpleNamespace(ready_nodes={LEADER.id} if self.to_drain else set(),
                               unknown_leader_topics=set(), next_ready_check_delay_ms=100)

    def update_node_latency_stats(self, node_id: int, now: int, ready: bool) -> None:
        pass

    def drain(self, view: object, nodes: object, max_size: int, now: int) -> dict[int, list[ProducerBatch]]:
        batches, self.to_drain = self.to_drain, []
        return {LEADER.id: batches}

    def mute_partition(self, tp: TopicPartition) -> None:
        pass

    def unmute_partition(self, tp: TopicPartition) -> None:
        self.unmuted.append(tp)

    def split_and_reenqueue(self, batch: ProducerBatch) -> None:
        self.split.append(batch)

    def reset_next_batch_expiry_time(self) -> None:
        pass

    def maybe_update_next_batch_expiry_time(self, batch: ProducerBatch) -> None:
        pass

    def expired_batches(self, now: int) -> list[ProducerBatch]:
        expired, self.expired = self.expired, []
        return expired

    def next_expiry_time_ms(self) -> None:
        return None

    def deallocate(self, batch: ProducerBatch, wake: bool = True) -> None:
        self.deallocated.append(batch)
        self.woken += wake

    def wake_memory_waiter(self) -> None:
        self.woken += 1

    def reenqueue(self, batch: ProducerBatch, now: int) -> None:
        batch.reenqueued(now)
        self.reenqueued.append(batch)

    def abort_incomplete_batches(self, error: BaseException) -> None:
        self.aborted.append(error)

    def has_undrained(self) -> bool:
        return False

    def close(self) -> None:
        pass


class _TransactionManager:
    """Records what the Sender tells the idempotence bookkeeping."""

    epoch_bump_required = False
    transactional_id = None

    def __init__(self, needs_producer_id: bool = False) -> None:
        self.needs_producer_id = needs_producer_id
        self.failed: list[tuple[ProducerBatch, BaseException, bool]] = []
        self.completed: list[ProducerBatch] = []
        self.removed: list[ProducerBatch] = []
        self.retriable: BaseException | None = None  # what can_retry() says yes to

    def needs_init_producer_id(self) -> bool:
        return self.needs_producer_id

    def is_transactional(self) -> bool:
        return False

    def handle_failed_batch(self, batch: ProducerBatch, error: BaseException, maybe_written: bool) -> None:
        self.failed.append((batch, error, maybe_written))

    def handle_completed_batch(self, batch: ProducerBatch) -> None:
        self.completed.append(batch)

    def can_retry(self, batch: ProducerBatch, error: BaseException) -> bool:
        return isinstance(batch, ProducerBatch) and error is self.retriable

    def remove_in_flight_batch(self, batch: ProducerBatch) -> None:
        self.removed.append(batch)

    def init_producer_id_request(self) -> InitProducerIdRequest:
        return InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000)


def _sender(clock: MockClock, tm: _TransactionManager | None = None, client_id: str = "unit-test",
            **config: int) -> Sender:
    settings = {"retries": 5, "delivery_timeout_ms": 1000, "retry_backoff_ms": 100,
                "retry_backoff_max_ms": 1000, **config}
    return Sender(_Client(), _Metadata(_cluster()), _Accumulator(), acks=-1, max_request_size=1 << 20,
                  request_timeout_ms=30_000, guarantee_message_order=True, transaction_manager=tm,
                  metrics=ProducerMetrics(clock), client_id=client_id, clock=clock, **settings)


def _batch(clock: MockClock, records: int = 1, tp: TopicPartition = TP0) -> tuple[ProducerBatch, list[RecordFuture]]:
    now = clock.milliseconds()
    batch = ProducerBatch(tp, RecordBatchBuilder(batch_size_limit=16_384), now)
    futures = []
    for i in range(records):
        future = batch.try_append(now, None, b"v%d" % i, None, None, now)
        assert future is not None
        futures.append(future)
    return batch, futures


def _send(sender: Sender, *batches: ProducerBatch) -> ClientRequest:
    sender.accumulator.to_drain = list(batches)
    sender.run_once()
    return sender.client.sent[-1]


def _answer(request: ClientRequest, error_code: int = 0,
            record_errors: Sequence[tuple[int, str]] = ()) -> None:
    part = ProduceResponse.PartitionProduceResponse(
        index=0, error_code=error_code, error_message=None, base_offset=7, log_append_time_ms=-1,
        record_errors=[ProduceResponse.BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m) for i, m in record_errors],
    )
    body = ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(name="t", partition_responses=[part])])
    assert request.callback is not None
    request.callback(SimpleNamespace(latency_ms=1, disconnected=False, timed_out=False, error=None, body=body))


def _error(future: RecordFuture) -> BaseException:
    error = future.exception(timeout=0)
    assert error is not None
    return error


@pytest.mark.parametrize(("attempts", "where"), [
    (0, "the batch was never sent"),
    (1, "the batch was retried 1 time(s)"),
    (2, "the batch was retried 2 time(s)"),
], ids=["never-sent", "retried-once", "retried-twice"])
def test_unit_queued_batch_expiry_error_says_how_long_where_and_what_to_do(attempts: int, where: str) -> None:
    clock = MockClock(now_ms=10_000)
    tm = _TransactionManager()
    sender = _sender(clock, tm)
    batch, futures = _batch(clock, records=2)
    for _ in range(attempts):
        batch.reenqueued(clock.milliseconds())
    clock.advance(1234)
    sender.accumulator.expired = [batch]
    sender.run_once()
    error = _error(futures[0])
    assert isinstance(error, KafkaTimeoutError)
    assert str(error) == (
        "Timed out after 1000 ms waiting for 2 record(s) for t-0 to be delivered: 1234 ms have passed "
        f"since the batch was created ({where}; delivery.timeout.ms=1000); check that the partition's "
        "leader (broker 1 at broker-1.example:9092) is reachable and that the topic exists, "
        "or raise delivery.timeout.ms."
    )
    # A batch retried before may have been written (Java's Sender.failBatch: maybe written
    # unless it was never sent).
    assert tm.failed == [(batch, error, attempts > 0)]
    assert sender.accumulator.deallocated == [batch]


def test_unit_in_flight_batch_expiry_error_names_an_unknown_leader() -> None:
    clock = MockClock(now_ms=10_000)
    tm = _TransactionManager()
    sender = _sender(clock, tm)
    batch, futures = _batch(clock)
    _send(sender, batch)
    sender.metadata.cluster = _cluster(leader=None)  # the leader went away meanwhile
    clock.advance(1000)
    sender.run_once()
    error = _error(futures[0])
    assert str(error) == (
        "Timed out after 1000 ms waiting for 1 record(s) for t-0 to be delivered: 1000 ms have passed "
        "since the batch was created (the request was sent but the broker has not answered; "
        "delivery.timeout.ms=1000); check that the partition's leader (unknown) is reachable and "
        "that the topic exists, or raise delivery.timeout.ms."
    )
    assert tm.failed == [(batch, error, True)]


def test_unit_expired_records_metric_adds_up_over_expiries() -> None:
    clock = MockClock(now_ms=10_000)
    sender = _sender(clock)
    first, _ = _batch(clock, records=1)
    second, _ = _batch(clock, records=2)
    clock.advance(1000)
    for batch in (first, second):
        sender.accumulator.expired = [batch]
        sender.run_once()
    assert sender.metrics.expired_records == 3
    assert sender.metrics.record_errors == 3


def test_unit_a_batch_queued_after_an_expiry_scan_expires_at_its_own_deadline() -> None:
    # The Sender skips its expiry scans until the earliest deadline the last scan saw, or that
    # scan's time + delivery.timeout.ms.  A batch queued meanwhile still fails at its own
    # deadline, and the poll wakes for it (its leader is unknown: nothing else would).
    clock = MockClock(now_ms=10_000)
    polls: list[int] = []
    client = _Client()
    client.poll = lambda timeout, now: polls.append(timeout)  # type: ignore[method-assign]
    accumulator = RecordAccumulator(16_384, BufferPool(1 << 20, 16_384), delivery_timeout_ms=1000,
                                    clock=clock)
    sender = Sender(client, _Metadata(_cluster(leader=None)), accumulator, acks=-1, retries=5,
                    max_request_size=1 << 20, request_timeout_ms=30_000, delivery_timeout_ms=1000,
                    retry_backoff_ms=100, retry_backoff_max_ms=1000, guarantee_message_order=True,
                    transaction_manager=None, metrics=ProducerMetrics(clock), client_id="unit-test",
                    clock=clock)
    sender.run_once()  # a scan of nothing
    clock.set_ms(10_600)
    view = ClusterView(_cluster(leader=None))
    future = accumulator.append("t", 0, 0, None, b"v", None, None, 0, False, 10_600, view).future
    for now in (10_600, 11_000, 11_599):
        clock.set_ms(now)
        sender.run_once()
        assert not future.done()
        assert polls[-1] <= 11_600 - now
    clock.set_ms(11_600)
    sender.run_once()
    assert isinstance(_error(future), KafkaTimeoutError)


def test_unit_retries_stop_once_the_batch_used_up_its_retries() -> None:
    clock = MockClock(now_ms=10_000)
    sender = _sender(clock, retries=1)
    batch, futures = _batch(clock)
    _answer(_send(sender, batch), NOT_LEADER_OR_FOLLOWER)
    assert sender.accumulator.reenqueued == [batch]
    assert not futures[0].done()
    _answer(_send(sender, batch), NOT_LEADER_OR_FOLLOWER)  # attempts == retries: no more
    assert sender.accumulator.reenqueued == [batch]
    assert isinstance(_error(futures[0]), NotLeaderOrFollowerError)
    assert sender.accumulator.deallocated == [batch]


def test_unit_a_retriable_error_at_the_delivery_timeout_fails_the_batch() -> None:
    clock = MockClock(now_ms=10_000)
    sender = _sender(clock, retries=100)
    batch, futures = _batch(clock)
    request = _send(sender, batch)
    clock.advance(1000)  # answered exactly at delivery.timeout.ms (Java's ProducerBatch.hasReachedDeliveryTimeout)
    _answer(request, NOT_LEADER_OR_FOLLOWER)
    assert sender.accumulator.reenqueued == []
    assert isinstance(_error(futures[0]), NotLeaderOrFollowerError)


def test_unit_per_record_errors_reach_each_record() -> None:
    # KIP-467: INVALID_RECORD names the bad records; the others of the batch were not written.
    clock = MockClock(now_ms=10_000)
    sender = _sender(clock)
    batch, futures = _batch(clock, records=3)
    _answer(_send(sender, batch), INVALID_RECORD, record_errors=[(1, "record 1 has no key")])
    errors = [_error(f) for f in futures]
    assert all(isinstance(e, InvalidRecordError) for e in errors)
    assert str(errors[1]) == "INVALID_RECORD (error code 87): record 1 has no key"
    other = ("INVALID_RECORD (error code 87): record not written because another record of its batch "
             "for t-0 was invalid")
    assert [str(errors[0]), str(errors[2])] == [other, other]


def test_unit_force_close_fails_in_flight_batches_as_maybe_written() -> None:
    clock = MockClock(now_ms=10_000)
    tm = _TransactionManager()
    sender = _sender(clock, tm)
    batch, futures = _batch(clock)
    _send(sender, batch)
    sender.force_close()
    sender.run()  # on this thread: the loop ends at once and aborts what is left
    error = _error(futures[0])
    assert isinstance(error, ProducerClosedError)
    # The request went out: the broker may have appended it (the idempotence bookkeeping
    # must then bump the epoch rather than reuse the sequence).
    assert tm.failed == [(batch, error, True)]
    assert sender.accumulator.aborted == [error]
    assert sender.accumulator.deallocated == [batch]


def test_unit_force_close_error_says_what_happened_and_why() -> None:
    clock = MockClock(now_ms=10_000)
    sender = _sender(clock, _TransactionManager())
    batch, futures = _batch(clock)
    _send(sender, batch)
    sender.force_close()
    sender.run()
    assert str(_error(futures[0])) == (
        "the producer was closed before these records were sent or acknowledged (close() timed "
        "out or was called with timeout 0); nothing more will be retried")


@pytest.mark.parametrize(("backoff_ms", "max_ms", "gaps"), [
    (100, 1000, [100, 200, 400, 800, 1000, 1000]),
    # The exponent stops at 20 (2**20 times retry.backoff.ms), whatever the maximum.
    (1, 2**40, [2 ** min(n, 20) for n in range(23)]),
], ids=["capped-by-max", "exponent-capped"])
def test_unit_init_producer_id_backs_off_exponentially(backoff_ms: int, max_ms: int, gaps: list[int]) -> None:
    # Java's Sender.maybeSendAndPollTransactionalRequest with no node to ask: back off
    # retry.backoff.ms, doubling up to retry.backoff.max.ms (KIP-580).
    clock = MockClock(now_ms=10_000)
    sender = _sender(clock, _TransactionManager(needs_producer_id=True),
                     retry_backoff_ms=backoff_ms, retry_backoff_max_ms=max_ms)
    asked = sender.client.least_loaded_asked
    sender.run_once()
    assert asked == [10_000]
    last = 10_000
    for gap in gaps:
        clock.set_ms(last + gap - 1)
        sender.run_once()
        assert asked[-1] == last, f"asked again before {gap} ms"
        clock.set_ms(last + gap)
        sender.run_once()
        assert asked[-1] == last + gap, f"not asked again after {gap} ms"
        last += gap


def test_unit_produce_request_carries_every_drained_batch_and_success_completes_them() -> None:
    clock = MockClock(now_ms=10_000)
    tm = _TransactionManager()
    sender = _sender(clock, tm)
    first, first_futures = _batch(clock, records=2)
    second, second_futures = _batch(clock, records=1, tp=TopicPartition("t", 1))
    request = _send(sender, first, second)
    assert (request.destination, request.expect_response, request.created_ms) == (LEADER.id, True, 10_000)
    assert (request.min_version, request.max_version) == (3, 12)  # v2 record batches; topic names
    body = request.request
    assert (body.transactional_id, body.acks, body.timeout_ms) == (None, -1, 30_000)
    assert [(t.name, [(p.index, p.records) for p in t.partition_data]) for t in body.topic_data] == [
        ("t", [(0, first.records()), (1, second.records())])]
    metrics = sender.metrics
    assert (metrics.requests_sent, metrics.batches_sent) == (1, 2)
    assert metrics.bytes_sent == len(first.records()) + len(second.records())
    parts = [ProduceResponse.PartitionProduceResponse(
        index=p, error_code=0, base_offset=offset, log_append_time_ms=1_700_000_000_123)
             for p, offset in ((0, 7), (1, 40))]
    assert request.callback is not None
    request.callback(SimpleNamespace(
        latency_ms=1, disconnected=False, timed_out=False, error=None,
        body=ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(name="t", partition_responses=parts)])))
    got = [(md.partition, md.offset, md.timestamp) for md in (f.get(timeout=0) for f in first_futures + second_futures)]
    assert got == [(0, 7, 1_700_000_000_123), (0, 8, 1_700_000_000_123), (1, 40, 1_700_000_000_123)]
    assert metrics.records_sent == 3
    assert tm.completed == [first, second]
    assert sender.accumulator.deallocated == [first, second]
    assert sender.accumulator.woken == 1  # once per response, not per batch


def test_unit_acks_0_records_count_as_sent_without_offsets() -> None:
    clock = MockClock(now_ms=10_000)
    sender = _sender(clock)
    sender.acks = 0
    batch, futures = _batch(clock)
    request = _send(sender, batch)
    assert request.expect_response is False
    assert request.request.acks == 0
    assert request.callback is not None
    request.callback(SimpleNamespace(latency_ms=0, disconnected=False, timed_out=False, error=None, body=None))
    metadata = futures[0].get(timeout=0)
    assert (metadata.offset, metadata.has_offset()) == (-1, False)
    assert metadata.timestamp == 10_000  # the record's own timestamp: no log append time
    assert sender.metrics.records_sent == 1


@pytest.mark.parametrize(("timed_out", "cause", "text"), [
    (True, None, "NETWORK_EXCEPTION (error code 13): node 1 did not answer within request.timeout.ms a produce request with 2 batch(es)"),
    (False, "connection reset", ("NETWORK_EXCEPTION (error code 13): node 1 was disconnected before it answered "
                                 "a produce request with 2 batch(es): connection reset")),
], ids=["timed-out", "disconnected"])
def test_unit_a_lost_connection_fails_every_batch_of_the_request(timed_out: bool, cause: str | None,
                                                                 text: str) -> None:
    clock = MockClock(now_ms=10_000)
    sender = _sender(clock, retries=0)
    first, first_futures = _batch(clock)
    second, second_futures = _batch(clock, tp=TopicPartition("t", 1))
    request = _send(sender, first, second)
    assert request.callback is not None
    request.callback(SimpleNamespace(latency_ms=1, disconnected=True, timed_out=timed_out,
                                     error=None if cause is None else RuntimeError(cause), body=None))
    errors = [_error(f) for f in first_futures + second_futures]
    assert all(isinstance(e, NetworkError) for e in errors)
    assert [str(e) for e in errors] == [text, text]
    assert sender.accumulator.deallocated == [first, second]


def test_unit_a_client_side_failure_fails_every_batch_with_it() -> None:
    clock = MockClock(now_ms=10_000)
    sender = _sender(clock, retries=0)
    first, first_futures = _batch(clock)
    second, second_futures = _batch(clock, tp=TopicPartition("t", 1))
    request = _send(sender, first, second)
    failure = UnsupportedVersionError("no usable Produce version")
    assert request.callback is not None
    request.callback(SimpleNamespace(latency_ms=1, disconnected=False, timed_out=False, error=failure, body=None))
    assert [_error(f) for f in first_futures + second_futures] == [failure, failure]


def test_unit_partition_errors_carry_the_broker_message_and_missing_partitions_fail() -> None:
    clock = MockClock(now_ms=10_000)
    sender = _sender(clock, retries=0)
    named, named_futures = _batch(clock)
    missing, missing_futures = _batch(clock, tp=TopicPartition("t", 1))
    plain, plain_futures = _batch(clock, tp=TopicPartition("u", 0))
    sender.metadata.cluster = Cluster([LEADER], [PartitionInfo("t", 0, LEADER), PartitionInfo("t", 1, LEADER),
                                                 PartitionInfo("u", 0, LEADER)])
    request = _send(sender, named, missing, plain)
    responses = [
        # A partition the request did not name is ignored; the ones after it still count.
        ProduceResponse.TopicProduceResponse(name="t", partition_responses=[
            ProduceResponse.PartitionProduceResponse(index=5, error_code=0, base_offset=0),
            ProduceResponse.PartitionProduceResponse(
                index=0, error_code=INVALID_RECORD, error_message="record too old", base_offset=-1)]),
        ProduceResponse.TopicProduceResponse(name="u", partition_responses=[
            ProduceResponse.PartitionProduceResponse(index=0, error_code=INVALID_RECORD, base_offset=-1)]),
    ]
    assert request.callback is not None
    request.callback(SimpleNamespace(latency_ms=1, disconnected=False, timed_out=False, error=None,
                                     body=ProduceResponse(responses=responses)))
    assert str(_error(named_futures[0])) == "INVALID_RECORD (error code 87): record too old (t-0)"
    assert str(_error(plain_futures[0])) == f"INVALID_RECORD (error code 87): {InvalidRecordError.message} (u-0)"
    error = _error(missing_futures[0])
    assert isinstance(error, NetworkError)
    assert str(error) == "NETWORK_EXCEPTION (error code 13): node 1 answered a produce request without a result for t-1"


def test_unit_message_too_large_splits_multi_record_batches_and_fails_single_records() -> None:
    clock = MockClock(now_ms=10_000)
    tm = _TransactionManager()
    sender = _sender(clock, tm)
    pairs = [_batch(clock, records=2), _batch(clock, records=2)]
    for batch, _ in pairs:
        _answer(_send(sender, batch), MESSAGE_TOO_LARGE)
    batches = [b for b, _ in pairs]
    assert sender.accumulator.split == batches
    assert sender.accumulator.deallocated == batches
    assert tm.removed == batches  # the split batches get new sequences
    assert sender.metrics.batch_splits == 2
    assert sender.accumulator.unmuted == [TP0, TP0]
    single, futures = _batch(clock, records=1)
    _answer(_send(sender, single), MESSAGE_TOO_LARGE)
    assert isinstance(_error(futures[0]), MessageTooLargeError)
    assert sender.accumulator.split == batches


def test_unit_the_idempotence_manager_may_allow_a_retry() -> None:
    clock = MockClock(now_ms=10_000)
    tm = _TransactionManager()
    sender = _sender(clock, tm)
    batch, futures = _batch(clock)
    tm.retriable = failure = UnsupportedVersionError("not retriable by itself")
    request = _send(sender, batch)
    assert request.callback is not None
    request.callback(SimpleNamespace(latency_ms=1, disconnected=False, timed_out=False, error=failure, body=None))
    assert sender.accumulator.reenqueued == [batch]
    assert not futures[0].done()


def test_unit_errors_that_are_not_kafka_errors_are_not_retried_and_are_recorded() -> None:
    clock = MockClock(now_ms=10_000)
    tm = _TransactionManager()
    sender = _sender(clock, tm)
    batch, futures = _batch(clock)
    failure = RuntimeError("no retriable attribute")
    request = _send(sender, batch)
    assert request.callback is not None
    request.callback(SimpleNamespace(latency_ms=1, disconnected=False, timed_out=False, error=failure, body=None))
    assert sender.accumulator.reenqueued == []
    assert _error(futures[0]) is failure
    assert sender.metrics.last_error is failure
    assert tm.failed == [(batch, failure, False)]


def test_unit_a_failed_request_may_have_been_written_a_rejected_batch_not() -> None:
    # Java's Sender.failBatch / TransactionManager.handleFailedBatch: a network error leaves
    # the batch possibly written; a broker's INVALID_RECORD means it was not.
    clock = MockClock(now_ms=10_000)
    tm = _TransactionManager()
    sender = _sender(clock, tm, retries=0)
    lost, _ = _batch(clock)
    request = _send(sender, lost)
    assert request.callback is not None
    request.callback(SimpleNamespace(latency_ms=1, disconnected=True, timed_out=True, error=None, body=None))
    rejected, _ = _batch(clock)
    _answer(_send(sender, rejected), INVALID_RECORD)
    assert [(b, maybe_written) for b, _, maybe_written in tm.failed] == [(lost, True), (rejected, False)]
    assert sender._in_flight_batches == {}


def test_unit_a_retriable_init_producer_id_error_is_asked_again_after_the_backoff() -> None:
    clock = MockClock(now_ms=10_000)
    sender = _sender(clock, _TransactionManager(needs_producer_id=True), retry_backoff_ms=100)
    sender.client.least_loaded = LEADER
    sender.run_once()
    request = sender.client.sent[-1]
    assert (request.destination, request.min_version, request.max_version) == (LEADER.id, 4, 4)
    clock.advance(5)
    assert request.callback is not None
    request.callback(SimpleNamespace(disconnected=False, error=None,
                                     body=SimpleNamespace(error_code=COORDINATOR_NOT_AVAILABLE)))
    clock.set_ms(10_104)
    sender.run_once()
    assert len(sender.client.sent) == 1
    clock.set_ms(10_105)
    sender.run_once()
    assert len(sender.client.sent) == 2


class _EpochBumpTransactionManager(_TransactionManager):
    """Has a producer id; asks for an epoch bump, which the Sender makes when it may."""

    epoch_bump_required = True

    def __init__(self) -> None:
        super().__init__(needs_producer_id=False)
        self.epoch_bumps = 0

    def needs_init_producer_id(self) -> bool:
        return self.epoch_bump_required

    def bump_idempotent_epoch_and_reset_id_if_needed(self) -> None:
        self.epoch_bump_required = False
        self.epoch_bumps += 1

    def has_producer_id(self) -> bool:
        return True


class _CountingClient(_Client):
    """Counts the requests sent and not answered yet as in flight."""

    def __init__(self) -> None:
        super().__init__()
        self.answered = 0

    def in_flight_request_count(self) -> int:
        return len(self.sent) - self.answered


def test_unit_the_epoch_bump_waits_for_the_request_of_an_expired_in_flight_batch() -> None:
    # An in-flight batch that expires leaves the Sender's books at once, but its request is still
    # at the broker: the old epoch's sequences are only settled once it is answered, so the bump
    # waits for the request as well as for the batches in flight.
    clock = MockClock(now_ms=10_000)
    tm = _EpochBumpTransactionManager()
    tm.epoch_bump_required = False
    sender = _sender(clock, tm)
    client = sender.client = _CountingClient()
    batch, futures = _batch(clock)
    request = _send(sender, batch)
    clock.advance(1000)
    tm.epoch_bump_required = True  # what handle_failed_batch asks for a batch maybe written
    sender.run_once()
    assert isinstance(_error(futures[0]), KafkaTimeoutError)
    assert sender._in_flight_batches == {}
    assert client.in_flight_request_count() == 1
    sender.run_once()
    assert tm.epoch_bumps == 0, "bumped while a request of the old epoch is in flight"
    client.answered += 1
    _answer(request)  # the late answer of the expired batch changes nothing
    sender.run_once()
    assert tm.epoch_bumps == 1


def test_unit_the_epoch_bump_waits_for_the_batches_in_flight() -> None:
    clock = MockClock(now_ms=10_000)
    tm = _EpochBumpTransactionManager()
    tm.epoch_bump_required = False
    sender = _sender(clock, tm)
    batch, futures = _batch(clock)
    request = _send(sender, batch)
    tm.epoch_bump_required = True  # e.g. another partition's batch failed for good
    sender.run_once()
    assert tm.epoch_bumps == 0, "bumped while a batch of the old epoch is in flight"
    _answer(request)
    assert futures[0].get(timeout=0).offset == 7
    sender.run_once()
    assert tm.epoch_bumps == 1


def test_unit_a_partition_missing_from_the_answer_is_retried_when_retries_are_left() -> None:
    # No result for a partition is a NetworkError (retriable): with retries left the batch goes
    # back to the queue, stamped with the time of the answer for its retry backoff.
    clock = MockClock(now_ms=10_000)
    sender = _sender(clock, retries=5)
    batch, futures = _batch(clock)
    request = _send(sender, batch)
    clock.advance(7)
    assert request.callback is not None
    request.callback(SimpleNamespace(latency_ms=7, disconnected=False, timed_out=False, error=None,
                                     body=ProduceResponse(responses=[])))
    assert sender.accumulator.reenqueued == [batch]
    assert (batch.attempts, batch.last_attempt_ms) == (1, 10_007)
    assert not futures[0].done()
    assert sender.metrics.record_retries == 1


class _PollRecordingClient(_Client):
    def __init__(self) -> None:
        super().__init__()
        self.polls: list[tuple[int, int]] = []

    def poll(self, timeout: int, now: int) -> None:
        self.polls.append((timeout, now))


@pytest.mark.parametrize(("backoff_ms", "expected"), [(100, 100), (0, 1)])
def test_unit_a_failed_producer_polls_at_the_retry_backoff(backoff_ms: int, expected: int) -> None:
    # After a fatal error each iteration fails what was appended meanwhile, then waits
    # retry.backoff.ms (at least 1 ms: never a busy loop, never a wait for a wakeup only).
    clock = MockClock(now_ms=10_000)
    sender = _sender(clock, retry_backoff_ms=backoff_ms)
    client = sender.client = _PollRecordingClient()
    sender.fatal_error = UnsupportedVersionError("fatal")
    sender.run_once()
    assert client.polls == [(expected, 10_000)]
    assert sender.accumulator.aborted == [sender.fatal_error]


@pytest.mark.parametrize(("ready_check_ms", "backoff_ms", "in_flight", "next_attempt_in_ms", "expected"), [
    (500, 50, False, 300, 50),    # retry.backoff.ms is the longest wait
    (100, 500, False, 300, 100),  # the accumulator's next ready check comes first
    (500, 500, False, 300, 300),  # the next InitProducerId attempt comes first
    (500, 500, False, 1, 1),
    (500, 200, True, 0, 200),     # an attempt in flight: its answer wakes the poll, no spinning
    (500, 0, True, -5000, 1),
], ids=["backoff", "ready-check", "next-attempt", "next-attempt-in-1-ms", "in-flight", "in-flight-no-backoff"])
def test_unit_waiting_for_a_producer_id_sends_no_batch_and_polls_until_something_is_due(
        ready_check_ms: int, backoff_ms: int, in_flight: bool, next_attempt_in_ms: int, expected: int) -> None:
    clock = MockClock(now_ms=10_000)
    sender = _sender(clock, _TransactionManager(needs_producer_id=True), retry_backoff_ms=backoff_ms)
    client = sender.client = _PollRecordingClient()
    client.least_loaded = LEADER
    batch, _futures = _batch(clock)
    sender.accumulator.to_drain = [batch]
    sender.accumulator.ready = lambda view, now: SimpleNamespace(  # type: ignore[method-assign]
        ready_nodes={LEADER.id}, unknown_leader_topics=set(), next_ready_check_delay_ms=ready_check_ms)
    sender._init_pid_in_flight = in_flight
    sender._init_pid_next_ms = 10_000 + next_attempt_in_ms
    sender.run_once()
    assert client.sent == []  # no batch goes out without a producer id
    assert sender.accumulator.to_drain == [batch]
    assert client.polls == [(expected, 10_000)]


def test_unit_the_network_thread_is_named_for_the_client_and_not_a_daemon() -> None:
    # Java names it "kafka-producer-network-thread | <client.id>" for thread dumps; samsa's is
    # not a daemon even when the producer is made in a daemon thread, so that records queued
    # at interpreter exit still go out (KafkaProducer closes open producers at exit).
    made: list[Sender] = []
    maker = threading.Thread(target=lambda: made.append(_sender(MockClock(), client_id="orders-writer")),
                             daemon=True)
    maker.start()
    maker.join()
    [sender] = made
    assert sender.name == "samsa-producer-network-thread | orders-writer"
    assert sender.daemon is False


class _LatencyRecordingAccumulator(_Accumulator):
    def __init__(self) -> None:
        super().__init__()
        self.latency_stats: list[tuple[int, int, bool]] = []
        self.ready_nodes: set[int] = set()
        self.unknown_leader_topics: set[str] = set()

    def ready(self, view: object, now: int) -> SimpleNamespace:
        return SimpleNamespace(ready_nodes=self.ready_nodes, unknown_leader_topics=self.unknown_leader_topics,
                               next_ready_check_delay_ms=1000)

    def update_node_latency_stats(self, node_id: int, now: int, ready: bool) -> None:
        self.latency_stats.append((node_id, now, ready))


class _NodesClient(_PollRecordingClient):
    """Node 2 is still connecting, 250 ms from being tried again."""

    def __init__(self) -> None:
        super().__init__()
        self.delays_asked: list[tuple[int, int]] = []

    def ready(self, node: Node, now: int) -> bool:
        return node.id != 2

    def connection_delay(self, node: Node, now: int) -> int:
        self.delays_asked.append((node.id, now))
        return 250


class _RecordingMetadata(_Metadata):
    def __init__(self, cluster: Cluster) -> None:
        super().__init__(cluster)
        self.added: list[tuple[str, int]] = []
        self.updates_requested = 0

    def add(self, topic: str, now: int) -> None:
        self.added.append((topic, now))

    def request_update(self) -> None:
        self.updates_requested += 1


def test_unit_ready_nodes_feed_the_partitioner_latency_stats_and_unknown_leaders_ask_for_metadata() -> None:
    # Java's Sender.sendProducerData: each node with data ready reports whether it could take
    # it (KIP-794's partitioner.availability.timeout.ms counts from there); a node not yet
    # connected bounds the poll by its connection delay; a ready node the metadata no longer
    # knows is skipped, not the end of the loop; a topic without a known leader is added to the
    # metadata (with the time, for its idle expiry) and an update is asked for.
    clock = MockClock(now_ms=10_000)
    sender = _sender(clock)
    second = Node(2, "broker-2.example", 9092)
    sender.metadata = _RecordingMetadata(Cluster([LEADER, second], [PartitionInfo("t", 0, LEADER),
                                                                   PartitionInfo("t", 1, second)]))
    accumulator = sender.accumulator = _LatencyRecordingAccumulator()
    client = sender.client = _NodesClient()
    batch, _futures = _batch(clock)
    accumulator.to_drain = [batch]
    accumulator.ready_nodes = {0, LEADER.id, second.id}  # node 0: gone from the metadata
    accumulator.unknown_leader_topics = {"orphan"}
    assert sender.send_producer_data(10_000) == 0  # a node was drained: more may be ready
    assert accumulator.latency_stats == [(LEADER.id, 10_000, True), (second.id, 10_000, False)]
    assert client.delays_asked == [(second.id, 10_000)]
    assert [request.destination for request in client.sent] == [LEADER.id]
    assert sender.metadata.added == [("orphan", 10_000)]
    assert sender.metadata.updates_requested == 1
    accumulator.ready_nodes = {second.id}
    assert sender.send_producer_data(10_000) == 250  # nothing drained: wait for the connection


@pytest.mark.parametrize(("expiry_in_ms", "expected"), [(40, 40), (0, 0), (-5, 0)],
                         ids=["later", "now", "past"])
def test_unit_the_poll_wakes_for_the_next_batch_expiry(expiry_in_ms: int, expected: int) -> None:
    # delivery.timeout.ms is enforced by the Sender's own wake-up: a batch due to expire now
    # (or overdue) makes the poll return at once, not a millisecond later.
    clock = MockClock(now_ms=10_000)
    sender = _sender(clock)
    accumulator = sender.accumulator = _LatencyRecordingAccumulator()
    accumulator.next_expiry_time_ms = lambda: 10_000 + expiry_in_ms  # type: ignore[method-assign]
    assert sender.send_producer_data(10_000) == expected
