"""Describe/AlterUserScramCredentials (KIP-554): each rule of Kafka's ScramControlManager and
ScramImage through the codec, then confluent-kafka's AdminClient against a running broker, its
credentials checked by a SCRAM exchange and kept across a restart."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from samsa.broker.log import LogManager
from samsa.broker.scram_credentials import SCRAM_CREDENTIALS_FILE, ScramCredentialStore
from samsa.protocol import AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest
from samsa.security.scram import SCRAM_SHA_256, SCRAM_SHA_512, ScramClient, ScramServer
from tests.support.broker import start_broker

ALTER = AlterUserScramCredentialsRequest
DESCRIBE = DescribeUserScramCredentialsRequest
SHA_256, SHA_512 = 1, 2
NONE, UNSUPPORTED_SASL_MECHANISM, RESOURCE_NOT_FOUND, DUPLICATE_RESOURCE, UNACCEPTABLE_CREDENTIAL = (
    0, 33, 91, 92, 93)
TWICE = "A user credential cannot be altered twice in the same request"


def _upsert(name: str, mechanism: int = SHA_256, iterations: int = 4096, password: bytes = b"pw",
            salt: bytes = b"salt") -> Any:
    hash_name = {SHA_256: "sha256", SHA_512: "sha512"}.get(mechanism, "sha256")
    return ALTER.ScramCredentialUpsertion(
        name=name, mechanism=mechanism, iterations=iterations, salt=salt,
        salted_password=hashlib.pbkdf2_hmac(hash_name, password, salt, iterations))


def _alter(client: Any, upsertions: list[Any] = (), deletions: list[tuple[str, int]] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    response = client.call(ALTER(upsertions=list(upsertions), deletions=[
        ALTER.ScramCredentialDeletion(name=n, mechanism=m) for n, m in deletions]), 0)
    return {r.user: (r.error_code, r.error_message) for r in response.results}


def _describe(client: Any, users: list[str] | None = None) -> dict[str, Any]:
    response = client.call(DESCRIBE(users=None if users is None else [DESCRIBE.UserName(name=u) for u in users]), 0)
    assert (response.error_code, response.error_message) == (0, None)
    return {r.user: (r.error_code, r.error_message, [(c.mechanism, c.iterations) for c in r.credential_infos])
            for r in response.results}


def test_upsert_describe_delete(client: Any, log_manager: LogManager) -> None:
    assert _describe(client) == {}
    assert _alter(client, [_upsert("alice", iterations=8192), _upsert("bob", SHA_512)]) == {
        "alice": (NONE, None), "bob": (NONE, None)}
    assert _alter(client, [_upsert("alice", SHA_512)]) == {"alice": (NONE, None)}
    assert _describe(client) == {"alice": (NONE, None, [(SHA_256, 8192), (SHA_512, 4096)]),
                                 "bob": (NONE, None, [(SHA_512, 4096)])}
    assert _alter(client, deletions=[("alice", SHA_256)]) == {"alice": (NONE, None)}
    assert _alter(client, deletions=[("bob", SHA_512)]) == {"bob": (NONE, None)}
    assert _describe(client, ["alice", "bob"]) == {
        "alice": (NONE, None, [(SHA_512, 4096)]),
        "bob": (RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does not exist: bob", [])}
    # Kept in the data directory: a fresh store (a restarted broker) reads the same users.
    assert set(ScramCredentialStore(log_manager.data_dir).users()) == {"alice"}


def test_describe_names_a_user_asked_twice(client: Any) -> None:
    _alter(client, [_upsert("alice")])
    assert _describe(client, ["alice", "alice"]) == {"alice": (
        DUPLICATE_RESOURCE, "Cannot describe SCRAM credentials for the same user twice in a single request: alice",
        [])}


def test_each_refused_alteration_gets_kafkas_code_and_the_rest_applies(client: Any) -> None:
    _alter(client, [_upsert("dora")])
    results = _alter(client, [
        _upsert("ok"),
        _upsert("few", iterations=4095),
        _upsert("many", iterations=16385),
        _upsert("", iterations=4096),
        _upsert("weird", mechanism=3),
        _upsert("twice"), _upsert("twice", SHA_512),
        _upsert("dora", SHA_512),  # deleted and upserted in one request
    ], deletions=[("ghost", SHA_256), ("dora", SHA_256)])
    assert results == {
        "ok": (NONE, None),
        "few": (UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        "many": (UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        "": (UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        "weird": (UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "twice": (DUPLICATE_RESOURCE, TWICE),
        "dora": (DUPLICATE_RESOURCE, TWICE),
        "ghost": (RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
    }
    described = _describe(client)
    assert set(described) == {"dora", "ok"}
    assert described["dora"][2] == [(SHA_256, 4096)]  # refused whole: nothing of it applied


def test_a_user_refused_once_stays_refused_for_the_rest_of_the_request(client: Any) -> None:
    _alter(client, [_upsert("erin"), _upsert("fay")])
    results = _alter(client, [
        _upsert("few", iterations=100), _upsert("few"),  # the second is not looked at
        _upsert("erin"),
    ], deletions=[("fay", SHA_256), ("fay", SHA_256), ("fay", SHA_512), ("", SHA_256), ("erin", 7)])
    assert results == {
        "few": (UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        "fay": (DUPLICATE_RESOURCE, TWICE),
        "": (UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        "erin": (UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
    }
    assert _describe(client) == {"erin": (NONE, None, [(SHA_256, 4096)]), "fay": (NONE, None, [(SHA_256, 4096)])}


def test_a_corrupt_credential_file_stops_the_broker_with_its_path(tmp_path: Path) -> None:
    (tmp_path / SCRAM_CREDENTIALS_FILE).write_text('{"users": {"alice": {"SCRAM-SHA-256": {"salt": "!"}}}}')
    with pytest.raises(ValueError, match=f"{SCRAM_CREDENTIALS_FILE} is not a valid SCRAM credential file"):
        ScramCredentialStore(tmp_path)
    (tmp_path / SCRAM_CREDENTIALS_FILE).write_text(
        '{"users": {"alice": {"SCRAM-SHA-1": {"salt": "", "stored_key": "", "server_key": "", "iterations": 1}}}}')
    with pytest.raises(ValueError, match="unknown SCRAM mechanism 'SCRAM-SHA-1'"):
        ScramCredentialStore(tmp_path)


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def _described(admin: AdminClient) -> dict[str, list[tuple[str, int]]]:
    found = admin.describe_user_scram_credentials().result(timeout=30)
    return {user: sorted((info.mechanism.name, info.iterations) for info in d.scram_credential_infos)
            for user, d in found.items()}


def test_confluent_kafka_admin_manages_users_whose_credentials_authenticate(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with start_broker(data) as broker:
        admin = _admin(broker.bootstrap_servers)
        futures = admin.alter_user_scram_credentials([
            UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192),
                                         b"alice-secret", b"alice-salt"),
            UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                         b"bob-secret"),
        ])
        for future in futures.values():
            future.result(timeout=30)
        assert _described(admin) == {"alice": [("SCRAM_SHA_256", 8192)], "bob": [("SCRAM_SHA_512", 4096)]}
        with pytest.raises(KafkaException, match="Too few iterations"):
            admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
                "carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000), b"x")])["carol"].result(timeout=30)
    # librdkafka salted the passwords; the stored keys let exactly those passwords in.
    store = ScramCredentialStore(data)
    for user, mechanism, password in (("alice", SCRAM_SHA_256, "alice-secret"), ("bob", SCRAM_SHA_512, "bob-secret")):
        server = ScramServer(mechanism, lambda name, m=mechanism: store.get(name, m))
        client = ScramClient(mechanism, user, password)
        client.verify_server_final(server.server_final(client.final_message(server.server_first(client.first_message()))))
        assert server.authenticated
    assert store.get("alice", SCRAM_SHA_256).salt == b"alice-salt"  # type: ignore[union-attr]
    with start_broker(data) as broker:  # restarted: the users are still there
        admin = _admin(broker.bootstrap_servers)
        assert _described(admin) == {"alice": [("SCRAM_SHA_256", 8192)], "bob": [("SCRAM_SHA_512", 4096)]}
        admin.alter_user_scram_credentials([UserScramCredentialDeletion("bob", ScramMechanism.SCRAM_SHA_512)])[
            "bob"].result(timeout=30)
        with pytest.raises(KafkaException, match="does not exist: bob"):
            admin.describe_user_scram_credentials(["bob"])["bob"].result(timeout=30)
