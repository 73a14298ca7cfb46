"""NetworkClient against librdkafka's mock cluster: a Kafka implementation nobody here wrote."""

from __future__ import annotations

import pytest

import samsa.protocol as p
from samsa.net import (
    ClientRequest,
    ClientResponse,
    NetworkClient,
    TopicPartition,
    send_and_wait,
)
from samsa.records.builder import RecordBatchBuilder
from tests.support.mock_cluster import MockCluster

from .conftest import connect, poll_until


def bootstrapped(mc: MockCluster, *topics: str, **kw) -> NetworkClient:
    kw.setdefault("reconnect_backoff_ms", 10)
    kw.setdefault("reconnect_backoff_max_ms", 100)
    client = NetworkClient(bootstrap_servers=mc.bootstrap_servers, **kw)
    md = client.metadata
    for t in topics:
        md.add(t)
    v = md.request_update()
    poll_until(client, lambda: md.update_version > v and not md.fetch().is_bootstrap)
    return client


def node(client: NetworkClient, node_id: int):
    n = client.metadata.fetch().node_by_id(node_id)
    assert n is not None
    return n


def produce(acks: int, topic: str = "t", partition: int = 0) -> p.ProduceRequest:
    b = RecordBatchBuilder()
    b.append(None, b"k", b"v")
    part = p.ProduceRequest.PartitionProduceData(index=partition, records=b.build())
    return p.ProduceRequest(acks=acks, timeout_ms=5000, topic_data=[
        p.ProduceRequest.TopicProduceData(name=topic, partition_data=[part])])


def test_bootstrap_then_real_node_ids_and_api_versions_fallback(mock):
    client = bootstrapped(mock, "t")
    cluster = client.metadata.fetch()
    assert sorted(n.id for n in cluster.nodes) == [1, 2, 3]
    assert len(cluster.partitions_for_topic("t")) == 4
    assert all(pi.leader is not None for pi in cluster.partitions_for_topic("t"))
    assert cluster.cluster_id
    assert all(ch.id > 0 for ch in client.selector.channels)  # bootstrap connection closed
    n1 = node(client, 1)
    connect(client, n1)
    versions = client.api_versions(1)
    # The mock answers ApiVersions v4 with a malformed body; we fell back and got its table.
    assert versions is not None and versions.version_range(p.ApiKey.API_VERSIONS) == (0, 2)
    assert client.pick_version(n1, p.ApiKey.METADATA, 0, 12) == 12
    assert client.pick_version(n1, p.ApiKey.PRODUCE, 3, 12) == 10  # Produce: the mock's maximum
    client.close()


def test_pipelined_requests_in_order(mock):
    client = bootstrapped(mock, "t", max_in_flight_requests_per_connection=5)
    n2 = node(client, 2)
    connect(client, n2)
    done: list[ClientResponse] = []
    sent = []
    for _ in range(5):
        assert client.ready(n2, client._clock())  # each send went out whole at once
        req = ClientRequest(n2, p.MetadataRequest(topics=None), callback=done.append)
        client.send(req)
        sent.append(req)
    poll_until(client, lambda: len(done) == 5)
    assert [r.request for r in done] == sent
    assert all(r.body is not None and len(r.body.brokers) == 3 for r in done)
    client.close()


def test_produce_acks_1_and_acks_0_with_the_mocks_unexpected_answer(mock):
    client = bootstrapped(mock, "t")
    leader = client.metadata.fetch().leader_for(TopicPartition("t", 0))
    body = send_and_wait(client, leader, produce(acks=1), 10_000)
    assert body.responses[0].partition_responses[0].error_code == 0
    got: list[ClientResponse] = []
    for _ in range(3):
        poll_until(client, lambda: client.ready(leader, client._clock()))
        client.send(ClientRequest(leader, produce(acks=0), expect_response=False,
                                  callback=got.append))
    poll_until(client, lambda: len(got) == 3)
    assert all(r.body is None and not r.disconnected for r in got)
    # The mock answers acks=0 anyway; those answers are dropped and pairing stays intact.
    body = send_and_wait(client, leader, produce(acks=1), 10_000)
    offset = body.responses[0].partition_responses[0].base_offset
    assert offset == 4  # one acks=1 record, three acks=0 records, then this one
    assert client.is_connected(leader.id)
    client.close()


def test_request_timeout_when_the_broker_is_slower(mock):
    client = bootstrapped(mock, "t", request_timeout_ms=200)
    n1 = node(client, 1)
    connect(client, n1)
    mock.set_rtt(1, 2000)
    got: list[ClientResponse] = []
    client.send(ClientRequest(n1, p.MetadataRequest(topics=None), callback=got.append))
    poll_until(client, lambda: bool(got))
    assert got[0].timed_out and got[0].disconnected
    assert client.connection_failed(n1)
    mock.set_rtt(1, 0)
    connect(client, n1)  # reconnects once the backoff has passed
    client.close()


def test_reconnect_backoff_while_a_broker_is_down(mock):
    client = bootstrapped(mock, "t", reconnect_backoff_ms=20, reconnect_backoff_max_ms=400)
    n3 = node(client, 3)
    connect(client, n3)
    mock.broker_down(3)
    poll_until(client, lambda: client.connection_failed(n3))
    delays = []
    for _ in range(4):
        # Each failed attempt lengthens the backoff (exponential, with jitter).
        poll_until(client, lambda: client.connection_states.can_connect(3, client._clock()))
        state = client.connection_states.get(3)
        assert state is not None
        delays.append(state.reconnect_backoff_ms)
        assert not client.ready(n3, client._clock())  # starts a connect that will fail
        poll_until(client, lambda: client.connection_failed(n3))
    assert delays[-1] > delays[0]
    assert all(d <= 400 for d in delays)
    mock.broker_up(3)
    connect(client, n3)
    client.close()


def test_downed_leader_reads_as_unknown_leader(mock):
    client = bootstrapped(mock, "t")
    tp_nodes = {pi.partition: pi.leader.id for pi in client.metadata.fetch().partitions_for_topic("t")}
    victim = tp_nodes[0]
    mock.broker_down(victim)
    md = client.metadata
    md.request_update()
    # The mock still names the downed broker leader but drops it from the broker list.
    poll_until(client, lambda: md.fetch().node_by_id(victim) is None)
    cluster = md.fetch()
    assert cluster.node_by_id(victim) is None
    assert cluster.leader_for(TopicPartition("t", 0)) is None
    assert TopicPartition("t", 0) not in {
        pi.topic_partition for pi in cluster.available_partitions_for_topic("t")}
    assert md.update_requested()  # keeps refreshing until a leader is known
    client.close()


def test_least_loaded_node_prefers_idle_ready_nodes(mock):
    client = bootstrapped(mock, "t")
    nodes = {i: node(client, i) for i in (1, 2, 3)}
    for n in nodes.values():
        connect(client, n)
    mock.set_rtt(1, 5000)
    mock.set_rtt(2, 5000)
    for i in (1, 2):
        client.send(ClientRequest(nodes[i], p.MetadataRequest(topics=[])))
    assert client.least_loaded_node(client._clock()).id == 3
    client.send(ClientRequest(nodes[3], p.MetadataRequest(topics=[])))
    client.send(ClientRequest(nodes[3], p.MetadataRequest(topics=[])))
    assert client.least_loaded_node(client._clock()).id in (1, 2)
    client.close()


def test_metadata_refresh_on_demand_and_periodic(mock):
    client = bootstrapped(mock, "t", metadata_max_age_ms=100)
    md = client.metadata
    v = md.update_version
    poll_until(client, lambda: md.update_version >= v + 2)  # periodic: nobody asked
    mock.create_topic("later", 2)
    md.add("later")  # on demand: a new topic triggers a (partial) update at once
    poll_until(client, lambda: md.fetch().partition_count_for_topic("later") == 2)
    assert md.fetch().partition_count_for_topic("t") == 4  # the partial update kept "t"
    client.close()


def test_unused_topics_expire(mock):
    client = bootstrapped(mock, "t", "u", metadata_max_idle_ms=50, metadata_max_age_ms=100)
    md = client.metadata
    assert md.fetch().has_topic("u")
    poll_until(client, lambda: not md.fetch().has_topic("u"))
    assert md.topics() == []
    client.close()


def test_auto_created_topic_appears(mock):
    client = bootstrapped(mock)
    md = client.metadata
    md.add("auto-made")
    poll_until(client, lambda: md.fetch().partition_count_for_topic("auto-made") == 4)
    client.close()


@pytest.mark.parametrize("version_cap", [0, 4, 9])
def test_metadata_versions_below_the_flexible_ones(mock, version_cap):
    client = bootstrapped(mock, "t", metadata_max_version=version_cap)
    assert len(client.metadata.fetch().partitions_for_topic("t")) == 4
    client.close()
