"""Broker settings for security tests: SASL users (PLAIN in the listener's JAAS settings, SCRAM
in the broker's credential store) and TLS files made by tests/support/certs.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from samsa.broker.scram_credentials import ScramCredentialStore
from samsa.security.scram import SCRAM_SHA_256, SCRAM_SHA_512, ScramCredential
from tests.support.certs import TlsFiles

__all__ = ["PLAIN_USERS", "SCRAM_USERS", "add_scram_users", "sasl_config", "tls_config"]

PLAIN_USERS = {"alice": "alice-secret", "admin": "admin-secret"}
# user -> (mechanism, password)
SCRAM_USERS = {"bob": (SCRAM_SHA_512, "bob-secret"), "carol": (SCRAM_SHA_256, "carol-secret")}


def plain_jaas(users: dict[str, str] = PLAIN_USERS) -> str:
    entries = " ".join(f'user_{name}="{password}"' for name, password in users.items())
    return f"org.apache.kafka.common.security.plain.PlainLoginModule required {entries};"


def add_scram_users(data_dir: Path, users: dict[str, tuple[Any, str]] = SCRAM_USERS) -> None:
    """Store SCRAM credentials before the broker starts (as `samsa users add` would)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    ScramCredentialStore(data_dir).apply(
        [(user, mechanism, ScramCredential.from_password(mechanism, password, iterations=4096))
         for user, (mechanism, password) in users.items()], [])


def sasl_config(listener: str = "SASL_PLAINTEXT",
                mechanisms: str = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512") -> dict[str, Any]:
    return {"sasl.enabled.mechanisms": mechanisms,
            f"listener.name.{listener.lower()}.plain.sasl.jaas.config": plain_jaas()}


def tls_config(files: TlsFiles, client_auth: str = "none") -> dict[str, Any]:
    return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(files.broker_keystore),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(files.ca),
            "ssl.client.auth": client_auth}
