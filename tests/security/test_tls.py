"""TLS contexts from Kafka's ssl.* settings: PEM trust and key stores (files and inline), the
versions, host name checks and cipher suites, and handshakes between the contexts built."""

from __future__ import annotations

import socket
import ssl
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization

from samsa.errors import ConfigError
from samsa.security.tls import (
    check_pem_store,
    client_ssl_context,
    hostname_check_enabled,
    load_key_store,
    load_trust_store,
    tls_versions,
)
from tests.support.certs import TlsFiles, make_tls_files


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return make_tls_files(tmp_path_factory.mktemp("tls"))


def server_context(files: TlsFiles, *, client_ca: Path | None = None) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    load_key_store(ctx, location=str(files.broker_keystore), key_pem=None, chain_pem=None, key_password=None)
    if client_ca is not None:
        ctx.verify_mode = ssl.CERT_REQUIRED
        load_trust_store(ctx, location=str(client_ca), certificates_pem=None)
    return ctx


def handshake(client: ssl.SSLContext, server: ssl.SSLContext, server_hostname: str | None = "localhost"
              ) -> dict[str, Any]:
    """A blocking handshake over a socket pair; returns the peer certificate each side saw."""
    a, b = socket.socketpair()
    seen: dict[str, Any] = {}

    def serve() -> None:
        try:
            with server.wrap_socket(b, server_side=True) as s:
                seen["server_saw"] = s.getpeercert()
                s.sendall(b"ok")
        except (ssl.SSLError, OSError) as e:
            seen["server_error"] = e

    t = threading.Thread(target=serve)
    t.start()
    try:
        with client.wrap_socket(a, server_hostname=server_hostname) as c:
            seen["client_saw"] = c.getpeercert()
            seen["read"] = c.recv(2)
    finally:
        t.join()
    return seen


def test_versions_span_the_enabled_protocols() -> None:
    assert tls_versions(["TLSv1.2", "TLSv1.3"], "s") == (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3)
    assert tls_versions(["TLSv1.3"], "s") == (ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_3)
    with pytest.raises(ConfigError, match="'ssl.enabled.protocols'.*unknown protocol 'SSLv3'"):
        tls_versions(["SSLv3"], "ssl.enabled.protocols")
    with pytest.raises(ConfigError, match="at least one"):
        tls_versions([], "ssl.enabled.protocols")


@pytest.mark.parametrize(("value", "checks"), [("https", True), ("HTTPS", True), ("", False),
                                                (None, False), ("none", False)])
def test_host_name_check_follows_the_endpoint_identification_algorithm(value: str | None, checks: bool) -> None:
    assert hostname_check_enabled(value) is checks
    ctx = client_ssl_context({"ssl.endpoint.identification.algorithm": value})
    assert ctx.check_hostname is checks
    assert ctx.verify_mode == ssl.CERT_REQUIRED


def test_an_unknown_endpoint_identification_algorithm_is_refused() -> None:
    with pytest.raises(ConfigError, match="ssl.endpoint.identification.algorithm"):
        hostname_check_enabled("ldaps")


def test_defaults_are_javas() -> None:
    ctx = client_ssl_context({})
    assert ctx.check_hostname
    assert (ctx.minimum_version, ctx.maximum_version) == (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3)
    # No trust store given: the system's CAs, as Java uses the JVM's default trust store.
    assert ctx.cert_store_stats()["x509_ca"] >= 0


def test_only_pem_stores_are_supported() -> None:
    with pytest.raises(ConfigError, match=r"'ssl.truststore.type'.*'JKS' stores are not supported, only PEM"):
        check_pem_store("truststore", "JKS", has_location=True, has_inline=False)
    with pytest.raises(ConfigError, match=r"'ssl.keystore.type'.*'PKCS12'"):
        check_pem_store("keystore", "PKCS12", has_location=False, has_inline=True)
    check_pem_store("keystore", "JKS", has_location=False, has_inline=False)  # Java's default, unused
    check_pem_store("keystore", "JKS", has_location=False, has_inline=True, type_set=False)
    check_pem_store("truststore", "pem", has_location=True, has_inline=False)
    with pytest.raises(ConfigError, match="only PEM"):
        client_ssl_context({"ssl.truststore.type": "JKS", "ssl.truststore.location": "/x.jks"})


def test_a_trust_store_file_verifies_the_broker(files: TlsFiles) -> None:
    client = client_ssl_context({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(files.ca)})
    seen = handshake(client, server_context(files))
    assert seen["read"] == b"ok"
    assert ("commonName", "broker") in [rdn[0] for rdn in seen["client_saw"]["subject"]]


def test_inline_trust_and_key_stores(files: TlsFiles) -> None:
    key = files.client_key.read_text()
    chain = files.client_cert.read_text()
    client = client_ssl_context({
        "ssl.truststore.certificates": "some text before\n" + files.ca.read_text(),
        "ssl.keystore.key": key.strip(),  # Java accepts a value without its last newline
        "ssl.keystore.certificate.chain": chain,
    })
    seen = handshake(client, server_context(files, client_ca=files.ca))
    assert ("commonName", "client") in [rdn[0] for rdn in seen["server_saw"]["subject"]]


def test_inline_keys_leave_no_temporary_file(files: TlsFiles, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    load_key_store(ctx, location=None, key_pem=files.client_key.read_text(),
                   chain_pem=files.client_cert.read_text(), key_password=None)
    assert list(tmp_path.iterdir()) == []


def test_a_keystore_file_gives_the_client_certificate(files: TlsFiles) -> None:
    client = client_ssl_context({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(files.ca),
                                 "ssl.keystore.type": "PEM", "ssl.keystore.location": str(files.client_keystore)})
    seen = handshake(client, server_context(files, client_ca=files.ca))
    assert ("organizationalUnitName", "clients") in [rdn[0] for rdn in seen["server_saw"]["subject"]]


def test_librdkafka_separate_certificate_and_key_files(files: TlsFiles) -> None:
    client = client_ssl_context({"ssl.truststore.location": str(files.ca), "ssl.truststore.type": "PEM",
                                 "ssl.certificate.location": str(files.client_cert),
                                 "ssl.key.location": str(files.client_key)})
    seen = handshake(client, server_context(files, client_ca=files.ca))
    assert "server_saw" in seen
    with pytest.raises(ConfigError, match="'ssl.key.location': is required"):
        client_ssl_context({"ssl.certificate.location": str(files.client_cert)})


def encrypted_key(files: TlsFiles, password: bytes) -> str:
    key = serialization.load_pem_private_key(files.client_key.read_bytes(), None)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.BestAvailableEncryption(password)).decode()


def test_an_encrypted_key_needs_its_password(files: TlsFiles, tmp_path: Path) -> None:
    keystore = tmp_path / "keystore.pem"
    keystore.write_text(encrypted_key(files, b"key-pw") + files.client_cert.read_text())
    settings = {"ssl.truststore.location": str(files.ca), "ssl.truststore.type": "PEM",
                "ssl.keystore.location": str(keystore), "ssl.keystore.type": "PEM"}
    client = client_ssl_context({**settings, "ssl.key.password": "key-pw"})
    assert "server_saw" in handshake(client, server_context(files, client_ca=files.ca))
    with pytest.raises(ConfigError, match="'ssl.key.password': is required: the private key in "
                                          "ssl.keystore.location is encrypted"):
        client_ssl_context(settings)
    with pytest.raises(ConfigError, match="'ssl.key.password': does not decrypt") as info:
        client_ssl_context({**settings, "ssl.key.password": "not-it"})
    assert "not-it" not in str(info.value)


def test_an_encrypted_inline_key(files: TlsFiles) -> None:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    load_key_store(ctx, location=None, key_pem=encrypted_key(files, b"pw"),
                   chain_pem=files.client_cert.read_text(), key_password="pw")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"location": "x", "key_pem": "k", "chain_pem": "c"}, "'ssl.keystore.key': cannot be given together"),
    ({"key_pem": "k"}, "'ssl.keystore.certificate.chain': is required when ssl.keystore.key"),
    ({"chain_pem": "c"}, "'ssl.keystore.key': is required when ssl.keystore.certificate.chain"),
    ({"location": "/no/such/file.pem"}, "'ssl.keystore.location': cannot read"),
], ids=["both-forms", "key-alone", "chain-alone", "missing-file"])
def test_key_store_mistakes(kwargs: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"location": None, "key_pem": None, "chain_pem": None, "key_password": None, **kwargs}
    with pytest.raises(ConfigError, match=message):
        load_key_store(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT), **args)


def test_a_key_store_needs_one_key_and_a_certificate(files: TlsFiles, tmp_path: Path) -> None:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    only_cert = tmp_path / "cert-only.pem"
    only_cert.write_text(files.client_cert.read_text())
    with pytest.raises(ConfigError, match="exactly one private key.*found 0"):
        load_key_store(ctx, location=str(only_cert), key_pem=None, chain_pem=None, key_password=None)
    two_keys = tmp_path / "two-keys.pem"
    two_keys.write_text(files.client_key.read_text() * 2 + files.client_cert.read_text())
    with pytest.raises(ConfigError, match="found 2"):
        load_key_store(ctx, location=str(two_keys), key_pem=None, chain_pem=None, key_password=None)
    only_key = tmp_path / "key-only.pem"
    only_key.write_text(files.client_key.read_text())
    with pytest.raises(ConfigError, match="holds no certificate"):
        load_key_store(ctx, location=str(only_key), key_pem=None, chain_pem=None, key_password=None)
    mismatched = tmp_path / "mismatched.pem"
    mismatched.write_text(files.client_key.read_text() + files.broker_cert.read_text())
    with pytest.raises(ConfigError, match="'ssl.keystore.location': cannot load the key and certificate chain"):
        load_key_store(ctx, location=str(mismatched), key_pem=None, chain_pem=None, key_password=None)
    with pytest.raises(ConfigError, match="'listener.name.ssl.ssl.keystore.location'"):
        load_key_store(ctx, location=str(only_key), key_pem=None, chain_pem=None, key_password=None,
                       setting_prefix="listener.name.ssl.ssl.")


def test_trust_store_mistakes(files: TlsFiles, tmp_path: Path) -> None:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    with pytest.raises(ConfigError, match="either ssl.truststore.location or ssl.truststore.certificates"):
        load_trust_store(ctx, location=str(files.ca), certificates_pem=files.ca.read_text())
    with pytest.raises(ConfigError, match="'ssl.truststore.location': cannot load CA certificates"):
        load_trust_store(ctx, location=str(tmp_path / "missing.pem"), certificates_pem=None)
    with pytest.raises(ConfigError, match="'ssl.truststore.certificates': holds no"):
        load_trust_store(ctx, location=None, certificates_pem="not a certificate")
    # A directory of CA files (librdkafka's ssl.ca.location may name one) loads as a CA path.
    load_trust_store(ctx, location=str(tmp_path), certificates_pem=None)


def test_an_untrusted_broker_fails_the_handshake(files: TlsFiles) -> None:
    client = client_ssl_context({"ssl.truststore.location": str(files.other_ca), "ssl.truststore.type": "PEM"})
    with pytest.raises(ssl.SSLCertVerificationError, match="unable to get local issuer certificate"):
        handshake(client, server_context(files))


def test_cipher_suites(files: TlsFiles) -> None:
    ctx = client_ssl_context({"ssl.cipher.suites": ["ECDHE-RSA-AES128-GCM-SHA256"],
                              "ssl.enabled.protocols": ["TLSv1.2"]})
    assert {c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"} == {"ECDHE-RSA-AES128-GCM-SHA256"}
    with pytest.raises(ConfigError, match="'ssl.cipher.suites': OpenSSL accepts none of"):
        client_ssl_context({"ssl.cipher.suites": ["NO-SUCH-CIPHER"]})


def test_ssl_protocol_names_are_checked() -> None:
    client_ssl_context({"ssl.protocol": "TLSv1.2"})
    with pytest.raises(ConfigError, match="'ssl.protocol'"):
        client_ssl_context({"ssl.protocol": "SSLv2"})
