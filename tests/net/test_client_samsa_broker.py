"""NetworkClient against samsa's own broker: negotiation at our top versions, bootstrap,
auto-created topics, produce with acks=1 and acks=0 (which the broker does not answer)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

import samsa.protocol as p
from samsa.broker import Broker
from samsa.net import (
    ClientRequest,
    ClientResponse,
    NetworkClient,
    TopicPartition,
    send_and_wait,
)
from samsa.protocol import APIS, ApiKey
from samsa.records.builder import RecordBatchBuilder

from .conftest import connect, poll_until


@pytest.fixture
def samsa_broker(make_broker: Callable[..., Broker]) -> Broker:
    return make_broker()


def produce(acks: int, value: bytes) -> p.ProduceRequest:
    b = RecordBatchBuilder()
    b.append(None, None, value)
    part = p.ProduceRequest.PartitionProduceData(index=0, records=b.build())
    return p.ProduceRequest(acks=acks, timeout_ms=5000, topic_data=[
        p.ProduceRequest.TopicProduceData(name="events", partition_data=[part])])


def test_bootstrap_negotiate_and_produce(samsa_broker):
    client = NetworkClient(bootstrap_servers=samsa_broker.bootstrap_servers)
    md = client.metadata
    md.add("events")
    v = md.request_update()
    poll_until(client, lambda: md.update_version > v and md.fetch().has_topic("events"))
    cluster = md.fetch()
    assert [n.id for n in cluster.nodes] == [samsa_broker.node_id]
    leader = cluster.leader_for(TopicPartition("events", 0))
    assert leader is not None
    connect(client, leader)
    versions = client.api_versions(leader.id)
    assert versions is not None
    # Our broker speaks ApiVersions v4, so no fallback was needed.
    assert versions.version_range(ApiKey.API_VERSIONS)[1] >= APIS[ApiKey.API_VERSIONS].max_version

    body = send_and_wait(client, leader, produce(1, b"first"), 10_000)
    assert body.responses[0].partition_responses[0].error_code == 0
    got: list[ClientResponse] = []
    poll_until(client, lambda: client.ready(leader, client._clock()))
    client.send(ClientRequest(leader, produce(0, b"fire and forget"), expect_response=False,
                              callback=got.append))
    poll_until(client, lambda: bool(got))
    assert got[0].body is None and not got[0].disconnected
    body = send_and_wait(client, leader, produce(1, b"third"), 10_000)
    assert body.responses[0].partition_responses[0].base_offset == 2
    client.close()
