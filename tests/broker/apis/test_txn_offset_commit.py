"""TxnOffsetCommit and OffsetFetch's require_stable, as raw requests through KafkaApis: the
group's partition verified in the transaction (a double of the transaction coordinator's
``verify_partition`` / ``add_partitions``), the error mapping per version, pending offsets
invisible until the marker, UNSTABLE_OFFSET_COMMIT for require_stable, and the ACL checks
(Kafka's KafkaApis.handleTxnOffsetCommitRequest)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from samsa.broker.apis import KafkaApis
from samsa.broker.authorizer import AclStore, Authorizer
from samsa.broker.group import GROUP_METADATA_TOPIC
from samsa.protocol import (
    OffsetCommitRequest,
    OffsetFetchRequest,
    TxnOffsetCommitRequest,
)
from samsa.security.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

from .conftest import Client

TXN_ID, PID, EPOCH = "tx", 4000, 0
UNKNOWN_TOPIC_OR_PARTITION = 3
ILLEGAL_GENERATION = 22
INVALID_GROUP_ID = 24
TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
CONCURRENT_TRANSACTIONS = 51
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
UNSTABLE_OFFSET_COMMIT = 88
PRODUCER_FENCED = 90
TRANSACTION_ABORTABLE = 120


class FakeTransactions:
    """The transaction coordinator's verification, answering ``error`` for every call."""

    def __init__(self) -> None:
        self.error = 0
        self.calls: list[tuple[Any, ...]] = []

    def verify_partition(self, transactional_id: str, producer_id: int, producer_epoch: int,
                         topic: str, partition: int) -> int:
        self.calls.append(("verify", transactional_id, producer_id, producer_epoch, topic,
                           partition))
        return self.error

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: list[tuple[str, int]], *, client_tv2: bool = False) -> int:
        self.calls.append(("add", transactional_id, producer_id, producer_epoch,
                           list(partitions), client_tv2))
        return self.error


@pytest.fixture
def txns(apis: KafkaApis, monkeypatch: pytest.MonkeyPatch) -> FakeTransactions:
    fake = FakeTransactions()
    monkeypatch.setattr(apis.services, "transactions", fake, raising=False)
    apis.services.logs.create_topic("t", 3)
    return fake


def txn_commit(group: str = "g", offsets: dict[int, int] | None = None, *, topic: str = "t",
               generation: int = -1, member: str = "", pid: int = PID, epoch: int = EPOCH,
               txn_id: str = TXN_ID) -> Any:
    R = TxnOffsetCommitRequest
    return R(transactional_id=txn_id, group_id=group, producer_id=pid, producer_epoch=epoch,
             generation_id=generation, member_id=member, group_instance_id=None,
             topics=[R.TxnOffsetCommitRequestTopic(name=topic, partitions=[
                 R.TxnOffsetCommitRequestPartition(partition_index=p, committed_offset=o,
                                                   committed_leader_epoch=-1,
                                                   committed_metadata=f"m{o}")
                 for p, o in (offsets or {0: 10}).items()])])


def codes(response: Any) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code
            for t in response.topics for p in t.partitions}


def fetch(client: Client, version: int, *, require_stable: bool, group: str = "g",
          partitions: tuple[int, ...] = (0, 1)) -> dict[int, tuple[int, int]]:
    """partition -> (committed offset, error code)"""
    if version >= 8:
        R = OffsetFetchRequest
        req = R(groups=[R.OffsetFetchRequestGroup(group_id=group, topics=[
            R.OffsetFetchRequestTopics(name="t", partition_indexes=list(partitions))])],
            require_stable=require_stable)
        (g,) = client.call(req, version).groups
        topics = g.topics
    else:
        req = OffsetFetchRequest(group_id=group, topics=[OffsetFetchRequest.OffsetFetchRequestTopic(
            name="t", partition_indexes=list(partitions))], require_stable=require_stable)
        topics = client.call(req, version).topics
    return {p.partition_index: (p.committed_offset, p.error_code)
            for t in topics for p in t.partitions}


def plain_commit(client: Client, offsets: dict[int, int], group: str = "g") -> None:
    R = OffsetCommitRequest
    resp = client.call(R(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                         topics=[R.OffsetCommitRequestTopic(name="t", partitions=[
                             R.OffsetCommitRequestPartition(partition_index=p,
                                                            committed_offset=o,
                                                            committed_metadata="")
                             for p, o in offsets.items()])]), 8)
    assert all(p.error_code == 0 for t in resp.topics for p in t.partitions)


@pytest.mark.parametrize("version", range(6))
def test_txn_offsets_are_pending_until_the_commit_marker(client: Client, apis: KafkaApis,
                                                         txns: FakeTransactions,
                                                         version: int) -> None:
    plain_commit(client, {0: 1})
    resp = client.call(txn_commit(offsets={0: 10, 1: 20}), version)
    assert codes(resp) == {("t", 0): 0, ("t", 1): 0}
    groups = apis.services.groups
    partition = groups.partition_for("g")
    if version >= 5:  # the group's partition joins the transaction (KIP-890 part 2)
        assert txns.calls == [("add", TXN_ID, PID, EPOCH, [(GROUP_METADATA_TOPIC, partition)],
                               True)]
    else:
        assert txns.calls == [("verify", TXN_ID, PID, EPOCH, GROUP_METADATA_TOPIC, partition)]
    # Not seen; require_stable gets UNSTABLE_OFFSET_COMMIT for every pending partition.
    for fetch_version in (1, 7, 8):
        assert fetch(client, fetch_version, require_stable=False) == {0: (1, 0), 1: (-1, 0)}
    for fetch_version in (7, 8):
        assert fetch(client, fetch_version, require_stable=True) == \
            {0: (-1, UNSTABLE_OFFSET_COMMIT), 1: (-1, UNSTABLE_OFFSET_COMMIT)}
    groups.complete_transaction(partition, PID, EPOCH, True, 0)
    for fetch_version in (1, 8):
        assert fetch(client, fetch_version, require_stable=fetch_version >= 7) == \
            {0: (10, 0), 1: (20, 0)}


def test_an_aborted_transactions_offsets_never_show(client: Client, apis: KafkaApis,
                                                    txns: FakeTransactions) -> None:
    plain_commit(client, {0: 1})
    assert codes(client.call(txn_commit(offsets={0: 10, 1: 20}), 3)) == {("t", 0): 0, ("t", 1): 0}
    groups = apis.services.groups
    groups.complete_transaction(groups.partition_for("g"), PID, EPOCH, False, 0)
    assert fetch(client, 8, require_stable=True) == {0: (1, 0), 1: (-1, 0)}


def test_a_plain_commit_while_pending_is_accepted_and_wins(client: Client, apis: KafkaApis,
                                                           txns: FakeTransactions) -> None:
    assert codes(client.call(txn_commit(offsets={0: 10}), 4)) == {("t", 0): 0}
    plain_commit(client, {0: 7})
    groups = apis.services.groups
    groups.complete_transaction(groups.partition_for("g"), PID, EPOCH, True, 0)
    assert fetch(client, 8, require_stable=True)[0] == (7, 0)


@pytest.mark.parametrize(("verified", "version", "expected"), [
    (TRANSACTION_ABORTABLE, 3, INVALID_TXN_STATE),  # clients that do not know the code
    (TRANSACTION_ABORTABLE, 4, TRANSACTION_ABORTABLE),
    (TRANSACTION_ABORTABLE, 0, INVALID_TXN_STATE),
    (PRODUCER_FENCED, 4, INVALID_PRODUCER_EPOCH),
    (PRODUCER_FENCED, 5, INVALID_PRODUCER_EPOCH),
    (INVALID_PRODUCER_ID_MAPPING, 4, INVALID_PRODUCER_ID_MAPPING),
    (CONCURRENT_TRANSACTIONS, 2, CONCURRENT_TRANSACTIONS),
])
def test_a_failed_verification_fails_every_partition_and_writes_nothing(
        client: Client, apis: KafkaApis, txns: FakeTransactions, verified: int, version: int,
        expected: int) -> None:
    txns.error = verified
    resp = client.call(txn_commit(offsets={0: 10, 1: 20}), version)
    assert codes(resp) == {("t", 0): expected, ("t", 1): expected}
    assert apis.services.groups.fetch_offsets_and_pending("g", [("t", 0), ("t", 1)])[2] == \
        frozenset()
    assert apis.services.logs.topic(GROUP_METADATA_TOPIC) is None  # nothing written


def test_unknown_partitions_and_group_errors(client: Client, apis: KafkaApis,
                                             txns: FakeTransactions) -> None:
    resp = client.call(txn_commit(offsets={0: 10, 7: 20}), 3)
    assert codes(resp) == {("t", 0): 0, ("t", 7): UNKNOWN_TOPIC_OR_PARTITION}
    resp = client.call(txn_commit(topic="nope"), 3)
    assert codes(resp) == {("nope", 0): UNKNOWN_TOPIC_OR_PARTITION}
    calls = len(txns.calls)
    assert codes(client.call(txn_commit(group=""), 3)) == {("t", 0): INVALID_GROUP_ID}
    assert len(txns.calls) == calls  # checked before the verification
    assert codes(client.call(txn_commit(group="new", generation=2, member="m"), 3)) == \
        {("t", 0): ILLEGAL_GENERATION}


def _acl(rtype: ResourceType, name: str, op: AclOperation) -> AclBinding:
    return AclBinding(rtype, name, PatternType.LITERAL, "User:ANONYMOUS", "*", op,
                      AclPermissionType.ALLOW)


@pytest.mark.parametrize(("acls", "expected"), [
    ([], TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    ([(ResourceType.TRANSACTIONAL_ID, TXN_ID, AclOperation.WRITE)], GROUP_AUTHORIZATION_FAILED),
    ([(ResourceType.TRANSACTIONAL_ID, TXN_ID, AclOperation.WRITE),
      (ResourceType.GROUP, "g", AclOperation.READ)], TOPIC_AUTHORIZATION_FAILED),
    ([(ResourceType.TRANSACTIONAL_ID, TXN_ID, AclOperation.WRITE),
      (ResourceType.GROUP, "g", AclOperation.READ),
      (ResourceType.TOPIC, "t", AclOperation.READ)], 0),
])
def test_acls(client: Client, apis: KafkaApis, txns: FakeTransactions, tmp_path: Path,
              acls: list[tuple[ResourceType, str, AclOperation]], expected: int) -> None:
    (tmp_path / "acls").mkdir()
    store = AclStore(tmp_path / "acls")
    store.add([_acl(*a) for a in acls])
    apis.services.authorizer = Authorizer(store, (), False)
    assert codes(client.call(txn_commit(), 4)) == {("t", 0): expected}
    assert bool(txns.calls) == (expected == 0)  # verified only when something is committed


def test_describe_producers_shows_the_open_transactions_start(client: Client, apis: KafkaApis,
                                                              txns: FakeTransactions) -> None:
    from samsa.protocol import DescribeProducersRequest

    assert codes(client.call(txn_commit(offsets={0: 10}), 3)) == {("t", 0): 0}
    partition = apis.services.groups.partition_for("g")
    R = DescribeProducersRequest

    def describe() -> Any:
        resp = client.call(R(topics=[R.TopicRequest(name=GROUP_METADATA_TOPIC,
                                                    partition_indexes=[partition])]), 0)
        (p,) = resp.topics[0].partitions
        return [(s.producer_id, s.current_txn_start_offset) for s in p.active_producers]

    assert describe() == [(PID, 0)]
    apis.services.groups.complete_transaction(partition, PID, EPOCH, True, 0)
    assert describe() == [(PID, -1)]


# -- against the broker's own transaction coordinator ---------------------------------------------


def _eventually(condition: Any, patience: float = 10.0) -> None:
    """Markers are written on the coordinator's own thread after EndTxn answers."""
    import time

    deadline = time.monotonic() + patience
    while not condition():
        assert time.monotonic() < deadline, "the transaction's markers were never written"
        time.sleep(0.01)


def _begin(client: Client, txn_id: str) -> tuple[int, int]:
    from samsa.protocol import InitProducerIdRequest

    resp = client.call(InitProducerIdRequest(transactional_id=txn_id,
                                             transaction_timeout_ms=60_000), 4)
    assert resp.error_code == 0, resp
    return resp.producer_id, resp.producer_epoch


@pytest.mark.parametrize("version", [3, 4])
def test_txn_offset_commit_needs_add_offsets_to_txn_before_v5(client: Client, apis: KafkaApis,
                                                              version: int) -> None:
    from samsa.protocol import AddOffsetsToTxnRequest, EndTxnRequest

    apis.services.logs.create_topic("t", 3)
    pid, epoch = _begin(client, "real-tx")
    # Not in the transaction: refused, nothing pending.
    resp = client.call(txn_commit(offsets={0: 10}, pid=pid, epoch=epoch, txn_id="real-tx"),
                       version)
    assert codes(resp) == {("t", 0): INVALID_TXN_STATE if version < 4 else TRANSACTION_ABORTABLE}
    assert client.call(AddOffsetsToTxnRequest(transactional_id="real-tx", producer_id=pid,
                                              producer_epoch=epoch, group_id="g"),
                       3).error_code == 0
    resp = client.call(txn_commit(offsets={0: 10}, pid=pid, epoch=epoch, txn_id="real-tx"),
                       version)
    assert codes(resp) == {("t", 0): 0}
    assert fetch(client, 8, require_stable=True)[0] == (-1, UNSTABLE_OFFSET_COMMIT)
    assert client.call(EndTxnRequest(transactional_id="real-tx", producer_id=pid,
                                     producer_epoch=epoch, committed=True), 3).error_code == 0
    _eventually(lambda: fetch(client, 8, require_stable=True)[0] == (10, 0))
    # A fenced epoch: the old producer's offsets are refused.
    _begin(client, "real-tx")
    resp = client.call(txn_commit(offsets={0: 11}, pid=pid, epoch=epoch, txn_id="real-tx"),
                       version)
    assert codes(resp) == {("t", 0): INVALID_PRODUCER_EPOCH}


def test_txn_offset_commit_v5_adds_the_groups_partition(client: Client,
                                                        apis: KafkaApis) -> None:
    from samsa.protocol import EndTxnRequest

    apis.services.logs.create_topic("t", 3)
    pid, epoch = _begin(client, "tv2-tx")
    resp = client.call(txn_commit(offsets={0: 10, 1: 11}, pid=pid, epoch=epoch,
                                  txn_id="tv2-tx"), 5)
    assert codes(resp) == {("t", 0): 0, ("t", 1): 0}
    end = client.call(EndTxnRequest(transactional_id="tv2-tx", producer_id=pid,
                                    producer_epoch=epoch, committed=False), 5)
    assert end.error_code == 0 and end.producer_epoch == epoch + 1
    _eventually(lambda: apis.services.groups.fetch_offsets_and_pending(
        "g", [("t", 0), ("t", 1)])[2] == frozenset())
    assert fetch(client, 8, require_stable=True) == {0: (-1, 0), 1: (-1, 0)}
