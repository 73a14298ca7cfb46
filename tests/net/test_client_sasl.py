"""NetworkClient's SASL exchange (Java's SaslClientAuthenticator) against the fake broker
playing a SASL listener: the order of requests, PLAIN and SCRAM, the broker's refusals as
SaslAuthenticationError, versions as advertised, and KIP-368 re-authentication."""

from __future__ import annotations

import time
from typing import Any

import pytest

import samsa.protocol as p
from samsa.errors import ConfigError, SaslAuthenticationError, SaslAuthenticationFailedError
from samsa.net import ClientRequest, NetworkClient, Node, send_and_wait
from samsa.net.connection_states import ConnectionState
from samsa.net.sync import await_ready
from samsa.protocol import ApiKey
from samsa.security.plain import plain_authenticate
from samsa.security.scram import MECHANISMS, ScramCredential, ScramServer

from .conftest import poll_until
from .fake_broker import FakeBroker

PASSWORDS = {"alice": "alice-secret"}


class SaslListener:
    """The SASL side of a broker for FakeBroker.handler: one exchange at a time."""

    def __init__(self, mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"),
                 session_lifetime_ms: int = 0) -> None:
        self.mechanisms = list(mechanisms)
        self.session_lifetime_ms = session_lifetime_ms
        self.credentials = {name: ScramCredential.from_password(m, "alice-secret", iterations=4096)
                            for name, m in MECHANISMS.items()}
        self.mechanism = ""
        self.scram: ScramServer | None = None
        self.forge_signature = False
        self.authenticated: list[str] = []
        self.tokens: list[bytes] = []

    def __call__(self, header: Any, body: Any) -> Any:
        key = header.request_api_key
        if key == ApiKey.SASL_HANDSHAKE:
            ok = body.mechanism in self.mechanisms
            self.mechanism = body.mechanism
            if body.mechanism in MECHANISMS:
                credential = self.credentials[body.mechanism]
                self.scram = ScramServer(MECHANISMS[body.mechanism],
                                         lambda user: credential if user == "alice" else None)
            return p.SaslHandshakeResponse(error_code=0 if ok else 33, mechanisms=self.mechanisms)
        if key == ApiKey.SASL_AUTHENTICATE:
            token = bytes(body.auth_bytes)
            try:
                if self.mechanism == "OAUTHBEARER":
                    return self._oauthbearer(token)
                if self.mechanism == "PLAIN":
                    self.authenticated.append(plain_authenticate(token, PASSWORDS.get))
                    return self._answer(b"", done=True)
                assert self.scram is not None
                if self.scram.username is None or not self.scram._nonce:
                    return self._answer(self.scram.server_first(token))
                final = self.scram.server_final(token)
                self.authenticated.append(self.scram.username)
                return self._answer(b"v=AAAA" if self.forge_signature else final, done=True)
            except SaslAuthenticationFailedError as e:
                return p.SaslAuthenticateResponse(error_code=58, error_message=e.detail, auth_bytes=b"")
        return None

    def _oauthbearer(self, token: bytes) -> Any:
        # Kafka's OAuthBearerSaslServer: a bad token gets a JSON challenge with error code 0;
        # the client's ^A then gets SASL_AUTHENTICATION_FAILED carrying that JSON.
        self.tokens.append(token)
        if token == b"\x01":
            return p.SaslAuthenticateResponse(error_code=58, error_message='{"status":"invalid_token"}',
                                              auth_bytes=b"")
        if token.startswith(b"n,,\x01auth=Bearer good-token") and token.endswith(b"\x01\x01"):
            self.authenticated.append("token-owner")
            return self._answer(b"", done=True)
        return self._answer(b'{"status":"invalid_token"}')

    def _answer(self, token: bytes, done: bool = False) -> Any:
        return p.SaslAuthenticateResponse(error_code=0, error_message=None, auth_bytes=token,
                                          session_lifetime_ms=self.session_lifetime_ms if done else 0)


def node_of(broker: FakeBroker) -> Node:
    return Node(broker.node_id, "127.0.0.1", broker.port)


def sasl_client(mechanism: str = "PLAIN", password: str = "alice-secret", **kw: Any) -> NetworkClient:
    kw.setdefault("reconnect_backoff_ms", 10)
    return NetworkClient(security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                         sasl_username="alice", sasl_password=password, **kw)


def api_keys(broker: FakeBroker) -> list[tuple[int, int]]:
    return [(h.request_api_key, h.request_api_version) for h in broker.received]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_authenticates_before_any_other_request(mechanism: str) -> None:
    listener = SaslListener()
    with FakeBroker(handler=listener) as broker, sasl_client(mechanism) as client:
        node = node_of(broker)
        await_ready(client, node, 20_000)
        assert listener.authenticated == ["alice"]
        send_and_wait(client, node, p.MetadataRequest(topics=None))
        exchange = 1 if mechanism == "PLAIN" else 2
        assert api_keys(broker) == [(ApiKey.API_VERSIONS, 4), (ApiKey.SASL_HANDSHAKE, 1),
                                    *[(ApiKey.SASL_AUTHENTICATE, 2)] * exchange,
                                    (ApiKey.METADATA, 13)]


def test_sasl_authenticate_goes_at_the_version_the_broker_advertises() -> None:
    listener = SaslListener()
    with FakeBroker(handler=listener) as broker, sasl_client("SCRAM-SHA-256") as client:
        original = broker.api_versions_response

        def capped() -> Any:
            body = original()
            for k in body.api_keys:
                if k.api_key == ApiKey.SASL_AUTHENTICATE:
                    k.max_version = 1  # librdkafka's range, and brokers before KIP-368's v2
            return body

        broker.api_versions_response = capped  # type: ignore[method-assign]
        await_ready(client, node_of(broker), 20_000)
        assert (ApiKey.SASL_AUTHENTICATE, 1) in api_keys(broker)


def test_a_wrong_password_is_a_sasl_authentication_error_naming_the_user() -> None:
    with FakeBroker(handler=SaslListener()) as broker, sasl_client(password="wrong-pw") as client:
        node = node_of(broker)
        with pytest.raises(SaslAuthenticationError) as info:
            await_ready(client, node, 20_000)
        text = str(info.value)
        assert f"SASL authentication with node 0 (127.0.0.1:{broker.port}) (PLAIN, user 'alice') failed" in text
        assert "invalid username or password" in text  # the broker's message
        assert "wrong-pw" not in text and "alice-secret" not in text
        assert not info.value.retriable
        assert client.authentication_error(node) is info.value
        assert client.connection_states.state(node.id) is ConnectionState.DISCONNECTED
        with pytest.raises(SaslAuthenticationError):
            client.metadata.maybe_throw_any_exception()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_wrong_scram_password(mechanism: str) -> None:
    with FakeBroker(handler=SaslListener()) as broker, sasl_client(mechanism, "nope") as client, \
            pytest.raises(SaslAuthenticationError, match=f"{mechanism}, user 'alice'.*invalid user credentials"):
        await_ready(client, node_of(broker), 20_000)


def test_a_mechanism_the_broker_does_not_enable() -> None:
    with FakeBroker(handler=SaslListener(mechanisms=("PLAIN",))) as broker, \
            sasl_client("SCRAM-SHA-512") as client, \
            pytest.raises(SaslAuthenticationError,
                          match="does not enable SASL mechanism SCRAM-SHA-512; its enabled mechanisms: PLAIN"):
        await_ready(client, node_of(broker), 20_000)


def test_a_broker_that_cannot_prove_it_holds_the_credential() -> None:
    listener = SaslListener()
    listener.forge_signature = True
    with FakeBroker(handler=listener) as broker, sasl_client("SCRAM-SHA-256") as client, \
            pytest.raises(SaslAuthenticationError, match="signature does not match"):
        await_ready(client, node_of(broker), 20_000)


def test_a_broker_without_sasl_handshake_v1() -> None:
    with FakeBroker(handler=SaslListener()) as broker, sasl_client() as client:
        original = broker.api_versions_response

        def without() -> Any:
            body = original()
            body.api_keys = [k for k in body.api_keys if k.api_key != ApiKey.SASL_HANDSHAKE]
            return body

        broker.api_versions_response = without  # type: ignore[method-assign]
        with pytest.raises(SaslAuthenticationError, match="does not offer SaslHandshake v1"):
            await_ready(client, node_of(broker), 20_000)


def test_re_authentication_within_the_session_lifetime() -> None:
    """KIP-368: before 85-95% of the lifetime passes the connection authenticates again, once
    nothing is in flight on it; other requests wait meanwhile."""
    now = [0.0]
    listener = SaslListener(session_lifetime_ms=10_000)
    with FakeBroker(handler=listener) as broker, sasl_client("SCRAM-SHA-512", clock=lambda: now[0]) as client:
        node = node_of(broker)
        await_ready(client, node, 20_000)
        assert listener.authenticated == ["alice"]
        reauth_at = client._reauth_at[node.id]
        assert 8_500 <= reauth_at <= 9_500
        now[0] = 8_400.0
        client.poll(0)
        assert client.is_ready(node, now[0])  # not yet
        # A request in flight at the due time holds the re-authentication back.
        broker.metadata_response = lambda request: None  # type: ignore[method-assign,assignment,return-value]
        client.send(ClientRequest(node, p.MetadataRequest(topics=None)), now[0])
        now[0] = 9_600.0
        client.poll(10)
        assert client.connection_states.state(node.id) is ConnectionState.READY
        handshakes = [h for h in broker.received if h.request_api_key == ApiKey.SASL_HANDSHAKE]
        assert len(handshakes) == 1
        client.close_node(node.id)  # drops the unanswered request
        del broker.metadata_response
        await_ready(client, node, 20_000)  # a new connection: a new full authentication
        assert listener.authenticated == ["alice", "alice"]
        now[0] += 9_600.0
        poll_until(client, lambda: len(listener.authenticated) == 3 and client.is_ready(node, now[0]))
        assert client._reauth_at[node.id] > now[0]  # the next one is scheduled
        assert [k for k, _ in api_keys(broker)][-3:] == [ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE,
                                                         ApiKey.SASL_AUTHENTICATE]
        assert broker.connections == 2  # re-authenticated on the same connection


def test_sasl_needs_a_mechanism_and_credentials() -> None:
    with pytest.raises(ConfigError, match="GSSAPI"):
        NetworkClient(security_protocol="SASL_PLAINTEXT")
    with pytest.raises(ConfigError, match="needs credentials"):
        NetworkClient(security_protocol="SASL_SSL", sasl_mechanism="PLAIN")
    with pytest.raises(ConfigError, match="'security.protocol'"):
        NetworkClient(security_protocol="KERBEROS")


def test_from_config_reads_jaas_credentials() -> None:
    client = NetworkClient.from_config({
        "security.protocol": "sasl_plaintext", "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                            'username="alice" password="alice-secret";'})
    try:
        assert client._sasl == ("SCRAM-SHA-256", "alice", "alice-secret")
    finally:
        client.close()


def oauth_client(callback: Any, **kw: Any) -> NetworkClient:
    kw.setdefault("reconnect_backoff_ms", 10)
    return NetworkClient(security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER",
                         sasl_oauthbearer_token_callback=callback, **kw)


def test_oauthbearer_sends_the_callbacks_token() -> None:
    listener = SaslListener()
    with FakeBroker(handler=listener) as broker, \
            oauth_client(lambda: ("good-token", time.time() + 3600)) as client:
        await_ready(client, node_of(broker), 20_000)
        assert listener.tokens == [b"n,,\x01auth=Bearer good-token\x01\x01"]
        assert listener.authenticated == ["token-owner"]


def test_a_refused_oauthbearer_token_is_acknowledged_then_reported() -> None:
    listener = SaslListener()
    with FakeBroker(handler=listener) as broker, oauth_client(lambda: ("stale", 0)) as client, \
            pytest.raises(SaslAuthenticationError, match='OAUTHBEARER.*"status":"invalid_token"'):
        await_ready(client, node_of(broker), 20_000)
    assert listener.tokens[-1] == b"\x01"


@pytest.mark.parametrize(("callback", "message"), [
    (lambda: 1 / 0, "the token callback raised ZeroDivisionError"),
    (lambda: (None, 0), "must return \\(token, expiry"),
    (lambda: "just-a-token", "the token callback raised ValueError"),
], ids=["raises", "no-token", "not-a-pair"])
def test_a_failing_token_callback(callback: Any, message: str) -> None:
    with FakeBroker(handler=SaslListener()) as broker, oauth_client(callback) as client, \
            pytest.raises(SaslAuthenticationError, match=message):
        await_ready(client, node_of(broker), 20_000)


def test_oauthbearer_re_authenticates_with_a_fresh_token() -> None:
    now = [0.0]
    issued: list[int] = []

    def callback() -> tuple[str, float]:
        issued.append(len(issued))
        return "good-token", time.time() + 3600

    listener = SaslListener(session_lifetime_ms=10_000)
    with FakeBroker(handler=listener) as broker, oauth_client(callback, clock=lambda: now[0]) as client:
        node = node_of(broker)
        await_ready(client, node, 20_000)
        now[0] = 9_600.0
        poll_until(client, lambda: len(listener.authenticated) == 2 and client.is_ready(node, now[0]))
        assert issued == [0, 1]


def test_oauthbearer_settings() -> None:
    from samsa.producer.config import ProducerConfig

    with pytest.raises(ConfigError, match="'sasl.oauthbearer.token.callback': is required"):
        ProducerConfig(security_protocol="SASL_SSL", sasl_mechanism="OAUTHBEARER")
    with pytest.raises(ConfigError, match="must be callable"):
        NetworkClient(security_protocol="SASL_SSL", sasl_mechanism="OAUTHBEARER",
                      sasl_oauthbearer_token_callback=42)
    cfg = ProducerConfig(security_protocol="SASL_SSL", sasl_mechanism="OAUTHBEARER",
                         sasl_oauthbearer_token_callback="time:time")
    assert cfg["sasl.oauthbearer.token.callback"] is time.time
    assert cfg["sasl.username"] is None


OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


def test_javas_unsecured_login_makes_the_tokens() -> None:
    from samsa.net.sasl import unsecured_login_callback
    from samsa.security.oauthbearer import validate_unsecured_token

    callback = unsecured_login_callback(
        f'{OAUTH_MODULE} required unsecuredLoginStringClaim_sub="olivia" '
        'unsecuredLoginListClaim_scope=",read,write" unsecuredLoginNumberClaim_level="3" '
        'unsecuredLoginLifetimeSeconds="60";')
    value, expiry = callback()
    assert time.time() + 50 < expiry <= time.time() + 60
    token = validate_unsecured_token(value)
    assert token.principal == "olivia"
    assert token.scopes == frozenset({"read", "write"})


@pytest.mark.parametrize(("jaas", "message"), [
    (f"{OAUTH_MODULE} required;", "needs unsecuredLoginStringClaim_sub"),
    (f'{OAUTH_MODULE} required unsecuredLoginStringClaim_sub="o" unsecuredLoginNumberClaim_exp="1";',
     "the exp claim is set automatically"),
    (f'{OAUTH_MODULE} required unsecuredLoginStringClaim_sub="o" unsecuredLoginExtension_x="1";',
     "extensions are not supported"),
    (f'{OAUTH_MODULE} required unsecuredLoginStringClaim_sub="o" unsecuredLoginLifetimeSeconds="soon";',
     "LifetimeSeconds must be a number"),
    ('org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";',
     "takes org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"),
], ids=["no-principal", "exp-claim", "extension", "lifetime", "other-module"])
def test_unsecured_login_mistakes(jaas: str, message: str) -> None:
    from samsa.producer.config import ProducerConfig

    with pytest.raises(ConfigError, match=message) as info:
        ProducerConfig(security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER", sasl_jaas_config=jaas)
    assert info.value.setting == "sasl.jaas.config"


def test_a_jaas_configured_oauthbearer_client_authenticates() -> None:
    listener = SaslListener()
    listener.mechanisms = ["OAUTHBEARER"]
    jaas = f'{OAUTH_MODULE} required unsecuredLoginStringClaim_sub="olivia";'
    with FakeBroker(handler=listener) as broker:
        client = NetworkClient.from_config({"security.protocol": "SASL_PLAINTEXT",
                                            "sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": jaas})
        # The scripted listener only takes "good-token": the point is the token sent.
        with client, pytest.raises(SaslAuthenticationError, match="invalid_token"):
            await_ready(client, node_of(broker), 20_000)
        assert listener.tokens[0].startswith(b"n,,\x01auth=Bearer eyJhbGciOiJub25lIn0.")
