"""AdminClient against librdkafka's mock cluster: what it serves (Metadata) works and agrees
with confluent-kafka; what it does not serve fails with a clear "not supported" error."""

from __future__ import annotations

from collections.abc import Iterator

import confluent_kafka.admin
import pytest

from samsa.admin import AdminClient
from samsa.errors import (
    KafkaTimeoutError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from tests.support.mock_cluster import MockCluster

METADATA = 3


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    with MockCluster(3, topics={"four": 4}) as c:
        c.create_topic("replicated", 2, replication_factor=3)
        yield c


@pytest.fixture
def admin(cluster: MockCluster) -> Iterator[AdminClient]:
    with AdminClient(bootstrap_servers=cluster.bootstrap_servers, retry_backoff_ms=10) as a:
        yield a


def test_list_and_describe_agree_with_confluent_kafka(cluster: MockCluster,
                                                      admin: AdminClient) -> None:
    assert admin.list_topics() == ["four", "replicated"]
    ours = admin.describe_topics(["four", "replicated"])
    theirs = confluent_kafka.admin.AdminClient(
        {"bootstrap.servers": cluster.bootstrap_servers}).list_topics(timeout=10).topics
    for name, description in ours.items():
        assert not isinstance(description, Exception)
        assert len(description.partitions) == len(theirs[name].partitions)
        for p in description.partitions:
            other = theirs[name].partitions[p.partition]
            assert (p.leader, list(p.replicas), list(p.isr)) == (
                other.leader, other.replicas, other.isrs)
    assert {p.leader for p in ours["four"].partitions} == {1, 2, 3}  # type: ignore[union-attr]
    assert ours["replicated"].replication_factor == 3  # type: ignore[union-attr]


def test_describe_cluster_falls_back_to_metadata(cluster: MockCluster,
                                                 admin: AdminClient) -> None:
    described = admin.describe_cluster()  # the mock does not serve DescribeCluster
    assert [n.id for n in described.nodes] == [1, 2, 3]
    assert all(n.host == "127.0.0.1" for n in described.nodes)
    theirs = confluent_kafka.admin.AdminClient(
        {"bootstrap.servers": cluster.bootstrap_servers}).list_topics(timeout=10)
    assert described.cluster_id == theirs.cluster_id


@pytest.mark.parametrize("operation, call", [
    ("creating topics", lambda a: a.create_topics(["new"])),
    ("deleting topics", lambda a: a.delete_topics(["four"])),
    ("adding partitions", lambda a: a.create_partitions({"four": 8})),
    ("describing configs", lambda a: a.describe_configs(["four"])),
    ("deleting records", lambda a: a.delete_records({("four", 0): 0})),
])
def test_unserved_apis_fail_clearly(admin: AdminClient, operation: str, call: object) -> None:
    with pytest.raises(UnsupportedVersionError) as info:
        call(admin)  # type: ignore[operator]
    assert f"{operation} is not supported by this broker" in str(info.value)
    assert admin.list_topics() == ["four", "replicated"]  # nothing changed


def test_describing_never_creates_topics(admin: AdminClient) -> None:
    # The mock creates unknown topics on Metadata unless the request says not to.
    with pytest.raises(UnknownTopicOrPartitionError, match="cannot describe topic 'ghost'"):
        admin.describe_topics(["ghost"])
    assert "ghost" not in admin.list_topics()


def test_old_metadata_cannot_describe_without_creating(cluster: MockCluster,
                                                       admin: AdminClient) -> None:
    cluster.set_api_version(METADATA, 0, 3)
    assert admin.list_topics() == ["four", "replicated"]
    with pytest.raises(UnsupportedVersionError, match="reading metadata is not supported"):
        admin.describe_topics(["four"])


def test_leader_not_available_is_retried_until_the_time_limit(cluster: MockCluster,
                                                              admin: AdminClient) -> None:
    admin.list_topics()
    cluster.start_request_tracking()
    cluster.set_topic_error("four", 5)  # LEADER_NOT_AVAILABLE
    with pytest.raises(KafkaTimeoutError) as info:
        admin.describe_topics(["four"], timeout_ms=500)
    assert "describing topics ['four']" in str(info.value)
    assert "LEADER_NOT_AVAILABLE" in str(info.value)
    assert len(cluster.requests(METADATA)) >= 2
    cluster.set_topic_error("four", 0)
    assert len(admin.describe_topics(["four"])["four"].partitions) == 4  # type: ignore[union-attr]


def test_a_down_broker_is_avoided_and_reads_as_no_leader(cluster: MockCluster,
                                                         admin: AdminClient) -> None:
    cluster.set_partition_leader("four", 0, 1)
    cluster.broker_down(1)
    # Broker 1 may be the one the client tries first; it moves on to another.
    assert admin.list_topics() == ["four", "replicated"]
    described = admin.describe_topics(["four"])["four"]
    assert described.partitions[0].leader is None  # type: ignore[union-attr]
    assert 1 not in [n.id for n in admin.describe_cluster().nodes]


def test_leaderless_partition(cluster: MockCluster, admin: AdminClient) -> None:
    cluster.set_partition_leader("four", 2, -1)
    described = admin.describe_topics(["four"])["four"]
    assert described.partitions[2].leader is None  # type: ignore[union-attr]
