"""CreateTopics capacity checks and storage failures (issue: a huge CreateTopics gets an error
code, never a half-made topic); the other CreateTopics answers are in test_topics_admin.py."""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from samsa.broker.apis import BrokerNode, KafkaApis
from samsa.broker.log import LogManager
from samsa.broker.log import manager as manager_module
from samsa.protocol import CreateTopicsRequest, MetadataRequest

from .conftest import Client

POLICY_VIOLATION = 44
KAFKA_STORAGE_ERROR = 56


def _create(client: Any, *topics: tuple[str, int], validate_only: bool = False) -> dict[str, Any]:
    request = CreateTopicsRequest(topics=[
        CreateTopicsRequest.CreatableTopic(name=name, num_partitions=count, replication_factor=1,
                                           assignments=[], configs=[])
        for name, count in topics], timeout_ms=1000, validate_only=validate_only)
    return {t.name: t for t in client.call(request, 7).topics}


def _partition_dirs(data: Path) -> list[str]:
    return sorted(p.name for p in data.iterdir() if p.is_dir())


def test_a_request_for_100000_partitions_is_refused_whole_with_kafkas_policy_violation(
        client: Any, log_manager: Any, tmp_path: Path) -> None:
    results = _create(client, ("huge", 100_000), ("small", 1))
    assert {n: r.error_code for n, r in results.items()} == {"huge": POLICY_VIOLATION,
                                                             "small": POLICY_VIOLATION}
    message = results["huge"].error_message
    assert message.startswith("Excessively large number of partitions per request")
    assert "100001" in message and "10000" in message and "max.broker.partitions" in message
    assert log_manager.topics() == {} and _partition_dirs(tmp_path / "data") == []
    # The sum counts: two topics within the limit each but not together.
    results = _create(client, ("a", 6_000), ("b", 5_000), validate_only=True)
    assert {r.error_code for r in results.values()} == {POLICY_VIOLATION}
    assert _create(client, ("c", 3))["c"].error_code == 0


@pytest.fixture
def small_broker(tmp_path: Path) -> Any:
    config = {"max.broker.partitions": 10, "num.partitions": 5}
    manager = LogManager(tmp_path / "small", config)
    apis = KafkaApis(manager, node=BrokerNode(node_id=1, port=19092), config=config)
    yield Client(apis), manager
    apis.close()
    manager.close()


def test_creations_past_max_broker_partitions_get_policy_violation_naming_the_setting(
        small_broker: Any) -> None:
    from samsa.protocol import CreatePartitionsRequest

    client, manager = small_broker
    assert _create(client, ("a", 6))["a"].error_code == 0
    refused = _create(client, ("b", 5))["b"]
    assert refused.error_code == POLICY_VIOLATION
    assert "max.broker.partitions=10" in refused.error_message
    grow = CreatePartitionsRequest(topics=[CreatePartitionsRequest.CreatePartitionsTopic(
        name="a", count=11, assignments=None)], timeout_ms=1000, validate_only=False)
    [result] = client.call(grow, 3).results
    assert result.error_code == POLICY_VIOLATION and "max.broker.partitions=10" in \
        result.error_message
    # Auto-creation counts too (num.partitions=5 does not fit; the topic is not made).
    metadata = client.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
        name="auto")], allow_auto_topic_creation=True), 9)
    assert [(t.name, t.error_code) for t in metadata.topics] == [("auto", POLICY_VIOLATION)]
    assert sorted(manager.topics()) == ["a"]


def _no_space_for_partition_metadata(monkeypatch: pytest.MonkeyPatch, after: int) -> None:
    written = [0]
    real = manager_module.atomic_write

    def write(path: Path, data: bytes, *, sync: bool = True) -> None:
        if path.name == "partition.metadata":
            written[0] += 1
            if written[0] > after:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        real(path, data, sync=sync)

    monkeypatch.setattr(manager_module, "atomic_write", write)


def test_disk_full_during_create_topics_answers_storage_error_and_leaves_nothing(
        client: Any, log_manager: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "samsa")
    with monkeypatch.context() as full_disk:
        _no_space_for_partition_metadata(full_disk, after=3)
        for attempt in range(2):  # a client retrying
            result = _create(client, ("t", 8))["t"]
            assert result.error_code == KAFKA_STORAGE_ERROR
            assert f"t-{3 if attempt == 0 else 0}/partition.metadata" in result.error_message
            assert "No space left on device" in result.error_message
    assert log_manager.topics() == {} and _partition_dirs(tmp_path / "data") == []
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and errors[0].exc_info is None  # once, and no traceback
    assert _create(client, ("t", 8))["t"].error_code == 0  # space returned


def test_disk_full_during_auto_creation_answers_storage_error_not_a_traceback(
        client: Any, log_manager: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="auto")],
                              allow_auto_topic_creation=True)
    with monkeypatch.context() as full_disk:
        _no_space_for_partition_metadata(full_disk, after=1)
        metadata = client.call(request, 9)
    assert [(t.name, t.error_code) for t in metadata.topics] == [("auto", KAFKA_STORAGE_ERROR)]
    assert not any(r.exc_info for r in caplog.records)
    assert log_manager.topics() == {} and _partition_dirs(tmp_path / "data") == []
    [topic] = client.call(request, 9).topics  # space returned: auto-creation works
    assert topic.error_code == 0 and len(topic.partitions) == 2


def test_a_broker_answers_create_topics_of_100000_partitions_and_stays_whole(
        broker_process: Any, raw_client: Any) -> None:
    """Against a broker subprocess: an error code with a message (not a dropped connection),
    its descriptor count unchanged, nothing of the topic after a restart, auto-creation fine."""
    process = broker_process().start()
    pid = process.proc.pid
    client = raw_client(process.port)
    assert client.create_topic("before", 1) == 0
    descriptors = len(os.listdir(f"/proc/{pid}/fd"))
    [result] = client.call(CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name="huge", num_partitions=100_000, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=30_000), 5).topics
    assert result.error_code == POLICY_VIOLATION
    assert "at most 10000" in result.error_message
    assert len(os.listdir(f"/proc/{pid}/fd")) == descriptors
    metadata = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="after")],
                               allow_auto_topic_creation=True)
    assert client.call(metadata, 9).topics[0].error_code == 0
    assert process.stop() == 0
    assert not [p for p in process.data_dir.iterdir() if p.name.startswith("huge")]
    process.start()
    client = raw_client(process.port)
    assert client.create_topic("huge", 3) == 0  # the name was never taken
    assert [p for p in process.data_dir.iterdir() if p.name.startswith("huge")]
    assert client.call(metadata, 9).topics[0].error_code == 0
    process.stop()


# -- what one broker can hold (issue 16: a setting the broker accepts, it honours) ----------------

INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_CONFIG = 40


def _create_one(client: Any, name: str, *, replication: int = 1, partitions: int = 1,
                assignments: list[Any] | None = None,
                configs: dict[str, str] | None = None) -> Any:
    topic = CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=replication,
        assignments=assignments or [], configs=[
            CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
            for k, v in (configs or {}).items()])
    [result] = client.call(CreateTopicsRequest(topics=[topic], timeout_ms=1000,
                                               validate_only=False), 7).topics
    return result


def test_replication_factor_above_one_gets_kafkas_answer(client: Any, log_manager: Any) -> None:
    result = _create_one(client, "r3", replication=3)
    assert result.error_code == INVALID_REPLICATION_FACTOR
    assert result.error_message == "Replication factor: 3 larger than available brokers: 1."
    assert log_manager.topic("r3") is None
    # -1: the broker's default.replication.factor (1 here, refused above 1 at start).
    assert _create_one(client, "rdefault", replication=-1).error_code == 0


def test_assignment_to_other_brokers_is_refused(client: Any, log_manager: Any) -> None:
    assign = CreateTopicsRequest.CreatableReplicaAssignment
    result = _create_one(client, "a", replication=-1, partitions=-1,
                         assignments=[assign(partition_index=0, broker_ids=[1, 2])])
    assert result.error_code == INVALID_REPLICA_ASSIGNMENT
    assert "one broker 1" in result.error_message
    ok = _create_one(client, "b", replication=-1, partitions=-1,
                     assignments=[assign(partition_index=0, broker_ids=[1])])
    assert ok.error_code == 0


def test_topic_settings_one_node_cannot_honour(client: Any, log_manager: Any) -> None:
    refused = _create_one(client, "pre", configs={"preallocate": "true"})
    assert refused.error_code == INVALID_CONFIG
    assert "preallocate" in refused.error_message and "false" in refused.error_message
    assert log_manager.topic("pre") is None
    bad = _create_one(client, "isr0", configs={"min.insync.replicas": "0"})
    assert bad.error_code == INVALID_CONFIG
    ok = _create_one(client, "ok", configs={"preallocate": "false", "min.insync.replicas": "2",
                                            "segment.jitter.ms": "1000",
                                            "file.delete.delay.ms": "0"})
    assert ok.error_code == 0
    config = log_manager.get_log("ok", 0).config
    assert (config.segment_jitter_ms, config.file_delete_delay_ms) == (1000, 0)
