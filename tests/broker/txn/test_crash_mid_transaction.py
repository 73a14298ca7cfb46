"""SIGKILL of a ``samsa broker`` process at the points of issue 15's crash tests, with
confluent-kafka's transactional producer and read_committed consumer:

* mid-transaction (records produced over several partitions, no commit): after the restart the
  coordinator aborts the transaction when its timeout passes, so a read_committed reader that
  was held at its first offset moves on; the committed records are all there, the open
  transaction's never;
* during the commit: EndTxn answered (PREPARE_COMMIT durable) with only some partitions marked
  (the marker thread stopped by the test-only SAMSA_TEST_STALL_MARKERS_AFTER hook of
  samsa/broker/txn/markers.py): after the restart the coordinator writes the remaining
  markers, every record of the transaction is read once, its offsets are committed and the LSO
  moves past it;
* a producer re-initialising with the same transactional.id after the restart aborts its
  predecessor's open transaction at once (its timeout is ten minutes).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from samsa.broker.txn.markers import STALL_AFTER_ENV
from tests.broker.conftest import BrokerProcess
from tests.broker.txn.exactly_once import PARTITIONS, TIMEOUT, create_topics

CONFIG = {"transaction.state.log.num.partitions": 2, "offsets.topic.num.partitions": 2,
          "num.partitions": PARTITIONS,
          "transaction.abort.timed.out.transaction.cleanup.interval.ms": 100}


def produce_in_transaction(producer: Producer, topic: str, values: Iterable[str]) -> None:
    """Begin a transaction and write ``values`` round-robin over the partitions (flushed)."""
    producer.begin_transaction()
    for i, value in enumerate(values):
        producer.produce(topic, value.encode(), partition=i % PARTITIONS)
    assert producer.flush(TIMEOUT) == 0


def produce_plain(servers: str, topic: str, values: Iterable[str]) -> None:
    producer = Producer({"bootstrap.servers": servers, "enable.idempotence": True})
    for i, value in enumerate(values):
        producer.produce(topic, value.encode(), partition=i % PARTITIONS)
    assert producer.flush(TIMEOUT) == 0


def read_committed(servers: str, topic: str, wanted: int) -> list[str]:
    """Values a read_committed reader of every partition gets from the start: until ``wanted``
    arrived (or 60 s passed), then one more second to show that nothing else comes."""
    from tests.support.confluent_reads import read_values

    return read_values(servers, topic, wanted, partitions=PARTITIONS)


def describe(servers: str, transactional_id: str) -> Any:
    """DescribeTransactions through kafka-python's admin client."""
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=servers)
    try:
        return admin.describe_transactions([transactional_id])[transactional_id]
    finally:
        admin.close()


def test_sigkill_mid_transaction_aborts_it_after_its_timeout(
        broker_process: Callable[..., BrokerProcess]) -> None:
    broker = broker_process(CONFIG).start()
    servers = broker.bootstrap_servers
    create_topics(servers, "mid")
    # The open transaction starts first, so it holds the LSO of every partition below the
    # committed transaction's records.
    opened = Producer({"bootstrap.servers": servers, "transactional.id": "left-open",
                       "transaction.timeout.ms": 3000, "linger.ms": 1})
    opened.init_transactions(TIMEOUT)
    produce_in_transaction(opened, "mid", (f"open-{i}" for i in range(30)))
    committer = Producer({"bootstrap.servers": servers, "transactional.id": "committer",
                          "linger.ms": 1})
    committer.init_transactions(TIMEOUT)
    committed = [f"committed-{i}" for i in range(30)]
    produce_in_transaction(committer, "mid", committed)
    committer.commit_transaction(TIMEOUT)
    broker.kill()
    broker.start()
    produce_plain(servers, "mid", ["after-0", "after-1", "after-2"])
    # Held at the open transaction until the coordinator, rebuilt from __transaction_state,
    # aborts it when its 3 s timeout passes; then all the rest, and never its records.
    got = read_committed(servers, "mid", len(committed) + 3)
    assert sorted(got) == sorted(committed + ["after-0", "after-1", "after-2"])
    assert describe(servers, "left-open").state == "CompleteAbort"
    for producer in (opened, committer):
        producer.purge()


def test_sigkill_during_commit_completes_the_transaction(
        broker_process: Callable[..., BrokerProcess], monkeypatch: pytest.MonkeyPatch) -> None:
    # The transaction's partitions are marked in order: __consumer_offsets-N, commit-0,
    # commit-1, commit-2.  The marker thread stops after the first two.
    monkeypatch.setenv(STALL_AFTER_ENV, "2")
    broker = broker_process(CONFIG).start()
    servers = broker.bootstrap_servers
    create_topics(servers, "commit", "source")
    group = Consumer({"bootstrap.servers": servers, "group.id": "crash-group"})
    producer = Producer({"bootstrap.servers": servers, "transactional.id": "mid-commit",
                         "linger.ms": 1})
    producer.init_transactions(TIMEOUT)
    values = [f"v-{i}" for i in range(30)]
    produce_in_transaction(producer, "commit", values)
    producer.send_offsets_to_transaction([TopicPartition("source", 0, 42)],
                                         group.consumer_group_metadata(), TIMEOUT)
    group.close()
    producer.commit_transaction(TIMEOUT)  # EndTxn answered: PREPARE_COMMIT is durable
    # Only commit-0 is marked: its ten records, none of the other partitions'.
    assert sorted(read_committed(servers, "commit", 10)) == sorted(values[0::PARTITIONS])
    assert describe(servers, "mid-commit").state == "PrepareCommit"
    broker.kill()
    monkeypatch.delenv(STALL_AFTER_ENV)
    broker.start()
    produce_plain(servers, "commit", ["after-0", "after-1", "after-2"])
    # The restarted coordinator completes the commit: every record once, and the LSO of each
    # partition is past the transaction (the plain records after it are read too).
    assert sorted(read_committed(servers, "commit", 33)) == sorted(
        values + ["after-0", "after-1", "after-2"])
    assert describe(servers, "mid-commit").state == "CompleteCommit"
    reader = Consumer({"bootstrap.servers": servers, "group.id": "crash-group",
                       "isolation.level": "read_committed"})
    try:
        (tp,) = reader.committed([TopicPartition("source", 0)], timeout=TIMEOUT)
    finally:
        reader.close()
    assert tp.error is None and tp.offset == 42


def test_a_producer_reinitialising_after_a_sigkill_aborts_its_predecessor_at_once(
        broker_process: Callable[..., BrokerProcess]) -> None:
    broker = broker_process(CONFIG).start()
    servers = broker.bootstrap_servers
    create_topics(servers, "reinit")
    conf = {"bootstrap.servers": servers, "transactional.id": "reinit",
            "transaction.timeout.ms": 600_000, "linger.ms": 1}
    before = Producer(conf)
    before.init_transactions(TIMEOUT)
    produce_in_transaction(before, "reinit", (f"before-{i}" for i in range(6)))
    before.commit_transaction(TIMEOUT)
    produce_in_transaction(before, "reinit", (f"predecessor-{i}" for i in range(30)))
    broker.kill()
    broker.start()
    before.purge()
    successor = Producer(conf)
    successor.init_transactions(TIMEOUT)  # fences the predecessor and aborts its transaction
    produce_in_transaction(successor, "reinit", (f"successor-{i}" for i in range(6)))
    successor.commit_transaction(TIMEOUT)
    # Far sooner than the predecessor's ten-minute timeout: the readers are not held.
    expected = [f"before-{i}" for i in range(6)] + [f"successor-{i}" for i in range(6)]
    assert sorted(read_committed(servers, "reinit", len(expected))) == sorted(expected)
    description = describe(servers, "reinit")
    assert description.state == "CompleteCommit"
