"""NetworkClient over TLS against the fake broker as a TLS listener: the non-blocking handshake,
large frames both ways through the SSL socket, and each TLS failure as SslAuthenticationError
naming the broker and the check that failed (never retried on the caller's behalf)."""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import samsa.protocol as p
from samsa.errors import KafkaConnectionError, SslAuthenticationError
from samsa.net import ClientRequest, NetworkClient, Node, send_and_wait
from samsa.net.channel import SslKafkaChannel
from samsa.net.sync import await_ready
from samsa.security.tls import client_ssl_context, load_key_store, load_trust_store
from tests.support.certs import TlsFiles, make_tls_files

from .conftest import connect, poll_until
from .fake_broker import FakeBroker


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def localhost_only(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls_files(tmp_path_factory.mktemp("tls-localhost"), hosts=("localhost",))


def server_context(files: TlsFiles, *, require_client_cert: bool = False) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    load_key_store(ctx, location=str(files.broker_keystore), key_pem=None, chain_pem=None, key_password=None)
    if require_client_cert:
        ctx.verify_mode = ssl.CERT_REQUIRED
        load_trust_store(ctx, location=str(files.ca), certificates_pem=None)
    return ctx


def tls_client(files: TlsFiles, trust: Path | None = None, **settings: object) -> NetworkClient:
    config = {"security.protocol": "SSL", "ssl.truststore.type": "PEM",
              "ssl.truststore.location": str(trust or files.ca), "reconnect.backoff.ms": 10,
              **{k.replace("_", "."): v for k, v in settings.items()}}
    return NetworkClient.from_config(config)


@pytest.fixture
def tls_broker(files: TlsFiles) -> Iterator[FakeBroker]:
    with FakeBroker(ssl_context=server_context(files)) as b:
        yield b


def node_of(broker: FakeBroker) -> Node:
    return Node(broker.node_id, "127.0.0.1", broker.port)


def test_requests_and_large_frames_travel_over_tls(files: TlsFiles, tls_broker: FakeBroker) -> None:
    # 20,000 topics make a metadata answer of several hundred KB: many TLS records per frame.
    tls_broker.topics = {f"topic-{i:05d}": 1 for i in range(20_000)}
    received: list[int] = []

    def handler(header: object, body: p.ProduceRequest) -> None:
        received.append(len(body.topic_data[0].partition_data[0].records))

    tls_broker.handler = handler
    tls_broker.read_delay_s = 0.0002  # a slow reader: our writes meet a full socket buffer
    with tls_client(files) as client:
        node = node_of(tls_broker)
        connect(client, node)
        channel = client.selector.channel(node.id)
        assert isinstance(channel, SslKafkaChannel)
        assert channel.sock.version() in ("TLSv1.2", "TLSv1.3")  # type: ignore[attr-defined]
        body = send_and_wait(client, node, p.MetadataRequest(topics=None))
        assert len(body.topics) == 20_000
        # A request of 3 MB: written across many writable events, retried with the same bytes.
        big = bytes(range(256)) * (3 * 4096)
        part = p.ProduceRequest.PartitionProduceData(index=0, records=big)
        request = p.ProduceRequest(acks=0, timeout_ms=1000, topic_data=[
            p.ProduceRequest.TopicProduceData(name="t", partition_data=[part])])
        refused = 0
        write = SslKafkaChannel.write

        def counting_write(self: SslKafkaChannel, completed: list[Any]) -> None:
            nonlocal refused
            before = len(self.sends)
            write(self, completed)
            refused += bool(self.sends) and len(self.sends) == before
        SslKafkaChannel.write = counting_write  # type: ignore[method-assign]
        try:
            for _ in range(3):
                client.send(ClientRequest(node, request, expect_response=False), client._clock())
                poll_until(client, lambda: client.in_flight_request_count(node.id) == 0)
        finally:
            SslKafkaChannel.write = write  # type: ignore[method-assign]
        assert refused > 0  # OpenSSL refused writes, which were retried with the same bytes
        # The stream is still in step: another request gets its answer.
        assert len(send_and_wait(client, node, p.MetadataRequest(topics=None)).topics) == 20_000
        poll_until(client, lambda: len(received) == 3)
        assert received == [len(big)] * 3


def test_an_untrusted_broker_certificate_is_an_ssl_authentication_error(
        files: TlsFiles, tls_broker: FakeBroker) -> None:
    with tls_client(files, trust=files.other_ca) as client:
        node = node_of(tls_broker)
        with pytest.raises(SslAuthenticationError) as info:
            await_ready(client, node, 20_000)
        text = str(info.value)
        assert f"127.0.0.1:{tls_broker.port}" in text
        assert "certificate verify failed: unable to get local issuer certificate" in text
        assert not info.value.retriable
        assert client.authentication_error(node) is info.value
        # Calls waiting on the cluster fail with it (Metadata holds it).
        with pytest.raises(SslAuthenticationError):
            client.metadata.maybe_throw_any_exception()


def test_a_certificate_for_another_host_name_is_refused(localhost_only: TlsFiles) -> None:
    mismatch = r"certificate verify failed: IP address mismatch, certificate is not valid for '127.0.0.1'"
    with FakeBroker(ssl_context=server_context(localhost_only)) as broker, \
            tls_client(localhost_only) as client, pytest.raises(SslAuthenticationError, match=mismatch):
        await_ready(client, node_of(broker), 20_000)


def test_the_host_name_check_can_be_turned_off(localhost_only: TlsFiles) -> None:
    with FakeBroker(ssl_context=server_context(localhost_only)) as broker, \
            tls_client(localhost_only, ssl_endpoint_identification_algorithm="") as client:
        await_ready(client, node_of(broker), 20_000)


def test_a_broker_requiring_a_client_certificate(files: TlsFiles) -> None:
    with FakeBroker(ssl_context=server_context(files, require_client_cert=True)) as broker:
        with tls_client(files, ssl_keystore_type="PEM",
                        ssl_keystore_location=str(files.client_keystore)) as client:
            node = node_of(broker)
            await_ready(client, node, 20_000)
            assert len(send_and_wait(client, node, p.MetadataRequest(topics=None)).brokers) == 1
        # No certificate of ours: TLS 1.3 completes our side of the handshake and the refusal
        # (an alert) arrives with the first read: an SslAuthenticationError.  The broker may
        # hang up before our read sees the alert (our request makes its close a reset, which
        # drops the alert): then, as in Java's SslTransportLayer ("EOF during read"), it is a
        # retriable connection error and the next attempt sees the alert.
        with tls_client(files) as client, \
                pytest.raises(SslAuthenticationError, match="certificate required|handshake failure"):
            node = node_of(broker)
            for _ in range(20):
                try:
                    await_ready(client, node, 20_000)
                    send_and_wait(client, node, p.MetadataRequest(topics=None))
                except SslAuthenticationError:
                    raise
                except KafkaConnectionError:
                    time.sleep(0.05)  # past the reconnect backoff


def test_tls_to_a_plaintext_listener_is_a_connection_error(files: TlsFiles) -> None:
    # The fake broker waits for the rest of a "frame" as large as the TLS hello's first bytes
    # say; the connection setup timeout ends the handshake (a Kafka broker would hang up).
    with FakeBroker() as broker, tls_client(files, socket_connection_setup_timeout_ms=300) as client:
        with pytest.raises(KafkaConnectionError) as info:
            await_ready(client, node_of(broker), 20_000)
        assert not isinstance(info.value, SslAuthenticationError)


def test_ssl_protocols_get_a_context_with_the_systems_cas_by_default() -> None:
    client = NetworkClient(security_protocol="ssl")
    try:
        assert client.security_protocol == "SSL"
        assert client._ssl_context is not None and client._ssl_context.check_hostname
    finally:
        client.close()
    assert client_ssl_context({}).verify_mode == ssl.CERT_REQUIRED


def test_a_bad_trust_store_fails_when_the_client_is_built(tmp_path: Path) -> None:
    from samsa.errors import ConfigError
    from samsa.producer.producer import KafkaProducer

    with pytest.raises(ConfigError, match="'ssl.truststore.location': cannot load CA certificates"):
        KafkaProducer(bootstrap_servers="127.0.0.1:9", security_protocol="SSL",
                      ssl_ca_location=str(tmp_path / "missing.pem"))
