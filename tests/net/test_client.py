"""NetworkClient against the scriptable fake broker: negotiation, pairing, timeouts, faults."""

from __future__ import annotations

import gc
import os
import socket
import struct

import pytest

import samsa.protocol as p
from samsa.errors import (
    ForkedClientError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaTimeoutError,
    UnsupportedVersionError,
)
from samsa.net import (
    ClientRequest,
    ClientResponse,
    CorrelationIdMismatchError,
    NetworkClient,
    Node,
    send_and_receive,
    send_and_wait,
)
from samsa.net.connection_states import ConnectionState

from .conftest import connect, poll_until
from .fake_broker import FakeBroker


def node_of(broker: FakeBroker) -> Node:
    return Node(broker.node_id, "127.0.0.1", broker.port)


def new_client(broker: FakeBroker | None = None, **kw) -> NetworkClient:
    kw.setdefault("reconnect_backoff_ms", 10)
    return NetworkClient(**kw)


def metadata_request(*topics: str) -> p.MetadataRequest:
    return p.MetadataRequest(topics=[p.MetadataRequest.MetadataRequestTopic(name=t)
                                     for t in topics])


def produce_request(payload: bytes, acks: int = 1) -> p.ProduceRequest:
    part = p.ProduceRequest.PartitionProduceData(index=0, records=payload)
    return p.ProduceRequest(acks=acks, timeout_ms=1000, topic_data=[
        p.ProduceRequest.TopicProduceData(name="t", partition_data=[part])])


def produce_response(header, body) -> p.ProduceResponse:
    R = p.ProduceResponse
    return R(responses=[R.TopicProduceResponse(name=t.name, partition_responses=[
        R.PartitionProduceResponse(index=pd.index, error_code=0, base_offset=0)
        for pd in t.partition_data]) for t in body.topic_data])


# -- connection setup and ApiVersions ---------------------------------------------------------


def test_connect_sends_api_versions_first_and_becomes_ready(broker):
    client = new_client()
    node = node_of(broker)
    assert not client.ready(node, client._clock())  # starts connecting
    assert client.connection_states.state(node.id) is ConnectionState.CONNECTING
    connect(client, node)
    first = broker.received[0]
    assert (first.request_api_key, first.request_api_version) == (18, 4)
    versions = client.api_versions(node.id)
    assert versions is not None and versions.version_range(p.ApiKey.METADATA) == (0, 13)
    assert client.pick_version(node, p.ApiKey.METADATA, 0, 12) == 12
    assert client.pick_version(node, p.ApiKey.METADATA, 1, 5) == 5
    client.close()


def test_unsupported_api_versions_retries_with_advertised_max(broker):
    def reply(header):
        if header.request_api_version <= 2:
            return None  # answer normally
        # Kafka's answer: v0 layout, UNSUPPORTED_VERSION, and its ApiVersions range (0-2).
        return struct.pack(">hi", 35, 1) + struct.pack(">hhh", 18, 0, 2)

    broker.api_versions_reply = reply
    client = new_client()
    connect(client, node_of(broker))
    assert [(h.request_api_key, h.request_api_version) for h in broker.received[:2]] == \
        [(18, 4), (18, 2)]
    client.close()


def test_malformed_api_versions_error_falls_back_to_v0(broker):
    # The bytes librdkafka's mock sends for an ApiVersions v4 request (after the correlation id).
    malformed = bytes.fromhex("0023" "01" "001200000002" "00000000")
    broker.api_versions_reply = lambda h: malformed if h.request_api_version >= 3 else None
    client = new_client()
    connect(client, node_of(broker))
    assert [h.request_api_version for h in broker.received[:2]] == [4, 0]
    client.close()


def test_api_versions_failure_on_v0_closes_the_connection(broker):
    broker.api_versions_reply = lambda h: struct.pack(">hi", 35, 0)
    client = new_client(reconnect_backoff_ms=60_000)
    node = node_of(broker)
    client.ready(node, client._clock())
    poll_until(client, lambda: client.connection_failed(node))
    assert "ApiVersions v0" in str(client.last_connection_error(node))
    client.close()


def test_connection_refused_backs_off(broker):
    port = broker.port
    broker.close()
    client = new_client(reconnect_backoff_ms=50, reconnect_backoff_max_ms=1000)
    node = Node(0, "127.0.0.1", port)
    client.ready(node, client._clock())
    poll_until(client, lambda: client.connection_failed(node))
    now = client._clock()
    assert 0 < client.connection_delay(node, now) <= 60
    assert not client.ready(node, now)  # blacked out: no new attempt yet
    assert client.connection_states.state(node.id) is ConnectionState.DISCONNECTED
    assert client.metadata.update_requested()
    client.close()


def test_connection_setup_timeout():
    # A listener whose accept queue is full leaves further connects hanging in SYN_SENT.
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    fillers = []
    for _ in range(4):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(server.getsockname())
        fillers.append(s)
    client = new_client(socket_connection_setup_timeout_ms=100,
                        socket_connection_setup_timeout_max_ms=200)
    node = Node(0, "127.0.0.1", server.getsockname()[1])
    try:
        client.ready(node, client._clock())
        poll_until(client, lambda: client.connection_failed(node))
        error = client.last_connection_error(node)
        # Linux drops SYNs to a full accept queue, so the connect hangs until our timeout.
        assert "timed out" in str(error) and "socket.connection.setup.timeout.ms" in str(error)
    finally:
        client.close()
        for s in fillers:
            s.close()
        server.close()


# -- requests and responses -------------------------------------------------------------------


def test_pipelined_requests_complete_in_order_with_their_correlation_ids(broker):
    broker.topics = {"a": 1, "b": 2}
    client = new_client(max_in_flight_requests_per_connection=5)
    node = node_of(broker)
    connect(client, node)
    broker.coalesce = 5  # all five responses arrive in one segment
    done: list[ClientResponse] = []
    sent = []
    for i in range(5):
        assert client.ready(node, client._clock())
        req = ClientRequest(node, metadata_request("a" if i % 2 else "b"), callback=done.append)
        client.send(req)
        sent.append(req)
    assert not client.ready(node, client._clock())  # max in flight reached
    with pytest.raises(IllegalStateError, match="not ready"):
        client.send(ClientRequest(node, metadata_request("a")))
    returned: list[ClientResponse] = []
    poll_until(client, lambda: len(done) == 5, returned)
    assert [r.request for r in done] == sent == [r.request for r in returned]
    ids = [r.correlation_id for r in done]
    assert ids == sorted(ids) and len(set(ids)) == 5
    for r in done:
        assert r.body.topics[0].name == ("a" if len(r.body.topics[0].partitions) == 1 else "b")
        assert r.api_version == 13 and r.latency_ms >= 0 and not r.disconnected
    client.close()


def test_answered_requests_are_freed_without_the_cyclic_collector(broker):
    # A request and its send point at each other until the send is reported: then the
    # client drops the send's handle, so that reference counting frees an answered request
    # (and, for the producer, its batches) rather than gc's collections of old objects.
    broker.topics = {"a": 1}
    client = new_client(max_in_flight_requests_per_connection=5)
    node = node_of(broker)
    connect(client, node)
    done: list[ClientResponse] = []
    gc.collect()
    gc.disable()
    try:
        for _ in range(3):
            poll_until(client, lambda: client.ready(node, client._clock()))
            client.send(ClientRequest(node, metadata_request("a"), callback=done.append))
        poll_until(client, lambda: len(done) == 3)
        sends = [r.request.send for r in done]
        assert all(s is not None and s.completed and s.request is None for s in sends)
        done.clear()
        del sends
        assert gc.collect() == 0
    finally:
        gc.enable()
        client.close()


def test_responses_dribbled_a_few_bytes_at_a_time(broker):
    broker.topics = {f"topic-{i}": 3 for i in range(20)}
    broker.dribble = True
    client = new_client()
    node = node_of(broker)
    body = send_and_wait(client, node, metadata_request(*broker.topics), 20_000)
    assert sorted(t.name for t in body.topics) == sorted(broker.topics)
    client.close()


def test_large_request_written_in_pieces(broker):
    broker.read_delay_s = 0.0002
    broker.handler = produce_response
    client = new_client(send_buffer_bytes=4096)
    node = node_of(broker)
    connect(client, node)
    payload = os.urandom(2 * 1024 * 1024)
    got: list[ClientResponse] = []
    client.send(ClientRequest(node, produce_request(payload), callback=got.append))
    # The socket cannot take 2 MiB at once: the send is partial, so the node is not ready.
    assert not client.in_flight_requests.can_send_more(node.id)
    assert not client.is_ready(node, client._clock())
    poll_until(client, lambda: bool(got))
    assert got[0].body.responses[0].partition_responses[0].error_code == 0
    assert client.ready(node, client._clock())
    client.close()


def test_correlation_id_mismatch_disconnects(broker):
    broker.corrupt_correlation = True  # ApiVersions too: the very first response is wrong
    client = new_client(reconnect_backoff_ms=60_000)
    node = node_of(broker)
    client.ready(node, client._clock())
    poll_until(client, lambda: client.connection_failed(node))
    assert isinstance(client.last_connection_error(node), CorrelationIdMismatchError)
    client.close()


def test_correlation_id_mismatch_fails_in_flight_requests(broker):
    client = new_client(reconnect_backoff_ms=60_000)
    node = node_of(broker)
    connect(client, node)
    broker.corrupt_correlation = True
    got: list[ClientResponse] = []
    client.send(ClientRequest(node, metadata_request(), callback=got.append))
    poll_until(client, lambda: bool(got))
    assert got[0].disconnected and isinstance(got[0].error, CorrelationIdMismatchError)
    assert "correlation id" in str(got[0].error)
    client.close()


@pytest.mark.parametrize("broker_answers", [True, False])
def test_request_without_response_completes_on_send(broker, broker_answers):
    broker.handler = produce_response if broker_answers else (lambda h, b: None)
    broker.topics = {"a": 1}
    client = new_client()
    node = node_of(broker)
    connect(client, node)
    got: list[ClientResponse] = []
    for _ in range(3):
        poll_until(client, lambda: client.ready(node, client._clock()))
        client.send(ClientRequest(node, produce_request(b"x" * 100, acks=0),
                                  expect_response=False, callback=got.append))
    poll_until(client, lambda: len(got) == 3)
    assert all(r.body is None and not r.disconnected for r in got)
    # A stray answer (librdkafka's mock answers acks=0) must not break the pairing.
    body = send_and_wait(client, node, metadata_request("a"), 10_000)
    assert body.topics[0].name == "a"
    assert client.connection_states.state(node.id) is ConnectionState.READY
    client.close()


def test_request_timeout_disconnects_and_fails_in_flight(broker):
    broker.handler = lambda h, b: None  # never answers Produce
    client = new_client(request_timeout_ms=200)
    node = node_of(broker)
    connect(client, node)
    got: list[ClientResponse] = []
    client.send(ClientRequest(node, produce_request(b"x"), callback=got.append))
    client.send(ClientRequest(node, produce_request(b"y"), callback=got.append))
    poll_until(client, lambda: len(got) == 2)
    for r in got:
        assert r.disconnected and r.timed_out
        assert isinstance(r.error, KafkaTimeoutError) and "request.timeout.ms" in str(r.error)
    assert client.connection_failed(node)
    assert client.metadata.update_requested()
    client.close()


def test_per_request_timeout(broker):
    broker.handler = lambda h, b: None
    client = new_client(request_timeout_ms=60_000)
    node = node_of(broker)
    with pytest.raises(KafkaTimeoutError):
        send_and_wait(client, node, produce_request(b"x"), 10_000, request_timeout_ms=100)
    client.close()


def test_version_mismatch_is_reported_without_sending(broker):
    client = new_client()
    node = node_of(broker)
    connect(client, node)
    before = len(broker.received)
    got: list[ClientResponse] = []
    client.send(ClientRequest(node, metadata_request(), min_version=14, max_version=20,
                              callback=got.append))
    returned = client.poll(0)
    assert got and returned == got
    assert isinstance(got[0].version_mismatch, UnsupportedVersionError)
    assert len(broker.received) == before
    with pytest.raises(UnsupportedVersionError):
        send_and_wait(client, node, metadata_request(), 5000, min_version=14, max_version=20)
    client.close()


def test_close_node_cancels_in_flight_requests(broker):
    broker.handler = lambda h, b: None
    client = new_client()
    node = node_of(broker)
    connect(client, node)
    got: list[ClientResponse] = []
    client.send(ClientRequest(node, produce_request(b"x"), callback=got.append))
    client.close(node.id)
    client.poll(0)
    assert got[0].disconnected and not got[0].timed_out
    assert client.connection_states.state(node.id) is ConnectionState.DISCONNECTED
    assert client.ready(node, client._clock()) is False  # reconnects without backoff
    client.close()


def test_remote_disconnect_fails_requests_and_requests_metadata(broker):
    broker.handler = lambda h, b: None
    client = new_client(reconnect_backoff_ms=60_000)
    node = node_of(broker)
    connect(client, node)
    got: list[ClientResponse] = []
    client.send(ClientRequest(node, produce_request(b"x"), callback=got.append))
    broker.drop_connections()
    poll_until(client, lambda: bool(got))
    assert got[0].disconnected and not got[0].timed_out
    assert client.metadata.update_requested()
    client.close()


def test_send_and_wait_connection_refused():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    client = new_client()
    with pytest.raises(KafkaConnectionError, match="failed"):
        send_and_wait(client, Node(0, "127.0.0.1", port), metadata_request(), 5000)
    client.close()


def test_send_and_receive_returns_the_response(broker):
    client = new_client()
    response = send_and_receive(client, node_of(broker), metadata_request(), 5000)
    assert response.api_key == p.ApiKey.METADATA
    assert response.has_response and response.destination == 0
    client.close()


# -- bootstrap and the metadata updater --------------------------------------------------------


def test_bootstrap_metadata_then_real_node_ids(broker):
    broker.node_id = 7
    broker.topics = {"t": 2}
    client = new_client(bootstrap_servers=broker.bootstrap)
    md = client.metadata
    assert [n.id for n in md.fetch().nodes] == [-1]
    md.add("t")
    v = md.request_update()
    poll_until(client, lambda: md.update_version > v)
    cluster = md.fetch()
    assert [n.id for n in cluster.nodes] == [7] and cluster.leader_for(("t", 1)).id == 7
    assert all(ch.id >= 0 for ch in client.selector.channels)  # bootstrap connection closed
    # Metadata requests ask for the topics of interest, non-flexible or flexible alike.
    assert any(h.request_api_key == p.ApiKey.METADATA for h in broker.received)
    client.close()


def test_client_unusable_after_close(broker):
    client = new_client()
    client.close()
    client.close()  # twice is fine
    with pytest.raises(IllegalStateError, match="closed"):
        client.poll(0)


def test_forked_child_cannot_use_the_client(broker):
    client = new_client()
    connect(client, node_of(broker))
    pid = os.fork()
    if pid == 0:  # the child
        code = 1
        try:
            client.poll(0)
        except ForkedClientError as e:
            code = 0 if "create clients after fork" in str(e).lower() or \
                "after os.fork" in str(e) else 2
        except BaseException:  # noqa: BLE001 -- report, never raise, in the child
            code = 3
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    client.poll(0)  # still fine in the parent
    client.close()


def test_broker_without_metadata_support_is_a_fatal_metadata_error(broker):
    # ApiVersions v0 answer that lists only ApiVersions itself.
    broker.api_versions_reply = lambda h: struct.pack(">hi", 0, 1) + struct.pack(">hhh", 18, 0, 4)
    client = new_client(bootstrap_servers=broker.bootstrap)
    v = client.metadata.request_update()
    poll_until(client, lambda: client.api_versions(-1) is not None)
    client.poll(0)
    with pytest.raises(UnsupportedVersionError, match="Metadata"):
        client.metadata.await_update(v, 0)
    client.close()
