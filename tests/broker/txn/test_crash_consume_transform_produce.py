"""A consume-transform-produce loop (confluent-kafka) that goes on across SIGKILLs of the
``samsa broker`` process at three points of a transaction: after its records and offsets were
sent but before the commit (the restarted coordinator, producer state and group coordinator
must take the commit: the transaction is ONGOING in ``__transaction_state``, its offsets
pending in ``__consumer_offsets``), right after the commit was answered (markers possibly not
written), and after its records were sent but before its offsets.  Whatever each call answers,
the application's rule -- abort or start a new producer, then seek back to the committed offsets
-- leaves the output, read with read_committed, holding each input's output exactly once."""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaException,
    Producer,
    TopicPartition,
)

from tests.broker.conftest import BrokerProcess
from tests.broker.txn.exactly_once import (
    BROKER_CONFIG,
    PARTITIONS,
    TIMEOUT,
    check_group_at_end,
    check_output,
    create_topics,
    fill,
    transformed,
)

RECORDS = 12_000
BATCH = 500
IN, OUT, GROUP = "crash-in", "crash-out", "crash-group"
KILL_BEFORE_COMMIT, KILL_AFTER_COMMIT, KILL_BEFORE_OFFSETS = 4, 8, 12


def test_consume_transform_produce_across_sigkills(
        broker_process: Callable[..., BrokerProcess]) -> None:
    broker = broker_process(BROKER_CONFIG).start()
    servers = broker.bootstrap_servers
    create_topics(servers, IN, OUT)
    fill(servers, IN, RECORDS)
    # Assigned, not subscribed: a member's rejoin after the restart would move its positions
    # under the loop; the group id still names where the transactions commit the offsets.
    consumer = Consumer({"bootstrap.servers": servers, "group.id": GROUP,
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    inputs = [TopicPartition(IN, p) for p in range(PARTITIONS)]

    def rewind() -> None:
        committed = consumer.committed(inputs, timeout=TIMEOUT)
        consumer.assign([TopicPartition(IN, tp.partition,
                                        tp.offset if tp.offset >= 0 else OFFSET_BEGINNING)
                         for tp in committed])

    def new_producer() -> Producer:
        # metadata.recovery.strategy=none: with the only broker down, librdkafka >= 2.10
        # re-bootstraps and decommissions the broker it had, which can stay cached as the group
        # coordinator; send_offsets_to_transaction then waits forever, past its timeout
        # (librdkafka issues #5511 and #5456).
        producer = Producer({"bootstrap.servers": servers, "transactional.id": "crash-ctp",
                             "linger.ms": 5, "metadata.recovery.strategy": "none"})
        producer.init_transactions(TIMEOUT)
        return producer

    def restart() -> None:
        broker.kill()
        broker.start()

    producer = new_producer()
    rewind()
    committed: list[int] = []
    outcomes: dict[int, str] = {}
    done, transaction = 0, 0
    try:
        while done < RECORDS:
            msgs = consumer.consume(BATCH, timeout=TIMEOUT)
            assert msgs, f"the input stopped after {done} of {RECORDS} records"
            assert all(m.error() is None for m in msgs), [m.error() for m in msgs]
            transaction += 1
            try:
                producer.begin_transaction()
                for m in msgs:
                    producer.produce(OUT, transformed(m.value(), transaction),
                                     partition=m.partition())
                if transaction == KILL_BEFORE_OFFSETS:
                    assert producer.flush(TIMEOUT) == 0
                    restart()
                positions = [tp for tp in consumer.position(consumer.assignment())
                             if tp.offset >= 0]
                producer.send_offsets_to_transaction(
                    positions, consumer.consumer_group_metadata(), TIMEOUT)
                if transaction == KILL_BEFORE_COMMIT:
                    assert producer.flush(TIMEOUT) == 0
                    restart()
                commit_retrying(producer)
                if transaction == KILL_AFTER_COMMIT:
                    restart()
            except KafkaException as exc:
                error = exc.args[0]
                outcomes[transaction] = error.name()
                if error.txn_requires_abort():
                    producer.abort_transaction(TIMEOUT)
                else:
                    assert error.fatal(), error  # anything else is a bug of the loop
                    producer = new_producer()
                rewind()
                continue
            outcomes[transaction] = "committed"
            committed.append(transaction)
            done += len(msgs)
    finally:
        consumer.close()
    # The transactions around the kills may have been aborted and re-done, or committed: both
    # are exactly once.  Print what happened for whoever reads a failure.
    print({t: outcomes.get(t) for t in (KILL_BEFORE_COMMIT, KILL_AFTER_COMMIT,
                                         KILL_BEFORE_OFFSETS)})
    assert outcomes[KILL_AFTER_COMMIT] == "committed"
    assert done == RECORDS
    check_output(servers, OUT, RECORDS, committed)
    check_group_at_end(servers, GROUP, IN)


def commit_retrying(producer: Producer) -> None:
    """commit_transaction, called again while it fails retriably (librdkafka's documented
    way: the commit may have gone through, a retry finds out)."""
    for _ in range(10):
        try:
            producer.commit_transaction(TIMEOUT)
            return
        except KafkaException as exc:
            if not exc.args[0].retriable():
                raise
    producer.commit_transaction(TIMEOUT)
