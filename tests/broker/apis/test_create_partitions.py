"""CreatePartitions' error answers (Kafka's ZkAdminManager/ReplicationControlManager checks)."""

from __future__ import annotations

from typing import Any

from samsa.protocol import CreatePartitionsRequest

R = CreatePartitionsRequest
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_REQUEST = 42


def _grow(client: Any, *topics: Any, version: int = 3) -> dict[str, tuple[int, str | None]]:
    response = client.call(R(topics=list(topics), timeout_ms=1000, validate_only=False), version)
    return {r.name: (r.error_code, r.error_message) for r in response.results}


def test_assignments_must_name_each_new_partition(client: Any, log_manager: Any) -> None:
    log_manager.create_topic("t", 1)
    one_for_two = R.CreatePartitionsTopic(
        name="t", count=3, assignments=[R.CreatePartitionsAssignment(broker_ids=[1])])
    code, message = _grow(client, one_for_two)["t"]
    assert code == INVALID_REPLICA_ASSIGNMENT
    assert message == "1 assignment(s) given for 2 new partition(s)"
    assert log_manager.topic("t").partitions == 1


def test_a_topic_named_twice_is_answered_once_as_invalid_request(client: Any,
                                                                 log_manager: Any) -> None:
    log_manager.create_topic("t", 1)
    log_manager.create_topic("u", 1)
    results = _grow(client, R.CreatePartitionsTopic(name="t", count=2, assignments=None),
                    R.CreatePartitionsTopic(name="u", count=2, assignments=None),
                    R.CreatePartitionsTopic(name="t", count=4, assignments=None))
    assert results == {"t": (INVALID_REQUEST, "Duplicate topic in request."), "u": (0, None)}
    assert (log_manager.topic("t").partitions, log_manager.topic("u").partitions) == (1, 2)


def test_more_than_10000_new_partitions_in_one_request_are_refused_whole(
        client: Any, log_manager: Any) -> None:
    # Kafka's controller fails the request ("Unable to perform excessively large batch
    # operation.", POLICY_VIOLATION) before adding anything.
    log_manager.create_topic("t", 1)
    log_manager.create_topic("u", 1)
    results = _grow(client, R.CreatePartitionsTopic(name="t", count=6_001, assignments=None),
                    R.CreatePartitionsTopic(name="u", count=5_001, assignments=None))
    assert {code for code, _ in results.values()} == {44}
    assert "11000 new partitions" in results["t"][1] and "at most 10000" in results["t"][1]
    assert (log_manager.topic("t").partitions, log_manager.topic("u").partitions) == (1, 1)
