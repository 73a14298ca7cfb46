"""The transaction APIs through KafkaApis (requests and responses through the codec):
InitProducerId with a transactional id, AddPartitionsToTxn (client and verification forms),
AddOffsetsToTxn, EndTxn, Describe/ListTransactions, and Produce's KIP-890 verification."""

from __future__ import annotations

from typing import Any

import pytest

from samsa.protocol import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    DescribeTransactionsRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    ListTransactionsRequest,
    ProduceRequest,
)
from tests.broker.txn.conftest import wait_for

APT = AddPartitionsToTxnRequest
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
CONCURRENT_TRANSACTIONS = 51
OPERATION_NOT_ATTEMPTED = 55
NOT_ENOUGH_REPLICAS = 19
UNKNOWN_TOPIC_OR_PARTITION = 3
PRODUCER_FENCED = 90
TRANSACTION_ABORTABLE = 120


def init(client: Any, txn_id: str = "tx", version: int = 4, **kwargs: Any) -> Any:
    return client.call(InitProducerIdRequest(transactional_id=txn_id,
                                             transaction_timeout_ms=60_000, **kwargs), version)


def add_partitions(client: Any, pid: int, epoch: int, partitions: dict[str, list[int]],
                   version: int = 3, txn_id: str = "tx") -> dict[tuple[str, int], int]:
    request = APT(v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid,
                  v3_and_below_producer_epoch=epoch,
                  v3_and_below_topics=[APT.AddPartitionsToTxnTopic(name=t, partitions=ps)
                                       for t, ps in partitions.items()])
    response = client.call(request, version)
    return {(t.name, p.partition_index): p.partition_error_code
            for t in response.results_by_topic_v3_and_below for p in t.results_by_partition}


def end_txn(client: Any, pid: int, epoch: int, commit: bool, version: int = 3,
            txn_id: str = "tx") -> Any:
    return client.call(EndTxnRequest(transactional_id=txn_id, producer_id=pid,
                                     producer_epoch=epoch, committed=commit), version)


def produce(client: Any, make_batch: Any, pid: int, epoch: int, seq: int, *,
            partition: int = 0, version: int = 9, txn_id: str | None = "tx") -> Any:
    records = make_batch(b"v", producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                         transactional=True)
    request = ProduceRequest(transactional_id=txn_id, acks=-1, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name="t", partition_data=[
            ProduceRequest.PartitionProduceData(index=partition, records=records)])])
    return client.call(request, version).responses[0].partition_responses[0]


@pytest.fixture
def topic(log_manager: Any) -> str:
    log_manager.create_topic("t", 2)
    return "t"


def test_init_producer_id_fences_older_clients_with_invalid_producer_epoch(client: Any) -> None:
    first = init(client)
    assert init(client, version=4, producer_id=first.producer_id,
                producer_epoch=9).error_code == PRODUCER_FENCED
    assert init(client, version=3, producer_id=first.producer_id,
                producer_epoch=9).error_code == INVALID_PRODUCER_EPOCH


def test_add_partitions_unknown_partition_fails_the_whole_transaction(client: Any,
                                                                      topic: str) -> None:
    r = init(client)
    errors = add_partitions(client, r.producer_id, r.producer_epoch, {"t": [0, 5], "nope": [0]})
    assert errors == {("t", 0): OPERATION_NOT_ATTEMPTED, ("t", 5): UNKNOWN_TOPIC_OR_PARTITION,
                      ("nope", 0): UNKNOWN_TOPIC_OR_PARTITION}
    assert client.apis.services.transactions.txns["tx"].partitions == frozenset()


@pytest.mark.parametrize(("version", "fenced"), [(1, INVALID_PRODUCER_EPOCH),
                                                 (2, PRODUCER_FENCED), (3, PRODUCER_FENCED)])
def test_add_partitions_fenced_error_by_version(client: Any, topic: str, version: int,
                                                fenced: int) -> None:
    r = init(client)
    assert add_partitions(client, r.producer_id, r.producer_epoch + 1, {"t": [0]},
                          version) == {("t", 0): fenced}
    assert add_partitions(client, r.producer_id, r.producer_epoch, {"t": [0, 1]},
                          version) == {("t", 0): 0, ("t", 1): 0}


def test_add_partitions_verify_only(client: Any, topic: str) -> None:
    r = init(client)
    add_partitions(client, r.producer_id, r.producer_epoch, {"t": [0]})
    request = APT(transactions=[APT.AddPartitionsToTxnTransaction(
        transactional_id="tx", producer_id=r.producer_id, producer_epoch=r.producer_epoch,
        verify_only=True, topics=[APT.AddPartitionsToTxnTopic(name="t", partitions=[0, 1])])])
    response = client.call(request, 5)
    [result] = response.results_by_transaction
    errors = {(t.name, p.partition_index): p.partition_error_code
              for t in result.topic_results for p in t.results_by_partition}
    assert (response.error_code, errors) == (0, {("t", 0): 0, ("t", 1): TRANSACTION_ABORTABLE})
    # Verification adds nothing.
    assert client.apis.services.transactions.txns["tx"].partitions == {("t", 0)}


def test_add_offsets_adds_the_groups_offsets_partition(client: Any) -> None:
    r = init(client)
    response = client.call(AddOffsetsToTxnRequest(
        transactional_id="tx", producer_id=r.producer_id, producer_epoch=r.producer_epoch,
        group_id="g"), 3)
    assert response.error_code == 0
    partition = client.apis.services.groups.partition_for("g")
    assert client.apis.services.transactions.txns["tx"].partitions == {
        ("__consumer_offsets", partition)}
    fenced = client.call(AddOffsetsToTxnRequest(
        transactional_id="tx", producer_id=r.producer_id, producer_epoch=r.producer_epoch + 1,
        group_id="g"), 1)
    assert fenced.error_code == INVALID_PRODUCER_EPOCH


def test_a_committed_transaction_end_to_end(client: Any, topic: str, make_batch: Any,
                                            log_manager: Any) -> None:
    r = init(client)
    pid, epoch = r.producer_id, r.producer_epoch
    assert add_partitions(client, pid, epoch, {"t": [0]}) == {("t", 0): 0}
    assert produce(client, make_batch, pid, epoch, 0).error_code == 0
    assert produce(client, make_batch, pid, epoch, 1).error_code == 0
    plog = log_manager.get_log("t", 0)
    assert plog.last_stable_offset == 0  # held by the open transaction
    assert end_txn(client, pid, epoch, True).error_code == 0
    wait_for(lambda: plog.last_stable_offset == 3, "the COMMIT marker moves the LSO")
    services = client.apis.services
    wait_for(lambda: services.transactions.describe("tx").state == "CompleteCommit",
             "the transaction completes")
    assert end_txn(client, pid, epoch, True).error_code == 0  # a retry
    assert end_txn(client, pid, epoch, False).error_code == INVALID_TXN_STATE


def test_end_txn_v5_answers_the_bumped_epoch(client: Any, topic: str) -> None:
    r = init(client)
    add_partitions(client, r.producer_id, r.producer_epoch, {"t": [1]})
    response = end_txn(client, r.producer_id, r.producer_epoch, False, version=5)
    assert (response.error_code, response.producer_id, response.producer_epoch) == (
        0, r.producer_id, r.producer_epoch + 1)
    # The old epoch is fenced for a classic client; the new one retries the abort fine.
    old = end_txn(client, r.producer_id, r.producer_epoch, False, version=4)
    assert (old.error_code, old.producer_id) == (PRODUCER_FENCED, -1)
    wait_for(lambda: end_txn(client, r.producer_id, r.producer_epoch + 1, False,
                             version=4).error_code == 0, "the abort completes")


# -- Produce's verification -------------------------------------------------------------------


@pytest.mark.parametrize(("version", "expected"), [(9, INVALID_TXN_STATE),
                                                   (10, INVALID_TXN_STATE),
                                                   (11, TRANSACTION_ABORTABLE)])
def test_produce_to_a_partition_not_in_the_transaction_is_refused(
        client: Any, topic: str, make_batch: Any, log_manager: Any, version: int,
        expected: int) -> None:
    r = init(client)
    add_partitions(client, r.producer_id, r.producer_epoch, {"t": [0]})
    refused = produce(client, make_batch, r.producer_id, r.producer_epoch, 0, partition=1,
                      version=version)
    assert refused.error_code == expected and "AddPartitionsToTxn" in refused.error_message
    assert log_manager.get_log("t", 1).log_end_offset == 0
    assert produce(client, make_batch, r.producer_id, r.producer_epoch, 0,
                   version=version).error_code == 0


def test_produce_of_a_fenced_producer_is_refused(client: Any, topic: str, make_batch: Any,
                                                 log_manager: Any) -> None:
    r = init(client)
    add_partitions(client, r.producer_id, r.producer_epoch, {"t": [0]})
    newer = init(client)  # fences the open transaction: CONCURRENT_TRANSACTIONS, retried
    assert newer.error_code == CONCURRENT_TRANSACTIONS
    refused = produce(client, make_batch, r.producer_id, r.producer_epoch, 0)
    assert refused.error_code in (INVALID_PRODUCER_EPOCH, NOT_ENOUGH_REPLICAS)
    wait_for(lambda: init(client).error_code == 0, "the fencing abort completes")
    assert produce(client, make_batch, r.producer_id, r.producer_epoch,
                   0).error_code == INVALID_PRODUCER_EPOCH
    assert log_manager.get_log("t", 0).log_end_offset == 1  # only the ABORT marker


def test_a_transactional_batch_needs_the_transactional_id(client: Any, topic: str,
                                                          make_batch: Any) -> None:
    assert produce(client, make_batch, 5, 0, 0, txn_id=None).error_code == 53


def test_produce_v12_adds_the_partition_itself(client: Any, topic: str, make_batch: Any) -> None:
    r = init(client)
    assert produce(client, make_batch, r.producer_id, r.producer_epoch, 0,
                   version=12).error_code == 0
    services = client.apis.services
    assert services.transactions.txns["tx"].partitions == {("t", 0)}


# -- Describe / List ---------------------------------------------------------------------------


def test_describe_and_list_transactions(client: Any, topic: str) -> None:
    r = init(client)
    add_partitions(client, r.producer_id, r.producer_epoch, {"t": [1, 0]})
    init(client, "idle")
    described = client.call(DescribeTransactionsRequest(transactional_ids=["tx", "nobody"]), 0)
    tx, nobody = described.transaction_states
    assert (tx.error_code, tx.transaction_state, tx.producer_id, tx.transaction_timeout_ms) == (
        0, "Ongoing", r.producer_id, 60_000)
    assert [(t.topic, sorted(t.partitions)) for t in tx.topics] == [("t", [0, 1])]
    assert nobody.error_code == 105
    listed = client.call(ListTransactionsRequest(state_filters=["Ongoing", "Nope"],
                                                 producer_id_filters=[]), 1)
    assert [(t.transactional_id, t.transaction_state) for t in listed.transaction_states] == [
        ("tx", "Ongoing")]
    assert listed.unknown_state_filters == ["Nope"]
    every = client.call(ListTransactionsRequest(state_filters=[], producer_id_filters=[]), 0)
    assert sorted(t.transactional_id for t in every.transaction_states) == ["idle", "tx"]


# -- ACLs (KafkaApis: WRITE on the transactional id, topic WRITE, group READ, CLUSTER_ACTION) --


def _authorize(apis: Any, tmp_path: Any, *acls: tuple[Any, str, Any]) -> None:
    from samsa.broker.authorizer import AclStore, Authorizer
    from samsa.security.acl import AclBinding, AclPermissionType, PatternType

    (tmp_path / "acls").mkdir()
    store = AclStore(tmp_path / "acls")
    store.add([AclBinding(rtype, name, PatternType.LITERAL, "User:ANONYMOUS", "*", op,
                          AclPermissionType.ALLOW) for rtype, name, op in acls])
    apis.services.authorizer = Authorizer(store, (), False)


def test_acls_of_the_transaction_apis(client: Any, apis: Any, topic: str, tmp_path: Any) -> None:
    from samsa.security.acl import AclOperation, ResourceType

    r = init(client)  # before the authorizer: an id and epoch to use
    _authorize(apis, tmp_path, (ResourceType.TRANSACTIONAL_ID, "tx", AclOperation.WRITE),
               (ResourceType.TOPIC, "t", AclOperation.WRITE))
    assert init(client, "other").error_code == 53
    assert add_partitions(client, r.producer_id, r.producer_epoch, {"t": [0]},
                          txn_id="other") == {("t", 0): 53}
    assert add_partitions(client, r.producer_id, r.producer_epoch, {"t": [0]}) == {("t", 0): 0}
    offsets = client.call(AddOffsetsToTxnRequest(
        transactional_id="tx", producer_id=r.producer_id, producer_epoch=r.producer_epoch,
        group_id="g"), 3)
    assert offsets.error_code == 30  # no READ on the group
    assert end_txn(client, r.producer_id, r.producer_epoch, False, txn_id="other") \
        .error_code == 53
    verify = client.call(APT(transactions=[]), 4)
    assert verify.error_code == 31  # v4+ need CLUSTER_ACTION
    described = client.call(DescribeTransactionsRequest(transactional_ids=["tx", "other"]), 0)
    # WRITE implies DESCRIBE (on the id and on the topic); "other" is refused.
    assert [(d.error_code, [t.topic for t in d.topics])
            for d in described.transaction_states] == [(0, ["t"]), (53, [])]
    listed = client.call(ListTransactionsRequest(state_filters=[], producer_id_filters=[]), 0)
    assert [t.transactional_id for t in listed.transaction_states] == ["tx"]
