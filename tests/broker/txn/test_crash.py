"""SIGKILL of a ``samsa broker`` process with transactions in flight: one committed just before
the kill (its markers possibly not yet written: PREPARE_COMMIT is durable once EndTxn is
answered), one left open.  After the restart the committed records are all there, the open
transaction is aborted by the coordinator's timeout, so read_committed consumers move past it,
and its records never appear."""

from __future__ import annotations

from collections.abc import Callable

from confluent_kafka import Producer

from tests.broker.conftest import BrokerProcess
from tests.support.confluent_reads import read_values

CONFIG = {"num.partitions": 1, "transaction.state.log.num.partitions": 2,
          "transaction.abort.timed.out.transaction.cleanup.interval.ms": 100}


def test_transactions_survive_a_sigkill(broker_process: Callable[..., BrokerProcess]) -> None:
    broker = broker_process(CONFIG).start()
    bootstrap = broker.bootstrap_servers
    opened = Producer({"bootstrap.servers": bootstrap, "transactional.id": "left-open",
                       "transaction.timeout.ms": 3000, "linger.ms": 1})
    opened.init_transactions(30)
    opened.begin_transaction()
    for i in range(5):
        opened.produce("crash", f"open-{i}".encode())
    opened.flush(30)
    committer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "committed",
                          "linger.ms": 1})
    committer.init_transactions(30)
    committer.begin_transaction()
    for i in range(10):
        committer.produce("crash", f"committed-{i}".encode())
    committer.flush(30)
    committer.commit_transaction(30)
    broker.kill()  # right after EndTxn was answered: the markers may not be written yet
    broker.start()
    after = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    after.produce("crash", b"after-restart")
    assert after.flush(30) == 0
    expected = [f"committed-{i}" for i in range(10)] + ["after-restart"]
    # The open transaction holds the LSO until its timeout aborts it; then everything after it
    # is readable, and none of its records.
    got = read_values(bootstrap, "crash", len(expected), partitions=1)
    assert got == expected
    for producer in (opened, committer):
        producer.purge()
