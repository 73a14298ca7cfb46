"""The consumer's read_committed side against the samsa broker's transactions: committed
offsets held by an open transaction (TxnOffsetCommit, KIP-447) and end offsets at the last
stable offset.

Transactions are driven through the broker's own objects (the group coordinator's
commit_transactional_offsets / complete_transaction, the log's append and marker calls), as a
transaction coordinator would, so only the consumer side is under test here.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from samsa.admin.client import AdminClient
from samsa.admin.types import NewTopic
from samsa.broker import Broker
from samsa.broker.group import GroupCoordinator, PartitionCommit
from samsa.consumer import KafkaConsumer, OffsetAndMetadata, TopicPartition
from samsa.errors import KafkaTimeoutError
from samsa.records import RecordBatchBuilder

PID = 7000


@pytest.fixture(scope="module")
def broker_config() -> dict[str, Any]:
    return {"num.partitions": 1, "group.initial.rebalance.delay.ms": 0}


def conf(broker: Broker, level: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap_servers, "isolation.level": level,
            "enable.auto.commit": False, "auto.offset.reset": "earliest", "retry.backoff.ms": 50,
            **extra}


def batch(values: list[bytes], producer_id: int = -1) -> bytes:
    builder = RecordBatchBuilder(producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                                 base_sequence=0 if producer_id >= 0 else -1,
                                 is_transactional=producer_id >= 0)
    for value in values:
        builder.append(1_700_000_000_000, None, value)
    return builder.build()


@pytest.fixture
def topic(broker: Broker, request: pytest.FixtureRequest) -> Iterator[str]:
    name = f"txn-{request.node.name}"
    with AdminClient({"bootstrap.servers": broker.bootstrap_servers}) as admin:
        admin.create_topics([NewTopic(name, 1, 1)])
    yield name


def groups(broker: Broker) -> GroupCoordinator:
    coordinator: GroupCoordinator = broker.apis.services.groups
    return coordinator


def test_committed_offsets_of_an_open_transaction_wait_for_its_commit(broker: Broker, topic: str) -> None:
    tp = TopicPartition(topic, 0)
    group, coordinator = f"g-{topic}", groups(broker)
    assert coordinator.commit_transactional_offsets(
        group, PID, 0, -1, "", None, [PartitionCommit(topic, 0, 5, -1, "txn")]) == [0]
    with KafkaConsumer(conf(broker, "read_committed", **{"group.id": group})) as stable, \
            KafkaConsumer(conf(broker, "read_uncommitted", **{"group.id": group})) as loose:
        # read_uncommitted does not ask for stable offsets: the pending one is invisible.
        assert loose.committed([tp]) == {tp: None}
        with pytest.raises(KafkaTimeoutError, match="transaction holding the group's offsets is still open"):
            stable.committed([tp], timeout=0.5)
        # The transaction commits while committed() waits for it.
        marker = threading.Timer(0.3, coordinator.complete_transaction,
                                 (coordinator.partition_for(group), PID, 0, True, 0))
        marker.start()
        try:
            assert stable.committed([tp], timeout=30) == {tp: OffsetAndMetadata(5, "txn", None)}
        finally:
            marker.join()


def test_poll_starts_at_a_transactional_offset_once_committed(broker: Broker, topic: str) -> None:
    tp = TopicPartition(topic, 0)
    log = broker.log_manager.logs()[(topic, 0)]
    log.append_as_leader(batch([b"%d" % i for i in range(10)]), leader_epoch=log.latest_epoch)
    group, coordinator = f"g-{topic}", groups(broker)
    coordinator.commit_transactional_offsets(group, PID + 1, 0, -1, "", None,
                                             [PartitionCommit(topic, 0, 6, -1, None)])
    with KafkaConsumer(conf(broker, "read_committed", **{"group.id": group})) as c:
        c.assign([tp])
        for _ in range(5):
            assert not c.poll(0.1)  # no position while the offset is unstable
        coordinator.complete_transaction(coordinator.partition_for(group), PID + 1, 0, True, 0)
        got: list[int] = []
        for _ in range(100):
            got += [r.offset for r in c.poll(0.1)]
            if got:
                break
    assert got[0] == 6


def test_end_offsets_and_reads_stop_at_the_last_stable_offset(broker: Broker, topic: str) -> None:
    tp = TopicPartition(topic, 0)
    log = broker.log_manager.logs()[(topic, 0)]
    log.append_as_leader(batch([b"plain-0", b"plain-1", b"plain-2"]), leader_epoch=log.latest_epoch)
    log.append_as_leader(batch([b"open-3", b"open-4"], PID + 2), leader_epoch=log.latest_epoch)
    with KafkaConsumer(conf(broker, "read_committed")) as committed, \
            KafkaConsumer(conf(broker, "read_uncommitted")) as everything:
        assert committed.end_offsets([tp]) == {tp: 3}
        assert everything.end_offsets([tp]) == {tp: 5}
        committed.assign([tp])
        committed.seek_to_end([tp])
        assert committed.position(tp) == 3  # auto.offset.reset / seek_to_end: the LSO too
        committed.seek(tp, 0)
        got: list[bytes] = []
        for _ in range(30):
            got += [r.value for r in committed.poll(0.1)]
        assert got == [b"plain-0", b"plain-1", b"plain-2"]
        log.append_control_marker(producer_id=PID + 2, producer_epoch=0, commit=True,
                                  coordinator_epoch=0, leader_epoch=log.latest_epoch)
        assert committed.end_offsets([tp]) == {tp: 6}
        for _ in range(100):
            got += [r.value for r in committed.poll(0.1)]
            if len(got) == 5:
                break
        assert got[3:] == [b"open-3", b"open-4"]
        for _ in range(100):  # the next fetch returns only the marker: the position passes it
            if committed.position(tp) == 6:
                break
            assert not committed.poll(0.1)
        assert committed.position(tp) == 6
