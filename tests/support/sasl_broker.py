"""A samsa broker with a PLAINTEXT listener (for set-up through the admin client) and a
SASL_PLAINTEXT listener whose sessions expire (KIP-368), for tests of what the clients do when
authentication fails on a connection that used to work."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from samsa.admin import AdminClient
from samsa.admin.scram import UserScramCredentialUpsertion
from samsa.broker import Broker
from tests.support.broker import start_broker

MECHANISM = "SCRAM-SHA-256"


@contextmanager
def reauthenticating_broker(data_dir: Path, *, reauth_ms: int = 1500) -> Iterator[Broker]:
    config = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
              "sasl.enabled.mechanisms": MECHANISM, "connections.max.reauth.ms": reauth_ms}
    with start_broker(data_dir, config) as broker:
        yield broker


def set_password(broker: Broker, user: str, password: str) -> None:
    with AdminClient(bootstrap_servers=broker.bootstrap_servers_for("PLAINTEXT")) as admin:
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(user, MECHANISM, password)])


def sasl_settings(broker: Broker, user: str, password: str) -> dict[str, Any]:
    return {"bootstrap.servers": broker.bootstrap_servers_for("SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": MECHANISM,
            "sasl.username": user, "sasl.password": password}
