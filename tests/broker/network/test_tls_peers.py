"""Real clients over TLS to the samsa broker: SSL with client certificates and SASL_SSL with
SCRAM (confluent-kafka, kafka-python, kcat, aiokafka), and the errors an untrusted CA or a wrong
host name give them while the broker keeps serving others.  Certificates are made by the test
(tests/support/certs.py).  The peers are imported directly: a missing one fails the test."""

from __future__ import annotations

import asyncio
import logging
import ssl
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from samsa.broker import Broker
from samsa.broker.network.endpoint import tls_principal
from tests.broker.network.round_trips import (
    N,
    confluent_round_trip,
    kafka_python_round_trip,
    kcat_round_trip,
    values,
)
from tests.support.broker import start_broker
from tests.support.certs import TlsFiles, make_tls_files
from tests.support.secure_broker import add_scram_users, sasl_config, tls_config


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls_files(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory, tls_files: TlsFiles) -> Iterator[Broker]:
    data = tmp_path_factory.mktemp("tls")
    add_scram_users(data)
    config = {"listeners": "SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
              "num.partitions": 3, **tls_config(tls_files),
              "listener.name.ssl.ssl.client.auth": "required",
              **sasl_config("SASL_SSL")}
    with start_broker(data, config) as broker:
        yield broker


def _ck_ssl(files: TlsFiles, with_cert: bool = True) -> dict[str, Any]:
    settings = {"security.protocol": "SSL", "ssl.ca.location": str(files.ca)}
    if with_cert:
        settings |= {"ssl.certificate.location": str(files.client_cert),
                     "ssl.key.location": str(files.client_key)}
    return settings


def test_confluent_kafka_over_ssl_with_a_client_certificate(tls_broker: Broker,
                                                            tls_files: TlsFiles) -> None:
    got = confluent_round_trip(tls_broker.bootstrap_servers_for("SSL"), _ck_ssl(tls_files))
    assert sorted(got) == values()


def test_confluent_kafka_over_sasl_ssl_with_scram_sha_512(tls_broker: Broker,
                                                          tls_files: TlsFiles) -> None:
    settings = {"security.protocol": "SASL_SSL", "ssl.ca.location": str(tls_files.ca),
                "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bob",
                "sasl.password": "bob-secret"}
    got = confluent_round_trip(tls_broker.bootstrap_servers_for("SASL_SSL"), settings)
    assert sorted(got) == values()


def test_kafka_python_over_ssl_with_a_client_certificate(tls_broker: Broker,
                                                         tls_files: TlsFiles) -> None:
    settings = {"security_protocol": "SSL", "ssl_cafile": str(tls_files.ca),
                "ssl_certfile": str(tls_files.client_cert), "ssl_keyfile": str(tls_files.client_key)}
    assert sorted(kafka_python_round_trip(tls_broker.bootstrap_servers_for("SSL"),
                                           settings)) == values()


def test_kafka_python_over_sasl_ssl_with_scram_sha_512(tls_broker: Broker,
                                                       tls_files: TlsFiles) -> None:
    settings = {"security_protocol": "SASL_SSL", "ssl_cafile": str(tls_files.ca),
                "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "bob",
                "sasl_plain_password": "bob-secret"}
    assert sorted(kafka_python_round_trip(tls_broker.bootstrap_servers_for("SASL_SSL"),
                                           settings)) == values()


@pytest.mark.parametrize("listener", ["SSL", "SASL_SSL"])
def test_kcat_over_tls(tls_broker: Broker, tls_files: TlsFiles, listener: str) -> None:
    if listener == "SSL":
        auth = ["-X", "security.protocol=SSL", "-X", f"ssl.ca.location={tls_files.ca}",
                "-X", f"ssl.certificate.location={tls_files.client_cert}",
                "-X", f"ssl.key.location={tls_files.client_key}"]
    else:
        auth = ["-X", "security.protocol=SASL_SSL", "-X", f"ssl.ca.location={tls_files.ca}",
                "-X", "sasl.mechanism=SCRAM-SHA-512", "-X", "sasl.username=bob",
                "-X", "sasl.password=bob-secret"]
    got = kcat_round_trip(tls_broker.bootstrap_servers_for(listener), auth)
    assert sorted(got) == values()


def test_aiokafka_over_sasl_ssl_with_scram_sha_256(tls_broker: Broker,
                                                    tls_files: TlsFiles) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    bootstrap = tls_broker.bootstrap_servers_for("SASL_SSL")
    topic = f"tls-aio-{uuid.uuid4().hex[:8]}"

    async def run() -> list[bytes]:
        settings = {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-256",
                    "sasl_plain_username": "carol", "sasl_plain_password": "carol-secret",
                    "ssl_context": create_ssl_context(cafile=str(tls_files.ca))}
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, **settings)
        await producer.start()
        try:
            batch = [producer.send(topic, value) for value in values()]
            await asyncio.gather(*batch)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"g-{topic}",
                                    auto_offset_reset="earliest", **settings)
        await consumer.start()
        got: list[bytes] = []
        try:
            while len(got) < N:
                records = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 60)
                for messages in records.values():
                    got.extend(m.value for m in messages)
        finally:
            await consumer.stop()
        return got

    assert sorted(asyncio.run(run())) == values()


def _errors_of(bootstrap: str, settings: dict[str, Any]) -> str:
    from confluent_kafka import Producer

    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": bootstrap, "error_cb": errors.append,
                         "message.timeout.ms": 3000, **settings})
    producer.produce("tls-refused", b"x")
    producer.flush(10)
    return " ".join(e.str() for e in errors)


def test_an_untrusted_ca_is_refused_and_others_are_served(tls_broker: Broker,
                                                          tls_files: TlsFiles) -> None:
    settings = _ck_ssl(tls_files) | {"ssl.ca.location": str(tls_files.other_ca)}
    text = _errors_of(tls_broker.bootstrap_servers_for("SSL"), settings)
    assert "certificate verify failed" in text, text
    assert sorted(confluent_round_trip(tls_broker.bootstrap_servers_for("SSL"),
                                        _ck_ssl(tls_files), 100)) == values(100)


def test_a_wrong_host_name_is_refused(tmp_path: Path, tls_broker: Broker) -> None:
    # Certificates for another host only: the client connects to 127.0.0.1.
    files = make_tls_files(tmp_path / "other-host", hosts=("broker.example",))
    with start_broker(tmp_path / "data", {"listeners": "SSL://127.0.0.1:0", **tls_config(files)}) as b:
        text = _errors_of(b.bootstrap_servers, {"security.protocol": "SSL",
                                                "ssl.ca.location": str(files.ca)})
    assert "certificate verify failed" in text or "hostname" in text.lower(), text


def test_a_client_without_a_certificate_is_refused_where_one_is_required(
        tls_broker: Broker, tls_files: TlsFiles, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="samsa.broker.network")
    text = _errors_of(tls_broker.bootstrap_servers_for("SSL"), _ck_ssl(tls_files, with_cert=False))
    assert text, "the client saw no error"
    assert any("TLS handshake with 127.0.0.1" in r.getMessage() for r in caplog.records)


def test_the_principal_is_the_certificate_subject_as_kafka_names_it(tls_files: TlsFiles) -> None:
    cert = ssl._ssl._test_decode_cert(str(tls_files.client_cert))  # type: ignore[attr-defined]
    assert tls_principal(cert) == tls_files.client_principal
    assert tls_principal(None) == "User:ANONYMOUS"
    escaped = {"subject": ((("organizationName", "a,b+c"),), (("commonName", " x "),))}
    assert tls_principal(escaped) == "User:CN=\\ x\\ ,O=a\\,b\\+c"


def test_plaintext_clients_cannot_speak_to_a_tls_listener(tls_broker: Broker) -> None:
    from confluent_kafka import Producer

    delivered: list[Any] = []
    producer = Producer({"bootstrap.servers": tls_broker.bootstrap_servers_for("SSL"),
                         "message.timeout.ms": 2000})
    producer.produce("tls-plain", b"x", on_delivery=lambda err, msg: delivered.append(err))
    producer.flush(10)
    assert len(delivered) == 1 and delivered[0] is not None  # refused, not stored
    # And the PLAINTEXT listener beside it serves as before.
    assert sorted(confluent_round_trip(tls_broker.bootstrap_servers_for("PLAINTEXT"), {},
                                        100)) == values(100)
