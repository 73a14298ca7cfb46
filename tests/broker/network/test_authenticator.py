"""The broker's SASL authenticator on the wire, request by request (Kafka's
SaslServerAuthenticator): what is allowed before authentication, the v0 raw-token framing,
oversize frames, the failure delay, and re-authentication (KIP-368)."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from samsa.broker import Broker
from samsa.protocol import (
    ApiKey,
    ApiVersionsRequest,
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
    decode_response,
    encode_request,
)
from samsa.security.oauthbearer import client_initial_response, unsecured_token
from samsa.security.plain import plain_client_token
from samsa.security.scram import SCRAM_SHA_512, ScramClient
from tests.support.broker import start_broker
from tests.support.secure_broker import add_scram_users, sasl_config

_SIZE = struct.Struct(">i")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    data = tmp_path_factory.mktemp("auth")
    add_scram_users(data)
    config = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0,REAUTH://127.0.0.1:0",
              "listener.security.protocol.map": "REAUTH:SASL_PLAINTEXT",
              "listener.name.reauth.plain.sasl.jaas.config":
                  sasl_config()["listener.name.sasl_plaintext.plain.sasl.jaas.config"],
              "listener.name.reauth.connections.max.reauth.ms": 1500,
              "listener.name.reauth.connection.failed.authentication.delay.ms": 0,
              **sasl_config(mechanisms="PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER"),
              "listener.name.reauth.oauthbearer.sasl.jaas.config":
                  "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                  'unsecuredValidatorRequiredScope="kafka";',
              "listener.name.reauth.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512,OAUTHBEARER"}
    with start_broker(data, config) as b:
        yield b


class Wire:
    """A blocking Kafka connection speaking raw frames."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.sock = socket.create_connection(address, timeout=10)
        self.correlation = 0

    def close(self) -> None:
        self.sock.close()

    def send(self, request: Any, version: int) -> int:
        self.correlation += 1
        self.sock.sendall(encode_request(request, version, self.correlation, "auth-test"))
        return self.correlation

    def frame(self) -> bytes:
        head = self._exactly(4)
        return self._exactly(_SIZE.unpack(head)[0])

    def call(self, request: Any, version: int) -> Any:
        correlation = self.send(request, version)
        got, body = decode_response(request.api.key, version, self.frame())
        assert got == correlation
        return body

    def closed_by_broker(self, timeout: float = 5.0) -> bool:
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def _exactly(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed by the broker")
            data += chunk
        return data


def _address(broker: Broker, listener: str) -> tuple[str, int]:
    lst = broker.advertised_listeners[listener]
    return lst.host, lst.port


@pytest.fixture
def wire(broker: Broker) -> Iterator[Wire]:
    w = Wire(_address(broker, "SASL_PLAINTEXT"))
    yield w
    w.close()


def _plain(wire: Wire, user: str = "alice", password: str = "alice-secret",
           version: int = 2) -> Any:
    handshake = wire.call(SaslHandshakeRequest(mechanism="PLAIN"), 1)
    assert handshake.error_code == 0
    return wire.call(SaslAuthenticateRequest(auth_bytes=plain_client_token(user, password)),
                     version)


def test_api_versions_then_handshake_lists_the_enabled_mechanisms(wire: Wire) -> None:
    versions = wire.call(ApiVersionsRequest(client_software_name="auth-test",
                                            client_software_version="1"), 3)
    assert versions.error_code == 0
    ranges = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
    assert ranges[ApiKey.SASL_HANDSHAKE] == (0, 1) and ranges[ApiKey.SASL_AUTHENTICATE] == (0, 2)
    response = wire.call(SaslHandshakeRequest(mechanism="PLAIN"), 1)
    assert response.error_code == 0
    assert response.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]


def test_any_other_request_before_authentication_closes_the_connection(wire: Wire) -> None:
    wire.send(MetadataRequest(topics=None), 4)
    assert wire.closed_by_broker()


def test_a_request_between_handshake_and_authenticate_closes_the_connection(wire: Wire) -> None:
    assert wire.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
    wire.send(ApiVersionsRequest(), 0)
    assert wire.closed_by_broker()


def test_an_oversize_frame_before_authentication_is_refused_unread(wire: Wire) -> None:
    # sasl.server.max.receive.size is 512 KiB: a 1 MiB size prefix closes the connection
    # before anything is allocated or read.
    wire.sock.sendall(_SIZE.pack(1024 * 1024) + b"\0" * 64)
    assert wire.closed_by_broker()


def test_plain_success_then_requests_are_served(wire: Wire) -> None:
    response = _plain(wire)
    assert (response.error_code, response.error_message, response.auth_bytes) == (0, None, b"")
    assert response.session_lifetime_ms == 0  # connections.max.reauth.ms is 0 here
    metadata = wire.call(MetadataRequest(topics=None), 4)
    assert metadata.brokers[0].port == wire.sock.getpeername()[1]


def test_wrong_plain_password_gets_kafkas_error_then_the_connection_closes(
        wire: Wire) -> None:
    started = time.monotonic()
    response = _plain(wire, password="wrong")
    assert response.error_code == 58  # SASL_AUTHENTICATION_FAILED
    assert "invalid username or password" in response.error_message
    assert "wrong" not in response.error_message
    assert wire.closed_by_broker()
    # connection.failed.authentication.delay.ms (100 by default) passed before the close.
    assert time.monotonic() - started >= 0.09


def test_an_unknown_mechanism_gets_the_enabled_list_then_a_close(wire: Wire) -> None:
    response = wire.call(SaslHandshakeRequest(mechanism="GSSAPI"), 1)
    assert response.error_code == 33  # UNSUPPORTED_SASL_MECHANISM
    assert response.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
    assert wire.closed_by_broker()


def test_scram_over_saslauthenticate_v0(wire: Wire) -> None:
    assert wire.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 1).error_code == 0
    client = ScramClient(SCRAM_SHA_512, "bob", "bob-secret")
    first = wire.call(SaslAuthenticateRequest(auth_bytes=client.first_message()), 0)
    assert first.error_code == 0
    final = wire.call(SaslAuthenticateRequest(
        auth_bytes=client.final_message(first.auth_bytes)), 0)
    assert final.error_code == 0
    client.verify_server_final(final.auth_bytes)  # the broker proved it holds bob's credential


def test_an_unknown_scram_user_gets_the_generic_text(wire: Wire) -> None:
    assert wire.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 1).error_code == 0
    client = ScramClient(SCRAM_SHA_512, "nobody", "x")
    first = wire.call(SaslAuthenticateRequest(auth_bytes=client.first_message()), 1)
    assert first.error_code == 58
    assert first.error_message == ("Authentication failed during authentication due to invalid "
                                   "credentials with SASL mechanism SCRAM-SHA-512")


def test_handshake_v0_then_raw_tokens(wire: Wire) -> None:
    """Pre-KIP-152 clients: after SaslHandshake v0 the tokens travel without Kafka headers."""
    assert wire.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 0).error_code == 0
    client = ScramClient(SCRAM_SHA_512, "bob", "bob-secret")
    token = client.first_message()
    wire.sock.sendall(_SIZE.pack(len(token)) + token)
    final = client.final_message(wire.frame())
    wire.sock.sendall(_SIZE.pack(len(final)) + final)
    client.verify_server_final(wire.frame())
    assert wire.call(ApiVersionsRequest(), 0).error_code == 0  # Kafka requests from now on


def test_saslhandshake_after_authentication_on_a_plaintext_listener_is_illegal(
        tmp_path: Path) -> None:
    with start_broker(tmp_path, {}) as plain:
        w = Wire(_address(plain, "PLAINTEXT"))
        try:
            assert w.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 34
            assert w.call(SaslAuthenticateRequest(auth_bytes=b"x"), 2).error_code == 34
        finally:
            w.close()


def test_session_lifetime_and_reauthentication(broker: Broker) -> None:
    w = Wire(_address(broker, "REAUTH"))
    try:
        response = _plain(w)
        assert response.session_lifetime_ms == 1500
        assert w.call(MetadataRequest(topics=None), 4).brokers
        # Re-authenticate on the same connection before the session ends: a new lifetime.
        again = _plain(w)
        assert again.error_code == 0 and again.session_lifetime_ms == 1500
        assert w.call(MetadataRequest(topics=None), 4).brokers
        # Another principal may not take over the connection.
        assert w.call(SaslHandshakeRequest(mechanism="PLAIN"), 1).error_code == 0
        other = w.call(SaslAuthenticateRequest(
            auth_bytes=plain_client_token("admin", "admin-secret")), 2)
        assert other.error_code == 58 and "Cannot change principals" in other.error_message
        assert w.closed_by_broker()
    finally:
        w.close()


def test_a_request_after_the_session_expired_closes_the_connection(broker: Broker) -> None:
    w = Wire(_address(broker, "REAUTH"))
    try:
        assert _plain(w).session_lifetime_ms == 1500
        time.sleep(1.6)
        w.send(MetadataRequest(topics=None), 4)
        assert w.closed_by_broker()
    finally:
        w.close()


def test_reauthentication_must_keep_the_mechanism(broker: Broker) -> None:
    w = Wire(_address(broker, "REAUTH"))
    try:
        assert _plain(w).error_code == 0
        response = w.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 1)
        assert response.error_code == 33
        assert w.closed_by_broker()
    finally:
        w.close()


def test_oauthbearer_success_gives_the_tokens_remaining_life(broker: Broker) -> None:
    w = Wire(_address(broker, "REAUTH"))
    try:
        assert w.call(SaslHandshakeRequest(mechanism="OAUTHBEARER"), 1).error_code == 0
        token = unsecured_token("erin", lifetime_s=600, scopes=("kafka",))
        response = w.call(SaslAuthenticateRequest(
            auth_bytes=client_initial_response(token.value)), 2)
        assert (response.error_code, response.auth_bytes) == (0, b"")
        # connections.max.reauth.ms (1500 here) is shorter than the token's 600 s.
        assert response.session_lifetime_ms == 1500
        assert w.call(MetadataRequest(topics=None), 4).brokers
    finally:
        w.close()


def test_a_refused_oauthbearer_token_gets_the_json_challenge_then_the_error(
        broker: Broker) -> None:
    w = Wire(_address(broker, "REAUTH"))
    try:
        assert w.call(SaslHandshakeRequest(mechanism="OAUTHBEARER"), 1).error_code == 0
        token = unsecured_token("erin", scopes=("other",))  # the listener requires "kafka"
        challenge = w.call(SaslAuthenticateRequest(
            auth_bytes=client_initial_response(token.value)), 2)
        assert challenge.error_code == 0
        assert challenge.auth_bytes == b'{"status":"insufficient_scope","scope":"kafka"}'
        final = w.call(SaslAuthenticateRequest(auth_bytes=b"\x01"), 2)
        assert final.error_code == 58
        assert final.error_message == '{"status":"insufficient_scope","scope":"kafka"}'
        assert w.closed_by_broker()
    finally:
        w.close()
