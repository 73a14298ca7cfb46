"""The transactional producer against librdkafka's mock cluster, which implements a
transaction coordinator (FindCoordinator key type 1, InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, TxnOffsetCommit, EndTxn writing control batches since librdkafka 2.15).

The mock's quirks (see the module docstring of tests/support/mock_cluster.py and the mock's
handlers): it never fences, ignores isolation_level (aborted records would be delivered) and
leaves the CRC of its control batches at 0, so records are read back with check.crcs off and
the tests below only abort records that were never sent.  Errors are injected with
``push_request_errors`` (answered before the mock acts) and delays with
``broker_push_request_error_rtts``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer
from confluent_kafka import TopicPartition as CKTopicPartition

from samsa import KafkaProducer
from samsa.errors import (
    IllegalStateError,
    KafkaTimeoutError,
    ProducerFencedError,
    TransactionAbortableError,
    TransactionAbortedError,
    UnknownProducerIdError,
)
from samsa.producer.txn_state import TxnState
from samsa.protocol.api_keys import ApiKey
from tests.support.mock_cluster import MockCluster

from .test_producer_mock import DEADLINE_S, FAST

TOPIC = "txn"
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
CONCURRENT_TRANSACTIONS = 51
UNKNOWN_PRODUCER_ID = 59
PRODUCER_FENCED = 90
TRANSACTION_ABORTABLE = 120


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    with MockCluster(3, topics={TOPIC: 2}, track_requests=True) as mock:
        yield mock


def transactional(cluster: MockCluster, txn_id: str = "tx-1", **extra: object) -> KafkaProducer:
    config: dict[str, object] = {"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": txn_id,
                                 **FAST}
    config.update({k.replace("_", "."): v for k, v in extra.items()})
    return KafkaProducer(config)


def read_values(cluster: MockCluster, expected: int) -> list[bytes]:
    """Every record value of TOPIC (control batches are never handed out)."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "readback",
                         "enable.auto.commit": False, "check.crcs": False})
    try:
        consumer.assign([CKTopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(2)])
        values: list[bytes] = []
        deadline = time.monotonic() + DEADLINE_S
        idle = 0
        while time.monotonic() < deadline and (len(values) < expected or idle < 2):
            messages = consumer.consume(1000, timeout=0.5)
            idle = 0 if messages else idle + 1
            for m in messages:
                if m.error() is None:
                    values.append(m.value())
        return values
    finally:
        consumer.close()


def api_calls(cluster: MockCluster, key: ApiKey) -> int:
    return len(cluster.requests(int(key)))


def commit_some(producer: KafkaProducer, prefix: bytes, count: int = 6) -> None:
    producer.begin_transaction()
    futures = [producer.send(TOPIC, prefix + b"%d" % i, partition=i % 2) for i in range(count)]
    producer.commit_transaction(DEADLINE_S)
    # After a commit every record was acknowledged (Java's commitTransaction contract).
    assert all(f.done() and f.exception(0) is None for f in futures)


def test_commit_writes_the_records_after_adding_their_partitions(cluster: MockCluster) -> None:
    with transactional(cluster) as producer:
        producer.init_transactions(DEADLINE_S)
        commit_some(producer, b"c")
    assert sorted(read_values(cluster, 6)) == [b"c%d" % i for i in range(6)]
    requests = cluster.requests()
    keys = [r.api_key for r in requests]
    find = [r for r in requests if r.api_key == ApiKey.FIND_COORDINATOR]
    assert find, "the transaction coordinator was looked up"
    # AddPartitionsToTxn (one per Sender loop that saw new partitions) before the first
    # Produce; EndTxn after the last.
    assert 1 <= keys.count(ApiKey.ADD_PARTITIONS_TO_TXN) <= 2
    assert keys.index(ApiKey.ADD_PARTITIONS_TO_TXN) < keys.index(ApiKey.PRODUCE)
    last_produce = len(keys) - 1 - keys[::-1].index(ApiKey.PRODUCE)
    assert keys.index(ApiKey.END_TXN) > last_produce


def test_abort_fails_unsent_records_with_transaction_aborted(cluster: MockCluster) -> None:
    with transactional(cluster, linger_ms=60_000) as producer:
        producer.init_transactions(DEADLINE_S)
        producer.begin_transaction()
        futures = [producer.send(TOPIC, b"a%d" % i, partition=i % 2) for i in range(4)]
        producer.abort_transaction(DEADLINE_S)
        for future in futures:
            error = future.exception(DEADLINE_S)
            assert isinstance(error, TransactionAbortedError)
            assert "aborted" in str(error)
        # The producer goes on: the next transaction commits.
        commit_some(producer, b"c", 2)
    assert sorted(read_values(cluster, 2)) == [b"c0", b"c1"]


def test_an_empty_transaction_sends_no_end_txn(cluster: MockCluster) -> None:
    with transactional(cluster) as producer:
        producer.init_transactions(DEADLINE_S)
        producer.begin_transaction()
        producer.commit_transaction(DEADLINE_S)
        producer.begin_transaction()
        producer.abort_transaction(DEADLINE_S)
    assert api_calls(cluster, ApiKey.END_TXN) == 0
    assert api_calls(cluster, ApiKey.ADD_PARTITIONS_TO_TXN) == 0


def test_send_offsets_goes_to_the_transaction_then_the_group_coordinator(cluster: MockCluster) -> None:
    with transactional(cluster) as producer:
        producer.init_transactions(DEADLINE_S)
        producer.begin_transaction()
        producer.send(TOPIC, b"out", partition=0)
        producer.send_offsets_to_transaction({(TOPIC, 0): 42}, "group-1", DEADLINE_S)
        producer.commit_transaction(DEADLINE_S)
    keys = [r.api_key for r in cluster.requests()]
    assert keys.index(ApiKey.ADD_OFFSETS_TO_TXN) < keys.index(ApiKey.TXN_OFFSET_COMMIT) < keys.index(ApiKey.END_TXN)


def test_the_coordinator_moving_is_followed(cluster: MockCluster) -> None:
    with transactional(cluster) as producer:
        producer.init_transactions(DEADLINE_S)
        commit_some(producer, b"a")
        before = api_calls(cluster, ApiKey.FIND_COORDINATOR)
        first = cluster.requests(int(ApiKey.END_TXN))[-1].broker_id
        cluster.set_coordinator("transaction", "tx-1", first % 3 + 1)
        # The old coordinator answers NOT_COORDINATOR; the producer looks it up again.
        commit_some(producer, b"b")
        assert api_calls(cluster, ApiKey.FIND_COORDINATOR) > before
        assert cluster.requests(int(ApiKey.END_TXN))[-1].broker_id == first % 3 + 1
    assert sorted(read_values(cluster, 12)) == sorted([b"a%d" % i for i in range(6)] + [b"b%d" % i for i in range(6)])


@pytest.mark.parametrize("api", [ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.END_TXN])
@pytest.mark.parametrize("code", [CONCURRENT_TRANSACTIONS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR])
def test_retriable_errors_are_retried_and_the_transaction_commits(cluster: MockCluster, api: ApiKey,
                                                                  code: int) -> None:
    with transactional(cluster) as producer:
        producer.init_transactions(DEADLINE_S)
        cluster.push_request_errors(int(api), [code, code])
        commit_some(producer, b"r")
        # Two failed, then one (two when the partitions joined in two rounds) went through.
        assert api_calls(cluster, api) in ((3,) if api is ApiKey.END_TXN else (3, 4))
    assert sorted(read_values(cluster, 6)) == [b"r%d" % i for i in range(6)]


def test_an_abortable_error_on_add_partitions_leaves_the_producer_usable_after_abort(cluster: MockCluster) -> None:
    with transactional(cluster) as producer:
        producer.init_transactions(DEADLINE_S)
        cluster.push_request_errors(int(ApiKey.ADD_PARTITIONS_TO_TXN), [TRANSACTION_ABORTABLE])
        producer.begin_transaction()
        future = producer.send(TOPIC, b"lost", partition=0)
        assert isinstance(future.exception(DEADLINE_S), TransactionAbortableError)
        with pytest.raises(TransactionAbortableError, match="abort_transaction"):
            producer.send(TOPIC, b"refused", partition=0)
        with pytest.raises(TransactionAbortableError):
            producer.commit_transaction(DEADLINE_S)
        producer.abort_transaction(DEADLINE_S)
        commit_some(producer, b"ok", 2)
    assert sorted(read_values(cluster, 2)) == [b"ok0", b"ok1"]


def test_unknown_producer_id_is_abortable_and_bumps_the_epoch_after_the_abort(cluster: MockCluster) -> None:
    with transactional(cluster) as producer:
        producer.init_transactions(DEADLINE_S)
        pid = producer.metrics()["producer-id"]
        assert producer.metrics()["producer-epoch"] == 0
        cluster.push_request_errors(int(ApiKey.ADD_PARTITIONS_TO_TXN), [UNKNOWN_PRODUCER_ID])
        producer.begin_transaction()
        future = producer.send(TOPIC, b"lost", partition=0)
        assert isinstance(future.exception(DEADLINE_S), UnknownProducerIdError)
        producer.abort_transaction(DEADLINE_S)
        # KIP-360: InitProducerId with the current id and epoch -> same id, next epoch.
        assert (producer.metrics()["producer-id"], producer.metrics()["producer-epoch"]) == (pid, 1)
        assert api_calls(cluster, ApiKey.INIT_PRODUCER_ID) == 2
        commit_some(producer, b"ok", 2)
    assert sorted(read_values(cluster, 2)) == [b"ok0", b"ok1"]


def test_an_abortable_error_on_commit_is_raised_and_abort_recovers(cluster: MockCluster) -> None:
    with transactional(cluster) as producer:
        producer.init_transactions(DEADLINE_S)
        cluster.push_request_errors(int(ApiKey.END_TXN), [TRANSACTION_ABORTABLE])
        producer.begin_transaction()
        producer.send(TOPIC, b"x", partition=0)
        with pytest.raises(TransactionAbortableError, match="committing the transaction"):
            producer.commit_transaction(DEADLINE_S)
        producer.abort_transaction(DEADLINE_S)
        commit_some(producer, b"ok", 2)


def test_fencing_on_end_txn_is_fatal_for_every_later_call(cluster: MockCluster) -> None:
    with transactional(cluster, linger_ms=60_000) as producer:
        producer.init_transactions(DEADLINE_S)
        producer.begin_transaction()
        producer.send(TOPIC, b"x", partition=0)
        producer.flush(DEADLINE_S)
        cluster.push_request_errors(int(ApiKey.END_TXN), [PRODUCER_FENCED])
        with pytest.raises(ProducerFencedError, match="newer producer"):
            producer.commit_transaction(DEADLINE_S)
        with pytest.raises(ProducerFencedError, match="close it"):
            producer.send(TOPIC, b"y", partition=0)
        with pytest.raises(ProducerFencedError):
            producer.begin_transaction()
        with pytest.raises(ProducerFencedError):
            producer.abort_transaction(DEADLINE_S)


def test_a_timed_out_commit_keeps_its_result_and_only_commit_resumes_it(cluster: MockCluster) -> None:
    with transactional(cluster) as producer:
        producer.init_transactions(DEADLINE_S)
        producer.begin_transaction()
        producer.send(TOPIC, b"slow", partition=0).get(DEADLINE_S)
        for broker in cluster.broker_ids:
            cluster.broker_push_request_error_rtts(broker, int(ApiKey.END_TXN), [(0, 1500)])
        with pytest.raises(KafkaTimeoutError, match=r"commit_transaction\(\): EndTxn\(commit\) sent to the "
                                                    r"transaction coordinator node \d \(127\.0\.0\.1:\d+\)"):
            producer.commit_transaction(0.2)
        with pytest.raises(IllegalStateError, match=r"previous commit_transaction\(\) timed out"):
            producer.abort_transaction(DEADLINE_S)
        producer.commit_transaction(DEADLINE_S)  # resumes the same commit
        assert api_calls(cluster, ApiKey.END_TXN) == 1
        producer.begin_transaction()  # the commit's outcome was seen: the next one may start


def test_close_aborts_an_open_transaction(cluster: MockCluster) -> None:
    producer = transactional(cluster, linger_ms=60_000)
    producer.init_transactions(DEADLINE_S)
    producer.begin_transaction()
    sent = producer.send(TOPIC, b"sent", partition=0)
    producer.flush(DEADLINE_S)
    unsent = producer.send(TOPIC, b"unsent", partition=1)
    producer.close(DEADLINE_S)
    assert sent.exception(0) is None
    # close() sends what is queued, then aborts (Java's graceful close).
    assert unsent.exception(0) is None or isinstance(unsent.exception(0), TransactionAbortedError)
    assert api_calls(cluster, ApiKey.END_TXN) == 1
    assert producer._transaction_manager is not None
    assert producer._transaction_manager.state is TxnState.READY


def test_close_never_waits_past_its_timeout_when_the_coordinator_is_gone(cluster: MockCluster) -> None:
    producer = transactional(cluster, linger_ms=60_000)
    producer.init_transactions(DEADLINE_S)
    producer.begin_transaction()
    future = producer.send(TOPIC, b"x", partition=0)
    producer.flush(DEADLINE_S)
    for broker in cluster.broker_ids:
        cluster.broker_push_request_error_rtts(broker, int(ApiKey.END_TXN), [(0, 30_000)])
    producer.close(0.5)
    assert future.done()
    assert not producer._sender.is_alive()


def test_calls_out_of_order_say_what_to_call(cluster: MockCluster) -> None:
    with transactional(cluster) as producer:
        with pytest.raises(IllegalStateError, match=r"init_transactions\(\) first"):
            producer.send(TOPIC, b"x")
        with pytest.raises(IllegalStateError, match=r"UNINITIALIZED.*init_transactions\(\) first"):
            producer.begin_transaction()
        producer.init_transactions(DEADLINE_S)
        with pytest.raises(IllegalStateError, match=r"READY.*begin_transaction\(\) first"):
            producer.commit_transaction(DEADLINE_S)
        with pytest.raises(IllegalStateError, match=r"begin_transaction\(\) first"):
            producer.send(TOPIC, b"x")
        with pytest.raises(IllegalStateError, match=r"begin_transaction\(\) first"):
            producer.send_offsets_to_transaction({(TOPIC, 0): 1}, "g", DEADLINE_S)
        producer.begin_transaction()
        with pytest.raises(IllegalStateError, match=r"IN_TRANSACTION.*commit_transaction\(\) or abort"):
            producer.begin_transaction()
