"""Certificates for TLS tests, made when the tests run (trustme), never committed.

``make_tls_files(directory)`` writes a CA and PEM files for the broker (key + chain in one file,
as Kafka's ``ssl.keystore.type=PEM`` keystore) and for a client (for mutual TLS), all for the
host names ``localhost`` and ``127.0.0.1``; a second, unrelated CA gives the "untrusted CA"
case.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import trustme

__all__ = ["TlsFiles", "make_tls_files"]


@dataclass(frozen=True)
class TlsFiles:
    ca: Path  # the CA certificate clients and the broker trust (ssl.truststore.location)
    broker_keystore: Path  # broker key + certificate chain (ssl.keystore.location, PEM)
    broker_cert: Path  # the broker's chain alone
    broker_key: Path  # the broker's key alone
    client_keystore: Path  # client key + chain, subject CN=client,OU=clients,O=samsa-tests
    client_cert: Path
    client_key: Path
    other_ca: Path  # a CA that signed nothing here: trusting only it must fail
    client_principal: str = "User:CN=client,OU=clients,O=samsa-tests"


def make_tls_files(directory: Path, hosts: tuple[str, ...] = ("localhost", "127.0.0.1")) -> TlsFiles:
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA(organization_name="samsa-tests")
    broker = ca.issue_cert(*hosts, common_name="broker")
    client = ca.issue_cert("client", common_name="client", organization_name="samsa-tests",
                           organization_unit_name="clients")
    other = trustme.CA(organization_name="someone-else")

    def write(name: str, data: bytes) -> Path:
        path = directory / name
        path.write_bytes(data)
        path.chmod(0o600)
        return path

    def chain(cert: trustme.LeafCert) -> bytes:
        return b"".join(blob.bytes() for blob in cert.cert_chain_pems)

    return TlsFiles(
        ca=write("ca.pem", ca.cert_pem.bytes()),
        broker_keystore=write("broker-keystore.pem",
                              broker.private_key_pem.bytes() + chain(broker)),
        broker_cert=write("broker-cert.pem", chain(broker)),
        broker_key=write("broker-key.pem", broker.private_key_pem.bytes()),
        client_keystore=write("client-keystore.pem",
                              client.private_key_pem.bytes() + chain(client)),
        client_cert=write("client-cert.pem", chain(client)),
        client_key=write("client-key.pem", client.private_key_pem.bytes()),
        other_ca=write("other-ca.pem", other.cert_pem.bytes()),
    )
