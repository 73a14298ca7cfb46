"""samsa's producer, consumer (with a group) and admin client against the samsa broker over
SASL_PLAINTEXT (PLAIN), SASL_SSL (SCRAM-SHA-512) and SSL with a client certificate, 20,000
records each way; and the failures: a wrong password fails the producer's send and the
consumer's poll with SaslAuthenticationError, an untrusted CA or a certificate for another host
name with SslAuthenticationError, none of them retried on the caller's behalf."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from samsa.admin import AdminClient
from samsa.admin.scram import UserScramCredentialUpsertion
from samsa.admin.types import NewTopic
from samsa.broker import Broker
from samsa.consumer.consumer import KafkaConsumer
from samsa.errors import SaslAuthenticationError, SslAuthenticationError
from samsa.producer.producer import KafkaProducer
from samsa.security.oauthbearer import unsecured_token
from tests.support.broker import start_broker
from tests.support.certs import TlsFiles, make_tls_files

RECORDS = 20_000
PLAIN_USERS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, files: TlsFiles) -> Iterator[Broker]:
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,"
                     "SSL://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_USERS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_USERS,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(files.broker_keystore),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(files.ca),
        "listener.name.ssl.ssl.client.auth": "required",
    }
    with start_broker(tmp_path_factory.mktemp("broker"), config) as b:
        with AdminClient(bootstrap_servers=b.bootstrap_servers_for("PLAINTEXT")) as admin:
            for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256"):  # one per request, as Kafka wants
                admin.alter_user_scram_credentials([UserScramCredentialUpsertion("bob", mechanism, "bob-secret")])
        yield b


def sasl_plaintext(broker: Broker, password: str = "alice-secret") -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap_servers_for("SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                                f'username="alice" password="{password}";'}


def sasl_ssl(broker: Broker, files: TlsFiles, password: str = "bob-secret") -> dict[str, Any]:
    # confluent-kafka's spelling of the same settings
    return {"bootstrap.servers": broker.bootstrap_servers_for("SASL_SSL"),
            "security.protocol": "sasl_ssl", "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": "bob", "sasl.password": password, "ssl.ca.location": str(files.ca)}


def ssl_mutual(broker: Broker, files: TlsFiles, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap_servers_for("SSL"), "security.protocol": "SSL",
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(files.ca),
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(files.client_keystore), **extra}


def round_trip(security: dict[str, Any], topic: str) -> None:
    with AdminClient(security) as admin:
        admin.create_topics([NewTopic(topic, num_partitions=3)])
        assert topic in admin.list_topics()
    with KafkaProducer(security, linger_ms=5) as producer:
        futures = [producer.send(topic, f"value-{i}".encode(), key=str(i).encode()) for i in range(RECORDS)]
        producer.flush()
        assert all(f.get().offset >= 0 for f in futures)
    seen: set[bytes] = set()
    with KafkaConsumer(security, group_id=f"{topic}-group", auto_offset_reset="earliest") as consumer:
        consumer.subscribe([topic])
        for _ in range(600):
            seen.update(r.value for r in consumer.poll(0.5))
            if len(seen) == RECORDS:
                break
        consumer.commit()
    assert seen == {f"value-{i}".encode() for i in range(RECORDS)}


def test_sasl_plaintext_plain(broker: Broker) -> None:
    round_trip(sasl_plaintext(broker), "sasl-plain")


def test_sasl_ssl_scram_sha_512(broker: Broker, files: TlsFiles) -> None:
    round_trip(sasl_ssl(broker, files), "sasl-ssl-scram")


def test_ssl_with_a_client_certificate(broker: Broker, files: TlsFiles) -> None:
    round_trip(ssl_mutual(broker, files), "ssl-mutual")


def test_a_wrong_password_fails_the_producer_and_the_consumer(broker: Broker, files: TlsFiles) -> None:
    for security in (sasl_plaintext(broker, "wrong-pw"), sasl_ssl(broker, files, "wrong-pw")):
        with KafkaProducer(security) as producer, pytest.raises(SaslAuthenticationError) as info:
            producer.send("sasl-plain", b"never").get(60)
        assert "wrong-pw" not in str(info.value)
        with KafkaConsumer(security, group_id="never") as consumer:
            consumer.subscribe(["sasl-plain"])
            with pytest.raises(SaslAuthenticationError, match="failed"):
                for _ in range(100):  # fails within a few polls, never loops to the end
                    consumer.poll(0.5)


def test_an_unknown_mechanism_names_the_enabled_ones(broker: Broker) -> None:
    security = {**sasl_plaintext(broker), "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                    'username="nobody" password="x";'}
    with AdminClient(security) as admin, pytest.raises(
            SaslAuthenticationError, match="does not enable SASL mechanism SCRAM-SHA-256; its enabled "
                                           "mechanisms: PLAIN"):
        admin.list_topics()


def test_an_unknown_scram_user(broker: Broker, files: TlsFiles) -> None:
    security = {**sasl_ssl(broker, files), "sasl.username": "nobody"}
    with AdminClient(security) as admin, pytest.raises(
            SaslAuthenticationError, match="SCRAM-SHA-512, user 'nobody'.*invalid credentials"):
        admin.list_topics()


def test_an_untrusted_broker_certificate(broker: Broker, files: TlsFiles) -> None:
    security = ssl_mutual(broker, files, **{"ssl.truststore.location": str(files.other_ca)})
    with KafkaProducer(security) as producer, \
            pytest.raises(SslAuthenticationError, match="certificate verify failed: (unable to get local issuer "
                                                        "certificate|self-signed certificate in certificate chain)"):
        producer.send("ssl-mutual", b"never").get(60)


def test_a_certificate_for_another_host_name(tmp_path: Path, files: TlsFiles) -> None:
    localhost_only = make_tls_files(tmp_path / "tls", hosts=("localhost",))
    config = {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM",
              "ssl.keystore.location": str(localhost_only.broker_keystore)}
    with start_broker(tmp_path / "data", config) as b:
        security = {"bootstrap.servers": b.bootstrap_servers, "security.protocol": "SSL",
                    "ssl.ca.location": str(localhost_only.ca)}
        with KafkaConsumer(security, group_id="g") as consumer:
            consumer.subscribe(["t"])
            with pytest.raises(SslAuthenticationError, match="mismatch, certificate is not valid for '127.0.0.1'"):
                for _ in range(100):
                    consumer.poll(0.5)
        # With the host name check off the same broker is trusted.
        with AdminClient({**security, "ssl.endpoint.identification.algorithm": ""}) as admin:
            assert admin.list_topics() is not None


def test_no_client_certificate_where_the_broker_requires_one(broker: Broker, files: TlsFiles) -> None:
    security = {"bootstrap.servers": broker.bootstrap_servers_for("SSL"), "security.protocol": "SSL",
                "ssl.ca.location": str(files.ca)}
    with KafkaConsumer(security, group_id="no-cert") as consumer:
        consumer.subscribe(["ssl-mutual"])
        with pytest.raises(SslAuthenticationError, match=f"{broker.bootstrap_servers_for('SSL')}"):
            for _ in range(100):
                consumer.poll(0.5)


def oauthbearer(broker: Broker, files: TlsFiles, callback: Any) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap_servers_for("SASL_SSL"), "security.protocol": "SASL_SSL",
            "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.token.callback": callback,
            "ssl.ca.location": str(files.ca)}


def test_oauthbearer_tokens_from_the_callback_and_renewed_before_they_expire(
        broker: Broker, files: TlsFiles) -> None:
    """The broker bounds the session by the token's expiry (KIP-255, KIP-368): the client
    re-authenticates in time with a fresh token from the callback."""
    issued: list[float] = []

    def callback() -> tuple[str, float]:
        token = unsecured_token("olivia", lifetime_s=1.5)
        issued.append(time.time())
        return token.value, token.lifetime_ms / 1000.0

    security = oauthbearer(broker, files, callback)
    with KafkaProducer(security) as producer:
        sent = 0
        for _ in range(4000):  # ends once tokens were renewed; the bound guards a hang
            producer.send("oauth", str(sent).encode()).get(30)
            sent += 1
            if len(issued) >= 3:
                break
        assert len(issued) >= 3
        assert producer._client.authentication_failures == 0  # type: ignore[attr-defined]
    with KafkaConsumer(security, group_id="oauth-group", auto_offset_reset="earliest") as consumer:
        consumer.subscribe(["oauth"])
        received = 0
        for _ in range(400):
            received += len(consumer.poll(0.5))
            if received == sent:
                break
        assert received == sent


def test_a_refused_oauthbearer_token(broker: Broker, files: TlsFiles) -> None:
    expired = unsecured_token("olivia", lifetime_s=60.0, now=time.time() - 3600)
    security = oauthbearer(broker, files, lambda: (expired.value, expired.lifetime_ms / 1000.0))
    with AdminClient(security) as admin, pytest.raises(SaslAuthenticationError, match="invalid_token"):
        admin.list_topics()


def test_oauthbearer_with_javas_unsecured_login_module(broker: Broker, files: TlsFiles) -> None:
    security = {"bootstrap.servers": broker.bootstrap_servers_for("SASL_SSL"), "security.protocol": "SASL_SSL",
                "sasl.mechanism": "OAUTHBEARER", "ssl.ca.location": str(files.ca),
                "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
                                    'required unsecuredLoginStringClaim_sub="olivia";'}
    with KafkaProducer(security) as producer:
        assert producer.send("oauth-jaas", b"unsigned but accepted").get(30).offset == 0
